#!/bin/sh
# Build the Debian package into build/deb/hostgate_VERSION_ARCH.deb and
# print its path: the tree is copied to build/deb/hostgate-VERSION (git's
# files, tracked or new, as they are on disk; the whole tree but the build
# outputs when not a git checkout), debian/changelog is written there with
# VERSION, and dpkg-buildpackage -b builds it there, so that nothing lands
# outside build/. lintian then checks the package: an error fails. When
# the package there was built from the same files (their SHA-256 sums)
# with the same version, it is kept as it is (rm -r build/deb to force).
#
# VERSION is HG_VERSION (common/common.h) unless DEB_VERSION is set;
# DEB_OUT moves build/deb (tests/build/test_deb.sh). DEB_BUILD_OPTIONS
# defaults to "parallel=2 nocheck" (make check runs the tests). Nothing is
# installed: the Makefile's scripts/deps.sh --check names what is missing.
set -eu
cd "$(dirname "$0")/.."

hgver=$(sed -n 's/^#define HG_VERSION[ 	]*"\(.*\)"/\1/p' common/common.h)
version=${DEB_VERSION:-$hgver}
case "$version" in
"" | [!0-9]* | *[!A-Za-z0-9.+~-]*)
	echo "deb: \"$version\" is not a Debian version (a digit first, then" \
	    "letters, digits and . + ~ -)" >&2
	exit 1 ;;
esac
out=${DEB_OUT:-build/deb}
src=$out/hostgate-$version
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb=$out/hostgate_${version}_${arch}.deb
mkdir -p "$out"

# The files to package, one a line.
list=$out/files
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# Deleted files are still listed by git until committed: skip them.
	git ls-files -co --exclude-standard | while IFS= read -r f; do
		[ -e "$f" ] && [ ! -d "$f" ] && printf '%s\n' "$f"
	done >"$list"
	commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
	if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
		commit="$commit with changes"
	fi
	date=$(git log -1 --format=%aD 2>/dev/null || date -R)
else
	find . \( -path ./build -o -path ./build-san -o -path ./build-release \
	    -o -path ./build-fuzz -o -name node_modules -o -path ./frontd/web/dist -o -path ./var -o \
	    -path ./run -o -name .git \) -prune -o \( -type f -o -type l \) \
	    -print | sed 's|^\./||' | grep -v '^\.env$' | LC_ALL=C sort >"$list"
	commit="a tree without git"
	date=$(date -R)
fi

sum=$( { echo "$version"; tr '\n' '\0' <"$list" | xargs -0 sha256sum; } |
    sha256sum | cut -d' ' -f1)
if [ -f "$deb" ] && [ "$(cat "$deb.sum" 2>/dev/null)" = "$sum" ]; then
	echo "  DEB     $deb is up to date (built from these files)"
	echo "$deb"
	exit 0
fi

rm -rf "$src" "$deb" "$deb.sum"
mkdir -p "$src"
tar -cf - --verbatim-files-from -T "$list" | tar -xf - -C "$src"

maint=$(sed -n 's/^Maintainer: //p' debian/control)
cat >"$src/debian/changelog" <<CHANGELOG
hostgate ($version) unstable; urgency=medium

  * hostgate $version, built by make deb from $commit.

 -- $maint  $date
CHANGELOG

# The panel's npm ci: the user's npm cache, not the empty HOME that
# debhelper gives the build.
npm_config_cache=${npm_config_cache:-${HOME:-/root}/.npm}
export npm_config_cache
export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=2 nocheck}"

log=$out/build.log
echo "  DEB     $deb (dpkg-buildpackage in $src, log $out/build.log)"
# An outer make's flags and variables must not reach debian/rules' make.
if ! (cd "$src" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
    dpkg-buildpackage -b -us -uc) >"$log" 2>&1; then
	tail -n 30 "$log" >&2
	echo "deb: dpkg-buildpackage failed; the whole log: $log" >&2
	exit 1
fi
[ -f "$deb" ] || { echo "deb: dpkg-buildpackage made no $deb" >&2; exit 1; }
echo "  LINTIAN $deb"
lintian --fail-on error "$deb" || {
	echo "deb: lintian found errors in $deb" >&2
	exit 1
}
echo "$sum" >"$deb.sum"
echo "$deb"
