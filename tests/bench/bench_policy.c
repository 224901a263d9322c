/*
 * The cost of one policy decision in brokerd, beside one IPC round trip.
 *
 * decision: what brokerd does for a spawn request before it asks sandboxd:
 * find the session of a cookie (SHA-256 and a constant-time compare), check
 * the CSRF token (SHA-256), take a token from the user's spawn bucket, and
 * read the session's execution mode. Measured in-process, in a loop.
 *
 * round trip: one JSON request and its reply between two processes over a
 * SOCK_SEQPACKET socket with common/ipc.c, as between frontd and brokerd.
 *
 * Prints both rates and the share of the decision in one round trip.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../brokerd/brokerd.h"

#define DECISIONS	200000
#define ROUND_TRIPS	20000

static struct event_base	*base;
static int			 trips;

/* The echo side: answers every "ping" with its payload. */
static void
echo_ping(struct ipc_peer *p, struct ipc_msg *m)
{
	ipc_reply(p, m, json_object_new_object(), NULL, 0);
}

static const struct ipc_handler echo_table[] = {
	{ "ping", echo_ping },
	{ NULL, NULL }
};

/* The one message of the round trip, in a table of its own. */
static const struct proto_field ping_fields[] = {
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct proto_msg ping_proto[] = {
	{ "ping", ROLE_FRONTD, ROLE_BROKERD, 0, ping_fields, NULL, "" },
	{ NULL, 0, 0, 0, NULL, NULL, NULL }
};

static void	send_ping(struct ipc_peer *);

/* A reply came: send the next, or stop. */
static void
got_pong(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	if (m == NULL)
		fatalx("no reply");
	if (++trips == ROUND_TRIPS)
		event_base_loopbreak(base);
	else
		send_ping(p);
}

static void
send_ping(struct ipc_peer *p)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("ping"));
	json_object_object_add(o, "auth", json_object_new_string(
	    "a cookie-sized value: 0123456789012345678901234567890123"));
	ipc_request(p, o, NULL, 0, 5000, got_pong, NULL);
}

static void
ready(struct ipc_peer *p)
{
	send_ping(p);
}

/* Round trips per second between two processes. */
static double
bench_ipc(void)
{
	static const struct ipc_peer_cbs cbs = { ready, NULL };
	int	 sv[2];
	pid_t	 pid;
	int64_t	 t0, t1;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0, sv) == -1)
		fatal("socketpair");
	ipc_proto_set(ping_proto);
	if ((pid = fork()) == 0) {
		close(sv[0]);
		base = event_base_new();
		ipc_peer_new(base, sv[1], ROLE_BROKERD, ROLE_FRONTD,
		    echo_table, NULL, NULL);
		event_base_dispatch(base);
		_exit(0);
	}
	close(sv[1]);
	base = event_base_new();
	t0 = now_mono_ms();
	ipc_peer_new(base, sv[0], ROLE_FRONTD, ROLE_BROKERD, NULL, &cbs,
	    NULL);
	event_base_dispatch(base);
	t1 = now_mono_ms();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return ROUND_TRIPS * 1000.0 / (double)(t1 - t0 > 0 ? t1 - t0 : 1);
}

/* Decisions per second of the decision code itself. */
static double
bench_decision(void)
{
	struct rl_table	*rl;
	struct session	*s;
	char		 dir[] = "/tmp/hg-bench-policy-XXXXXX", err[256];
	char		 cookie[64], csrf[64], cmd[128];
	int64_t		 t0, t1, now;
	int		 i, direct = 0;

	if (mkdtemp(dir) == NULL)
		fatal("mkdtemp");
	snprintf(cmd, sizeof(cmd), "%s/%s", dir, STORE_FILE);
	if (store_sqlite_open_path(cmd, err, sizeof(err)) == -1 ||
	    session_init(dir, 3600, err, sizeof(err)) == -1)
		fatalx("%s", err);
	/* A realistic store: 100 sessions, ours among them. */
	for (i = 0; i < 99; i++)
		session_create("someone", cookie, sizeof(cookie), csrf,
		    sizeof(csrf));
	if ((s = session_create("alice", cookie, sizeof(cookie), csrf,
	    sizeof(csrf))) == NULL)
		fatalx("session_create");
	rl = rl_new("bench", 1e9, 1e9, 10000);
	t0 = now_mono_ms();
	for (i = 0; i < DECISIONS; i++) {
		now = now_mono_ms();
		if ((s = session_lookup(cookie)) == NULL ||
		    !session_csrf_ok(s, csrf) ||
		    rl_take(rl, s->user, now) != 0)
			fatalx("decision refused");
		direct += s->direct_until > 0 &&
		    ttl_remaining(s->direct_mono, now) > 0;
	}
	t1 = now_mono_ms();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		log_warnx("cannot remove %s", dir);
	(void)direct;
	return DECISIONS * 1000.0 / (double)(t1 - t0 > 0 ? t1 - t0 : 1);
}

int
main(void)
{
	double	dec, rt;

	log_init("bench_policy", 1);
	log_setlevel(LOG_LVL_WARN);
	signal(SIGPIPE, SIG_IGN);
	dec = bench_decision();
	rt = bench_ipc();
	printf("policy decision (session+csrf+bucket+mode): %.0f /s "
	    "(%.2f us each)\n", dec, 1e6 / dec);
	printf("IPC round trip frontd<->brokerd (SEQPACKET, JSON): %.0f /s "
	    "(%.2f us each)\n", rt, 1e6 / rt);
	printf("ratio: one decision costs %.1f %% of one round trip\n",
	    100.0 * rt / dec);
	return 0;
}
