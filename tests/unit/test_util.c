/*
 * Unit tests for common/util.c.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"

/* A fresh temporary directory per test, removed afterwards. */
static int
setup_dir(void **state)
{
	char	*dir;

	dir = strdup("/tmp/hg-test-util.XXXXXX");
	if (dir == NULL || mkdtemp(dir) == NULL)
		return (-1);
	*state = dir;
	return (0);
}

static int
teardown_dir(void **state)
{
	char		*dir = *state, path[PATH_MAX];
	DIR		*d;
	struct dirent	*de;

	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
	free(dir);
	return (0);
}

/* Number of entries in dir, "." and ".." aside. */
static int
count_entries(const char *dir)
{
	DIR		*d;
	struct dirent	*de;
	int		 n = 0;

	assert_non_null(d = opendir(dir));
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return (n);
}

/* The typed JSON getters return values of the right type only. */
static void
test_json_helpers(void **state)
{
	struct json_object	*o;
	int64_t			 n = 0;
	int			 b = -7;

	o = json_tokener_parse("{\"s\": \"text\", \"i\": -42, \"d\": 1.5,"
	    "\"si\": \"12\", \"t\": true, \"f\": false, \"n\": null,"
	    "\"big\": 9223372036854775807, \"huge\": 18446744073709551615,"
	    "\"one\": 1}");
	assert_non_null(o);

	assert_string_equal(json_str(o, "s"), "text");
	assert_null(json_str(o, "i"));
	assert_null(json_str(o, "n"));
	assert_null(json_str(o, "missing"));

	assert_int_equal(json_int(o, "i", &n), 0);
	assert_int_equal(n, -42);
	assert_int_equal(json_int(o, "big", &n), 0);
	assert_true(n == INT64_MAX);
	assert_int_equal(json_int(o, "huge", &n), -1);
	assert_int_equal(json_int(o, "d", &n), -1);
	assert_int_equal(json_int(o, "si", &n), -1);
	assert_int_equal(json_int(o, "t", &n), -1);
	assert_int_equal(json_int(o, "missing", &n), -1);

	assert_int_equal(json_flag(o, "t", &b), 0);
	assert_int_equal(b, 1);
	assert_int_equal(json_flag(o, "f", &b), 0);
	assert_int_equal(b, 0);
	assert_int_equal(json_flag(o, "one", &b), -1);
	assert_int_equal(json_flag(o, "s", &b), -1);
	assert_int_equal(json_flag(o, "n", &b), -1);

	/* Not an object at all. */
	assert_null(json_str(NULL, "s"));
	assert_int_equal(json_int(json_object_object_get(o, "s"), "s", &n), -1);
	json_object_put(o);
}

/* file_write_atomic gives the content and mode, and leaves no temp file. */
static void
test_write_atomic(void **state)
{
	const char	*dir = *state;
	char		 path[PATH_MAX], *data;
	struct stat	 st;
	size_t		 len;
	mode_t		 old;

	snprintf(path, sizeof path, "%s/users.json", dir);
	assert_int_equal(file_write_atomic(path, "first", 5, 0600), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_non_null(data = file_read(path, 100, &len));
	assert_int_equal(len, 5);
	assert_string_equal(data, "first");
	free(data);

	/* Replacing keeps one file and takes the new mode. */
	assert_int_equal(file_write_atomic(path, "second!", 7, 0640), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_non_null(data = file_read(path, 100, NULL));
	assert_string_equal(data, "second!");
	free(data);
	assert_int_equal(count_entries(dir), 1);

	/* The mode is exact, whatever the umask. */
	old = umask(077);
	assert_int_equal(file_write_atomic(path, "x", 1, 0664), 0);
	umask(old);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0664);

	/* An empty file is fine. */
	assert_int_equal(file_write_atomic(path, "", 0, 0600), 0);
	assert_non_null(data = file_read(path, 100, &len));
	assert_int_equal(len, 0);
	free(data);
}

/* Failures return -1 with errno and leave nothing behind. */
static void
test_write_atomic_errors(void **state)
{
	const char	*dir = *state;
	char		 path[PATH_MAX];

	snprintf(path, sizeof path, "%s/missing/file", dir);
	errno = 0;
	assert_int_equal(file_write_atomic(path, "x", 1, 0600), -1);
	assert_int_equal(errno, ENOENT);

	/* The target is a non-empty directory: rename fails, temp removed. */
	snprintf(path, sizeof path, "%s/sub", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/sub/keep", dir);
	assert_int_equal(file_write_atomic(path, "x", 1, 0600), 0);
	snprintf(path, sizeof path, "%s/sub", dir);
	errno = 0;
	assert_int_equal(file_write_atomic(path, "x", 1, 0600), -1);
	assert_true(errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST);
	assert_int_equal(count_entries(dir), 1);

	snprintf(path, sizeof path, "%s/sub/keep", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/sub", dir);
	rmdir(path);
}

/* file_read enforces its size limit, also on files without a size. */
static void
test_file_read_limits(void **state)
{
	const char	*dir = *state;
	char		 path[PATH_MAX], big[10000], *data;
	size_t		 len;

	memset(big, 'a', sizeof big);
	snprintf(path, sizeof path, "%s/big", dir);
	assert_int_equal(file_write_atomic(path, big, sizeof big, 0600), 0);

	assert_non_null(data = file_read(path, sizeof big, &len));
	assert_int_equal(len, sizeof big);
	assert_int_equal(data[len], '\0');
	free(data);

	errno = 0;
	assert_null(file_read(path, sizeof big - 1, &len));
	assert_int_equal(errno, EFBIG);

	errno = 0;
	assert_null(file_read(path, 0, &len));
	assert_int_equal(errno, EFBIG);

	/* /proc files claim size 0 but have content: read until EOF. */
	assert_non_null(data = file_read("/proc/self/status", 1 << 20, &len));
	assert_true(len > 0 && strlen(data) == len);
	free(data);
	errno = 0;
	assert_null(file_read("/proc/self/status", 10, &len));
	assert_int_equal(errno, EFBIG);

	errno = 0;
	snprintf(path, sizeof path, "%s/none", dir);
	assert_null(file_read(path, 10, &len));
	assert_int_equal(errno, ENOENT);
}

/* Tokens have the right length and alphabet, and differ each time. */
static void
test_rand_token(void **state)
{
	char	a[64], b[64];
	size_t	i;

	assert_int_equal(rand_token(a, sizeof a, 32), 0);
	assert_int_equal(strlen(a), 43);
	for (i = 0; a[i] != '\0'; i++)
		assert_non_null(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "abcdefghijklmnopqrstuvwxyz0123456789-_", a[i]));
	assert_int_equal(rand_token(b, sizeof b, 32), 0);
	assert_string_not_equal(a, b);

	/* Lengths for every tail size: ceil(4n/3) characters. */
	assert_int_equal(rand_token(a, sizeof a, 1), 0);
	assert_int_equal(strlen(a), 2);
	assert_int_equal(rand_token(a, sizeof a, 2), 0);
	assert_int_equal(strlen(a), 3);
	assert_int_equal(rand_token(a, sizeof a, 3), 0);
	assert_int_equal(strlen(a), 4);
	assert_int_equal(rand_token(a, sizeof a, 0), 0);
	assert_string_equal(a, "");
	assert_int_equal(rand_token(a, sizeof a, 47), 0);
	assert_int_equal(strlen(a), 63);

	/* Exactly big enough, then one byte short. */
	assert_int_equal(rand_token(a, 44, 32), 0);
	errno = 0;
	assert_int_equal(rand_token(a, 43, 32), -1);
	assert_int_equal(errno, ERANGE);
}

/* Tokens longer than one internal chunk are encoded without gaps. */
static void
test_rand_token_long(void **state)
{
	char	tok[300];
	size_t	i, counts[256] = { 0 };

	assert_int_equal(rand_token(tok, sizeof tok, 200), 0);
	assert_int_equal(strlen(tok), 267);
	for (i = 0; tok[i] != '\0'; i++)
		counts[(unsigned char)tok[i]]++;
	/* 267 random characters from 64: no character should dominate. */
	for (i = 0; i < 256; i++)
		assert_true(counts[i] < 40);
}

/* SHA-256 of known vectors. */
static void
test_sha256(void **state)
{
	char	out[65];

	sha256_hex("abc", 3, out);
	assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223"
	    "b00361a396177a9cb410ff61f20015ad");
	sha256_hex("", 0, out);
	assert_string_equal(out, "e3b0c44298fc1c149afbf4c8996fb924"
	    "27ae41e4649b934ca495991b7852b855");
}

/* str_ct_equal compares whole strings. */
static void
test_str_ct_equal(void **state)
{
	assert_true(str_ct_equal("secret", "secret"));
	assert_true(str_ct_equal("", ""));
	assert_false(str_ct_equal("secret", "secreT"));
	assert_false(str_ct_equal("secret", "secret2"));
	assert_false(str_ct_equal("secret2", "secret"));
	assert_false(str_ct_equal("", "x"));
	assert_false(str_ct_equal(NULL, "x"));
	assert_false(str_ct_equal("x", NULL));
}

/* Clocks move forward and agree with time(). */
static void
test_clocks(void **state)
{
	int64_t	m1, m2, w;

	m1 = now_mono_ms();
	usleep(20000);
	m2 = now_mono_ms();
	assert_true(m2 - m1 >= 20 && m2 - m1 < 5000);
	w = now_wall_ms();
	assert_true(w / 1000 - (int64_t)time(NULL) <= 1 &&
	    (int64_t)time(NULL) - w / 1000 <= 1);
}

/* iso8601 formats UTC times. */
static void
test_iso8601(void **state)
{
	char	out[32];

	iso8601(0, out);
	assert_string_equal(out, "1970-01-01T00:00:00Z");
	iso8601(1796059213, out);
	assert_string_equal(out, "2026-11-30T17:20:13Z");
	iso8601(951782400, out);
	assert_string_equal(out, "2000-02-29T00:00:00Z");
	iso8601(INT64_MAX, out);
	assert_string_equal(out, "");
}

/* path_join adds exactly one slash. */
static void
test_path_join(void **state)
{
	char	*p;

	p = path_join("/run/hg", "sandbox.sock");
	assert_string_equal(p, "/run/hg/sandbox.sock");
	free(p);
	p = path_join("/", "etc");
	assert_string_equal(p, "/etc");
	free(p);
	p = path_join("rel", "x");
	assert_string_equal(p, "rel/x");
	free(p);
}

/* str_is_hex: exactly len lower-case hex digits, nothing else. */
static void
test_str_is_hex(void **state)
{
	assert_true(str_is_hex("0123456789abcdef", 16));
	assert_false(str_is_hex("0123456789abcdeF", 16));	/* upper case */
	assert_false(str_is_hex("0123456789abcde", 16));	/* short */
	assert_false(str_is_hex("0123456789abcdef0", 16));	/* long */
	assert_false(str_is_hex("../../etc/passwd", 16));
	assert_false(str_is_hex("0123456789abcdeg", 16));
	assert_false(str_is_hex(NULL, 16));
	assert_true(str_is_hex("", 0));
}

/* str_is_user_name: ^[a-z_][a-z0-9_.-]{0,31}$, as users.json holds. */
static void
test_str_is_user_name(void **state)
{
	const char	*good[] = { "a", "alice", "_svc", "a.b-c_9",
	    "abcdefghijklmnopqrstuvwxyz012345" };
	const char	*bad[] = { "", "Alice", "9lives", "-a", ".a", "a b",
	    "a/b", "a:b", "\xc3\xa9", "abcdefghijklmnopqrstuvwxyz0123456",
	    "../x", "..", "x/../y", "a\n" };
	size_t		 i;

	for (i = 0; i < sizeof good / sizeof good[0]; i++)
		if (!str_is_user_name(good[i]))
			fail_msg("refused %s", good[i]);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (str_is_user_name(bad[i]))
			fail_msg("accepted %s", bad[i]);
	assert_false(str_is_user_name(NULL));
}

/* term_id_parse: "HEX16" and "HOST.HEX16", nothing else. */
static void
test_term_id_parse(void **state)
{
	const char	*bad[] = { "", "0123456789abcde", "0123456789abcdeF",
	    "0123456789abcdef0", ".0123456789abcdef", "h1.", "h1.0123",
	    "H1.0123456789abcdef", "-h.0123456789abcdef",
	    "h_1.0123456789abcdef", "h1..0123456789abcdef",
	    "h1.0123456789abcdef.", "a.b.0123456789abcdef",
	    "abcdefghijklmnopqrstuvwxyz0123456.0123456789abcdef",
	    "h1.0123456789abcdeg", "h1/0123456789abcdef" };
	char		 host[33], id[17];
	size_t		 i;

	assert_int_equal(term_id_parse("0123456789abcdef", 16, host, id), 0);
	assert_string_equal(host, "");
	assert_string_equal(id, "0123456789abcdef");
	assert_int_equal(term_id_parse("h2.0123456789abcdef", 19, host, id),
	    0);
	assert_string_equal(host, "h2");
	assert_string_equal(id, "0123456789abcdef");
	/* The length bounds the id: a path's "/ws" after it is not in it. */
	assert_int_equal(term_id_parse("web-3.00000000000000ff/ws", 22, host,
	    id), 0);
	assert_string_equal(host, "web-3");
	assert_string_equal(id, "00000000000000ff");
	assert_int_equal(term_id_parse(
	    "abcdefghijklmnopqrstuvwxyz012345.0123456789abcdef", 49, host,
	    id), 0);
	assert_string_equal(host, "abcdefghijklmnopqrstuvwxyz012345");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (term_id_parse(bad[i], strlen(bad[i]), host, id) != -1)
			fail_msg("accepted %s", bad[i]);
	/* A NUL inside the length is not an id either. */
	assert_int_equal(term_id_parse("h1.0123456789ab\0def", 19, host, id),
	    -1);
	assert_int_equal(term_id_parse(NULL, 0, host, id), -1);
	assert_true(str_is_host_id("h1"));
	assert_true(str_is_host_id("0"));
	assert_false(str_is_host_id("-h"));
	assert_false(str_is_host_id(""));
	assert_false(str_is_host_id("abcdefghijklmnopqrstuvwxyz0123456"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_helpers),
		cmocka_unit_test(test_str_is_hex),
		cmocka_unit_test(test_str_is_user_name),
		cmocka_unit_test(test_term_id_parse),
		cmocka_unit_test_setup_teardown(test_write_atomic, setup_dir,
		    teardown_dir),
		cmocka_unit_test_setup_teardown(test_write_atomic_errors,
		    setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_file_read_limits,
		    setup_dir, teardown_dir),
		cmocka_unit_test(test_rand_token),
		cmocka_unit_test(test_rand_token_long),
		cmocka_unit_test(test_sha256),
		cmocka_unit_test(test_str_ct_equal),
		cmocka_unit_test(test_clocks),
		cmocka_unit_test(test_iso8601),
		cmocka_unit_test(test_path_join),
	};

	return (cmocka_run_group_tests(tests, NULL, NULL));
}
