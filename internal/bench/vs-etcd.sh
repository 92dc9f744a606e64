#!/bin/sh
# vs-etcd.sh: leaseside against etcd, side by side on this machine.
#
# For each workload and pair, it starts a fresh leaseside cluster (3
# `leaseside grantor` processes) and measures it, stops it, then starts a
# fresh etcd cluster (3 members of Debian's etcd-server, installed with
# apt-get if missing) and measures the same workload, stops it; the next
# pair runs etcd first. Both are on loopback, each with its fsync'd log in
# a temporary directory on the disk of $TMPDIR; only one cluster runs at a
# time. The machine may be shared: absolute figures move with its load, the
# ratio of a pair measured minutes apart is what the script is for.
#
#   internal/bench/vs-etcd.sh [--workload W[,W...]] [--pairs N] [--out DIR]
#
# Workloads (default: all, in this order):
#   locks64     named-lock cycles, 64 owners on their own names (leaseside
#               bench grants; etcd concurrency.Mutex Lock/Unlock)
#   locks16     the same, 16 owners
#   handoffs    16 owners contending for one name
#   keepalives  1,000 sessions renewing as fast as replies come (leaseside:
#               one KeepAlive stream per session; etcd: one LeaseKeepAlive
#               stream per lease, one lease a message)
#   memory      the leader's RSS per live lease, 100,000 leases over 1,000
#               sessions (etcd: 100,000 mutexes over 1,000 sessions)
#   shell       from a shell, against a sidecar on the cluster: `leaseside
#               acquire --detached NAME` then `leaseside release NAME`, and
#               `leaseside run NAME -- true`, against `etcdctl lock NAME --
#               true` (workloads shell and shell-run in the output)
#   socket      the sidecar's Unix socket at 16 clients (`status`) against
#               a bare JSON echo on a Unix socket (`vsetcd echo`); no etcd
#
# Every workload checks what it counts (two holders at once, a token that
# does not grow, a lost keepalive, a failed command fail the run).
#
# Output: one JSON object a line per workload, figure and pair on stdout
# (`workload`, `metric`, `pair`, `leaseside`, `etcd`, `ratio`, `unit`,
# `better`, `against`, `target`, `met`, `load_avg` [1-minute load before,
# after], `commit`, `time`), also appended to DIR/vs-etcd.jsonl, and a chart
# of the ratios, DIR/vs-etcd.png. DIR defaults to a new temporary
# directory, named on stderr; each side's full report is kept in it.
#
# LEASESIDE: the leaseside binary (default: built from this checkout).
# LS_BASE_PORT (17410), ETCD_BASE_PORT (23790): the clusters' ports.
# SETTLE: the memory workload's longest wait for a leader GC before each
# reading (default 150s: the Go runtime collects at least every 2 minutes).
set -eu
cd "$(dirname "$0")/../.."
# shellcheck source=internal/bench/cluster.sh
. internal/bench/cluster.sh

all="locks64 locks16 handoffs keepalives memory shell socket"
workloads=$all
pairs=2
out=
while [ $# -gt 0 ]; do
	case $1 in
	--workload) workloads=$(echo "$2" | tr , ' '); shift 2 ;;
	--pairs) pairs=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "usage: $0 [--workload W[,W...]] [--pairs N] [--out DIR]" >&2; exit 2 ;;
	esac
done
for w in $workloads; do
	case " $all " in *" $w "*) ;; *) echo "vs-etcd: unknown workload $w (known: $all)" >&2; exit 2 ;; esac
done
case $pairs in '' | *[!0-9]* | 0) echo "vs-etcd: --pairs must be a positive number" >&2; exit 2 ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/vs-etcd.XXXXXX")
trap 'set +e; cluster_down; rm -rf "$work"' EXIT INT TERM
if [ -z "$out" ]; then out=$(mktemp -d "${TMPDIR:-/tmp}/vs-etcd-out.XXXXXX"); fi
mkdir -p "$out"
echo "vs-etcd: writing to $out" >&2

if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >/dev/null
fi
# Debian's package may start its own etcd on the default ports: ours use
# others, and it is left alone.
bin=${LEASESIDE:-}
if [ -z "$bin" ]; then
	bin=$work/leaseside
	go build -o "$bin" ./cmd/leaseside
fi
vsetcd=$work/vsetcd
go -C internal/bench/vsetcd build -o "$vsetcd" .
commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || commit=$commit-dirty
lsbase=${LS_BASE_PORT:-17410}
etcdbase=${ETCD_BASE_PORT:-23790}
settle=${SETTLE:-150s}

# sidecar_up starts a `leaseside daemon` on the running grantors, with
# its socket in $work, and exports LEASESIDE_SOCKET for the commands.
sidecar_up() {
	export LEASESIDE_SOCKET="$work/ls.sock"
	rm -f "$LEASESIDE_SOCKET"
	"$bin" daemon --grantors "$ls_rpcs" --socket "$LEASESIDE_SOCKET" 2>"$work/c/sidecar.log" &
	cluster_pids="$cluster_pids $!"
	until "$bin" status >/dev/null 2>&1; do
		cluster_alive "$work/c/sidecar.log" || return 1
		sleep 0.1
	done
}

# leaseside_side W FILE measures workload W on a fresh leaseside cluster
# and writes its reports to FILE. It fails if the measurement does.
leaseside_side() {
	_w=$1 _file=$2 _rc=0
	rm -rf "$work/c"
	leaseside_up "$bin" "$work/c" 3 "$lsbase" || { cluster_down; return 1; }
	set -- "$bin" bench --json --grantors "$ls_rpcs" --leader-pid "$ls_leader_pid"
	case $_w in
	locks64) "$@" --workload grants --owners 64 >"$_file" || _rc=1 ;;
	locks16) "$@" --workload grants --owners 16 >"$_file" || _rc=1 ;;
	handoffs) "$@" --workload handoffs --contenders 16 >"$_file" || _rc=1 ;;
	keepalives) "$@" --workload keepalives --sessions 1000 --session-leases 100 >"$_file" || _rc=1 ;;
	memory) "$@" --workload memory --leases 100000 --mem-sessions 1000 \
		--leader-metrics "$ls_leader_metrics" --settle "$settle" >"$_file" || _rc=1 ;;
	shell)
		_name=bench/vs-etcd/shell
		{ sidecar_up &&
			"$vsetcd" shell --workload shell --cmd "$bin acquire --detached $_name" --cmd "$bin release $_name" >"$_file" &&
			"$vsetcd" shell --workload shell-run --cmd "$bin run $_name -- true" >>"$_file"; } || _rc=1
		;;
	socket) { sidecar_up && "$vsetcd" socket --socket "$LEASESIDE_SOCKET" --clients 16 >"$_file"; } || _rc=1 ;;
	esac
	cluster_down
	return $_rc
}

# etcd_side W FILE measures workload W on a fresh etcd cluster (or, for
# socket, the bare JSON echo) and writes its reports to FILE. It fails if
# the measurement does.
etcd_side() {
	_w=$1 _file=$2 _rc=0
	rm -rf "$work/c"
	mkdir -p "$work/c"
	if [ "$_w" = socket ]; then
		"$vsetcd" echo --socket "$work/c/echo.sock" 2>"$work/c/echo.log" &
		cluster_pids="$cluster_pids $!"
		until [ -S "$work/c/echo.sock" ]; do cluster_alive "$work/c/echo.log" || { cluster_down; return 1; }; sleep 0.05; done
		"$vsetcd" socket --socket "$work/c/echo.sock" --clients 16 >"$_file" || _rc=1
		cluster_down
		return $_rc
	fi
	etcd_up "$work/c" 3 "$etcdbase" || { cluster_down; return 1; }
	set -- "$vsetcd" etcd --endpoints "$etcd_endpoints" --pids "$etcd_pids"
	case $_w in
	locks64) "$@" --workload locks --owners 64 >"$_file" || _rc=1 ;;
	locks16) "$@" --workload locks --owners 16 >"$_file" || _rc=1 ;;
	handoffs) "$@" --workload handoffs --contenders 16 >"$_file" || _rc=1 ;;
	keepalives) "$@" --workload keepalives --sessions 1000 >"$_file" || _rc=1 ;;
	memory) "$@" --workload memory --leases 100000 --mem-sessions 1000 --settle "$settle" >"$_file" || _rc=1 ;;
	shell) "$vsetcd" shell --workload shell --cmd "etcdctl --endpoints $etcd_endpoints lock bench/vs-etcd/shell -- true" >"$_file" || _rc=1 ;;
	esac
	cluster_down
	return $_rc
}

# side S W P runs side S (leaseside or etcd) of pair P of workload W; if
# it fails, the cluster's logs are kept in $out and the pair is marked
# failed.
side() {
	"$1_side" "$2" "$out/$2-$3-$1.json" && return 0
	mkdir -p "$out/$2-$3-$1-logs"
	cp "$work"/c/*.log "$out/$2-$3-$1-logs/" 2>/dev/null || true
	echo "vs-etcd: $2 pair $3: $1 failed; logs in $out/$2-$3-$1-logs" >&2
	return 1
}

failed=
for w in $workloads; do
	p=1
	while [ "$p" -le "$pairs" ]; do
		load=$(cut -d' ' -f1 /proc/loadavg)
		echo "vs-etcd: $w, pair $p of $pairs (load $load)" >&2
		if [ $((p % 2)) -eq 1 ]; then
			first=leaseside second=etcd
		else
			first=etcd second=leaseside
		fi
		if side "$first" "$w" "$p" && side "$second" "$w" "$p"; then
			compared=$w
			[ "$w" != shell ] || compared="shell shell-run"
			for c in $compared; do
				if "$vsetcd" pair --workload "$c" --pair "$p" --leaseside "$out/$w-$p-leaseside.json" \
					--etcd "$out/$w-$p-etcd.json" --load-before "$load" --commit "$commit" >"$work/lines"; then
					tee -a "$out/vs-etcd.jsonl" <"$work/lines"
				else
					failed="$failed $c/$p"
				fi
			done
		else
			failed="$failed $w/$p"
		fi
		p=$((p + 1))
	done
done
if [ -s "$out/vs-etcd.jsonl" ]; then
	"$vsetcd" chart --out "$out/vs-etcd.png" \
		--title "leaseside $commit / etcd $(etcd --version | sed -n 's/^etcd Version: //p'), 3 nodes each, $(date -u +%Y-%m-%d)" \
		"$out/vs-etcd.jsonl"
	echo "vs-etcd: chart in $out/vs-etcd.png" >&2
fi
if [ -n "$failed" ]; then
	echo "vs-etcd: failed pairs (workload/pair):$failed" >&2
	exit 1
fi
