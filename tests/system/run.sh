#!/bin/sh
# Run hostgate's system tests (pytest, Debian's /usr/bin/python3) from the
# repository root. As root, first make sure the service and test users exist.
# HG_BUILD names the build directory (default: build); extra arguments go to
# pytest, e.g. tests/system/run.sh -k tls -x. Every run ends with its 25
# slowest tests and fixtures (--durations), where the suite's time goes.
set -eu
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -eq 0 ]; then
	scripts/users.sh
fi
export HG_BUILD="${HG_BUILD:-build}"
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 -m pytest -q -ra --durations=25 tests/system "$@"
