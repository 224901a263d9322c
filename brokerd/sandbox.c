/*
 * brokerd's link to sandboxd: the only peer that spawns. brokerd connects
 * (and reconnects with backoff) and keeps the backend state and the
 * containment sandboxd last reported, so that a status request needs no
 * round trip. It tells sandboxd of every direct-mode grant (its deadline),
 * of every grant's end and of every deleted user, and asks it for a
 * user's usage, which it keeps a second at most per user (sandboxd reads
 * cgroup files for it) so that a status request needs no round trip either.
 */
#include <sys/types.h>

#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

#define SANDBOX_HEALTH_MS	800	/* frontd gives up after a second */
#define SANDBOX_USAGE_USERS	256	/* users whose usage is kept */

/* A health request of frontd waiting for sandboxd. */
struct sandbox_wait {
	struct ipc_peer		*front;		/* NULL once frontd has gone */
	int64_t			 id;
	TAILQ_ENTRY(sandbox_wait) entry;
};
static TAILQ_HEAD(, sandbox_wait) sandbox_waits =
    TAILQ_HEAD_INITIALIZER(sandbox_waits);

static struct ipc_link		*sandbox_link;
static struct config		*sandbox_conf;
/* Sessions whose direct processes await a kill until sandboxd is back. */
#define SANDBOX_PENDING	64
static char			 sandbox_pending[SANDBOX_PENDING][33];
static int			 sandbox_npending;
/* Deleted users whose processes await a kill until sandboxd is back. */
static char			 sandbox_pending_users[SANDBOX_PENDING][40];
static int			 sandbox_npending_users;
static struct json_object	*sandbox_backend;	/* last report */
static struct json_object	*sandbox_containment;	/* last report */
static struct json_object	*sandbox_backend_text;	/* printed once */
static struct json_object	*sandbox_containment_text;
static int64_t			 sandbox_health_at;	/* mono ms, last reply */
static int			 sandbox_health_asking;	/* a refresh is out */

/* A status request waiting for a user's usage. */
struct sandbox_usage_wait {
	sandbox_usage_cb		 cb;
	void				*arg;
	TAILQ_ENTRY(sandbox_usage_wait)	 entry;
};

/* The usage sandboxd last reported for one user. */
struct sandbox_usage {
	char				 user[USER_NAME_MAX + 1];
	struct json_object		*usage;	/* NULL: none kept */
	int64_t				 at;	/* monotonic ms of its answer */
	int				 asking; /* a request is out */
	TAILQ_HEAD(, sandbox_usage_wait) waits;
	TAILQ_ENTRY(sandbox_usage)	 entry;
};
static TAILQ_HEAD(, sandbox_usage) sandbox_usages =
    TAILQ_HEAD_INITIALIZER(sandbox_usages);
static int			 sandbox_nusages;

static void	sandbox_ready(struct ipc_peer *);
static void	sandbox_usage_forget(void);
static void	sandbox_closed(struct ipc_peer *);

static void	sandbox_proc_exited(struct ipc_peer *, struct ipc_msg *);

const struct ipc_handler sandbox_handlers[] = {
	{ MSG_PROC_EXITED, sandbox_proc_exited },
	/* egressd's connection log, relayed: audit records (egress.c) */
	{ MSG_EGRESS_LOG, egress_log },
	{ NULL, NULL }
};

/* A terminal's process ended. */
static void
sandbox_proc_exited(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*rec;
	const char		*id;
	int64_t			 status = -1;
	int			 oom = 0;

	/* The protocol table checked the fields (proc: 16 hex digits). */
	id = json_str(m->obj, "proc");
	json_int(m->obj, "status", &status);
	json_flag(m->obj, "oom", &oom);
	spawn_exited(id, status, oom,
	    json_object_object_get(m->obj, "egress_bypass"));
	if (json_object_object_get_ex(m->obj, "recording", &rec))
		recording_closed(rec);
	ipc_reply(p, m, NULL, NULL, 0);
}

static const struct ipc_peer_cbs sandbox_cbs = {
	sandbox_ready, sandbox_closed
};

/* Remember the backend and containment objects of a health reply. */
static void
sandbox_keep_backend(struct ipc_msg *m)
{
	struct json_object	*res, *b;

	if (m == NULL || !json_object_object_get_ex(m->obj, "result", &res))
		return;
	sandbox_health_at = now_mono_ms();
	egress_proxy_keep(res);
	if (json_object_object_get_ex(res, "containment", &b) &&
	    json_object_is_type(b, json_type_object)) {
		json_object_put(sandbox_containment);
		sandbox_containment = json_object_get(b);
		json_object_put(sandbox_containment_text);
		sandbox_containment_text = NULL;
	}
	if (!json_object_object_get_ex(res, "backend", &b) ||
	    !json_object_is_type(b, json_type_object))
		return;
	json_object_put(sandbox_backend);
	sandbox_backend = json_object_get(b);
	json_object_put(sandbox_backend_text);
	sandbox_backend_text = NULL;
}

/* The reply to the health request sent when the link came up. */
static void
sandbox_ready_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	sandbox_keep_backend(m);
}

/*
 * sandboxd is connected: send the pending kills, then every live grant
 * (a restarted sandboxd kills the direct spawns of any other), and learn
 * its backend state.
 */
static void
sandbox_ready(struct ipc_peer *p)
{
	struct json_object	*req;
	struct session		*s;
	int			 i, n = sandbox_npending;

	sandbox_npending = 0;
	for (i = 0; i < n; i++)
		sandbox_kill_session(sandbox_pending[i]);
	n = sandbox_npending_users;
	sandbox_npending_users = 0;
	for (i = 0; i < n; i++)
		sandbox_kill_user(sandbox_pending_users[i]);
	for (s = session_first(); s != NULL; s = session_next(s))
		if (mode_is_direct(s))
			sandbox_grant(s);
	egress_sandbox_ready();

	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(MSG_HEALTH));
	ipc_request(p, req, NULL, 0, SANDBOX_HEALTH_MS, sandbox_ready_reply,
	    NULL);
}

/* sandboxd went away: what we knew of its backend is stale. */
static void
sandbox_closed(struct ipc_peer *p)
{
	json_object_put(sandbox_backend);
	sandbox_backend = NULL;
	json_object_put(sandbox_containment);
	sandbox_containment = NULL;
	json_object_put(sandbox_backend_text);
	sandbox_backend_text = NULL;
	json_object_put(sandbox_containment_text);
	sandbox_containment_text = NULL;
	egress_proxy_keep(NULL);
	sandbox_usage_forget();
	spawn_sandbox_gone();
}

/* The connected sandboxd, or NULL. */
struct ipc_peer *
sandbox_peer(void)
{
	return sandbox_link != NULL ? ipc_link_peer(sandbox_link) : NULL;
}

/* The backend state, or a down state when sandboxd is unreachable. */
struct json_object *
sandbox_backend_json(void)
{
	struct json_object	*o;

	if (sandbox_backend != NULL && sandbox_peer() != NULL)
		return json_object_get(sandbox_backend);
	o = json_object_new_object();
	json_object_object_add(o, "name", NULL);
	json_object_object_add(o, "ok", json_object_new_boolean(0));
	json_object_object_add(o, "reason",
	    json_object_new_string("sandboxd is unreachable"));
	return o;
}

/*
 * What enforces what, as sandboxd last reported it; when sandboxd is
 * unreachable or did not say, an object that says so.
 */
struct json_object *
sandbox_containment_json(void)
{
	struct json_object	*o;

	if (sandbox_containment != NULL && sandbox_peer() != NULL)
		return json_object_get(sandbox_containment);
	o = json_object_new_object();
	json_object_object_add(o, "known", json_object_new_boolean(0));
	json_object_object_add(o, "reason", json_object_new_string(
	    sandbox_peer() == NULL ? "sandboxd is unreachable" :
	    "sandboxd did not report its containment"));
	return o;
}

/*
 * sandbox_backend_json() as a front_json_raw value, printed once per
 * report of sandboxd.
 */
struct json_object *
sandbox_backend_raw(void)
{
	if (sandbox_backend == NULL || sandbox_peer() == NULL)
		return sandbox_backend_json();
	if (sandbox_backend_text == NULL)
		sandbox_backend_text = front_json_raw(sandbox_backend);
	return json_object_get(sandbox_backend_text);
}

/*
 * sandbox_containment_json() as a front_json_raw value, printed once per
 * report of sandboxd.
 */
struct json_object *
sandbox_containment_raw(void)
{
	if (sandbox_containment == NULL || sandbox_peer() == NULL)
		return sandbox_containment_json();
	if (sandbox_containment_text == NULL)
		sandbox_containment_text = front_json_raw(sandbox_containment);
	return json_object_get(sandbox_containment_text);
}

/* {"ok": b, "reason": r} */
static struct json_object *
sandbox_link_json(int ok, const char *reason)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	json_object_object_add(o, "reason",
	    reason ? json_object_new_string(reason) : NULL);
	return o;
}

/* Answer frontd's health request: brokerd is up; sandboxd is what it is. */
static void
sandbox_health_answer(struct ipc_peer *front, int64_t id, int ok,
    const char *reason)
{
	struct json_object	*res;
	struct ipc_msg		 m;
	char			 why[300];
	int			 audit_ok;

	memset(&m, 0, sizeof(m));
	m.id = id;
	res = json_object_new_object();
	audit_ok = audit_ready(why, sizeof why) == 0;
	json_object_object_add(res, "brokerd", sandbox_link_json(1, NULL));
	/* The store brokerd keeps its state in: {ok, reason, kind}. */
	json_object_object_add(res, "store", audit_store_json());
	/* The audit log is a link too: while it cannot take records, no
	 * state change is made (docs/audit.md). */
	json_object_object_add(res, "audit", sandbox_link_json(audit_ok,
	    audit_ok ? NULL : why));
	json_object_object_add(res, "sandboxd", sandbox_link_json(ok, reason));
	json_object_object_add(res, "backend", sandbox_backend_json());
	ipc_reply(front, &m, res, NULL, 0);
}

/* sandboxd answered (or not) a health request made for frontd. */
static void
sandbox_health_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	struct sandbox_wait	*w = arg;

	TAILQ_REMOVE(&sandbox_waits, w, entry);
	if (w->front == NULL)
		;	/* nobody left to answer */
	else if (m == NULL)
		sandbox_health_answer(w->front, w->id, 0,
		    "sandboxd did not answer");
	else {
		sandbox_keep_backend(m);
		sandbox_health_answer(w->front, w->id, 1, NULL);
	}
	free(w);
}

/* frontd asks for health: ask sandboxd to re-check its backend. */
void
sandbox_health(struct ipc_peer *front, struct ipc_msg *m)
{
	struct json_object	*req;
	struct sandbox_wait	*w;
	struct ipc_peer		*p;

	if ((p = sandbox_peer()) == NULL) {
		sandbox_health_answer(front, m->id, 0,
		    "sandboxd is unreachable");
		return;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("%s", __func__);
	w->front = front;
	w->id = m->id;
	TAILQ_INSERT_TAIL(&sandbox_waits, w, entry);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(MSG_HEALTH));
	if (ipc_request(p, req, NULL, 0, SANDBOX_HEALTH_MS,
	    sandbox_health_reply, w) == -1) {
		TAILQ_REMOVE(&sandbox_waits, w, entry);
		free(w);
		sandbox_health_answer(front, m->id, 0,
		    "sandboxd is unreachable");
	}
}

/* The reply to a background health request (sandbox_health_refresh). */
static void
sandbox_refresh_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	sandbox_health_asking = 0;
	sandbox_keep_backend(m);
}

/*
 * Ask sandboxd's health in the background when its last reply is older
 * than max_age_ms: what changes without a message of sandboxd (its link
 * to egressd) is then at most that old, and no request waits for it.
 */
void
sandbox_health_refresh(int max_age_ms)
{
	struct json_object	*req;
	struct ipc_peer		*p;

	if (sandbox_health_asking || (p = sandbox_peer()) == NULL ||
	    now_mono_ms() - sandbox_health_at < max_age_ms)
		return;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(MSG_HEALTH));
	if (ipc_request(p, req, NULL, 0, SANDBOX_HEALTH_MS,
	    sandbox_refresh_reply, NULL) == 0)
		sandbox_health_asking = 1;
}

/* The answer to a kill: nothing to do but log a failure. */
static void
sandbox_kill_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	if (m == NULL || json_object_object_get_ex(m->obj, "error", NULL))
		log_warnx("sandboxd did not confirm killing a session's "
		    "direct-mode processes");
}

/*
 * Kill the direct-mode processes of a session (its grant ended). When
 * sandboxd is not connected (brokerd just started, or sandboxd restarts),
 * the kill waits for it: a sandboxd that outlived brokerd still runs them.
 */
void
sandbox_kill_session(const char *session_id)
{
	struct json_object	*req;
	struct ipc_peer		*p;

	spawn_session_expiring(session_id);
	if ((p = sandbox_peer()) == NULL) {
		if (sandbox_npending < SANDBOX_PENDING)
			snprintf(sandbox_pending[sandbox_npending++], 33, "%s",
			    session_id);
		else
			log_warnx("too many pending kills; session %.8s's "
			    "direct processes are left", session_id);
		return;
	}
	req = json_object_new_object();
	json_object_object_add(req, "type",
	    json_object_new_string(MSG_KILL_SESSION));
	json_object_object_add(req, "session",
	    json_object_new_string(session_id));
	json_object_object_add(req, "mode", json_object_new_string("direct"));
	ipc_request(p, req, NULL, 0, 5000, sandbox_kill_reply, NULL);
}

/* The answer to a grant or a user kill: log a failure. */
static void
sandbox_told_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	struct json_object	*e;
	const char		*what = arg, *why = NULL;

	if (m != NULL && !json_object_object_get_ex(m->obj, "error", &e))
		return;
	if (m != NULL)
		why = json_str(e, "message");
	log_warnx("sandboxd did not confirm %s: %s", what, why != NULL ? why :
	    "no answer");
}

/*
 * Tell sandboxd of a session's direct-mode grant and its absolute deadline
 * (it started or was renewed): sandboxd ends the session's direct spawns at
 * it by itself, brokerd up or down. Only when a grant's end terminates
 * them (HOSTGATE_DIRECT_ON_EXPIRY=terminate); without sandboxd, the link's
 * coming up sends every live grant.
 */
void
sandbox_grant(struct session *s)
{
	struct json_object	*req;
	struct ipc_peer		*p;

	if (sandbox_conf->on_expiry != EXPIRY_TERMINATE ||
	    (p = sandbox_peer()) == NULL)
		return;
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(MSG_GRANT));
	json_object_object_add(req, "session", json_object_new_string(s->id));
	json_object_object_add(req, "user", json_object_new_string(s->user));
	json_object_object_add(req, "deadline_ms",
	    json_object_new_int64(s->direct_until));
	log_debug("session %.8s of %s: grant until %lld told to sandboxd",
	    s->id, s->user, (long long)s->direct_until);
	ipc_request(p, req, NULL, 0, 5000, sandbox_told_reply,
	    (void *)"a direct-mode grant");
}

/*
 * A user was deleted: sandboxd kills their whole cgroup (whatever runs as
 * them). Without sandboxd, the kill waits for it.
 */
void
sandbox_kill_user(const char *user)
{
	struct json_object	*req;
	struct ipc_peer		*p;

	sandbox_usage_drop(user);
	if ((p = sandbox_peer()) == NULL) {
		if (sandbox_npending_users < SANDBOX_PENDING)
			snprintf(sandbox_pending_users[
			    sandbox_npending_users++],
			    sizeof(sandbox_pending_users[0]), "%s", user);
		else
			log_warnx("too many pending kills; the processes of "
			    "deleted user %s are left", user);
		return;
	}
	req = json_object_new_object();
	json_object_object_add(req, "type",
	    json_object_new_string(MSG_KILL_USER));
	json_object_object_add(req, "user", json_object_new_string(user));
	ipc_request(p, req, NULL, 0, 5000, sandbox_told_reply,
	    (void *)"killing a deleted user's processes");
}

/* A frontd connection closed: forget the answers it waits for. */
void
sandbox_front_gone(struct ipc_peer *front)
{
	struct sandbox_wait	*w;

	TAILQ_FOREACH(w, &sandbox_waits, entry)
		if (w->front == front)
			w->front = NULL;
}

/* A request (health, usage) waiting for sandboxd's result. */
struct sandbox_ask {
	sandbox_health_cb	 cb;
	void			*arg;
};

/* sandboxd answered (or not) a sandbox_health_ask. */
static void
sandbox_ask_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	struct sandbox_ask	*a = arg;
	struct json_object	*res, *e;
	const char		*why;

	if (m == NULL)
		a->cb(NULL, "sandboxd did not answer", a->arg);
	else if (json_object_object_get_ex(m->obj, "error", &e)) {
		why = json_str(e, "message");
		a->cb(NULL, why != NULL ? why : "sandboxd refused", a->arg);
	} else if (!json_object_object_get_ex(m->obj, "result", &res) ||
	    !json_object_is_type(res, json_type_object))
		a->cb(NULL, "malformed reply from sandboxd", a->arg);
	else {
		sandbox_keep_backend(m);
		a->cb(res, NULL, a->arg);
	}
	free(a);
}

/* Send req (taken) to sandboxd; cb gets the result, or NULL and why. */
static void
sandbox_ask(struct json_object *req, int timeout_ms, sandbox_health_cb cb,
    void *arg)
{
	struct sandbox_ask	*a;
	struct ipc_peer		*p;

	if ((p = sandbox_peer()) == NULL) {
		json_object_put(req);
		cb(NULL, "sandboxd is unreachable", arg);
		return;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL)
		fatal("%s", __func__);
	a->cb = cb;
	a->arg = arg;
	if (ipc_request(p, req, NULL, 0, timeout_ms, sandbox_ask_reply,
	    a) == -1) {
		free(a);
		cb(NULL, "sandboxd is unreachable", arg);
	}
}

/*
 * Ask sandboxd for its health (version, start, a fresh backend probe); cb
 * gets the result, or NULL and why, maybe before this returns.
 */
void
sandbox_health_ask(int timeout_ms, sandbox_health_cb cb, void *arg)
{
	struct json_object	*req;

	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(MSG_HEALTH));
	sandbox_ask(req, timeout_ms, cb, arg);
}

/*
 * Ask sandboxd for a user's usage ({"memory", "pids", "disk", "oom_kills"});
 * cb gets the result, or NULL and why, maybe before this returns.
 */
void
sandbox_usage_ask(const char *user, int timeout_ms, sandbox_health_cb cb,
    void *arg)
{
	struct json_object	*req;

	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(MSG_USAGE));
	json_object_object_add(req, "user", json_object_new_string(user));
	sandbox_ask(req, timeout_ms, cb, arg);
}

/*
 * The kept usage of user, a new empty entry when there is none; at the
 * bound, the entry asked the longest ago that waits for nothing makes room.
 */
static struct sandbox_usage *
sandbox_usage_entry(const char *user)
{
	struct sandbox_usage	*u, *old = NULL;

	TAILQ_FOREACH(u, &sandbox_usages, entry)
		if (strcmp(u->user, user) == 0)
			return u;
	if (sandbox_nusages >= SANDBOX_USAGE_USERS) {
		TAILQ_FOREACH(u, &sandbox_usages, entry)
			if (!u->asking && (old == NULL || u->at < old->at))
				old = u;
		if (old != NULL) {
			TAILQ_REMOVE(&sandbox_usages, old, entry);
			json_object_put(old->usage);
			free(old);
			sandbox_nusages--;
		}
	}
	if ((u = calloc(1, sizeof(*u))) == NULL)
		fatal("%s", __func__);
	snprintf(u->user, sizeof(u->user), "%s", user);
	TAILQ_INIT(&u->waits);
	TAILQ_INSERT_HEAD(&sandbox_usages, u, entry);
	sandbox_nusages++;
	return u;
}

/* Answer everything that waits for u's usage: the kept one, or NULL, why. */
static void
sandbox_usage_answer(struct sandbox_usage *u, const char *why)
{
	struct sandbox_usage_wait	*w;
	int64_t				 age;

	age = now_mono_ms() - u->at;
	while ((w = TAILQ_FIRST(&u->waits)) != NULL) {
		TAILQ_REMOVE(&u->waits, w, entry);
		if (why == NULL)
			w->cb(u->usage, age < 0 ? 0 : age, NULL, w->arg);
		else
			w->cb(NULL, 0, why, w->arg);
		free(w);
	}
}

/* sandboxd answered (or not) a refresh of u's usage. */
static void
sandbox_usage_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	struct sandbox_usage	*u = arg;
	struct json_object	*res, *e;
	const char		*why = NULL;

	u->asking = 0;
	if (m == NULL)
		why = "sandboxd did not answer";
	else if (json_object_object_get_ex(m->obj, "error", &e)) {
		why = json_str(e, "message");
		if (why == NULL)
			why = "sandboxd refused";
	} else if (!json_object_object_get_ex(m->obj, "result", &res) ||
	    !json_object_is_type(res, json_type_object))
		why = "malformed reply from sandboxd";
	else {
		json_object_put(u->usage);
		u->usage = json_object_get(res);
		u->at = now_mono_ms();
	}
	sandbox_usage_answer(u, why);
}

/* Ask sandboxd for u's usage again, unless a request is already out. */
static void
sandbox_usage_refresh(struct sandbox_usage *u)
{
	struct json_object	*req;
	struct ipc_peer		*p;

	if (u->asking)
		return;
	if ((p = sandbox_peer()) == NULL) {
		sandbox_usage_answer(u, "sandboxd is unreachable");
		return;
	}
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(MSG_USAGE));
	json_object_object_add(req, "user", json_object_new_string(u->user));
	u->asking = 1;
	if (ipc_request(p, req, NULL, 0, FRONT_USAGE_MS, sandbox_usage_reply,
	    u) == -1) {
		u->asking = 0;
		sandbox_usage_answer(u, "sandboxd is unreachable");
	}
}

/*
 * The usage of user kept from sandboxd when it is at most
 * SANDBOX_USAGE_MAX_MS old (its age in *age_ms), else NULL. One older than
 * SANDBOX_USAGE_FRESH_MS is asked again meanwhile, so that steady requests
 * never wait.
 */
struct json_object *
sandbox_usage_kept(const char *user, int64_t *age_ms)
{
	struct sandbox_usage	*u;
	int64_t			 age;

	TAILQ_FOREACH(u, &sandbox_usages, entry)
		if (strcmp(u->user, user) == 0)
			break;
	if (u == NULL || u->usage == NULL || sandbox_peer() == NULL)
		return NULL;
	if ((age = now_mono_ms() - u->at) < 0)
		age = 0;
	if (age > SANDBOX_USAGE_MAX_MS)
		return NULL;
	if (age > SANDBOX_USAGE_FRESH_MS)
		sandbox_usage_refresh(u);
	*age_ms = age;
	return u->usage;
}

/*
 * The usage of user, at most SANDBOX_USAGE_MAX_MS old: cb gets it with its
 * age, or NULL and why, maybe before this returns. Requests for one user
 * share one question to sandboxd.
 */
void
sandbox_usage_get(const char *user, sandbox_usage_cb cb, void *arg)
{
	struct sandbox_usage_wait	*w;
	struct sandbox_usage		*u;
	struct json_object		*usage;
	int64_t				 age;

	if ((usage = sandbox_usage_kept(user, &age)) != NULL) {
		cb(usage, age, NULL, arg);
		return;
	}
	u = sandbox_usage_entry(user);
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("%s", __func__);
	w->cb = cb;
	w->arg = arg;
	TAILQ_INSERT_TAIL(&u->waits, w, entry);
	sandbox_usage_refresh(u);
}

/* Drop every kept usage (sandboxd went away: it may be another next). */
static void
sandbox_usage_forget(void)
{
	struct sandbox_usage	*u;

	TAILQ_FOREACH(u, &sandbox_usages, entry) {
		json_object_put(u->usage);
		u->usage = NULL;
	}
}

/* Drop the kept usage of a user (deleted). */
void
sandbox_usage_drop(const char *user)
{
	struct sandbox_usage	*u;

	TAILQ_FOREACH(u, &sandbox_usages, entry)
		if (strcmp(u->user, user) == 0) {
			json_object_put(u->usage);
			u->usage = NULL;
			return;
		}
}

/* Connect to sandboxd, whose socket must belong to sandbox_uid. */
void
sandbox_init(struct event_base *base, struct config *conf, uid_t sandbox_uid)
{
	char	*path;

	sandbox_conf = conf;
	path = path_join(conf->run_dir, SOCK_SANDBOX);
	sandbox_link = ipc_link_new(base, path, ROLE_BROKERD, ROLE_SANDBOXD,
	    sandbox_uid, sandbox_handlers, &sandbox_cbs, NULL);
	free(path);
}
