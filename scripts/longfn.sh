#!/bin/sh
# Print each C function longer than a limit: "lines file:line name", one a
# line, counting from the "{" at column 0 that opens the body to the "}" at
# column 0 that closes it, both included. The definition's name is the
# identifier before the first "(" of the lines above the "{".
# Usage: scripts/longfn.sh [-n limit] file...   (exit 1 if any is longer)
set -eu
limit=120
if [ "${1:-}" = -n ]; then
	limit=$2
	shift 2
fi
awk -v limit="$limit" '
FNR == 1 { head = ""; start = 0 }
start == 0 && /^\{/ {
	start = FNR
	name = head
	sub(/\(.*/, "", name)
	n = split(name, w, /[ \t*]+/)
	name = w[n]
	next
}
start == 0 {
	if ($0 ~ /^[A-Za-z_].*\(/)
		head = $0
	next
}
/^\}/ {
	len = FNR - start + 1
	if (len > limit) {
		printf "%d %s:%d %s\n", len, FILENAME, start, name
		bad = 1
	}
	start = 0
	head = ""
}
END { exit bad }
' "$@"
