package integration

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Issue 21 on real processes, as docs/operations.md tells retiring a
// grantor: an operator removes a running grantor (it stops by itself,
// exit 0), drops its join rule from every grantor's name rules and
// reloads them. Started again on its data dir, the retired grantor is
// not added back: it stops by itself with exit status 78 (ExitRetired), naming the
// leader and the voters that answered and what to do, instead of waiting
// (and campaigning) for good; the others keep granting.
func TestRetiredGrantorStartedAgainExits78(t *testing.T) {
	p := newClusterPKI(t)
	c, _, writeRules := newRulesCluster(t, p, "*  acquire  *\n*/*  acquire  *\ngrantor/g[1-3]  join\n")
	c.startAll()
	leader := c.waitOffice(c.marks0()).node
	ri := c.others(leader)[0]
	r := c.nodes[ri]
	op := grpcClient(t, c.nodes[leader].rpcAddr(), p.creds("operator", "op"))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := op.RemoveServer(ctx, &grantorpb.RemoveServerRequest{NodeId: r.id}); err != nil {
		t.Fatalf("RemoveServer %s: %v", r.id, err)
	}
	if code := r.proc.waitExit(t); code != 0 {
		t.Fatalf("the removed grantor exited %d, want 0", code)
	}
	r.alive = false

	text := "*  acquire  *\n*/*  acquire  *\n"
	for _, i := range c.others(ri) {
		text += fmt.Sprintf("grantor/%s  join\n", c.nodes[i].id)
	}
	writeRules(text)
	for _, i := range c.others(ri) {
		n := c.nodes[i]
		mark := n.proc.out.mark()
		if err := n.proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		n.proc.waitLine(t, mark, "name rules in force", "join_rules=2")
	}

	// Started again, it finds the others by gossip as a deployment's
	// grantors do, through --join seeds (the first node of the harness
	// has none: it is everyone's seed, and without seeds nothing would
	// tell it where the voters it asks are: its log's entries are
	// applied only once a leader says they are committed).
	r.join = []string{c.nodes[leader].gossipAddr()}
	c.start(ri)
	code := r.proc.waitExit(t)
	r.alive = false
	_, line := r.proc.waitLine(t, 0, "retired: remove its data dir, or add its join rule back and restart")
	t.Logf("%s exited %d: %s", r.id, code, line.v)
	if code != 78 {
		t.Fatalf("the retired grantor exited %d, want 78:\n%s", code, r.proc.tail(30))
	}
	named := false
	for _, i := range c.others(ri) {
		named = named || strings.Contains(line.v, "leader "+c.nodes[i].id+" and voters")
	}
	if !named {
		t.Errorf("the line does not name the leader: %s", line.v)
	}
	if in, _ := memberOf(t, op, r.id); in {
		t.Fatalf("the retired grantor is a member again")
	}
	s := startSidecar(t, "sidecar s1", nil, append(p.cert("sidecar", "s1", false), "--grantors", c.rpcAddrs(c.others(ri)...))...)
	acquireCLI(t, s, "retired/after", "--ttl", "5s", "--detached")
}
