#!/bin/sh
# The previous release's .deb, for the guest suite's upgrade test:
#   previous.sh CACHE     prints the path of the .deb
# The commit pinned in tests/vm/previous predates debian/, so the package
# is built from a git archive of it with this tree's debian/ and
# scripts/deb.sh copied in, at a version below this tree's. Cached in
# CACHE/previous-KEY, KEY a hash of the commit, debian/ and deb.sh.
# HGVM_PREVIOUS_DEB names a ready .deb instead.
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
key=$( { echo "$commit"; cd "$top" && find debian scripts/deb.sh -type f |
    LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -c1-16)
dir=$cache/previous-$key
if ls "$dir"/hostgate_*.deb >/dev/null 2>&1; then
	ls "$dir"/hostgate_*.deb | grep -v dbgsym | head -n 1
	exit 0
fi
src=$(mktemp -d /tmp/hgvm-previous.XXXXXX)
trap 'rm -rf "$src"' EXIT
mkdir "$src/hostgate"
git -C "$top" archive "$commit" | tar -x -C "$src/hostgate"
# This tree's packaging: debian/ and make deb's script, which builds from
# a tree without git as well (its files as they are).
cp -R "$top/debian" "$src/hostgate/"
cp "$top/scripts/deb.sh" "$src/hostgate/scripts/"
# A version below this tree's: "~prev" sorts before anything.
v=$(sed -n 's/^#define HG_VERSION[ 	]*"\(.*\)"/\1/p' "$top/common/common.h")
(cd "$src/hostgate" && DEB_VERSION="$v~prev" DEB_OUT="$src/out" \
    sh scripts/deb.sh) >"$src/build.log" 2>&1 || {
	tail -n 40 "$src/build.log" >&2
	exit 1
}
mkdir -p "$dir.new"
cp "$src/out/hostgate_$v~prev"_*.deb "$dir.new/"
rm -rf "$dir" && mv "$dir.new" "$dir"
ls "$dir"/hostgate_*.deb
