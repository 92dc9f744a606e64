package daemon

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkSocketStatus measures status round trips through the real
// daemon over its real Unix socket, with 1 and 16 concurrent clients, each
// on its own connection, and reports throughput and p50/p99 latency.
// (status is answered by the daemon alone; the grantor is not involved.)
func BenchmarkSocketStatus(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			sock := startBenchDaemon(b)
			conns := make([]net.Conn, clients)
			for i := range conns {
				c, err := net.Dial("unix", sock)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
			}
			lat := make([][]time.Duration, clients)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for i, c := range conns {
				n := b.N / clients
				if i < b.N%clients {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := bufio.NewReader(c)
					line := []byte(`{"id":1,"op":"status"}` + "\n")
					ls := make([]time.Duration, 0, n)
					for range n {
						t0 := time.Now()
						if _, err := c.Write(line); err != nil {
							b.Error(err)
							return
						}
						if _, err := r.ReadSlice('\n'); err != nil {
							b.Error(err)
							return
						}
						ls = append(ls, time.Since(t0))
					}
					lat[i] = ls
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) == 0 {
				return
			}
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "roundtrips/s")
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
		})
	}
}

func startBenchDaemon(b *testing.B) string {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Grantors = []string{"127.0.0.1:1"} // status never reaches it
	_, sock := startDaemon(b, cfg)
	return sock
}
