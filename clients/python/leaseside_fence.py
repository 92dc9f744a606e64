"""Fenced writes with leaseside tokens in PostgreSQL and Redis.

The store refuses a write whose token is below the highest it has recorded
for the lease, and otherwise records it, in one atomic step with the write;
a holder that paused past its lease's deadline cannot overwrite its
successor. Install the store's side once: `leaseside fence postgres install
URL` or `leaseside fence redis install URL`. No dependencies: pass your own
DB-API cursor (psycopg2, psycopg 3, pg8000) or Redis client (redis-py).

    import leaseside_fence, psycopg2
    with psycopg2.connect(url) as conn, conn.cursor() as cur:   # one transaction
        leaseside_fence.postgres(cur, lease.name, lease.token)  # first
        cur.execute("UPDATE report SET body = %s", (body,))     # rolled back with a refusal

    import leaseside_fence, redis
    r = redis.Redis.from_url(url)
    leaseside_fence.redis_set(r, "report", body, lease.name, lease.token)

A refused write raises StaleToken, which names both tokens.
"""

import re

__all__ = ["StaleToken", "postgres", "redis_set", "redis_delete", "redis_token_key", "STALE_SQLSTATE"]

# The SQLSTATE leaseside.fence raises for a stale token.
STALE_SQLSTATE = "LS001"

_HIGHEST = re.compile(r"highest seen ([0-9]+)")
_REDIS_STALE = re.compile(r"^LEASESIDE_STALE .*: highest seen ([0-9]+)$")


class StaleToken(Exception):
    """The store refused a write: its token is below the highest it recorded for the lease."""

    def __init__(self, lease, token, highest):
        super().__init__("stale token %d for lease %r: highest seen %d: the writer lost the lease" % (token, lease, highest))
        self.lease = lease
        self.token = token
        self.highest = highest


def _token(token):
    t = int(token)  # a Lease's token, an int, or $LEASESIDE_TOKEN
    if t < 0 or t >= 1 << 64:
        raise ValueError("token %r is not between 0 and 2**64-1" % (token,))
    return t


def _sqlstate(e):
    """The SQLSTATE of a DB-API driver's error: psycopg2's pgcode, psycopg 3's sqlstate, pg8000's args[0]["C"]."""
    code = getattr(e, "pgcode", None) or getattr(e, "sqlstate", None)
    if code is None and e.args and isinstance(e.args[0], dict):
        code = e.args[0].get("C")
    return code


def postgres(cursor, lease, token):
    """Fences the cursor's transaction with lease and token (leaseside.fence).

    Call it in the transaction of the write, before the write; commit after.
    Returns the lease's previous highest token (0: none). Raises StaleToken
    when token is below it; the transaction is then aborted: roll it back.
    The query uses the %s paramstyle (psycopg2, psycopg 3, pg8000).
    """
    if not lease:
        raise ValueError("empty lease name")
    t = _token(token)
    if t >= 1 << 63:
        raise ValueError("token %d does not fit PostgreSQL's bigint" % t)
    try:
        cursor.execute("SELECT leaseside.fence(%s, %s)", (lease, t))
    except Exception as e:
        m = _HIGHEST.search(str(e))
        if _sqlstate(e) != STALE_SQLSTATE or m is None:
            raise
        raise StaleToken(lease, t, int(m.group(1))) from e
    return cursor.fetchone()[0]


def redis_token_key(lease):
    """The key that holds the highest token of lease's writes."""
    return "leaseside:fence:" + lease


def _fcall(client, function, key, lease, token, *args):
    if not lease:
        raise ValueError("empty lease name")
    t = _token(token)
    try:
        return client.execute_command("FCALL", function, 2, key, redis_token_key(lease), t, *args)
    except Exception as e:
        m = _REDIS_STALE.match(str(e))
        if m is None:
            raise
        raise StaleToken(lease, t, int(m.group(1))) from e


def redis_set(client, key, value, lease, token):
    """Sets key to value if token is not below lease's highest, recording it, atomically.

    Raises StaleToken (and writes nothing) when it is below.
    """
    return _fcall(client, "leaseside_set", key, lease, token, value)


def redis_delete(client, key, lease, token):
    """Deletes key if token is not below lease's highest, recording it, atomically.

    Returns how many keys it removed; raises StaleToken (and deletes
    nothing) when the token is below.
    """
    return _fcall(client, "leaseside_del", key, lease, token)
