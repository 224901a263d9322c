#!/bin/sh
# Build the Debian package into build/deb/hostgate_VERSION_ARCH.deb and
# print its path: the tree is copied to build/deb/hostgate-VERSION (git's
# files, tracked or new, as they are on disk; the whole tree but the build
# outputs when not a git checkout), debian/changelog is written there with
# VERSION, and dpkg-buildpackage -b builds it there, so that nothing lands
# outside build/. lintian then checks the package: an error fails.
#
# VERSION is HG_VERSION (common/common.h) unless DEB_VERSION is set.
# DEB_BUILD_OPTIONS defaults to "parallel=2 nocheck" (make check runs the
# tests). Nothing is installed: scripts/deps.sh --check names what is
# missing (the Makefile runs it before this).
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)

hgver=$(sed -n 's/^#define HG_VERSION[ 	]*"\(.*\)"/\1/p' common/common.h)
version=${DEB_VERSION:-$hgver}
case "$version" in
"" | *[!A-Za-z0-9.+~-]*)
	echo "deb: \"$version\" is not a Debian version" >&2
	exit 1 ;;
esac
out=build/deb
src=$out/hostgate-$version

rm -rf "$src"
mkdir -p "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# Deleted files are still listed by git until committed: skip them.
	git ls-files -co --exclude-standard | while IFS= read -r f; do
		[ -e "$f" ] && printf '%s\n' "$f"
	done | tar -cf - --verbatim-files-from -T - | tar -xf - -C "$src"
	commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
	if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
		commit="$commit with changes"
	fi
	date=$(git log -1 --format=%aD 2>/dev/null || date -R)
else
	tar -cf - --exclude=./build --exclude=./build-san --exclude=./build-fuzz \
	    --exclude=node_modules --exclude=./frontd/web/dist --exclude=./var \
	    --exclude=./run --exclude=./.env . | tar -xf - -C "$src"
	commit="a tree without git"
	date=$(date -R)
fi

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

arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb=$out/hostgate_${version}_${arch}.deb
rm -f "$deb"
log=$top/$out/build.log
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
echo "$deb"
