package daemon

import (
	"context"
	"errors"
	"os"
	"strconv"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// clusterLeases relays a leases request (`leaseside leases` without
// --grantors) to the grantor leader: one page of the cluster's leases.
// Only root and the daemon's own uid may ask: the answer names every
// host's leases and identities, which the ACL does not cover. The leader
// lists what this sidecar's certificate may read under the grantors' name
// rules.
func (d *Daemon) clusterLeases(ctx context.Context, c *ipc.Conn, req *ipc.Request) *ipc.Response {
	if c.Cred.UID != 0 && c.Cred.UID != os.Getuid() {
		return &ipc.Response{Error: ipc.Errorf(ipc.CodePermissionDenied,
			"leases is for root or the daemon's own uid (%d), not uid %d: other users see their own leases with status, or ask the grantors with an operator certificate (leaseside leases --grantors)", os.Getuid(), c.Cred.UID)}
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := retry(ctx, d.g, callOpts{attempt: attemptTimeout, leader: true}, func(ctx context.Context, api grantorpb.GrantorClient) (*grantorpb.LeasesResponse, error) {
		return api.Leases(ctx, &grantorpb.LeasesRequest{Prefix: req.Prefix, After: req.After})
	})
	if errors.Is(err, errNoGrantorKnown) {
		return &ipc.Response{ClusterLeases: &[]ipc.ClusterLease{}} // none found yet
	}
	if err != nil {
		return &ipc.Response{Error: grantorError(err)}
	}
	out := ClusterLeasesFromPB(resp.Leases)
	return &ipc.Response{ClusterLeases: &out, More: resp.More}
}

// ClusterLeasesFromPB turns a Leases page into the socket protocol's
// shape, which `leaseside leases --json` prints too.
func ClusterLeasesFromPB(infos []*grantorpb.LeaseInfo) []ipc.ClusterLease {
	ms := func(ns int64) int64 { return time.Duration(ns).Milliseconds() }
	out := make([]ipc.ClusterLease, len(infos))
	for i, in := range infos {
		cl := ipc.ClusterLease{Lease: in.Lease, Limit: int(in.Limit), Shared: in.Shared, Waiters: int(in.Waiters), Holders: []ipc.ClusterHolder{}}
		for _, h := range in.Holders {
			cl.Holders = append(cl.Holders, ipc.ClusterHolder{Token: strconv.FormatUint(h.Token, 10), Holder: h.HolderName,
				RemainingMs: ms(h.RemainingNs), TTLMs: ms(h.TtlNs), LockDelayMs: ms(h.LockDelayNs)})
		}
		for _, dl := range in.Delays {
			cl.Delays = append(cl.Delays, ipc.ClusterDelay{Token: strconv.FormatUint(dl.Token, 10), Holder: dl.HolderName, RemainingMs: ms(dl.RemainingNs)})
		}
		out[i] = cl
	}
	return out
}
