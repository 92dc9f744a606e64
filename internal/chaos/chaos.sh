#!/bin/sh
# chaos.sh runs leaseside's fault suite (internal/chaos) by hand, as long as
# asked, and prints where its report and timeline picture are.
#
#   internal/chaos/chaos.sh [-d DURATION] [-s SEED] [-g GRANTORS] [-c SIDECARS]
#                           [-o DIR] [-f KINDS] [-k CLOCKSTEP] [-r STORE] [-- GO-TEST-FLAGS]
#
#   -d  how long the nemesis runs (default 30m)
#   -s  replay a seed (default: a random one, printed)
#   -g  grantors, 3 or 5 (default 3); -c sidecar hosts, 2 to 4 (default 3)
#   -o  output directory (default: a new temporary directory)
#   -f  comma-separated cluster fault kinds (default: all)
#   -k  largest CLOCK_REALTIME step, machine-wide (default 2m for runs of
#       10 minutes or more; 0 for none)
#   -r  keep the fenced register in a real store that checks the tokens
#       itself: postgres (a throwaway server, Debian's postgresql-15)
#
# Needs root (network namespaces, cgroups, the clock), ip, tc, nsenter and
# unshare. Exits non-zero on any violation, naming the seed and the first.
set -eu
cd "$(dirname "$0")/../.."
duration=30m seed=0 grantors=3 sidecars=3 out= faults= clockstep= store=
while getopts d:s:g:c:o:f:k:r: opt; do
	case $opt in
	d) duration=$OPTARG ;;
	s) seed=$OPTARG ;;
	g) grantors=$OPTARG ;;
	c) sidecars=$OPTARG ;;
	o) out=$OPTARG ;;
	f) faults=$OPTARG ;;
	k) clockstep=$OPTARG ;;
	r) store=$OPTARG ;;
	*) sed -n '2,19p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ -n "$out" ] || out=$(mktemp -d /tmp/leaseside-chaos-XXXXXX)
set -- -chaos.duration "$duration" -chaos.seed "$seed" -chaos.grantors "$grantors" \
	-chaos.sidecars "$sidecars" -chaos.out "$out" ${faults:+-chaos.faults "$faults"} \
	${clockstep:+-chaos.clockstep "$clockstep"} ${store:+-chaos.store "$store"} "$@"
echo "chaos: output in $out"
status=0
go test ./internal/chaos -run 'TestChaos$' -count=1 -timeout 0 -v "$@" || status=$?
echo "chaos: report $out/report.json, picture $out/timeline.png"
exit $status
