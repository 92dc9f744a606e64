package grantor

import (
	"context"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// The cluster-wide view of leases (issue 24, `leaseside leases`).
//
// The leader answers from its lease table and its office: each grant's
// token and holder identity from the FSM, its remaining term from the
// session's expiry this office keeps (when the leader may end it; its
// holder's deadline comes earlier), the name's waiters from its queue and
// its lock-delays from both. It is a view, not a decision: nothing is
// proposed, and a grant may end the moment after it was listed.

// Bounds of one page of a Leases listing.
const (
	defaultLeasesPage = 1000
	maxLeasesPage     = 10000
)

// namesWith returns the names that have grants or lock-delays, start
// with prefix and sort after after, in order.
func (f *fsm) namesWith(prefix, after string) []string {
	f.mu.RLock()
	var names []string
	add := func(name string) {
		if strings.HasPrefix(name, prefix) && name > after {
			names = append(names, name)
		}
	}
	for name := range f.st.Leases {
		add(name)
	}
	for name := range f.st.Sems {
		add(name)
	}
	for name, ds := range f.st.Delays {
		if len(ds) > 0 && f.st.Leases[name].Token == 0 && f.st.Sems[name] == nil {
			add(name)
		}
	}
	f.mu.RUnlock()
	slices.Sort(names)
	return names
}

// leaseView is one name of a listing as the FSM shows it.
type leaseView struct {
	limit   int
	shared  bool
	holders []leaseRecord
	names   []string // holder identity names, by holders' index
	delays  []delayRecord
}

// view returns what the FSM holds of name.
func (f *fsm) view(name string) leaseView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	limit, hs := f.inForceLocked(name)
	v := leaseView{limit: limit, shared: f.sharedLocked(name), holders: slices.Clone(hs), delays: slices.Clone(f.st.Delays[name])}
	v.names = make([]string, len(hs))
	for i, h := range hs {
		v.names[i] = f.ownerOf(h.Session)
	}
	return v
}

// listLeases answers a Leases call for caller: the names it may read
// (name rules), from after, at most limit of them.
func (n *Node) listLeases(ctx context.Context, caller Identity, req *grantorpb.LeasesRequest) (*grantorpb.LeasesResponse, error) {
	if req.GetPrefix() != "" {
		if err := validNamePrefix(req.GetPrefix()); err != nil {
			return nil, invalid("prefix", "%v", err)
		}
	}
	if len(req.GetAfter()) > maxLeaseName {
		return nil, invalid("after", "%d bytes, longer than a lease name may be (%d)", len(req.GetAfter()), maxLeaseName)
	}
	limit := int(req.GetLimit())
	switch {
	case limit == 0:
		limit = defaultLeasesPage
	case limit > maxLeasesPage:
		return nil, invalid("limit", "%d names in one page, more than %d", limit, maxLeasesPage)
	}
	// One listing at a time: each walks the whole table under the FSM's
	// read lock (26 ms for 100,000 leases, BenchmarkNamesWith), and a
	// flood of them in parallel would keep Apply waiting.
	n.listMu.Lock()
	defer n.listMu.Unlock()
	rules, who := n.nameRules.Load(), caller.owner()
	infos, more, err := n.lessor.listLeases(ctx, req.GetPrefix(), req.GetAfter(), limit, func(name string) bool {
		return rules.allows(who, name, AccessRead)
	})
	if err != nil {
		return nil, err
	}
	return &grantorpb.LeasesResponse{Leases: infos, More: more, AnsweredBy: n.cfg.NodeID}, nil
}

// listLeases lists the names with grants or lock-delays that start with
// prefix, sort after after and that allow lets the caller read, at most
// limit of them; more says others follow.
func (l *lessor) listLeases(ctx context.Context, prefix, after string, limit int, allow func(string) bool) (infos []*grantorpb.LeaseInfo, more bool, err error) {
	o, err := l.await(ctx)
	if err != nil {
		return nil, false, err
	}
	for _, name := range l.fsm.namesWith(prefix, after) {
		if !allow(name) {
			continue
		}
		if len(infos) == limit {
			return infos, true, nil
		}
		infos = append(infos, l.leaseInfo(o, name))
	}
	return infos, false, nil
}

// leaseInfo describes name as the FSM and office o show it now.
func (l *lessor) leaseInfo(o *office, name string) *grantorpb.LeaseInfo {
	v := l.fsm.view(name)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	info := &grantorpb.LeaseInfo{Lease: name, Limit: uint32(v.limit), Shared: v.shared, Waiters: uint32(len(o.queues[name]))}
	for i, h := range v.holders {
		var remaining time.Duration
		if s := o.sessions[h.Session]; s != nil && !s.revoking && s.expiry != 0 {
			remaining = max(s.expiry.Sub(now), 0)
		} else if s == nil || s.expiry == 0 {
			// Between the grant's apply and its event: it runs a term
			// from now (extendLocked).
			remaining = l.timing.GrantorExpiry(now, h.TTL).Sub(now)
		}
		info.Holders = append(info.Holders, &grantorpb.LeaseHolder{Token: h.Token, HolderName: v.names[i],
			RemainingNs: int64(remaining), TtlNs: int64(h.TTL), LockDelayNs: int64(h.LockDelay)})
	}
	for _, d := range v.delays {
		var remaining time.Duration
		if st := o.delays[grantRef{name, d.Token}]; st != nil {
			remaining = max(st.until.Sub(now), 0)
		}
		info.Delays = append(info.Delays, &grantorpb.LeaseDelay{Token: d.Token, HolderName: d.Owner, RemainingNs: int64(remaining)})
	}
	return info
}

// Leases implements grantorpb.GrantorServer. Only the leader answers.
// Its page is charged to the caller's queued bytes until it is sent
// (edgeLimits.chargeAnswer).
func (s *service) Leases(ctx context.Context, req *grantorpb.LeasesRequest) (*grantorpb.LeasesResponse, error) {
	id := IdentityFrom(ctx)
	if err := s.n.edge.chargeAnswer(ctx, 0); err != nil {
		return nil, toStatus(err)
	}
	resp, err := s.n.listLeases(ctx, id, req)
	if err == nil {
		err = s.n.edge.chargeAnswer(ctx, proto.Size(resp))
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}
