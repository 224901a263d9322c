#!/bin/sh
# No function in the daemons' and common/'s C files is over 120 lines
# (scripts/longfn.sh counts them); the offenders are printed. The counter
# itself is checked first on a made-up file, so that a counter that finds
# nothing cannot pass this test.
set -eu
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "test_longfn: $*" >&2
	exit 1
}

{
	printf 'static int\nshort_one(void)\n{\n\treturn 0;\n}\n\n'
	printf 'int\nlong_one(int a,\n    int b)\n{\n'
	i=0
	while [ $i -lt 119 ]; do
		printf '\ta += b;\n'
		i=$((i + 1))
	done
	printf '}\n'
} >"$tmp/t.c"
out=$(scripts/longfn.sh "$tmp/t.c") && fail "a 121-line function passed"
[ "$out" = "121 $tmp/t.c:10 long_one" ] ||
	fail "the counter printed '$out' for a 121-line long_one"
echo "ok: the counter finds a 121-line function and names it"

files=$(find common frontd brokerd sandboxd egressd -name node_modules \
    -prune -o -name '*.c' -print | sort)
[ -n "$files" ] || fail "no C files found"
if ! out=$(scripts/longfn.sh $files); then
	echo "$out" >&2
	fail "functions over 120 lines (lines, where, name) are listed above"
fi
echo "ok: no function over 120 lines in $(echo "$files" | wc -l) files"
