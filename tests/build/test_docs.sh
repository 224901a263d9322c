#!/bin/sh
# make docs-check holds the pages to the code: in a copy of the tree it
# passes as the tree is, and fails, naming what to write, when a .c file
# is added without its line in docs/architecture.md, when a variable is
# added to common/config.c without its row in docs/configuration.md, and
# when a variable's default changes without the page.
set -eu
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "test_docs: $*" >&2
	exit 1
}
mk() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory \
	    -C "$tmp/src" -j2 "$@"
}
# docs-check must fail, and say $1.
expect_fail() {
	if mk docs-check >"$tmp/out" 2>&1; then
		cat "$tmp/out" >&2
		fail "docs-check passed $2"
	fi
	grep -qF "$1" "$tmp/out" || {
		cat "$tmp/out" >&2
		fail "docs-check failed $2 without saying: $1"
	}
}

# The tree as it is, tracked and new files, without what git ignores.
mkdir "$tmp/src"
git ls-files -z -co --exclude-standard | xargs -0 tar -cf - | tar -xf - -C "$tmp/src"
mk docs-check >"$tmp/out" 2>&1 || {
	cat "$tmp/out" >&2
	fail "docs-check fails on the tree as it is"
}
echo "ok: docs-check passes on the tree"

printf '/* new */\n' > "$tmp/src/sandboxd/newpart.c"
expect_fail "sandboxd/newpart.c is not in docs/architecture.md's Code layout" \
    "with a .c file the page does not list"
rm "$tmp/src/sandboxd/newpart.c"
echo "ok: a .c file without its line fails: $(grep newpart "$tmp/out")"

cfg=$tmp/src/common/config.c
sed -i 's|^\t{ "HOSTGATE_BUILD", NULL, KIND_IGNORED,|\t{ "HOSTGATE_DOCS_TEST", NULL, KIND_IGNORED, NOF, 0, 0, NULL },\n&|' \
    "$cfg"
grep -q HOSTGATE_DOCS_TEST "$cfg" || fail "could not add a variable to $cfg"
expect_fail "docs/configuration.md lacks a row for HOSTGATE_DOCS_TEST" \
    "with a variable the page does not have"
echo "ok: a variable without its row fails: $(grep DOCS_TEST "$tmp/out" | cut -c1-72)..."
sed -i '/HOSTGATE_DOCS_TEST/d' "$cfg"

sed -i 's|{ "HOSTGATE_LOGIN_BURST", "5",|{ "HOSTGATE_LOGIN_BURST", "7",|' "$cfg"
grep -q '"HOSTGATE_LOGIN_BURST", "7"' "$cfg" ||
	fail "could not change a default in $cfg"
expect_fail 'HOSTGATE_LOGIN_BURST: the default says `5`, common/config.c has `7`' \
    "with a default the page does not show"
echo "ok: a changed default fails: $(grep LOGIN_BURST "$tmp/out")"
