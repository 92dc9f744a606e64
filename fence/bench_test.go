package fence

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The cost of the fences, measured, not asserted (docs/fencing.md has the
// figures and the command that interleaves the runs).

var benchPayload = bytes.Repeat([]byte("x"), 4096)

// BenchmarkFileWrite: a 4 KiB file replaced through WriteFile (under one
// token, as a holder writes; and under a new token each time, which
// appends to the record and syncs it), against the same durable replace
// without the fence (temporary file, fsync, rename, fsync of the
// directory) and a plain os.WriteFile (no fsync, not atomic).
func BenchmarkFileWrite(b *testing.B) {
	b.Run("fenced/same-token", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "f")
		for b.Loop() {
			if err := WriteFile(path, "bench", 1, bytes.NewReader(benchPayload)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fenced/new-token", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "f")
		var tok uint64
		for b.Loop() {
			tok++
			if err := WriteFile(path, "bench", tok, bytes.NewReader(benchPayload)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unfenced-durable", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "f")
		for b.Loop() {
			if err := durableReplace(path, benchPayload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "f")
		for b.Loop() {
			if err := os.WriteFile(path, benchPayload, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// durableReplace is WriteFile's replace without the fence.
func durableReplace(path string, data []byte) error {
	f, err := createTemp(path + tempSuffix)
	if err != nil {
		return err
	}
	if err := fillTemp(f, bytes.NewReader(data), 0); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// BenchmarkProxy: PUTs of 1 KiB to a backend on loopback through the
// fence proxy (each client its own lease, under one token), through the
// same proxy fencing nothing (the hop alone) and straight to the backend,
// with 1 and 16 clients at once. ns/op is the time per
// request of the whole run; latency-us is a request's mean latency as a
// client sees it.
func BenchmarkProxy(b *testing.B) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	defer backend.Close()
	cfg := DefaultProxyConfig()
	cfg.Backend, _ = url.Parse(backend.URL)
	rec, err := OpenRecord(filepath.Join(b.TempDir(), "p.fence"), false)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Record = rec
	p, err := NewProxy(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	proxy := httptest.NewServer(p)
	defer proxy.Close()
	// The same hop without the fence: a proxy that fences no method used.
	hopCfg := cfg
	hopCfg.Methods = []string{"MKCOL"}
	hopProxy, err := NewProxy(hopCfg)
	if err != nil {
		b.Fatal(err)
	}
	defer hopProxy.Close()
	hop := httptest.NewServer(hopProxy)
	defer hop.Close()
	body := benchPayload[:1024]
	for _, clients := range []int{1, 16} {
		for _, via := range []struct{ name, url string }{{"direct", backend.URL}, {"unfenced-proxy", hop.URL}, {"fence-proxy", proxy.URL}} {
			b.Run(fmt.Sprintf("%s/clients=%d", via.name, clients), func(b *testing.B) {
				tr := &http.Transport{MaxIdleConnsPerHost: clients}
				defer tr.CloseIdleConnections()
				client := &http.Client{Transport: tr}
				var next sync.Mutex
				n := 0
				take := func() bool {
					next.Lock()
					defer next.Unlock()
					n++
					return n <= b.N
				}
				var busy time.Duration
				var mu sync.Mutex
				b.ResetTimer()
				var wg sync.WaitGroup
				for c := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						lease := "bench/" + strconv.Itoa(c)
						var mine time.Duration
						for take() {
							req, _ := http.NewRequest(http.MethodPut, via.url+"/obj", bytes.NewReader(body))
							req.Header.Set(HeaderLease, lease)
							req.Header.Set(HeaderToken, "1")
							start := time.Now()
							resp, err := client.Do(req)
							if err != nil {
								b.Error(err)
								return
							}
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							mine += time.Since(start)
							if resp.StatusCode != http.StatusOK {
								b.Errorf("status %d", resp.StatusCode)
								return
							}
						}
						mu.Lock()
						busy += mine
						mu.Unlock()
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(busy.Microseconds())/float64(b.N), "latency-us")
			})
		}
	}
}
