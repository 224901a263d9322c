/*
 * IPC between hostgate's processes: SOCK_SEQPACKET Unix sockets carrying one
 * JSON object per datagram and, where the message table allows it, fds with
 * SCM_RIGHTS. A peer that breaks the protocol is dropped (tmux's
 * proc_kill_peer); the daemon lives on.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

struct ipc_out {
	char			*data;
	size_t			 len;
	int			 fds[IPC_MAX_FDS];
	int			 nfds;
	TAILQ_ENTRY(ipc_out)	 entry;
};

struct ipc_pending {
	int64_t			 id;
	const struct proto_msg	*msg;		/* its row: the reply's schema */
	ipc_reply_cb		 cb;
	void			*arg;
	int64_t			 deadline;	/* now_mono_ms() */
	struct ipc_peer		*peer;
	TAILQ_ENTRY(ipc_pending) entry;
};

struct ipc_peer {
	struct event_base	*base;
	int			 fd;
	struct event		*ev_read;
	struct event		*ev_write;
	enum ipc_role		 self;
	unsigned		 expect;
	enum ipc_role		 role;		/* claimed in the peer's hello */
	uid_t			 uid;
	int			 ready;		/* hello received */
	int			 dead;
	int			 busy;		/* inside a callback */
	const struct ipc_handler *table;
	struct ipc_peer_cbs	 cbs;
	void			*arg;
	int64_t			 next_id;
	TAILQ_HEAD(, ipc_out)	 outq;
	size_t			 outq_bytes;
	size_t			 outq_len;
	TAILQ_HEAD(ipc_pendings, ipc_pending) pending;	/* by deadline */
	struct event		*ev_timeout;	/* the first deadline */
	struct ipc_server	*server;	/* accepted by */
	struct ipc_link		*link;		/* connected by */
	TAILQ_ENTRY(ipc_peer)	 entry;
};

struct ipc_server {
	struct event_base	*base;
	int			 fd;
	struct event		*ev_accept;
	struct event		*ev_pause;
	enum ipc_role		 self;
	unsigned		 expect;
	uid_t			 uids[4];
	int			 nuids;
	const struct ipc_handler *table;
	struct ipc_peer_cbs	 cbs;
	ipc_admit_cb		 admit;		/* after the uid check, or NULL */
	void			*arg;
	TAILQ_HEAD(, ipc_peer)	 peers;
};

struct ipc_link {
	struct event_base	*base;
	char			*path;
	enum ipc_role		 self;
	enum ipc_role		 expect;
	uid_t			 uid;
	const struct ipc_handler *table;
	struct ipc_peer_cbs	 cbs;
	void			*arg;
	struct ipc_peer		*peer;
	struct event		*ev_retry;
	int			 backoff_ms;
	int			 warned;
};

#define BACKOFF_MIN_MS	50
#define BACKOFF_MAX_MS	1000

/* The message table every received message is checked against. */
static const struct proto_msg	*ipc_proto = proto_msgs;

/*
 * Whether every outgoing message is checked against its row too: in a
 * debug build (HG_DEBUG, the Makefile's default; the package is built
 * without), where a message that does not match is this daemon's bug
 * and aborts it (ipc_out_fail).
 */
#ifdef HG_DEBUG
static int			 ipc_out_checked = 1;
#else
static int			 ipc_out_checked = 0;
#endif

static void	ipc_peer_kill(struct ipc_peer *, const char *, ...)
		    HG_PRINTF(2, 3);
static void	ipc_peer_destroy(struct ipc_peer *);
static void	ipc_link_schedule(struct ipc_link *);
static void	ipc_reply_user(struct json_object *);

/* The name of one role (or of the first role of a mask). */
const char *
ipc_role_name(unsigned role)
{
	const struct proto_role	*r;

	for (r = proto_roles; r->role != 0; r++)
		if (role & r->role)
			return r->name;
	return "unknown";
}

/* The role of a name, or 0. */
static enum ipc_role
ipc_role_lookup(const char *name)
{
	const struct proto_role	*r;

	for (r = proto_roles; name != NULL && r->role != 0; r++)
		if (strcmp(name, r->name) == 0)
			return r->role;
	return 0;
}

/* Close every fd of an array. */
static void
ipc_close_fds(int *fds, int nfds)
{
	int	i;

	for (i = 0; i < nfds; i++) {
		if (fds[i] != -1)
			close(fds[i]);
		fds[i] = -1;
	}
}

/* Fill a sockaddr_un for path; -1 when it does not fit. */
static int
ipc_sockaddr(const char *path, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun->sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sun->sun_path, path, strlen(path) + 1);
	return 0;
}

/*
 * Bind and listen on path. A live listener already there is an error (a
 * second daemon of the same kind); a stale socket file is replaced.
 */
int
ipc_listen(const char *path, uid_t uid, gid_t gid, mode_t mode)
{
	struct sockaddr_un	sun;
	int			fd, probe;

	if (ipc_sockaddr(path, &sun) == -1)
		fatal("socket path %s", path);
	probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (probe == -1)
		fatal("socket");
	if (connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0)
		fatalx("%s: already in use by a running daemon", path);
	close(probe);
	if (unlink(path) == -1 && errno != ENOENT)
		fatal("unlink %s", path);

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1)
		fatal("socket");
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
		fatal("bind %s", path);
	/* Owner and mode first, then listen: nobody connects in between. */
	if (chown(path, uid, gid) == -1)
		fatal("chown %s", path);
	if (chmod(path, mode) == -1)
		fatal("chmod %s", path);
	if (listen(fd, 16) == -1)
		fatal("listen %s", path);
	return fd;
}

/* One datagram with its fds, sent without waiting: sendmsg's result. */
static ssize_t
ipc_sendmsg(int fd, const char *data, size_t len, const int *fds, int nfds)
{
	struct msghdr	 mh;
	struct iovec	 iov;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS)];
	} cmsgbuf;
	struct cmsghdr	*cm;
	ssize_t		 n;

	memset(&mh, 0, sizeof(mh));
	iov.iov_base = (void *)data;
	iov.iov_len = len;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfds > 0) {
		memset(&cmsgbuf, 0, sizeof(cmsgbuf));
		mh.msg_control = cmsgbuf.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n == -1 && errno == EINTR);
	return n;
}

/* Send as much of the output queue as the socket takes. */
static int
ipc_flush(struct ipc_peer *p)
{
	struct ipc_out	*o;

	while ((o = TAILQ_FIRST(&p->outq)) != NULL) {
		if (ipc_sendmsg(p->fd, o->data, o->len, o->fds,
		    o->nfds) == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				event_add(p->ev_write, NULL);
				return 0;
			}
			return -1;
		}
		TAILQ_REMOVE(&p->outq, o, entry);
		p->outq_bytes -= o->len;
		p->outq_len--;
		ipc_close_fds(o->fds, o->nfds);
		free(o->data);
		free(o);
	}
	event_del(p->ev_write);
	return 0;
}

/*
 * Whether a message of len bytes still fits the peer's outgoing queue. A
 * request (type and an id) past the bound fails (its caller gets -1); a
 * reply or an event means the peer does not read what it is sent: it is
 * dropped (a link reconnects by itself).
 */
static int
ipc_queue_room(struct ipc_peer *p, const char *type, int request, size_t len)
{
	if (p->outq_len < IPC_QUEUE_MAX_MSGS &&
	    p->outq_bytes + len <= IPC_QUEUE_MAX_BYTES)
		return 1;
	if (type != NULL && request) {
		log_warnx("request \"%s\" to %s refused: its outgoing queue is "
		    "full (%zu messages, %zu bytes)", type,
		    ipc_role_name(p->role ? p->role : p->expect), p->outq_len,
		    p->outq_bytes);
		return 0;
	}
	ipc_peer_kill(p, "cannot keep up: outgoing queue full (%zu messages, "
	    "%zu bytes) at %s \"%s\"", p->outq_len, p->outq_bytes,
	    type != NULL ? "event" : "a reply", type != NULL ? type : "");
	return 0;
}

/*
 * Send a datagram of len bytes, or queue a copy of it behind others or
 * when the socket is full; fds are duplicated when queued. type and
 * request say what it is, for the queue's bound.
 */
static int
ipc_queue(struct ipc_peer *p, const char *type, int request, const char *data,
    size_t len, const int *fds, int nfds)
{
	struct ipc_out	*o;
	int		 i;

	if (len > IPC_MAX_MSG) {
		log_warnx("%s: message of %zu bytes to %s is too large",
		    __func__, len, ipc_role_name(p->role ? p->role : p->expect));
		return -1;
	}
	if (!ipc_queue_room(p, type, request, len))
		return -1;
	/* Nothing waiting: straight to the socket, no copy. */
	if (TAILQ_EMPTY(&p->outq)) {
		if (ipc_sendmsg(p->fd, data, len, fds, nfds) != -1)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			ipc_peer_kill(p, "send: %s", strerror(errno));
			return -1;
		}
	}
	if ((o = calloc(1, sizeof(*o))) == NULL ||
	    (o->data = malloc(len)) == NULL)
		fatal("%s", __func__);
	memcpy(o->data, data, len);
	o->len = len;
	for (i = 0; i < nfds; i++) {
		o->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
		if (o->fds[i] == -1) {
			log_warn("%s: dup", __func__);
			o->nfds = i;
			ipc_close_fds(o->fds, o->nfds);
			free(o->data);
			free(o);
			return -1;
		}
	}
	o->nfds = nfds;
	TAILQ_INSERT_TAIL(&p->outq, o, entry);
	p->outq_bytes += o->len;
	p->outq_len++;
	event_add(p->ev_write, NULL);
	return 0;
}

/*
 * An outgoing message does not match its row: a bug of the sender, which
 * stops here, in a debug build, with what it sent and why.
 */
static void
ipc_out_fail(unsigned self, unsigned to, const char *what, const char *why)
{
	char	esc[LOG_ESCAPE_MAX];

	fatalx_abort("protocol: %s sent %s a message that does not match "
	    "the protocol table: %s: %s", ipc_role_name(self),
	    ipc_role_name(to), log_escape(what != NULL ? what : "?",
	    (size_t)-1, esc, sizeof(esc)), why);
}

/*
 * The roles whose requests pass on what a client or an operator sent,
 * unchecked: brokerd, the privileged side, checks it and answers
 * bad_request (DESIGN: frontd decides nothing). Their events and replies
 * are their own, and checked.
 */
#define IPC_RELAYS	(ROLE_FRONTD | ROLE_HGCTL)

/*
 * Check a message with a type (a request, an event) from self to a peer
 * of role to as its receiver will, with nfds fds. The hello is the one
 * type outside the table.
 */
static void
ipc_out_check(unsigned self, unsigned to, struct json_object *obj, int nfds)
{
	const struct proto_msg	*pm;
	const char		*type = json_str(obj, "type");
	char			 err[300];

	if (!ipc_out_checked || (type != NULL && strcmp(type,
	    MSG_HELLO) == 0))
		return;
	if ((self & IPC_RELAYS) && json_object_object_get_ex(obj, "id", NULL))
		return;
	if (proto_check(ipc_proto, obj, self, to, nfds, &pm, err,
	    sizeof(err)) == -1)
		ipc_out_fail(self, to, type, err);
}

/* Check a reply to a request of row pm (NULL: unknown) before it goes. */
static void
ipc_out_check_reply(struct ipc_peer *p, const struct proto_msg *pm,
    struct json_object *obj)
{
	char	err[300];

	if (ipc_out_checked && proto_check_reply(pm, obj, err,
	    sizeof(err)) == -1)
		ipc_out_fail(p->self, p->role, pm != NULL ? pm->type :
		    "a reply", err);
}

/* Check outgoing messages from now on, or stop (tests of bad input). */
void
ipc_out_check_set(int on)
{
	ipc_out_checked = on;
}

/* Queue a message (takes obj); fds are duplicated. */
int
ipc_send(struct ipc_peer *p, struct json_object *obj, const int *fds, int nfds)
{
	const char	*s, *type;
	size_t		 len;
	int		 request, rc;

	if (p->dead || nfds < 0 || nfds > IPC_MAX_FDS) {
		json_object_put(obj);
		return -1;
	}
	s = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN,
	    &len);
	type = json_str(obj, "type");
	if (type != NULL)
		ipc_out_check(p->self, p->role ? p->role : p->expect, obj,
		    nfds);
	request = type != NULL && json_object_object_get_ex(obj, "id", NULL);
	rc = ipc_queue(p, type, request, s, len, fds, nfds);
	json_object_put(obj);
	return rc;
}

/* Arm the peer's one timer for the first pending deadline. */
static void
ipc_pending_arm(struct ipc_peer *p, int64_t now)
{
	struct ipc_pending	*pd;
	struct timeval		 tv;
	int64_t			 left;

	if ((pd = TAILQ_FIRST(&p->pending)) == NULL)
		return;
	left = pd->deadline > now ? pd->deadline - now : 0;
	tv.tv_sec = left / 1000;
	tv.tv_usec = (left % 1000) * 1000;
	evtimer_add(p->ev_timeout, &tv);
}

/*
 * The peer's timer: answer every request whose time ran out with NULL, in
 * deadline order, then wait for the next. It may fire early (its first
 * request was answered meanwhile): then it only waits again.
 */
static void
ipc_pending_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct ipc_peer		*p = arg;
	struct ipc_pending	*pd;
	int64_t			 now = now_mono_ms();

	p->busy++;
	while (!p->dead && (pd = TAILQ_FIRST(&p->pending)) != NULL &&
	    pd->deadline <= now) {
		TAILQ_REMOVE(&p->pending, pd, entry);
		log_debug("request %lld to %s timed out", (long long)pd->id,
		    ipc_role_name(p->role));
		if (pd->cb != NULL)
			pd->cb(p, NULL, pd->arg);
		free(pd);
	}
	if (!p->dead)
		ipc_pending_arm(p, now);
	if (--p->busy == 0 && p->dead)
		ipc_peer_destroy(p);
}

/* Wait for the reply to request id (of row msg), at most timeout_ms. */
static void
ipc_pending_add(struct ipc_peer *p, const struct proto_msg *msg, int64_t id,
    int timeout_ms, ipc_reply_cb cb, void *arg)
{
	struct ipc_pending	*pd, *prev;
	int64_t			 now;

	if ((pd = calloc(1, sizeof(*pd))) == NULL)
		fatal("%s", __func__);
	pd->id = id;
	pd->msg = msg;
	pd->cb = cb;
	pd->arg = arg;
	pd->peer = p;
	/* In deadline order, found from the end (most share a timeout). */
	now = now_mono_ms();
	pd->deadline = now + (timeout_ms > 0 ? timeout_ms : 0);
	TAILQ_FOREACH_REVERSE(prev, &p->pending, ipc_pendings, entry)
		if (prev->deadline <= pd->deadline)
			break;
	if (prev != NULL)
		TAILQ_INSERT_AFTER(&p->pending, prev, pd, entry);
	else
		TAILQ_INSERT_HEAD(&p->pending, pd, entry);
	/* A timer already set fires no later than this one's deadline. */
	if (TAILQ_FIRST(&p->pending) == pd || !evtimer_pending(p->ev_timeout,
	    NULL))
		ipc_pending_arm(p, now);
}

/* Send a request with a fresh id; cb gets the reply or NULL. */
int
ipc_request(struct ipc_peer *p, struct json_object *obj, const int *fds,
    int nfds, int timeout_ms, ipc_reply_cb cb, void *arg)
{
	const struct proto_msg	*msg;
	int64_t			 id;

	if (p == NULL || p->dead || !p->ready) {
		json_object_put(obj);
		return -1;
	}
	msg = proto_find(ipc_proto, json_str(obj, "type"), p->self, p->role);
	id = ++p->next_id;
	json_object_object_add(obj, "id", json_object_new_int64(id));
	if (ipc_send(p, obj, fds, nfds) == -1)
		return -1;
	ipc_pending_add(p, msg, id, timeout_ms, cb, arg);
	return 0;
}

/*
 * Send a request printed by its caller: {"type": type, "id": <fresh>,
 * then members, the JSON text of its other members (without braces,
 * not empty)}. As ipc_request otherwise; type must need no escape.
 */
int
ipc_request_text(struct ipc_peer *p, const char *type, const char *members,
    size_t len, int timeout_ms, ipc_reply_cb cb, void *arg)
{
	static char	*buf;
	static size_t	 bufsz;
	char		 head[128];
	size_t		 need;
	int64_t		 id;
	int		 n;

	if (p == NULL || p->dead || !p->ready)
		return -1;
	id = ++p->next_id;
	n = snprintf(head, sizeof(head), "{\"type\":\"%s\",\"id\":%lld,",
	    type, (long long)id);
	if (n < 0 || (size_t)n >= sizeof(head))
		return -1;
	need = n + len + 1;
	if (need > bufsz) {
		if ((buf = realloc(buf, need)) == NULL)
			fatal("%s", __func__);
		bufsz = need;
	}
	memcpy(buf, head, n);
	memcpy(buf + n, members, len);
	buf[n + len] = '}';
	if (ipc_out_checked) {
		struct json_tokener	*tok = json_tokener_new();
		struct json_object	*obj;

		if (tok == NULL)
			fatal("%s: json_tokener_new", __func__);
		obj = json_tokener_parse_ex(tok, buf, (int)need);
		json_tokener_free(tok);
		if (obj == NULL)
			ipc_out_fail(p->self, p->role, type, "not JSON");
		ipc_out_check(p->self, p->role, obj, 0);
		json_object_put(obj);
	}
	if (ipc_queue(p, type, 1, buf, need, NULL, 0) == -1)
		return -1;
	ipc_pending_add(p, proto_find(ipc_proto, type, p->self, p->role), id,
	    timeout_ms, cb, arg);
	return 0;
}

/*
 * Reply to a PM_RAW request with body, the result's JSON text: the
 * envelope {"id", "body", "user"}, a NUL, the body. The user is left out
 * unless it needs no escape (it is for frontd's access line). -1 when m
 * is no such request.
 */
int
ipc_reply_body(struct ipc_peer *p, struct ipc_msg *m, const char *body,
    size_t len, const int *fds, int nfds)
{
	static char	*buf;
	static size_t	 bufsz;
	const char	*user = log_ctx_user();
	char		 env[128];
	size_t		 need;
	int		 n;

	if (p->dead || nfds < 0 || nfds > IPC_MAX_FDS || m->id < 0 ||
	    m->pm == NULL || (m->pm->flags & PM_RAW) == 0)
		return -1;
	if (user != NULL && (strchr("abcdefghijklmnopqrstuvwxyz_",
	    user[0]) == NULL || user[0] == '\0' || strlen(user) > 32 ||
	    strspn(user, "abcdefghijklmnopqrstuvwxyz0123456789_-.") !=
	    strlen(user)))
		user = NULL;
	n = snprintf(env, sizeof(env), "{\"id\":%lld,\"body\":%zu%s%s%s}",
	    (long long)m->id, len, user != NULL ? ",\"user\":\"" : "",
	    user != NULL ? user : "", user != NULL ? "\"" : "");
	if (n < 0 || (size_t)n >= sizeof(env))
		fatalx("%s: envelope", __func__);
	/* One buffer for every raw reply: sent at once, copied if queued. */
	need = n + 1 + len;
	if (need > bufsz) {
		if ((buf = realloc(buf, need)) == NULL)
			fatal("%s", __func__);
		bufsz = need;
	}
	memcpy(buf, env, n + 1);	/* with its NUL */
	memcpy(buf + n + 1, body, len);
	if (ipc_out_checked) {
		struct json_object	*obj = json_tokener_parse(env);
		char			 err[300];

		if (obj == NULL || proto_check_raw(obj, body, len, err,
		    sizeof(err)) == -1)
			ipc_out_fail(p->self, p->role, m->pm->type,
			    obj == NULL ? "an envelope that is not JSON" : err);
		json_object_put(obj);
	}
	return ipc_queue(p, NULL, 0, buf, need, fds, nfds);
}

/* A PM_RAW request's result as a raw body (takes result). */
static int
ipc_reply_raw(struct ipc_peer *p, struct ipc_msg *m,
    struct json_object *result, const int *fds, int nfds)
{
	const char	*s;
	size_t		 len;
	int		 rc;

	s = json_object_to_json_string_length(result, JSON_C_TO_STRING_PLAIN,
	    &len);
	rc = ipc_reply_body(p, m, s, len, fds, nfds);
	json_object_put(result);
	return rc;
}

/* Reply to a request with a result (takes result). */
int
ipc_reply(struct ipc_peer *p, struct ipc_msg *m, struct json_object *result,
    const int *fds, int nfds)
{
	struct json_object	*obj;

	if (result != NULL && m->pm != NULL && (m->pm->flags & PM_RAW) &&
	    m->id >= 0)
		return ipc_reply_raw(p, m, result, fds, nfds);
	obj = json_object_new_object();
	json_object_object_add(obj, "id", m->id >= 0 ?
	    json_object_new_int64(m->id) : NULL);
	json_object_object_add(obj, "result", result != NULL ? result :
	    json_object_new_object());
	ipc_reply_user(obj);
	ipc_out_check_reply(p, m->pm, obj);
	return ipc_send(p, obj, fds, nfds);
}

/* A reply says who the request was from when the log context knows it. */
static void
ipc_reply_user(struct json_object *obj)
{
	if (log_ctx_user() != NULL)
		json_object_object_add(obj, "user",
		    json_object_new_string(log_ctx_user()));
}

/*
 * Build {"id", "error": {"code", "message"}} with optional retry_after and
 * host.
 */
static int
ipc_reply_error_obj(struct ipc_peer *p, struct ipc_msg *m, const char *code,
    const char *message, int retry_after, const char *host)
{
	struct json_object	*obj, *err;

	obj = json_object_new_object();
	err = json_object_new_object();
	json_object_object_add(err, "code", json_object_new_string(code));
	json_object_object_add(err, "message",
	    json_object_new_string(message));
	if (retry_after > 0)
		json_object_object_add(err, "retry_after",
		    json_object_new_int(retry_after));
	if (host != NULL)
		json_object_object_add(err, "host",
		    json_object_new_string(host));
	json_object_object_add(obj, "id", m != NULL && m->id >= 0 ?
	    json_object_new_int64(m->id) : NULL);
	json_object_object_add(obj, "error", err);
	ipc_reply_user(obj);
	ipc_out_check_reply(p, m != NULL ? m->pm : NULL, obj);
	return ipc_send(p, obj, NULL, 0);
}

/* Reply to a request with an error. */
int
ipc_reply_error(struct ipc_peer *p, struct ipc_msg *m, const char *code,
    const char *fmt, ...)
{
	va_list	ap;
	char	buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return ipc_reply_error_obj(p, m, code, buf, 0, NULL);
}

/* Reply with an error about a user's workspace, naming its home host. */
int
ipc_reply_error_host(struct ipc_peer *p, struct ipc_msg *m, const char *code,
    const char *host, const char *fmt, ...)
{
	va_list	ap;
	char	buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return ipc_reply_error_obj(p, m, code, buf, 0, host);
}

/* Reply with a rate-limit error carrying retry_after seconds. */
int
ipc_reply_retry(struct ipc_peer *p, struct ipc_msg *m, int retry_after,
    const char *message)
{
	return ipc_reply_error_obj(p, m, ERR_RATE_LIMITED, message,
	    retry_after < 1 ? 1 : retry_after, NULL);
}

/* Send our hello. */
static void
ipc_send_hello(struct ipc_peer *p)
{
	struct json_object	*obj;

	obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(MSG_HELLO));
	json_object_object_add(obj, "version",
	    json_object_new_int(HG_PROTO_VERSION));
	json_object_object_add(obj, "role",
	    json_object_new_string(ipc_role_name(p->self)));
	ipc_send(p, obj, NULL, 0);
}

/* Check the peer's hello: version and role. */
static int
ipc_hello(struct ipc_peer *p, struct ipc_msg *m)
{
	char		 esc[LOG_ESCAPE_MAX];
	const char	*role;
	int64_t		 version;
	enum ipc_role	 r;

	if (m->type == NULL || strcmp(m->type, MSG_HELLO) != 0) {
		ipc_peer_kill(p, "message before hello");
		return -1;
	}
	if (m->nfds > 0) {
		ipc_peer_kill(p, "hello with fds");
		return -1;
	}
	if (json_int(m->obj, "version", &version) == -1 ||
	    version != HG_PROTO_VERSION) {
		ipc_peer_kill(p, "protocol version mismatch (want %d)",
		    HG_PROTO_VERSION);
		return -1;
	}
	role = json_str(m->obj, "role");
	r = ipc_role_lookup(role);
	if (r == 0 || (r & p->expect) == 0) {
		ipc_peer_kill(p, "unexpected role \"%s\" (want %s)",
		    log_escape(role, (size_t)-1, esc, sizeof(esc)),
		    ipc_role_name(p->expect));
		return -1;
	}
	p->role = r;
	p->ready = 1;
	log_debug("%s connected (uid %u)", ipc_role_name(r), (unsigned)p->uid);
	if (p->cbs.ready != NULL)
		p->cbs.ready(p);
	return 0;
}

/* A reply: hand it to the request that waits for it. */
static void
ipc_dispatch_reply(struct ipc_peer *p, struct ipc_msg *m)
{
	struct ipc_pending	*pd;
	struct ipc_msg		 bad;
	struct json_object	*e;
	char			 err[256];

	memset(&bad, 0, sizeof(bad));
	TAILQ_FOREACH(pd, &p->pending, entry)
		if (pd->id == m->id)
			break;
	if (pd == NULL) {
		log_debug("reply %lld from %s matches no request",
		    (long long)m->id, ipc_role_name(p->role));
		return;
	}
	TAILQ_REMOVE(&p->pending, pd, entry);
	if (m->body != NULL && (pd->msg == NULL ||
	    (pd->msg->flags & PM_RAW) == 0))
		snprintf(err, sizeof(err), "a raw body, which \"%s\" does not "
		    "have", pd->msg != NULL ? pd->msg->type : "?");
	if (m->body != NULL ? (pd->msg == NULL ||
	    (pd->msg->flags & PM_RAW) == 0 || proto_check_raw(m->obj, m->body,
	    m->bodylen, err, sizeof(err)) == -1) :
	    proto_check_reply(pd->msg, m->obj, err, sizeof(err)) == -1) {
		/* Its caller sees an error, never the fields it failed on. */
		log_warnx("invalid reply from %s to \"%s\": %s",
		    ipc_role_name(p->role), pd->msg != NULL ? pd->msg->type :
		    "?", err);
		ipc_close_fds(m->fds, m->nfds);
		bad.obj = json_object_new_object();
		e = json_object_new_object();
		json_object_object_add(e, "code",
		    json_object_new_string(ERR_INTERNAL));
		json_object_object_add(e, "message", json_object_new_string(
		    "invalid reply from a daemon"));
		json_object_object_add(bad.obj, "id",
		    json_object_new_int64(m->id));
		json_object_object_add(bad.obj, "error", e);
		bad.id = m->id;
		bad.nfds = 0;
		if (pd->cb != NULL)
			pd->cb(p, &bad, pd->arg);
		json_object_put(bad.obj);
		free(pd);
		return;
	}
	if (pd->cb != NULL)
		pd->cb(p, m, pd->arg);
	free(pd);
}

/* The handler of type in a daemon's map, or NULL. */
static const struct ipc_handler *
ipc_handler_find(const struct ipc_handler *table, const char *type)
{
	const struct ipc_handler	*h;

	for (h = table; h != NULL && h->type != NULL; h++)
		if (strcmp(h->type, type) == 0)
			return h;
	return NULL;
}

/*
 * Check a message against the protocol table, once, before any handler:
 * what fails is answered bad_request (a message without a type or id gets
 * no answer: it could be a peer's own error reply) and logged.
 */
static void
ipc_dispatch(struct ipc_peer *p, struct ipc_msg *m)
{
	const struct ipc_handler	*h;
	const struct proto_msg		*pm;
	char				 err[300];

	if (m->body != NULL) {
		/* Only a reply may have a raw body (ipc_dispatch_reply). */
		if (m->type != NULL || m->id < 0) {
			ipc_close_fds(m->fds, m->nfds);
			ipc_peer_kill(p, "a raw body on a message that is "
			    "not a reply");
			return;
		}
		ipc_dispatch_reply(p, m);
		return;
	}
	if (proto_check(ipc_proto, m->obj, p->role, p->self, m->nfds, &pm, err,
	    sizeof(err)) == -1) {
		log_warnx("refused a message from %s: %s",
		    ipc_role_name(p->role), err);
		ipc_close_fds(m->fds, m->nfds);
		if (m->type != NULL || m->id >= 0)
			ipc_reply_error(p, m, ERR_BAD_REQUEST, "%s", err);
		return;
	}
	if (pm == NULL) {
		ipc_dispatch_reply(p, m);
		return;
	}
	if ((h = ipc_handler_find(p->table, pm->type)) == NULL) {
		/* ipc_handlers_check makes this impossible; still no crash. */
		log_warnx("no handler for \"%s\" from %s", pm->type,
		    ipc_role_name(p->role));
		ipc_reply_error(p, m, ERR_INTERNAL, "no handler");
		return;
	}
	m->pm = pm;
	h->fn(p, m);
}

/*
 * Whether a daemon's handler map matches the protocol table for what self
 * receives from expect: every handler's type is such a message, every such
 * message has a handler. 0, or -1 with err.
 */
int
ipc_handlers_match(const struct proto_msg *proto,
    const struct ipc_handler *table, unsigned self, unsigned expect,
    char *err, size_t errsz)
{
	const struct ipc_handler	*h, *g;
	const struct proto_msg		*pm;

	for (h = table; h != NULL && h->type != NULL; h++) {
		if (h->fn == NULL || proto_find(proto, h->type, expect,
		    self) == NULL) {
			snprintf(err, errsz, "%s handles \"%s\", which %s does "
			    "not send it in the protocol table",
			    ipc_role_name(self), h->type,
			    ipc_role_name(expect));
			return -1;
		}
		for (g = table; g != h; g++)
			if (strcmp(g->type, h->type) == 0) {
				snprintf(err, errsz, "%s handles \"%s\" twice",
				    ipc_role_name(self), h->type);
				return -1;
			}
	}
	for (pm = proto; pm->type != NULL; pm++)
		if ((pm->to & self) && (pm->from & expect) &&
		    ipc_handler_find(table, pm->type) == NULL) {
			snprintf(err, errsz, "%s has no handler for \"%s\" from "
			    "%s", ipc_role_name(self), pm->type,
			    ipc_role_name(pm->from & expect));
			return -1;
		}
	return 0;
}

/* A handler map that does not match the protocol table is a fatal bug. */
static void
ipc_handlers_check(const struct ipc_handler *table, unsigned self,
    unsigned expect)
{
	char	err[256];

	if (ipc_handlers_match(ipc_proto, table, self, expect, err,
	    sizeof(err)) == -1)
		fatalx("protocol: %s", err);
}

/* Check messages against another table from now on (unit tests). */
void
ipc_proto_set(const struct proto_msg *proto)
{
	ipc_proto = proto != NULL ? proto : proto_msgs;
}

/* Bytes and messages waiting in a peer's outgoing queue. */
size_t
ipc_peer_queued(struct ipc_peer *p, size_t *nmsgs)
{
	if (nmsgs != NULL)
		*nmsgs = p->outq_len;
	return p->outq_bytes;
}

/* Put the fds a message carried into m; those past IPC_MAX_FDS are closed. */
static void
ipc_take_fds(struct msghdr *mh, struct ipc_msg *m)
{
	struct cmsghdr	*cm;
	int		 i, nfds;

	for (cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET ||
		    cm->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfds; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
			    sizeof(int));
			if (m->nfds < IPC_MAX_FDS)
				m->fds[m->nfds++] = fd;
			else
				close(fd);
		}
	}
}

/* Receive one datagram; 1 when a message was handled, 0 when none, -1 dead. */
static int
ipc_read_one(struct ipc_peer *p)
{
	static char	 buf[IPC_MAX_MSG + 1];
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS)];
	} cmsgbuf;
	struct msghdr	 mh;
	struct iovec	 iov;
	struct ipc_msg	 m;
	static struct json_tokener *tok;
	char		*nul;
	ssize_t		 n;
	int		 i;

	memset(&mh, 0, sizeof(mh));
	iov.iov_base = buf;
	iov.iov_len = sizeof(buf);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cmsgbuf.buf;
	mh.msg_controllen = sizeof(cmsgbuf.buf);
	n = recvmsg(p->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n == -1) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 0;
		ipc_peer_kill(p, "recv: %s", strerror(errno));
		return -1;
	}
	if (n == 0) {
		ipc_peer_kill(p, "connection closed");
		return -1;
	}

	memset(&m, 0, sizeof(m));
	m.id = -1;
	for (i = 0; i < IPC_MAX_FDS; i++)
		m.fds[i] = -1;
	ipc_take_fds(&mh, &m);
	if (mh.msg_flags & MSG_CTRUNC) {
		ipc_close_fds(m.fds, m.nfds);
		ipc_peer_kill(p, "too many fds in one message");
		return -1;
	}
	if (mh.msg_flags & MSG_TRUNC || n > IPC_MAX_MSG) {
		ipc_close_fds(m.fds, m.nfds);
		ipc_peer_kill(p, "message larger than %d bytes", IPC_MAX_MSG);
		return -1;
	}

	/* One tokener for every message: a new one costs a malloc'd stack. */
	if (tok == NULL && (tok = json_tokener_new()) == NULL)
		fatal("%s: json_tokener_new", __func__);
	json_tokener_reset(tok);
	/* A NUL ends the envelope of a raw body (PM_RAW): the rest is it. */
	if ((nul = memchr(buf, '\0', n)) != NULL) {
		m.body = nul + 1;
		m.bodylen = (size_t)(buf + n - m.body);
		n = nul - buf;
	}
	m.obj = json_tokener_parse_ex(tok, buf, n);
	if (m.obj == NULL || json_tokener_get_parse_end(tok) != (size_t)n ||
	    !json_object_is_type(m.obj, json_type_object)) {
		json_object_put(m.obj);
		ipc_close_fds(m.fds, m.nfds);
		ipc_peer_kill(p, "malformed message (%zd bytes)", n);
		return -1;
	}
	m.raw = buf;
	m.rawlen = (size_t)n;
	m.type = json_str(m.obj, "type");
	if (json_int(m.obj, "id", &m.id) == -1 || m.id < 0)
		m.id = -1;

	p->busy++;
	if (!p->ready && m.body != NULL)
		ipc_peer_kill(p, "a raw body in the hello");
	else if (!p->ready)
		ipc_hello(p, &m);
	else
		ipc_dispatch(p, &m);
	p->busy--;
	ipc_close_fds(m.fds, m.nfds);
	json_object_put(m.obj);
	if (p->dead) {
		if (p->busy == 0)
			ipc_peer_destroy(p);
		return -1;
	}
	return 1;
}

/* The socket is readable: handle a bounded batch of datagrams. */
static void
ipc_peer_read(evutil_socket_t fd, short ev, void *arg)
{
	struct ipc_peer	*p = arg;
	int		 i;

	/* A bound keeps one chatty peer from starving the others. */
	for (i = 0; i < 64; i++)
		if (ipc_read_one(p) != 1)
			break;
}

/* The socket is writable again. */
static void
ipc_peer_write(evutil_socket_t fd, short ev, void *arg)
{
	struct ipc_peer	*p = arg;

	if (ipc_flush(p) == -1)
		ipc_peer_kill(p, "send: %s", strerror(errno));
}

/*
 * Wrap a connected socket and send our hello, holding the peer (busy) so
 * that a send failing at once (the other end already gone) does not free
 * it before the caller has linked it to its server or link: the caller
 * ends with ipc_peer_release().
 */
static struct ipc_peer *
ipc_peer_hold(struct event_base *base, int fd, enum ipc_role self,
    unsigned expect, const struct ipc_handler *table,
    const struct ipc_peer_cbs *cbs, void *arg)
{
	struct ipc_peer	*p;
	struct ucred	 cred;
	socklen_t	 len = sizeof(cred);

	if ((p = calloc(1, sizeof(*p))) == NULL)
		fatal("%s", __func__);
	p->base = base;
	p->fd = fd;
	p->self = self;
	p->expect = expect;
	p->table = table;
	if (cbs != NULL)
		p->cbs = *cbs;
	p->arg = arg;
	p->uid = (uid_t)-1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		p->uid = cred.uid;
	TAILQ_INIT(&p->outq);
	TAILQ_INIT(&p->pending);
	p->ev_read = event_new(base, fd, EV_READ | EV_PERSIST, ipc_peer_read,
	    p);
	p->ev_write = event_new(base, fd, EV_WRITE | EV_PERSIST,
	    ipc_peer_write, p);
	p->ev_timeout = evtimer_new(base, ipc_pending_timeout, p);
	if (p->ev_read == NULL || p->ev_write == NULL || p->ev_timeout == NULL)
		fatalx("%s: event_new", __func__);
	event_add(p->ev_read, NULL);
	p->busy++;
	ipc_send_hello(p);
	return p;
}

/* Let go of a held peer: freed now if it died meanwhile. */
static void
ipc_peer_release(struct ipc_peer *p)
{
	if (--p->busy == 0 && p->dead)
		ipc_peer_destroy(p);
}

/* Wrap a connected socket and send our hello. */
struct ipc_peer *
ipc_peer_new(struct event_base *base, int fd, enum ipc_role self,
    unsigned expect, const struct ipc_handler *table,
    const struct ipc_peer_cbs *cbs, void *arg)
{
	struct ipc_peer	*p;

	ipc_handlers_check(table, self, expect);
	p = ipc_peer_hold(base, fd, self, expect, table, cbs, arg);
	if (p->dead) {
		/* Nobody holds it yet: free it, and say so. */
		ipc_peer_release(p);
		return NULL;
	}
	p->busy--;
	return p;
}

/* Free a peer now: fail its pending requests, tell its owner. */
static void
ipc_peer_destroy(struct ipc_peer *p)
{
	struct ipc_pending	*pd;
	struct ipc_out		*o;
	struct ipc_link		*l = p->link;

	p->dead = 1;
	p->busy++;
	while ((pd = TAILQ_FIRST(&p->pending)) != NULL) {
		TAILQ_REMOVE(&p->pending, pd, entry);
		if (pd->cb != NULL)
			pd->cb(p, NULL, pd->arg);
		free(pd);
	}
	if (p->ready && p->cbs.closed != NULL)
		p->cbs.closed(p);
	while ((o = TAILQ_FIRST(&p->outq)) != NULL) {
		TAILQ_REMOVE(&p->outq, o, entry);
		p->outq_bytes -= o->len;
		p->outq_len--;
		ipc_close_fds(o->fds, o->nfds);
		free(o->data);
		free(o);
	}
	if (p->server != NULL)
		TAILQ_REMOVE(&p->server->peers, p, entry);
	event_free(p->ev_read);
	event_free(p->ev_write);
	event_free(p->ev_timeout);
	close(p->fd);
	free(p);
	if (l != NULL) {
		l->peer = NULL;
		ipc_link_schedule(l);
	}
}

/* Drop a peer with a logged reason; freed once no callback uses it. */
static void
ipc_peer_kill(struct ipc_peer *p, const char *fmt, ...)
{
	va_list	 ap;
	char	 buf[256];

	if (p->dead)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (p->ready && strcmp(buf, "connection closed") == 0) {
		if (p->role == ROLE_HGCTL)
			log_debug("hgctl disconnected");
		else
			log_info("%s disconnected", ipc_role_name(p->role));
	}
	else
		log_warnx("dropping %s peer (uid %u): %s",
		    ipc_role_name(p->role ? p->role : p->expect),
		    (unsigned)p->uid, buf);
	p->dead = 1;
	event_del(p->ev_read);
	event_del(p->ev_write);
	event_del(p->ev_timeout);
	if (p->busy == 0)
		ipc_peer_destroy(p);
}

/*
 * Close a peer on purpose (owners shutting down); a link's peer is
 * detached first, so that its link does not connect again.
 */
void
ipc_peer_free(struct ipc_peer *p)
{
	if (p->link != NULL)
		p->link->peer = NULL;
	p->link = NULL;
	ipc_peer_kill(p, "closed locally");
}

/* Accepting was paused after EMFILE: listen again. */
static void
ipc_server_resume(evutil_socket_t fd, short ev, void *arg)
{
	struct ipc_server	*s = arg;

	event_add(s->ev_accept, NULL);
}

/* Accept a connection; refuse a peer uid that is not allowed. */
static void
ipc_server_accept(evutil_socket_t lfd, short ev, void *arg)
{
	struct ipc_server	*s = arg;
	struct ipc_peer		*p;
	struct ucred		 cred;
	socklen_t		 len = sizeof(cred);
	struct timeval		 tv = { 1, 0 };
	char			 why[256];
	int			 fd, i;

	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd == -1) {
		if (errno == EMFILE || errno == ENFILE) {
			log_warn("accept; pausing for a second");
			event_del(s->ev_accept);
			evtimer_add(s->ev_pause, &tv);
		} else if (errno != EAGAIN && errno != EINTR &&
		    errno != ECONNABORTED)
			log_warn("accept");
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		log_warn("SO_PEERCRED");
		close(fd);
		return;
	}
	for (i = 0; i < s->nuids; i++)
		if (s->uids[i] == cred.uid)
			break;
	if (i == s->nuids) {
		log_warnx("refused %s connection from uid %u (pid %d)",
		    ipc_role_name(s->expect), (unsigned)cred.uid,
		    (int)cred.pid);
		close(fd);
		return;
	}
	if (s->admit != NULL &&
	    s->admit(cred.pid, cred.uid, why, sizeof(why)) == -1) {
		log_warnx("refused %s connection from uid %u (pid %d): %s",
		    ipc_role_name(s->expect), (unsigned)cred.uid,
		    (int)cred.pid, why);
		close(fd);
		return;
	}
	p = ipc_peer_hold(s->base, fd, s->self, s->expect, s->table,
	    &s->cbs, s->arg);
	p->server = s;
	TAILQ_INSERT_TAIL(&s->peers, p, entry);
	ipc_peer_release(p);
}

/* Add a check at accept, after the uid's. */
void
ipc_server_admit(struct ipc_server *s, ipc_admit_cb admit)
{
	s->admit = admit;
}

/* Send a copy of obj to every ready peer of a server (takes obj). */
void
ipc_server_broadcast(struct ipc_server *s, struct json_object *obj)
{
	struct ipc_peer	*p, *next;

	for (p = TAILQ_FIRST(&s->peers); p != NULL; p = next) {
		next = TAILQ_NEXT(p, entry);
		if (p->ready && !p->dead)
			ipc_send(p, json_object_get(obj), NULL, 0);
	}
	json_object_put(obj);
}

/* Serve a listening socket for peers of the expected role and uids. */
struct ipc_server *
ipc_server_new(struct event_base *base, int fd, enum ipc_role self,
    unsigned expect, const uid_t *uids, int nuids,
    const struct ipc_handler *table, const struct ipc_peer_cbs *cbs,
    void *arg)
{
	struct ipc_server	*s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		fatal("%s", __func__);
	if (nuids > (int)(sizeof(s->uids) / sizeof(s->uids[0])))
		fatalx("%s: too many uids", __func__);
	ipc_handlers_check(table, self, expect);
	s->base = base;
	s->fd = fd;
	s->self = self;
	s->expect = expect;
	memcpy(s->uids, uids, sizeof(uid_t) * nuids);
	s->nuids = nuids;
	s->table = table;
	if (cbs != NULL)
		s->cbs = *cbs;
	s->arg = arg;
	TAILQ_INIT(&s->peers);
	s->ev_accept = event_new(base, fd, EV_READ | EV_PERSIST,
	    ipc_server_accept, s);
	s->ev_pause = evtimer_new(base, ipc_server_resume, s);
	if (s->ev_accept == NULL || s->ev_pause == NULL)
		fatalx("%s: event_new", __func__);
	event_add(s->ev_accept, NULL);
	return s;
}

/* Connect a link's socket now; on failure, try again later. */
static void
ipc_link_connect(evutil_socket_t unused, short ev, void *arg)
{
	struct ipc_link		*l = arg;
	struct sockaddr_un	 sun;
	struct ucred		 cred;
	socklen_t		 len = sizeof(cred);
	int			 fd;

	if (ipc_sockaddr(l->path, &sun) == -1)
		fatal("socket path %s", l->path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1) {
		log_warn("socket");
		ipc_link_schedule(l);
		return;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		if (!l->warned)
			log_warnx("%s unreachable at %s: %s; retrying",
			    ipc_role_name(l->expect), l->path,
			    strerror(errno));
		l->warned = 1;
		close(fd);
		ipc_link_schedule(l);
		return;
	}
	/*
	 * The listener must be who we expect, not a squatter on the path.
	 * The kernel reports the uid at listen(2) time: root when the daemon
	 * bound its socket before dropping to its service user.
	 */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1 ||
	    (cred.uid != l->uid && cred.uid != 0)) {
		log_warnx("%s: listener has uid %u, want %u; refusing",
		    l->path, (unsigned)cred.uid, (unsigned)l->uid);
		close(fd);
		ipc_link_schedule(l);
		return;
	}
	l->warned = 0;
	l->backoff_ms = BACKOFF_MIN_MS;
	l->peer = ipc_peer_hold(l->base, fd, l->self, l->expect, l->table,
	    &l->cbs, l->arg);
	l->peer->link = l;
	/* A peer that died at once reschedules the link as it is freed. */
	ipc_peer_release(l->peer);
}

/* Try again after the backoff, which doubles up to a second. */
static void
ipc_link_schedule(struct ipc_link *l)
{
	struct timeval	tv;

	tv.tv_sec = l->backoff_ms / 1000;
	tv.tv_usec = (l->backoff_ms % 1000) * 1000;
	evtimer_add(l->ev_retry, &tv);
	l->backoff_ms *= 2;
	if (l->backoff_ms > BACKOFF_MAX_MS)
		l->backoff_ms = BACKOFF_MAX_MS;
}

/* A link to a listening daemon that reconnects by itself. */
struct ipc_link *
ipc_link_new(struct event_base *base, const char *path, enum ipc_role self,
    enum ipc_role expect, uid_t uid, const struct ipc_handler *table,
    const struct ipc_peer_cbs *cbs, void *arg)
{
	struct ipc_link	*l;

	ipc_handlers_check(table, self, expect);
	if ((l = calloc(1, sizeof(*l))) == NULL ||
	    (l->path = strdup(path)) == NULL)
		fatal("%s", __func__);
	l->base = base;
	l->self = self;
	l->expect = expect;
	l->uid = uid;
	l->table = table;
	if (cbs != NULL)
		l->cbs = *cbs;
	l->arg = arg;
	l->backoff_ms = BACKOFF_MIN_MS;
	l->ev_retry = evtimer_new(base, ipc_link_connect, l);
	if (l->ev_retry == NULL)
		fatalx("%s: evtimer_new", __func__);
	ipc_link_connect(-1, 0, l);
	return l;
}

/* Close a link and its peer for good; no reconnection follows. */
void
ipc_link_free(struct ipc_link *l)
{
	if (l->peer != NULL)
		ipc_peer_free(l->peer);	/* detaches it from the link first */
	event_free(l->ev_retry);
	free(l->path);
	free(l);
}

/* The link's peer once the hello is exchanged, else NULL. */
struct ipc_peer *
ipc_link_peer(struct ipc_link *l)
{
	if (l->peer == NULL || !l->peer->ready || l->peer->dead)
		return NULL;
	return l->peer;
}

/* Receive one JSON object within the deadline (blocking client side). */
static struct json_object *
ipc_call_recv(int fd, int64_t deadline, char *err, size_t errsz)
{
	static char		 buf[IPC_MAX_MSG + 1];
	struct pollfd		 pfd = { fd, POLLIN, 0 };
	struct json_object	*obj;
	ssize_t			 n;
	int			 left, r;

	for (;;) {
		left = (int)(deadline - now_mono_ms());
		if (left <= 0) {
			snprintf(err, errsz, "timed out");
			return NULL;
		}
		r = poll(&pfd, 1, left);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errsz, "connection closed");
			return NULL;
		}
		if (n > IPC_MAX_MSG) {
			snprintf(err, errsz, "reply too large");
			return NULL;
		}
		buf[n] = '\0';
		obj = json_tokener_parse(buf);
		if (obj == NULL || !json_object_is_type(obj, json_type_object)) {
			json_object_put(obj);
			snprintf(err, errsz, "malformed reply");
			return NULL;
		}
		return obj;
	}
}

/* Send one JSON object (blocking client side). */
static int
ipc_call_send(int fd, struct json_object *obj)
{
	const char	*s;
	size_t		 len;

	s = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN,
	    &len);
	if (len > IPC_MAX_MSG) {
		errno = EMSGSIZE;
		return -1;
	}
	return send(fd, s, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/*
 * One request over a fresh connection, for hgctl: hello both ways, the
 * request (id 1) and its reply. Takes req.
 */
int
ipc_call(const char *path, enum ipc_role self, enum ipc_role expect,
    struct json_object *req, struct json_object **reply, int timeout_ms,
    char *err, size_t errsz)
{
	struct sockaddr_un	 sun;
	struct json_object	*hello, *obj = NULL;
	int64_t			 deadline = now_mono_ms() + timeout_ms;
	int64_t			 version;
	int			 fd = -1, rc = -1;

	*reply = NULL;
	if (ipc_sockaddr(path, &sun) == -1) {
		snprintf(err, errsz, "%s: path too long", path);
		goto out;
	}
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		snprintf(err, errsz, "cannot connect to %s: %s", path,
		    strerror(errno));
		goto out;
	}
	hello = json_object_new_object();
	json_object_object_add(hello, "type", json_object_new_string(MSG_HELLO));
	json_object_object_add(hello, "version",
	    json_object_new_int(HG_PROTO_VERSION));
	json_object_object_add(hello, "role",
	    json_object_new_string(ipc_role_name(self)));
	rc = ipc_call_send(fd, hello);
	json_object_put(hello);
	if (rc == -1) {
		snprintf(err, errsz, "send: %s", strerror(errno));
		goto out;
	}
	rc = -1;
	if ((obj = ipc_call_recv(fd, deadline, err, errsz)) == NULL)
		goto out;
	if (json_int(obj, "version", &version) == -1 ||
	    version != HG_PROTO_VERSION ||
	    ipc_role_lookup(json_str(obj, "role")) != expect) {
		snprintf(err, errsz, "unexpected hello from %s", path);
		goto out;
	}
	json_object_put(obj);
	obj = NULL;
	json_object_object_add(req, "id", json_object_new_int(1));
	ipc_out_check(self, expect, req, 0);
	if (ipc_call_send(fd, req) == -1) {
		snprintf(err, errsz, "send: %s", strerror(errno));
		goto out;
	}
	if ((*reply = ipc_call_recv(fd, deadline, err, errsz)) == NULL) {
		if (strcmp(err, "connection closed") == 0)
			snprintf(err, errsz, "%s closed the connection "
			    "(not allowed for this uid?)", path);
		goto out;
	}
	rc = 0;
out:
	json_object_put(req);
	json_object_put(obj);
	if (fd != -1)
		close(fd);
	return rc;
}
