package grantor

import (
	"errors"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// endNamed renews session as a sidecar does that names grants to end,
// and waits until the entry that ends the first of them has applied.
func (h *harness) endNamed(session string, ttl time.Duration, untold, ownerEnded []grantRef) sessionRenewed {
	h.t.Helper()
	o, err := h.l.await(h.ctx())
	if err != nil {
		h.t.Fatal(err)
	}
	m := h.events.mark()
	res, _, err := h.l.renewSessions(h.ctx(), o, "", []sessionRenewal{{Session: session, TTL: ttl, Untold: untold, OwnerEnded: ownerEnded}}, nil)
	if err != nil {
		h.t.Fatalf("renewing %s: %v", session, err)
	}
	if len(untold)+len(ownerEnded) > 0 {
		h.events.wait(h.t, m, "grant ended", func(e testEvent) bool { return e.what == "grant ended" })
	}
	return res[0]
}

// Issue 22 item 3, at the grantor: a grant that its session's keepalive
// names untold ends at that keepalive, without its lock-delay (nobody
// could have acted on it), and the entry that ends it hands the name to
// its first waiter. One named with its owner ended leaves its lock-delay.
// A grant of another session, or one already over, is not touched.
func TestKeepAliveEndsNamedGrants(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = time.Minute
	g := h.acquire(delayedAcq("s1", 1, "u", ttl, time.Hour))
	if !g.Granted {
		t.Fatalf("acquire: %+v", g)
	}
	waiter := h.enqueueWaiter(h.ctx(), acq("s2", 1, "u", ttl), time.Minute)

	// Another session names s1's grant: nothing changes.
	o, _ := h.l.await(h.ctx())
	if _, _, err := h.l.renewSessions(h.ctx(), o, "", []sessionRenewal{{Session: "s2", TTL: ttl, Untold: []grantRef{{"u", g.Token}}}}, nil); err != nil {
		t.Fatal(err)
	}
	if h.held("u") != g.Token {
		t.Fatalf("another session's keepalive ended s1's grant: u is held by %d", h.held("u"))
	}

	r := h.endNamed("s1", ttl, []grantRef{{"u", g.Token}}, nil)
	if !r.Renewed {
		t.Fatalf("s1's renewal: %+v", r)
	}
	if _, delayed := delayOf(h.fsm, "u"); delayed {
		t.Fatal("an untold grant left its lock-delay")
	}
	w := h.outcome(waiter)
	if w.err != nil || !w.res.Granted {
		t.Fatalf("the waiter: %+v %v, want the name handed on by the entry that ended the untold grant", w.res, w.err)
	}

	// The owner of the waiter's grant ended: named owner-ended, its
	// lock-delay stands.
	d := h.acquire(delayedAcq("s3", 1, "v", ttl, time.Hour))
	h.endNamed("s3", ttl, nil, []grantRef{{"v", d.Token}})
	if rec, delayed := delayOf(h.fsm, "v"); !delayed || rec.Token != d.Token {
		t.Fatalf("an owner-ended grant: delay %+v %v, want its lock-delay", rec, delayed)
	}
	if h.held("v") != 0 {
		t.Fatalf("v still held by %d", h.held("v"))
	}
}

// The FSM: cmdEndGrant ends only the grant it names, of the session it
// names; naming it again changes nothing.
func TestEndGrantFSM(t *testing.T) {
	f := newFSM()
	i := uint64(0)
	apply := func(t cmdType, body any) any {
		i++
		return f.Apply(rlog{i, encodeCmd(t, body)}.log())
	}
	g := apply(cmdAcquire8, delayedAcq("s", 1, "x", time.Minute, time.Hour)).(*acquireResult)
	if r := apply(cmdEndGrant, endGrantCmd{Session: "other", Lease: "x", Token: g.Token}).(*endGrantResult); r.Ended {
		t.Fatal("an end naming another session ended the grant")
	}
	if r := apply(cmdEndGrant, endGrantCmd{Session: "s", Lease: "x", Token: g.Token + 1}).(*endGrantResult); r.Ended {
		t.Fatal("an end naming another token ended the grant")
	}
	if r := apply(cmdEndGrant, endGrantCmd{Session: "s", Lease: "x", Token: g.Token}).(*endGrantResult); !r.Ended {
		t.Fatal("the end did not end the grant")
	}
	if _, held := f.lease("x"); held {
		t.Fatal("x still held")
	}
	if _, delayed := delayOf(f, "x"); delayed {
		t.Fatal("an untold end left a lock-delay")
	}
	if r := apply(cmdEndGrant, endGrantCmd{Session: "s", Lease: "x", Token: g.Token}).(*endGrantResult); r.Ended {
		t.Fatal("ending the grant again changed something")
	}
}

// Bad input: a named grant with token 0, a bad name, or too many of them
// is refused as invalid.
func TestKeepAliveNamedGrantsValidated(t *testing.T) {
	refs := func(n int, token uint64, name string) []*grantorpb.LeaseRef {
		out := make([]*grantorpb.LeaseRef, n)
		for i := range out {
			out[i] = &grantorpb.LeaseRef{Lease: name, Token: token}
		}
		return out
	}
	for _, tc := range []struct {
		what string
		s    *grantorpb.SessionRenewal
		want string
	}{
		{"token 0", &grantorpb.SessionRenewal{Session: "s", Untold: refs(1, 0, "x")}, "sessions.untold.token"},
		{"bad name", &grantorpb.SessionRenewal{Session: "s", OwnerEnded: refs(1, 1, "a//b")}, "sessions.owner_ended.lease"},
		{"too many", &grantorpb.SessionRenewal{Session: "s", Untold: refs(maxSessionEnds+1, 1, "x")}, "sessions.untold"},
	} {
		_, err := validSessions(&grantorpb.KeepAliveRequest{Sessions: []*grantorpb.SessionRenewal{tc.s}})
		var ie *InvalidArgumentError
		if !errors.As(err, &ie) || ie.Field != tc.want {
			t.Errorf("%s: %v, want InvalidArgument naming %s", tc.what, err, tc.want)
		}
	}
}
