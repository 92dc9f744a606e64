package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/ipc"
)

// topOptions are the flags of `leaseside top`.
type topOptions struct {
	client   clientFlags
	interval time.Duration
}

func newTopCmd(e *env) *cobra.Command {
	var o topOptions
	cmd := &cobra.Command{
		Use:   "top",
		Short: "a live view of this host's leases and clock",
		Long: `Shows the leases the local sidecar holds, redrawn in place every --interval:
name, token, the validity left (as a bar of the term, and in seconds), the
term, the owner, how many times the daemon renewed the grant and the round
trip of its last renewal; above them, the clock's state (kernel
discipline, drift against the grantor, rho in use, pauses, suspends).
q or Ctrl-C quits. When stdout is not a terminal, it prints one view and
exits.`,
		Example: `  leaseside top
  leaseside top --interval 250ms --socket /tmp/demo.sock`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.interval <= 0 {
				return usagef("--interval %s: must be positive", o.interval)
			}
			return runTop(cmd.Context(), e, &o)
		},
	}
	o.client.register(cmd.Flags(), false)
	cmd.Flags().DurationVar(&o.interval, "interval", time.Second, "time between redraws")
	return cmd
}

func runTop(ctx context.Context, e *env, o *topOptions) error {
	cf := &o.client
	view := func(ctx context.Context) (*topView, error) {
		ctx, c, done := cf.connect(ctx)
		defer done()
		leases, clock, err := c.StatusClock(ctx)
		if err != nil {
			return nil, err
		}
		return &topView{socket: cf.socketPath(), leases: leases, clock: clock}, nil
	}
	v, err := view(ctx)
	if err != nil {
		return cf.fail(e, err, asked{})
	}
	out, ok := e.stdout.(*os.File)
	if !ok || !isTerminal(out) || cf.json {
		if cf.json {
			printJSON(e.stdout, map[string]any{"leases": v.leases, "clock": v.clock})
			return nil
		}
		v.render(e.stdout)
		return nil
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	quit := readQuitKey(ctx)
	fmt.Fprint(out, "\033[?1049h\033[?25l") // the alternate screen, no cursor
	defer fmt.Fprint(out, "\033[?25h\033[?1049l")
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for {
		var b strings.Builder
		v.render(&b)
		// Home, each line cut to the width and cleared to its end, then
		// the rest of the screen: a redraw in place, without the flicker
		// of clearing first.
		width := terminalWidth(out)
		var screen strings.Builder
		screen.WriteString("\033[H")
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if r := []rune(line); len(r) > width {
				line = string(r[:width])
			}
			screen.WriteString(line + "\033[K\r\n")
		}
		screen.WriteString("\033[J")
		fmt.Fprint(out, screen.String())
		select {
		case <-ctx.Done():
			return nil
		case <-quit:
			return nil
		case <-tick.C:
		}
		next, err := view(ctx)
		if err != nil {
			_, msg := cf.explain(err, asked{})
			next = &topView{socket: cf.socketPath(), err: msg}
		}
		v = next
	}
}

// topView is one screen of top.
type topView struct {
	socket string
	leases []ipc.Grant
	clock  *ipc.ClockStatus
	err    string // the daemon could not be asked
}

// barWidth is the width of the validity bar.
const barWidth = 20

func (v *topView) render(w io.Writer) {
	header := fmt.Sprintf("leaseside top  %s  %s", v.socket, time.Now().Format("15:04:05"))
	if v.err != "" {
		fmt.Fprintf(w, "%s\n\n%s\n", header, v.err)
		return
	}
	fmt.Fprintf(w, "%s  %d leases\n", header, len(v.leases))
	if c := v.clock; c != nil {
		sync := "synchronised"
		if !c.KernelSynced {
			sync = "NOT synchronised"
		}
		drift := fmt.Sprintf("unknown (%d samples)", c.DriftSamples)
		if c.DriftPPM != nil {
			drift = fmt.Sprintf("%+.1f ppm (%d samples)", *c.DriftPPM, c.DriftSamples)
		}
		fmt.Fprintf(w, "clock: kernel %s, drift %s, rho %.0f ppm in use\n", sync, drift, c.EffectiveRhoPPM)
		fmt.Fprintf(w, "       pauses %d (longest recent %s), suspends %d (%s)\n", c.Pauses,
			fmtDuration(time.Duration(c.LongestRecentPauseMs)*time.Millisecond), c.Suspends, fmtDuration(time.Duration(c.SuspendedMs)*time.Millisecond))
	}
	fmt.Fprintln(w)
	if len(v.leases) == 0 {
		fmt.Fprintln(w, "no leases held")
		return
	}
	leases := append([]ipc.Grant(nil), v.leases...)
	sort.Slice(leases, func(i, j int) bool { return leases[i].Lease < leases[j].Lease })
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tTOKEN\tLEFT\t\tTERM\tOWNER\tRENEWALS\tLAST RENEWAL")
	for _, l := range leases {
		last := "-"
		if l.Renewals > 0 {
			last = fmt.Sprintf("%s ago (round trip %s)", fmtDuration((time.Duration(l.RenewedAgoMs) * time.Millisecond).Round(100*time.Millisecond)),
				fmtDuration((time.Duration(l.RenewalLatencyUs) * time.Microsecond).Round(10*time.Microsecond)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs\t%s\t%s\t%d\t%s\n", l.Lease, l.Token, validityBar(l.ValidMs, l.TTLMs),
			float64(l.ValidMs)/1000, fmtDuration(time.Duration(l.TTLMs)*time.Millisecond), ownerText(&l), l.Renewals, last)
	}
	tw.Flush()
}

// validityBar draws left of term as [#####-----].
func validityBar(leftMs, termMs int64) string {
	n := 0
	if termMs > 0 {
		n = int(min(max(leftMs*barWidth/termMs, 0), barWidth))
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", barWidth-n) + "]"
}

// ownerText says what a lease is bound to, and what state it is in.
func ownerText(g *ipc.Grant) string {
	s := g.Owner
	if g.OwnerPID != 0 {
		s = fmt.Sprintf("pid %d", g.OwnerPID)
	}
	if g.NoRenew {
		s += " (no renew)"
	}
	return s
}

// terminalWidth is f's width in columns (80 if unknown).
func terminalWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 80
	}
	return int(ws.Col)
}

// readQuitKey returns a channel closed when q is typed on stdin, a
// terminal put in non-canonical mode (no echo, no line buffering) until
// ctx ends; nil when stdin is not a terminal.
func readQuitKey(ctx context.Context) <-chan struct{} {
	fd := int(os.Stdin.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if unix.IoctlSetTermios(fd, unix.TCSETS, &raw) != nil {
		return nil
	}
	context.AfterFunc(ctx, func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) })
	quit := make(chan struct{})
	go func() {
		defer close(quit)
		b := make([]byte, 1)
		for {
			if n, err := os.Stdin.Read(b); err != nil || n == 1 && (b[0] == 'q' || b[0] == 'Q') {
				return
			}
		}
	}()
	return quit
}
