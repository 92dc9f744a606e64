#!/bin/sh
# Runs `leaseside bench` against a fresh cluster of $GRANTORS (default 3)
# `leaseside grantor` processes on loopback, each with its fsync'd raft log
# in a temporary directory on the disk of $TMPDIR, then stops them. The
# bench is given every grantor and finds the leader by their redirects;
# the leader's pid and metrics are passed for the memory workload.
# Arguments go to `leaseside bench`, e.g.:
#   internal/bench/bench-cluster.sh --workload grants --duration 5s
#
# LEASESIDE: the binary to use (default: built from this checkout).
# TLS=1: the grantors run mutual TLS under a fresh CA, and the bench calls
# them with an operator's certificate (to measure what TLS costs).
# BASE_PORT: grantor i uses BASE_PORT+4(i-1) .. +3 for rpc, raft, gossip
# and metrics (default 17410).
set -eu
cd "$(dirname "$0")/../.."
# shellcheck source=internal/bench/cluster.sh
. internal/bench/cluster.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/leaseside-bench.XXXXXX")
trap 'set +e; cluster_down; rm -rf "$work"' EXIT INT TERM
bin=${LEASESIDE:-}
if [ -z "$bin" ]; then
	bin=$work/leaseside
	go build -o "$bin" ./cmd/leaseside
fi
n=${GRANTORS:-3}
LS_TLS=${TLS:-} leaseside_up "$bin" "$work" "$n" "${BASE_PORT:-17410}"
echo "bench: $n grantors up (TLS: ${TLS:-0}), leader pid $ls_leader_pid" >&2
# shellcheck disable=SC2086 # ls_client_tls is words or none
"$bin" bench --grantors "$ls_rpcs" --leader-pid "$ls_leader_pid" --leader-metrics "$ls_leader_metrics" $ls_client_tls "$@"
