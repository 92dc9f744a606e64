package daemon

import (
	"strconv"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// TestOrphanGrantsEnded (review rev1 open finding 4): the grantor lists,
// in a restored session, grants a previous process made that this one
// does not know (ghost/det, owned by a previous process's detached owner;
// ghost/pid, owned by a pid). Once the restart is a term old (every
// deadline a previous process can have told of them passed), the daemon
// names ghost/det untold in its keepalives, and never before; ghost/pid
// (a pid owner's id does not tell which process gave it) and the restored
// lease are never named, nor are grants of this process's own owners it
// does not know yet (mine/det, mine/conn: an acquire whose reply is
// late; review rev3). Fails without endOrphansLocked: ghost/det is
// never named and stays held for as long as the session is renewed.
func TestOrphanGrantsEnded(t *testing.T) {
	r := newRestartRig(t)
	_, stop1 := r.start(t)
	c := &ipc.Client{Socket: r.sock}
	keep, err := c.Acquire(ctxT(t), "keep", ipc.AcquireOptions{TTL: 9 * time.Second, Owner: ipc.OwnerDetached})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	stop1()
	st := r.state(t)
	keepTok, _ := strconv.ParseUint(keep.Token, 10, 64)
	// list has the grantors list keep, two grants of the process before
	// that this one does not know, and then more.
	list := func(more ...*grantorpb.LeaseRef) {
		r.g.set(func() {
			r.g.sessionReply = func(_ *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) {
				res.Listed = true
				res.Leases = append([]*grantorpb.LeaseRef{
					{Lease: "keep", Token: keepTok, Owner: st.Leases[0].OwnerID},
					{Lease: "ghost/det", Token: 77, Owner: "detached:1"},
					{Lease: "ghost/pid", Token: 78, Owner: "pid:1:1"},
				}, more...)
			}
		})
	}
	list()
	r.clock.Advance(time.Second)
	r.drainKeepAlives()
	start := r.clock.Now()
	d2, _ := r.start(t)
	// Grants of this process's own owners the daemon does not know yet (an
	// acquire whose reply is late, or one settling): the first detached
	// id and connection id it gives. Never named, however long they stand.
	list(&grantorpb.LeaseRef{Lease: "mine/det", Token: 79, Owner: "detached:" + strconv.FormatUint(d2.previous.detached+1, 10)},
		&grantorpb.LeaseRef{Lease: "mine/conn", Token: 80, Owner: "conn:" + strconv.FormatUint(d2.ps.start, 10) + ".1"})

	named := func(ka *grantorpb.KeepAliveRequest) map[string]bool {
		m := map[string]bool{}
		for _, s := range ka.Sessions {
			for _, ref := range append(s.Untold, s.OwnerEnded...) {
				m[ref.Lease] = true
			}
		}
		return m
	}
	check := func(ka *grantorpb.KeepAliveRequest) bool {
		m := named(ka)
		if m["keep"] || m["ghost/pid"] || m["mine/det"] || m["mine/conn"] {
			t.Fatalf("keepalive names %v: the restored lease, a pid owner's grant or this process's own owners' grant", m)
		}
		if m["ghost/det"] && r.clock.Now().Before(start.Add(9*time.Second)) {
			t.Fatalf("ghost/det named %v after the restart, before a term (9s) passed", r.clock.Now().Sub(start))
		}
		return m["ghost/det"]
	}
	found := false
	waitFor(t, func() bool {
		for !found {
			select {
			case ka := <-r.g.keepalives:
				found = check(ka)
				continue
			default:
			}
			break
		}
		if !found {
			r.clock.Advance(100 * time.Millisecond)
		}
		return found
	})
}
