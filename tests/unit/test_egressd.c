/*
 * Unit tests for egressd's parsers: the proxy request head, the head
 * forwarded upstream and the response head sent back, the refusal texts,
 * the hosts file, and the IP-literal test egressd applies (egress.c).
 */
#include <sys/types.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../egressd/egressd.h"

static struct egress_req	req;
static char			err[256];

/* Parse a NUL-terminated head. */
static int
parse(const char *head)
{
	return request_parse(head, strlen(head), &req, err, sizeof(err));
}

static void
test_head_len(void **state)
{
	const char	*h = "CONNECT a.test:443 HTTP/1.1\r\nHost: a\r\n\r\nrest";

	assert_int_equal(request_head_len(h, strlen(h)), strlen(h) - 4);
	assert_int_equal(request_head_len(h, 20), 0);
	assert_int_equal(request_head_len("GET x\n\n", 7), 7);
	assert_int_equal(request_head_len("GET x\r\n", 7), 0);
	assert_int_equal(request_head_len("", 0), 0);
}

static void
test_parse_connect(void **state)
{
	assert_int_equal(parse("CONNECT Pypi.ORG:443 HTTP/1.1\r\n"
	    "Host: pypi.org:443\r\nUser-Agent: curl/8\r\n"
	    "Proxy-Connection: Keep-Alive\r\n\r\n"), 0);
	assert_true(req.connect);
	assert_string_equal(req.host, "pypi.org");
	assert_int_equal(req.port, 443);
	assert_int_equal(req.minor, 1);
	assert_int_equal(req.nhdrs, 3);
	assert_int_equal(req.hdrs[1].valuelen, 6);
	assert_memory_equal(req.hdrs[1].value, "curl/8", 6);
	/* A trailing dot names the same host; bare LF lines do too. */
	assert_int_equal(parse("CONNECT example.com.:8443 HTTP/1.0\n\n"), 0);
	assert_string_equal(req.host, "example.com");
	assert_int_equal(req.port, 8443);
	assert_int_equal(req.minor, 0);
	/* IPv6 literals keep their brackets (refused later as literals). */
	assert_int_equal(parse("CONNECT [::1]:443 HTTP/1.1\r\n\r\n"), 0);
	assert_string_equal(req.host, "[::1]");
	assert_int_equal(parse("CONNECT ::1:443 HTTP/1.1\r\n\r\n"), 0);
	assert_string_equal(req.host, "::1");
}

static void
test_parse_absolute(void **state)
{
	assert_int_equal(parse("POST http://Files.Example:8080/a/b?c=d#frag "
	    "HTTP/1.1\r\nHost: other\r\nContent-Length: 3\r\n\r\n"), 0);
	assert_false(req.connect);
	assert_string_equal(req.method, "POST");
	assert_string_equal(req.host, "files.example");
	assert_int_equal(req.port, 8080);
	assert_int_equal(req.pathlen, strlen("/a/b?c=d#frag"));
	assert_int_equal(parse("GET http://deb.test HTTP/1.1\r\n\r\n"), 0);
	assert_int_equal(req.port, 80);
	assert_int_equal(req.pathlen, 0);
	assert_int_equal(parse("GET HTTP://deb.test?x HTTP/1.1\r\n\r\n"), 0);
	assert_int_equal(req.pathlen, 2);
}

static void
test_parse_refused(void **state)
{
	static const struct {
		const char	*head;
		const char	*why;
	} bad[] = {
		{ "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", "not a proxy" },
		{ "OPTIONS * HTTP/1.1\r\n\r\n", "not a proxy" },
		{ "GET https://a.test/ HTTP/1.1\r\n\r\n", "use CONNECT" },
		{ "GET ftp://a.test/ HTTP/1.1\r\n\r\n", "not an http://" },
		{ "CONNECT a.test HTTP/1.1\r\n\r\n", "no port" },
		{ "CONNECT a.test:0 HTTP/1.1\r\n\r\n", "bad port" },
		{ "CONNECT a.test:65536 HTTP/1.1\r\n\r\n", "bad port" },
		{ "CONNECT a.test:+443 HTTP/1.1\r\n\r\n", "bad port" },
		{ "CONNECT a.test:443 HTTP/2.0\r\n\r\n", "HTTP/1.x" },
		{ "CONNECT a.test:443\r\n\r\n", "HTTP/1.x" },
		{ "CONNECT  a.test:443 HTTP/1.1\r\n\r\n", "HTTP/1.x" },
		{ "CONNECT :443 HTTP/1.1\r\n\r\n", "bad host length" },
		{ "GET http:///x HTTP/1.1\r\n\r\n", "no host" },
		{ "GET http://u:p@a.test/ HTTP/1.1\r\n\r\n", "credentials" },
		{ "GET http://a_b%41.test/ HTTP/1.1\r\n\r\n", "bad character" },
		{ "CONNECT [::1:443 HTTP/1.1\r\n\r\n", "unterminated" },
		{ "CONNECT [::1]x:443 HTTP/1.1\r\n\r\n", "bad authority" },
		{ "GE(T http://a.test/ HTTP/1.1\r\n\r\n", "bad method" },
		{ "CONNECT a.test:443 HTTP/1.1\r\n folded\r\n\r\n", "folded" },
		{ "CONNECT a.test:443 HTTP/1.1\r\nNoColon\r\n\r\n", "bad header" },
		{ "CONNECT a.test:443 HTTP/1.1\r\nA B: c\r\n\r\n", "bad header" },
		{ "CONNECT a.test:443 HTTP/1.1\r\nA: b\x01\r\n\r\n",
		    "bad character" },
		{ "CONNECT a.test:443 HTTP/1.1\r\n", "incomplete" },
		{ "CONNECT a.test:443 HTTP/1.1\r\n\r\nmore", "after the" },
	};
	size_t	i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (parse(bad[i].head) != -1)
			fail_msg("parsed: %s", bad[i].head);
		if (strstr(err, bad[i].why) == NULL)
			fail_msg("%s: \"%s\", want \"%s\"", bad[i].head, err,
			    bad[i].why);
	}
	/* A NUL inside, too many headers, too long a head. */
	assert_int_equal(request_parse("CONNECT a:1 HTTP/1.1\r\n\0\r\n\r\n",
	    26, &req, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "NUL"));
}

static void
test_parse_limits(void **state)
{
	char	*h;
	size_t	 n = 0;
	int	 i;

	h = malloc(EGRESS_HEAD_MAX + 64);
	assert_non_null(h);
	n = snprintf(h, 64, "CONNECT a.test:443 HTTP/1.1\r\n");
	for (i = 0; i < EGRESS_HEADERS_MAX + 1; i++)
		n += snprintf(h + n, 16, "X: %d\r\n", i % 10);
	n += snprintf(h + n, 4, "\r\n");
	assert_int_equal(request_parse(h, n, &req, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too many headers"));
	memset(h, 'a', EGRESS_HEAD_MAX + 1);
	assert_int_equal(request_parse(h, EGRESS_HEAD_MAX + 1, &req, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "too large"));
	free(h);
}

static void
test_forward(void **state)
{
	char	*out;
	size_t	 len;

	assert_int_equal(parse("GET http://a.test:8080/x?y HTTP/1.1\r\n"
	    "Host: evil.test\r\nProxy-Authorization: Basic eA==\r\n"
	    "Proxy-Connection: keep-alive\r\nConnection: keep-alive, TE\r\n"
	    "Keep-Alive: 300\r\nTE: trailers\r\nUpgrade: h2c\r\n"
	    "Accept: */*\r\nContent-Length: 0\r\n\r\n"), 0);
	out = request_forward(&req, &len);
	assert_non_null(out);
	assert_int_equal(len, strlen(out));
	assert_string_equal(out, "GET /x?y HTTP/1.1\r\nHost: a.test:8080\r\n"
	    "Accept: */*\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
	free(out);
	/* No path: "/"; a query alone: "/?q"; port 80 not shown. */
	assert_int_equal(parse("HEAD http://a.test HTTP/1.0\r\n\r\n"), 0);
	out = request_forward(&req, &len);
	assert_string_equal(out, "HEAD / HTTP/1.0\r\nHost: a.test\r\n"
	    "Connection: close\r\n\r\n");
	free(out);
	assert_int_equal(parse("GET http://a.test?q HTTP/1.1\r\n\r\n"), 0);
	out = request_forward(&req, &len);
	assert_non_null(strstr(out, "GET /?q HTTP/1.1\r\n"));
	free(out);
}

static void
test_response_rewrite(void **state)
{
	const char	*h = "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n"
	    "Keep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n";
	char		*out;
	size_t		 len;
	int		 interim;

	out = response_rewrite(h, strlen(h), &len, &interim);
	assert_non_null(out);
	assert_false(interim);
	assert_int_equal(len, strlen("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
	    "Connection: close\r\n\r\n"));
	assert_memory_equal(out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
	    "Connection: close\r\n\r\n", len);
	free(out);
	h = "HTTP/1.1 100 Continue\r\n\r\n";
	out = response_rewrite(h, strlen(h), &len, &interim);
	assert_true(interim);
	assert_int_equal(len, strlen(h));
	free(out);
	/* Bare LF lines come out as CR LF, twice the size at most. */
	h = "HTTP/1.0 404 x\n\n";
	out = response_rewrite(h, strlen(h), &len, &interim);
	assert_memory_equal(out, "HTTP/1.0 404 x\r\nConnection: close\r\n\r\n",
	    len);
	free(out);
	assert_null(response_rewrite("SSH-2.0\r\n\r\n", 11, &len, &interim));
	assert_null(response_rewrite("HTTP/1.1 2x0\r\n\r\n", 16, &len,
	    &interim));
}

static void
test_refusal_texts(void **state)
{
	struct refusal_ctx	 c;
	char			 buf[512], *resp;
	size_t			 len;

	memset(&c, 0, sizeof(c));
	c.host = "evil.test";
	c.port = 22;
	c.ports = "443, 80";
	assert_string_equal(refusal_text(REF_ALLOWLIST, &c, buf, sizeof(buf)),
	    "Egress refused: evil.test is not on this sandbox's allowlist; an "
	    "admin can allow it (hostgate panel or hgctl egress allow)");
	assert_string_equal(refusal_text(REF_DENYLIST, &c, buf, sizeof(buf)),
	    "Egress refused: evil.test is on the denylist");
	assert_string_equal(refusal_text(REF_PORT, &c, buf, sizeof(buf)),
	    "Egress refused: port 22 is not allowed (allowed: 443, 80)");
	c.host = "2130706433";
	assert_string_equal(refusal_text(REF_LITERAL, &c, buf, sizeof(buf)),
	    "Egress refused: 2130706433 is an IP literal (use a name)");
	c.host = "rebind.test";
	c.addr = "127.0.0.1";
	c.cidr = "127.0.0.0/8";
	assert_string_equal(refusal_text(REF_DENY_NET, &c, buf, sizeof(buf)),
	    "Egress refused: rebind.test resolves to 127.0.0.1 inside a denied "
	    "network (127.0.0.0/8)");
	assert_string_equal(refusal_reason(REF_DENY_NET, &c, buf, sizeof(buf)),
	    "denied network 127.0.0.0/8");
	assert_string_equal(refusal_text(REF_TIMEOUT, &c, buf, sizeof(buf)),
	    "Egress failed: connecting to rebind.test (127.0.0.1) timed out");
	assert_int_equal(refusal_status(REF_ALLOWLIST), 403);
	assert_int_equal(refusal_status(REF_DENY_NET), 403);
	assert_int_equal(refusal_status(REF_RESOLVE), 502);
	assert_int_equal(refusal_status(REF_CONNECT), 502);
	assert_int_equal(refusal_status(REF_TIMEOUT), 504);
	assert_int_equal(refusal_status(REF_BUSY), 503);
	assert_int_equal(refusal_status(REF_BAD_REQUEST), 400);

	c.host = "evil.test";
	resp = refusal_response(REF_DENYLIST, &c, &len);
	assert_non_null(resp);
	assert_int_equal(len, strlen(resp));
	assert_string_equal(resp, "HTTP/1.1 403 Egress refused: evil.test is "
	    "on the denylist\r\nContent-Type: text/plain; charset=utf-8\r\n"
	    "Content-Length: 45\r\nConnection: close\r\n"
	    "X-Hostgate-Egress: refused; host=evil.test\r\n\r\n"
	    "Egress refused: evil.test is on the denylist\n");
	free(resp);
	c.host = NULL;
	c.detail = "not a proxy request";
	resp = refusal_response(REF_BAD_REQUEST, &c, &len);
	assert_non_null(strstr(resp, "HTTP/1.1 400 Egress refused: bad "
	    "request: not a proxy request\r\n"));
	assert_non_null(strstr(resp, "X-Hostgate-Egress: refused; host=-\r\n"));
	free(resp);
}

static void
test_hosts_parse(void **state)
{
	struct hosts		 h;
	struct sockaddr_storage	 ss[4];
	socklen_t		 lens[4];
	struct sockaddr_in	*sin = (struct sockaddr_in *)&ss[0];
	char			 buf[64];

	assert_int_equal(hosts_parse("# pinned\n\n10.0.0.5  Mirror.Test  "
	    "pypi.test # the index\n\t2001:db8::5\tmirror.test\r\n"
	    "192.0.2.1 end.test.", &h, err, sizeof(err)), 0);
	assert_int_equal(h.n, 4);
	assert_int_equal(hosts_lookup(&h, "mirror.test", ss, lens, 4), 2);
	assert_int_equal(ss[0].ss_family, AF_INET);
	assert_int_equal(lens[0], sizeof(struct sockaddr_in));
	inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
	assert_string_equal(buf, "10.0.0.5");
	assert_int_equal(ss[1].ss_family, AF_INET6);
	assert_int_equal(hosts_lookup(&h, "mirror.test", ss, lens, 1), 1);
	assert_int_equal(hosts_lookup(&h, "end.test", ss, lens, 4), 1);
	assert_int_equal(hosts_lookup(&h, "other.test", ss, lens, 4), 0);
	hosts_free(&h);
	assert_int_equal(hosts_parse("", &h, err, sizeof(err)), 0);
	assert_int_equal(h.n, 0);
	hosts_free(&h);
}

static void
test_hosts_errors(void **state)
{
	static const struct {
		const char	*text;
		const char	*why;
	} bad[] = {
		{ "10.0.0.1 a.test\nmirror.test 10.0.0.1\n",
		    "line 2: mirror.test is not a numeric" },
		{ "10.0.0.1\n", "line 1: an address without a name" },
		{ "10.0.0.1 a_b.test\n", "line 1: a_b.test is not a host name" },
		{ "10.0.0.1 10.0.0.2\n", "line 1: 10.0.0.2 is not a host name" },
		{ "# x\n\n300.1.1.1 a.test\n", "line 3: 300.1.1.1 is not a" },
		{ "fe80::1%eth0 a.test\n", "line 1: fe80::1%eth0 is not a" },
	};
	struct hosts	h;
	size_t		i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (hosts_parse(bad[i].text, &h, err, sizeof(err)) != -1)
			fail_msg("parsed: %s", bad[i].text);
		if (strstr(err, bad[i].why) == NULL)
			fail_msg("\"%s\", want \"%s\"", err, bad[i].why);
		assert_null(h.v);
	}
	assert_int_equal(hosts_load("/nonexistent/hosts", &h, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "HOSTGATE_EGRESS_HOSTS=/nonexistent/hosts: "
	    "No such file"));
}

/* The literal test egressd applies to a request's host (common/egress.c). */
static void
test_ip_literals(void **state)
{
	static const char *const lit[] = {
		"127.0.0.1", "2130706433", "0x7f.1", "0x7f000001",
		"0177.0.0.1", "127.1", "1.2.3.4.5", "[::1]", "::1",
		"[::ffff:127.0.0.1]", "10.0.0.1.", "a.b.0x10", "a.123",
	};
	static const char *const names[] = {
		"pypi.org", "1e100.net", "cafe.be", "0x.test", "123.example",
		"deadbeef.com", "x1.2a",
	};
	size_t	i;

	for (i = 0; i < sizeof(lit) / sizeof(lit[0]); i++)
		if (!egress_host_is_literal(lit[i]))
			fail_msg("not taken for a literal: %s", lit[i]);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (egress_host_is_literal(names[i]))
			fail_msg("taken for a literal: %s", names[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_len),
		cmocka_unit_test(test_parse_connect),
		cmocka_unit_test(test_parse_absolute),
		cmocka_unit_test(test_parse_refused),
		cmocka_unit_test(test_parse_limits),
		cmocka_unit_test(test_forward),
		cmocka_unit_test(test_response_rewrite),
		cmocka_unit_test(test_refusal_texts),
		cmocka_unit_test(test_hosts_parse),
		cmocka_unit_test(test_hosts_errors),
		cmocka_unit_test(test_ip_literals),
	};

	log_init("test_egressd", 1);
	log_setlevel(LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
