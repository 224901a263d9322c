/*
 * brokerd's control socket, for hgctl: users, tokens, sessions, the audit
 * log, the status of the three daemons and the effective configuration.
 * Only root and the service user may connect (SO_PEERCRED, checked at
 * accept).
 */
#include <sys/types.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd.h"

#define CONTROL_AUDIT_PAGE	500	/* records per audit_show reply */
#define CONTROL_HEALTH_MS	5000	/* a fresh probe may take a while */
#define CONTROL_LIST_MAX	1000	/* items per list page (proto.c's max) */
/* A list page's items, in bytes: room left for {"id","result",next}. */
#define CONTROL_LIST_BYTES	(IPC_MAX_MSG - 1024)

/* A page of a list reply being filled. */
struct control_page {
	struct json_object	*items;
	size_t			 bytes;		/* items' JSON text so far */
};

/* A status request of hgctl waiting for sandboxd's health. */
struct control_wait {
	struct ipc_peer		*peer;		/* NULL once hgctl has gone */
	int64_t			 id;
	struct json_object	*res;
	struct json_object	*front;		/* frontd's entry */
	TAILQ_ENTRY(control_wait) entry;
};
static TAILQ_HEAD(, control_wait) control_waits =
    TAILQ_HEAD_INITIALIZER(control_waits);

static struct config	*control_conf;
static int64_t		 control_started;	/* wall seconds */
static int64_t		 control_started_mono;	/* ms */

static void	control_user_add(struct ipc_peer *, struct ipc_msg *);
static void	control_user_del(struct ipc_peer *, struct ipc_msg *);
static void	control_user_passwd(struct ipc_peer *, struct ipc_msg *);
static void	control_user_list(struct ipc_peer *, struct ipc_msg *);
static void	control_token_create(struct ipc_peer *, struct ipc_msg *);
static void	control_token_list(struct ipc_peer *, struct ipc_msg *);
static void	control_token_revoke(struct ipc_peer *, struct ipc_msg *);
static void	control_session_list(struct ipc_peer *, struct ipc_msg *);
static void	control_session_revoke(struct ipc_peer *, struct ipc_msg *);
static void	control_session_revert(struct ipc_peer *, struct ipc_msg *);
static void	control_audit_verify(struct ipc_peer *, struct ipc_msg *);
static void	control_audit_flush(struct ipc_peer *, struct ipc_msg *);
static void	control_audit_archive(struct ipc_peer *, struct ipc_msg *);
static void	control_audit_show(struct ipc_peer *, struct ipc_msg *);
static void	control_status(struct ipc_peer *, struct ipc_msg *);
static void	control_config(struct ipc_peer *, struct ipc_msg *);
static void	control_closed(struct ipc_peer *);

static const struct ipc_peer_cbs control_cbs = { NULL, control_closed };

const struct ipc_handler control_handlers[] = {
	{ MSG_USER_ADD,		control_user_add },
	{ MSG_USER_DEL,		control_user_del },
	{ MSG_USER_PASSWD,	control_user_passwd },
	{ MSG_USER_LIST,		control_user_list },
	{ MSG_TOKEN_CREATE,	control_token_create },
	{ MSG_TOKEN_LIST,		control_token_list },
	{ MSG_TOKEN_REVOKE,	control_token_revoke },
	{ MSG_SESSION_LIST,	control_session_list },
	{ MSG_SESSION_REVOKE,	control_session_revoke },
	{ MSG_SESSION_REVERT,	control_session_revert },
	{ MSG_AUDIT_VERIFY,	control_audit_verify },
	{ MSG_AUDIT_SHOW,		control_audit_show },
	{ MSG_AUDIT_FLUSH,	control_audit_flush },
	{ MSG_AUDIT_ARCHIVE,	control_audit_archive },
	{ MSG_STATUS,		control_status },
	{ MSG_CONFIG,		control_config },
	{ MSG_AUDIT_REPLAY,	recording_replay },
	{ MSG_EGRESS_GET,		egress_control_get },
	{ MSG_EGRESS_SET,		egress_control_set },
	{ NULL, NULL }
};

/*
 * {"name", "password" or "hash" (argon2id encoded), "admin", and for a
 * mapped account "unix_user" with
 * its "uid" and "gid" as hgctl resolved them}: {"uid", "gid"}.
 */
static void
control_user_add(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*d, *res;
	struct user		*u;
	const char		*name, *password, *hash, *unix_user = NULL;
	char			 err[256];
	int64_t			 uid = -1, gid = -1;
	int			 admin = 0;

	/* The protocol table checked the fields' types and shapes. */
	name = json_str(m->obj, "name");
	password = json_str(m->obj, "password");
	hash = json_str(m->obj, "hash");
	if ((password == NULL) == (hash == NULL)) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "give one of "
		    "\"password\" and \"hash\"");
		return;
	}
	if (hash != NULL && !auth_hash_valid(hash, err, sizeof(err))) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "%s", err);
		return;
	}
	json_flag(m->obj, "admin", &admin);
	if ((unix_user = json_str(m->obj, "unix_user")) != NULL &&
	    (json_int(m->obj, "uid", &uid) == -1 ||
	    json_int(m->obj, "gid", &gid) == -1)) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "\"unix_user\" needs the "
		    "account's \"uid\" and \"gid\"");
		return;
	}
	if (auth_user_add_unix(name, admin, password, hash, unix_user, uid,
	    gid, err, sizeof(err)) == -1) {
		ipc_reply_error(p, m, ERR_CONFLICT, "%s", err);
		return;
	}
	malloc_trim(0);		/* argon2's work area */
	u = auth_find(name);
	log_info("hgctl: user %s added (%s)", name, admin ? "admin" : "user");
	d = json_object_new_object();
	json_object_object_add(d, "uid", json_object_new_int64(u->uid));
	json_object_object_add(d, "gid", json_object_new_int64(u->gid));
	if (unix_user != NULL)
		json_object_object_add(d, "unix_user",
		    json_object_new_string(unix_user));
	if (u->home[0] != '\0')
		json_object_object_add(d, "home",
		    json_object_new_string(u->home));
	audit_append("user_added", name, NULL, 1, admin ? "admin" : "user",
	    d, 0);
	res = json_object_new_object();
	json_object_object_add(res, "uid", json_object_new_int64(u->uid));
	json_object_object_add(res, "gid", json_object_new_int64(u->gid));
	if (u->home[0] != '\0')
		json_object_object_add(res, "home",
		    json_object_new_string(u->home));
	ipc_reply(p, m, res, NULL, 0);
}

static void
control_user_del(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*d;
	const char		*name;
	char			 err[256];

	name = json_str(m->obj, "name");
	if (auth_user_del(name, err, sizeof(err)) == -1) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "%s", err);
		return;
	}
	/*
	 * A deleted user's sessions and tokens die at once, and whatever
	 * still runs as them (sandboxd kills their whole cgroup).
	 */
	session_drop_user(name);
	sandbox_kill_user(name);
	log_info("hgctl: user %s deleted", name);
	d = json_object_new_object();
	json_object_object_add(d, "processes",
	    json_object_new_string("terminated"));
	audit_append("user_deleted", name, NULL, 1, "hgctl", d, 0);
	ipc_reply(p, m, NULL, NULL, 0);
}

static void
control_user_passwd(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*name, *password;
	char		 err[256];

	name = json_str(m->obj, "name");
	password = json_str(m->obj, "password");
	if (auth_user_passwd(name, password, err, sizeof(err)) == -1) {
		ipc_reply_error(p, m, auth_find(name) ? ERR_BAD_REQUEST :
		    ERR_NOT_FOUND, "%s", err);
		return;
	}
	/* A new password ends the sessions the old one opened. */
	session_drop_user(name);
	log_info("hgctl: password of %s changed; sessions ended", name);
	audit_append("password_changed", name, NULL, 1, "hgctl", NULL, 0);
	ipc_reply(p, m, NULL, NULL, 0);
}

/* Wrap an array as {"items": [...]}. */
static struct json_object *
control_items(struct json_object *arr)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "items", arr);
	return o;
}

static void
control_user_list(struct ipc_peer *p, struct ipc_msg *m)
{
	ipc_reply(p, m, control_items(auth_user_list()), NULL, 0);
}

static void
control_token_create(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;
	struct token		*t;
	const char		*user;
	struct user		*u;
	char			 bearer[TOKEN_BEARER_MAX];

	user = json_str(m->obj, "user");
	if ((u = auth_find(user)) == NULL) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such user %s", user);
		return;
	}
	/* In a fleet it names the user's home, for the balancer. */
	if ((t = token_create_home(user, "", hosts_home(u), bearer,
	    sizeof(bearer))) == NULL) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "cannot store the token");
		return;
	}
	log_info("hgctl: standalone token %s created for %s", t->id, user);
	{
		struct json_object *d = json_object_new_object();

		json_object_object_add(d, "token",
		    json_object_new_string(t->id));
		audit_append("token_minted", user, NULL, 1, "hgctl", d, 0);
	}
	res = json_object_new_object();
	json_object_object_add(res, "id", json_object_new_string(t->id));
	json_object_object_add(res, "token", json_object_new_string(bearer));
	json_object_object_add(res, "user", json_object_new_string(user));
	ipc_reply(p, m, res, NULL, 0);
}

/*
 * Add an item to a page when its JSON text (as ipc.c sends it) still fits
 * the page's bound; -1, the item freed, when it does not. The first item
 * always goes in: one is far smaller than the bound.
 */
static int
control_page_add(struct control_page *pg, struct json_object *it)
{
	size_t	len;

	(void)json_object_to_json_string_length(it, JSON_C_TO_STRING_PLAIN,
	    &len);
	len++;				/* the comma before it */
	if (json_object_array_length(pg->items) > 0 &&
	    pg->bytes + len > CONTROL_LIST_BYTES) {
		json_object_put(it);
		return -1;
	}
	json_object_array_add(pg->items, it);
	pg->bytes += len;
	return 0;
}

/* Reply {"items": [...], "next"?}: next names the last item sent. */
static void
control_page_reply(struct ipc_peer *p, struct ipc_msg *m,
    struct control_page *pg, const char *next)
{
	struct json_object	*res;

	res = control_items(pg->items);
	if (next != NULL)
		json_object_object_add(res, "next",
		    json_object_new_string(next));
	ipc_reply(p, m, res, NULL, 0);
}

/*
 * The page's bounds from the request (checked by the protocol table):
 * the cursor "after" or NULL, and "limit" (CONTROL_LIST_MAX without one).
 */
static size_t
control_page_limit(struct ipc_msg *m, const char **after)
{
	int64_t	limit = CONTROL_LIST_MAX;

	*after = json_str(m->obj, "after");
	/* absent, or 1 to CONTROL_LIST_MAX: the protocol table checked */
	json_int(m->obj, "limit", &limit);
	return limit;
}

/*
 * One page of the live tokens in id order, after the cursor "after", at
 * most "limit" of them and never more than one datagram holds: {"items":
 * [...], "next"}, "next" (the last id sent) absent on the last page.
 */
static void
control_token_list(struct ipc_peer *p, struct ipc_msg *m)
{
	struct token		*page[CONTROL_LIST_MAX + 1];
	struct control_page	 pg = { json_object_new_array(), 0 };
	const char		*after;
	size_t			 limit, n, i;

	limit = control_page_limit(m, &after);
	/* One more than asked for tells whether a page follows. */
	n = token_page(after, page, limit + 1);
	for (i = 0; i < n && i < limit; i++)
		if (control_page_add(&pg, token_json(page[i])) == -1)
			break;
	control_page_reply(p, m, &pg, i < n ? page[i - 1]->id : NULL);
}

static void
control_token_revoke(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*id;

	id = json_str(m->obj, "token");
	if (token_revoke(id) == -1) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such token %s", id);
		return;
	}
	log_info("hgctl: token %s revoked", id);
	{
		struct json_object *d = json_object_new_object();

		json_object_object_add(d, "token", json_object_new_string(id));
		audit_append("token_revoked", NULL, NULL, 1, "hgctl", d, 0);
	}
	ipc_reply(p, m, NULL, NULL, 0);
}

/*
 * One page of the live sessions with their execution mode and, in direct
 * mode, its deadline, paged as control_token_list pages the tokens.
 */
static void
control_session_list(struct ipc_peer *p, struct ipc_msg *m)
{
	struct session		*page[CONTROL_LIST_MAX + 1];
	struct control_page	 pg = { json_object_new_array(), 0 };
	struct json_object	*it;
	const char		*after;
	size_t			 limit, n, i;

	limit = control_page_limit(m, &after);
	n = session_page(after, page, limit + 1);
	for (i = 0; i < n && i < limit; i++) {
		it = session_json(page[i]);
		mode_describe(page[i], it);
		if (control_page_add(&pg, it) == -1)
			break;
	}
	control_page_reply(p, m, &pg, i < n ? page[i - 1]->id : NULL);
}

static void
control_session_revoke(struct ipc_peer *p, struct ipc_msg *m)
{
	struct session	*s;
	const char	*id;

	id = json_str(m->obj, "session");
	if ((s = session_by_id(id)) == NULL) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such session %s", id);
		return;
	}
	log_info("hgctl: session %.8s of %s revoked", s->id, s->user);
	audit_append("session_revoked", s->user, s->id, 1, "hgctl", NULL, 0);
	mode_revert(s, "admin", "hgctl");
	events_emit(s->id, s->user, "session_ended", NULL);
	session_destroy(s);
	ipc_reply(p, m, NULL, NULL, 0);
}

/*
 * Check the audit chain, against an anchor when "head_seq" and "head_hash"
 * are given: audit_verdict_json's {"ok", "records", "first_seq",
 * "last_seq", "anchor_seq", "bad_seq", "error"}. A broken chain is an
 * answer, not an error.
 */
static void
control_audit_verify(struct ipc_peer *p, struct ipc_msg *m)
{
	struct audit_verdict	 vd;
	const char		*hash = NULL;
	char			 err[512];
	int64_t			 bad, head = 0;
	int			 ok;

	/* Shapes checked by the protocol table: here, both or neither. */
	hash = json_str(m->obj, "head_hash");
	if ((json_int(m->obj, "head_seq", &head) == 0) != (hash != NULL)) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "\"head_seq\" (a seq >= "
		    "1) and \"head_hash\" (64 lowercase hex digits) go "
		    "together");
		return;
	}
	ok = audit_verify_chain(head, hash, &vd, err, sizeof(err)) == 0;
	bad = vd.bad_seq;
	if (!ok && bad == 0) {
		ipc_reply_error(p, m, ERR_INTERNAL, "%s", err);
		return;
	}
	if (!ok)
		log_warnx("hgctl: audit log: first bad record at seq %lld: %s",
		    (long long)bad, err);
	ipc_reply(p, m, audit_verdict_json(&vd, ok, err), NULL, 0);
}

/*
 * Move the rotated audit files older than "before" to "to" (absolute;
 * default STATE_DIR/audit-archive): audit_archive's answer, or an error.
 */
static void
control_audit_archive(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;
	const char		*to = json_str(m->obj, "to");
	char			 err[1024];
	int64_t			 before;

	if (audit_time_ms(json_str(m->obj, "before"), &before) == -1) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "\"before\" must be an "
		    "ISO 8601 time such as 2026-11-29T17:20:13Z or 2026-11-29");
		return;
	}
	if (to != NULL && to[0] != '/') {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "\"to\" must be an "
		    "absolute path");
		return;
	}
	if (audit_archive(before, to, &res, err, sizeof(err)) == -1) {
		log_warnx("hgctl: audit archive: %s", err);
		ipc_reply_error(p, m, ERR_INTERNAL, "%s", err);
		return;
	}
	ipc_reply(p, m, res, NULL, 0);
}

/* Write the counted refused requests now: {"records": N}. */
static void
control_audit_flush(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;

	res = json_object_new_object();
	json_object_object_add(res, "records",
	    json_object_new_int(audit_refusal_flush()));
	ipc_reply(p, m, res, NULL, 0);
}

/*
 * Audit records, newest last: {"items": [...], "more": bool}. Filters
 * as audit_filter_parse reads them; "limit" (at most CONTROL_AUDIT_PAGE
 * per reply) and "before_seq" page backwards; "more" says older matches
 * remain. A page is cut to what one message holds.
 */
static void
control_audit_show(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res, *items;
	struct audit_filter	 f;
	char			 err[256];
	int64_t			 limit = CONTROL_AUDIT_PAGE;
	int64_t			 before = 0;
	int			 more;

	if (audit_filter_parse(m->obj, &f, err, sizeof(err)) == -1) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "%s", err);
		return;
	}
	/* The protocol table checked their ranges (limit: 1 to 500). */
	json_int(m->obj, "limit", &limit);
	json_int(m->obj, "before_seq", &before);
	items = audit_query_filter(&f, before, limit, &more);
	/* Room for the envelope: {"id":N,"result":{"items":...,"more":..}} */
	if (audit_trim(items, IPC_MAX_MSG - 256) > 0)
		more = 1;
	res = json_object_new_object();
	json_object_object_add(res, "items", items);
	json_object_object_add(res, "more", json_object_new_boolean(more));
	ipc_reply(p, m, res, NULL, 0);
}

/* hgctl session revert ID: back to the sandbox, as an admin would. */
static void
control_session_revert(struct ipc_peer *p, struct ipc_msg *m)
{
	struct session	*s;
	const char	*id;

	id = json_str(m->obj, "session");
	if ((s = session_by_id(id)) == NULL) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such session %s", id);
		return;
	}
	audit_append("admin_revert", "hgctl", NULL, 1, s->id, NULL, 0);
	mode_revert(s, "admin", "hgctl");
	ipc_reply(p, m, NULL, NULL, 0);
}

/* A daemon's entry of the status: up, version, start and uptime. */
static struct json_object *
control_daemon(int up, const char *version, int64_t started, int64_t uptime,
    const char *reason)
{
	struct json_object	*o;
	char			 when[32];

	o = json_object_new_object();
	json_object_object_add(o, "up", json_object_new_boolean(up));
	json_object_object_add(o, "version",
	    up && version != NULL ? json_object_new_string(version) : NULL);
	if (up && started > 0) {
		iso8601(started, when);
		json_object_object_add(o, "started",
		    json_object_new_string(when));
		json_object_object_add(o, "uptime_seconds",
		    json_object_new_int64(uptime < 0 ? 0 : uptime));
	} else {
		json_object_object_add(o, "started", NULL);
		json_object_object_add(o, "uptime_seconds", NULL);
	}
	json_object_object_add(o, "reason",
	    reason != NULL ? json_object_new_string(reason) : NULL);
	return o;
}

/* The sessions in direct mode, with their deadline and time left. */
static struct json_object *
control_direct_sessions(void)
{
	struct json_object	*arr, *o;
	struct session		*s;

	arr = json_object_new_array();
	for (s = session_first(); s != NULL; s = session_next(s)) {
		if (!mode_is_direct(s))
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "session",
		    json_object_new_string(s->id));
		json_object_object_add(o, "user",
		    json_object_new_string(s->user));
		mode_describe(s, o);
		json_object_object_del(o, "mode");
		json_object_array_add(arr, o);
	}
	return arr;
}

/* Add a problem of the status: what is down or does not work. */
static void
control_problem(struct json_object *problems, const char *who,
    const char *why)
{
	char	buf[512];

	snprintf(buf, sizeof(buf), "%s: %s", who, why != NULL ? why :
	    "down");
	json_object_array_add(problems, json_object_new_string(buf));
}

/*
 * egressd's entry, as sandboxd (its only peer) sees it: down is a problem
 * under the host runtime, whose +allowlist spawns have no other way out.
 */
static void
control_status_egressd(struct json_object *daemons,
    struct json_object *problems, struct json_object *health,
    const char *sandboxd_down)
{
	struct json_object	*e = NULL;
	const char		*why;
	char			 buf[300];
	int			 ok = 0;

	if (health == NULL) {
		snprintf(buf, sizeof(buf), "unknown: sandboxd is down (%s)",
		    sandboxd_down != NULL ? sandboxd_down : "no answer");
		why = buf;
	} else if (json_object_object_get_ex(health, "egress", &e) &&
	    json_flag(e, "ok", &ok) == 0 && ok)
		why = NULL;
	else
		why = e != NULL && json_str(e, "reason") != NULL ?
		    json_str(e, "reason") : "not linked to sandboxd";
	json_object_object_add(daemons, "egressd", control_daemon(why == NULL,
	    NULL, 0, 0, why));
	if (why != NULL && health != NULL &&
	    control_conf->runtime == RUNTIME_HOST)
		control_problem(problems, "egressd", why);
}

/* sandboxd's health arrived (or not): complete and send the status. */
static void
control_status_done(struct json_object *health, const char *reason,
    void *arg)
{
	struct control_wait	*w = arg;
	struct json_object	*res = w->res, *daemons, *problems, *b;
	struct ipc_msg		 m;
	const char		*why;
	int64_t			 started = 0;
	int			 ok = 0, up;

	TAILQ_REMOVE(&control_waits, w, entry);
	if (w->peer == NULL) {
		json_object_put(res);
		json_object_put(w->front);
		free(w);
		return;
	}
	json_object_object_get_ex(res, "daemons", &daemons);
	json_object_object_get_ex(res, "problems", &problems);
	if (health != NULL) {
		json_int(health, "started", &started);
		json_object_object_add(daemons, "sandboxd", control_daemon(1,
		    json_str(health, "version"), started,
		    now_wall_ms() / 1000 - started, NULL));
	} else {
		json_object_object_add(daemons, "sandboxd",
		    control_daemon(0, NULL, 0, 0, reason));
		control_problem(problems, "sandboxd", reason);
	}
	control_status_egressd(daemons, problems, health, reason);
	up = 0;
	json_flag(w->front, "up", &up);
	if (!up)
		control_problem(problems, "frontd", json_str(w->front,
		    "reason"));
	json_object_object_add(daemons, "frontd", w->front);
	b = sandbox_backend_json();
	json_flag(b, "ok", &ok);
	if (!ok && health != NULL) {
		why = json_str(b, "reason");
		control_problem(problems, "backend", why != NULL ? why :
		    "does not work");
	}
	json_object_object_add(res, "backend", b);
	/* What enforces what, as sandboxd says now (sandbox.c keeps it). */
	json_object_object_add(res, "containment", sandbox_containment_json());
	json_object_object_add(res, "limits", front_limits_json());
	json_object_object_add(res, "state", json_object_new_string(
	    json_object_array_length(problems) == 0 ? "running" :
	    "degraded"));
	memset(&m, 0, sizeof(m));
	m.id = w->id;
	ipc_reply(w->peer, &m, res, NULL, 0);
	free(w);
}

/*
 * hgctl status: {"state": "running" | "degraded", "problems": [...],
 * "daemons": {"brokerd", "sandboxd", "frontd", "egressd": {up, version,
 * started, uptime_seconds, reason}} (egressd's as sandboxd sees it: no
 * version nor start), "runtime", "backend": {name, ok, reason},
 * "direct_sessions": [{session, user, expires_at, remaining_seconds}],
 * "audit": {seq, hash}, "store": {ok, reason, kind}, "containment": sandboxd's {"uid", "membership",
 * "kill", "memory", "pids", "cpu", "io", "disk_quota", reasons},
 * "limits": the configured ones}. sandboxd is asked afresh (its backend probed
 * again when the last probe is stale).
 */
static void
control_status(struct ipc_peer *p, struct ipc_msg *m)
{
	struct control_wait	*w;
	struct json_object	*res, *daemons, *d, *a, *front;
	int64_t			 started = 0;
	int			 up;

	res = json_object_new_object();
	json_object_object_add(res, "state", NULL);
	json_object_object_add(res, "problems", json_object_new_array());
	daemons = json_object_new_object();
	d = control_daemon(1, HG_VERSION, control_started,
	    (now_mono_ms() - control_started_mono) / 1000, NULL);
	json_object_object_add(d, "pid", json_object_new_int64(getpid()));
	json_object_object_add(daemons, "brokerd", d);
	json_object_object_add(res, "daemons", daemons);
	/* frontd's entry goes after sandboxd's, once that is known. */
	d = front_info_json();
	up = 0;
	json_flag(d, "up", &up);
	json_int(d, "started", &started);
	front = control_daemon(up, json_str(d, "version"), started,
	    now_wall_ms() / 1000 - started, json_str(d, "reason"));
	json_object_put(d);

	json_object_object_add(res, "runtime", json_object_new_string(
	    control_conf->runtime == RUNTIME_HOST ? "host" : "docker"));
	json_object_object_add(res, "backend", NULL);
	json_object_object_add(res, "direct_sessions",
	    control_direct_sessions());
	a = json_object_new_object();
	json_object_object_add(a, "seq",
	    json_object_new_int64(audit_last_seq()));
	json_object_object_add(a, "hash",
	    json_object_new_string(audit_last_hash()));
	json_object_object_add(res, "audit", a);
	/* The store is a link too: lost, no state change is made. */
	a = audit_store_json();
	json_flag(a, "ok", &up);
	if (!up)
		control_problem(json_object_object_get(res, "problems"),
		    "store", json_str(a, "reason"));
	json_object_object_add(res, "store", a);

	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("%s", __func__);
	w->peer = p;
	w->id = m->id;
	w->res = res;
	w->front = front;
	TAILQ_INSERT_TAIL(&control_waits, w, entry);
	sandbox_health_ask(CONTROL_HEALTH_MS, control_status_done, w);
}

/*
 * hgctl config: brokerd's effective configuration, secrets masked:
 * {"source": "brokerd", "pid", "env_file", "config": {NAME: value}}.
 */
static void
control_config(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;

	res = json_object_new_object();
	json_object_object_add(res, "source",
	    json_object_new_string("brokerd"));
	json_object_object_add(res, "pid", json_object_new_int64(getpid()));
	json_object_object_add(res, "env_file", control_conf->env_file ?
	    json_object_new_string(control_conf->env_file) : NULL);
	json_object_object_add(res, "config", config_to_json(control_conf));
	ipc_reply(p, m, res, NULL, 0);
}

/* An hgctl connection closed: its waiting status has nobody to go to. */
static void
control_closed(struct ipc_peer *p)
{
	struct control_wait	*w;

	TAILQ_FOREACH(w, &control_waits, entry)
		if (w->peer == p)
			w->peer = NULL;
	recording_peer_closed(p);
}

/* Serve the control socket for the given uids. */
void
control_init(struct event_base *base, struct config *conf, const uid_t *uids,
    int nuids, int fd)
{
	control_conf = conf;
	control_started = now_wall_ms() / 1000;
	control_started_mono = now_mono_ms();
	/* Rootless, the uid alone cannot tell hgctl from frontd's jail. */
	ipc_server_admit(ipc_server_new(base, fd, ROLE_BROKERD, ROLE_HGCTL, uids,
	    nuids, control_handlers, &control_cbs, NULL),
	    priv_admit_same_pidns);
}
