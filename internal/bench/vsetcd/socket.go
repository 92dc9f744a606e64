package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/leaseside/leaseside/internal/bench"
)

// maxLine bounds a line on the socket, as the leaseside protocol does.
const maxLine = 64 << 10

// runEcho serves the bare JSON echo on --socket until ctx ends: each
// connection on its own goroutine reads newline-delimited JSON objects,
// decodes each (encoding/json, into a map), adds "ok": true and writes it
// back encoded. It is what a minimal JSON-over-Unix-socket server costs:
// the baseline the sidecar's socket is measured against.
func runEcho(ctx context.Context, args []string, _ io.Writer) error {
	fs := newFlags("echo")
	path := fs.String("socket", "", "Unix socket to listen on (required)")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("%w: --socket is required", errUsage)
	}
	ln, err := net.Listen("unix", *path)
	if err != nil {
		return err
	}
	return serveEcho(ctx, ln)
}

// serveEcho serves the echo on ln until ctx ends, then closes ln and
// every connection and returns nil.
func serveEcho(ctx context.Context, ln net.Listener) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			echo(c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		})
	}
}

// echo answers the lines of one connection until it ends or sends a line
// that is not a JSON object.
func echo(c net.Conn) {
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), maxLine+1)
	w := bufio.NewWriter(c)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			fmt.Fprintf(w, `{"ok":false,"error":{"code":"bad_request","message":%q}}`+"\n", err.Error())
			w.Flush()
			return
		}
		m["ok"] = true
		out, err := json.Marshal(m)
		if err != nil {
			return
		}
		w.Write(out)
		w.WriteByte('\n')
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// runSocket drives round trips against a Unix socket and prints a report
// with workload "socket".
func runSocket(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("socket")
	path := fs.String("socket", "", "Unix socket to drive (required)")
	clients := fs.Int("clients", 16, "clients, each on its own connection with one request in flight")
	request := fs.String("request", `{"id":1,"op":"status"}`, "the request line each client sends; the reply must be a JSON object with its id and \"ok\":true")
	duration := fs.Duration("duration", 10*time.Second, "how long round trips are measured")
	warmup := fs.Duration("warmup", time.Second, "how long the clients run before they are measured")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *path == "" || *clients < 1 || *duration <= 0 || *warmup < 0 {
		return fmt.Errorf("%w: need --socket, --clients >= 1, a positive --duration", errUsage)
	}
	res, err := roundTrips(ctx, *path, []byte(*request), *clients, *warmup, *duration)
	if err != nil {
		return fmt.Errorf("socket %s: %w", *path, err)
	}
	res.Workload = "socket"
	return printReport(stdout, &bench.Report{Started: time.Now(), Results: []*bench.Result{res}})
}

// roundTrips has clients clients, each on its own connection to path,
// send request and read the reply line in a loop for warmup and then d.
// Every reply must be a JSON object with the request's id and "ok": true
// (anything else fails the run). A round trip counts when it lies in the
// measured window.
func roundTrips(ctx context.Context, path string, request []byte, clients int, warmup, d time.Duration) (*bench.Result, error) {
	var want struct {
		ID *int64 `json:"id"`
	}
	if err := json.Unmarshal(request, &want); err != nil || want.ID == nil || bytes.ContainsAny(request, "\n") {
		return nil, fmt.Errorf("%w: --request must be one JSON object line with an id", errUsage)
	}
	line := append(bytes.Clone(request), '\n')
	conns := make([]net.Conn, clients)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := net.Dial("unix", path)
		if err != nil {
			return nil, err
		}
		conns[i] = c
	}
	lat := make([]bench.Latencies, clients)
	w := bench.NewWindow(warmup, d)
	cpu := bench.MeterCPU(ctx, 0, w)
	defer cpu.Stop()
	err := bench.Parallel(ctx, clients, func(ctx context.Context, i int) error {
		c := conns[i]
		stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
		defer stop()
		r := bufio.NewReaderSize(c, maxLine+1)
		for {
			t0 := time.Now()
			if !w.Open(t0) {
				return nil
			}
			if _, err := c.Write(line); err != nil {
				return err
			}
			reply, err := r.ReadSlice('\n')
			if err != nil {
				return err
			}
			t1 := time.Now()
			if err := checkReply(reply, *want.ID); err != nil {
				return err
			}
			if w.Holds(t0, t1) {
				lat[i] = append(lat[i], t1.Sub(t0))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	l := bench.Merge(lat)
	res := &bench.Result{Setup: fmt.Sprintf("%d clients, each on its own connection with one request in flight, sending %s; %v measured after %v warmup", clients, request, d, warmup)}
	res.Add("round trips/s", w.Rate(len(l)), "/s")
	res.Add("round trip p50", l.MS(0.50), "ms")
	res.Add("round trip p99", l.MS(0.99), "ms")
	res.Add("round trips measured", float64(len(l)), "")
	cpu.Report(res)
	res.Note("every reply was a JSON object with the request's id and \"ok\": true")
	return res, nil
}

// errBadReply is a reply that is not the success the request asks for.
var errBadReply = errors.New("bad reply")

// checkReply checks that reply is a JSON object with id and "ok": true.
func checkReply(reply []byte, id int64) error {
	var r struct {
		ID *int64 `json:"id"`
		OK bool   `json:"ok"`
	}
	if err := json.Unmarshal(reply, &r); err != nil || r.ID == nil || *r.ID != id || !r.OK {
		return fmt.Errorf("%w: %.200s", errBadReply, reply)
	}
	return nil
}
