#!/bin/sh
# Install the Debian packages hostgate needs, only when one is missing.
# Not root: print the exact apt-get line and fail.
set -e
PKGS="build-essential pkg-config libevent-dev libjson-c-dev libseccomp-dev
libcap-dev libssl-dev libargon2-dev libcmocka-dev libwslay-dev bubblewrap
slirp4netns python3 python3-pytest openssl curl"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
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
