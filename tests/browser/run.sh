#!/bin/sh
# Run hostgate's browser tests: playwright-core driving Debian's chromium
# (installed here when missing, as root) against the real daemons, on the
# node that builds the panel (18 or later: scripts/web.sh checks it). As
# root, the daemons run as the unprivileged user hostgate-test
# (scripts/users.sh creates it). HG_BUILD names the build directory
# (default: build); the arguments select tests by name, e.g.
# tests/browser/run.sh expiry popover
set -eu
cd "$(dirname "$0")/../.."

if [ ! -x /usr/bin/chromium ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "browser tests: chromium is missing; as root run:" >&2
		echo "  apt-get update && apt-get install -y chromium" >&2
		exit 1
	fi
	echo "browser tests: installing chromium" >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends chromium >&2
fi
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
