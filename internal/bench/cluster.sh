# shellcheck shell=sh disable=SC2034 # the variables set are for the scripts that source this
# Shell functions that start and stop clusters on loopback for the bench
# scripts (bench-cluster.sh, vs-etcd.sh), which source this file. Every
# process started is added to $cluster_pids; cluster_down stops them all.
# Each cluster's data (its fsync'd log) lives in a directory of the caller's
# work directory, on the disk of $TMPDIR.

cluster_pids=

# cluster_down stops every process started by these functions and waits
# for each to exit.
cluster_down() {
	for _pid in $cluster_pids; do kill "$_pid" 2>/dev/null || true; done
	for _pid in $cluster_pids; do wait "$_pid" 2>/dev/null || true; done
	cluster_pids=
}

# cluster_alive FILE...: fails, printing the logs, if a started process has
# exited (the log files are printed to stderr).
cluster_alive() {
	for _pid in $cluster_pids; do
		if ! kill -0 "$_pid" 2>/dev/null; then
			for _f in "$@"; do echo "== $_f" >&2; tail -n 30 "$_f" >&2; done
			echo "cluster: process $_pid exited" >&2
			return 1
		fi
	done
}

# All variables of these functions are global (POSIX sh has no local):
# the scratch ones start with an underscore.

# leaseside_up BIN DIR N BASE starts N `BIN grantor` processes with their
# data in DIR; grantor i uses the ports BASE+4(i-1) .. +3 for rpc, raft,
# gossip and metrics. It returns once one has taken office as leader, and
# sets ls_rpcs (the rpc addresses, comma-separated), ls_pids, ls_leader_pid
# and ls_leader_metrics (its metrics URL). With LS_TLS=1 the grantors run
# mutual TLS under a CA made in DIR/tls, and ls_client_tls holds the --tls-*
# flags of an operator's certificate for the clients, and ls_sidecar_tls
# those of the sidecar certificate bench-hosts (the hosts workload's
# simulated hosts, whose account the grantors do not limit either); else
# both are empty.
leaseside_up() {
	_bin=$1 _dir=$2 _n=$3 _base=$4
	mkdir -p "$_dir"
	"$_bin" tls gossip-key >"$_dir/gossip.key"
	ls_client_tls= ls_sidecar_tls=
	if [ "${LS_TLS:-}" = 1 ]; then
		"$_bin" tls ca create --dir "$_dir/tls" >/dev/null
		"$_bin" tls cert create --dir "$_dir/tls" --operator bench >/dev/null
		ls_client_tls="--tls-ca $_dir/tls/ca.pem --tls-cert $_dir/tls/operator-bench.pem --tls-key $_dir/tls/operator-bench-key.pem"
		"$_bin" tls cert create --dir "$_dir/tls" --sidecar bench-hosts >/dev/null
		ls_sidecar_tls="--tls-ca $_dir/tls/ca.pem --tls-cert $_dir/tls/sidecar-bench-hosts.pem --tls-key $_dir/tls/sidecar-bench-hosts-key.pem"
	fi
	_join='' ls_rpcs='' ls_pids='' _logs=''
	for _i in $(seq 1 "$_n"); do
		_tlsflags=
		if [ -n "$ls_client_tls" ]; then
			"$_bin" tls cert create --dir "$_dir/tls" --grantor "g$_i" >/dev/null
			_tlsflags="--tls-ca $_dir/tls/ca.pem --tls-cert $_dir/tls/grantor-g$_i.pem --tls-key $_dir/tls/grantor-g$_i-key.pem"
			# The bench measures the cluster, not the limits of one
			# identity's account (docs/limits.md): its own has none.
			for _k in conns calls sessions outcomes leases waiters; do
				_tlsflags="$_tlsflags --limit operator/bench.$_k=0 --limit sidecar/bench-hosts.$_k=0"
			done
		fi
		_p=$((_base + 4 * (_i - 1)))
		if [ -z "$_join" ]; then _joinflag=; else _joinflag="--join $_join"; fi
		# shellcheck disable=SC2086 # _joinflag and _tlsflags are words or none
		"$_bin" grantor --node-id "g$_i" --data-dir "$_dir/g$_i" --bootstrap-expect "$_n" \
			--rpc-addr "127.0.0.1:$_p" --raft-addr "127.0.0.1:$((_p + 1))" \
			--gossip-addr "127.0.0.1:$((_p + 2))" --metrics-addr "127.0.0.1:$((_p + 3))" \
			--gossip-key-file "$_dir/gossip.key" $_joinflag $_tlsflags 2>"$_dir/g$_i.log" &
		cluster_pids="$cluster_pids $!"
		ls_pids="$ls_pids $!"
		_logs="$_logs $_dir/g$_i.log"
		[ -n "$_join" ] || _join=127.0.0.1:$((_p + 2))
		ls_rpcs=${ls_rpcs:+$ls_rpcs,}127.0.0.1:$_p
	done
	ls_leader_pid=
	while [ -z "$ls_leader_pid" ]; do
		# shellcheck disable=SC2086 # _logs is a list
		cluster_alive $_logs || return 1
		_i=0
		for _pid in $ls_pids; do
			_i=$((_i + 1))
			if grep -qs "grantor: took office" "$_dir/g$_i.log"; then
				ls_leader_pid=$_pid
				ls_leader_metrics=http://127.0.0.1:$((_base + 4 * (_i - 1) + 3))/metrics
			fi
		done
		[ -n "$ls_leader_pid" ] || sleep 0.1
	done
}

# etcd_up DIR N BASE starts N etcd members with their data in DIR; member
# i uses the ports BASE+2(i-1) (client) and +1 (peer). It returns once
# every member answers a health check, and sets etcd_endpoints (client
# URLs, comma-separated) and etcd_pids (in the same order, comma-separated).
etcd_up() {
	_dir=$1 _n=$2 _base=$3
	mkdir -p "$_dir"
	_initial='' etcd_endpoints='' etcd_pids='' _logs=''
	for _i in $(seq 1 "$_n"); do
		_initial=${_initial:+$_initial,}e$_i=http://127.0.0.1:$((_base + 2 * (_i - 1) + 1))
	done
	for _i in $(seq 1 "$_n"); do
		_c=http://127.0.0.1:$((_base + 2 * (_i - 1)))
		_p=http://127.0.0.1:$((_base + 2 * (_i - 1) + 1))
		etcd --name "e$_i" --data-dir "$_dir/e$_i" \
			--listen-client-urls "$_c" --advertise-client-urls "$_c" \
			--listen-peer-urls "$_p" --initial-advertise-peer-urls "$_p" \
			--initial-cluster "$_initial" --initial-cluster-state new \
			--initial-cluster-token "bench-$$" --logger zap --log-outputs stderr 2>"$_dir/e$_i.log" &
		cluster_pids="$cluster_pids $!"
		etcd_pids=${etcd_pids:+$etcd_pids,}$!
		_logs="$_logs $_dir/e$_i.log"
		etcd_endpoints=${etcd_endpoints:+$etcd_endpoints,}$_c
	done
	# shellcheck disable=SC2086 # _logs is a list
	until ETCDCTL_API=3 etcdctl --endpoints "$etcd_endpoints" endpoint health >/dev/null 2>&1; do
		cluster_alive $_logs || return 1
		sleep 0.2
	done
}
