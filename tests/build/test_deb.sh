#!/bin/sh
# make deb: the package's version is HG_VERSION (DEB_VERSION= another, a
# bad one refused), a second make deb from the same files keeps the
# package, and the package holds the installed layout under /usr with its
# Depends, conffile and maintainer scripts. As root, its life in a scratch
# root (dpkg --root, scripts run with DPKG_ROOT): installing creates the
# users and directories and enables nothing, an upgrade keeps an edited
# conffile and the state, remove keeps them, purge removes them.
set -eu
cd "$(dirname "$0")/../.."
top=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" build/test-deb' EXIT
fail() {
	echo "test_deb: $*" >&2
	exit 1
}
hgver=$(sed -n 's/^#define HG_VERSION[ 	]*"\(.*\)"/\1/p' common/common.h)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)

# -- the version, with a fake dpkg-buildpackage (and lintian) -----------
mkdir "$tmp/bin"
cat >"$tmp/bin/dpkg-buildpackage" <<FAKE
#!/bin/sh
echo "\$(pwd)" >>"$tmp/builds"
v=\$(dpkg-parsechangelog -SVersion)
: >"../hostgate_\${v}_$arch.deb"
FAKE
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/lintian"
chmod +x "$tmp/bin/dpkg-buildpackage" "$tmp/bin/lintian"
fake() {
	env PATH="$tmp/bin:$PATH" DEB_OUT=build/test-deb "$@" scripts/deb.sh
}

p=$(fake env -u DEB_VERSION | tail -n 1)
[ "$p" = "build/test-deb/hostgate_${hgver}_$arch.deb" ] ||
	fail "make deb printed $p, not the HG_VERSION $hgver package"
[ "$(dpkg-parsechangelog -l "build/test-deb/hostgate-$hgver/debian/changelog" \
    -SVersion)" = "$hgver" ] || fail "the changelog's version is not $hgver"
p=$(fake env DEB_VERSION=9.9.9~t1 | tail -n 1)
[ "$p" = "build/test-deb/hostgate_9.9.9~t1_$arch.deb" ] ||
	fail "DEB_VERSION=9.9.9~t1 printed $p"
[ "$(dpkg-parsechangelog -l build/test-deb/hostgate-9.9.9~t1/debian/changelog \
    -SVersion)" = 9.9.9~t1 ] || fail "DEB_VERSION did not reach the changelog"
[ "$(wc -l <"$tmp/builds")" = 2 ] || fail "not two builds: $(cat "$tmp/builds")"
p=$(fake env DEB_VERSION=9.9.9~t1 | tail -n 1)
[ "$(wc -l <"$tmp/builds")" = 2 ] || fail "the same files were built again"
if fake env 'DEB_VERSION=1.0 x' >"$tmp/out" 2>&1; then
	fail "DEB_VERSION='1.0 x' was accepted"
fi
grep -q '"1.0 x" is not a Debian version' "$tmp/out" ||
	fail "a bad DEB_VERSION is not named: $(cat "$tmp/out")"
echo "ok: the package is $hgver (HG_VERSION), DEB_VERSION= another," \
    "the same files are not built again"

# -- the package itself ---------------------------------------------------
deb=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u DEB_VERSION \
    make --no-print-directory deb | tail -n 1)
[ "$deb" = "build/deb/hostgate_${hgver}_$arch.deb" ] || fail "make deb made $deb"
[ "$(dpkg-deb -f "$deb" Package)" = hostgate ] || fail "not package hostgate"
[ "$(dpkg-deb -f "$deb" Version)" = "$hgver" ] || fail "version is not $hgver"
depends=$(dpkg-deb -f "$deb" Depends)
for p in $(scripts/deps.sh --list runtime) libseccomp2 libevent-2.1-7; do
	echo "$depends" | tr ',' '\n' | grep -q "^ *$p\( (.*)\)\?\$" ||
		fail "Depends lacks $p: $depends"
done
mkdir "$tmp/x" "$tmp/ctl"
dpkg-deb -x "$deb" "$tmp/x"
dpkg-deb -e "$deb" "$tmp/ctl"
for f in usr/sbin/frontd usr/sbin/brokerd usr/sbin/sandboxd usr/sbin/egressd \
    usr/sbin/hg-egress-bridge usr/bin/hgctl \
    lib/systemd/system/hostgate.target \
    lib/systemd/system/hostgate-frontd.service \
    lib/systemd/system/hostgate-brokerd.service \
    lib/systemd/system/hostgate-sandboxd.service \
    lib/systemd/system/hostgate-egressd.service \
    usr/lib/sysusers.d/hostgate.conf usr/lib/tmpfiles.d/hostgate.conf \
    usr/lib/modules-load.d/hostgate.conf etc/hostgate/hostgate.env \
    usr/share/hostgate/web/index.html usr/share/hostgate/profiles/probe.py \
    usr/share/man/man8/sandboxd.8.gz usr/share/doc/hostgate/copyright; do
	[ -f "$tmp/x/$f" ] || fail "the package lacks /$f"
done
strings "$tmp/x/usr/sbin/sandboxd" | grep -qx /usr/share/hostgate/profiles ||
	fail "sandboxd was not built with PREFIX=/usr"
grep -qx 'ExecStart=/usr/sbin/sandboxd -d' \
    "$tmp/x/lib/systemd/system/hostgate-sandboxd.service" ||
	fail "the sandboxd unit does not start /usr/sbin/sandboxd"
[ "$(cat "$tmp/ctl/conffiles")" = /etc/hostgate/hostgate.env ] ||
	fail "conffiles: $(cat "$tmp/ctl/conffiles")"
u=$(grep -n 'systemd-sysusers' "$tmp/ctl/postinst" | head -n 1 | cut -d: -f1)
t=$(grep -n 'systemd-tmpfiles' "$tmp/ctl/postinst" | head -n 1 | cut -d: -f1)
[ -n "$u" ] && [ -n "$t" ] && [ "$u" -lt "$t" ] ||
	fail "postinst does not make the users (line ${u:-none}) before the" \
	    "directories (line ${t:-none})"
grep -q 'deb-systemd-invoke stop .*hostgate-sandboxd.service' "$tmp/ctl/prerm" ||
	fail "prerm does not stop the units at removal"
echo "ok: $deb: /usr layout, Depends, conffile, sysusers before tmpfiles," \
    "units stopped at removal"

# -- its life in a scratch root -------------------------------------------
if [ "$(id -u)" != 0 ]; then
	echo "skip: install, upgrade, remove, purge in a scratch root (not root)"
	exit 0
fi
command -v systemd-sysusers >/dev/null && command -v systemd-tmpfiles >/dev/null ||
	fail "systemd-sysusers or systemd-tmpfiles missing (Debian package systemd)"
r=$tmp/root
mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/etc" "$r/run"
: >"$r/var/lib/dpkg/status"
grep '^root:' /etc/passwd >"$r/etc/passwd"
grep '^root:' /etc/group >"$r/etc/group"
dp() {
	dpkg --root="$r" --force-script-chrootless --force-depends \
	    --force-confold --log="$tmp/dpkg.log" "$@" >"$tmp/out" 2>&1 ||
		{ cat "$tmp/out" >&2; fail "dpkg $*"; }
}
# owner PATH: its owner and group by the scratch root's names, and mode.
owner() {
	set -- $(stat -c '%u %g %a' "$1")
	echo "$(awk -F: -v u="$1" '$3 == u { print $1 }' "$r/etc/passwd"):$(awk \
	    -F: -v g="$2" '$3 == g { print $1 }' "$r/etc/group") $3"
}

dp -i "$deb"
for u in hostgate-front hostgate-broker hostgate-sandbox hostgate-egress; do
	grep -q "^$u:" "$r/etc/passwd" || fail "install did not create $u"
done
[ "$(owner "$r/var/lib/hostgate")" = "hostgate-broker:hostgate-broker 711" ] ||
	fail "/var/lib/hostgate is $(owner "$r/var/lib/hostgate")"
[ "$(owner "$r/var/lib/hostgate/workspaces")" = \
    "hostgate-sandbox:hostgate-sandbox 711" ] || fail "workspaces is wrong"
[ "$(owner "$r/run/hostgate")" = "hostgate-broker:hostgate-front 1771" ] ||
	fail "/run/hostgate is $(owner "$r/run/hostgate")"
[ -z "$(find "$r/etc/systemd" -name '*.wants' 2>/dev/null)" ] ||
	fail "install enabled units: $(find "$r/etc/systemd" -name '*.wants')"
echo "ok: install creates the users and directories and enables nothing"

echo 'HOSTGATE_LOG_LEVEL=debug' >>"$r/etc/hostgate/hostgate.env"
echo '{}' >"$r/var/lib/hostgate/users.json"
# The same package under a later version.
dpkg-deb -R "$deb" "$tmp/next"
sed -i "s/^Version: .*/Version: $hgver+next/" "$tmp/next/DEBIAN/control"
dpkg-deb -b "$tmp/next" "$tmp/next.deb" >/dev/null
dp -i "$tmp/next.deb"
[ "$(dpkg-query --admindir="$r/var/lib/dpkg" -W -f='${Version}' hostgate)" = \
    "$hgver+next" ] || fail "the upgrade did not happen"
tail -n 1 "$r/etc/hostgate/hostgate.env" | grep -qx 'HOSTGATE_LOG_LEVEL=debug' ||
	fail "the upgrade lost the edited hostgate.env"
[ -f "$r/var/lib/hostgate/users.json" ] || fail "the upgrade lost the state"
echo "ok: an upgrade keeps the edited conffile and the state"

dp -r hostgate
[ ! -e "$r/usr/sbin/sandboxd" ] || fail "remove left sandboxd"
[ -f "$r/var/lib/hostgate/users.json" ] || fail "remove removed the state"
[ -f "$r/etc/hostgate/hostgate.env" ] || fail "remove removed hostgate.env"
dp -P hostgate
[ ! -e "$r/var/lib/hostgate" ] || fail "purge left /var/lib/hostgate"
[ ! -e "$r/etc/hostgate/hostgate.env" ] || fail "purge left hostgate.env"
echo "ok: remove keeps the state and hostgate.env; purge removes both"
