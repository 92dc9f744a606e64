package gossip

import (
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Review finding R8-15: anyone who reaches the gossip TCP port, without
// a key, sends streams that each declare an encrypted message of 20 MiB
// (memberlist's own limit) and send it. memberlist reads a stream's whole
// message before it can decrypt it, so without bounds a member held
// 20 MiB per connection (40 connections: 1.87 GB in the review). Here
// the member holds a bounded number of streams from one address, each
// read up to MaxStreamBytes: the heap grows by a few MiB where the flood
// declares 800 MiB, and a member with the key (at another address) joins
// meanwhile.
func TestStreamFloodIsBounded(t *testing.T) {
	a := start(t, testConfig("a", grantorMeta(1, ""), keyA))
	const conns, size = 40, 20<<20 - 1
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var peak uint64
	sampled := make(chan struct{})
	go func() { // the peak of the member's heap during the flood
		defer close(sampled)
		var m runtime.MemStats
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// From another address, as a stranger on another host.
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
			c, err := d.Dial("tcp", a.Addr())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			// memberlist's stream label header, then an encrypted
			// message declaring size bytes, then the bytes.
			hdr := append([]byte{244, byte(len(clusterLabel))}, clusterLabel...)
			hdr = append(hdr, 10)
			hdr = binary.BigEndian.AppendUint32(hdr, size)
			if _, err := c.Write(hdr); err != nil {
				return
			}
			chunk := make([]byte, 64<<10)
			n := 0
			for n < size {
				w, err := c.Write(chunk[:min(len(chunk), size-n)])
				n += w
				if err != nil {
					break // the member closed it
				}
			}
			mu.Lock()
			sent += n
			mu.Unlock()
		}()
	}
	// A member with the key joins during the flood.
	b := start(t, testConfig("b", sidecarMeta(), keyA, a.Addr()))
	waitFor(t, b, "a and b alive", func() bool { return aliveCount(b) == 2 })
	waitFor(t, a, "a and b alive", func() bool { return aliveCount(a) == 2 })
	wg.Wait()
	cancel()
	<-sampled
	grew := int64(peak) - int64(before.HeapInuse)
	t.Logf("the flood sent %d MiB on %d connections; the heap grew by %d MiB at most", sent>>20, conns, grew>>20)
	// At most maxStreamsPerSource streams are read at once, each into a
	// buffer of at most twice DefaultMaxStreamBytes; the garbage
	// collector lets the heap grow to about twice what is live, and the
	// test's second member needs some. Without the bounds the flood
	// would be held whole: 40 times 20 MiB.
	if bound := int64(4 * maxStreamsPerSource * 2 * DefaultMaxStreamBytes); grew > bound {
		t.Fatalf("the heap grew by %d MiB during the flood, more than %d MiB (%d streams from one address, each at most %d bytes, buffered)",
			grew>>20, bound>>20, maxStreamsPerSource, DefaultMaxStreamBytes)
	}
}
