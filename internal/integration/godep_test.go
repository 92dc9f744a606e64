package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The docs' way to depend on the Go client before the module is
// published works as written: a new module next to a checkout runs the
// block's commands (offline: GOPROXY=off and GOSUMDB=off, every
// dependency from the module cache, whose hashes were checked against
// leaseside's go.sum when make deps downloaded them; the checksum database
// is not reachable offline, and tidy asks it for a new module's go.sum)
// and then builds a program that imports ipc.
func TestGoClientReplaceDirective(t *testing.T) {
	t.Parallel()
	block := docBlock(t, "docs/clients.md", "### Depending on the Go client before it is published", "sh")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(root, filepath.Join(dir, "leaseside")); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(dir, "app")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	main := "package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/leaseside/leaseside/ipc\"\n)\n\nfunc main() { fmt.Println(ipc.ProtocolVersion) }\n"
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOWORK=off")
	run := func(script string) string {
		t.Helper()
		cmd := exec.Command("sh", "-ec", script)
		cmd.Dir, cmd.Env = app, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	run("go mod init example.com/app")
	run(block)
	if out := strings.TrimSpace(run("go run .")); out == "" {
		t.Errorf("the program printed nothing")
	}
}
