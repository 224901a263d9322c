/*
 * The HTTP API: a table of routes, each turned into one brokerd request
 * that carries the raw credentials of the HTTP request. frontd checks only
 * the shape of what clients send; brokerd decides everything else.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "frontd.h"

#define API_BROKER_TIMEOUT_MS	5000
#define API_HEALTH_TIMEOUT_MS	900	/* /healthz answers within a second */
#define API_COOKIE		"hg_session"

/* A field a route's JSON body must have. */
struct api_field {
	const char		*name;
	enum json_type		 type;
};

struct api_route;
typedef void (*api_reply_fn)(struct http_request *, const struct api_route *,
    struct json_object *result);

struct api_route {
	const char		*method;
	const char		*path;
	const char		*op;		/* brokerd request type */
	const struct api_field	*body;		/* NULL: no body taken */
	int			 status;	/* on success */
	api_reply_fn		 reply;		/* NULL: result as it is */
};

static void	api_reply_healthz(struct http_request *,
		    const struct api_route *, struct json_object *);
static void	api_reply_login(struct http_request *,
		    const struct api_route *, struct json_object *);
static void	api_reply_logout(struct http_request *,
		    const struct api_route *, struct json_object *);

static const struct api_field api_login_body[] = {
	{ "username", json_type_string },
	{ "password", json_type_string },
	{ NULL, 0 }
};
static const struct api_field api_empty_body[] = {
	{ NULL, 0 }
};

static const struct api_route api_routes[] = {
	{ "GET", "/healthz", "health", NULL, 200, api_reply_healthz },
	{ "POST", "/api/login", "login", api_login_body, 200,
	    api_reply_login },
	{ "POST", "/api/logout", "logout", NULL, 200, api_reply_logout },
	{ "GET", "/api/status", "status", NULL, 200, NULL },
	{ "POST", "/api/session/tokens", "token_mint", api_empty_body, 201,
	    NULL },
	{ NULL, NULL, NULL, NULL, 0, NULL }
};

/* A request waiting for brokerd. */
struct api_call {
	struct http_request	*req;
	const struct api_route	*route;
};

static struct config	*api_conf;
static struct ipc_link	*api_broker;

/* The HTTP status for a brokerd error code. */
static int
api_status(const char *code)
{
	static const struct {
		const char	*code;
		int		 status;
	} map[] = {
		{ ERR_BAD_REQUEST, 400 }, { ERR_UNAUTHORIZED, 401 },
		{ ERR_FORBIDDEN, 403 }, { ERR_NOT_FOUND, 404 },
		{ ERR_CONFLICT, 409 }, { ERR_TOO_LARGE, 413 },
		{ ERR_RATE_LIMITED, 429 }, { ERR_UNAVAILABLE, 503 },
	};
	size_t	i;

	for (i = 0; code != NULL && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i].code, code) == 0)
			return map[i].status;
	return 500;
}

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
	struct json_object	*o, *sb, *be, *e;
	const char		*why = NULL;
	int			 sb_ok = 0, be_ok = 0;

	json_object_object_get_ex(res, "sandboxd", &sb);
	json_object_object_get_ex(res, "backend", &be);
	json_flag(sb, "ok", &sb_ok);
	json_flag(be, "ok", &be_ok);
	if (!sb_ok)
		why = json_str(sb, "reason") ? json_str(sb, "reason") :
		    "sandboxd is unreachable";
	else if (!be_ok)
		why = json_str(be, "reason") ? json_str(be, "reason") :
		    "the sandbox backend does not work";

	o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(why == NULL));
	json_object_object_add(o, "frontd", api_link(1, NULL));
	json_object_object_add(o, "brokerd", api_link(1, NULL));
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

/* Login: the cookie goes into Set-Cookie, never into the body. */
static void
api_reply_login(struct http_request *req, const struct api_route *r,
    struct json_object *res)
{
	struct json_object	*o;
	const char		*cookie;
	char			 hdr[512];
	int64_t			 max_age = 0;

	cookie = json_str(res, "cookie");
	json_int(res, "max_age", &max_age);
	if (cookie == NULL) {
		http_reply_error(req, 500, ERR_INTERNAL,
		    "brokerd sent no session", NULL);
		return;
	}
	snprintf(hdr, sizeof(hdr), "Set-Cookie: " API_COOKIE "=%s; Path=/; "
	    "Max-Age=%lld; HttpOnly; SameSite=Strict%s\r\n", cookie,
	    (long long)max_age, req->tls ? "; Secure" : "");
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

/* brokerd answered (or did not, m NULL): turn it into the HTTP reply. */
static void
api_broker_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	struct api_call		*c = arg;
	struct http_request	*req = c->req;
	const struct api_route	*r = c->route;
	struct json_object	*res, *err;
	const char		*code, *msg;
	char			 hdr[64];
	int64_t			 retry;

	free(c);
	req->pending = NULL;
	if (m == NULL) {
		if (strcmp(r->op, "health") == 0)
			api_healthz_down(req, "brokerd did not answer");
		else
			http_reply_error(req, 503, ERR_UNAVAILABLE,
			    "brokerd did not answer", NULL);
		return;
	}
	if (json_object_object_get_ex(m->obj, "error", &err)) {
		code = json_str(err, "code");
		msg = json_str(err, "message");
		hdr[0] = '\0';
		if (json_int(err, "retry_after", &retry) == 0)
			snprintf(hdr, sizeof(hdr), "Retry-After: %lld\r\n",
			    (long long)retry);
		http_reply_error(req, api_status(code),
		    code ? code : ERR_INTERNAL, msg ? msg : "error",
		    hdr[0] ? hdr : NULL);
		return;
	}
	if (!json_object_object_get_ex(m->obj, "result", &res) ||
	    !json_object_is_type(res, json_type_object)) {
		http_reply_error(req, 502, ERR_INTERNAL,
		    "malformed reply from brokerd", NULL);
		return;
	}
	if (r->reply != NULL)
		r->reply(req, r, res);
	else
		http_reply_json(req, r->status, json_object_get(res), NULL);
}

/* Add the raw credentials of req to a brokerd request. */
static void
api_add_auth(struct http_request *req, struct json_object *obj)
{
	struct json_object	*auth;
	const char		*h;
	char			 cookie[512];

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
 * Parse and check a route's JSON body, copying its fields into obj.
 * Returns 0, or -1 after answering 400.
 */
static int
api_take_body(struct http_request *req, const struct api_route *r,
    struct json_object *obj)
{
	const struct api_field	*f;
	struct json_object	*body, *v;
	struct json_tokener	*tok;
	char			 msg[128];

	if (req->body == NULL || req->body_len == 0) {
		if (r->body[0].name == NULL)
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
	for (f = r->body; f->name != NULL; f++) {
		if (!json_object_object_get_ex(body, f->name, &v) ||
		    !json_object_is_type(v, f->type)) {
			snprintf(msg, sizeof(msg), "\"%s\" is required and "
			    "must be a %s", f->name,
			    json_type_to_name(f->type));
			json_object_put(body);
			http_reply_error(req, 400, ERR_BAD_REQUEST, msg, NULL);
			return -1;
		}
		json_object_object_add(obj, f->name, json_object_get(v));
	}
	json_object_put(body);
	return 0;
}

/* Route one HTTP request. */
void
api_handle(struct http_request *req, void *arg)
{
	const struct api_route	*r;
	struct json_object	*obj;
	struct ipc_peer		*broker;
	struct api_call		*c;
	char			 allow[64];
	int			 is_get, known = 0, timeout;

	is_get = strcmp(req->method, "GET") == 0 ||
	    strcmp(req->method, "HEAD") == 0;
	allow[0] = '\0';
	for (r = api_routes; r->path != NULL; r++) {
		if (strcmp(r->path, req->path) != 0)
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

	obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(r->op));
	if (r->body != NULL && api_take_body(req, r, obj) == -1) {
		json_object_put(obj);
		return;
	}
	if (strcmp(r->op, "login") == 0)
		json_object_object_add(obj, "client",
		    json_object_new_string(req->peer));
	else if (strcmp(r->op, "health") != 0)
		api_add_auth(req, obj);

	timeout = strcmp(r->op, "health") == 0 ? API_HEALTH_TIMEOUT_MS :
	    API_BROKER_TIMEOUT_MS;
	if ((broker = ipc_link_peer(api_broker)) == NULL) {
		json_object_put(obj);
		if (strcmp(r->op, "health") == 0)
			api_healthz_down(req, "brokerd is unreachable");
		else
			http_reply_error(req, 503, ERR_UNAVAILABLE,
			    "brokerd is unreachable", NULL);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("%s", __func__);
	c->req = req;
	c->route = r;
	req->pending = c;
	if (ipc_request(broker, obj, NULL, 0, timeout, api_broker_reply,
	    c) == -1) {
		/* The link died under us; the callback did not run. */
		if (req->pending == c) {
			req->pending = NULL;
			free(c);
			http_reply_error(req, 503, ERR_UNAVAILABLE,
			    "brokerd is unreachable", NULL);
		}
	}
}

/* Remember the configuration and the link to brokerd. */
void
api_init(struct event_base *base, struct config *conf, struct ipc_link *l)
{
	api_conf = conf;
	api_broker = l;
}
