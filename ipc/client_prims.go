package ipc

import (
	"context"
	"fmt"
	"time"
)

// The Go client's side of protocol 3 (prims.go): elections (Campaign,
// Proclaim, Resign, Observe), semaphores (AcquireOptions.Limit), holder
// watches, token checks at the grantor, and each lease's state: Safe,
// Jeopardy (renewals have failed for a third of its term; it is still
// held) and Lost.

// State is a lease's state as the daemon tells it.
type State int

const (
	// Safe: held, and renewing as it should.
	Safe State = iota
	// Jeopardy: held, but renewals have failed for a third of the term;
	// the deadline may come without a renewal. Finish or pause what
	// cannot be cut off at the deadline.
	Jeopardy
	// Lost: no longer held (Done is closed).
	Lost
)

func (s State) String() string {
	switch s {
	case Safe:
		return "safe"
	case Jeopardy:
		return "jeopardy"
	case Lost:
		return "lost"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// State returns the lease's state now, and a channel closed at its next
// change.
func (l *Lease) State() (State, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state, l.stateCh
}

// CurrentValue returns the lease's value: Grant.Value as granted, or as
// last proclaimed through this client.
func (l *Lease) CurrentValue() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.proclaimed != nil {
		return *l.proclaimed
	}
	return l.Grant.Value
}

func (l *Lease) setStateLocked(s State) {
	if l.state == s || l.state == Lost {
		return
	}
	l.state = s
	close(l.stateCh)
	l.stateCh = make(chan struct{})
}

// Campaign runs for leader of the election name with value (an address,
// say): it waits in line until it leads, and returns the lease that makes
// it leader, or ctx's error. The lease ends like any other (Done); a
// leader that is done leading calls Resign. opt.TTL is required; opt.Wait,
// when set and not WaitForever, bounds the wait (then the error matches
// ErrLeaseHeld); unset, the candidate waits without a limit.
func (c *Client) Campaign(ctx context.Context, name, value string, opt AcquireOptions) (*Lease, error) {
	wait := opt.Wait
	if wait <= 0 {
		wait = WaitForever
	}
	return waitInTurns(ctx, wait, func(wait time.Duration) (*Lease, error) {
		req := &Request{Op: OpElect, Lease: name, TTLMs: opt.TTL.Milliseconds(), WaitMs: wait.Milliseconds(),
			Owner: opt.Owner, OwnerPID: opt.OwnerPID, LockDelayMs: opt.LockDelay.Milliseconds(), Value: &value}
		return c.acquire(ctx, req)
	})
}

func isHeld(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == CodeLeaseHeld
}

// Proclaim publishes a new value for the lease l, which this client holds,
// keeping its token.
func (c *Client) Proclaim(ctx context.Context, l *Lease, value string) error {
	resp, err := c.call(ctx, &Request{Op: OpProclaim, Lease: l.Lease, Token: l.Token, Value: &value})
	if err != nil {
		return err
	}
	if resp.Grant == nil {
		return fmt.Errorf("ipc: proclaim reply without a grant")
	}
	v := resp.Grant.Value
	l.mu.Lock()
	l.proclaimed = &v
	l.mu.Unlock()
	return nil
}

// Resign gives up leadership: it releases l.
func (c *Client) Resign(ctx context.Context, l *Lease) error {
	_, err := c.call(ctx, &Request{Op: OpResign, Lease: l.Lease, Token: l.Token})
	if err == nil {
		c.endLease(l.Lease, l.Token, EventReleased)
	}
	return err
}

// Leader is what Observe reports: the holder of an election (Holder
// nil: nobody leads).
type Leader struct {
	Lease  string
	Holder *Holder
}

// observer is one Observe caller: the latest leader it has not read yet.
type observer struct {
	ch   chan Leader // 1-buffered: the latest wins
	done <-chan struct{}
}

// Observe follows the leader of the election name, cluster-wide: the
// channel gets the leader as it is now, then every change (a new leader,
// a new value, nobody leading). A reader that falls behind gets the
// latest state, not every step. The channel is closed when ctx ends or
// the connection to the daemon closes (the subscription itself lasts as
// long as the connection), or when the grantors refuse to watch name (a
// watch_refused event on the Notify channels says why).
func (c *Client) Observe(ctx context.Context, name string) (<-chan Leader, error) {
	if _, err := c.connect(ctx); err != nil {
		return nil, err
	}
	o := &observer{ch: make(chan Leader, 1), done: ctx.Done()}
	c.mu.Lock()
	c.observers[name] = append(c.observers[name], o)
	c.mu.Unlock()
	if _, err := c.call(ctx, &Request{Op: OpObserve, Lease: name}); err != nil {
		c.dropObserver(name, o)
		return nil, err
	}
	out := make(chan Leader)
	go func() {
		defer close(out)
		defer c.dropObserver(name, o)
		for {
			select {
			case v, ok := <-o.ch:
				if !ok {
					return
				}
				select {
				case out <- v:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (c *Client) dropObserver(name string, o *observer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	os := c.observers[name]
	for i, x := range os {
		if x == o {
			c.observers[name] = append(os[:i:i], os[i+1:]...)
			break
		}
	}
	if len(c.observers[name]) == 0 {
		delete(c.observers, name)
	}
}

// endObservers closes every observer's channel: the connection ended.
func (c *Client) endObservers() {
	c.mu.Lock()
	obs := c.observers
	c.observers = map[string][]*observer{}
	c.mu.Unlock()
	for _, os := range obs {
		for _, o := range os {
			close(o.ch)
		}
	}
}

// WatchHolders subscribes this connection to the holders of name,
// cluster-wide: holder events (EventHolder) arrive on the Notify
// channels, the first one (ChangeSync) with the holders as they are.
func (c *Client) WatchHolders(ctx context.Context, name string) error {
	_, err := c.call(ctx, &Request{Op: OpWatch, Lease: name, Holders: true})
	return err
}

// CheckToken asks the grantor cluster whether token is a live grant of
// name, and which grants of it stand now. A true answer is only as good
// as the time between it and the write it guards.
func (c *Client) CheckToken(ctx context.Context, name, token string) (live bool, tokens []string, err error) {
	resp, err := c.call(ctx, &Request{Op: OpCheckToken, Lease: name, Token: token})
	if err != nil {
		return false, nil, err
	}
	if resp.Live == nil {
		return false, nil, fmt.Errorf("ipc: check_token reply without live")
	}
	return *resp.Live, resp.Tokens, nil
}

// deliverPrims applies the events of protocol 3 to leases and observers.
// It runs on the reader goroutine, before the Notify channels get ev.
func (c *Client) deliverPrims(ev *Event) {
	switch ev.Event {
	case EventJeopardy, EventSafe:
		c.mu.Lock()
		l := c.leases[ev.Lease]
		c.mu.Unlock()
		if l == nil || l.Token != ev.Token {
			return
		}
		l.mu.Lock()
		if ev.Event == EventJeopardy {
			l.setStateLocked(Jeopardy)
		} else {
			l.setStateLocked(Safe)
		}
		l.mu.Unlock()
	case EventWatchRefused:
		// The subscription ended: its observers' channels close.
		c.mu.Lock()
		obs := c.observers[ev.Lease]
		delete(c.observers, ev.Lease)
		c.mu.Unlock()
		for _, o := range obs {
			close(o.ch)
		}
	case EventLeader, EventNoLeader:
		v := Leader{Lease: ev.Lease}
		if ev.Event == EventLeader {
			v.Holder = &Holder{Token: ev.Token, Holder: ev.Holder, Value: ev.Value}
		}
		c.mu.Lock()
		obs := append([]*observer(nil), c.observers[ev.Lease]...)
		c.mu.Unlock()
		for _, o := range obs {
			// The latest wins: a reader that fell behind skips to it.
			select {
			case <-o.ch:
			default:
			}
			o.ch <- v
		}
	}
}
