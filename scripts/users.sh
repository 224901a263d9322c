#!/bin/sh
# Create hostgate's users when they are missing (idempotent; run as root):
# the four service users the daemons drop to when started as root, and
# hostgate-test, a regular unprivileged user the system tests run the
# daemons as in "user" mode. None has a home or a login shell.
set -eu

if [ "$(id -u)" -ne 0 ]; then
	echo "users.sh: must run as root" >&2
	exit 1
fi

nologin=/usr/sbin/nologin
[ -x "$nologin" ] || nologin=/sbin/nologin
[ -x "$nologin" ] || nologin=/bin/false

# add_user NAME COMMENT [--system]: create NAME and its group unless present.
add_user() {
	name=$1
	comment=$2
	shift 2
	if getent passwd "$name" >/dev/null; then
		return 0
	fi
	useradd "$@" --user-group --no-create-home --home-dir /nonexistent \
	    --shell "$nologin" --comment "$comment" "$name"
	echo "users.sh: created user $name"
}

add_user hostgate-front "hostgate HTTP front (frontd)" --system
add_user hostgate-broker "hostgate broker (brokerd)" --system
add_user hostgate-sandbox "hostgate sandbox spawner (sandboxd)" --system
add_user hostgate-egress "hostgate egress proxy (egressd)" --system
add_user hostgate-test "hostgate system tests"
