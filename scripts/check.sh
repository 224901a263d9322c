#!/bin/sh
# make check's phases, in order, each a make of its own, then where the
# time went: a line per phase with its seconds (wall clock), and the
# total. The first phase that fails ends the run, after the report.
#
# Usage: scripts/check.sh MAKE PHASE...   (the Makefile's check target)
set -u
make=$1
shift
report=""
total=0
failed=""
for phase in "$@"; do
	start=$(date +%s)
	$make --no-print-directory "$phase"
	rc=$?
	secs=$(($(date +%s) - start))
	total=$((total + secs))
	report="$report$(printf '  %-16s %6d s%s' "$phase" "$secs" \
	    "$([ "$rc" = 0 ] || echo "  FAILED (exit $rc)")")
"
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
