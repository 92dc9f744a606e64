// Package grantor is a leaseside grantor node: a hashicorp/raft group member
// whose finite-state machine holds the lease table and the fencing-token
// counter, whose leader runs the lessor (expiries, waiters, keepalive
// batches), and which serves the gRPC contract in grantorpb.
//
// The safety rules of docs/design.md section 2 are kept as follows:
//
//   - Grants, releases, revocations and session clean-ups are raft log
//     entries (commands.go). The FSM (fsm.go) never reads a clock; it applies
//     entries deterministically and keeps the token counter, the leases and
//     the per-session idempotency records in its snapshots.
//   - Only the leader decides that a lease has expired, and it decides per
//     session: a session's leases live as long as the session. The lessor
//     (lessor.go, expiry.go) keeps, in memory, one expiry
//     Timing.GrantorExpiry(tG, d) per session, d the largest term of its
//     grants, reading tG from the Clock after a grant was applied or after
//     a renewal's quorum check returned, and once the Clock says it has
//     passed proposes one entry that ends the session's grants
//     (cmdExpireSession, handoff.go). The entry lists the grants it ends,
//     by token, and a retry of a failed entry lists only those of them
//     still held: a grant made to the session after the decision runs to
//     its own expiry (expiry.go).
//   - A node that becomes leader first waits on a raft barrier, then reads tE
//     and treats every session in the FSM as live until
//     Timing.GrantorExpiry(tE, d) before it answers anyone
//     (lessor.takeOffice).
//   - Renewals are leader-local and acknowledged in batches, each batch only
//     after one verify round that started after the batch arrived and
//     counts only answers to heartbeats sent after it began (keepalive.go,
//     verify.go). A keepalive names sessions and the digest of the
//     grants the holder knows in each, not every lease; the reply lists a
//     session's grants only when the digests differ (sessions.go).
//   - Waiting Acquires queue first come first served per lease in the
//     leader's memory. A release or an expiry that frees a lease grants it
//     to the head waiter in the same raft entry (handoff.go, acquire.go,
//     waiters.go).
//   - A grant's identity is its token: every granting Acquire takes the
//     next one, a holder's re-acquire too; only a retry of the same
//     (session, seq) gets the same grant back. Replies state the term
//     stored with the grant and the grantor's rho and epsilon.
//   - One request id, one answer: every outcome (a grant, a refusal for
//     good, a waiter's withdrawal, a release) is a raft entry's and the FSM
//     remembers it under (session, seq) until the session acknowledges
//     it, so any call of the id at any leader gets the same answer
//     (outcome.go). A waiter whose wait runs out adds one entry.
//   - Grants nobody was told of end at the grantor, without lock-delay
//     (untold.go): a sidecar names them in its session's keepalive (and
//     releases that did not get there, owner-ended ones with their
//     lock-delay), and the leader ends each the session still holds with
//     one cmdEndGrant entry, which hands the name to its first waiter. A
//     sidecar never gives back a grant it does not know.
//   - Grants nobody was told of end at the grantor, without lock-delay
//     (untold.go): a sidecar names them in its session's keepalive (and
//     releases that did not get there, owner-ended ones with their
//     lock-delay), and the leader ends each the session still holds with
//     one cmdEndGrant entry, which hands the name to its first waiter. A
//     sidecar never gives back a grant it does not know.
//   - Lock-delay is grantor state (lockdelay.go): a grant with a
//     lock-delay that expires, is revoked or whose owner's end its sidecar
//     reports leaves a delay in its place in the FSM; the leader ends it
//     with one entry once Timing.GrantorExpiry(t, delay) has passed on its
//     clock, t the apply of the entry that ended the grant, or its tE for
//     a delay it found on taking office; that entry hands the name to the
//     head waiter.
//   - An office serves only in the raft term it was opened in (lessor.go).
//   - A name may be a semaphore of up to N holders, each grant with its
//     own token, and a grant may carry a value that its holder changes
//     with a Proclaim entry (semaphore.go); the leader pushes the holders
//     of watched names and every change it applies to Watch streams
//     (watch.go), and answers token checks from its table after a verify
//     round, without a raft entry (checktoken.go).
//   - Command types are append-only; a leader proposes one only when every
//     server has registered that it applies it (versions.go).
//
// Errors reach sidecars as gRPC status codes: FAILED_PRECONDITION with a
// grantorpb.NotLeader detail from a node that does not lead (or is deposed
// while a call waits), INVALID_ARGUMENT for input that fails validation or
// a reused seq, OUT_OF_RANGE for a seq below the session's first_unacked
// or one it listed in also_received (received.go),
// RESOURCE_EXHAUSTED for a session with too many unacknowledged outcomes,
// UNAVAILABLE when raft cannot take a proposal or the node shuts down.
//
// A Node (node.go) ties raft, its raft-wal log and stable store, the file
// snapshot store, the lessor and the gRPC server together. With
// Config.Gossip it is also a member of the gossip cluster (discovery.go):
// it gossips its addresses and the leader it knows, bootstraps a new
// cluster Consul style (Config.BootstrapExpect), and while it leads it
// reconciles gossip with the raft configuration: alive grantors are
// added (as non-voters until they answer), ones that left gracefully
// removed, dead ones kept until an operator removes them (RemoveServer,
// which sticks: removed.go). Gossip never shortens a lease.
// Node.Leave takes a node out gracefully: it stops acknowledging, hands
// leadership over if it leads, has the leader remove it, then leaves
// gossip (membership.go). Members answers from any node; Collector
// exports the node's metrics, its clock watcher's stalls included
// (metrics.go).
//
// Trust (docs/design.md section 6, SECURITY.md): with Config.TLS (grantor/pki),
// raft runs over mutual TLS and every raft RPC must speak for the server
// its connection's grantor certificate names (raft_tls.go); gRPC needs a
// client certificate of the cluster CA, and an interceptor puts the
// caller's Identity in the context and refuses what its role may not call
// (authz.go). The leader admits a grantor gossip told of only once its
// raft address shows that grantor's certificate (discovery.go). Grants,
// releases, expiries, membership changes and refusals are written to the
// audit trail with who made them (audit.go). With InMemoryRaft and a unix:
// RPCAddr, a node opens no port at all (dev).
package grantor
