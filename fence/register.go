package fence

import (
	"fmt"
	"sync"
	"time"
)

// Write is one write a Register was asked to make.
type Write struct {
	// Seq orders the writes as the register saw them.
	Seq uint64
	// Writer names who wrote (for reports).
	Writer string
	// Token is the fencing token the write carried.
	Token uint64
	// Value is what was written.
	Value string
	// Accepted says whether the register took the write.
	Accepted bool
	// At is when the register handled it (wall clock, for reports only).
	At time.Time
}

// Register is a fenced register for one lease: it holds one value, takes
// a write only with a token no lower than any it has accepted, and keeps
// the history of every write it was asked to make, for CheckHistory.
// Safe for concurrent use.
type Register struct {
	mu      sync.Mutex
	guard   Guard
	lease   string
	value   string
	history []Write
}

// NewRegister returns an empty register fenced on the named lease.
func NewRegister(lease string) *Register { return &Register{lease: lease} }

// Write sets the value if token is admitted, and records the attempt.
func (r *Register) Write(writer string, token uint64, value string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.guard.Admit(r.lease, token)
	r.history = append(r.history, Write{Seq: uint64(len(r.history)) + 1, Writer: writer, Token: token, Value: value, Accepted: err == nil, At: time.Now()})
	if err == nil {
		r.value = value
	}
	return err
}

// Value returns the current value.
func (r *Register) Value() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.value
}

// History returns a copy of every write attempt, in order.
func (r *Register) History() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.history...)
}

// CheckHistory verifies a fenced register's history: no write was
// accepted with a token lower than one accepted before it, and every
// refused write was refused for a reason (a higher token had been
// accepted). It returns the first violation found.
func CheckHistory(h []Write) error {
	var highest uint64
	var by Write
	for _, w := range h {
		switch {
		case w.Accepted && w.Token < highest:
			return fmt.Errorf("fence: write %d by %s with token %d accepted after write %d by %s with token %d", w.Seq, w.Writer, w.Token, by.Seq, by.Writer, by.Token)
		case !w.Accepted && w.Token >= highest:
			return fmt.Errorf("fence: write %d by %s with token %d refused though no higher token (highest %d) was accepted", w.Seq, w.Writer, w.Token, highest)
		case w.Accepted:
			highest, by = w.Token, w
		}
	}
	return nil
}
