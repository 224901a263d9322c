/*
 * The SSE streams of /mcp: a 2025 session's GET stream and a 2026-07-28
 * subscriptions/listen, both opened once brokerd has said whose they
 * are, and the notifications a mode or permission event gives them
 * (mcp_deliver, from sse_deliver).
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "frontd.h"

#define MCP_MAX_STREAMS		256
#define MCP_MAX_BACKLOG		(1024 * 1024)	/* a slower client is dropped */
#define MCP_HEARTBEAT_SECS	15
#define MCP_META_SUB		"io.modelcontextprotocol/subscriptionId"

/* An open SSE stream: a GET stream, or a subscriptions/listen. */
struct mcp_stream {
	struct bufferevent	*bev;
	char			*user;
	char			 session[33];	/* login session, "" for none */
	char			 mcp_session[MCP_SID_MAX]; /* "" for a listen */
	char			 token[65];	/* SHA-256 of the bearer */
	char			*sub_id;	/* the listen's raw JSON id */
	int			 want_prompt;	/* listen: the prompt resource */
	int			 closing;	/* freed once the output is out */
	char			 peer[64];
	TAILQ_ENTRY(mcp_stream)	 entry;
};

static TAILQ_HEAD(, mcp_stream)	 mcp_streams =
    TAILQ_HEAD_INITIALIZER(mcp_streams);
static int			 mcp_nstreams;
static struct event		*mcp_heartbeat_ev;

/* Close a stream. */
static void
mcp_stream_free(struct mcp_stream *st, const char *why)
{
	log_debug("%s: MCP stream of %s closed: %s", st->peer, st->user, why);
	TAILQ_REMOVE(&mcp_streams, st, entry);
	mcp_nstreams--;
	bufferevent_free(st->bev);
	http_released();
	free(st->sub_id);
	free(st->user);
	free(st);
}

/* Close the stream of an MCP session (DELETE, a newer GET, forgotten). */
void
mcp_stream_close_session(const char *id, const char *why)
{
	struct mcp_stream	*st, *next;

	for (st = TAILQ_FIRST(&mcp_streams); st != NULL; st = next) {
		next = TAILQ_NEXT(st, entry);
		if (st->mcp_session[0] != '\0' &&
		    strcmp(st->mcp_session, id) == 0)
			mcp_stream_free(st, why);
	}
}

/* Heartbeat comments on every MCP stream. */
static void
mcp_heartbeat(evutil_socket_t fd, short ev, void *arg)
{
	struct mcp_stream	*st;

	TAILQ_FOREACH(st, &mcp_streams, entry)
		bufferevent_write(st->bev, ": heartbeat\n\n", 13);
}

/* The client of a stream went away. */
static void
mcp_stream_event_cb(struct bufferevent *bev, short what, void *arg)
{
	mcp_stream_free(arg, "client closed");
}

/* A closing stream has sent its last message: now close it. */
static void
mcp_stream_write_cb(struct bufferevent *bev, void *arg)
{
	struct mcp_stream	*st = arg;

	if (st->closing &&
	    evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		mcp_stream_free(st, "its session or token ended");
}

/*
 * End a stream when its login session or its token ends: a listen gets
 * the result of its request first (the graceful end of a subscription),
 * then it closes once that is written.
 */
static void
mcp_stream_end(struct mcp_stream *st)
{
	if (st->sub_id != NULL)
		evbuffer_add_printf(bufferevent_get_output(st->bev), "event: "
		    "message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":"
		    "{\"resultType\":\"complete\",\"_meta\":{\"" MCP_META_SUB
		    "\":%s}}}\n\n", st->sub_id, st->sub_id);
	st->closing = 1;
	if (evbuffer_get_length(bufferevent_get_output(st->bev)) == 0)
		mcp_stream_free(st, "its session or token ended");
}

/* A stream is one-way: what the client sends is dropped. */
static void
mcp_stream_read_cb(struct bufferevent *bev, void *arg)
{
	struct evbuffer	*in = bufferevent_get_input(bev);

	evbuffer_drain(in, evbuffer_get_length(in));
}

/* Write one JSON-RPC notification (taken) to a stream as an SSE event. */
static void
mcp_stream_send(struct mcp_stream *st, const char *method,
    struct json_object *params)
{
	struct json_object	*meta;

	if (st->sub_id != NULL) {
		if (!json_object_object_get_ex(params, "_meta", &meta)) {
			meta = json_object_new_object();
			json_object_object_add(params, "_meta", meta);
		}
		/* The listen's id as it came: a huge integer stays exact. */
		json_object_object_add(meta, MCP_META_SUB, st->sub_id[0] ==
		    '"' ? json_tokener_parse(st->sub_id) :
		    json_object_new_double_s(0, st->sub_id));
	}
	evbuffer_add_printf(bufferevent_get_output(st->bev), "event: message\n"
	    "data: {\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"params\":%s}\n\n",
	    method, json_object_to_json_string_ext(params,
	    JSON_C_TO_STRING_PLAIN));
	json_object_put(params);
}

/* brokerd said who a GET stream or a listen is for: open it. */
void
mcp_stream_open(struct mcp_call *c, struct ipc_msg *m, void *arg)
{
	struct json_object	*res, *ack, *filter, *a;
	struct bufferevent	*bev;
	struct mcp_stream	*st;
	const char		*user, *session;
	char			 peer[64], rid[LOG_REQUEST_ID_LEN + 1];

	if (mcp_call_refused(c, m))
		return;
	if ((res = mcp_result(m)) == NULL ||
	    (user = json_str(res, "user")) == NULL) {
		json_object_put(res);
		mcp_call_error(c, MCP_INTERNAL_ERROR, "malformed reply from "
		    "brokerd", NULL);
		return;
	}
	session = json_str(res, "session");
	if (mcp_nstreams >= MCP_MAX_STREAMS) {
		json_object_put(res);
		http_reply_error(c->req, 503, ERR_UNAVAILABLE,
		    "too many MCP streams", "Retry-After: 5\r\n");
		mcp_call_free(c);
		return;
	}
	/* One GET stream per session: a message goes on one stream only. */
	if (!c->modern)
		mcp_stream_close_session(c->session, "replaced by a new GET");
	snprintf(peer, sizeof(peer), "%s", c->req->peer);
	memcpy(rid, c->req->request_id, sizeof(rid));
	if ((bev = http_takeover(c->req, 200)) == NULL) {
		json_object_put(res);
		c->req = NULL;
		mcp_call_free(c);
		return;
	}
	if ((st = calloc(1, sizeof(*st))) == NULL ||
	    (st->user = strdup(user)) == NULL)
		fatal("%s", __func__);
	st->bev = bev;
	snprintf(st->session, sizeof(st->session), "%s", session ? session :
	    "");
	snprintf(st->mcp_session, sizeof(st->mcp_session), "%s", c->session);
	snprintf(st->token, sizeof(st->token), "%s", c->token);
	snprintf(st->peer, sizeof(st->peer), "%s", peer);
	json_object_put(res);
	evbuffer_add_printf(bufferevent_get_output(bev), "HTTP/1.1 200 OK\r\n"
	    "Content-Type: text/event-stream\r\n"
	    "Cache-Control: no-store\r\n"
	    "Connection: keep-alive\r\n"
	    "X-Accel-Buffering: no\r\n"
	    "X-Content-Type-Options: nosniff\r\n"
	    "Referrer-Policy: no-referrer\r\n"
	    "X-Request-Id: %s\r\n\r\n", rid);
	if (c->modern) {
		/* subscriptions/listen: the acknowledgment comes first. */
		if ((st->sub_id = strdup(c->id)) == NULL)
			fatal("%s", __func__);
		ack = json_object_new_object();
		filter = json_object_new_object();
		if (c->listen_prompt) {
			st->want_prompt = 1;
			a = json_object_new_array();
			json_object_array_add(a,
			    json_object_new_string(MCP_PROMPT_URI));
			json_object_object_add(filter, "resourceSubscriptions",
			    a);
		}
		json_object_object_add(ack, "notifications", filter);
		mcp_stream_send(st, "notifications/subscriptions/acknowledged",
		    ack);
	}
	TAILQ_INSERT_TAIL(&mcp_streams, st, entry);
	mcp_nstreams++;
	if (mcp_heartbeat_ev == NULL) {
		struct timeval	tv = { MCP_HEARTBEAT_SECS, 0 };

		mcp_heartbeat_ev = event_new(bufferevent_get_base(bev), -1,
		    EV_PERSIST, mcp_heartbeat, NULL);
		if (mcp_heartbeat_ev == NULL)
			fatalx("%s: event_new", __func__);
		evtimer_add(mcp_heartbeat_ev, &tv);
	}
	bufferevent_setcb(bev, mcp_stream_read_cb, mcp_stream_write_cb,
	    mcp_stream_event_cb, st);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	log_debug("%s: MCP stream of %s opened", peer, user);
	c->req = NULL;
	mcp_call_free(c);
}

/* The text of a mode or permission event, for a log notification. */
static struct json_object *
mcp_event_log(struct json_object *ev, const char *name)
{
	struct json_object	*p, *d, *data;

	d = json_object_new_object();
	json_object_object_add(d, "event", json_object_new_string(name));
	if (json_object_object_get_ex(ev, "data", &data) && data != NULL)
		json_object_object_add(d, "constraints", json_object_get(data));
	json_object_object_add(d, "message", json_object_new_string(
	    "this session's constraints changed: read the resource "
	    MCP_PROMPT_URI " (or call the status tool) before the next "
	    "command; see the server instructions"));
	p = json_object_new_object();
	json_object_object_add(p, "level", json_object_new_string("warning"));
	json_object_object_add(p, "logger", json_object_new_string("hostgate"));
	json_object_object_add(p, "data", d);
	return p;
}

/* A brokerd event: tell the MCP streams of its session. */
void
mcp_deliver(struct json_object *ev)
{
	struct mcp_stream	*st, *next;
	struct json_object	*p;
	const char		*name = json_str(ev, "event");
	const char		*user = json_str(ev, "user");
	const char		*session = json_str(ev, "session");
	const char		*token = json_str(ev, "token");
	int			 ended, revoked;

	if (name == NULL || user == NULL)
		return;
	ended = strcmp(name, "session_ended") == 0;
	revoked = strcmp(name, "token_revoked") == 0;
	if (revoked) {
		/* That token's streams end, as at a logout; its sessions go. */
		if (token == NULL)
			return;
		for (st = TAILQ_FIRST(&mcp_streams); st != NULL; st = next) {
			next = TAILQ_NEXT(st, entry);
			if (!st->closing && strcmp(st->token, token) == 0)
				mcp_stream_end(st);
		}
		mcp_session_forget_token(token);
		return;
	}
	if (!ended && strcmp(name, "mode_changed") != 0 &&
	    strcmp(name, "mode_reverted") != 0 &&
	    strcmp(name, "mode_expiring") != 0 &&
	    strcmp(name, "permission_changed") != 0)
		return;
	for (st = TAILQ_FIRST(&mcp_streams); st != NULL; st = next) {
		next = TAILQ_NEXT(st, entry);
		if (strcmp(st->user, user) != 0 || (session != NULL &&
		    strcmp(session, st->session) != 0))
			continue;
		if (st->closing)
			continue;
		if (ended) {
			mcp_stream_end(st);
			continue;
		}
		if (evbuffer_get_length(bufferevent_get_output(st->bev)) >
		    MCP_MAX_BACKLOG) {
			mcp_stream_free(st, "client too slow");
			continue;
		}
		if (st->sub_id == NULL) {
			mcp_stream_send(st, "notifications/message",
			    mcp_event_log(ev, name));
			if (!mcp_session_subscribed(st->mcp_session))
				continue;
		} else if (!st->want_prompt)
			continue;
		p = json_object_new_object();
		json_object_object_add(p, "uri",
		    json_object_new_string(MCP_PROMPT_URI));
		mcp_stream_send(st, "notifications/resources/updated", p);
	}
}
