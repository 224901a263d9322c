/*
 * Unit tests for brokerd/session.c: login sessions, CSRF tokens and bearer
 * tokens, and their store.
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

#define LIFETIME	3600

struct fixture {
	char	dir[64];
	char	*path;
	char	err[512];
	char	cookie[64];
	char	csrf[64];
	char	bearer[64];
};

/* A fresh state directory with session_init run on it. */
static int
setup(void **state)
{
	struct fixture	*f;

	f = calloc(1, sizeof *f);
	assert_non_null(f);
	snprintf(f->dir, sizeof f->dir, "/tmp/test_session.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->path = path_join(f->dir, "sessions.json");
	assert_int_equal(session_init(f->dir, LIFETIME, f->err,
	    sizeof f->err), 0);
	*state = f;
	return 0;
}

/* Remove the state directory. */
static int
teardown(void **state)
{
	struct fixture	*f = *state;

	unlink(f->path);
	assert_int_equal(rmdir(f->dir), 0);
	free(f->path);
	free(f);
	return 0;
}

/* The store file's text (the caller frees it). */
static char *
read_store(struct fixture *f)
{
	char	*text;

	text = file_read(f->path, 1 << 20, NULL);
	assert_non_null(text);
	return text;
}

/* Whether the store file contains needle. */
static int
store_has(struct fixture *f, const char *needle)
{
	char	*text;
	int	 found;

	text = read_store(f);
	found = strstr(text, needle) != NULL;
	free(text);
	return found;
}

/* The last_seen of the first session in the store file. */
static int64_t
stored_last_seen(struct fixture *f)
{
	struct json_object	*root, *arr;
	int64_t			 v = -1;

	root = json_object_from_file(f->path);
	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "sessions", &arr));
	assert_int_equal(json_int(json_object_array_get_idx(arr, 0),
	    "last_seen", &v), 0);
	json_object_put(root);
	return v;
}

/* Whether s is n lowercase hex digits. */
static int
is_hex(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

/* A session for user; its cookie and CSRF token go in f. */
static struct session *
create_ok(struct fixture *f, const char *user)
{
	struct session	*s;

	s = session_create(user, f->cookie, sizeof f->cookie, f->csrf,
	    sizeof f->csrf);
	assert_non_null(s);
	return s;
}

/* A cookie finds its session, and nothing else does. */
static void
test_create_lookup(void **state)
{
	struct fixture	*f = *state;
	struct session	*s, *s2;
	char		 cookie2[64], csrf2[64];
	int64_t		 now = now_wall_ms() / 1000;

	s = create_ok(f, "alice");
	assert_int_equal(strlen(f->cookie), 43);	/* 32 bytes, base64url */
	assert_int_equal(strlen(f->csrf), 43);
	assert_string_not_equal(f->cookie, f->csrf);
	assert_true(is_hex(s->id, 32));
	assert_string_equal(s->user, "alice");
	assert_in_range(s->expires - now, LIFETIME - 1, LIFETIME + 1);

	s2 = session_create("bob", cookie2, sizeof cookie2, csrf2,
	    sizeof csrf2);
	assert_non_null(s2);
	assert_string_not_equal(s->id, s2->id);
	assert_string_not_equal(f->cookie, cookie2);

	assert_ptr_equal(session_lookup(f->cookie), s);
	assert_ptr_equal(session_lookup(cookie2), s2);
	assert_ptr_equal(session_by_id(s->id), s);
	assert_null(session_lookup(f->csrf));
	assert_null(session_lookup(s->id));
	assert_null(session_lookup(s->token_hash));
	assert_null(session_lookup(""));
	assert_null(session_lookup(NULL));
	assert_null(session_by_id("0123456789abcdef0123456789abcdef"));
	assert_null(session_by_id(NULL));

	/* Buffers too small for a 32-byte token are refused. */
	assert_null(session_create("carol", cookie2, 40, csrf2,
	    sizeof csrf2));
	assert_null(session_create(NULL, cookie2, sizeof cookie2, csrf2,
	    sizeof csrf2));
}

/* An expired session is gone, for every way of reaching it. */
static void
test_expiry(void **state)
{
	struct fixture		*f = *state;
	struct session		*s;
	struct json_object	*arr;
	char			 id[33];

	s = create_ok(f, "alice");
	snprintf(id, sizeof id, "%s", s->id);
	s->expires = now_wall_ms() / 1000 + 5;
	assert_ptr_equal(session_lookup(f->cookie), s);
	s->expires = now_wall_ms() / 1000;	/* expires at this second */
	arr = session_list();
	assert_int_equal(json_object_array_length(arr), 0);
	json_object_put(arr);
	assert_null(session_lookup(f->cookie));
	assert_null(session_by_id(id));

	s = create_ok(f, "alice");
	snprintf(id, sizeof id, "%s", s->id);
	s->expires -= LIFETIME + 1;
	assert_null(session_by_id(id));
	assert_null(session_lookup(f->cookie));

	/* Expired sessions are removed from the file too. */
	s = create_ok(f, "bob");
	snprintf(id, sizeof id, "%s", s->id);
	s->expires -= LIFETIME + 1;
	session_sweep();
	assert_false(store_has(f, id));
}

/* The CSRF token is checked against its own session only. */
static void
test_csrf(void **state)
{
	struct fixture	*f = *state;
	struct session	*s, *s2;
	char		 cookie2[64], csrf2[64];

	s = create_ok(f, "alice");
	s2 = session_create("alice", cookie2, sizeof cookie2, csrf2,
	    sizeof csrf2);
	assert_non_null(s2);
	assert_true(session_csrf_ok(s, f->csrf));
	assert_true(session_csrf_ok(s2, csrf2));
	assert_false(session_csrf_ok(s, csrf2));
	assert_false(session_csrf_ok(s, f->cookie));
	assert_false(session_csrf_ok(s, s->csrf_hash));
	assert_false(session_csrf_ok(s, ""));
	assert_false(session_csrf_ok(s, NULL));
	assert_false(session_csrf_ok(NULL, f->csrf));
}

/* Tokens bound to a session die with it, standalone ones do not. */
static void
test_tokens_bound_and_standalone(void **state)
{
	struct fixture		*f = *state;
	struct session		*s;
	struct token		*bound, *alone, *t;
	struct json_object	*arr, *o;
	char			 bearer2[64], alone_id[17];
	size_t			 i;

	s = create_ok(f, "alice");
	bound = token_create("alice", s->id, f->bearer, sizeof f->bearer);
	assert_non_null(bound);
	assert_true(strncmp(f->bearer, "hgt_", 4) == 0);
	assert_int_equal(strlen(f->bearer), 4 + 43);
	assert_true(is_hex(bound->id, 16));
	assert_string_equal(bound->session_id, s->id);
	alone = token_create("alice", NULL, bearer2, sizeof bearer2);
	assert_non_null(alone);
	assert_string_equal(alone->session_id, "");
	snprintf(alone_id, sizeof alone_id, "%s", alone->id);

	assert_ptr_equal(token_lookup(f->bearer), bound);
	assert_ptr_equal(token_lookup(bearer2), alone);
	assert_null(token_lookup(f->bearer + 4));
	assert_null(token_lookup("hgt_"));
	assert_null(token_lookup(f->cookie));
	assert_null(token_lookup(NULL));

	arr = token_list();
	assert_int_equal(json_object_array_length(arr), 2);
	for (i = 0; i < 2; i++) {
		o = json_object_array_get_idx(arr, i);
		assert_null(json_object_object_get(o, "hash"));
		if (strcmp(json_str(o, "id"), alone_id) == 0) {
			assert_true(json_object_object_get_ex(o, "session_id",
			    NULL));
			assert_null(json_object_object_get(o, "session_id"));
		} else
			assert_string_equal(json_str(o, "session_id"), s->id);
		assert_string_equal(json_str(o, "user"), "alice");
		assert_int_equal(strlen(json_str(o, "created")), 20);
	}
	json_object_put(arr);

	session_destroy(s);
	assert_null(token_lookup(f->bearer));
	t = token_lookup(bearer2);
	assert_non_null(t);
	assert_string_equal(t->id, alone_id);
	arr = token_list();
	assert_int_equal(json_object_array_length(arr), 1);
	json_object_put(arr);

	/* A bound token also dies when its session expires. */
	s = create_ok(f, "alice");
	assert_non_null(token_create("alice", s->id, f->bearer,
	    sizeof f->bearer));
	s->expires = 0;
	assert_null(token_lookup(f->bearer));
	assert_non_null(token_lookup(bearer2));
}

/* A token can only be bound to a live session of its own user. */
static void
test_token_create_refused(void **state)
{
	struct fixture	*f = *state;
	struct session	*s;

	s = create_ok(f, "alice");
	assert_null(token_create("bob", s->id, f->bearer, sizeof f->bearer));
	assert_null(token_create("alice", "0123456789abcdef0123456789abcdef",
	    f->bearer, sizeof f->bearer));
	assert_null(token_create("alice", s->id, f->bearer, 40));
	assert_null(token_create(NULL, NULL, f->bearer, sizeof f->bearer));
	s->expires = 0;
	assert_null(token_create("alice", s->id, f->bearer,
	    sizeof f->bearer));
}

/* Revoking a token by id ends it, once. */
static void
test_revoke(void **state)
{
	struct fixture	*f = *state;
	struct token	*t;
	char		 bearer2[64], id[17];

	t = token_create("ops", "", f->bearer, sizeof f->bearer);
	assert_non_null(t);
	snprintf(id, sizeof id, "%s", t->id);
	assert_non_null(token_create("ops", "", bearer2, sizeof bearer2));
	assert_int_equal(token_revoke(id), 0);
	assert_null(token_lookup(f->bearer));
	assert_non_null(token_lookup(bearer2));
	assert_int_equal(token_revoke(id), -1);
	assert_int_equal(token_revoke("ffffffffffffffff"), -1);
	assert_int_equal(token_revoke(NULL), -1);
	assert_false(store_has(f, id));
}

/* Dropping a user ends all its sessions and tokens, and no one else's. */
static void
test_drop_user(void **state)
{
	struct fixture		*f = *state;
	struct session		*s;
	struct json_object	*arr;
	char			 cookie_b[64], csrf_b[64], bearer_a[64];
	char			 bearer_b[64], cookie_a2[64];

	s = create_ok(f, "alice");
	assert_non_null(token_create("alice", s->id, bearer_a,
	    sizeof bearer_a));
	snprintf(cookie_a2, sizeof cookie_a2, "%s", f->cookie);
	create_ok(f, "alice");
	assert_non_null(token_create("alice", NULL, f->bearer,
	    sizeof f->bearer));
	assert_non_null(session_create("bob", cookie_b, sizeof cookie_b,
	    csrf_b, sizeof csrf_b));
	assert_non_null(token_create("bob", NULL, bearer_b,
	    sizeof bearer_b));

	session_drop_user("alice");
	assert_null(session_lookup(f->cookie));
	assert_null(session_lookup(cookie_a2));
	assert_null(token_lookup(bearer_a));
	assert_null(token_lookup(f->bearer));
	assert_non_null(session_lookup(cookie_b));
	assert_non_null(token_lookup(bearer_b));
	arr = session_list();
	assert_int_equal(json_object_array_length(arr), 1);
	json_object_put(arr);
	arr = token_list();
	assert_int_equal(json_object_array_length(arr), 1);
	json_object_put(arr);
	assert_false(store_has(f, "alice"));
	session_drop_user(NULL);
	session_drop_user("nobody");
}

/* Sessions and tokens survive a reload; the file holds only hashes. */
static void
test_persistence(void **state)
{
	struct fixture		*f = *state;
	struct session		*s;
	struct token		*t;
	struct json_object	*arr, *o;
	struct stat		 st;
	char			 bearer2[64], id[33], hash[65], *text;
	int64_t			 created;

	s = create_ok(f, "alice");
	snprintf(id, sizeof id, "%s", s->id);
	created = s->created;
	assert_non_null(token_create("alice", s->id, f->bearer,
	    sizeof f->bearer));
	assert_non_null(token_create("ops", NULL, bearer2, sizeof bearer2));

	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	text = read_store(f);
	assert_null(strstr(text, f->cookie));
	assert_null(strstr(text, f->csrf));
	assert_null(strstr(text, f->bearer));
	assert_null(strstr(text, f->bearer + 4));
	assert_null(strstr(text, bearer2 + 4));
	sha256_hex(f->cookie, strlen(f->cookie), hash);
	assert_non_null(strstr(text, hash));
	free(text);

	assert_int_equal(session_init(f->dir, LIFETIME, f->err,
	    sizeof f->err), 0);
	s = session_lookup(f->cookie);
	assert_non_null(s);
	assert_string_equal(s->id, id);
	assert_string_equal(s->user, "alice");
	assert_int_equal(s->created, created);
	assert_true(session_csrf_ok(s, f->csrf));
	t = token_lookup(f->bearer);
	assert_non_null(t);
	assert_string_equal(t->session_id, id);
	assert_non_null(token_lookup(bearer2));

	arr = session_list();
	assert_int_equal(json_object_array_length(arr), 1);
	o = json_object_array_get_idx(arr, 0);
	assert_string_equal(json_str(o, "id"), id);
	assert_string_equal(json_str(o, "user"), "alice");
	assert_int_equal(strlen(json_str(o, "created")), 20);
	assert_int_equal(strlen(json_str(o, "last_seen")), 20);
	assert_int_equal(strlen(json_str(o, "expires")), 20);
	assert_int_equal(json_object_object_length(o), 5);
	json_object_put(arr);

	/* Expired sessions and their tokens are dropped at load. */
	s->expires = 1;
	assert_int_equal(session_flush(), 0);
	assert_int_equal(session_init(f->dir, LIFETIME, f->err,
	    sizeof f->err), 0);
	assert_false(store_has(f, id));
	assert_null(session_lookup(f->cookie));
	assert_null(token_lookup(f->bearer));
	assert_non_null(token_lookup(bearer2));
}

/* last_seen is kept in memory and written by the sweep, not per lookup. */
static void
test_last_seen(void **state)
{
	struct fixture	*f = *state;
	struct session	*s;
	int64_t		 t0, t1;

	s = create_ok(f, "alice");
	s->last_seen = 12345;
	assert_int_equal(session_flush(), 0);
	t0 = now_wall_ms() / 1000;
	assert_ptr_equal(session_lookup(f->cookie), s);
	t1 = now_wall_ms() / 1000;
	assert_in_range(s->last_seen, t0, t1);
	assert_int_equal(stored_last_seen(f), 12345);
	session_sweep();
	assert_int_equal(stored_last_seen(f), s->last_seen);
}

/* Load the store from text expecting failure with why in the error. */
static void
load_fails(struct fixture *f, const char *text, const char *why)
{
	assert_int_equal(file_write_atomic(f->path, text, strlen(text), 0600),
	    0);
	f->err[0] = '\0';
	if (session_init(f->dir, LIFETIME, f->err, sizeof f->err) != -1)
		fail_msg("accepted: %s", text);
	if (strstr(f->err, f->path) == NULL || strstr(f->err, why) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", f->err, why);
}

/* A corrupt store is refused with a clear error; a loose mode is fixed. */
static void
test_corrupt(void **state)
{
	struct fixture	*f = *state;
	struct stat	 st;
	const char	*h = "0123456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef";
	char		 text[1024];

	load_fails(f, "garbage", "invalid JSON");
	load_fails(f, "{\"version\": 1, \"sessions\": [", "invalid JSON");
	load_fails(f, "{\"version\": 3, \"sessions\": [], \"tokens\": []}",
	    "version");
	load_fails(f, "{\"version\": 1, \"tokens\": []}", "sessions");
	load_fails(f, "{\"version\": 1, \"sessions\": [], \"tokens\": {}}",
	    "tokens");
	load_fails(f, "{\"version\": 1, \"sessions\": [{\"id\": \"x\"}], "
	    "\"tokens\": []}", "session 0");
	snprintf(text, sizeof text, "{\"version\": 1, \"sessions\": [], "
	    "\"tokens\": [{\"id\": \"0123456789abcdef\", \"hash\": \"%s\", "
	    "\"user\": \"a\", \"session_id\": \"%.32s\", \"created\": 1}]}",
	    h, h);
	load_fails(f, text, "no session");
	assert_null(session_by_id("0123456789abcdef0123456789abcdef"));

	/* The same token, standalone, loads; a 0644 file becomes 0600. */
	snprintf(text, sizeof text, "{\"version\": 1, \"sessions\": [], "
	    "\"tokens\": [{\"id\": \"0123456789abcdef\", \"hash\": \"%s\", "
	    "\"user\": \"a\", \"session_id\": \"\", \"created\": 1}]}", h);
	assert_int_equal(file_write_atomic(f->path, text, strlen(text), 0644),
	    0);
	assert_int_equal(session_init(f->dir, LIFETIME, f->err,
	    sizeof f->err), 0);
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(token_revoke("0123456789abcdef"), 0);

	assert_int_equal(session_init(f->dir, 0, f->err, sizeof f->err), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_create_lookup, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_csrf, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_tokens_bound_and_standalone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token_create_refused,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drop_user, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_persistence, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_last_seen, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
	};

	log_init("test_session", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
