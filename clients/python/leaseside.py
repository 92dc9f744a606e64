"""A client for the leaseside daemon's socket, using only Python's standard library.

    from leaseside import Client
    with Client() as c:                       # $LEASESIDE_SOCKET or the default path
        lease = c.acquire("jobs/render-42", ttl=15)
        while not lease.lost.is_set():
            if lease.valid():                 # right before each write...
                write(data, fencing_token=lease.token)   # ...and send the token anyway

Leases are bound to the client's connection by default: closing the client
releases them. The protocol is documented in ipc/PROTOCOL.md.
"""

import itertools
import json
import os
import socket
import threading
import time

__all__ = ["Client", "Lease", "LeasesideError", "default_socket_path", "boottime_ns"]


SYSTEM_SOCKET = "/run/leaseside/leaseside.sock"


def default_socket_path():
    """$LEASESIDE_SOCKET, else the daemon's default for this user; a
    non-root user with no daemon of their own uses the system daemon."""
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
    if not os.path.exists(path) and os.path.exists(SYSTEM_SOCKET):
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

    lost is a threading.Event set when the lease is lost or released;
    reason then says why.
    """

    def __init__(self, grant):
        self.name = grant["lease"]
        self.token = grant["token"]
        self.ttl_ms = grant.get("ttl_ms")
        self.deadline_boottime_ns = grant["deadline_boottime_ns"]
        self.lost = threading.Event()
        self.reason = None

    def valid(self):
        """True while CLOCK_BOOTTIME is before the deadline and the lease is not lost."""
        return not self.lost.is_set() and boottime_ns() < self.deadline_boottime_ns

    def _end(self, reason):
        self.reason = reason
        self.lost.set()

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
        grant = self.call(req, extra_timeout=wait)
        lease = Lease(grant)
        with self._lock:
            self._leases[name] = lease
        return lease

    def release(self, name):
        self.call({"op": "release", "lease": name})
        self._end(name, None, "released")

    def renew(self, name):
        return self.call({"op": "renew", "lease": name})

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
        if msg["event"] in ("lost", "released"):
            self._end(msg.get("lease"), msg.get("token"), msg.get("reason") or msg["event"])
        if self._on_event:
            self._on_event(msg)

    def _end(self, name, token, reason):
        with self._lock:
            lease = self._leases.get(name)
            if lease is None or (token is not None and lease.token != token):
                return
            del self._leases[name]
        lease._end(reason)
