package daemon

import (
	"strconv"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// Semaphores on one host (issue 12). A semaphore's holders on this host
// are several owners, each with a grant of its own (its own token and
// deadline, renewed with its grantor session like any lease), so the
// lease table keys a slot by the name and its owner (slotKey) rather than
// by the name, and d.slots indexes the slots by name for the requests
// that name a lease (release, renew, check, proclaim).

// indexSlotLocked adds (or, with add false, removes) l in the index of
// semaphore slots. Exclusive leases are not indexed. The caller holds
// d.mu.
func (d *Daemon) indexSlotLocked(l *lease, add bool) {
	if l.key == "" {
		return
	}
	if add {
		if d.slots == nil {
			d.slots = map[string]map[*lease]struct{}{}
		}
		if d.slots[l.name] == nil {
			d.slots[l.name] = map[*lease]struct{}{}
		}
		d.slots[l.name][l] = struct{}{}
		return
	}
	delete(d.slots[l.name], l)
	if len(d.slots[l.name]) == 0 {
		delete(d.slots, l.name)
	}
}

// findLocked returns the lease of name that a request means, valid now
// (validLocked): the exclusive lease of name, else one of its semaphore
// slots here: the one with token when a token is given, else one that c
// acquired (c may be nil), else the oldest. The caller holds d.mu.
func (d *Daemon) findLocked(c *ipc.Conn, name, token string, now clockwatch.Instant) *lease {
	if l := d.validLocked(name, now); l != nil {
		return l
	}
	var best *lease
	for s := range d.slots[name] {
		l := d.validLocked(s.key, now)
		switch {
		case l == nil:
		case token != "" && token == strconv.FormatUint(l.token, 10):
			return l
		case token != "":
		case c != nil && l.conn == c && (best == nil || best.conn != c || l.token < best.token):
			best = l
		case best == nil || (best.conn != c || c == nil) && l.token < best.token:
			best = l
		}
	}
	if best == nil && token != "" {
		// No slot with that token: say which one this host holds.
		for s := range d.slots[name] {
			if l := d.validLocked(s.key, now); l != nil {
				return l
			}
		}
	}
	return best
}

// grantKey names one grant: a lease and its token.
type grantKey struct {
	lease string
	token uint64
}

// knownLocked reports whether the table holds the grant token of name,
// exclusive or a semaphore's slot. The caller holds d.mu.
func (d *Daemon) knownLocked(name string, token uint64) bool {
	if l := d.leases[name]; l != nil && l.token == token {
		return true
	}
	for l := range d.slots[name] {
		if l.token == token {
			return true
		}
	}
	return false
}
