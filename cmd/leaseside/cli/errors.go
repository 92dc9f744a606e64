package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/ipc"
)

// The one place where what went wrong becomes an exit code (TEAM.md
// decision 5) and a sentence a person understands: no protocol codes, no
// gRPC statuses, no "context deadline exceeded".

// asked is what a command asked the daemon for, so that its failure can
// be told in the command's own words (its flags, in their units).
type asked struct {
	lease   string
	ttl     time.Duration
	wait    time.Duration
	hasWait bool // the command has --wait
	limit   int  // --limit, for the commands that have it
	shared  bool // --shared, for the commands that have it
}

// fail prints why the command failed and returns its exit code: a usage
// error (exit 2) when the daemon refused a value the user typed.
// With --json it also prints the failure on stdout as a JSON object
// (jsonError), so that a script reading stdout is never left with nothing.
func (cf *clientFlags) fail(e *env, err error, a asked) error {
	code, msg := cf.explain(err, a)
	if code == ExitHeld && cf.conflictCode != nil {
		code = *cf.conflictCode
	}
	if cf.json {
		printJSON(e.stdout, newJSONError(err, a, code, msg))
	}
	if code == ExitUsage {
		return usagef("%s", msg)
	}
	fmt.Fprintf(e.stderr, "leaseside: %s\n", msg)
	return exitCode(code)
}

// jsonError is what a client command run with --json prints on stdout
// when it fails: {"error": {...}}, with the daemon's error code when the
// daemon answered (lease_held, unavailable, ...), else no_daemon or
// timeout, and the exit code the command exits with.
type jsonError struct {
	Error struct {
		Code        string `json:"code"`
		Message     string `json:"message"`
		ExitCode    int    `json:"exit_code"`
		Lease       string `json:"lease,omitempty"`
		HolderToken string `json:"holder_token,omitempty"`
		Holder      string `json:"holder,omitempty"`
	} `json:"error"`
}

func newJSONError(err error, a asked, code int, msg string) *jsonError {
	var j jsonError
	j.Error.Message, j.Error.ExitCode, j.Error.Lease = msg, code, a.lease
	var ie *ipc.Error
	switch {
	case errors.As(err, &ie):
		j.Error.Code, j.Error.HolderToken, j.Error.Holder = ie.Code, ie.HolderToken, ie.Holder
	case errors.Is(err, ipc.ErrNoDaemon):
		j.Error.Code = "no_daemon"
	case errors.Is(err, ipc.ErrConnectionClosed):
		j.Error.Code = "connection_closed"
	case errors.Is(err, context.DeadlineExceeded):
		j.Error.Code = "timeout"
	default:
		j.Error.Code = "error"
	}
	return &j
}

// explain returns the exit code for err and what to tell the user.
func (cf *clientFlags) explain(err error, a asked) (int, string) {
	var ie *ipc.Error
	if errors.As(err, &ie) {
		switch ie.Code {
		case ipc.CodeLeaseHeld:
			return ExitHeld, heldMessage(a, ie)
		case ipc.CodeUnavailable:
			return ExitUnavailable, ie.Message
		case ipc.CodeShuttingDown:
			return ExitUnavailable, "the leaseside daemon is stopping: " + ie.Message
		case ipc.CodeInvalidTTL:
			return ExitUsage, ttlMessage(a.ttl, ie.MinTTLMs, ie.MaxTTLMs)
		case ipc.CodePermissionDenied:
			return ExitError, "permission denied: " + ie.Message
		case ipc.CodeInvalidName:
			return ExitUsage, fmt.Sprintf("NAME %q: %s", a.lease, ie.Message)
		case ipc.CodeBadRequest:
			// The CLI sends well-formed requests: what the daemon or the
			// grantors refuse is a value typed on the command line (a
			// --limit other than the one in force, say).
			msg := strings.TrimPrefix(strings.TrimPrefix(ie.Message, "grantor refused the request: "), "grantor: ")
			switch {
			case a.limit > 0 && strings.Contains(msg, "limit"):
				msg = fmt.Sprintf("--limit %d refused: %s", a.limit, msg)
			case strings.HasPrefix(msg, "value "):
				msg = "--" + msg
			}
			return ExitUsage, msg
		case ipc.CodeNotSupported:
			return ExitError, "the grantor cluster does not support this yet (a grantor is older, or has only just joined; upgrade every grantor, or try again in a few seconds): " + ie.Message
		}
		return ExitError, ie.Message
	}
	switch {
	case errors.Is(err, ipc.ErrNoDaemon):
		return ExitUnavailable, cf.socketMessage(err)
	case errors.Is(err, ipc.ErrConnectionClosed):
		return ExitUnavailable, "the leaseside daemon closed the connection: it stopped or restarted"
	case errors.Is(err, context.DeadlineExceeded):
		within := "--timeout " + fmtDuration(cf.timeout)
		if a.wait > 0 {
			within = "--wait " + waitText(a.wait) + " plus " + within
		}
		return ExitUnavailable, "no answer within " + within + ": the grantor cluster may have no leader " +
			"('leaseside members' shows it), or the daemon is overloaded"
	}
	return ExitError, err.Error()
}

// heldMessage says who holds the lease, and what the wait did.
func heldMessage(a asked, ie *ipc.Error) string {
	msg := fmt.Sprintf("lease %s is held elsewhere", a.lease)
	who := holderText(ie.HolderToken, ie.Holder)
	switch {
	case a.limit > 1:
		msg = fmt.Sprintf("all %d holders of lease %s are taken", a.limit, a.lease)
		if who != "" {
			msg += " (" + who + " among them)"
		}
	case a.shared && strings.Contains(ie.Message, "waits for it ahead"):
		msg = fmt.Sprintf("a writer waits for lease %s ahead of this shared acquire (waiting writers keep new readers out)", a.lease)
	case strings.Contains(ie.Message, "held shared by"):
		msg = fmt.Sprintf("lease %s is held shared (by readers)", a.lease)
		if who != "" {
			msg += " (" + who + " among them)"
		}
	case who != "":
		msg += " (" + who + ")"
	}
	switch {
	case !a.hasWait:
	case a.wait > 0:
		msg += "; --wait " + waitText(a.wait) + " ran out"
	default:
		msg += "; --wait DURATION waits for it"
	}
	return msg
}

// holderText is "token 41 on web1", or what of it is known.
func holderText(token, host string) string {
	var parts []string
	if token != "" {
		parts = append(parts, "token "+token)
	}
	if host != "" {
		parts = append(parts, "on "+host)
	}
	return strings.Join(parts, " ")
}

// hostName is a holder's sidecar name as the CLI shows it: without TLS
// every sidecar is "insecure", which names no host, and is left out (as
// the daemon leaves it out of lease_held).
func hostName(holder string) string {
	if holder == "insecure" {
		return ""
	}
	return holder
}

// ttlMessage is the one message for a term the daemon does not accept.
func ttlMessage(ttl time.Duration, minMs, maxMs int64) string {
	whose := "this daemon accepts"
	if minMs <= 0 || maxMs <= 0 {
		whose = "a daemon accepts by default"
		def := daemon.DefaultConfig()
		minMs, maxMs = def.MinTTL.Milliseconds(), def.MaxTTL.Milliseconds()
	}
	return fmt.Sprintf("--ttl %s is outside the terms %s: %s to %s", fmtDuration(ttl), whose,
		fmtDuration(time.Duration(minMs)*time.Millisecond), fmtDuration(time.Duration(maxMs)*time.Millisecond))
}

// checkTerm refuses, in the flag's words, a --ttl that cannot be sent as
// it is (under a millisecond, or not a whole number of them); the daemon
// checks the rest against its range.
func (cf *clientFlags) checkTerm(ctx context.Context, c *ipc.Client, ttl time.Duration) error {
	switch {
	case ttl >= time.Millisecond && ttl%time.Millisecond == 0:
		return nil
	case ttl > time.Millisecond:
		return usagef("--ttl %s: a term is a whole number of milliseconds", ttl)
	}
	var minMs, maxMs int64
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	if h, err := c.Hello(ctx); err == nil {
		minMs, maxMs = h.MinTTLMs, h.MaxTTLMs
	}
	return usagef("%s", ttlMessage(ttl, minMs, maxMs))
}

// checkRange refuses a duration flag outside 0 to limit, which is what
// the protocol carries.
func checkRange(flag string, v, limit time.Duration) error {
	if v < 0 || v > limit {
		return usagef("--%s %s: must be from 0s to %s", flag, fmtDuration(v), fmtDuration(limit))
	}
	return nil
}

// socketMessage says why the daemon's socket could not be used: which
// socket was tried and why that one, and what to do.
func (cf *clientFlags) socketMessage(err error) string {
	path, why := cf.socket, "given with --socket"
	if path == "" {
		path, why = ipc.ClientSocket()
	}
	var errno syscall.Errno
	errors.As(err, &errno)
	switch errno {
	case syscall.EACCES, syscall.EPERM:
		g, ok := socketGroup(path)
		if !ok {
			return fmt.Sprintf("permission denied: the leaseside daemon at %s (%s) serves root only: run your own with 'leaseside dev', "+
				"or start it with --socket-group leaseside and add yourself to that group (sudo usermod -aG leaseside $USER)", path, why)
		}
		return fmt.Sprintf("permission denied: add yourself to group %s (sudo usermod -aG %s $USER, then log in again) to use the leaseside daemon at %s (%s)",
			g, g, path, why)
	case syscall.ENOENT, syscall.ECONNREFUSED:
		return fmt.Sprintf("no leaseside daemon at %s (%s): start one with 'leaseside dev', or 'sudo systemctl start leaseside.socket'", path, why)
	}
	return fmt.Sprintf("cannot reach the leaseside daemon at %s (%s): %v", path, why, err)
}

// socketGroup names the group that may use the socket at path: the group
// of the socket, else of its directory (which a non-member may not enter).
// It returns false when that is root's group: the socket is root's alone.
func socketGroup(path string) (string, bool) {
	for _, p := range []string{path, filepath.Dir(path)} {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
			continue
		case st.Gid == 0:
			return "", false
		}
		if g, err := user.LookupGroupId(strconv.Itoa(int(st.Gid))); err == nil {
			return g.Name, true
		}
		return strconv.Itoa(int(st.Gid)), true
	}
	return "leaseside", true
}

// fmtDuration prints d as a person writes it: 24h, 1m30s, 999ms.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
