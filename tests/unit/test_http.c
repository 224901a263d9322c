/*
 * Unit tests for frontd/http.c and frontd/tls.c: the head parser, cookies,
 * and the server end to end on loopback, plain and TLS, with the client in
 * this process driving the event loop while it waits.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* memmem */
#endif
#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "../../frontd/frontd.h"

#define MAX_BODY	16		/* the test servers' body limit */

/* Parse a whole string as a head. */
static int
parse(const char *s, struct http_request *req)
{
	http_request_init(req);
	return (http_parse_head(s, strlen(s), req));
}

/* The status a bad head (given with its length) is refused with. */
static int
parse_status(const char *s, size_t len)
{
	struct http_request	req;
	int			rc;

	http_request_init(&req);
	rc = http_parse_head(s, len, &req);
	if (rc <= 0) {
		/* A refused head leaves nothing behind. */
		assert_null(req.target);
		assert_true(TAILQ_EMPTY(&req.headers));
	}
	http_request_clear(&req);
	return (rc);
}

static void
test_parse_get_query(void **state)
{
	const char		*s = "GET /api/status?a=1&b=%20 HTTP/1.1\r\n"
				    "Host: example.org\r\n"
				    "X-Empty:\r\n"
				    "X-Spaced: \t some value \t\r\n\r\n";
	struct http_request	 req;

	assert_int_equal(parse(s, &req), (int)strlen(s));
	assert_string_equal(req.method, "GET");
	assert_string_equal(req.target, "/api/status?a=1&b=%20");
	assert_string_equal(req.path, "/api/status");
	assert_string_equal(req.query, "a=1&b=%20");
	assert_int_equal(req.minor, 1);
	assert_int_equal(req.keep_alive, 1);
	assert_int_equal(req.content_length, -1);
	assert_string_equal(http_header(&req, "host"), "example.org");
	assert_string_equal(http_header(&req, "X-EMPTY"), "");
	assert_string_equal(http_header(&req, "x-spaced"), "some value");
	assert_null(http_header(&req, "Cookie"));
	http_request_clear(&req);
	assert_null(req.path);
	assert_int_equal(req.content_length, -1);
	assert_true(TAILQ_EMPTY(&req.headers));
}

static void
test_parse_post_length(void **state)
{
	const char		*head = "POST /api/run_command HTTP/1.1\r\n"
				    "Content-Length: 11\r\n"
				    "content-length: 11\r\n"
				    "Connection: Keep-Alive, Close\r\n\r\n";
	char			 buf[256];
	struct http_request	 req;

	/* The body that follows is not part of the head. */
	snprintf(buf, sizeof buf, "%s{\"a\": true}", head);
	assert_int_equal(parse(buf, &req), (int)strlen(head));
	assert_string_equal(req.method, "POST");
	assert_null(req.query);
	assert_int_equal(req.content_length, 11);
	assert_int_equal(req.keep_alive, 0);
	http_request_clear(&req);
}

static void
test_parse_bare_lf_cr(void **state)
{
	static const char *const bad[] = {
		"GET / HTTP/1.1\nHost: x\r\n\r\n",
		/* Honoured, this would make the next request a body. */
		"GET / HTTP/1.1\r\nX-A: a\nContent-Length: 5\r\n\r\nhello",
		"GET / HTTP/1.1\r\nX-A: a\rContent-Length: 5\r\n\r\nhello",
		"GET / HTTP/1.1\r\nA: b\n\r\n",
		"GET / HTTP/1.1\r\nA: b\r\n\n",
		"GET / HTTP/1.1\r\nA: b\r\n\r\r\n",
		"GET / HTTP/1.0\nConnection: keep-alive\n\n",
		"GET /x HTTP/1.1\r\r\n\r\n",
		"\nGET / HTTP/1.1\r\n\r\n",
	};
	struct http_request	 req;
	const char		*s;
	size_t			 i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (parse_status(bad[i], strlen(bad[i])) != -400)
			fail_msg("case %zu accepted: %s", i, bad[i]);

	/* Refused as soon as it arrives, before the head is complete. */
	s = "GET / HTTP/1.1\r\nX-A: a\nCont";
	assert_int_equal(parse_status(s, strlen(s)), -400);
	s = "GET / HTTP/1.1\n";
	assert_int_equal(parse_status(s, strlen(s)), -400);
	s = "GET / HTTP/1.1\r\nX-A: a\rb";
	assert_int_equal(parse_status(s, strlen(s)), -400);
	/* A CR at the end of what has arrived may still get its LF. */
	s = "GET / HTTP/1.1\r\nX-A: a\r";
	assert_int_equal(parse_status(s, strlen(s)), 0);
	s = "GET / HTTP/1.1\r";
	assert_int_equal(parse_status(s, strlen(s)), 0);

	/* CR LF throughout is the one accepted line end. */
	s = "GET /x? HTTP/1.0\r\nConnection: keep-alive\r\nA: b\r\n\r\n";
	assert_int_equal(parse(s, &req), (int)strlen(s));
	assert_int_equal(req.minor, 0);
	assert_int_equal(req.keep_alive, 1);
	assert_string_equal(req.path, "/x");
	assert_string_equal(req.query, "");
	assert_string_equal(http_header(&req, "a"), "b");
	http_request_clear(&req);
}

/* A head with n headers "H<i>: v". */
static char *
head_with_headers(int n)
{
	char	*s;
	size_t	 len = 0, size = 64 + (size_t)n * 16;
	int	 i;

	s = malloc(size);
	assert_non_null(s);
	len += snprintf(s + len, size - len, "GET / HTTP/1.1\r\n");
	for (i = 0; i < n; i++)
		len += snprintf(s + len, size - len, "H%d: v\r\n", i);
	snprintf(s + len, size - len, "\r\n");
	return (s);
}

static void
test_parse_many_headers(void **state)
{
	struct http_request	 req;
	char			*s;

	s = head_with_headers(HTTP_MAX_HEADERS);
	assert_int_equal(parse(s, &req), (int)strlen(s));
	assert_string_equal(http_header(&req, "H63"), "v");
	http_request_clear(&req);
	free(s);

	s = head_with_headers(HTTP_MAX_HEADERS + 1);
	assert_int_equal(parse_status(s, strlen(s)), -431);
	free(s);
}

static void
test_parse_bad(void **state)
{
	static const struct {
		const char	*head;
		int		 status;
	} cases[] = {
		{ "get / HTTP/1.1\r\n\r\n", 400 },
		{ "G-T / HTTP/1.1\r\n\r\n", 400 },
		{ " GET / HTTP/1.1\r\n\r\n", 400 },
		{ "ABCDEFGHIJKLMNOP / HTTP/1.1\r\n\r\n", 501 },
		{ "ABCDEFGHIJKLMNO / HTTP/1.1\r\n\r\n", 0 },
		{ "GET\r\n\r\n", 400 },
		{ "GET /\r\n\r\n", 400 },
		{ "GET  / HTTP/1.1\r\n\r\n", 400 },
		{ "GET http://x/ HTTP/1.1\r\n\r\n", 400 },
		{ "OPTIONS * HTTP/1.1\r\n\r\n", 400 },
		{ "GET /a\tb HTTP/1.1\r\n\r\n", 400 },
		{ "GET /\xc3\xa9 HTTP/1.1\r\n\r\n", 400 },
		{ "GET / HTTP/1.1 \r\n\r\n", 400 },
		{ "GET / http/1.1\r\n\r\n", 400 },
		{ "GET / FOO/1.1\r\n\r\n", 400 },
		{ "GET / HTTP/1.1x\r\n\r\n", 400 },
		{ "GET / HTTP/2.0\r\n\r\n", 505 },
		{ "GET / HTTP/2\r\n\r\n", 505 },
		{ "GET / HTTP/1.2\r\n\r\n", 505 },
		{ "GET / HTTP/0.9\r\n\r\n", 505 },
		{ "\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\rX: y\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nHo st: x\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\n: x\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nA: b\r\n\tfolded\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nA: b\x7f\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nA: b\r\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nA: caf\xc3\xa9\r\n\r\n", 0 },
		{ "GET / HTTP/1.1\r\nContent-Length: 12a\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nContent-Length: +1\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n",
		    400 },
		{ "GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n"
		    "\r\n", 400 },
		{ "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501 },
		{ "POST / HTTP/1.1\r\nContent-Length: 5\r\n"
		    "Transfer-Encoding: identity\r\n\r\n", 501 },
	};
	size_t	i;
	int	rc;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		rc = parse_status(cases[i].head, strlen(cases[i].head));
		if (cases[i].status == 0 && rc > 0)
			continue;
		if (rc != -cases[i].status)
			fail_msg("case %zu (%s): got %d, want %d", i,
			    cases[i].head, rc, -cases[i].status);
	}
}

static void
test_parse_nul(void **state)
{
	static const char	in_target[] = "GET /a\0b HTTP/1.1\r\n\r\n";
	static const char	in_value[] = "GET / HTTP/1.1\r\nA: x\0y\r\n\r\n";
	static const char	in_name[] = "GET / HTTP/1.1\r\nA\0: x\r\n\r\n";

	assert_int_equal(parse_status(in_target, sizeof in_target - 1), -400);
	assert_int_equal(parse_status(in_value, sizeof in_value - 1), -400);
	assert_int_equal(parse_status(in_name, sizeof in_name - 1), -400);
}

static void
test_parse_sizes(void **state)
{
	struct http_request	 req;
	char			*s;
	size_t			 len;

	/* A target of exactly 8192 bytes is fine, one more is 414. */
	s = malloc(HTTP_MAX_HEAD + 64);
	assert_non_null(s);
	len = snprintf(s, 64, "GET /");
	memset(s + len, 'a', 8191);
	strcpy(s + len + 8191, " HTTP/1.1\r\n\r\n");
	assert_int_equal(parse(s, &req), (int)strlen(s));
	assert_int_equal(strlen(req.target), 8192);
	http_request_clear(&req);
	memset(s + len, 'a', 8192);
	strcpy(s + len + 8192, " HTTP/1.1\r\n\r\n");
	assert_int_equal(parse_status(s, strlen(s)), -414);
	/* Still 414 while the line has not ended. */
	assert_int_equal(parse_status(s, len + 8193), -414);

	/* A complete head over HTTP_MAX_HEAD bytes is 431. */
	len = snprintf(s, 64, "GET / HTTP/1.1\r\nX: ");
	memset(s + len, 'b', HTTP_MAX_HEAD);
	strcpy(s + len + HTTP_MAX_HEAD, "\r\n\r\n");
	assert_int_equal(parse_status(s, strlen(s)), -431);
	/* And so is an incomplete one that reached the limit. */
	assert_int_equal(parse_status(s, HTTP_MAX_HEAD - 1), 0);
	assert_int_equal(parse_status(s, HTTP_MAX_HEAD), -431);

	/* A head of exactly HTTP_MAX_HEAD bytes is fine. */
	len = snprintf(s, 64, "GET / HTTP/1.1\r\nX: ");
	memset(s + len, 'c', HTTP_MAX_HEAD - len - 4);
	strcpy(s + HTTP_MAX_HEAD - 4, "\r\n\r\n");
	assert_int_equal(strlen(s), HTTP_MAX_HEAD);
	assert_int_equal(parse(s, &req), HTTP_MAX_HEAD);
	http_request_clear(&req);
	free(s);
}

static void
test_parse_incremental(void **state)
{
	const char		*s = "POST /api/login?x=1 HTTP/1.1\r\n"
				    "Host: h\r\nContent-Length: 2\r\n\r\n";
	struct http_request	 req;
	size_t			 i, len = strlen(s);

	for (i = 0; i < len; i++) {
		http_request_init(&req);
		if (http_parse_head(s, i, &req) != 0)
			fail_msg("prefix of %zu bytes did not return 0", i);
		assert_null(req.target);
	}
	assert_int_equal(parse(s, &req), (int)len);
	assert_int_equal(req.content_length, 2);
	http_request_clear(&req);

	/* Bad request lines are refused before the head is complete. */
	assert_int_equal(parse_status("\x16\x03\x01\x02", 4), -400);
	assert_int_equal(parse_status("get", 3), -400);
	assert_int_equal(parse_status("GET x", 5), -400);
	assert_int_equal(parse_status("GET /\x01", 6), -400);
	assert_int_equal(parse_status("ABCDEFGHIJKLMNOPQ", 17), -501);
	assert_int_equal(parse_status("GET / HTTP/3.0\r\n", 16), -505);
	assert_int_equal(parse_status("GET / HTTP/1.1\r\nHost", 20), 0);
}

static void
test_cookie(void **state)
{
	const char		*s = "GET / HTTP/1.1\r\n"
				    "Cookie: a=1; hg_session=abc.DEF-_;b=\"q\"\r\n"
				    "Cookie: c=3 ;  d = 4; e=\r\n\r\n";
	struct http_request	 req;
	char			 out[8];

	assert_int_equal(parse(s, &req), (int)strlen(s));
	assert_int_equal(http_cookie(&req, "a", out, sizeof out), 0);
	assert_string_equal(out, "1");
	assert_int_equal(http_cookie(&req, "hg_session", out, sizeof out), -1);
	assert_int_equal(http_cookie(&req, "b", out, sizeof out), 0);
	assert_string_equal(out, "q");
	assert_int_equal(http_cookie(&req, "c", out, sizeof out), 0);
	assert_string_equal(out, "3");
	assert_int_equal(http_cookie(&req, "e", out, sizeof out), 0);
	assert_string_equal(out, "");
	/* Names match exactly: no prefixes, case or stray spaces. */
	assert_int_equal(http_cookie(&req, "hg", out, sizeof out), -1);
	assert_int_equal(http_cookie(&req, "A", out, sizeof out), -1);
	assert_int_equal(http_cookie(&req, "d", out, sizeof out), -1);
	assert_int_equal(http_cookie(&req, "zz", out, sizeof out), -1);
	/* A value just fits with its NUL, or does not. */
	{
		char	big[16];

		assert_int_equal(http_cookie(&req, "hg_session", big, 12), 0);
		assert_string_equal(big, "abc.DEF-_");
		assert_int_equal(http_cookie(&req, "hg_session", big, 10), 0);
		assert_int_equal(http_cookie(&req, "hg_session", big, 9), -1);
		assert_int_equal(http_cookie(&req, "a", big, 0), -1);
	}
	http_request_clear(&req);

	assert_int_equal(parse("GET / HTTP/1.1\r\n\r\n", &req), 18);
	assert_int_equal(http_cookie(&req, "a", out, sizeof out), -1);
	http_request_clear(&req);
}

static void
test_status_text(void **state)
{
	static const int	codes[] = { 200, 201, 204, 400, 401, 403, 404,
				    405, 408, 409, 410, 411, 413, 414, 415, 421,
				    429, 431,
				    500, 501, 502, 503, 504, 505 };
	size_t			i;

	for (i = 0; i < sizeof codes / sizeof codes[0]; i++)
		assert_string_not_equal(http_status_text(codes[i]), "Unknown");
	assert_string_equal(http_status_text(404), "Not Found");
	assert_string_equal(http_status_text(299), "Unknown");
	assert_string_equal(http_status_text(421), "Misdirected Request");
}

/* The client a proxy names: the last entry of the last X-Forwarded-For. */
static void
test_forwarded_for(void **state)
{
	static const char *const	 bad[] = {
		"", "X-Forwarded-For: \r\n", "X-Forwarded-For: 10.0.0.1,\r\n",
		"X-Forwarded-For: evil.example\r\n",
		"X-Forwarded-For: 10.0.0.1:80\r\n",
		"X-Forwarded-For: 10.0.0.1 10.0.0.2\r\n",
		"X-Forwarded-For: 300.0.0.1\r\n",
	};
	struct http_request	 req;
	char			 head[256], out[64];
	size_t			 i;

	assert_true(parse("GET / HTTP/1.1\r\nX-Forwarded-For: 1.2.3.4, "
	    "198.51.100.7\r\n\r\n", &req) > 0);
	assert_int_equal(http_forwarded_for(&req, out, sizeof out), 0);
	assert_string_equal(out, "198.51.100.7");
	http_request_clear(&req);
	/* A client's own header comes first; the proxy appends its own. */
	assert_true(parse("GET / HTTP/1.1\r\nX-Forwarded-For: 127.0.0.9\r\n"
	    "Host: x\r\nx-forwarded-for:  2001:DB8::1 \r\n\r\n", &req) > 0);
	assert_int_equal(http_forwarded_for(&req, out, sizeof out), 0);
	assert_string_equal(out, "2001:db8::1");
	http_request_clear(&req);
	assert_true(parse("GET / HTTP/1.1\r\nX-Forwarded-For: "
	    "::ffff:192.0.2.1\r\n\r\n", &req) > 0);
	assert_int_equal(http_forwarded_for(&req, out, sizeof out), 0);
	assert_string_equal(out, "192.0.2.1");
	http_request_clear(&req);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(head, sizeof head, "GET / HTTP/1.1\r\n%s\r\n",
		    bad[i]);
		assert_true(parse(head, &req) > 0);
		if (http_forwarded_for(&req, out, sizeof out) != -1)
			fail_msg("accepted %s", bad[i]);
		http_request_clear(&req);
	}
}

/*
 * The base of the URLs built for a client: a trusted proxy's
 * X-Forwarded-Proto and -Host (each the last entry), else frontd's scheme
 * and the Host; a malformed one is passed over.
 */
static void
test_base_url(void **state)
{
	static const char *const	 fwd = "GET / HTTP/1.1\r\n"
	    "Host: 127.0.0.1:8081\r\nX-Forwarded-Proto: http, https\r\n"
	    "X-Forwarded-Host: evil.example, hg.example.org\r\n\r\n";
	struct http_request	 req;
	char			 out[300];

	/* Not from a trusted proxy: its headers count for nothing. */
	assert_true(parse(fwd, &req) > 0);
	http_base_url(&req, out, sizeof out);
	assert_string_equal(out, "http://127.0.0.1:8081");
	req.tls = 1;
	http_base_url(&req, out, sizeof out);
	assert_string_equal(out, "https://127.0.0.1:8081");
	req.tls = 0;
	req.proxied = 1;
	http_base_url(&req, out, sizeof out);
	assert_string_equal(out, "https://hg.example.org");
	http_request_clear(&req);
	/* The proxy sent the scheme alone: the Host it passed on. */
	assert_true(parse("GET / HTTP/1.1\r\nHost: Hg.Example.org:8443\r\n"
	    "X-Forwarded-Proto: HTTPS\r\n\r\n", &req) > 0);
	req.proxied = 1;
	http_base_url(&req, out, sizeof out);
	assert_string_equal(out, "https://Hg.Example.org:8443");
	http_request_clear(&req);
	/* Malformed values are passed over, a bad Host too. */
	assert_true(parse("GET / HTTP/1.1\r\nHost: a/b\r\n"
	    "X-Forwarded-Proto: ftp\r\nX-Forwarded-Host: x y\r\n\r\n",
	    &req) > 0);
	req.proxied = 1;
	http_base_url(&req, out, sizeof out);
	assert_string_equal(out, "http://localhost");
	http_request_clear(&req);
	assert_true(parse("GET / HTTP/1.1\r\nHost: h:1\r\n"
	    "X-Forwarded-Host: bad_host!\r\n\r\n", &req) > 0);
	req.proxied = 1;
	http_base_url(&req, out, sizeof out);
	assert_string_equal(out, "http://h:1");
	http_request_clear(&req);
}

/*
 * End to end. One event base and two servers (plain and TLS) for the whole
 * binary: http.c has no way to free a server, and keeping them in globals
 * keeps them reachable for the leak checker.
 */
static struct event_base	*base;
static int			 plain_port, tls_port;
static int			 lim_port;	/* small limits, 1 s heads */
#define LIM_CONNS	8
#define LIM_PER_ADDR	3
static char			 tmpdir[] = "/tmp/hg-test-http.XXXXXX";
static char			 cert_path[PATH_MAX], key_path[PATH_MAX];
static char			 key2_path[PATH_MAX];
static struct http_request	*held;		/* a request kept by /hold */
static struct bufferevent	*taken;		/* /takeover's connection */

/* The test handler: echoes the request as JSON; /hold answers later. */
static void
handler(struct http_request *req, void *arg)
{
	struct json_object	*obj;
	char			 cookie[64];
	const char		*extra = NULL;

	if (strcmp(req->path, "/hold") == 0) {
		held = req;
		return;
	}
	if (strcmp(req->path, "/takeover") == 0) {
		taken = http_takeover(req, 101);
		bufferevent_write(taken, "RAW", 3);
		return;
	}
	if (strcmp(req->path, "/cache") == 0)
		extra = "X-Test: 1\r\ncache-control: max-age=60\r\n";
	obj = json_object_new_object();
	json_object_object_add(obj, "method", json_object_new_string(
	    req->method));
	json_object_object_add(obj, "path", json_object_new_string(req->path));
	if (req->query != NULL)
		json_object_object_add(obj, "query",
		    json_object_new_string(req->query));
	if (req->body != NULL)
		json_object_object_add(obj, "body", json_object_new_string_len(
		    req->body, (int)req->body_len));
	if (http_cookie(req, "hg_session", cookie, sizeof cookie) == 0)
		json_object_object_add(obj, "cookie",
		    json_object_new_string(cookie));
	json_object_object_add(obj, "peer", json_object_new_string(req->peer));
	json_object_object_add(obj, "tls", json_object_new_int(req->tls));
	http_reply_json(req, 200, obj, extra);
}

/* Milliseconds on the monotonic clock. */
static long
ms_now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* Run the server side for a moment. */
static void
pump(void)
{
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	usleep(500);
}

/* A bound loopback listener; its port in *port. */
static int
listen_loopback(int *port)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof sin;
	int			fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return (fd);
}

/* A non-blocking client connected to port from the address src. */
static int
client_connect_from(int port, const char *src)
{
	struct sockaddr_in	sin;
	int			fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, src, &sin.sin_addr), 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	return (fd);
}

/* A non-blocking client connected to port, from 127.0.0.1. */
static int
client_connect(int port)
{
	return (client_connect_from(port, "127.0.0.1"));
}

/* Send all of s. */
static void
client_send(int fd, const char *s, size_t len)
{
	ssize_t	n;
	long	deadline = ms_now() + 3000;

	while (len > 0) {
		n = send(fd, s, len, MSG_NOSIGNAL);
		if (n > 0) {
			s += n;
			len -= n;
		} else if (n == -1 && errno != EAGAIN)
			fail_msg("send: %s", strerror(errno));
		else if (ms_now() > deadline)
			fail_msg("send: timeout");
		else
			pump();
	}
}

/* Send a string. */
static void
send_str(int fd, const char *s)
{
	client_send(fd, s, strlen(s));
}

/* How many complete responses buf holds (HEAD responses have no body). */
static int
count_responses(const char *buf, size_t len, int head)
{
	const char	*p = buf, *end = buf + len, *eoh, *cl;
	long		 n;
	int		 count = 0;

	while (p < end) {
		if ((eoh = memmem(p, end - p, "\r\n\r\n", 4)) == NULL)
			break;
		eoh += 4;
		n = 0;
		cl = memmem(p, eoh - p, "Content-Length: ", 16);
		if (cl != NULL && !head && strncmp(p, "HTTP/1.1 100 ", 13) != 0)
			n = strtol(cl + 16, NULL, 10);
		if (end - eoh < n)
			break;
		p = eoh + n;
		count++;
	}
	return (count);
}

/*
 * Read until buf (a string) holds nresp complete responses, or until the
 * server closes when nresp is 0. Returns 1 when the server closed.
 */
static int
client_read(int fd, char *buf, size_t bufsz, int nresp, int head)
{
	size_t	len = 0;
	ssize_t	n;
	long	deadline = ms_now() + 3000;
	int	eof = 0;

	buf[0] = '\0';
	while (ms_now() < deadline) {
		if (nresp > 0 && count_responses(buf, len, head) >= nresp)
			break;
		n = recv(fd, buf + len, bufsz - 1 - len, 0);
		if (n == 0) {
			eof = 1;
			break;
		}
		if (n == -1 && errno == ECONNRESET)
			fail_msg("connection reset, after: %s", buf);
		if (n > 0) {
			len += n;
			buf[len] = '\0';
			continue;
		}
		assert_int_equal(errno, EAGAIN);
		pump();
	}
	if (nresp > 0 && count_responses(buf, len, head) < nresp)
		fail_msg("wanted %d responses, got: %s", nresp, buf);
	return (eof);
}

/* Close fd with a reset rather than a FIN. */
static void
client_reset(int fd)
{
	struct linger	l = { 1, 0 };

	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l),
	    0);
	close(fd);
}

/* Whether the server closed fd within a few seconds. */
static int
client_eof(int fd)
{
	char	buf[4096];

	return (client_read(fd, buf, sizeof buf, 0, 0));
}

static void
test_server_get(void **state)
{
	char	buf[8192], *p;
	int	fd;

	fd = client_connect(plain_port);
	send_str(fd, "GET /a?b=c HTTP/1.1\r\nHost: x\r\n"
	    "Cookie: hg_session=s3cret\r\n\r\n");
	client_read(fd, buf, sizeof buf, 1, 0);
	assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(buf, "\r\nContent-Type: application/json\r\n"));
	assert_non_null(strstr(buf, "\r\nConnection: keep-alive\r\n"));
	assert_non_null(strstr(buf, "\r\nX-Content-Type-Options: nosniff\r\n"));
	assert_non_null(strstr(buf, "\r\nReferrer-Policy: no-referrer\r\n"));
	assert_non_null(strstr(buf, "\r\nX-Frame-Options: DENY\r\n"));
	assert_non_null(strstr(buf, "\r\nCache-Control: no-store\r\n"));
	assert_non_null(p = strstr(buf, "\r\nX-Request-Id: "));
	assert_int_equal(strspn(p + 16, "0123456789abcdef"), 16);
	assert_memory_equal(p + 32, "\r\n", 2);
	assert_non_null(strstr(buf, "\r\n\r\n{\"method\":\"GET\",\"path\":\"\\/a\","
	    "\"query\":\"b=c\",\"cookie\":\"s3cret\",\"peer\":\"127.0.0.1\","
	    "\"tls\":0}"));

	/* Keep-alive: a second request on the same connection. */
	send_str(fd, "POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
	client_read(fd, buf, sizeof buf, 1, 0);
	assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(buf, "\"body\":\"hello\""));

	/* Caller's Cache-Control replaces no-store. */
	send_str(fd, "GET /cache HTTP/1.1\r\nConnection: close\r\n\r\n");
	client_read(fd, buf, sizeof buf, 1, 0);
	assert_non_null(strstr(buf, "\r\nX-Test: 1\r\ncache-control: max-age=60"
	    "\r\n\r\n"));
	assert_null(strstr(buf, "no-store"));
	assert_non_null(strstr(buf, "\r\nConnection: close\r\n"));
	assert_true(client_eof(fd));
	close(fd);
}

static void
test_server_body_pieces(void **state)
{
	char	buf[8192];
	int	fd, i;

	fd = client_connect(plain_port);
	/* Empty lines before a request are skipped. */
	send_str(fd, "\r\nPOST /p HTTP/1.1\r\nContent-Length: 5\r\n"
	    "Expect: 100-continue\r\n\r\n");
	client_read(fd, buf, sizeof buf, 1, 0);
	assert_string_equal(buf, "HTTP/1.1 100 Continue\r\n\r\n");
	send_str(fd, "hel");
	for (i = 0; i < 20; i++)
		pump();
	send_str(fd, "lo");
	client_read(fd, buf, sizeof buf, 1, 0);
	assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(buf, "\"body\":\"hello\""));
	close(fd);
}

static void
test_server_pipelined(void **state)
{
	char	 buf[8192], want[64], *second;
	int	 fd;

	fd = client_connect(plain_port);
	send_str(fd, "GET /one HTTP/1.1\r\n\r\nHEAD /two HTTP/1.1\r\n\r\n"
	    "GET /three HTTP/1.0\r\n\r\n");
	/* The last one is HTTP/1.0 without keep-alive: closed after it. */
	assert_true(client_read(fd, buf, sizeof buf, 0, 0));
	assert_non_null(second = strstr(buf, "\"path\":\"\\/one\""));
	/* The HEAD reply has the GET's Content-Length but no body. */
	snprintf(want, sizeof want, "Content-Length: %zu\r\n", strlen(
	    "{\"method\":\"HEAD\",\"path\":\"\\/two\",\"peer\":\"127.0.0.1\","
	    "\"tls\":0}"));
	assert_non_null(second = strstr(second, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(second, want));
	assert_non_null(second = strstr(second, "\r\n\r\nHTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(second, "\"path\":\"\\/three\""));
	assert_null(strstr(buf, "\"path\":\"\\/two\""));
	assert_non_null(strstr(second, "\r\nConnection: close\r\n"));
	close(fd);
}

static void
test_server_too_large(void **state)
{
	char	buf[8192];
	long	start;
	int	fd, i;

	/* Only the head is sent: the 413 must not wait for the body. */
	fd = client_connect(plain_port);
	start = ms_now();
	send_str(fd, "POST /big HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n");
	client_read(fd, buf, sizeof buf, 1, 0);
	assert_true(ms_now() - start < 1000);
	assert_non_null(strstr(buf, "HTTP/1.1 413 Content Too Large\r\n"));
	assert_non_null(strstr(buf, "\r\nConnection: close\r\n"));
	assert_non_null(strstr(buf, "{\"error\":{\"code\":\"too_large\","
	    "\"message\":\"request body larger than 16 bytes\"}}"));
	/*
	 * The server drains the body the client sends anyway, instead of
	 * resetting the connection (and the client's reading of the 413).
	 */
	memset(buf, 'x', sizeof buf);
	for (i = 0; i < 32; i++)
		client_send(fd, buf, sizeof buf);
	assert_true(client_eof(fd));
	close(fd);

	/* The limit itself is fine. */
	fd = client_connect(plain_port);
	send_str(fd, "POST / HTTP/1.1\r\nContent-Length: 16\r\n\r\n"
	    "0123456789abcdef");
	client_read(fd, buf, sizeof buf, 1, 0);
	assert_non_null(strstr(buf, "\"body\":\"0123456789abcdef\""));
	close(fd);
}

static void
test_server_garbage(void **state)
{
	static const struct {
		const char	*in;
		const char	*want;
	} cases[] = {
		{ "garbage\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n" },
		/* A TLS ClientHello: no line end ever comes. */
		{ "\x16\x03\x01\x02\x31\x01\x31\x01\xfc\x03\x03",
		    "HTTP/1.1 400 Bad Request\r\n" },
		{ "GET / HTTP/2.0\r\n\r\n", "HTTP/1.1 505 " },
		/* Honoured, the LF would make the second request a body. */
		{ "POST / HTTP/1.1\r\nX-A: a\nContent-Length: 24\r\n\r\n"
		    "GET /smuggled HTTP/1.1\r\n\r\n", "bare LF" },
		{ "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
		    "send Content-Length" },
	};
	char	buf[8192];
	size_t	i;
	int	fd;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		fd = client_connect(plain_port);
		send_str(fd, cases[i].in);
		client_read(fd, buf, sizeof buf, 1, 0);
		if (strstr(buf, cases[i].want) == NULL)
			fail_msg("case %zu: %s", i, buf);
		assert_non_null(strstr(buf, "\r\nConnection: close\r\n"));
		assert_non_null(strstr(buf, "{\"error\":{\"code\":\""));
		assert_true(client_eof(fd));
		close(fd);
	}

	/* A head that never ends is refused at HTTP_MAX_HEAD bytes. */
	fd = client_connect(plain_port);
	send_str(fd, "GET / HTTP/1.1\r\n");
	memset(buf, 'h', sizeof buf);
	buf[sizeof buf - 2] = '\r';
	buf[sizeof buf - 1] = '\n';
	client_send(fd, buf, sizeof buf);
	client_send(fd, buf, sizeof buf);
	client_read(fd, buf, sizeof buf, 1, 0);
	assert_non_null(strstr(buf, "HTTP/1.1 431 "));
	assert_non_null(strstr(buf, "\"too_large\""));
	close(fd);
}

static void
test_server_async(void **state)
{
	char	buf[8192];
	long	deadline;
	int	fd;

	/* The handler answers later; the connection waits for it. */
	held = NULL;
	fd = client_connect(plain_port);
	send_str(fd, "GET /hold HTTP/1.1\r\n\r\n");
	for (deadline = ms_now() + 3000; held == NULL && ms_now() < deadline;)
		pump();
	assert_non_null(held);
	assert_non_null(held->conn);
	http_reply(held, 204, NULL, NULL, 0, "X-Late: yes\r\n");
	client_read(fd, buf, sizeof buf, 1, 0);
	assert_non_null(strstr(buf, "HTTP/1.1 204 No Content\r\n"));
	assert_non_null(strstr(buf, "\r\nX-Late: yes\r\n\r\n"));
	assert_null(strstr(buf, "Content-Length"));
	close(fd);

	/* The client resets first: the request lives on, without conn. */
	held = NULL;
	fd = client_connect(plain_port);
	send_str(fd, "GET /hold HTTP/1.1\r\n\r\n");
	for (deadline = ms_now() + 3000; held == NULL && ms_now() < deadline;)
		pump();
	assert_non_null(held);
	client_reset(fd);
	for (deadline = ms_now() + 3000; held->conn != NULL &&
	    ms_now() < deadline;)
		pump();
	assert_null(held->conn);
	assert_string_equal(held->path, "/hold");
	http_reply_error(held, 500, "internal", "too late", NULL);
	held = NULL;
	pump();
}

static void
test_server_takeover(void **state)
{
	struct evbuffer	*in;
	char		 buf[64];
	long		 deadline;
	int		 fd;

	/* The caller owns the connection, and what followed the head. */
	taken = NULL;
	fd = client_connect(plain_port);
	send_str(fd, "GET /takeover HTTP/1.1\r\n\r\nextra");
	for (deadline = ms_now() + 3000; ms_now() < deadline &&
	    (taken == NULL || evbuffer_get_length(
	    bufferevent_get_input(taken)) < 5);)
		pump();
	assert_non_null(taken);
	in = bufferevent_get_input(taken);
	assert_int_equal(evbuffer_get_length(in), 5);
	assert_memory_equal(evbuffer_pullup(in, 5), "extra", 5);
	for (deadline = ms_now() + 1000; ms_now() < deadline;)
		pump();		/* not answered nor closed by the server */
	assert_int_equal(recv(fd, buf, sizeof buf, 0), 3);
	assert_memory_equal(buf, "RAW", 3);
	bufferevent_free(taken);
	http_released();
	taken = NULL;
	assert_true(client_eof(fd));
	close(fd);
}

static void
test_server_emfile(void **state)
{
	struct rlimit	 rl, low;
	char		 buf[8192];
	long		 start;
	int		 fd, next;

	/* Leave exactly one descriptor: the client's, none for accept(). */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	next = open("/dev/null", O_RDONLY);
	assert_true(next >= 0);
	close(next);
	low = rl;
	low.rlim_cur = next + 1;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	fd = client_connect(plain_port);
	start = ms_now();
	send_str(fd, "GET /late HTTP/1.1\r\n\r\n");
	pump();
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	/* The listener pauses for a second, then serves the connection. */
	client_read(fd, buf, sizeof buf, 1, 0);
	assert_true(ms_now() - start >= 900);
	assert_non_null(strstr(buf, "\"path\":\"\\/late\""));
	close(fd);
}

static void
test_server_half_close(void **state)
{
	char	buf[8192];
	long	deadline;
	int	fd, i;

	/*
	 * A client that shuts its side after its request still gets the
	 * answer, however late, then a close.
	 */
	held = NULL;
	fd = client_connect(plain_port);
	send_str(fd, "GET /hold HTTP/1.1\r\n\r\n");
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	for (deadline = ms_now() + 3000; held == NULL && ms_now() < deadline;)
		pump();
	assert_non_null(held);
	for (i = 0; i < 200; i++)
		pump();		/* the end of stream reaches the server */
	assert_non_null(held->conn);
	http_reply(held, 204, NULL, NULL, 0, NULL);
	held = NULL;
	assert_true(client_read(fd, buf, sizeof buf, 0, 0));
	assert_non_null(strstr(buf, "HTTP/1.1 204 No Content\r\n"));
	assert_non_null(strstr(buf, "\r\nConnection: close\r\n"));
	close(fd);

	/* Pipelined requests before the shutdown: each is answered. */
	fd = client_connect(plain_port);
	send_str(fd, "GET /one HTTP/1.1\r\n\r\nGET /two HTTP/1.1\r\n\r\n");
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	assert_true(client_read(fd, buf, sizeof buf, 0, 0));
	assert_int_equal(count_responses(buf, strlen(buf), 0), 2);
	assert_non_null(strstr(buf, "\"path\":\"\\/two\""));
	close(fd);

	/* A body cut short can never be a request: closed unanswered. */
	fd = client_connect(plain_port);
	send_str(fd, "POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc");
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	assert_true(client_read(fd, buf, sizeof buf, 0, 0));
	assert_string_equal(buf, "");
	close(fd);
}

/* Pump until the server has seen what was sent and connected. */
static void
pump_some(void)
{
	int	i;

	for (i = 0; i < 20; i++)
		pump();
}

/* Check a 503 refusal at a limit: Retry-After, close, a JSON error. */
static void
assert_refused(int fd)
{
	char	buf[8192];

	assert_true(client_read(fd, buf, sizeof buf, 0, 0));
	if (strstr(buf, "HTTP/1.1 503 Service Unavailable\r\n") == NULL)
		fail_msg("not a 503: %s", buf);
	assert_non_null(strstr(buf, "\r\nRetry-After: 5\r\n"));
	assert_non_null(strstr(buf, "\r\nConnection: close\r\n"));
	assert_non_null(strstr(buf, "{\"error\":{\"code\":\"unavailable\","
	    "\"message\":\"too many connections"));
}

/* Whether a request on fd is answered 200, the connection kept. */
static void
assert_serves(int fd)
{
	char	buf[8192];

	send_str(fd, "GET /ok HTTP/1.1\r\n\r\n");
	client_read(fd, buf, sizeof buf, 1, 0);
	if (strstr(buf, "HTTP/1.1 200 OK\r\n") == NULL)
		fail_msg("not served: %s", buf);
}

static void
test_limits_per_address(void **state)
{
	char	buf[8192];
	int	a[LIM_PER_ADDR], extra, other, i;

	/* At the limit, the oldest idle connection of the address goes. */
	for (i = 0; i < LIM_PER_ADDR; i++) {
		a[i] = client_connect_from(lim_port, "127.0.0.2");
		pump_some();
	}
	extra = client_connect_from(lim_port, "127.0.0.2");
	pump_some();
	assert_true(client_eof(a[0]));
	assert_serves(extra);
	for (i = 1; i < LIM_PER_ADDR; i++)
		assert_serves(a[i]);
	close(a[0]);
	close(extra);

	/* With none idle (each in the middle of a head): 503. */
	a[0] = client_connect_from(lim_port, "127.0.0.2");
	pump_some();
	for (i = 0; i < LIM_PER_ADDR; i++)
		send_str(a[i], "GET /slow HTTP/1.1\r\n");
	pump_some();
	extra = client_connect_from(lim_port, "127.0.0.2");
	assert_refused(extra);
	close(extra);
	/* Another address is not affected. */
	other = client_connect_from(lim_port, "127.0.0.3");
	assert_serves(other);
	close(other);
	/* The heads held still complete. */
	send_str(a[0], "\r\n");
	client_read(a[0], buf, sizeof buf, 1, 0);
	assert_non_null(strstr(buf, "\"path\":\"\\/slow\""));
	for (i = 0; i < LIM_PER_ADDR; i++)
		close(a[i]);
	pump_some();
}

/*
 * A trusted proxy's connections are many clients': no per-address limit
 * (the global one holds), and its X-Forwarded-For names the client; an
 * untrusted peer's header is ignored.
 */
static void
test_limits_trusted_proxy(void **state)
{
	char	buf[8192];
	int	a[LIM_PER_ADDR + 1], other, i;

	for (i = 0; i < LIM_PER_ADDR + 1; i++) {
		a[i] = client_connect_from(lim_port, "127.0.0.9");
		pump_some();
		send_str(a[i], "GET /busy HTTP/1.1\r\n");
		pump_some();
	}
	for (i = 0; i < LIM_PER_ADDR + 1; i++) {
		send_str(a[i], "X-Forwarded-For: 1.1.1.1, 192.0.2.44\r\n\r\n");
		client_read(a[i], buf, sizeof buf, 1, 0);
		assert_non_null(strstr(buf, "\"peer\":\"192.0.2.44\""));
		close(a[i]);
	}
	other = client_connect_from(lim_port, "127.0.0.8");
	send_str(other, "GET / HTTP/1.1\r\nX-Forwarded-For: 192.0.2.44\r\n"
	    "\r\n");
	client_read(other, buf, sizeof buf, 1, 0);
	assert_non_null(strstr(buf, "\"peer\":\"127.0.0.8\""));
	close(other);
	pump_some();
}

static void
test_limits_unread_request_not_shed(void **state)
{
	char	buf[8192];
	int	a[LIM_PER_ADDR], extra, i;

	/*
	 * Idle connections whose request has come but is not read yet (the
	 * new connection is accepted first) are not idle: none is shed.
	 */
	for (i = 0; i < LIM_PER_ADDR; i++) {
		a[i] = client_connect_from(lim_port, "127.0.0.20");
		pump_some();
	}
	extra = client_connect_from(lim_port, "127.0.0.20");
	for (i = 0; i < LIM_PER_ADDR; i++)
		send_str(a[i], "GET /late HTTP/1.1\r\n\r\n");
	assert_refused(extra);
	close(extra);
	for (i = 0; i < LIM_PER_ADDR; i++) {
		client_read(a[i], buf, sizeof buf, 1, 0);
		assert_non_null(strstr(buf, "\"path\":\"\\/late\""));
		close(a[i]);
	}
	pump_some();
}

static void
test_limits_global(void **state)
{
	static const char *const from[LIM_CONNS] = {
		"127.0.0.4", "127.0.0.4", "127.0.0.5", "127.0.0.5",
		"127.0.0.6", "127.0.0.6", "127.0.0.7", "127.0.0.7",
	};
	int	c[LIM_CONNS], extra, more, i;

	/* All busy but the last two: the older of those is shed. */
	for (i = 0; i < LIM_CONNS; i++) {
		c[i] = client_connect_from(lim_port, from[i]);
		pump_some();
		if (i < LIM_CONNS - 2)
			send_str(c[i], "GET /slow HTTP/1.1\r\n");
	}
	pump_some();
	extra = client_connect_from(lim_port, "127.0.0.8");
	pump_some();
	assert_true(client_eof(c[LIM_CONNS - 2]));
	close(c[LIM_CONNS - 2]);
	c[LIM_CONNS - 2] = extra;
	assert_serves(extra);

	/* None idle: the next one, from anywhere, is answered 503. */
	send_str(extra, "GET /slow HTTP/1.1\r\n");
	send_str(c[LIM_CONNS - 1], "GET /slow HTTP/1.1\r\n");
	pump_some();
	more = client_connect_from(lim_port, "127.0.0.9");
	assert_refused(more);
	close(more);
	for (i = 0; i < LIM_CONNS; i++)
		close(c[i]);
	pump_some();
	/* Room again. */
	more = client_connect_from(lim_port, "127.0.0.9");
	assert_serves(more);
	close(more);
	pump_some();
}

static void
test_addr_key(void **state)
{
	struct sockaddr_in	sin;
	struct sockaddr_in6	sin6;
	char			key[64];

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	http_addr_key((struct sockaddr *)&sin, "192.0.2.7", key, sizeof key);
	assert_string_equal(key, "192.0.2.7");

	/* Every address of an IPv6 /64 counts as one client. */
	memset(&sin6, 0, sizeof sin6);
	sin6.sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "2001:db8:1:2:aaaa:bbbb:cccc:dddd",
	    &sin6.sin6_addr), 1);
	http_addr_key((struct sockaddr *)&sin6, "2001:db8:1:2:aaaa:bbbb:cccc:dddd",
	    key, sizeof key);
	assert_string_equal(key, "2001:db8:1:2::/64");

	/* An IPv4-mapped one is its IPv4 address. */
	assert_int_equal(inet_pton(AF_INET6, "::ffff:192.0.2.7",
	    &sin6.sin6_addr), 1);
	http_addr_key((struct sockaddr *)&sin6, "192.0.2.7", key, sizeof key);
	assert_string_equal(key, "192.0.2.7");
}

static void
test_limits_takeover_counts(void **state)
{
	long	deadline;
	int	c[LIM_CONNS], more, i;

	/* A connection taken over still holds its place in the limit. */
	taken = NULL;
	c[0] = client_connect_from(lim_port, "127.0.0.11");
	send_str(c[0], "GET /takeover HTTP/1.1\r\n\r\n");
	for (deadline = ms_now() + 3000; taken == NULL && ms_now() < deadline;)
		pump();
	assert_non_null(taken);
	for (i = 1; i < LIM_CONNS; i++) {
		c[i] = client_connect_from(lim_port, i < 4 ? "127.0.0.12" :
		    i < 7 ? "127.0.0.13" : "127.0.0.19");
		pump_some();
		send_str(c[i], "GET /slow HTTP/1.1\r\n");
	}
	pump_some();
	more = client_connect_from(lim_port, "127.0.0.14");
	assert_refused(more);
	close(more);

	/* Released, it leaves room. */
	bufferevent_free(taken);
	http_released();
	taken = NULL;
	more = client_connect_from(lim_port, "127.0.0.14");
	assert_serves(more);
	close(more);
	for (i = 0; i < LIM_CONNS; i++)
		close(c[i]);
	pump_some();
}

static void
test_limits_refusing_pauses(void **state)
{
	char	buf[8192];
	int	c[LIM_CONNS], r[64], more, i;
	ssize_t	n;

	/*
	 * 64 answered 503 and lingering at once: accepting stops (the kernel's
	 * backlog holds the next one) until one of them is done.
	 */
	for (i = 0; i < LIM_CONNS; i++) {
		c[i] = client_connect_from(lim_port, i < 3 ? "127.0.0.15" :
		    i < 6 ? "127.0.0.16" : "127.0.0.17");
		pump_some();
		send_str(c[i], "GET /slow HTTP/1.1\r\n");
	}
	pump_some();
	for (i = 0; i < 64; i++) {
		r[i] = client_connect_from(lim_port, "127.0.0.18");
		pump_some();
	}
	more = client_connect_from(lim_port, "127.0.0.18");
	pump_some();
	n = recv(more, buf, sizeof buf, 0);
	assert_true(n == -1 && errno == EAGAIN);
	for (i = 0; i < 64; i++)
		assert_refused(r[i]);
	close(r[0]);
	assert_refused(more);
	close(more);
	for (i = 1; i < 64; i++)
		close(r[i]);
	for (i = 0; i < LIM_CONNS; i++)
		close(c[i]);
	pump_some();
}

static void
test_header_timeout(void **state)
{
	char	buf[8192];
	int	fd;

	/* A head still incomplete after 1 s: 408, then the close. */
	fd = client_connect_from(lim_port, "127.0.0.10");
	send_str(fd, "GET / HTTP/1.1\r\nHost: x\r\n");
	assert_true(client_read(fd, buf, sizeof buf, 0, 0));
	assert_non_null(strstr(buf, "HTTP/1.1 408 Request Timeout\r\n"));
	assert_non_null(strstr(buf, "\r\nConnection: close\r\n"));
	assert_non_null(strstr(buf, "{\"error\":{\"code\":\"timeout\","
	    "\"message\":\"no complete request head within 1 s\"}}"));
	close(fd);

	/* Nothing sent at all: the same. */
	fd = client_connect_from(lim_port, "127.0.0.10");
	assert_true(client_read(fd, buf, sizeof buf, 0, 0));
	assert_non_null(strstr(buf, "HTTP/1.1 408 Request Timeout\r\n"));
	close(fd);

	/* After a keep-alive reply, the next head has its own second. */
	fd = client_connect_from(lim_port, "127.0.0.10");
	assert_serves(fd);
	send_str(fd, "GET /next HTTP/1.1\r\n");
	assert_true(client_read(fd, buf, sizeof buf, 0, 0));
	assert_non_null(strstr(buf, "HTTP/1.1 408 Request Timeout\r\n"));
	close(fd);
}

/* Write a new self-signed certificate or key as PEM; the key is kept. */
static EVP_PKEY *
write_cert(const char *cert, const char *key)
{
	EVP_PKEY	*pkey;
	X509		*x;
	X509_NAME	*name;
	FILE		*fp;

	assert_non_null(pkey = EVP_EC_gen("P-256"));
	assert_non_null(x = X509_new());
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, pkey);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)"localhost", -1, -1, 0);
	X509_set_issuer_name(x, name);
	assert_true(X509_sign(x, pkey, EVP_sha256()) > 0);
	if (cert != NULL) {
		assert_non_null(fp = fopen(cert, "w"));
		PEM_write_X509(fp, x);
		fclose(fp);
	}
	assert_non_null(fp = fopen(key, "w"));
	PEM_write_PrivateKey(fp, pkey, NULL, NULL, 0, NULL, NULL);
	fclose(fp);
	X509_free(x);
	return (pkey);
}

static void
test_tls_ctx_errors(void **state)
{
	char	 err[512], path[PATH_MAX];
	SSL_CTX	*ctx;
	FILE	*fp;

	ctx = tls_ctx_new("/nonexistent/cert.pem", key_path, err, sizeof err);
	assert_null(ctx);
	assert_non_null(strstr(err, "certificate chain /nonexistent/cert.pem"));
	assert_non_null(strstr(err, "No such file"));

	ctx = tls_ctx_new(cert_path, "/nonexistent/key.pem", err, sizeof err);
	assert_null(ctx);
	assert_non_null(strstr(err, "private key /nonexistent/key.pem"));

	ctx = tls_ctx_new(cert_path, key2_path, err, sizeof err);
	assert_null(ctx);
	assert_non_null(strstr(err, "does not match certificate"));
	assert_non_null(strstr(err, key2_path));

	snprintf(path, sizeof path, "%s/junk.pem", tmpdir);
	assert_non_null(fp = fopen(path, "w"));
	fputs("not a certificate\n", fp);
	fclose(fp);
	ctx = tls_ctx_new(path, key_path, err, sizeof err);
	assert_null(ctx);
	assert_non_null(strstr(err, path));
	unlink(path);

	ctx = tls_ctx_new(cert_path, key_path, err, sizeof err);
	assert_non_null(ctx);
	assert_int_equal(SSL_CTX_get_min_proto_version(ctx), TLS1_2_VERSION);
	assert_true(SSL_CTX_get_options(ctx) & SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_free(ctx);
}

/* Run one SSL call on a non-blocking socket to completion. */
static int
tls_retry(SSL *ssl, int (*fn)(SSL *, void *, int), void *buf, int len)
{
	long	deadline = ms_now() + 3000;
	int	r, e;

	while (ms_now() < deadline) {
		if ((r = fn(ssl, buf, len)) > 0)
			return (r);
		e = SSL_get_error(ssl, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			return (r);
		pump();
	}
	return (-1);
}

static int
tls_connect(SSL *ssl, void *buf, int len)
{
	return (SSL_connect(ssl));
}

static int
tls_write(SSL *ssl, void *buf, int len)
{
	return (SSL_write(ssl, buf, len));
}

static int
tls_read(SSL *ssl, void *buf, int len)
{
	return (SSL_read(ssl, buf, len));
}

static void
test_server_tls(void **state)
{
	SSL_CTX		*cctx;
	SSL		*ssl;
	char		 req[] = "GET /secure HTTP/1.1\r\n\r\n";
	char		 buf[8192];
	size_t		 len = 0;
	int		 fd, n;

	assert_non_null(cctx = SSL_CTX_new(TLS_client_method()));
	/* The server must refuse anything older than TLS 1.2. */
	SSL_CTX_set_security_level(cctx, 0);
	SSL_CTX_set_cipher_list(cctx, "DEFAULT:@SECLEVEL=0");
	SSL_CTX_set_max_proto_version(cctx, TLS1_1_VERSION);
	fd = client_connect(tls_port);
	assert_non_null(ssl = SSL_new(cctx));
	SSL_set_fd(ssl, fd);
	assert_true(tls_retry(ssl, tls_connect, NULL, 0) <= 0);
	assert_int_equal(ERR_GET_REASON(ERR_peek_error()),
	    SSL_R_TLSV1_ALERT_PROTOCOL_VERSION);
	SSL_free(ssl);
	close(fd);
	ERR_clear_error();

	SSL_CTX_set_max_proto_version(cctx, 0);
	fd = client_connect(tls_port);
	assert_non_null(ssl = SSL_new(cctx));
	SSL_set_fd(ssl, fd);
	assert_int_equal(tls_retry(ssl, tls_connect, NULL, 0), 1);
	assert_int_equal(tls_retry(ssl, tls_write, req, sizeof req - 1),
	    (int)sizeof req - 1);
	while (count_responses(buf, len, 0) < 1) {
		n = tls_retry(ssl, tls_read, buf + len, sizeof buf - 1 - len);
		assert_true(n > 0);
		len += n;
		buf[len] = '\0';
	}
	assert_non_null(strstr(buf, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(buf, "\"path\":\"\\/secure\""));
	assert_non_null(strstr(buf, "\"tls\":1"));
	SSL_free(ssl);
	SSL_CTX_free(cctx);
	close(fd);
}

/* Set up the event base, the certificates and the three servers. */
static int
setup_servers(void **state)
{
	struct http_limits	 limits = { 1024, 1024, 10 };
	struct http_limits	 small = { LIM_CONNS, LIM_PER_ADDR, 1 };
	struct http_server	*server;
	struct egress_nets	 trusted;
	char		 err[512];
	SSL_CTX		*ctx;
	EVP_PKEY	*k;
	int		 fd;

	log_init("test_http", 1);
	if (getenv("HG_TEST_DEBUG") != NULL)
		log_setlevel(LOG_LVL_DEBUG);
	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(tmpdir) == NULL)
		return (-1);
	snprintf(cert_path, sizeof cert_path, "%s/cert.pem", tmpdir);
	snprintf(key_path, sizeof key_path, "%s/key.pem", tmpdir);
	snprintf(key2_path, sizeof key2_path, "%s/key2.pem", tmpdir);
	EVP_PKEY_free(write_cert(cert_path, key_path));
	k = write_cert(NULL, key2_path);
	EVP_PKEY_free(k);

	if ((base = event_base_new()) == NULL)
		return (-1);
	fd = listen_loopback(&plain_port);
	if ((server = http_server_new(base, fd, NULL, MAX_BODY, handler,
	    NULL)) == NULL)
		return (-1);
	http_server_set_limits(server, &limits);
	fd = listen_loopback(&lim_port);
	if ((server = http_server_new(base, fd, NULL, MAX_BODY, handler,
	    NULL)) == NULL)
		return (-1);
	http_server_set_limits(server, &small);
	/* 127.0.0.9 is a trusted proxy of this one. */
	if (egress_nets_parse("127.0.0.9/32", &trusted, err, sizeof err) == -1)
		return (-1);
	http_server_set_trusted(server, &trusted);
	if ((ctx = tls_ctx_new(cert_path, key_path, err, sizeof err)) == NULL) {
		fprintf(stderr, "%s\n", err);
		return (-1);
	}
	fd = listen_loopback(&tls_port);
	if ((server = http_server_new(base, fd, ctx, MAX_BODY, handler,
	    NULL)) == NULL)
		return (-1);
	http_server_set_limits(server, &limits);
	return (0);
}

/* Remove the certificates. */
static int
teardown_servers(void **state)
{
	unlink(cert_path);
	unlink(key_path);
	unlink(key2_path);
	rmdir(tmpdir);
	return (0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_get_query),
		cmocka_unit_test(test_parse_post_length),
		cmocka_unit_test(test_parse_bare_lf_cr),
		cmocka_unit_test(test_parse_many_headers),
		cmocka_unit_test(test_parse_bad),
		cmocka_unit_test(test_parse_nul),
		cmocka_unit_test(test_parse_sizes),
		cmocka_unit_test(test_parse_incremental),
		cmocka_unit_test(test_cookie),
		cmocka_unit_test(test_status_text),
		cmocka_unit_test(test_forwarded_for),
		cmocka_unit_test(test_base_url),
		cmocka_unit_test(test_server_get),
		cmocka_unit_test(test_server_body_pieces),
		cmocka_unit_test(test_server_pipelined),
		cmocka_unit_test(test_server_too_large),
		cmocka_unit_test(test_server_garbage),
		cmocka_unit_test(test_server_async),
		cmocka_unit_test(test_server_takeover),
		cmocka_unit_test(test_server_emfile),
		cmocka_unit_test(test_server_half_close),
		cmocka_unit_test(test_limits_per_address),
		cmocka_unit_test(test_limits_trusted_proxy),
		cmocka_unit_test(test_limits_unread_request_not_shed),
		cmocka_unit_test(test_limits_global),
		cmocka_unit_test(test_addr_key),
		cmocka_unit_test(test_limits_takeover_counts),
		cmocka_unit_test(test_limits_refusing_pauses),
		cmocka_unit_test(test_header_timeout),
		cmocka_unit_test(test_tls_ctx_errors),
		cmocka_unit_test(test_server_tls),
	};

	return (cmocka_run_group_tests(tests, setup_servers, teardown_servers));
}
