#!/bin/sh
# The pages that describe the code, held against it (make docs-check):
#   - docs/architecture.md's "Code layout" gives every .c file of the
#     programs (all but tests/) one line, "path/file.c  what it is for",
#     and names no file that is gone;
#   - docs/configuration.md's table has one row for every variable of
#     common/config.c (hg-docvars prints them), with its default, what is
#     allowed, the daemons and the meaning, and no row for a variable the
#     code does not know.
# Usage: scripts/docs.sh check [BUILD]   (BUILD holds hg-docvars)
# Each failure is named with the file, the line to write and where.
set -eu
cd "$(dirname "$0")/.."
what=${1:-}
build=${2:-build}
[ "$what" = check ] || {
	echo "usage: $0 check [BUILD]" >&2
	exit 2
}
arch=docs/architecture.md
conf=docs/configuration.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# --- architecture.md: one line per .c file ---------------------------------
# The sources: every .c file outside tests/ and the build directories.
find . -name '*.c' ! -path './tests/*' ! -path './build*' \
    ! -path '*/node_modules/*' ! -path './.git/*' |
	sed 's|^\./||' | LC_ALL=C sort > "$tmp/sources"
grep -qx '## Code layout' "$arch" || {
	echo "docs-check: $arch has no \"## Code layout\" section" >&2
	exit 1
}
# The section's entries: lines whose first word is a path ending in .c.
awk '
	/^## / { in_section = ($0 == "## Code layout"); next }
	in_section && $1 ~ /^[A-Za-z0-9_.\/-]+\.c$/ {
		d = $0; sub(/^[ \t]*[^ \t]+[ \t]*/, "", d)
		print $1 "\t" NR "\t" d
	}
' "$arch" > "$tmp/entries"
cut -f1 "$tmp/entries" | LC_ALL=C sort > "$tmp/listed"
for f in $(LC_ALL=C comm -23 "$tmp/sources" "$tmp/listed"); do
	echo "docs-check: $f is not in $arch's Code layout: add the line" \
	    "\"$f  <what it is for>\" under its directory" >&2
	fail=1
done
for f in $(LC_ALL=C comm -13 "$tmp/sources" "$tmp/listed" | uniq); do
	echo "docs-check: $arch's Code layout names $f, which does not" \
	    "exist: remove or rename its line" >&2
	fail=1
done
for f in $(uniq -d "$tmp/listed"); do
	echo "docs-check: $arch's Code layout names $f more than once" >&2
	fail=1
done
awk -F'\t' -v doc="$arch" '$3 == "" || $3 ~ /^<what it is for>$/ {
	printf "docs-check: %s:%d: %s has no description\n", doc, $2, $1
	bad = 1
} END { exit bad }' "$tmp/entries" >&2 || fail=1

# --- configuration.md: one row per variable --------------------------------
[ -x "$build/hg-docvars" ] || {
	echo "docs-check: $build/hg-docvars is missing (make docs-check" \
	    "builds it)" >&2
	exit 1
}
"$build/hg-docvars" > "$tmp/vars"
# A row: | `NAME` | default | allowed | daemon | meaning |
awk -v doc="$conf" -v vars="$tmp/vars" '
	function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
	function err(line, msg) {
		printf "docs-check: %s:%s: %s\n", doc, line, msg
		bad = 1
	}
	# The backquoted values of a cell, joined by ",".
	function quoted(s,    out, n) {
		out = ""; n = 0
		while (match(s, /`[^`]*`/)) {
			out = out (n++ ? "," : "") substr(s, RSTART + 1, RLENGTH - 2)
			s = substr(s, RSTART + RLENGTH)
		}
		return out
	}
	function first(s) {
		return match(s, /^`[^`]*`/) ? substr(s, 2, RLENGTH - 2) : ""
	}
	BEGIN {
		FS = "\t"
		while ((getline l < vars) > 0) {
			split(l, v, "\t")
			kind[v[1]] = v[2]; def[v[1]] = v[3]; order[++n] = v[1]
		}
		FS = "|"
	}
	/^\| `[A-Z_]+` \|/ {
		name = trim($2); gsub(/`/, "", name)
		if (name in row) {
			err(NR, "a second row for " name); next
		}
		row[name] = NR
		if (!(name in kind)) {
			err(NR, "a row for " name ", which common/config.c does " \
			    "not have: remove it, or add the variable"); next
		}
		if (NF != 7) {
			err(NR, name ": " NF - 2 " cells, want 5 (variable, " \
			    "default, allowed, daemon, meaning)"); next
		}
		for (i = 3; i <= 6; i++)
			if (trim($i) == "")
				err(NR, name ": an empty cell (column " i - 1 ")")
		d = trim($3)
		if (kind[name] == "literal" && first(d) != def[name] &&
		    quoted(d) != def[name])
			err(NR, name ": the default says " d ", common/config.c " \
			    "has `" def[name] "`")
		if (kind[name] == "none" && first(d) != "" &&
		    index(first(d), "$") == 0)
			err(NR, name ": the default says " d ", common/config.c " \
			    "has none (write empty, unset, or how it is computed)")
	}
	END {
		for (i = 1; i <= n; i++)
			if (!(order[i] in row))
				printf "docs-check: %s lacks a row for %s " \
				    "(common/config.c): add \"| `%s` | default " \
				    "| allowed | daemon | meaning |\" to its " \
				    "Variables table\n", doc, order[i], order[i]
		for (i = 1; i <= n; i++)
			if (!(order[i] in row))
				bad = 1
		exit bad
	}
' "$conf" >&2 || fail=1

if [ $fail -ne 0 ]; then
	echo "docs-check: the pages above differ from the code" >&2
	exit 1
fi
echo "docs-check: $arch lists the $(wc -l < "$tmp/sources") .c files;" \
    "$conf has the $(wc -l < "$tmp/vars") variables"
