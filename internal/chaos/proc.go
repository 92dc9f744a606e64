package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// boottime reads CLOCK_BOOTTIME, in nanoseconds: the clock every record,
// event and fault of a run is stamped with (network namespaces share the
// machine's; a grantor in a time namespace of its own reads another, but
// nothing it says is stamped with it).
func boottime() int64 { return clockwatch.System.Now().Nanoseconds() }

// proc is a running process of the suite (a grantor, a sidecar, a
// client): its output lines go, as they come, to a handler and to a log
// file, and the last ones are kept for messages.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait has returned
	state  *os.ProcessState
	// expected is set before the suite ends the process (kill, SIGTERM,
	// a leave): an exit without it is a crash.
	expected atomic.Bool

	mu   sync.Mutex
	tail []string
}

// tailLines is how many output lines a proc keeps for messages.
const tailLines = 40

// startProc starts cmd with its stdout and stderr merged into one pipe;
// every line goes to onLine (from one goroutine, in order, with the
// instant it was read) and to log, when not nil. onLine is called for the
// last time before exited is closed.
func startProc(name string, cmd *exec.Cmd, log io.Writer, onLine func(line string, at int64)) (*proc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	w.Close()
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line, at := sc.Text(), boottime()
			if log != nil {
				fmt.Fprintf(log, "%.3f %s\n", float64(at)/1e9, line)
			}
			p.mu.Lock()
			p.tail = append(p.tail, line)
			if len(p.tail) > tailLines {
				p.tail = p.tail[len(p.tail)-tailLines:]
			}
			p.mu.Unlock()
			if onLine != nil {
				onLine(line, at)
			}
		}
	}()
	go func() {
		cmd.Wait()
		p.state = cmd.ProcessState
		// Children that inherited the pipe (run's command) may keep it
		// open: do not wait for them longer than a moment.
		select {
		case <-read:
		case <-time.After(2 * time.Second):
		}
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// done reports whether the process has exited.
func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// signal sends sig; a process that has exited is not an error.
func (p *proc) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: %v: %w", p.name, sig, err)
	}
	return nil
}

// procTimeout bounds the wait for a process to exit after a signal that
// ends it: generous, the machine is shared.
const procTimeout = 60 * time.Second

// kill sends SIGKILL (which ends a stopped process too) and waits until
// the process is gone.
func (p *proc) kill() error {
	p.expected.Store(true)
	p.signal(syscall.SIGKILL)
	return p.wait(procTimeout)
}

// wait waits up to d for the process to exit.
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.exited:
		return nil
	case <-time.After(d):
		return fmt.Errorf("%s (pid %d) still running after %v", p.name, p.pid(), d)
	}
}

// killedBySignal reports whether the process was ended by a signal.
func (p *proc) killedBySignal() bool {
	if p.state == nil {
		return false
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// lastLines returns the output lines kept, joined.
func (p *proc) lastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}
