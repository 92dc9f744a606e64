package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/leaseside/leaseside/grantor/gossip"
)

// followGossip keeps the grantor connection's list of grantors, and its
// guess of the leader, up to date with what gossip says, until ctx ends.
// Gossip is a hint for where to send requests, never a safety input: a
// stale leader hint costs a redirect, and no lease is shortened, ended or
// extended by anything gossip reports.
func (d *Daemon) followGossip(ctx context.Context, m *gossip.Member) {
	if len(d.cfg.GossipJoin) > 0 {
		go d.retryJoin(ctx, m)
	}
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

// joinRetry is how often the daemon tries its gossip seeds until one
// answers.
const joinRetry = 2 * time.Second

// retryJoin tries the seeds of Config.GossipJoin every joinRetry until one
// answers (Consul's retry_join): a sidecar that starts before its
// grantors, or with them, serves its socket meanwhile and finds them when
// they come.
func (d *Daemon) retryJoin(ctx context.Context, m *gossip.Member) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.Done():
			return
		case <-t.C:
		}
		n, err := m.Join(ctx, d.cfg.GossipJoin)
		switch {
		case err == nil:
			d.log.Info("joined the gossip cluster", "seeds", d.cfg.GossipJoin, "seeds_reached", n)
			return
		case errors.Is(err, gossip.ErrGossipKey):
			d.log.Error("joining the gossip cluster", "err", err)
		case ctx.Err() == nil:
			d.log.Debug("no gossip seed answers yet", "seeds", d.cfg.GossipJoin, "err", err)
		}
		t.Reset(joinRetry)
	}
}
