/*
 * WebSocket terminals: GET /api/terminals/{id}/ws. brokerd authorizes the
 * attach and relays a dup of the pty master from sandboxd; frontd then
 * bridges WebSocket frames (libwslay) and the pty, so that terminal bytes
 * never pass through brokerd. Binary frames are raw pty bytes both ways;
 * text frames are JSON control messages ({"type":"resize",...} from the
 * client, one {"type":"exit",...} from frontd when the terminal ends).
 *
 * A terminal's end reaches frontd twice, in no set order: the pty reads end
 * of file (every byte of output has been read and queued), and brokerd's
 * terminal_exited event says how it ended. The bridge closes itself once it
 * has both, the output first, then the exit message, then a close frame
 * whose reason says the same in words; clients never need to close it.
 */
#include <sys/types.h>
#include <sys/ioctl.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <termios.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <wslay/wslay.h>

#include "frontd.h"

#define WS_GUID		"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_MAX_MSG	(1024 * 1024)	/* largest message a client may send */
#define WS_HIGH_WATER	(4 * 1024 * 1024) /* stop reading the pty above this */
/*
 * Input for the pty: above WS_INPUT_HIGH queued bytes frontd stops reading
 * the WebSocket until the program in the terminal has read it down to
 * WS_INPUT_LOW; the bufferevent itself holds at most WS_INPUT_BUF unparsed.
 */
#define WS_INPUT_HIGH	(1024 * 1024)
#define WS_INPUT_LOW	(256 * 1024)
#define WS_INPUT_BUF	(256 * 1024)
#define WS_PING_SECS	30
#define WS_ATTACH_MS	5000
/*
 * How long one half of a terminal's end waits for the other: the status
 * after the pty's end (brokerd may be down), or the pty's end after the
 * status (a process that left the cgroup may hold the pty open).
 */
#define WS_END_WAIT_SECS	5

struct ws {
	struct bufferevent	*bev;
	wslay_event_context_ptr	 ctx;
	int			 pty;
	struct event		*ev_pty;	/* pty readable */
	struct event		*ev_ptyw;	/* pty writable, input queued */
	struct event		*ev_ping;
	struct evbuffer		*to_pty;
	char			 id[17];
	char			 peer[64];
	int			 paused;	/* pty reads stopped: backpressure */
	int			 held;		/* client reads stopped: the same */
	int			 too_big;	/* a frame announced too much */
	int			 evicted;	/* another viewer took over */
	int			 pty_done;	/* the pty's end: output all read */
	int			 ending;	/* the exit and close are queued */
	struct json_object	*end;		/* terminal_exited's data, once */
	struct event		*ev_end;	/* the wait for the other half */
	uint8_t			 hdr[14];	/* ws_track: a header so far */
	size_t			 hlen;
	uint64_t		 skip;		/* payload bytes still to come */
	TAILQ_ENTRY(ws)		 entry;
};

/* A WebSocket upgrade waiting for brokerd's attach answer. */
struct ws_wait {
	struct http_request	*req;
	char			 id[17];
	char			 accept[64];
};

static TAILQ_HEAD(, ws)	ws_all = TAILQ_HEAD_INITIALIZER(ws_all);

static void	ws_free(struct ws *, const char *);
static void	ws_track(struct ws *, const uint8_t *, size_t);
static void	ws_pump(struct ws *);
static void	ws_end(struct ws *);

/* Sec-WebSocket-Accept for a key (RFC 6455, 4.2.2). */
static void
ws_accept_key(const char *key, char out[64])
{
	unsigned char	md[SHA_DIGEST_LENGTH];
	char		buf[128];

	snprintf(buf, sizeof(buf), "%s%s", key, WS_GUID);
	SHA1((const unsigned char *)buf, strlen(buf), md);
	EVP_EncodeBlock((unsigned char *)out, md, sizeof(md));
}

/* Whether a comma-separated header value holds token (any case). */
static int
ws_has_token(const char *value, const char *token)
{
	const char	*p = value;
	size_t		 n = strlen(token), len;

	while (p != NULL && *p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		len = strcspn(p, ",");
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len == n && strncasecmp(p, token, n) == 0)
			return 1;
		p = strchr(p, ',');
	}
	return 0;
}

/*
 * The origins whose pages may open a terminal: the listen address with
 * frontd's scheme (and localhost for a loopback one), then that of
 * HOSTGATE_PUBLIC_URL (a balancer's) and those of HOSTGATE_ALLOWED_ORIGINS.
 * For a wildcard listen address (0.0.0.0, ::) the host is whatever the
 * request's Host names, on the listen port. A trusted proxy's
 * X-Forwarded-Host allows nothing: it carries the Host a page chose.
 */
static struct web_origin	*ws_origins;
static size_t			 ws_norigins;
static struct web_origin	 ws_listen;	/* host "" when a wildcard */

/* Whether two origins are the same: scheme, host and port. */
static int
ws_origin_same(const struct web_origin *a, const struct web_origin *b)
{
	return (a->https == b->https && a->port == b->port &&
	    strcmp(a->host, b->host) == 0);
}

/*
 * A browser sends Origin; it must name this very site, or another site's
 * page could drive a logged-in user's terminal (cross-site WebSocket
 * hijacking). Scheme, host and port all count: an http:// page is not the
 * https:// site. Clients that send no Origin (agents, curl) are not
 * browsers.
 */
int
ws_origin_allowed(struct http_request *req)
{
	struct web_origin	 o, here;
	const char		*origin, *host;
	char			 buf[300];
	size_t			 i;

	if ((origin = http_header(req, "Origin")) == NULL)
		return 1;
	if (config_parse_web_origin(origin, strlen(origin), &o) == -1)
		return 0;
	for (i = 0; i < ws_norigins; i++)
		if (ws_origin_same(&o, &ws_origins[i]))
			return 1;
	if (ws_listen.host[0] != '\0' || (host = http_header(req,
	    "Host")) == NULL)
		return 0;
	/* A wildcard listen address: the Host the browser connected to. */
	snprintf(buf, sizeof(buf), "%s://%s", ws_listen.https ? "https" :
	    "http", host);
	if (config_parse_web_origin(buf, strlen(buf), &here) == -1 ||
	    here.port != ws_listen.port)
		return 0;
	return ws_origin_same(&o, &here);
}

/* Add an origin to those allowed. */
static void
ws_origin_add(const struct web_origin *o)
{
	struct web_origin	*n;

	n = reallocarray(ws_origins, ws_norigins + 1, sizeof(*n));
	if (n == NULL)
		fatal("%s", __func__);
	ws_origins = n;
	ws_origins[ws_norigins++] = *o;
}

/*
 * The allowed origins, from the address bound ("a.b.c.d:port" or
 * "[addr]:port", the port resolved) and the configuration. Until it is
 * called, every request with an Origin is refused.
 */
void
ws_origins_init(const struct config *conf, const char *bound)
{
	struct web_origin	 o;
	const char		*colon, *p, *end;
	char			 buf[300];

	colon = strrchr(bound, ':');
	snprintf(buf, sizeof(buf), "%s://%s", conf->tls_cert != NULL ?
	    "https" : "http", bound);
	if (colon == NULL || config_parse_web_origin(buf, strlen(buf),
	    &ws_listen) == -1)
		fatalx("%s: cannot make an origin of %s", __func__, bound);
	if (strcmp(ws_listen.host, "0.0.0.0") == 0 ||
	    strcmp(ws_listen.host, "[::]") == 0)
		ws_listen.host[0] = '\0';
	else
		ws_origin_add(&ws_listen);
	if (conf->listen_loopback) {
		o = ws_listen;
		snprintf(o.host, sizeof(o.host), "localhost");
		ws_origin_add(&o);
	}
	if (conf->public_url != NULL) {
		if (config_parse_web_origin(conf->public_url,
		    strlen(conf->public_url), &o) == -1)
			fatalx("HOSTGATE_PUBLIC_URL: not an origin");
		ws_origin_add(&o);
	}
	for (p = conf->allowed_origins; p != NULL && *p != '\0'; p = end) {
		end = p + strcspn(p, ",");
		if (config_parse_web_origin(p, end - p, &o) == -1)
			fatalx("HOSTGATE_ALLOWED_ORIGINS: not an origin");
		ws_origin_add(&o);
		if (*end == ',')
			end++;
	}
}

/* wslay reads: take what the bufferevent has. */
static ssize_t
ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
    void *arg)
{
	struct ws	*w = arg;
	int		 n;

	if (w->too_big || w->held) {
		/*
		 * Nothing more from a peer being closed for it, nor from one
		 * whose input waits for the pty.
		 */
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	n = evbuffer_remove(bufferevent_get_input(w->bev), buf, len);
	if (n <= 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	ws_track(w, buf, n);
	return n;
}

/* wslay writes: into the bufferevent, which sends it as it can. */
static ssize_t
ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
    int flags, void *arg)
{
	struct ws	*w = arg;

	if (bufferevent_write(w->bev, data, len) == -1) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return len;
}

/*
 * Write what waits for the pty; arm the write event while some is left.
 * Above WS_INPUT_HIGH, stop taking input from the client.
 */
static void
ws_pty_flush(struct ws *w)
{
	if (evbuffer_get_length(w->to_pty) > 0 &&
	    evbuffer_write(w->to_pty, w->pty) == -1 && errno != EAGAIN &&
	    errno != EINTR)
		evbuffer_drain(w->to_pty, evbuffer_get_length(w->to_pty));
	if (evbuffer_get_length(w->to_pty) > 0)
		event_add(w->ev_ptyw, NULL);
	else
		event_del(w->ev_ptyw);
	if (!w->held && evbuffer_get_length(w->to_pty) > WS_INPUT_HIGH) {
		log_debug("%s: terminal %s: input waits for the terminal",
		    w->peer, w->id);
		w->held = 1;
		bufferevent_disable(w->bev, EV_READ);
	}
}

/* Take input from the client again, once the pty has read enough of it. */
static int
ws_input_resume(struct ws *w)
{
	if (!w->held || evbuffer_get_length(w->to_pty) >= WS_INPUT_LOW)
		return 0;
	w->held = 0;
	bufferevent_enable(w->bev, EV_READ);
	return 1;
}

/* Tell brokerd a terminal was resized: it counts them for the audit. */
static void
ws_resized(struct ws *w)
{
	struct json_object	*obj;
	struct ipc_peer		*broker;

	if ((broker = api_broker_peer()) == NULL)
		return;
	obj = json_object_new_object();
	json_object_object_add(obj, "type",
	    json_object_new_string(MSG_TERMINAL_RESIZED));
	json_object_object_add(obj, "terminal", json_object_new_string(w->id));
	ipc_send(broker, obj, NULL, 0);
}

/* A JSON control message: resize, for now. */
static void
ws_control(struct ws *w, const uint8_t *msg, size_t len)
{
	struct json_object	*o;
	struct json_tokener	*tok;
	struct winsize		 sz;
	const char		*type;
	int64_t			 cols, rows;


	if (len > 4096 || (tok = json_tokener_new()) == NULL)
		return;
	o = json_tokener_parse_ex(tok, (const char *)msg, len);
	json_tokener_free(tok);
	if (o == NULL || !json_object_is_type(o, json_type_object)) {
		log_debug("%s: terminal %s: malformed control message",
		    w->peer, w->id);
		json_object_put(o);
		return;
	}
	type = json_str(o, "type");
	if (type != NULL && strcmp(type, "resize") == 0 &&
	    json_int(o, "cols", &cols) == 0 && json_int(o, "rows", &rows) == 0 &&
	    cols > 0 && cols <= 1000 && rows > 0 && rows <= 1000) {
		memset(&sz, 0, sizeof(sz));
		sz.ws_col = cols;
		sz.ws_row = rows;
		if (ioctl(w->pty, TIOCSWINSZ, &sz) == 0)
			ws_resized(w);
	}
	json_object_put(o);
}

/*
 * Follow frame headers in the bytes handed to wslay. wslay checks the
 * message limit only as payload arrives, so a header announcing 2^62
 * bytes and nothing else would hold the connection open: refuse such a
 * frame on its header (RFC 6455, 5.2).
 */
static void
ws_track(struct ws *w, const uint8_t *p, size_t n)
{
	size_t	need, i, take;
	uint64_t len;

	while (n > 0) {
		if (w->skip > 0) {
			take = n < w->skip ? n : (size_t)w->skip;
			w->skip -= take;
			p += take;
			n -= take;
			continue;
		}
		w->hdr[w->hlen++] = *p++;
		n--;
		if (w->hlen < 2)
			continue;
		len = w->hdr[1] & 0x7f;
		need = 2 + (len == 126 ? 2 : len == 127 ? 8 : 0) +
		    (w->hdr[1] & 0x80 ? 4 : 0);
		if (w->hlen < need)
			continue;
		if (len == 126)
			len = (uint64_t)w->hdr[2] << 8 | w->hdr[3];
		else if (len == 127)
			for (len = 0, i = 2; i < 10; i++)
				len = len << 8 | w->hdr[i];
		if (len > WS_MAX_MSG)
			w->too_big = 1;
		w->skip = len;
		w->hlen = 0;
	}
}

/* A whole message from the client. */
static void
ws_msg_cb(wslay_event_context_ptr ctx,
    const struct wslay_event_on_msg_recv_arg *arg, void *user)
{
	struct ws	*w = user;

	switch (arg->opcode) {
	case WSLAY_BINARY_FRAME:
		if (w->evicted)
			break;	/* the terminal is another viewer's now */
		evbuffer_add(w->to_pty, arg->msg, arg->msg_length);
		ws_pty_flush(w);
		break;
	case WSLAY_TEXT_FRAME:
		ws_control(w, arg->msg, arg->msg_length);
		break;
	default:
		break;	/* ping, pong and close: wslay answers them */
	}
}

/* Let wslay read and write; close when it has nothing more to do. */
static void
ws_pump(struct ws *w)
{
	struct evbuffer	*out = bufferevent_get_output(w->bev);

	if (wslay_event_recv(w->ctx) != 0) {
		ws_free(w, "protocol error");
		return;
	}
	if (w->too_big == 1) {
		/* Once: 1009, then no more reading. */
		w->too_big = 2;
		wslay_event_queue_close(w->ctx, WSLAY_CODE_MESSAGE_TOO_BIG,
		    NULL, 0);
		wslay_event_shutdown_read(w->ctx);
	}
	if (wslay_event_send(w->ctx) != 0) {
		ws_free(w, "protocol error");
		return;
	}
	if (!wslay_event_want_read(w->ctx) && !wslay_event_want_write(w->ctx)) {
		if (evbuffer_get_length(out) == 0)
			ws_free(w, "closed");
		return;	/* ws_write_cb frees once the close frame is out */
	}
	/* Backpressure: a slow client stops the pty reads, not memory. */
	if (!w->paused && evbuffer_get_length(out) > WS_HIGH_WATER) {
		w->paused = 1;
		event_del(w->ev_pty);
	} else if (w->paused && !w->evicted && !w->pty_done && !w->ending &&
	    evbuffer_get_length(out) < WS_HIGH_WATER / 4) {
		w->paused = 0;
		event_add(w->ev_pty, NULL);
	}
}

static void
ws_read_cb(struct bufferevent *bev, void *arg)
{
	ws_pump(arg);
}

static void
ws_write_cb(struct bufferevent *bev, void *arg)
{
	struct ws	*w = arg;

	if (!wslay_event_want_read(w->ctx) && !wslay_event_want_write(w->ctx) &&
	    evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
		ws_free(w, "closed");
		return;
	}
	ws_pump(w);
}

static void
ws_event_cb(struct bufferevent *bev, short what, void *arg)
{
	ws_free(arg, what & BEV_EVENT_EOF ? "client closed" : "client error");
}

/* Output of the terminal: one binary message per read. */
static void
ws_pty_read(evutil_socket_t fd, short ev, void *arg)
{
	struct ws		*w = arg;
	struct wslay_event_msg	 msg;
	uint8_t			 buf[65536];
	ssize_t			 n;

	n = read(fd, buf, sizeof(buf));
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/*
		 * EIO: every slave fd is closed and what they wrote has been
		 * read (the kernel keeps it for the master until then).
		 */
		event_del(w->ev_pty);
		w->pty_done = 1;
		ws_end(w);
		return;
	}
	msg.opcode = WSLAY_BINARY_FRAME;
	msg.msg = buf;
	msg.msg_length = n;
	wslay_event_queue_msg(w->ctx, &msg);
	ws_pump(w);
}

/* Input for the terminal can go on; so may the client's, below the mark. */
static void
ws_pty_write(evutil_socket_t fd, short ev, void *arg)
{
	struct ws	*w = arg;

	ws_pty_flush(w);
	/* What the bufferevent already holds is parsed now. */
	if (ws_input_resume(w))
		ws_pump(w);
}

/* Keep idle connections (and the proxies between) alive. */
static void
ws_ping(evutil_socket_t fd, short ev, void *arg)
{
	struct ws		*w = arg;
	struct wslay_event_msg	 msg = { WSLAY_PING, NULL, 0 };

	wslay_event_queue_msg(w->ctx, &msg);
	ws_pump(w);
}

/*
 * How a terminal ended, in the words its viewer is shown, from the data of
 * brokerd's terminal_exited event (NULL: frontd never learnt it).
 */
static void
ws_end_words(struct json_object *d, char *buf, size_t len)
{
	const char	*reason, *name;
	int64_t		 code, sig;

	reason = d != NULL ? json_str(d, "reason") : NULL;
	if (reason == NULL)
		snprintf(buf, len, "terminal exited");
	else if (strcmp(reason, "oom") == 0)
		snprintf(buf, len, "killed: memory limit");
	else if (strcmp(reason, "expiry") == 0)
		snprintf(buf, len, "killed: direct mode expired");
	else if (strcmp(reason, "admin_kill") == 0)
		snprintf(buf, len, "killed by an admin");
	else if (strcmp(reason, "kill") == 0)
		snprintf(buf, len, "closed by its user");
	else if (strcmp(reason, "restart") == 0)
		snprintf(buf, len, "ended: hostgate restarted");
	else if (json_int(d, "signal", &sig) == 0 && sig > 0 && sig < 128) {
		if ((name = sigabbrev_np(sig)) != NULL)
			snprintf(buf, len, "killed by signal SIG%s", name);
		else
			snprintf(buf, len, "killed by signal %lld",
			    (long long)sig);
	} else if (json_int(d, "exit_code", &code) == 0)
		snprintf(buf, len, "exited with status %lld", (long long)code);
	else
		snprintf(buf, len, "terminal exited");
}

/*
 * The exit message: {"type": "exit", "reason", "exit_code", "signal",
 * "signal_name", "message"}, null where not known.
 */
static struct json_object *
ws_end_json(struct json_object *d, const char *words)
{
	struct json_object	*o, *v;
	const char		*name;
	char			 buf[32];
	int64_t			 sig;

	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("exit"));
	json_object_object_add(o, "reason", d != NULL &&
	    json_object_object_get_ex(d, "reason", &v) ?
	    json_object_get(v) : NULL);
	json_object_object_add(o, "exit_code", d != NULL &&
	    json_object_object_get_ex(d, "exit_code", &v) ?
	    json_object_get(v) : NULL);
	json_object_object_add(o, "signal", d != NULL &&
	    json_object_object_get_ex(d, "signal", &v) ?
	    json_object_get(v) : NULL);
	name = d != NULL && json_int(d, "signal", &sig) == 0 && sig > 0 &&
	    sig < 128 ? sigabbrev_np(sig) : NULL;
	snprintf(buf, sizeof(buf), "SIG%s", name != NULL ? name : "");
	json_object_object_add(o, "signal_name", name != NULL ?
	    json_object_new_string(buf) : NULL);
	json_object_object_add(o, "message", json_object_new_string(words));
	return o;
}

/*
 * The terminal has ended: its exit message after the last output, then a
 * close frame (1000) whose reason is the same words. The bridge is freed
 * once the client answers the close (or after the close, on its EOF).
 */
static void
ws_finish(struct ws *w)
{
	struct wslay_event_msg	 msg;
	struct json_object	*o;
	const char		*text;
	char			 words[124];	/* a close reason's room */

	w->ending = 1;
	event_del(w->ev_pty);
	evtimer_del(w->ev_end);
	ws_end_words(w->end, words, sizeof(words));
	log_info("%s: terminal %s ended: %s", w->peer, w->id, words);
	o = ws_end_json(w->end, words);
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	msg.opcode = WSLAY_TEXT_FRAME;
	msg.msg = (const uint8_t *)text;
	msg.msg_length = strlen(text);
	wslay_event_queue_msg(w->ctx, &msg);
	json_object_put(o);
	/*
	 * Sent before the close is queued: wslay sends queued control
	 * frames ahead of queued messages.
	 */
	if (wslay_event_send(w->ctx) != 0) {
		ws_free(w, "protocol error");
		return;
	}
	wslay_event_queue_close(w->ctx, WSLAY_CODE_NORMAL_CLOSURE,
	    (const uint8_t *)words, strlen(words));
	ws_pump(w);
}

/* The other half of the terminal's end is late: close without it. */
static void
ws_end_late(evutil_socket_t fd, short ev, void *arg)
{
	struct ws	*w = arg;
	struct timeval	 tv = { WS_END_WAIT_SECS, 0 };

	if (!w->pty_done && w->paused) {
		/* Its output still goes out, to a slow client: wait on. */
		evtimer_add(w->ev_end, &tv);
		return;
	}
	if (!w->pty_done)
		log_info("%s: terminal %s exited, its pty still open",
		    w->peer, w->id);
	else
		log_info("%s: terminal %s: no exit status from brokerd",
		    w->peer, w->id);
	ws_finish(w);
}

/* One half of the terminal's end is known: finish, or wait for the other. */
static void
ws_end(struct ws *w)
{
	struct timeval	 tv = { WS_END_WAIT_SECS, 0 };

	if (w->ending || w->evicted)
		return;
	if (w->pty_done && w->end != NULL)
		ws_finish(w);
	else if (!evtimer_pending(w->ev_end, NULL))
		evtimer_add(w->ev_end, &tv);
}

/*
 * An event from brokerd: a terminal_exited says how the terminal of a
 * bridge ended. Its id is HEX16, or HOST.HEX16 in a fleet, where a bridge
 * is always on the terminal's own host.
 */
void
ws_deliver(struct json_object *ev)
{
	struct json_object	*d;
	struct ws		*w;
	const char		*name, *id, *dot;

	name = json_str(ev, "event");
	if (name == NULL || strcmp(name, "terminal_exited") != 0 ||
	    !json_object_object_get_ex(ev, "data", &d) ||
	    (id = json_str(d, "id")) == NULL)
		return;
	if ((dot = strrchr(id, '.')) != NULL)
		id = dot + 1;
	TAILQ_FOREACH(w, &ws_all, entry)
		if (strcmp(w->id, id) == 0 && !w->ending) {
			json_object_put(w->end);
			w->end = json_object_get(d);
			ws_end(w);
			return;
		}
}

/* Close a bridge and free it. */
static void
ws_free(struct ws *w, const char *why)
{
	log_info("%s: terminal %s detached: %s", w->peer, w->id, why);
	if (!w->evicted)
		TAILQ_REMOVE(&ws_all, w, entry);
	event_free(w->ev_pty);
	event_free(w->ev_ptyw);
	event_free(w->ev_ping);
	event_free(w->ev_end);
	json_object_put(w->end);
	evbuffer_free(w->to_pty);
	wslay_event_context_free(w->ctx);
	bufferevent_free(w->bev);
	http_released();
	close(w->pty);
	free(w);
}

/*
 * Another viewer attached to the same terminal: tell this one so (close
 * 4001) rather than dropping it like a network failure; it is freed once
 * the close frame is out.
 */
static void
ws_evict(struct ws *w)
{
	static const char	why[] = "attached elsewhere";

	log_info("%s: terminal %s attached elsewhere", w->peer, w->id);
	TAILQ_REMOVE(&ws_all, w, entry);
	w->evicted = 1;
	event_del(w->ev_pty);
	event_del(w->ev_ptyw);
	evtimer_del(w->ev_end);
	/* Its input is for no terminal now: read on, for the close reply. */
	evbuffer_drain(w->to_pty, evbuffer_get_length(w->to_pty));
	ws_input_resume(w);
	wslay_event_queue_close(w->ctx, 4001, (const uint8_t *)why,
	    sizeof(why) - 1);
	ws_pump(w);
}

/* brokerd answered the attach: upgrade and bridge, or refuse. */
static void
ws_attached(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	static const struct wslay_event_callbacks cbs = {
		ws_recv_cb, ws_send_cb, NULL, NULL, NULL, NULL, ws_msg_cb
	};
	struct ws_wait		*wt = arg;
	struct http_request	*req = wt->req;
	struct ws		*w, *old;
	struct timeval		 tv = { WS_PING_SECS, 0 };
	char			 peer[64], rid[LOG_REQUEST_ID_LEN + 1];
	int			 fd;

	req->pending = NULL;
	if (api_broker_failed(req, m)) {
		free(wt);
		return;
	}
	if (m->nfds != 1) {
		http_reply_error(req, 502, ERR_INTERNAL, "no terminal fd", NULL);
		free(wt);
		return;
	}
	fd = m->fds[0];
	m->fds[0] = -1;
	snprintf(peer, sizeof(peer), "%s", req->peer);
	memcpy(rid, req->request_id, sizeof(rid));
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("%s", __func__);
	if ((w->bev = http_takeover(req, 101)) == NULL) {
		close(fd);
		free(w);
		free(wt);
		return;
	}
	w->pty = fd;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	memcpy(w->id, wt->id, sizeof(w->id));
	memcpy(w->peer, peer, sizeof(w->peer));
	evbuffer_add_printf(bufferevent_get_output(w->bev),
	    "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	    "Sec-WebSocket-Accept: %s\r\n"
	    "X-Request-Id: %s\r\n\r\n", wt->accept, rid);
	free(wt);

	if (wslay_event_context_server_init(&w->ctx, &cbs, w) != 0)
		fatalx("wslay_event_context_server_init");
	wslay_event_config_set_max_recv_msg_length(w->ctx, WS_MAX_MSG);
	w->to_pty = evbuffer_new();
	w->ev_pty = event_new(bufferevent_get_base(w->bev), fd,
	    EV_READ | EV_PERSIST, ws_pty_read, w);
	w->ev_ptyw = event_new(bufferevent_get_base(w->bev), fd, EV_WRITE,
	    ws_pty_write, w);
	w->ev_ping = event_new(bufferevent_get_base(w->bev), -1, EV_PERSIST,
	    ws_ping, w);
	w->ev_end = evtimer_new(bufferevent_get_base(w->bev), ws_end_late, w);
	if (w->to_pty == NULL || w->ev_pty == NULL || w->ev_ptyw == NULL ||
	    w->ev_ping == NULL || w->ev_end == NULL)
		fatalx("%s: out of memory", __func__);
	/* One viewer per terminal: a reload takes the terminal over. */
	TAILQ_FOREACH(old, &ws_all, entry)
		if (strcmp(old->id, w->id) == 0) {
			ws_evict(old);
			break;
		}
	TAILQ_INSERT_TAIL(&ws_all, w, entry);
	bufferevent_setcb(w->bev, ws_read_cb, ws_write_cb, ws_event_cb, w);
	bufferevent_setwatermark(w->bev, EV_READ, 0, WS_INPUT_BUF);
	bufferevent_enable(w->bev, EV_READ | EV_WRITE);
	event_add(w->ev_pty, NULL);
	evtimer_add(w->ev_ping, &tv);
	log_info("%s: terminal %s attached", w->peer, w->id);
	/* Frames the client sent right after its request are already here. */
	if (evbuffer_get_length(bufferevent_get_input(w->bev)) > 0)
		ws_pump(w);
}

/* GET /api/terminals/{id}/ws */
void
ws_handle(struct http_request *req)
{
	struct json_object	*obj;
	struct ipc_peer		*broker;
	struct ws_wait		*wt;
	const char		*h, *key, *p;
	char			 host[33], id[17];
	size_t			 i;

	/* HEX16 or HOST.HEX16 (a fleet's): brokerd checks the host. */
	p = req->path + strlen("/api/terminals/");
	if (api_terminal_id(req->path, host, id) == -1 ||
	    strcmp(p + strcspn(p, "/"), "/ws") != 0) {
		http_reply_error(req, 404, ERR_NOT_FOUND, "no such terminal",
		    NULL);
		return;
	}
	if ((h = http_header(req, "Upgrade")) == NULL ||
	    strcasecmp(h, "websocket") != 0 ||
	    (h = http_header(req, "Connection")) == NULL ||
	    !ws_has_token(h, "upgrade")) {
		http_reply_error(req, 400, ERR_BAD_REQUEST,
		    "a WebSocket upgrade is required here", NULL);
		return;
	}
	if ((h = http_header(req, "Sec-WebSocket-Version")) == NULL ||
	    strcmp(h, "13") != 0) {
		http_reply_error(req, 400, ERR_BAD_REQUEST,
		    "Sec-WebSocket-Version must be 13",
		    "Sec-WebSocket-Version: 13\r\n");
		return;
	}
	/* The key is 16 random bytes in base64: 24 characters. */
	key = http_header(req, "Sec-WebSocket-Key");
	if (key == NULL || strlen(key) != 24 || key[22] != '=' ||
	    key[23] != '=') {
		http_reply_error(req, 400, ERR_BAD_REQUEST,
		    "malformed Sec-WebSocket-Key", NULL);
		return;
	}
	for (i = 0; i < 22; i++)
		if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789+/", key[i]) == NULL) {
			http_reply_error(req, 400, ERR_BAD_REQUEST,
			    "malformed Sec-WebSocket-Key", NULL);
			return;
		}
	if (!ws_origin_allowed(req)) {
		http_reply_error(req, 403, ERR_FORBIDDEN,
		    "cross-origin WebSocket refused", NULL);
		return;
	}
	if ((broker = api_broker_peer()) == NULL) {
		http_reply_error(req, 503, ERR_UNAVAILABLE,
		    "brokerd is unreachable", NULL);
		return;
	}
	if ((wt = calloc(1, sizeof(*wt))) == NULL)
		fatal("%s", __func__);
	wt->req = req;
	memcpy(wt->id, id, sizeof(wt->id));
	ws_accept_key(key, wt->accept);
	obj = json_object_new_object();
	json_object_object_add(obj, "type",
	    json_object_new_string(MSG_TERMINAL_ATTACH));
	json_object_object_add(obj, "terminal", json_object_new_string(wt->id));
	if (host[0] != '\0')
		json_object_object_add(obj, "host",
		    json_object_new_string(host));
	api_add_auth(req, obj);
	req->pending = wt;
	if (ipc_request(broker, obj, NULL, 0, WS_ATTACH_MS, ws_attached,
	    wt) == -1 && req->pending == wt) {
		req->pending = NULL;
		free(wt);
		http_reply_error(req, 503, ERR_UNAVAILABLE,
		    "brokerd is unreachable", NULL);
	}
}

/*
 * Before the seccomp filter: OpenSSL loads its configuration and SHA-1
 * implementation on first use, which opens files frontd may not open later.
 */
void
ws_init(void)
{
	char	out[64];

	ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out);
	if (strcmp(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") != 0)
		fatalx("%s: SHA-1 self-test failed", __func__);
}
