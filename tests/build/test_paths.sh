#!/bin/sh
# The paths compiled into the daemons follow the make that installs them:
# built with PREFIX=/opt/hg-a, then make install PREFIX=/usr rebuilds what
# holds them, and the installed sandboxd, hgctl and hostgate.env name
# /usr/share/hostgate, not /opt/hg-a. A make with the same paths again
# rebuilds nothing; LOCALSTATEDIR alone moves the state directory.
set -eu
cd "$(dirname "$0")/../.."
b=build/test-paths
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "test_paths: $*" >&2
	exit 1
}
mk() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -j2 \
	    B=$b "$@"
}

mk PREFIX=/opt/hg-a $b/sandboxd $b/hgctl >/dev/null
strings $b/sandboxd | grep -qx /opt/hg-a/share/hostgate/profiles ||
	fail "sandboxd built with PREFIX=/opt/hg-a lacks its profiles directory"
echo "ok: PREFIX=/opt/hg-a is compiled in"

mk PREFIX=/usr DESTDIR="$tmp/root" install >/dev/null
for f in usr/sbin/sandboxd usr/sbin/brokerd usr/bin/hgctl; do
	strings "$tmp/root/$f" | grep -qx /usr/share/hostgate/profiles ||
		fail "the installed $f lacks /usr/share/hostgate/profiles"
	! strings "$tmp/root/$f" | grep -q /opt/hg-a ||
		fail "the installed $f still names /opt/hg-a"
done
grep -qx '# HOSTGATE_PROFILES_DIR=/usr/share/hostgate/profiles' \
    "$tmp/root/etc/hostgate/hostgate.env" ||
	fail "the installed hostgate.env lacks PREFIX=/usr's profiles directory"
! grep -q /opt/hg-a "$tmp/root/etc/hostgate/hostgate.env" ||
	fail "the installed hostgate.env still names /opt/hg-a"
echo "ok: make install PREFIX=/usr rebuilt them: /usr/share/hostgate installed"

# The same paths: paths.h is not rewritten and nothing is out of date.
before=$(stat -c %Y.%s $b/paths.h)
mk PREFIX=/usr -q $b/sandboxd $b/brokerd $b/hgctl $b/hostgate.env ||
	fail "make with the same paths would rebuild"
[ "$(stat -c %Y.%s $b/paths.h)" = "$before" ] || fail "paths.h rewritten"
echo "ok: the same paths again rebuild nothing"

mk PREFIX=/usr LOCALSTATEDIR=/srv $b/hgctl >/dev/null
strings $b/hgctl | grep -qx /srv/lib/hostgate ||
	fail "hgctl built with LOCALSTATEDIR=/srv lacks /srv/lib/hostgate"
echo "ok: LOCALSTATEDIR=/srv moves the state directory"
