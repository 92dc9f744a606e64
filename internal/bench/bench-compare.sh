#!/usr/bin/env bash
# bench-compare.sh BASE: the Go benchmarks of leaseside's hot paths at the
# revision BASE and in the working tree, interleaved, compared by benchstat.
#
# BASE is checked out in a temporary git worktree (removed on exit). Each
# hot package's test binary is built once per side, then ROUNDS rounds run
# every benchmark once at BASE and once in the working tree, alternately,
# so that what else the machine does falls on both sides alike. A
# benchmark file (*bench_test.go) new in the working tree is tried at BASE
# too; where BASE's package does not build with it, it is left out there,
# and its benchmarks, like any BASE lacks, show on one side only.
#
# Environment: ROUNDS (6), BENCHTIME (1s, go test's -benchtime), GO (go),
# BENCHSTAT (the benchstat to go install), OUT (a directory to keep the raw
# results in). Run it under nice on a shared machine.
set -euo pipefail

base=${1:?usage: bench-compare.sh BASE-REVISION}
rounds=${ROUNDS:-6}
benchtime=${BENCHTIME:-1s}
go=${GO:-go}
benchstat=${BENCHSTAT:-golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da}

# The hot paths: package, and the benchmarks in it (a -bench pattern).
hot=(
	"grantor ^(BenchmarkFSMApply|BenchmarkLessorAcquireRelease|BenchmarkLessorCycleAmongSessions|BenchmarkLockCycle|BenchmarkKeepAliveSessions)$"
	"daemon ^BenchmarkSocketStatus$"
	"ipc ^(BenchmarkMarshalStatus|BenchmarkDecodeRequest)$"
)

case $rounds in '' | *[!0-9]* | 0) echo "bench-compare: ROUNDS must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
root=$(git rev-parse --show-toplevel)
if ! rev=$(git -C "$root" rev-parse --verify --quiet "$base^{commit}"); then
	echo "bench-compare: '$base' names no commit" >&2
	exit 2
fi
short=$(git -C "$root" rev-parse --short "$rev")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-compare.XXXXXX")
cleanup() {
	git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true
	rm -rf "$tmp"
	git -C "$root" worktree prune
}
trap cleanup EXIT

echo "bench-compare: benchstat ($benchstat)" >&2
GOBIN="$tmp/bin" "$go" install "$benchstat"
git -C "$root" worktree add --quiet --detach "$tmp/base" "$rev"

# build SIDE TREE PKG: the package's test binary at $tmp/bin/SIDE-PKG.test.
build() {
	"$go" -C "$2/$3" test -c -o "$tmp/bin/$1-$3.test" . 2>"$tmp/build.err"
}

# buildBase PKG PATTERN: BASE's test binary, with the working tree's
# benchmark files BASE lacks that hold a benchmark PATTERN names, less
# those its package does not build with.
buildBase() {
	local pkg=$1 pat=$2 f name b added=()
	[ -d "$tmp/base/$pkg" ] || { echo "bench-compare: $pkg is not at $short" >&2; return 1; }
	for f in "$root/$pkg"/*bench_test.go; do
		[ -e "$f" ] || continue
		name=${f##*/}
		[ -e "$tmp/base/$pkg/$name" ] && continue
		b=
		for b in $(sed -n 's/^func \(Benchmark[A-Za-z0-9_]*\)(.*/\1/p' "$f"); do
			[[ $b =~ $pat ]] && break
			b=
		done
		[ -n "$b" ] || continue
		cp "$f" "$tmp/base/$pkg/$name"
		added+=("$name")
	done
	until build base "$tmp/base" "$pkg"; do
		local left=() dropped=0
		for name in "${added[@]}"; do
			if grep -qF "$name" "$tmp/build.err"; then
				rm "$tmp/base/$pkg/$name"
				echo "bench-compare: $pkg/$name does not build at $short: left out there" >&2
				dropped=1
			else
				left+=("$name")
			fi
		done
		if [ $dropped = 0 ]; then
			# The error names none of them: drop them all, once.
			if [ ${#added[@]} = 0 ]; then
				echo "bench-compare: $pkg does not build at $short:" >&2
				cat "$tmp/build.err" >&2
				return 1
			fi
			for name in "${added[@]}"; do rm "$tmp/base/$pkg/$name"; done
			echo "bench-compare: $pkg at $short builds without ${added[*]} only: left out there" >&2
			left=()
		fi
		added=("${left[@]+"${left[@]}"}")
	done
}

pkgs=() pats=() sides=()
for h in "${hot[@]}"; do
	pkg=${h%% *}
	if ! build head "$root" "$pkg"; then
		cat "$tmp/build.err" >&2
		exit 1
	fi
	s=head
	buildBase "$pkg" "${h#* }" && s="base head"
	pkgs+=("$pkg") pats+=("${h#* }") sides+=("$s")
done

failed=0
for r in $(seq "$rounds"); do
	echo "bench-compare: round $r of $rounds" >&2
	for i in "${!pkgs[@]}"; do
		for side in ${sides[$i]}; do
			dir=$root
			[ "$side" = base ] && dir=$tmp/base
			if ! (cd "$dir/${pkgs[$i]}" && "$tmp/bin/$side-${pkgs[$i]}.test" -test.run '^$' -test.bench "${pats[$i]}" \
				-test.benchtime "$benchtime" -test.benchmem -test.count 1) >>"$tmp/$side.out" 2>&1; then
				echo "bench-compare: ${pkgs[$i]} failed at $side in round $r (see its lines in the results)" >&2
				failed=1
			fi
		done
	done
done

# benchstat names the columns after the files.
mkdir "$tmp/results"
cp "$tmp/base.out" "$tmp/results/$short" 2>/dev/null || : >"$tmp/results/$short"
cp "$tmp/head.out" "$tmp/results/working-tree"
if [ -n "${OUT:-}" ]; then
	mkdir -p "$OUT"
	cp "$tmp/results/$short" "$tmp/results/working-tree" "$OUT/"
fi
(cd "$tmp/results" && "$tmp/bin/benchstat" "$short" working-tree)
if [ $failed = 1 ]; then
	grep -h -E '^(--- FAIL|FAIL|panic:)|_test\.go:[0-9]+:' "$tmp/results/$short" "$tmp/results/working-tree" >&2 || true
	exit 1
fi
