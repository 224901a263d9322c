#!/usr/bin/env bash
# make run: start hostgate on its embedded defaults, in the foreground.
# Creates ./var and ./run, the service users when root, the first admin on
# first start, and stops all three daemons on Ctrl-C or SIGTERM.
set -euo pipefail

cd "$(dirname "$0")/.."
B=${HG_BUILD:-build}
export HOSTGATE_STATE_DIR=${HOSTGATE_STATE_DIR:-$PWD/var}
export HOSTGATE_RUN_DIR=${HOSTGATE_RUN_DIR:-$PWD/run}
export HOSTGATE_PROFILES_DIR=${HOSTGATE_PROFILES_DIR:-$PWD/profiles}
export HOSTGATE_WEB_DIR=${HOSTGATE_WEB_DIR:-$PWD/frontd/web/dist}

if [ "$(id -u)" = 0 ]; then
	scripts/users.sh
	# The service users must reach the state and run directories after
	# they drop root; a checkout under /root, say, is closed to them.
	for u in hostgate-front hostgate-broker hostgate-sandbox; do
		if ! setpriv --reuid="$u" --regid="$u" --clear-groups \
		    test -x "$(dirname "$HOSTGATE_STATE_DIR")" -a \
		    -x "$(dirname "$HOSTGATE_RUN_DIR")" 2>/dev/null; then
			echo "run: $u cannot reach $(dirname "$HOSTGATE_STATE_DIR");" \
			    "using /var/lib/hostgate and /run/hostgate instead" >&2
			export HOSTGATE_STATE_DIR=/var/lib/hostgate
			export HOSTGATE_RUN_DIR=/run/hostgate
			break
		fi
	done
fi
# The daemons create the state directory with its owner and mode (and
# refuse one whose owner or mode is wrong); the run directory is shared
# by all three, made here when missing.
mkdir -p "$(dirname "$HOSTGATE_STATE_DIR")"
[ -d "$HOSTGATE_RUN_DIR" ] || mkdir -p -m 0755 "$HOSTGATE_RUN_DIR"
if [ -z "${HOSTGATE_ENV_FILE:-}" ] && [ -f .env ]; then
	export HOSTGATE_ENV_FILE=$PWD/.env
fi

# Check the configuration once, with a clear message, before starting.
"$B/sandboxd" -n
"$B/brokerd" -n
"$B/frontd" -n

pids=()
stop() {
	trap - INT TERM
	echo "run: stopping hostgate" >&2
	kill -TERM "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	exit "${1:-0}"
}
trap 'stop 0' INT TERM

"$B/sandboxd" -d & pids+=($!)
"$B/brokerd" -d & pids+=($!)
"$B/frontd" -d & pids+=($!)

# The first start creates the admin, once brokerd answers.
users="" up=0
for _ in $(seq 100); do
	if users=$("$B/hgctl" user list 2>/dev/null); then
		up=1
		break
	fi
	sleep 0.1
done
if [ $up = 0 ]; then
	echo "run: brokerd does not answer on its control socket" >&2
	stop 1
fi
if [ -z "$users" ]; then
	if [ -n "${HOSTGATE_ADMIN_PASSWORD:-}" ]; then
		pw=$HOSTGATE_ADMIN_PASSWORD
		shown="(from HOSTGATE_ADMIN_PASSWORD)"
	else
		pw=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
		shown=$pw
	fi
	printf '%s\n' "$pw" | "$B/hgctl" user add admin --admin \
	    --password-stdin >/dev/null || stop 1
	echo "run: created user admin, password: $shown" >&2
	echo "run: it is shown only this once; change it with" \
	    "'$B/hgctl user passwd admin'" >&2
fi
listen=${HOSTGATE_LISTEN:-127.0.0.1:8080}
echo "run: hostgate is up on http${HOSTGATE_TLS_CERT:+s}://$listen/" \
    "(Ctrl-C stops it)" >&2

# A daemon that dies takes the others down: no half-running hostgate.
set +e
wait -n "${pids[@]}"
rc=$?
echo "run: a daemon exited (status $rc)" >&2
stop 1
