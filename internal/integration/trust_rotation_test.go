package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/ipc"
)

// Certificates (a whole CA replacement) and the gossip key are rotated on
// three grantors and a sidecar by SIGHUP, step by step as packaging/README.md
// says, while the sidecar holds a lease and renews it. After every step
// the holder's token is still valid and no renewal has failed. A reload
// keeps the connections already up, so once the rotation is done every
// grantor is restarted in turn: every connection (raft between the
// grantors, gRPC from the sidecar) is then made again with the new CA,
// certificates and key only, and still nothing is lost. Afterwards the
// old CA's certificates and the old key are refused, the new ones work.
func TestTrustRotation(t *testing.T) {
	t.Parallel()
	p := newClusterPKI(t)
	c := newTLSCluster(t, p)
	s := startSidecar(t, "sidecar s1", nil, append(p.cert("sidecar", "s1", false), "--join", c.gossipAddrs(), "--gossip-key-file", p.key)...)
	ctx := tctx(t)
	const name = "trust/rotated"
	// A term long enough for a leader handover on a busy machine; a wait,
	// since the sidecar finds the grantors by gossip, which may take it a
	// while on a loaded machine ("none found by gossip yet").
	held, err := s.client(t).Acquire(ctx, name, ipc.AcquireOptions{TTL: 8 * time.Second, Wait: timeout / 2})
	if err != nil {
		t.Fatal(err)
	}
	procs := []*process{s.process}
	for _, n := range c.nodes {
		procs = append(procs, n.proc)
	}
	// intact fails the test unless the lease was never lost and its token
	// is valid now (and, with renewals, unless no renewal ever failed but
	// for a leader change: a loaded machine's leader may step down, and
	// the grantor it was then refuses a keepalive as not the leader).
	intact := func(step string, renewals bool) {
		t.Helper()
		if lost := s.lost(); len(lost) > 0 {
			t.Fatalf("%s: lost a lease: %+v", step, lost[0].v)
		}
		for _, l := range s.out.all() {
			failed := strings.Contains(l.v, "keepalive failed") && !strings.Contains(l.v, "code = FailedPrecondition") ||
				strings.Contains(l.v, "keepalive unanswered")
			if renewals && failed {
				t.Fatalf("%s: a renewal failed: %s", step, l.v)
			}
		}
		cli(t, s.socket, "check", name, "--token", held.Token).must(t, 0)
	}
	// reload sends SIGHUP to every process and waits until each reloaded
	// without an error, and the lease was renewed since.
	reload := func(step string) {
		t.Helper()
		evMark := s.events.mark()
		for _, pr := range procs {
			mark := pr.out.mark()
			if err := pr.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			pr.waitMatch(t, mark, "reload done or failed", func(l string) bool {
				return strings.Contains(l, "reload done") || strings.Contains(l, "not reloaded")
			})
			for _, l := range pr.out.all()[mark:] {
				if strings.Contains(l.v, "not reloaded") {
					t.Fatalf("%s: %s: %s", step, pr.name, l.v)
				}
			}
		}
		s.waitEvent(t, evMark, ipc.EventRenewed, name)
		intact(step, true)
		t.Logf("%s: reloaded everywhere, lease renewed, token %s valid", step, held.Token)
	}
	write := func(path, body string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	// An operator of the old CA, for the end.
	p.cert("operator", "op", false)
	oldOp := p.dir

	// The CA: trust both, move every certificate to the new one, drop
	// the old one.
	caPath := filepath.Join(p.dir, "ca.pem")
	oldCA := read(caPath)
	newCA := newClusterPKI(t)
	write(caPath, oldCA+read(filepath.Join(newCA.dir, "ca.pem")), 0o644)
	reload("CA step 1: trust both")
	ids := map[string]string{"s1": "sidecar"}
	for _, n := range c.nodes {
		ids[n.id] = "grantor"
	}
	for id, role := range ids {
		newCA.cert(role, id, false)
		for _, suffix := range []string{".pem", "-key.pem"} {
			write(filepath.Join(p.dir, role+"-"+id+suffix), read(filepath.Join(newCA.dir, role+"-"+id+suffix)), 0o600)
		}
	}
	reload("CA step 2: certificates of the new CA")
	write(caPath, read(filepath.Join(newCA.dir, "ca.pem")), 0o644)
	reload("CA step 3: the old CA dropped")

	// The gossip key: add, make primary, drop the old one.
	oldKey := strings.TrimSpace(read(p.key))
	newKey := strings.TrimSpace(p.run("tls", "gossip-key"))
	write(p.key, oldKey+"\n"+newKey+"\n", 0o600)
	reload("gossip step 1: add the new key")
	write(p.key, newKey+"\n"+oldKey+"\n", 0o600)
	reload("gossip step 2: the new key first")
	write(p.key, newKey+"\n", 0o600)
	reload("gossip step 3: the old key dropped")

	// Every connection made again, with the new CA and key only.
	members := make([]grantorpb.GrantorClient, len(c.nodes))
	for i, n := range c.nodes {
		members[i] = grpcClient(t, n.rpcAddr(), newCA.creds("operator", "op"))
	}
	for i := range c.nodes {
		restartHeard(t, c, i, s, name, members)
		intact("restarted "+c.nodes[i].id, false)
	}

	// The old CA's certificates are refused, the new ones taken: two
	// operators that trust both CAs, one with a certificate of each.
	bundle := filepath.Join(t.TempDir(), "both.pem")
	write(bundle, oldCA+read(filepath.Join(newCA.dir, "ca.pem")), 0o644)
	for what, dir := range map[string]string{"old": oldOp, "new": newCA.dir} {
		conf, err := pki.NewConfigurator(pki.Files{CA: bundle, Cert: filepath.Join(dir, "operator-op.pem"), Key: filepath.Join(dir, "operator-op-key.pem")})
		if err != nil {
			t.Fatal(err)
		}
		ctx5, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = grpcClient(t, c.nodes[0].rpcAddr(), conf.ClientCredentials()).Members(ctx5, &grantorpb.MembersRequest{})
		cancel()
		switch {
		case what == "old" && status.Code(err) != codes.Unavailable:
			t.Errorf("an operator of the old CA after the rotation: %v, want Unavailable", err)
		case what == "new" && err != nil:
			t.Errorf("an operator of the new CA after the rotation: %v", err)
		}
	}
	oldKeyFile := filepath.Join(t.TempDir(), "old.key")
	write(oldKeyFile, oldKey+"\n", 0o600)
	out, err := exec.Command(bin, "daemon", "--socket", tempSocket(t), "--join", c.gossipAddrs(0), "--gossip-key-file", oldKeyFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "gossip key is wrong or missing") {
		t.Errorf("a sidecar with the old gossip key only: %v, want refused\n%s", err, out)
	}
	s2 := startSidecar(t, "sidecar s2 (new CA and key)", nil, append(newCA.cert("sidecar", "s2", false),
		"--join", c.gossipAddrs(), "--gossip-key-file", p.key)...)
	acquireCLI(t, s2, "trust/after-rotation", "--ttl", "5s", "--detached")
}

// restartHeard stops grantor i (SIGTERM: a leader hands over first) and
// starts it again, gossiping with the others, then waits until the
// leader has heard from it over raft since it started, looking after
// each renewal of sidecar s's lease name (each one is a raft commit) at
// the leader's Members (members: a client of every grantor).
func restartHeard(t *testing.T, c *cluster, i int, s *sidecar, name string, members []grantorpb.GrantorClient) {
	t.Helper()
	n := c.nodes[i]
	n.join = nil
	for _, j := range c.others(i) {
		n.join = append(n.join, c.nodes[j].gossipAddr())
	}
	c.stop(i)
	started := boottime()
	c.start(i)
	c.waitReady(i)
	ctx := tctx(t)
	for ev := s.events.mark(); ; ev++ {
		if ctx.Err() != nil {
			t.Fatalf("the leader did not hear from the restarted %s within %v", n.id, timeout)
		}
		ev, _ = s.waitEvent(t, ev, ipc.EventRenewed, name)
		for _, m := range members {
			ctx5, cancel := context.WithTimeout(ctx, 5*time.Second)
			r, err := m.Members(ctx5, &grantorpb.MembersRequest{})
			cancel()
			if err != nil || r.AnsweredBy != r.LeaderId {
				continue
			}
			if r.LeaderId == n.id {
				t.Logf("%s restarted and leads", n.id)
				return
			}
			for _, mb := range r.Members {
				if mb.NodeId == n.id && mb.LastContactMs >= 0 && time.Duration(mb.LastContactMs)*time.Millisecond < boottime().Sub(started) {
					t.Logf("%s restarted; leader %s heard from it %dms ago", n.id, r.LeaderId, mb.LastContactMs)
					return
				}
			}
		}
	}
}
