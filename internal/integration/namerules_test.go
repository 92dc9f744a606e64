package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leaseside/leaseside/internal/attack"
	"github.com/leaseside/leaseside/ipc"
)

// Name rules on a real three-grantor TLS cluster: a sidecar acquires
// within its rules and is refused outside them, through its sidecar, with
// name_not_allowed (a watch of such a name gets watch_refused); a SIGHUP
// with a bad file keeps the rules in force and logs the line; one with a
// good file puts the new rules in force on every grantor. A bad file at
// start stops a grantor with exit 1, naming the line.
func TestTrustNameRules(t *testing.T) {
	t.Parallel()
	p := newClusterPKI(t)
	c, rules, writeRules := newRulesCluster(t, p, "web-*  acquire  web/\nweb-*  read  shared/\ngrantor/g[1-3]  join\n")
	c.startAll()
	for _, n := range c.nodes {
		n.proc.waitLine(t, 0, "name rules in force", "rules=3", "join_rules=1")
	}
	leader := c.waitOffice(c.marks0())
	s := startSidecar(t, "sidecar web-1", nil, append(p.cert("sidecar", "web-1", false), "--grantors", c.rpcAddrs())...)
	client := &ipc.Client{Socket: s.socket}
	t.Cleanup(func() { client.Close() })
	events := make(chan *ipc.Event, 64)
	client.Notify(events)

	acquireCLI(t, s, "web/a", "--ttl", "10s", "--detached")
	refused := func(name string) {
		t.Helper()
		_, err := client.Acquire(tctx(t), name, ipc.AcquireOptions{TTL: 10e9})
		var ie *ipc.Error
		if !errors.As(err, &ie) || ie.Code != ipc.CodeNameNotAllowed || !strings.Contains(ie.Message, "web-1") || !strings.Contains(ie.Message, name) {
			t.Fatalf("acquire %s: %v, want name_not_allowed naming web-1 and the name", name, err)
		}
		r := cli(t, s.socket, "acquire", name, "--detached")
		if r.code != 1 || !strings.Contains(r.stderr, "name rules") || !strings.Contains(r.stderr, name) {
			t.Fatalf("leaseside acquire %s: exit %d, stderr %q; want exit 1 saying the name rules refuse it", name, r.code, r.stderr)
		}
	}
	refused("db/primary")
	refused("shared/config") // read only
	if _, _, err := client.CheckToken(tctx(t), "shared/config", "1"); err != nil {
		t.Fatalf("check_token on a read prefix: %v", err)
	}
	if err := client.WatchHolders(tctx(t), "db/primary"); err != nil {
		t.Fatal(err)
	}
	for refusedWatch := false; !refusedWatch; {
		select {
		case ev := <-events:
			refusedWatch = ev.Event == ipc.EventWatchRefused && ev.Lease == "db/primary" && ev.Reason == ipc.CodeNameNotAllowed
		case <-tctx(t).Done():
			t.Fatal("no watch_refused event for db/primary")
		}
	}

	// The attack program, straight to the leader with a certificate the
	// rules cover: every trick it knows gets nothing outside them.
	escapes, err := attack.NameEscapes(tctx(t), grpcClient(t, c.nodes[leader.node].rpcAddr(), p.creds("sidecar", "web-2")),
		"attacker-session", "web/", "db/primary")
	if err != nil || len(escapes) > 0 {
		t.Fatalf("name rule escapes: %q (%v)", escapes, err)
	}

	// A bad file on reload: the rules in force stay, the line is named.
	marks := c.marks()
	writeRules("web-*  acquire  web/ db/\nweb-*  write  shared/\n")
	hupAll(t, c)
	for i, n := range c.nodes {
		n.proc.waitLine(t, marks[i], "name rules not reloaded", rules+":2:", `access \"write\"`)
	}
	refused("db/primary")

	// A good one: in force on every grantor.
	marks = c.marks()
	writeRules("web-*  acquire  web/ db/\n")
	hupAll(t, c)
	for i, n := range c.nodes {
		n.proc.waitLine(t, marks[i], "name rules in force", "rules=1")
	}
	acquireCLI(t, s, "db/primary", "--ttl", "10s", "--detached")
	refused("shared/config") // no longer even read

	writeRules("web-*  acquire  web/\n\nweb-[  read  x/\n")
	runFails(t, []string{rules + ":3:", "not a valid glob"}, append([]string{"grantor", "--name-rules", rules}, c.nodes[0].args()[1:]...)...)
}

// hupAll sends every grantor of c SIGHUP.
func hupAll(t *testing.T, c *cluster) {
	t.Helper()
	for _, n := range c.nodes {
		if err := n.proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
}

// newRulesCluster makes (without starting it) a loopback cluster of three
// TLS grantors, each with a grantor certificate from p and --name-rules
// naming one rules file (rules), written with text; writeRules rewrites it (send
// the grantors SIGHUP to reload it).
func newRulesCluster(t *testing.T, p *clusterPKI, text string) (c *cluster, rules string, writeRules func(string)) {
	t.Helper()
	rules = filepath.Join(t.TempDir(), "rules")
	writeRules = func(text string) {
		t.Helper()
		if err := os.WriteFile(rules, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeRules(text)
	c = newLoopbackCluster(t, 3)
	for _, n := range c.nodes {
		p.cert("grantor", n.id, false)
		n.tlsDir, n.keyFile = p.dir, p.key
		n.extra = []string{"--name-rules", rules}
	}
	return c, rules, writeRules
}
