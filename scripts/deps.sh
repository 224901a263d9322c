#!/bin/sh
# The Debian packages hostgate needs, in lists by use:
#
#   scripts/deps.sh --check LIST...    exit 1 naming the apt-get line when
#                                      one is missing; never installs
#   scripts/deps.sh --install LIST...  install what is missing (as root)
#   scripts/deps.sh --list LIST...     print the packages, one a line
#
# LIST: runtime, build, test, browser, fleet, bench, deb, vm (below). Only
# make run, make check and make bench install (docs/packaging.md); make,
# make install and make deb check. --install keeps the services of what
# it installs from starting (postgresql, haproxy, nginx): a policy-rc.d
# that refuses every start, there only while apt-get runs. The tests
# start instances of their own.
set -eu

# What the daemons run: bwrap, the network profile's slirp4netns,
# mkfs.btrfs for the workspace quotas (a fresh Debian 12 has e2fsprogs but
# not btrfs-progs), and python3 for sandboxd's backend probe, which runs
# inside the sandbox. debian/control's Depends lists the same.
runtime="bubblewrap slirp4netns btrfs-progs python3"
# make: the compiler and the libraries (debian/control's Build-Depends),
# and the panel's Node.js (below). libpq-dev: brokerd's PostgreSQL store;
# egressd's resolver, evdns, is part of libevent.
build="build-essential pkg-config libevent-dev libjson-c-dev libseccomp-dev
libcap-dev libssl-dev libargon2-dev libsqlite3-dev libwslay-dev
libsystemd-dev libpq-dev"
# make check: cmocka (unit), clang and its runtimes (libFuzzer, ASan,
# UBSan: the fuzz targets), pytest and its clients; iproute2, python3-pip,
# git, openssl and curl for the egress tests (a network namespace and a
# veth pair; pip, git and curl through egressd; openssl makes the test
# CA); strace and systemd-analyze for test_install.
test="libcmocka-dev clang libclang-rt-dev python3 python3-pytest
python3-websocket openssl curl iproute2 python3-pip git strace systemd"
# The browser tests drive Debian's chromium (tests/browser/run.sh).
browser="chromium"
# make fleet and its tests: a PostgreSQL server and HAProxy of their own
# (the packages' own services are not used, nor started).
fleet="postgresql haproxy"
# make bench: wrk against frontd and nginx (tests/bench/run.sh).
bench="wrk nginx-light"
# make deb: Debian's packaging tools.
deb="debhelper dpkg-dev fakeroot lintian"
# make vm: the VM suite (tests/vm/) boots the package in qemu (software
# emulation, the firmware its Depends bring); mkfs.ext4 makes its images.
vm="qemu-system-x86 qemu-utils debootstrap e2fsprogs"

usage() {
	echo "usage: scripts/deps.sh --check|--install|--list" \
	    "runtime|build|test|browser|fleet|bench|deb|vm ..." >&2
	exit 2
}

[ $# -ge 2 ] || usage
mode=$1
shift
case "$mode" in
--check | --install | --list) ;;
*) usage ;;
esac

pkgs=""
node=0
for l in "$@"; do
	case "$l" in
	runtime) pkgs="$pkgs $runtime" ;;
	build) pkgs="$pkgs $build"; node=1 ;;
	test) pkgs="$pkgs $test" ;;
	browser) pkgs="$pkgs $browser" ;;
	fleet) pkgs="$pkgs $fleet" ;;
	bench) pkgs="$pkgs $bench" ;;
	deb) pkgs="$pkgs $deb" ;;
	vm) pkgs="$pkgs $vm" ;;
	*) echo "deps: no list \"$l\"" >&2; usage ;;
	esac
done

if [ "$mode" = --list ]; then
	for p in $pkgs; do
		echo "$p"
	done
	[ "$node" = 0 ] || printf '%s\n' nodejs npm
	exit 0
fi

missing=""
for p in $pkgs; do
	case " $missing " in
	*" $p "*) continue ;;
	esac
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
# The web panel needs Node.js 18 or later and npm (scripts/web.sh checks
# the version): when there is no node at all, Debian's own nodejs and npm
# (18 and 9 on Debian 12); Debian's nodejs without npm gets npm. A Node.js
# installed otherwise (another packaging, a newer one) is left as it is.
if [ "$node" = 1 ]; then
	if ! command -v node >/dev/null 2>&1; then
		missing="$missing nodejs npm"
	elif ! command -v npm >/dev/null 2>&1 &&
	    dpkg-query -W -f='${Status} ${Provides}\n' nodejs 2>/dev/null |
	    grep "ok installed" | grep -qvw npm; then
		missing="$missing npm"
	fi
fi
[ -n "$missing" ] || exit 0

line="apt-get install -y --no-install-recommends$missing"
if [ "$mode" = --check ] || [ "$(id -u)" != 0 ]; then
	echo "hostgate: missing Debian packages ($*); as root run:" >&2
	echo "  apt-get update && $line" >&2
	exit 1
fi

# No service of an installed package starts (invoke-rc.d asks policy-rc.d;
# 101: action forbidden). One already there is the machine's: kept, and
# obeyed as it is. HG_POLICY_RC_D moves it for tests/build/test_deps.sh.
prc=${HG_POLICY_RC_D:-/usr/sbin/policy-rc.d}
ours=0
if [ ! -e "$prc" ]; then
	trap 'rm -f "$prc"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	printf '#!/bin/sh\n# scripts/deps.sh: no service starts while it installs.\nexit 101\n' \
	    >"$prc"
	chmod 0755 "$prc"
	ours=1
fi
echo "hostgate: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# Another apt-get may hold the lock (another make check): wait for it.
lock="-o DPkg::Lock::Timeout=600"
apt-get $lock update -qq >&2
apt-get $lock install -y --no-install-recommends$missing >&2
if [ "$ours" = 1 ]; then
	rm -f "$prc"
fi
