/*
 * Egress by allowlist, brokerd's side. The allowlist profiles
 * (workspace-write+allowlist, read-only+allowlist) reach the network only
 * through egressd, which allows HOSTGATE_EGRESS_ALLOW and the additions an
 * admin grants per user (the store's users, auth.c) or per login session
 * (store.db, session.c). Here: the egress_get and egress_set requests of
 * frontd (an admin session) and hgctl, the additions a spawn carries to
 * sandboxd and the egress_update that tells live sandboxes of a change,
 * the egress object of /api/status, and the audit records of egressd's
 * connection log (egress_log, relayed by sandboxd).
 */
#include <sys/types.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brokerd.h"

#define EGRESS_PORTS_MAX	32
#define EGRESS_PENDING		64	/* updates kept while sandboxd is away */
#define EGRESS_PROXY_FRESH_MS	1000	/* status asks sandboxd past this */

static struct config	*egress_conf;
/* Scopes changed while sandboxd was not connected: told when it is. */
static struct {
	char	scope[8];
	char	target[40];
} egress_pending[EGRESS_PENDING];
static int		 egress_npending;
/* The egress proxy's state from sandboxd's last health reply. */
static struct json_object *egress_proxy;	/* {ok, reason}, or NULL */

static void	 egress_changed_user(struct user *);
static void	 egress_changed_session(struct session *);

/* Keep the configuration. */
void
egress_init(struct config *conf)
{
	egress_conf = conf;
	/* A fleet: what another host changed reaches the sandboxes here. */
	session_on_egress(egress_changed_session);
	auth_on_egress(egress_changed_user);
}

/* HOSTGATE_EGRESS_PORTS as an array of numbers. */
static struct json_object *
egress_conf_ports(void)
{
	struct json_object	*arr;
	int			 ports[EGRESS_PORTS_MAX], i, n;

	arr = json_object_new_array();
	n = egress_ports_parse(egress_conf->egress_ports, ports,
	    EGRESS_PORTS_MAX);
	for (i = 0; i < n; i++)
		json_object_array_add(arr, json_object_new_int(ports[i]));
	return arr;
}

/* A copy of an addition list, or an empty array for none. */
static struct json_object *
egress_copy(struct json_object *allow)
{
	struct json_object	*arr;
	size_t			 i;

	arr = json_object_new_array();
	for (i = 0; allow != NULL && i < json_object_array_length(allow); i++)
		json_object_array_add(arr,
		    json_object_get(json_object_array_get_idx(allow, i)));
	return arr;
}

/*
 * Check an "allow" array (proto.c checked its shape: at most
 * EGRESS_ADDITIONS_MAX strings): each item lower-cased must be a domain
 * pattern; duplicates are dropped. The new array, or NULL with err.
 */
static struct json_object *
egress_allow_parse(struct json_object *allow, char *err, size_t errsz)
{
	struct json_object	*out;
	const char		*v;
	char			 buf[257], esc[LOG_ESCAPE_MAX];
	size_t			 i, j, len;

	out = json_object_new_array();
	for (i = 0; allow != NULL && i < json_object_array_length(allow); i++) {
		v = json_object_get_string(json_object_array_get_idx(allow,
		    i));
		len = strlen(v);
		for (j = 0; j < len && j < sizeof(buf) - 1; j++)
			buf[j] = (char)tolower((unsigned char)v[j]);
		buf[j] = '\0';
		if (len >= sizeof(buf) || !egress_pattern_valid(buf)) {
			snprintf(err, errsz, "\"%s\" is not a domain pattern: "
			    "give a name (example.com) or *. and a suffix "
			    "(*.example.com); nothing was changed",
			    log_escape(v, len, esc, sizeof(esc)));
			json_object_put(out);
			return NULL;
		}
		for (j = 0; j < json_object_array_length(out); j++)
			if (strcmp(json_object_get_string(
			    json_object_array_get_idx(out, j)), buf) == 0)
				break;
		if (j == json_object_array_length(out))
			json_object_array_add(out, json_object_new_string(buf));
	}
	return out;
}

/*
 * {allow, deny, ports, deny_nets, allow_nets, users: {NAME: [..]},
 * sessions: {ID: [..]}}: the configured lists and every addition.
 */
static struct json_object *
egress_get_json(void)
{
	struct json_object	*res, *users, *sessions;
	struct session		*s;
	struct user		*u;
	int64_t			 now = now_wall_ms() / 1000;

	res = json_object_new_object();
	json_object_object_add(res, "allow",
	    egress_list_json(egress_conf->egress_allow));
	json_object_object_add(res, "deny",
	    egress_list_json(egress_conf->egress_deny));
	json_object_object_add(res, "ports", egress_conf_ports());
	json_object_object_add(res, "deny_nets",
	    egress_list_json(egress_conf->egress_deny_nets));
	json_object_object_add(res, "allow_nets",
	    egress_list_json(egress_conf->egress_allow_nets));
	users = json_object_new_object();
	for (u = auth_user_first(); u != NULL; u = auth_user_next(u))
		if (u->egress_allow != NULL)
			json_object_object_add(users, u->name,
			    egress_copy(u->egress_allow));
	json_object_object_add(res, "users", users);
	sessions = json_object_new_object();
	for (s = session_first(); s != NULL; s = session_next(s))
		if (s->egress_allow != NULL && s->expires > now)
			json_object_object_add(sessions, s->id,
			    egress_copy(s->egress_allow));
	json_object_object_add(res, "sessions", sessions);
	return res;
}

/* Remember that a scope changed while sandboxd was away. */
static void
egress_pend(const char *scope, const char *target)
{
	int	i;

	for (i = 0; i < egress_npending; i++)
		if (strcmp(egress_pending[i].scope, scope) == 0 &&
		    strcmp(egress_pending[i].target, target) == 0)
			return;
	if (egress_npending == EGRESS_PENDING) {
		log_warnx("too many egress changes while sandboxd is away; "
		    "the %s %s's live sandboxes keep their list", scope,
		    target);
		return;
	}
	snprintf(egress_pending[egress_npending].scope,
	    sizeof(egress_pending[0].scope), "%s", scope);
	snprintf(egress_pending[egress_npending].target,
	    sizeof(egress_pending[0].target), "%s", target);
	egress_npending++;
}

/*
 * Tell sandboxd (egress_update) that the additions of a user or of a
 * session are now allow, so that the live sandboxes take them; without
 * sandboxd, once it is back.
 */
static void
egress_tell(const char *scope, const char *user, const char *session,
    struct json_object *allow)
{
	struct json_object	*ev;
	struct ipc_peer		*p;

	if ((p = sandbox_peer()) == NULL) {
		egress_pend(scope, session != NULL ? session : user);
		return;
	}
	ev = json_object_new_object();
	json_object_object_add(ev, "type",
	    json_object_new_string(MSG_EGRESS_UPDATE));
	json_object_object_add(ev, "user", json_object_new_string(user));
	if (session != NULL)
		json_object_object_add(ev, "session",
		    json_object_new_string(session));
	json_object_object_add(ev, "scope", json_object_new_string(scope));
	json_object_object_add(ev, "allow", egress_copy(allow));
	if (ipc_send(p, ev, NULL, 0) == -1)
		log_warnx("egress_update of the %s %s could not be sent to "
		    "sandboxd", scope, session != NULL ? session : user);
}

/*
 * A session ends (logout, expiry, revocation, its user deleted): its
 * additions go with it, and its live sandboxes lose them.
 */
void
egress_session_gone(struct session *s)
{
	if (s->egress_allow != NULL)
		egress_tell("session", s->user, s->id, NULL);
}

/*
 * Another host of the fleet changed a user's or a session's additions
 * (the store's notification): the live sandboxes here take them too.
 */
static void
egress_changed_user(struct user *u)
{
	egress_tell("user", u->name, NULL, u->egress_allow);
}

/* The same for a session's additions. */
static void
egress_changed_session(struct session *s)
{
	egress_tell("session", s->user, s->id, s->egress_allow);
}

/* sandboxd is connected: send the changes it missed. */
void
egress_sandbox_ready(void)
{
	struct session	*s;
	struct user	*u;
	int		 i, n = egress_npending;

	egress_npending = 0;
	for (i = 0; i < n; i++) {
		if (strcmp(egress_pending[i].scope, "user") == 0) {
			u = auth_find(egress_pending[i].target);
			egress_tell("user", egress_pending[i].target, NULL,
			    u != NULL ? u->egress_allow : NULL);
		} else if ((s = session_by_id(egress_pending[i].target)) !=
		    NULL)
			egress_tell("session", s->user, s->id,
			    s->egress_allow);
	}
}

/*
 * Replace the additions of scope and target with allow (an array from
 * the request), for `by`: checked, stored, audited (egress_allow) and
 * told to sandboxd. The reply {scope, target, allow}, or NULL with the
 * error's code and message.
 */
static struct json_object *
egress_apply(const char *by, struct json_object *req, const char **code,
    char *err, size_t errsz)
{
	struct json_object	*allow = NULL, *list, *d, *res;
	struct session		*s = NULL;
	struct user		*u = NULL;
	const char		*scope, *target, *user;
	char			 esc[LOG_ESCAPE_MAX];

	/* The protocol table made scope and target strings, allow strings. */
	scope = json_str(req, "scope");
	target = json_str(req, "target");
	json_object_object_get_ex(req, "allow", &allow);
	*code = ERR_BAD_REQUEST;
	if (strcmp(scope, "user") == 0) {
		if ((u = auth_find(target)) == NULL) {
			*code = ERR_NOT_FOUND;
			snprintf(err, errsz, "no such user %s",
			    log_escape(target, (size_t)-1, esc, sizeof(esc)));
			return NULL;
		}
		user = u->name;
	} else if (strcmp(scope, "session") == 0) {
		if (!str_is_hex(target, 32) ||
		    (s = session_by_id(target)) == NULL) {
			*code = ERR_NOT_FOUND;
			snprintf(err, errsz, "no live login session %s",
			    log_escape(target, (size_t)-1, esc, sizeof(esc)));
			return NULL;
		}
		user = s->user;
	} else {
		snprintf(err, errsz, "\"scope\" must be user or session");
		return NULL;
	}
	if ((list = egress_allow_parse(allow, err, errsz)) == NULL)
		return NULL;
	/* No record, no action. */
	if (audit_ready(err, errsz) == -1) {
		*code = ERR_UNAVAILABLE;
		json_object_put(list);
		return NULL;
	}
	if (u != NULL ? auth_user_egress(u, json_object_get(list), err,
	    errsz) == -1 : session_set_egress(s, json_object_get(list)) == -1) {
		*code = ERR_UNAVAILABLE;
		if (s != NULL)
			snprintf(err, errsz, "cannot store the session");
		json_object_put(list);
		return NULL;
	}
	log_info("egress additions of %s %s set by %s: %zu patterns", scope,
	    s != NULL ? s->id : user, by, json_object_array_length(list));
	d = json_object_new_object();
	json_object_object_add(d, "by", json_object_new_string(by));
	json_object_object_add(d, "scope", json_object_new_string(scope));
	json_object_object_add(d, "target", json_object_new_string(
	    s != NULL ? s->id : user));
	json_object_object_add(d, "allow", json_object_get(list));
	audit_append("egress_allow", user, s != NULL ? s->id : NULL, 1,
	    by, d, 0);
	egress_tell(scope, user, s != NULL ? s->id : NULL,
	    s != NULL ? s->egress_allow : u->egress_allow);
	res = json_object_new_object();
	json_object_object_add(res, "scope", json_object_new_string(scope));
	json_object_object_add(res, "target", json_object_new_string(
	    s != NULL ? s->id : user));
	json_object_object_add(res, "allow", list);
	return res;
}

/* frontd's egress_get (an admin's login session). */
void
egress_front_get(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	ipc_reply(p, m, egress_get_json(), NULL, 0);
}

/* frontd's egress_set (an admin's login session, CSRF checked). */
void
egress_front_set(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*res;
	const char		*code;
	char			 err[512];

	if ((res = egress_apply(id->user->name, m->obj, &code, err,
	    sizeof(err))) == NULL) {
		ipc_reply_error(p, m, code, "%s", err);
		return;
	}
	ipc_reply(p, m, res, NULL, 0);
}

/* hgctl's egress_get. */
void
egress_control_get(struct ipc_peer *p, struct ipc_msg *m)
{
	ipc_reply(p, m, egress_get_json(), NULL, 0);
}

/* hgctl's egress_set: recorded as by "hgctl". */
void
egress_control_set(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;
	const char		*code;
	char			 err[512];

	if ((res = egress_apply("hgctl", m->obj, &code, err,
	    sizeof(err))) == NULL) {
		ipc_reply_error(p, m, code, "%s", err);
		return;
	}
	ipc_reply(p, m, res, NULL, 0);
}

/*
 * A spawn under an allowlist profile carries the additions of its user
 * and session as they are now (egress_user, egress_session).
 */
void
egress_spawn_add(struct json_object *req, struct ident *id)
{
	if (!session_permission_allowlist(session_permission(id->session)))
		return;
	json_object_object_add(req, "egress_user",
	    egress_copy(id->user->egress_allow));
	json_object_object_add(req, "egress_session", egress_copy(
	    id->session != NULL ? id->session->egress_allow : NULL));
}

/*
 * Every domain a spawn of id's may reach through the proxy: the global
 * list, then the user's and the session's additions (for the prompt).
 */
struct json_object *
egress_domains(struct ident *id)
{
	struct json_object	*arr, *more;
	size_t			 i;

	arr = egress_list_json(egress_conf->egress_allow);
	more = egress_copy(id->user->egress_allow);
	for (i = 0; i < json_object_array_length(more); i++)
		json_object_array_add(arr,
		    json_object_get(json_object_array_get_idx(more, i)));
	json_object_put(more);
	more = egress_copy(id->session != NULL ? id->session->egress_allow :
	    NULL);
	for (i = 0; i < json_object_array_length(more); i++)
		json_object_array_add(arr,
		    json_object_get(json_object_array_get_idx(more, i)));
	json_object_put(more);
	return arr;
}

/*
 * Keep the egress object ({ok, reason}) of a health reply of sandboxd
 * (res NULL: sandboxd went away).
 */
void
egress_proxy_keep(struct json_object *res)
{
	struct json_object	*e;

	json_object_put(egress_proxy);
	egress_proxy = NULL;
	if (res != NULL && json_object_object_get_ex(res, "egress", &e) &&
	    json_object_is_type(e, json_type_object))
		egress_proxy = json_object_get(e);
}

/* The egress proxy's state, {ok, reason}, as sandboxd last told it. */
static struct json_object *
egress_proxy_json(void)
{
	struct json_object	*o;
	const char		*why;
	int			 ok = 0;

	/* Kept fresh for the next status: not waited for by this one. */
	sandbox_health_refresh(EGRESS_PROXY_FRESH_MS);
	if (sandbox_peer() == NULL)
		why = "sandboxd is unreachable";
	else if (egress_proxy == NULL)
		why = "sandboxd did not report the egress proxy";
	else {
		json_flag(egress_proxy, "ok", &ok);
		why = json_str(egress_proxy, "reason");
		if (!ok && why == NULL)
			why = "the egress proxy (egressd) is not running";
	}
	o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	json_object_object_add(o, "reason", ok ? NULL :
	    json_object_new_string(why));
	return o;
}

/*
 * /api/status's egress object for id: {allow: [global], user: [..],
 * session: [..], deny: [..], ports: [..], proxy: {ok, reason}}.
 */
struct json_object *
egress_status_json(struct ident *id)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "allow",
	    egress_list_json(egress_conf->egress_allow));
	json_object_object_add(o, "user", egress_copy(id->user->egress_allow));
	json_object_object_add(o, "session", egress_copy(id->session != NULL ?
	    id->session->egress_allow : NULL));
	json_object_object_add(o, "deny",
	    egress_list_json(egress_conf->egress_deny));
	json_object_object_add(o, "ports", egress_conf_ports());
	json_object_object_add(o, "proxy", egress_proxy_json());
	return o;
}

/* Copy an integer member of the log into the record's detail. */
static void
egress_int(struct json_object *d, struct json_object *m, const char *key)
{
	int64_t	v = 0;

	json_int(m, key, &v);
	json_object_object_add(d, key, json_object_new_int64(v));
}

/* Copy a string member (null when absent) into the record's detail. */
static void
egress_str(struct json_object *d, struct json_object *m, const char *key)
{
	const char	*v = json_str(m, key);

	json_object_object_add(d, key, v != NULL ? json_object_new_string(v) :
	    NULL);
}

/*
 * egressd's log of a spawn's connection attempts, relayed by sandboxd:
 * an egress record per attempt (kind connect) and an egress_summary per
 * minute's fold (kind summary). egressd bounds how many come per minute.
 */
void
egress_log(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*d;
	const char		*kind, *verdict, *reason, *host;
	char			 why[1400], since[32];
	int64_t			 port = 0, since_ms = 0;
	int			 allowed, summary;

	/*
	 * The protocol table checked every field's kind and length, and
	 * kind (connect or summary) and verdict (allowed or refused).
	 */
	kind = json_str(m->obj, "kind");
	verdict = json_str(m->obj, "verdict");
	host = json_str(m->obj, "host");
	reason = json_str(m->obj, "reason");
	json_int(m->obj, "port", &port);
	summary = strcmp(kind, "summary") == 0;
	allowed = strcmp(verdict, "allowed") == 0;
	d = json_object_new_object();
	egress_str(d, m->obj, "spawn");
	egress_str(d, m->obj, "host");
	egress_int(d, m->obj, "port");
	if (!summary)
		egress_str(d, m->obj, "addr");
	json_object_object_add(d, "verdict", json_object_new_string(
	    allowed ? "allowed" : "refused"));
	if (!summary)
		egress_str(d, m->obj, "reason");
	else
		egress_int(d, m->obj, "count");
	egress_int(d, m->obj, "bytes_up");
	egress_int(d, m->obj, "bytes_down");
	if (!summary)
		egress_int(d, m->obj, "duration_ms");
	else {
		json_int(m->obj, "since_ms", &since_ms);
		iso8601_ms(since_ms, since);
		json_object_object_add(d, "since",
		    json_object_new_string(since));
	}
	/* The record's reason: where it went, and why it was refused. */
	snprintf(why, sizeof(why), "%s:%lld%s%s", host, (long long)port,
	    reason != NULL && !allowed ? ": " : "",
	    reason != NULL && !allowed ? reason : "");
	audit_append(summary ? "egress_summary" : "egress",
	    json_str(m->obj, "user"), json_str(m->obj, "session"), allowed,
	    why, d, 0);
}

/*
 * An allowlist spawn's attempts past the proxy, counted by the kernel in
 * the sandbox's network namespace and read by sandboxd when it ended
 * (bypass: {ipv4_no_route, ipv6_no_route, udp_no_ports}, NULL: none):
 * one egress_bypass record. They all failed (no route, no port).
 */
void
egress_bypass(const char *user, const char *session, const char *spawn,
    struct json_object *bypass)
{
	struct json_object	*d;
	char			 why[160];
	int64_t			 v4 = 0, v6 = 0, udp = 0;

	if (bypass == NULL || !json_object_is_type(bypass, json_type_object))
		return;
	/* The protocol table checked the three counts. */
	json_int(bypass, "ipv4_no_route", &v4);
	json_int(bypass, "ipv6_no_route", &v6);
	json_int(bypass, "udp_no_ports", &udp);
	if (v4 == 0 && v6 == 0 && udp == 0)
		return;
	d = json_object_new_object();
	json_object_object_add(d, "spawn", spawn != NULL ?
	    json_object_new_string(spawn) : NULL);
	json_object_object_add(d, "ipv4_no_route", json_object_new_int64(v4));
	json_object_object_add(d, "ipv6_no_route", json_object_new_int64(v6));
	json_object_object_add(d, "udp_no_ports", json_object_new_int64(udp));
	snprintf(why, sizeof(why), "past the egress proxy: %lld IPv4 and "
	    "%lld IPv6 with no route, %lld UDP to no port", (long long)v4,
	    (long long)v6, (long long)udp);
	log_info("spawn %s of %s: %s", spawn != NULL ? spawn : "?", user, why);
	audit_append("egress_bypass", user, session, 0, why, d, 0);
}
