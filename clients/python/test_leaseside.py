"""Tests of the Python client against a real leaseside daemon.

Run with LEASESIDE_SOCKET pointing at a running `leaseside dev`; the Go
integration test TestPythonClient does that as part of `make test`.
"""

import json
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import warnings

import leaseside
from leaseside import Client, Leader, LeasesideError, boottime_ns

VICTIM, NOBODY = 4242, 65534


class ConnectTimeoutTest(unittest.TestCase):
    """A daemon that does not accept (stopped, or overloaded) leaves
    connections in its listen queue; once that is full, a connect fails
    after CONNECT_TIMEOUT, naming the socket, instead of blocking for good."""

    def test_full_listen_queue(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        path = os.path.join(tmp, "stuck.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(server.close)
        server.bind(path)
        server.listen(0)
        queued = []
        self.addCleanup(lambda: [c.close() for c in queued])
        while True:  # fill the listen queue: the server never accepts
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.setblocking(False)
            try:
                c.connect(path)
            except BlockingIOError:
                c.close()
                break
            queued.append(c)
            self.assertLess(len(queued), 1000, "the listen queue never filled")
        with self.assertRaises(leaseside.DaemonUnreachableError) as caught:
            leaseside._connect(path, timeout=0.2)
        self.assertEqual(caught.exception.path, path)
        self.assertIn("did not accept the connection in time", str(caught.exception))


@unittest.skipUnless(os.geteuid() == 0, "needs root, to give directories and a server to other users")
class SocketTrustTest(unittest.TestCase):
    """The per-user socket a client picks itself (review R8-6): used only
    in the caller's own directory, writable by nobody else, with a daemon
    of the caller's uid or root's on it; otherwise the client warns and
    uses the system daemon's socket."""

    def setUp(self):
        base = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, base)
        os.chmod(base, 0o755)
        self.dir = os.path.join(base, "leaseside-%d" % VICTIM)
        os.mkdir(self.dir, 0o700)
        os.chown(self.dir, VICTIM, VICTIM)
        self.user = os.path.join(self.dir, "leaseside.sock")
        self.system = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(self.system.close)
        self.system.bind(os.path.join(base, "system.sock"))
        self.system.listen(8)
        self.system.settimeout(10)
        old = leaseside.SYSTEM_SOCKET
        leaseside.SYSTEM_SOCKET = self.system.getsockname()
        self.addCleanup(setattr, leaseside, "SYSTEM_SOCKET", old)

    def serve_as(self, uid):
        """A real process of uid listening on the per-user socket (bound
        here, as root: SO_PEERCRED names whoever called listen)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.user)
        code = "import socket,sys\ns=socket.socket(fileno=%d)\ns.listen(8)\nprint('ready',flush=True)\nsys.stdin.read()" % s.fileno()
        p = subprocess.Popen(["/usr/bin/python3", "-c", code], pass_fds=[s.fileno()], user=uid, group=uid,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        s.close()
        self.addCleanup(p.wait)
        self.addCleanup(p.stdin.close)
        self.addCleanup(p.stdout.close)
        self.assertEqual(p.stdout.readline(), b"ready\n")

    def test_untrusted_dirs(self):
        self.serve_as(NOBODY)
        for name, prep, want in [
                ("another user's", lambda: os.chown(self.dir, NOBODY, NOBODY), "belongs to uid 65534"),
                ("writable by others", lambda: os.chmod(self.dir, 0o777), "writable by its group or others"),
                ("writable by its group", lambda: os.chmod(self.dir, 0o770), "writable by its group or others")]:
            with self.subTest(name):
                os.chown(self.dir, VICTIM, VICTIM)
                os.chmod(self.dir, 0o700)
                self.assertEqual(leaseside._pick_socket(VICTIM, self.user), (self.user, None))
                prep()
                path, why = leaseside._pick_socket(VICTIM, self.user)
                self.assertEqual(path, leaseside.SYSTEM_SOCKET)
                self.assertIn(want, why)

    def test_server_of_another_uid(self):
        self.serve_as(NOBODY)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            sock = leaseside._connect(self.user, VICTIM)
        self.addCleanup(sock.close)
        self.assertEqual(sock.getpeername(), leaseside.SYSTEM_SOCKET)
        self.system.accept()[0].close()
        self.assertTrue(any("runs as uid 65534" in str(x.message) for x in w), [str(x.message) for x in w])

    def test_server_of_caller_or_root(self):
        for uid in (VICTIM, 0):
            with self.subTest(uid=uid):
                if os.path.exists(self.user):
                    os.remove(self.user)
                self.serve_as(uid)
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    sock = leaseside._connect(self.user, VICTIM)
                peer = sock.getpeername()
                sock.close()
                self.assertEqual(peer, self.user)
                self.assertEqual([str(x.message) for x in w], [])


@unittest.skipUnless(os.environ.get("LEASESIDE_SOCKET"), "needs LEASESIDE_SOCKET of a running daemon")
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.events = queue.Queue()
        self.c = Client(on_event=self.events.put)
        self.addCleanup(self.c.close)

    def next_event(self, kind, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            ev = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            if ev["event"] == kind:
                return ev

    def test_hello(self):
        h = self.c.hello()
        self.assertEqual(h["server"], "leaseside")
        self.assertEqual(h["protocol"], 5)

    def test_acquire_status_release(self):
        lease = self.c.acquire("py/one", ttl=10)
        self.assertTrue(lease.token.isdigit())
        self.assertTrue(lease.valid())
        self.assertGreater(lease.deadline_boottime_ns, boottime_ns())
        self.assertIn("py/one", [l["lease"] for l in self.c.status()])
        self.assertEqual(self.c.check("py/one", lease.token)["token"], lease.token)
        self.c.release("py/one")
        self.assertTrue(lease.lost.is_set())
        self.assertNotIn("py/one", [l["lease"] for l in self.c.status()])

    def test_wait_forever(self):
        lease = self.c.acquire("py/forever", ttl=10)
        got = queue.Queue()

        def wait():
            with Client() as other:
                got.put(other.acquire("py/forever", ttl=10, wait=leaseside.WAIT_FOREVER).token)
        t = threading.Thread(target=wait)
        t.start()
        t.join(1.0)
        self.assertTrue(t.is_alive(), "the acquire did not wait for the held lease")
        self.c.release("py/forever")
        self.assertGreater(int(got.get(timeout=30)), int(lease.token))
        t.join()

    def test_no_daemon_names_the_socket(self):
        base = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, base)
        path = os.path.join(base, "none.sock")
        with self.assertRaises(leaseside.DaemonUnreachableError) as cm:
            Client(path)
        self.assertIsInstance(cm.exception, OSError)
        self.assertEqual(cm.exception.path, path)
        self.assertIn("no leaseside daemon at " + path, str(cm.exception))
        self.assertIn("leaseside dev", str(cm.exception))

    def test_held_elsewhere(self):
        lease = self.c.acquire("py/held", ttl=10)
        with Client() as other:
            with self.assertRaises(LeasesideError) as cm:
                other.acquire("py/held", ttl=10)
        self.assertEqual(cm.exception.code, "lease_held")
        self.assertEqual(cm.exception.holder_token, lease.token)
        self.c.release("py/held")

    def test_pushed_lost_event(self):
        lease = self.c.acquire("py/lost", ttl=10)
        with Client() as admin:
            admin.release("py/lost")  # another caller ends our lease
        ev = self.next_event("lost")
        self.assertEqual(ev["lease"], "py/lost")
        self.assertEqual(ev["reason"], "released_by_admin")
        self.assertTrue(lease.lost.wait(30))
        self.assertFalse(lease.valid())

    def test_deadline_follows_renewals(self):
        lease = self.c.acquire("py/renewed", ttl=3)
        first = lease.deadline_boottime_ns
        # Renewals come every third of the term; wait past the first term.
        self.assertFalse(lease.lost.wait(3.5), "lease ended: %s" % lease.reason)
        self.assertGreater(lease.deadline_boottime_ns, first)
        self.assertTrue(lease.valid())
        self.c.release("py/renewed", token=lease.token)

    def test_tokens_grow(self):
        first = self.c.acquire("py/grow", ttl=10)
        self.c.release("py/grow")
        second = self.c.acquire("py/grow", ttl=10)
        self.assertGreater(int(second.token), int(first.token))
        self.c.release("py/grow")

    def test_state_safe_then_lost(self):
        lease = self.c.acquire("py/state", ttl=10)
        self.assertEqual(lease.state, "safe")
        self.assertIsNone(lease.wait_state("jeopardy", "lost", timeout=0.1))
        self.c.release("py/state")
        self.assertEqual(lease.wait_state("lost", timeout=30), "lost")

    def test_semaphore(self):
        first = self.c.acquire("py/sem", ttl=10, limit=2)
        with Client() as other, Client() as third:
            second = other.acquire("py/sem", ttl=10, limit=2)
            self.assertGreater(int(second.token), int(first.token))
            self.assertEqual((second.limit, second.holders), (2, 2))
            with self.assertRaises(LeasesideError) as cm:
                third.acquire("py/sem", ttl=10, limit=2)
            self.assertEqual(cm.exception.code, "lease_held")
            with self.assertRaises(LeasesideError) as cm:
                third.acquire("py/sem", ttl=10, limit=3)
            self.assertEqual(cm.exception.code, "bad_request")
            self.assertIn("limit 2", cm.exception.message)
            self.assertIn("limit 3", cm.exception.message)
            self.c.release("py/sem")
            got = third.acquire("py/sem", ttl=10, limit=2, wait=30)
            self.assertGreater(int(got.token), int(second.token))

    def test_shared(self):
        first = self.c.acquire("py/rw", ttl=10, shared=True)
        self.assertTrue(first.shared)
        with Client() as other, Client() as writer:
            second = other.acquire("py/rw", ttl=10, shared=True)
            self.assertGreater(int(second.token), int(first.token))
            self.assertEqual((second.shared, second.holders), (True, 2))
            with self.assertRaises(LeasesideError) as cm:
                writer.acquire("py/rw", ttl=10)  # a writer beside readers
            self.assertEqual(cm.exception.code, "lease_held")
            self.assertIn("held shared", cm.exception.message)
            with self.assertRaises(LeasesideError) as cm:
                writer.acquire("py/rw", ttl=10, shared=True, limit=2)
            self.assertEqual(cm.exception.code, "bad_request")
            self.c.release("py/rw")
            other.release("py/rw")
            w = writer.acquire("py/rw", ttl=10, wait=30)
            self.assertFalse(w.shared)
            self.assertGreater(int(w.token), int(second.token))

    def test_campaign_observe_proclaim_resign(self):
        leaders = self.c.observe("py/elect")
        self.assertIsNone(leaders.get(timeout=30))  # nobody leads yet
        with Client() as a, Client() as b:
            la = a.campaign("py/elect", "10.0.0.1:80", ttl=10)
            self.assertEqual(leaders.get(timeout=30), Leader("py/elect", la.token, "insecure", "10.0.0.1:80"))
            with self.assertRaises(LeasesideError) as cm:
                b.campaign("py/elect", "10.0.0.2:80", ttl=10, wait=0.5)
            self.assertEqual(cm.exception.code, "lease_held")
            a.proclaim(la, "10.0.0.1:81")
            self.assertEqual(la.value, "10.0.0.1:81")
            self.assertEqual(leaders.get(timeout=30), Leader("py/elect", la.token, "insecure", "10.0.0.1:81"))
            a.resign(la)
            self.assertTrue(la.lost.is_set())
            self.assertIsNone(leaders.get(timeout=30))
            lb = b.campaign("py/elect", "10.0.0.2:80", ttl=10)
            self.assertGreater(int(lb.token), int(la.token))
            self.assertEqual(leaders.get(timeout=30).value, "10.0.0.2:80")

    def test_watch_holders_and_check_token(self):
        changes = self.c.watch_holders("py/watched")
        self.assertEqual(changes.get(timeout=30)["change"], "sync")
        with Client() as other:
            lease = other.acquire("py/watched", ttl=10)
            ev = changes.get(timeout=30)
            self.assertEqual((ev["change"], ev["token"], [h["token"] for h in ev["holders"]]),
                             ("acquired", lease.token, [lease.token]))
            self.assertEqual(self.c.check_token("py/watched", lease.token), (True, [lease.token]))
            other.release("py/watched")
            ev = changes.get(timeout=30)
            self.assertEqual((ev["change"], ev["token"], ev.get("holders", [])), ("released", lease.token, []))
        self.assertEqual(self.c.check_token("py/watched", lease.token), (False, []))

    def test_bad_input_keeps_connection(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.environ["LEASESIDE_SOCKET"])
        f = s.makefile("rw")
        for line, code in [("{nope", "bad_json"), ('{"id":1,"op":"fly"}', "unknown_op"),
                           ('{"id":2,"op":"acquire","lease":"a/../b","ttl_ms":1000}', "invalid_name")]:
            f.write(line + "\n")
            f.flush()
            self.assertEqual(json.loads(f.readline())["error"]["code"], code)
        f.write('{"id":3,"op":"status"}\n')
        f.flush()
        self.assertTrue(json.loads(f.readline())["ok"])
        s.close()


if __name__ == "__main__":
    unittest.main()
