#!/usr/bin/env bash
# make fleet / make fleet-stop: a hostgate fleet on one machine
# (docs/fleet.md). `scripts/fleet.sh start` starts, in the background:
#   - PostgreSQL from Debian's package (/usr/lib/postgresql/15/bin), its
#     own cluster in FLEET_DIR/pg (initdb as the postgres user when root),
#     on 127.0.0.1:HG_FLEET_PG_PORT (55432) only, TLS with a CA made here,
#     scram-sha-256, the role and database hostgate; `hgctl store migrate`;
#   - three hostgates h1, h2 and h3 (scripts/run.sh each, as `make run`
#     starts one), each with its own state and run directories and port,
#     on that store, with one audit.key for the three, each with
#     HOSTGATE_PUBLIC_URL HAProxy's URL (the Origin browsers send);
#   - HAProxy (Debian's) on 127.0.0.1:HG_FLEET_PORT (8080) in front, with
#     etc/haproxy.cfg.in's routing, checked with `haproxy -c` first.
# It prints the URL and, at the first start, the admin's password.
# For tests: HG_FLEET_BIND=fd@N, HAProxy on a socket the caller bound
# (HG_FLEET_PORT its port) and left open as descriptor N;
# HG_FLEET_PG_PORT=0, PostgreSQL on its unix socket alone (no TCP, hence
# no TLS).
# `scripts/fleet.sh stop` stops all of it; `status` says what runs.
# FLEET_DIR is HG_FLEET_DIR, by default var/fleet in the checkout.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
B=${HG_BUILD:-build}
case $B in /*) ;; *) B=$REPO/$B ;; esac
FLEET=${HG_FLEET_DIR:-$REPO/var/fleet}
PORT=${HG_FLEET_PORT:-8080}
PG_PORT=${HG_FLEET_PG_PORT:-55432}
BIND=${HG_FLEET_BIND:-127.0.0.1:$PORT}
HOSTS=${HG_FLEET_HOSTS:-"h1 h2 h3"}
PUBLIC_URL=${HOSTGATE_PUBLIC_URL:-http://127.0.0.1:$PORT}
PG_BIN=/usr/lib/postgresql/15/bin
HAPROXY=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH command -v haproxy || true)
timeout=${HG_RUN_TIMEOUT:-60}
PG=$FLEET/pg
CREATED=""

say() { echo "fleet: $*" >&2; }
die() { say "$*"; exit 1; }

for v in "$PORT" "$PG_PORT"; do
	case $v in ''|*[!0-9]*) die "not a port number: $v" ;; esac
done
case $BIND in
fd@[0-9]|fd@[0-9][0-9]|*:[0-9]*) ;;
*) die "HG_FLEET_BIND: not ADDR:PORT or fd@N: $BIND" ;;
esac

# port_taken: whether something other than this fleet's HAProxy listens
# on HAProxy's port (make run's frontd, by default on 8080 too).
port_taken() {
	case $BIND in fd@*) return 1 ;; esac
	pidfile_alive "$FLEET/haproxy.pid" && return 1
	[ -n "$(ss -Hltn "sport = :$PORT" 2>/dev/null)" ]
}

# HG_FLEET_PG_PORT=0: the unix socket alone; its name still has a port.
PG_SOCKET_ONLY=0
if [ "$PG_PORT" = 0 ]; then
	PG_SOCKET_ONLY=1
	PG_PORT=5432
fi

# asowner CMD...: CMD as the owner of the PostgreSQL cluster (postgres
# when root: initdb and postgres refuse to run as root).
asowner() {
	if [ "$(id -u)" = 0 ]; then
		setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
	else
		"$@"
	fi
}

# psql_super SQL: SQL as the cluster's superuser, over its unix socket.
psql_super() {
	asowner "$PG_BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$PG/sock" \
	    -p "$PG_PORT" -U postgres -d postgres -c "$1"
}

pg_running() {
	asowner "$PG_BIN/pg_ctl" -D "$PG/data" status >/dev/null 2>&1
}

# pidfile_alive FILE: the process FILE names runs.
pidfile_alive() {
	[ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

# pg_setup: the cluster, its certificates and the hostgate role, once.
pg_setup() {
	[ -x "$PG_BIN/initdb" ] || die "PostgreSQL 15 is missing" \
	    "(apt-get install postgresql; scripts/deps.sh --install fleet does)"
	[ -d "$PG/data" ] && return 0
	say "creating the PostgreSQL cluster in $PG"
	mkdir -p -m 0755 "$PG" "$PG/sock"
	local owner=$(id -un)
	[ "$(id -u)" = 0 ] && owner=postgres
	chown "$owner": "$PG" "$PG/sock"
	# A CA of the fleet's own, and the server's certificate for
	# 127.0.0.1 signed by it: brokerd checks it (sslmode=verify-full).
	local t
	t=$(mktemp -d)
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	    -nodes -keyout "$t/ca.key" -out "$PG/ca.crt" -days 3650 \
	    -subj "/CN=hostgate fleet CA" 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
	    -keyout "$PG/server.key" -out "$t/server.csr" \
	    -subj "/CN=127.0.0.1" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$t/ext"
	openssl x509 -req -in "$t/server.csr" -CA "$PG/ca.crt" \
	    -CAkey "$t/ca.key" -CAcreateserial -CAserial "$t/ca.srl" -out "$PG/server.crt" \
	    -days 3650 -extfile "$t/ext" 2>/dev/null
	rm -rf "$t"		# the CA's key: nothing else is ever signed
	chmod 0644 "$PG/ca.crt" "$PG/server.crt"
	chmod 0600 "$PG/server.key"
	chown "$owner": "$PG/server.key" "$PG/server.crt"
	asowner "$PG_BIN/initdb" -D "$PG/data" -U postgres -E UTF8 \
	    --locale=C.UTF-8 --auth-local=peer --auth-host=reject >/dev/null
	local listen=127.0.0.1 sockmode=0700
	if [ $PG_SOCKET_ONLY = 1 ]; then
		listen="" sockmode=0777	# brokerd comes over it, with its password
	fi
	cat >>"$PG/data/postgresql.conf" <<EOF

# hostgate fleet (scripts/fleet.sh; docs/fleet.md explains each)
listen_addresses = '$listen'
port = $PG_PORT
unix_socket_directories = '$PG/sock'
unix_socket_permissions = $sockmode
ssl = on
ssl_cert_file = '$PG/server.crt'
ssl_key_file = '$PG/server.key'
ssl_min_protocol_version = 'TLSv1.2'
password_encryption = 'scram-sha-256'
max_connections = 50
synchronous_commit = on
fsync = on
log_destination = 'stderr'
logging_collector = off
log_connections = off
EOF
	# The superuser only over the socket, as postgres (peer); hostgate
	# only over TLS with its password.
	cat >"$PG/data/pg_hba.conf" <<EOF
# TYPE   DATABASE  USER      ADDRESS       METHOD
local    all       postgres                peer
hostssl  hostgate  hostgate  127.0.0.1/32  scram-sha-256
EOF
	if [ $PG_SOCKET_ONLY = 1 ]; then
		echo "local    hostgate  hostgate                scram-sha-256" \
		    >>"$PG/data/pg_hba.conf"
	fi
	chown "$owner": "$PG/data/pg_hba.conf"
	pg_start
	local pw
	pw=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
	psql_super "CREATE ROLE hostgate LOGIN PASSWORD '$pw'" >/dev/null
	psql_super "CREATE DATABASE hostgate OWNER hostgate" >/dev/null
	local url="postgresql://hostgate:$pw@127.0.0.1:$PG_PORT/hostgate?sslmode=verify-full&sslrootcert=$PG/ca.crt&connect_timeout=5"
	if [ $PG_SOCKET_ONLY = 1 ]; then
		url="postgresql://hostgate:$pw@/hostgate?host=$PG/sock&port=$PG_PORT&connect_timeout=5"
	fi
	(umask 077 && printf '%s\n' "$url" >"$FLEET/store.url")
}

pg_start() {
	pg_running && return 0
	asowner "$PG_BIN/pg_ctl" -D "$PG/data" -l "$PG/postgres.log" -w \
	    -t "$timeout" start >/dev/null ||
		die "PostgreSQL did not start; its log: $(tail -n 3 "$PG/postgres.log")"
}

# host_dirs ID: the host's state directory, made as brokerd wants it,
# with the fleet's audit key in it.
host_dirs() {
	local d=$FLEET/$1 owner
	mkdir -p -m 0755 "$d" "$d/run"
	if [ "$(id -u)" = 0 ]; then
		owner=hostgate-broker
		[ -d "$d/state" ] || mkdir -m 0711 "$d/state"
	else
		owner=$(id -un)
		[ -d "$d/state" ] || mkdir -m 0700 "$d/state"
	fi
	if [ ! -e "$d/state/audit.key" ]; then
		install -m 0600 -o "$owner" "$FLEET/audit.key" "$d/state/audit.key"
	fi
	chown "$owner": "$d/state"
}

# host_start ID: one hostgate through scripts/run.sh, in the background;
# waits for its up line (or its end).
host_start() {
	local id=$1 d=$FLEET/$1
	if pidfile_alive "$d/run.pid"; then
		say "$id already runs (pid $(cat "$d/run.pid"))"
		return 0
	fi
	: >"$d/run.log"
	(
		export HOSTGATE_HOST_ID=$id
		export HOSTGATE_STORE=$STORE
		export HOSTGATE_STATE_DIR=$d/state
		export HOSTGATE_RUN_DIR=$d/run
		export HOSTGATE_LISTEN=127.0.0.1:0
		export HOSTGATE_TRUSTED_PROXIES=127.0.0.1/32
		# The address browsers use: HAProxy's (its origin opens
		# terminals on every host).
		export HOSTGATE_PUBLIC_URL=$PUBLIC_URL
		export HOSTGATE_ADMIN_PASSWORD=${HOSTGATE_ADMIN_PASSWORD:-}
		export HG_BUILD=$B
		[ -n "$HOSTGATE_ADMIN_PASSWORD" ] || unset HOSTGATE_ADMIN_PASSWORD
		case $BIND in	# HAProxy's socket is not the hosts' to hold
		fd@*) eval "exec ${BIND#fd@}>&-" ;;
		esac
		exec setsid scripts/run.sh </dev/null >>"$d/run.log" 2>&1
	) &
	echo $! >"$d/run.pid"
	local deadline=$((SECONDS + timeout + 5))
	while :; do
		if grep -q '^run: hostgate is up' "$d/run.log"; then
			break
		fi
		if ! kill -0 "$(cat "$d/run.pid")" 2>/dev/null; then
			grep '^run: ' "$d/run.log" >&2 || tail -n 5 "$d/run.log" >&2
			die "$id did not start (its log: $d/run.log)"
		fi
		[ $SECONDS -lt $deadline ] || die "$id is not up after ${timeout}s ($d/run.log)"
		sleep 0.2
	done
	local made
	made=$(sed -n 's/^run: \(created user admin, password: .*\)/\1/p' \
	    "$d/run.log")
	if [ -n "$made" ]; then
		(umask 077 && printf '%s\n' "$made" >"$FLEET/admin.txt")
		CREATED=$made
	fi
	say "$id is up on $(cat "$d/run/frontd.listen")"
}

# haproxy_start: the configuration from the template, checked, then
# HAProxy as a daemon.
haproxy_start() {
	[ -n "$HAPROXY" ] || die "haproxy is missing (apt-get install haproxy;" \
	    "scripts/deps.sh --install fleet does)"
	local cfg=$FLEET/haproxy.cfg routes="" servers="" id addr glob=""
	local homes=""
	if pidfile_alive "$FLEET/haproxy.pid"; then
		kill "$(cat "$FLEET/haproxy.pid")" 2>/dev/null || true
	fi
	for id in $HOSTS; do
		addr=$(cat "$FLEET/$id/run/frontd.listen")
		routes+=$'\t'"acl to_$id path_beg /api/terminals/$id."$'\n'
		routes+=$'\t'"acl to_$id req.hdr(Mcp-Session-Id) -m beg $id."$'\n'
		routes+=$'\t'"use-server $id if to_$id"$'\n'
		# a token names its user's home host: after the spawn routes
		homes+=$'\t'"acl home_$id req.hdr(Authorization) -i -m beg"
		homes+=" \"Bearer hgt_$id.\""$'\n'
		homes+=$'\t'"use-server $id if home_$id"$'\n'
		servers+=$'\t'"server $id $addr cookie $id"$'\n'
	done
	routes+=$homes
	if [ "$(id -u)" = 0 ] && id haproxy >/dev/null 2>&1; then
		glob=$'\tuser haproxy\n\tgroup haproxy'
	fi
	ROUTES=$routes SERVERS=$servers GLOB=$glob awk \
	    -v bind="$BIND" -v stats="$FLEET/haproxy.stats" '
	    /^@ROUTES@$/ { printf "%s", ENVIRON["ROUTES"]; next }
	    /^@SERVERS@$/ { printf "%s", ENVIRON["SERVERS"]; next }
	    /^@GLOBAL@$/ { if (ENVIRON["GLOB"] != "") print ENVIRON["GLOB"]; next }
	    { gsub(/@BIND@/, bind); gsub(/@STATS_SOCKET@/, stats);
	      gsub(/@CHECK_INTER@/, "1s"); print }' \
	    etc/haproxy.cfg.in >"$cfg"
	"$HAPROXY" -c -q -f "$cfg" || die "haproxy -c refused $cfg"
	if ! "$HAPROXY" -D -p "$FLEET/haproxy.pid" -f "$cfg" \
	    >>"$FLEET/haproxy.log" 2>&1; then
		grep -q "cannot bind socket" "$FLEET/haproxy.log" &&
			die "HAProxy cannot listen on $BIND: choose another" \
			    "port with HG_FLEET_PORT ($(tail -n 1 "$FLEET/haproxy.log"))"
		die "haproxy did not start: $(tail -n 3 "$FLEET/haproxy.log")"
	fi
	echo "http://127.0.0.1:$PORT/" >"$FLEET/url"
	# Up once it answers /healthz through a host.
	local deadline=$((SECONDS + timeout)) code=""
	while :; do
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 \
		    "http://127.0.0.1:$PORT/healthz" || true)
		[ "$code" = 200 ] && break
		[ $SECONDS -lt $deadline ] ||
			die "http://127.0.0.1:$PORT/healthz answers $code"
		sleep 0.2
	done
}

start() {
	[ -x "$B/brokerd" ] || die "$B/brokerd is not built (run make)"
	mkdir -p -m 0755 "$FLEET"
	if [ ! -e "$FLEET/audit.key" ]; then
		(umask 077 && head -c 32 /dev/urandom >"$FLEET/audit.key")
	fi
	pg_setup
	pg_start
	STORE=$(cat "$FLEET/store.url")
	HOSTGATE_STORE=$STORE HOSTGATE_STATE_DIR=$FLEET/h1/state \
	    HOSTGATE_RUN_DIR=$FLEET/h1/run "$B/hgctl" store migrate >&2 ||
		die "hgctl store migrate failed"
	for id in $HOSTS; do
		host_dirs "$id"
	done
	for id in $HOSTS; do
		host_start "$id"
	done
	haproxy_start
	say "the fleet is up: http://127.0.0.1:$PORT/ (HAProxy over $HOSTS;" \
	    "'make fleet-stop' stops it)"
	if [ -n "$CREATED" ]; then
		say "$CREATED (also in $FLEET/admin.txt, mode 0600: remove it" \
		    "once noted)"
	elif [ -s "$FLEET/admin.txt" ]; then
		say "the admin made at the first start: $FLEET/admin.txt"
	else
		say "log in as an existing user (the admin was made at the first start)"
	fi
	say "logs: $FLEET/HOST/run.log, $FLEET/haproxy.log, $PG/postgres.log"
}

stop() {
	local id pid
	if pidfile_alive "$FLEET/haproxy.pid"; then
		kill "$(cat "$FLEET/haproxy.pid")" 2>/dev/null || true
		say "haproxy stopped"
	fi
	rm -f "$FLEET/haproxy.pid" "$FLEET/url"
	for id in $HOSTS; do
		if pidfile_alive "$FLEET/$id/run.pid"; then
			pid=$(cat "$FLEET/$id/run.pid")
			kill -TERM "$pid" 2>/dev/null || true
			while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
			say "$id stopped"
		fi
		rm -f "$FLEET/$id/run.pid"
	done
	if [ -d "$PG/data" ] && pg_running; then
		asowner "$PG_BIN/pg_ctl" -D "$PG/data" -m fast -w stop >/dev/null
		say "PostgreSQL stopped"
	fi
}

status() {
	local id rc=0
	if [ -d "$PG/data" ] && pg_running; then
		say "PostgreSQL: running ($(sed 's/:[^:@/]*@/:***@/' "$FLEET/store.url"))"
	else
		say "PostgreSQL: stopped"; rc=1
	fi
	for id in $HOSTS; do
		if pidfile_alive "$FLEET/$id/run.pid"; then
			say "$id: running on $(cat "$FLEET/$id/run/frontd.listen" 2>/dev/null)"
		else
			say "$id: stopped"; rc=1
		fi
	done
	if pidfile_alive "$FLEET/haproxy.pid"; then
		say "haproxy: running on $(cat "$FLEET/url")"
	else
		say "haproxy: stopped"; rc=1
	fi
	return $rc
}

case ${1:-start} in
start)
	# Before anything starts (nothing to stop then).
	if port_taken; then
		die "port $PORT is taken (by make run?): HAProxy cannot" \
		    "listen there; choose another with HG_FLEET_PORT, e.g." \
		    "make fleet HG_FLEET_PORT=8090"
	fi
	trap 'rc=$?; [ $rc = 0 ] || { say "stopping what started"; stop; }' EXIT
	start
	trap - EXIT ;;
stop)	stop ;;
status)	status ;;
*)	die "usage: $0 [start|stop|status]" ;;
esac
