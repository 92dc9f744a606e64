package ipc

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A wait beyond what one request carries is asked in turns of at most
// MaxWait while the lease is held elsewhere: WaitForever until it is
// granted, a finite one until it runs out; a wait up to MaxWait is one
// request; another error ends the wait at once.
func TestWaitInTurns(t *testing.T) {
	held := &Error{Code: CodeLeaseHeld, Message: "held"}
	granted := &Lease{}
	tests := []struct {
		name    string
		wait    time.Duration
		grantAt int // the call that is granted (0: none)
		failAt  int // the call that fails otherwise (0: none)
		calls   int
		turn0   time.Duration // the first turn asked, at least
		err     error
	}{
		{name: "no wait", wait: 0, calls: 1, err: held},
		{name: "within one request", wait: 30 * time.Minute, calls: 1, turn0: 30 * time.Minute, err: held},
		{name: "forever", wait: WaitForever, grantAt: 4, calls: 4, turn0: MaxWait},
		{name: "forever, then unavailable", wait: WaitForever, failAt: 3, calls: 3, turn0: MaxWait, err: ErrNoDaemon},
		{name: "longer than one request", wait: 90 * time.Minute, grantAt: 2, calls: 2, turn0: MaxWait},
		{name: "longer than one request, held throughout", wait: 150 * time.Minute, calls: 3, turn0: MaxWait, err: held},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var turns []time.Duration
			l, err := waitInTurns(context.Background(), tt.wait, func(turn time.Duration) (*Lease, error) {
				turns = append(turns, turn)
				switch len(turns) {
				case tt.grantAt:
					return granted, nil
				case tt.failAt:
					return nil, ErrNoDaemon
				}
				return nil, held
			})
			if len(turns) != tt.calls {
				t.Fatalf("%d requests (turns %v), want %d", len(turns), turns, tt.calls)
			}
			if turns[0] < tt.turn0 || turns[0] > MaxWait {
				t.Errorf("first turn %v, want %v to %v", turns[0], tt.turn0, MaxWait)
			}
			if tt.err == nil && (err != nil || l != granted) {
				t.Errorf("got %v, %v; want the grant", l, err)
			}
			if tt.err != nil && !errors.Is(err, tt.err) && err != tt.err {
				t.Errorf("got error %v, want %v", err, tt.err)
			}
		})
	}
	// The second turn of a 90-minute wait is what is left of it.
	var turns []time.Duration
	waitInTurns(context.Background(), 90*time.Minute, func(turn time.Duration) (*Lease, error) {
		turns = append(turns, turn)
		if len(turns) == 2 {
			return granted, nil
		}
		return nil, held
	})
	if len(turns) != 2 || turns[1] != 30*time.Minute {
		t.Errorf("turns of a 90-minute wait: %v, want 1h then 30m", turns)
	}
}
