package packaging

import (
	"bufio"
	"compress/gzip"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The repository's LICENSE is the Apache License 2.0, as the copyright
// file says of leaseside's own code.
func TestLicenseIsApache2(t *testing.T) {
	b, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "END OF TERMS AND CONDITIONS"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("LICENSE lacks %q: not the Apache License 2.0 text", want)
		}
	}
	if common, err := os.ReadFile("/usr/share/common-licenses/Apache-2.0"); err == nil && string(common) != string(b) {
		t.Errorf("LICENSE differs from /usr/share/common-licenses/Apache-2.0")
	}
}

// copyrightFile is what the test reads of the Debian copyright file
// (copyright-format 1.0): the Files: patterns with their License: short
// names, and the standalone License: paragraphs.
type copyrightFile struct {
	files      map[string]string // pattern -> license expression
	standalone map[string]bool   // license short names with their text
}

func readCopyright(t *testing.T, path string) copyrightFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := copyrightFile{files: map[string]string{}, standalone: map[string]bool{}}
	var para []string // field lines of the paragraph, continuations joined
	flush := func() {
		fields := map[string]string{}
		for _, l := range para {
			if k, v, ok := strings.Cut(l, ":"); ok {
				fields[k] = strings.TrimSpace(v)
			}
		}
		switch files, hasFiles := fields["Files"]; {
		case hasFiles:
			for _, p := range strings.Fields(files) {
				c.files[p] = fields["License"]
			}
		case fields["License"] != "" && fields["Format"] == "":
			c.standalone[fields["License"]] = true
		}
		para = nil
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.TrimSpace(l) == "":
			flush()
		case strings.HasPrefix(l, " ") && len(para) > 0:
			// A continuation: of Files: and Copyright: lists a word list,
			// of License: the license text (only its first line is the name).
			if k, _, _ := strings.Cut(para[len(para)-1], ":"); k == "Files" {
				para[len(para)-1] += " " + strings.TrimSpace(l)
			}
		default:
			para = append(para, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return c
}

// The copyright file names every Go module linked into /usr/bin/leaseside
// (and the standard library), each with a license whose text it gives or
// points to, and names no module that is not linked: a dependency added or
// dropped fails here until packaging/copyright says so (its license and
// copyright holders are in the module's LICENSE file, in
// `go env GOMODCACHE`).
func TestCopyrightNamesLinkedModules(t *testing.T) {
	c := readCopyright(t, "copyright")
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}", "../cmd/leaseside").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	linked := map[string]bool{"std": true}
	for _, m := range strings.Fields(string(out)) {
		linked[m] = true
	}
	listed := map[string]bool{}
	for p := range c.files {
		if p != "*" {
			listed[strings.TrimSuffix(p, "/*")] = true
		}
	}
	for _, m := range slices.Sorted(maps.Keys(linked)) {
		if !listed[m] {
			t.Errorf("packaging/copyright does not name %s, which is linked into leaseside: add a Files: %s/* line with its copyright and license", m, m)
		}
	}
	for _, m := range slices.Sorted(maps.Keys(listed)) {
		if !linked[m] {
			t.Errorf("packaging/copyright names %s, which is not linked into leaseside (any more): remove it", m)
		}
	}
	if c.files["*"] != "Apache-2.0" {
		t.Errorf("Files: * (leaseside's own code) has license %q, want Apache-2.0", c.files["*"])
	}
	for p, lic := range c.files {
		if lic == "" {
			t.Errorf("Files: %s has no License:", p)
		}
		for _, name := range regexp.MustCompile(`\s+(?:and|or)\s+`).Split(lic, -1) {
			if !c.standalone[name] {
				t.Errorf("Files: %s: license %q has no standalone License: paragraph with its text", p, name)
			}
		}
	}
}

// newestChangelogVersion is the first semver of changelog.yml: the newest
// release, which the packages' changelogs must name.
func newestChangelogVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("changelog.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^- semver: *(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("changelog.yml: no entry (- semver: X.Y.Z)")
	}
	return string(m[1])
}

// checkDebChangelog reads the .deb's changelog.Debian.gz with
// dpkg-parsechangelog: it must parse, and its newest entry must be the
// newest of changelog.yml, for the package leaseside.
func checkDebChangelog(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	plain := filepath.Join(t.TempDir(), "changelog")
	if err := os.WriteFile(plain, text, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("dpkg-parsechangelog"); err != nil {
		t.Skip("dpkg-parsechangelog not installed")
	}
	for field, want := range map[string]string{"Source": "leaseside", "Version": newestChangelogVersion(t)} {
		if got := strings.TrimSpace(run(t, "dpkg-parsechangelog", "-l", plain, "-S", field)); got != want {
			t.Errorf("changelog.Debian.gz: %s %q, want %q\n%s", field, got, want, text)
		}
	}
}
