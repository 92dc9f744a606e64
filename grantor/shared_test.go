package grantor

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

func sharedAcq(session string, seq uint64, lease string) acquireCmd {
	c := acq(session, seq, lease, 10*time.Second)
	c.Shared = true
	return c
}

// fsmApplier applies entries to a fresh FSM with increasing indexes.
func fsmApplier() (*fsm, func(cmdType, any) any) {
	f := newFSM()
	i := uint64(0)
	return f, func(t cmdType, body any) any {
		i++
		return f.Apply(rlog{i, encodeCmd(t, body)}.log())
	}
}

// Rule: any number of shared grants stand together, each with the next
// token; an exclusive grant stands alone: an exclusive Acquire is refused
// while shared grants stand and a shared one while an exclusive grant
// does, the refusal naming the oldest holder and whether it is shared.
func TestSharedGrantsStandTogetherExclusiveAlone(t *testing.T) {
	f, apply := fsmApplier()
	var last uint64
	for i, s := range []string{"r1", "r2", "r3"} {
		r := apply(cmdAcquire9, sharedAcq(s, 1, "x")).(*acquireResult)
		if !r.Granted || !r.Shared || r.Token <= last || r.Holders != i+1 {
			t.Fatalf("reader %d: %+v (previous token %d)", i+1, r, last)
		}
		last = r.Token
	}
	first, _ := f.grant("x", last-2)
	w := apply(cmdAcquire9, acq("w", 1, "x", 10*time.Second)).(*acquireResult)
	if w.Granted || !w.Shared || w.Holders != 3 || w.Token != first.Token {
		t.Fatalf("writer beside readers: %+v", w)
	}
	apply(cmdAcquire9, acq("x1", 1, "y", 10*time.Second))
	if r := apply(cmdAcquire9, sharedAcq("r1", 2, "y")).(*acquireResult); r.Granted || r.Shared || r.Holders != 1 {
		t.Fatalf("reader beside a writer: %+v", r)
	}
	if n := f.leaseCount(); n != 4 {
		t.Fatalf("%d grants stand, want 4", n)
	}
}

// Rule: tokens fence writers: a shared grant's token is above every
// earlier exclusive grant's of the name, and an exclusive grant's above
// every earlier shared grant's.
func TestSharedTokensOrderWritersAndReaders(t *testing.T) {
	_, apply := fsmApplier()
	w1 := apply(cmdAcquire9, acq("w", 1, "x", 10*time.Second)).(*acquireResult)
	apply(cmdRelease7, releaseCmd{ID: requestID{Session: "w", Seq: 2}, Lease: "x", Owner: "o", Token: w1.Token})
	r1 := apply(cmdAcquire9, sharedAcq("r1", 1, "x")).(*acquireResult)
	r2 := apply(cmdAcquire9, sharedAcq("r2", 1, "x")).(*acquireResult)
	if !r1.Granted || !r2.Granted || r1.Token <= w1.Token || r2.Token <= w1.Token {
		t.Fatalf("readers after writer %d: %+v %+v", w1.Token, r1, r2)
	}
	apply(cmdRelease7, releaseCmd{ID: requestID{Session: "r1", Seq: 2}, Lease: "x", Owner: "o", Token: r1.Token})
	apply(cmdRelease7, releaseCmd{ID: requestID{Session: "r2", Seq: 2}, Lease: "x", Owner: "o", Token: r2.Token})
	w2 := apply(cmdAcquire9, acq("w", 3, "x", 10*time.Second)).(*acquireResult)
	if !w2.Granted || w2.Shared || w2.Token <= r1.Token || w2.Token <= r2.Token {
		t.Fatalf("writer after readers %d, %d: %+v", r1.Token, r2.Token, w2)
	}
}

// Rule: the last shared grant's release hands the name to a waiting
// writer in the same entry; one that leaves other readers does not.
func TestSharedReleaseHandsWriterTheNameWhenLastReaderLeaves(t *testing.T) {
	_, apply := fsmApplier()
	r1 := apply(cmdAcquire9, sharedAcq("r1", 1, "x")).(*acquireResult)
	r2 := apply(cmdAcquire9, sharedAcq("r2", 1, "x")).(*acquireResult)
	next := acq("w", 1, "x", 10*time.Second)
	rel := apply(cmdRelease7, releaseCmd{ID: requestID{Session: "r1", Seq: 2}, Lease: "x", Owner: "o", Token: r1.Token, Next: &next}).(*releaseResult)
	if !rel.Released || rel.Next == nil || rel.Next.Tried {
		t.Fatalf("release beside another reader tried the writer: %+v %+v", rel, rel.Next)
	}
	rel = apply(cmdRelease7, releaseCmd{ID: requestID{Session: "r2", Seq: 2}, Lease: "x", Owner: "o", Token: r2.Token, Next: &next}).(*releaseResult)
	if g, ok := rel.Next.Res.(*acquireResult); !rel.Next.Tried || !ok || !g.Granted || g.Shared || g.Token <= r2.Token {
		t.Fatalf("last reader's release: %+v %+v", rel.Next, rel.Next.Res)
	}
}

// Rule: a shared Acquire of a semaphore, or a semaphore's Acquire of a
// name held shared, is refused with a *SharedMismatchError (an invalid
// argument), and changes nothing.
func TestSharedAndSemaphoreDoNotMix(t *testing.T) {
	f, apply := fsmApplier()
	apply(cmdAcquire9, semAcq("s", 1, "sem", 3))
	apply(cmdAcquire9, sharedAcq("s", 2, "rw"))
	before := f.lastToken()
	for _, tc := range []struct {
		name   string
		c      acquireCmd
		shared bool
	}{
		{name: "shared on a semaphore", c: sharedAcq("t", 1, "sem"), shared: true},
		{name: "semaphore on a shared name", c: semAcq("t", 2, "rw", 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, _ := apply(cmdAcquire9, tc.c).(error)
			var sm *SharedMismatchError
			if !errors.As(err, &sm) || sm.Shared != tc.shared || !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("got %v, want a shared mismatch", err)
			}
		})
	}
	if f.lastToken() != before || f.leaseCount() != 2 {
		t.Fatal("a refused acquire changed the state")
	}
}

// Rule: the holder asking again ends its grant and starts a new one, of
// the kind it asks, when that kind has room beside the others: a reader
// alone becomes a writer; a reader beside another reader does not.
func TestSharedHolderAsksAgain(t *testing.T) {
	f, apply := fsmApplier()
	r := apply(cmdAcquire9, sharedAcq("r", 1, "x")).(*acquireResult)
	again := apply(cmdAcquire9, sharedAcq("r", 2, "x")).(*acquireResult)
	if !again.Granted || again.Token <= r.Token || again.Holders != 1 {
		t.Fatalf("reader again: %+v", again)
	}
	up := apply(cmdAcquire9, acq("r", 3, "x", 10*time.Second)).(*acquireResult)
	if !up.Granted || up.Shared || up.Token <= again.Token || f.isSemaphore("x") {
		t.Fatalf("lone reader asking exclusive: %+v", up)
	}
	down := apply(cmdAcquire9, sharedAcq("r", 4, "x")).(*acquireResult)
	if !down.Granted || !down.Shared || down.Token <= up.Token {
		t.Fatalf("writer asking shared: %+v", down)
	}
	apply(cmdAcquire9, sharedAcq("r2", 1, "x"))
	if w := apply(cmdAcquire9, acq("r", 5, "x", 10*time.Second)).(*acquireResult); w.Granted {
		t.Fatalf("a reader beside another became a writer: %+v", w)
	}
	if !f.heldBy("x", "r", "o") {
		t.Fatal("a refused upgrade ended the reader's grant")
	}
}

// Rule: a shared grant that ends without a release leaves a delay that
// keeps writers out, not readers; a writer's delay keeps everyone out.
func TestSharedLockDelayKeepsWritersOut(t *testing.T) {
	f, apply := fsmApplier()
	c := sharedAcq("r", 1, "x")
	c.LockDelay = time.Second
	g := apply(cmdAcquire9, c).(*acquireResult)
	apply(cmdExpireSession3, expireSessionCmd{Session: "r", Term: 1, Leases: []grantRef{{"x", g.Token}}})
	if d, ok := delayOf(f, "x"); !ok || !d.Shared {
		t.Fatalf("delay after a reader's expiry: %+v %v", d, ok)
	}
	if w := apply(cmdAcquire9, acq("w", 1, "x", 10*time.Second)).(*acquireResult); w.Granted || !w.Delayed || !w.Shared {
		t.Fatalf("writer during a reader's delay: %+v", w)
	}
	r2 := apply(cmdAcquire9, sharedAcq("r2", 1, "x")).(*acquireResult)
	if !r2.Granted {
		t.Fatalf("reader during a reader's delay: %+v", r2)
	}
	if err, _ := apply(cmdAcquire9, semAcq("s", 1, "x", 2)).(error); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("semaphore during a reader's delay: %v", err)
	}
	next := acq("w", 2, "x", 10*time.Second)
	end := apply(cmdEndDelay2, endDelayCmd{Lease: "x", Token: g.Token, Next: &next}).(*endDelayResult)
	if !end.Ended || end.Next.Tried {
		t.Fatalf("end of the delay beside a reader tried the writer: %+v %+v", end, end.Next)
	}
	apply(cmdRelease7, releaseCmd{ID: requestID{Session: "r2", Seq: 2}, Lease: "x", Owner: "o", Token: r2.Token})
	wc := acq("w", 3, "x", 10*time.Second)
	wc.LockDelay = time.Second
	w := apply(cmdAcquire9, wc).(*acquireResult)
	if !w.Granted {
		t.Fatalf("writer once the readers are gone: %+v", w)
	}
	apply(cmdRevoke, revokeCmd{Lease: "x", Token: w.Token})
	if r := apply(cmdAcquire9, sharedAcq("r3", 1, "x")).(*acquireResult); r.Granted || !r.Delayed || r.Shared {
		t.Fatalf("reader during a writer's delay: %+v", r)
	}
}

// Entries of types older than the shared ones never grant shared,
// whatever their JSON says, so every replica applies them alike; the
// entries for a cluster with an older grantor drop the flag.
func TestSharedOlderEntriesApplyExclusive(t *testing.T) {
	f, apply := fsmApplier()
	r := apply(cmdAcquire8, sharedAcq("r1", 1, "x")).(*acquireResult)
	if !r.Granted || r.Shared || f.isSemaphore("x") {
		t.Fatalf("cmdAcquire8 with shared: %+v", r)
	}
	if r := apply(cmdAcquire8, sharedAcq("r2", 1, "x")).(*acquireResult); r.Granted {
		t.Fatalf("a second cmdAcquire8 with shared was granted beside the first: %+v", r)
	}
	next := sharedAcq("r2", 2, "x")
	rel := apply(cmdRelease6, releaseCmd{ID: requestID{Session: "r1", Seq: 2}, Lease: "x", Owner: "o", Token: r.Token, Next: &next}).(*releaseResult)
	if g := rel.Next.Res.(*acquireResult); !g.Granted || g.Shared {
		t.Fatalf("cmdRelease6 handed a shared grant: %+v", g)
	}
	for _, tc := range []struct {
		name string
		got  []byte
		want cmdType
	}{
		{"acquire", acquireEntry(sharedAcq("s", 1, "x"), outcomeCmd), cmdAcquire8},
		{"release", releaseEntry(releaseCmd{Next: &next}, lockDelayCmd), cmdRelease6},
		{"expire", expireEntry(expireSessionCmd{Next: []acquireCmd{next}}, cmdExpireSession2), cmdExpireSession2},
		{"end delay", endDelayEntry(endDelayCmd{Next: &next}, outcomeCmd), cmdEndDelay},
		{"end grant", endGrantEntry(endGrantCmd{Next: &next}, outcomeCmd), cmdEndGrant},
	} {
		if cmdType(tc.got[0]) != tc.want || bytes.Contains(tc.got, []byte(`"shared"`)) {
			t.Errorf("%s entry for an older cluster: %s", tc.name, tc.got)
		}
	}
	if !next.Shared {
		t.Fatal("an entry encoder changed the caller's Acquire")
	}
	// Where every server applies them, only entries that carry a shared
	// Acquire take the shared types (Acquires and Releases up to the
	// binary types, which carry both: commands_binary_test.go).
	excl := acq("w", 1, "x", time.Second)
	for _, tc := range []struct {
		name       string
		got, plain []byte
		want       cmdType
	}{
		{"acquire", acquireEntry(next, binaryCmd-1), acquireEntry(excl, binaryCmd-1), cmdAcquire9},
		{"release", releaseEntry(releaseCmd{Next: &next}, binaryCmd-1), releaseEntry(releaseCmd{Next: &excl}, binaryCmd-1), cmdRelease7},
		{"expire", expireEntry(expireSessionCmd{Next: []acquireCmd{excl, next}}, newestCmd), expireEntry(expireSessionCmd{Next: []acquireCmd{excl}}, newestCmd), cmdExpireSession3},
		{"end delay", endDelayEntry(endDelayCmd{Next: &next}, newestCmd), endDelayEntry(endDelayCmd{Next: &excl}, newestCmd), cmdEndDelay2},
		{"end grant", endGrantEntry(endGrantCmd{Next: &next}, newestCmd), endGrantEntry(endGrantCmd{Next: &excl}, newestCmd), cmdEndGrant2},
	} {
		if cmdType(tc.got[0]) != tc.want || cmdType(tc.plain[0]) >= cmdAcquire9 {
			t.Errorf("%s entries: shared %v, exclusive %v; want %v and an older type", tc.name, cmdType(tc.got[0]), cmdType(tc.plain[0]), tc.want)
		}
	}
}

// A snapshot with shared grants or a shared grant's delay is written as
// format 6 and restored as it was; one that mixes kinds is refused.
func TestSharedSnapshot(t *testing.T) {
	f, apply := fsmApplier()
	apply(cmdAcquire9, sharedAcq("r1", 1, "x"))
	apply(cmdAcquire9, sharedAcq("r2", 1, "x"))
	c := sharedAcq("r1", 2, "y")
	c.LockDelay = time.Second
	g := apply(cmdAcquire9, c).(*acquireResult)
	apply(cmdRevoke, revokeCmd{Lease: "y", Token: g.Token})
	b := persist(t, f)
	if !bytes.Contains(b, []byte(`"format":6`)) {
		t.Fatalf("snapshot with shared grants: %s", b)
	}
	back := newFSM()
	if err := back.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
	if !back.sharedOf("x") || !back.sharedOf("y") || back.leaseCount() != 2 {
		t.Fatalf("restored: x shared %v, y shared %v, %d grants", back.sharedOf("x"), back.sharedOf("y"), back.leaseCount())
	}
	bad := bytes.Replace(b, []byte(`"shared":true`), []byte(`"shared":true,"limit":2`), 1)
	if err := newFSM().Restore(io.NopCloser(bytes.NewReader(bad))); err == nil {
		t.Fatal("a snapshot with shared grants of a limit was restored")
	}
}

// The leader refuses a shared Acquire while some grantor does not apply
// shared grants, before anything reaches the log.
func TestSharedRefusedUntilEveryGrantorAppliesIt(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	h.raft.allowCmd.Store(uint32(outcomeCmd))
	n := h.raft.entries()
	if _, err := h.l.acquire(h.ctx(), sharedAcq("r", 1, "x"), 0); !errors.Is(err, ErrSharedNotSupported) {
		t.Fatalf("shared acquire in an older cluster: %v", err)
	}
	if h.raft.entries() != n {
		t.Fatal("a refused shared acquire wrote an entry")
	}
}

// Rule: no writer starvation. Once a writer waits, a new reader queues
// behind it (and one without wait is refused) though readers hold the
// name; the writer is served when the readers leave, then the readers
// behind it, together.
func TestSharedWaitingWriterBlocksNewReaders(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	r1 := h.acquire(sharedAcq("r1", 1, "x"))
	w := h.enqueueWaiter(h.ctx(), acq("w", 1, "x", 10*time.Second), time.Hour)
	if r := h.acquire(sharedAcq("r2", 1, "x")); r.Granted || !r.Final {
		t.Fatalf("reader without wait behind a waiting writer: %+v", r)
	}
	r3 := h.enqueueWaiter(h.ctx(), sharedAcq("r3", 1, "x"), time.Hour)
	r4 := h.enqueueWaiter(h.ctx(), sharedAcq("r4", 1, "x"), time.Hour)
	h.pending(w)
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "r1", Seq: 2}, Lease: "x", Owner: "o", Token: r1.Token}); err != nil {
		t.Fatal(err)
	}
	wo := h.outcome(w)
	if wo.err != nil || !wo.res.Granted || wo.res.Shared || wo.res.Token <= r1.Token {
		t.Fatalf("writer: %+v %v", wo.res, wo.err)
	}
	h.pending(r3)
	h.pending(r4)
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "w", Seq: 2}, Lease: "x", Owner: "o", Token: wo.res.Token}); err != nil {
		t.Fatal(err)
	}
	o3, o4 := h.outcome(r3), h.outcome(r4)
	if o3.err != nil || o4.err != nil || !o3.res.Granted || !o4.res.Granted || o3.res.Token <= wo.res.Token || o4.res.Token <= o3.res.Token {
		t.Fatalf("readers behind the writer: %+v %v, %+v %v", o3.res, o3.err, o4.res, o4.err)
	}
}

// Rule: a writer that gives up lets the readers queued behind it in
// beside the readers that hold the name.
func TestSharedWriterGivingUpLetsReadersIn(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	r1 := sharedAcq("r1", 1, "x")
	r1.TTL = time.Hour // holds through the writer's wait
	h.acquire(r1)
	w := h.enqueueWaiter(h.ctx(), acq("w", 1, "x", 10*time.Second), time.Minute)
	r2 := h.enqueueWaiter(h.ctx(), sharedAcq("r2", 1, "x"), time.Hour)
	h.advanceTo(h.clock.Now().Add(time.Minute))
	if wo := h.outcome(w); wo.err != nil || wo.res.Granted || !wo.res.Final {
		t.Fatalf("writer whose wait ran out: %+v %v", wo.res, wo.err)
	}
	if o := h.outcome(r2); o.err != nil || !o.res.Granted || !o.res.Shared || o.res.Holders != 2 {
		t.Fatalf("reader behind the writer that gave up: %+v %v", o.res, o.err)
	}
}

// Over gRPC on a real node: AcquireShared grants readers together and
// refuses a writer beside them (naming them shared), refuses a limit,
// and a name held as a semaphore, with INVALID_ARGUMENT; watchers and
// listings say the holders are shared.
func TestAcquireSharedRPC(t *testing.T) {
	n := start(t, fastConfig(t, t.TempDir()), true)
	r1, err := n.client.AcquireShared(tctx(t), acqReq("r1", 1, "rw"))
	if err != nil || !r1.Granted || !r1.Shared {
		t.Fatalf("first reader: %+v %v", r1, err)
	}
	r2, err := n.client.AcquireShared(tctx(t), acqReq("r2", 1, "rw"))
	if err != nil || !r2.Granted || r2.Holders != 2 || r2.Token <= r1.Token {
		t.Fatalf("second reader: %+v %v", r2, err)
	}
	if w := mustAcquire(t, n.client, acqReq("w", 1, "rw")); w.Granted || !w.Shared || w.Token != r1.Token || w.Holders != 2 {
		t.Fatalf("writer beside readers: %+v", w)
	}
	limited := acqReq("r3", 1, "rw")
	limited.Limit = 2
	if _, err := n.client.AcquireShared(tctx(t), limited); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("shared with a limit: %v", err)
	}
	sem := acqReq("s", 1, "sem")
	sem.Limit = 3
	mustAcquire(t, n.client, sem)
	if _, err := n.client.AcquireShared(tctx(t), acqReq("r3", 2, "sem")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("shared of a semaphore: %v", err)
	}
	list, err := n.client.Leases(tctx(t), &grantorpb.LeasesRequest{Prefix: "rw"})
	if err != nil || len(list.Leases) != 1 || !list.Leases[0].Shared || len(list.Leases[0].Holders) != 2 {
		t.Fatalf("listing: %+v %v", list, err)
	}
	ws, err := n.client.Watch(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&grantorpb.WatchRequest{Add: []string{"rw"}}); err != nil {
		t.Fatal(err)
	}
	if ev, err := ws.Recv(); err != nil || !ev.Shared || len(ev.Holders) != 2 {
		t.Fatalf("watch snapshot: %+v %v", ev, err)
	}
}
