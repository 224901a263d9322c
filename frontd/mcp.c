/*
 * /mcp: the Model Context Protocol's Streamable HTTP transport, JSON-RPC
 * 2.0 on one endpoint. Two eras share it: the handshake revisions
 * (2025-06-18, 2025-11-25: initialize, an Mcp-Session-Id, a GET stream,
 * DELETE) and the stateless 2026-07-28 (every request carries its version
 * in _meta, server/discover, subscriptions/listen). Every request is
 * authorized by brokerd from its bearer token alone; the streams are in
 * mcp_stream.c, the tools in mcp_tools.c.
 */
#include <sys/types.h>
#include <sys/random.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <event2/buffer.h>

#include "frontd.h"

#define MCP_MAX_SESSIONS	4096
#define MCP_MAX_TOKEN_SESSIONS	64	/* of one token */
#define MCP_SESSION_IDLE_MS	(24LL * 3600 * 1000)	/* then forgotten */
#define MCP_BROKER_TIMEOUT_MS	5000
#define MCP_LIST_TTL_MS		3600000	/* the tools never change */
#define MCP_MODERN		"2026-07-28"
#define MCP_META_VERSION	"io.modelcontextprotocol/protocolVersion"
#define MCP_META_CAPS		"io.modelcontextprotocol/clientCapabilities"
#define MCP_META_SERVER		"io.modelcontextprotocol/serverInfo"

/* The handshake revisions, newest first: what initialize may settle on. */
static const char *const mcp_legacy[] = { "2025-11-25", "2025-06-18", NULL };

/* A session of the handshake revisions, bound to the token that made it. */
struct mcp_session {
	char			 id[MCP_SID_MAX];
	char			 token[65];	/* SHA-256 of the bearer */
	char			 version[16];
	int			 subscribed;	/* to the prompt resource */
	int			 revoked;	/* its token: 401, slot free */
	int64_t			 used;		/* monotonic ms */
};


/*
 * A fixed table (id "" when free): no allocation per session, and the
 * least recently used one makes room when it is full.
 */
static struct mcp_session	 mcp_sessions[MCP_MAX_SESSIONS];
/* In a fleet, this host's id: the prefix of the session ids it mints. */
static char			 mcp_host_id[33];
static char			*mcp_public_url;	/* HOSTGATE_PUBLIC_URL */

static void	mcp_dispatch(struct mcp_call *);
static struct json_object *mcp_parse_len(const char *, size_t);
static struct mcp_session *mcp_session_byid(const char *);

/* Whether s is one of the handshake revisions. */
static int
mcp_legacy_version(const char *s)
{
	size_t	i;

	for (i = 0; s != NULL && mcp_legacy[i] != NULL; i++)
		if (strcmp(s, mcp_legacy[i]) == 0)
			return 1;
	return 0;
}

/* Every revision served, for an unsupported-version error. */
static struct json_object *
mcp_supported(void)
{
	struct json_object	*a;
	size_t			 i;

	a = json_object_new_array();
	json_object_array_add(a, json_object_new_string(MCP_MODERN));
	for (i = 0; mcp_legacy[i] != NULL; i++)
		json_object_array_add(a, json_object_new_string(mcp_legacy[i]));
	return a;
}

/* The session of id made with the token hashed to token, or NULL. */
static struct mcp_session *
mcp_session_find(const char *id, const char *token)
{
	struct mcp_session	*s;
	int64_t			 now = now_mono_ms();
	size_t			 i;

	for (i = 0; i < MCP_MAX_SESSIONS; i++) {
		s = &mcp_sessions[i];
		if (s->id[0] == '\0' || strcmp(s->id, id) != 0)
			continue;
		if (now - s->used > MCP_SESSION_IDLE_MS) {
			s->id[0] = '\0';	/* forgotten: 404 */
			return NULL;
		}
		if (strcmp(s->token, token) != 0)
			return NULL;
		if (!s->revoked)
			s->used = now;
		return s;
	}
	return NULL;
}

/*
 * In a fleet (a PostgreSQL store), session ids are "HOST.HEX" so that the
 * balancer sends a session's requests to the host that holds it.
 */
void
mcp_set_host(const char *host_id)
{
	snprintf(mcp_host_id, sizeof(mcp_host_id), "%s", host_id);
}

/* The address clients use (HOSTGATE_PUBLIC_URL), for the URLs built. */
void
mcp_set_public_url(const char *url)
{
	free(mcp_public_url);
	mcp_public_url = NULL;
	if (url != NULL && (mcp_public_url = strdup(url)) == NULL)
		fatal("%s", __func__);
}

/* Whether the session called id subscribed to the prompt resource. */
int
mcp_session_subscribed(const char *id)
{
	struct mcp_session	*s = mcp_session_byid(id);

	return s != NULL && s->subscribed;
}

/*
 * Forget the sessions made with the token hashed to token (revoked): only
 * their id and token stay, so that a request naming one gets the 401 of
 * a revoked token (not a 404 that tells the client to initialize again),
 * and their slots are the first a new session takes. Their streams, of
 * the same token, are ending already (mcp_deliver).
 */
void
mcp_session_forget_token(const char *token)
{
	struct mcp_session	*s;
	size_t			 i;

	for (i = 0; i < MCP_MAX_SESSIONS; i++) {
		s = &mcp_sessions[i];
		if (s->id[0] == '\0' || strcmp(s->token, token) != 0)
			continue;
		s->version[0] = '\0';
		s->subscribed = 0;
		s->revoked = 1;
	}
}

/* The session called id, whatever its token, or NULL. */
static struct mcp_session *
mcp_session_byid(const char *id)
{
	size_t	i;

	for (i = 0; id[0] != '\0' && i < MCP_MAX_SESSIONS; i++)
		if (strcmp(mcp_sessions[i].id, id) == 0)
			return &mcp_sessions[i];
	return NULL;
}

/*
 * A new session for a token, in a free slot or the least recently used
 * one; past MCP_MAX_TOKEN_SESSIONS of its own, a token's oldest, so that
 * one agent that keeps initializing cannot push out the others'.
 */
static struct mcp_session *
mcp_session_new(const char *token, const char *version)
{
	struct mcp_session	*s = &mcp_sessions[0], *mine = NULL;
	struct mcp_session	*empty = NULL;
	unsigned char		 rnd[16];
	size_t			 i, n = 0, off;

	for (i = 0; i < MCP_MAX_SESSIONS; i++) {
		if (mcp_sessions[i].id[0] == '\0' || mcp_sessions[i].revoked) {
			if (empty == NULL)
				empty = &mcp_sessions[i];
			continue;
		}
		if (mcp_sessions[i].used < s->used || s->id[0] == '\0')
			s = &mcp_sessions[i];
		if (strcmp(mcp_sessions[i].token, token) == 0) {
			n++;
			if (mine == NULL || mcp_sessions[i].used < mine->used)
				mine = &mcp_sessions[i];
		}
	}
	if (n >= MCP_MAX_TOKEN_SESSIONS)
		s = mine;
	else if (empty != NULL)
		s = empty;
	mcp_stream_close_session(s->id, "session forgotten");
	memset(s, 0, sizeof(*s));
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		fatal("getrandom");
	off = mcp_host_id[0] != '\0' ? (size_t)snprintf(s->id,
	    sizeof(s->id), "%s.", mcp_host_id) : 0;
	for (i = 0; i < sizeof(rnd); i++)
		snprintf(s->id + off + 2 * i, 3, "%02x", rnd[i]);
	snprintf(s->token, sizeof(s->token), "%s", token);
	snprintf(s->version, sizeof(s->version), "%s", version);
	s->used = now_mono_ms();
	return s;
}

/* The bearer token of a request, or NULL: the only credential of /mcp. */
static const char *
mcp_bearer(struct http_request *req)
{
	const char	*h;

	if ((h = http_header(req, "Authorization")) == NULL ||
	    strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	for (h += 7; *h == ' '; h++)
		;
	return *h != '\0' ? h : NULL;
}

/*
 * The scheme://host[:port] of the URLs handed to a client (it goes into a
 * header and a document): HOSTGATE_PUBLIC_URL when set, else the address
 * the client reached (http_base_url).
 */
static void
mcp_base(struct http_request *req, char *out, size_t outsz)
{
	if (mcp_public_url != NULL)
		snprintf(out, outsz, "%s", mcp_public_url);
	else
		http_base_url(req, out, outsz);
}

/* Append the raw credentials /mcp forwards: the bearer token alone. */
static void
mcp_add_auth(struct mcp_call *c, struct json_object *obj)
{
	struct json_object	*auth;

	json_object_object_add(obj, "request_id",
	    json_object_new_string(c->req->request_id));
	json_object_object_add(obj, "client",
	    json_object_new_string(c->req->peer));
	auth = json_object_new_object();
	json_object_object_add(auth, "bearer",
	    json_object_new_string(mcp_bearer(c->req)));
	json_object_object_add(obj, "auth", auth);
}

/*
 * Write a JSON-RPC message as the HTTP reply: the id is spliced in as the
 * client wrote it (a huge integer stays exact), member is "result" or
 * "error" (val taken), as JSON or as one SSE event.
 */
static void
mcp_reply(struct http_request *req, int status, const char *id, int sse,
    const char *member, struct json_object *val, const char *extra)
{
	struct evbuffer	*b;
	char		*text;
	size_t		 len;

	if ((b = evbuffer_new()) == NULL)
		fatal("%s", __func__);
	if (sse)
		evbuffer_add_printf(b, "event: message\ndata: ");
	evbuffer_add_printf(b, "{\"jsonrpc\":\"2.0\",");
	if (id != NULL)
		evbuffer_add_printf(b, "\"id\":%s,", id);
	evbuffer_add_printf(b, "\"%s\":%s}", member,
	    json_object_to_json_string_ext(val, JSON_C_TO_STRING_PLAIN));
	if (sse)
		evbuffer_add_printf(b, "\n\n");
	json_object_put(val);
	len = evbuffer_get_length(b);
	text = (char *)evbuffer_pullup(b, -1);
	http_reply(req, status, sse ? "text/event-stream" :
	    "application/json", text, len, extra);
	evbuffer_free(b);
}

/* A JSON-RPC error object {code, message[, data]} (data taken). */
static struct json_object *
mcp_error_obj(int code, const char *message, struct json_object *data)
{
	struct json_object	*e;

	e = json_object_new_object();
	json_object_object_add(e, "code", json_object_new_int(code));
	json_object_object_add(e, "message", json_object_new_string(message));
	if (data != NULL)
		json_object_object_add(e, "data", data);
	return e;
}

/* Answer a request that has no call yet with a JSON-RPC error. */
static void
mcp_fail(struct http_request *req, int status, const char *id, int code,
    const char *message, struct json_object *data)
{
	mcp_reply(req, status, id, 0, "error", mcp_error_obj(code, message,
	    data), NULL);
}

/* 401 with the challenge that names the protected resource metadata. */
static void
mcp_unauthorized(struct http_request *req, const char *id,
    const char *message)
{
	char	hdr[512], base[300];

	mcp_base(req, base, sizeof(base));
	snprintf(hdr, sizeof(hdr), "WWW-Authenticate: Bearer "
	    "resource_metadata=\"%s/.well-known/oauth-protected-resource"
	    "/mcp\"\r\n", base);
	mcp_reply(req, 401, id, 0, "error", mcp_error_obj(MCP_INVALID_REQUEST,
	    message, NULL), hdr);
}

/* Free a call (its request has been answered). */
void
mcp_call_free(struct mcp_call *c)
{
	json_object_put(c->msg);
	free(c->id);
	free(c);
}

/* Whether a call may report bad tool arguments as a tool result. */
int
mcp_call_lenient(struct mcp_call *c)
{
	/* 2025-06-18 made them protocol errors; later revisions, results. */
	return strcmp(c->version, "2025-06-18") != 0;
}

/* Answer a call with a result (taken): the revision's common members. */
void
mcp_call_result(struct mcp_call *c, struct json_object *res)
{
	struct json_object	*meta, *info;
	char			 hdr[96];

	hdr[0] = '\0';
	if (c->modern) {
		json_object_object_add(res, "resultType",
		    json_object_new_string("complete"));
		if (!json_object_object_get_ex(res, "_meta", &meta)) {
			meta = json_object_new_object();
			json_object_object_add(res, "_meta", meta);
		}
		info = json_object_new_object();
		json_object_object_add(info, "name",
		    json_object_new_string("hostgate"));
		json_object_object_add(info, "version",
		    json_object_new_string(HG_VERSION));
		json_object_object_add(meta, MCP_META_SERVER, info);
	}
	if (c->new_session[0] != '\0')
		snprintf(hdr, sizeof(hdr), "Mcp-Session-Id: %s\r\n",
		    c->new_session);
	mcp_reply(c->req, 200, c->id, c->sse, "result", res,
	    hdr[0] ? hdr : NULL);
	mcp_call_free(c);
}

/* Answer a call with a JSON-RPC error (data taken). */
void
mcp_call_error(struct mcp_call *c, int code, const char *message,
    struct json_object *data)
{
	int	status = 200;

	/* 2026-07-28 gives these their HTTP status; earlier ones, 200. */
	if (c->modern && code == MCP_METHOD_NOT_FOUND)
		status = 404;
	/* What has no JSON-RPC answer (a notification, GET, DELETE) fails. */
	if (c->id == NULL)
		status = code == MCP_INTERNAL_ERROR ? 503 : 400;
	mcp_reply(c->req, status, c->id, c->sse, "error",
	    mcp_error_obj(code, message, data), NULL);
	mcp_call_free(c);
}

/*
 * Answer a call whose brokerd request failed at the protocol level: no
 * answer (env NULL), or a refusal of the token (401 as for a missing
 * one). Returns 1 when answered, 0 when env is a reply the caller handles.
 */
int
mcp_call_failed(struct mcp_call *c, struct json_object *env)
{
	struct json_object	*err;
	const char		*code, *msg;

	if (env == NULL) {
		mcp_call_error(c, MCP_INTERNAL_ERROR, "brokerd did not answer",
		    NULL);
		return 1;
	}
	if (json_str(env, "user") != NULL)
		snprintf(c->req->user, sizeof(c->req->user), "%s",
		    json_str(env, "user"));
	if (!json_object_object_get_ex(env, "error", &err))
		return 0;
	code = json_str(err, "code");
	msg = json_str(err, "message");
	if (code != NULL && strcmp(code, ERR_UNAUTHORIZED) == 0) {
		mcp_unauthorized(c->req, c->id, msg ? msg : "unauthorized");
		mcp_call_free(c);
		return 1;
	}
	return 0;
}

/* mcp_call_failed for a reply (m NULL: none). */
int
mcp_call_refused(struct mcp_call *c, struct ipc_msg *m)
{
	return mcp_call_failed(c, m != NULL ? m->obj : NULL);
}

/* A brokerd request of a call in flight. */
struct mcp_pending {
	struct mcp_call		*c;
	mcp_broker_cb		 cb;
	void			*arg;
};

/* brokerd answered a call's request (or did not, m NULL). */
static void
mcp_broker_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	struct mcp_pending	*pd = arg;
	struct mcp_call		*c = pd->c;
	mcp_broker_cb		 cb = pd->cb;
	void			*cbarg = pd->arg;

	free(pd);
	c->pending--;
	if (c->pending == 0)
		c->req->pending = NULL;
	cb(c, m, cbarg);
}

/*
 * Send brokerd a request for a call (obj and fd taken); cb gets the reply,
 * or NULL when brokerd cannot be reached or did not answer.
 */
void
mcp_broker(struct mcp_call *c, struct json_object *obj, int fd, int timeout,
    mcp_broker_cb cb, void *arg)
{
	struct ipc_peer		*broker;
	struct mcp_pending	*pd;

	mcp_add_auth(c, obj);
	if (strlen(json_object_to_json_string_ext(obj,
	    JSON_C_TO_STRING_PLAIN)) > IPC_MAX_MSG - 512 ||
	    (broker = api_broker_peer()) == NULL) {
		json_object_put(obj);
		if (fd != -1)
			close(fd);
		cb(c, NULL, arg);
		return;
	}
	if ((pd = calloc(1, sizeof(*pd))) == NULL)
		fatal("%s", __func__);
	pd->c = c;
	pd->cb = cb;
	pd->arg = arg;
	c->pending++;
	c->req->pending = c;
	/* On failure ipc_request has not kept the callback: run it. */
	if (ipc_request(broker, obj, fd != -1 ? &fd : NULL, fd != -1 ? 1 : 0,
	    timeout > 0 ? timeout : MCP_BROKER_TIMEOUT_MS, mcp_broker_reply,
	    pd) == -1)
		mcp_broker_reply(NULL, NULL, pd);
	if (fd != -1)
		close(fd);	/* ipc_send keeps its own dup */
}

/* The result object of a reply, a raw (PM_RAW) one parsed; NULL if none. */
struct json_object *
mcp_result(struct ipc_msg *m)
{
	struct json_object	*res;

	if (m->body != NULL)
		return mcp_parse_len(m->body, m->bodylen);
	if (!json_object_object_get_ex(m->obj, "result", &res) ||
	    !json_object_is_type(res, json_type_object))
		return NULL;
	return json_object_get(res);
}

/* 2026-07-28's CacheableResult members: how long a client may keep it. */
static void
mcp_cacheable(struct json_object *res, int ttl_ms, const char *scope)
{
	json_object_object_add(res, "ttlMs", json_object_new_int(ttl_ms));
	json_object_object_add(res, "cacheScope",
	    json_object_new_string(scope));
}

/* The prompt resource's one entry for resources/list. */
static struct json_object *
mcp_prompt_resource(void)
{
	struct json_object	*r;

	r = json_object_new_object();
	json_object_object_add(r, "uri", json_object_new_string(MCP_PROMPT_URI));
	json_object_object_add(r, "name", json_object_new_string("sandbox-prompt"));
	json_object_object_add(r, "title",
	    json_object_new_string("The sandbox prompt"));
	json_object_object_add(r, "description", json_object_new_string(
	    "What this session's commands may do now (mode, permission, "
	    "expiry): the text of GET /api/sandbox/prompt, the same as the "
	    "server instructions. It changes when an admin changes the "
	    "session's mode or permission."));
	json_object_object_add(r, "mimeType", json_object_new_string(
	    "text/plain"));
	return r;
}

/* The capabilities hostgate declares. */
static struct json_object *
mcp_capabilities(struct mcp_call *c)
{
	struct json_object	*caps, *o;

	caps = json_object_new_object();
	o = json_object_new_object();
	json_object_object_add(o, "listChanged", json_object_new_boolean(0));
	json_object_object_add(caps, "tools", o);
	o = json_object_new_object();
	json_object_object_add(o, "listChanged", json_object_new_boolean(0));
	if (!c->modern)
		json_object_object_add(o, "subscribe",
		    json_object_new_boolean(1));
	json_object_object_add(caps, "resources", o);
	/* Log notifications carry mode changes on the GET stream. */
	if (!c->modern)
		json_object_object_add(caps, "logging", json_object_new_object());
	return caps;
}

/* The prompt came for initialize, server/discover or resources/read. */
static void
mcp_prompt_done(struct mcp_call *c, struct ipc_msg *m, void *arg)
{
	struct json_object	*res, *pres = NULL, *o, *a;
	struct json_object	*err;
	struct mcp_session	*s;
	const char		*text = NULL;

	if (mcp_call_refused(c, m))
		return;
	/* The docker runtime has no prompt: the instructions are left out. */
	if (!json_object_object_get_ex(m->obj, "error", &err)) {
		pres = mcp_result(m);
		text = json_str(pres, "prompt");
	} else if (strcmp(c->method, "resources/read") == 0 ||
	    json_str(err, "code") == NULL ||
	    strcmp(json_str(err, "code"), ERR_CONFLICT) != 0) {
		mcp_call_error(c, MCP_INTERNAL_ERROR, json_str(err, "message") ?
		    json_str(err, "message") : "no prompt", NULL);
		return;
	}
	res = json_object_new_object();
	if (strcmp(c->method, "resources/read") == 0) {
		o = json_object_new_object();
		json_object_object_add(o, "uri",
		    json_object_new_string(MCP_PROMPT_URI));
		json_object_object_add(o, "mimeType",
		    json_object_new_string("text/plain"));
		json_object_object_add(o, "text",
		    json_object_new_string(text ? text : ""));
		a = json_object_new_array();
		json_object_array_add(a, o);
		json_object_object_add(res, "contents", a);
		if (c->modern)
			mcp_cacheable(res, 0, "private");
	} else if (strcmp(c->method, "server/discover") == 0) {
		a = mcp_supported();
		json_object_object_add(res, "supportedVersions", a);
		json_object_object_add(res, "capabilities",
		    mcp_capabilities(c));
		if (text != NULL)
			json_object_object_add(res, "instructions",
			    json_object_new_string(text));
		/* Per token and changing with the mode: not to be cached. */
		mcp_cacheable(res, 0, "private");
	} else {
		/* initialize: the session starts with its answer. */
		s = mcp_session_new(c->token, c->version);
		memcpy(c->new_session, s->id, sizeof(c->new_session));
		json_object_object_add(res, "protocolVersion",
		    json_object_new_string(c->version));
		json_object_object_add(res, "capabilities",
		    mcp_capabilities(c));
		o = json_object_new_object();
		json_object_object_add(o, "name",
		    json_object_new_string("hostgate"));
		json_object_object_add(o, "title",
		    json_object_new_string("hostgate"));
		json_object_object_add(o, "version",
		    json_object_new_string(HG_VERSION));
		json_object_object_add(res, "serverInfo", o);
		if (text != NULL)
			json_object_object_add(res, "instructions",
			    json_object_new_string(text));
		log_info("%s: MCP session %.8s (%s) for %s", c->req->peer,
		    s->id, s->version, c->req->user);
	}
	json_object_put(pres);
	mcp_call_result(c, res);
}

/* Send brokerd the prompt request of a call. */
static void
mcp_ask_prompt(struct mcp_call *c)
{
	struct json_object	*obj;

	obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(MSG_PROMPT));
	mcp_broker(c, obj, -1, 0, mcp_prompt_done, NULL);
}

/* Ask brokerd who the caller is (the check of a call without a tool). */
static void
mcp_ask_whoami(struct mcp_call *c, mcp_broker_cb cb)
{
	struct json_object	*obj;

	/* events_subscribe with no Last-Event-ID: {user, session}, no ring. */
	obj = json_object_new_object();
	json_object_object_add(obj, "type",
	    json_object_new_string(MSG_EVENTS_SUBSCRIBE));
	json_object_object_add(obj, "last_event_id", json_object_new_int(0));
	mcp_broker(c, obj, -1, 0, cb, NULL);
}

/* brokerd accepted the caller of a call answered by frontd alone. */
static void
mcp_checked(struct mcp_call *c, struct ipc_msg *m, void *arg)
{
	struct json_object	*res, *a;
	struct mcp_session	*s;

	if (mcp_call_refused(c, m))
		return;
	if (json_object_object_get_ex(m->obj, "error", NULL)) {
		mcp_call_error(c, MCP_INTERNAL_ERROR, "brokerd refused the "
		    "request", NULL);
		return;
	}
	if (c->id == NULL || strcmp(c->method, "DELETE") == 0) {
		/* A notification or a response: accepted, no body. */
		if (strcmp(c->method, "DELETE") == 0) {
			mcp_stream_close_session(c->session, "deleted");
			if ((s = mcp_session_byid(c->session)) != NULL)
				s->id[0] = '\0';
			http_reply(c->req, 200, NULL, NULL, 0, NULL);
		} else
			http_reply(c->req, 202, NULL, NULL, 0, NULL);
		mcp_call_free(c);
		return;
	}
	res = json_object_new_object();
	if (strcmp(c->method, "tools/list") == 0) {
		json_object_object_add(res, "tools", mcp_tools_list());
		if (c->modern)
			mcp_cacheable(res, MCP_LIST_TTL_MS, "public");
	} else if (strcmp(c->method, "resources/list") == 0) {
		a = json_object_new_array();
		json_object_array_add(a, mcp_prompt_resource());
		json_object_object_add(res, "resources", a);
		if (c->modern)
			mcp_cacheable(res, MCP_LIST_TTL_MS, "public");
	} else if (strcmp(c->method, "resources/templates/list") == 0) {
		json_object_object_add(res, "resourceTemplates",
		    json_object_new_array());
		if (c->modern)
			mcp_cacheable(res, MCP_LIST_TTL_MS, "public");
	} else if (strcmp(c->method, "resources/subscribe") == 0 ||
	    strcmp(c->method, "resources/unsubscribe") == 0) {
		if ((s = mcp_session_byid(c->session)) != NULL)
			s->subscribed = strcmp(c->method,
			    "resources/subscribe") == 0;
	}
	/* ping, logging/setLevel: an empty result. */
	mcp_call_result(c, res);
}

/* A string member of params, or NULL. */
static const char *
mcp_param_str(struct mcp_call *c, const char *name)
{
	return json_str(c->params, name);
}

/* Route a checked call to its method. */
static void
mcp_dispatch(struct mcp_call *c)
{
	struct json_object	*args, *filter, *subs, *v;
	const char		*name, *uri;
	size_t			 i;

	if (c->id == NULL) {
		/* Notifications: initialized, cancelled, ... all accepted. */
		mcp_ask_whoami(c, mcp_checked);
		return;
	}
	if (strcmp(c->method, "tools/call") == 0) {
		if ((name = mcp_param_str(c, "name")) == NULL) {
			mcp_call_error(c, MCP_INVALID_PARAMS, "\"name\" is "
			    "required and must be a string", NULL);
			return;
		}
		if (json_object_object_get_ex(c->params, "arguments", &args) &&
		    args != NULL && !json_object_is_type(args,
		    json_type_object)) {
			mcp_call_error(c, MCP_INVALID_PARAMS, "\"arguments\" "
			    "must be an object", NULL);
			return;
		}
		if (args == NULL || !json_object_is_type(args,
		    json_type_object))
			args = NULL;
		if (mcp_tools_call(c, name, args) == -1) {
			char	msg[200];

			snprintf(msg, sizeof(msg), "Unknown tool: %.128s", name);
			mcp_call_error(c, MCP_INVALID_PARAMS, msg, NULL);
		}
		return;
	}
	if (strcmp(c->method, "tools/list") == 0 ||
	    strcmp(c->method, "resources/list") == 0 ||
	    strcmp(c->method, "resources/templates/list") == 0 ||
	    (!c->modern && (strcmp(c->method, "ping") == 0 ||
	    strcmp(c->method, "logging/setLevel") == 0))) {
		mcp_ask_whoami(c, mcp_checked);
		return;
	}
	if (strcmp(c->method, "resources/read") == 0 ||
	    (!c->modern && (strcmp(c->method, "resources/subscribe") == 0 ||
	    strcmp(c->method, "resources/unsubscribe") == 0))) {
		if ((uri = mcp_param_str(c, "uri")) == NULL) {
			mcp_call_error(c, MCP_INVALID_PARAMS, "\"uri\" is "
			    "required and must be a string", NULL);
			return;
		}
		if (strcmp(uri, MCP_PROMPT_URI) != 0) {
			/* Resource not found: -32002 before 2026-07-28. */
			mcp_call_error(c, c->modern ? MCP_INVALID_PARAMS :
			    MCP_RESOURCE_NOT_FOUND, "Resource not found", NULL);
			return;
		}
		if (strcmp(c->method, "resources/read") == 0)
			mcp_ask_prompt(c);
		else
			mcp_ask_whoami(c, mcp_checked);
		return;
	}
	if (c->modern && strcmp(c->method, "server/discover") == 0) {
		mcp_ask_prompt(c);
		return;
	}
	if (c->modern && strcmp(c->method, "subscriptions/listen") == 0) {
		if (json_object_object_get_ex(c->params, "notifications",
		    &filter) && filter != NULL &&
		    json_object_is_type(filter, json_type_object) &&
		    json_object_object_get_ex(filter, "resourceSubscriptions",
		    &subs) && json_object_is_type(subs, json_type_array))
			for (i = 0; i < json_object_array_length(subs); i++) {
				v = json_object_array_get_idx(subs, i);
				if (json_object_is_type(v, json_type_string) &&
				    strcmp(json_object_get_string(v),
				    MCP_PROMPT_URI) == 0)
					c->listen_prompt = 1;
			}
		mcp_ask_whoami(c, mcp_stream_open);
		return;
	}
	if (!c->modern && strcmp(c->method, "initialize") == 0) {
		mcp_ask_prompt(c);
		return;
	}
	mcp_call_error(c, MCP_METHOD_NOT_FOUND, "Method not found", NULL);
}

/* Parse len bytes of JSON text; NULL unless it is one whole value. */
static struct json_object *
mcp_parse_len(const char *s, size_t len)
{
	struct json_tokener	*tok;
	struct json_object	*o;

	if ((tok = json_tokener_new()) == NULL)
		fatal("%s", __func__);
	o = json_tokener_parse_ex(tok, s, len);
	if (o != NULL && json_tokener_get_parse_end(tok) != len) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

/*
 * The raw text of the top-level member "id" of the JSON object text
 * (already parsed, so valid JSON), copied; NULL when it has none.
 */
static char *
mcp_raw_id(const char *p, size_t len)
{
	const char		*end = p + len, *k, *v;
	struct json_object	*key;
	char			*out = NULL;
	int			 depth = 0, iskey;

	/* Walk the tokens, noting each key and value at depth 1. */
	while (p < end) {
		switch (*p) {
		case '{':
		case '[':
			depth++;
			p++;
			continue;
		case '}':
		case ']':
			depth--;
			p++;
			continue;
		case '"':
			break;
		default:
			p++;
			continue;
		}
		k = p;
		for (p++; p < end && *p != '"'; p++)
			if (*p == '\\')
				p++;
		p++;
		if (depth != 1)
			continue;
		/* A key is a string followed by ':'. */
		for (v = p; v < end && strchr(" \t\r\n", *v) != NULL; v++)
			;
		iskey = v < end && *v == ':';
		if (!iskey)
			continue;
		key = mcp_parse_len(k, p - k);
		if (key == NULL || strcmp(json_object_get_string(key),
		    "id") != 0 || json_object_get_string_len(key) != 2) {
			json_object_put(key);
			continue;
		}
		json_object_put(key);
		for (v++; v < end && strchr(" \t\r\n", *v) != NULL; v++)
			;
		/* The value: a string, or a scalar up to , or }. */
		k = v;
		if (v < end && *v == '"') {
			for (v++; v < end && *v != '"'; v++)
				if (*v == '\\')
					v++;
			v++;
		} else if (v < end && (*v == '{' || *v == '[')) {
			/* Not a valid id; its text does not matter. */
			free(out);
			if ((out = strdup("{}")) == NULL)
				fatal("%s", __func__);
			continue;
		} else
			while (v < end && strchr(",} \t\r\n", *v) == NULL)
				v++;
		free(out);
		if ((out = strndup(k, v - k)) == NULL)
			fatal("%s", __func__);
		p = v;
	}
	return out;
}

/* Whether a raw id is a JSON string or an integer (MCP's RequestId). */
static int
mcp_id_valid(const char *id)
{
	if (id[0] == '"')
		return 1;
	if (*id == '-')
		id++;
	return *id != '\0' && strspn(id, "0123456789") == strlen(id);
}

/* Whether an Accept header admits a media type ("a/b"). */
static int
mcp_accepts(const char *accept, const char *type)
{
	const char	*p, *slash = strchr(type, '/');
	size_t		 n;

	if (accept == NULL)
		return 1;
	for (p = accept; *p != '\0'; p += strcspn(p, ",") + (p[strcspn(p,
	    ",")] != '\0')) {
		p += strspn(p, " \t");
		n = strcspn(p, ",; \t");
		if ((n == strlen(type) && strncasecmp(p, type, n) == 0) ||
		    (n == 3 && strncmp(p, "*/*", 3) == 0) ||
		    (slash != NULL && n == (size_t)(slash - type) + 2 &&
		    strncasecmp(p, type, slash - type + 1) == 0 &&
		    p[n - 1] == '*'))
			return 1;
	}
	return 0;
}

/* Decode an Mcp-Name value ("=?base64?...?=" or plain) into out. */
static int
mcp_header_value(const char *h, char *out, size_t outsz)
{
	size_t	len = strlen(h);
	int	n;

	if (len >= 11 && strncmp(h, "=?base64?", 9) == 0 &&
	    strcmp(h + len - 2, "?=") == 0) {
		if ((len - 11) / 4 * 3 + 3 > outsz)
			return -1;
		n = EVP_DecodeBlock((unsigned char *)out,
		    (const unsigned char *)h + 9, len - 11);
		if (n < 0)
			return -1;
		/* EVP_DecodeBlock counts the padding as zero bytes. */
		if (len - 11 >= 1 && h[len - 3] == '=')
			n--;
		if (len - 11 >= 2 && h[len - 4] == '=')
			n--;
		if (n < 0)
			return -1;
		out[n] = '\0';
		return 0;
	}
	if (len >= outsz)
		return -1;
	memcpy(out, h, len + 1);
	return 0;
}

/*
 * The checks of a 2026-07-28 request: its _meta and the headers that
 * mirror the body. 0, or -1 after answering.
 */
static int
mcp_modern_check(struct http_request *req, struct mcp_call *c,
    struct json_object *meta)
{
	struct json_object	*caps;
	const char		*h, *bodyname;
	char			 name[1024], msg[1200];

	/* The revision sets no header rules for notifications. */
	if (c->id == NULL)
		return 0;
	if (!json_object_object_get_ex(meta, MCP_META_CAPS, &caps) ||
	    caps == NULL || !json_object_is_type(caps, json_type_object)) {
		mcp_fail(req, 400, c->id, MCP_INVALID_PARAMS, "_meta lacks "
		    "\"" MCP_META_CAPS "\"", NULL);
		return -1;
	}
	if ((h = http_header(req, "MCP-Protocol-Version")) == NULL ||
	    strcmp(h, c->version) != 0) {
		mcp_fail(req, 400, c->id, MCP_HEADER_MISMATCH, h == NULL ?
		    "Header mismatch: MCP-Protocol-Version is missing" :
		    "Header mismatch: MCP-Protocol-Version does not match "
		    "_meta's protocolVersion", NULL);
		return -1;
	}
	if ((h = http_header(req, "Mcp-Method")) == NULL ||
	    strcmp(h, c->method) != 0) {
		mcp_fail(req, 400, c->id, MCP_HEADER_MISMATCH, h == NULL ?
		    "Header mismatch: Mcp-Method is missing" :
		    "Header mismatch: Mcp-Method does not match the method",
		    NULL);
		return -1;
	}
	if (strcmp(c->method, "tools/call") != 0 &&
	    strcmp(c->method, "resources/read") != 0 &&
	    strcmp(c->method, "prompts/get") != 0)
		return 0;
	bodyname = json_str(c->params, strcmp(c->method, "resources/read") ==
	    0 ? "uri" : "name");
	h = http_header(req, "Mcp-Name");
	if (bodyname != NULL && (h == NULL ||
	    mcp_header_value(h, name, sizeof(name)) == -1 ||
	    strcmp(name, bodyname) != 0)) {
		snprintf(msg, sizeof(msg), "Header mismatch: Mcp-Name %s",
		    h == NULL ? "is missing" : "does not match the body");
		mcp_fail(req, 400, c->id, MCP_HEADER_MISMATCH, msg, NULL);
		return -1;
	}
	return 0;
}

/*
 * The checks of a request of the handshake revisions: its version header
 * and its session. 0, or -1 after answering.
 */
static int
mcp_legacy_check(struct http_request *req, struct mcp_call *c)
{
	struct mcp_session	*s;
	const char		*h, *sid;

	h = http_header(req, "MCP-Protocol-Version");
	if (h != NULL && !mcp_legacy_version(h)) {
		struct json_object *d = json_object_new_object();

		json_object_object_add(d, "supported", mcp_supported());
		json_object_object_add(d, "requested",
		    json_object_new_string(h));
		mcp_fail(req, 400, c->id, MCP_INVALID_REQUEST, strcmp(h,
		    MCP_MODERN) == 0 ? "a 2026-07-28 request carries its "
		    "version in params._meta" : "Unsupported protocol version",
		    d);
		return -1;
	}
	if (c->id != NULL && strcmp(c->method, "initialize") == 0) {
		if (mcp_param_str(c, "protocolVersion") == NULL) {
			mcp_fail(req, 400, c->id, MCP_INVALID_PARAMS,
			    "\"protocolVersion\" is required", NULL);
			return -1;
		}
		/* The client's version if served, else the newest one. */
		snprintf(c->version, sizeof(c->version), "%s",
		    mcp_legacy_version(mcp_param_str(c, "protocolVersion")) ?
		    mcp_param_str(c, "protocolVersion") : mcp_legacy[0]);
		return 0;
	}
	if ((sid = http_header(req, "Mcp-Session-Id")) == NULL) {
		mcp_fail(req, 400, c->id, MCP_INVALID_REQUEST, "Bad Request: "
		    "no Mcp-Session-Id; initialize first (or send a "
		    "2026-07-28 request with its _meta)", NULL);
		return -1;
	}
	if ((s = mcp_session_find(sid, c->token)) == NULL) {
		mcp_fail(req, 404, c->id, MCP_INVALID_REQUEST,
		    "Session not found", NULL);
		return -1;
	}
	if (s->revoked) {
		mcp_unauthorized(req, c->id, "invalid or revoked token");
		return -1;
	}
	snprintf(c->session, sizeof(c->session), "%s", s->id);
	snprintf(c->version, sizeof(c->version), "%s", s->version);
	return 0;
}

/* A new call for a request, the token's hash taken now. */
static struct mcp_call *
mcp_call_new(struct http_request *req)
{
	struct mcp_call	*c;
	const char	*bearer = mcp_bearer(req);

	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("%s", __func__);
	c->req = req;
	sha256_hex(bearer, strlen(bearer), c->token);
	return c;
}

/*
 * Check a POST's Content-Type and Accept and parse its body, one JSON-RPC
 * message: a JSON object. NULL once req is answered.
 */
static struct json_object *
mcp_post_body(struct http_request *req)
{
	struct json_tokener	*tok;
	struct json_object	*msg;
	const char		*ct;

	ct = http_header(req, "Content-Type");
	if (ct == NULL || strncasecmp(ct, "application/json", 16) != 0 ||
	    (ct[16] != '\0' && ct[16] != ';' && ct[16] != ' ')) {
		mcp_fail(req, 415, NULL, MCP_INVALID_REQUEST, "Unsupported "
		    "Media Type: the body must be application/json", NULL);
		return NULL;
	}
	if (!mcp_accepts(http_header(req, "Accept"), "application/json") &&
	    !mcp_accepts(http_header(req, "Accept"), "text/event-stream")) {
		mcp_fail(req, 406, NULL, MCP_INVALID_REQUEST, "Not Acceptable: "
		    "accept application/json and text/event-stream", NULL);
		return NULL;
	}
	/* Strict JSON (no comments, no single quotes), valid UTF-8. */
	if ((tok = json_tokener_new()) == NULL)
		fatal("%s", __func__);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
	    JSON_TOKENER_VALIDATE_UTF8);
	msg = req->body_len > 0 ? json_tokener_parse_ex(tok, req->body,
	    req->body_len) : NULL;
	if (msg == NULL || json_tokener_get_parse_end(tok) != req->body_len) {
		json_tokener_free(tok);
		json_object_put(msg);
		mcp_fail(req, 400, NULL, MCP_PARSE_ERROR, "Parse error", NULL);
		return NULL;
	}
	json_tokener_free(tok);
	if (json_object_is_type(msg, json_type_array)) {
		json_object_put(msg);
		mcp_fail(req, 400, NULL, MCP_INVALID_REQUEST, "Invalid Request: "
		    "JSON-RPC batches are not supported (removed in MCP "
		    "2025-06-18); send one message per POST", NULL);
		return NULL;
	}
	if (!json_object_is_type(msg, json_type_object)) {
		json_object_put(msg);
		mcp_fail(req, 400, NULL, MCP_INVALID_REQUEST, "Invalid Request: "
		    "not a JSON-RPC message", NULL);
		return NULL;
	}
	return msg;
}

/*
 * A message without "method": a response to a request of ours. There are
 * none to answer; a valid one is acknowledged once its session is checked.
 */
static void
mcp_post_response(struct http_request *req, struct mcp_call *c)
{
	const char	*ver;

	if (c->id == NULL || (!json_object_object_get_ex(c->msg, "result",
	    NULL) && !json_object_object_get_ex(c->msg, "error", NULL))) {
		mcp_fail(req, 400, c->id, MCP_INVALID_REQUEST, "Invalid "
		    "Request: no \"method\"", NULL);
		mcp_call_free(c);
		return;
	}
	if ((ver = http_header(req, "MCP-Protocol-Version")) != NULL &&
	    strcmp(ver, MCP_MODERN) == 0) {
		mcp_fail(req, 400, NULL, MCP_INVALID_REQUEST, "Invalid "
		    "Request: 2026-07-28 clients send no responses", NULL);
		mcp_call_free(c);
		return;
	}
	free(c->id);
	c->id = NULL;
	snprintf(c->method, sizeof(c->method), "response");
	if (mcp_legacy_check(req, c) == 0)
		mcp_ask_whoami(c, mcp_checked);
	else
		mcp_call_free(c);
}

/*
 * Check the protocol version a request is made under: its own _meta's
 * (2026-07-28) or its session's (the earlier ones). -1 once req is
 * answered.
 */
static int
mcp_post_version(struct http_request *req, struct mcp_call *c)
{
	struct json_object	*meta = NULL;
	const char		*ver;

	if (c->params != NULL)
		json_object_object_get_ex(c->params, "_meta", &meta);
	ver = meta != NULL && json_object_is_type(meta, json_type_object) ?
	    json_str(meta, MCP_META_VERSION) : NULL;
	if (ver != NULL) {
		/* 2026-07-28: the version is the request's own. */
		if (strcmp(ver, MCP_MODERN) != 0) {
			struct json_object *d = json_object_new_object();

			json_object_object_add(d, "supported", mcp_supported());
			json_object_object_add(d, "requested",
			    json_object_new_string(ver));
			mcp_fail(req, 400, c->id, MCP_UNSUPPORTED_VERSION,
			    "Unsupported protocol version", d);
			return -1;
		}
		c->modern = 1;
		snprintf(c->version, sizeof(c->version), "%s", ver);
		return mcp_modern_check(req, c, meta);
	}
	if ((ver = http_header(req, "MCP-Protocol-Version")) != NULL &&
	    strcmp(ver, MCP_MODERN) == 0 && strcmp(c->method,
	    "initialize") != 0) {
		mcp_fail(req, 400, c->id, MCP_INVALID_PARAMS, "Invalid params: "
		    "_meta lacks \"" MCP_META_VERSION "\"", NULL);
		return -1;
	}
	return mcp_legacy_check(req, c);
}

/* POST /mcp: one JSON-RPC message. */
static void
mcp_post(struct http_request *req)
{
	struct json_object	*msg, *v;
	struct mcp_call		*c;
	const char		*method;
	int			 status;

	if ((msg = mcp_post_body(req)) == NULL)
		return;
	c = mcp_call_new(req);
	c->msg = msg;
	c->sse = !mcp_accepts(http_header(req, "Accept"), "application/json");
	if (json_object_object_get_ex(msg, "id", NULL)) {
		c->id = mcp_raw_id(req->body, req->body_len);
		if (c->id == NULL || !mcp_id_valid(c->id)) {
			mcp_fail(req, 400, NULL, MCP_INVALID_REQUEST, "Invalid "
			    "Request: \"id\" must be a string or an integer",
			    NULL);
			mcp_call_free(c);
			return;
		}
	}
	if (json_str(msg, "jsonrpc") == NULL ||
	    strcmp(json_str(msg, "jsonrpc"), "2.0") != 0) {
		mcp_fail(req, 400, c->id, MCP_INVALID_REQUEST, "Invalid "
		    "Request: \"jsonrpc\" must be \"2.0\"", NULL);
		mcp_call_free(c);
		return;
	}
	if (!json_object_object_get_ex(msg, "method", &v)) {
		mcp_post_response(req, c);
		return;
	}
	if ((method = json_object_get_string(v)) == NULL ||
	    !json_object_is_type(v, json_type_string) || *method == '\0' ||
	    strlen(method) >= sizeof(c->method)) {
		/* Too long for any method there is: no such method. */
		status = v != NULL && json_object_is_type(v, json_type_string);
		mcp_fail(req, status ? 200 : 400, c->id, status ?
		    MCP_METHOD_NOT_FOUND : MCP_INVALID_REQUEST, status ?
		    "Method not found" : "Invalid Request: \"method\" must be "
		    "a string", NULL);
		mcp_call_free(c);
		return;
	}
	snprintf(c->method, sizeof(c->method), "%s", method);
	if (json_object_object_get_ex(msg, "params", &v) && v != NULL &&
	    !json_object_is_type(v, json_type_object)) {
		mcp_fail(req, 400, c->id, MCP_INVALID_PARAMS, "Invalid params: "
		    "\"params\" must be an object", NULL);
		mcp_call_free(c);
		return;
	}
	c->params = v;
	if (mcp_post_version(req, c) == -1) {
		mcp_call_free(c);
		return;
	}
	mcp_dispatch(c);
}

/*
 * Put the session a GET or DELETE names into c: 0, or -1 once req is
 * answered (400 without one, 404 for one unknown or another token's).
 */
static int
mcp_call_session(struct http_request *req, struct mcp_call *c)
{
	const char	*sid;

	if ((sid = http_header(req, "Mcp-Session-Id")) == NULL) {
		mcp_fail(req, 400, NULL, MCP_INVALID_REQUEST, "Bad Request: "
		    "no Mcp-Session-Id", NULL);
		return -1;
	}
	if (mcp_session_find(sid, c->token) == NULL) {
		mcp_fail(req, 404, NULL, MCP_INVALID_REQUEST,
		    "Session not found", NULL);
		return -1;
	}
	snprintf(c->session, sizeof(c->session), "%s", sid);
	return 0;
}

/* GET /mcp: the stream of server messages of a session. */
static void
mcp_get(struct http_request *req)
{
	struct mcp_call	*c;
	const char	*h;

	if ((h = http_header(req, "MCP-Protocol-Version")) != NULL &&
	    strcmp(h, MCP_MODERN) == 0) {
		http_reply_error(req, 405, "method_not_allowed", "2026-07-28 "
		    "has no GET stream: use subscriptions/listen",
		    "Allow: POST\r\n");
		return;
	}
	if (!mcp_accepts(http_header(req, "Accept"), "text/event-stream")) {
		mcp_fail(req, 406, NULL, MCP_INVALID_REQUEST, "Not Acceptable: "
		    "a GET stream is text/event-stream", NULL);
		return;
	}
	c = mcp_call_new(req);
	snprintf(c->method, sizeof(c->method), "GET");
	if (h != NULL && !mcp_legacy_version(h)) {
		mcp_fail(req, 400, NULL, MCP_INVALID_REQUEST,
		    "Unsupported protocol version", NULL);
		mcp_call_free(c);
		return;
	}
	if (mcp_call_session(req, c) == -1) {
		mcp_call_free(c);
		return;
	}
	mcp_ask_whoami(c, mcp_stream_open);
}

/* DELETE /mcp: the client ends its session. */
static void
mcp_delete(struct http_request *req)
{
	struct mcp_call	*c;
	const char	*h;

	if ((h = http_header(req, "MCP-Protocol-Version")) != NULL &&
	    strcmp(h, MCP_MODERN) == 0) {
		http_reply_error(req, 405, "method_not_allowed", "2026-07-28 "
		    "has no sessions", "Allow: POST\r\n");
		return;
	}
	c = mcp_call_new(req);
	snprintf(c->method, sizeof(c->method), "DELETE");
	if (mcp_call_session(req, c) == -1) {
		mcp_call_free(c);
		return;
	}
	mcp_ask_whoami(c, mcp_checked);
}

/* /mcp: Origin, then the bearer token, then the method. */
void
mcp_handle(struct http_request *req)
{
	if (!ws_origin_allowed(req)) {
		mcp_fail(req, 403, NULL, MCP_INVALID_REQUEST, "Forbidden: this "
		    "Origin may not use the MCP endpoint", NULL);
		return;
	}
	if (mcp_bearer(req) == NULL) {
		mcp_unauthorized(req, NULL, http_header(req, "Cookie") != NULL ?
		    "/mcp takes an agent token (Authorization: Bearer), not "
		    "a login cookie" : "an agent token is required "
		    "(Authorization: Bearer)");
		return;
	}
	if (strcmp(req->method, "POST") == 0)
		mcp_post(req);
	else if (strcmp(req->method, "GET") == 0)
		mcp_get(req);
	else if (strcmp(req->method, "DELETE") == 0)
		mcp_delete(req);
	else
		http_reply_error(req, 405, "method_not_allowed",
		    "/mcp takes POST, GET and DELETE",
		    "Allow: POST, GET, DELETE\r\n");
}

/* /.well-known/oauth-protected-resource[/mcp]: RFC 9728 metadata. */
void
mcp_wellknown(struct http_request *req)
{
	struct json_object	*o, *a;
	char			 res[320], base[300];

	if (strcmp(req->method, "GET") != 0 &&
	    strcmp(req->method, "HEAD") != 0) {
		http_reply_error(req, 405, "method_not_allowed",
		    "method not allowed here", "Allow: GET, HEAD\r\n");
		return;
	}
	if (strcmp(req->path, "/.well-known/oauth-protected-resource/mcp") !=
	    0 && strcmp(req->path, "/.well-known/oauth-protected-resource") !=
	    0) {
		http_reply_error(req, 404, ERR_NOT_FOUND, "no such endpoint",
		    NULL);
		return;
	}
	mcp_base(req, base, sizeof(base));
	snprintf(res, sizeof(res), "%s/mcp", base);
	o = json_object_new_object();
	json_object_object_add(o, "resource", json_object_new_string(res));
	a = json_object_new_array();
	json_object_array_add(a, json_object_new_string("header"));
	json_object_object_add(o, "bearer_methods_supported", a);
	json_object_object_add(o, "resource_name",
	    json_object_new_string("hostgate"));
	json_object_object_add(o, "resource_documentation",
	    json_object_new_string("an agent token from the panel or "
	    "`hgctl token create`, sent as Authorization: Bearer"));
	http_reply_json(req, 200, o, NULL);
}
