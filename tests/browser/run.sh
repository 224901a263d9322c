#!/bin/sh
# Run hostgate's browser tests: playwright-core driving Debian's chromium
# (make check installs it) against the real daemons, on the
# node that builds the panel (18 or later: scripts/web.sh checks it). As
# root, the daemons run as the unprivileged user hostgate-test
# (scripts/users.sh creates it). HG_BUILD names the build directory
# (default: build); the arguments select tests by name, e.g.
# tests/browser/run.sh expiry popover
set -eu
cd "$(dirname "$0")/../.."

# make check installs chromium, and PostgreSQL and HAProxy for test_fleet
# (scripts/deps.sh --install browser fleet); run
# directly, this names what is missing.
scripts/deps.sh --check browser fleet
if [ "$(id -u)" -eq 0 ]; then
	scripts/users.sh
fi
# The panel, built and current; its npm packages hold playwright-core.
scripts/web.sh
if [ ! -d frontd/web/node_modules/playwright-core ]; then
	(cd frontd/web && npm ci --no-audit --no-fund --loglevel=error)
fi
export HG_BUILD="${HG_BUILD:-build}"
exec node tests/browser/run.mjs "$@"
