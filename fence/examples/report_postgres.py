"""leaseside run jobs/report -- python3 report_postgres.py TEXT

Writes TEXT to the report only if this holder's token is not stale: the
fence and the write are one transaction, rolled back together on a refusal.
"""
import os
import sys

import psycopg2

import leaseside_fence

lease, token = os.environ["LEASESIDE_LEASE"], os.environ["LEASESIDE_TOKEN"]
try:
    with psycopg2.connect(os.environ["DATABASE_URL"]) as conn, conn.cursor() as cur:
        leaseside_fence.postgres(cur, lease, token)
        cur.execute("INSERT INTO report (name, body) VALUES ('daily', %s)"
                    " ON CONFLICT (name) DO UPDATE SET body = excluded.body", (sys.argv[1],))
except leaseside_fence.StaleToken as e:
    sys.exit(str(e))
