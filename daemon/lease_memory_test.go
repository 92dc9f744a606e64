package daemon

import (
	"testing"

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
