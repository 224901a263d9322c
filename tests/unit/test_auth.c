/*
 * Unit tests for brokerd/auth.c: the user store and password checks.
 */

#include <sys/stat.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../brokerd/brokerd.h"

/*
 * auth.c kills the spawns of a user another host deleted (PostgreSQL
 * store only) through sandbox.c, which these tests of the embedded store
 * never reach: linked, never called.
 */
void	sandbox_kill_user(const char *);

void
sandbox_kill_user(const char *user)
{
	fail_msg("sandbox_kill_user(%s) with the embedded store", user);
}

struct fixture {
	char	dir[64];
	char	*path;		/* users.json, of an earlier release */
	char	*db;		/* store.db, where users are kept */
	char	err[512];
};

/* Open the store and load the users, as brokerd does at start-up. */
static int
start(struct fixture *f)
{
	store_close();
	if (store_sqlite_open_path(f->db, f->err, sizeof f->err) == -1)
		return -1;
	return auth_init(f->dir, f->err, sizeof f->err);
}

/* The same, failing the test when it fails. */
static void
restart(struct fixture *f)
{
	if (start(f) != 0)
		fail_msg("start: %s", f->err);
}

/* A store with nothing in it (and no users.json): a first start. */
static void
start_afresh(struct fixture *f)
{
	char	path[128];

	store_close();
	assert_int_equal(unlink(f->db), 0);
	snprintf(path, sizeof path, "%s-wal", f->db);
	(void)unlink(path);
	(void)unlink(f->path);
	restart(f);
}

/* A fresh state directory with auth_init run on it. */
static int
setup(void **state)
{
	struct fixture	*f;

	f = calloc(1, sizeof *f);
	assert_non_null(f);
	snprintf(f->dir, sizeof f->dir, "/tmp/test_auth.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->path = path_join(f->dir, "users.json");
	f->db = path_join(f->dir, "store.db");
	auth_uid_range(1879048192, 1879113727);
	restart(f);
	*state = f;
	return 0;
}

/* Remove the state directory. */
static int
teardown(void **state)
{
	struct fixture	*f = *state;
	char		 cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	store_close();
	free(f->path);
	free(f->db);
	free(f);
	return 0;
}

/* Write text as the users file. */
static void
write_users(struct fixture *f, const char *text)
{
	assert_int_equal(file_write_atomic(f->path, text, strlen(text), 0600),
	    0);
}

/* Add a user, failing the test if that fails. */
static void
add_ok(struct fixture *f, const char *name, int admin, const char *password)
{
	if (auth_user_add(name, admin, password, f->err, sizeof f->err) != 0)
		fail_msg("auth_user_add %s: %s", name, f->err);
}

/* Names follow ^[a-z_][a-z0-9_.-]{0,31}$. */
static void
test_name_valid(void **state)
{
	const char	*good[] = { "a", "alice", "_svc", "a.b-c_9",
	    "abcdefghijklmnopqrstuvwxyz012345" };
	const char	*bad[] = { "", "Alice", "9lives", "-a", ".a", "a b",
	    "a/b", "a:b", "é", "abcdefghijklmnopqrstuvwxyz0123456" };
	size_t		 i;

	for (i = 0; i < sizeof good / sizeof good[0]; i++)
		assert_true(auth_name_valid(good[i]));
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (auth_name_valid(bad[i]))
			fail_msg("accepted %s", bad[i]);
	}
	assert_false(auth_name_valid(NULL));
}

/* A user added can log in with its password, and with nothing else. */
static void
test_add_verify(void **state)
{
	struct fixture	*f = *state;
	struct user	*u;

	add_ok(f, "alice", 1, "correct horse");
	add_ok(f, "bob", 0, "battery staple");

	u = auth_verify("alice", "correct horse");
	assert_non_null(u);
	assert_string_equal(u->name, "alice");
	assert_true(u->admin);
	assert_true(strncmp(u->hash, "$argon2id$v=19$m=19456,t=2,p=1$",
	    31) == 0);
	u = auth_verify("bob", "battery staple");
	assert_non_null(u);
	assert_false(u->admin);

	assert_null(auth_verify("alice", "correct horsE"));
	assert_null(auth_verify("alice", "battery staple"));
	assert_null(auth_verify("alice", ""));
	assert_null(auth_verify("alice", NULL));
	assert_null(auth_verify("carol", "correct horse"));
	assert_null(auth_verify(NULL, "correct horse"));
	assert_ptr_equal(auth_find("alice"), auth_verify("alice",
	    "correct horse"));
	assert_null(auth_find("carol"));
}

/* An unknown user costs an argon2id verification too. */
static void
test_verify_unknown_is_slow(void **state)
{
	struct fixture	*f = *state;
	int64_t		 start, took;

	add_ok(f, "alice", 0, "correct horse");
	start = now_mono_ms();
	assert_null(auth_verify("nobody", "correct horse"));
	took = now_mono_ms() - start;
	/*
	 * 19 MiB of argon2id takes well over 2 ms anywhere; a path that skips
	 * it takes microseconds. A lower bound only, so a busy machine cannot
	 * make it fail.
	 */
	if (took < 2)
		fail_msg("unknown user took %lld ms", (long long)took);
}

/* Bad names, duplicates and bad passwords are refused with a reason. */
static void
test_add_errors(void **state)
{
	struct fixture	*f = *state;
	char		 big[PASSWORD_MAX + 2];

	add_ok(f, "alice", 0, "correct horse");
	assert_int_equal(auth_user_add("alice", 1, "another one", f->err,
	    sizeof f->err), -1);
	assert_string_equal(f->err, "user alice exists");
	assert_false(auth_find("alice")->admin);

	assert_int_equal(auth_user_add("Bob", 0, "correct horse", f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "invalid user name"));
	assert_int_equal(auth_user_add(NULL, 0, "correct horse", f->err,
	    sizeof f->err), -1);

	assert_int_equal(auth_user_add("bob", 0, "short", f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "8 to 1024 bytes"));
	assert_non_null(strstr(f->err, "NUL"));
	assert_int_equal(auth_user_add("bob", 0, NULL, f->err,
	    sizeof f->err), -1);
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	assert_int_equal(auth_user_add("bob", 0, big, f->err,
	    sizeof f->err), -1);
	assert_null(auth_find("bob"));

	/* The bounds themselves are allowed. */
	big[PASSWORD_MAX] = '\0';
	add_ok(f, "bob", 0, big);
	assert_non_null(auth_verify("bob", big));
	add_ok(f, "carol", 0, "12345678");
	assert_non_null(auth_verify("carol", "12345678"));
}

/*
 * A given argon2id hash is stored as it is and logs in with its password
 * (made by libargon2's argon2id_hash_encoded: t 1, m 8 KiB, p 1, salt
 * "somesalt1234", 32 bytes); anything else is refused with a
 * reason and adds no one.
 */
static void
test_add_hash(void **state)
{
	static const char	*good = "$argon2id$v=19$m=8,t=1,p=1$"
	    "c29tZXNhbHQxMjM0$TPFOs1Rp0379NFmNHYR92CMwNK+5XYUyMFRJM9Rs+dk";
	static const char	*bad[] = {
		"correct horse",
		"$argon2i$v=19$m=8,t=1,p=1$c29tZXNhbHQxMjM0$AAAAAAAAAAA",
		"$argon2id$v=16$m=8,t=1,p=1$c29tZXNhbHQxMjM0$AAAAAAAAAAA",
		"$argon2id$v=19$m=8,t=0,p=1$c29tZXNhbHQxMjM0$AAAAAAAAAAA",
		"$argon2id$v=19$m=7,t=1,p=1$c29tZXNhbHQxMjM0$AAAAAAAAAAA",
		"$argon2id$v=19$m=8,t=1,p=0$c29tZXNhbHQxMjM0$AAAAAAAAAAA",
		"$argon2id$v=19$m= 8,t=1,p=1$c29tZXNhbHQxMjM0$AAAAAAAAAAA",
		"$argon2id$v=19$m=-8,t=1,p=1$c29tZXNhbHQxMjM0$AAAAAAAAAAA",
		"$argon2id$v=19$m=99999999999,t=1,p=1$c29tZXNhbHQxMjM0$AAAAAA",
		"$argon2id$v=19$m=8,t=1,p=1$c29tZQ$AAAAAAAAAAA",
		"$argon2id$v=19$m=8,t=1,p=1$c29tZXNhbHQxMjM0$AA",
		"$argon2id$v=19$m=8,t=1,p=1$c29tZXNhbHQxMjM0$AAAA=AAAAAA",
		"$argon2id$v=19$m=8,t=1,p=1$c29tZXNhbHQxMjM0",
		"$argon2id$v=19$m=8,t=1,p=1$c29tZXNhbHQxMjM0$AAAAAAAAAAA$",
		"",
	};
	struct fixture		*f = *state;
	size_t			 i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_false(auth_hash_valid(bad[i], f->err, sizeof f->err));
		assert_int_equal(auth_user_add_unix("bob", 0, NULL, bad[i],
		    NULL, -1, -1, f->err, sizeof f->err), -1);
		assert_non_null(strstr(f->err, "argon2id"));
		assert_null(auth_find("bob"));
	}
	assert_true(auth_hash_valid(good, f->err, sizeof f->err));
	assert_int_equal(auth_user_add_unix("bob", 0, NULL, good, NULL, -1,
	    -1, f->err, sizeof f->err), 0);
	assert_string_equal(auth_find("bob")->hash, good);
	assert_non_null(auth_verify("bob", "correct horse"));
	assert_null(auth_verify("bob", "wrong horse"));
}

/* Deleting and changing passwords, and their errors. */
static void
test_del_passwd(void **state)
{
	struct fixture	*f = *state;

	assert_int_equal(auth_user_del("bob", f->err, sizeof f->err), -1);
	assert_string_equal(f->err, "no such user bob");
	assert_int_equal(auth_user_passwd("bob", "new password", f->err,
	    sizeof f->err), -1);
	assert_string_equal(f->err, "no such user bob");

	add_ok(f, "alice", 0, "correct horse");
	add_ok(f, "bob", 0, "battery staple");
	assert_int_equal(auth_user_passwd("alice", "short", f->err,
	    sizeof f->err), -1);
	assert_non_null(auth_verify("alice", "correct horse"));
	assert_int_equal(auth_user_passwd("alice", "new password", f->err,
	    sizeof f->err), 0);
	assert_null(auth_verify("alice", "correct horse"));
	assert_non_null(auth_verify("alice", "new password"));

	assert_int_equal(auth_user_del("alice", f->err, sizeof f->err), 0);
	assert_null(auth_find("alice"));
	assert_null(auth_verify("alice", "new password"));
	assert_non_null(auth_find("bob"));
}

/* The list has names, roles and ISO 8601 times, never hashes. */
static void
test_list(void **state)
{
	struct fixture		*f = *state;
	struct json_object	*arr, *o;
	const char		*when;

	arr = auth_user_list();
	assert_int_equal(json_object_array_length(arr), 0);
	json_object_put(arr);

	add_ok(f, "alice", 1, "correct horse");
	add_ok(f, "bob", 0, "battery staple");
	arr = auth_user_list();
	assert_int_equal(json_object_array_length(arr), 2);
	o = json_object_array_get_idx(arr, 0);
	assert_string_equal(json_str(o, "name"), "alice");
	assert_string_equal(json_str(o, "role"), "admin");
	when = json_str(o, "created");
	assert_non_null(when);
	assert_int_equal(strlen(when), 20);
	assert_int_equal(when[10], 'T');
	assert_int_equal(when[19], 'Z');
	o = json_object_array_get_idx(arr, 1);
	assert_string_equal(json_str(o, "name"), "bob");
	assert_string_equal(json_str(o, "role"), "user");
	assert_null(strstr(json_object_to_json_string(arr), "argon2"));
	assert_int_equal(json_object_object_length(o), 6);
	assert_int_equal(json_object_get_int64(json_object_object_get(o,
	    "uid")), 1879048193);
	assert_null(json_object_object_get(o, "unix_user"));
	json_object_put(arr);
}

/* The users as one string, to compare two starts. */
static char *
list_text(void)
{
	struct json_object	*arr = auth_user_list();
	char			*s;

	s = strdup(json_object_to_json_string(arr));
	assert_non_null(s);
	json_object_put(arr);
	return s;
}

/* The list is in creation order, then by name. */
static void
assert_list_ordered(void)
{
	struct json_object	*arr = auth_user_list(), *a, *b;
	size_t			 i;
	int			 c;

	for (i = 1; i < json_object_array_length(arr); i++) {
		a = json_object_array_get_idx(arr, i - 1);
		b = json_object_array_get_idx(arr, i);
		c = strcmp(json_str(a, "created"), json_str(b, "created"));
		assert_true(c < 0 || (c == 0 &&
		    strcmp(json_str(a, "name"), json_str(b, "name")) < 0));
	}
	json_object_put(arr);
}

/*
 * The list is in creation order, then by name, and reads the same after a
 * restart: a users.json listing them otherwise, and users added in the
 * same second (the store loads them in that order).
 */
static void
test_list_order(void **state)
{
	struct fixture	*f = *state;
	char		 text[1024], hash[256], *before, *after;

	/* Most often in one second: then by name, whatever the order added. */
	add_ok(f, "zoe", 0, "correct horse");
	add_ok(f, "amy", 0, "correct horse");
	snprintf(hash, sizeof hash, "%s", auth_find("zoe")->hash);
	assert_list_ordered();
	before = list_text();
	restart(f);
	after = list_text();
	assert_string_equal(before, after);
	free(before);
	free(after);

	start_afresh(f);
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": ["
	    "{\"name\": \"bob\", \"role\": \"user\", \"hash\": \"%s\", "
	    "\"created\": 20}, {\"name\": \"alice\", \"role\": \"admin\", "
	    "\"hash\": \"%s\", \"created\": 10}]}", hash, hash);
	write_users(f, text);
	restart(f);
	before = list_text();
	assert_true(strstr(before, "alice") < strstr(before, "bob"));
	restart(f);
	after = list_text();
	assert_string_equal(before, after);
	free(before);
	free(after);
}

/* Users survive a restart; store.db is 0600 and holds no password. */
static void
test_persistence(void **state)
{
	struct fixture	*f = *state;
	struct stat	 st;
	struct user	*u;
	char		*text;
	size_t		 len;
	int64_t		 created;

	add_ok(f, "alice", 1, "correct horse");
	add_ok(f, "bob", 0, "battery staple");
	assert_int_equal(auth_user_passwd("bob", "new password", f->err,
	    sizeof f->err), 0);
	created = auth_find("alice")->created;

	store_close();		/* its WAL checkpointed into the file */
	assert_int_equal(stat(f->db, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	text = file_read(f->db, 1 << 24, &len);
	assert_non_null(text);
	assert_null(memmem(text, len, "correct horse", 13));
	assert_null(memmem(text, len, "new password", 12));
	assert_non_null(memmem(text, len, "$argon2id$", 10));
	free(text);

	restart(f);
	u = auth_verify("alice", "correct horse");
	assert_non_null(u);
	assert_true(u->admin);
	assert_int_equal(u->created, created);
	assert_non_null(auth_verify("bob", "new password"));
	assert_null(auth_verify("bob", "battery staple"));

	assert_int_equal(auth_user_del("alice", f->err, sizeof f->err), 0);
	restart(f);
	assert_null(auth_find("alice"));
	assert_non_null(auth_find("bob"));
}

/* A store readable by others is set back to 0600 at start. */
static void
test_mode_fixed(void **state)
{
	struct fixture	*f = *state;
	struct stat	 st;

	add_ok(f, "alice", 0, "correct horse");
	store_close();
	assert_int_equal(chmod(f->db, 0644), 0);
	restart(f);
	assert_int_equal(stat(f->db, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_non_null(auth_find("alice"));
}

/*
 * Start afresh on a users.json of text expecting failure with both words
 * in the error, and nothing taken in.
 */
static void
load_fails(struct fixture *f, const char *text, const char *why)
{
	start_afresh(f);
	write_users(f, text);
	f->err[0] = '\0';
	if (start(f) != -1)
		fail_msg("accepted: %s", text);
	if (strstr(f->err, f->path) == NULL || strstr(f->err, why) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", f->err, why);
	assert_null(auth_find("alice"));
}

/* A corrupt or foreign users file is refused with a clear error. */
static void
test_corrupt(void **state)
{
	struct fixture	*f = *state;
	const char	*hash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2"
	    "FsdA$0000000000000000000000000000000000000000000";
	char		 text[512];

	load_fails(f, "not json", "invalid JSON");
	load_fails(f, "{\"version\": 1, \"users\": [", "invalid JSON");
	load_fails(f, "[]", "not a JSON object");
	load_fails(f, "{\"version\": 2, \"users\": []}", "version");
	load_fails(f, "{\"version\": 1}", "users is not an array");
	load_fails(f, "{\"version\": 1, \"users\": [7]}", "not an object");
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"alice\", \"role\": \"admin\", \"hash\": \"$2b$12$abcdefghij"
	    "klmnopqrstuv\", \"created\": 1}]}");
	load_fails(f, text, "argon2id");
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"alice\", \"role\": \"root\", \"hash\": \"%s\", \"created\": 1}]}",
	    hash);
	load_fails(f, text, "role");
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"Alice\", \"role\": \"user\", \"hash\": \"%s\", \"created\": 1}]}",
	    hash);
	load_fails(f, text, "name");
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"alice\", \"role\": \"user\", \"hash\": \"%s\"}]}", hash);
	load_fails(f, text, "created");
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"alice\", \"role\": \"user\", \"hash\": \"%s\", \"created\": 1}, "
	    "{\"name\": \"alice\", \"role\": \"user\", \"hash\": \"%s\", "
	    "\"created\": 2}]}", hash, hash);
	load_fails(f, text, "twice");

	/* The same entry alone is fine. */
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"alice\", \"role\": \"user\", \"hash\": \"%s\", \"created\": 1}]}",
	    hash);
	start_afresh(f);
	write_users(f, text);
	restart(f);
	assert_non_null(auth_find("alice"));
	assert_null(auth_verify("alice", "anything at all"));
}

/* A failed write leaves memory as it was and says why. */
static void
test_write_fails(void **state)
{
	struct fixture	*f = *state;

	add_ok(f, "alice", 0, "correct horse");
	/* A store that cannot be written: closed under auth.c's feet. */
	store_close();
	assert_int_equal(auth_user_add("bob", 0, "battery staple", f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "store.db"));
	assert_null(auth_find("bob"));
	assert_int_equal(auth_user_del("alice", f->err, sizeof f->err), -1);
	assert_non_null(auth_find("alice"));
	assert_int_equal(auth_user_passwd("alice", "new password", f->err,
	    sizeof f->err), -1);
	assert_non_null(auth_verify("alice", "correct horse"));
}

/* Add a mapped user expecting failure with why in the error. */
static void
map_fails(struct fixture *f, const char *name, int64_t uid, int64_t gid,
    const char *why)
{
	f->err[0] = '\0';
	if (auth_user_add_unix(name, 0, "correct horse", NULL, "someone", uid, gid,
	    f->err, sizeof f->err) != -1)
		fail_msg("mapped %s to %lld", name, (long long)uid);
	if (strstr(f->err, why) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", f->err, why);
	assert_null(auth_find(name));
}

/*
 * Each user gets the lowest uid of the range no other user (and no daemon)
 * holds, gid == uid; a deleted user's uid is free again; they persist.
 */
static void
test_uids(void **state)
{
	struct fixture	*f = *state;

	auth_uid_range(5000, 5002);
	auth_uid_reserve(5001, "sandboxd");
	add_ok(f, "alice", 0, "correct horse");
	add_ok(f, "bob", 0, "correct horse");
	assert_int_equal(auth_find("alice")->uid, 5000);
	assert_int_equal(auth_find("alice")->gid, 5000);
	assert_int_equal(auth_find("bob")->uid, 5002);
	assert_int_equal(auth_user_add("carol", 0, "correct horse", f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "no uid left"));
	assert_null(auth_find("carol"));
	assert_int_equal(auth_user_del("alice", f->err, sizeof f->err), 0);
	add_ok(f, "carol", 0, "correct horse");
	assert_int_equal(auth_find("carol")->uid, 5000);
	restart(f);
	assert_int_equal(auth_find("carol")->uid, 5000);
	assert_int_equal(auth_find("bob")->uid, 5002);
	assert_null(auth_find("bob")->unix_user);
}

/*
 * A user mapped to a Unix account takes its uid and gid, never root's, a
 * daemon's or another user's; the mapping persists.
 */
static void
test_unix_user(void **state)
{
	struct fixture	*f = *state;
	struct user	*u;

	auth_uid_range(5000, 5009);
	auth_uid_reserve(998, "frontd's service user hostgate-front");
	map_fails(f, "alice", 0, 1500, "root");
	map_fails(f, "alice", 998, 998, "hostgate-front");
	map_fails(f, "alice", 1500, 0, "gid 0");
	assert_int_equal(auth_user_add_unix("alice", 0, "correct horse", NULL,
	    "alice", 1500, 1600, f->err, sizeof f->err), 0);
	map_fails(f, "bob", 1500, 1500, "alice");
	add_ok(f, "bob", 0, "correct horse");
	assert_int_equal(auth_find("bob")->uid, 5000);
	restart(f);
	u = auth_find("alice");
	assert_int_equal(u->uid, 1500);
	assert_int_equal(u->gid, 1600);
	assert_string_equal(u->unix_user, "alice");
}

/*
 * A users.json written before uids: its users get them as they are taken
 * in, and keep them; one whose mapped users share a uid, or with bad ids,
 * is refused.
 */
static void
test_uids_loaded(void **state)
{
	struct fixture	*f = *state;
	const char	*hash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2"
	    "FsdA$0000000000000000000000000000000000000000000";
	char		 text[1024];

	auth_uid_range(6000, 6009);
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"alice\", \"role\": \"user\", \"hash\": \"%s\", \"created\": 1}, "
	    "{\"name\": \"bob\", \"role\": \"user\", \"hash\": \"%s\", "
	    "\"created\": 1, \"uid\": 6000, \"gid\": 6000}]}", hash, hash);
	write_users(f, text);
	restart(f);
	assert_int_equal(auth_find("bob")->uid, 6000);
	assert_int_equal(auth_find("alice")->uid, 6001);
	restart(f);
	assert_int_equal(auth_find("alice")->uid, 6001);

	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"alice\", \"role\": \"user\", \"hash\": \"%s\", \"created\": 1, "
	    "\"uid\": 1500, \"gid\": 1500, \"unix_user\": \"x\"}, "
	    "{\"name\": \"bob\", \"role\": \"user\", \"hash\": \"%s\", "
	    "\"created\": 1, \"uid\": 1500, \"gid\": 1500, \"unix_user\": "
	    "\"y\"}]}", hash, hash);
	load_fails(f, text, "one uid");
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"alice\", \"role\": \"user\", \"hash\": \"%s\", \"created\": 1, "
	    "\"uid\": \"x\", \"gid\": 1500}]}", hash);
	load_fails(f, text, "uid and gid");
}

/*
 * users.json of an earlier release is taken in at the first start: the
 * same passwords log in, the file is renamed users.json.migrated, and it
 * is taken in once: a second start does not read it again, and a copy
 * found after the mark (a crash before the rename) is renamed unread.
 */
static void
test_import_once(void **state)
{
	struct fixture	*f = *state;
	char		 text[1024], hash[256], *done;

	add_ok(f, "carol", 0, "correct horse");
	snprintf(hash, sizeof hash, "%s", auth_find("carol")->hash);
	start_afresh(f);
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"alice\", \"role\": \"admin\", \"hash\": \"%s\", "
	    "\"created\": 1, \"uid\": 1879048200, \"gid\": 1879048200, "
	    "\"egress_allow\": [\"example.org\"]}]}", hash);
	write_users(f, text);
	restart(f);
	assert_non_null(auth_verify("alice", "correct horse"));
	assert_true(auth_find("alice")->admin);
	assert_int_equal(auth_find("alice")->uid, 1879048200);
	assert_non_null(auth_find("alice")->egress_allow);
	done = path_join(f->dir, "users.json.migrated");
	assert_int_equal(access(f->path, F_OK), -1);
	assert_int_equal(access(done, F_OK), 0);

	/*
	 * Changed in the store, then the file back where it was (a crash
	 * after the commit, before the rename): not read again, renamed.
	 */
	assert_int_equal(auth_user_passwd("alice", "new password", f->err,
	    sizeof f->err), 0);
	assert_int_equal(rename(done, f->path), 0);
	restart(f);
	assert_non_null(auth_verify("alice", "new password"));
	assert_null(auth_verify("alice", "correct horse"));
	assert_int_equal(access(f->path, F_OK), -1);
	assert_int_equal(access(done, F_OK), 0);
	restart(f);
	assert_non_null(auth_verify("alice", "new password"));
	free(done);
}

/*
 * A users.json written beside a store that holds users (or took one in
 * already, its users.json.migrated there): left alone, unread.
 */
static void
test_import_refused(void **state)
{
	struct fixture	*f = *state;
	char		 text[512], *done;

	add_ok(f, "carol", 0, "correct horse");
	snprintf(text, sizeof text, "{\"version\": 1, \"users\": [{\"name\": "
	    "\"dave\", \"role\": \"admin\", \"hash\": \"%s\", "
	    "\"created\": 1}]}", auth_find("carol")->hash);
	write_users(f, text);
	restart(f);
	assert_non_null(auth_find("carol"));
	assert_null(auth_find("dave"));
	assert_int_equal(access(f->path, F_OK), 0);

	/* Taken in once; a file written after that stays unread too. */
	start_afresh(f);
	write_users(f, text);
	restart(f);
	assert_non_null(auth_find("dave"));
	assert_int_equal(auth_user_del("dave", f->err, sizeof f->err), 0);
	write_users(f, text);
	restart(f);
	assert_null(auth_find("dave"));
	assert_int_equal(access(f->path, F_OK), 0);
	done = path_join(f->dir, "users.json.migrated");
	assert_int_equal(access(done, F_OK), 0);
	free(done);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_name_valid),
		cmocka_unit_test_setup_teardown(test_add_verify, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_verify_unknown_is_slow,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_add_errors, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_add_hash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del_passwd, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_order, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_persistence, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_mode_fixed, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_fails, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_uids, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unix_user, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_import_once, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_import_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_uids_loaded, setup,
		    teardown),
	};

	log_init("test_auth", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
