#!/usr/bin/env bash
# make run: start hostgate on its embedded defaults, in the foreground.
# Creates ./var and ./run, the service users when root, the first admin on
# first start, and stops all four daemons on Ctrl-C or SIGTERM. It says
# "up" only once /healthz answers 200 through the whole chain, and names the
# daemon that failed, with its last log line, when that does not happen
# within HG_RUN_TIMEOUT seconds (default 60); the up line says whether
# sandboxd has linked to egressd, the egress proxy of the +allowlist
# profiles (not part of /healthz). Each daemon's stderr goes to
# RUN_DIR/NAME.log and is shown here as well.
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
	for u in hostgate-front hostgate-broker hostgate-sandbox \
	    hostgate-egress; do
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
# by all four, made here when missing.
mkdir -p "$(dirname "$HOSTGATE_STATE_DIR")"
[ -d "$HOSTGATE_RUN_DIR" ] || mkdir -p -m 0755 "$HOSTGATE_RUN_DIR"
if [ -z "${HOSTGATE_ENV_FILE:-}" ] && [ -f .env ]; then
	export HOSTGATE_ENV_FILE=$PWD/.env
fi

# Check the configuration once, with a clear message, before starting.
"$B/sandboxd" -n
"$B/brokerd" -n
"$B/frontd" -n
"$B/egressd" -n

timeout=${HG_RUN_TIMEOUT:-60}
case $timeout in
''|*[!0-9]*|0) echo "run: HG_RUN_TIMEOUT=$timeout: not a number of seconds" >&2
	exit 2 ;;
esac
daemons=(sandboxd brokerd frontd egressd)
listen_file=$HOSTGATE_RUN_DIR/frontd.listen
declare -A pid=()
created=0 up=0 tailpid="" tick=""

# log NAME: the daemon's log file.
log() { printf '%s/%s.log' "$HOSTGATE_RUN_DIR" "$1"; }

# last_line NAME: the last line the daemon logged, or a note that it logged
# nothing.
last_line() {
	local l
	l=$(tail -n 1 "$(log "$1")" 2>/dev/null || true)
	printf '%s' "${l:-(nothing logged)}"
}

stop() {
	local rc=${1:-0}
	trap - INT TERM
	echo "run: stopping hostgate" >&2
	# A password never shown is of no use: the next start creates the
	# admin again.
	if [ $created = 1 ] && [ $up = 0 ]; then
		"$B/hgctl" user del admin >/dev/null 2>&1 || true
	fi
	if [ ${#pid[@]} -gt 0 ]; then
		kill -TERM "${pid[@]}" 2>/dev/null || true
		wait "${pid[@]}" 2>/dev/null || true
	fi
	# frontd cannot remove it once it has dropped its privileges.
	rm -f "$listen_file"
	if [ -n "$tick" ]; then
		kill "$tick" 2>/dev/null || true
	fi
	if [ -n "$tailpid" ]; then
		kill "$tailpid" 2>/dev/null || true
		wait "$tailpid" 2>/dev/null || true
	fi
	exit "$rc"
}
trap 'stop 0' INT TERM

# fail NAME WHAT...: NAME did not come up; say so with its last log line.
fail() {
	echo "run: $1 ${*:2}; its last log line: $(last_line "$1")" >&2
	stop 1
}

# The address file of an earlier frontd must not pass for this one's.
rm -f "$listen_file"
logs=()
for d in "${daemons[@]}"; do
	(umask 077 && : >"$(log "$d")")
	logs+=("$(log "$d")")
done
tail -q -n +1 -F --pid=$$ "${logs[@]}" >&2 2>/dev/null &
tailpid=$!
for d in "${daemons[@]}"; do
	"$B/$d" -d >>"$(log "$d")" 2>&1 &
	pid[$d]=$!
done

# Each step waits for what the next one needs: brokerd's control socket
# for the first admin, frontd's address file for the URL, then /healthz
# 200 through frontd, brokerd, sandboxd and the backend.
scheme=http curl_tls=()
if [ -n "${HOSTGATE_TLS_CERT:-}" ]; then
	scheme=https
	curl_tls=(--insecure)	# the certificate may well be self-signed
fi
admin_done=0 addr="" code="" body=""
deadline=$((SECONDS + timeout))
while :; do
	for d in "${daemons[@]}"; do
		if ! kill -0 "${pid[$d]}" 2>/dev/null; then
			rc=0
			wait "${pid[$d]}" || rc=$?
			fail "$d" "exited at start-up (status $rc)"
		fi
	done
	if [ $admin_done = 0 ]; then
		if users=$("$B/hgctl" user list 2>/dev/null); then
			admin_done=1
			if [ -z "$users" ]; then
				if [ -n "${HOSTGATE_ADMIN_PASSWORD:-}" ]; then
					pw=$HOSTGATE_ADMIN_PASSWORD
					shown="(from HOSTGATE_ADMIN_PASSWORD)"
				else
					pw=$(head -c 18 /dev/urandom | base64 |
					    tr '+/' '-_')
					shown=$pw
				fi
				if ! printf '%s\n' "$pw" | "$B/hgctl" user add \
				    admin --admin --password-stdin >/dev/null; then
					fail brokerd "refused to create the admin"
				fi
				created=1
			fi
			continue
		fi
	elif [ -z "$addr" ]; then
		if [ -s "$listen_file" ]; then
			addr=$(cat "$listen_file")
			continue
		fi
	else
		# The body, then the status on a line of its own.
		body=$(curl --silent --globoff --max-time 2 --connect-timeout 1 \
		    "${curl_tls[@]}" --write-out '\n%{http_code}' \
		    "$scheme://$addr/healthz" 2>/dev/null) || true
		code=${body##*$'\n'}
		body=${body%$'\n'*}
		[ "$code" = 200 ] && break
	fi
	if [ $SECONDS -ge $deadline ]; then
		# frontd's JSON is plain: no spaces between the tokens.
		msg=$(printf '%s' "$body" | sed -n \
		    's/.*"message":"\([^"]*\)".*/\1/p' | sed 's,\\/,/,g')
		if [ $admin_done = 0 ]; then
			fail brokerd "does not answer on its control socket" \
			    "after ${timeout}s"
		elif [ -z "$addr" ]; then
			fail frontd "has not written $listen_file after ${timeout}s"
		elif [ -z "$code" ] || [ "$code" = 000 ]; then
			fail frontd "does not answer on $addr after ${timeout}s"
		fi
		case $body in
		*'"brokerd":{"ok":false'*) who=brokerd ;;	# frontd cannot reach it
		*) who=sandboxd ;;
		esac
		fail "$who" "is not healthy after ${timeout}s (/healthz $code:" \
		    "${msg:-no reason given})"
	fi
	sleep 0.1
done

# egressd links to sandboxd on its own, in any order; what is left of the
# deadline is its to do so. Linked: sandboxd's socket for it has an
# accepted connection (state 03 in /proc/net/unix, which names an
# accepted socket by its listener's path).
egress_sock=$HOSTGATE_RUN_DIR/egress/sandbox.sock
egress_linked() {
	awk -v p=" $egress_sock" '$6 == "03" &&
	    substr($0, length($0) - length(p) + 1) == p { f = 1 }
	    END { exit !f }' /proc/net/unix
}
egress=""
while :; do
	if egress_linked; then
		egress="the egress proxy is linked: the +allowlist profiles are available"
		break
	fi
	if ! kill -0 "${pid[egressd]}" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
		egress="the egress proxy (egressd) is not linked: the +allowlist profiles fail until it is; its last log line: $(last_line egressd)"
		break
	fi
	sleep 0.1
done

up=1
echo "run: hostgate is up on $scheme://$addr/ ($egress; Ctrl-C stops it)" >&2
if [ $created = 1 ]; then
	echo "run: created user admin, password: $shown" >&2
	echo "run: it is shown only this once; change it with" \
	    "'$B/hgctl user passwd admin'" >&2
fi

# A daemon that dies takes the others down: no half-running hostgate.
# wait -n misses a child that ended before it was called, so the daemons
# are looked at again at least every second.
set +e
gone=""
while [ -z "$gone" ]; do
	sleep 1 &
	tick=$!
	for d in "${daemons[@]}"; do
		kill -0 "${pid[$d]}" 2>/dev/null || { gone=$d; break; }
	done
	[ -n "$gone" ] || wait -n "$tick" "${pid[@]}" 2>/dev/null
	kill "$tick" 2>/dev/null
	wait "$tick" 2>/dev/null
	tick=""
done
wait "${pid[$gone]}"
echo "run: $gone exited (status $?); its last log line:" \
    "$(last_line "$gone")" >&2
stop 1
