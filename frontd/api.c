/*
 * The HTTP API: a table of routes, each turned into one brokerd request
 * that carries the raw credentials of the HTTP request. frontd checks only
 * the shape of what clients send; brokerd decides everything else.
 */
#include <sys/types.h>
#include <sys/mman.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "frontd.h"

#define API_BROKER_TIMEOUT_MS	5000
#define API_HEALTH_TIMEOUT_MS	900	/* /healthz answers within a second */
#define API_COOKIE		"hg_session"
#define API_HOST_COOKIE		"HGHOST"	/* a fleet balancer's (HAProxy) */
#define API_MAX_COMMAND		(32 * 1024)	/* fits one IPC message */
#define API_MAX_OUTPUT		(16 * 1024 * 1024)
#define API_RUN_TIMEOUT_MS	((api_conf->command_timeout_max + 30) * 1000)
#define API_EGRESS_MAX		EGRESS_ADDITIONS_MAX	/* brokerd's limit */
#define API_EGRESS_LEN		255	/* "*." and a DNS name */

/* A field a route's JSON body must have. */
struct api_field {
	const char		*name;
	enum json_type		 type;
	int			 optional;
};

struct api_route;
typedef void (*api_reply_fn)(struct http_request *, const struct api_route *,
    struct json_object *result);

/* Adds what a route sends beyond the body fields; -1 after replying. */
typedef int (*api_prepare_fn)(struct http_request *, struct json_object *body,
    struct json_object *obj, int *fd);

struct api_route {
	const char		*method;
	const char		*path;		/* "*" matches one id segment */
	const char		*op;		/* brokerd request type */
	const struct api_field	*body;		/* NULL: no body taken */
	int			 status;	/* on success */
	api_reply_fn		 reply;		/* NULL: result as it is */
	api_prepare_fn		 prepare;	/* NULL: the fields as they are */
};

static void	api_reply_healthz(struct http_request *,
		    const struct api_route *, struct json_object *);
static void	api_reply_login(struct http_request *,
		    const struct api_route *, struct json_object *);
static void	api_reply_logout(struct http_request *,
		    const struct api_route *, struct json_object *);

static void	api_reply_run(struct http_request *,
		    const struct api_route *, struct json_object *);
static int	api_prepare_command(struct http_request *,
		    struct json_object *, struct json_object *, int *);
static int	api_prepare_python(struct http_request *,
		    struct json_object *, struct json_object *, int *);
static int	api_prepare_terminal(struct http_request *,
		    struct json_object *, struct json_object *, int *);
static int	api_prepare_session(struct http_request *,
		    struct json_object *, struct json_object *, int *);
static int	api_prepare_recording(struct http_request *,
		    struct json_object *, struct json_object *, int *);
static int	api_prepare_audit(struct http_request *,
		    struct json_object *, struct json_object *, int *);
static int	api_prepare_token(struct http_request *,
		    struct json_object *, struct json_object *, int *);
static int	api_prepare_egress(struct http_request *,
		    struct json_object *, struct json_object *, int *);

static const struct api_field api_login_body[] = {
	{ "username", json_type_string, 0 },
	{ "password", json_type_string, 0 },
	{ NULL, 0, 0 }
};
static const struct api_field api_empty_body[] = {
	{ NULL, 0, 0 }
};
/* stdin and code go to a memfd, not into the brokerd request. */
static const struct api_field api_command_body[] = {
	{ "command", json_type_string, 0 },
	{ "cwd", json_type_string, 1 },
	{ "timeout", json_type_int, 1 },
	{ "env", json_type_object, 1 },
	{ NULL, 0, 0 }
};
static const struct api_field api_python_body[] = {
	{ "timeout", json_type_int, 1 },
	{ "cwd", json_type_string, 1 },
	{ NULL, 0, 0 }
};
static const struct api_field api_permission_body[] = {
	{ "permission", json_type_string, 0 },
	{ NULL, 0, 0 }
};
static const struct api_field api_mode_body[] = {
	{ "mode", json_type_string, 0 },
	{ NULL, 0, 0 }
};
static const struct api_field api_egress_body[] = {
	{ "allow", json_type_array, 0 },
	{ NULL, 0, 0 }
};
static const struct api_field api_terminal_body[] = {
	{ "cols", json_type_int, 1 },
	{ "rows", json_type_int, 1 },
	{ NULL, 0, 0 }
};

static const struct api_route api_routes[] = {
	{ "GET", "/healthz", MSG_HEALTH, NULL, 200, api_reply_healthz, NULL },
	{ "POST", "/api/login", MSG_LOGIN, api_login_body, 200,
	    api_reply_login, NULL },
	{ "POST", "/api/logout", MSG_LOGOUT, NULL, 200, api_reply_logout, NULL },
	{ "GET", "/api/status", MSG_STATUS, NULL, 200, NULL, NULL },
	{ "POST", "/api/session/tokens", MSG_TOKEN_MINT, api_empty_body, 201,
	    NULL, NULL },
	{ "GET", "/api/session/tokens", MSG_SESSION_TOKENS, NULL, 200, NULL,
	    NULL },
	{ "DELETE", "/api/session/tokens/*", MSG_SESSION_TOKEN_REVOKE, NULL, 200,
	    NULL, api_prepare_token },
	{ "GET", "/api/execution-mode", MSG_MODE_GET, NULL, 200, NULL, NULL },
	{ "POST", "/api/execution-mode", MSG_MODE_SET, api_mode_body, 200, NULL,
	    NULL },
	{ "GET", "/api/sandbox/prompt", MSG_PROMPT, NULL, 200, NULL, NULL },
	{ "GET", "/api/admin/sessions", MSG_ADMIN_SESSIONS, NULL, 200, NULL,
	    NULL },
	{ "POST", "/api/admin/sessions/*/revert", MSG_ADMIN_REVERT, NULL, 200,
	    NULL, api_prepare_session },
	{ "DELETE", "/api/admin/terminals/*", MSG_ADMIN_KILL, NULL, 200, NULL,
	    api_prepare_terminal },
	{ "GET", "/api/admin/audit", MSG_ADMIN_AUDIT, NULL, 200, NULL,
	    api_prepare_audit },
	{ "GET", "/api/admin/debug", MSG_ADMIN_DEBUG, NULL, 200, NULL, NULL },
	{ "GET", "/api/admin/recordings/*", MSG_ADMIN_RECORDING, NULL, 200, NULL,
	    api_prepare_recording },
	{ "GET", "/api/admin/egress", MSG_EGRESS_GET, NULL, 200, NULL, NULL },
	{ "PUT", "/api/admin/egress/users/*", MSG_EGRESS_SET, api_egress_body,
	    200, NULL, api_prepare_egress },
	{ "PUT", "/api/admin/egress/sessions/*", MSG_EGRESS_SET,
	    api_egress_body, 200, NULL, api_prepare_egress },
	{ "GET", "/api/permission", MSG_PERMISSION_GET, NULL, 200, NULL, NULL },
	{ "POST", "/api/permission", MSG_PERMISSION_SET, api_permission_body,
	    200, NULL, NULL },
	{ "POST", "/api/run_command", MSG_RUN, api_command_body, 200,
	    api_reply_run, api_prepare_command },
	{ "POST", "/api/run_python", MSG_RUN, api_python_body, 200,
	    api_reply_run, api_prepare_python },
	{ "POST", "/api/terminals", MSG_TERMINAL_CREATE, api_terminal_body, 201,
	    NULL, NULL },
	{ "GET", "/api/terminals", MSG_TERMINAL_LIST, NULL, 200, NULL, NULL },
	{ "DELETE", "/api/terminals/*", MSG_TERMINAL_DELETE, NULL, 200, NULL,
	    api_prepare_terminal },
	{ NULL, NULL, NULL, NULL, 0, NULL, NULL }
};

/* A request waiting for brokerd. */
struct api_call {
	struct http_request	*req;
	const struct api_route	*route;
};

static void	api_send(struct http_request *, const struct api_route *,
		    struct json_object *, int);
static void	api_send_text(struct http_request *,
		    const struct api_route *);

static struct config	*api_conf;
static struct ipc_link	*api_broker;
static int		 api_reply_fds[IPC_MAX_FDS];	/* of the reply */

/* A JSON {"ok": false, "reason": r} link state. */
static struct json_object *
api_link(int ok, const char *reason)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	json_object_object_add(o, "reason",
	    reason ? json_object_new_string(reason) : NULL);
	return o;
}

/* /healthz when brokerd cannot be asked: say which link is down. */
static void
api_healthz_down(struct http_request *req, const char *reason)
{
	struct json_object	*o, *e, *b;

	o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(0));
	json_object_object_add(o, "frontd", api_link(1, NULL));
	json_object_object_add(o, "brokerd", api_link(0, reason));
	b = api_link(0, "unknown: brokerd is unreachable");
	json_object_object_add(b, "kind", NULL);
	json_object_object_add(o, "store", b);
	json_object_object_add(o, "audit",
	    api_link(0, "unknown: brokerd is unreachable"));
	json_object_object_add(o, "sandboxd",
	    api_link(0, "unknown: brokerd is unreachable"));
	b = api_link(0, "unknown: brokerd is unreachable");
	json_object_object_add(b, "name", NULL);
	json_object_object_add(o, "backend", b);
	e = json_object_new_object();
	json_object_object_add(e, "code", json_object_new_string(
	    ERR_UNAVAILABLE));
	json_object_object_add(e, "message", json_object_new_string(reason));
	json_object_object_add(o, "error", e);
	http_reply_json(req, 503, o, NULL);
}

/* /healthz: every link of the chain and the backend; 503 names the gap. */
static void
api_reply_healthz(struct http_request *req, const struct api_route *r,
    struct json_object *res)
{
	struct json_object	*o, *sb, *be, *au = NULL, *st = NULL, *e;
	const char		*why = NULL;
	int			 sb_ok = 0, be_ok = 0, au_ok = 1, st_ok = 1;

	json_object_object_get_ex(res, "sandboxd", &sb);
	json_object_object_get_ex(res, "backend", &be);
	/* A brokerd without an "audit" link is older: its log is unknown. */
	if (json_object_object_get_ex(res, "audit", &au))
		json_flag(au, "ok", &au_ok);
	/* Nor a "store" one: its store is its own files. */
	if (json_object_object_get_ex(res, "store", &st))
		json_flag(st, "ok", &st_ok);
	json_flag(sb, "ok", &sb_ok);
	json_flag(be, "ok", &be_ok);
	if (!st_ok)
		why = json_str(st, "reason") ? json_str(st, "reason") :
		    "the store is unreachable";
	else if (!au_ok)
		why = json_str(au, "reason") ? json_str(au, "reason") :
		    "the audit log cannot take records";
	else if (!sb_ok)
		why = json_str(sb, "reason") ? json_str(sb, "reason") :
		    "sandboxd is unreachable";
	else if (!be_ok)
		why = json_str(be, "reason") ? json_str(be, "reason") :
		    "the sandbox backend does not work";

	o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(why == NULL));
	json_object_object_add(o, "frontd", api_link(1, NULL));
	json_object_object_add(o, "brokerd", api_link(1, NULL));
	if (st != NULL)
		json_object_object_add(o, "store", json_object_get(st));
	json_object_object_add(o, "audit", au != NULL ? json_object_get(au) :
	    api_link(1, NULL));
	json_object_object_add(o, "sandboxd", json_object_get(sb));
	json_object_object_add(o, "backend", json_object_get(be));
	if (why != NULL) {
		e = json_object_new_object();
		json_object_object_add(e, "code",
		    json_object_new_string(ERR_UNAVAILABLE));
		json_object_object_add(e, "message",
		    json_object_new_string(why));
		json_object_object_add(o, "error", e);
	}
	http_reply_json(req, why == NULL ? 200 : 503, o, NULL);
}

/* Whether s is a host id ([a-z0-9][a-z0-9-]{0,31}), fit for a header. */
static int
api_host_id_ok(const char *s)
{
	size_t	i, n = strlen(s);

	if (n == 0 || n > 32 || s[0] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* Login: the cookie goes into Set-Cookie, never into the body. */
static void
api_reply_login(struct http_request *req, const struct api_route *r,
    struct json_object *res)
{
	struct json_object	*o;
	const char		*cookie, *home;
	char			 hdr[512];
	int64_t			 max_age = 0;
	int			 len;

	cookie = json_str(res, "cookie");
	json_int(res, "max_age", &max_age);
	if (cookie == NULL) {
		http_reply_error(req, 500, ERR_INTERNAL,
		    "brokerd sent no session", NULL);
		return;
	}
	len = snprintf(hdr, sizeof(hdr), "Set-Cookie: " API_COOKIE "=%s; "
	    "Path=/; Max-Age=%lld; HttpOnly; SameSite=Strict%s\r\n", cookie,
	    (long long)max_age, req->tls ? "; Secure" : "");
	/*
	 * In a fleet, the balancer's cookie names the user's home host, so
	 * that the browser's next requests go where the workspace is (HAProxy
	 * keeps it: "cookie HGHOST ... preserve"). A session cookie, as
	 * HAProxy's own.
	 */
	if ((home = json_str(res, "home")) != NULL && api_host_id_ok(home) &&
	    len > 0 && (size_t)len < sizeof(hdr))
		snprintf(hdr + len, sizeof(hdr) - len, "Set-Cookie: "
		    API_HOST_COOKIE "=%s; Path=/; HttpOnly%s\r\n", home,
		    req->tls ? "; Secure" : "");
	o = json_object_new_object();
	json_object_object_add(o, "user",
	    json_object_new_string(json_str(res, "user") ?
	    json_str(res, "user") : ""));
	json_object_object_add(o, "role",
	    json_object_new_string(json_str(res, "role") ?
	    json_str(res, "role") : "user"));
	json_object_object_add(o, "csrf_token",
	    json_object_new_string(json_str(res, "csrf_token") ?
	    json_str(res, "csrf_token") : ""));
	http_reply_json(req, r->status, o, hdr);
}

/* Logout: clear the cookie. */
static void
api_reply_logout(struct http_request *req, const struct api_route *r,
    struct json_object *res)
{
	char	hdr[256];
	struct json_object *o;

	snprintf(hdr, sizeof(hdr), "Set-Cookie: " API_COOKIE "=; Path=/; "
	    "Max-Age=0; HttpOnly; SameSite=Strict%s\r\n",
	    req->tls ? "; Secure" : "");
	o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(1));
	http_reply_json(req, r->status, o, hdr);
}

/*
 * Answer req when brokerd did not answer (m NULL) or refused: its error
 * code becomes the HTTP status, retry_after a Retry-After header. 1 when
 * req was answered, 0 when m holds a result.
 */
int
api_broker_failed(struct http_request *req, struct ipc_msg *m)
{
	struct json_object	*err;
	const char		*code, *msg, *host;
	char			 hdr[128];
	int64_t			 retry;

	/* Who brokerd found the request was from, for the access line. */
	if (m != NULL && json_str(m->obj, "user") != NULL)
		snprintf(req->user, sizeof(req->user), "%s",
		    json_str(m->obj, "user"));
	if (m == NULL) {
		http_reply_error(req, 503, ERR_UNAVAILABLE,
		    "brokerd did not answer", NULL);
		return 1;
	}
	if (!json_object_object_get_ex(m->obj, "error", &err))
		return 0;
	code = json_str(err, "code");
	msg = json_str(err, "message");
	hdr[0] = '\0';
	if (json_int(err, "retry_after", &retry) == 0)
		snprintf(hdr, sizeof(hdr), "Retry-After: %lld\r\n",
		    (long long)retry);
	/*
	 * A workspace request that reached a host other than the user's
	 * home (a browser HAProxy moved while the home was down): the
	 * balancer's cookie names the home again, for the next request.
	 */
	else if ((host = json_str(err, "host")) != NULL &&
	    api_host_id_ok(host))
		snprintf(hdr, sizeof(hdr), "Set-Cookie: " API_HOST_COOKIE
		    "=%s; Path=/; HttpOnly%s\r\n", host, req->tls ?
		    "; Secure" : "");
	http_reply_error(req, proto_error_status(code), code ? code : ERR_INTERNAL,
	    msg ? msg : "error", hdr[0] ? hdr : NULL);
	return 1;
}

/* The end of the JSON string that starts at p, or NULL. */
static const char *
api_raw_string(const char *p, const char *end, int *escaped)
{
	const char	*q, *b;

	for (p++; p < end; p = b + 2) {
		if ((q = memchr(p, '"', end - p)) == NULL)
			return (NULL);
		if ((b = memchr(p, '\\', q - p)) == NULL)
			return (q + 1);
		/* The quote may be escaped: go on after the escape. */
		*escaped = 1;
	}
	return (NULL);
}

/* The end of the JSON value that starts at p, or NULL. */
static const char *
api_raw_value(const char *p, const char *end)
{
	int	depth = 0, escaped = 0;

	if (p < end && *p != '{' && *p != '[') {
		if (*p == '"')
			return (api_raw_string(p, end, &escaped));
		while (p < end && strchr(",}] \t\r\n", *p) == NULL)
			p++;
		return (p);
	}
	while (p < end) {
		if (*p == '"') {
			if ((p = api_raw_string(p, end, &escaped)) == NULL)
				return (NULL);
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return (p + 1);
		p++;
	}
	return (NULL);
}

/* p past JSON white space, before end. */
static const char *
api_raw_space(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' ||
	    *p == '\n'))
		p++;
	return (p);
}

/*
 * The text of the object that is the member "result" of the message
 * text raw (already parsed, so valid JSON): *vp and *vlenp, and 0; -1 when
 * it cannot be told for sure (a key with escapes), and the parsed tree is
 * printed instead.
 */
static int
api_raw_result(const char *raw, size_t len, const char **vp, size_t *vlenp)
{
	const char	*p = raw, *end = raw + len, *k, *v;
	size_t		 klen;
	int		 escaped = 0;

	*vp = NULL;
	p = api_raw_space(p, end);
	if (p == end || *p++ != '{')
		return (-1);
	p = api_raw_space(p, end);
	while (p < end && *p == '"') {
		k = p + 1;
		if ((p = api_raw_string(p, end, &escaped)) == NULL || escaped)
			return (-1);
		klen = (size_t)(p - k);
		p = api_raw_space(p, end);
		if (p == end || *p++ != ':')
			return (-1);
		v = p = api_raw_space(p, end);
		if ((p = api_raw_value(p, end)) == NULL)
			return (-1);
		if (klen == 7 && memcmp(k, "result\"", 7) == 0) {
			*vp = v;
			*vlenp = (size_t)(p - v);
		}
		p = api_raw_space(p, end);
		if (p < end && *p == ',')
			p = api_raw_space(p + 1, end);
	}
	if (*vp == NULL || **vp != '{')
		return (-1);
	return (0);
}

/* brokerd answered (or did not, m NULL): turn it into the HTTP reply. */
static void
api_broker_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	struct api_call		*c = arg;
	struct http_request	*req = c->req;
	const struct api_route	*r = c->route;
	struct json_object	*res;
	const char		*raw;
	size_t			 rawlen;
	int			 i;

	free(c);
	req->pending = NULL;
	if (m == NULL && strcmp(r->op, MSG_HEALTH) == 0) {
		api_healthz_down(req, "brokerd did not answer");
		return;
	}
	if (api_broker_failed(req, m))
		return;
	if (m->body != NULL && r->reply == NULL) {
		/* A raw body (PM_RAW), checked by ipc.c: sent as it came. */
		http_reply(req, r->status, "application/json", m->body,
		    m->bodylen, NULL);
		return;
	}
	if (!json_object_object_get_ex(m->obj, "result", &res) ||
	    !json_object_is_type(res, json_type_object)) {
		http_reply_error(req, 502, ERR_INTERNAL,
		    "malformed reply from brokerd", NULL);
		return;
	}
	for (i = 0; i < IPC_MAX_FDS; i++)
		api_reply_fds[i] = i < m->nfds ? m->fds[i] : -1;
	if (r->reply != NULL)
		r->reply(req, r, res);
	else if (api_raw_result(m->raw, m->rawlen, &raw, &rawlen) == 0)
		/* The result as brokerd wrote it: not printed again. */
		http_reply(req, r->status, "application/json", raw, rawlen,
		    NULL);
	else
		http_reply_json(req, r->status, json_object_get(res), NULL);
}

/* Add the raw credentials of req, and its request id, to a brokerd request. */
void
api_add_auth(struct http_request *req, struct json_object *obj)
{
	struct json_object	*auth;
	const char		*h;
	char			 cookie[512];

	json_object_object_add(obj, "request_id",
	    json_object_new_string(req->request_id));
	auth = json_object_new_object();
	if (http_cookie(req, API_COOKIE, cookie, sizeof(cookie)) == 0 &&
	    cookie[0] != '\0')
		json_object_object_add(auth, "cookie",
		    json_object_new_string(cookie));
	if ((h = http_header(req, "Authorization")) != NULL &&
	    strncasecmp(h, "Bearer ", 7) == 0) {
		h += 7;
		while (*h == ' ')
			h++;
		json_object_object_add(auth, "bearer",
		    json_object_new_string(h));
	}
	if ((h = http_header(req, "X-CSRF-Token")) != NULL)
		json_object_object_add(auth, "csrf", json_object_new_string(h));
	json_object_object_add(obj, "auth", auth);
}

/*
 * Check the fields of a parsed JSON object body against a route's list,
 * copying them into obj. Returns 0, or -1 with the reason in msg.
 */
static int
api_fields_copy(const struct api_field *fields, struct json_object *body,
    struct json_object *obj, char *msg, size_t msgsz)
{
	const struct api_field	*f;
	struct json_object	*v;

	for (f = fields; f->name != NULL; f++) {
		if (!json_object_object_get_ex(body, f->name, &v) ||
		    (v == NULL && f->optional)) {
			if (f->optional)
				continue;
			v = NULL;
		}
		if (v != NULL && f->type == json_type_string &&
		    json_object_is_type(v, json_type_string) &&
		    strlen(json_object_get_string(v)) !=
		    (size_t)json_object_get_string_len(v)) {
			snprintf(msg, msgsz, "\"%s\" must not contain "
			    "NUL characters", f->name);
			return -1;
		}
		if (v == NULL || !json_object_is_type(v, f->type)) {
			snprintf(msg, msgsz, "\"%s\" %smust be a%s %s",
			    f->name, f->optional ? "" : "is required and ",
			    f->type == json_type_int ||
			    f->type == json_type_object ||
			    f->type == json_type_array ? "n" : "",
			    f->type == json_type_int ? "integer" :
			    json_type_to_name(f->type));
			return -1;
		}
		json_object_object_add(obj, f->name, json_object_get(v));
	}
	return 0;
}

/*
 * Parse and check a route's JSON body, copying its fields into obj; the
 * parsed body is left in *bodyp for the route's prepare hook. Returns 0,
 * or -1 after answering 400.
 */
static int
api_take_body(struct http_request *req, const struct api_route *r,
    struct json_object *obj, struct json_object **bodyp)
{
	const struct api_field	*f;
	struct json_object	*body;
	struct json_tokener	*tok;
	char			 msg[128];

	*bodyp = NULL;
	if (req->body == NULL || req->body_len == 0) {
		for (f = r->body; f->name != NULL; f++)
			if (!f->optional)
				break;
		if (f->name == NULL && r->prepare == NULL)
			return 0;	/* nothing required */
		http_reply_error(req, 400, ERR_BAD_REQUEST,
		    "a JSON object body is required", NULL);
		return -1;
	}
	tok = json_tokener_new();
	body = json_tokener_parse_ex(tok, req->body, req->body_len);
	if (body == NULL || json_tokener_get_parse_end(tok) != req->body_len) {
		json_tokener_free(tok);
		json_object_put(body);
		http_reply_error(req, 400, ERR_BAD_REQUEST,
		    "malformed JSON body", NULL);
		return -1;
	}
	json_tokener_free(tok);
	if (!json_object_is_type(body, json_type_object)) {
		json_object_put(body);
		http_reply_error(req, 400, ERR_BAD_REQUEST,
		    "the body must be a JSON object", NULL);
		return -1;
	}
	if (api_fields_copy(r->body, body, obj, msg, sizeof(msg)) == -1) {
		json_object_put(body);
		http_reply_error(req, 400, ERR_BAD_REQUEST, msg, NULL);
		return -1;
	}
	*bodyp = body;
	return 0;
}

/*
 * Copy len bytes into a new buffer of valid UTF-8: every byte that does
 * not start or continue a valid sequence becomes U+FFFD. JSON clients
 * (browsers first) reject invalid UTF-8.
 */
char *
utf8_clean(const char *s, size_t len, size_t *outlen)
{
	const unsigned char	*p = (const unsigned char *)s;
	char			*out, *o;
	size_t			 i = 0, n, k;
	uint32_t		 cp;

	if ((out = o = malloc(len * 3 + 1)) == NULL)
		fatal("%s", __func__);
	while (i < len) {
		if (p[i] < 0x80) {
			*o++ = p[i++];
			continue;
		}
		if ((p[i] & 0xe0) == 0xc0) {
			n = 1;
			cp = p[i] & 0x1f;
		} else if ((p[i] & 0xf0) == 0xe0) {
			n = 2;
			cp = p[i] & 0x0f;
		} else if ((p[i] & 0xf8) == 0xf0) {
			n = 3;
			cp = p[i] & 0x07;
		} else
			goto bad;
		for (k = 1; k <= n; k++) {
			if (i + k >= len || (p[i + k] & 0xc0) != 0x80)
				goto bad;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		/* Overlong forms, surrogates and values past U+10FFFF. */
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
		    (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			goto bad;
		memcpy(o, p + i, n + 1);
		o += n + 1;
		i += n + 1;
		continue;
bad:
		memcpy(o, "\xef\xbf\xbd", 3);
		o += 3;
		i++;
	}
	*o = '\0';
	*outlen = o - out;
	return out;
}

/*
 * The hex id of n digits after prefix in path ("/api/terminals/{id}...");
 * -1 if none.
 */
static int
api_path_id(const char *path, const char *prefix, int n, char *id)
{
	const char	*p = path + strlen(prefix);
	int		 i;

	if (strncmp(path, prefix, strlen(prefix)) != 0)
		return -1;
	for (i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') ||
		    (p[i] >= 'a' && p[i] <= 'f')))
			return -1;
	if (p[n] != '\0' && p[n] != '/')
		return -1;
	memcpy(id, p, n);
	id[n] = '\0';
	return 0;
}

/*
 * The terminal id in /api/[admin/]terminals/{id}[/...], HEX16 or
 * HOST.HEX16: its host ("" without one) and its 16 hex digits.
 */
int
api_terminal_id(const char *path, char host[33], char id[17])
{
	const char	*p;

	if (strncmp(path, "/api/terminals/", 15) == 0)
		p = path + 15;
	else if (strncmp(path, "/api/admin/terminals/", 21) == 0)
		p = path + 21;
	else
		return -1;
	return term_id_parse(p, strcspn(p, "/"), host, id);
}

/*
 * A memfd holding data, offset 0, for a command's stdin; -1 on failure.
 * Sealed, so that what brokerd records of it is what the command reads.
 */
int
api_memfd(const char *data, size_t len)
{
	ssize_t	n;
	size_t	off = 0;
	int	fd;

	if ((fd = memfd_create("stdin", MFD_CLOEXEC | MFD_ALLOW_SEALING)) == -1)
		return -1;
	while (off < len) {
		if ((n = write(fd, data + off, len - off)) <= 0) {
			close(fd);
			return -1;
		}
		off += n;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE |
	    F_SEAL_SEAL) == -1) {
		close(fd);
		return -1;
	}
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/*
 * What a run request takes beyond its fields: a command's optional
 * "stdin", or run_python's "code" (python), as a memfd in *fd. Returns 0,
 * or the HTTP status of the refusal with its reason in msg.
 */
static int
api_run_input(int python, struct json_object *body, struct json_object *obj,
    int *fd, char *msg, size_t msgsz)
{
	struct json_object	*v;
	const char		*name = python ? "code" : "stdin";

	if (!python && strlen(json_str(obj, "command")) > API_MAX_COMMAND) {
		snprintf(msg, msgsz, "\"command\" is longer than 32 KiB; send "
		    "long input as \"stdin\"");
		return 413;
	}
	if (!json_object_object_get_ex(body, name, &v) ||
	    (v == NULL && !python)) {
		if (!python)
			return 0;
		v = NULL;
	}
	if (v == NULL || !json_object_is_type(v, json_type_string)) {
		snprintf(msg, msgsz, python ? "\"code\" is required and must "
		    "be a string" : "\"stdin\" must be a string");
		return 400;
	}
	if (python) {
		json_object_object_add(obj, "lang",
		    json_object_new_string("python"));
		json_object_object_add(obj, "code", json_object_new_string(""));
	}
	if ((*fd = api_memfd(json_object_get_string(v),
	    json_object_get_string_len(v))) == -1) {
		snprintf(msg, msgsz, python ? "cannot hold the code" :
		    "cannot hold stdin");
		return 500;
	}
	return 0;
}

/* api_run_input for a route: the refusal is the HTTP reply. */
static int
api_prepare_run(struct http_request *req, int python,
    struct json_object *body, struct json_object *obj, int *fd)
{
	char	msg[128];
	int	status;

	if ((status = api_run_input(python, body, obj, fd, msg,
	    sizeof(msg))) == 0)
		return 0;
	http_reply_error(req, status, status == 413 ? ERR_TOO_LARGE :
	    status == 400 ? ERR_BAD_REQUEST : ERR_INTERNAL, msg, NULL);
	return -1;
}

/* The optional "stdin" string of a command becomes a memfd. */
static int
api_prepare_command(struct http_request *req, struct json_object *body,
    struct json_object *obj, int *fd)
{
	return api_prepare_run(req, 0, body, obj, fd);
}

/* The "code" of run_python goes to python3's stdin. */
static int
api_prepare_python(struct http_request *req, struct json_object *body,
    struct json_object *obj, int *fd)
{
	return api_prepare_run(req, 1, body, obj, fd);
}

/* How long brokerd may take to answer a run request. */
int
api_run_timeout_ms(void)
{
	return API_RUN_TIMEOUT_MS;
}

/*
 * The brokerd "run" request of a run_command (python 0) or run_python
 * (1) body, exactly as POST /api/run_command or /api/run_python builds
 * it, into *objp and *fd (-1 when none). Returns 0, or the HTTP status
 * of the refusal with its reason in msg.
 */
int
api_run_request(int python, struct json_object *body,
    struct json_object **objp, int *fd, char *msg, size_t msgsz)
{
	struct json_object	*obj;
	int			 status;

	*fd = -1;
	obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(MSG_RUN));
	if (api_fields_copy(python ? api_python_body : api_command_body, body,
	    obj, msg, msgsz) == -1) {
		json_object_put(obj);
		return 400;
	}
	if ((status = api_run_input(python, body, obj, fd, msg, msgsz)) != 0) {
		json_object_put(obj);
		return status;
	}
	*objp = obj;
	return 0;
}

/* The terminal id of /api/terminals/{id}[/ws]. */
static int
api_prepare_terminal(struct http_request *req, struct json_object *body,
    struct json_object *obj, int *fd)
{
	char	host[33], id[17];

	if (api_terminal_id(req->path, host, id) == -1) {
		http_reply_error(req, 404, ERR_NOT_FOUND, "no such terminal",
		    NULL);
		return -1;
	}
	json_object_object_add(obj, "terminal", json_object_new_string(id));
	if (host[0] != '\0')
		json_object_object_add(obj, "host",
		    json_object_new_string(host));
	return 0;
}

/* The id of /api/admin/recordings/{id} and its ?offset=N. */
static int
api_prepare_recording(struct http_request *req, struct json_object *body,
    struct json_object *obj, int *fd)
{
	static const char	 prefix[] = "/api/admin/recordings/";
	const char		*q = req->query, *v;
	char			 id[17];
	long long		 off = 0;

	if (api_path_id(req->path, prefix, 16, id) == -1 ||
	    req->path[sizeof(prefix) - 1 + 16] != '\0') {
		http_reply_error(req, 404, ERR_NOT_FOUND, "no such recording",
		    NULL);
		return -1;
	}
	if (q != NULL && strncmp(q, "offset=", 7) == 0) {
		v = q + 7;
		if (*v == '\0' || strspn(v, "0123456789") != strlen(v) ||
		    strlen(v) > 15) {
			http_reply_error(req, 400, ERR_BAD_REQUEST,
			    "\"offset\" is a number of bytes", NULL);
			return -1;
		}
		off = strtoll(v, NULL, 10);
	}
	json_object_object_add(obj, "recording", json_object_new_string(id));
	json_object_object_add(obj, "offset", json_object_new_int64(off));
	return 0;
}

/* The session id of /api/admin/sessions/{id}/revert. */
static int
api_prepare_session(struct http_request *req, struct json_object *body,
    struct json_object *obj, int *fd)
{
	char	id[33];

	if (api_path_id(req->path, "/api/admin/sessions/", 32, id) == -1) {
		http_reply_error(req, 404, ERR_NOT_FOUND, "no such session",
		    NULL);
		return -1;
	}
	json_object_object_add(obj, "session", json_object_new_string(id));
	return 0;
}

/* Decode one %XX-and-+ encoded query value into out; -1 when malformed. */
static int
api_unescape(const char *s, size_t len, char *out, size_t outsz)
{
	size_t	i, o = 0;
	int	hi, lo;

	for (i = 0; i < len; i++) {
		if (o + 1 >= outsz)
			return -1;
		if (s[i] == '+')
			out[o++] = ' ';
		else if (s[i] == '%') {
			if (i + 2 >= len)
				return -1;
			hi = s[i + 1];
			lo = s[i + 2];
			hi = hi >= '0' && hi <= '9' ? hi - '0' :
			    (hi | 0x20) >= 'a' && (hi | 0x20) <= 'f' ?
			    (hi | 0x20) - 'a' + 10 : -1;
			lo = lo >= '0' && lo <= '9' ? lo - '0' :
			    (lo | 0x20) >= 'a' && (lo | 0x20) <= 'f' ?
			    (lo | 0x20) - 'a' + 10 : -1;
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else
			out[o++] = s[i];
	}
	out[o] = '\0';
	return 0;
}

/*
 * ?user=&action=&type=&session=&decision=&request_id=&since=&until=&limit=
 * of the admin audit query; brokerd checks the values.
 */
static int
api_prepare_audit(struct http_request *req, struct json_object *body,
    struct json_object *obj, int *fd)
{
	static const char *const keys[] = { "user", "action", "type",
	    "session", "decision", "request_id", "since", "until", "limit",
	    NULL };
	const char	*q = req->query, *amp, *eq;
	char		 val[256], msg[128];
	size_t		 i, klen;
	char		*end;
	long		 n;

	for (; q != NULL && *q != '\0'; q = *amp ? amp + 1 : amp) {
		amp = strchrnul(q, '&');
		if ((eq = memchr(q, '=', amp - q)) == NULL)
			continue;
		klen = eq - q;
		for (i = 0; keys[i] != NULL; i++)
			if (strlen(keys[i]) == klen &&
			    strncmp(q, keys[i], klen) == 0)
				break;
		if (keys[i] == NULL)
			continue;	/* unknown parameters are ignored */
		if (api_unescape(eq + 1, amp - eq - 1, val, sizeof(val)) == -1) {
			snprintf(msg, sizeof(msg), "malformed \"%s\" in the "
			    "query", keys[i]);
			http_reply_error(req, 400, ERR_BAD_REQUEST, msg, NULL);
			return -1;
		}
		if (val[0] == '\0')
			continue;
		if (strcmp(keys[i], "limit") == 0) {
			n = strtol(val, &end, 10);
			if (*end != '\0' || n < 1 || n > 10000) {
				http_reply_error(req, 400, ERR_BAD_REQUEST,
				    "\"limit\" must be from 1 to 10000", NULL);
				return -1;
			}
			json_object_object_add(obj, "limit",
			    json_object_new_int64(n));
		} else
			/*
			 * "type" and "request_id" are the message's own
			 * members: ?type= is the action, ?request_id= that of
			 * the records.
			 */
			json_object_object_add(obj, strcmp(keys[i], "type") ==
			    0 ? "action" : strcmp(keys[i], "request_id") == 0 ?
			    "record_request_id" : keys[i],
			    json_object_new_string(val));
	}
	return 0;
}

/* Read one output memfd into a JSON string, valid UTF-8. */
static struct json_object *
api_output(int fd, int64_t len)
{
	struct json_object	*o;
	char			*buf, *clean;
	ssize_t			 n;
	size_t			 got = 0, clen;

	if (fd == -1 || len <= 0)
		return json_object_new_string("");
	if (len > API_MAX_OUTPUT)
		len = API_MAX_OUTPUT;
	if ((buf = malloc(len)) == NULL)
		fatal("%s", __func__);
	while (got < (size_t)len &&
	    (n = pread(fd, buf + got, len - got, got)) > 0)
		got += n;
	clean = utf8_clean(buf, got, &clen);
	o = json_object_new_string_len(clean, clen);
	free(clean);
	free(buf);
	return o;
}

/*
 * The result of a "run" reply as POST /api/run_command answers it, its
 * output read from the reply's two memfds (fds, -1 when absent).
 */
struct json_object *
api_run_result(struct json_object *res, const int fds[2])
{
	static const char *const keep[] = { "exit_code", "signal",
	    "truncated", "timed_out", "oom", "duration_ms", "mode", "backend",
	    NULL };
	struct json_object	*o, *v;
	int64_t			 olen = 0, elen = 0;
	size_t			 i;

	json_int(res, "stdout_len", &olen);
	json_int(res, "stderr_len", &elen);
	o = json_object_new_object();
	for (i = 0; keep[i] != NULL; i++) {
		if (!json_object_object_get_ex(res, keep[i], &v))
			v = NULL;
		json_object_object_add(o, keep[i], json_object_get(v));
		if (i == 1) {
			json_object_object_add(o, "stdout",
			    api_output(fds[0], olen));
			json_object_object_add(o, "stderr",
			    api_output(fds[1], elen));
		}
	}
	return o;
}

/* A command's result: its output comes in two memfds from sandboxd. */
static void
api_reply_run(struct http_request *req, const struct api_route *r,
    struct json_object *res)
{
	http_reply_json(req, r->status, api_run_result(res, api_reply_fds),
	    NULL);
}

/* DELETE /api/session/tokens/{id}: the token id. */
static int
api_prepare_token(struct http_request *req, struct json_object *body,
    struct json_object *obj, int *fd)
{
	char	id[17];

	if (api_path_id(req->path, "/api/session/tokens/", 16, id) == -1 ||
	    req->path[strlen("/api/session/tokens/") + 16] != '\0') {
		http_reply_error(req, 404, ERR_NOT_FOUND, "no such token",
		    NULL);
		return -1;
	}
	json_object_object_add(obj, "token", json_object_new_string(id));
	return 0;
}

/*
 * PUT /api/admin/egress/{users/NAME,sessions/ID}: the scope and target
 * from the path, taken as they are (no percent-decoding: no user name or
 * session id has a "%"), and the shape of "allow", a list of strings.
 * brokerd checks the patterns and whether the target exists.
 */
static int
api_prepare_egress(struct http_request *req, struct json_object *body,
    struct json_object *obj, int *fd)
{
	static const char	 users[] = "/api/admin/egress/users/";
	static const char	 sessions[] = "/api/admin/egress/sessions/";
	struct json_object	*allow, *v;
	const char		*target;
	char			 msg[160];
	size_t			 i, n;

	if (strncmp(req->path, users, sizeof(users) - 1) == 0) {
		target = req->path + sizeof(users) - 1;
		if (!str_is_user_name(target)) {
			http_reply_error(req, 400, ERR_BAD_REQUEST, "the path "
			    "must end in a user name (a-z, 0-9, _ . -, at most "
			    "32 bytes)", NULL);
			return -1;
		}
		json_object_object_add(obj, "scope",
		    json_object_new_string("user"));
	} else {
		target = req->path + sizeof(sessions) - 1;
		if (!str_is_hex(target, 32)) {
			http_reply_error(req, 400, ERR_BAD_REQUEST, "the path "
			    "must end in a session id (32 hex digits)", NULL);
			return -1;
		}
		json_object_object_add(obj, "scope",
		    json_object_new_string("session"));
	}
	json_object_object_add(obj, "target", json_object_new_string(target));
	/* api_take_body copied "allow", an array; its items are checked here. */
	json_object_object_get_ex(obj, "allow", &allow);
	if ((n = json_object_array_length(allow)) > API_EGRESS_MAX) {
		snprintf(msg, sizeof(msg), "\"allow\" holds at most %d "
		    "patterns", API_EGRESS_MAX);
		http_reply_error(req, 400, ERR_BAD_REQUEST, msg, NULL);
		return -1;
	}
	for (i = 0; i < n; i++) {
		v = json_object_array_get_idx(allow, i);
		if (!json_object_is_type(v, json_type_string) ||
		    json_object_get_string_len(v) == 0 ||
		    json_object_get_string_len(v) > API_EGRESS_LEN ||
		    strlen(json_object_get_string(v)) !=
		    (size_t)json_object_get_string_len(v)) {
			snprintf(msg, sizeof(msg), "\"allow\" must hold "
			    "domain patterns (\"name\" or \"*.suffix\"), "
			    "strings of 1 to %d bytes without NUL",
			    API_EGRESS_LEN);
			http_reply_error(req, 400, ERR_BAD_REQUEST, msg, NULL);
			return -1;
		}
	}
	return 0;
}

/* Whether a route's path matches; "*" takes one id segment. */
static int
api_path_match(const char *pattern, const char *path)
{
	const char	*star;
	size_t		 pre;

	if ((star = strchr(pattern, '*')) == NULL)
		return strcmp(pattern, path) == 0;
	pre = star - pattern;
	if (strncmp(pattern, path, pre) != 0)
		return 0;
	path += pre;
	path += strcspn(path, "/");
	return strcmp(star + 1, path) == 0 && path != pattern + pre;
}

/* Route one HTTP request. */
void
api_handle(struct http_request *req, void *arg)
{
	const struct api_route	*r;
	struct json_object	*obj, *body = NULL;
	char			 allow[64];
	int			 is_get, known = 0, fd = -1;

	if (strcmp(req->method, "GET") == 0 &&
	    api_path_match("/api/terminals/*/ws", req->path)) {
		ws_handle(req);
		return;
	}
	if (strcmp(req->method, "GET") == 0 &&
	    strcmp(req->path, "/api/events") == 0) {
		sse_handle(req);
		return;
	}
	if (strcmp(req->path, "/mcp") == 0) {
		mcp_handle(req);
		return;
	}
	if (strncmp(req->path, "/.well-known/oauth-protected-resource",
	    37) == 0) {
		mcp_wellknown(req);
		return;
	}
	/* Everything outside the API is the web panel. */
	if (strncmp(req->path, "/api/", 5) != 0 &&
	    strcmp(req->path, "/api") != 0 &&
	    strcmp(req->path, "/healthz") != 0) {
		static_serve(req);
		return;
	}
	if (strncmp(req->path, "/api/files/", 11) == 0) {
		files_handle(req);
		return;
	}
	is_get = strcmp(req->method, "GET") == 0 ||
	    strcmp(req->method, "HEAD") == 0;
	allow[0] = '\0';
	for (r = api_routes; r->path != NULL; r++) {
		if (!api_path_match(r->path, req->path))
			continue;
		known = 1;
		if (strcmp(r->method, req->method) == 0 ||
		    (is_get && strcmp(r->method, "GET") == 0))
			break;
		snprintf(allow + strlen(allow), sizeof(allow) - strlen(allow),
		    "%s%s", allow[0] ? ", " : "", r->method);
	}
	if (r->path == NULL) {
		char hdr[96];

		if (!known) {
			http_reply_error(req, 404, ERR_NOT_FOUND,
			    "no such endpoint", NULL);
			return;
		}
		snprintf(hdr, sizeof(hdr), "Allow: %s\r\n", allow);
		http_reply_error(req, 405, "method_not_allowed",
		    "method not allowed here", hdr);
		return;
	}

	/* A request without a body: printed straight, no tree. */
	if (r->body == NULL && r->prepare == NULL &&
	    strcmp(r->op, MSG_LOGIN) != 0 && strcmp(r->op, MSG_HEALTH) != 0) {
		api_send_text(req, r);
		return;
	}
	obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(r->op));
	if ((r->body != NULL && api_take_body(req, r, obj, &body) == -1) ||
	    (r->prepare != NULL && r->prepare(req, body, obj, &fd) == -1)) {
		json_object_put(body);
		json_object_put(obj);
		return;
	}
	json_object_put(body);
	if (strcmp(r->op, MSG_LOGIN) == 0 || strcmp(r->op, MSG_HEALTH) == 0)
		json_object_object_add(obj, "request_id",
		    json_object_new_string(req->request_id));
	/* The client's address: for the rate limit and refusal records. */
	if (strcmp(r->op, MSG_HEALTH) != 0)
		json_object_object_add(obj, "client",
		    json_object_new_string(req->peer));
	if (strcmp(r->op, MSG_LOGIN) != 0 && strcmp(r->op, MSG_HEALTH) != 0)
		api_add_auth(req, obj);
	api_send(req, r, obj, fd);
}

/*
 * A new call of route r pending on req, with brokerd's peer in *broker;
 * NULL when brokerd is unreachable, and then req is answered.
 */
static struct api_call *
api_pending_new(struct http_request *req, const struct api_route *r,
    struct ipc_peer **broker)
{
	struct api_call	*c;

	if ((*broker = ipc_link_peer(api_broker)) == NULL) {
		if (strcmp(r->op, MSG_HEALTH) == 0)
			api_healthz_down(req, "brokerd is unreachable");
		else
			http_reply_error(req, 503, ERR_UNAVAILABLE,
			    "brokerd is unreachable", NULL);
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("%s", __func__);
	c->req = req;
	c->route = r;
	req->pending = c;
	return c;
}

/* The request of c could not be sent: unless its callback ran, a 503. */
static void
api_pending_failed(struct http_request *req, struct api_call *c)
{
	/* The link died under us; the callback did not run. */
	if (req->pending == c) {
		req->pending = NULL;
		free(c);
		http_reply_error(req, 503, ERR_UNAVAILABLE,
		    "brokerd is unreachable", NULL);
	}
}

/*
 * Send a route's request to brokerd (takes obj and fd); the reply comes
 * back through api_broker_reply.
 */
static void
api_send(struct http_request *req, const struct api_route *r,
    struct json_object *obj, int fd)
{
	struct ipc_peer	*broker;
	struct api_call	*c;
	int		 timeout;

	/* What goes to brokerd must fit one IPC message. */
	if (strlen(json_object_to_json_string_ext(obj,
	    JSON_C_TO_STRING_PLAIN)) > IPC_MAX_MSG - 512) {
		json_object_put(obj);
		if (fd != -1)
			close(fd);
		http_reply_error(req, 413, ERR_TOO_LARGE, "the request's fields "
		    "are too large (send long input as \"stdin\")", NULL);
		return;
	}
	timeout = strcmp(r->op, MSG_HEALTH) == 0 ? API_HEALTH_TIMEOUT_MS :
	    strcmp(r->op, MSG_RUN) == 0 ? API_RUN_TIMEOUT_MS :
	    API_BROKER_TIMEOUT_MS;
	if ((c = api_pending_new(req, r, &broker)) == NULL) {
		json_object_put(obj);
		if (fd != -1)
			close(fd);
		return;
	}
	if (ipc_request(broker, obj, fd != -1 ? &fd : NULL, fd != -1 ? 1 : 0,
	    timeout, api_broker_reply, c) == -1)
		api_pending_failed(req, c);
	if (fd != -1)
		close(fd);	/* ipc_send keeps its own dup */
}

/* The members of a request printed by hand (api_send_text). */
static char	api_text[IPC_MAX_MSG - 512];
static size_t	api_text_len;
static int	api_text_full;

/* Append n bytes to api_text (past its end: full, nothing added). */
static void
api_text_add(const char *s, size_t n)
{
	if (api_text_full || n > sizeof(api_text) - api_text_len) {
		api_text_full = 1;
		return;
	}
	memcpy(api_text + api_text_len, s, n);
	api_text_len += n;
}

/* Append "key":"value", the value escaped as JSON, after a comma. */
static void
api_text_member(const char *key, const char *v, int comma)
{
	static const char	hex[] = "0123456789abcdef";
	char			esc[6] = { '\\', 'u', '0', '0', 0, 0 };
	const char		*run;

	if (comma)
		api_text_add(",", 1);
	api_text_add("\"", 1);
	api_text_add(key, strlen(key));
	api_text_add("\":\"", 3);
	for (run = v; *v != '\0'; v++) {
		unsigned char	c = *v;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		api_text_add(run, v - run);
		run = v + 1;
		if (c == '"' || c == '\\') {
			esc[1] = c;
			api_text_add(esc, 2);
			esc[1] = 'u';
		} else {
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 0xf];
			api_text_add(esc, 6);
		}
	}
	api_text_add(run, v - run);
	api_text_add("\"", 1);
}

/*
 * Send a route's request without a body, printed straight into one
 * buffer: the members api_add_auth and the client address make for the
 * others, with no json-c tree built and printed twice per request.
 */
static void
api_send_text(struct http_request *req, const struct api_route *r)
{
	struct ipc_peer	*broker;
	struct api_call	*c;
	const char	*h;
	char		 cookie[512];
	int		 n = 0;

	api_text_len = 0;
	api_text_full = 0;
	api_text_member("request_id", req->request_id, 0);
	api_text_member("client", req->peer, 1);
	api_text_add(",\"auth\":{", 9);
	if (http_cookie(req, API_COOKIE, cookie, sizeof(cookie)) == 0 &&
	    cookie[0] != '\0')
		api_text_member("cookie", cookie, n++ > 0);
	if ((h = http_header(req, "Authorization")) != NULL &&
	    strncasecmp(h, "Bearer ", 7) == 0) {
		h += 7;
		while (*h == ' ')
			h++;
		api_text_member("bearer", h, n++ > 0);
	}
	if ((h = http_header(req, "X-CSRF-Token")) != NULL)
		api_text_member("csrf", h, n++ > 0);
	api_text_add("}", 1);
	/* What goes to brokerd must fit one IPC message. */
	if (api_text_full) {
		http_reply_error(req, 413, ERR_TOO_LARGE, "the request's fields "
		    "are too large (send long input as \"stdin\")", NULL);
		return;
	}
	if ((c = api_pending_new(req, r, &broker)) == NULL)
		return;
	if (ipc_request_text(broker, r->op, api_text, api_text_len,
	    API_BROKER_TIMEOUT_MS, api_broker_reply, c) == -1)
		api_pending_failed(req, c);
}

struct ipc_peer *
api_broker_peer(void)
{
	return ipc_link_peer(api_broker);
}

/* Remember the configuration and the link to brokerd. */
void
api_init(struct event_base *base, struct config *conf, struct ipc_link *l)
{
	api_conf = conf;
	api_broker = l;
}
