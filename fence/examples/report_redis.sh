#!/bin/sh
# leaseside run jobs/report -- ./report_redis.sh TEXT
# Sets report:daily to TEXT only if this holder's token is not stale; a
# refusal (LEASESIDE_STALE) writes nothing and exits 1 (-e). Use -h HOST
# -p PORT or -u redis://... instead of -s for a server on TCP.
set -eu
redis-cli -e -s "$REDIS_SOCKET" FCALL leaseside_set 2 report:daily "leaseside:fence:$LEASESIDE_LEASE" "$LEASESIDE_TOKEN" "$1"
