/*
 * Unit tests of brokerd/ttl.c: the deadlines of direct-mode grants.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../brokerd/brokerd.h"

/* A grant: both deadlines are ttl after their own clock's now. */
static void
test_grant(void **state)
{
	int64_t	wall, mono;

	ttl_grant(1700000000000LL, 5000, 600, &wall, &mono);
	assert_int_equal(wall, 1700000600000LL);
	assert_int_equal(mono, 605000);
}

/* A restart resumes what is left: never more, never less. */
static void
test_resume_keeps_the_deadline(void **state)
{
	int64_t	wall, mono;

	ttl_grant(1700000000000LL, 5000, 600, &wall, &mono);
	/* brokerd restarts 100 s later; its monotonic clock starts anew. */
	assert_int_equal(ttl_resume(wall, 1700000100000LL, 42, &mono), 0);
	assert_int_equal(mono, 42 + 500000);
	assert_int_equal(ttl_remaining(mono, 42), 500);
}

/* A grant that ran out while brokerd was down is not resumed. */
static void
test_resume_expired(void **state)
{
	int64_t	mono = -7;

	assert_int_equal(ttl_resume(1700000000000LL, 1700000000000LL, 1,
	    &mono), -1);
	assert_int_equal(ttl_resume(1700000000000LL, 1700000000001LL, 1,
	    &mono), -1);
	assert_int_equal(ttl_resume(0, 1, 1, &mono), -1);
	assert_int_equal(mono, -7);	/* untouched */
}

/* A wall clock stepped back does not extend the running grant. */
static void
test_monotonic_only(void **state)
{
	int64_t	wall, mono;

	ttl_grant(1700000000000LL, 1000, 10, &wall, &mono);
	/* Whatever the wall clock says, 10 s of monotonic time end it. */
	assert_int_equal(ttl_remaining(mono, 1000 + 9999), 1);
	assert_int_equal(ttl_remaining(mono, 1000 + 10000), 0);
	assert_int_equal(ttl_remaining(mono, 1000 + 99999), 0);
}

/* Remaining seconds round up: 1 ms left is 1 s, never 0 while valid. */
static void
test_remaining_rounding(void **state)
{
	assert_int_equal(ttl_remaining(10000, 9999), 1);
	assert_int_equal(ttl_remaining(10000, 9000), 1);
	assert_int_equal(ttl_remaining(10000, 8999), 2);
	assert_int_equal(ttl_remaining(10000, 10000), 0);
}

/* mode_expiring: 60 s before the end, or at once for a short grant. */
static void
test_warn(void **state)
{
	assert_int_equal(ttl_warn_in(600000, 0, 60), 540000);
	assert_int_equal(ttl_warn_in(30000, 0, 60), 0);
	assert_int_equal(ttl_warn_in(60000, 0, 60), 0);
	assert_int_equal(ttl_warn_in(61000, 500, 60), 500);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grant),
		cmocka_unit_test(test_resume_keeps_the_deadline),
		cmocka_unit_test(test_resume_expired),
		cmocka_unit_test(test_monotonic_only),
		cmocka_unit_test(test_remaining_rounding),
		cmocka_unit_test(test_warn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
