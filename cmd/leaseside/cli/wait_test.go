package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// output collects what a command writes, for a test to wait on.
type output struct {
	mu     sync.Mutex
	out    bytes.Buffer
	change chan struct{}
}

func newOutput() *output { return &output{change: make(chan struct{})} }

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.out.Write(b)
	close(o.change)
	o.change = make(chan struct{})
	return len(b), nil
}

func (o *output) text() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.out.String()
}

// waitFor waits until the output holds a match of re, and returns it.
func (o *output) waitMatch(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	timer := time.NewTimer(procTimeout)
	defer timer.Stop()
	for {
		o.mu.Lock()
		m, ch := re.FindString(o.out.String()), o.change
		o.mu.Unlock()
		if m != "" {
			return m
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("the output never matched %q; it is:\n%q", re, o.text())
		}
	}
}

// waitFor waits until the output holds s.
func (o *output) waitFor(t *testing.T, s string) {
	t.Helper()
	o.waitMatch(t, regexp.MustCompile(regexp.QuoteMeta(s)))
}

// terminal is a pseudo-terminal: the command writes to tty, the test
// reads what a person would see from the master side.
type terminal struct {
	*output
	tty    *os.File
	master *os.File
}

func newTerminal(t *testing.T) *terminal {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{output: newOutput(), tty: tty, master: master}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		tty.Close()
		master.Close()
		<-done
	})
	return term
}

// On a terminal, a waiting acquire or run shows who holds the lease (an
// elect: who leads, observed) and
// how long the wait has run, redrawn in place; it says when the wait ran
// out or the lease came. Off a terminal, or with --quiet, stderr stays
// silent until the end.
func TestWaitShowsHolderOnTerminal(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	dev := startProc(t, "dev", "dev", "--socket", sock, "--data-dir", filepath.Join(t.TempDir(), "dev"))
	dev.waitLine(t, "leaseside dev ready")
	tokens := map[string]string{}
	for _, name := range []string{"held", "freed"} {
		out, stderr, code := runMain("acquire", name, "--detached", "--socket", sock)
		if code != ExitOK {
			t.Fatalf("acquire %s: exit %d: %s", name, code, stderr)
		}
		tokens[name] = strings.TrimSpace(out)
	}

	t.Run("wait runs out", func(t *testing.T) {
		term := newTerminal(t)
		code := Main([]string{"acquire", "held", "--detached", "--wait", "3s", "--socket", sock}, io.Discard, term.tty)
		if code != ExitHeld {
			t.Fatalf("exit %d, want %d:\n%q", code, ExitHeld, term.text())
		}
		term.waitFor(t, "--wait 3s ran out")
		out := term.text()
		draws := strings.Count(out, "\r\033[Kwaiting for held: held by token "+tokens["held"]+"; waited ")
		if draws < 2 {
			t.Errorf("the wait line was drawn %d times, want it redrawn while waiting:\n%q", draws, out)
		}
		if strings.Contains(out[:strings.LastIndex(out, "waiting for")], "\n") {
			t.Errorf("the wait line was not redrawn in place:\n%q", out)
		}
		if !strings.Contains(out, "waited 0s of 3s") || !strings.Contains(out, "\r\033[Kleaseside: lease held is held elsewhere (token "+tokens["held"]+"); --wait 3s ran out") {
			t.Errorf("want the first draw and then the line cleared for the verdict:\n%q", out)
		}
	})

	t.Run("lease comes", func(t *testing.T) {
		term := newTerminal(t)
		codes := make(chan int, 1)
		go func() {
			codes <- Main([]string{"run", "freed", "--wait", "1m", "--socket", sock, "--", "true"}, io.Discard, term.tty)
		}()
		term.waitFor(t, "waiting for freed: held by token "+tokens["freed"]+"; waited 0s of 1m")
		if _, stderr, code := runMain("release", "freed", "--socket", sock); code != ExitOK {
			t.Fatalf("release: exit %d: %s", code, stderr)
		}
		select {
		case code := <-codes:
			if code != ExitOK {
				t.Fatalf("run: exit %d:\n%q", code, term.text())
			}
		case <-time.After(procTimeout):
			t.Fatalf("run did not end:\n%q", term.text())
		}
		term.waitFor(t, "\r\033[Kleaseside: freed acquired after waiting ")
	})

	t.Run("wait forever", func(t *testing.T) {
		if _, stderr, code := runMain("acquire", "forever", "--detached", "--socket", sock); code != ExitOK {
			t.Fatalf("acquire: exit %d: %s", code, stderr)
		}
		term := newTerminal(t)
		codes := make(chan int, 1)
		go func() {
			codes <- Main([]string{"acquire", "forever", "--detached", "--wait", "forever", "--socket", sock}, io.Discard, term.tty)
		}()
		term.waitFor(t, "waiting for forever: held by token ")
		term.waitFor(t, "; waited 1s (no limit)")
		if _, stderr, code := runMain("release", "forever", "--socket", sock); code != ExitOK {
			t.Fatalf("release: exit %d: %s", code, stderr)
		}
		select {
		case code := <-codes:
			if code != ExitOK {
				t.Fatalf("acquire --wait forever: exit %d:\n%q", code, term.text())
			}
		case <-time.After(procTimeout):
			t.Fatalf("acquire --wait forever did not end:\n%q", term.text())
		}
	})

	t.Run("elect shows who leads", func(t *testing.T) {
		term := newTerminal(t)
		code := Main([]string{"elect", "held", "--value", "v", "--wait", "3s", "--socket", sock, "--", "true"}, io.Discard, term.tty)
		if code != ExitHeld {
			t.Fatalf("exit %d, want %d:\n%q", code, ExitHeld, term.text())
		}
		term.waitFor(t, "\r\033[Kleaseside: lease held is held elsewhere (token "+tokens["held"]+"); --wait 3s ran out")
		if out := term.text(); !strings.Contains(out, "\r\033[Kwaiting to lead held: led by token "+tokens["held"]+"; waited 1s") {
			t.Errorf("want the leader and the time waited, redrawn in place:\n%q", out)
		}
	})

	t.Run("quiet", func(t *testing.T) {
		term := newTerminal(t)
		code := Main([]string{"acquire", "held", "--detached", "--wait", "1s", "--quiet", "--socket", sock}, io.Discard, term.tty)
		if code != ExitHeld {
			t.Fatalf("exit %d, want %d", code, ExitHeld)
		}
		term.waitFor(t, "--wait 1s ran out")
		if strings.Contains(term.text(), "waiting for") {
			t.Errorf("--quiet showed the wait:\n%q", term.text())
		}
	})

	t.Run("not a terminal", func(t *testing.T) {
		_, stderr, code := runMain("acquire", "held", "--detached", "--wait", "1s", "--socket", sock)
		if code != ExitHeld || strings.Contains(stderr, "waiting for") || strings.Contains(stderr, "\r") {
			t.Errorf("exit %d, stderr %q: want 75 and only the verdict", code, stderr)
		}
	})
}
