package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// Rule (SECURITY.md, sessions at the grantor): a session belongs to the
// identity that uses it first, so a session id this sidecar has not used
// yet must not be computable from the ones it has: its base id is in its
// log ("leaseside daemon ready") and every session it uses is in the
// grantors' audit trail. Before, the session of term d was BASE-dms: a
// holder of another sidecar certificate who saw one line opened BASE-20000ms
// first, and every acquire of 20 s on the host was refused (red team,
// issue 21, on real processes). Each id still starts with the base, which
// hideSession replaces in what other local users are told, and fits the
// grantors' 64 bytes at the longest term.
func TestUnusedSessionsCannotBeComputedFromTheBase(t *testing.T) {
	a, err := newGrantorConn(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newGrantorConn(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.session = a.session
	for _, ttl := range []time.Duration{time.Second, 20 * time.Second, 24 * time.Hour} {
		sa, sb := a.sessionFor(ttl).id, b.sessionFor(ttl).id
		if sa == sb {
			t.Errorf("two daemons of base %s both use %s for term %v: it is computable from the base", a.session, sa, ttl)
		}
		if !strings.HasPrefix(sa, a.session) || len(sa) > 64 {
			t.Errorf("session %q (%d bytes) of term %v: want the base %s first, at most 64 bytes", sa, len(sa), ttl, a.session)
		}
		if again := a.sessionFor(ttl).id; again != sa {
			t.Errorf("term %v: session %s, then %s", ttl, sa, again)
		}
	}
}

// Review of 2026-12-03 (lane review, finding S1, on 2a34ead): a session's
// id is random until it is used, but then it is in the grantors' audit
// trail, and the grantors close a session that holds nothing one term
// after its last use; another sidecar's certificate could then open the
// id first, and every later acquire of that term on this host was refused
// permission_denied until a restart. An acquire refused so opens a new
// session of a new random id, and goes through.
func TestAcquireInASessionAnotherIdentityTookOpensANewOne(t *testing.T) {
	r := newRig(t)
	opts := ipc.AcquireOptions{TTL: 20 * time.Second, Owner: ipc.OwnerDetached}
	if _, err := r.c.Acquire(ctxT(t), "squat/a", opts); err != nil {
		t.Fatal(err)
	}
	first := (<-r.g.acquires).GetId().GetSession()
	r.g.set(func() { r.g.taken = map[string]bool{first: true} })
	if _, err := r.c.Acquire(ctxT(t), "squat/b", opts); err != nil {
		t.Fatalf("an acquire of term 20s after another identity took the session %s: %v", first, err)
	}
	var sessions []string
	for len(r.g.acquires) > 0 {
		sessions = append(sessions, (<-r.g.acquires).GetId().GetSession())
	}
	if len(sessions) != 2 || sessions[0] != first || sessions[1] == first || !strings.HasPrefix(sessions[1], strings.TrimSuffix(first, first[strings.LastIndexByte(first, '-'):])) {
		t.Fatalf("acquires sent under sessions %v after %s was taken: want one refused in it, then one in a new session of the same term", sessions, first)
	}
}

// Lane review of 2026-12-03, finding K3: a grantor that finds one session
// of a keepalive is another identity's (this host's certificate was
// renamed since it opened the session) answers that session refused and
// renews the others. The daemon loses that session's leases at once
// (revoked), renews the other session's, releases and names nothing of
// the refused one (the grantors would refuse that too: before, each lost
// lease went as a release refused PERMISSION_DENIED, then in the
// session's keepalives), and the term's next acquire goes in a new
// session, not first into the refused one.
func TestKeepAliveRefusingOneSessionLosesOnlyItsLeases(t *testing.T) {
	r := newRig(t)
	long := 2 * ttl
	if _, err := r.c.Acquire(ctxT(t), "a", ipc.AcquireOptions{TTL: long}); err != nil {
		t.Fatal(err)
	}
	refused := (<-r.g.acquires).GetId().GetSession()
	if _, err := r.c.Acquire(ctxT(t), "b", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	own := (<-r.g.acquires).GetId().GetSession()
	r.g.set(func() { r.g.taken = map[string]bool{refused: true} })

	r.clock.Advance(long / 3) // both sessions due: one keepalive
	if ev := r.waitLeaseEvent(t, ipc.EventLost, "a"); ev.Reason != ipc.ReasonRevoked {
		t.Fatalf("a, in the refused session: %+v, want lost (revoked)", ev)
	}
	r.waitLeaseEvent(t, ipc.EventRenewed, "b")

	if _, err := r.c.Acquire(ctxT(t), "c", ipc.AcquireOptions{TTL: long}); err != nil {
		t.Fatal(err)
	}
	var sessions []string
	for len(r.g.acquires) > 0 {
		sessions = append(sessions, (<-r.g.acquires).GetId().GetSession())
	}
	if len(sessions) != 1 || sessions[0] == refused || sessions[0] == own {
		t.Fatalf("the acquire of term %v after %s was refused went under sessions %v: want one new session", long, refused, sessions)
	}
	for range 3 {
		r.clock.Advance(ttl / 3)
		r.waitLeaseEvent(t, ipc.EventRenewed, "b")
	}
	for len(r.g.keepalives) > 0 {
		ka := <-r.g.keepalives
		for _, s := range ka.Sessions {
			if s.Session == refused && (len(s.Untold) > 0 || len(s.OwnerEnded) > 0) {
				t.Fatalf("a keepalive names grants of the refused session to end: %v", s)
			}
		}
	}
	select {
	case rel := <-r.g.releases:
		t.Fatalf("release %v sent under a session the grantor refused", rel)
	default:
	}
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	for s := range r.d.ends {
		if s.id == refused {
			t.Fatal("the daemon keeps grants of the refused session to end")
		}
	}
}
