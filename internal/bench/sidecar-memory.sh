#!/bin/sh
# sidecar-memory.sh: the sidecar's memory and CPU per live lease (issue 25
# item 6). It starts one `leaseside grantor` on loopback and a `leaseside
# daemon` on it, reads the daemon's VmRSS and Go heap in use
# (go_memstats_heap_inuse_bytes) as it started and, holding nothing still,
# after its first collection (within 2 minutes), acquires LEASES
# detached leases (term TERM) over 8 socket connections, closes them, and
# reads again 80 s later and once more SETTLE later (the Go runtime
# collects at least every 2 minutes and returns freed memory to the kernel
# gradually); between the two it counts the daemon's CPU over 60 s, its
# idle cost (renewals every TERM/3). Each reading is printed as a line; the
# last two say the RSS and heap growth per lease, settled, over the empty
# sidecar after its first collection and over the sidecar as started (the
# collector's first cycles add structures of their own). The RSS counts the
# pages of the binary's code that the acquires and renewals first ran
# (read from its file, shared, and as many at any lease count); its
# anonymous part (RssAnon: heap, stacks, the collector's own) does not.
#
#   internal/bench/sidecar-memory.sh [LEASES] [TERM_MS]    # 10000 15000
#
# LEASESIDE: the binary (default: built from this checkout). LS_BASE_PORT
# (17510): the grantor's ports and, at +10, the daemon's metrics. The
# acquires are sent by python3 (the socket's JSON lines).
set -eu
cd "$(dirname "$0")/../.."
# shellcheck source=internal/bench/cluster.sh
. internal/bench/cluster.sh
leases=${1:-10000}
term=${2:-15000}
settle=${SETTLE:-160}
base=${LS_BASE_PORT:-17510}
work=$(mktemp -d "${TMPDIR:-/tmp}/sidecar-memory.XXXXXX")
trap 'set +e; cluster_down; rm -rf "$work"' EXIT INT TERM
bin=${LEASESIDE:-}
if [ -z "$bin" ]; then
	bin=$work/leaseside
	go build -o "$bin" ./cmd/leaseside
fi
leaseside_up "$bin" "$work/c" 1 "$base"
export LEASESIDE_SOCKET="$work/ls.sock"
metrics=127.0.0.1:$((base + 10))
# The daemon's own limit is 10,000 leases a local user by default.
echo "{\"max_leases_per_uid\": $leases}" >"$work/sidecar.json"
"$bin" daemon --grantors "$ls_rpcs" --socket "$LEASESIDE_SOCKET" --metrics-addr "$metrics" \
	--config "$work/sidecar.json" 2>"$work/sidecar.log" &
sidecar=$!
cluster_pids="$cluster_pids $sidecar"
until "$bin" status >/dev/null 2>&1; do
	cluster_alive "$work/sidecar.log" || exit 1
	sleep 0.2
done
rss() { awk '/^VmRSS/ {print $2 * 1024}' "/proc/$sidecar/status"; }
anon() { awk '/^RssAnon/ {print $2 * 1024}' "/proc/$sidecar/status"; }
heap() { curl -fsS "http://$metrics/metrics" | awk '/^go_memstats_heap_inuse_bytes/ {printf "%d\n", $2}'; }
cpu() { awk '{print $14 + $15}' "/proc/$sidecar/stat"; }
gcs() { curl -fsS "http://$metrics/metrics" | awk '/^go_gc_duration_seconds_count/ {print $2}'; }
# The empty sidecar is read once it has made its first collection, as
# every sidecar has within 2 minutes of starting (the runtime collects at
# least that often): the collector's first cycles set up 1.3-1.8 MB of
# structures of its own that no lease adds to.
rssS=$(rss) anonS=$(anon)
echo "started: rss $rssS B (anonymous $anonS B), heap in use $(heap) B"
n=0
until [ "$(gcs)" -ge 1 ]; do
	n=$((n + 1))
	[ "$n" -le 300 ] || { echo "sidecar-memory: no collection in 150 s" >&2; exit 1; }
	sleep 0.5
done
sleep 5
rss0=$(rss) anon0=$(anon) heap0=$(heap)
echo "empty: rss $rss0 B (anonymous $anon0 B), heap in use $heap0 B (after its first collection)"
python3 - "$LEASESIDE_SOCKET" "$leases" "$term" <<'EOF'
import json, socket, sys, threading
path, n, term = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
failed = []
def acquire(k, conns=8):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    f = s.makefile("rwb")
    for i in range(k, n, conns):
        req = {"id": i + 1, "op": "acquire", "lease": "bench/mem/%07d" % i, "ttl_ms": term, "owner": "detached"}
        f.write((json.dumps(req) + "\n").encode())
        f.flush()
        while True:
            line = json.loads(f.readline())
            if line.get("id") == i + 1:
                break
        if line.get("error"):
            failed.append(line["error"])
            break
    s.close()
ts = [threading.Thread(target=acquire, args=(k,)) for k in range(8)]
for t in ts: t.start()
for t in ts: t.join()
if failed:
    sys.exit("sidecar-memory: acquire failed: %s" % failed[0])
EOF
held=$("$bin" status | grep -c "bench/mem/" || true)
[ "$held" -eq "$leases" ] || { echo "sidecar-memory: the sidecar holds $held leases, not $leases" >&2; exit 1; }
sleep 20
echo "held $held: rss $(rss) B, heap in use $(heap) B (20 s after the acquires)"
c0=$(cpu)
sleep 60
c1=$(cpu)
echo "idle: $((c1 - c0)) CPU ticks in 60 s (100 ticks = 1 CPU-second; renewals every $((term / 3)) ms)"
echo "80 s: rss $(rss) B, heap in use $(heap) B"
sleep "$settle"
rss1=$(rss) anon1=$(anon) heap1=$(heap)
echo "settled ($((80 + settle)) s): rss $rss1 B (anonymous $anon1 B), heap in use $heap1 B"
echo "per lease: rss $(((rss1 - rss0) / leases)) B (anonymous $(((anon1 - anon0) / leases)) B), heap in use $(((heap1 - heap0) / leases)) B"
echo "per lease against the sidecar as started: rss $(((rss1 - rssS) / leases)) B (anonymous $(((anon1 - anonS) / leases)) B)"
