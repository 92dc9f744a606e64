package daemon

import (
	"errors"
	"testing"

	"github.com/leaseside/leaseside/ipc"
)

func waitEventOn(t *testing.T, ch chan *ipc.Event, kind string) *ipc.Event {
	t.Helper()
	ctx := ctxT(t)
	for {
		select {
		case ev := <-ch:
			if ev.Event == kind {
				return ev
			}
		case <-ctx.Done():
			t.Fatalf("no %s event", kind)
		}
	}
}

// watch registers a watcher; the reply proves the registration happened.
func watch(t *testing.T, c *ipc.Client, name string) {
	t.Helper()
	if err := c.Watch(ctxT(t), name); err != nil {
		t.Fatal(err)
	}
}

// A no_renew lease is never renewed by the daemon, lapses at its deadline
// (lost, expired), and the renew op extends it on request.
func TestNoRenewLeaseRenewedOnlyOnRequest(t *testing.T) {
	r := newRig(t)
	l, err := r.c.Acquire(ctxT(t), "batch/nightly", ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerDetached, NoRenew: true})
	if err != nil {
		t.Fatal(err)
	}
	// A renewed lease beside it, due at the same time: its keepalive
	// proves the renew loop acted, and shows what it renewed.
	if _, err := r.c.Acquire(ctxT(t), "batch/kept", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(ttl / 2)
	r.waitKeepAlive(t)
	if ev := r.waitEvent(t, ipc.EventRenewed); ev.Lease != "batch/kept" {
		t.Fatalf("renewed %+v, want batch/kept", ev)
	}
	// The session's keepalive renewed both at the grantor; the daemon did
	// not extend the no_renew lease's deadline on its own.
	g := l.Grant
	if now, err := r.c.Check(ctxT(t), "batch/nightly", ""); err != nil || now.DeadlineBoottimeNs != g.DeadlineBoottimeNs {
		t.Fatalf("no_renew lease after its session's keepalive: %+v %v, want deadline %d unchanged", now, err, g.DeadlineBoottimeNs)
	}
	g2, err := r.c.Renew(ctxT(t), "batch/nightly")
	if err != nil {
		t.Fatal(err)
	}
	if g2.Token != g.Token || g2.DeadlineBoottimeNs <= g.DeadlineBoottimeNs {
		t.Fatalf("renew: token %s->%s deadline %d->%d; want same token, later deadline", g.Token, g2.Token, g.DeadlineBoottimeNs, g2.DeadlineBoottimeNs)
	}
	r.clock.Advance(ttl)
	// It lapsed, as asked: expired, not a failure (issue 24 item 8).
	if ev := r.waitLeaseEvent(t, ipc.EventLost, "batch/nightly"); ev.Reason != ipc.ReasonExpired {
		t.Fatalf("the lapsed no_renew lease: %+v, want reason %s", ev, ipc.ReasonExpired)
	}
}

func TestCheck(t *testing.T) {
	r := newRig(t)
	g, err := r.c.Acquire(ctxT(t), "a", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, lease, token, code string
	}{
		{name: "held", lease: "a"},
		{name: "held with token", lease: "a", token: g.Token},
		{name: "other token", lease: "a", token: "999", code: ipc.CodeTokenMismatch},
		{name: "not held", lease: "b", code: ipc.CodeNotHeld},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.c.Check(ctxT(t), tt.lease, tt.token)
			var ie *ipc.Error
			switch {
			case tt.code == "" && err != nil:
				t.Fatalf("check: %v", err)
			case tt.code != "" && (!errors.As(err, &ie) || ie.Code != tt.code):
				t.Fatalf("check: %v, want code %s", err, tt.code)
			}
		})
	}
	r.clock.Advance(ttl) // past the deadline, no renewal answered yet
	r.g.set(func() { r.g.silent = true })
	if _, err := r.c.Check(ctxT(t), "a", ""); !errors.Is(err, ipc.ErrNotHeld) {
		t.Fatalf("check past the deadline: %v, want not_held", err)
	}
}

// Releasing another connection's lease tells that owner it is lost.
func TestReleaseByOtherTellsOwner(t *testing.T) {
	r := newRig(t)
	if _, err := r.c.Acquire(ctxT(t), "a", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	admin, _ := r.client(t)
	if err := admin.Release(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	ev := r.waitEvent(t, ipc.EventLost)
	if ev.Reason != ipc.ReasonReleasedByAdmin {
		t.Fatalf("reason %q, want %q", ev.Reason, ipc.ReasonReleasedByAdmin)
	}
}

func TestACL(t *testing.T) {
	acl := ACL{
		{UIDs: []int{1000}, Prefixes: []string{"jobs/"}},
		{GIDs: []int{50}, Prefixes: []string{"db/"}},
	}
	tests := []struct {
		name  string
		cred  ipc.Cred
		lease string
		ok    bool
	}{
		{name: "uid on its prefix", cred: ipc.Cred{UID: 1000, GID: 1000}, lease: "jobs/a", ok: true},
		{name: "uid off its prefix", cred: ipc.Cred{UID: 1000, GID: 1000}, lease: "db/a"},
		{name: "group on its prefix", cred: ipc.Cred{UID: 2000, GID: 50}, lease: "db/a", ok: true},
		{name: "supplementary group on its prefix", cred: ipc.Cred{UID: 2000, GID: 2000, Groups: []int{7, 50}}, lease: "db/a", ok: true},
		{name: "group off its prefix", cred: ipc.Cred{UID: 2000, GID: 50}, lease: "jobs/a"},
		{name: "unlisted uid", cred: ipc.Cred{UID: 3000, GID: 3000}, lease: "jobs/a"},
		{name: "root", cred: ipc.Cred{UID: 0}, lease: "anything", ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := acl.allow(tt.cred, tt.lease)
			if (err == nil) != tt.ok {
				t.Fatalf("allow = %v, want ok %v", err, tt.ok)
			}
			if err != nil && err.Code != ipc.CodePermissionDenied {
				t.Fatalf("code %s", err.Code)
			}
		})
	}
	if (ACL{{Prefixes: []string{"x"}}}).Validate() == nil {
		t.Error("a rule with no uid or gid passed Validate")
	}
}

// A local user at its lease limit (max_leases_per_uid) gets
// resource_exhausted for the next acquire, which never reaches the
// grantor; nothing it holds changes, and once it releases one it may
// acquire again. Re-acquiring a lease it holds is no new lease.
func TestLeasesPerUIDAreLimited(t *testing.T) {
	r := newRigWith(t, func(c *Config) { c.MaxLeasesPerUID = 2 })
	for _, n := range []string{"a", "b"} {
		if _, err := r.c.Acquire(ctxT(t), n, ipc.AcquireOptions{TTL: ttl}); err != nil {
			t.Fatal(err)
		}
		r.waitAcquireRPC(t)
	}
	if _, err := r.c.Acquire(ctxT(t), "a", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatalf("re-acquiring a held lease at the limit: %v", err)
	}
	_, err := r.c.Acquire(ctxT(t), "c", ipc.AcquireOptions{TTL: ttl})
	if !errors.Is(err, &ipc.Error{Code: ipc.CodeResourceExhausted}) {
		t.Fatalf("a third lease: %v, want resource_exhausted", err)
	}
	select {
	case req := <-r.g.acquires:
		t.Fatalf("the refused acquire reached the grantor: %v", req)
	default:
	}
	if leases, err := r.c.Status(ctxT(t)); err != nil || len(leases) != 2 {
		t.Fatalf("status after the refusal: %v %v, want the 2 leases", leases, err)
	}
	if err := r.c.Release(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Acquire(ctxT(t), "c", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}
