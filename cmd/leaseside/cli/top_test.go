package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// tmuxPane is one pane of a private tmux server: a real terminal that
// the test reads as a person sees it.
type tmuxPane struct {
	t       *testing.T
	socket  string        // the tmux server's socket, in the test's own directory (-L would leave /tmp/tmux-UID behind)
	changed chan struct{} // a value for every chunk the pane's program writes
	closed  chan struct{} // closed when the pane's program has ended
}

// startTmux runs argv in a detached tmux pane of cols x rows.
func startTmux(t *testing.T, cols, rows int, argv ...string) *tmuxPane {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is needed (make deps installs it)")
	}
	dir := t.TempDir()
	p := &tmuxPane{t: t, socket: filepath.Join(dir, "tmux"), changed: make(chan struct{}, 1), closed: make(chan struct{})}
	t.Cleanup(func() { exec.Command("tmux", "-S", p.socket, "kill-server").Run() })
	fifo := filepath.Join(dir, "pane")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The pane starts paused on a wait-for channel, so that the pipe
	// below sees everything the program writes.
	script := "tmux -S " + shellQuote([]string{p.socket}) + " wait-for go && exec " + shellQuote(argv)
	p.tmux("new-session", "-d", "-s", "t", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows), script)
	p.tmux("pipe-pane", "-t", "t", "-o", "cat >> "+fifo)
	go func() {
		defer close(p.closed)
		f, err := os.Open(fifo)
		if err != nil {
			return
		}
		defer f.Close()
		buf := make([]byte, 4096)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			select {
			case p.changed <- struct{}{}:
			default:
			}
		}
	}()
	p.tmux("wait-for", "-S", "go")
	return p
}

func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func (p *tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", p.socket}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen is what the pane shows now.
func (p *tmuxPane) screen() string { return p.tmux("capture-pane", "-p", "-t", "t") }

// waitScreen waits, redraw after redraw, for a screen that ok accepts.
func (p *tmuxPane) waitScreen(what string, ok func(string) bool) string {
	p.t.Helper()
	timer := time.NewTimer(procTimeout)
	defer timer.Stop()
	for {
		s := p.screen()
		if ok(s) {
			return s
		}
		select {
		case <-p.changed:
		case <-p.closed:
			p.t.Fatalf("the program ended before the pane showed %s; it shows:\n%s", what, s)
		case <-timer.C:
			p.t.Fatalf("the pane never showed %s; it shows:\n%s", what, s)
		}
	}
}

// leaseRow finds the row of lease on a top screen: its token, seconds
// left, renewals and last renewal.
func leaseRow(screen, lease string) (m []string, ok bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(lease) + ` +(\d+) +\[(#*)(-*)\] +([0-9.]+)s +\S+ +detached +(\d+) +(-|(\S+) ago \(round trip (\S+)\)) *$`)
	m = re.FindStringSubmatch(screen)
	return m, m != nil
}

// top in a real terminal (tmux): the host's leases with a validity bar,
// their renewals and last renewal's age and round trip, and the clock, redrawn in
// place as leases come, renew and go; q quits.
func TestTopInTmux(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	dev := startProc(t, "dev", "dev", "--socket", sock, "--data-dir", filepath.Join(t.TempDir(), "dev"))
	dev.waitLine(t, "leaseside dev ready")
	acquire := func(name, ttl string) {
		t.Helper()
		if _, stderr, code := runMain("acquire", name, "--ttl", ttl, "--detached", "--socket", sock); code != ExitOK {
			t.Fatalf("acquire %s: exit %d: %s", name, code, stderr)
		}
	}
	acquire("jobs/short", "3s")
	acquire("jobs/long", "1m")

	p := startTmux(t, 120, 20, leasesideBin(t), "top", "--interval", "200ms", "--socket", sock)
	first := p.waitScreen("both leases, jobs/short renewed twice", func(s string) bool {
		m, ok := leaseRow(s, "jobs/short")
		_, long := leaseRow(s, "jobs/long")
		if !ok || !long {
			return false
		}
		n, _ := strconv.Atoi(m[5])
		return n >= 2 && m[6] != "-"
	})
	for _, want := range []string{"leaseside top  " + sock, "2 leases", "clock: kernel ", "rho 500 ppm in use", "pauses ", "LEASE", "RENEWALS", "LAST RENEWAL"} {
		if !strings.Contains(first, want) {
			t.Errorf("the screen lacks %q:\n%s", want, first)
		}
	}
	m, _ := leaseRow(first, "jobs/short")
	if bar := len(m[2]) + len(m[3]); bar != barWidth {
		t.Errorf("jobs/short's bar is %d wide, want %d:\n%s", bar, barWidth, first)
	}
	for _, d := range m[7:9] {
		if _, err := time.ParseDuration(strings.ReplaceAll(d, "µ", "u")); err != nil {
			t.Errorf("jobs/short's last renewal %q: %q is not a duration:\n%s", m[6], d, first)
		}
	}

	// The long lease's time left runs down from redraw to redraw (it is
	// renewed every 20s only), and the screen never scrolls.
	lm, _ := leaseRow(first, "jobs/long")
	before, _ := strconv.ParseFloat(lm[4], 64)
	p.waitScreen("jobs/long with less time left", func(s string) bool {
		m, ok := leaseRow(s, "jobs/long")
		if !ok {
			return false
		}
		now, _ := strconv.ParseFloat(m[4], 64)
		return now < before
	})

	acquire("jobs/new", "1m")
	p.waitScreen("jobs/new, and 3 leases", func(s string) bool {
		_, ok := leaseRow(s, "jobs/new")
		return ok && strings.Contains(s, "3 leases")
	})
	if _, stderr, code := runMain("release", "jobs/new", "--socket", sock); code != ExitOK {
		t.Fatalf("release: exit %d: %s", code, stderr)
	}
	p.waitScreen("jobs/new gone", func(s string) bool {
		_, ok := leaseRow(s, "jobs/new")
		return !ok && strings.Contains(s, "2 leases")
	})
	if h := strings.TrimSpace(p.tmux("display-message", "-p", "-t", "t", "#{history_size}")); h != "0" {
		t.Errorf("the pane scrolled %s lines: top does not redraw in place", h)
	}

	p.tmux("send-keys", "-t", "t", "q")
	select {
	case <-p.closed:
	case <-time.After(procTimeout):
		t.Fatalf("top did not quit on q; the pane shows:\n%s", p.screen())
	}
}

// Without a terminal, top prints one view and exits.
func TestTopOnce(t *testing.T) {
	v := &topView{socket: "/s.sock", clock: &ipc.ClockStatus{KernelSynced: true, EffectiveRhoPPM: 500}, leases: []ipc.Grant{
		{Lease: "b", Token: "9", ValidMs: 7500, TTLMs: 15000, Owner: ipc.OwnerPID, OwnerPID: 42, Renewals: 3, RenewalLatencyUs: 1234, RenewedAgoMs: 2040},
		{Lease: "a", Token: "8", ValidMs: 15000, TTLMs: 15000, Owner: ipc.OwnerDetached, NoRenew: true},
	}}
	var b strings.Builder
	v.render(&b)
	for _, want := range []string{
		"clock: kernel synchronised, drift unknown (0 samples), rho 500 ppm in use",
		"a      8      [####################]  15.0s  15s   detached (no renew)  0         -",
		"b      9      [##########----------]  7.5s   15s   pid 42               3         2s ago (round trip 1.23ms)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the view lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Index(b.String(), "a      8") > strings.Index(b.String(), "b      9") {
		t.Errorf("leases not sorted by name:\n%s", b.String())
	}
}
