package workload

import (
	"encoding/json"
	"errors"
	"os"
	"sync"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// Kinds of records. A call that can change the lease (acquire, release,
// run) is recorded twice, before it is made and when it returns, so that
// a call cut short by a kill stays in the history as one whose outcome is
// unknown. Checks are recorded once they return, with both instants.
const (
	// KindStart: the process started (Pid).
	KindStart = "start"
	// KindAcquire: an acquire is about to be sent (Op, Name, Owner, TTLMs,
	// WaitMs).
	KindAcquire = "acq"
	// KindAcquired: it was granted (Token, Deadline, Renewals) and the
	// client read the grant at At.
	KindAcquired = "acq_ok"
	// KindAcquireFailed: it failed (Code; Holder for lease_held).
	KindAcquireFailed = "acq_fail"
	// KindCheck: a check returned at End; Code is empty when the lease was
	// valid, with Deadline.
	KindCheck = "chk"
	// KindRelease: a release of Token is about to be sent.
	KindRelease = "rel"
	// KindReleased: it succeeded.
	KindReleased = "rel_ok"
	// KindReleaseFailed: it failed (Code).
	KindReleaseFailed = "rel_fail"
	// KindClose: the client closes the connection that owns the lease.
	KindClose = "close"
	// KindExit: the client exits, ending the pid-owned lease.
	KindExit = "exit"
	// KindGone: the client found its lease no longer valid (Code says
	// how) and stops acting on it.
	KindGone = "gone"
	// KindRun: `leaseside run` is about to be started (Op, Name, TTLMs,
	// WaitMs).
	KindRun = "run"
	// KindRunExit: it exited with Exit.
	KindRunExit = "run_exit"
	// KindChild: the command of a run started and read its grant from its
	// environment (Op is the run's, Token, Deadline, Pid).
	KindChild = "child"
	// KindChildEnd: the command stops acting on the lease and exits; Code
	// is "sigterm" when run told it to stop.
	KindChildEnd = "child_end"
	// KindProclaim: an election's leader is about to proclaim Value.
	KindProclaim = "proclaim"
	// KindProclaimed: it succeeded.
	KindProclaimed = "proclaim_ok"
	// KindProclaimFailed: it failed (Code).
	KindProclaimFailed = "proclaim_fail"
	// KindEvent: the holder read an event of its grant on its own
	// connection (Code: renewed, shortened, lost, released; Deadline,
	// Err the reason), after its client applied it to the lease.
	KindEvent = "ev"
)

// Codes of failures that are not the daemon's error codes.
const (
	// CodeTimeout: the client gave up waiting for the reply.
	CodeTimeout = "client_timeout"
	// CodeConnection: the connection to the daemon failed or ended.
	CodeConnection = "connection"
	// CodeDeadline: the client's own reading of CLOCK_BOOTTIME passed the
	// deadline (or the Go client ended the lease).
	CodeDeadline = "deadline"
	// CodeReacquire: the client's acquire of what it held failed, and it
	// stopped using the grant it had.
	CodeReacquire = "reacquire_failed"
)

// Record is one line a client or a command of run writes on its standard
// output: something it did or saw, stamped with CLOCK_BOOTTIME, the one
// clock every process of the machine shares.
type Record struct {
	Kind   string `json:"k"`
	Client string `json:"c"`
	// Op names one call, unique in the run: CLIENT.INCARNATION.SEQ. The
	// grant an acquire (or a run) obtained is named by its Op: it is the
	// holder's identity in the history.
	Op    string `json:"op,omitempty"`
	Pid   int    `json:"pid,omitempty"`
	Name  string `json:"n,omitempty"`
	Owner string `json:"o,omitempty"`
	// TTLMs and WaitMs are the acquire's term and wait, Limit a
	// semaphore's; Value an elect's or a proclaim's value.
	TTLMs  int64  `json:"ttl,omitempty"`
	WaitMs int64  `json:"wait,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	Value  string `json:"value,omitempty"`
	// Token is the grant's fencing token; Holder the one a lease_held
	// refusal named.
	Token  uint64 `json:"tok,omitempty"`
	Holder uint64 `json:"holder,omitempty"`
	// Deadline is the grant's deadline on CLOCK_BOOTTIME, in nanoseconds;
	// Renewals the count of renewals its reply said it had.
	Deadline int64  `json:"dl,omitempty"`
	Renewals int64  `json:"renewals,omitempty"`
	Code     string `json:"code,omitempty"`
	Err      string `json:"err,omitempty"`
	Exit     int    `json:"exit,omitempty"`
	// At is when it happened (for a check: when it was sent), End when a
	// check returned; both CLOCK_BOOTTIME nanoseconds.
	At  int64 `json:"t"`
	End int64 `json:"end,omitempty"`
}

// now reads CLOCK_BOOTTIME.
func now() int64 { return clockwatch.System.Now().Nanoseconds() }

// recorder writes records as JSON lines on standard output, one write(2)
// each (a line is far below PIPE_BUF, so lines of processes sharing the
// pipe never interleave), unbuffered: a record written before a kill is
// never lost.
type recorder struct {
	mu     sync.Mutex
	client string
}

func (r *recorder) add(rec Record) {
	rec.Client = r.client
	b, err := json.Marshal(rec)
	if err != nil {
		panic(err) // a Record always marshals
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

// code classifies an error of a socket call.
func code(err error, timedOut bool) string {
	var ie *ipc.Error
	switch {
	case errors.As(err, &ie):
		return ie.Code
	case timedOut:
		return CodeTimeout
	default:
		return CodeConnection
	}
}

// Ambiguous reports whether a failed acquire or release with this code
// may still have been applied by the grantors: the client cannot know,
// and the history must allow both.
func Ambiguous(code string) bool {
	switch code {
	case ipc.CodeLeaseHeld, ipc.CodeNotHeld, ipc.CodeTokenMismatch, ipc.CodeBadRequest,
		ipc.CodeInvalidName, ipc.CodeInvalidTTL, ipc.CodePermissionDenied, ipc.CodeBadJSON, ipc.CodeUnknownOp:
		return false
	}
	return true
}

// Write is a write to the fenced register (one JSON line on its socket):
// the writer's token, and the deadline it holds the lease until as far as
// it knows (the register refuses a write that arrives after it).
type Write struct {
	Name string `json:"n"`
	// Holder is the Op of the grant the writer holds.
	Holder   string `json:"h"`
	Token    uint64 `json:"tok"`
	Deadline int64  `json:"dl"`
	// Kind is "pre" (right before a check of the lease) or "post" (right
	// after a check found it valid).
	Kind string `json:"kind"`
}

// WriteReply is the register's answer.
type WriteReply struct {
	Accepted bool `json:"ok"`
	// Reason says why a write was refused: "stale" (a higher token was
	// accepted before) or "late" (past the writer's deadline).
	Reason string `json:"reason,omitempty"`
}
