/*
 * The admin API: sessions with their mode and terminals, reverting a
 * session, killing a terminal, the audit log, and a debug view. Only an
 * admin's login session reaches these (front.c's NEED_ADMIN); every action
 * is audited.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

static struct config	*admin_conf;
static int64_t		 admin_started;	/* monotonic ms */

struct counters		 counters;

/* One user's usage for the admin sessions view. */
struct admin_usage {
	struct front_pending	*fp;
	char			 user[USER_NAME_MAX + 1];
};

/*
 * sandboxd answered (or not) for one user: their sessions get it; the
 * last answer sends the view.
 */
static void
admin_sessions_usage(struct json_object *usage, const char *why, void *arg)
{
	struct admin_usage	*au = arg;
	struct front_pending	*fp = au->fp;
	struct json_object	*arr, *o;
	size_t			 i;
	const char		*u;

	arr = json_object_object_get(fp->res, "sessions");
	for (i = 0; i < json_object_array_length(arr); i++) {
		o = json_object_array_get_idx(arr, i);
		if ((u = json_str(o, "user")) == NULL ||
		    strcmp(u, au->user) != 0)
			continue;
		json_object_object_add(o, "usage", json_object_get(usage));
		json_object_object_add(o, "usage_reason", usage == NULL ?
		    json_object_new_string(why) : NULL);
	}
	free(au);
	if (--fp->waiting == 0) {
		o = fp->res;
		fp->res = NULL;
		front_pending_reply(fp, o);
	}
}

/*
 * GET /api/admin/sessions: each with its user's limits and usage (sandboxd
 * is asked once per user; the reply waits for it, briefly).
 */
void
admin_sessions(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*arr, *o, *res;
	struct front_pending	*fp;
	struct admin_usage	*au;
	struct session		*s, *t;
	char			 when[40];

	arr = json_object_new_array();
	for (s = session_first(); s != NULL; s = session_next(s)) {
		o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_string(s->id));
		json_object_object_add(o, "user",
		    json_object_new_string(s->user));
		iso8601(s->created, when);
		json_object_object_add(o, "created",
		    json_object_new_string(when));
		iso8601(s->last_seen, when);
		json_object_object_add(o, "last_seen",
		    json_object_new_string(when));
		mode_describe(s, o);
		json_object_object_add(o, "permission",
		    json_object_new_string(session_permission(s)));
		json_object_object_add(o, "terminals",
		    spawn_terminals_json(s->id));
		/* Under docker: the user's container as sandboxd last saw it. */
		json_object_object_add(o, "container",
		    admin_conf->runtime == RUNTIME_DOCKER ?
		    spawn_container_json(s->user) : NULL);
		json_object_array_add(arr, o);
	}
	/* Each one's host, and its terminals on the fleet's other hosts. */
	hosts_admin_sessions(arr);
	audit_append("admin_sessions", id->user->name, id->session->id, 1,
	    NULL, NULL, 0);
	res = json_object_new_object();
	json_object_object_add(res, "sessions", arr);
	json_object_object_add(res, "runtime", json_object_new_string(
	    admin_conf->runtime == RUNTIME_HOST ? "host" : "docker"));
	json_object_object_add(res, "limits", front_limits_json());
	json_object_object_add(res, "containment", sandbox_containment_json());
	fp = front_pending_new(p, m);
	fp->res = res;
	fp->waiting = 1;	/* until every question is asked */
	for (s = session_first(); s != NULL; s = session_next(s)) {
		/* Once per user: at their first session. */
		for (t = session_first(); t != s; t = session_next(t))
			if (strcmp(t->user, s->user) == 0)
				break;
		if (t != s)
			continue;
		if ((au = calloc(1, sizeof(*au))) == NULL)
			fatal("%s", __func__);
		au->fp = fp;
		snprintf(au->user, sizeof(au->user), "%s", s->user);
		fp->waiting++;
		sandbox_usage_ask(s->user, FRONT_USAGE_MS, admin_sessions_usage,
		    au);
	}
	if (--fp->waiting == 0) {
		fp->res = NULL;
		front_pending_reply(fp, res);
	}
}

/* POST /api/admin/sessions/{id}/revert */
void
admin_revert(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct session	*s;
	const char	*sid;

	if ((sid = json_str(m->obj, "session")) == NULL ||
	    (s = session_by_id(sid)) == NULL) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such session");
		return;
	}
	if (!mode_is_direct(s)) {
		audit_append("admin_revert", id->user->name, id->session->id, 1,
		    "already sandboxed", NULL, 0);
		ipc_reply(p, m, NULL, NULL, 0);
		return;
	}
	log_info("admin %s reverts session %.8s of %s", id->user->name, s->id,
	    s->user);
	audit_append("admin_revert", id->user->name, id->session->id, 1,
	    s->id, NULL, 0);
	mode_revert(s, "admin", id->user->name);
	ipc_reply(p, m, NULL, NULL, 0);
}

/* DELETE /api/admin/terminals/{id}: any user's terminal. */
void
admin_kill(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	spawn_admin_kill(p, m, id);
}

/* GET /api/admin/audit?user=&action=&since=&until=&limit= */
void
admin_audit(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*res, *recs;
	struct audit_filter	 f;
	char			 err[256];
	int64_t			 limit = 200;
	size_t			 dropped;

	if (audit_filter_parse(m->obj, &f, err, sizeof(err)) == -1) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "%s", err);
		return;
	}
	/* absent, or 1 to 10000: the protocol table checked */
	json_int(m->obj, "limit", &limit);
	recs = audit_query_filter(&f, 0, limit, NULL);
	/* Reading the log is an admin action too; recorded after the query. */
	audit_append("admin_audit", id->user->name, id->session->id, 1, NULL,
	    NULL, 0);
	/* One reply is one IPC message: the newest records that fit. */
	dropped = audit_trim(recs, IPC_MAX_MSG - 512);
	res = json_object_new_object();
	json_object_object_add(res, "records", recs);
	json_object_object_add(res, "truncated",
	    json_object_new_boolean(dropped > 0));
	ipc_reply(p, m, res, NULL, 0);
}

/* GET /api/admin/debug */
void
admin_debug(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*res, *v, *c;

	res = json_object_new_object();
	v = json_object_new_object();
	json_object_object_add(v, "hostgate", json_object_new_string(
	    HG_VERSION));
	json_object_object_add(v, "protocol",
	    json_object_new_int(HG_PROTO_VERSION));
	json_object_object_add(v, "libevent",
	    json_object_new_string(event_get_version()));
	json_object_object_add(v, "json-c",
	    json_object_new_string(json_c_version()));
	json_object_object_add(res, "versions", v);
	json_object_object_add(res, "uptime_seconds", json_object_new_int64(
	    (now_mono_ms() - admin_started) / 1000));
	json_object_object_add(res, "backend", sandbox_backend_json());
	json_object_object_add(res, "config", config_to_json(admin_conf));
	c = json_object_new_object();
	json_object_object_add(c, "logins", json_object_new_int64(
	    counters.logins));
	json_object_object_add(c, "logins_failed", json_object_new_int64(
	    counters.logins_failed));
	json_object_object_add(c, "spawns", json_object_new_int64(
	    counters.spawns));
	json_object_object_add(c, "spawns_refused", json_object_new_int64(
	    counters.spawns_refused));
	json_object_object_add(c, "grants", json_object_new_int64(
	    counters.grants));
	json_object_object_add(c, "refusals", json_object_new_int64(
	    counters.refusals));
	json_object_object_add(res, "counters", c);
	audit_append("admin_debug", id->user->name, id->session->id, 1, NULL,
	    NULL, 0);
	ipc_reply(p, m, res, NULL, 0);
}

void
admin_init(struct config *conf)
{
	admin_conf = conf;
	admin_started = now_mono_ms();
}
