package daemon

import (
	"context"

	"github.com/leaseside/leaseside/grantor/gossip"
)

// followGossip keeps the grantor connection's list of grantors, and its
// guess of the leader, up to date with what gossip says, until ctx ends.
// Gossip is a hint for where to send requests, never a safety input: a
// stale leader hint costs a redirect, and no lease is shortened, ended or
// extended by anything gossip reports.
func (d *Daemon) followGossip(ctx context.Context, m *gossip.Member) {
	for {
		changed := m.Changes() // take the channel before reading the state
		if addrs, leader := m.Grantors(); len(addrs) > 0 {
			d.g.setGrantors(addrs, leader)
		}
		select {
		case <-ctx.Done():
			return
		case <-m.Done():
			return
		case <-changed:
		}
	}
}
