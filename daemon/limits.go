package daemon

import (
	"github.com/leaseside/leaseside/ipc"
)

// perUID counts what one local user holds in the daemon: leases listed
// (held), and acquires in flight (which may become leases), for
// MaxLeasesPerUID.
// Guarded by d.mu.
type perUID struct {
	held, acquiring int
}

// reserveLease counts an acquire of uid in flight, unless uid's leases
// and acquires in flight are at the limit already. done must be called
// once the acquire is over (its lease, if any, is counted as held then).
func (d *Daemon) reserveLease(uid int) (done func(), err *ipc.Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.uidUse(uid)
	if max := d.cfg.MaxLeasesPerUID; max > 0 && u.held+u.acquiring >= max {
		return nil, ipc.Errorf(ipc.CodeResourceExhausted, "uid %d holds or is acquiring %d leases, the most the daemon allows one user (max_leases_per_uid)", uid, u.held+u.acquiring)
	}
	u.acquiring++
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.uidUse(uid).acquiring--
		d.dropUIDLocked(uid)
	}, nil
}

// uidUse returns uid's counts. The caller holds d.mu.
func (d *Daemon) uidUse(uid int) *perUID {
	u := d.uids[uid]
	if u == nil {
		u = &perUID{}
		d.uids[uid] = u
	}
	return u
}

// dropUIDLocked forgets a uid that holds and acquires nothing.
func (d *Daemon) dropUIDLocked(uid int) {
	if u := d.uids[uid]; u != nil && u.held == 0 && u.acquiring == 0 {
		delete(d.uids, uid)
	}
}

// listLocked enters l in the table (stepLocked, as l is granted). The
// caller holds d.mu.
func (d *Daemon) listLocked(l *lease) {
	d.leases[l.tableKey()] = l
	d.uidUse(int(l.uid)).held++
	d.indexSlotLocked(l, true)
	d.persistLater()
}

// forgetLocked takes l out of the table (stepLocked, as l ends). The
// caller holds d.mu.
func (d *Daemon) forgetLocked(l *lease) {
	if d.leases[l.tableKey()] == l {
		delete(d.leases, l.tableKey())
		d.indexSlotLocked(l, false)
		d.uidUse(int(l.uid)).held--
		d.dropUIDLocked(int(l.uid))
		d.persistLater()
	}
	l.stopWatch()
}

// visible reports whether a caller may see lease l in status and watch:
// root sees every lease; others the leases their uid acquired, and those
// an ACL rule names them for. (An empty ACL lets every socket user use
// every name, but shows each only its own leases.)
func (d *Daemon) visible(cred ipc.Cred, l *lease) bool {
	return cred.UID == 0 || cred.UID == int(l.uid) || d.cfg.ACL.grants(cred, l.name)
}
