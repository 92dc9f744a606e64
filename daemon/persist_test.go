package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// restartRig is a scripted grantor on a fake clock and a state directory,
// for daemons started and stopped one after another on one socket.
type restartRig struct {
	clock *clockwatch.Fake
	g     *scriptedGrantor
	cfg   Config
	sock  string
}

func newRestartRig(t testing.TB) *restartRig {
	t.Helper()
	// From the real BOOTTIME now: the clients' watchdogs read the real
	// clock, and this package's tests may have run a while since start.
	clock := clockwatch.NewFake(clockwatch.System.Now())
	g := &scriptedGrantor{clock: clock, keepalives: make(chan *grantorpb.KeepAliveRequest, 1024), releases: make(chan *grantorpb.ReleaseRequest, 1024),
		acquires: make(chan *grantorpb.AcquireRequest, 1024)}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	grantorpb.RegisterGrantorServer(srv, g)
	go srv.Serve(gl)
	t.Cleanup(srv.Stop)
	cfg := DefaultConfig()
	cfg.Grantors = []string{gl.Addr().String()}
	cfg.Clock = clock
	cfg.Watch.Kernel = func() (clockwatch.KernelClockState, error) { return clockwatch.KernelClockState{Synced: true}, nil }
	dir := t.TempDir()
	cfg.StateDir = filepath.Join(dir, "state")
	if os.Getenv("LEASESIDE_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return &restartRig{clock: clock, g: g, cfg: cfg, sock: filepath.Join(dir, "d.sock")}
}

// start starts a daemon process's worth of Daemon; stop ends it as a
// SIGTERM does (the state is written once more).
func (r *restartRig) start(t testing.TB) (d *Daemon, stop func()) {
	t.Helper()
	d, err := New(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(r.sock)
	ln, err := ipc.Listen(r.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx, ln)
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return d, stop
}

// state reads the state files.
func (r *restartRig) state(t *testing.T) *stateRecord {
	t.Helper()
	st, torn, err := loadState(r.cfg.StateDir)
	if err != nil || st == nil || torn != 0 {
		t.Fatalf("state files: %v (%v, %d lines cut short)", st, err, torn)
	}
	return st
}

// writeV1 replaces the state with st in format 1's one file, as a daemon
// of that format left it.
func (r *restartRig) writeV1(t *testing.T, st *stateRecord) {
	t.Helper()
	v1 := *st
	v1.Version = stateVersionV1
	v1.Sessions = nil
	for _, s := range st.Sessions {
		v1.Sessions = append(v1.Sessions, sessionState{ID: s.ID, TTLNs: s.TTLNs, Seq: s.Seq})
	}
	b, err := json.Marshal(&v1)
	if err != nil {
		t.Fatal(err)
	}
	removeState(r.cfg.StateDir)
	if err := os.WriteFile(filepath.Join(r.cfg.StateDir, stateFileNameV1), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// drainKeepAlives forgets the keepalives seen so far.
func (r *restartRig) drainKeepAlives() {
	for {
		select {
		case <-r.g.keepalives:
		default:
			return
		}
	}
}

// A restarted daemon holds the leases of the one before, with their
// tokens, and tells nobody a deadline later than the one the previous
// process computed from the grantor's promise until a renewal of its own
// came back (DESIGN.md section 2, rule 3): the restored deadline is the
// same instant, the first keepalive renews the same grantor session ids,
// and only its reply moves the deadline. Fails on the old code, which
// kept no state: the second daemon holds nothing.
func TestRestartKeepsLeasesAndDeadlines(t *testing.T) {
	r := newRestartRig(t)
	d1, stop1 := r.start(t)
	c := &ipc.Client{Socket: r.sock}
	ctx := ctxT(t)
	det, err := c.Acquire(ctx, "det", ipc.AcquireOptions{TTL: 9 * time.Second, Owner: ipc.OwnerDetached, LockDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := c.Acquire(ctx, "pid", ipc.AcquireOptions{TTL: 9 * time.Second, Owner: ipc.OwnerPID, OwnerPID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	if det.Resume != "" || pid.Resume != "" {
		t.Fatalf("a lease not owned by a connection got a resume secret: %q %q", det.Resume, pid.Resume)
	}
	session := d1.Session()
	c.Close()
	stop1()
	st := r.state(t)
	if len(st.Leases) != 2 || st.Session != session {
		t.Fatalf("state file after the stop: session %s (want %s), %d leases (want 2)", st.Session, session, len(st.Leases))
	}

	r.clock.Advance(time.Second) // the restart takes a second
	r.drainKeepAlives()
	r.g.set(func() { r.g.silent = true }) // the first renewal does not come back yet
	d2, _ := r.start(t)
	if d2.Session() != session {
		t.Fatalf("the new daemon's session is %s, want the previous %s", d2.Session(), session)
	}
	c2 := &ipc.Client{Socket: r.sock}
	t.Cleanup(func() { c2.Close() })
	ka := r.waitKeepAliveOf(t, r.g.keepalives)
	if len(ka.Sessions) != 1 || ka.Sessions[0].Session != st.Sessions[0].ID {
		t.Fatalf("first keepalive renews %v, want the previous session %s", ka.Sessions, st.Sessions[0].ID)
	}
	for _, l := range []*ipc.Lease{det, pid} {
		g, err := c2.Check(ctx, l.Lease, l.Token)
		if err != nil {
			t.Fatalf("%s after the restart: %v", l.Lease, err)
		}
		if g.DeadlineBoottimeNs != l.DeadlineBoottimeNs {
			t.Fatalf("%s: deadline %d after the restart, before any renewal; want the same instant %d", l.Lease, g.DeadlineBoottimeNs, l.DeadlineBoottimeNs)
		}
	}
	r.g.set(func() { r.g.silent = false })
	r.clock.Advance(3 * time.Second) // the unanswered keepalive times out; the retry is answered
	waitFor(t, func() bool {
		r.clock.Advance(50 * time.Millisecond) // through the retry's backoff
		g, err := c2.Check(ctx, "det", det.Token)
		return err == nil && g.DeadlineBoottimeNs > det.DeadlineBoottimeNs
	})
}

// waitKeepAliveOf returns the next keepalive.
func (r *restartRig) waitKeepAliveOf(t *testing.T, ch chan *grantorpb.KeepAliveRequest) *grantorpb.KeepAliveRequest {
	t.Helper()
	select {
	case ka := <-ch:
		return ka
	case <-ctxT(t).Done():
		t.Fatal("no keepalive")
	}
	return nil
}

// waitFor waits for cond, checking it whenever a short real pause passed.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx := ctxT(t)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("condition not met in time")
		}
	}
}

// A client whose connection owned a lease resumes it after the restart
// with the secret the grant gave: the same token, its Done never closed.
// One that does not come back within resumeGrace has its lease released
// as its owner's end (the grantor keeps the lock-delay). A wrong secret is
// refused. Fails on the old code: the restart ended the connection and so
// the lease.
func TestRestartConnectionOwnerResumes(t *testing.T) {
	r := newRestartRig(t)
	_, stop1 := r.start(t)
	ctx := ctxT(t)
	c := &ipc.Client{Socket: r.sock}
	t.Cleanup(func() { c.Close() })
	l, err := c.Acquire(ctx, "conn", ipc.AcquireOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Resume) != 32 {
		t.Fatalf("a connection's grant carries resume %q, want a 32-digit secret", l.Resume)
	}
	away := &ipc.Client{Socket: r.sock}
	gone, err := away.Acquire(ctx, "away", ipc.AcquireOptions{TTL: 30 * time.Second, LockDelay: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stop1()
	away.Close() // this client does not come back
	_, stop2 := r.start(t)
	waitFor(t, func() bool {
		_, err := c.Check(ctx, "conn", l.Token)
		return err == nil
	})
	stop2() // a second restart: the client resumes again
	d3, _ := r.start(t)

	// c reconnects by itself and resumes. A Check that works on its new
	// connection does not mean the resume went through (the daemon holds
	// the lease either way): wait for the daemon to bind it to c before
	// the grace runs out, or it is released as nobody's.
	c3 := &ipc.Client{Socket: r.sock}
	t.Cleanup(func() { c3.Close() })
	waitFor(t, func() bool {
		_, err := c.Check(ctx, "conn", l.Token)
		return err == nil && !awaitsResume(d3, "conn")
	})
	select {
	case <-l.Done():
		t.Fatalf("the resumed lease ended: %s", l.Reason())
	default:
	}
	// A wrong secret is refused.
	wrong := "0123456789abcdef0123456789abcdef"
	if _, err := c3.Resume(ctx, "away", gone.Token, wrong); !errors.Is(err, ipc.ErrPermissionDenied) {
		t.Fatalf("resume with a wrong secret: %v, want permission_denied", err)
	}
	// The one nobody resumed is released once the grace is over, as its
	// owner's end.
	r.clock.Advance(resumeGrace)
	for {
		rel := waitReleaseOf(t, r.g.releases)
		if rel.Lease == "away" {
			if !rel.OwnerEnded || strconv.FormatUint(rel.Token, 10) != gone.Token {
				t.Fatalf("release of the lease nobody resumed: %+v, want its token with owner_ended", rel)
			}
			break
		}
	}
	if _, err := c3.Check(ctx, "conn", l.Token); err != nil {
		t.Fatalf("the resumed lease after the grace: %v", err)
	}
}

// awaitsResume reports whether d restored the lease name and its client
// has not resumed it yet.
func awaitsResume(d *Daemon, name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for l := range d.ps.awaiting {
		if l.name == name {
			return true
		}
	}
	return false
}

func waitReleaseOf(t *testing.T, ch chan *grantorpb.ReleaseRequest) *grantorpb.ReleaseRequest {
	t.Helper()
	select {
	case rel := <-ch:
		return rel
	case <-ctxT(t).Done():
		t.Fatal("no release sent to the grantor")
	}
	return nil
}

// A state file written in another boot (the boot id differs: BOOTTIME
// started again), or under another time namespace's boottime offset, is
// refused, said, and discarded: the new daemon holds
// nothing and starts a new session. So is one whose every deadline
// passed while no daemon ran.
func TestRestartRefusesAnotherBootAndLapsedState(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alter func(r *restartRig, st *stateRecord)
	}{
		{"another boot", func(_ *restartRig, st *stateRecord) { st.BootID = "00000000-0000-0000-0000-000000000000" }},
		{"every deadline passed", func(r *restartRig, _ *stateRecord) { r.clock.Advance(time.Minute) }},
		// Written in a time namespace whose CLOCK_BOOTTIME is 5 s off this
		// process's (review rev1 open finding 3): fails without the
		// offset's check (the lease is held, its deadline 5 s off).
		{"another time namespace", func(_ *restartRig, st *stateRecord) { st.BoottimeOffsetNs = 5e9 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRestartRig(t)
			d1, stop1 := r.start(t)
			c := &ipc.Client{Socket: r.sock}
			if _, err := c.Acquire(ctxT(t), "det", ipc.AcquireOptions{TTL: 9 * time.Second, Owner: ipc.OwnerDetached}); err != nil {
				t.Fatal(err)
			}
			c.Close()
			stop1()
			st := r.state(t)
			tc.alter(r, st)
			r.writeV1(t, st)
			d2, _ := r.start(t)
			if d2.Session() == d1.Session() {
				t.Fatal("the new daemon resumed the refused state's session")
			}
			c2 := &ipc.Client{Socket: r.sock}
			t.Cleanup(func() { c2.Close() })
			if _, err := c2.Check(ctxT(t), "det", ""); !errors.Is(err, ipc.ErrNotHeld) {
				t.Fatalf("check after a refused state: %v, want not_held", err)
			}
		})
	}
}

// A pid owner that is gone when the daemon comes back (or whose pid is
// another process now) ends its lease as the owner's end.
func TestRestartPIDOwnerGone(t *testing.T) {
	r := newRestartRig(t)
	_, stop1 := r.start(t)
	c := &ipc.Client{Socket: r.sock}
	l, err := c.Acquire(ctxT(t), "p", ipc.AcquireOptions{TTL: 9 * time.Second, Owner: ipc.OwnerPID, OwnerPID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	stop1()
	st := r.state(t)
	st.Leases[0].OwnerID = "pid:" + strconv.Itoa(os.Getpid()) + ":1" // started at another time: another process
	r.writeV1(t, st)
	r.start(t)
	rel := waitReleaseOf(t, r.g.releases)
	if rel.Lease != "p" || strconv.FormatUint(rel.Token, 10) != l.Token || !rel.OwnerEnded {
		t.Fatalf("release %+v, want p's token %s with owner_ended", rel, l.Token)
	}
}

// A grant is told only once the state file holds it: a kill -9 right
// after the reply leaves nothing its holder was told of unknown to the
// next process (which would give it back to the grantor before the
// deadline the holder was told). Read the file after each reply: every
// lease granted so far is in it. Fails when the reply does not wait for
// the write (the write is asynchronous).
func TestGrantWrittenBeforeReply(t *testing.T) {
	r := newRestartRig(t)
	r.start(t)
	c := &ipc.Client{Socket: r.sock}
	t.Cleanup(func() { c.Close() })
	for i := range 20 {
		name := "w/" + strconv.Itoa(i)
		l, err := c.Acquire(ctxT(t), name, ipc.AcquireOptions{TTL: 9 * time.Second, Owner: ipc.OwnerDetached})
		if err != nil {
			t.Fatal(err)
		}
		st := r.state(t)
		found := false
		for _, s := range st.Leases {
			found = found || (s.Name == name && strconv.FormatUint(s.Token, 10) == l.Token)
		}
		if !found {
			t.Fatalf("the reply granting %s (token %s) came before the state file held it (%d leases in it)", name, l.Token, len(st.Leases))
		}
	}
}

// BenchmarkAcquireReleaseState is one acquire and release through the
// socket against a scripted grantor, with and without a state directory:
// what persisting the table (and answering a grant only once written)
// costs a lock cycle.
func BenchmarkAcquireReleaseState(b *testing.B) {
	for _, state := range []bool{false, true} {
		b.Run(fmt.Sprintf("state=%v", state), func(b *testing.B) {
			r := newRestartRig(b)
			if !state {
				r.cfg.StateDir = ""
			}
			r.start(b)
			c := &ipc.Client{Socket: r.sock}
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { // the scripted grantor hands every release to a channel
				for {
					select {
					case <-r.g.releases:
					case <-r.g.keepalives:
					case <-r.g.acquires:
					case <-ctx.Done():
						return
					}
				}
			}()
			b.ResetTimer()
			for range b.N {
				l, err := c.Acquire(ctx, "bench", ipc.AcquireOptions{TTL: 9 * time.Second, Owner: ipc.OwnerDetached})
				if err != nil {
					b.Fatal(err)
				}
				if err := c.ReleaseToken(ctx, "bench", l.Token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
