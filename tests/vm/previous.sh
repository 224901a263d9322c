#!/bin/sh
# The previous release's .deb, for the guest suite's upgrade test:
#   previous.sh CACHE     prints the path of the .deb
# The commit pinned in tests/vm/previous predates debian/, so the package
# is built from a git archive of it with this tree's debian/ copied in and
# a version below this tree's. Cached in CACHE/previous-KEY, KEY a hash of
# the commit and of debian/. HGVM_PREVIOUS_DEB names a ready .deb instead.
set -eu
cache=$1
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
if [ -n "${HGVM_PREVIOUS_DEB:-}" ]; then
	realpath "$HGVM_PREVIOUS_DEB"
	exit 0
fi
commit=$(sed 's/#.*//' "$here/previous" | tr -d ' \n')
[ -d "$top/debian" ] || {
	echo "previous.sh: no debian/ in $top to build $commit with" >&2
	exit 1
}
key=$( { echo "$commit"; cd "$top" && find debian -type f | LC_ALL=C sort |
    xargs sha256sum; } | sha256sum | cut -c1-16)
dir=$cache/previous-$key
if ls "$dir"/hostgate_*.deb >/dev/null 2>&1; then
	ls "$dir"/hostgate_*.deb | grep -v dbgsym | head -n 1
	exit 0
fi
src=$(mktemp -d /tmp/hgvm-previous.XXXXXX)
trap 'rm -rf "$src"' EXIT
mkdir "$src/hostgate"
git -C "$top" archive "$commit" | tar -x -C "$src/hostgate"
cp -R "$top/debian" "$src/hostgate/"
# A version below this tree's: its upstream part with "~prev" (which
# sorts before anything), built as a native package so that no orig
# tarball is needed.
v=$(cd "$top" && dpkg-parsechangelog -S Version)
pv="${v%-*}~prev"
mkdir -p "$src/hostgate/debian/source"
echo "3.0 (native)" >"$src/hostgate/debian/source/format"
cat >"$src/hostgate/debian/changelog" <<EOC
hostgate ($pv) unstable; urgency=medium

  * The release at $commit, packaged for the upgrade test.

 -- hostgate tests <tests@hostgate.invalid>  $(date -R)
EOC
(cd "$src/hostgate" && dpkg-buildpackage -b -us -uc >"$src/build.log" 2>&1) || {
	tail -n 40 "$src/build.log" >&2
	exit 1
}
mkdir -p "$dir.new"
cp "$src"/hostgate_*.deb "$dir.new/"
rm -f "$dir.new"/*dbgsym*
rm -rf "$dir" && mv "$dir.new" "$dir"
ls "$dir"/hostgate_*.deb | head -n 1
