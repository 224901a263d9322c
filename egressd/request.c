/*
 * A proxy request head, parsed strictly and without state: the request
 * line (CONNECT host:port, or an absolute-form http:// URL with any
 * method), the header fields; the head forwarded upstream; the texts of
 * the refusals the agent sees.
 */
#include <sys/types.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egressd.h"

#define TCHARS	"!#$%&'*+-.^_`|~"

/* Whether c may be in a token (RFC 9110 5.6.2). */
static int
request_tchar(unsigned char c)
{
	return isalnum(c) || (c != '\0' && strchr(TCHARS, c) != NULL);
}

/* The length of a complete head in buf (through its blank line), or 0. */
size_t
request_head_len(const char *buf, size_t len)
{
	size_t	i;

	for (i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		/* A line feed, then an empty line: LF or CR LF. */
		if (i + 1 < len && buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* The next line of [*p, end): its start and length, CR LF or LF gone. */
static int
request_line(const char **p, const char *end, const char **line,
    size_t *linelen)
{
	const char	*nl;

	if (*p >= end)
		return -1;
	if ((nl = memchr(*p, '\n', end - *p)) == NULL)
		return -1;
	*line = *p;
	*linelen = nl - *p;
	if (*linelen > 0 && nl[-1] == '\r')
		(*linelen)--;
	*p = nl + 1;
	return 0;
}

/* A decimal port of 1 to 5 digits, 1..65535; -1 otherwise. */
static int
request_port(const char *s, size_t len)
{
	size_t	i;
	int	port = 0;

	if (len == 0 || len > 5)
		return -1;
	for (i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		port = port * 10 + (s[i] - '0');
	}
	return port >= 1 && port <= 65535 ? port : -1;
}

/*
 * Split an authority "host[:port]" (no userinfo) into req's host (lower
 * case; an IPv6 literal keeps its brackets) and port (dflt when absent,
 * required when dflt is 0).
 */
static int
request_authority(const char *s, size_t len, int dflt, struct egress_req *req,
    char *err, size_t errsz)
{
	const char	*hend, *colon = NULL;
	size_t		 hlen, i;

	if (len == 0) {
		snprintf(err, errsz, "no host");
		return -1;
	}
	if (memchr(s, '@', len) != NULL) {
		snprintf(err, errsz, "credentials in the URL");
		return -1;
	}
	if (s[0] == '[') {
		if ((hend = memchr(s, ']', len)) == NULL) {
			snprintf(err, errsz, "unterminated IPv6 literal");
			return -1;
		}
		hend++;
		if (hend < s + len) {
			if (*hend != ':') {
				snprintf(err, errsz, "bad authority");
				return -1;
			}
			colon = hend;
		}
	} else {
		/* An unbracketed v6 literal has many colons: its last is
		 * taken for the port's, and the host is a literal anyway. */
		for (i = len; i > 0; i--)
			if (s[i - 1] == ':') {
				colon = s + i - 1;
				break;
			}
		hend = colon != NULL ? colon : s + len;
	}
	hlen = hend - s;
	if (hlen == 0 || hlen > EGRESS_HOST_MAX + 2) {
		snprintf(err, errsz, "bad host length");
		return -1;
	}
	for (i = 0; i < hlen; i++) {
		unsigned char	c = s[i];

		if (!isalnum(c) && strchr("-._:[]", c) == NULL) {
			snprintf(err, errsz, "bad character in the host");
			return -1;
		}
		req->host[i] = tolower(c);
	}
	req->host[hlen] = '\0';
	/* One trailing dot names the same host ("example.com."). */
	if (hlen > 1 && req->host[hlen - 1] == '.' && req->host[0] != '[')
		req->host[hlen - 1] = '\0';
	if (colon == NULL) {
		if (dflt == 0) {
			snprintf(err, errsz, "no port");
			return -1;
		}
		req->port = dflt;
		return 0;
	}
	if ((req->port = request_port(colon + 1, s + len - colon - 1)) == -1) {
		snprintf(err, errsz, "bad port");
		return -1;
	}
	return 0;
}

/* The request target: authority-form for CONNECT, else absolute http://. */
static int
request_target(const char *t, size_t len, struct egress_req *req, char *err,
    size_t errsz)
{
	const char	*a, *end = t + len;
	size_t		 alen;

	if (req->connect)
		return request_authority(t, len, 0, req, err, errsz);
	if (len > 0 && (t[0] == '/' || t[0] == '*')) {
		snprintf(err, errsz, "not a proxy request (egressd serves "
		    "CONNECT and absolute-form http:// requests only)");
		return -1;
	}
	if (len >= 8 && strncasecmp(t, "https://", 8) == 0) {
		snprintf(err, errsz, "https:// URL in a plain request (use "
		    "CONNECT for HTTPS)");
		return -1;
	}
	if (len < 7 || strncasecmp(t, "http://", 7) != 0) {
		snprintf(err, errsz, "not an http:// URL");
		return -1;
	}
	a = t + 7;
	for (alen = 0; a + alen < end && strchr("/?#", a[alen]) == NULL; alen++)
		;
	if (request_authority(a, alen, 80, req, err, errsz) == -1)
		return -1;
	req->path = a + alen;
	req->pathlen = end - req->path;
	if (req->pathlen > 0 && req->path[0] == '#')
		req->pathlen = 0;
	return 0;
}

/* Parse the request line "METHOD SP target SP HTTP/1.x". */
static int
request_first(const char *line, size_t len, struct egress_req *req,
    char *err, size_t errsz)
{
	const char	*sp1, *sp2, *end = line + len;
	size_t		 i, mlen;

	if ((sp1 = memchr(line, ' ', len)) == NULL) {
		snprintf(err, errsz, "bad request line");
		return -1;
	}
	mlen = sp1 - line;
	if (mlen == 0 || mlen >= sizeof(req->method)) {
		snprintf(err, errsz, "bad method");
		return -1;
	}
	for (i = 0; i < mlen; i++)
		if (!request_tchar(line[i])) {
			snprintf(err, errsz, "bad method");
			return -1;
		}
	memcpy(req->method, line, mlen);
	req->method[mlen] = '\0';
	if ((sp2 = memchr(sp1 + 1, ' ', end - sp1 - 1)) == NULL ||
	    end - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    (sp2[8] != '0' && sp2[8] != '1')) {
		snprintf(err, errsz, "not an HTTP/1.x request line");
		return -1;
	}
	req->minor = sp2[8] - '0';
	for (i = 1; sp1 + i < sp2; i++)
		if ((unsigned char)sp1[i] <= ' ' ||
		    (unsigned char)sp1[i] >= 0x7f) {
			snprintf(err, errsz, "bad character in the target");
			return -1;
		}
	req->connect = strcmp(req->method, "CONNECT") == 0;
	return request_target(sp1 + 1, sp2 - sp1 - 1, req, err, errsz);
}

/* Parse one header field "name: value" into req. */
static int
request_header(const char *line, size_t len, struct egress_req *req,
    char *err, size_t errsz)
{
	struct egress_header	*h;
	const char		*colon, *v, *end = line + len;
	size_t			 i;

	if (len > 0 && (line[0] == ' ' || line[0] == '\t')) {
		snprintf(err, errsz, "folded header line");
		return -1;
	}
	if ((colon = memchr(line, ':', len)) == NULL || colon == line) {
		snprintf(err, errsz, "bad header line");
		return -1;
	}
	for (i = 0; line + i < colon; i++)
		if (!request_tchar(line[i])) {
			snprintf(err, errsz, "bad header name");
			return -1;
		}
	for (v = colon + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	for (i = 0; v + i < end; i++)
		if (((unsigned char)v[i] < ' ' && v[i] != '\t') ||
		    v[i] == 0x7f) {
			snprintf(err, errsz, "bad character in a header");
			return -1;
		}
	if (req->nhdrs >= EGRESS_HEADERS_MAX) {
		snprintf(err, errsz, "too many headers");
		return -1;
	}
	h = &req->hdrs[req->nhdrs++];
	h->name = line;
	h->namelen = colon - line;
	h->value = v;
	h->valuelen = end - v;
	return 0;
}

/* Parse a complete request head of len bytes; 0, or -1 and err. */
int
request_parse(const char *head, size_t len, struct egress_req *req,
    char *err, size_t errsz)
{
	const char	*p = head, *end = head + len, *line;
	size_t		 linelen;

	memset(req, 0, sizeof(*req));
	if (len > EGRESS_HEAD_MAX) {
		snprintf(err, errsz, "request head too large");
		return -1;
	}
	if (memchr(head, '\0', len) != NULL) {
		snprintf(err, errsz, "NUL in the request head");
		return -1;
	}
	if (request_line(&p, end, &line, &linelen) == -1) {
		snprintf(err, errsz, "incomplete request head");
		return -1;
	}
	if (request_first(line, linelen, req, err, errsz) == -1)
		return -1;
	for (;;) {
		if (request_line(&p, end, &line, &linelen) == -1) {
			snprintf(err, errsz, "incomplete request head");
			return -1;
		}
		if (linelen == 0)
			break;
		if (request_header(line, linelen, req, err, errsz) == -1)
			return -1;
	}
	if (p != end) {
		snprintf(err, errsz, "bytes after the request head");
		return -1;
	}
	return 0;
}

/* Whether a header (name of len bytes) stays behind at the proxy. */
static int
request_hop_by_hop(const char *name, size_t len)
{
	static const char *const drop[] = {
		"connection", "keep-alive", "te", "trailer", "upgrade",
		"host", NULL
	};
	size_t	i;

	if (len >= 6 && strncasecmp(name, "proxy-", 6) == 0)
		return 1;
	for (i = 0; drop[i] != NULL; i++)
		if (strlen(drop[i]) == len && strncasecmp(name, drop[i],
		    len) == 0)
			return 1;
	return 0;
}

/* The head sent upstream for an absolute-form request (malloc'ed). */
char *
request_forward(const struct egress_req *req, size_t *lenp)
{
	const struct egress_header	*h;
	char				*out, *p;
	size_t				 need;
	int				 i, n;

	need = strlen(req->method) + req->pathlen + 64 +
	    strlen(req->host) + 8 + sizeof("Connection: close\r\n\r\n");
	for (i = 0; i < req->nhdrs; i++)
		need += req->hdrs[i].namelen + req->hdrs[i].valuelen + 4;
	if ((out = malloc(need)) == NULL)
		return NULL;
	p = out;
	n = snprintf(p, need, "%s %s%.*s HTTP/1.%d\r\n", req->method,
	    req->pathlen == 0 || req->path[0] == '?' ? "/" : "",
	    (int)req->pathlen, req->path, req->minor);
	p += n;
	if (req->port == 80)
		p += snprintf(p, need - (p - out), "Host: %s\r\n", req->host);
	else
		p += snprintf(p, need - (p - out), "Host: %s:%d\r\n",
		    req->host, req->port);
	for (i = 0; i < req->nhdrs; i++) {
		h = &req->hdrs[i];
		if (request_hop_by_hop(h->name, h->namelen))
			continue;
		memcpy(p, h->name, h->namelen);
		p += h->namelen;
		*p++ = ':';
		*p++ = ' ';
		memcpy(p, h->value, h->valuelen);
		p += h->valuelen;
		*p++ = '\r';
		*p++ = '\n';
	}
	p += snprintf(p, need - (p - out), "Connection: close\r\n\r\n");
	*lenp = p - out;
	return out;
}

/*
 * The head of an upstream response to an absolute-form request, as the
 * client gets it: its status line, its headers but Connection,
 * Keep-Alive and Proxy-Connection, then Connection: close (the proxy
 * serves one request per connection). An interim (1xx) head goes as it
 * is, *interim set. NULL when it is not an HTTP/1.x response head.
 */
char *
response_rewrite(const char *head, size_t len, size_t *lenp, int *interim)
{
	const char	*p = head, *end = head + len, *line, *colon;
	char		*out, *o;
	size_t		 linelen;
	int		 status;

	*interim = 0;
	if (request_line(&p, end, &line, &linelen) == -1 || linelen < 12 ||
	    memcmp(line, "HTTP/1.", 7) != 0 || line[8] != ' ' ||
	    !isdigit((unsigned char)line[9]) ||
	    !isdigit((unsigned char)line[10]) ||
	    !isdigit((unsigned char)line[11]))
		return NULL;
	status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + line[11] - '0';
	/* Bare LF lines grow by a byte each: at most twice the size. */
	if ((out = malloc(2 * len + 32)) == NULL)
		return NULL;
	if (status >= 100 && status < 200) {
		*interim = 1;
		memcpy(out, head, len);
		*lenp = len;
		return out;
	}
	o = out;
	memcpy(o, line, linelen);
	o += linelen;
	*o++ = '\r';
	*o++ = '\n';
	while (request_line(&p, end, &line, &linelen) == 0 && linelen > 0) {
		colon = memchr(line, ':', linelen);
		if (colon != NULL && ((colon - line == 10 &&
		    strncasecmp(line, "connection", 10) == 0) ||
		    (colon - line == 10 && strncasecmp(line, "keep-alive",
		    10) == 0) || (colon - line == 16 && strncasecmp(line,
		    "proxy-connection", 16) == 0)))
			continue;
		memcpy(o, line, linelen);
		o += linelen;
		*o++ = '\r';
		*o++ = '\n';
	}
	memcpy(o, "Connection: close\r\n\r\n", 21);
	o += 21;
	*lenp = o - out;
	return out;
}

/* The HTTP status of a refusal. */
int
refusal_status(enum refusal r)
{
	switch (r) {
	case REF_PORT:
	case REF_LITERAL:
	case REF_DENYLIST:
	case REF_ALLOWLIST:
	case REF_DENY_NET:
		return 403;
	case REF_RESOLVE:
	case REF_CONNECT:
		return 502;
	case REF_TIMEOUT:
		return 504;
	case REF_BUSY:
		return 503;
	case REF_HEAD_TIMEOUT:
		return 408;
	case REF_BAD_REQUEST:
	case REF_NONE:
		break;
	}
	return 400;
}

/* The agent's text of a refusal, one line, into buf. */
const char *
refusal_text(enum refusal r, const struct refusal_ctx *c, char *buf,
    size_t bufsz)
{
	const char	*host = c->host != NULL ? c->host : "?";

	switch (r) {
	case REF_PORT:
		snprintf(buf, bufsz, "Egress refused: port %d is not allowed "
		    "(allowed: %s)", c->port, c->ports);
		break;
	case REF_LITERAL:
		snprintf(buf, bufsz, "Egress refused: %s is an IP literal "
		    "(use a name)", host);
		break;
	case REF_DENYLIST:
		snprintf(buf, bufsz, "Egress refused: %s is on the denylist",
		    host);
		break;
	case REF_ALLOWLIST:
		snprintf(buf, bufsz, "Egress refused: %s is not on this "
		    "sandbox's allowlist; an admin can allow it (hostgate "
		    "panel or hgctl egress allow)", host);
		break;
	case REF_DENY_NET:
		snprintf(buf, bufsz, "Egress refused: %s resolves to %s "
		    "inside a denied network (%s)", host, c->addr, c->cidr);
		break;
	case REF_RESOLVE:
		snprintf(buf, bufsz, "Egress failed: %s does not resolve",
		    host);
		break;
	case REF_CONNECT:
		snprintf(buf, bufsz, "Egress failed: cannot connect to %s "
		    "(%s): %s", host, c->addr, c->detail);
		break;
	case REF_TIMEOUT:
		snprintf(buf, bufsz, "Egress failed: connecting to %s (%s) "
		    "timed out", host, c->addr);
		break;
	case REF_BUSY:
		snprintf(buf, bufsz, "Egress refused: too many connections "
		    "(at most %d)", c->limit);
		break;
	case REF_HEAD_TIMEOUT:
		snprintf(buf, bufsz, "Egress refused: no complete request "
		    "head within %d s", EGRESS_HEAD_TIMEOUT);
		break;
	case REF_BAD_REQUEST:
	case REF_NONE:
		snprintf(buf, bufsz, "Egress refused: bad request: %s",
		    c->detail != NULL ? c->detail : "?");
		break;
	}
	return buf;
}

/* The short reason of an egress_log record. */
const char *
refusal_reason(enum refusal r, const struct refusal_ctx *c, char *buf,
    size_t bufsz)
{
	switch (r) {
	case REF_PORT:
		snprintf(buf, bufsz, "port not allowed");
		break;
	case REF_LITERAL:
		snprintf(buf, bufsz, "IP literal");
		break;
	case REF_DENYLIST:
		snprintf(buf, bufsz, "on the denylist");
		break;
	case REF_ALLOWLIST:
		snprintf(buf, bufsz, "not on the allowlist");
		break;
	case REF_DENY_NET:
		snprintf(buf, bufsz, "denied network %s", c->cidr);
		break;
	case REF_RESOLVE:
		snprintf(buf, bufsz, "does not resolve%s%s",
		    c->detail != NULL ? ": " : "",
		    c->detail != NULL ? c->detail : "");
		break;
	case REF_CONNECT:
		snprintf(buf, bufsz, "connect failed: %s", c->detail);
		break;
	case REF_TIMEOUT:
		snprintf(buf, bufsz, "connect timed out");
		break;
	case REF_BUSY:
		snprintf(buf, bufsz, "too many connections");
		break;
	case REF_HEAD_TIMEOUT:
		snprintf(buf, bufsz, "request head timed out");
		break;
	case REF_BAD_REQUEST:
	case REF_NONE:
		snprintf(buf, bufsz, "bad request");
		break;
	}
	return buf;
}

/*
 * The whole response of a refusal: the text as reason phrase (curl shows
 * it for a refused CONNECT) and body, X-Hostgate-Egress naming the host.
 */
char *
refusal_response(enum refusal r, const struct refusal_ctx *c, size_t *lenp)
{
	char	 text[1024], *out;
	int	 n, status = refusal_status(r);

	refusal_text(r, c, text, sizeof(text));
	n = asprintf(&out, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\n"
	    "Content-Length: %zu\r\n"
	    "Connection: close\r\n"
	    "X-Hostgate-Egress: refused; host=%s\r\n"
	    "\r\n%s\n", status, text, strlen(text) + 1,
	    c->host != NULL ? c->host : "-", text);
	if (n == -1)
		return NULL;
	*lenp = (size_t)n;
	return out;
}
