/*
 * Unit tests for common/egress.c: names, patterns, IP literals in their
 * many spellings, CIDR lists and port lists.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"

/* Every spelling of an address is a literal, no name is. */
static void
test_literal(void **state)
{
	static const char *const lit[] = {
		"127.0.0.1", "2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1",
		"127.1", "10.213.0.2", "::1", "[::1]", "[::ffff:127.0.0.1]",
		"fe80::1", "1.2.3.4.", "foo.123", "foo.0x1f", NULL
	};
	static const char *const name[] = {
		"example.com", "pkg.test", "a1.b2", "0x.example", "123.example",
		"localhost", NULL
	};
	const char *const	*p;

	(void)state;
	for (p = lit; *p != NULL; p++)
		if (!egress_host_is_literal(*p))
			fail_msg("%s is a literal", *p);
	for (p = name; *p != NULL; p++)
		if (egress_host_is_literal(*p))
			fail_msg("%s is a name", *p);
}

static void
test_names(void **state)
{
	char	long_label[80], long_name[300];

	(void)state;
	assert_true(egress_host_valid("example.com"));
	assert_true(egress_host_valid("a-b.c-d.example"));
	assert_true(egress_host_valid("localhost"));
	assert_false(egress_host_valid(""));
	assert_false(egress_host_valid("Example.com"));	/* caller lowers */
	assert_false(egress_host_valid("exa mple.com"));
	assert_false(egress_host_valid("-a.com"));
	assert_false(egress_host_valid("a-.com"));
	assert_false(egress_host_valid("a..com"));
	assert_false(egress_host_valid(".a.com"));
	assert_false(egress_host_valid("a.com."));	/* caller drops it */
	assert_false(egress_host_valid("a_b.com"));
	assert_false(egress_host_valid("*.a.com"));
	assert_false(egress_host_valid("10.0.0.1"));
	assert_false(egress_host_valid("a.com:443"));
	assert_false(egress_host_valid("a.com/x"));
	memset(long_label, 'a', 64);
	long_label[64] = '\0';
	assert_false(egress_host_valid(long_label));
	long_label[63] = '\0';
	assert_true(egress_host_valid(long_label));
	snprintf(long_name, sizeof(long_name), "%s.%s.%s.%s", long_label,
	    long_label, long_label, long_label);	/* 255 bytes */
	assert_false(egress_host_valid(long_name));
}

static void
test_patterns(void **state)
{
	char	out[64];

	(void)state;
	assert_true(egress_pattern_valid("*.example.com"));
	assert_true(egress_pattern_valid("example.com"));
	assert_false(egress_pattern_valid("*"));
	assert_false(egress_pattern_valid("*."));
	assert_false(egress_pattern_valid("**.a.com"));
	assert_false(egress_pattern_valid("a.*.com"));
	assert_false(egress_pattern_valid("*example.com"));
	assert_false(egress_pattern_valid("*.10.0.0.1"));
	assert_true(egress_match("example.com", "example.com"));
	assert_false(egress_match("example.com", "www.example.com"));
	assert_true(egress_match("*.example.com", "www.example.com"));
	assert_true(egress_match("*.example.com", "a.b.example.com"));
	assert_false(egress_match("*.example.com", "example.com"));
	assert_false(egress_match("*.example.com", "badexample.com"));
	assert_false(egress_match("*.example.com", "example.com.evil"));
	assert_true(egress_list_valid("", NULL, 0));
	assert_true(egress_list_valid(" a.com, *.b.org\tc.net ", NULL, 0));
	assert_false(egress_list_valid("a.com,,b..com", out, sizeof(out)));
	assert_string_equal(out, "b..com");
	assert_true(egress_list_match("a.com, *.b.org", "x.b.org", out,
	    sizeof(out)));
	assert_string_equal(out, "*.b.org");
	assert_false(egress_list_match("a.com, *.b.org", "b.org", NULL, 0));
	assert_false(egress_list_match(NULL, "b.org", NULL, 0));
}

/* Whether text (an address) is in nets, and in which. */
static const char *
find(const struct egress_nets *nets, const char *text)
{
	struct sockaddr_in	sin;
	struct sockaddr_in6	sin6;

	memset(&sin, 0, sizeof(sin));
	memset(&sin6, 0, sizeof(sin6));
	if (inet_pton(AF_INET, text, &sin.sin_addr) == 1) {
		sin.sin_family = AF_INET;
		return egress_nets_find(nets, (struct sockaddr *)&sin);
	}
	assert_int_equal(inet_pton(AF_INET6, text, &sin6.sin6_addr), 1);
	sin6.sin6_family = AF_INET6;
	return egress_nets_find(nets, (struct sockaddr *)&sin6);
}

static void
test_nets(void **state)
{
	struct egress_nets	 nets;
	char			 err[256];
	const char		*deny = "10.0.0.0/8, 127.0.0.0/8 172.16.0.0/12,"
	    "192.168.0.0/16,169.254.0.0/16,::1/128,fc00::/7,fe80::/10,"
	    "100.64.0.0/10,0.0.0.0/8";

	(void)state;
	assert_int_equal(egress_nets_parse(deny, &nets, err, sizeof(err)), 0);
	assert_string_equal(find(&nets, "10.1.2.3"), "10.0.0.0/8");
	assert_string_equal(find(&nets, "127.0.0.1"), "127.0.0.0/8");
	assert_string_equal(find(&nets, "172.31.255.255"), "172.16.0.0/12");
	assert_null(find(&nets, "172.32.0.1"));
	assert_string_equal(find(&nets, "100.127.0.1"), "100.64.0.0/10");
	assert_null(find(&nets, "100.128.0.1"));
	assert_null(find(&nets, "93.184.216.34"));
	assert_string_equal(find(&nets, "::1"), "::1/128");
	assert_string_equal(find(&nets, "fd00::5"), "fc00::/7");
	assert_string_equal(find(&nets, "fe80::1"), "fe80::/10");
	assert_null(find(&nets, "2606:2800:220:1::1"));
	/* The mapped form of a denied IPv4 address is denied. */
	assert_string_equal(find(&nets, "::ffff:127.0.0.1"), "127.0.0.0/8");
	assert_string_equal(find(&nets, "::ffff:10.0.0.1"), "10.0.0.0/8");
	assert_null(find(&nets, "::ffff:93.184.216.34"));
	egress_nets_free(&nets);

	assert_int_equal(egress_nets_parse("", &nets, err, sizeof(err)), 0);
	assert_int_equal(nets.n, 0);
	assert_int_equal(egress_nets_parse("10.213.7.0/30 1.2.3.4", &nets, err,
	    sizeof(err)), 0);
	assert_string_equal(find(&nets, "10.213.7.2"), "10.213.7.0/30");
	assert_null(find(&nets, "10.213.7.4"));
	assert_string_equal(find(&nets, "1.2.3.4"), "1.2.3.4");
	egress_nets_free(&nets);

	assert_int_equal(egress_nets_parse("10.1.0.0/8", &nets, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "10.1.0.0/8"));
	assert_int_equal(egress_nets_parse("10.0.0.0/33", &nets, err,
	    sizeof(err)), -1);
	assert_int_equal(egress_nets_parse("10.0.0.0/", &nets, err,
	    sizeof(err)), -1);
	assert_int_equal(egress_nets_parse("10.0.0.0/-1", &nets, err,
	    sizeof(err)), -1);
	assert_int_equal(egress_nets_parse("example.com/8", &nets, err,
	    sizeof(err)), -1);
	assert_int_equal(egress_nets_parse("::/129", &nets, err,
	    sizeof(err)), -1);
}

static void
test_ports(void **state)
{
	int	ports[4];

	(void)state;
	assert_int_equal(egress_ports_parse("443,80", ports, 4), 2);
	assert_int_equal(ports[0], 443);
	assert_int_equal(ports[1], 80);
	assert_int_equal(egress_ports_parse("", ports, 4), 0);
	assert_int_equal(egress_ports_parse("1 2 3 4 5", ports, 4), -1);
	assert_int_equal(egress_ports_parse("0", ports, 4), -1);
	assert_int_equal(egress_ports_parse("65536", ports, 4), -1);
	assert_int_equal(egress_ports_parse("+80", ports, 4), -1);
	assert_int_equal(egress_ports_parse("80x", ports, 4), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_literal),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_patterns),
		cmocka_unit_test(test_nets),
		cmocka_unit_test(test_ports),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
