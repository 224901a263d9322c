#!/bin/sh
# Run the build's own tests (make build-check): each tests/build/test_*.sh,
# from the repository root, in order. Each prints what it checked and exits
# non-zero on a failure; the first failure ends the run.
set -eu
cd "$(dirname "$0")/../.."
for t in tests/build/test_*.sh; do
	echo "== $t"
	sh "$t" || { echo "FAIL: $t" >&2; exit 1; }
done
