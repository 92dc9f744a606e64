package daemon

import (
	"testing"
	"time"
	"unsafe"

	"github.com/leaseside/leaseside/ipc"
)

// TestRenewedChannelOnlyWhileWaited: a lease keeps no channel for its
// renewals while nobody waits for one (issue 25 item 6); a waiter gets one
// that the next completed keepalive closes (its outcome in renewals), and the
// waiter after it a fresh one.
func TestRenewedChannelOnlyWhileWaited(t *testing.T) {
	l := &lease{name: "a"}
	l.signalRenewed() // nobody waits: nothing to close, nothing kept
	if l.renewed != nil {
		t.Fatal("a renewal nobody waited for left a channel on the lease")
	}
	w := l.renewWaitLocked()
	if again := l.renewWaitLocked(); again != w {
		t.Fatal("two waiters of the same renewal got different channels")
	}
	select {
	case <-w:
		t.Fatal("the channel was closed before a renewal")
	default:
	}
	l.signalRenewed()
	select {
	case <-w:
	default:
		t.Fatal("the renewal did not wake its waiter")
	}
	if l.renewed != nil {
		t.Fatal("after the renewal: channel kept")
	}
	if next := l.renewWaitLocked(); next == w {
		t.Fatal("the next waiter got the closed channel")
	}
}

// TestRenewalEventsOnlyWhenListened: an event about a lease is built only
// when its connection is open or someone watches.
func TestRenewalEventsOnlyWhenListened(t *testing.T) {
	d := &Daemon{watchers: map[*ipc.Conn]string{}}
	l := &lease{name: "a"}
	if d.listenedLocked(l) {
		t.Fatal("a detached lease without watchers counted as listened to")
	}
	d.watchers[&ipc.Conn{}] = ""
	if !d.listenedLocked(l) {
		t.Fatal("a watcher did not count")
	}
	d.watchers = map[*ipc.Conn]string{}
	l.conn = &ipc.Conn{}
	if !d.listenedLocked(l) {
		t.Fatal("the lease's own connection did not count")
	}
}

// TestLeaseSize: a lease fits the runtime's 240-byte size class (it took
// 272 bytes, so 288, before its small fields were put together and its
// owner binding made a byte; issue 25 item 6).
func TestLeaseSize(t *testing.T) {
	if size := unsafe.Sizeof(lease{}); size > 240 {
		t.Fatalf("a lease takes %d bytes, more than the 240-byte size class", size)
	}
}

// TestRenewalBatchAtItsSize: the batch a renewal round makes of a
// session's 10,000 leases is allocated at its size (grown by appends it
// ended with room for 11,264, and 310 KB allocated every round, not
// 80 KB).
func TestRenewalBatchAtItsSize(t *testing.T) {
	r := newStateDirRig(t)
	for range 10000 {
		r.grant(r.sess[0], false, false)
	}
	r.grant(r.sess[1], false, false)
	due := r.d.dueSessions(r.clock.Now().Add(time.Hour), nil)
	if len(due) != 2 {
		t.Fatalf("%d sessions due, want 2", len(due))
	}
	for _, sb := range due {
		if cap(sb.leases) != len(sb.leases) {
			t.Fatalf("a batch of %d leases has room for %d", len(sb.leases), cap(sb.leases))
		}
	}
}

// TestOwnerKindNames: every binding the socket names is a kind, and back.
func TestOwnerKindNames(t *testing.T) {
	for _, name := range []string{ipc.OwnerConnection, ipc.OwnerPID, ipc.OwnerDetached} {
		k, ok := ownerOf(name)
		if !ok || k.String() != name {
			t.Fatalf("%q: kind %v (%v)", name, k, ok)
		}
	}
	if _, ok := ownerOf("nobody"); ok {
		t.Fatal("an unknown binding has a kind")
	}
}
