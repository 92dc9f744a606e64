package ipc

import (
	"strconv"
	"time"
)

// ProtocolVersion is the version of the socket protocol this package speaks.
// PROTOCOL.md keeps the history.
const ProtocolVersion = 5

// MaxLineBytes is the longest request line the server reads; longer lines
// are answered with CodeLineTooLong and skipped.
const MaxLineBytes = 64 << 10

// Operations a request may name.
const (
	OpHello   = "hello"
	OpAcquire = "acquire"
	OpRelease = "release"
	OpStatus  = "status"
	OpRenew   = "renew"
	OpCheck   = "check"
	OpWatch   = "watch"
	OpClock   = "clock"
	OpMembers = "members"
	// OpResetRho lowers the drift bound the daemon computes deadlines
	// with back to what is configured and observed now (root or the
	// daemon's own uid only).
	OpResetRho = "reset_rho"
	// OpLeases lists the leases of the whole cluster, as the grantor
	// leader sees them (root or the daemon's own uid only; leases.go).
	OpLeases = "leases"
)

// Owner bindings an acquire may ask for.
const (
	// OwnerConnection binds the lease to the socket connection that
	// acquired it: it is released when that connection closes.
	OwnerConnection = "connection"
	// OwnerPID binds the lease to a process: it is released when the
	// process ends.
	OwnerPID = "pid"
	// OwnerDetached binds the lease to nothing: it is held until released.
	OwnerDetached = "detached"
)

// Request is one line from a client.
type Request struct {
	// ID is echoed in the response.
	ID uint64 `json:"id"`
	// Op is one of the Op constants.
	Op string `json:"op"`
	// Lease names the lease for acquire and release.
	Lease string `json:"lease,omitempty"`
	// TTLMs is the lease term in milliseconds (acquire).
	TTLMs int64 `json:"ttl_ms,omitempty"`
	// WaitMs is how long to wait for a held lease, in milliseconds (acquire).
	WaitMs int64 `json:"wait_ms,omitempty"`
	// Owner is the binding: OwnerConnection (the default), OwnerPID or
	// OwnerDetached (acquire).
	Owner string `json:"owner,omitempty"`
	// OwnerPID is the owning process when Owner is OwnerPID.
	OwnerPID int `json:"owner_pid,omitempty"`
	// LockDelayMs is how long, after its owner ends without releasing,
	// the lease stays held so that nobody else takes it (acquire).
	LockDelayMs int64 `json:"lock_delay_ms,omitempty"`
	// NoRenew asks the daemon not to renew the lease on its own; it lapses
	// at its deadline unless renewed with the renew op (acquire).
	NoRenew bool `json:"no_renew,omitempty"`
	// Token, when given, must be the lease's token (check, release,
	// renew, proclaim, resign): it keeps a caller from acting on a newer
	// grant of the name. check_token requires it.
	Token string `json:"token,omitempty"`
	// Limit, above 1, makes the lease a semaphore of that many holders
	// (acquire; prims.go).
	Limit int `json:"limit,omitempty"`
	// Shared asks for a shared grant of a read/write lock (acquire,
	// protocol 5): any number of shared holders, or one exclusive.
	Shared bool `json:"shared,omitempty"`
	// Value is an election candidate's value (elect, proclaim).
	Value *string `json:"value,omitempty"`
	// Holders asks watch for the cluster-wide holders of the named lease
	// rather than this host's events.
	Holders bool `json:"holders,omitempty"`
	// Reason (release, protocol 4) says why its owner gives the lease up:
	// "" for a plain release, or ReasonRenewFailed when the owner stopped
	// using it because it could not be renewed in time; the daemon then
	// reports it lost with that reason rather than released.
	Reason string `json:"reason,omitempty"`
	// Prefix and After choose the names of a leases request: those that
	// start with Prefix, after After (the previous page's last name).
	Prefix string `json:"prefix,omitempty"`
	After  string `json:"after,omitempty"`
	// Resume is the secret of op resume (resume.go): the one the grant
	// gave.
	Resume string `json:"resume,omitempty"`
}

// LockDelay returns the requested lock-delay.
func (r *Request) LockDelay() time.Duration { return time.Duration(r.LockDelayMs) * time.Millisecond }

// TTL returns the requested term.
func (r *Request) TTL() time.Duration { return time.Duration(r.TTLMs) * time.Millisecond }

// Wait returns the requested wait.
func (r *Request) Wait() time.Duration { return time.Duration(r.WaitMs) * time.Millisecond }

// Response answers one request. Exactly one of Error or the op's result
// fields is set.
type Response struct {
	// ID echoes the request's id; null when the request's id could not be
	// read (malformed JSON).
	ID *uint64 `json:"id"`
	// OK is true when the request succeeded.
	OK bool `json:"ok"`
	// Error says why it did not.
	Error *Error `json:"error,omitempty"`

	// Hello is set in the answer to hello.
	*Hello
	// Grant is set in the answer to acquire.
	*Grant
	// Leases is set in the answer to status (possibly empty).
	Leases *[]Grant `json:"leases,omitempty"`
	// Clock is the daemon's view of its clock, in the answers to status
	// and clock.
	Clock *ClockStatus `json:"clock,omitempty"`
	// Grantor is the daemon's way to the grantor cluster, in the answer
	// to status.
	Grantor *GrantorStatus `json:"grantor,omitempty"`
	// Members and LeaderID answer members.
	Members  *[]Member `json:"members,omitempty"`
	LeaderID string    `json:"leader_id,omitempty"`
	// ReleasedToken answers release and resign (protocol 4): the token of
	// the grant released (one of a semaphore's slots the host holds more
	// than once, when the request named none).
	ReleasedToken string `json:"released_token,omitempty"`
	// Live and Tokens answer check_token.
	Live   *bool    `json:"live,omitempty"`
	Tokens []string `json:"tokens,omitempty"`
	// ClusterLeases and More answer leases: one page of the cluster's
	// leases, and whether names after its last one follow.
	ClusterLeases *[]ClusterLease `json:"cluster_leases,omitempty"`
	More          bool            `json:"more,omitempty"`
}

// Member is a grantor or a sidecar of the cluster, as a grantor sees it.
type Member struct {
	Name        string `json:"name"`
	Role        string `json:"role"`
	NodeID      string `json:"node_id,omitempty"`
	RPCAddr     string `json:"rpc_addr,omitempty"`
	RaftAddr    string `json:"raft_addr,omitempty"`
	GossipAddr  string `json:"gossip_addr,omitempty"`
	GossipState string `json:"gossip_state,omitempty"`
	Voter       bool   `json:"voter"`
	RaftState   string `json:"raft_state,omitempty"`
	// LastContactMs is how long ago the leader heard from this grantor;
	// -1 when unknown.
	LastContactMs int64  `json:"last_contact_ms"`
	Version       string `json:"version,omitempty"`
}

// GrantorStatus is how the daemon reaches the grantor cluster.
type GrantorStatus struct {
	// LeaderReachable is true when the daemon's latest exchange that
	// needed the grantor leader (a renewal, a grant, a probe it sends
	// after 6 s without any other) was answered, 8 s ago at most.
	LeaderReachable bool `json:"leader_reachable"`
	// Leader is the address of the grantor that last answered as leader.
	Leader string `json:"leader,omitempty"`
	// SinceContactMs is how long ago that was; -1 when never.
	SinceContactMs int64 `json:"since_contact_ms"`
	// Error says why the latest exchange failed, when it did.
	Error string `json:"error,omitempty"`
	// Known are the grantors' gRPC addresses the daemon knows; FoundBy
	// says how it found them: "grantors" (configured) or "gossip".
	Known   []string `json:"known"`
	FoundBy string   `json:"found_by"`
}

// ClockStatus is what the daemon knows about its clock: the kernel's
// discipline, the drift observed against the grantor, and the stalls and
// suspends it has seen.
type ClockStatus struct {
	// KernelSynced is false when the kernel says its clock is not
	// synchronised (adjtimex STA_UNSYNC or TIME_ERROR).
	KernelSynced bool `json:"kernel_synced"`
	// KernelFreqPPM is the kernel's frequency correction.
	KernelFreqPPM float64 `json:"kernel_freq_ppm"`
	// KernelMaxErrorMs is the kernel's maximum error estimate.
	KernelMaxErrorMs int64 `json:"kernel_max_error_ms"`
	// DriftPPM is the rate of this host's clock against the grantor
	// leader's, when enough keepalives have been seen (positive: fast).
	DriftPPM *float64 `json:"drift_ppm,omitempty"`
	// DriftSamples counts the keepalive samples behind DriftPPM.
	DriftSamples int `json:"drift_samples"`
	// RhoPPM is the configured drift bound; EffectiveRhoPPM the one
	// deadlines are computed with (never less).
	RhoPPM          float64 `json:"rho_ppm"`
	EffectiveRhoPPM float64 `json:"effective_rho_ppm"`
	// LongestRecentPauseMs is the longest stall of the daemon within the
	// last PauseWindowMs; Pauses counts stalls past the threshold.
	LongestRecentPauseMs int64  `json:"longest_recent_pause_ms"`
	PauseWindowMs        int64  `json:"pause_window_ms"`
	Pauses               uint64 `json:"pauses"`
	// Suspends counts host suspends seen, SuspendedMs their total length.
	Suspends    uint64 `json:"suspends"`
	SuspendedMs int64  `json:"suspended_ms"`
	// PauseHistogram counts the daemon's wake-up lateness by bucket
	// (clock op only).
	PauseHistogram []Bucket `json:"pause_histogram,omitempty"`
}

// Bucket is one histogram bucket: Count values at most LeMs (the last
// bucket, LeMs -1, has the rest).
type Bucket struct {
	LeMs  float64 `json:"le_ms"`
	Count uint64  `json:"count"`
}

// Hello describes the server.
type Hello struct {
	Server   string `json:"server"`
	Version  string `json:"version"`
	Protocol int    `json:"protocol"`
	// Session is the sidecar's grantor session.
	Session string `json:"session,omitempty"`
	// MinTTLMs and MaxTTLMs are the terms acquire accepts.
	MinTTLMs int64 `json:"min_ttl_ms,omitempty"`
	MaxTTLMs int64 `json:"max_ttl_ms,omitempty"`
}

// Grant is a held lease as a client sees it.
type Grant struct {
	// Lease is the lease name.
	Lease string `json:"lease"`
	// Token is the fencing token, a decimal string (safe for JavaScript).
	Token string `json:"token"`
	// DeadlineBoottimeNs is the instant, on CLOCK_BOOTTIME, after which the
	// holder must assume it no longer holds the lease.
	DeadlineBoottimeNs int64 `json:"deadline_boottime_ns"`
	// ValidMs is the validity left when the reply was written.
	ValidMs int64 `json:"valid_ms"`
	// Deadline is the same instant as wall-clock time, for humans only.
	Deadline string `json:"deadline"`
	// TTLMs is the lease term.
	TTLMs int64 `json:"ttl_ms"`
	// Owner is the binding (OwnerConnection, OwnerPID, OwnerDetached).
	Owner string `json:"owner"`
	// OwnerPID is the owning process for OwnerPID bindings.
	OwnerPID int `json:"owner_pid,omitempty"`
	// LockDelayMs is the lease's lock-delay.
	LockDelayMs int64 `json:"lock_delay_ms,omitempty"`
	// NoRenew is set for leases the daemon does not renew on its own.
	NoRenew bool `json:"no_renew,omitempty"`
	// Renewals counts the daemon's renewals of this grant; RenewalLatencyUs
	// is the round trip of the last one, in microseconds; RenewedAgoMs is
	// how long ago the renewal that set the current deadline was sent
	// (status).
	Renewals         int64 `json:"renewals,omitempty"`
	RenewalLatencyUs int64 `json:"renewal_latency_us,omitempty"`
	RenewedAgoMs     int64 `json:"renewed_ago_ms,omitempty"`
	// Limit is a semaphore's limit (absent for an exclusive lease), and
	// Holders how many grants of it stood, cluster-wide, when this one
	// was made.
	Limit   int `json:"limit,omitempty"`
	Holders int `json:"holders,omitempty"`
	// Shared is set for a shared grant of a read/write lock (protocol 5);
	// Holders is then how many grants of the name, all shared, stood when
	// this one was made.
	Shared bool `json:"shared,omitempty"`
	// Value is the grant's value (elect, proclaim).
	Value string `json:"value,omitempty"`
	// Resume is the secret that resumes a lease owned by the connection
	// after a restart of the daemon (op resume): given only to the
	// connection that acquired it, by a daemon that keeps state.
	Resume string `json:"resume,omitempty"`
}

// NewGrant fills a Grant whose deadline is deadlineNs on CLOCK_BOOTTIME,
// as seen at nowNs on the same clock.
func NewGrant(lease string, token uint64, ttl time.Duration, deadlineNs, nowNs int64) *Grant {
	valid := time.Duration(deadlineNs - nowNs)
	return &Grant{
		Lease:              lease,
		Token:              strconv.FormatUint(token, 10),
		DeadlineBoottimeNs: deadlineNs,
		ValidMs:            valid.Milliseconds(),
		Deadline:           time.Now().Add(valid).UTC().Format(time.RFC3339Nano),
		TTLMs:              ttl.Milliseconds(),
	}
}

// TokenValue parses Token.
func (g *Grant) TokenValue() (uint64, error) { return strconv.ParseUint(g.Token, 10, 64) }

// Events pushed by the server.
const (
	// EventLost: the lease is no longer held; stop acting on it now.
	EventLost = "lost"
	// EventReleased: the lease was released (by its owner or another
	// caller on this host).
	EventReleased = "released"
	// EventRenewed: the lease was renewed; the event carries the new
	// deadline.
	EventRenewed = "renewed"
	// EventAcquired: a lease was acquired on this host (sent to watchers).
	EventAcquired = "acquired"
	// EventOwnerGone: the owner process of a lease has been stopped too
	// long (ReasonOwnerStopped); the lease is no longer renewed.
	EventOwnerGone = "owner_gone"
	// EventSuspend: the host was suspended (length_ms); leases whose
	// deadline passed meanwhile are lost with reason suspended.
	EventSuspend = "suspend"
	// EventPause: the daemon itself stalled (length_ms).
	EventPause = "pause"
	// EventDrift: this host's clock runs against the grantor's faster
	// than rho allows (rate_ppm); deadlines now use the observed rate.
	EventDrift = "drift"
	// EventUnsynced: the kernel reports its clock unsynchronised.
	EventUnsynced = "unsynced"
	// EventShortened: the lease's deadline moved earlier (a drift found
	// after it was told); the event carries the new deadline, which
	// replaces the old one even though it is earlier.
	EventShortened = "shortened"
)

// Reasons a lease is lost.
const (
	// ReasonRenewFailed: renewals failed until the deadline passed, or
	// until its owner (run, elect) stopped using the lease as the
	// deadline came near and gave it up (a release with this reason).
	ReasonRenewFailed = "renew_failed"
	// ReasonDeadlinePassed: the deadline passed before a renewal could
	// be made.
	ReasonDeadlinePassed = "deadline_passed"
	// ReasonRevoked: the grantor says the lease is no longer this
	// holder's.
	ReasonRevoked = "revoked"
	// ReasonReleasedByAdmin: another local caller released the lease.
	ReasonReleasedByAdmin = "released_by_admin"
	// ReasonSuspended: the host was suspended past the deadline.
	ReasonSuspended = "suspended"
	// ReasonDrift: the clock drift observed against the grantor is larger
	// than the rate the deadline was computed with (shortened).
	ReasonDrift = "drift"
	// ReasonExpired: a lease the daemon was not renewing (no_renew, or
	// its owner process stopped too long) reached its deadline: it lapsed,
	// as it was meant to unless renewed (protocol 4).
	ReasonExpired = "expired"
)

// Reasons a lease is released (event released), or its owner gone (event
// owner_gone).
const (
	// ReasonExplicitRelease: a release request ended it.
	ReasonExplicitRelease = "explicit_release"
	// ReasonOwnerExited: its owner process exited.
	ReasonOwnerExited = "owner_exited"
	// ReasonOwnerDisconnected: the connection that owned it closed.
	ReasonOwnerDisconnected = "owner_disconnected"
	// ReasonOwnerStopped (owner_gone only): its owner process has been
	// stopped too long; the lease is no longer renewed and lapses at its
	// deadline.
	ReasonOwnerStopped = "owner_stopped"
)

// Event is a line the server pushes without a request. Events have an
// "event" field and never an "id".
type Event struct {
	Event  string `json:"event"`
	Lease  string `json:"lease,omitempty"`
	Token  string `json:"token,omitempty"`
	Reason string `json:"reason,omitempty"`
	// DeadlineBoottimeNs and ValidMs are the new deadline, for renewed
	// and shortened.
	DeadlineBoottimeNs int64 `json:"deadline_boottime_ns,omitempty"`
	ValidMs            int64 `json:"valid_ms,omitempty"`
	// LateMs, for lost, is how long after the deadline the loss was
	// declared (the daemon or the host stalled), when it was.
	LateMs int64 `json:"late_ms,omitempty"`
	// LengthMs is the length of a suspend or pause.
	LengthMs int64 `json:"length_ms,omitempty"`
	// RatePPM is the observed drift, for drift.
	RatePPM float64 `json:"rate_ppm,omitempty"`
	// Change, Holder, Value, Holders and Limit describe a change of a
	// lease's holders cluster-wide (holder, leader; prims.go); Shared
	// says the holders are shared grants (protocol 5; Limit is then 0).
	Change  string   `json:"change,omitempty"`
	Holder  string   `json:"holder,omitempty"`
	Value   string   `json:"value,omitempty"`
	Holders []Holder `json:"holders,omitempty"`
	Limit   int      `json:"limit,omitempty"`
	Shared  bool     `json:"shared,omitempty"`
}
