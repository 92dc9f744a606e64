package grantor

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leaseside/leaseside/internal/connlimit"
)

// The audit trail: one structured log line for every grant, release,
// revoke, raft membership change and refused call, each naming who did it
// (role and name of the caller's certificate; "grantor/<this node>" for
// what the leader does by itself, such as revokes and reconciliation).
// Lines have the message "audit" and an event attribute:
//
//	grant          role name lease token session owner
//	release        role name lease token released [ended]
//	                                          (ended: owner_ended when the grant's owner
//	                                          ended without releasing it, lapsed when
//	                                          its holder's deadline passed)
//	proclaim       role name lease token proclaimed  (a holder's new value)
//	revoke         role name lease token      (a lease of an older cluster's expiry)
//	operator_revoke role name lease token holder delay
//	                                          (an operator's revoke, revoke.go; role and
//	                                          name are the operator's, holder the grant's)
//	expire         role name session freed leases (a session that expired, with its grants)
//	member_add     role name node_id raft_addr voter
//	member_remove  role name node_id
//	refused        role name call reason [lease] [suppressed]
//	                                          (a gRPC call the role may not make, or
//	                                          one answered PERMISSION_DENIED or
//	                                          RESOURCE_EXHAUSTED: another identity's
//	                                          session, a limit)
//	refused_raft   peer reason count          (inbound raft connections or RPCs, and
//	                                           gossip members' claims to be grantors
//	                                           that reconciliation refuses at every
//	                                           pass; one line at once for the first
//	                                           of a peer address and reason, then
//	                                           their count every 10 s)
//
// Lines of calls that change nothing (refused, and release or proclaim
// that found no grant) are limited, as a caller decides how many it
// causes: per identity, at most its account's audit_lines_per_sec
// (account.go), with suppressed on the next one written saying how many
// were not written since the last. Lines of what changes state are
// always written.
//
// Config.Audit chooses where they go (`--audit-log FILE` writes them as
// JSON to a file of their own); by default the node's log. Every line is
// written before the call it records is answered: with Config.AuditFlush,
// the lines of calls answered at the same time share one write.
type audit struct {
	log   *slog.Logger
	flush func() error // Config.AuditFlush; nil when lines are written as logged
	self  Identity     // who the leader's own actions are attributed to
	// accounts limit the lines of calls that change nothing, per
	// identity; nil limits nothing.
	accounts *accounts
	// nodeLog is told when the audit trail's writes start failing (the
	// lines are lost: the calls are answered all the same) and when they
	// succeed again, with how many were lost; failing and lost count
	// them. Only changes are logged, so a full disk logs two lines.
	nodeLog *slog.Logger
	failing atomic.Bool
	lost    atomic.Uint64
	// claims sums up the refusals of gossip members' claims to be
	// grantors (refusedClaim), as the raft transport sums up its own: a
	// pass of reconciliation meets every claim again, and anyone with the
	// gossip key makes the passes (each gossip change starts one).
	claims *connlimit.Reporter
}

func newAudit(l *slog.Logger, flush func() error, nodeID string) *audit {
	a := &audit{log: l, flush: flush, self: Identity{Role: RoleGrantor, Name: nodeID}}
	a.claims = connlimit.NewReporter(raftRefusalInterval, a.refusedRaft)
	return a
}

// close writes the refusals still summed up and stops their timer.
func (a *audit) close() {
	if a != nil {
		a.claims.Close()
	}
}

// write logs one audit line at level. A nil *audit (tests of parts
// without a node) logs nothing. The record goes to the logger's handler
// as Logger.Log would hand it, less the caller's program counter (no
// handler of the trail adds the source): the runtime.Callers that
// Logger.Log makes and the slice of the line's attributes were about a
// third of the trail's CPU at the leader in a lock cycle.
func (a *audit) write(level slog.Level, event string, who Identity, attrs ...any) {
	if a == nil {
		return
	}
	ctx := context.Background()
	h := a.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, "audit", 0)
	r.AddAttrs(slog.String("event", event), slog.String("role", who.Role.String()), slog.String("name", who.Name))
	r.Add(attrs...)
	_ = h.Handle(ctx, r) // dropped as Logger.Log drops it
	a.flushed()
}

// flushed returns once the lines logged so far are written. A write
// that fails loses the line as the logger's own writes do (slog drops
// their errors): the call goes on, and the node's log says so when the
// writes start failing and when they work again, with the count of lines
// lost (review of 2026-12-03: a full disk lost audit lines silently).
func (a *audit) flushed() {
	if a.flush == nil {
		return
	}
	if err := a.flush(); err != nil {
		a.lost.Add(1)
		if a.failing.CompareAndSwap(false, true) && a.nodeLog != nil {
			a.nodeLog.Error("grantor: the audit trail cannot be written; calls are answered and their audit lines lost until it can", "err", err)
		}
		return
	}
	if a.failing.CompareAndSwap(true, false) && a.nodeLog != nil {
		a.nodeLog.Warn("grantor: the audit trail is written again", "lines_lost", a.lost.Swap(0))
	}
}

// grant records a granted Acquire.
func (a *audit) grant(who Identity, lease string, token uint64, session, owner string) {
	a.write(slog.LevelInfo, "grant", who, "lease", lease, "token", token, "session", session, "owner", owner)
}

// release records a Release that ended a grant or found none (limited).
func (a *audit) release(who Identity, c releaseCmd, released bool) {
	attrs := []any{"lease", c.Lease, "token", c.Token, "released", released}
	switch {
	case c.Lapsed:
		attrs = append(attrs, "ended", "lapsed")
	case c.OwnerEnded:
		attrs = append(attrs, "ended", "owner_ended")
	}
	if released {
		a.write(slog.LevelInfo, "release", who, attrs...)
		return
	}
	a.unchanged(slog.LevelInfo, "release", who, attrs...)
}

// proclaim records a Proclaim that changed a grant's value or found no
// such grant (limited).
func (a *audit) proclaim(who Identity, lease string, token uint64, proclaimed bool) {
	if proclaimed {
		a.write(slog.LevelInfo, "proclaim", who, "lease", lease, "token", token, "proclaimed", proclaimed)
		return
	}
	a.unchanged(slog.LevelInfo, "proclaim", who, "lease", lease, "token", token, "proclaimed", proclaimed)
}

// unchanged writes the line of a call that changed nothing, unless who's
// account holds it back; the line written says how many were held back
// since the last.
func (a *audit) unchanged(level slog.Level, event string, who Identity, attrs ...any) {
	if a == nil {
		return
	}
	if a.accounts != nil {
		suppressed, ok := a.accounts.auditLine(who)
		if !ok {
			return
		}
		if suppressed > 0 {
			attrs = append(attrs, "suppressed", suppressed)
		}
	}
	a.write(level, event, who, attrs...)
}

// revoke records a lease the leader revoked because it expired.
func (a *audit) revoke(lease string, token uint64) {
	if a == nil {
		return
	}
	a.write(slog.LevelInfo, "revoke", a.self, "lease", lease, "token", token)
}

// delayEnded records a lock-delay the leader ended (lockdelay.go): of
// lease, after its grant token ended.
func (a *audit) delayEnded(lease string, token uint64) {
	if a == nil {
		return
	}
	a.write(slog.LevelInfo, "delay_end", a.self, "lease", lease, "token", token)
}

// expireSession records a session the leader ended because it expired:
// the grants it held (lease:token) and how many were still held.
func (a *audit) expireSession(session string, grants []grantRef, freed int) {
	if a == nil {
		return
	}
	refs := make([]string, len(grants))
	for i, g := range grants {
		refs[i] = g.Lease + ":" + strconv.FormatUint(g.Token, 10)
	}
	a.write(slog.LevelInfo, "expire", a.self, "session", session, "freed", freed, "leases", refs)
}

// memberAdd records a server added to (or updated in) the raft
// configuration.
func (a *audit) memberAdd(who Identity, nodeID, raftAddr string, voter bool) {
	a.write(slog.LevelInfo, "member_add", who, "node_id", nodeID, "raft_addr", raftAddr, "voter", voter)
}

// memberRemove records a server removed from the raft configuration.
func (a *audit) memberRemove(who Identity, nodeID string) {
	a.write(slog.LevelInfo, "member_remove", who, "node_id", nodeID)
}

// refused records a gRPC call refused to its caller (limited); attrs add
// to call and reason (the lease, when the call names one).
func (a *audit) refused(who Identity, call, reason string, attrs ...any) {
	a.unchanged(slog.LevelWarn, "refused", who, append([]any{"call", call, "reason", reason}, attrs...)...)
}

// refusedClaim records a gossip member's claim to be grantor refused
// at peer (its raft address) for reason: a refused_raft line at once
// for the first of a peer and reason, then their count every
// raftRefusalInterval; at most 2 lines per pair and connlimit's
// MaxReportKeys pairs an interval, whatever the passes.
func (a *audit) refusedClaim(peer, reason string) {
	if a == nil {
		return
	}
	a.claims.Refused(peer, reason)
}

// refusedRaft records count inbound raft connections or RPCs refused;
// the peer is their source address (they may have no identity).
func (a *audit) refusedRaft(peer, reason string, count int) {
	if a == nil {
		return
	}
	a.log.Warn("audit", "event", "refused_raft", "peer", peer, "reason", reason, "count", count)
	a.flushed()
}
