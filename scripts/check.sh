#!/bin/sh
# make check's phases, in order, each a make of its own, then where the
# time went: a line per phase with its seconds (wall clock), and the
# total. The first phase that fails ends the run, after the report.
#
# A phase written A+B runs the makes of A and B at the same time (the
# fuzzers beside the system tests: one waits on daemons, the other burns
# CPU for a fixed time). A's output streams as it comes; B's goes to
# build/check-B.log and is shown whole when both are done, so neither is
# interleaved with the other. The report gives the pair's wall time and
# each one's own; either failing fails the phase.
#
# Usage: scripts/check.sh MAKE PHASE...   (the Makefile's check target)
set -u
make=$1
shift
report=""
total=0
failed=""
logdir=${B:-build}

# line NAME SECONDS RC [INDENT]: one line of the report.
line() {
	printf '%s%-16s %6d s%s\n' "${4:-  }" "$1" "$2" \
	    "$([ "$3" = 0 ] || echo "  FAILED (exit $3)")"
}

# timed NAME: make NAME; writes "SECONDS RC" to $logdir/check-NAME.time.
timed() {
	t0=$(date +%s)
	$make --no-print-directory "$1"
	r=$?
	echo "$(($(date +%s) - t0)) $r" >"$logdir/check-$1.time"
}

mkdir -p "$logdir"
for phase in "$@"; do
	start=$(date +%s)
	case $phase in
	*+*)
		first=${phase%%+*}
		rest=$(echo "${phase#*+}" | tr + ' ')
		pids=""
		for p in $rest; do
			timed "$p" >"$logdir/check-$p.log" 2>&1 &
			pids="$pids $!"
		done
		timed "$first"
		# shellcheck disable=SC2086
		wait $pids
		rc=0
		sub=""
		for p in $first $rest; do
			read -r s r <"$logdir/check-$p.time"
			[ "$r" = 0 ] || rc=$r
			sub="$sub$(line "$p" "$s" "$r" "    ")
"
			[ "$p" = "$first" ] && continue
			echo "==== $p (beside $first; also in $logdir/check-$p.log)"
			cat "$logdir/check-$p.log"
		done
		;;
	*)
		$make --no-print-directory "$phase"
		rc=$?
		sub=""
		;;
	esac
	secs=$(($(date +%s) - start))
	total=$((total + secs))
	report="$report$(line "$phase" "$secs" "$rc")
$sub"
	if [ "$rc" != 0 ]; then
		failed=$phase
		break
	fi
done
echo "check: where the time went"
printf '%s' "$report"
printf '  %-16s %6d s\n' total "$total"
if [ -n "$failed" ]; then
	echo "check: $failed failed" >&2
	exit 1
fi
