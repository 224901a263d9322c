#!/bin/sh
# Build the web panel (frontd/web) into frontd/web/dist, which frontd
# serves, when its sources changed since the last build: npm ci (when
# node_modules is missing or older than package-lock.json), then npm run
# build (tsc --noEmit && vite build). dist/.built marks a good build;
# frontd skips hidden files. --force builds anyway.
set -eu
cd "$(dirname "$0")/../frontd/web"

stamp=dist/.built
need=0
if [ "${1:-}" = "--force" ] || [ ! -f "$stamp" ] || [ ! -f dist/index.html ]; then
	need=1
elif [ -n "$(find index.html package.json package-lock.json tsconfig.json \
    vite.config.ts src public -newer "$stamp" 2>/dev/null | head -n 1)" ]; then
	need=1
fi
[ "$need" = 1 ] || exit 0

# Node.js 18 or later with npm: Debian 12's own nodejs and npm will do
# (scripts/deps.sh names them when neither is present; make run and
# make check install them).
why=""
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	why="node and npm are not installed"
elif ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)'; then
	why="Node.js $(node --version) is too old (18 or later needed)"
fi
if [ -n "$why" ]; then
	if [ -f dist/index.html ]; then
		echo "web: $why; keeping the panel built before" >&2
		exit 0
	fi
	echo "web: cannot build the panel: $why." >&2
	echo "web: install Node.js 18 or later with npm (on Debian 12, as" \
	    "root: apt-get install nodejs npm), then run make again" >&2
	exit 1
fi

if [ ! -f node_modules/.package-lock.json ] ||
    [ package-lock.json -nt node_modules/.package-lock.json ]; then
	echo "  NPM     ci (frontd/web)"
	npm ci --no-audit --no-fund --loglevel=error
fi
echo "  WEB     frontd/web/dist"
npm run --silent build >build.log 2>&1 || {
	cat build.log >&2
	rm -f build.log
	exit 1
}
rm -f build.log
touch "$stamp"
