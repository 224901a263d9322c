/*
 * GET /api/events: server-sent events. brokerd authorizes the stream and
 * sends every event it emits to frontd; frontd holds the streams and
 * writes each event to the streams of its session (or user). A heartbeat
 * comment every 15 s keeps proxies and clients honest; Last-Event-ID
 * resumes from brokerd's ring of recent events.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "frontd.h"

#define SSE_HEARTBEAT_SECS	15
#define SSE_MAX_BACKLOG		(1024 * 1024)	/* a slower client is dropped */
#define SSE_MAX_STREAMS		512
#define SSE_SUBSCRIBE_MS	5000

struct sse {
	struct bufferevent	*bev;
	char			*user;
	char			 session[33];	/* "" for a standalone token */
	char			 token[65];	/* SHA-256 of the bearer, or "" */
	char			 peer[64];
	int			 closing;	/* freed once the output is out */
	TAILQ_ENTRY(sse)	 entry;
};

static TAILQ_HEAD(, sse)	 sse_all = TAILQ_HEAD_INITIALIZER(sse_all);
static int			 sse_count;
static struct event		*sse_heartbeat_ev;

/* Close a stream. */
static void
sse_free(struct sse *s, const char *why)
{
	log_debug("%s: event stream of %s closed: %s", s->peer, s->user, why);
	TAILQ_REMOVE(&sse_all, s, entry);
	sse_count--;
	bufferevent_free(s->bev);
	http_released();
	free(s->user);
	free(s);
}

/* The client went away (or sent something: a stream is one-way). */
static void
sse_event_cb(struct bufferevent *bev, short what, void *arg)
{
	sse_free(arg, "client closed");
}

/* A closing stream has sent its last event: now close it. */
static void
sse_write_cb(struct bufferevent *bev, void *arg)
{
	struct sse	*s = arg;

	if (s->closing &&
	    evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		sse_free(s, "its session or token ended");
}

static void
sse_read_cb(struct bufferevent *bev, void *arg)
{
	struct evbuffer	*in = bufferevent_get_input(bev);

	evbuffer_drain(in, evbuffer_get_length(in));
}

/* Write one event in the text/event-stream format. */
static void
sse_write(struct sse *s, struct json_object *ev)
{
	struct json_object	*data;
	struct evbuffer		*out = bufferevent_get_output(s->bev);
	const char		*name;
	int64_t			 seq = 0;

	if ((name = json_str(ev, "event")) == NULL)
		return;
	json_int(ev, "seq", &seq);
	if (!json_object_object_get_ex(ev, "data", &data))
		data = NULL;
	/* JSON text on one line: no raw newline can end the data early. */
	evbuffer_add_printf(out, "id: %lld\nevent: %s\ndata: %s\n\n",
	    (long long)seq, name, data ? json_object_to_json_string_ext(data,
	    JSON_C_TO_STRING_PLAIN) : "{}");
}

/* Whether an event belongs to a stream. */
static int
sse_match(struct sse *s, struct json_object *ev)
{
	const char	*user = json_str(ev, "user");
	const char	*session = json_str(ev, "session");

	if (user == NULL || strcmp(user, s->user) != 0)
		return 0;
	return session == NULL || strcmp(session, s->session) == 0;
}

/*
 * An event from brokerd: deliver it to the streams it is for (and to the
 * MCP streams and terminal bridges it concerns).
 */
void
sse_deliver(struct ipc_peer *p, struct ipc_msg *m)
{
	struct sse	*s, *next;
	const char	*name = json_str(m->obj, "event");
	const char	*token = json_str(m->obj, "token");
	int		 end;

	mcp_deliver(m->obj);
	ws_deliver(m->obj);
	for (s = TAILQ_FIRST(&sse_all); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (s->closing || !sse_match(s, m->obj))
			continue;
		/* A logout ends the session's streams, a revocation its token's. */
		end = name != NULL && (strcmp(name, "session_ended") == 0 ||
		    (strcmp(name, "token_revoked") == 0 && token != NULL &&
		    strcmp(token, s->token) == 0));
		if (end) {
			/* The event first; the close once it is written. */
			sse_write(s, m->obj);
			s->closing = 1;
			continue;
		}
		if (evbuffer_get_length(bufferevent_get_output(s->bev)) >
		    SSE_MAX_BACKLOG) {
			sse_free(s, "client too slow");
			continue;
		}
		sse_write(s, m->obj);
	}
}

/* Every 15 s, a comment line on every stream. */
static void
sse_heartbeat(evutil_socket_t fd, short ev, void *arg)
{
	struct sse	*s;

	TAILQ_FOREACH(s, &sse_all, entry)
		bufferevent_write(s->bev, ": heartbeat\n\n", 13);
}

/* The SHA-256 of a request's bearer token into hash, or "" without one. */
static void
sse_bearer_hash(struct http_request *req, char hash[65])
{
	const char	*h;

	hash[0] = '\0';
	/* The bearer exactly as api_add_auth sends it to brokerd. */
	if ((h = http_header(req, "Authorization")) == NULL ||
	    strncasecmp(h, "Bearer ", 7) != 0)
		return;
	for (h += 7; *h == ' '; h++)
		;
	sha256_hex(h, strlen(h), hash);
}

/* brokerd said who the stream is for: start it. */
static void
sse_subscribed(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	struct http_request	*req = arg;
	struct json_object	*res, *missed;
	struct bufferevent	*bev;
	struct sse		*s;
	struct evbuffer		*out;
	const char		*user, *session;
	char			 peer[64], rid[LOG_REQUEST_ID_LEN + 1];
	char			 token[65];
	int			 complete = 1;
	size_t			 i;

	req->pending = NULL;
	if (api_broker_failed(req, m))
		return;
	if (!json_object_object_get_ex(m->obj, "result", &res) ||
	    (user = json_str(res, "user")) == NULL) {
		http_reply_error(req, 502, ERR_INTERNAL,
		    "malformed reply from brokerd", NULL);
		return;
	}
	session = json_str(res, "session");
	json_flag(res, "complete", &complete);
	if (sse_count >= SSE_MAX_STREAMS) {
		http_reply_error(req, 503, ERR_UNAVAILABLE,
		    "too many event streams", "Retry-After: 5\r\n");
		return;
	}
	snprintf(peer, sizeof(peer), "%s", req->peer);
	memcpy(rid, req->request_id, sizeof(rid));
	sse_bearer_hash(req, token);
	if ((bev = http_takeover(req, 200)) == NULL)
		return;
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->user = strdup(user)) == NULL)
		fatal("%s", __func__);
	s->bev = bev;
	snprintf(s->session, sizeof(s->session), "%s", session ? session : "");
	snprintf(s->token, sizeof(s->token), "%s", token);
	snprintf(s->peer, sizeof(s->peer), "%s", peer);
	out = bufferevent_get_output(bev);
	evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\n"
	    "Content-Type: text/event-stream; charset=utf-8\r\n"
	    "Cache-Control: no-store\r\n"
	    "Connection: keep-alive\r\n"
	    "X-Accel-Buffering: no\r\n"
	    "X-Content-Type-Options: nosniff\r\n"
	    "Referrer-Policy: no-referrer\r\n"
	    "X-Frame-Options: DENY\r\n"
	    "X-Request-Id: %s\r\n\r\n"
	    "retry: 2000\n\n", rid);
	/* What the client missed since its Last-Event-ID. */
	if (json_object_object_get_ex(res, "missed", &missed) &&
	    json_object_is_type(missed, json_type_array))
		for (i = 0; i < json_object_array_length(missed); i++)
			sse_write(s, json_object_array_get_idx(missed, i));
	/* The ring no longer holds all it missed: read the state afresh. */
	if (!complete)
		evbuffer_add_printf(out, "event: resync\ndata: {}\n\n");
	TAILQ_INSERT_TAIL(&sse_all, s, entry);
	sse_count++;
	bufferevent_setcb(bev, sse_read_cb, sse_write_cb, sse_event_cb, s);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	log_debug("%s: event stream of %s opened", peer, user);
}

/* GET /api/events */
void
sse_handle(struct http_request *req)
{
	struct json_object	*obj;
	struct ipc_peer		*broker;
	const char		*last;
	char			*end;
	long long		 id = 0;

	/* Last-Event-ID from the header (EventSource) or ?last_event_id=. */
	if ((last = http_header(req, "Last-Event-ID")) == NULL &&
	    req->query != NULL && strncmp(req->query, "last_event_id=", 14) == 0)
		last = req->query + 14;
	if (last != NULL) {
		id = strtoll(last, &end, 10);
		if (end == last || (*end != '\0' && *end != '&') || id < 0 ||
		    id > PROTO_COUNT_MAX)
			id = 0;
	}
	if ((broker = api_broker_peer()) == NULL) {
		http_reply_error(req, 503, ERR_UNAVAILABLE,
		    "brokerd is unreachable", NULL);
		return;
	}
	obj = json_object_new_object();
	json_object_object_add(obj, "type",
	    json_object_new_string(MSG_EVENTS_SUBSCRIBE));
	json_object_object_add(obj, "last_event_id",
	    json_object_new_int64(id));
	api_add_auth(req, obj);
	req->pending = req;
	if (ipc_request(broker, obj, NULL, 0, SSE_SUBSCRIBE_MS, sse_subscribed,
	    req) == -1 && req->pending == req) {
		req->pending = NULL;
		http_reply_error(req, 503, ERR_UNAVAILABLE,
		    "brokerd is unreachable", NULL);
	}
}

/* The heartbeat timer. */
void
sse_init(struct event_base *base)
{
	struct timeval	tv = { SSE_HEARTBEAT_SECS, 0 };

	sse_heartbeat_ev = event_new(base, -1, EV_PERSIST, sse_heartbeat, NULL);
	if (sse_heartbeat_ev == NULL)
		fatalx("%s: event_new", __func__);
	evtimer_add(sse_heartbeat_ev, &tv);
}
