/*
 * Unit tests for brokerd/storeadm.c, hgctl's off-line store commands, on
 * the embedded store: what a state directory holds (a real store.db made
 * by session.c, a users.json), the refusal while store.db is held as a
 * running brokerd holds it, and a copy's refusals before it writes.
 */

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

#define USERS_JSON \
	"{\"version\": 1, \"users\": [" \
	"{\"name\": \"alice\", \"role\": \"admin\", \"hash\": \"$argon2id$x\", " \
	"\"created\": 1, \"uid\": 1879048192, \"gid\": 1879048192}, " \
	"{\"name\": \"bob\", \"role\": \"user\", \"hash\": \"$argon2id$y\", " \
	"\"created\": 2, \"uid\": 1879048193, \"gid\": 1879048193}]}\n"

struct fixture {
	char	dir[64];
	char	err[512];
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

/* An empty state directory. */
static int
setup(void **state)
{
	struct fixture	*f;

	f = calloc(1, sizeof *f);
	assert_non_null(f);
	snprintf(f->dir, sizeof f->dir, "/tmp/test_storeadm.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

/* Remove it. */
static int
teardown(void **state)
{
	struct fixture	*f = *state;
	char		 cmd[128];

	session_stop();
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Write a file of the state directory (0600). */
static void
put(struct fixture *f, const char *name, const char *text)
{
	char	*path = path_join(f->dir, name);

	assert_int_equal(file_write_atomic(path, text, strlen(text), 0600), 0);
	free(path);
}

/*
 * A store.db with users alice and bob (as brokerd takes in USERS_JSON),
 * one session of bob's and two tokens, closed.
 */
static void
make_store(struct fixture *f)
{
	char	cookie[64], csrf[64], bearer[64];
	struct session	*s;
	struct user	 alice = { .name = "alice", .admin = 1,
			    .hash = "$argon2id$x", .created = 1,
			    .uid = 1879048192, .gid = 1879048192 };
	struct user	 bob = { .name = "bob", .hash = "$argon2id$y",
			    .created = 2, .uid = 1879048193,
			    .gid = 1879048193 };

	assert_int_equal(session_start(f->dir, 3600, f->err, sizeof f->err), 0);
	assert_int_equal(store->user_insert(&alice), 1);
	assert_int_equal(store->user_insert(&bob), 1);
	assert_non_null(s = session_create("bob", cookie, sizeof cookie, csrf,
	    sizeof csrf));
	assert_non_null(token_create("bob", s->id, bearer, sizeof bearer));
	assert_non_null(token_create("alice", NULL, bearer, sizeof bearer));
	session_stop();
}

/* Nothing there yet: no users, no store, nothing to count. */
static void
test_empty(void **state)
{
	struct fixture		*f = *state;
	struct storeadm_counts	 c;

	assert_int_equal(storeadm_embedded_status(f->dir, &c, f->err,
	    sizeof f->err), 0);
	assert_int_equal(c.users, 0);
	assert_int_equal(c.sessions, 0);
	assert_int_equal(c.tokens, 0);
	assert_int_equal(c.schema, 0);
}

/* A stopped host's files, counted; its schema read from store.db. */
static void
test_counts(void **state)
{
	struct fixture		*f = *state;
	struct storeadm_counts	 c;

	put(f, "users.json", USERS_JSON);
	make_store(f);
	assert_int_equal(storeadm_embedded_status(f->dir, &c, f->err,
	    sizeof f->err), 0);
	assert_int_equal(c.users, 2);
	assert_int_equal(c.sessions, 1);
	assert_int_equal(c.tokens, 2);
	assert_int_equal(c.schema, 3);
}

/* store.db held as brokerd holds it: 1, the counts left to brokerd. */
static void
test_held(void **state)
{
	struct fixture		*f = *state;
	struct storeadm_counts	 c;

	put(f, "users.json", USERS_JSON);
	make_store(f);
	assert_int_equal(session_start(f->dir, 3600, f->err, sizeof f->err), 0);
	assert_int_equal(storeadm_embedded_status(f->dir, &c, f->err,
	    sizeof f->err), 1);
	assert_non_null(strstr(f->err, "brokerd is running"));
	assert_int_equal(c.users, -1);
	assert_int_equal(c.sessions, -1);
	assert_int_equal(c.schema, -1);
	session_stop();
	/* Let go, it reads again. */
	assert_int_equal(storeadm_embedded_status(f->dir, &c, f->err,
	    sizeof f->err), 0);
	assert_int_equal(c.sessions, 1);
}

/* A users.json that is not one: -1, naming it. */
static void
test_bad_users(void **state)
{
	struct fixture		*f = *state;
	struct storeadm_counts	 c;

	put(f, "users.json", "{\"version\": 7, \"users\": []}");
	assert_int_equal(storeadm_embedded_status(f->dir, &c, f->err,
	    sizeof f->err), -1);
	assert_non_null(strstr(f->err, "users.json"));
}

/* A copy to a store that cannot be reached: refused, nothing read. */
static void
test_copy_unreachable(void **state)
{
	struct fixture		*f = *state;
	struct storeadm_counts	 c;

	put(f, "users.json", USERS_JSON);
	assert_int_equal(storeadm_copy(f->dir, "h1",
	    "host=/nonexistent-dir dbname=x", 2, &c, f->err, sizeof f->err),
	    -1);
	assert_non_null(strstr(f->err, "nonexistent-dir"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_users, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_copy_unreachable, setup,
		    teardown),
	};

	log_init("test_storeadm", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
