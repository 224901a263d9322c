/*
 * Execution mode: sandbox, or a temporary direct-mode grant for one admin
 * login session. A grant has a deadline, stored as wall time so that a
 * restart neither loses nor extends it, and kept as monotonic time so that
 * a clock step does not move it. Every spawn asks mode_is_direct() at that
 * instant; nothing caches the mode.
 *
 * With a fleet's store (its grant_claim hook) a grant is the fleet's: made
 * on one host, it reaches the others through session.c's notifications
 * (mode_follow arms their timers at the same wall deadline); ended on one,
 * every host kills its own direct spawns. At expiry every host ends it,
 * and the one whose conditional UPDATE (grant_claim) cleared the stored
 * deadline writes the record.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

#define MODE_WARN_SECS	60	/* mode_expiring this long before the end */
#define MODE_RETRY_SECS	2	/* an expiry the store could not take */

static struct event_base	*mode_base;
static struct config		*mode_conf;
static struct rl_table		*mode_rl_session;
static struct rl_table		*mode_rl_user;

static void	mode_arm(struct session *);
static void	mode_lapse(struct session *, const char *reason, int retry);

/* Whether a session is in direct mode right now. */
int
mode_is_direct(struct session *s)
{
	return s != NULL && s->direct_until > 0 &&
	    now_mono_ms() < s->direct_mono;
}

/* Seconds left of a grant (rounded up), or 0. */
static int64_t
mode_remaining(struct session *s)
{
	if (!mode_is_direct(s))
		return 0;
	return ttl_remaining(s->direct_mono, now_mono_ms());
}

/*
 * The grant's deadline in ISO 8601: the second within which the stored
 * absolute deadline falls, so that every view of one grant shows the same
 * instant (now + the monotonic time left moved with the moment of asking).
 */
static void
mode_expires_at(struct session *s, char when[40])
{
	iso8601(s->direct_until / 1000, when);
}

/* Why direct mode is not available to this identity, or NULL. */
const char *
mode_unavailable(struct ident *id)
{
	if (mode_conf->runtime != RUNTIME_HOST)
		return "direct mode is available only with the host runtime";
	if (id->token != NULL)
		return "agent tokens cannot change the execution mode";
	if (!id->user->admin)
		return "direct mode needs an admin session";
	return NULL;
}

/* The execution_mode object (docs/api.md) of a request's session. */
struct json_object *
mode_json(struct ident *id)
{
	struct json_object	*o;
	struct session		*s = id->session;
	const char		*reason = mode_unavailable(id);
	char			 when[40];

	o = json_object_new_object();
	json_object_object_add(o, "mode",
	    json_object_new_string(mode_is_direct(s) ? "direct" : "sandbox"));
	json_object_object_add(o, "default", json_object_new_string(
	    mode_conf->mode_default == MODE_DIRECT ? "direct" : "sandbox"));
	json_object_object_add(o, "available",
	    json_object_new_boolean(reason == NULL));
	json_object_object_add(o, "reason",
	    reason ? json_object_new_string(reason) : NULL);
	if (mode_is_direct(s)) {
		mode_expires_at(s, when);
		json_object_object_add(o, "expires_at",
		    json_object_new_string(when));
		json_object_object_add(o, "remaining_seconds",
		    json_object_new_int64(mode_remaining(s)));
	} else {
		json_object_object_add(o, "expires_at", NULL);
		json_object_object_add(o, "remaining_seconds", NULL);
	}
	json_object_object_add(o, "ttl_seconds",
	    json_object_new_int(mode_conf->direct_ttl));
	return o;
}

/* The execution_mode object of a session alone (events, admin views). */
static struct json_object *
mode_session_json(struct session *s)
{
	struct ident	id;

	memset(&id, 0, sizeof(id));
	id.session = s;
	id.user = auth_find(s->user);
	if (id.user == NULL)
		return json_object_new_object();
	return mode_json(&id);
}

/* Drop a session's timers. */
static void
mode_disarm(struct session *s)
{
	if (s->ev_expiring != NULL) {
		event_free(s->ev_expiring);
		s->ev_expiring = NULL;
	}
	if (s->ev_expire != NULL) {
		event_free(s->ev_expire);
		s->ev_expire = NULL;
	}
}

/*
 * End a grant on this host, once its end is stored (or was, elsewhere): the
 * session is sandboxed again, its direct-mode processes here are terminated
 * (HOSTGATE_DIRECT_ON_EXPIRY=terminate) or left, the end is audited when
 * record (the host that ended it), and announced to this host's clients.
 */
static void
mode_end(struct session *s, const char *reason, const char *by, int record)
{
	struct json_object	*d;
	int			 terminate;

	mode_disarm(s);
	s->direct_until = 0;
	s->direct_mono = 0;
	terminate = mode_conf->on_expiry == EXPIRY_TERMINATE;
	if (terminate)
		sandbox_kill_session(s->id);
	if (record) {
		d = json_object_new_object();
		json_object_object_add(d, "reason",
		    json_object_new_string(reason));
		json_object_object_add(d, "processes", json_object_new_string(
		    terminate ? "terminated" : "kept"));
		if (by != NULL)
			json_object_object_add(d, "by",
			    json_object_new_string(by));
		audit_append(strcmp(reason, "expired") == 0 ||
		    strcmp(reason, "restart") == 0 ? "mode_expired" :
		    "mode_reverted", s->user, s->id, 1, reason, d, 1);
		log_info("session %.8s of %s: direct mode ended (%s)", s->id,
		    s->user, reason);
	} else
		log_info("session %.8s of %s: direct mode ended on another "
		    "host (%s)", s->id, s->user, reason);
	d = json_object_new_object();
	json_object_object_add(d, "reason", json_object_new_string(reason));
	json_object_object_add(d, "execution_mode", mode_session_json(s));
	events_emit(s->id, s->user, "mode_reverted", d);
}

/*
 * End a grant: stored, then ended here (mode_end); with a PostgreSQL store
 * the other hosts end it on the notification. reason: expired, manual,
 * admin, restart, logout, session_ended.
 */
void
mode_revert(struct session *s, const char *reason, const char *by)
{
	if (s->direct_until == 0)
		return;
	mode_disarm(s);
	s->direct_until = 0;
	s->direct_mono = 0;
	if (session_save(s) == -1)
		log_warnx("session %.8s of %s: the end of direct mode could "
		    "not be stored", s->id, s->user);
	mode_end(s, reason, by, 1);
}

/*
 * A grant stored elsewhere (made or renewed on another host, or found
 * changed): arm this host's timers at the same absolute deadline and tell
 * sandboxd; a deadline already past ends it as at expiry.
 */
static void
mode_follow(struct session *s)
{
	mode_disarm(s);
	if (mode_conf->runtime != RUNTIME_HOST) {
		s->direct_mono = 0;	/* never direct on this host */
		return;
	}
	if (ttl_resume(s->direct_until, now_wall_ms(), now_mono_ms(),
	    &s->direct_mono) == -1) {
		s->direct_mono = 0;
		mode_lapse(s, "expired", 1);
		return;
	}
	mode_arm(s);
	sandbox_grant(s);
	log_info("session %.8s of %s: direct mode from another host, %lld s "
	    "left", s->id, s->user, (long long)mode_remaining(s));
	events_emit(s->id, s->user, "mode_changed", mode_session_json(s));
}

/*
 * A grant's deadline passed, or its session ends, with a PostgreSQL store.
 * The host whose UPDATE clears the stored deadline writes the record; the
 * others end it here only. Renewed meanwhile elsewhere: it goes on. On a
 * store error the direct spawns here end all the same, and with retry the
 * record is tried again in MODE_RETRY_SECS.
 */
static void
mode_lapse(struct session *s, const char *reason, int retry)
{
	struct timeval	tv;
	int64_t		until = s->direct_until, stored;
	int		claimed;

	if ((claimed = store->grant_claim(s->id, until)) == 1) {
		mode_end(s, reason, NULL, 1);
		return;
	}
	if (claimed == 0 && (stored = store->grant_stored(s->id)) != -1) {
		if (stored > until) {
			s->direct_until = stored;
			mode_follow(s);
		} else
			mode_end(s, reason, NULL, 0);
		return;
	}
	log_warnx("session %.8s of %s: the end of direct mode could not be "
	    "stored: %s", s->id, s->user, store->error());
	if (!retry) {
		mode_end(s, reason, NULL, 0);
		return;
	}
	s->direct_mono = 0;
	if (mode_conf->on_expiry == EXPIRY_TERMINATE)
		sandbox_kill_session(s->id);
	if (s->ev_expire == NULL)
		mode_arm(s);
	evtimer_del(s->ev_expiring);
	tv.tv_sec = MODE_RETRY_SECS;
	tv.tv_usec = 0;
	evtimer_add(s->ev_expire, &tv);
}

/*
 * session.c applied a change made on another host: a new or renewed
 * deadline is followed here; one gone (reverted, expired elsewhere) ends
 * the grant here, without storing or recording it again.
 */
static void
mode_session_changed(struct session *s, int64_t old_until)
{
	if (s->direct_until == old_until)
		return;
	if (s->direct_until > 0) {
		mode_follow(s);
		return;
	}
	mode_end(s, now_wall_ms() >= old_until ? "expired" : "other_host",
	    NULL, 0);
}

/* 60 s before the end (or at once for a shorter grant). */
static void
mode_expiring(evutil_socket_t fd, short ev, void *arg)
{
	struct session		*s = arg;
	struct json_object	*d;
	char			 when[40];

	if (!mode_is_direct(s))
		return;
	mode_expires_at(s, when);
	d = json_object_new_object();
	json_object_object_add(d, "expires_at", json_object_new_string(when));
	json_object_object_add(d, "remaining_seconds",
	    json_object_new_int64(mode_remaining(s)));
	events_emit(s->id, s->user, "mode_expiring", d);
}

/* The deadline has come (or the retry of a record the store refused). */
static void
mode_expire(evutil_socket_t fd, short ev, void *arg)
{
	struct session	*s = arg;

	if (s->direct_until == 0)
		return;
	if (store->grant_claim != NULL)
		mode_lapse(s, "expired", 1);
	else
		mode_revert(s, "expired", NULL);
}

/* Arm the timers of a session's grant from its monotonic deadline. */
static void
mode_arm(struct session *s)
{
	struct timeval	tv;
	int64_t		now = now_mono_ms(), warn;
	int64_t		left = s->direct_mono > now ? s->direct_mono - now : 0;

	mode_disarm(s);
	s->ev_expire = evtimer_new(mode_base, mode_expire, s);
	s->ev_expiring = evtimer_new(mode_base, mode_expiring, s);
	if (s->ev_expire == NULL || s->ev_expiring == NULL)
		fatalx("%s: evtimer_new", __func__);
	tv.tv_sec = left / 1000;
	tv.tv_usec = (left % 1000) * 1000;
	evtimer_add(s->ev_expire, &tv);
	warn = ttl_warn_in(s->direct_mono, now, MODE_WARN_SECS);
	tv.tv_sec = warn / 1000;
	tv.tv_usec = (warn % 1000) * 1000;
	evtimer_add(s->ev_expiring, &tv);
}

/*
 * Grant (or renew) direct mode for a session. The grant counts only once
 * it is stored and its audit record is on disk; else it is refused.
 */
static int
mode_grant(struct session *s, const char *why, char *err, size_t errsz)
{
	struct json_object	*d;
	int64_t			 old_until = s->direct_until;
	int64_t			 old_mono = s->direct_mono;
	int			 renew = mode_is_direct(s);

	ttl_grant(now_wall_ms(), now_mono_ms(), mode_conf->direct_ttl,
	    &s->direct_until, &s->direct_mono);
	d = json_object_new_object();
	json_object_object_add(d, "ttl_seconds",
	    json_object_new_int(mode_conf->direct_ttl));
	json_object_object_add(d, "renewed", json_object_new_boolean(renew));
	if (session_save(s) == -1 ||
	    audit_append("mode_granted", s->user, s->id, 1, why, d, 1) < 0) {
		s->direct_until = old_until;
		s->direct_mono = old_mono;
		session_save(s);
		snprintf(err, errsz, "the grant could not be recorded");
		return -1;
	}
	mode_arm(s);
	sandbox_grant(s);
	counters.grants++;
	log_info("session %.8s of %s: direct mode for %d s (%s)", s->id,
	    s->user, mode_conf->direct_ttl, why);
	events_emit(s->id, s->user, "mode_changed", mode_session_json(s));
	return 0;
}

/* GET /api/execution-mode */
void
mode_get(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	ipc_reply(p, m, mode_json(id), NULL, 0);
}

/* POST /api/execution-mode {"mode": "direct" | "sandbox"} */
void
mode_set(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*d;
	const char		*want, *why, *code;
	char			 err[512];
	int			 wait;
	int64_t			 now = now_mono_ms();

	/* Required, direct or sandbox: the protocol table checked. */
	want = json_str(m->obj, "mode");
	d = json_object_new_object();
	json_object_object_add(d, "mode", json_object_new_string(want));
	audit_append("mode_requested", id->user->name,
	    id->session ? id->session->id : NULL, 1, NULL, d, 0);

	/* Tokens never, whoever their user; then runtime, then role. */
	why = NULL;
	code = ERR_FORBIDDEN;
	if (id->token != NULL)
		why = "agent tokens cannot change the execution mode";
	else if (strcmp(want, "direct") == 0 &&
	    (why = mode_unavailable(id)) != NULL &&
	    mode_conf->runtime != RUNTIME_HOST)
		code = ERR_CONFLICT;
	if (why != NULL) {
		counters.refusals++;
		audit_append("mode_refused", id->user->name,
		    id->session ? id->session->id : NULL, 0, why, NULL, 0);
		log_info("direct mode refused to %s: %s", id->user->name, why);
		ipc_reply_error(p, m, code, "%s", why);
		return;
	}
	/*
	 * No record, no change: the store (or the audit log) unusable is a
	 * 503 with its reason, before buckets that could not be read.
	 */
	if (audit_ready(err, sizeof(err)) == -1) {
		log_warnx("mode change of %s refused: %s", id->user->name, err);
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "%s", err);
		return;
	}
	if ((wait = rl_take(mode_rl_session, id->session->id, now)) > 0 ||
	    (wait = rl_take(mode_rl_user, id->user->name, now)) > 0) {
		audit_append("mode_refused", id->user->name, id->session->id, 0,
		    "rate limited", NULL, 0);
		ipc_reply_retry(p, m, wait, "too many execution-mode changes; "
		    "try again later");
		return;
	}
	if (strcmp(want, "sandbox") == 0)
		mode_revert(id->session, "manual", id->user->name);
	else if (mode_grant(id->session, mode_is_direct(id->session) ?
	    "renewed by its admin" : "requested by its admin", err,
	    sizeof(err)) == -1) {
		/* The grant could not be stored or recorded: retry later. */
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "%s", err);
		return;
	}
	ipc_reply(p, m, mode_json(id), NULL, 0);
}

/*
 * A new login session of an admin starts in direct mode when that is the
 * configured default (HOST_EXECUTION_MODE_DEFAULT=direct), with the TTL.
 */
void
mode_login(struct session *s, struct user *u)
{
	char	err[128];

	if (mode_conf->mode_default != MODE_DIRECT || !u->admin ||
	    mode_conf->runtime != RUNTIME_HOST)
		return;
	mode_grant(s, "HOST_EXECUTION_MODE_DEFAULT=direct", err, sizeof(err));
}

/*
 * A session is freed (logout, expiry, revoked, its user deleted or their
 * password changed): its grant ends with it, and its timers go.
 */
static void
mode_session_gone(struct session *s)
{
	/*
	 * With a PostgreSQL store, removed here the row is still there and
	 * this host records the end; removed elsewhere it is gone: ended here
	 * only.
	 */
	if (s->direct_until > 0 && store->grant_claim != NULL)
		mode_end(s, "session_ended", NULL, !session_remote() &&
		    store->grant_claim(s->id, s->direct_until) == 1);
	else if (s->direct_until > 0)
		mode_revert(s, "session_ended", NULL);
	mode_disarm(s);
	/* Its egress additions end with it too (egress.c). */
	egress_session_gone(s);
}

/*
 * Re-arm the stored grants: the time left is the stored deadline minus
 * now. A grant that ran out while brokerd was down ends now ("restart").
 */
void
mode_init(struct event_base *base, struct config *conf)
{
	struct session	*s, *next;

	mode_base = base;
	mode_conf = conf;
	mode_rl_session = rl_new("mode_session", conf->mode_rate,
	    conf->mode_rate, 10000);
	mode_rl_user = rl_new("mode_user", conf->mode_rate, conf->mode_rate,
	    10000);
	session_on_remove(mode_session_gone);
	session_on_change(mode_session_changed);
	for (s = session_first(); s != NULL; s = next) {
		next = session_next(s);
		if (s->direct_until == 0)
			continue;
		/* The fleet's grant: another host may hold it; one records. */
		if (store->grant_claim != NULL &&
		    conf->runtime != RUNTIME_HOST) {
			s->direct_mono = 0;	/* never direct on this host */
			continue;
		}
		if (store->grant_claim != NULL && ttl_resume(s->direct_until,
		    now_wall_ms(), now_mono_ms(), &s->direct_mono) == -1) {
			mode_lapse(s, "restart", 0);
			continue;
		}
		if (ttl_resume(s->direct_until, now_wall_ms(), now_mono_ms(),
		    &s->direct_mono) == -1 || conf->runtime != RUNTIME_HOST) {
			mode_revert(s, "restart", NULL);
			continue;
		}
		mode_arm(s);
		log_info("session %.8s of %s: direct mode resumed, %lld s left",
		    s->id, s->user, (long long)mode_remaining(s));
	}
}

/* The grant of a session for the admin view: mode, deadline, time left. */
void
mode_describe(struct session *s, struct json_object *o)
{
	char	when[40];

	json_object_object_add(o, "mode",
	    json_object_new_string(mode_is_direct(s) ? "direct" : "sandbox"));
	if (mode_is_direct(s)) {
		mode_expires_at(s, when);
		json_object_object_add(o, "expires_at",
		    json_object_new_string(when));
		json_object_object_add(o, "remaining_seconds",
		    json_object_new_int64(mode_remaining(s)));
	} else {
		json_object_object_add(o, "expires_at", NULL);
		json_object_object_add(o, "remaining_seconds", NULL);
	}
}
