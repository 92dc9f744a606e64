#!/bin/sh
# Runs `leaseside bench --workload hosts` against a fresh cluster of
# $GRANTORS (default 3) `leaseside grantor` processes on loopback with
# mutual TLS, each with its fsync'd raft log in a temporary directory on
# the disk of $TMPDIR, then stops them. The simulated hosts dial with the
# sidecar certificate bench-hosts, which the grantors do not limit (one
# certificate for every simulated host; a real host has its own). The
# open files limit is raised for the grantors (root may raise it past the
# hard limit). Arguments go to `leaseside bench`, e.g.:
#   internal/bench/bench-hosts.sh --hosts 10000 --term 15s --kill-leader 20s
#
# LEASESIDE: the binary to use (default: built from this checkout).
# KEEP_LOGS: a directory to copy the grantors' logs into at the end.
# BASE_PORT: grantor i uses BASE_PORT+4(i-1) .. +3 for rpc, raft, gossip
# and metrics (default 17510).
set -eu
cd "$(dirname "$0")/../.."
# shellcheck source=internal/bench/cluster.sh
. internal/bench/cluster.sh
ulimit -n "${NOFILE:-262144}" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
work=$(mktemp -d "${TMPDIR:-/tmp}/leaseside-bench.XXXXXX")
trap 'set +e; cluster_down; [ -z "${KEEP_LOGS:-}" ] || cp "$work"/g*.log "$KEEP_LOGS"; rm -rf "$work"' EXIT INT TERM
bin=${LEASESIDE:-}
if [ -z "$bin" ]; then
	bin=$work/leaseside
	go build -o "$bin" ./cmd/leaseside
fi
n=${GRANTORS:-3}
LS_TLS=1 leaseside_up "$bin" "$work" "$n" "${BASE_PORT:-17510}"
pids=$(echo $ls_pids | tr ' ' ,)
echo "bench: $n grantors up (pids $pids), open files limit $(ulimit -n), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# shellcheck disable=SC2086 # ls_sidecar_tls is words
"$bin" bench --workload hosts --grantors "$ls_rpcs" --grantor-pids "$pids" $ls_sidecar_tls "$@"
echo "bench: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
