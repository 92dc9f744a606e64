package main

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// listenTemp listens on a Unix socket in a fresh temporary directory.
func listenTemp(t *testing.T) (net.Listener, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return ln, path
}

// The socket driver measures round trips against the echo, which answers
// every request with it and "ok": true; the echo stops with its context.
func TestEchoRoundTrips(t *testing.T) {
	ln, path := listenTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveEcho(ctx, ln) }()
	res, err := roundTrips(context.Background(), path, []byte(`{"id":7,"op":"status"}`), 4, 50*time.Millisecond, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"round trips/s", "round trip p50", "round trips measured"} {
		if f, ok := res.Figure(name); !ok || !(f.Value > 0) {
			t.Errorf("figure %q = %+v, want > 0", name, f)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("echo: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("echo did not stop with its context")
	}
}

// A server that answers anything but the success asked for fails the run.
func TestRoundTripsBadReply(t *testing.T) {
	ln, path := listenTemp(t)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 512)
		c.Read(buf)
		c.Write([]byte(`{"id":7,"ok":false,"error":{"code":"bad_request"}}` + "\n"))
		c.Read(buf) // until the client hangs up
	}()
	_, err := roundTrips(context.Background(), path, []byte(`{"id":7,"op":"status"}`), 1, 0, time.Minute)
	if !errors.Is(err, errBadReply) {
		t.Errorf("roundTrips = %v, want errBadReply", err)
	}
}

func TestRoundTripsRequest(t *testing.T) {
	for _, req := range []string{`{"op":"status"}`, `status`, "{\"id\":1}\n{}"} {
		if _, err := roundTrips(context.Background(), "/nonexistent", []byte(req), 1, 0, time.Second); !errors.Is(err, errUsage) {
			t.Errorf("request %q: %v, want errUsage", req, err)
		}
	}
}

func TestCheckReply(t *testing.T) {
	for _, tc := range []struct {
		reply string
		ok    bool
	}{
		{reply: `{"id":7,"ok":true,"leases":[]}` + "\n", ok: true},
		{reply: `{"ok":true,"id":7}`, ok: true},
		{reply: `{"id":8,"ok":true}`},
		{reply: `{"id":7,"ok":false}`},
		{reply: `{"ok":true}`},
		{reply: `{"id":7,"ok":true`},
		{reply: `{"event":"lost"}`},
	} {
		if err := checkReply([]byte(tc.reply), 7); (err == nil) != tc.ok {
			t.Errorf("checkReply(%s) = %v, want ok %v", tc.reply, err, tc.ok)
		}
	}
}
