"""A client for the leaseside daemon's socket, using only Python's standard library.

    from leaseside import Client
    with Client() as c:                       # $LEASESIDE_SOCKET or the default path
        lease = c.acquire("jobs/render-42", ttl=15)
        for item in work:
            if not lease.valid():             # right before each write...
                break                         # lost, or the deadline passed
            write(item, fencing_token=lease.token)   # ...and send the token anyway

Leases are bound to the client's connection by default: closing the client
releases them. The protocol is documented in ipc/PROTOCOL.md.

Install with `pip install ./clients/python` (no dependencies), or copy this
one file next to your program.
"""

import itertools
import json
import os
import socket
import threading
import time

__all__ = ["Client", "Lease", "LeasesideError", "default_socket_path", "boottime_ns"]

__version__ = "0.1.0"


SYSTEM_SOCKET = "/run/leaseside/leaseside.sock"


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
    non-root user with no daemon of their own uses the system daemon
    (as `leaseside` itself does)."""
    path = os.environ.get("LEASESIDE_SOCKET")
    if path:
        return path
    if os.geteuid() == 0:
        return SYSTEM_SOCKET
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        path = os.path.join(runtime, "leaseside", "leaseside.sock")
    else:
        path = os.path.join("/tmp", "leaseside-%d" % os.geteuid(), "leaseside.sock")
    if not _exists(path) and _exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET
    return path


def boottime_ns():
    """CLOCK_BOOTTIME now, in nanoseconds: the clock lease deadlines are on."""
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)


class LeasesideError(Exception):
    """An error reply from the daemon, with its stable code."""

    def __init__(self, code, message, holder_token=None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.holder_token = holder_token


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
        self.deadline_boottime_ns = grant["deadline_boottime_ns"]
        self.lost = threading.Event()
        self.reason = None
        self._lock = threading.Lock()
        self._timer = None
        self._arm()

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

    def __repr__(self):
        return "Lease(%r, token=%s)" % (self.name, self.token)


class Client:
    """One connection to the daemon. Safe to use from several threads.

    on_event, if given, is called (from the reader thread) with every event
    the daemon pushes, as a dict.
    """

    def __init__(self, path=None, on_event=None, timeout=30.0):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path or default_socket_path())
        self._file = self._sock.makefile("rb")
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending = {}
        self._leases = {}
        self._acquiring = {}   # name -> acquires in flight
        self._orphans = {}     # name -> end event that overtook its grant
        self._on_event = on_event
        self.closed = threading.Event()
        self._reader = threading.Thread(target=self._read, name="leaseside-reader", daemon=True)
        self._reader.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Closes the connection; connection-bound leases are released."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._reader.join(self._timeout)

    def hello(self):
        return self.call({"op": "hello"})

    def acquire(self, name, ttl, wait=0, owner=None, owner_pid=None, lock_delay=0):
        """Acquires a lease; ttl, wait and lock_delay are in seconds."""
        req = {"op": "acquire", "lease": name, "ttl_ms": int(ttl * 1000)}
        if wait:
            req["wait_ms"] = int(wait * 1000)
        if owner:
            req["owner"] = owner
        if owner_pid:
            req["owner_pid"] = owner_pid
        if lock_delay:
            req["lock_delay_ms"] = int(lock_delay * 1000)
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
            self._sock.sendall((json.dumps(req) + "\n").encode())
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
            raise LeasesideError(err.get("code", "internal"), err.get("message", ""), err.get("holder_token"))
        return resp

    def _read(self):
        try:
            for line in self._file:
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
            self.closed.set()
            with self._lock:
                slots = list(self._pending.values())
                leases = list(self._leases.values())
                self._leases.clear()
            for slot in slots:
                slot[0].set()
            for lease in leases:
                lease._end("connection_closed")

    def _event(self, msg):
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
