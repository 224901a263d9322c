#!/bin/sh
# docs/protocol.md cannot drift from the code: make protodoc-check fails
# when the code has an entry the page lacks. A copy of the page with one
# message, one role, one error code or one flag taken out of its generated
# section is refused, with a diff that names what is missing, as is a page
# without a section's markers; the page itself passes.
set -eu
cd "$(dirname "$0")/../.."
b=build/test-protodoc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "test_protodoc: $*" >&2
	exit 1
}

env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -j2 \
    B=$b $b/hg-protodoc >/dev/null
scripts/protodoc.sh check $b >/dev/null ||
	fail "docs/protocol.md does not match the code: run make protodoc"
echo "ok: docs/protocol.md matches the code"

# Each line is the start of one row of a generated table.
for row in '| `spawn` | fds |' '| `egressd` |' '| `no_space` | 507 |' \
    '| *raw* | `PM_RAW` |'; do
	grep -vF "$row" docs/protocol.md > "$tmp/protocol.md"
	[ "$(grep -cF "$row" docs/protocol.md)" = 1 ] ||
		fail "docs/protocol.md has no single row $row"
	if PROTODOC_DOC="$tmp/protocol.md" scripts/protodoc.sh check $b \
	    > "$tmp/out" 2>&1; then
		fail "protodoc-check passed a page without $row"
	fi
	grep -qF "+$row" "$tmp/out" ||
		fail "protodoc-check's diff does not name $row: $(cat "$tmp/out")"
	echo "ok: without the row $row, protodoc-check fails and shows it"
done

grep -v '^<!-- END error codes -->$' docs/protocol.md > "$tmp/protocol.md"
if PROTODOC_DOC="$tmp/protocol.md" scripts/protodoc.sh check $b \
    > "$tmp/out" 2>&1; then
	fail "protodoc-check passed a page without the error codes' END line"
fi
grep -q "has no generated error codes section" "$tmp/out" ||
	fail "protodoc-check does not say which section is missing"
echo "ok: without a section's markers, protodoc-check fails and says which"
