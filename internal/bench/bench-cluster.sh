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
# BASE_PORT: grantor i uses BASE_PORT+4(i-1) .. +3 for rpc, raft, gossip
# and metrics (default 17410).
set -eu
cd "$(dirname "$0")/../.."
work=$(mktemp -d "${TMPDIR:-/tmp}/leaseside-bench.XXXXXX")
pids=
trap 'set +e; for p in $pids; do kill "$p"; done 2>/dev/null; for p in $pids; do wait "$p"; done 2>/dev/null; rm -rf "$work"' EXIT INT TERM
bin=${LEASESIDE:-}
if [ -z "$bin" ]; then
	bin=$work/leaseside
	go build -o "$bin" ./cmd/leaseside
fi
n=${GRANTORS:-3}
base=${BASE_PORT:-17410}
head -c 32 /dev/urandom | base64 >"$work/gossip.key"
join=
rpcs=
for i in $(seq 1 "$n"); do
	p=$((base + 4 * (i - 1)))
	if [ -z "$join" ]; then
		joinflag=
	else
		joinflag="--join $join"
	fi
	# shellcheck disable=SC2086 # joinflag is two words or none
	"$bin" grantor --node-id "g$i" --data-dir "$work/g$i" --bootstrap-expect "$n" \
		--rpc-addr "127.0.0.1:$p" --raft-addr "127.0.0.1:$((p + 1))" \
		--gossip-addr "127.0.0.1:$((p + 2))" --metrics-addr "127.0.0.1:$((p + 3))" \
		--gossip-key-file "$work/gossip.key" $joinflag 2>"$work/g$i.log" &
	pids="$pids $!"
	[ -n "$join" ] || join=127.0.0.1:$((p + 2))
	rpcs=${rpcs:+$rpcs,}127.0.0.1:$p
done
# Wait until one grantor has taken office as leader, or one has exited.
leader=
while [ -z "$leader" ]; do
	i=0
	for pid in $pids; do
		i=$((i + 1))
		kill -0 "$pid" 2>/dev/null || { cat "$work/g$i.log" >&2; exit 1; }
		if grep -q "grantor: took office" "$work/g$i.log"; then
			leader=$i
			leaderpid=$pid
		fi
	done
	[ -n "$leader" ] || sleep 0.1
done
metrics=127.0.0.1:$((base + 4 * (leader - 1) + 3))
echo "bench: $n grantors up, g$leader (pid $leaderpid) leads" >&2
"$bin" bench --grantors "$rpcs" --leader-pid "$leaderpid" --leader-metrics "http://$metrics/metrics" "$@"
