package daemon

import (
	"strconv"

	"github.com/leaseside/leaseside/ipc"
)

// watch subscribes c to the events of every lease on this host it may see
// (visible), or of the one named.
func (d *Daemon) watch(c *ipc.Conn, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.watchers[c] = name
}

// emitLocked sends an event about l to its owner's connection and to every
// watcher. The caller holds d.mu.
func (d *Daemon) emitLocked(l *lease, ev *ipc.Event) {
	d.emitWatchersLocked(l, ev)
	if l.conn != nil {
		l.conn.Send(ev)
	}
}

// listenedLocked reports whether an event about l has anyone to go to: its
// connection, or a watcher. A renewal of a detached lease whose client has
// gone builds no event (at 10,000 such leases, 10,000 events of garbage
// every d/3; issue 25 item 6). The caller holds d.mu.
func (d *Daemon) listenedLocked(l *lease) bool {
	return l.conn != nil || len(d.watchers) > 0
}

// emitWatchersLocked sends an event about l to the watchers that may see
// it (their filter, and visible), except l's own connection. The
// caller holds d.mu.
func (d *Daemon) emitWatchersLocked(l *lease, ev *ipc.Event) {
	ev.Lease = l.name
	ev.Token = strconv.FormatUint(l.token, 10)
	for c, filter := range d.watchers {
		if c != l.conn && (filter == "" || filter == l.name) && d.visible(c.Cred, l) {
			c.Send(ev)
		}
	}
}
