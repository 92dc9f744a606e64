#!/bin/sh
# Runs `leaseside bench` against a fresh `leaseside dev` (a single-node
# grantor with its fsync'd raft log in a temporary directory on the disk
# of $TMPDIR) on loopback, then stops it. Arguments go to `leaseside
# bench`, e.g.:  internal/bench/bench-dev.sh --workload grants --duration 5s
#
# LEASESIDE: the binary to use (default: built from this checkout).
# RPC_PORT, METRICS_PORT: the dev instance's loopback ports (17400, 17401).
set -eu
cd "$(dirname "$0")/../.."
work=$(mktemp -d "${TMPDIR:-/tmp}/leaseside-bench.XXXXXX")
pid=
trap 'set +e; [ -z "$pid" ] || { kill "$pid"; wait "$pid"; } 2>/dev/null; rm -rf "$work"' EXIT INT TERM
bin=${LEASESIDE:-}
if [ -z "$bin" ]; then
	bin=$work/leaseside
	go build -o "$bin" ./cmd/leaseside
fi
rpc=127.0.0.1:${RPC_PORT:-17400}
metrics=127.0.0.1:${METRICS_PORT:-17401}
"$bin" dev --socket "$work/s.sock" --data-dir "$work/data" --rpc-addr "$rpc" --insecure --metrics-addr "$metrics" 2>"$work/dev.log" &
pid=$!
# Wait for the ready line (the grantor has taken office) or the exit.
while ! grep -q "leaseside dev ready" "$work/dev.log"; do
	kill -0 "$pid" 2>/dev/null || { cat "$work/dev.log" >&2; exit 1; }
	sleep 0.1
done
"$bin" bench --grantors "$rpc" --leader-pid "$pid" --leader-metrics "http://$metrics/metrics" "$@"
