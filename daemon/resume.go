package daemon

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"strconv"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// A lease whose owner is a connection ends with the connection, and a
// restart of the daemon ends every connection. So that a restart does not
// end them (issue 24.1), a daemon that keeps state (persist.go) gives the
// connection a secret with the grant (Grant.Resume); after a restart the
// client connects again and resumes the lease with it (op resume), within
// resumeGrace of the new process's start, and its new connection owns the
// lease from then on. The secret is told only to the connection that
// acquired the lease, and kept in the root-only state files.

// newResumeSecret returns the secret of a lease whose owner is a
// connection, or "" when the daemon keeps no state (nothing to resume
// from).
func (d *Daemon) newResumeSecret(owner string) string {
	if d.ps == nil || owner != ipc.OwnerConnection {
		return ""
	}
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// connOwnerID names connection c as an owner: its number, and with state
// kept the number of this daemon process among those of its sessions, so
// that a connection of a restarted daemon is never taken for a previous
// process's connection of the same number.
func (d *Daemon) connOwnerID(c *ipc.Conn) string {
	if d.ps == nil {
		return "conn:" + strconv.FormatUint(c.ID, 10)
	}
	return "conn:" + strconv.FormatUint(d.ps.start, 10) + "." + strconv.FormatUint(c.ID, 10)
}

// ownGrant is l's grant for its owner's connection: with the resume
// secret. The caller holds d.mu.
func (d *Daemon) ownGrant(l *lease, now clockwatch.Instant) *ipc.Grant {
	g := l.grant(now)
	g.Resume = l.resume
	return g
}

// resumeLease binds a lease whose owner was a connection of a previous
// daemon process to connection c, which proves it is that owner's client
// with the lease's secret: from then on c owns it, and it ends when c
// closes.
func (d *Daemon) resumeLease(c *ipc.Conn, req *ipc.Request) (*ipc.Grant, *ipc.Error) {
	now := d.checkSuspend()
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.findLocked(nil, req.Lease, req.Token, now)
	if l == nil || l.token != parseToken(req.Token) {
		return nil, ipc.Errorf(ipc.CodeNotHeld, "this host does not hold %q with token %s (it ended, or its deadline passed, while the client was away)", req.Lease, req.Token)
	}
	if l.resume == "" || subtle.ConstantTimeCompare([]byte(l.resume), []byte(req.Resume)) != 1 || (c.Cred.UID != 0 && c.Cred.UID != int(l.uid)) {
		return nil, ipc.Errorf(ipc.CodePermissionDenied, "the resume secret does not match the grant of %q with token %s", req.Lease, req.Token)
	}
	if l.conn != nil && l.conn != c {
		return nil, ipc.Errorf(ipc.CodeBadRequest, "lease %q (token %s) is owned by a connection that is still open; only a lease whose connection ended with a daemon restart can be resumed", req.Lease, req.Token)
	}
	l.conn = c
	if d.ps != nil {
		delete(d.ps.awaiting, l)
	}
	d.log.Info("a client resumed its lease", "lease", l.name, "token", l.token, "pid", c.Cred.PID)
	// The renewal this process made before the client came back was told
	// to nobody: the new connection hears the deadline now, after the
	// reply (a client's own deadline only moves later).
	c.Send(&ipc.Event{Event: ipc.EventRenewed, Lease: l.name, Token: strconv.FormatUint(l.token, 10),
		DeadlineBoottimeNs: l.deadline.Nanoseconds(), ValidMs: l.deadline.Sub(now).Milliseconds()})
	return d.ownGrant(l, now), nil
}

// parseToken reads a decimal token (0 when it is not one).
func parseToken(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}
