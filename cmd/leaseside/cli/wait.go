package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// waitTick is how often the wait line is redrawn.
const waitTick = time.Second

// acquireWaiting acquires name like c.Acquire. When the acquire may wait
// (opt.Wait > 0) and stderr is a terminal, and not quiet, it first asks
// without waiting; if the lease is held elsewhere, it shows on stderr who
// holds it and how long the wait has run, redrawn in place, while it
// waits for the rest of opt.Wait. When the wait runs out, the caller's
// message says so; when the lease comes, the line says how long it took.
func acquireWaiting(ctx context.Context, w io.Writer, quiet bool, c *ipc.Client, name string, opt ipc.AcquireOptions) (*ipc.Lease, error) {
	if opt.Wait <= 0 || quiet || !writesToTerminal(w) {
		return c.Acquire(ctx, name, opt)
	}
	start := time.Now()
	probe := opt
	probe.Wait = 0
	l, err := c.Acquire(ctx, name, probe)
	var ie *ipc.Error
	if err == nil || !errors.As(err, &ie) || ie.Code != ipc.CodeLeaseHeld {
		return l, err
	}
	holder := holderText(ie.HolderToken, ie.Holder)
	if holder == "" {
		holder = "another owner"
	}
	limit := " of " + fmtDuration(opt.Wait)
	if opt.Wait == ipc.WaitForever {
		limit = " (no limit)"
	}
	draw := func() {
		fmt.Fprintf(w, "\r\033[Kwaiting for %s: held by %s; waited %s%s", name, holder,
			fmtDuration(time.Since(start).Truncate(time.Second)), limit)
	}
	draw()
	stop := make(chan struct{})
	drawn := make(chan struct{})
	go func() {
		defer close(drawn)
		t := time.NewTicker(waitTick)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				draw()
			}
		}
	}()
	rest := opt
	if opt.Wait != ipc.WaitForever {
		rest.Wait = max(opt.Wait-time.Since(start), 0).Truncate(time.Millisecond)
	}
	l, err = c.Acquire(ctx, name, rest)
	close(stop)
	<-drawn
	fmt.Fprint(w, "\r\033[K")
	if err == nil {
		fmt.Fprintf(w, "leaseside: %s acquired after waiting %s\n", name, fmtDuration(time.Since(start).Round(100*time.Millisecond)))
	}
	return l, err
}

// writesToTerminal reports whether w is a terminal.
func writesToTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

// campaignWaiting runs for leader of name with value like c.Campaign.
// On a terminal, and not quiet, it shows on stderr who leads meanwhile
// (observed cluster-wide) and how long the wait has run, redrawn in
// place from the first second on; when it leads, the line says how long
// it took.
func campaignWaiting(ctx context.Context, w io.Writer, quiet bool, c *ipc.Client, name, value string, opt ipc.AcquireOptions) (*ipc.Lease, error) {
	if quiet || !writesToTerminal(w) {
		return c.Campaign(ctx, name, value, opt)
	}
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	leaders, err := c.Observe(octx, name)
	if err != nil {
		return nil, err
	}
	type result struct {
		l   *ipc.Lease
		err error
	}
	res := make(chan result, 1)
	go func() {
		l, err := c.Campaign(ctx, name, value, opt)
		res <- result{l, err}
	}()
	start, leader, drawn := time.Now(), "nobody yet", false
	draw := func() {
		drawn = true
		fmt.Fprintf(w, "\r\033[Kwaiting to lead %s: led by %s; waited %s", name, leader, fmtDuration(time.Since(start).Truncate(time.Second)))
	}
	t := time.NewTicker(waitTick)
	defer t.Stop()
	for {
		select {
		case r := <-res:
			if drawn {
				fmt.Fprint(w, "\r\033[K")
				if r.err == nil {
					fmt.Fprintf(w, "leaseside: leading %s after waiting %s\n", name, fmtDuration(time.Since(start).Round(100*time.Millisecond)))
				}
			}
			return r.l, r.err
		case ld, ok := <-leaders:
			if !ok {
				leaders = nil
				continue
			}
			leader = "nobody"
			if ld.Holder != nil {
				leader = holderText(ld.Holder.Token, hostName(ld.Holder.Holder))
			}
			if drawn {
				draw()
			}
		case <-t.C:
			draw()
		}
	}
}
