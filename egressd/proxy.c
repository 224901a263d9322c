/*
 * The proxy proper: one listener per spawn (a listening Unix socket that
 * sandboxd made and passed), and its connections. Each connection reads
 * one request head, is checked (port, IP literal, denylist, allowlist),
 * resolved (the hosts file, else DNS), checked again on every address it
 * resolved to (the denied networks), connected to those addresses only
 * (never resolved again: DNS rebinding gets nowhere), and relayed both
 * ways with bounded buffers. Every attempt is logged to sandboxd when it
 * ends, at most EGRESS_LOG_PER_MINUTE a minute per listener, the rest
 * folded into per-minute summaries.
 */
#include <sys/types.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/util.h>

#include "egressd.h"

enum conn_state {
	CS_HEAD,	/* reading the request head */
	CS_RESOLVE,	/* waiting for DNS */
	CS_CONNECT,	/* connecting upstream */
	CS_RELAY,	/* relaying both ways */
	CS_CLOSING,	/* writing a refusal, then closed */
};

struct listener;

/*
 * One direction of a spliced relay: src's bytes go through a pipe to dst,
 * in the kernel. pre holds what the bufferevents had read or queued
 * before the splice began; it goes first.
 */
struct pump {
	int		 src, dst;	/* the conn's descriptors */
	int		 p[2];		/* the pipe: p[0] read, p[1] write */
	size_t		 inpipe;	/* bytes in the pipe */
	size_t		 cap;		/* the pipe's size */
	struct evbuffer	*pre;
	int		 eof;		/* src said EOF */
	int		 shut;		/* dst got SHUT_WR */
};

struct conn {
	TAILQ_ENTRY(conn)	 entry;
	struct listener		*l;
	enum conn_state		 state;
	struct bufferevent	*bc;		/* the client (the bridge) */
	struct bufferevent	*bu;		/* upstream */
	char			*head;		/* the request head, parsed */
	struct egress_req	 req;
	int			 parsed;	/* req holds a host */
	struct evdns_getaddrinfo_request *dnsreq;
	int			 resolving;
	int			 dns_err;
	struct event		*ev_step;	/* after DNS, from the loop */
	struct event		*ev_conn;	/* upstream fd writable */
	struct event		*ev_timeout;	/* connect timeout */
	struct sockaddr_storage	 addrs[EGRESS_ADDRS_MAX];
	socklen_t		 lens[EGRESS_ADDRS_MAX];
	int			 naddrs, next;
	int			 ufd;		/* connecting, not yet wrapped */
	char			 addr[INET6_ADDRSTRLEN];
	char			 connerr[128];
	int64_t			 start_ms, last_ms;
	uint64_t		 up, down;
	int			 c_eof, u_eof;
	int			 resp_done;	/* the response head went */
	int			 sfd_c, sfd_u;	/* spliced: client, upstream */
	struct event		*ev_c, *ev_u;	/* edge-triggered, both ways */
	struct pump		 pu;		/* client -> upstream */
	struct pump		 pd;		/* upstream -> client */
};
TAILQ_HEAD(conns, conn);

/* A (host, port, verdict) folded during the minute. */
struct summary {
	TAILQ_ENTRY(summary)	 entry;
	char			 host[EGRESS_HOST_MAX + 3];
	int			 port;
	int			 allowed;
	int64_t			 count, up, down, duration, since_ms;
};

/* A spawn's list of admin additions (patterns). */
struct allowset {
	char	**v;
	size_t	  n;
};

struct listener {
	TAILQ_ENTRY(listener)	 entry;
	char			 spawn[17];
	char			 user[33];
	char			 session[33];	/* "" when none */
	struct allowset		 allow_user, allow_session;
	int			 fd;
	struct event		*ev_accept;
	struct event		*ev_pause;
	struct conns		 conns;
	int			 nconns;
	int64_t			 win_start;	/* mono ms */
	int			 win_sent;
	TAILQ_HEAD(summary_head, summary) sums;
	int			 nsums;
	struct event		*ev_win;
};

static TAILQ_HEAD(, listener)	 proxy_listeners =
    TAILQ_HEAD_INITIALIZER(proxy_listeners);
static struct event_base	*proxy_base;
static struct egress_policy	*proxy_policy;
static struct event		*proxy_ev_sweep;
static int			 proxy_nconns;

static void	conn_free(struct conn *);
static void	relay_splice_free(struct conn *);
static int	relay_splice_start(struct conn *);
static void	conn_connect_next(struct conn *);

/* Free an additions list. */
static void
allowset_clear(struct allowset *a)
{
	size_t	i;

	for (i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	a->v = NULL;
	a->n = 0;
}

/* Replace an additions list by the valid patterns of a JSON array. */
static void
allowset_set(struct allowset *a, struct json_object *arr, const char *spawn)
{
	struct json_object	*it;
	const char		*p;
	size_t			 i, n;
	char			 esc[LOG_ESCAPE_MAX];

	allowset_clear(a);
	if (arr == NULL || !json_object_is_type(arr, json_type_array))
		return;
	n = json_object_array_length(arr);
	if ((a->v = calloc(n + 1, sizeof(*a->v))) == NULL)
		fatal("%s", __func__);
	for (i = 0; i < n; i++) {
		it = json_object_array_get_idx(arr, i);
		p = json_object_get_string(it);
		if (!json_object_is_type(it, json_type_string) ||
		    !egress_pattern_valid(p)) {
			log_warnx("spawn %s: ignoring the allowlist addition "
			    "\"%s\": not a name or *.suffix", spawn,
			    log_escape(p != NULL ? p : "", p != NULL ?
			    strlen(p) : 0, esc, sizeof(esc)));
			continue;
		}
		if ((a->v[a->n++] = strdup(p)) == NULL)
			fatal("%s", __func__);
	}
}

/* Whether an additions list allows host. */
static int
allowset_match(const struct allowset *a, const char *host)
{
	size_t	i;

	for (i = 0; i < a->n; i++)
		if (egress_match(a->v[i], host))
			return 1;
	return 0;
}

/* The numeric text of an address (no port). */
static void
proxy_addr_text(const struct sockaddr_storage *ss, char *buf, size_t bufsz)
{
	const struct sockaddr_in	*sin = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6	*sin6 = (const struct sockaddr_in6 *)ss;

	if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &sin6->sin6_addr, buf, bufsz);
	else
		inet_ntop(AF_INET, &sin->sin_addr, buf, bufsz);
}

/* Send one record of a listener's log to sandboxd. */
static void
listener_send(struct listener *l, const char *kind, const char *host,
    int port, int allowed, const char *addr, const char *reason,
    int64_t count, int64_t up, int64_t down, int64_t duration,
    int64_t since_ms)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(MSG_EGRESS_LOG));
	json_object_object_add(o, "kind", json_object_new_string(kind));
	json_object_object_add(o, "spawn", json_object_new_string(l->spawn));
	json_object_object_add(o, "user", json_object_new_string(l->user));
	if (l->session[0] != '\0')
		json_object_object_add(o, "session",
		    json_object_new_string(l->session));
	json_object_object_add(o, "host", json_object_new_string(host));
	json_object_object_add(o, "port", json_object_new_int(port));
	if (addr != NULL && addr[0] != '\0')
		json_object_object_add(o, "addr", json_object_new_string(addr));
	json_object_object_add(o, "verdict", json_object_new_string(allowed ?
	    "allowed" : "refused"));
	if (reason != NULL)
		json_object_object_add(o, "reason",
		    json_object_new_string(reason));
	json_object_object_add(o, "bytes_up", json_object_new_int64(up));
	json_object_object_add(o, "bytes_down", json_object_new_int64(down));
	json_object_object_add(o, "duration_ms",
	    json_object_new_int64(duration));
	json_object_object_add(o, "count", json_object_new_int64(count));
	if (since_ms > 0)
		json_object_object_add(o, "since_ms",
		    json_object_new_int64(since_ms));
	sandbox_log(o);
}

/* Send the minute's summaries and start a new minute. */
static void
listener_flush(struct listener *l)
{
	struct summary	*s;

	while ((s = TAILQ_FIRST(&l->sums)) != NULL) {
		TAILQ_REMOVE(&l->sums, s, entry);
		listener_send(l, "summary", s->host, s->port, s->allowed, NULL,
		    NULL, s->count, s->up, s->down, s->duration, s->since_ms);
		free(s);
	}
	l->nsums = 0;
	l->win_start = now_mono_ms();
	l->win_sent = 0;
	evtimer_del(l->ev_win);
}

/* The minute is over: its summaries go out. */
static void
listener_window(evutil_socket_t fd, short ev, void *arg)
{
	listener_flush(arg);
}

/*
 * Log one attempt that ended: as a connect record while the listener has
 * sent fewer than EGRESS_LOG_PER_MINUTE this minute, else folded.
 */
static void
listener_record(struct listener *l, const char *host, int port, int allowed,
    const char *addr, const char *reason, int64_t up, int64_t down,
    int64_t duration)
{
	struct summary	*s;
	struct timeval	 tv;
	int64_t		 now = now_mono_ms(), left;

	if (now - l->win_start >= 60000 && TAILQ_EMPTY(&l->sums)) {
		l->win_start = now;
		l->win_sent = 0;
	}
	if (l->win_sent < EGRESS_LOG_PER_MINUTE) {
		l->win_sent++;
		listener_send(l, "connect", host, port, allowed, addr, reason,
		    1, up, down, duration, 0);
		return;
	}
	TAILQ_FOREACH(s, &l->sums, entry)
		if (s->port == port && s->allowed == allowed &&
		    strcmp(s->host, host) == 0)
			break;
	if (s == NULL && l->nsums >= EGRESS_SUMMARIES_MAX)
		s = TAILQ_LAST(&l->sums, summary_head);
	if (s == NULL) {
		if ((s = calloc(1, sizeof(*s))) == NULL)
			fatal("%s", __func__);
		snprintf(s->host, sizeof(s->host), "%s", host);
		s->port = port;
		s->allowed = allowed;
		s->since_ms = now_wall_ms();
		TAILQ_INSERT_TAIL(&l->sums, s, entry);
		l->nsums++;
	}
	s->count++;
	s->up += up;
	s->down += down;
	s->duration += duration;
	if (!evtimer_pending(l->ev_win, NULL)) {
		left = l->win_start + 60000 - now;
		if (left < 0)
			left = 0;
		tv.tv_sec = left / 1000;
		tv.tv_usec = (left % 1000) * 1000;
		evtimer_add(l->ev_win, &tv);
	}
}

/* A connection's log line and record, as it ends. */
static void
conn_log(struct conn *c, int allowed, const char *reason)
{
	struct egress_req	*r = &c->req;
	int64_t			 dur = now_mono_ms() - c->start_ms;

	log_info("egress: spawn %s user %s %s %s:%d%s%s %s%s%s, %llu bytes "
	    "up, %llu down, %lld ms", c->l->spawn, c->l->user,
	    r->connect ? "CONNECT" : r->method, r->host, r->port,
	    c->addr[0] != '\0' ? " via " : "", c->addr,
	    allowed ? "allowed" : "refused", reason != NULL ? ": " : "",
	    reason != NULL ? reason : "", (unsigned long long)c->up,
	    (unsigned long long)c->down, (long long)dur);
	listener_record(c->l, r->host, r->port, allowed, c->addr, reason,
	    (int64_t)c->up, (int64_t)c->down, dur);
}

/* Everything of a connection goes, its counts too. */
static void
conn_free(struct conn *c)
{
	if (c->dnsreq != NULL) {
		/* Its callback runs now, with EVUTIL_EAI_CANCEL. */
		evdns_getaddrinfo_cancel(c->dnsreq);
		c->dnsreq = NULL;
	}
	if (c->bc != NULL)
		bufferevent_free(c->bc);
	if (c->bu != NULL)
		bufferevent_free(c->bu);
	if (c->ufd != -1)
		close(c->ufd);
	if (c->ev_step != NULL)
		event_free(c->ev_step);
	if (c->ev_conn != NULL)
		event_free(c->ev_conn);
	if (c->ev_timeout != NULL)
		event_free(c->ev_timeout);
	relay_splice_free(c);
	free(c->head);
	TAILQ_REMOVE(&c->l->conns, c, entry);
	c->l->nconns--;
	proxy_nconns--;
	free(c);
}

/* A refusal's response is out: the connection ends. */
static void
conn_refused_drained(struct bufferevent *bev, void *arg)
{
	conn_free(arg);
}

/* The client went away or stalled while its refusal was written. */
static void
conn_refused_event(struct bufferevent *bev, short what, void *arg)
{
	conn_free(arg);
}

/*
 * Refuse or fail a request: the response, then close. Logged as
 * refused for a policy refusal, as allowed (with the reason) for an
 * upstream that could not be reached.
 */
static void
conn_refuse(struct conn *c, enum refusal r, struct refusal_ctx *ctx)
{
	struct timeval	 tv = { EGRESS_HEAD_TIMEOUT, 0 };
	char		*resp, reason[256];
	size_t		 len;
	int		 status = refusal_status(r);

	/* A lookup or a connect under way (a timeout's case) goes first. */
	if (c->dnsreq != NULL) {
		evdns_getaddrinfo_cancel(c->dnsreq);
		c->dnsreq = NULL;
	}
	event_del(c->ev_step);
	if (c->ev_conn != NULL) {
		event_free(c->ev_conn);
		c->ev_conn = NULL;
	}
	if (c->ufd != -1) {
		close(c->ufd);
		c->ufd = -1;
	}
	evtimer_del(c->ev_timeout);
	ctx->host = c->parsed ? c->req.host : NULL;
	ctx->port = c->req.port;
	ctx->ports = proxy_policy->ports_text;
	if (ctx->addr == NULL)
		ctx->addr = c->addr;
	refusal_reason(r, ctx, reason, sizeof(reason));
	if (c->parsed)
		conn_log(c, status != 403 && r != REF_BAD_REQUEST &&
		    r != REF_BUSY ? 1 : 0, reason);
	else {
		/* No host to name: logged all the same, host "" port 0. */
		log_info("egress: spawn %s user %s: %s%s%s", c->l->spawn,
		    c->l->user, reason, ctx->detail != NULL ? ": " : "",
		    ctx->detail != NULL ? ctx->detail : "");
		listener_record(c->l, "", 0, 0, NULL, reason, 0, 0,
		    now_mono_ms() - c->start_ms);
	}
	c->state = CS_CLOSING;
	if ((resp = refusal_response(r, ctx, &len)) == NULL) {
		conn_free(c);
		return;
	}
	bufferevent_disable(c->bc, EV_READ);
	bufferevent_setcb(c->bc, NULL, conn_refused_drained,
	    conn_refused_event, c);
	bufferevent_setwatermark(c->bc, EV_WRITE, 0, 0);
	bufferevent_set_timeouts(c->bc, NULL, &tv);
	bufferevent_write(c->bc, resp, len);
	bufferevent_enable(c->bc, EV_WRITE);
	free(resp);
}

/* Refuse with a plain reason (no address, no detail). */
static void
conn_refuse_simple(struct conn *c, enum refusal r, const char *detail)
{
	struct refusal_ctx	ctx;

	memset(&ctx, 0, sizeof(ctx));
	ctx.detail = detail;
	conn_refuse(c, r, &ctx);
}

/* A tunnel or request ended: log it and close. */
static void
conn_end(struct conn *c, const char *reason)
{
	conn_log(c, 1, reason);
	conn_free(c);
}

/*
 * The response head of an absolute-form request, rewritten for the client
 * (response_rewrite). 1 while it is incomplete; 0 once it went (or proved
 * not to be one: then the bytes go as they are).
 */
static int
relay_response_head(struct conn *c)
{
	struct evbuffer	*in = bufferevent_get_input(c->bu);
	const char	*data;
	char		*out;
	size_t		 len, hl, outlen;
	int		 interim;

	while (!c->resp_done) {
		len = evbuffer_get_length(in);
		data = (const char *)evbuffer_pullup(in,
		    len > EGRESS_HEAD_MAX ? EGRESS_HEAD_MAX : (ssize_t)len);
		hl = request_head_len(data, len > EGRESS_HEAD_MAX ?
		    EGRESS_HEAD_MAX : len);
		if (hl == 0) {
			if (len < EGRESS_HEAD_MAX)
				return 1;
			c->resp_done = 1;
			break;
		}
		if ((out = response_rewrite(data, hl, &outlen,
		    &interim)) == NULL) {
			c->resp_done = 1;
			break;
		}
		evbuffer_drain(in, hl);
		bufferevent_write(c->bc, out, outlen);
		c->down += outlen;
		free(out);
		if (!interim)
			c->resp_done = 1;
	}
	return 0;
}

/* Move what src read to dst; stop reading src while dst is full. */
static void
relay_read(struct bufferevent *src, void *arg)
{
	struct conn		*c = arg;
	struct bufferevent	*dst = src == c->bc ? c->bu : c->bc;
	struct evbuffer		*in = bufferevent_get_input(src);
	struct evbuffer		*out = bufferevent_get_output(dst);
	size_t			 n;

	if (src == c->bu && !c->resp_done) {
		if (relay_response_head(c) == 1)
			return;
		/* The rest is bytes as they are: the kernel moves them. */
		if (relay_splice_start(c) == 0)
			return;
	}
	n = evbuffer_get_length(in);

	if (src == c->bc)
		c->up += n;
	else
		c->down += n;
	evbuffer_add_buffer(out, in);
	c->last_ms = now_mono_ms();
	if (evbuffer_get_length(out) >= EGRESS_BUF_MAX) {
		bufferevent_disable(src, EV_READ);
		bufferevent_setwatermark(dst, EV_WRITE, EGRESS_BUF_MAX / 2, 0);
	}
}

/*
 * dst's output went below its low watermark: read its source again; once
 * drained, pass an end of stream on (client: half-close upstream;
 * upstream: the connection is over).
 */
static void
relay_write(struct bufferevent *dst, void *arg)
{
	struct conn		*c = arg;
	struct bufferevent	*src = dst == c->bc ? c->bu : c->bc;
	int			 src_eof = src == c->bc ? c->c_eof : c->u_eof;

	if (!src_eof && !(bufferevent_get_enabled(src) & EV_READ)) {
		bufferevent_setwatermark(dst, EV_WRITE, 0, 0);
		bufferevent_enable(src, EV_READ);
	}
	if (evbuffer_get_length(bufferevent_get_output(dst)) != 0)
		return;
	c->last_ms = now_mono_ms();
	if (dst == c->bc && c->u_eof)
		conn_end(c, NULL);
	else if (dst == c->bu && c->c_eof)
		shutdown(bufferevent_getfd(c->bu), SHUT_WR);
}

/* An end of stream or an error on either side of a relay. */
static void
relay_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn	*c = arg;
	char		 reason[160];

	if (what & BEV_EVENT_ERROR) {
		snprintf(reason, sizeof(reason), "%s: %s", bev == c->bc ?
		    "client" : "upstream",
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		conn_end(c, reason);
		return;
	}
	if (!(what & BEV_EVENT_EOF))
		return;
	bufferevent_disable(bev, EV_READ);
	if (bev == c->bu) {
		c->u_eof = 1;
		if (evbuffer_get_length(bufferevent_get_output(c->bc)) == 0)
			conn_end(c, NULL);
		return;
	}
	c->c_eof = 1;
	if (c->u_eof) {
		conn_end(c, NULL);
		return;
	}
	if (evbuffer_get_length(bufferevent_get_output(c->bu)) == 0)
		shutdown(bufferevent_getfd(c->bu), SHUT_WR);
}

#define RELAY_BUDGET	(1024 * 1024)	/* bytes a direction moves a turn */

/* The splice relay's descriptors, pipes, events and buffers go. */
static void
relay_splice_free(struct conn *c)
{
	struct pump	*p[2] = { &c->pu, &c->pd };
	int		 i;

	if (c->ev_c != NULL)
		event_free(c->ev_c);
	if (c->ev_u != NULL)
		event_free(c->ev_u);
	c->ev_c = c->ev_u = NULL;
	for (i = 0; i < 2; i++) {
		if (p[i]->p[0] != -1)
			close(p[i]->p[0]);
		if (p[i]->p[1] != -1)
			close(p[i]->p[1]);
		p[i]->p[0] = p[i]->p[1] = -1;
		if (p[i]->pre != NULL)
			evbuffer_free(p[i]->pre);
		p[i]->pre = NULL;
	}
	if (c->sfd_c != -1)
		close(c->sfd_c);
	if (c->sfd_u != -1)
		close(c->sfd_u);
	c->sfd_c = c->sfd_u = -1;
}

/* A direction's pipe, as large as EGRESS_BUF_MAX when the kernel lets. */
static int
relay_pipe(struct pump *p)
{
	int	sz;

	if (pipe2(p->p, O_NONBLOCK | O_CLOEXEC) == -1) {
		p->p[0] = p->p[1] = -1;
		return -1;
	}
	/* Refused past the user's pipe pages: the default size then. */
	(void)fcntl(p->p[1], F_SETPIPE_SZ, EGRESS_BUF_MAX);
	if ((sz = fcntl(p->p[1], F_GETPIPE_SZ)) <= 0)
		return -1;
	p->cap = (size_t)sz;
	return 0;
}

/*
 * Move one direction's bytes until both its ends would block (the
 * events are edge-triggered: nothing is left that a wake-up would be
 * needed for), or RELAY_BUDGET bytes went: then 1, to go on in the next
 * turn of the loop, the other connections' turn in between. 0 when
 * blocked, -1 when src failed, -2 when dst did (errno set).
 */
static int
relay_pump(struct conn *c, struct pump *p, uint64_t *count)
{
	const unsigned int	 fl = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
	ssize_t			 n;
	size_t			 moved = 0;
	int			 progress;

	while (evbuffer_get_length(p->pre) > 0) {
		if (evbuffer_write(p->pre, p->dst) == -1) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -2;
		}
		c->last_ms = now_mono_ms();
	}
	do {
		progress = 0;
		if (p->inpipe > 0) {
			n = splice(p->p[0], NULL, p->dst, NULL, p->inpipe, fl);
			if (n > 0) {
				p->inpipe -= (size_t)n;
				progress = 1;
			} else if (n == -1 && errno == EINTR)
				progress = 1;
			else if (n == -1 && errno != EAGAIN)
				return -2;
		}
		/* A full pipe (in slots) says EAGAIN: then dst would block. */
		if (!p->eof && p->inpipe < p->cap) {
			n = splice(p->src, NULL, p->p[1], NULL,
			    p->cap - p->inpipe, fl);
			if (n > 0) {
				p->inpipe += (size_t)n;
				*count += (uint64_t)n;
				moved += (size_t)n;
				progress = 1;
			} else if (n == 0)
				p->eof = 1;
			else if (errno == EINTR)
				progress = 1;
			else if (errno != EAGAIN)
				return -1;
		}
		if (progress)
			c->last_ms = now_mono_ms();
		if (moved >= RELAY_BUDGET)
			return 1;
	} while (progress);
	return 0;
}

/* Both directions of a spliced relay, then its ends of stream. */
static void
relay_splice_run(struct conn *c)
{
	const char	*who;
	char		 reason[160];
	int		 r, more;

	if ((r = relay_pump(c, &c->pu, &c->up)) < 0) {
		who = r == -1 ? "client" : "upstream";
		goto fail;
	}
	more = r;
	if ((r = relay_pump(c, &c->pd, &c->down)) < 0) {
		who = r == -1 ? "upstream" : "client";
		goto fail;
	}
	/* A budget ran out: no edge will come for what is left. */
	if (more || r)
		event_active(c->ev_c, EV_WRITE, 0);
	/* Upstream's end, once the client has it all: the connection's. */
	if (c->pd.eof && c->pd.inpipe == 0 &&
	    evbuffer_get_length(c->pd.pre) == 0) {
		conn_end(c, NULL);
		return;
	}
	/* The client's end goes on upstream as a half-close. */
	if (c->pu.eof && !c->pu.shut && c->pu.inpipe == 0 &&
	    evbuffer_get_length(c->pu.pre) == 0) {
		(void)shutdown(c->sfd_u, SHUT_WR);
		c->pu.shut = 1;
	}
	return;
fail:
	snprintf(reason, sizeof(reason), "%s: %s", who, strerror(errno));
	conn_end(c, reason);
}

/* A spliced relay's descriptor is ready, one way or both. */
static void
relay_splice_cb(evutil_socket_t fd, short ev, void *arg)
{
	relay_splice_run(arg);
}

/*
 * Leave the bufferevents for splice(2) through a pipe each way, on
 * edge-triggered events: no copy through egressd, no watermark toggling.
 * What the bufferevents hold goes first, counted as before. -1 when it
 * cannot (no pipe, no edge-triggered backend): the bufferevents relay
 * then; 0 once done (the connection may be gone by then).
 */
static int
relay_splice_start(struct conn *c)
{
	struct evbuffer	*in_c = bufferevent_get_input(c->bc);
	struct evbuffer	*in_u = bufferevent_get_input(c->bu);
	short		 ev = EV_READ | EV_WRITE | EV_PERSIST | EV_ET;

	if (!(event_base_get_features(proxy_base) & EV_FEATURE_ET))
		return -1;
	if (relay_pipe(&c->pu) == -1 || relay_pipe(&c->pd) == -1 ||
	    (c->sfd_c = dup(bufferevent_getfd(c->bc))) == -1 ||
	    (c->sfd_u = dup(bufferevent_getfd(c->bu))) == -1 ||
	    (c->pu.pre = evbuffer_new()) == NULL ||
	    (c->pd.pre = evbuffer_new()) == NULL ||
	    (c->ev_c = event_new(proxy_base, c->sfd_c, ev, relay_splice_cb,
	    c)) == NULL ||
	    (c->ev_u = event_new(proxy_base, c->sfd_u, ev, relay_splice_cb,
	    c)) == NULL) {
		log_debug("egress: spawn %s: no splice relay: %s",
		    c->l->spawn, strerror(errno));
		relay_splice_free(c);
		return -1;
	}
	c->pu.src = c->pd.dst = c->sfd_c;
	c->pd.src = c->pu.dst = c->sfd_u;
	/* A socket bufferevent's output is frozen at its start but to it. */
	evbuffer_unfreeze(bufferevent_get_output(c->bu), 1);
	evbuffer_unfreeze(bufferevent_get_output(c->bc), 1);
	c->up += evbuffer_get_length(in_c);
	c->down += evbuffer_get_length(in_u);
	if (evbuffer_add_buffer(c->pu.pre, bufferevent_get_output(c->bu)) ==
	    -1 || evbuffer_add_buffer(c->pu.pre, in_c) == -1 ||
	    evbuffer_add_buffer(c->pd.pre, bufferevent_get_output(c->bc)) ==
	    -1 || evbuffer_add_buffer(c->pd.pre, in_u) == -1) {
		conn_end(c, "out of memory");
		return 0;
	}
	c->pu.eof = c->c_eof;
	c->pd.eof = c->u_eof;
	/* Safe from their own callbacks: libevent defers the free. */
	bufferevent_free(c->bc);
	bufferevent_free(c->bu);
	c->bc = c->bu = NULL;
	event_add(c->ev_c, NULL);
	event_add(c->ev_u, NULL);
	relay_splice_run(c);
	return 0;
}

/* Connected upstream: answer CONNECT or forward the request, then relay. */
static void
conn_established(struct conn *c, int fd)
{
	static const char	 ok[] = "HTTP/1.1 200 Connection established\r\n"
	    "\r\n";
	char			*fwd;
	size_t			 len;

	evtimer_del(c->ev_timeout);
	if ((c->bu = bufferevent_socket_new(proxy_base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(fd);
		conn_end(c, "out of memory");
		return;
	}
	c->state = CS_RELAY;
	c->last_ms = now_mono_ms();
	/* A tunnel's bytes are the client's business from the start. */
	c->resp_done = c->req.connect;
	if (c->req.connect)
		bufferevent_write(c->bc, ok, sizeof(ok) - 1);
	else {
		if ((fwd = request_forward(&c->req, &len)) == NULL) {
			conn_end(c, "out of memory");
			return;
		}
		bufferevent_write(c->bu, fwd, len);
		c->up += len;
		free(fwd);
	}
	bufferevent_set_timeouts(c->bc, NULL, NULL);
	bufferevent_setwatermark(c->bc, EV_READ, 0, 0);
	bufferevent_setcb(c->bc, relay_read, relay_write, relay_event, c);
	bufferevent_setcb(c->bu, relay_read, relay_write, relay_event, c);
	bufferevent_enable(c->bu, EV_READ | EV_WRITE);
	bufferevent_enable(c->bc, EV_READ | EV_WRITE);
	/* A tunnel is bytes as they are from the start. */
	if (c->req.connect && relay_splice_start(c) == 0)
		return;
	/* What the client sent after its head (a body, a TLS hello). */
	if (evbuffer_get_length(bufferevent_get_input(c->bc)) > 0)
		relay_read(c->bc, c);
}

/* The upstream socket became writable: connected, or the next address. */
static void
conn_connected(evutil_socket_t fd, short ev, void *arg)
{
	struct conn	*c = arg;
	socklen_t	 len = sizeof(int);
	int		 err = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
		err = errno;
	event_free(c->ev_conn);
	c->ev_conn = NULL;
	if (err != 0) {
		snprintf(c->connerr, sizeof(c->connerr), "%s", strerror(err));
		close(c->ufd);
		c->ufd = -1;
		conn_connect_next(c);
		return;
	}
	c->ufd = -1;
	conn_established(c, fd);
}

/*
 * Resolving or connecting took EGRESS_CONNECT_TIMEOUT seconds: 502 for
 * a name that did not resolve in time, 504 for a connect.
 */
static void
conn_connect_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct conn	*c = arg;

	if (c->state == CS_RESOLVE)
		conn_refuse_simple(c, REF_RESOLVE, "timed out");
	else
		conn_refuse_simple(c, REF_TIMEOUT, NULL);
}

/* Try the next resolved address; none left: 502 with the last error. */
static void
conn_connect_next(struct conn *c)
{
	struct sockaddr_storage	*ss;
	struct sockaddr_in	*sin;
	struct sockaddr_in6	*sin6;
	struct refusal_ctx	 ctx;
	int			 fd;

	while (c->next < c->naddrs) {
		ss = &c->addrs[c->next++];
		proxy_addr_text(ss, c->addr, sizeof(c->addr));
		if (ss->ss_family == AF_INET6) {
			sin6 = (struct sockaddr_in6 *)ss;
			sin6->sin6_port = htons(c->req.port);
		} else {
			sin = (struct sockaddr_in *)ss;
			sin->sin_port = htons(c->req.port);
		}
		fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
		if (fd == -1) {
			snprintf(c->connerr, sizeof(c->connerr), "%s",
			    strerror(errno));
			continue;
		}
		if (connect(fd, (struct sockaddr *)ss,
		    c->lens[c->next - 1]) == -1 && errno != EINPROGRESS) {
			snprintf(c->connerr, sizeof(c->connerr), "%s",
			    strerror(errno));
			close(fd);
			continue;
		}
		c->ufd = fd;
		if ((c->ev_conn = event_new(proxy_base, fd, EV_WRITE,
		    conn_connected, c)) == NULL)
			fatalx("event_new");
		event_add(c->ev_conn, NULL);
		return;
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.detail = c->connerr[0] != '\0' ? c->connerr : "no address";
	conn_refuse(c, REF_CONNECT, &ctx);
}

/*
 * The addresses are known: refuse when any lies in a denied network (not
 * exempted), else connect to them, in order.
 */
static void
conn_resolved(struct conn *c)
{
	struct refusal_ctx	 ctx;
	const char		*cidr;
	struct timeval		 tv = { EGRESS_CONNECT_TIMEOUT, 0 };
	int			 i;

	for (i = 0; i < c->naddrs; i++) {
		cidr = egress_nets_find(proxy_policy->deny_nets,
		    (struct sockaddr *)&c->addrs[i]);
		if (cidr == NULL || egress_nets_find(proxy_policy->allow_nets,
		    (struct sockaddr *)&c->addrs[i]) != NULL)
			continue;
		proxy_addr_text(&c->addrs[i], c->addr, sizeof(c->addr));
		memset(&ctx, 0, sizeof(ctx));
		ctx.cidr = cidr;
		conn_refuse(c, REF_DENY_NET, &ctx);
		return;
	}
	c->state = CS_CONNECT;
	evtimer_add(c->ev_timeout, &tv);
	conn_connect_next(c);
}

/* DNS answered (or failed): go on from the event loop. */
static void
conn_dns_done(struct conn *c, int result, struct evutil_addrinfo *res)
{
	struct evutil_addrinfo	*ai;
	int			 i;

	c->dns_err = result;
	for (ai = res; ai != NULL && c->naddrs < EGRESS_ADDRS_MAX;
	    ai = ai->ai_next) {
		if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
		    ai->ai_addrlen > sizeof(c->addrs[0]))
			continue;
		for (i = 0; i < c->naddrs; i++)
			if (c->lens[i] == ai->ai_addrlen &&
			    memcmp(&c->addrs[i], ai->ai_addr,
			    ai->ai_addrlen) == 0)
				break;
		if (i < c->naddrs)
			continue;
		memset(&c->addrs[c->naddrs], 0, sizeof(c->addrs[0]));
		memcpy(&c->addrs[c->naddrs], ai->ai_addr, ai->ai_addrlen);
		c->lens[c->naddrs++] = ai->ai_addrlen;
	}
	if (res != NULL)
		evutil_freeaddrinfo(res);
	event_active(c->ev_step, 0, 0);
}

/* evdns's callback; may run inside evdns_getaddrinfo itself. */
static void
conn_dns_cb(int result, struct evutil_addrinfo *res, void *arg)
{
	struct conn	*c = arg;

	if (result == EVUTIL_EAI_CANCEL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		return;		/* the connection is being freed */
	}
	c->resolving = 0;
	c->dnsreq = NULL;
	conn_dns_done(c, result, res);
}

/* After DNS, from the event loop: refuse or check the addresses. */
static void
conn_step(evutil_socket_t fd, short ev, void *arg)
{
	struct conn	*c = arg;

	if (c->naddrs == 0) {
		conn_refuse_simple(c, REF_RESOLVE,
		    c->dns_err != 0 ? evutil_gai_strerror(c->dns_err) : NULL);
		return;
	}
	conn_resolved(c);
}

/* Resolve the host: the hosts file first (only it, when it names it). */
static void
conn_resolve(struct conn *c)
{
	struct evutil_addrinfo			 hints;
	struct evdns_getaddrinfo_request	*req;
	struct timeval				 tv = { EGRESS_CONNECT_TIMEOUT, 0 };

	c->state = CS_RESOLVE;
	bufferevent_disable(c->bc, EV_READ);
	bufferevent_set_timeouts(c->bc, NULL, NULL);
	c->naddrs = hosts_lookup(proxy_policy->hosts, c->req.host, c->addrs,
	    c->lens, EGRESS_ADDRS_MAX);
	if (c->naddrs > 0) {
		conn_resolved(c);
		return;
	}
	if (proxy_policy->dns == NULL) {
		conn_refuse_simple(c, REF_RESOLVE, NULL);
		return;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	/* DNS gets as long as a connect; conn_resolved starts it again. */
	evtimer_add(c->ev_timeout, &tv);
	c->resolving = 1;
	req = evdns_getaddrinfo(proxy_policy->dns, c->req.host, NULL, &hints,
	    conn_dns_cb, c);
	if (!c->resolving)
		return;		/* answered inside the call */
	if (req == NULL) {
		/* Neither answered nor under way: a failure all the same. */
		c->resolving = 0;
		conn_dns_done(c, EVUTIL_EAI_FAIL, NULL);
		return;
	}
	c->dnsreq = req;
}

/* Whether a port is one of HOSTGATE_EGRESS_PORTS. */
static int
proxy_port_allowed(int port)
{
	int	i;

	for (i = 0; i < proxy_policy->nports; i++)
		if (proxy_policy->ports[i] == port)
			return 1;
	return 0;
}

/* The checks before resolution, in order; REF_NONE when all pass. */
static enum refusal
conn_check(struct conn *c, const char **detail)
{
	struct listener	*l = c->l;
	const char	*host = c->req.host;

	if (!proxy_port_allowed(c->req.port))
		return REF_PORT;
	if (egress_host_is_literal(host))
		return REF_LITERAL;
	if (!egress_host_valid(host)) {
		*detail = "not a valid host name";
		return REF_BAD_REQUEST;
	}
	if (egress_list_match(proxy_policy->deny, host, NULL, 0))
		return REF_DENYLIST;
	if (!egress_list_match(proxy_policy->allow, host, NULL, 0) &&
	    !allowset_match(&l->allow_user, host) &&
	    !allowset_match(&l->allow_session, host))
		return REF_ALLOWLIST;
	return REF_NONE;
}

/* Bytes of the head came: once it is whole, parse and check it. */
static void
conn_head_read(struct bufferevent *bev, void *arg)
{
	struct conn	*c = arg;
	struct evbuffer	*in = bufferevent_get_input(bev);
	size_t		 len = evbuffer_get_length(in), hl;
	const char	*data, *detail = NULL;
	char		 err[256];
	enum refusal	 r;

	data = (const char *)evbuffer_pullup(in, len > EGRESS_HEAD_MAX + 1 ?
	    EGRESS_HEAD_MAX + 1 : (ssize_t)len);
	if ((hl = request_head_len(data, len > EGRESS_HEAD_MAX ?
	    EGRESS_HEAD_MAX : len)) == 0) {
		if (len > EGRESS_HEAD_MAX)
			conn_refuse_simple(c, REF_BAD_REQUEST,
			    "request head over 16 KiB");
		return;
	}
	if ((c->head = malloc(hl)) == NULL)
		fatal("%s", __func__);
	memcpy(c->head, data, hl);
	evbuffer_drain(in, hl);
	if (request_parse(c->head, hl, &c->req, err, sizeof(err)) == -1) {
		c->req.host[0] = '\0';
		conn_refuse_simple(c, REF_BAD_REQUEST, err);
		return;
	}
	c->parsed = 1;
	if ((r = conn_check(c, &detail)) != REF_NONE) {
		conn_refuse_simple(c, r, detail);
		return;
	}
	conn_resolve(c);
}

/* The client went away or stalled before its head was whole. */
static void
conn_head_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn	*c = arg;

	if (what & BEV_EVENT_TIMEOUT) {
		conn_refuse_simple(c, REF_HEAD_TIMEOUT, NULL);
		return;
	}
	conn_free(c);
}

/* A new connection of a listener. */
static void
conn_new(struct listener *l, int fd)
{
	struct conn	*c;
	struct timeval	 tv = { EGRESS_HEAD_TIMEOUT, 0 };

	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("%s", __func__);
	c->l = l;
	c->ufd = -1;
	c->sfd_c = c->sfd_u = -1;
	c->pu.p[0] = c->pu.p[1] = c->pd.p[0] = c->pd.p[1] = -1;
	c->start_ms = c->last_ms = now_mono_ms();
	if ((c->bc = bufferevent_socket_new(proxy_base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL)
		fatalx("bufferevent_socket_new");
	c->ev_step = event_new(proxy_base, -1, 0, conn_step, c);
	c->ev_timeout = evtimer_new(proxy_base, conn_connect_timeout, c);
	if (c->ev_step == NULL || c->ev_timeout == NULL)
		fatalx("event_new");
	TAILQ_INSERT_TAIL(&l->conns, c, entry);
	l->nconns++;
	proxy_nconns++;
	bufferevent_setcb(c->bc, conn_head_read, NULL, conn_head_event, c);
	/* The head and one byte more, never beyond. */
	bufferevent_setwatermark(c->bc, EV_READ, 0, EGRESS_HEAD_MAX + 1);
	bufferevent_set_timeouts(c->bc, &tv, NULL);
	bufferevent_enable(c->bc, EV_READ | EV_WRITE);
}

/* Refuse a connection past the limits at once, without reading it. */
static void
proxy_busy(struct listener *l, int fd, int limit)
{
	struct refusal_ctx	 ctx;
	char			*resp;
	size_t			 len;

	memset(&ctx, 0, sizeof(ctx));
	ctx.limit = limit;
	log_warnx("egress: spawn %s user %s: refusing a connection, %d open "
	    "(at most %d)", l->spawn, l->user, limit == EGRESS_CONNS_MAX ?
	    proxy_nconns : l->nconns, limit);
	listener_record(l, "", 0, 0, NULL, "too many connections", 0, 0, 0);
	if ((resp = refusal_response(REF_BUSY, &ctx, &len)) != NULL) {
		/* A new socket's buffer takes this small answer whole. */
		(void)!write(fd, resp, len);
		free(resp);
	}
	close(fd);
}

/* Accepting paused (EMFILE) is over. */
static void
listener_resume(evutil_socket_t fd, short ev, void *arg)
{
	struct listener	*l = arg;

	event_add(l->ev_accept, NULL);
}

/* Accept what a listener has waiting, within the limits. */
static void
listener_accept(evutil_socket_t lfd, short ev, void *arg)
{
	struct listener	*l = arg;
	struct timeval	 tv = { 1, 0 };
	int		 fd, i;

	for (i = 0; i < 16; i++) {
		if ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK |
		    SOCK_CLOEXEC)) == -1) {
			if (errno == EMFILE || errno == ENFILE) {
				log_warn("egress: accept, pausing for 1 s");
				event_del(l->ev_accept);
				evtimer_add(l->ev_pause, &tv);
			} else if (errno != EAGAIN && errno != EINTR &&
			    errno != ECONNABORTED)
				log_warn("egress: accept");
			return;
		}
		if (proxy_nconns >= EGRESS_CONNS_MAX)
			proxy_busy(l, fd, EGRESS_CONNS_MAX);
		else if (l->nconns >= EGRESS_CONNS_LISTENER)
			proxy_busy(l, fd, EGRESS_CONNS_LISTENER);
		else
			conn_new(l, fd);
	}
}

/* The listener of a spawn, or NULL. */
static struct listener *
listener_find(const char *spawn)
{
	struct listener	*l;

	TAILQ_FOREACH(l, &proxy_listeners, entry)
		if (strcmp(l->spawn, spawn) == 0)
			return l;
	return NULL;
}

/* Close a listener: its connections (each logged), its summaries. */
static void
listener_free(struct listener *l)
{
	struct conn	*c;

	while ((c = TAILQ_FIRST(&l->conns)) != NULL) {
		/* A refusal was logged as it was made; a head, never. */
		if (c->parsed && c->state != CS_CLOSING)
			conn_end(c, "spawn ended");
		else
			conn_free(c);
	}
	listener_flush(l);
	TAILQ_REMOVE(&proxy_listeners, l, entry);
	event_free(l->ev_accept);
	event_free(l->ev_pause);
	event_free(l->ev_win);
	close(l->fd);
	allowset_clear(&l->allow_user);
	allowset_clear(&l->allow_session);
	free(l);
}

/* A new spawn's listener (fd taken); -1 and err when refused. */
int
proxy_listen(int fd, const char *spawn, const char *user, const char *session,
    struct json_object *allow_user, struct json_object *allow_session,
    char *err, size_t errsz)
{
	struct listener	*l;
	socklen_t	 len = sizeof(int);
	int		 type = 0, acc = 0;

	if (listener_find(spawn) != NULL) {
		snprintf(err, errsz, "spawn %s has a listener already", spawn);
		close(fd);
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == -1 ||
	    type != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) == -1 ||
	    !acc) {
		snprintf(err, errsz, "spawn %s: the fd is not a listening "
		    "stream socket", spawn);
		close(fd);
		return -1;
	}
	if (evutil_make_socket_nonblocking(fd) == -1 ||
	    evutil_make_socket_closeonexec(fd) == -1) {
		snprintf(err, errsz, "spawn %s: fcntl: %s", spawn,
		    strerror(errno));
		close(fd);
		return -1;
	}
	if ((l = calloc(1, sizeof(*l))) == NULL)
		fatal("%s", __func__);
	snprintf(l->spawn, sizeof(l->spawn), "%s", spawn);
	snprintf(l->user, sizeof(l->user), "%s", user);
	snprintf(l->session, sizeof(l->session), "%s",
	    session != NULL ? session : "");
	allowset_set(&l->allow_user, allow_user, spawn);
	allowset_set(&l->allow_session, allow_session, spawn);
	l->fd = fd;
	TAILQ_INIT(&l->conns);
	TAILQ_INIT(&l->sums);
	l->win_start = now_mono_ms();
	l->ev_accept = event_new(proxy_base, fd, EV_READ | EV_PERSIST,
	    listener_accept, l);
	l->ev_pause = evtimer_new(proxy_base, listener_resume, l);
	l->ev_win = evtimer_new(proxy_base, listener_window, l);
	if (l->ev_accept == NULL || l->ev_pause == NULL || l->ev_win == NULL)
		fatalx("event_new");
	event_add(l->ev_accept, NULL);
	TAILQ_INSERT_TAIL(&proxy_listeners, l, entry);
	log_info("egress: spawn %s user %s%s%s: listening (%zu + %zu "
	    "additions)", l->spawn, l->user, l->session[0] ? " session " : "",
	    l->session, l->allow_user.n, l->allow_session.n);
	return 0;
}

/* Close a spawn's listener and its connections; -1 when unknown. */
int
proxy_close(const char *spawn)
{
	struct listener	*l;

	if ((l = listener_find(spawn)) == NULL)
		return -1;
	log_info("egress: spawn %s: closed", spawn);
	listener_free(l);
	return 0;
}

/* Close every listener (the link to sandboxd went away). */
void
proxy_close_all(void)
{
	struct listener	*l;
	int		 n = 0;

	while ((l = TAILQ_FIRST(&proxy_listeners)) != NULL) {
		listener_free(l);
		n++;
	}
	if (n > 0)
		log_info("egress: closed %d listeners of the sandboxd that "
		    "went away", n);
}

/* Replace a scope's additions of the matching listeners; their number. */
int
proxy_update(const char *user, const char *session, int session_scope,
    struct json_object *allow)
{
	struct listener	*l;
	int		 n = 0;

	TAILQ_FOREACH(l, &proxy_listeners, entry) {
		if (session_scope) {
			if (session == NULL || strcmp(l->session, session) != 0)
				continue;
			allowset_set(&l->allow_session, allow, l->spawn);
		} else {
			if (strcmp(l->user, user) != 0)
				continue;
			allowset_set(&l->allow_user, allow, l->spawn);
		}
		n++;
	}
	return n;
}

/* Every minute: close the tunnels idle for EGRESS_IDLE_TIMEOUT. */
static void
proxy_sweep(evutil_socket_t fd, short ev, void *arg)
{
	struct listener	*l;
	struct conn	*c, *next;
	int64_t		 now = now_mono_ms();

	TAILQ_FOREACH(l, &proxy_listeners, entry)
		for (c = TAILQ_FIRST(&l->conns); c != NULL; c = next) {
			next = TAILQ_NEXT(c, entry);
			if (c->state == CS_RELAY &&
			    now - c->last_ms >= EGRESS_IDLE_TIMEOUT * 1000LL)
				conn_end(c, "idle timeout");
		}
}

/* The proxy's shared state. */
void
proxy_init(struct event_base *base, struct egress_policy *policy)
{
	struct timeval	tv = { 60, 0 };

	proxy_base = base;
	proxy_policy = policy;
	if ((proxy_ev_sweep = event_new(base, -1, EV_PERSIST, proxy_sweep,
	    NULL)) == NULL)
		fatalx("event_new");
	event_add(proxy_ev_sweep, &tv);
}
