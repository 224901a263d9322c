/*
 * Unit tests for brokerd/session.c and store.c: login sessions, CSRF tokens
 * and bearer tokens, and their SQLite store (a real file in a temporary
 * directory), with its migration from sessions.json.
 */

#include <sys/stat.h>
#include <sys/wait.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "../../brokerd/brokerd.h"
#include "child.h"

#define LIFETIME	3600

struct fixture {
	char	dir[64];
	char	*path;		/* store.db */
	char	*json;		/* sessions.json, the former store */
	char	err[512];
	char	cookie[64];
	char	csrf[64];
	char	bearer[64];
};

/* Open the store of dir and load it, as brokerd does at start-up. */
static int
session_start(const char *dir, int lifetime, char *err, size_t errsz)
{
	char	*path = path_join(dir, STORE_FILE);
	int	 rc;

	rc = store_sqlite_open_path(path, err, errsz);
	free(path);
	if (rc == -1)
		return -1;
	if (session_init(dir, lifetime, err, errsz) == -1) {
		store_close();
		return -1;
	}
	return 0;
}

/* Store what is pending and close the store, as brokerd does at exit. */
static void
session_stop(void)
{
	session_close();
	store_close();
}

/* A fresh state directory with session_init run on it. */
static int
setup(void **state)
{
	struct fixture	*f;

	f = calloc(1, sizeof *f);
	assert_non_null(f);
	snprintf(f->dir, sizeof f->dir, "/tmp/test_session.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->path = path_join(f->dir, "store.db");
	f->json = path_join(f->dir, "sessions.json");
	assert_int_equal(session_start(f->dir, LIFETIME, f->err,
	    sizeof f->err), 0);
	*state = f;
	return 0;
}

/* Remove the state directory. */
static int
teardown(void **state)
{
	struct fixture	*f = *state;
	char		 cmd[128];

	session_stop();
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f->path);
	free(f->json);
	free(f);
	return 0;
}

/* Reopen the store as brokerd does at start-up. */
static void
reopen(struct fixture *f)
{
	if (session_start(f->dir, LIFETIME, f->err, sizeof f->err) != 0)
		fail_msg("session_init: %s", f->err);
}

/*
 * Run SQL on the closed store (session.c holds it locked while open): the
 * first column of the first row as a number, or -1 without a row.
 */
static int64_t
db_sql(struct fixture *f, const char *sql)
{
	sqlite3		*db;
	sqlite3_stmt	*st;
	int64_t		 v = -1;
	int		 rc;

	assert_int_equal(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READWRITE,
	    NULL), SQLITE_OK);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	else if (rc != SQLITE_DONE)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	assert_int_equal(sqlite3_close(db), SQLITE_OK);
	return v;
}

/* The number of rows of table where column = value, store closed. */
static int64_t
db_count(struct fixture *f, const char *table, const char *column,
    const char *value)
{
	char	sql[256];

	snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE %s = '%s'",
	    table, column, value);
	return db_sql(f, sql);
}

/* Whether a file's bytes contain needle. */
static int
file_has(const char *path, const char *needle)
{
	char	*text;
	size_t	 len;
	int	 found;

	if ((text = file_read(path, 64 << 20, &len)) == NULL)
		return 0;
	found = memmem(text, len, needle, strlen(needle)) != NULL;
	free(text);
	return found;
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

	/* ... and from the store. */
	session_stop();
	assert_int_equal(db_count(f, "sessions", "id", id), 0);
	assert_int_equal(db_sql(f, "SELECT count(*) FROM sessions"), 0);
}

#define PAGE_N	300

/* Compare two strings through pointers to them, for qsort. */
static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * session_page and token_page walk every live row once, in id order, by
 * the last id of the page before; rows removed between pages leave the
 * others in place; expired sessions and their tokens are skipped.
 */
static void
test_pages(void **state)
{
	struct fixture	*f = *state;
	struct session	*page[PAGE_N + 1], *s, *dead;
	struct token	*tpage[PAGE_N + 1], *t;
	char		*sids[PAGE_N], *tids[PAGE_N], after[33], gone[17];
	size_t		 i, n, seen;

	assert_int_equal(session_page(NULL, page, 10), 0);
	for (i = 0; i < PAGE_N; i++) {
		s = create_ok(f, "alice");
		assert_non_null(sids[i] = strdup(s->id));
		t = token_create("alice", i % 2 ? s->id : "", f->bearer,
		    sizeof f->bearer);
		assert_non_null(t);
		assert_non_null(tids[i] = strdup(t->id));
	}
	qsort(sids, PAGE_N, sizeof sids[0], cmp_str);
	qsort(tids, PAGE_N, sizeof tids[0], cmp_str);

	/* All at once, then 7 at a time: the same order, each once. */
	assert_int_equal(session_page(NULL, page, PAGE_N + 1), PAGE_N);
	for (i = 0; i < PAGE_N; i++)
		assert_string_equal(page[i]->id, sids[i]);
	assert_int_equal(session_page(NULL, page, 0), 0);
	after[0] = '\0';
	for (seen = 0; (n = session_page(after[0] ? after : NULL, page,
	    7)) > 0; seen += n) {
		assert_true(n == 7 || seen + n == PAGE_N);
		for (i = 0; i < n; i++)
			assert_string_equal(page[i]->id, sids[seen + i]);
		snprintf(after, sizeof after, "%s", page[n - 1]->id);
	}
	assert_int_equal(seen, PAGE_N);
	/* A cursor that names no session still pages from its place. */
	assert_int_equal(session_page("0", page, PAGE_N), PAGE_N);
	assert_int_equal(session_page("g", page, PAGE_N), 0);

	/* Tokens, with the token that ended a page revoked before the next. */
	n = token_page(NULL, tpage, 10);
	assert_int_equal(n, 10);
	for (i = 0; i < n; i++)
		assert_string_equal(tpage[i]->id, tids[i]);
	snprintf(gone, sizeof gone, "%s", tpage[9]->id);
	assert_int_equal(token_revoke(gone), 0);
	assert_int_equal(token_page(gone, tpage, 5), 5);
	for (i = 0; i < 5; i++)
		assert_string_equal(tpage[i]->id, tids[10 + i]);
	assert_int_equal(token_page(NULL, tpage, PAGE_N + 1), PAGE_N - 1);

	/* An expired session is skipped, and its tokens with it. */
	dead = session_by_id(sids[0]);
	assert_non_null(dead);
	n = 0;
	for (t = TAILQ_FIRST(&dead->tokens); t != NULL;
	    t = TAILQ_NEXT(t, session_entry))
		n++;
	dead->expires = now_wall_ms() / 1000;
	assert_int_equal(session_page(NULL, page, PAGE_N + 1), PAGE_N - 1);
	assert_string_equal(page[0]->id, sids[1]);
	assert_int_equal(token_page(NULL, tpage, PAGE_N + 1), PAGE_N - 1 - n);

	for (i = 0; i < PAGE_N; i++) {
		free(sids[i]);
		free(tids[i]);
	}
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

/* A fleet's token names its user's home host, and is looked up as any. */
static void
test_token_names_its_home(void **state)
{
	struct fixture	*f = *state;
	struct session	*s;
	struct token	*t;
	char		 bearer[TOKEN_BEARER_MAX], host[HOME_HOST_MAX + 1];
	char		 longest[HOME_HOST_MAX + 1];

	s = create_ok(f, "alice");
	t = token_create_home("alice", s->id, "h2", bearer, sizeof(bearer));
	assert_non_null(t);
	assert_true(strncmp(bearer, "hgt_h2.", 7) == 0);
	assert_int_equal(strlen(bearer), 7 + 43);
	assert_ptr_equal(token_lookup(bearer), t);
	assert_int_equal(home_token_host(bearer, host, sizeof(host)), 1);
	assert_string_equal(host, "h2");
	/* The host is part of the secret: another one is no token. */
	bearer[5] = '3';
	assert_null(token_lookup(bearer));
	/* No host: one host's form. */
	assert_non_null(token_create_home("alice", NULL, NULL, bearer,
	    sizeof(bearer)));
	assert_int_equal(home_token_host(bearer, host, sizeof(host)), 0);
	/* The longest host id fits TOKEN_BEARER_MAX; a bad one is refused. */
	memset(longest, 'a', HOME_HOST_MAX);
	longest[HOME_HOST_MAX] = '\0';
	assert_non_null(token_create_home("alice", NULL, longest, bearer,
	    sizeof(bearer)));
	assert_int_equal(strlen(bearer), sizeof(bearer) - 1);
	assert_null(token_create_home("alice", NULL, "H2", bearer,
	    sizeof(bearer)));
	assert_null(token_create_home("alice", NULL, "h.2", bearer,
	    sizeof(bearer)));
	assert_null(token_create_home("alice", NULL, "h2", bearer, 49));
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

/*
 * Only a name users.json could hold gets a session or a token: "../x" and
 * the like never enter the store, and a name of 32 bytes (the longest a
 * user may have) does.
 */
static void
test_user_names(void **state)
{
	struct fixture	*f = *state;
	const char	*bad[] = { "", "../x", "..", "a/b", "Root", "9lives",
	    "a b", "abcdefghijklmnopqrstuvwxyz0123456" };
	const char	*longest = "abcdefghijklmnopqrstuvwxyz012345";
	struct session	*s;
	size_t		 i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (session_create(bad[i], f->cookie, sizeof f->cookie, f->csrf,
		    sizeof f->csrf) != NULL)
			fail_msg("a session for \"%s\"", bad[i]);
		if (token_create(bad[i], NULL, f->bearer,
		    sizeof f->bearer) != NULL)
			fail_msg("a token for \"%s\"", bad[i]);
	}
	s = create_ok(f, longest);
	assert_string_equal(s->user, longest);
	assert_non_null(token_create(longest, s->id, f->bearer,
	    sizeof f->bearer));
	session_stop();
	assert_int_equal(db_sql(f, "SELECT count(*) FROM sessions"), 1);
	assert_int_equal(db_sql(f, "SELECT count(*) FROM tokens"), 1);
	reopen(f);
	assert_string_equal(session_lookup(f->cookie)->user, longest);
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
	session_stop();
	assert_int_equal(db_count(f, "tokens", "id", id), 0);
	assert_int_equal(db_sql(f, "SELECT count(*) FROM tokens"), 1);
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
	session_drop_user(NULL);
	session_drop_user("nobody");
	session_stop();
	assert_int_equal(db_count(f, "sessions", "user", "alice"), 0);
	assert_int_equal(db_count(f, "tokens", "user", "alice"), 0);
	assert_int_equal(db_count(f, "sessions", "user", "bob"), 1);
	assert_int_equal(db_count(f, "tokens", "user", "bob"), 1);
}

/* Sessions and tokens survive a reload; the store holds only hashes. */
static void
test_persistence(void **state)
{
	struct fixture		*f = *state;
	struct session		*s;
	struct token		*t;
	struct json_object	*arr, *o;
	struct stat		 st;
	char			 bearer2[64], id[33], hash[65], sql[256];
	char			*wal;
	int64_t			 created;

	s = create_ok(f, "alice");
	snprintf(id, sizeof id, "%s", s->id);
	created = s->created;
	assert_non_null(token_create("alice", s->id, f->bearer,
	    sizeof f->bearer));
	assert_non_null(token_create("ops", NULL, bearer2, sizeof bearer2));

	/* The file and its WAL are private. */
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	wal = path_join(f->dir, "store.db-wal");
	assert_int_equal(stat(wal, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_false(file_has(wal, f->cookie));
	assert_false(file_has(wal, f->bearer + 4));
	session_stop();
	assert_int_equal(access(wal, F_OK), -1);	/* checkpointed */
	free(wal);

	/* Only hashes: no secret anywhere in the file. */
	assert_false(file_has(f->path, f->cookie));
	assert_false(file_has(f->path, f->csrf));
	assert_false(file_has(f->path, f->bearer + 4));
	assert_false(file_has(f->path, bearer2 + 4));
	sha256_hex(f->cookie, strlen(f->cookie), hash);
	assert_int_equal(db_count(f, "sessions", "token_hash", hash), 1);
	sha256_hex(f->bearer, strlen(f->bearer), hash);
	assert_int_equal(db_count(f, "tokens", "hash", hash), 1);
	assert_int_equal(db_sql(f, "PRAGMA user_version"), 3);

	reopen(f);
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
	assert_int_equal(session_set_permission(s, "read-only"), 0);

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

	/* The profile was stored; a grant is, with session_save. */
	s->direct_until = now_wall_ms() + 600000;
	assert_int_equal(session_save(s), 0);
	session_stop();
	reopen(f);
	s = session_lookup(f->cookie);
	assert_non_null(s);
	assert_string_equal(session_permission(s), "read-only");
	assert_true(s->direct_until > now_wall_ms());

	/* Expired sessions and their tokens are dropped at load. */
	session_stop();
	snprintf(sql, sizeof sql, "UPDATE sessions SET expires = 1 WHERE "
	    "id = '%s' RETURNING 1", id);
	assert_int_equal(db_sql(f, sql), 1);
	reopen(f);
	assert_null(session_lookup(f->cookie));
	assert_null(token_lookup(f->bearer));
	assert_non_null(token_lookup(bearer2));
	session_stop();
	assert_int_equal(db_count(f, "sessions", "id", id), 0);
	assert_int_equal(db_count(f, "tokens", "session_id", id), 0);
	assert_int_equal(db_sql(f, "SELECT count(*) FROM tokens"), 1);
}

/* Run fn in a child that then dies by SIGKILL, its store left open. */
static void
in_killed_child(struct fixture *f, void (*fn)(struct fixture *, int),
    char *out, size_t outsz)
{
	int	p[2], status;
	ssize_t	n;
	pid_t	pid;

	session_stop();
	assert_int_equal(pipe(p), 0);
	if ((pid = test_fork()) == 0) {
		close(p[0]);
		reopen(f);
		fn(f, p[1]);
		kill(getpid(), SIGKILL);
		_exit(1);
	}
	assert_true(pid > 0);
	close(p[1]);
	n = read(p[0], out, outsz - 1);
	out[n > 0 ? n : 0] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* In a child: touch the only session, then report its last_seen. */
static void
child_touch(struct fixture *f, int fd)
{
	struct session	*s = session_first();
	char		 buf[32];

	s->last_seen = 12345;	/* as if it were seen long ago */
	assert_ptr_equal(session_lookup(f->cookie), s);
	snprintf(buf, sizeof buf, "%lld", (long long)s->last_seen);
	assert_int_equal(write(fd, buf, strlen(buf)), (ssize_t)strlen(buf));
}

/* The same, then the sweep. */
static void
child_touch_sweep(struct fixture *f, int fd)
{
	child_touch(f, fd);
	assert_int_equal(session_sweep(), 0);
}

/* last_seen is kept in memory and written by the sweep, not per lookup. */
static void
test_last_seen(void **state)
{
	struct fixture	*f = *state;
	char		 sql[128], seen[32];

	create_ok(f, "alice");
	session_stop();
	assert_int_equal(db_sql(f, "UPDATE sessions SET last_seen = 12345 "
	    "RETURNING 1"), 1);
	snprintf(sql, sizeof sql, "SELECT last_seen FROM sessions");

	in_killed_child(f, child_touch, seen, sizeof seen);
	assert_true(atoll(seen) > 12345);
	assert_int_equal(db_sql(f, sql), 12345);

	in_killed_child(f, child_touch_sweep, seen, sizeof seen);
	assert_int_equal(db_sql(f, sql), atoll(seen));
	reopen(f);
}

/* In a child: mint a token, revoke another, log in; report the secrets. */
static void
child_mint(struct fixture *f, int fd)
{
	char	out[256], bearer[64], cookie[64], csrf[64];

	assert_int_equal(token_revoke("0123456789abcdef"), 0);
	assert_non_null(token_create("ops", NULL, bearer, sizeof bearer));
	assert_non_null(session_create("alice", cookie, sizeof cookie, csrf,
	    sizeof csrf));
	snprintf(out, sizeof out, "%s %s", bearer, cookie);
	assert_int_equal(write(fd, out, strlen(out)), (ssize_t)strlen(out));
}

/* What was answered is on disk: a SIGKILL right after loses none of it. */
static void
test_durable(void **state)
{
	struct fixture	*f = *state;
	char		 got[256], *cookie, revoked[64];
	struct token	*t;

	t = token_create("ops", NULL, revoked, sizeof revoked);
	assert_non_null(t);
	snprintf(t->id, sizeof t->id, "0123456789abcdef");
	session_stop();
	assert_int_equal(db_sql(f, "UPDATE tokens SET id = "
	    "'0123456789abcdef' RETURNING 1"), 1);

	in_killed_child(f, child_mint, got, sizeof got);
	assert_non_null(cookie = strchr(got, ' '));
	*cookie++ = '\0';
	reopen(f);
	assert_non_null(token_lookup(got));
	assert_non_null(session_lookup(cookie));
	assert_null(token_lookup(revoked));
}

/*
 * The sweep removes expired sessions and their tokens in batches of 256,
 * found through the index on expires; each call does one batch.
 */
static void
test_sweep_batches(void **state)
{
	struct fixture	*f = *state;
	struct session	*s;
	int		 i, n;
	int64_t		 last = 0;

	/*
	 * Times are whole seconds: a lifetime of 3 leaves at least 2 s to
	 * bind a token to each session (in one transaction, as a bench
	 * fills a store) before the first one expires.
	 */
	assert_int_equal(session_start(f->dir, 3, f->err, sizeof f->err), 0);
	assert_int_equal(store->begin(), 0);
	for (i = 0; i < 300; i++) {
		s = create_ok(f, "alice");
		last = s->expires;
		assert_non_null(token_create("alice", s->id, f->bearer,
		    sizeof f->bearer));
	}
	assert_int_equal(store->commit(), 0);
	assert_non_null(token_create("alice", NULL, f->bearer,
	    sizeof f->bearer));
	/* Wait for the expiry itself, polling the clock it is read from. */
	while (now_wall_ms() / 1000 < last)
		usleep(50 * 1000);
	assert_int_equal(session_sweep(), 1);
	for (n = 0, s = session_first(); s != NULL; s = session_next(s))
		n++;
	assert_int_equal(n, 300 - 256);
	assert_int_equal(session_sweep(), 0);
	assert_null(session_first());
	assert_int_equal(session_sweep(), 0);
	assert_non_null(token_lookup(f->bearer));
	session_stop();
	assert_int_equal(db_sql(f, "SELECT count(*) FROM sessions"), 0);
	assert_int_equal(db_sql(f, "SELECT count(*) FROM tokens"), 1);
}

/* A sessions.json of the former store, with known secrets. */
static void
write_json(struct fixture *f, const char *cookie, const char *csrf,
    const char *bound, const char *alone, int64_t expires)
{
	char	text[4096], ch[65], cs[65], bh[65], ah[65];
	int	n;

	sha256_hex(cookie, strlen(cookie), ch);
	sha256_hex(csrf, strlen(csrf), cs);
	sha256_hex(bound, strlen(bound), bh);
	sha256_hex(alone, strlen(alone), ah);
	n = snprintf(text, sizeof text, "{\n  \"version\":1,\n"
	    "  \"sessions\":[\n    {\n"
	    "      \"id\":\"00112233445566778899aabbccddeeff\",\n"
	    "      \"token_hash\":\"%s\",\n      \"csrf_hash\":\"%s\",\n"
	    "      \"user\":\"alice\",\n      \"created\":1700000000,\n"
	    "      \"last_seen\":1700000100,\n      \"expires\":%lld,\n"
	    "      \"permission\":\"read-only\",\n"
	    "      \"direct_until\":%lld\n    }\n  ],\n"
	    "  \"tokens\":[\n    {\n      \"id\":\"0011223344556677\",\n"
	    "      \"hash\":\"%s\",\n      \"user\":\"alice\",\n"
	    "      \"session_id\":\"00112233445566778899aabbccddeeff\",\n"
	    "      \"created\":1700000001\n    },\n    {\n"
	    "      \"id\":\"8899aabbccddeeff\",\n      \"hash\":\"%s\",\n"
	    "      \"user\":\"ops\",\n      \"session_id\":\"\",\n"
	    "      \"created\":1700000002\n    }\n  ]\n}", ch, cs,
	    (long long)expires, (long long)(expires * 1000), bh, ah);
	assert_true(n > 0 && (size_t)n < sizeof text);
	assert_int_equal(file_write_atomic(f->json, text, (size_t)n, 0600), 0);
}

/* sessions.json is moved into the store once; its secrets keep working. */
static void
test_migrate(void **state)
{
	struct fixture	*f = *state;
	struct session	*s;
	struct token	*t;
	char		*done;
	char		 before[64];
	int64_t		 exp = now_wall_ms() / 1000 + 3600;

	/* A session already in the store (no mark yet) stays beside them. */
	create_ok(f, "bob");
	snprintf(before, sizeof before, "%s", f->cookie);
	session_stop();
	write_json(f, "cookie-1", "csrf-1", "hgt_bound-1", "hgt_alone-1", exp);
	reopen(f);
	assert_non_null(session_lookup(before));
	done = path_join(f->dir, "sessions.json.migrated");
	assert_int_equal(access(f->json, F_OK), -1);
	assert_int_equal(access(done, F_OK), 0);

	s = session_lookup("cookie-1");
	assert_non_null(s);
	assert_string_equal(s->id, "00112233445566778899aabbccddeeff");
	assert_string_equal(s->user, "alice");
	assert_int_equal(s->created, 1700000000);
	assert_int_equal(s->expires, exp);
	assert_int_equal(s->direct_until, exp * 1000);
	assert_string_equal(session_permission(s), "read-only");
	assert_true(session_csrf_ok(s, "csrf-1"));
	t = token_lookup("hgt_bound-1");
	assert_non_null(t);
	assert_ptr_equal(t->session, s);
	t = token_lookup("hgt_alone-1");
	assert_non_null(t);
	assert_string_equal(t->user, "ops");
	assert_string_equal(t->session_id, "");

	/* Read from the store from now on: never from a JSON file again. */
	session_stop();
	assert_int_equal(db_sql(f, "SELECT count(*) FROM sessions"), 2);
	assert_int_equal(db_sql(f, "SELECT count(*) FROM tokens"), 2);
	assert_int_equal(file_write_atomic(done, "garbage", 7, 0600), 0);
	write_json(f, "cookie-2", "csrf-2", "hgt_bound-2", "hgt_alone-2", exp);
	reopen(f);
	assert_null(session_lookup("cookie-2"));
	assert_null(token_lookup("hgt_alone-2"));
	assert_non_null(session_lookup("cookie-1"));
	assert_non_null(token_lookup("hgt_bound-1"));
	assert_int_equal(access(f->json, F_OK), -1);
	free(done);
}

/* Start with a state directory holding only a sessions.json of text. */
static void
migrate_fails(struct fixture *f, const char *text, const char *why)
{
	char	cmd[256];

	session_stop();
	snprintf(cmd, sizeof cmd, "rm -f '%s'*", f->path);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(file_write_atomic(f->json, text, strlen(text), 0600),
	    0);
	f->err[0] = '\0';
	if (session_start(f->dir, LIFETIME, f->err, sizeof f->err) != -1)
		fail_msg("accepted: %s", text);
	if (strstr(f->err, f->json) == NULL || strstr(f->err, why) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", f->err, why);
	/* Left in place, unmarked: a repaired file migrates next time. */
	assert_int_equal(access(f->json, F_OK), 0);
	assert_int_equal(db_sql(f, "SELECT count(*) FROM meta"), 0);
	assert_int_equal(db_sql(f, "SELECT count(*) FROM sessions"), 0);
}

/* A broken sessions.json stops the start, with the former errors. */
static void
test_migrate_refused(void **state)
{
	struct fixture	*f = *state;
	const char	*h = "0123456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef";
	char		 text[1024];

	migrate_fails(f, "garbage", "invalid JSON");
	migrate_fails(f, "{\"version\": 1, \"sessions\": [", "invalid JSON");
	migrate_fails(f, "{\"version\": 3, \"sessions\": [], \"tokens\": []}",
	    "version");
	migrate_fails(f, "{\"version\": 1, \"tokens\": []}", "sessions");
	migrate_fails(f, "{\"version\": 1, \"sessions\": [], \"tokens\": {}}",
	    "tokens");
	migrate_fails(f, "{\"version\": 1, \"sessions\": [{\"id\": \"x\"}], "
	    "\"tokens\": []}", "session 0");
	snprintf(text, sizeof text, "{\"version\": 1, \"sessions\": [], "
	    "\"tokens\": [{\"id\": \"0123456789abcdef\", \"hash\": \"%s\", "
	    "\"user\": \"a\", \"session_id\": \"%.32s\", \"created\": 1}]}",
	    h, h);
	migrate_fails(f, text, "no session");
	assert_null(session_by_id("0123456789abcdef0123456789abcdef"));
	/* A user name users.json would never hold. */
	snprintf(text, sizeof text, "{\"version\": 1, \"sessions\": [{"
	    "\"id\": \"%.32s\", \"token_hash\": \"%s\", \"csrf_hash\": \"%s\", "
	    "\"user\": \"../x\", \"created\": 1, \"last_seen\": 1, "
	    "\"expires\": 1}], \"tokens\": []}", h, h, h);
	migrate_fails(f, text, "session 0");
	snprintf(text, sizeof text, "{\"version\": 1, \"sessions\": [], "
	    "\"tokens\": [{\"id\": \"0123456789abcdef\", \"hash\": \"%s\", "
	    "\"user\": \"../x\", \"session_id\": \"\", \"created\": 1}]}", h);
	migrate_fails(f, text, "token 0");

	/* The same token, standalone, loads; a 0644 file becomes 0600. */
	snprintf(text, sizeof text, "{\"version\": 1, \"sessions\": [], "
	    "\"tokens\": [{\"id\": \"0123456789abcdef\", \"hash\": \"%s\", "
	    "\"user\": \"a\", \"session_id\": \"\", \"created\": 1}]}", h);
	assert_int_equal(file_write_atomic(f->json, text, strlen(text), 0644),
	    0);
	reopen(f);
	assert_int_equal(token_revoke("0123456789abcdef"), 0);
}

/* Open the store expecting failure with each of whys in the error. */
static void
open_fails(struct fixture *f, const char *why, const char *why2)
{
	f->err[0] = '\0';
	if (session_start(f->dir, LIFETIME, f->err, sizeof f->err) != -1)
		fail_msg("a broken store was accepted (want %s)", why);
	if (strstr(f->err, f->path) == NULL || strstr(f->err, why) == NULL ||
	    (why2 != NULL && strstr(f->err, why2) == NULL))
		fail_msg("error \"%s\" lacks \"%s\" or \"%s\"", f->err, why,
		    why2 != NULL ? why2 : "");
	assert_null(session_create("alice", f->cookie, sizeof f->cookie,
	    f->csrf, sizeof f->csrf));
}

/* In a child: say the store is open, then hold it until killed. */
static void
child_hold(struct fixture *f, int fd)
{
	assert_int_equal(write(fd, "open", 4), 4);
	close(fd);
	for (;;)
		pause();
}

/* A broken, foreign or locked store stops the start with a clear error. */
static void
test_corrupt(void **state)
{
	struct fixture	*f = *state;
	struct stat	 st;
	char		 buf[16], *text;
	int		 p[2], status;
	size_t		 len;
	pid_t		 pid;

	session_stop();

	/* Not a database: garbage where store.db should be. */
	assert_int_equal(file_write_atomic(f->path, "garbage garbage garbage "
	    "garbage garbage garbage garbage garbage garbage garbage", 103, 0600),
	    0);
	open_fails(f, "not a database", "restore it from a backup");

	/* A damaged page: the sessions table's root overwritten. */
	assert_int_equal(unlink(f->path), 0);
	reopen(f);
	create_ok(f, "alice");
	session_stop();
	text = file_read(f->path, 1 << 20, &len);
	assert_non_null(text);
	assert_true(len >= 3 * 4096);
	memset(text + 4096 + 8, 0xee, 2048);
	assert_int_equal(file_write_atomic(f->path, text, len, 0600), 0);
	free(text);
	open_fails(f, "unusable", NULL);

	/* A schema newer than this code. */
	assert_int_equal(unlink(f->path), 0);
	reopen(f);
	session_stop();
	db_sql(f, "PRAGMA user_version = 99");
	open_fails(f, "schema version 99", NULL);

	/* A row this code cannot have written. */
	db_sql(f, "PRAGMA user_version = 3");
	db_sql(f, "INSERT INTO sessions (id, token_hash, csrf_hash, user, "
	    "created, last_seen, expires) VALUES ('nothex', 'a', 'b', 'u', "
	    "1, 1, 99999999999)");
	open_fails(f, "missing or invalid field", "restore it from a backup");

	/* A symbolic link is not followed. */
	assert_int_equal(unlink(f->path), 0);
	assert_int_equal(symlink("/etc/passwd", f->path), 0);
	open_fails(f, "not a regular file", NULL);
	assert_int_equal(unlink(f->path), 0);

	/* A loose mode is set back to 0600. */
	reopen(f);
	session_stop();
	assert_int_equal(chmod(f->path, 0644), 0);
	reopen(f);
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);

	/* Another process holds it: refused, naming the likely cause. */
	session_stop();
	assert_int_equal(pipe(p), 0);
	if ((pid = test_fork()) == 0) {
		close(p[0]);
		reopen(f);
		child_hold(f, p[1]);
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], buf, sizeof buf), 4);
	open_fails(f, "locked", "another brokerd");
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(p[0]);
	reopen(f);

	assert_int_equal(session_start(f->dir, 0, f->err, sizeof f->err), -1);
}

/*
 * A token whose session is gone from the store (a fleet's token minted on
 * one host as its session ended on another; on one host, a store edited by
 * hand) is deleted at start, not a reason to refuse it; so is a session's
 * tokens' row when the session ends.
 */
static void
test_orphan_token(void **state)
{
	struct fixture	*f = *state;
	struct session	*s;
	char		 bearer[64], bearer2[64], sql[256];

	assert_non_null(s = session_create("alice", f->cookie,
	    sizeof f->cookie, f->csrf, sizeof f->csrf));
	assert_non_null(token_create("alice", s->id, bearer, sizeof bearer));
	assert_non_null(token_create("alice", NULL, bearer2, sizeof bearer2));
	snprintf(sql, sizeof sql, "DELETE FROM sessions WHERE id = '%s'",
	    s->id);
	session_stop();
	db_sql(f, sql);
	assert_int_equal(db_sql(f, "SELECT count(*) FROM tokens"), 2);
	reopen(f);
	assert_null(token_lookup(bearer));
	assert_non_null(token_lookup(bearer2));
	session_stop();
	assert_int_equal(db_sql(f, "SELECT count(*) FROM tokens"), 1);
	reopen(f);

	/* A session's end deletes its tokens' rows with it. */
	assert_non_null(s = session_create("bob", f->cookie, sizeof f->cookie,
	    f->csrf, sizeof f->csrf));
	assert_non_null(token_create("bob", s->id, bearer, sizeof bearer));
	session_destroy(s);
	session_stop();
	assert_int_equal(db_sql(f, "SELECT count(*) FROM tokens WHERE "
	    "user = 'bob'"), 0);
	reopen(f);
}

/* The schema of version 1, as brokerd wrote it before egress_allow. */
static const char store_v1[] =
	"CREATE TABLE sessions ("
	"  id TEXT PRIMARY KEY NOT NULL,"
	"  token_hash TEXT NOT NULL UNIQUE,"
	"  csrf_hash TEXT NOT NULL,"
	"  user TEXT NOT NULL,"
	"  created INTEGER NOT NULL,"
	"  last_seen INTEGER NOT NULL,"
	"  expires INTEGER NOT NULL,"
	"  permission TEXT NOT NULL DEFAULT '',"
	"  direct_until INTEGER NOT NULL DEFAULT 0"
	") STRICT;"
	"CREATE INDEX sessions_expires ON sessions (expires);"
	"CREATE TABLE tokens ("
	"  id TEXT PRIMARY KEY NOT NULL,"
	"  hash TEXT NOT NULL UNIQUE,"
	"  user TEXT NOT NULL,"
	"  session_id TEXT NOT NULL DEFAULT '',"
	"  created INTEGER NOT NULL"
	") STRICT;"
	"CREATE TABLE meta ("
	"  key TEXT PRIMARY KEY NOT NULL,"
	"  value INTEGER NOT NULL"
	") STRICT;"
	"PRAGMA user_version = 1;";

/* Run several statements of SQL on the closed store (a new file too). */
static void
db_exec(struct fixture *f, const char *sql)
{
	sqlite3	*db;
	char	*msg = NULL;

	assert_int_equal(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/*
 * Step 2 of the schema: a store of version 1 (a session in it) gains the
 * egress_allow column, its session none; additions are stored and come
 * back; stored ones that are not patterns are left out at load.
 */
static void
test_egress_migration(void **state)
{
	struct fixture		*f = *state;
	struct session		*s;
	struct json_object	*allow;
	char			 hash[65], csrf[65], sql[1024];
	const char		*id = "0123456789abcdef0123456789abcdef";

	session_stop();
	assert_int_equal(unlink(f->path), 0);
	db_exec(f, store_v1);
	sha256_hex("cookie-of-bob", 13, hash);
	sha256_hex("csrf-of-bob", 11, csrf);
	snprintf(sql, sizeof sql, "INSERT INTO sessions (id, token_hash, "
	    "csrf_hash, user, created, last_seen, expires, permission) VALUES "
	    "('%s', '%s', '%s', 'bob', 1, 1, %lld, "
	    "'workspace-write+allowlist')", id, hash, csrf,
	    (long long)(now_wall_ms() / 1000 + 3600));
	db_exec(f, sql);
	assert_int_equal(db_sql(f, "PRAGMA user_version"), 1);

	reopen(f);
	s = session_by_id(id);
	assert_non_null(s);
	assert_string_equal(session_permission(s),
	    "workspace-write+allowlist");
	assert_null(s->egress_allow);
	allow = json_tokener_parse("[\"pypi.org\", \"*.pythonhosted.org\"]");
	assert_int_equal(session_set_egress(s, allow), 0);
	session_stop();
	assert_int_equal(db_sql(f, "PRAGMA user_version"), 3);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM sessions WHERE id = "
	    "'%s' AND egress_allow = '[\"pypi.org\",\"*.pythonhosted.org\"]'",
	    id);
	assert_int_equal(db_sql(f, sql), 1);

	reopen(f);
	s = session_by_id(id);
	assert_non_null(s);
	assert_non_null(s->egress_allow);
	assert_int_equal(json_object_array_length(s->egress_allow), 2);
	assert_string_equal(json_object_get_string(json_object_array_get_idx(
	    s->egress_allow, 1)), "*.pythonhosted.org");
	/* An empty list is none. */
	assert_int_equal(session_set_egress(s, json_object_new_array()), 0);
	assert_null(s->egress_allow);
	session_stop();

	/* Stored items that are not patterns are dropped, never widened. */
	snprintf(sql, sizeof sql, "UPDATE sessions SET egress_allow = "
	    "'[\"ok.example\", \"*\", 5, \"a b\"]' WHERE id = '%s' RETURNING 1",
	    id);
	assert_int_equal(db_sql(f, sql), 1);
	reopen(f);
	s = session_by_id(id);
	assert_non_null(s);
	assert_int_equal(json_object_array_length(s->egress_allow), 1);
	assert_string_equal(json_object_get_string(json_object_array_get_idx(
	    s->egress_allow, 0)), "ok.example");
	session_stop();
	snprintf(sql, sizeof sql, "UPDATE sessions SET egress_allow = "
	    "'not json' WHERE id = '%s' RETURNING 1", id);
	assert_int_equal(db_sql(f, sql), 1);
	reopen(f);
	s = session_by_id(id);
	assert_non_null(s);
	assert_null(s->egress_allow);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_create_lookup, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_csrf, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_tokens_bound_and_standalone, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_token_names_its_home, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token_create_refused,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_user_names, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_revoke, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drop_user, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_persistence, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_last_seen, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_durable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sweep_batches, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_migrate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migrate_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_token, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_egress_migration, setup,
		    teardown),
	};

	log_init("test_session", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
