#!/bin/bash
# Run libFuzzer targets (built by `make fuzz-build` into build-fuzz) for
# SECONDS each, JOBS at a time, each on a scratch corpus seeded from
# tests/fuzz/corpus/TARGET (which stays as it is), and print per target its
# executions and coverage. A target that crashes, leaks or times out fails
# the run; its input is kept as build-fuzz/crashes/TARGET-crash-SHA1 (or
# -leak-, -timeout-, -oom-) and the summary names it.
#
#   tests/fuzz/run.sh [-t SECONDS] [-j JOBS] TARGET...
set -u
secs=30
jobs=1
while getopts t:j: o; do
	case $o in
	t) secs=$OPTARG ;;
	j) jobs=$OPTARG ;;
	*) echo "usage: $0 [-t seconds] [-j jobs] target..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "$0: no target" >&2; exit 2; }

fz=build-fuzz
mkdir -p $fz/logs $fz/crashes

# One target: its log in build-fuzz/logs/TARGET.log, its status in .rc.
run_one() {
	t=$1
	rm -rf $fz/corpus-$t $fz/logs/$t.rc
	rm -f $fz/crashes/$t-*
	mkdir -p $fz/corpus-$t
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	./$fz/$t -max_total_time=$secs -timeout=20 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix=$fz/crashes/$t- \
	    $fz/corpus-$t tests/fuzz/corpus/$t >$fz/logs/$t.log 2>&1
	rc=$?
	# A crash skips the target's own clean-up of its fixture directory.
	[ $rc = 0 ] || rm -rf /tmp/$t.?????? /dev/shm/$t.??????
	echo $rc >$fz/logs/$t.rc
}

# A simple pool: JOBS targets at a time, each in the background.
running=0
pids=""
for t in "$@"; do
	[ -x $fz/$t ] || { echo "$0: $fz/$t is not built (make fuzz-build)" >&2; exit 2; }
	echo "  FUZZ    $t (${secs} s)"
	run_one $t &
	pids="$pids $!"
	running=$((running + 1))
	if [ $running -ge $jobs ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait

fail=0
printf '%-14s %12s %8s %8s %7s  %s\n' target execs exec/s cov ft result
for t in "$@"; do
	log=$fz/logs/$t.log
	rc=$(cat $fz/logs/$t.rc 2>/dev/null || echo 1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' $log | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' $log | tail -1)
	cov=$(grep -o 'cov: [0-9]*' $log | tail -1 | cut -d' ' -f2)
	ft=$(grep -o 'ft: [0-9]*' $log | tail -1 | cut -d' ' -f2)
	if [ "$rc" = 0 ]; then
		res=ok
	else
		fail=1
		art=$(ls $fz/crashes/$t-* 2>/dev/null | head -1)
		res="FAILED (exit $rc): ${art:-no input saved}; log $log"
	fi
	printf '%-14s %12s %8s %8s %7s  %s\n' $t "${execs:--}" "${rate:--}" \
	    "${cov:--}" "${ft:--}" "$res"
done
if [ $fail -ne 0 ]; then
	echo "fuzz: a target failed; reproduce with build-fuzz/TARGET FILE"
	for t in "$@"; do
		rc=$(cat $fz/logs/$t.rc 2>/dev/null || echo 1)
		[ "$rc" = 0 ] && continue
		echo "== $t:"
		# What it was and where: the report, its first frames, the input.
		sed -n '/ERROR:\|runtime error/,$p' $fz/logs/$t.log |
		    grep -E 'ERROR:|runtime error|^ *#[0-9]+ |SUMMARY:|Test unit written' |
		    sed 's/ (BuildId: [0-9a-f]*)//' | head -30
	done
	exit 1
fi
exit 0
