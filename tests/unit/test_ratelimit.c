/*
 * Unit tests for brokerd/ratelimit.c: token buckets, exact refill and
 * eviction.
 */

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>

#include <cmocka.h>

#include "../../brokerd/brokerd.h"

/* Take n tokens for key at now, expecting each to be allowed. */
static void
take_n(struct rl_table *t, const char *key, int n, int64_t now)
{
	int	i, rc;

	for (i = 0; i < n; i++) {
		if ((rc = rl_take(t, key, now)) != 0)
			fail_msg("take %d of %d for %s at %lld: wait %d", i + 1,
			    n, key, (long long)now, rc);
	}
}

/* A burst of N allows exactly N at once, then refills one per period. */
static void
test_burst_exact(void **state)
{
	struct rl_table	*t;

	t = rl_new("t", 60, 5, 100);		/* one token a second */
	assert_non_null(t);
	assert_int_equal(rl_peek(t, "ip", 0), 0);
	take_n(t, "ip", 5, 0);
	assert_int_equal(rl_take(t, "ip", 0), 1);
	assert_int_equal(rl_peek(t, "ip", 0), 1);
	assert_int_equal(rl_take(t, "ip", 999), 1);
	assert_int_equal(rl_take(t, "ip", 1000), 0);
	assert_int_equal(rl_take(t, "ip", 1000), 1);
	/* Denied attempts cost nothing. */
	assert_int_equal(rl_take(t, "ip", 2000), 0);
	/* Other keys have their own bucket. */
	take_n(t, "other", 5, 2000);
	assert_int_equal(rl_take(t, "other", 2000), 1);
	rl_free(t);
}

/* The wait is in whole seconds, rounded up, never 0 when denied. */
static void
test_retry_seconds(void **state)
{
	struct rl_table	*t;

	t = rl_new("t", 6, 2, 10);		/* one token every 10 s */
	assert_non_null(t);
	take_n(t, "u", 2, 0);
	assert_int_equal(rl_take(t, "u", 0), 10);
	assert_int_equal(rl_take(t, "u", 1), 10);
	assert_int_equal(rl_take(t, "u", 500), 10);
	assert_int_equal(rl_take(t, "u", 1000), 9);
	assert_int_equal(rl_peek(t, "u", 9001), 1);
	assert_int_equal(rl_take(t, "u", 9999), 1);
	assert_int_equal(rl_peek(t, "u", 10000), 0);
	assert_int_equal(rl_take(t, "u", 10000), 0);
	assert_int_equal(rl_take(t, "u", 10000), 10);
	rl_free(t);
}

/* Rates that do not divide a minute evenly never give a token early. */
static void
test_no_early_token(void **state)
{
	struct rl_table	*t;

	/* 7 per minute: one every 8571.43 ms. */
	t = rl_new("t", 7, 2, 10);
	assert_non_null(t);
	take_n(t, "k", 2, 0);
	assert_int_equal(rl_take(t, "k", 8571), 1);
	assert_int_equal(rl_take(t, "k", 8572), 0);
	/* The next one counts from the fraction left, not from 8572. */
	assert_int_equal(rl_take(t, "k", 17142), 1);
	assert_int_equal(rl_take(t, "k", 17143), 0);
	rl_free(t);

	/* A full bucket holds no fraction: the next token is 8571.43 ms on. */
	t = rl_new("t", 7, 1, 10);
	assert_non_null(t);
	take_n(t, "k", 1, 0);
	assert_int_equal(rl_take(t, "k", 8572), 0);
	assert_int_equal(rl_take(t, "k", 17143), 1);
	assert_int_equal(rl_take(t, "k", 17144), 0);
	rl_free(t);

	/* 0.29 per minute (not exact in binary): one every 206896.55 ms. */
	t = rl_new("t", 0.29, 1, 10);
	assert_non_null(t);
	take_n(t, "k", 1, 0);
	assert_int_equal(rl_take(t, "k", 206896), 1);
	assert_int_equal(rl_take(t, "k", 206897), 0);
	rl_free(t);

	/* Below the 0.001-per-minute resolution the rate rounds down. */
	t = rl_new("t", 0.0015, 1, 10);	/* one every 40000 s */
	assert_non_null(t);
	take_n(t, "k", 1, 0);
	assert_int_not_equal(rl_take(t, "k", 40000 * 1000 - 1), 0);
	assert_int_not_equal(rl_take(t, "k", 40000 * 1000), 0);
	rl_free(t);

	/* Refilling in many small steps adds up to the same. */
	t = rl_new("t", 7, 1, 10);
	assert_non_null(t);
	take_n(t, "k", 1, 0);
	for (int64_t ms = 1; ms < 8572; ms++) {
		if (rl_take(t, "k", ms) == 0)
			fail_msg("token at %lld ms", (long long)ms);
	}
	assert_int_equal(rl_take(t, "k", 8572), 0);
	rl_free(t);
}

/* An idle bucket fills up to the burst and no further. */
static void
test_refill_caps_at_burst(void **state)
{
	struct rl_table	*t;
	int64_t		 late = INT64_MAX / 2;

	t = rl_new("t", 60, 3, 10);
	assert_non_null(t);
	take_n(t, "k", 3, 0);
	take_n(t, "k", 3, 3600 * 1000);
	assert_int_equal(rl_take(t, "k", 3600 * 1000), 1);
	/* A very long idle time neither overflows nor exceeds the burst. */
	take_n(t, "k", 3, late);
	assert_int_equal(rl_take(t, "k", late), 1);
	/* A clock that steps back refills nothing. */
	assert_int_equal(rl_take(t, "k", 0), 1);
	assert_int_equal(rl_take(t, "k", late + 1000), 0);
	rl_free(t);

	/* A fractional burst holds only the whole tokens. */
	t = rl_new("t", 60, 2.5, 10);
	assert_non_null(t);
	take_n(t, "k", 2, 0);
	assert_int_equal(rl_take(t, "k", 0), 1);
	assert_int_equal(rl_take(t, "k", 500), 0);
	rl_free(t);
}

/* Peeking reports the wait without taking a token or making a bucket. */
static void
test_peek(void **state)
{
	struct rl_table	*t;

	t = rl_new("t", 60, 2, 1);
	assert_non_null(t);
	assert_int_equal(rl_peek(t, "a", 0), 0);
	assert_int_equal(rl_peek(t, "a", 0), 0);
	take_n(t, "a", 1, 0);
	assert_int_equal(rl_peek(t, "a", 0), 0);
	assert_int_equal(rl_peek(t, "a", 0), 0);
	take_n(t, "a", 1, 0);
	assert_int_equal(rl_peek(t, "a", 0), 1);
	/* With max_keys 1, a peek at "b" must not have evicted "a". */
	assert_int_equal(rl_peek(t, "b", 0), 0);
	assert_int_equal(rl_take(t, "a", 0), 1);
	assert_int_equal(rl_take(t, NULL, 0), 0);
	rl_free(t);
}

/* A full table drops the least recently used bucket when none is full. */
static void
test_evict_lru(void **state)
{
	struct rl_table	*t;

	t = rl_new("t", 60, 1, 2);
	assert_non_null(t);
	take_n(t, "a", 1, 0);
	take_n(t, "b", 1, 0);
	assert_int_equal(rl_take(t, "a", 0), 1);	/* a is used last */
	take_n(t, "c", 1, 0);				/* evicts b */
	assert_int_equal(rl_take(t, "a", 0), 1);	/* a kept */
	take_n(t, "b", 1, 0);				/* fresh: evicts c */
	assert_int_equal(rl_take(t, "a", 0), 1);	/* a still kept */
	take_n(t, "c", 1, 0);				/* fresh again */
	rl_free(t);
}

/* A full table drops the full buckets before any recently used one. */
static void
test_evict_full_first(void **state)
{
	struct rl_table	*t;

	t = rl_new("t", 60, 2, 3);
	assert_non_null(t);
	take_n(t, "old", 2, 0);		/* least recently used, then empty */
	take_n(t, "x", 1, 100);		/* full again at 1100 */
	take_n(t, "y", 1, 200);		/* full again at 1200 */
	/* At 1200: x and y are full, old holds 1.2 tokens. */
	take_n(t, "new", 1, 1200);
	take_n(t, "old", 1, 1200);
	assert_int_equal(rl_take(t, "old", 1200), 1);	/* old was kept */
	/* x and y went, so p fits without touching old. */
	take_n(t, "p", 2, 1200);
	assert_int_equal(rl_take(t, "old", 1200), 1);
	rl_free(t);
}

/* Many keys through a small table stay bounded and correct. */
static void
test_many_keys(void **state)
{
	struct rl_table	*t;
	char		 key[32];
	int		 i;

	t = rl_new("t", 1, 1, 64);
	assert_non_null(t);
	for (i = 0; i < 20000; i++) {
		snprintf(key, sizeof key, "10.0.%d.%d", i / 256, i % 256);
		take_n(t, key, 1, i);
		assert_int_equal(rl_take(t, key, i), 60);
	}
	rl_free(t);
	rl_free(NULL);
}

/* Parameters out of range are refused. */
static void
test_new_invalid(void **state)
{
	assert_null(rl_new("t", 0, 5, 10));
	assert_null(rl_new("t", -1, 5, 10));
	assert_null(rl_new("t", 0.0001, 5, 10));
	assert_null(rl_new("t", NAN, 5, 10));
	assert_null(rl_new("t", 60, 0.5, 10));
	assert_null(rl_new("t", 60, NAN, 10));
	assert_null(rl_new("t", 60, INFINITY, 10));
	assert_null(rl_new("t", 60, 5, 0));
	/* A table needs its rows' name in a PostgreSQL store. */
	assert_null(rl_new(NULL, 60, 5, 10));
	assert_null(rl_new("", 60, 5, 10));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_exact),
		cmocka_unit_test(test_retry_seconds),
		cmocka_unit_test(test_no_early_token),
		cmocka_unit_test(test_refill_caps_at_burst),
		cmocka_unit_test(test_peek),
		cmocka_unit_test(test_evict_lru),
		cmocka_unit_test(test_evict_full_first),
		cmocka_unit_test(test_many_keys),
		cmocka_unit_test(test_new_invalid),
	};

	log_init("test_ratelimit", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
