package grantor

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Holder watches (issue 12): the leader pushes, on a Watch stream, the
// holders of the names the stream watches and then every change it
// applies to them, in log order. Nothing polls: the FSM tells the hub of
// every change it applies (fsm.observe), and the hub appends it to the
// queue of every stream that watches the name, without ever blocking the
// FSM. A stream whose queue is full (its reader is slow) is dropped with
// RESOURCE_EXHAUSTED, and its sidecar opens a new one, which starts again
// from the holders at that moment: a slow reader loses only its place,
// never holds anyone up.
//
// A name added to a stream gets a SNAPSHOT of its holders and the index
// of the last entry applied, read under the hub's lock; a change reaches a
// stream only if its entry's index is later, so no change is missed or
// told twice around the snapshot. Every event carries the name's holders
// after its entry, so a reader needs no state of its own.
//
// Bounds: at most Config.MaxWatchStreams streams per caller identity, at
// most maxWatchNames names per stream, at most maxWatchQueue events queued
// per stream.

// Bounds of one Watch stream.
const (
	// DefaultMaxWatchStreams is Config.MaxWatchStreams by default.
	DefaultMaxWatchStreams = 256
	// maxWatchNames is the most names one stream watches.
	maxWatchNames = 4096
	// maxWatchQueue is the most events queued for one stream's reader.
	maxWatchQueue = 4096
)

// watchHub fans the FSM's changes out to watch streams. Lock order:
// watchHub.mu, then fsm.mu (through fsm.holders), then watchStream.mu.
type watchHub struct {
	fsm        *fsm
	maxStreams int // per identity; 0: no limit

	mu          sync.Mutex
	byName      map[string]map[*watchStream]struct{}
	perIdentity map[string]int
}

func newWatchHub(f *fsm, maxStreams int) *watchHub {
	return &watchHub{fsm: f, maxStreams: maxStreams, byName: map[string]map[*watchStream]struct{}{}, perIdentity: map[string]int{}}
}

// watchStream is one Watch stream's subscription.
type watchStream struct {
	hub      *watchHub
	identity string

	mu sync.Mutex
	// names maps each watched name to the index its snapshot was read
	// at: changes at or below it are in the snapshot already.
	names  map[string]uint64
	queue  []*grantorpb.WatchEvent
	wake   chan struct{} // 1-buffered: queue is not empty, or failed is set
	failed error
}

// open registers a new stream for identity, or refuses it when identity
// has as many as it may.
func (h *watchHub) open(identity string) (*watchStream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.maxStreams > 0 && h.perIdentity[identity] >= h.maxStreams {
		return nil, status.Errorf(codes.ResourceExhausted, "grantor: %q has %d watch streams open, the most one identity may (MaxWatchStreams)", identity, h.perIdentity[identity])
	}
	h.perIdentity[identity]++
	return &watchStream{hub: h, identity: identity, names: map[string]uint64{}, wake: make(chan struct{}, 1)}, nil
}

// close takes the stream out of the hub.
func (w *watchStream) close() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	w.mu.Lock()
	names := w.names
	w.names = map[string]uint64{}
	w.mu.Unlock()
	for name := range names {
		h.unsubscribeLocked(w, name)
	}
	if h.perIdentity[w.identity]--; h.perIdentity[w.identity] <= 0 {
		delete(h.perIdentity, w.identity)
	}
}

// add starts watching names: each gets its snapshot now, then its changes.
func (w *watchStream) add(names []string) error {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		w.mu.Lock()
		_, dup := w.names[name]
		n := len(w.names)
		w.mu.Unlock()
		if dup {
			continue
		}
		if n >= maxWatchNames {
			return status.Errorf(codes.ResourceExhausted, "grantor: a watch stream watches at most %d names", maxWatchNames)
		}
		limit, hs, index := h.fsm.holders(name)
		ev := &grantorpb.WatchEvent{Lease: name, Kind: grantorpb.WatchEvent_SNAPSHOT, Index: index}
		setHolders(ev, limit, hs)
		w.mu.Lock()
		w.names[name] = index
		w.pushLocked(ev)
		w.mu.Unlock()
		subs := h.byName[name]
		if subs == nil {
			subs = map[*watchStream]struct{}{}
			h.byName[name] = subs
		}
		subs[w] = struct{}{}
	}
	return nil
}

// remove stops watching names.
func (w *watchStream) remove(names []string) {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		w.mu.Lock()
		_, ok := w.names[name]
		delete(w.names, name)
		w.mu.Unlock()
		if ok {
			h.unsubscribeLocked(w, name)
		}
	}
}

func (h *watchHub) unsubscribeLocked(w *watchStream, name string) {
	if subs := h.byName[name]; subs != nil {
		delete(subs, w)
		if len(subs) == 0 {
			delete(h.byName, name)
		}
	}
}

// take returns the queued events, in order, or the stream's failure.
func (w *watchStream) take() ([]*grantorpb.WatchEvent, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return nil, w.failed
	}
	q := w.queue
	w.queue = nil
	return q, nil
}

// pushLocked queues ev, or fails the stream when its queue is full. The
// caller holds w.mu.
func (w *watchStream) pushLocked(ev *grantorpb.WatchEvent) {
	if w.failed != nil {
		return
	}
	if len(w.queue) >= maxWatchQueue {
		w.failed = status.Errorf(codes.ResourceExhausted, "grantor: the watch stream fell %d events behind; open a new one to start again from the holders now", len(w.queue))
		w.queue = nil
	} else {
		w.queue = append(w.queue, ev)
	}
	poke(w.wake)
}

// failAll ends every stream with err (the state was replaced).
func (h *watchHub) failAll(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.byName {
		for w := range subs {
			w.mu.Lock()
			if w.failed == nil {
				w.failed, w.queue = err, nil
				poke(w.wake)
			}
			w.mu.Unlock()
		}
	}
}

// publish is the FSM's observer: it queues ev for every stream that
// watches its name. It runs on raft's FSM goroutine, after the entry was
// applied, and never blocks.
func (h *watchHub) publish(ev fsmEvent) {
	var kind grantorpb.WatchEvent_Kind
	switch {
	case ev.Kind == evRestored:
		h.failAll(status.Error(codes.Unavailable, "grantor: the state was replaced from a snapshot; watch again"))
		return
	case ev.Kind == evGranted && !ev.Retry:
		kind = grantorpb.WatchEvent_ACQUIRED
	case ev.Kind == evFreed && ev.Why == freedReleased:
		kind = grantorpb.WatchEvent_RELEASED
	case ev.Kind == evFreed:
		kind = grantorpb.WatchEvent_EXPIRED
	case ev.Kind == evProclaimed:
		kind = grantorpb.WatchEvent_PROCLAIMED
	default:
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := h.byName[ev.Lease]
	if len(subs) == 0 {
		return
	}
	limit, hs, _ := h.fsm.holders(ev.Lease)
	out := &grantorpb.WatchEvent{Lease: ev.Lease, Kind: kind, Token: ev.Rec.Token, HolderName: ev.HolderName,
		Value: ev.Rec.Value, Replaced: ev.Replaced, Index: ev.Index}
	setHolders(out, limit, hs)
	for w := range subs {
		w.mu.Lock()
		if ev.Index > w.names[ev.Lease] {
			w.pushLocked(out)
		}
		w.mu.Unlock()
	}
}

// streams returns how many streams are open (metrics, tests).
func (h *watchHub) streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.perIdentity {
		n += c
	}
	return n
}

func setHolders(ev *grantorpb.WatchEvent, limit int, hs []holderView) {
	ev.Limit = uint32(limit)
	ev.Holders = make([]*grantorpb.Holder, len(hs))
	for i, x := range hs {
		ev.Holders[i] = &grantorpb.Holder{Token: x.Token, HolderName: x.HolderName, Value: x.Value}
	}
}

// validWatch checks a WatchRequest.
func validWatch(req *grantorpb.WatchRequest) error {
	if n := len(req.GetAdd()) + len(req.GetRemove()); n > maxWatchNames {
		return invalid("add", "%d names in one watch request, more than %d", n, maxWatchNames)
	}
	for _, names := range [][]string{req.GetAdd(), req.GetRemove()} {
		for _, name := range names {
			if err := validLeaseName("add", name); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
		}
	}
	return nil
}
