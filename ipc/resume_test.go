package ipc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeDaemon is a daemon's socket side for the client's resume: it grants
// acquires with a resume secret and answers resumes, and the test stops it
// (listener and every connection closed, as a kill -9 does) and starts it
// again on the same path. afterResume, when set, is called after each
// answer to a resume (n counts them from 1): it may stop the daemon there.
// dropResume, when set, sees each resume request first (n counts them
// from 1): when it returns true (it stopped the daemon) the request is
// left unanswered.
type fakeDaemon struct {
	t    *testing.T
	path string

	mu          sync.Mutex
	ln          *net.UnixListener
	conns       map[net.Conn]bool
	resumes     int
	afterResume func(n int)
	asked       int
	dropResume  func(n int) bool
	resumed     chan string
	wg          sync.WaitGroup
}

func newFakeDaemon(t *testing.T) *fakeDaemon {
	f := &fakeDaemon{t: t, path: filepath.Join(t.TempDir(), "d.sock"), conns: map[net.Conn]bool{}, resumed: make(chan string, 1024)}
	t.Cleanup(f.stop)
	return f
}

func (f *fakeDaemon) start() {
	f.t.Helper()
	os.Remove(f.path) // the stale socket of the stopped one
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: f.path, Net: "unix"})
	if err != nil {
		f.t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false) // a killed daemon leaves its socket behind
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			if f.ln != ln {
				f.mu.Unlock()
				c.Close()
				return
			}
			f.conns[c] = true
			f.mu.Unlock()
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				f.serve(c)
			}()
		}
	}()
}

// stop closes the listener and every connection, and leaves the socket
// file (connects are refused until the next start). It does not wait for the
// connection goroutines (one of them may be the caller).
func (f *fakeDaemon) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln == nil {
		return
	}
	f.ln.Close()
	f.ln = nil
	for c := range f.conns {
		c.Close()
	}
	f.conns = map[net.Conn]bool{}
}

func (f *fakeDaemon) serve(c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return
		}
		id := req.ID
		resp := &Response{ID: &id, OK: true}
		switch req.Op {
		case OpAcquire:
			resp.Grant = &Grant{Lease: req.Lease, Token: "7", Owner: OwnerConnection,
				DeadlineBoottimeNs: boottime() + req.TTLMs*int64(time.Millisecond), Resume: fmt.Sprintf("%032x", len(req.Lease))}
		case OpResume:
			f.mu.Lock()
			f.asked++
			n, drop := f.asked, f.dropResume
			f.mu.Unlock()
			if drop != nil && drop(n) {
				return // stopped with the request unanswered
			}
			resp.Grant = &Grant{Lease: req.Lease, Token: req.Token, Owner: OwnerConnection,
				DeadlineBoottimeNs: boottime() + int64(time.Minute), Resume: req.Resume}
			f.resumed <- req.Lease
		default:
			resp.OK = false
			resp.Error = Errorf(CodeUnknownOp, "fake daemon: %s", req.Op)
		}
		b, _ := json.Marshal(resp)
		if _, err := c.Write(append(b, '\n')); err != nil {
			return
		}
		if req.Op == OpResume {
			f.mu.Lock()
			f.resumes++
			n, hook := f.resumes, f.afterResume
			f.mu.Unlock()
			if hook != nil {
				hook(n)
			}
		}
	}
}

// waitResumed waits until every one of names is resumed (once more).
func (f *fakeDaemon) waitResumed(t *testing.T, names []string, within time.Duration) {
	t.Helper()
	left := map[string]bool{}
	for _, n := range names {
		left[n] = true
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	for len(left) > 0 {
		select {
		case n := <-f.resumed:
			delete(left, n)
		case <-timer.C:
			t.Fatalf("%d leases not resumed within %s: %v", len(left), within, left)
		}
	}
}

func acquireN(t *testing.T, c *Client, n int) ([]*Lease, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var leases []*Lease
	var names []string
	for i := range n {
		name := "r/" + strconv.Itoa(i)
		l, err := c.Acquire(ctx, name, AcquireOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
		names = append(names, name)
	}
	return leases, names
}

func checkHeld(t *testing.T, leases []*Lease) {
	t.Helper()
	for _, l := range leases {
		select {
		case <-l.Done():
			t.Fatalf("%s ended: %s", l.Lease, l.Reason())
		default:
		}
	}
}

// The daemon restarts twice in a row: the client resumes its leases after
// each.
func TestResumeAfterTwoRestarts(t *testing.T) {
	f := newFakeDaemon(t)
	f.start()
	c := &Client{Socket: f.path}
	defer c.Close()
	leases, names := acquireN(t, c, 20)
	for range 2 {
		f.stop()
		f.start()
		f.waitResumed(t, names, 10*time.Second)
		checkHeld(t, leases)
	}
}

// The daemon stops again right after answering one of the resumes (the
// client is about to send the next one on that connection, whose end it
// has not read yet): no lease ends, all are resumed when it is back.
func TestResumeDaemonStopsMidResume(t *testing.T) {
	for _, at := range []int{1, 5, 19, 20} {
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			f := newFakeDaemon(t)
			f.start()
			c := &Client{Socket: f.path}
			defer c.Close()
			leases, names := acquireN(t, c, 20)
			back := make(chan struct{})
			f.mu.Lock()
			f.afterResume = func(n int) {
				if n == at {
					f.stop()
					close(back)
				}
			}
			f.mu.Unlock()
			f.stop()
			f.start()
			<-back
			// Those resumed before the stop are to be resumed again.
			for len(f.resumed) > 0 {
				<-f.resumed
			}
			f.start()
			f.waitResumed(t, names, 10*time.Second)
			checkHeld(t, leases)
		})
	}
}

// The daemon stops with a resume request in flight (read, never
// answered): that lease goes back in line with the others, and all are
// resumed when it is back.
func TestResumeDaemonStopsWithResumeInFlight(t *testing.T) {
	for _, at := range []int{1, 10, 20} {
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			f := newFakeDaemon(t)
			f.start()
			c := &Client{Socket: f.path}
			defer c.Close()
			leases, names := acquireN(t, c, 20)
			back := make(chan struct{})
			f.mu.Lock()
			f.dropResume = func(n int) bool {
				if n != at {
					return false
				}
				f.stop()
				close(back)
				return true
			}
			f.mu.Unlock()
			f.stop()
			f.start()
			<-back
			for len(f.resumed) > 0 {
				<-f.resumed
			}
			f.start()
			f.waitResumed(t, names, 10*time.Second)
			checkHeld(t, leases)
		})
	}
}
