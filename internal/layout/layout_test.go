package layout

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/leaseside/leaseside"

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ps []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// Every package has exactly one package doc comment.
func TestOnePackageDocEach(t *testing.T) {
	for _, p := range listPackages(t) {
		docs := 0
		for _, f := range p.GoFiles {
			af, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if af.Doc != nil {
				docs++
			}
		}
		if docs != 1 {
			t.Errorf("%s has %d package doc comments, want 1", p.ImportPath, docs)
		}
	}
}

// The dependency arrows of docs/design.md section 3: which project packages
// each package may import. Packages not listed may import nothing of the
// project but what a rule allows.
func TestDependencyDirection(t *testing.T) {
	allowed := map[string][]string{
		"ipc":                        {"internal/safefs"},
		"clockwatch":                 {},
		"fence":                      {},
		"fence/pgfence":              {"fence"},
		"fence/redisfence":           {"fence", "fence/redisfence/library"},
		"fence/redisfence/library":   {},
		"grantor/grantorpb":          {},
		"grantor/gossip":             {"internal/connlimit"},
		"grantor/pki":                {},
		"grantor":                    {"clockwatch", "grantor/grantorpb", "grantor/gossip", "grantor/pki", "internal/connlimit", "internal/safefs"},
		"daemon":                     {"ipc", "clockwatch", "grantor/grantorpb", "grantor/gossip", "internal/safefs"},
		"cmd/leaseside/cli":          {"daemon", "grantor", "grantor/gossip", "grantor/pki", "ipc", "clockwatch", "fence", "grantor/grantorpb", "internal/bench", "internal/bench/hosts", "internal/safefs", "internal/groupwrite", "internal/gctune", "fence/pgfence", "fence/redisfence/library"},
		"cmd/leaseside":              {"cmd/leaseside/cli"},
		"internal/layout":            {},
		"internal/integration":       {},
		"internal/bench":             {"grantor/grantorpb", "grantor/pki"},
		"internal/bench/hosts":       {"daemon", "ipc", "clockwatch", "internal/bench"},
		"internal/netlab":            {},
		"internal/stores":            {},
		"internal/stranger":          {},
		"internal/attack":            {"grantor/grantorpb", "grantor/gossip", "clockwatch"},
		"internal/connlimit":         {},
		"internal/safefs":            {},
		"internal/groupwrite":        {},
		"internal/gctune":            {},
		"internal/chaos":             {"internal/netlab", "internal/chaos/workload", "fence", "ipc", "clockwatch", "fence/pgfence", "internal/stores"},
		"internal/chaos/workload":    {"ipc", "clockwatch"},
		"internal/chaos/chaosclient": {"internal/chaos/workload"},
		"packaging":                  {},
		"packaging/gendocs":          {"cmd/leaseside/cli"},
	}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		ok, known := allowed[rel]
		if !known {
			t.Errorf("package %s has no dependency rule here: add one (docs/design.md section 3)", rel)
			continue
		}
		may := map[string]bool{}
		for _, a := range ok {
			may[a] = true
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if !may[dep] {
				t.Errorf("%s imports %s: not allowed by docs/design.md section 3", rel, dep)
			}
		}
	}
}
