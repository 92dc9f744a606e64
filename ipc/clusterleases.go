package ipc

import (
	"context"
	"fmt"
)

// ClusterLease is one lease of the cluster in the answer to leases: its
// grants, waiters and lock-delays as the grantor leader sees them.
type ClusterLease struct {
	Lease string `json:"lease"`
	// Limit is the limit in force: 1 exclusive, more a semaphore; 0 while
	// nobody holds it (only delays are listed) or it is held shared.
	Limit int `json:"limit"`
	// Shared says its holders (or delays) are shared grants of a
	// read/write lock (protocol 5).
	Shared bool `json:"shared,omitempty"`
	// Waiters is how many acquires wait for it at the leader.
	Waiters int             `json:"waiters"`
	Holders []ClusterHolder `json:"holders"`
	Delays  []ClusterDelay  `json:"delays,omitempty"`
}

// ClusterHolder is one grant of a ClusterLease.
type ClusterHolder struct {
	Token string `json:"token"`
	// Holder is the identity name of the holder's sidecar (its
	// certificate's name).
	Holder string `json:"holder"`
	// RemainingMs is how long the grant runs at the leader unless renewed
	// (its holder's own deadline comes earlier).
	RemainingMs int64 `json:"remaining_ms"`
	TTLMs       int64 `json:"ttl_ms"`
	LockDelayMs int64 `json:"lock_delay_ms,omitempty"`
}

// ClusterDelay is a lock-delay in force: the name stays free of new
// grants until it ends.
type ClusterDelay struct {
	// Token is the grant whose end started it, Holder that grant's.
	Token       string `json:"token"`
	Holder      string `json:"holder"`
	RemainingMs int64  `json:"remaining_ms"`
}

// maxPrefixBytes bounds a leases request's prefix and after.
const maxPrefixBytes = MaxNameBytes

// validatePrefix checks the start of lease names: bytes a lease name may
// have, no longer than one.
func validatePrefix(field, p string) *Error {
	if len(p) > maxPrefixBytes {
		return Errorf(CodeBadRequest, "%s must be at most %d bytes, got %d", field, maxPrefixBytes, len(p))
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return Errorf(CodeBadRequest, "%s has %s at byte %d; lease names have only ASCII letters, digits and ._-/", field, quoteByte(c), i)
		}
	}
	return nil
}

// ClusterLeases returns one page of the cluster's leases whose names
// start with prefix, after after (the last name of the page before; ""
// for the first), and whether more follow. The daemon answers only root
// and its own uid.
func (c *Client) ClusterLeases(ctx context.Context, prefix, after string) ([]ClusterLease, bool, error) {
	resp, err := c.call(ctx, &Request{Op: OpLeases, Prefix: prefix, After: after})
	if err != nil {
		return nil, false, err
	}
	if resp.ClusterLeases == nil {
		return nil, false, fmt.Errorf("ipc: leases reply without cluster_leases")
	}
	return *resp.ClusterLeases, resp.More, nil
}
