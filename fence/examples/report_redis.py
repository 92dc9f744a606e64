"""leaseside run jobs/report -- python3 report_redis.py TEXT

Sets report:daily to TEXT only if this holder's token is not stale.
"""
import os
import sys

import redis

import leaseside_fence

r = redis.Redis.from_url(os.environ["REDIS_URL"])
try:
    leaseside_fence.redis_set(r, "report:daily", sys.argv[1], os.environ["LEASESIDE_LEASE"], os.environ["LEASESIDE_TOKEN"])
except leaseside_fence.StaleToken as e:
    sys.exit(str(e))
