/*
 * brokerd's control socket, for hgctl: users, tokens, sessions and the
 * audit log. Only
 * root and the service user may connect (SO_PEERCRED, checked at accept).
 */
#include <sys/types.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

#define CONTROL_AUDIT_PAGE	500	/* records per audit_show reply */

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
static void	control_audit_show(struct ipc_peer *, struct ipc_msg *);

static const struct ipc_handler control_handlers[] = {
	{ "user_add",		ROLE_HGCTL, 0, control_user_add },
	{ "user_del",		ROLE_HGCTL, 0, control_user_del },
	{ "user_passwd",	ROLE_HGCTL, 0, control_user_passwd },
	{ "user_list",		ROLE_HGCTL, 0, control_user_list },
	{ "token_create",	ROLE_HGCTL, 0, control_token_create },
	{ "token_list",		ROLE_HGCTL, 0, control_token_list },
	{ "token_revoke",	ROLE_HGCTL, 0, control_token_revoke },
	{ "session_list",	ROLE_HGCTL, 0, control_session_list },
	{ "session_revoke",	ROLE_HGCTL, 0, control_session_revoke },
	{ "session_revert",	ROLE_HGCTL, 0, control_session_revert },
	{ "audit_verify",	ROLE_HGCTL, 0, control_audit_verify },
	{ "audit_show",		ROLE_HGCTL, 0, control_audit_show },
	{ NULL, 0, 0, NULL }
};

/* A required string field, or a bad_request reply and NULL. */
static const char *
control_field(struct ipc_peer *p, struct ipc_msg *m, const char *key)
{
	const char	*v;

	if ((v = json_str(m->obj, key)) == NULL)
		ipc_reply_error(p, m, ERR_BAD_REQUEST,
		    "\"%s\" is required and must be a string", key);
	return v;
}

static void
control_user_add(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*name, *password;
	char		 err[256];
	int		 admin = 0;

	if ((name = control_field(p, m, "name")) == NULL ||
	    (password = control_field(p, m, "password")) == NULL)
		return;
	json_flag(m->obj, "admin", &admin);
	if (auth_user_add(name, admin, password, err, sizeof(err)) == -1) {
		ipc_reply_error(p, m, ERR_CONFLICT, "%s", err);
		return;
	}
	malloc_trim(0);		/* argon2's work area */
	log_info("hgctl: user %s added (%s)", name, admin ? "admin" : "user");
	audit_append("user_added", name, NULL, 1, admin ? "admin" : "user",
	    NULL, 0);
	ipc_reply(p, m, NULL, NULL, 0);
}

static void
control_user_del(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*name;
	char		 err[256];

	if ((name = control_field(p, m, "name")) == NULL)
		return;
	if (auth_user_del(name, err, sizeof(err)) == -1) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "%s", err);
		return;
	}
	/* A deleted user's sessions and tokens die at once. */
	session_drop_user(name);
	log_info("hgctl: user %s deleted", name);
	audit_append("user_deleted", name, NULL, 1, "hgctl", NULL, 0);
	ipc_reply(p, m, NULL, NULL, 0);
}

static void
control_user_passwd(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*name, *password;
	char		 err[256];

	if ((name = control_field(p, m, "name")) == NULL ||
	    (password = control_field(p, m, "password")) == NULL)
		return;
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
	char			 bearer[128];

	if ((user = control_field(p, m, "user")) == NULL)
		return;
	if (auth_find(user) == NULL) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such user %s", user);
		return;
	}
	if ((t = token_create(user, "", bearer, sizeof(bearer))) == NULL) {
		ipc_reply_error(p, m, ERR_INTERNAL, "cannot store the token");
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

static void
control_token_list(struct ipc_peer *p, struct ipc_msg *m)
{
	ipc_reply(p, m, control_items(token_list()), NULL, 0);
}

static void
control_token_revoke(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*id;

	if ((id = control_field(p, m, "token")) == NULL)
		return;
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

/* Sessions with their execution mode and, in direct mode, its deadline. */
static void
control_session_list(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*items, *it;
	struct session		*s;
	size_t			 i;

	items = session_list();
	for (i = 0; i < json_object_array_length(items); i++) {
		it = json_object_array_get_idx(items, i);
		if ((s = session_by_id(json_str(it, "id"))) != NULL)
			mode_describe(s, it);
	}
	ipc_reply(p, m, control_items(items), NULL, 0);
}

static void
control_session_revoke(struct ipc_peer *p, struct ipc_msg *m)
{
	struct session	*s;
	const char	*id;

	if ((id = control_field(p, m, "session")) == NULL)
		return;
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
 * Check the audit chain: {"ok", "records", "last_seq", "bad_seq", "error"},
 * the last two null when ok. A broken chain is an answer, not an error.
 */
static void
control_audit_verify(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;
	char			 err[512];
	int64_t			 n, bad;
	int			 ok;

	ok = audit_verify(&n, &bad, err, sizeof(err)) == 0;
	if (!ok && bad == 0) {
		ipc_reply_error(p, m, ERR_INTERNAL, "%s", err);
		return;
	}
	if (!ok)
		log_warnx("hgctl: audit log: first bad record at seq %lld: %s",
		    (long long)bad, err);
	res = json_object_new_object();
	json_object_object_add(res, "ok", json_object_new_boolean(ok));
	json_object_object_add(res, "records", json_object_new_int64(n));
	json_object_object_add(res, "last_seq", json_object_new_int64(n));
	json_object_object_add(res, "bad_seq", ok ? NULL :
	    json_object_new_int64(bad));
	json_object_object_add(res, "error", ok ? NULL :
	    json_object_new_string(err));
	ipc_reply(p, m, res, NULL, 0);
}

/*
 * A time bound of audit_show into *secs: absent (0), Unix seconds, or an
 * ISO 8601 string; -1 after a bad_request reply.
 */
static int
control_audit_time(struct ipc_peer *p, struct ipc_msg *m, const char *key,
    int64_t *secs)
{
	struct json_object	*v;
	const char		*s;

	*secs = 0;
	if (!json_object_object_get_ex(m->obj, key, &v) || v == NULL)
		return 0;
	if (json_int(m->obj, key, secs) == 0)
		return 0;
	if ((s = json_str(m->obj, key)) != NULL &&
	    audit_time_parse(s, secs) == 0)
		return 0;
	ipc_reply_error(p, m, ERR_BAD_REQUEST, "\"%s\" must be an ISO 8601 "
	    "time such as 2026-11-29T17:20:13Z or 2026-11-29", key);
	return -1;
}

/*
 * Audit records, newest last: {"items": [...], "more": bool}. Filters
 * "user", "action", "since", "until"; "limit" (at most CONTROL_AUDIT_PAGE
 * per reply) and "before_seq" page backwards; "more" says older matches
 * remain. A page is cut to what one message holds.
 */
static void
control_audit_show(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res, *items;
	int64_t			 since, until, limit = CONTROL_AUDIT_PAGE;
	int64_t			 before = 0;
	int			 more;

	if (control_audit_time(p, m, "since", &since) == -1 ||
	    control_audit_time(p, m, "until", &until) == -1)
		return;
	if ((json_object_object_get_ex(m->obj, "limit", NULL) &&
	    (json_int(m->obj, "limit", &limit) == -1 || limit < 1)) ||
	    (json_object_object_get_ex(m->obj, "before_seq", NULL) &&
	    (json_int(m->obj, "before_seq", &before) == -1 || before < 0))) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "\"limit\" must be a "
		    "positive integer, \"before_seq\" one >= 0");
		return;
	}
	if (limit > CONTROL_AUDIT_PAGE)
		limit = CONTROL_AUDIT_PAGE;
	items = audit_query_page(json_str(m->obj, "user"),
	    json_str(m->obj, "action"), since, until, before, limit, &more);
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

	if ((id = control_field(p, m, "session")) == NULL)
		return;
	if ((s = session_by_id(id)) == NULL) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such session %s", id);
		return;
	}
	audit_append("admin_revert", "hgctl", NULL, 1, s->id, NULL, 0);
	mode_revert(s, "admin", "hgctl");
	ipc_reply(p, m, NULL, NULL, 0);
}

/* Serve the control socket for the given uids. */
void
control_init(struct event_base *base, struct config *conf, const uid_t *uids,
    int nuids, int fd)
{
	ipc_server_new(base, fd, ROLE_BROKERD, ROLE_HGCTL, uids, nuids,
	    control_handlers, NULL, NULL);
}
