/*
 * Unit tests of brokerd/home.c: the host a fleet's token names, and where
 * a new user is placed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../brokerd/brokerd.h"

/* A fleet's token names its host before the first '.'. */
static void
test_token_host(void **state)
{
	char	host[HOME_HOST_MAX + 1];

	assert_int_equal(home_token_host("hgt_h2.AbC-d_e", host,
	    sizeof(host)), 1);
	assert_string_equal(host, "h2");
	assert_int_equal(home_token_host("hgt_web-01.x", host, sizeof(host)),
	    1);
	assert_string_equal(host, "web-01");
	/* the longest host id */
	assert_int_equal(home_token_host("hgt_"
	    "abcdefghijklmnopqrstuvwxyz012345.s", host, sizeof(host)), 1);
	assert_string_equal(host, "abcdefghijklmnopqrstuvwxyz012345");
}

/* A token of one host, or of an earlier release, names none. */
static void
test_token_no_host(void **state)
{
	char	host[HOME_HOST_MAX + 1] = "x";

	assert_int_equal(home_token_host("hgt_hMZx4HhMJLjNxhUYUIqyS5L0T5Zx"
	    "zDhWk7D3QvwANww", host, sizeof(host)), 0);
	assert_string_equal(host, "");
	assert_int_equal(home_token_host("hgt_", host, sizeof(host)), 0);
}

/* What is not a token, or names no valid host, is refused. */
static void
test_token_bad(void **state)
{
	char	host[HOME_HOST_MAX + 1];

	assert_int_equal(home_token_host(NULL, host, sizeof(host)), -1);
	assert_int_equal(home_token_host("Bearer hgt_h2.x", host,
	    sizeof(host)), -1);
	assert_int_equal(home_token_host("hgt_.secret", host, sizeof(host)),
	    -1);
	assert_int_equal(home_token_host("hgt_H2.secret", host, sizeof(host)),
	    -1);
	assert_int_equal(home_token_host("hgt_-h2.secret", host,
	    sizeof(host)), -1);
	assert_int_equal(home_token_host("hgt_h_2.secret", host,
	    sizeof(host)), -1);
	assert_int_equal(home_token_host("hgt_h2.", host, sizeof(host)), -1);
	assert_int_equal(home_token_host("hgt_"
	    "abcdefghijklmnopqrstuvwxyz0123456.s", host, sizeof(host)), -1);
	/* out too small for the host */
	assert_int_equal(home_token_host("hgt_h2.x", host, 2), -1);
}

/* The host id rule of HOSTGATE_HOST_ID. */
static void
test_host_valid(void **state)
{
	assert_true(home_host_valid("h1", 2));
	assert_true(home_host_valid("0-a", 3));
	assert_false(home_host_valid("", 0));
	assert_false(home_host_valid("-a", 2));
	assert_false(home_host_valid("a.b", 3));
	assert_false(home_host_valid("A", 1));
}

/* The fewest live spawns wins, whatever the users. */
static void
test_pick_least_live(void **state)
{
	struct home_load	h[] = {
		{ "h1", 3, 0 }, { "h2", 1, 9 }, { "h3", 2, 0 },
	};

	assert_int_equal(home_pick(h, 3), 1);
}

/* Ties on live spawns: the fewest homed users, then the smallest id. */
static void
test_pick_ties(void **state)
{
	struct home_load	a[] = {
		{ "h1", 0, 2 }, { "h2", 0, 1 }, { "h3", 0, 1 },
	};
	struct home_load	b[] = {
		{ "h3", 0, 0 }, { "h10", 0, 0 }, { "h2", 0, 0 },
	};

	assert_int_equal(home_pick(a, 3), 1);
	assert_int_equal(home_pick(b, 3), 1);	/* "h10" < "h2" < "h3" */
}

/* No host up: no choice. */
static void
test_pick_none(void **state)
{
	struct home_load	h[] = { { "h1", 0, 0 } };

	assert_int_equal(home_pick(h, 0), -1);
	assert_int_equal(home_pick(h, 1), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_token_host),
		cmocka_unit_test(test_token_no_host),
		cmocka_unit_test(test_token_bad),
		cmocka_unit_test(test_host_valid),
		cmocka_unit_test(test_pick_least_live),
		cmocka_unit_test(test_pick_ties),
		cmocka_unit_test(test_pick_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
