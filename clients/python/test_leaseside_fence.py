"""Unit tests of leaseside_fence with stand-ins for the drivers.

The real drivers (psycopg2, redis-py) against real servers are tested by
fence/pgfence and fence/redisfence (TestShellAndPythonExamples); these
check what those cannot: how each driver's error is read.
"""

import unittest

import leaseside_fence as lf


class Cursor:
    """A DB-API cursor whose execute raises err, or returns previous."""

    def __init__(self, err=None, previous=0):
        self.err, self.previous, self.calls = err, previous, []

    def execute(self, sql, params):
        self.calls.append((sql, params))
        if self.err:
            raise self.err

    def fetchone(self):
        return (self.previous,)


class Psycopg2Error(Exception):
    pgcode = "LS001"


class Psycopg3Error(Exception):
    sqlstate = "LS001"


class Redis:
    def __init__(self, err=None):
        self.err, self.calls = err, []

    def execute_command(self, *args):
        self.calls.append(args)
        if self.err:
            raise self.err
        return b"OK"


MSG = "stale token 6 for lease 'jobs/a': highest seen 7"


class PostgresTest(unittest.TestCase):
    def test_accepted_returns_the_previous_highest(self):
        cur = Cursor(previous=5)
        self.assertEqual(lf.postgres(cur, "jobs/a", "7"), 5)
        self.assertEqual(cur.calls, [("SELECT leaseside.fence(%s, %s)", ("jobs/a", 7))])

    def test_stale_from_each_driver(self):
        for err in (Psycopg2Error(MSG), Psycopg3Error(MSG), Exception({"C": "LS001", "M": MSG})):
            with self.assertRaises(lf.StaleToken) as cm:
                lf.postgres(Cursor(err), "jobs/a", 6)
            e = cm.exception
            self.assertEqual((e.lease, e.token, e.highest), ("jobs/a", 6, 7))
            self.assertIn("6", str(e))
            self.assertIn("7", str(e))

    def test_other_errors_pass_through(self):
        err = Psycopg2Error("connection lost")
        err.pgcode = "08006"
        with self.assertRaises(Psycopg2Error):
            lf.postgres(Cursor(err), "jobs/a", 6)

    def test_bad_input(self):
        for lease, token in (("", 1), ("a", -1), ("a", 1 << 63), ("a", "x")):
            with self.assertRaises(ValueError):
                lf.postgres(Cursor(), lease, token)


class RedisTest(unittest.TestCase):
    def test_set_and_delete_call_the_functions(self):
        r = Redis()
        lf.redis_set(r, "k", "v", "jobs/a", "18446744073709551615")
        lf.redis_delete(r, "k", "jobs/a", 3)
        self.assertEqual(r.calls, [
            ("FCALL", "leaseside_set", 2, "k", "leaseside:fence:jobs/a", 18446744073709551615, "v"),
            ("FCALL", "leaseside_del", 2, "k", "leaseside:fence:jobs/a", 3),
        ])

    def test_stale(self):
        r = Redis(Exception("LEASESIDE_STALE stale token 6 for leaseside:fence:jobs/a: highest seen 7"))
        with self.assertRaises(lf.StaleToken) as cm:
            lf.redis_set(r, "k", "v", "jobs/a", 6)
        self.assertEqual((cm.exception.token, cm.exception.highest), (6, 7))

    def test_other_errors_pass_through(self):
        with self.assertRaises(KeyError):
            lf.redis_set(Redis(KeyError("ERR Function not found")), "k", "v", "jobs/a", 6)

    def test_bad_input(self):
        for lease, token in (("", 1), ("a", -1), ("a", 1 << 64)):
            with self.assertRaises(ValueError):
                lf.redis_set(Redis(), "k", "v", lease, token)


if __name__ == "__main__":
    unittest.main()
