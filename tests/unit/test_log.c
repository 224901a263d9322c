/*
 * Unit tests for common/log.c: escaping of untrusted text, the format and
 * filtering of foreground log lines, request contexts and where lines go.
 */
#include <sys/stat.h>

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

/*
 * Check that out is lines of "TIMESTAMP rest\n" with rest as in want (lines
 * joined by "\n"); the timestamps must be RFC 3339 UTC with milliseconds.
 */
static void
assert_lines(const char *out, const char *want)
{
	char		 rest[4096];
	const char	*p = out, *nl;
	size_t		 r = 0;
	int		 i;

	while (*p != '\0') {
		assert_non_null(nl = strchr(p, '\n'));
		assert_true(nl - p > 25);
		/* 2026-12-01T10:00:00.123Z */
		for (i = 0; i < 24; i++) {
			if (i == 4 || i == 7)
				assert_int_equal(p[i], '-');
			else if (i == 10)
				assert_int_equal(p[i], 'T');
			else if (i == 13 || i == 16)
				assert_int_equal(p[i], ':');
			else if (i == 19)
				assert_int_equal(p[i], '.');
			else if (i == 23)
				assert_int_equal(p[i], 'Z');
			else
				assert_true(p[i] >= '0' && p[i] <= '9');
		}
		assert_int_equal(p[24], ' ');
		memcpy(rest + r, p + 25, nl + 1 - (p + 25));
		r += nl + 1 - (p + 25);
		p = nl + 1;
	}
	rest[r] = '\0';
	assert_string_equal(rest, want);
}

/* Foreground lines are "TIME LEVEL name: message"; debug is off by default. */
static void
test_foreground_format(void **state)
{
	log_init("testd", 1);
	assert_string_equal(log_destination(), "stderr");
	assert_lines(capture_stderr(emit_all),
	    "WARN testd: w 1\n"
	    "INFO testd: i two\n"
	    "WARN testd: open x: No such file or directory\n");
}

static void
emit_multiline(void)
{
	log_info("spawn x: bash -c 'a\nb'\r\x1b[2J\tend");
}

/*
 * A message quoting a client's text (a command line) stays one line: its
 * control characters escaped, so it cannot forge another log line.
 */
static void
test_one_line(void **state)
{
	log_init("testd", 1);
	assert_lines(capture_stderr(emit_multiline),
	    "INFO testd: spawn x: bash -c 'a\\nb'\\r\\x1b[2J\\tend\n");
}

/* log_setlevel filters by level. */
static void
test_levels(void **state)
{
	log_init("testd", 1);
	log_setlevel(LOG_LVL_DEBUG);
	assert_lines(capture_stderr(emit_all),
	    "WARN testd: w 1\n"
	    "INFO testd: i two\n"
	    "DEBUG testd: d\n"
	    "WARN testd: open x: No such file or directory\n");
	log_setlevel(LOG_LVL_ERROR);
	assert_string_equal(capture_stderr(emit_all), "");
	log_setlevel(LOG_LVL_INFO);
}

static void
emit_ctx(void)
{
	log_ctx_set("0123456789abcdef", "alice", "9f2c4be0");
	log_info("spawn");
	assert_string_equal(log_ctx_request_id(), "0123456789abcdef");
	assert_string_equal(log_ctx_user(), "alice");
	log_ctx_clear();
	log_info("idle");
	assert_null(log_ctx_request_id());
	assert_null(log_ctx_user());
	/* A malformed id is never shown. */
	log_ctx_set("evil\nline", NULL, NULL);
	log_info("bad");
	assert_null(log_ctx_request_id());
	log_ctx_clear();
}

/* The request of a context starts the lines logged inside it. */
static void
test_context(void **state)
{
	log_init("testd", 1);
	assert_lines(capture_stderr(emit_ctx),
	    "INFO testd: [0123456789abcdef] spawn\n"
	    "INFO testd: idle\n"
	    "INFO testd: bad\n");
}

/* Request ids are 16 lowercase hex digits, fresh each time. */
static void
test_reqid(void **state)
{
	char	a[LOG_REQUEST_ID_LEN + 1], b[LOG_REQUEST_ID_LEN + 1];

	log_reqid_new(a);
	log_reqid_new(b);
	assert_true(log_reqid_valid(a));
	assert_true(log_reqid_valid(b));
	assert_string_not_equal(a, b);
	assert_true(log_reqid_valid("0123456789abcdef"));
	assert_false(log_reqid_valid("0123456789ABCDEF"));
	assert_false(log_reqid_valid("0123456789abcde"));
	assert_false(log_reqid_valid("0123456789abcdef0"));
	assert_false(log_reqid_valid("0123456789abcde\n"));
	assert_false(log_reqid_valid(""));
	assert_false(log_reqid_valid(NULL));
}

/* A JOURNAL_STREAM that is not our stderr is someone else's: ignored. */
static void
test_journal_stream_mismatch(void **state)
{
	setenv("JOURNAL_STREAM", "1:1", 1);
	log_init("testd", 1);
	assert_string_equal(log_destination(), "stderr");
	setenv("JOURNAL_STREAM", "garbage", 1);
	log_init("testd", 1);
	assert_string_equal(log_destination(), "stderr");
	unsetenv("JOURNAL_STREAM");
}

static void
init_background(void)
{
	log_init("testd", 0);
	log_info("after");
}

/*
 * In the background with nothing listening on /dev/log, lines go to stderr
 * and the first one says so (glibc's syslog would drop them silently).
 */
static void
test_no_syslog(void **state)
{
	struct stat	st;

	if (stat("/dev/log", &st) == 0) {
		skip();	/* tests/system/test_logs.py hides it in a namespace */
		return;
	}
	assert_lines(capture_stderr(init_background),
	    "WARN testd: no syslog daemon listens on /dev/log: logging to "
	    "stderr\n"
	    "INFO testd: after\n");
	assert_string_equal(log_destination(), "stderr");
	log_init("testd", 1);
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
		cmocka_unit_test(test_one_line),
		cmocka_unit_test(test_context),
		cmocka_unit_test(test_reqid),
		cmocka_unit_test(test_journal_stream_mismatch),
		cmocka_unit_test(test_no_syslog),
		cmocka_unit_test(test_warn_keeps_errno),
	};

	return (cmocka_run_group_tests(tests, NULL, NULL));
}
