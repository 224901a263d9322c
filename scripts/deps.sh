#!/bin/sh
# Install the Debian packages hostgate needs, only when one is missing.
# Not root: print the exact apt-get line and fail.
set -e
PKGS="build-essential pkg-config libevent-dev libjson-c-dev libseccomp-dev
libcap-dev libssl-dev libargon2-dev libsqlite3-dev libcmocka-dev libwslay-dev libsystemd-dev bubblewrap
slirp4netns btrfs-progs python3 python3-pytest python3-websocket openssl curl
clang libclang-rt-dev iproute2 python3-pip git libpq-dev postgresql haproxy"
# clang and its runtimes (libFuzzer, ASan, UBSan): make check runs the fuzz
# targets (tests/fuzz/README.md).
# btrfs-progs: mkfs.btrfs makes each user's workspace image (disk quotas,
# docs/sandbox.md); a fresh Debian 12 has e2fsprogs but not it.
# iproute2, python3-pip, git (and openssl, curl): the egress tests' network
# namespace and veth pair, and the clients they run through egressd (pip
# against a local index, git over HTTPS, curl; openssl makes the test CA).
# egressd's resolver, evdns, is part of libevent.
# libpq-dev: brokerd's PostgreSQL store (HOSTGATE_STORE); postgresql and
# haproxy: the fleet (make fleet, docs/fleet.md) and its tests, which start
# a server and a balancer of their own (the packages' own are not used).
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
# The web panel needs Node.js 18 or later and npm (scripts/web.sh checks
# the version): when there is no node at all, Debian's own nodejs and npm
# (18 and 9 on Debian 12); Debian's nodejs without npm gets npm. A Node.js
# installed otherwise (another packaging, a newer one) is left as it is.
if ! command -v node >/dev/null 2>&1; then
	missing="$missing nodejs npm"
elif ! command -v npm >/dev/null 2>&1 &&
    dpkg-query -W -f='${Status} ${Provides}\n' nodejs 2>/dev/null |
    grep "ok installed" | grep -qvw npm; then
	missing="$missing npm"
fi
if [ -n "$missing" ]; then
	line="apt-get install -y --no-install-recommends$missing"
	if [ "$(id -u)" != 0 ]; then
		echo "hostgate: missing Debian packages; as root run:" >&2
		echo "  apt-get update && $line" >&2
		exit 1
	fi
	echo "hostgate: installing$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	$line >&2
fi
# The network profile's slirp4netns opens /dev/net/tun as the sandbox's
# user. Debian's udev rules make it 0666 (opening it grants nothing
# without CAP_NET_ADMIN in a network namespace); a machine without udev
# may have left it 0600.
if [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "hostgate: /dev/net/tun set to mode 0666, as Debian's udev does" >&2
		chmod 0666 /dev/net/tun
	else
		echo "hostgate: /dev/net/tun is not 0666; the network profile" \
		    "will be unavailable (as root: chmod 0666 /dev/net/tun)" >&2
	fi
fi
exit 0
