/*
 * frontd's HTTP/1.1 server: a request head parser and a small connection
 * state machine on libevent bufferevents, plain or TLS. It is not evhttp so
 * that a connection can later be handed over to WebSocket or server-sent
 * events.
 *
 * Ownership of a request: the connection owns it while its head and body
 * are read. Once handler(req, arg) has been called, the handler owns it and
 * must end it with exactly one http_reply(), http_reply_json() or
 * http_reply_error(), at once or much later; that call frees it. When the
 * client goes away in between, the connection is freed at once and
 * req->conn becomes NULL; the request stays valid and the late reply only
 * frees it.
 *
 * One request at a time per connection: while the handler has a request,
 * bytes the client sends (a pipelined request) wait in the input buffer and
 * are parsed after the reply. Reading goes on meanwhile, up to HTTP_MAX_HEAD
 * bytes, only so that a client that resets its connection is noticed. An
 * end of stream is a client that shut its sending side (it may still
 * read): each complete request it sent is answered, then the connection
 * is closed.
 *
 * Limits: connections are counted per client address (a hash table) and
 * in all. At a limit a new connection sheds the oldest quiet one (no
 * request in progress: nothing read yet, or idle between requests) of
 * that address or of all, else it is answered 503 at once and closed. A
 * head must be complete within limits.header_timeout seconds (408).
 */
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "frontd.h"

#define HTTP_MAX_TARGET		8192	/* longest request target, bytes */
#define HTTP_LINGER_TIMEOUT	2	/* seconds to drain an unread body */
#define HTTP_WRITE_TIMEOUT	HTTP_IDLE_TIMEOUT /* seconds without progress */
#define HTTP_FILE_CHUNK		(64 * 1024)	/* one read of a file body */
#define HTTP_FILE_QUEUE		(256 * 1024)	/* of it in the output, at most */
/*
 * Bytes all spooled bodies may hold at once (memfds are memory): past it
 * an upload gets 503 and Retry-After, though one at the cap always fits.
 */
#define HTTP_SPOOL_TOTAL	(1024L * 1024 * 1024)
/*
 * A spooled body refused before it was read (by the check hook) is read
 * and dropped, keeping the connection, up to this size; a larger one, or
 * one whose client waits for a 100, gets Connection: close instead.
 */
#define HTTP_DISCARD_MAX	(64 * 1024)

enum http_conn_state {
	HTTP_HEAD,		/* reading a request head */
	HTTP_BODY,		/* reading a Content-Length body */
	HTTP_CHECK,		/* a spooled body waits, unread, for the check */
	HTTP_DISCARD,		/* dropping a refused body, then the next head */
	HTTP_HANDLER,		/* the handler has the request */
	HTTP_FILE,		/* sending a reply's body from a file */
	HTTP_CLOSING,		/* flushing the last reply */
	HTTP_LINGER,		/* discarding what the client still sends */
};

#define HTTP_ADDR_BUCKETS	1024	/* client addresses' hash table */
#define HTTP_MAX_REFUSING	64	/* 503s at once; then stop accepting */

TAILQ_HEAD(http_conns, http_conn);

/*
 * A client address with connections open (an IPv6 one by its /64, which a
 * single client has to itself): how many, and those of them with no
 * request in progress, oldest first (the first to be shed).
 */
struct http_addr {
	char			 peer[64];	/* http_conn's key */
	int			 nconns;
	struct http_conns	 quiet;
	int			 full;		/* at the limit: warned */
	unsigned long		 shed, refused;	/* in this episode */
	struct http_addr	*next;		/* in its bucket */
};

struct http_server {
	struct event_base	*base;
	struct evconnlistener	*listener;
	struct event		*resume;	/* accepts again after EMFILE */
	SSL_CTX			*ssl_ctx;
	long			 max_body;
	struct http_limits	 limits;
	http_handler		 handler;
	void			*arg;
	http_spool_fn		 spool;		/* NULL: no body spooled */
	http_check_fn		 check;		/* NULL: spooled unasked */
	int			 nconns;	/* counted against the limits */
	int			 nrefusing;	/* being answered 503, uncounted */
	int			 paused;	/* at HTTP_MAX_REFUSING */
	struct http_conns	 quiet;		/* no request in progress */
	int			 full;		/* at the limit: warned */
	unsigned long		 shed, refused;	/* in this episode */
	struct http_addr	*addrs[HTTP_ADDR_BUCKETS];
	/* HOSTGATE_TRUSTED_PROXIES: peers whose X-Forwarded-For counts */
	struct egress_nets	 trusted;
};

struct http_conn {
	struct http_server	*server;
	struct http_addr	*addr;		/* NULL while refusing */
	struct bufferevent	*bev;
	struct event		*timer;		/* head, idle, body, linger */
	enum http_conn_state	 state;
	struct http_request	*req;		/* being read, or with handler */
	size_t			 scanned;	/* head bytes already looked at */
	int			 idle;		/* between requests, none read */
	int			 quiet;		/* in the quiet lists */
	int			 eof;		/* the client shut its side */
	int			 refusing;	/* over a limit: a 503, then close */
	int			 linger;	/* drain the input, then close */
	int			 tls;
	int			 file_fd;	/* HTTP_FILE: read, then closed */
	off_t			 file_off, file_left;
	long			 spool_cap;	/* HTTP_CHECK: the cap, then */
	long			 discard;	/* of a refused body, to drop */
	int			 file_keep;	/* keep-alive after it */
	int			 trusted;	/* a trusted proxy's */
	char			 peer[64];
	char			 key[64];	/* its address, or IPv6 /64 */
	TAILQ_ENTRY(http_conn)	 sentry;	/* in server->quiet */
	TAILQ_ENTRY(http_conn)	 aentry;	/* in addr->quiet */
};

/*
 * Connections taken over (WebSocket, SSE) and not yet released: they hold
 * a descriptor each, so they count against the global limit, though they
 * are never shed.
 */
static int	http_taken;

/* Bytes the spooled bodies of live requests have reserved. */
static long	http_spooled;

/* Why http_parse_head last refused a head, for the error reply. */
static const char *http_parse_reason = "malformed request";

static const char http_continue[] = "HTTP/1.1 100 Continue\r\n\r\n";

static void	http_reply_send(struct http_request *, int, const char *,
		    const void *, size_t, const char *, int);
static void	http_conn_spool_open(struct http_conn *, long);

/* Record why a head is refused; returns minus its status. */
static int
http_fail(int status, const char *reason)
{
	http_parse_reason = reason;
	return (-status);
}

/* malloc that treats running out of memory as fatal. */
static void *
http_alloc(size_t size)
{
	void	*p;

	if ((p = malloc(size)) == NULL)
		fatal("malloc");
	return (p);
}

/* A NUL-terminated copy of len bytes of s. */
static char *
http_strndup(const char *s, size_t len)
{
	char	*p;

	p = http_alloc(len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	return (p);
}

/* Whether c may appear in a token (RFC 9110 tchar). */
static int
http_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return (1);
	return (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Offset just past the empty line that ends a head; 0 until it arrives. */
static size_t
http_head_end(const char *buf, size_t len)
{
	const char	*p;

	if ((p = memmem(buf, len, "\r\n\r\n", 4)) == NULL)
		return (0);
	return (p + 4 - buf);
}

/*
 * RFC 9112 2.2: every line of a head ends in CR LF. A bare LF or a bare
 * CR is refused rather than taken as a line end, since a proxy in front
 * that splits the head otherwise would see other headers (request
 * smuggling). A CR at the very end of what has arrived may still get its
 * LF. Returns 0 or minus a status.
 */
static int
http_check_crlf(const char *buf, size_t len)
{
	const char	*p = buf, *end = buf + len, *cr, *lf;

	while (p < end) {
		lf = memchr(p, '\n', end - p);
		cr = memchr(p, '\r', (lf != NULL ? lf : end) - p);
		if (cr != NULL && cr + 1 < end && cr[1] != '\n')
			return (http_fail(400, "bare CR in the request head"));
		if (lf == NULL)
			break;
		if (lf == buf || lf[-1] != '\r')
			return (http_fail(400, "bare LF in the request head"));
		p = lf + 1;
	}
	return (0);
}

/* The line at *pp without its CR LF; moves *pp past it. */
static size_t
http_line(const char **pp, const char *end, const char **line)
{
	const char	*p = *pp, *nl;

	nl = memchr(p, '\n', end - p);	/* a complete head ends with one */
	*line = p;
	*pp = nl + 1;
	return (nl - 1 - p);		/* http_check_crlf saw its CR */
}

/* Whether v (vlen bytes) names an HTTP version, if not one we speak. */
static int
http_version_like(const char *v, size_t vlen)
{
	size_t	i;

	if (vlen < 6 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9')
		return (0);
	for (i = 6; i < vlen; i++)
		if ((v[i] < '0' || v[i] > '9') && v[i] != '.')
			return (0);
	return (1);
}

/*
 * Check a request line (len bytes, without its line end) and, unless req
 * is NULL, fill req from it. With partial set the line has not fully
 * arrived and only what is there is checked. Returns 0 or minus a status.
 */
static int
http_parse_line(const char *line, size_t len, int partial,
    struct http_request *req)
{
	const char	*end = line + len, *p, *sp, *target, *v, *q;
	size_t		 mlen, tlen, vlen;
	int		 minor;

	for (p = line; p < end && *p != ' '; p++)
		if (*p < 'A' || *p > 'Z')
			return (http_fail(400,
			    "the method must be an uppercase token"));
	mlen = p - line;
	if (mlen >= sizeof req->method)
		return (http_fail(501, "method not implemented"));
	if (p == end)
		return (partial ? 0 : http_fail(400, "malformed request line"));
	if (mlen == 0)
		return (http_fail(400, "malformed request line"));

	target = p + 1;
	sp = memchr(target, ' ', end - target);
	tlen = (sp != NULL ? sp : end) - target;
	if (tlen > HTTP_MAX_TARGET)
		return (http_fail(414, "request target longer than 8192 bytes"));
	if (tlen == 0 && partial && sp == NULL)
		return (0);
	if (tlen == 0 || target[0] != '/')
		return (http_fail(400, "the request target must start with /"));
	for (q = target; q < target + tlen; q++)
		if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
			return (http_fail(400,
			    "invalid character in the request target"));
	if (sp == NULL)
		return (partial ? 0 : http_fail(400, "missing HTTP version"));
	if (partial)
		return (0);

	v = sp + 1;
	vlen = end - v;
	if (vlen == 8 && memcmp(v, "HTTP/1.", 7) == 0 &&
	    (v[7] == '0' || v[7] == '1'))
		minor = v[7] - '0';
	else if (http_version_like(v, vlen))
		return (http_fail(505, "only HTTP/1.0 and HTTP/1.1 are "
		    "supported"));
	else
		return (http_fail(400, "malformed HTTP version"));

	if (req != NULL) {
		memcpy(req->method, line, mlen);
		req->method[mlen] = '\0';
		req->target = http_strndup(target, tlen);
		q = memchr(target, '?', tlen);
		req->path = http_strndup(target, (q != NULL ? q : sp) - target);
		if (q != NULL)
			req->query = http_strndup(q + 1, sp - q - 1);
		req->minor = minor;
	}
	return (0);
}

/* Parse one header line into a new header of req; 0 or minus a status. */
static int
http_parse_header(const char *line, size_t len, struct http_request *req)
{
	const char		*colon, *v, *vend, *q;
	struct http_header	*h;
	size_t			 nlen, vlen;

	if (line[0] == ' ' || line[0] == '\t')
		return (http_fail(400, "obsolete line folding is not allowed"));
	if ((colon = memchr(line, ':', len)) == NULL)
		return (http_fail(400, "header line without a colon"));
	nlen = colon - line;
	if (nlen == 0)
		return (http_fail(400, "empty header name"));
	for (q = line; q < colon; q++)
		if (!http_tchar(*q))
			return (http_fail(400,
			    "invalid character in a header name"));
	v = colon + 1;
	vend = line + len;
	while (v < vend && (*v == ' ' || *v == '\t'))
		v++;
	while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
		vend--;
	for (q = v; q < vend; q++)
		if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
			return (http_fail(400,
			    "control character in a header value"));
	vlen = vend - v;

	/* One allocation: the strings live right after the struct. */
	h = http_alloc(sizeof *h + nlen + 1 + vlen + 1);
	h->name = (char *)(h + 1);
	memcpy(h->name, line, nlen);
	h->name[nlen] = '\0';
	h->value = h->name + nlen + 1;
	memcpy(h->value, v, vlen);
	h->value[vlen] = '\0';
	TAILQ_INSERT_TAIL(&req->headers, h, entry);
	return (0);
}

/* A Content-Length value: digits only, small enough for a long; or -1. */
static long
http_parse_length(const char *s)
{
	long	n = 0;
	size_t	i;

	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9' || i >= 18)
			return (-1);
		n = n * 10 + (s[i] - '0');
	}
	return (i == 0 ? -1 : n);
}

/* Whether the comma-separated list s holds token (any case). */
static int
http_has_token(const char *s, const char *token)
{
	size_t		 tlen = strlen(token), n;
	const char	*end;

	for (;;) {
		while (*s == ' ' || *s == '\t' || *s == ',')
			s++;
		if (*s == '\0')
			return (0);
		end = s + strcspn(s, ",");
		n = end - s;
		while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
			n--;
		if (n == tlen && strncasecmp(s, token, n) == 0)
			return (1);
		s = end;
	}
}

/* Derive content_length and keep_alive from the headers. */
static int
http_parse_fields(struct http_request *req)
{
	struct http_header	*h;
	long			 n;
	int			 closing = 0, keep = 0, chunked = 0;

	TAILQ_FOREACH(h, &req->headers, entry) {
		if (strcasecmp(h->name, "Content-Length") == 0) {
			if ((n = http_parse_length(h->value)) == -1)
				return (http_fail(400, "Content-Length must "
				    "be a number of bytes"));
			if (req->content_length != -1 &&
			    req->content_length != n)
				return (http_fail(400,
				    "conflicting Content-Length headers"));
			req->content_length = n;
		} else if (strcasecmp(h->name, "Transfer-Encoding") == 0)
			chunked = 1;
		else if (strcasecmp(h->name, "Connection") == 0) {
			closing |= http_has_token(h->value, "close");
			keep |= http_has_token(h->value, "keep-alive");
		}
	}
	if (chunked)
		return (http_fail(501, "chunked request bodies are not "
		    "supported; send Content-Length"));
	if (req->minor == 1)
		req->keep_alive = !closing;
	else
		req->keep_alive = keep && !closing;
	return (0);
}

/* Check a head that has not fully arrived: refuse it as early as it can be. */
static int
http_parse_partial(const char *buf, size_t len)
{
	const char	*nl;
	size_t		 n;
	int		 rc;

	nl = memchr(buf, '\n', len);
	n = nl != NULL ? (size_t)(nl - buf) - 1 : len;
	if (nl == NULL && n > 0 && buf[n - 1] == '\r')
		n--;
	if ((rc = http_parse_line(buf, n, nl == NULL, NULL)) != 0)
		return (rc);
	if (len >= HTTP_MAX_HEAD)
		return (http_fail(431, "request head larger than 16384 bytes"));
	return (0);
}

/* Free what a parsed head put in req and forget it. */
static void
http_request_clear_head(struct http_request *req)
{
	struct http_header	*h;

	while ((h = TAILQ_FIRST(&req->headers)) != NULL) {
		TAILQ_REMOVE(&req->headers, h, entry);
		free(h);	/* name and value are in the same block */
	}
	free(req->target);
	free(req->path);
	free(req->query);
	req->target = req->path = req->query = NULL;
	req->method[0] = '\0';
	req->minor = 0;
	req->content_length = -1;
	req->keep_alive = 0;
}

/*
 * Parse a request head into req, which must hold no head yet. On an error
 * req is left without a head and the reason is kept for the reply.
 */
int
http_parse_head(const char *buf, size_t len, struct http_request *req)
{
	const char	*p, *end, *line;
	size_t		 headlen, n;
	int		 rc, nheaders = 0;

	headlen = http_head_end(buf, len);
	if ((rc = http_check_crlf(buf, headlen > 0 ? headlen : len)) != 0)
		return (rc);
	if (headlen == 0)
		return (http_parse_partial(buf, len));
	p = buf;
	end = buf + headlen;
	n = http_line(&p, end, &line);
	if ((rc = http_parse_line(line, n, 0, req)) != 0)
		goto fail;
	if (headlen > HTTP_MAX_HEAD) {
		rc = http_fail(431, "request head larger than 16384 bytes");
		goto fail;
	}
	while ((n = http_line(&p, end, &line)) > 0) {
		if (nheaders++ == HTTP_MAX_HEADERS) {
			rc = http_fail(431, "more than 64 header fields");
			goto fail;
		}
		if ((rc = http_parse_header(line, n, req)) != 0)
			goto fail;
	}
	if ((rc = http_parse_fields(req)) != 0)
		goto fail;
	return ((int)headlen);

fail:
	http_request_clear_head(req);
	return (rc);
}

/* Make req an empty request. */
void
http_request_init(struct http_request *req)
{
	memset(req, 0, sizeof *req);
	TAILQ_INIT(&req->headers);
	req->content_length = -1;
	req->body_fd = -1;
}

/*
 * Free everything req holds (head and body; not req->pending, which is its
 * owner's) and make it empty again.
 */
void
http_request_clear(struct http_request *req)
{
	http_request_clear_head(req);
	free(req->body);
	if (req->body_fd != -1)
		close(req->body_fd);
	http_spooled -= req->spooled;
	http_request_init(req);
}

/* The value of the first header called name (any case), or NULL. */
const char *
http_header(struct http_request *req, const char *name)
{
	struct http_header	*h;

	TAILQ_FOREACH(h, &req->headers, entry)
		if (strcasecmp(h->name, name) == 0)
			return (h->value);
	return (NULL);
}

/*
 * The entry a proxy appended to the forwarded header name: the last entry
 * of the last such header (those before it are the client's to forge),
 * without blanks, into out. -1 when there is none, it is empty or holds a
 * blank, or it does not fit.
 */
static int
http_forwarded_last(struct http_request *req, const char *name, char *out,
    size_t outsz)
{
	struct http_header	*h;
	const char		*v = NULL, *e;
	size_t			 n;

	TAILQ_FOREACH(h, &req->headers, entry)
		if (strcasecmp(h->name, name) == 0)
			v = h->value;
	if (v == NULL)
		return (-1);
	if ((e = strrchr(v, ',')) != NULL)
		v = e + 1;
	v += strspn(v, " \t");
	n = strcspn(v, " \t");
	if (n == 0 || n >= outsz || v[n + strspn(v + n, " \t")] != '\0')
		return (-1);
	memcpy(out, v, n);
	out[n] = '\0';
	return (0);
}

/*
 * The client a trusted proxy names: the last entry of the last
 * X-Forwarded-For header, numeric, into out as a peer is written. -1 when
 * there is none or it is not an address.
 */
int
http_forwarded_for(struct http_request *req, char *out, size_t outsz)
{
	struct in6_addr		 a6;
	struct in_addr		 a4;
	char			 buf[INET6_ADDRSTRLEN + 1];

	if (http_forwarded_last(req, "X-Forwarded-For", buf, sizeof buf) == -1)
		return (-1);
	if (inet_pton(AF_INET, buf, &a4) == 1)
		return (inet_ntop(AF_INET, &a4, out, outsz) != NULL ? 0 : -1);
	if (inet_pton(AF_INET6, buf, &a6) != 1)
		return (-1);
	if (IN6_IS_ADDR_V4MAPPED(&a6)) {
		memcpy(&a4, &a6.s6_addr[12], sizeof a4);
		return (inet_ntop(AF_INET, &a4, out, outsz) != NULL ? 0 : -1);
	}
	return (inet_ntop(AF_INET6, &a6, out, outsz) != NULL ? 0 : -1);
}

/*
 * Whether "scheme://host" is an origin (host as a Host header writes it:
 * a name or address, maybe a port); 1 and the URL in out if so.
 */
static int
http_base_try(int https, const char *host, char *out, size_t outsz)
{
	struct web_origin	o;
	int			n;

	n = snprintf(out, outsz, "%s://%s", https ? "https" : "http", host);
	return (n > 0 && (size_t)n < outsz &&
	    config_parse_web_origin(out, n, &o) == 0);
}

/*
 * The scheme://host[:port] a client reached req by, for the URLs built for
 * it. From a trusted proxy, the scheme of its X-Forwarded-Proto and the
 * host of its X-Forwarded-Host, each when it sent one; otherwise frontd's
 * own scheme and the Host header; "localhost" for a Host that is not one.
 * Never a reason to trust an origin: a Host is whatever the page's DNS
 * name is.
 */
void
http_base_url(struct http_request *req, char *out, size_t outsz)
{
	const char	*host;
	char		 proto[8], fhost[256];
	int		 https = req->tls;

	host = http_header(req, "Host");
	if (req->proxied) {
		if (http_forwarded_last(req, "X-Forwarded-Proto", proto,
		    sizeof proto) == 0) {
			if (strcasecmp(proto, "https") == 0)
				https = 1;
			else if (strcasecmp(proto, "http") == 0)
				https = 0;
		}
		if (http_forwarded_last(req, "X-Forwarded-Host", fhost,
		    sizeof fhost) == 0 && http_base_try(https, fhost, out,
		    outsz))
			return;
	}
	if (host != NULL && http_base_try(https, host, out, outsz))
		return;
	snprintf(out, outsz, "%s://localhost", https ? "https" : "http");
}

/* Whether a client waits for a 100 Continue before it sends the body. */
static int
http_expects_continue(struct http_request *req)
{
	const char	*expect;

	expect = http_header(req, "Expect");
	return (req->minor == 1 && expect != NULL &&
	    strcasecmp(expect, "100-continue") == 0);
}

/*
 * Copy the value of cookie name (exact match, surrounding quotes removed)
 * from the Cookie header(s) into out. Returns 0, or -1 when the cookie is
 * absent or its value does not fit in out.
 */
int
http_cookie(struct http_request *req, const char *name, char *out,
    size_t outsz)
{
	struct http_header	*h;
	const char		*p, *end, *eq, *v, *vend;
	size_t			 nlen = strlen(name), vlen;

	TAILQ_FOREACH(h, &req->headers, entry) {
		if (strcasecmp(h->name, "Cookie") != 0)
			continue;
		for (p = h->value; *p != '\0'; p = *end != '\0' ? end + 1 : end) {
			end = p + strcspn(p, ";");
			while (p < end && (*p == ' ' || *p == '\t'))
				p++;
			eq = memchr(p, '=', end - p);
			if (eq == NULL || (size_t)(eq - p) != nlen ||
			    memcmp(p, name, nlen) != 0)
				continue;
			v = eq + 1;
			vend = end;
			while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
				vend--;
			if (vend - v >= 2 && v[0] == '"' && vend[-1] == '"') {
				v++;
				vend--;
			}
			vlen = vend - v;
			if (vlen >= outsz)
				return (-1);
			memcpy(out, v, vlen);
			out[vlen] = '\0';
			return (0);
		}
	}
	return (-1);
}

/* The reason phrase of an HTTP status. */
const char *
http_status_text(int status)
{
	switch (status) {
	case 100: return ("Continue");
	case 200: return ("OK");
	case 201: return ("Created");
	case 204: return ("No Content");
	case 304: return ("Not Modified");
	case 400: return ("Bad Request");
	case 401: return ("Unauthorized");
	case 403: return ("Forbidden");
	case 404: return ("Not Found");
	case 405: return ("Method Not Allowed");
	case 406: return ("Not Acceptable");
	case 408: return ("Request Timeout");
	case 409: return ("Conflict");
	case 410: return ("Gone");
	case 411: return ("Length Required");
	case 413: return ("Content Too Large");
	case 414: return ("URI Too Long");
	case 415: return ("Unsupported Media Type");
	case 421: return ("Misdirected Request");
	case 429: return ("Too Many Requests");
	case 431: return ("Request Header Fields Too Large");
	case 500: return ("Internal Server Error");
	case 501: return ("Not Implemented");
	case 502: return ("Bad Gateway");
	case 503: return ("Service Unavailable");
	case 504: return ("Gateway Timeout");
	case 505: return ("HTTP Version Not Supported");
	case 507: return ("Insufficient Storage");
	}
	return ("Unknown");
}

/* The JSON error code of a request refused before the handler saw it. */
static const char *
http_error_code(int status)
{
	switch (status) {
	case 413:
	case 414:
	case 431:
		return (ERR_TOO_LARGE);
	case 501:
		return ("not_implemented");
	case 505:
		return ("http_version");
	case 408:
		return ("timeout");
	case 503:
		return (ERR_UNAVAILABLE);
	case 507:
		return (ERR_NO_SPACE);
	}
	return (ERR_BAD_REQUEST);
}

/* Whether the header lines in extra include one called name. */
static int
http_extra_has(const char *extra, const char *name)
{
	size_t		 n = strlen(name);
	const char	*p;

	for (p = extra; *p != '\0'; p++) {
		if (strncasecmp(p, name, n) == 0 && p[n] == ':')
			return (1);
		if ((p = strchr(p, '\n')) == NULL)
			break;
	}
	return (0);
}

/* A request of conn, empty. */
static struct http_request *
http_request_new(struct http_conn *conn)
{
	struct http_request	*req;

	req = http_alloc(sizeof *req);
	http_request_init(req);
	req->conn = conn;
	req->tls = conn->tls;
	req->proxied = conn->trusted;
	memcpy(req->peer, conn->peer, sizeof req->peer);
	log_reqid_new(req->request_id);
	req->started = now_mono_ms();
	return (req);
}

/* Free a request and all it holds. */
static void
http_request_free(struct http_request *req)
{
	http_request_clear(req);
	free(req);
}

/* (Re)arm the connection's timer. */
static void
http_conn_timer(struct http_conn *conn, int secs)
{
	struct timeval	tv = { secs, 0 };

	evtimer_add(conn->timer, &tv);
}

/* The bucket of a client address in the server's table. */
static struct http_addr **
http_addr_bucket(struct http_server *server, const char *peer)
{
	uint32_t	h = 2166136261u;	/* FNV-1a */

	for (; *peer != '\0'; peer++)
		h = (h ^ (unsigned char)*peer) * 16777619u;
	return (&server->addrs[h % HTTP_ADDR_BUCKETS]);
}

/* The entry of a client address, or NULL when it has no connection. */
static struct http_addr *
http_addr_find(struct http_server *server, const char *peer)
{
	struct http_addr	*a;

	for (a = *http_addr_bucket(server, peer); a != NULL; a = a->next)
		if (strcmp(a->peer, peer) == 0)
			return (a);
	return (NULL);
}

/* Count a new connection against its client address. */
static void
http_addr_add(struct http_conn *conn)
{
	struct http_server	*server = conn->server;
	struct http_addr	*a, **bucket;

	if ((a = http_addr_find(server, conn->key)) == NULL) {
		if ((a = calloc(1, sizeof *a)) == NULL)
			fatal("calloc");
		memcpy(a->peer, conn->key, sizeof a->peer);
		TAILQ_INIT(&a->quiet);
		bucket = http_addr_bucket(server, conn->key);
		a->next = *bucket;
		*bucket = a;
	}
	a->nconns++;
	conn->addr = a;
}

/*
 * Whether a limit's episode is over: the count has fallen a quarter (at
 * least one) below it, so that a flood held at the limit, shedding one
 * for each new one, is one episode.
 */
static int
http_episode_over(int count, int limit)
{
	return (count == 0 ||
	    count < limit - (limit / 4 > 0 ? limit / 4 : 1));
}

/* Uncount a connection of its client address; forget an address unused. */
static void
http_addr_remove(struct http_conn *conn)
{
	struct http_server	*server = conn->server;
	struct http_addr	*a = conn->addr, **pp;
	int			 limit = server->limits.max_conns_per_addr;

	conn->addr = NULL;
	a->nconns--;
	if (a->full && http_episode_over(a->nconns, limit)) {
		log_info("client %s: back under %d connections (%lu idle shed, "
		    "%lu refused with 503)", a->peer, limit, a->shed,
		    a->refused);
		a->full = 0;
		a->shed = a->refused = 0;
	}
	if (a->nconns > 0)
		return;
	for (pp = http_addr_bucket(server, a->peer); *pp != a;
	    pp = &(*pp)->next)
		;
	*pp = a->next;
	free(a);
}

/*
 * Put a connection in, or take it out of, the quiet lists: those with no
 * request in progress (nothing read yet, or idle between requests), the
 * ones shed first, oldest first.
 */
static void
http_conn_quiet(struct http_conn *conn, int on)
{
	struct http_server	*server = conn->server;

	if (on == conn->quiet || conn->addr == NULL)
		return;
	if (on) {
		TAILQ_INSERT_TAIL(&server->quiet, conn, sentry);
		TAILQ_INSERT_TAIL(&conn->addr->quiet, conn, aentry);
	} else {
		TAILQ_REMOVE(&server->quiet, conn, sentry);
		TAILQ_REMOVE(&conn->addr->quiet, conn, aentry);
	}
	conn->quiet = on;
}

/* Stop counting a connection that closes or is taken over. */
static void
http_conn_uncount(struct http_conn *conn)
{
	struct http_server	*server = conn->server;

	http_conn_quiet(conn, 0);
	if (conn->refusing) {
		conn->refusing = 0;
		if (--server->nrefusing < HTTP_MAX_REFUSING && server->paused) {
			server->paused = 0;
			evconnlistener_enable(server->listener);
		}
		return;
	}
	http_addr_remove(conn);
	server->nconns--;
	if (server->full && http_episode_over(server->nconns + http_taken,
	    server->limits.max_conns)) {
		log_info("back under %d connections (%lu idle shed, %lu "
		    "refused with 503)", server->limits.max_conns,
		    server->shed, server->refused);
		server->full = 0;
		server->shed = server->refused = 0;
	}
}

/*
 * Close a connection. A request the handler still has stays alive, with
 * conn NULL, until the handler answers it.
 */
static void
http_conn_free(struct http_conn *conn)
{
	if (conn->req != NULL) {
		if (conn->state == HTTP_HANDLER || conn->state == HTTP_CHECK)
			conn->req->conn = NULL;
		else
			http_request_free(conn->req);
	}
	if (conn->file_fd != -1)
		close(conn->file_fd);
	http_conn_uncount(conn);
	bufferevent_free(conn->bev);
	event_free(conn->timer);
	free(conn);
}

/* After a reply: wait for the next request, or flush and close. */
static void
http_conn_next(struct http_conn *conn, int keep)
{
	struct evbuffer	*in = bufferevent_get_input(conn->bev);

	if (!keep) {
		/* http_conn_write closes once the output has drained. */
		conn->state = HTTP_CLOSING;
		evtimer_del(conn->timer);
		bufferevent_disable(conn->bev, EV_READ);
		return;
	}
	if (!conn->eof)
		bufferevent_enable(conn->bev, EV_READ);
	if (conn->discard > 0) {
		/* http_conn_discard comes back here once it is dropped. */
		conn->state = HTTP_DISCARD;
		http_conn_timer(conn, HTTP_IDLE_TIMEOUT);
		bufferevent_trigger(conn->bev, EV_READ,
		    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
		return;
	}
	conn->state = HTTP_HEAD;
	conn->scanned = 0;
	if (evbuffer_get_length(in) == 0) {
		conn->idle = 1;
		http_conn_quiet(conn, 1);
		http_conn_timer(conn, HTTP_IDLE_TIMEOUT);
		return;
	}
	/* A pipelined request already waits: parse it from the loop. */
	conn->idle = 0;
	http_conn_timer(conn, conn->server->limits.header_timeout);
	bufferevent_trigger(conn->bev, EV_READ,
	    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/*
 * The client has shut its side and nothing more can be answered: close,
 * once a reply still being written has gone out.
 */
static void
http_conn_end(struct http_conn *conn, const char *why)
{
	log_debug("%s: %s", conn->peer, why);
	/* Nothing left to send, or nothing that can still be sent. */
	if (evbuffer_get_length(bufferevent_get_output(conn->bev)) == 0 ||
	    (bufferevent_get_enabled(conn->bev) & EV_WRITE) == 0) {
		http_conn_free(conn);
		return;
	}
	conn->state = HTTP_CLOSING;	/* http_conn_write closes */
	evtimer_del(conn->timer);
	http_conn_quiet(conn, 0);
}

/*
 * The access line of a request, as a web server writes one: client, user,
 * method and path (escaped; never the query string, which may carry a
 * secret), status, body bytes sent and milliseconds since its first byte,
 * with the request id (and user) as the line's context.
 */
void
http_access_log(struct http_request *req, int status, size_t bytes)
{
	char	path[LOG_ESCAPE_MAX], user[80], method[40];

	if (!log_enabled(LOG_LVL_INFO))
		return;
	log_escape(req->path != NULL ? req->path : "-", (size_t)-1, path,
	    sizeof path);
	log_escape(req->user[0] != '\0' ? req->user : "-", (size_t)-1, user,
	    sizeof user);
	log_escape(req->method[0] != '\0' ? req->method : "-", (size_t)-1,
	    method, sizeof method);
	log_ctx_set(req->request_id, req->user[0] != '\0' ? req->user : NULL,
	    NULL);
	log_info("access %s %s \"%s %s\" %d %zu %lldms", req->peer, user,
	    method, path, status, bytes,
	    (long long)(now_mono_ms() - req->started));
	log_ctx_clear();
}

/* Append the string s at p, before end; NULL once it does not fit. */
static char *
http_put(char *p, char *end, const char *s)
{
	size_t	len;

	if (p == NULL)
		return (NULL);
	len = strlen(s);
	if (len > (size_t)(end - p))
		return (NULL);
	memcpy(p, s, len);
	return (p + len);
}

/* Append the decimal n at p, before end; NULL once it does not fit. */
static char *
http_put_num(char *p, char *end, size_t n)
{
	char	digits[24], *d = digits + sizeof(digits);

	*--d = '\0';
	do
		*--d = '0' + n % 10;
	while ((n /= 10) > 0);
	return (http_put(p, end, d));
}

/*
 * Write a keep-alive reply straight to the socket when nothing waits in
 * the output: no write event to add and remove, no loop turn before it
 * goes. What the socket does not take is left in iov (lengths cut) for
 * the output buffer, as are all replies over TLS, or that close.
 */
static void
http_reply_direct(struct http_conn *conn, int keep, struct iovec *iov)
{
	struct msghdr	mh;
	ssize_t		n;
	size_t		cut;
	int		i;

	if (!keep || conn->tls ||
	    evbuffer_get_length(bufferevent_get_output(conn->bev)) > 0)
		return;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = iov;
	mh.msg_iovlen = 4;
	do
		n = sendmsg(bufferevent_getfd(conn->bev), &mh,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n == -1 && errno == EINTR);
	if (n <= 0)
		return;	/* the buffer sends it, and sees any error */
	for (i = 0; i < 4 && n > 0; i++) {
		cut = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
		if (cut == 0)
			continue;	/* an empty part: its base may be NULL */
		iov[i].iov_base = (char *)iov[i].iov_base + cut;
		iov[i].iov_len -= cut;
		n -= cut;
	}
}

/*
 * Queue more of a file body (HTTP_FILE), HTTP_FILE_CHUNK at a time, up to
 * HTTP_FILE_QUEUE in the output: the write callback asks for more as it
 * drains, so a large file never sits in memory. At its end the
 * connection goes on as after any reply; a file that shrank under us
 * ends the connection (its Content-Length can no longer be kept).
 */
static void
http_conn_file(struct http_conn *conn)
{
	struct evbuffer		*out = bufferevent_get_output(conn->bev);
	struct evbuffer_iovec	 vec;
	ssize_t			 n;
	size_t			 want;
	int			 keep;

	while (conn->file_left > 0 &&
	    evbuffer_get_length(out) < HTTP_FILE_QUEUE) {
		want = conn->file_left < HTTP_FILE_CHUNK ?
		    (size_t)conn->file_left : HTTP_FILE_CHUNK;
		if (evbuffer_reserve_space(out, want, &vec, 1) < 1)
			fatalx("%s: evbuffer_reserve_space", __func__);
		do
			n = pread(conn->file_fd, vec.iov_base, want,
			    conn->file_off);
		while (n == -1 && errno == EINTR);
		if (n <= 0) {
			if (n == -1)
				log_warn("%s: reading a file body", conn->peer);
			else
				log_warnx("%s: a file body ended %lld bytes "
				    "early; closing", conn->peer,
				    (long long)conn->file_left);
			vec.iov_len = 0;
			evbuffer_commit_space(out, &vec, 1);
			conn->file_left = 0;
			conn->file_keep = 0;
			break;
		}
		vec.iov_len = (size_t)n;
		if (evbuffer_commit_space(out, &vec, 1) == -1)
			fatalx("%s: evbuffer_commit_space", __func__);
		conn->file_off += n;
		conn->file_left -= n;
	}
	if (conn->file_left > 0)
		return;
	close(conn->file_fd);
	conn->file_fd = -1;
	bufferevent_setwatermark(conn->bev, EV_WRITE, 0, 0);
	keep = conn->file_keep && !conn->linger && !(conn->eof &&
	    evbuffer_get_length(bufferevent_get_input(conn->bev)) == 0);
	http_conn_next(conn, keep);
}

/* Answer a request; see frontd.h. */
void
http_reply(struct http_request *req, int status, const char *ctype,
    const void *body, size_t len, const char *extra)
{
	http_reply_send(req, status, ctype, body, len, extra, -1);
}

/* Answer a request with a body of len bytes read from fd; see frontd.h. */
void
http_reply_fd(struct http_request *req, int status, const char *ctype,
    int fd, size_t len, const char *extra)
{
	http_reply_send(req, status, ctype, NULL, len, extra, fd);
}

/*
 * Write a reply's head, up to the caller's extra headers, into head
 * (headsz bytes); its length. len is the body's.
 */
static size_t
http_reply_head(struct http_request *req, int status, const char *ctype,
    size_t len, int keep, const char *extra, char *head, size_t headsz)
{
	char	*hp, *hend;

	hp = head;
	hend = head + headsz;
	hp = http_put(hp, hend, "HTTP/1.1 ");
	hp = http_put_num(hp, hend, status);
	hp = http_put(hp, hend, " ");
	hp = http_put(hp, hend, http_status_text(status));
	hp = http_put(hp, hend, "\r\n");
	if (ctype != NULL) {
		hp = http_put(hp, hend, "Content-Type: ");
		hp = http_put(hp, hend, ctype);
		hp = http_put(hp, hend, "\r\n");
	}
	if (status != 204 && status != 304) {
		hp = http_put(hp, hend, "Content-Length: ");
		hp = http_put_num(hp, hend, len);
		hp = http_put(hp, hend, "\r\n");
	}
	hp = http_put(hp, hend, keep ? "Connection: keep-alive\r\n" :
	    "Connection: close\r\n");
	hp = http_put(hp, hend, "X-Content-Type-Options: nosniff\r\n"
	    "Referrer-Policy: no-referrer\r\n"
	    "X-Frame-Options: DENY\r\n");
	if (extra == NULL || !http_extra_has(extra, "Cache-Control"))
		hp = http_put(hp, hend, "Cache-Control: no-store\r\n");
	hp = http_put(hp, hend, "X-Request-Id: ");
	hp = http_put(hp, hend, req->request_id);
	hp = http_put(hp, hend, "\r\n");
	if (hp == NULL)
		fatalx("%s: head too long", __func__);
	return (size_t)(hp - head);
}

/*
 * http_reply and http_reply_fd: the head, and the body from memory, or
 * (fd not -1, taken) from fd as the output drains.
 */
static void
http_reply_send(struct http_request *req, int status, const char *ctype,
    const void *body, size_t len, const char *extra, int fd)
{
	struct http_conn	*conn = req->conn;
	struct evbuffer		*out;
	char			 head[1024];
	struct iovec		 iov[4];
	size_t			 sent, hlen, xlen;
	int			 keep, i;

	if (conn == NULL) {
		log_debug("%s: client gone, reply %d dropped", req->peer,
		    status);
		if (fd != -1)
			close(fd);
		/* 499, as nginx logs a client that closed first. */
		http_access_log(req, 499, 0);
		http_request_free(req);
		return;
	}
	if (conn->state == HTTP_CHECK) {
		/*
		 * Refused before its body was read: drop a small one and go
		 * on; else close, draining a while (unread input would make
		 * the close a reset, which can destroy the reply).
		 */
		if (req->keep_alive && req->content_length <= HTTP_DISCARD_MAX &&
		    !http_expects_continue(req))
			conn->discard = req->content_length;
		else
			conn->linger = 1;
	}
	/* A client that shut its side gets what it asked, then a close. */
	keep = req->keep_alive && !conn->linger && !(conn->eof &&
	    evbuffer_get_length(bufferevent_get_input(conn->bev)) == 0);

	/*
	 * The head is built in place, then head and body go into one chain,
	 * so that TLS sends them in as few records as it can.
	 */
	hlen = http_reply_head(req, status, ctype, len, keep, extra, head,
	    sizeof(head));
	xlen = extra != NULL ? strlen(extra) : 0;
	if ((body == NULL && fd == -1) || status == 204 || status == 304 ||
	    strcmp(req->method, "HEAD") == 0)
		len = 0;
	if (fd != -1 && len == 0) {
		close(fd);
		fd = -1;
	}
	out = bufferevent_get_output(conn->bev);
	iov[0].iov_base = head;
	iov[0].iov_len = hlen;
	iov[1].iov_base = (void *)extra;
	iov[1].iov_len = xlen;
	iov[2].iov_base = (void *)"\r\n";
	iov[2].iov_len = 2;
	iov[3].iov_base = (void *)body;
	iov[3].iov_len = fd == -1 ? len : 0;
	http_reply_direct(conn, keep, iov);
	if (evbuffer_expand(out, iov[0].iov_len + iov[1].iov_len +
	    iov[2].iov_len + iov[3].iov_len) == -1)
		fatalx("%s: evbuffer_expand", __func__);
	for (i = 0; i < 4; i++)
		if (iov[i].iov_len > 0 && evbuffer_add(out, iov[i].iov_base,
		    iov[i].iov_len) == -1)
			fatalx("%s: evbuffer_add", __func__);
	sent = len;

	/* A 503 at a limit is counted in its episode's summary instead. */
	if (!conn->refusing)
		http_access_log(req, status, sent);
	conn->req = NULL;
	http_request_free(req);
	if (fd != -1) {
		conn->state = HTTP_FILE;
		conn->file_fd = fd;
		conn->file_off = 0;
		conn->file_left = (off_t)len;
		conn->file_keep = keep;
		/* Asked for more while a quarter of the queue is left. */
		bufferevent_setwatermark(conn->bev, EV_WRITE,
		    HTTP_FILE_QUEUE / 4, 0);
		http_conn_file(conn);
		return;
	}
	http_conn_next(conn, keep);
}

/* Answer with a JSON body; takes ownership of obj. */
void
http_reply_json(struct http_request *req, int status,
    struct json_object *obj, const char *extra)
{
	const char	*s;
	size_t		 len;

	s = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN,
	    &len);
	http_reply(req, status, "application/json", s, len, extra);
	json_object_put(obj);
}

/* Answer with {"error": {"code": code, "message": message}}. */
void
http_reply_error(struct http_request *req, int status, const char *code,
    const char *message, const char *extra)
{
	struct json_object	*obj, *err;

	err = json_object_new_object();
	json_object_object_add(err, "code", json_object_new_string(code));
	json_object_object_add(err, "message", json_object_new_string(
	    message != NULL ? message : http_status_text(status)));
	obj = json_object_new_object();
	json_object_object_add(obj, "error", err);
	http_reply_json(req, status, obj, extra);
}

/*
 * Refuse the request being read with an error (extra: more header lines
 * or NULL), then close the connection.
 */
static void
http_conn_refuse(struct http_conn *conn, int status, const char *message,
    const char *extra)
{
	struct http_request	*req;

	if (conn->req == NULL)
		conn->req = http_request_new(conn);
	req = conn->req;
	log_debug("%s: refused with %d: %s", conn->peer, status, message);
	http_conn_quiet(conn, 0);
	/* The client may still be sending: drain that before closing. */
	conn->linger = 1;
	conn->state = HTTP_HANDLER;
	evtimer_del(conn->timer);
	http_reply_error(req, status, http_error_code(status), message, extra);
	/* Bounded even when the output never drains (a TLS handshake). */
	http_conn_timer(conn, HTTP_LINGER_TIMEOUT);
}

/* Hand the complete request to the handler. */
static void
http_conn_dispatch(struct http_conn *conn)
{
	struct http_server	*server = conn->server;

	conn->state = HTTP_HANDLER;
	evtimer_del(conn->timer);
	server->handler(conn->req, server->arg);
}

/*
 * Move what has arrived of a spooled body into its memfd; once complete,
 * seal it (write, grow, shrink), rewind it and pass the request on.
 */
static void
http_conn_spool(struct http_conn *conn)
{
	struct evbuffer		*in = bufferevent_get_input(conn->bev);
	struct http_request	*req = conn->req;
	size_t			 need = (size_t)req->content_length, have;
	int			 n;

	while ((have = evbuffer_get_length(in)) > 0 && req->body_len < need) {
		if (have > need - req->body_len)
			have = need - req->body_len;
		if ((n = evbuffer_write_atmost(in, req->body_fd, have)) <= 0) {
			if (n == -1 && errno == EINTR)
				continue;
			log_warn("%s: spooling a request body", conn->peer);
			http_conn_refuse(conn, 507, "no room left for the "
			    "upload in frontd's memory", NULL);
			return;
		}
		req->body_len += (size_t)n;
	}
	if (req->body_len < need) {
		if (conn->eof) {
			http_conn_end(conn, "closed in the middle of a body");
			return;
		}
		http_conn_timer(conn, HTTP_IDLE_TIMEOUT);
		return;
	}
	if (fcntl(req->body_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_WRITE | F_SEAL_SEAL) == -1 ||
	    lseek(req->body_fd, 0, SEEK_SET) == -1) {
		log_warn("%s: sealing a request body", conn->peer);
		http_conn_refuse(conn, 500, "cannot seal the upload", NULL);
		return;
	}
	http_conn_dispatch(conn);
}

/* Tell a client that waits for it (curl does) to send its body. */
static void
http_conn_continue(struct http_conn *conn)
{
	struct evbuffer		*in = bufferevent_get_input(conn->bev);
	struct http_request	*req = conn->req;

	if (conn->eof ||
	    evbuffer_get_length(in) >= (size_t)req->content_length)
		return;
	if (http_expects_continue(req))
		bufferevent_write(conn->bev, http_continue,
		    sizeof http_continue - 1);
}

/*
 * Drop what has arrived of a body refused unread; once it is all gone,
 * read the next request.
 */
static void
http_conn_discard(struct http_conn *conn)
{
	struct evbuffer		*in = bufferevent_get_input(conn->bev);
	size_t			 n;

	n = evbuffer_get_length(in);
	if (n > (size_t)conn->discard)
		n = (size_t)conn->discard;
	evbuffer_drain(in, n);
	conn->discard -= (long)n;
	if (conn->discard == 0) {
		http_conn_next(conn, 1);
		return;
	}
	if (conn->eof) {
		http_conn_end(conn, "closed in the middle of a refused body");
		return;
	}
	http_conn_timer(conn, HTTP_IDLE_TIMEOUT);
}

/*
 * A request whose route spools its body (the server's spool hook said so
 * at head time): Content-Length required (411), at most cap bytes (413,
 * before any of it is read; cap -1: no cap), into a memfd.
 */
static void
http_conn_spool_start(struct http_conn *conn, long cap)
{
	struct http_request	*req = conn->req;
	char			 msg[128];

	if (req->content_length == -1) {
		http_conn_refuse(conn, 411, "an upload needs a Content-Length",
		    NULL);
		return;
	}
	if (cap >= 0 && req->content_length > cap) {
		snprintf(msg, sizeof msg, "upload larger than %ld bytes "
		    "(HOSTGATE_MAX_UPLOAD_BYTES)", cap);
		http_conn_refuse(conn, 413, msg, NULL);
		return;
	}
	if (conn->server->check != NULL && req->content_length > 0) {
		/* Not one byte read, nor memory held, until it may come. */
		conn->state = HTTP_CHECK;
		conn->spool_cap = cap;
		evtimer_del(conn->timer);
		bufferevent_disable(conn->bev, EV_READ);
		conn->server->check(req);
		return;
	}
	http_conn_spool_open(conn, cap);
}

/*
 * Reserve a spooled body's bytes (503 past HTTP_SPOOL_TOTAL), make its
 * memfd, ask for the body when the client waits for that, and read it.
 */
static void
http_conn_spool_open(struct http_conn *conn, long cap)
{
	struct http_request	*req = conn->req;
	char			 msg[128];

	if (http_spooled > 0 && http_spooled + req->content_length >
	    (cap > HTTP_SPOOL_TOTAL ? cap : HTTP_SPOOL_TOTAL)) {
		log_warnx("%s: %ld bytes of uploads held already; refusing "
		    "one of %ld", conn->peer, http_spooled,
		    req->content_length);
		snprintf(msg, sizeof msg, "Retry-After: %d\r\n",
		    HTTP_RETRY_AFTER);
		http_conn_refuse(conn, 503, "too many uploads at once; try "
		    "again later", msg);
		return;
	}
	if ((req->body_fd = memfd_create("upload", MFD_CLOEXEC |
	    MFD_ALLOW_SEALING)) == -1) {
		log_warn("%s: memfd_create", conn->peer);
		http_conn_refuse(conn, 503, "cannot hold the upload now", NULL);
		return;
	}
	req->spooled = req->content_length;
	http_spooled += req->spooled;
	http_conn_continue(conn);
	conn->state = HTTP_BODY;
	http_conn_spool(conn);
}

/* The check hook let a spooled body come: see frontd.h. */
void
http_spool_continue(struct http_request *req)
{
	struct http_conn	*conn = req->conn;

	if (conn == NULL) {
		log_debug("%s: client gone before its upload", req->peer);
		http_access_log(req, 499, 0);
		http_request_free(req);
		return;
	}
	if (conn->state != HTTP_CHECK || conn->req != req)
		fatalx("%s: no check pending", __func__);
	if (!conn->eof)
		bufferevent_enable(conn->bev, EV_READ);
	http_conn_spool_open(conn, conn->spool_cap);
}

/* Collect the body; pass the request on once it is complete. */
static void
http_conn_body(struct http_conn *conn)
{
	struct evbuffer		*in = bufferevent_get_input(conn->bev);
	struct http_request	*req = conn->req;
	size_t			 need = (size_t)req->content_length;

	if (req->body_fd != -1) {
		http_conn_spool(conn);
		return;
	}
	if (evbuffer_get_length(in) < need) {
		if (conn->eof) {
			http_conn_end(conn, "closed in the middle of a body");
			return;
		}
		http_conn_timer(conn, HTTP_IDLE_TIMEOUT);
		return;
	}
	req->body = http_alloc(need + 1);
	evbuffer_remove(in, req->body, need);
	req->body[need] = '\0';
	req->body_len = need;
	http_conn_dispatch(conn);
}

/* Read and parse a request head; go on to its body or to the handler. */
static void
http_conn_head(struct http_conn *conn)
{
	struct evbuffer		*in = bufferevent_get_input(conn->bev);
	struct http_request	*req;
	unsigned char		*p;
	char			 msg[128], fwd[64];
	size_t			 len, skip;
	long			 cap;
	int			 rc;

	if ((len = evbuffer_get_length(in)) > HTTP_MAX_HEAD)
		len = HTTP_MAX_HEAD;
	if (len == 0 || (p = evbuffer_pullup(in, len)) == NULL) {
		if (conn->eof)
			http_conn_end(conn, "closed by the client");
		return;
	}
	http_conn_quiet(conn, 0);
	if (conn->scanned == 0) {
		/* RFC 9112 2.2: ignore empty lines before a request. */
		for (skip = 0; skip < len && (p[skip] == '\r' ||
		    p[skip] == '\n'); skip++)
			;
		if (skip > 0) {
			evbuffer_drain(in, skip);
			http_conn_head(conn);
			return;
		}
	}
	if (conn->idle) {
		conn->idle = 0;
		http_conn_timer(conn, conn->server->limits.header_timeout);
	}
	/*
	 * Parse again only when the answer may have changed: on the first
	 * bytes, on a new line, or when the head has reached its limit.
	 */
	if (conn->scanned > 0 && len < HTTP_MAX_HEAD && !conn->eof &&
	    (len <= conn->scanned ||
	    memchr(p + conn->scanned, '\n', len - conn->scanned) == NULL)) {
		conn->scanned = len;
		return;
	}
	conn->scanned = len;

	if (conn->req == NULL)
		conn->req = http_request_new(conn);
	req = conn->req;
	if ((rc = http_parse_head((const char *)p, len, req)) == 0) {
		if (conn->eof)
			http_conn_end(conn, "closed in the middle of a head");
		return;
	}
	if (rc < 0) {
		http_conn_refuse(conn, -rc, http_parse_reason, NULL);
		return;
	}
	evbuffer_drain(in, rc);
	conn->scanned = 0;
	/* Behind a trusted proxy the client is the one it names. */
	if (conn->trusted && http_forwarded_for(req, fwd, sizeof fwd) == 0)
		memcpy(req->peer, fwd, sizeof req->peer);

	if (conn->server->spool != NULL && conn->server->spool(req, &cap)) {
		http_conn_spool_start(conn, cap);
		return;
	}
	if (req->content_length > conn->server->max_body) {
		snprintf(msg, sizeof msg, "request body larger than %ld bytes",
		    conn->server->max_body);
		http_conn_refuse(conn, 413, msg, NULL);
		return;
	}
	if (req->content_length <= 0) {
		http_conn_dispatch(conn);
		return;
	}
	http_conn_continue(conn);
	conn->state = HTTP_BODY;
	http_conn_body(conn);
}

/* Input arrived: feed it to whatever the connection is doing. */
static void
http_conn_read(struct bufferevent *bev, void *arg)
{
	struct http_conn	*conn = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);

	switch (conn->state) {
	case HTTP_HEAD:
		http_conn_head(conn);
		break;
	case HTTP_BODY:
		http_conn_body(conn);
		break;
	case HTTP_DISCARD:
		http_conn_discard(conn);
		break;
	case HTTP_CHECK:
		break;		/* read again once the check lets it */
	case HTTP_HANDLER:
	case HTTP_FILE:
		/* A pipelined request waits; bound what may pile up. */
		if (evbuffer_get_length(in) > HTTP_MAX_HEAD)
			bufferevent_disable(bev, EV_READ);
		break;
	case HTTP_LINGER:
		evbuffer_drain(in, evbuffer_get_length(in));
		break;
	case HTTP_CLOSING:
		break;
	}
}

/* The output has drained: close when that was the last reply. */
static void
http_conn_write(struct bufferevent *bev, void *arg)
{
	struct http_conn	*conn = arg;
	SSL			*ssl;

	if (conn->state == HTTP_FILE) {
		http_conn_file(conn);
		return;
	}
	if (conn->state != HTTP_CLOSING ||
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0)
		return;
	if (conn->linger && !conn->tls && !conn->eof) {
		/*
		 * The client may still be sending a body we refused: closing
		 * now would reset the connection and could destroy the reply
		 * before the client reads it. Send FIN, then drain a while.
		 */
		shutdown(bufferevent_getfd(bev), SHUT_WR);
		conn->state = HTTP_LINGER;
		bufferevent_enable(bev, EV_READ);
		http_conn_timer(conn, HTTP_LINGER_TIMEOUT);
		return;
	}
	if (conn->tls) {
		/* A clean end: send close_notify, without waiting for one. */
		if ((ssl = bufferevent_openssl_get_ssl(bev)) != NULL)
			SSL_shutdown(ssl);
		ERR_clear_error();
	}
	http_conn_free(conn);
}

/*
 * End of stream, an error or a write timeout. An end of stream is only the
 * client shutting its side (it may still read): what it sent completely is
 * answered, and then the connection is closed.
 */
static void
http_conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct http_conn	*conn = arg;
	unsigned long		 e;
	char			 buf[256];

	if (what & BEV_EVENT_CONNECTED) {
		log_debug("%s: TLS handshake done", conn->peer);
		return;
	}
	/*
	 * Deferred callbacks come merged: an end of stream on the reading
	 * side may arrive together with a write error, after which libevent
	 * writes no more. Only a clean end of stream waits for a reply.
	 */
	if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) &&
	    !(what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))) {
		conn->eof = 1;
		/* libevent's TLS stops writing at the end of stream: resume. */
		if (conn->tls)
			bufferevent_enable(bev, EV_WRITE);
		switch (conn->state) {
		case HTTP_HEAD:
		case HTTP_BODY:
		case HTTP_DISCARD:
			/* Whatever is buffered, then the close. */
			http_conn_read(bev, conn);
			return;
		case HTTP_CHECK:
		case HTTP_HANDLER:
		case HTTP_FILE:
			log_debug("%s: the client shut its side; answering "
			    "first", conn->peer);
			return;
		case HTTP_CLOSING:
			return;		/* http_conn_write closes */
		case HTTP_LINGER:
			break;
		}
		log_debug("%s: closed by the client", conn->peer);
	} else if (what & BEV_EVENT_TIMEOUT)
		log_debug("%s: write timeout", conn->peer);
	else if (what & BEV_EVENT_ERROR) {
		if (conn->tls && (e = bufferevent_get_openssl_error(bev)) != 0) {
			ERR_error_string_n(e, buf, sizeof buf);
			log_debug("%s: TLS: %s", conn->peer, buf);
		} else
			log_debug("%s: %s", conn->peer,
			    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	} else
		log_debug("%s: closed by the client", conn->peer);
	http_conn_free(conn);
}

/*
 * The connection's timer ran out. A request head (or body) not complete in
 * time gets 408; an idle keep-alive connection, or one refused, lingering
 * or closing, is closed.
 */
static void
http_conn_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct http_conn	*conn = arg;
	char			 msg[128];

	if (!conn->refusing && ((conn->state == HTTP_HEAD && !conn->idle) ||
	    conn->state == HTTP_BODY)) {
		if (conn->state == HTTP_HEAD)
			snprintf(msg, sizeof msg, "no complete request head "
			    "within %d s", conn->server->limits.header_timeout);
		else
			snprintf(msg, sizeof msg, "no body byte within %d s",
			    HTTP_IDLE_TIMEOUT);
		http_conn_refuse(conn, 408, msg, NULL);
		return;
	}
	log_debug("%s: timeout", conn->peer);
	http_conn_free(conn);
}

/* The numeric address of a peer, IPv4-mapped IPv6 shown as IPv4. */
static void
http_peer_name(const struct sockaddr *sa, char *out, size_t outsz)
{
	const struct sockaddr_in	*sin;
	const struct sockaddr_in6	*sin6;
	struct in_addr			 a4;
	const char			*s = NULL;

	switch (sa->sa_family) {
	case AF_INET:
		sin = (const struct sockaddr_in *)sa;
		s = inet_ntop(AF_INET, &sin->sin_addr, out, outsz);
		break;
	case AF_INET6:
		sin6 = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			memcpy(&a4, &sin6->sin6_addr.s6_addr[12], sizeof a4);
			s = inet_ntop(AF_INET, &a4, out, outsz);
		} else
			s = inet_ntop(AF_INET6, &sin6->sin6_addr, out, outsz);
		break;
	case AF_UNIX:
		s = "unix";
		snprintf(out, outsz, "%s", s);
		break;
	}
	if (s == NULL)
		snprintf(out, outsz, "unknown");
}

/*
 * Whether a quiet connection may be shed: no reply still going out, and
 * no request waiting unread in the socket (sent while frontd was busy).
 */
static int
http_conn_sheddable(struct http_conn *conn)
{
	int	n;

	if (evbuffer_get_length(bufferevent_get_output(conn->bev)) > 0)
		return (0);
	return (ioctl(bufferevent_getfd(conn->bev), FIONREAD, &n) == 0 &&
	    n == 0);
}

/*
 * Make room for a new connection from peer (its address's key): at that
 * address's limit, or at the global one, shed the oldest connection with
 * no request in progress (of that address, or of all). Returns NULL when
 * there is room, or why there is none, for a 503. One warning per episode
 * at a limit.
 */
static const char *
http_server_admit(struct http_server *server, const char *peer, int trusted)
{
	struct http_addr	*a;
	struct http_conn	*victim;
	int			 limit = server->limits.max_conns_per_addr;

	/* A trusted proxy carries many clients: the global limit only. */
	if (!trusted && (a = http_addr_find(server, peer)) != NULL &&
	    a->nconns >= limit) {
		if (!a->full)
			log_warnx("client %s has %d connections, its limit: "
			    "shedding its idle ones, else refusing with 503",
			    peer, a->nconns);
		a->full = 1;
		TAILQ_FOREACH(victim, &a->quiet, aentry)
			if (http_conn_sheddable(victim))
				break;
		if (victim == NULL) {
			a->refused++;
			return ("too many connections from this address");
		}
		a->shed++;
		log_debug("%s: idle connection shed for a new one", peer);
		http_conn_free(victim);		/* may free a */
	}
	if (server->nconns + http_taken >= server->limits.max_conns) {
		if (!server->full)
			log_warnx("%d connections open, the limit: shedding "
			    "idle ones, else refusing with 503",
			    server->nconns + http_taken);
		server->full = 1;
		TAILQ_FOREACH(victim, &server->quiet, sentry)
			if (http_conn_sheddable(victim))
				break;
		if (victim == NULL) {
			server->refused++;
			return ("too many connections");
		}
		server->shed++;
		log_debug("%s: idle connection shed for one of %s",
		    victim->peer, peer);
		http_conn_free(victim);
	}
	return (NULL);
}

/*
 * The key of a client address for the per-address limit: the address as
 * shown, or for IPv6 its /64 prefix, since one client commonly holds a
 * whole /64 and could otherwise open connections from any of its addresses.
 */
void
http_addr_key(const struct sockaddr *sa, const char *peer, char *out,
    size_t outsz)
{
	const struct sockaddr_in6	*sin6;
	struct in6_addr			 prefix;
	char				 buf[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		sin6 = (const struct sockaddr_in6 *)sa;
		if (!IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			memset(&prefix, 0, sizeof prefix);
			memcpy(&prefix, &sin6->sin6_addr, 8);
			if (inet_ntop(AF_INET6, &prefix, buf, sizeof buf) !=
			    NULL) {
				snprintf(out, outsz, "%s/64", buf);
				return;
			}
		}
	}
	snprintf(out, outsz, "%s", peer);
}

/* A new connection: wrap it, TLS or not, and wait for its first head. */
static void
http_server_accept(struct evconnlistener *listener, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct http_server	*server = arg;
	struct http_conn	*conn;
	struct timeval		 tv = { HTTP_WRITE_TIMEOUT, 0 };
	SSL			*ssl;
	const char		*full;
	char			 peer[64], key[64], extra[64];
	int			 trusted;
	int			 opts = BEV_OPT_CLOSE_ON_FREE |
				    BEV_OPT_DEFER_CALLBACKS;

	http_peer_name(sa, peer, sizeof peer);
	http_addr_key(sa, peer, key, sizeof key);
	trusted = server->trusted.n > 0 &&
	    egress_nets_find(&server->trusted, sa) != NULL;
	full = http_server_admit(server, key, trusted);

	if ((conn = calloc(1, sizeof *conn)) == NULL)
		fatal("calloc");
	conn->server = server;
	conn->file_fd = -1;
	memcpy(conn->peer, peer, sizeof conn->peer);
	memcpy(conn->key, key, sizeof conn->key);
	conn->trusted = trusted;
	if (server->ssl_ctx != NULL) {
		if ((ssl = SSL_new(server->ssl_ctx)) == NULL) {
			log_warnx("%s: SSL_new failed", conn->peer);
			ERR_clear_error();
			close(fd);
			free(conn);
			return;
		}
		conn->tls = 1;
		/*
		 * A client that shuts its side without close_notify still
		 * reads our answer: an end of stream, not a fatal error
		 * (requests are framed by Content-Length, so none is cut).
		 */
		SSL_set_options(ssl, SSL_OP_IGNORE_UNEXPECTED_EOF);
		/* On failure libevent frees ssl; fd stays ours to close. */
		conn->bev = bufferevent_openssl_socket_new(server->base, fd,
		    ssl, BUFFEREVENT_SSL_ACCEPTING, opts);
		if (conn->bev != NULL)
			bufferevent_openssl_set_allow_dirty_shutdown(conn->bev,
			    1);
	} else
		conn->bev = bufferevent_socket_new(server->base, fd, opts);
	if (conn->bev == NULL) {
		log_warnx("%s: cannot set up the connection", conn->peer);
		close(fd);
		free(conn);
		return;
	}
	if ((conn->timer = evtimer_new(server->base, http_conn_timeout,
	    conn)) == NULL)
		fatalx("evtimer_new");
	bufferevent_setcb(conn->bev, http_conn_read, http_conn_write,
	    http_conn_event, conn);
	bufferevent_setwatermark(conn->bev, EV_WRITE, 0, 0);
	bufferevent_set_timeouts(conn->bev, NULL, &tv);
	bufferevent_enable(conn->bev, EV_READ | EV_WRITE);
	conn->state = HTTP_HEAD;

	if (full != NULL) {
		/* Answered at once, never silently closed. */
		conn->refusing = 1;
		if (++server->nrefusing >= HTTP_MAX_REFUSING) {
			/* The kernel's backlog holds the rest meanwhile. */
			server->paused = 1;
			evconnlistener_disable(server->listener);
		}
		snprintf(extra, sizeof extra, "Retry-After: %d\r\n",
		    HTTP_RETRY_AFTER);
		http_conn_refuse(conn, 503, full, extra);
		return;
	}
	server->nconns++;
	http_addr_add(conn);
	http_conn_quiet(conn, 1);
	log_debug("%s: connected%s", conn->peer, conn->tls ? " (TLS)" : "");
	http_conn_timer(conn, server->limits.header_timeout);
}

/* accept() failed: out of descriptors pauses accepting for a second. */
static void
http_server_accept_error(struct evconnlistener *listener, void *arg)
{
	struct http_server	*server = arg;
	struct timeval		 tv = { 1, 0 };
	int			 err = EVUTIL_SOCKET_ERROR();

	if (err == EMFILE || err == ENFILE || err == ENOBUFS ||
	    err == ENOMEM) {
		log_warnx("accept: %s; pausing for 1 s", strerror(err));
		evconnlistener_disable(listener);
		evtimer_add(server->resume, &tv);
		return;
	}
	log_warnx("accept: %s", strerror(err));
}

/* Accept again after a pause. */
static void
http_server_resume(evutil_socket_t fd, short ev, void *arg)
{
	struct http_server	*server = arg;

	evconnlistener_enable(server->listener);
}

/*
 * Serve HTTP (HTTPS when ctx is not NULL) on the bound, listening socket
 * fd, calling handler for each complete request.
 */
struct http_server *
http_server_new(struct event_base *base, int fd, SSL_CTX *ctx,
    long max_body, http_handler handler, void *arg)
{
	struct http_server	*server;

	if ((server = calloc(1, sizeof *server)) == NULL)
		fatal("calloc");
	server->base = base;
	server->ssl_ctx = ctx;
	server->max_body = max_body;
	server->limits.max_conns = 1024;
	server->limits.max_conns_per_addr = 64;
	server->limits.header_timeout = 10;
	TAILQ_INIT(&server->quiet);
	server->handler = handler;
	server->arg = arg;
	if ((server->resume = evtimer_new(base, http_server_resume,
	    server)) == NULL)
		fatalx("evtimer_new");
	/* libevent accepts until accept() fails: it must not block. */
	if (evutil_make_socket_nonblocking(fd) == -1) {
		log_warn("http listener");
		event_free(server->resume);
		free(server);
		return (NULL);
	}
	server->listener = evconnlistener_new(base, http_server_accept, server,
	    LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (server->listener == NULL) {
		log_warnx("http listener: evconnlistener_new failed");
		event_free(server->resume);
		free(server);
		return (NULL);
	}
	evconnlistener_set_error_cb(server->listener, http_server_accept_error);
	return (server);
}

/*
 * Set the hook asked at each request head whether its body goes to a
 * memfd (req->body_fd) rather than the heap, and with what cap, and the
 * one (or NULL) that decides, before any of it is read, whether it may.
 */
void
http_server_set_spool(struct http_server *server, http_spool_fn fn,
    http_check_fn check)
{
	server->spool = fn;
	server->check = check;
}

/* Set a server's connection limits (before it serves). */
void
http_server_set_limits(struct http_server *server,
    const struct http_limits *limits)
{
	server->limits = *limits;
}

/*
 * Take the client address of requests from peers in these networks (a
 * load balancer's) from their X-Forwarded-For; nets is taken.
 */
void
http_server_set_trusted(struct http_server *server, struct egress_nets *nets)
{
	egress_nets_free(&server->trusted);
	server->trusted = *nets;
	memset(nets, 0, sizeof *nets);
}

/*
 * Hand a request's connection over to another protocol (WebSocket, server-
 * sent events) that the caller answers with status: the request is logged
 * and freed, the HTTP machinery lets go, and the caller owns the
 * bufferevent with whatever input is still buffered. NULL when the client
 * has already gone.
 */
struct bufferevent *
http_takeover(struct http_request *req, int status)
{
	struct http_conn	*conn = req->conn;
	struct bufferevent	*bev;

	if (conn == NULL) {
		http_access_log(req, 499, 0);
		http_request_free(req);
		return NULL;
	}
	http_access_log(req, status, 0);
	bev = conn->bev;
	bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
	bufferevent_set_timeouts(bev, NULL, NULL);
	bufferevent_setwatermark(bev, EV_READ | EV_WRITE, 0, 0);
	conn->req = NULL;
	http_request_free(req);
	http_conn_uncount(conn);
	http_taken++;
	event_free(conn->timer);
	free(conn);
	return bev;
}

/* A connection taken over has been closed: it counts no more. */
void
http_released(void)
{
	if (http_taken > 0)
		http_taken--;
}
