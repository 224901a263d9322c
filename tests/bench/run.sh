#!/bin/sh
# hostgate's benchmarks (`make bench`): figures beside references measured
# in the same run, never pass/fail. Needs wrk, nginx and bwrap, which make
# bench installs (scripts/deps.sh); when one is missing this prints the
# apt-get line and fails. As root,
# creates the users first (scripts/users.sh). Builds bpfdump, which writes
# the seccomp BPF sandboxd loads, into a temporary directory, then runs
# bench.py with Debian's /usr/bin/python3, which also runs
# $HG_BUILD/bench_policy when `make bench` built it. HG_BUILD names the build
# directory (default: build); BENCH_MODE=root runs the daemons in root mode
# (default: user, as hostgate-test when root). BENCH_ONLY=fleet runs the
# fleet benchmark instead (bench_fleet.py).
set -eu
cd "$(dirname "$0")/../.."
HG_BUILD="${HG_BUILD:-build}"
export HG_BUILD
export PYTHONDONTWRITEBYTECODE=1

# make bench installs them (scripts/deps.sh --install bench, and fleet
# for BENCH_ONLY=fleet); run directly, this names what is missing.
if [ "${BENCH_ONLY:-}" = fleet ]; then
	scripts/deps.sh --check runtime bench fleet
else
	scripts/deps.sh --check runtime bench
fi
PATH="$PATH:/usr/sbin:/sbin"
export PATH

if [ "$(id -u)" -eq 0 ]; then
	scripts/users.sh
fi

for b in frontd brokerd sandboxd hgctl; do
	if [ ! -x "$HG_BUILD/$b" ]; then
		echo "bench: $HG_BUILD/$b is not built (run make)" >&2
		exit 1
	fi
done

tmp=$(mktemp -d /tmp/hg-bench-bin-XXXXXX)
child=""
# Remove the temporary directory and stop bench.py on any way out.
cleanup() {
	if [ -n "$child" ]; then
		kill -TERM "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# bpfdump links sandboxd's policy.o, built with the same flags as the build.
san=""
case "$HG_BUILD" in
*san*) san="-fsanitize=address,undefined" ;;
esac
pc="libevent libevent_openssl json-c libseccomp libcap openssl libargon2 libsystemd"
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -D_GNU_SOURCE -Icommon -Isandboxd $san \
    $(pkg-config --cflags $pc) -o "$tmp/bpfdump" tests/bench/bpfdump.c \
    "$HG_BUILD/obj/sandboxd/policy.o" "$HG_BUILD"/obj/common/*.o \
    $(pkg-config --libs $pc) -lwslay
chmod 0755 "$tmp"

# bench_policy (tests/bench/bench_policy.c) is built by `make bench`.
set -- --bpfdump "$tmp/bpfdump" "$@"
if [ -x "$HG_BUILD/bench_policy" ]; then
	set -- --policy-bench "$HG_BUILD/bench_policy" "$@"
fi
# bench_store (tests/bench/bench_store.c), the same way.
if [ -x "$HG_BUILD/bench_store" ]; then
	set -- --store-bench "$HG_BUILD/bench_store" "$@"
fi
# BENCH_ONLY=fleet: the fleet benchmark alone (tests/bench/bench_fleet.py:
# three hosts on PostgreSQL behind HAProxy beside one embedded host).
script=tests/bench/bench.py
if [ "${BENCH_ONLY:-}" = fleet ]; then
	script=tests/bench/bench_fleet.py
fi
/usr/bin/python3 "$script" "$@" &
child=$!
rc=0
wait "$child" || rc=$?
child=""
exit "$rc"
