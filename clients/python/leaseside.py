"""A client for the leaseside daemon's socket, using only Python's standard library.

    from leaseside import Client
    with Client() as c:                       # $LEASESIDE_SOCKET or the default path
        lease = c.acquire("jobs/render-42", ttl=15)
        for item in work:
            if not lease.valid():             # right before each write...
                break                         # lost, or the deadline passed
            write(item, fencing_token=lease.token)   # ...and send the token anyway

Leases are bound to the client's connection by default: closing the client
releases them. Elections (campaign, proclaim, resign, observe), semaphores
(acquire's limit), holder watches (watch_holders), token checks at the
grantors (check_token) and each lease's state (SAFE, JEOPARDY, LOST) are
described with their methods. The protocol is documented in
ipc/PROTOCOL.md.

Install with `pip install ./clients/python` (no dependencies), or copy this
one file next to your program.
"""

import collections
import itertools
import json
import os
import queue
import socket
import stat
import struct
import threading
import time
import warnings

__all__ = ["Client", "Lease", "Leader", "LeasesideError", "DaemonUnreachableError", "default_socket_path", "boottime_ns",
           "SAFE", "JEOPARDY", "LOST", "WAIT_FOREVER"]

__version__ = "0.1.0"


SYSTEM_SOCKET = "/run/leaseside/leaseside.sock"

# A lease's states (Lease.state): held and renewing; held, but renewals
# have failed for a third of its term (the deadline may come without a
# renewal: finish or pause what must not be cut off); no longer held.
SAFE, JEOPARDY, LOST = "safe", "jeopardy", "lost"

# Leader is who leads an election (Client.observe): the grant's token, its
# holder's sidecar name ("insecure" without TLS) and the value it published.
Leader = collections.namedtuple("Leader", "lease token holder value")

# The longest wait one request may carry (the protocol's wait_ms bound).
_MAX_WAIT = 3600

# acquire(wait=WAIT_FOREVER) waits for a held lease without a limit (as
# flock and etcdctl lock do), asking again _MAX_WAIT at a time.
WAIT_FOREVER = float("inf")


def _exists(path):
    """True if path exists, or may exist where this user cannot look (the
    system socket's directory is for root and the leaseside group): then
    connecting says "permission denied", which is the truth."""
    try:
        os.stat(path)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def default_socket_path():
    """$LEASESIDE_SOCKET, else the daemon's default for this user; a
    non-root user with no daemon of their own they can trust uses the
    system daemon (as `leaseside` itself does; see _pick_socket)."""
    path = os.environ.get("LEASESIDE_SOCKET")
    if path:
        return path
    if os.geteuid() == 0:
        return SYSTEM_SOCKET
    return _pick_socket(os.geteuid(), _user_socket_path())[0]


def _user_socket_path():
    """Where this (non-root) user's own daemon listens by default."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "leaseside", "leaseside.sock")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, "leaseside-%d" % os.geteuid(), "leaseside.sock")


def _pick_socket(euid, user):
    """(path, distrust): the per-user socket user of a caller of uid euid,
    or the system daemon's. A per-user socket is used only if its
    directory is the caller's and writable by nobody else (any local user
    may create /tmp/leaseside-UID first and run a daemon there that hands
    out fake leases); distrust says why one that is there was not."""
    if _exists(user):
        why = _untrusted_dir(os.path.dirname(user), euid)
        if why:
            return SYSTEM_SOCKET, why
        return user, None
    if _exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET, None
    return user, None


def _untrusted_dir(d, euid):
    """Why directory d may hold another user's socket (not euid's, or
    writable by its group or others), or None."""
    try:
        st = os.stat(d)
    except OSError as e:
        return "%s: %s" % (d, e)
    if st.st_uid != euid:
        return "%s belongs to uid %d, not to you (uid %d): another user's daemon may listen there" % (d, st.st_uid, euid)
    if st.st_mode & 0o022:
        return "%s is writable by its group or others (mode %#o): another user may have put a socket there" % (
            d, stat.S_IMODE(st.st_mode))
    return None


def _untrusted_server(sock, euid):
    """Why the daemon at the other end of sock is not to be trusted (it
    runs as neither euid nor root, by SO_PEERCRED), or None."""
    _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    if uid not in (euid, 0):
        return "the daemon at %s runs as uid %d, neither you (uid %d) nor root" % (sock.getpeername(), uid, euid)
    return None


def _warn_fallback(why):
    warnings.warn("leaseside: not using the per-user socket: %s; using the system daemon's at %s" % (why, SYSTEM_SOCKET),
                  RuntimeWarning, stacklevel=4)


class DaemonUnreachableError(ConnectionError):
    """The daemon's socket could not be used. path is the socket tried,
    hint what to do; errno is the connect's (ENOENT or ECONNREFUSED: no
    daemon there; EACCES: one is there, but this user may not use it)."""

    def __init__(self, path, err):
        self.path = path
        if isinstance(err, PermissionError):
            self.hint = ("the daemon's socket is for root and its group: join that group (sudo usermod -aG leaseside $USER, "
                         "then log in again), or run your own daemon with 'leaseside dev'")
            what = "permission denied on the leaseside daemon's socket %s" % path
        elif isinstance(err, TimeoutError):
            self.hint = "it may be stopped or overloaded: see 'leaseside status' and its log"
            what = "the leaseside daemon at %s did not accept the connection in time" % path
        elif isinstance(err, (FileNotFoundError, ConnectionRefusedError)):
            self.hint = "start one with 'leaseside dev', or 'sudo systemctl start leaseside.socket'; LEASESIDE_SOCKET names another"
            what = "no leaseside daemon at %s" % path
        else:
            self.hint = "is LEASESIDE_SOCKET (or the path given) a leaseside daemon's socket?"
            what = "cannot reach the leaseside daemon at %s: %s" % (path, err.strerror or err)
        super().__init__(err.errno, "%s: %s" % (what, self.hint))


# CONNECT_TIMEOUT is how long (seconds) a connect waits for the daemon to
# accept it: a daemon that is stopped (SIGSTOP) or overloaded leaves
# connections in its listen queue, and once that is full a connect would
# block for good.
CONNECT_TIMEOUT = 10.0


def _connect(path, euid=None, timeout=None):
    """A socket connected to the daemon at path. euid set: path is a
    per-user socket the client chose itself for a caller of that uid, and
    a daemon there that runs as neither it nor root is refused, with a
    warning, for the system daemon's. A socket that cannot be used, or is
    not accepted within timeout seconds (CONNECT_TIMEOUT if None), raises
    DaemonUnreachableError naming it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _connect_within(sock, path, CONNECT_TIMEOUT if timeout is None else timeout)
        why = _untrusted_server(sock, euid) if euid is not None else None
    except OSError as e:
        sock.close()
        raise DaemonUnreachableError(path, e) from e
    except BaseException:
        sock.close()
        raise
    if why is None:
        return sock
    sock.close()
    _warn_fallback(why)
    return _connect(SYSTEM_SOCKET)


def _connect_within(sock, path, timeout):
    """Connects sock to path, giving up after timeout seconds. A Unix
    socket's connect cannot be waited on with select (a full listen queue
    fails a non-blocking connect with EAGAIN at once), but a blocking one
    waits for room at most the socket's send timeout, then fails with
    EAGAIN: that is the timeout here, raised as TimeoutError."""
    sec = int(timeout)
    tv = struct.pack("ll", sec, int((timeout - sec) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
    try:
        sock.connect(path)
    except BlockingIOError as e:
        raise TimeoutError(e.errno, "not accepted within %gs" % timeout) from e
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 0))


def _connect_default():
    """A socket connected to the daemon this user's client uses when given
    no path (default_socket_path), with the per-user socket's checks."""
    if os.environ.get("LEASESIDE_SOCKET") or os.geteuid() == 0:
        return _connect(default_socket_path())
    euid = os.geteuid()
    path, distrust = _pick_socket(euid, _user_socket_path())
    if distrust:
        _warn_fallback(distrust)
    return _connect(path, None if path == SYSTEM_SOCKET else euid)


def boottime_ns():
    """CLOCK_BOOTTIME now, in nanoseconds: the clock lease deadlines are on."""
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)


class LeasesideError(Exception):
    """An error reply from the daemon, with its stable code."""

    def __init__(self, code, message, holder_token=None, holder=None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.holder_token = holder_token
        self.holder = holder  # the holder's sidecar name, on lease_held, when known


class Lease:
    """A lease held through this client.

    deadline_boottime_ns follows the renewals the daemon reports, and moves
    earlier when the daemon shortens it (a drift found late). lost is a
    threading.Event set when the lease is lost or released, or when its
    deadline passes by this process's own reading of CLOCK_BOOTTIME (so a
    hung daemon cannot keep it valid); reason then says why.
    """

    def __init__(self, grant):
        self.name = grant["lease"]
        self.token = grant["token"]
        self.ttl_ms = grant.get("ttl_ms")
        self.limit = grant.get("limit", 1)      # a semaphore's limit; 1: exclusive
        self.holders = grant.get("holders", 1)  # holders when this grant was made
        self.shared = grant.get("shared", False)  # a shared (read) grant of a read/write lock
        self.value = grant.get("value", "")     # an election's value (campaign, proclaim)
        self.deadline_boottime_ns = grant["deadline_boottime_ns"]
        # The secret that resumes a lease owned by the connection after the
        # daemon restarted (Client does it by itself); None otherwise.
        self.resume = grant.get("resume")
        self.lost = threading.Event()
        self.reason = None
        self._state = SAFE
        self._changed = threading.Condition()
        self._lock = threading.Lock()
        self._timer = None
        self._arm()

    @property
    def state(self):
        """SAFE, JEOPARDY (renewals have failed for a third of the term; still
        held) or LOST, as the daemon and this process's clock tell it."""
        if self.lost.is_set():
            return LOST
        return self._state

    def wait_state(self, *states, timeout=None):
        """Waits until the lease is in one of states (SAFE, JEOPARDY, LOST) and
        returns that state, or None if timeout (seconds) passes first."""
        with self._changed:
            if self._changed.wait_for(lambda: self.state in states, timeout):
                return self.state
        return None

    def _set_state(self, state):
        with self._changed:
            self._state = state
            self._changed.notify_all()

    def valid(self):
        """True while CLOCK_BOOTTIME is before the deadline and the lease is not lost."""
        return not self.lost.is_set() and boottime_ns() < self.deadline_boottime_ns

    def _renewed(self, deadline_ns):
        with self._lock:
            self.deadline_boottime_ns = max(self.deadline_boottime_ns, deadline_ns)

    def _shortened(self, deadline_ns):
        # A drift found after the deadline was told: the earlier one holds.
        with self._lock:
            if deadline_ns >= self.deadline_boottime_ns:
                return
            self.deadline_boottime_ns = deadline_ns
            if self._timer:
                self._timer.cancel()
        self._arm()

    def _arm(self):
        # A timer only wakes us; BOOTTIME decides (_watchdog).
        with self._lock:
            left = (self.deadline_boottime_ns - boottime_ns()) / 1e9
            self._timer = threading.Timer(max(left, 0), self._watchdog)
            self._timer.daemon = True
            self._timer.start()

    def _watchdog(self):
        if self.lost.is_set():
            return
        if boottime_ns() >= self.deadline_boottime_ns:
            self._end("deadline_passed")
        else:
            self._arm()

    def _end(self, reason):
        with self._lock:
            if self.lost.is_set():
                return
            self.reason = reason
            self.lost.set()
            if self._timer:
                self._timer.cancel()
        self._set_state(LOST)

    def __repr__(self):
        return "Lease(%r, token=%s)" % (self.name, self.token)


class Client:
    """One connection to the daemon. Safe to use from several threads.

    on_event, if given, is called (from the reader thread) with every event
    the daemon pushes, as a dict.
    """

    def __init__(self, path=None, on_event=None, timeout=30.0):
        self._sock = _connect(path) if path else _connect_default()
        self._file = self._sock.makefile("rb")
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending = {}
        self._leases = {}
        self._acquiring = {}   # name -> acquires in flight
        self._orphans = {}     # name -> end event that overtook its grant
        self._subs = {}        # ("observe" or "holders", name) -> queues (observe, watch_holders)
        self._on_event = on_event
        self._path = self._sock.getpeername()  # where a resume dials again
        self._closing = False
        self._resuming = False   # a thread resumes leases after a daemon restart
        self._to_resume = []
        self.closed = threading.Event()
        self._reader = threading.Thread(target=self._read, args=(self._sock, self._file), name="leaseside-reader", daemon=True)
        self._reader.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Closes the connection; connection-bound leases are released."""
        with self._lock:
            self._closing = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._reader.join(self._timeout)

    def hello(self):
        return self.call({"op": "hello"})

    def acquire(self, name, ttl, wait=0, owner=None, owner_pid=None, lock_delay=0, limit=1, shared=False):
        """Acquires a lease; ttl, wait and lock_delay are in seconds. wait is
        how long to wait for a held lease (WAIT_FOREVER: without a limit);
        then LeasesideError lease_held. limit above 1 makes it a semaphore:
        up to limit holders at once, cluster-wide, each with its own token
        (every holder asks with the same limit). shared=True takes a shared
        (read) grant of a read/write lock: any number of shared holders at
        once, or one holder without shared (a writer); a waiting writer
        keeps new shared acquires out. Not with limit above 1 (bad_request);
        needs a daemon of protocol 5."""
        left = wait
        while True:
            turn = min(left, _MAX_WAIT)
            if wait != WAIT_FOREVER:
                left -= turn
            req = self._acquire_request("acquire", name, ttl, turn, owner, owner_pid, lock_delay)
            if limit != 1:
                req["limit"] = limit
            if shared:
                req["shared"] = True
            try:
                return self._acquire(req, turn)
            except LeasesideError as e:
                if e.code != "lease_held" or left <= 0:
                    raise

    def campaign(self, name, value, ttl, wait=None, owner=None, owner_pid=None, lock_delay=0):
        """Runs for leader of the election name with value (an address, say):
        waits in line until it leads (wait=None: for as long as it takes; else
        at most wait seconds, then LeasesideError lease_held) and returns the
        Lease that makes it leader. Observers see value while it leads."""
        left = WAIT_FOREVER if wait is None else wait
        while True:
            turn = min(left, _MAX_WAIT)
            if left != WAIT_FOREVER:
                left -= turn
            req = self._acquire_request("elect", name, ttl, turn, owner, owner_pid, lock_delay)
            req["value"] = value
            try:
                return self._acquire(req, turn)
            except LeasesideError as e:
                if e.code != "lease_held" or left <= 0:
                    raise

    def proclaim(self, lease, value):
        """Publishes a new value for lease (one this client leads with),
        keeping its token."""
        grant = self.call({"op": "proclaim", "lease": lease.name, "token": lease.token, "value": value})
        lease.value = grant.get("value", value)

    def resign(self, lease):
        """Gives up leadership: releases lease (only that grant)."""
        self.call({"op": "resign", "lease": lease.name, "token": lease.token})
        self._end(lease.name, lease.token, "released")

    def observe(self, name):
        """Follows the leader of the election name, cluster-wide. Returns a
        queue.Queue that gets the leader now, then every change in order: a
        Leader, or None while nobody leads. It is fed for as long as the
        connection lasts (Client.closed says when it ended)."""
        return self._subscribe(name, "observe", {"op": "observe", "lease": name})

    def watch_holders(self, name):
        """Follows the holders of name, cluster-wide. Returns a queue.Queue that
        gets holder events (dicts): first change "sync" with the holders now,
        then "acquired", "released", "expired" or "proclaimed" with the token,
        holder and value of the grant that changed, and the holders after it."""
        return self._subscribe(name, "holders", {"op": "watch", "lease": name, "holders": True})

    def check_token(self, name, token):
        """Asks the grantor cluster whether token is a live grant of name.
        Returns (live, tokens): tokens are the grants of name that stand now.
        A True answer is only as good as the time between it and the write it
        guards."""
        resp = self.call({"op": "check_token", "lease": name, "token": str(token)})
        return resp["live"], resp.get("tokens", [])

    def _subscribe(self, name, kind, req):
        q = queue.Queue()
        with self._lock:
            self._subs.setdefault((kind, name), []).append(q)
        try:
            self.call(req)
        except BaseException:
            with self._lock:
                self._subs[(kind, name)].remove(q)
            raise
        return q

    @staticmethod
    def _acquire_request(op, name, ttl, wait, owner, owner_pid, lock_delay):
        req = {"op": op, "lease": name, "ttl_ms": int(ttl * 1000)}
        if wait:
            req["wait_ms"] = int(wait * 1000)
        if owner:
            req["owner"] = owner
        if owner_pid:
            req["owner_pid"] = owner_pid
        if lock_delay:
            req["lock_delay_ms"] = int(lock_delay * 1000)
        return req

    def _acquire(self, req, wait):
        name = req["lease"]
        with self._lock:
            self._acquiring[name] = self._acquiring.get(name, 0) + 1
        try:
            grant = self.call(req, extra_timeout=wait)
        finally:
            with self._lock:
                orphan = self._orphans.get(name)
                self._acquiring[name] -= 1
                if not self._acquiring[name]:
                    del self._acquiring[name]
                    self._orphans.pop(name, None)
        lease = Lease(grant)
        if orphan and orphan.get("token") == lease.token:
            lease._end(orphan.get("reason") or orphan["event"])
            return lease
        with self._lock:
            self._leases[name] = lease
        return lease

    def release(self, name, token=None):
        """Releases a lease this host holds (only the grant with token, if given)."""
        req = {"op": "release", "lease": name}
        if token is not None:
            req["token"] = str(token)
        self.call(req)
        self._end(name, token, "released")

    def renew(self, name, token=None):
        req = {"op": "renew", "lease": name}
        if token is not None:
            req["token"] = str(token)
        return self.call(req)

    def check(self, name, token=None):
        req = {"op": "check", "lease": name}
        if token is not None:
            req["token"] = str(token)
        return self.call(req)

    def status(self):
        return self.call({"op": "status"})["leases"]

    def watch(self, name=None):
        """Subscribes this connection to lease events (see on_event)."""
        req = {"op": "watch"}
        if name:
            req["lease"] = name
        self.call(req)

    def call(self, req, extra_timeout=0):
        """Sends one request and returns its reply; raises LeasesideError on an error reply."""
        req = dict(req, id=next(self._ids))
        slot = [threading.Event(), None]
        with self._lock:
            self._pending[req["id"]] = slot
        try:
            with self._lock:
                sock = self._sock
            sock.sendall((json.dumps(req) + "\n").encode())
            if not slot[0].wait(self._timeout + extra_timeout):
                raise TimeoutError("no reply from leaseside to %s" % req["op"])
        finally:
            with self._lock:
                self._pending.pop(req["id"], None)
        resp = slot[1]
        if resp is None:
            raise ConnectionError("connection to leaseside closed")
        if not resp.get("ok"):
            err = resp.get("error") or {}
            raise LeasesideError(err.get("code", "internal"), err.get("message", ""), err.get("holder_token"), err.get("holder"))
        return resp

    def _read(self, sock, file):
        try:
            for line in file:
                msg = json.loads(line)
                if "event" in msg:
                    self._event(msg)
                    continue
                with self._lock:
                    slot = self._pending.get(msg.get("id"))
                if slot:
                    slot[1] = msg
                    slot[0].set()
        except (OSError, ValueError):
            pass
        finally:
            sock.close()
            self.closed.set()
            with self._lock:
                slots = list(self._pending.values())
                leases = list(self._leases.values())
                self._leases.clear()
                end = [l for l in leases if self._closing or not l.resume]
                self._to_resume += [l for l in leases if not self._closing and l.resume]
                start = bool(self._to_resume) and not self._resuming
                if start:
                    self._resuming = True
            for slot in slots:
                slot[0].set()
            for lease in end:
                lease._end("connection_closed")
            if start:
                threading.Thread(target=self._resume, name="leaseside-resume", daemon=True).start()

    def _resume(self):
        try:
            self._resume_loop()
        except BaseException:
            with self._lock:
                self._resuming = False
                left, self._to_resume = self._to_resume, []
            for lease in left:
                lease._end("connection_closed")
            raise

    def _resume_loop(self):
        # A restart of the daemon ended the connection: its leases that have
        # a resume secret are bound to a new connection (op resume) once the
        # socket answers again, each while its own deadline allows; a lease
        # the new daemon refuses ends as the connection's end did. A new
        # connection that ends too puts its leases back in line.
        delay = 0.02
        while True:
            with self._lock:
                leases, self._to_resume = self._to_resume, []
                closing = self._closing
                if not leases:
                    self._resuming = False  # with the check: a connection that ends now starts another
                    return
            live = [l for l in leases if not closing and l.valid()]
            for lease in leases:
                if lease not in live:
                    lease._end("connection_closed")
            if not live:
                continue
            if self.closed.is_set():
                try:
                    sock = _connect(self._path)
                except DaemonUnreachableError:
                    with self._lock:
                        self._to_resume += live
                    time.sleep(delay)
                    delay = min(delay * 2, 0.5)
                    continue
                file = sock.makefile("rb")
                with self._lock:
                    self._sock, self._file = sock, file
                self.closed.clear()
                threading.Thread(target=self._read, args=(sock, file), name="leaseside-reader", daemon=True).start()
            for lease in live:
                with self._lock:
                    taken = lease.name in self._leases
                    if not taken:
                        self._leases[lease.name] = lease
                if taken:
                    lease._end("connection_closed")
                    continue
                try:
                    grant = self.call({"op": "resume", "lease": lease.name, "token": lease.token, "resume": lease.resume})
                except LeasesideError:
                    self._end(lease.name, lease.token, "connection_closed")
                    lease._end("connection_closed")
                    continue
                except (ConnectionError, OSError, TimeoutError):
                    with self._lock:
                        if self._leases.get(lease.name) is lease:
                            del self._leases[lease.name]
                            self._to_resume.append(lease)
                    continue
                lease._renewed(grant["deadline_boottime_ns"])

    def _event(self, msg):
        kind = msg["event"]
        if kind in ("jeopardy", "safe"):
            with self._lock:
                lease = self._leases.get(msg.get("lease"))
            if lease is not None and lease.token == msg.get("token"):
                lease._set_state(JEOPARDY if kind == "jeopardy" else SAFE)
        if kind in ("leader", "no_leader", "holder"):
            sub = ("holders" if kind == "holder" else "observe", msg.get("lease"))
            item = msg
            if kind == "leader":
                item = Leader(msg["lease"], msg.get("token"), msg.get("holder", ""), msg.get("value", ""))
            elif kind == "no_leader":
                item = None
            with self._lock:
                queues = list(self._subs.get(sub, ()))
            for q in queues:
                q.put(item)
        if msg["event"] in ("renewed", "shortened"):
            with self._lock:
                lease = self._leases.get(msg.get("lease"))
            if lease is not None and lease.token == msg.get("token"):
                if msg["event"] == "renewed":
                    lease._renewed(msg.get("deadline_boottime_ns", 0))
                else:
                    lease._shortened(msg.get("deadline_boottime_ns", 0))
        if msg["event"] in ("lost", "released"):
            if not self._end(msg.get("lease"), msg.get("token"), msg.get("reason") or msg["event"]):
                with self._lock:
                    if self._acquiring.get(msg.get("lease")):
                        self._orphans[msg.get("lease")] = msg
        if self._on_event:
            self._on_event(msg)

    def _end(self, name, token, reason):
        with self._lock:
            lease = self._leases.get(name)
            if lease is None or (token is not None and lease.token != token):
                return False
            del self._leases[name]
        lease._end(reason)
        return True
