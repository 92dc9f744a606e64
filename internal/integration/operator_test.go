package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// bare runs the leaseside CLI with args as given (no --socket) and waits.
func bare(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("leaseside %v: %v", args, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// leasesJSON parses `leases --json` output by lease name.
func leasesJSON(t *testing.T, r result) map[string]ipc.ClusterLease {
	t.Helper()
	var out struct {
		Leases []ipc.ClusterLease `json:"leases"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("leases --json: %v: %q", err, r.stdout)
	}
	m := map[string]ipc.ClusterLease{}
	for _, l := range out.Leases {
		m[l.Lease] = l
	}
	return m
}

// `leaseside leases` and `leaseside revoke` on a real three-grantor TLS
// cluster with two sidecars (issue 24 item 5). An operator's certificate
// lists every lease (holder identity, token, remaining term, waiters), and
// so does root through its sidecar; bad revokes get their own exit codes
// and messages (nothing holds the name, wrong token: 3; a sidecar's
// certificate: 1, refused by the grantors; no --grantors: 2). A revoke of
// a `run` lease on the other host: that sidecar reports lost with reason
// revoked, run stops its command and exits 79, the leader's audit log
// names the operator, and the name goes to a waiter, with a newer token,
// only after the delay.
func TestOperatorLeasesAndRevoke(t *testing.T) {
	t.Parallel()
	p := newClusterPKI(t)
	c := newLoopbackCluster(t, 3)
	for _, n := range c.nodes {
		p.cert("grantor", n.id, false)
		n.tlsDir, n.keyFile = p.dir, p.key
	}
	c.startAll()
	c.waitOffice(c.marks0())
	addrs := c.rpcAddrs()
	s1 := startSidecar(t, "sidecar web-1", nil, append(p.cert("sidecar", "web-1", false), "--grantors", addrs)...)
	s2 := startSidecar(t, "sidecar web-2", nil, append(p.cert("sidecar", "web-2", false), "--grantors", addrs)...)
	op := append([]string{"--grantors", addrs}, p.cert("operator", "alice", false)...)
	side := append([]string{"--grantors", addrs}, tlsArgs(p.dir, "sidecar", "web-2")...)

	// web-1 runs a command under jobs/a; web-2 holds jobs/b.
	run := startProcess(t, "run jobs/a", exec.Command(bin, "run", "--socket", s1.socket, "jobs/a", "--ttl", "6s", "--lock-delay", "2s", "--", "sleep", "600"))
	_, acquired := s1.waitEvent(t, 0, ipc.EventAcquired, "jobs/a")
	tokenA := acquired.v.Token
	gB := acquireCLI(t, s2, "jobs/b", "--ttl", "10s", "--detached")

	// The operator's view, and root's through its sidecar.
	for _, r := range []result{bare(t, append([]string{"leases", "--json", "--prefix", "jobs/"}, op...)...), cli(t, s2.socket, "leases", "--json")} {
		r.must(t, 0)
		ls := leasesJSON(t, r)
		a, b := ls["jobs/a"], ls["jobs/b"]
		if len(a.Holders) != 1 || a.Holders[0].Token != tokenA || a.Holders[0].Holder != "web-1" || a.Holders[0].TTLMs != 6000 ||
			a.Holders[0].RemainingMs <= 0 || a.Holders[0].RemainingMs > 7000 || a.Limit != 1 {
			t.Fatalf("jobs/a listed as %+v, want web-1's token %s with a term of 6s", a, tokenA)
		}
		if len(b.Holders) != 1 || b.Holders[0].Token != gB.Token || b.Holders[0].Holder != "web-2" {
			t.Fatalf("jobs/b listed as %+v, want web-2's token %s", b, gB.Token)
		}
	}
	r := bare(t, append([]string{"leases", "--prefix", "jobs/b"}, op...)...).must(t, 0)
	if !strings.Contains(r.stdout, "jobs/b") || strings.Contains(r.stdout, "jobs/a") || !strings.Contains(r.stdout, "web-2") {
		t.Fatalf("leases --prefix jobs/b:\n%s", r.stdout)
	}

	// Bad revokes.
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown name", append([]string{"revoke", "jobs/none"}, op...), 3, `nothing holds "jobs/none"`},
		{"wrong token", append([]string{"revoke", "jobs/a", "--token", "999999"}, op...), 3, `"jobs/a" is not held with token 999999; its grants are [` + tokenA + `]`},
		{"a sidecar's certificate", append([]string{"revoke", "jobs/a"}, side...), 1, "a sidecar certificate may not call Revoke"},
		{"no --grantors", []string{"revoke", "jobs/a"}, 2, "revoke needs --grantors"},
		{"bad name", append([]string{"revoke", "jobs/../x"}, op...), 2, `lease name "jobs/../x" has a ".." segment`},
	} {
		r := bare(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d saying %q", tc.name, r.code, r.stderr, tc.code, tc.want)
		}
	}
	if r := cli(t, s1.socket, "check", "jobs/a", "--token", tokenA); r.code != 0 {
		t.Fatalf("a refused revoke touched jobs/a: check exit %d %s", r.code, r.stderr)
	}

	// A waiter on web-2, then the revoke.
	waiter := startProcess(t, "acquire jobs/a --wait", exec.Command(bin, "acquire", "--socket", s2.socket, "jobs/a", "--ttl", "10s", "--detached", "--wait", "1m", "--json"))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Asked again until it shows: each ask is a process and a round trip.
	for ls := map[string]ipc.ClusterLease{}; ls["jobs/a"].Waiters != 1; {
		if ctx.Err() != nil {
			t.Fatalf("the waiter never showed in leases: %+v", ls)
		}
		ls = leasesJSON(t, bare(t, append([]string{"leases", "--json", "--prefix", "jobs/a"}, op...)...).must(t, 0))
	}
	marks := c.marks()
	r = bare(t, append([]string{"revoke", "jobs/a"}, op...)...).must(t, 0)
	if !strings.Contains(r.stdout, "revoked jobs/a token "+tokenA) || !strings.Contains(r.stdout, "8s") {
		t.Fatalf("revoke said %q, want the token and a delay of 8s (term 6s + lock-delay 2s)", r.stdout)
	}
	_, lost := s1.waitEvent(t, 0, ipc.EventLost, "jobs/a")
	if lost.v.Reason != ipc.ReasonRevoked {
		t.Fatalf("web-1 reported lost with reason %q, want %q", lost.v.Reason, ipc.ReasonRevoked)
	}
	if code := run.waitExit(t); code != 79 {
		t.Fatalf("run exited %d after the revoke, want 79", code)
	}
	leader := c.currentLeader()
	c.nodes[leader.node].proc.waitLine(t, marks[leader.node], "event=operator_revoke", "role=operator", "name=alice", "lease=jobs/a", "token="+tokenA, "holder=web-1")

	if code := waiter.waitExit(t); code != 0 {
		t.Fatalf("the waiter exited %d; output:\n%s", code, waiter.tail(10))
	}
	var g ipc.Grant
	var text strings.Builder
	for _, l := range waiter.out.all() {
		text.WriteString(l.v)
	}
	if err := json.Unmarshal([]byte(text.String()), &g); err != nil {
		t.Fatalf("the waiter's acquire --json: %v: %q", err, text.String())
	}
	// The rule: not before the holder's last deadline plus its lock-delay.
	_, granted := s2.waitEvent(t, 0, ipc.EventAcquired, "jobs/a")
	if free := s1.lastDeadline("jobs/a", tokenA, 0).Add(2 * time.Second); granted.at.Before(free) {
		t.Fatalf("jobs/a went to web-2 at %v, before web-1's deadline plus the lock-delay (%v)", granted.at, free)
	}
	newTok, _ := strconv.ParseUint(g.Token, 10, 64)
	oldTok, _ := strconv.ParseUint(tokenA, 10, 64)
	if newTok <= oldTok {
		t.Fatalf("the waiter got token %q, want one above the revoked %s", g.Token, tokenA)
	}
	if len(s2.lost()) != 0 {
		t.Fatalf("web-2 lost leases: %v", s2.lost())
	}
}
