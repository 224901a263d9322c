/*
 * Unit tests for brokerd/audit.c: the hash-chained, HMAC'ed audit log, its
 * rotation, verification against each kind of tampering, and queries.
 */

#include <sys/stat.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "../../brokerd/brokerd.h"

#define BIG_ROTATE	(1L << 30)

struct fixture {
	char	 dir[64];
	char	*log;
	char	 err[512];
};

struct lines {
	char	**v;
	size_t	  n;
};

/* A fresh state directory with the audit log opened in it. */
static int
setup(void **state)
{
	struct fixture	*f;

	f = calloc(1, sizeof *f);
	assert_non_null(f);
	snprintf(f->dir, sizeof f->dir, "/tmp/test_audit.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->log = path_join(f->dir, "audit.log");
	assert_int_equal(audit_init(f->dir, BIG_ROTATE, 0, f->err,
	    sizeof f->err), 0);
	*state = f;
	return 0;
}

/* Close the log and remove the state directory with all its files. */
static int
teardown(void **state)
{
	struct fixture	*f = *state;
	struct dirent	*de;
	DIR		*d;
	char		*p;

	audit_close();
	assert_non_null(d = opendir(f->dir));
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		p = path_join(f->dir, de->d_name);
		unlink(p);
		free(p);
	}
	closedir(d);
	assert_int_equal(rmdir(f->dir), 0);
	free(f->log);
	free(f);
	return 0;
}

/* The lines of a file, without their newlines (a cut last one included). */
static struct lines
read_lines(const char *path)
{
	struct lines	 l = { NULL, 0 };
	char		*text, *p, *nl;
	size_t		 len;

	text = file_read(path, 64 << 20, &len);
	assert_non_null(text);
	for (p = text; p < text + len; p = nl + 1) {
		if ((nl = memchr(p, '\n', text + len - p)) == NULL)
			nl = text + len;
		l.v = realloc(l.v, (l.n + 1) * sizeof *l.v);
		assert_non_null(l.v);
		l.v[l.n++] = strndup(p, nl - p);
	}
	free(text);
	return l;
}

/* Write lines back, each with a newline; the last one without if cut. */
static void
write_lines(const char *path, struct lines *l, int cut_last)
{
	FILE	*fp;
	size_t	 i;

	assert_non_null(fp = fopen(path, "w"));
	for (i = 0; i < l->n; i++)
		fprintf(fp, "%s%s", l->v[i], cut_last && i == l->n - 1 ?
		    "" : "\n");
	assert_int_equal(fclose(fp), 0);
}

static void
free_lines(struct lines *l)
{
	size_t	i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

/* Append n plain records and check their seqs follow on. */
static void
append_n(int n)
{
	int64_t	first = audit_last_seq();
	int	i;

	for (i = 1; i <= n; i++)
		assert_int_equal(audit_append(i % 2 ? "login" : "spawn",
		    i % 3 ? "alice" : "bob", "0123abcd", i % 4 != 0, "because",
		    NULL, 1), first + i);
}

/* Verification must fail at seq want with a message containing what. */
static void
expect_bad(struct fixture *f, int64_t want, const char *what)
{
	int64_t	n, bad;

	assert_int_equal(audit_verify(&n, &bad, f->err, sizeof f->err), -1);
	if (strstr(f->err, what) == NULL)
		fail_msg("\"%s\" does not say \"%s\"", f->err, what);
	assert_int_equal(bad, want);
}

/* Verification must pass with n records. */
static void
expect_ok(struct fixture *f, int64_t want)
{
	int64_t	n, bad;

	if (audit_verify(&n, &bad, f->err, sizeof f->err) != 0)
		fail_msg("verify: seq %lld: %s", (long long)bad, f->err);
	assert_int_equal(n, want);
}

/* A member of a parsed line. */
static struct json_object *
line_obj(const char *line)
{
	struct json_object	*o;

	assert_non_null(o = json_tokener_parse(line));
	assert_true(json_object_is_type(o, json_type_object));
	return o;
}

/* Records chain from seq 1 with prev hashes and verify. */
static void
test_round_trip(void **state)
{
	struct fixture		*f = *state;
	struct json_object	*o;
	struct lines		 l;
	char			 hash[65];
	int64_t			 seq;
	size_t			 i;

	expect_ok(f, 0);
	append_n(5);
	expect_ok(f, 5);
	l = read_lines(f->log);
	assert_int_equal(l.n, 5);
	for (i = 0; i < l.n; i++) {
		o = line_obj(l.v[i]);
		assert_int_equal(json_int(o, "seq", &seq), 0);
		assert_int_equal(seq, (int64_t)i + 1);
		if (i == 0)
			assert_string_equal(json_str(o, "prev"),
			    "0000000000000000000000000000000000000000000000000"
			    "000000000000000");
		else {
			sha256_hex(l.v[i - 1], strlen(l.v[i - 1]), hash);
			assert_string_equal(json_str(o, "prev"), hash);
		}
		assert_non_null(json_str(o, "hmac"));
		assert_int_equal(strlen(json_str(o, "hmac")), 64);
		/* ISO 8601 UTC with milliseconds */
		assert_int_equal(strlen(json_str(o, "time")), 24);
		assert_int_equal(json_str(o, "time")[23], 'Z');
		assert_int_equal(json_str(o, "time")[19], '.');
		json_object_put(o);
	}
	/* The hmac member is last, and the line ends right after it. */
	assert_string_equal(l.v[0] + strlen(l.v[0]) - 2, "\"}");
	assert_non_null(strstr(l.v[0], ",\"hmac\":\""));
	free_lines(&l);
}

/* The key is 32 bytes, mode 0600, and survives a reopen. */
static void
test_key_file(void **state)
{
	struct fixture	*f = *state;
	struct stat	 st;
	char		*key;

	key = path_join(f->dir, "audit.key");
	assert_int_equal(stat(key, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, 32);
	append_n(2);
	audit_close();
	assert_int_equal(audit_init(f->dir, BIG_ROTATE, 0, f->err,
	    sizeof f->err), 0);
	/* The same key again: the old records still verify. */
	expect_ok(f, 2);

	/* A key others can read is refused. */
	audit_close();
	assert_int_equal(chmod(key, 0644), 0);
	assert_int_equal(audit_init(f->dir, BIG_ROTATE, 0, f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "chmod 600"));
	assert_int_equal(chmod(key, 0600), 0);

	/* A missing key with a log in place is refused, not replaced. */
	assert_int_equal(unlink(key), 0);
	assert_int_equal(audit_init(f->dir, BIG_ROTATE, 0, f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "missing"));
	assert_int_equal(stat(key, &st), -1);
	free(key);
}

/* Newlines, quotes and control characters in fields stay on one line. */
static void
test_untrusted_fields(void **state)
{
	struct fixture		*f = *state;
	struct json_object	*detail, *arr, *rec, *d;
	struct lines		 l;
	const char		*user = "eve\n{\"seq\":99}\r\n";
	const char		*reason = "said \"hi\"\\\n\x01\x1b[31m/x";
	const char		*cmd = "echo \"a\nb\" > /tmp/x\n\n";

	detail = json_object_new_object();
	json_object_object_add(detail, "command",
	    json_object_new_string(cmd));
	assert_int_equal(audit_append("login_failed", user, NULL, 0, reason,
	    detail, 1), 1);
	l = read_lines(f->log);
	assert_int_equal(l.n, 1);
	free_lines(&l);
	expect_ok(f, 1);

	arr = audit_query(NULL, NULL, 0, 0, 10);
	assert_int_equal(json_object_array_length(arr), 1);
	rec = json_object_array_get_idx(arr, 0);
	assert_string_equal(json_str(rec, "user"), user);
	assert_string_equal(json_str(rec, "reason"), reason);
	assert_true(json_object_object_get_ex(rec, "detail", &d));
	assert_string_equal(json_str(d, "command"), cmd);
	assert_int_equal(json_object_get_boolean(json_object_object_get(rec,
	    "allowed")), 0);
	assert_true(json_object_is_type(json_object_object_get(rec,
	    "session"), json_type_null));
	json_object_put(arr);
}

/* Long fields are cut and a huge detail is replaced, within the limit. */
static void
test_large_record(void **state)
{
	struct fixture		*f = *state;
	struct json_object	*detail, *arr, *d;
	struct lines		 l;
	char			*big;

	big = malloc(100000);
	assert_non_null(big);
	memset(big, '/', 99999);
	big[99999] = '\0';
	detail = json_object_new_object();
	json_object_object_add(detail, "command", json_object_new_string(big));
	assert_int_equal(audit_append("spawn", big, NULL, 1, big, detail, 1),
	    1);
	l = read_lines(f->log);
	assert_int_equal(l.n, 1);
	assert_true(strlen(l.v[0]) <= 16 * 1024);
	free_lines(&l);
	expect_ok(f, 1);
	arr = audit_query(NULL, NULL, 0, 0, 0);
	assert_true(json_object_object_get_ex(json_object_array_get_idx(arr,
	    0), "detail", &d));
	assert_non_null(json_str(d, "omitted"));
	assert_int_equal(strlen(json_str(json_object_array_get_idx(arr, 0),
	    "user")), 512);
	json_object_put(arr);

	/* A cut never splits a UTF-8 character: "é" would straddle 512. */
	memset(big, 'a', 511);
	strcpy(big + 511, "\xc3\xa9zzz");
	assert_int_equal(audit_append("login", big, NULL, 1, NULL, NULL, 1),
	    2);
	arr = audit_query(NULL, NULL, 0, 0, 1);
	assert_int_equal(strlen(json_str(json_object_array_get_idx(arr, 0),
	    "user")), 511);
	json_object_put(arr);
	expect_ok(f, 2);
	free(big);
}

/* One changed byte in a middle record: its HMAC fails, at its seq. */
static void
test_edited(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;
	char		*p;

	append_n(5);
	l = read_lines(f->log);
	assert_non_null(p = strstr(l.v[2], "because"));
	p[0] = 'B';
	write_lines(f->log, &l, 0);
	free_lines(&l);
	expect_bad(f, 3, "HMAC");
}

/* A changed seq is caught by the HMAC too, not taken as a gap. */
static void
test_edited_seq(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;
	char		*p;

	append_n(5);
	l = read_lines(f->log);
	assert_non_null(p = strstr(l.v[3], "\"seq\":4"));
	p[6] = '7';
	write_lines(f->log, &l, 0);
	free_lines(&l);
	expect_bad(f, 4, "HMAC");
}

/* A deleted middle record: the gap is reported at the missing seq. */
static void
test_deleted(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;

	append_n(5);
	l = read_lines(f->log);
	free(l.v[2]);
	memmove(&l.v[2], &l.v[3], 2 * sizeof *l.v);
	l.n--;
	write_lines(f->log, &l, 0);
	free_lines(&l);
	expect_bad(f, 3, "missing");
}

/*
 * Sign text (a record without its hmac, ending in "}") with the log's key,
 * as only brokerd can: a malloc'ed line.
 */
static char *
sign_with_key(struct fixture *f, const char *text)
{
	unsigned char	 md[32];
	unsigned int	 mdlen;
	char		*keypath, *key, *line, hex[65];
	size_t		 keylen, len, i;

	keypath = path_join(f->dir, "audit.key");
	assert_non_null(key = file_read(keypath, 64, &keylen));
	assert_int_equal(keylen, 32);
	len = strlen(text);
	assert_non_null(HMAC(EVP_sha256(), key, keylen,
	    (const unsigned char *)text, len, md, &mdlen));
	for (i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	assert_true(asprintf(&line, "%.*s,\"hmac\":\"%s\"}", (int)len - 1,
	    text, hex) > 0);
	free(keypath);
	free(key);
	return line;
}

/* A forged record with the right seq and prev but no key is caught. */
static void
test_inserted(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;
	char		 hash[65], forged[512];

	append_n(5);
	l = read_lines(f->log);
	sha256_hex(l.v[1], strlen(l.v[1]), hash);
	snprintf(forged, sizeof forged, "{\"seq\":3,\"time\":"
	    "\"2026-01-01T00:00:00.000Z\",\"action\":\"mode_granted\","
	    "\"user\":\"mallory\",\"session\":null,\"allowed\":true,"
	    "\"reason\":null,\"detail\":{},\"prev\":\"%s\",\"hmac\":\"%s\"}",
	    hash, hash);
	l.v = realloc(l.v, (l.n + 1) * sizeof *l.v);
	memmove(&l.v[3], &l.v[2], 3 * sizeof *l.v);
	l.v[2] = strdup(forged);
	l.n++;
	write_lines(f->log, &l, 0);
	free_lines(&l);
	expect_bad(f, 3, "HMAC");
}

/*
 * A record signed with the key but chained to something else (a record
 * spliced from another log that shares the key) breaks at prev.
 */
static void
test_wrong_prev(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;
	char		 text[512];

	append_n(5);
	l = read_lines(f->log);
	snprintf(text, sizeof text, "{\"seq\":3,\"time\":"
	    "\"2026-01-01T00:00:00.000Z\",\"action\":\"login\","
	    "\"user\":\"alice\",\"session\":null,\"allowed\":true,"
	    "\"reason\":null,\"detail\":{},\"prev\":\"%064d\"}", 7);
	free(l.v[2]);
	l.v[2] = sign_with_key(f, text);
	write_lines(f->log, &l, 0);
	free_lines(&l);
	expect_bad(f, 3, "prev is not the hash of record 2");
}

/* A signed tail whose seq could not be followed on is refused at start. */
static void
test_seq_too_large(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;
	char		 text[512];

	append_n(2);
	l = read_lines(f->log);
	snprintf(text, sizeof text, "{\"seq\":9223372036854775807,"
	    "\"prev\":\"%064d\"}", 0);
	free(l.v[1]);
	l.v[1] = sign_with_key(f, text);
	write_lines(f->log, &l, 0);
	free_lines(&l);
	expect_bad(f, 2, "no valid seq");
	audit_close();
	assert_int_equal(audit_init(f->dir, BIG_ROTATE, 0, f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "no valid seq"));
}

/* A genuine record copied again further on is caught at that place. */
static void
test_duplicated(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;

	append_n(5);
	l = read_lines(f->log);
	l.v = realloc(l.v, (l.n + 1) * sizeof *l.v);
	memmove(&l.v[4], &l.v[3], 2 * sizeof *l.v);
	l.v[3] = strdup(l.v[1]);
	l.n++;
	write_lines(f->log, &l, 0);
	free_lines(&l);
	expect_bad(f, 4, "again");
}

/* Two swapped records: the first out of place is named. */
static void
test_swapped(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;
	char		*t;

	append_n(5);
	l = read_lines(f->log);
	t = l.v[2];
	l.v[2] = l.v[3];
	l.v[3] = t;
	write_lines(f->log, &l, 0);
	free_lines(&l);
	expect_bad(f, 3, "out of order");
}

/* The last record removed: brokerd knows it wrote seq 5. */
static void
test_truncated(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;

	append_n(5);
	l = read_lines(f->log);
	l.n--;
	write_lines(f->log, &l, 0);
	l.n++;
	free_lines(&l);
	expect_bad(f, 5, "truncated");
}

/* Half a last line: a cut record, and audit_init refuses that tail. */
static void
test_partial_line(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;

	append_n(5);
	l = read_lines(f->log);
	l.v[4][strlen(l.v[4]) / 2] = '\0';
	write_lines(f->log, &l, 1);
	free_lines(&l);
	expect_bad(f, 5, "cut short");
	audit_close();
	assert_int_equal(audit_init(f->dir, BIG_ROTATE, 0, f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "damaged"));
}

/* A line longer than 64 KiB is a bad record, and memory stays bounded. */
static void
test_long_line(void **state)
{
	struct fixture	*f = *state;
	FILE		*fp;
	int		 i;

	append_n(2);
	assert_non_null(fp = fopen(f->log, "a"));
	for (i = 0; i < 200000; i++)
		fputs("{}{}{}{}{}", fp);
	fputs("\n", fp);
	assert_int_equal(fclose(fp), 0);
	expect_bad(f, 3, "longer than");
}

/* A blank line between records is a bad record too. */
static void
test_blank_line(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;

	append_n(3);
	l = read_lines(f->log);
	l.v[1] = realloc(l.v[1], strlen(l.v[1]) + 2);
	strcat(l.v[1], "\n");
	write_lines(f->log, &l, 0);
	free_lines(&l);
	expect_bad(f, 3, "not a record");
}

/* The names of the rotated files of dir, sorted. */
static int
count_rotated(const char *dir)
{
	struct dirent	*de;
	DIR		*d;
	int		 n = 0;

	assert_non_null(d = opendir(dir));
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, "audit.log.", 10) == 0)
			n++;
	closedir(d);
	return n;
}

/* Rotation by size: the chain goes on across files, and tamper is found. */
static void
test_rotation(void **state)
{
	struct fixture		*f = *state;
	struct json_object	*o;
	struct lines		 a, b;
	struct stat		 st;
	char			*p1, *p2, hash[65];
	int64_t			 n;

	audit_close();
	assert_int_equal(audit_init(f->dir, 1000, 0, f->err, sizeof f->err),
	    0);
	append_n(20);
	assert_true(count_rotated(f->dir) >= 3);
	expect_ok(f, 20);

	/* No file is over the size; the first of file 2 chains to file 1. */
	p1 = path_join(f->dir, "audit.log.000001");
	p2 = path_join(f->dir, "audit.log.000002");
	assert_int_equal(stat(p1, &st), 0);
	assert_true(st.st_size <= 1000);
	a = read_lines(p1);
	b = read_lines(p2);
	sha256_hex(a.v[a.n - 1], strlen(a.v[a.n - 1]), hash);
	assert_non_null(strstr(b.v[0], hash));

	/* Resuming after rotation continues the seq. */
	audit_close();
	assert_int_equal(audit_init(f->dir, 1000, 0, f->err, sizeof f->err),
	    0);
	assert_int_equal(audit_last_seq(), 20);
	append_n(5);
	expect_ok(f, 25);

	/* An edit in a rotated file: the seq of that record. */
	assert_non_null(strstr(b.v[1], "because"));
	strstr(b.v[1], "because")[0] = 'X';
	write_lines(p2, &b, 0);
	o = line_obj(b.v[1]);
	assert_int_equal(json_int(o, "seq", &n), 0);
	json_object_put(o);
	expect_bad(f, n, "audit.log.000002");

	/* A whole rotated file removed: its first seq is missing. */
	b.v[1][strstr(b.v[1], "Xecause") - b.v[1]] = 'b';
	write_lines(p2, &b, 0);
	expect_ok(f, 25);
	assert_int_equal(unlink(p2), 0);
	expect_bad(f, a.n + 1, "missing");
	free_lines(&a);
	free_lines(&b);
	free(p1);
	free(p2);
}

/* A number already taken is skipped, never overwritten. */
static void
test_rotation_no_reuse(void **state)
{
	struct fixture	*f = *state;
	struct stat	 st;
	char		*p1, *p2;

	audit_close();
	assert_int_equal(audit_init(f->dir, 1000, 0, f->err, sizeof f->err),
	    0);
	/* Appears after audit_init counted the files. */
	p1 = path_join(f->dir, "audit.log.000001");
	assert_int_equal(file_write_atomic(p1, "", 0, 0600), 0);
	append_n(10);
	assert_int_equal(stat(p1, &st), 0);
	assert_int_equal(st.st_size, 0);
	p2 = path_join(f->dir, "audit.log.000002");
	assert_int_equal(stat(p2, &st), 0);
	assert_true(st.st_size > 0);
	/* An empty file is harmless to the chain and to the tail search. */
	expect_ok(f, 10);
	audit_close();
	assert_int_equal(audit_init(f->dir, 1000, 0, f->err, sizeof f->err),
	    0);
	assert_int_equal(audit_last_seq(), 10);
	free(p1);
	free(p2);
}

/* A FIFO among the log's files is reported, not opened for good. */
static void
test_not_regular(void **state)
{
	struct fixture	*f = *state;
	char		*p;

	append_n(2);
	p = path_join(f->dir, "audit.log.000009");
	assert_int_equal(mkfifo(p, 0600), 0);
	expect_bad(f, 1, "not a regular file");
	free(p);
}

/* audit_init on an existing log resumes the seq and the prev hash. */
static void
test_resume(void **state)
{
	struct fixture		*f = *state;
	struct lines		 l;
	struct json_object	*o;
	char			 hash[65];
	char			*p;

	append_n(3);
	audit_close();
	assert_int_equal(audit_init(f->dir, BIG_ROTATE, 0, f->err,
	    sizeof f->err), 0);
	assert_int_equal(audit_last_seq(), 3);
	assert_int_equal(audit_append("logout", "alice", NULL, 1, NULL, NULL,
	    0), 4);
	l = read_lines(f->log);
	assert_int_equal(l.n, 4);
	sha256_hex(l.v[2], strlen(l.v[2]), hash);
	o = line_obj(l.v[3]);
	assert_string_equal(json_str(o, "prev"), hash);
	json_object_put(o);
	free_lines(&l);
	expect_ok(f, 4);

	/* audit.log gone after a rotation: the tail is in the newest file. */
	audit_close();
	p = path_join(f->dir, "audit.log.000007");
	assert_int_equal(rename(f->log, p), 0);
	free(p);
	assert_int_equal(audit_init(f->dir, BIG_ROTATE, 0, f->err,
	    sizeof f->err), 0);
	assert_int_equal(audit_last_seq(), 4);
	append_n(1);
	expect_ok(f, 5);
}

/* Set the time of record i (from 0) of the log, a same-length string. */
static void
set_time(struct lines *l, size_t i, const char *when)
{
	char	*p;

	assert_non_null(p = strstr(l->v[i], "\"time\":\""));
	memcpy(p + 8, when, 24);
}

/* A query's seqs as "1,2,3". */
static void
query_seqs(struct json_object *arr, char *out, size_t outsz)
{
	int64_t	seq;
	size_t	i;

	out[0] = '\0';
	for (i = 0; i < json_object_array_length(arr); i++) {
		assert_int_equal(json_int(json_object_array_get_idx(arr, i),
		    "seq", &seq), 0);
		snprintf(out + strlen(out), outsz - strlen(out), "%s%lld",
		    i ? "," : "", (long long)seq);
	}
	json_object_put(arr);
}

/* Queries filter by user, action, time and limit, newest last. */
static void
test_query(void **state)
{
	struct fixture	*f = *state;
	struct lines	 l;
	char		 s[256];
	int64_t		 t0, t1;
	int		 more;

	/* odd seqs login, even spawn; seq % 3 == 0 bob, else alice */
	append_n(6);
	l = read_lines(f->log);
	set_time(&l, 0, "2026-01-01T00:00:00.000Z");
	set_time(&l, 1, "2026-01-01T00:00:10.500Z");
	set_time(&l, 2, "2026-01-01T00:00:11.000Z");
	set_time(&l, 3, "2026-01-02T00:00:00.000Z");
	set_time(&l, 4, "2026-01-03T12:00:00.999Z");
	set_time(&l, 5, "2026-02-01T00:00:00.000Z");
	write_lines(f->log, &l, 0);
	free_lines(&l);

	query_seqs(audit_query(NULL, NULL, 0, 0, 0), s, sizeof s);
	assert_string_equal(s, "1,2,3,4,5,6");
	query_seqs(audit_query("bob", NULL, 0, 0, 0), s, sizeof s);
	assert_string_equal(s, "3,6");
	query_seqs(audit_query(NULL, "spawn", 0, 0, 0), s, sizeof s);
	assert_string_equal(s, "2,4,6");
	query_seqs(audit_query("alice", "login", 0, 0, 0), s, sizeof s);
	assert_string_equal(s, "1,5");
	query_seqs(audit_query("nobody", NULL, 0, 0, 0), s, sizeof s);
	assert_string_equal(s, "");
	query_seqs(audit_query(NULL, NULL, 0, 0, 2), s, sizeof s);
	assert_string_equal(s, "5,6");

	/* since and until are whole seconds, both inclusive */
	assert_int_equal(audit_time_parse("2026-01-01T00:00:10Z", &t0), 0);
	assert_int_equal(audit_time_parse("2026-01-02", &t1), 0);
	query_seqs(audit_query(NULL, NULL, t0, t1, 0), s, sizeof s);
	assert_string_equal(s, "2,3,4");
	query_seqs(audit_query(NULL, NULL, t0 + 1, 0, 0), s, sizeof s);
	assert_string_equal(s, "3,4,5,6");
	query_seqs(audit_query(NULL, NULL, 0, t0 - 1, 0), s, sizeof s);
	assert_string_equal(s, "1");
	query_seqs(audit_query(NULL, "spawn", t0, 0, 1), s, sizeof s);
	assert_string_equal(s, "6");

	/* pages below a seq, with "more" when older matches remain */
	query_seqs(audit_query_page(NULL, NULL, 0, 0, 5, 2, &more), s,
	    sizeof s);
	assert_string_equal(s, "3,4");
	assert_int_equal(more, 1);
	query_seqs(audit_query_page(NULL, NULL, 0, 0, 3, 2, &more), s,
	    sizeof s);
	assert_string_equal(s, "1,2");
	assert_int_equal(more, 0);
}

/* ISO 8601 forms people type, and what is refused. */
static void
test_time_parse(void **state)
{
	int64_t	t;

	assert_int_equal(audit_time_parse("1970-01-01", &t), 0);
	assert_int_equal(t, 0);
	assert_int_equal(audit_time_parse("2026-11-29T17:20:13Z", &t), 0);
	assert_int_equal(t, 1795972813);
	assert_int_equal(audit_time_parse("2026-11-29 17:20:13.999", &t), 0);
	assert_int_equal(t, 1795972813);
	assert_int_equal(audit_time_parse("2026-11-29T18:20:13+01:00", &t),
	    0);
	assert_int_equal(t, 1795972813);
	assert_int_equal(audit_time_parse("2026-11-29T17:20", &t), 0);
	assert_int_equal(t, 1795972800);
	assert_int_equal(audit_time_parse("2026-02-31", &t), -1);
	assert_int_equal(audit_time_parse("2026-11-29T25:00Z", &t), -1);
	assert_int_equal(audit_time_parse("2026-11-29Tx", &t), -1);
	assert_int_equal(audit_time_parse("2026-11", &t), -1);
	assert_int_equal(audit_time_parse("", &t), -1);
	assert_int_equal(audit_time_parse("1795972813", &t), -1);
	assert_int_equal(audit_time_parse("2026-11-29T17:20:13Zjunk", &t), -1);
}

/* audit_trim keeps the newest records that fit in one message. */
static void
test_trim(void **state)
{
	struct json_object	*arr;
	char			 s[256];
	size_t			 len, dropped;

	append_n(50);
	arr = audit_query(NULL, NULL, 0, 0, 0);
	assert_int_equal(audit_trim(arr, 1 << 20), 0);
	dropped = audit_trim(arr, 2000);
	assert_int_equal(dropped, 50 - json_object_array_length(arr));
	json_object_to_json_string_length(arr, JSON_C_TO_STRING_PLAIN, &len);
	assert_true(len <= 2000);
	assert_true(json_object_array_length(arr) >= 3);
	/* a single record too large becomes a stub with its seq */
	len = json_object_array_length(arr);
	assert_int_equal(audit_trim(arr, 150), len - 1);
	assert_non_null(json_str(json_object_array_get_idx(arr, 0),
	    "omitted"));
	query_seqs(arr, s, sizeof s);
	assert_string_equal(s, "50");
}

/* Without an open log, appends fail (and free detail) and verify says so. */
static void
test_not_open(void **state)
{
	struct fixture	*f = *state;
	int64_t		 n, bad;

	audit_close();
	assert_int_equal(audit_append("login", "a", NULL, 1, NULL,
	    json_object_new_object(), 1), -1);
	assert_int_equal(audit_verify(&n, &bad, f->err, sizeof f->err), -1);
	assert_int_equal(bad, 0);
}

/*
 * With a host set, each record has "host" right after "time"; a log whose
 * older lines have none (written before) still verifies, and so does one
 * that goes on after a restart under another host id.
 */
static void
test_host_member(void **state)
{
	struct fixture		*f = *state;
	struct json_object	*o;
	struct json_object_iterator it, end;
	struct lines		 l;
	const char		*want[] = { "seq", "time", "host", "action",
				    "user", "session", "allowed", "reason",
				    "detail", "prev", "hmac" };
	int64_t			 n, bad;
	size_t			 i;

	audit_set_host(NULL);
	append_n(2);
	audit_set_host("h1");
	append_n(2);
	audit_close();
	assert_int_equal(audit_init(f->dir, BIG_ROTATE, 0, f->err,
	    sizeof f->err), 0);
	audit_set_host("h2");
	append_n(1);
	assert_int_equal(audit_verify(&n, &bad, f->err, sizeof f->err), 0);
	assert_int_equal(n, 5);
	l = read_lines(f->log);
	assert_int_equal(l.n, 5);
	for (i = 0; i < l.n; i++) {
		assert_non_null(o = json_tokener_parse(l.v[i]));
		if (i < 2)
			assert_null(json_str(o, "host"));
		else {
			assert_string_equal(json_str(o, "host"),
			    i < 4 ? "h1" : "h2");
			it = json_object_iter_begin(o);
			end = json_object_iter_end(o);
			for (n = 0; !json_object_iter_equal(&it, &end);
			    n++, json_object_iter_next(&it))
				assert_string_equal(
				    json_object_iter_peek_name(&it), want[n]);
			assert_int_equal(n, 11);
		}
		json_object_put(o);
	}
	free_lines(&l);
	audit_set_host(NULL);
}

/*
 * audit_line_make and audit_line_check, what another keeper of the chain
 * uses: a made line checks, with its seq and SHA-256; one byte changed or
 * a line made under another key does not. The key id is 16 hex digits of
 * the key's SHA-256.
 */
static void
test_line_make_check(void **state)
{
	struct fixture		*f = *state;
	struct json_object	*rec;
	unsigned char		 key[32];
	char			*line, hash[65], want[65], id[17], *kp;
	size_t			 len, klen;
	int64_t			 seq;

	rec = json_object_new_object();
	json_object_object_add(rec, "seq", NULL);
	json_object_object_add(rec, "action", json_object_new_string("x"));
	json_object_object_add(rec, "prev", NULL);
	assert_int_equal(audit_line_make(rec, 7, "ab", &line, &len), 0);
	assert_int_equal(strlen(line), len);
	assert_int_equal(audit_line_check(line, len, &seq, hash, f->err,
	    sizeof f->err), -1);	/* "ab" is no hash */
	free(line);
	assert_int_equal(audit_line_make(rec, 7, audit_last_hash(), &line,
	    &len), 0);
	assert_int_equal(audit_line_check(line, len, &seq, hash, f->err,
	    sizeof f->err), 0);
	assert_int_equal(seq, 7);
	sha256_hex(line, len, want);
	assert_string_equal(hash, want);
	assert_non_null(strstr(line, "\"seq\":7,\"action\":\"x\",\"prev\""));
	line[10] ^= 1;
	assert_int_equal(audit_line_check(line, len, &seq, hash, f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "HMAC does not match"));
	free(line);
	json_object_put(rec);

	assert_non_null(kp = file_read(audit_key_path(), 64, &klen));
	assert_int_equal(klen, 32);
	memcpy(key, kp, 32);
	free(kp);
	sha256_hex(key, 32, want);
	audit_key_id(id);
	assert_int_equal(strlen(id), 16);
	assert_memory_equal(id, want, 16);
}

/* The path of the lowest-numbered rotated file in dir, or NULL. */
static char *
oldest_rotated(const char *dir)
{
	struct dirent		*de;
	DIR			*d;
	unsigned long long	 num, best = 0;

	assert_non_null(d = opendir(dir));
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, "audit.log.", 10) == 0) {
			num = strtoull(de->d_name + 10, NULL, 10);
			if (best == 0 || num < best)
				best = num;
		}
	closedir(d);
	if (best == 0)
		return NULL;
	d = NULL;
	{
		char	name[64];

		snprintf(name, sizeof name, "audit.log.%06llu", best);
		return path_join(dir, name);
	}
}

/* Remove a directory of archived files. */
static void
remove_dir(const char *dir)
{
	struct dirent	*de;
	DIR		*d;
	char		*p;

	assert_non_null(d = opendir(dir));
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		p = path_join(dir, de->d_name);
		unlink(p);
		free(p);
	}
	closedir(d);
	assert_int_equal(rmdir(dir), 0);
}

/*
 * Archiving: the old rotated files move out, an audit_archived record
 * names them, and verify accepts the gap it names and no other.
 */
static void
test_archive(void **state)
{
	struct fixture		*f = *state;
	struct audit_verdict	 vd;
	struct json_object	*res, *files;
	struct lines		 l;
	const char		*name;
	char			*arch, *p1, *moved, *extra;
	size_t			 i;
	int64_t			 anchor, last;
	int			 rotated;

	audit_close();
	assert_int_equal(audit_init(f->dir, 1000, 0, f->err, sizeof f->err),
	    0);
	append_n(20);
	rotated = count_rotated(f->dir);
	assert_true(rotated >= 3);
	arch = path_join(f->dir, "arch");

	/* Nothing older than 2000: nothing moves, nothing is written. */
	assert_int_equal(audit_archive(INT64_C(946684800000), arch, &res,
	    f->err, sizeof f->err), 0);
	assert_non_null(json_object_object_get_ex(res, "files", &files));
	assert_int_equal(json_object_array_length(files), 0);
	json_object_put(res);
	assert_int_equal(audit_last_seq(), 20);

	/* Everything older than tomorrow: every rotated file, not the head. */
	if (audit_archive(now_wall_ms() + 86400000, arch, &res, f->err,
	    sizeof f->err) != 0)
		fail_msg("archive: %s", f->err);
	assert_int_equal(json_int(res, "anchor_seq", &anchor), 0);
	assert_int_equal(anchor, 21);
	assert_int_equal(json_int(res, "last_seq", &last), 0);
	assert_non_null(json_object_object_get_ex(res, "files", &files));
	assert_int_equal(json_object_array_length(files), rotated);
	for (i = 0; i < (size_t)rotated; i++) {
		name = json_object_get_string(
		    json_object_array_get_idx(files, i));
		p1 = path_join(f->dir, name);
		moved = path_join(arch, name);
		assert_int_equal(access(p1, F_OK), -1);
		assert_int_equal(access(moved, F_OK), 0);
		free(p1);
		free(moved);
	}
	json_object_put(res);
	/* (The anchor itself may have rotated audit.log once more.) */
	assert_true(count_rotated(f->dir) <= 1);

	/* verify: from the first record left, vouched for by the anchor. */
	if (audit_verify_chain(0, NULL, &vd, f->err, sizeof f->err) != 0)
		fail_msg("verify: %s", f->err);
	assert_int_equal(vd.first_seq, last + 1);
	assert_int_equal(vd.last_seq, 21);
	assert_int_equal(vd.records, 21 - last);
	assert_int_equal(vd.anchor_seq, 21);
	append_n(3);
	expect_ok(f, 24);

	/* A line appended after, with a wrong HMAC: still an error. */
	l = read_lines(f->log);
	extra = strdup(l.v[l.n - 1]);
	extra[strlen(extra) - 3] = extra[strlen(extra) - 3] == '0' ? '1' : '0';
	l.v = realloc(l.v, (l.n + 1) * sizeof *l.v);
	l.v[l.n++] = extra;
	write_lines(f->log, &l, 0);
	expect_bad(f, 25, "HMAC does not match");
	l.n--;
	write_lines(f->log, &l, 0);
	expect_ok(f, 24);

	free_lines(&l);

	/* More rotations, then the oldest file left removed: the gap. */
	append_n(20);
	p1 = oldest_rotated(f->dir);
	assert_non_null(p1);
	assert_int_equal(unlink(p1), 0);
	expect_bad(f, 1, "missing (deleted, or records out of order)");
	free(p1);
	remove_dir(arch);
	free(arch);
}

/* The names and sizes of a directory's entries, one "name size" a line. */
static char *
dir_listing(const char *dir)
{
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	char		*out = NULL, *p, line[512];
	size_t		 len = 0;

	assert_non_null(d = opendir(dir));
	while ((de = readdir(d)) != NULL) {
		p = path_join(dir, de->d_name);
		assert_int_equal(lstat(p, &st), 0);
		free(p);
		snprintf(line, sizeof line, "%s %lld %o %lld.%09ld\n",
		    de->d_name, (long long)st.st_size, (unsigned)st.st_mode,
		    (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
		out = realloc(out, len + strlen(line) + 1);
		memcpy(out + len, line, strlen(line) + 1);
		len += strlen(line);
	}
	closedir(d);
	return out;
}

/* audit_open_dir: a copy is checked and left exactly as it was. */
static void
test_open_dir(void **state)
{
	struct fixture		*f = *state;
	struct audit_verdict	 vd;
	struct lines		 l;
	char			*before, *after, *key;

	audit_close();
	assert_int_equal(audit_init(f->dir, 1000, 0, f->err, sizeof f->err),
	    0);
	append_n(12);
	audit_close();
	before = dir_listing(f->dir);
	assert_int_equal(audit_open_dir(f->dir, f->err, sizeof f->err), 0);
	if (audit_verify_chain(0, NULL, &vd, f->err, sizeof f->err) != 0)
		fail_msg("verify: %s", f->err);
	assert_int_equal(vd.last_seq, 12);
	assert_int_equal(vd.first_seq, 1);
	/* Nothing can be written to it. */
	assert_int_equal(audit_append("login", "alice", NULL, 1, NULL, NULL,
	    0), -1);
	l = read_lines(f->log);
	audit_close();
	after = dir_listing(f->dir);
	assert_string_equal(before, after);
	free(after);

	/* An edit: the same answer as brokerd's. */
	l.v[0][strlen(l.v[0]) - 5] ^= 1;
	write_lines(f->log, &l, 0);
	free_lines(&l);
	free(before);
	before = dir_listing(f->dir);
	assert_int_equal(audit_open_dir(f->dir, f->err, sizeof f->err), 0);
	assert_int_equal(audit_verify_chain(0, NULL, &vd, f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "HMAC does not match"));
	audit_close();
	after = dir_listing(f->dir);
	assert_string_equal(before, after);
	free(after);

	/* No key: refused, and none made. */
	key = path_join(f->dir, "audit.key");
	assert_int_equal(unlink(key), 0);
	assert_int_equal(audit_open_dir(f->dir, f->err, sizeof f->err), -1);
	assert_non_null(strstr(f->err, "cannot read the key"));
	assert_int_equal(access(key, F_OK), -1);
	free(key);
	free(before);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_key_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_untrusted_fields, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_large_record, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_edited, setup, teardown),
		cmocka_unit_test_setup_teardown(test_edited_seq, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_deleted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inserted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_prev, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_seq_too_large, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_duplicated, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_swapped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_partial_line, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_long_line, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_blank_line, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_archive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rotation, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_rotation_no_reuse, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_not_regular, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_resume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_query, setup, teardown),
		cmocka_unit_test(test_time_parse),
		cmocka_unit_test_setup_teardown(test_trim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_open, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_host_member, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_line_make_check, setup,
		    teardown),
	};

	log_init("test_audit", 1);
	log_setlevel(LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
