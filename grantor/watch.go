package grantor

import (
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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
// What a stream costs is charged to its identity's account (account.go):
// the stream (watch_streams), each name it watches (watch_names, over all
// its streams), and the bytes of the events queued for it or being sent
// (queued_bytes, over all its streams; review R8-1: a count bound alone
// let one identity queue gigabytes of snapshots). A stream opened past its
// identity's limit is refused, a request that would add names past it
// ends the stream, and a stream whose events would pass the bytes limit,
// or that falls maxWatchQueue events behind, is dropped like a slow
// reader; all with RESOURCE_EXHAUSTED naming the limit. A request that
// removes and adds one name changes nothing for it (no new snapshot), and
// removing a name drops its queued events, so a reader that re-adds names
// holds at most one snapshot of each.

const (
	// maxWatchRequestNames is the most names one WatchRequest adds and
	// removes.
	maxWatchRequestNames = 4096
	// maxWatchQueue is the most events queued for one stream's reader:
	// past it the reader is too slow, and starts again from a snapshot.
	maxWatchQueue = 4096
)

// watchHub fans the FSM's changes out to watch streams. Lock order:
// watchHub.mu, then fsm.mu (through fsm.holders), then watchStream.mu,
// then accounts.mu.
type watchHub struct {
	fsm      *fsm
	accounts *accounts

	mu      sync.Mutex
	byName  map[string]map[*watchStream]struct{}
	streamN int // streams open
}

func newWatchHub(f *fsm, a *accounts) *watchHub {
	return &watchHub{fsm: f, accounts: a, byName: map[string]map[*watchStream]struct{}{}}
}

// watchStream is one Watch stream's subscription.
type watchStream struct {
	hub  *watchHub
	acct *account

	mu sync.Mutex
	// names maps each watched name to the index its snapshot was read
	// at: changes at or below it are in the snapshot already.
	names map[string]uint64
	queue []queuedEvent
	// queued counts the queued events of each name; bytes the encoded
	// bytes queued, inflight those of the events take last returned.
	queued          map[string]int
	bytes, inflight int
	wake            chan struct{} // 1-buffered: queue is not empty, or failed is set
	failed          error
}

// queuedEvent is an event in a stream's queue and its encoded size.
type queuedEvent struct {
	ev   *grantorpb.WatchEvent
	size int
}

// open registers a new stream of identity, charged to its account, or
// refuses it at the account's limit.
func (h *watchHub) open(identity Identity) (*watchStream, error) {
	acct, err := h.accounts.charge(identity, limWatchStreams, 1)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.streamN++
	return &watchStream{hub: h, acct: acct, names: map[string]uint64{}, queued: map[string]int{},
		wake: make(chan struct{}, 1)}, nil
}

// close takes the stream out of the hub.
func (w *watchStream) close() {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	w.mu.Lock()
	names := w.names
	w.names = map[string]uint64{}
	w.dropQueueLocked()
	w.mu.Unlock()
	for name := range names {
		h.unsubscribeLocked(w, name)
	}
	h.streamN--
	h.accounts.refund(w.acct, limWatchNames, len(names))
	h.accounts.refund(w.acct, limWatchStreams, 1)
}

// update applies one WatchRequest: it stops watching the names of remove
// that add does not name again (their queued events go), then starts
// watching those of add (each gets its snapshot now, then its changes). A
// name both removed and added stays as it is: no new snapshot.
func (w *watchStream) update(remove, add []string) error {
	if len(remove) > 0 {
		keep := make(map[string]bool, len(add))
		for _, name := range add {
			keep[name] = true
		}
		w.remove(slices.DeleteFunc(slices.Clone(remove), func(name string) bool { return keep[name] }))
	}
	return w.add(add)
}

// add starts watching names: each gets its snapshot now, then its changes.
// The names new to the stream are charged to its account first, all or
// none: past the limit nothing is added.
func (w *watchStream) add(names []string) error {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	w.mu.Lock()
	fresh := make(map[string]bool, len(names))
	for _, name := range names {
		if _, dup := w.names[name]; !dup {
			fresh[name] = true
		}
	}
	w.mu.Unlock()
	if len(fresh) == 0 {
		return nil
	}
	if _, err := h.accounts.charge(w.acct.id, limWatchNames, len(fresh)); err != nil {
		return err
	}
	for _, name := range names {
		if !fresh[name] {
			continue
		}
		delete(fresh, name)
		limit, shared, hs, index := h.fsm.holders(name)
		ev := &grantorpb.WatchEvent{Lease: name, Kind: grantorpb.WatchEvent_SNAPSHOT, Index: index}
		setHolders(ev, limit, shared, hs)
		w.mu.Lock()
		w.names[name] = index
		w.pushLocked(ev, proto.Size(ev))
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

// deny stops watching names, if the stream did, and queues one DENIED
// event for each: the name rules do not let the caller watch them.
func (w *watchStream) deny(names []string) {
	w.remove(names)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, name := range names {
		ev := &grantorpb.WatchEvent{Lease: name, Kind: grantorpb.WatchEvent_DENIED}
		w.pushLocked(ev, proto.Size(ev))
	}
}

// remove stops watching names and drops their queued events.
func (w *watchStream) remove(names []string) {
	h := w.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	drop, removed := false, 0
	for _, name := range names {
		w.mu.Lock()
		_, ok := w.names[name]
		delete(w.names, name)
		drop = drop || w.queued[name] > 0
		w.mu.Unlock()
		if ok {
			h.unsubscribeLocked(w, name)
			removed++
		}
	}
	h.accounts.refund(w.acct, limWatchNames, removed)
	if !drop {
		return
	}
	// One pass over the queue for the whole request.
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = slices.DeleteFunc(w.queue, func(q queuedEvent) bool {
		if _, watched := w.names[q.ev.Lease]; watched || q.ev.Kind == grantorpb.WatchEvent_DENIED {
			return false // a refusal is told whatever is removed after it
		}
		w.unqueueLocked(q)
		return true
	})
}

// unqueueLocked takes q's count and bytes off the stream's.
func (w *watchStream) unqueueLocked(q queuedEvent) {
	if w.queued[q.ev.Lease]--; w.queued[q.ev.Lease] <= 0 {
		delete(w.queued, q.ev.Lease)
	}
	w.bytes -= q.size
	w.acct.refundQueued(q.size)
}

// dropQueueLocked empties the queue and forgets what is being sent.
func (w *watchStream) dropQueueLocked() {
	w.acct.refundQueued(w.bytes + w.inflight)
	w.queue, w.queued, w.bytes, w.inflight = nil, map[string]int{}, 0, 0
}

func (h *watchHub) unsubscribeLocked(w *watchStream, name string) {
	if subs := h.byName[name]; subs != nil {
		delete(subs, w)
		if len(subs) == 0 {
			delete(h.byName, name)
		}
	}
}

// take returns the queued events, in order, or the stream's failure. The
// caller has sent what the previous take returned: those bytes are
// forgotten, and the ones returned now count until the next take.
func (w *watchStream) take() ([]*grantorpb.WatchEvent, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return nil, w.failed
	}
	evs := make([]*grantorpb.WatchEvent, len(w.queue))
	for i, q := range w.queue {
		evs[i] = q.ev
	}
	w.acct.refundQueued(w.inflight)
	w.inflight, w.bytes = w.bytes, 0
	w.queue, w.queued = nil, map[string]int{}
	return evs, nil
}

// pushLocked queues ev (size bytes encoded), or fails the stream when its
// queue is full or its account's queued bytes would pass their limit. The
// caller holds w.mu.
func (w *watchStream) pushLocked(ev *grantorpb.WatchEvent, size int) {
	if w.failed != nil {
		return
	}
	if len(w.queue) >= maxWatchQueue {
		w.failLocked(status.Errorf(codes.ResourceExhausted, "grantor: the watch stream fell %d events behind; open a new one to start again from the holders now", len(w.queue)))
		return
	}
	if err := w.acct.chargeQueued(size); err != nil {
		w.failLocked(status.Error(codes.ResourceExhausted, err.Error()+"; read the events, or watch fewer names"))
		return
	}
	w.queue = append(w.queue, queuedEvent{ev: ev, size: size})
	w.queued[ev.Lease]++
	w.bytes += size
	poke(w.wake)
}

// failLocked ends the stream with err and drops its queue. The caller
// holds w.mu.
func (w *watchStream) failLocked(err error) {
	w.failed = err
	w.dropQueueLocked()
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
				w.failLocked(err)
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
	limit, shared, hs, _ := h.fsm.holders(ev.Lease)
	out := &grantorpb.WatchEvent{Lease: ev.Lease, Kind: kind, Token: ev.Rec.Token, HolderName: ev.HolderName,
		Value: ev.Rec.Value, Replaced: ev.Replaced, Index: ev.Index}
	setHolders(out, limit, shared, hs)
	size := proto.Size(out)
	for w := range subs {
		w.mu.Lock()
		if ev.Index > w.names[ev.Lease] {
			w.pushLocked(out, size)
		}
		w.mu.Unlock()
	}
}

// streams returns how many streams are open (metrics, tests).
func (h *watchHub) streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.streamN
}

func setHolders(ev *grantorpb.WatchEvent, limit int, shared bool, hs []holderView) {
	ev.Limit, ev.Shared = uint32(limit), shared
	ev.Holders = make([]*grantorpb.Holder, len(hs))
	for i, x := range hs {
		ev.Holders[i] = &grantorpb.Holder{Token: x.Token, HolderName: x.HolderName, Value: x.Value}
	}
}

// validWatch checks a WatchRequest.
func validWatch(req *grantorpb.WatchRequest) error {
	if n := len(req.GetAdd()) + len(req.GetRemove()); n > maxWatchRequestNames {
		return invalid("add", "%d names in one watch request, more than %d", n, maxWatchRequestNames)
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
