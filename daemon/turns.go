package daemon

import (
	"context"
	"sync"
)

// turns serialises the requests of one owner for one lease name: at most
// one holds the turn of a (owner, name) pair at a time, and the others
// wait for it in no particular order. An entry lives only while someone
// holds or waits for its turn.
type turns struct {
	mu sync.Mutex
	m  map[turnKey]*turn
	// waiting, when set (by tests, under mu), is called whenever a
	// request has to wait for its turn.
	waiting func(owner, name string)
}

type turnKey struct{ owner, name string }

type turn struct {
	free chan struct{} // 1-buffered: holds a value while nobody has the turn
	refs int           // holders and waiters; guarded by turns.mu
}

// take waits for the turn of owner and name, or until ctx ends. The
// returned func gives the turn back; it must be called once.
func (t *turns) take(ctx context.Context, owner, name string) (done func(), err error) {
	k := turnKey{owner, name}
	t.mu.Lock()
	if t.m == nil {
		t.m = map[turnKey]*turn{}
	}
	tu := t.m[k]
	if tu == nil {
		tu = &turn{free: make(chan struct{}, 1)}
		tu.free <- struct{}{}
		t.m[k] = tu
	}
	tu.refs++
	waiting := t.waiting
	t.mu.Unlock()
	done = func() {
		tu.free <- struct{}{}
		t.drop(k, tu)
	}
	select {
	case <-tu.free:
		return done, nil
	default:
	}
	if waiting != nil {
		waiting(owner, name)
	}
	select {
	case <-tu.free:
		return done, nil
	case <-ctx.Done():
		t.drop(k, tu)
		return nil, ctx.Err()
	}
}

func (t *turns) drop(k turnKey, tu *turn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tu.refs--; tu.refs == 0 {
		delete(t.m, k)
	}
}

// size is how many (owner, name) pairs are held or waited for.
func (t *turns) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
