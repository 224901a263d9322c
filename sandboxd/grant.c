/*
 * Direct-mode deadlines, held by sandboxd itself: brokerd sends each
 * grant's absolute end ("grant" messages, and "deadline_ms" with every
 * direct spawn), and at that instant sandboxd kills every direct spawn of
 * the session, whole cgroups, whether brokerd is up or not. The deadline
 * arrives as wall-clock time (it must mean the same to both daemons and
 * across restarts); the timer runs on the monotonic clock from the moment
 * it arrives, so that a clock step does not move it.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

#define GRANT_MAX	65536	/* live sessions with a deadline */

struct grant {
	TAILQ_ENTRY(grant)	 entry;
	char			 session[33];
	char			 user[40];
	int64_t			 deadline_ms;	/* wall */
	struct event		*ev;
};

static TAILQ_HEAD(, grant) grants = TAILQ_HEAD_INITIALIZER(grants);
static int			 grant_count;
static struct event_base	*grant_base;

/* The entry of a session, or NULL. */
static struct grant *
grant_find(const char *session)
{
	struct grant	*g;

	TAILQ_FOREACH(g, &grants, entry)
		if (strcmp(g->session, session) == 0)
			return g;
	return NULL;
}

/* Drop an entry and its timer. */
static void
grant_free(struct grant *g)
{
	TAILQ_REMOVE(&grants, g, entry);
	grant_count--;
	event_free(g->ev);
	free(g);
}

/* Kill every direct spawn of a session: the table's, then its cgroups. */
static void
grant_kill(const char *session, const char *why)
{
	int	groups, procs;

	groups = spawn_kill_session(session, MODE_DIRECT);
	procs = cgroup_session_kill(session);
	log_info("direct grant of session %.8s %s: killed %d direct spawns, "
	    "%d processes in their cgroups", session, why, groups, procs);
}

/* A deadline is reached. */
static void
grant_expire(evutil_socket_t fd, short ev, void *arg)
{
	struct grant	*g = arg;
	char		 session[33];

	snprintf(session, sizeof(session), "%s", g->session);
	log_ctx_set(NULL, g->user, g->session);
	grant_free(g);
	grant_kill(session, "reached its deadline");
	log_ctx_clear();
}

void
grant_init(struct event_base *base)
{
	grant_base = base;
}

int
grant_set(const char *session, const char *user, int64_t deadline_ms,
    char *err, size_t errsz)
{
	struct grant	*g;
	struct timeval	 tv;
	int64_t		 left;

	if (!str_is_hex(session, 32) || user == NULL ||
	    strlen(user) >= sizeof(g->user) || deadline_ms < 0) {
		snprintf(err, errsz, "a grant needs a session (32 hex digits), "
		    "a user and a deadline_ms of 0 or more");
		return -1;
	}
	g = grant_find(session);
	if (deadline_ms == 0) {
		/* no deadline (HOSTGATE_DIRECT_ON_EXPIRY=keep) */
		if (g != NULL)
			grant_free(g);
		return 0;
	}
	if (g == NULL) {
		if (grant_count >= GRANT_MAX) {
			snprintf(err, errsz, "too many direct grants");
			return -1;
		}
		if ((g = calloc(1, sizeof(*g))) == NULL ||
		    (g->ev = evtimer_new(grant_base, grant_expire, g)) == NULL)
			fatal("grant");
		snprintf(g->session, sizeof(g->session), "%s", session);
		TAILQ_INSERT_TAIL(&grants, g, entry);
		grant_count++;
	}
	snprintf(g->user, sizeof(g->user), "%s", user);
	if (g->deadline_ms != deadline_ms)
		log_debug("direct grant of session %.8s ends at %lld (in %lld "
		    "ms)", session, (long long)deadline_ms,
		    (long long)(deadline_ms - now_wall_ms()));
	g->deadline_ms = deadline_ms;
	if ((left = deadline_ms - now_wall_ms()) < 0)
		left = 0;
	tv.tv_sec = left / 1000;
	tv.tv_usec = (left % 1000) * 1000;
	evtimer_add(g->ev, &tv);
	return 0;
}

int
grant_expired(int64_t deadline_ms)
{
	return deadline_ms > 0 && deadline_ms <= now_wall_ms();
}

void
grant_end(const char *session)
{
	struct grant	*g;

	if (session != NULL && (g = grant_find(session)) != NULL)
		grant_free(g);
}

struct json_object *
grant_json(void)
{
	struct json_object	*arr, *o;
	struct grant		*g;

	arr = json_object_new_array();
	TAILQ_FOREACH(g, &grants, entry) {
		o = json_object_new_object();
		json_object_object_add(o, "session",
		    json_object_new_string(g->session));
		json_object_object_add(o, "user",
		    json_object_new_string(g->user));
		json_object_object_add(o, "deadline_ms",
		    json_object_new_int64(g->deadline_ms));
		json_object_array_add(arr, o);
	}
	return arr;
}
