#!/bin/sh
# Building never installs: make install with a build dependency missing
# (a fake dpkg-query says libevent-dev is not installed) stops before it
# builds or installs anything, names the apt-get line, and runs no
# apt-get, root or not. make with only a test package missing builds.
# scripts/deps.sh --install (make check's) runs apt-get with a policy-rc.d
# that refuses every service start, removed after, even when apt-get fails,
# and leaves one that was there before as it was.
set -eu
cd "$(dirname "$0")/../.."
top=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" build/test-deps' EXIT
fail() {
	echo "test_deps: $*" >&2
	exit 1
}

# The fakes: dpkg-query knows every package but those in $tmp/missing;
# apt-get records its arguments, and whether policy-rc.d refused then.
mkdir "$tmp/bin"
cat >"$tmp/bin/dpkg-query" <<FAKE
#!/bin/sh
for a; do p=\$a; done
if grep -qx "\$p" "$tmp/missing"; then
	echo "dpkg-query: no packages found matching \$p" >&2
	exit 1
fi
echo "install ok installed"
FAKE
cat >"$tmp/bin/apt-get" <<FAKE
#!/bin/sh
echo "\$*" >>"$tmp/apt-get.log"
prc=\${HG_POLICY_RC_D:-/usr/sbin/policy-rc.d}
if [ -x "\$prc" ]; then "\$prc" hostgate-test start; echo "policy-rc.d \$?" >>"$tmp/apt-get.log"; fi
[ ! -e "$tmp/apt-fails" ] || exit 100
FAKE
chmod +x "$tmp/bin/dpkg-query" "$tmp/bin/apt-get"

# A make of its own, as if typed at a shell: no outer make's flags.
mk() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u HG_DEPS_CHECKED \
	    PATH="$tmp/bin:$PATH" make --no-print-directory B=build/test-deps "$@"
}

echo libevent-dev >"$tmp/missing"
mkdir "$tmp/root"
if mk install PREFIX=/usr DESTDIR="$tmp/root" >"$tmp/out" 2>&1; then
	cat "$tmp/out" >&2
	fail "make install went on with libevent-dev missing"
fi
grep -q "apt-get install -y --no-install-recommends libevent-dev\$" "$tmp/out" ||
	{ cat "$tmp/out" >&2; fail "make install did not name the apt-get line"; }
[ ! -e "$tmp/apt-get.log" ] ||
	fail "make install ran apt-get: $(cat "$tmp/apt-get.log")"
[ -z "$(ls -A "$tmp/root")" ] || fail "make install installed: $(ls -A "$tmp/root")"
[ ! -e build/test-deps/obj ] || fail "make install compiled with a dependency missing"
echo "ok: make install installs nothing, names: $(grep -o 'apt-get install.*' "$tmp/out")"

# make deb checks the same way.
if mk deb >"$tmp/out" 2>&1; then
	fail "make deb went on with libevent-dev missing"
fi
grep -q "apt-get install -y --no-install-recommends libevent-dev\$" "$tmp/out" ||
	{ cat "$tmp/out" >&2; fail "make deb did not name the apt-get line"; }
[ ! -e "$tmp/apt-get.log" ] || fail "make deb ran apt-get"
echo "ok: make deb installs nothing either"

# A package only the tests need does not stop a build (make -n: the
# check is made when the Makefile is read).
echo libcmocka-dev >"$tmp/missing"
mk -n all >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; fail "make stopped for libcmocka-dev"; }
mk -n unit >"$tmp/out" 2>&1 && fail "make unit went on with libcmocka-dev missing"
grep -q "no-install-recommends libcmocka-dev\$" "$tmp/out" ||
	{ cat "$tmp/out" >&2; fail "make unit did not name libcmocka-dev"; }
echo "ok: make needs the build list only; make unit names libcmocka-dev"

if [ "$(id -u)" != 0 ]; then
	echo "skip: --install as root (not root here)"
	exit 0
fi
# make check's installation: apt-get runs with our policy-rc.d in place,
# which is gone after, even when apt-get fails.
prc="$tmp/policy-rc.d"
export HG_POLICY_RC_D="$prc"
echo haproxy >"$tmp/missing"
env PATH="$tmp/bin:$PATH" scripts/deps.sh --install fleet 2>"$tmp/out" ||
	{ cat "$tmp/out" >&2; fail "deps.sh --install failed"; }
grep -q "install -y --no-install-recommends haproxy\$" "$tmp/apt-get.log" ||
	fail "apt-get did not install haproxy: $(cat "$tmp/apt-get.log")"
grep -q "^policy-rc.d 101\$" "$tmp/apt-get.log" ||
	fail "no policy-rc.d refused services during apt-get: $(cat "$tmp/apt-get.log")"
[ ! -e "$prc" ] || fail "policy-rc.d left behind"
rm -f "$tmp/apt-get.log"
touch "$tmp/apt-fails"
if env PATH="$tmp/bin:$PATH" scripts/deps.sh --install fleet 2>"$tmp/out"; then
	fail "deps.sh --install succeeded with apt-get failing"
fi
grep -q "^policy-rc.d 101\$" "$tmp/apt-get.log" || fail "no policy-rc.d the second time"
[ ! -e "$prc" ] || fail "policy-rc.d left behind after apt-get failed"
rm -f "$tmp/apt-get.log" "$tmp/apt-fails"
printf '#!/bin/sh\nexit 0\n' >"$prc"
chmod 0755 "$prc"
env PATH="$tmp/bin:$PATH" scripts/deps.sh --install fleet 2>"$tmp/out" ||
	fail "deps.sh --install failed with a policy-rc.d there"
[ "$(cat "$prc")" = "$(printf '#!/bin/sh\nexit 0')" ] ||
	fail "the machine's policy-rc.d was changed"
echo "ok: --install holds services back with policy-rc.d, removed after" \
    "(apt-get failing too); the machine's own is kept"
cd "$top"
