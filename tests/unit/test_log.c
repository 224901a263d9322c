/*
 * Unit tests for common/log.c: escaping of untrusted text and the format and
 * filtering of foreground log lines.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

/* Escape a NUL-terminated string into a fresh buffer of size bufsz. */
static const char *
esc(const char *s, size_t bufsz)
{
	static char	buf[1024];

	assert_true(bufsz <= sizeof buf);
	memset(buf, 'Z', sizeof buf);
	return (log_escape(s, (size_t)-1, buf, bufsz));
}

/* Printable ASCII passes through untouched. */
static void
test_escape_plain(void **state)
{
	assert_string_equal(esc("hello, world: 42 ~!", 64), "hello, world: 42 ~!");
	assert_string_equal(esc("", 64), "");
}

/* Control characters, quotes, backslashes and high bytes are escaped. */
static void
test_escape_special(void **state)
{
	assert_string_equal(esc("a\nb\rc\td", 64), "a\\nb\\rc\\td");
	assert_string_equal(esc("say \"hi\"", 64), "say \\\"hi\\\"");
	assert_string_equal(esc("C:\\dir", 64), "C:\\\\dir");
	assert_string_equal(esc("\x1b[31m", 64), "\\x1b[31m");
	assert_string_equal(esc("\x7f\x01", 64), "\\x7f\\x01");
	assert_string_equal(esc("caf\xc3\xa9", 64), "caf\\xc3\\xa9");
}

/* An explicit length covers embedded NULs and stops early. */
static void
test_escape_length(void **state)
{
	char	buf[64];

	assert_string_equal(log_escape("a\0b", 3, buf, sizeof buf),
	    "a\\x00b");
	assert_string_equal(log_escape("abcdef", 3, buf, sizeof buf), "abc");
	assert_ptr_equal(log_escape("x", 1, buf, sizeof buf), buf);
}

/* NULL is shown as "(null)", whatever the length says. */
static void
test_escape_null(void **state)
{
	char	buf[64];

	assert_string_equal(log_escape(NULL, (size_t)-1, buf, sizeof buf),
	    "(null)");
	assert_string_equal(log_escape(NULL, 42, buf, sizeof buf), "(null)");
}

/* Too long text is cut at a whole escape and ends with "...". */
static void
test_escape_truncate(void **state)
{
	/* Exactly fits: 9 characters in 10 bytes, no dots. */
	assert_string_equal(esc("123456789", 10), "123456789");
	/* One more: cut to 6 characters plus "...". */
	assert_string_equal(esc("1234567890", 10), "123456...");
	/* An escape is never split: "\x01" needs 4 bytes. */
	assert_string_equal(esc("12345\x01zzzz", 10), "12345...");
	assert_string_equal(esc("1234\x01zzzz", 11), "1234...");
	assert_string_equal(esc("1234\x01zzzz", 12), "1234\\x01...");
	/* Tiny buffers still get a NUL. */
	assert_string_equal(esc("abcdef", 1), "");
	assert_string_equal(esc("abcdef", 3), "..");
	assert_string_equal(esc("abcdef", 4), "...");
	assert_string_equal(esc("abcdef", 5), "a...");
	assert_string_equal(esc("ab", 3), "ab");
	assert_string_equal(log_escape("abc", 3, NULL, 0), "");
}

/* A long hostile string always stays within the buffer. */
static void
test_escape_bound(void **state)
{
	char	in[600], buf[LOG_ESCAPE_MAX + 8];
	size_t	i;

	for (i = 0; i < sizeof in; i++)
		in[i] = (char)i;
	memset(buf, 'Z', sizeof buf);
	log_escape(in, sizeof in, buf, LOG_ESCAPE_MAX);
	assert_true(strlen(buf) > LOG_ESCAPE_MAX - 8);
	assert_true(strlen(buf) < LOG_ESCAPE_MAX);
	assert_memory_equal(buf + strlen(buf) - 3, "...", 3);
	assert_int_equal(buf[LOG_ESCAPE_MAX], 'Z');
	for (i = 0; buf[i] != '\0'; i++)
		assert_true(buf[i] >= 0x20 && buf[i] < 0x7f);
}

/* Run fn with stderr redirected to a temporary file; return what it wrote. */
static char *
capture_stderr(void (*fn)(void))
{
	static char	out[4096];
	FILE		*f;
	int		 saved;
	size_t		 n;

	assert_non_null(f = tmpfile());
	fflush(stderr);
	assert_true((saved = dup(STDERR_FILENO)) != -1);
	assert_true(dup2(fileno(f), STDERR_FILENO) != -1);
	fn();
	fflush(stderr);
	assert_true(dup2(saved, STDERR_FILENO) != -1);
	close(saved);
	rewind(f);
	n = fread(out, 1, sizeof out - 1, f);
	out[n] = '\0';
	fclose(f);
	return (out);
}

static void
emit_all(void)
{
	log_warnx("w %d", 1);
	log_info("i %s", "two");
	log_debug("d");
	errno = ENOENT;
	log_warn("open %s", "x");
}

/* Foreground lines are "name: LEVEL: message"; debug is off by default. */
static void
test_foreground_format(void **state)
{
	log_init("testd", 1);
	assert_string_equal(capture_stderr(emit_all),
	    "testd: WARN: w 1\n"
	    "testd: INFO: i two\n"
	    "testd: WARN: open x: No such file or directory\n");
}

/* log_setlevel filters by level. */
static void
test_levels(void **state)
{
	log_init("testd", 1);
	log_setlevel(LOG_LVL_DEBUG);
	assert_string_equal(capture_stderr(emit_all),
	    "testd: WARN: w 1\n"
	    "testd: INFO: i two\n"
	    "testd: DEBUG: d\n"
	    "testd: WARN: open x: No such file or directory\n");
	log_setlevel(LOG_LVL_ERROR);
	assert_string_equal(capture_stderr(emit_all), "");
	log_setlevel(LOG_LVL_INFO);
}

/* log_warn leaves errno as it found it. */
static void
test_warn_keeps_errno(void **state)
{
	log_setlevel(LOG_LVL_ERROR);
	errno = EACCES;
	log_warn("quiet");
	assert_int_equal(errno, EACCES);
	log_setlevel(LOG_LVL_INFO);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape_plain),
		cmocka_unit_test(test_escape_special),
		cmocka_unit_test(test_escape_length),
		cmocka_unit_test(test_escape_null),
		cmocka_unit_test(test_escape_truncate),
		cmocka_unit_test(test_escape_bound),
		cmocka_unit_test(test_foreground_format),
		cmocka_unit_test(test_levels),
		cmocka_unit_test(test_warn_keeps_errno),
	};

	return (cmocka_run_group_tests(tests, NULL, NULL));
}
