/*
 * The contract of struct store_ops (brokerd/store.c): the same tests run
 * against each store. The embedded one (store_sqlite.c) runs in memory,
 * always; the PostgreSQL one (store_pg.c) when HG_TEST_PG_URL names a
 * database at the current schema (tests/system/test_store_contract.py
 * gives one), else its tests are skipped. A stored field is added to both
 * stores; a test here makes one that forgets it fail.
 */

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../brokerd/brokerd.h"

/* Which store the group is for, and runs against (NULL: skipped). */
static const struct store_ops	*wanted;
static const struct store_ops	*backend;
static struct config		 pg_conf;
static char			 err[512];

/* Open the embedded store in memory, or connect to HG_TEST_PG_URL's. */
static int
group_setup(void **state)
{
	const char	*url;

	if (wanted == &store_sqlite) {
		backend = &store_sqlite;
		return 0;
	}
	backend = NULL;
	if ((url = getenv("HG_TEST_PG_URL")) == NULL || *url == '\0')
		return 0;	/* each test is skipped */
	pg_conf.store = strdup(url);
	pg_conf.store_timeout = 10;
	pg_conf.host_id = strdup("contract");
	if (store_init(&pg_conf, err, sizeof(err)) == -1) {
		fprintf(stderr, "HG_TEST_PG_URL: %s\n", err);
		return -1;
	}
	backend = &store_pg;
	return 0;
}

/* Close the group's store. */
static int
group_teardown(void **state)
{
	if (backend != NULL)
		store_close();
	free(pg_conf.store);
	free(pg_conf.host_id);
	memset(&pg_conf, 0, sizeof(pg_conf));
	return 0;
}

/* An empty store for each test: a new one in memory, or emptied tables. */
static int
setup(void **state)
{
	if (backend == NULL)
		return 0;
	if (backend == &store_sqlite) {
		store = &store_sqlite;
		if (store_sqlite_open_path(":memory:", err, sizeof(err)) == -1)
			fail_msg("%s", err);
		return 0;
	}
	if (pg_exec("DELETE FROM users; DELETE FROM sessions; "
	    "DELETE FROM tokens; DELETE FROM meta; DELETE FROM ratelimits",
	    0, NULL) == -1)
		fail_msg("emptying the store: %s", pg_error());
	return 0;
}

/* Skip a test of a store that is not there. */
#define NEED_STORE()							\
	do {								\
		if (backend == NULL)					\
			skip();						\
	} while (0)

/* A session of user with the fields set from n. */
static struct session *
session_make(int n, const char *user, int64_t expires)
{
	struct session	*s;

	s = calloc(1, sizeof(*s));
	assert_non_null(s);
	snprintf(s->id, sizeof(s->id), "%032x", n);
	snprintf(s->token_hash, sizeof(s->token_hash), "%064x", n);
	snprintf(s->csrf_hash, sizeof(s->csrf_hash), "%063xc", n);
	s->user = strdup(user);
	s->created = 1000 + n;
	s->last_seen = 2000 + n;
	s->expires = expires;
	snprintf(s->permission, sizeof(s->permission), "read-only");
	s->direct_until = 5000 + n;
	s->egress_allow = json_tokener_parse("[\"pypi.org\", \"*.x.org\"]");
	return s;
}

/* Free a session made or read here. */
static void
session_unmake(struct session *s)
{
	if (s == NULL)
		return;
	json_object_put(s->egress_allow);
	free(s->user);
	free(s);
}

/* A token of user, bound to session_id ("" standalone). */
static struct token *
token_make(int n, const char *user, const char *session_id)
{
	struct token	*t;

	t = calloc(1, sizeof(*t));
	assert_non_null(t);
	snprintf(t->id, sizeof(t->id), "%016x", n);
	snprintf(t->hash, sizeof(t->hash), "%063xb", n);
	t->user = strdup(user);
	snprintf(t->session_id, sizeof(t->session_id), "%s", session_id);
	t->created = 3000 + n;
	return t;
}

/* Free a token made or read here. */
static void
token_unmake(struct token *t)
{
	if (t == NULL)
		return;
	free(t->user);
	free(t);
}

/* The text of a JSON array, "[]" for NULL. */
static const char *
json_text(struct json_object *o)
{
	return o == NULL ? "[]" : json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN);
}

/* Every stored field of a session comes back as it went in. */
static void
session_same(const struct session *a, const struct session *b)
{
	assert_string_equal(a->id, b->id);
	assert_string_equal(a->token_hash, b->token_hash);
	assert_string_equal(a->csrf_hash, b->csrf_hash);
	assert_string_equal(a->user, b->user);
	assert_int_equal(a->created, b->created);
	assert_int_equal(a->last_seen, b->last_seen);
	assert_int_equal(a->expires, b->expires);
	assert_string_equal(a->permission, b->permission);
	assert_int_equal(a->direct_until, b->direct_until);
	assert_string_equal(json_text(a->egress_allow),
	    json_text(b->egress_allow));
}

/* Every stored field of a token comes back as it went in. */
static void
token_same(const struct token *a, const struct token *b)
{
	assert_string_equal(a->id, b->id);
	assert_string_equal(a->hash, b->hash);
	assert_string_equal(a->user, b->user);
	assert_string_equal(a->session_id, b->session_id);
	assert_int_equal(a->created, b->created);
}

/* What load hands over, in order. */
static struct session	*loaded_s[8];
static struct token	*loaded_t[8];
static size_t		 nloaded_s, nloaded_t;

static int
load_session(struct session *s, char *why, size_t whysz)
{
	assert_true(nloaded_s < 8);
	loaded_s[nloaded_s++] = s;
	return 0;
}

static int
load_token(struct token *t, char *why, size_t whysz)
{
	assert_true(nloaded_t < 8);
	loaded_t[nloaded_t++] = t;
	return 0;
}

/* Load everything into loaded_s and loaded_t. */
static void
load_all(void)
{
	size_t	i;

	for (i = 0; i < nloaded_s; i++)
		session_unmake(loaded_s[i]);
	for (i = 0; i < nloaded_t; i++)
		token_unmake(loaded_t[i]);
	nloaded_s = nloaded_t = 0;
	if (store->load(load_session, load_token, err, sizeof(err)) == -1)
		fail_msg("load: %s", err);
}

/*
 * A session is stored whole, found by id and by its cookie's hash, its
 * changing fields updated; last_seen alone is touched; it is loaded.
 */
static void
test_session_fields(void **state)
{
	struct session	*s, *got;

	NEED_STORE();
	s = session_make(1, "alice", 9000);
	assert_int_equal(store->session_insert(s), 0);
	assert_int_equal(store->session_get(s->id, 0, &got), 1);
	session_same(s, got);
	session_unmake(got);
	assert_int_equal(store->session_get(s->token_hash, 1, &got), 1);
	session_same(s, got);
	session_unmake(got);
	assert_int_equal(store->session_get("00", 0, &got), 0);
	assert_null(got);

	s->last_seen = 2500;
	snprintf(s->permission, sizeof(s->permission), "workspace-write");
	s->direct_until = 0;
	json_object_put(s->egress_allow);
	s->egress_allow = NULL;
	assert_int_equal(store->session_update(s), 0);
	s->last_seen = 2600;
	assert_int_equal(store->session_touch(s), 0);
	load_all();
	assert_int_equal(nloaded_s, 1);
	session_same(s, loaded_s[0]);
	session_unmake(s);
}

/* A token is stored whole, found by id and hash, deleted alone. */
static void
test_token_fields(void **state)
{
	struct token	*t, *u, *got;

	NEED_STORE();
	t = token_make(1, "alice", "");
	u = token_make(2, "bob", "");
	assert_int_equal(store->token_insert(t), 0);
	assert_int_equal(store->token_insert(u), 0);
	assert_int_equal(store->token_get(t->id, 0, &got), 1);
	token_same(t, got);
	token_unmake(got);
	assert_int_equal(store->token_get(u->hash, 1, &got), 1);
	token_same(u, got);
	token_unmake(got);
	assert_int_equal(store->token_delete(t->id), 0);
	assert_int_equal(store->token_get(t->id, 0, &got), 0);
	load_all();
	assert_int_equal(nloaded_t, 1);
	token_same(u, loaded_t[0]);
	token_unmake(t);
	token_unmake(u);
}

/* A session's end takes its tokens; a user's drop takes all of theirs. */
static void
test_deletes(void **state)
{
	struct session	*a, *b;
	struct token	*ta, *tb, *lone;
	struct token	*got;

	NEED_STORE();
	a = session_make(1, "alice", 9000);
	b = session_make(2, "bob", 9000);
	ta = token_make(1, "alice", a->id);
	tb = token_make(2, "bob", b->id);
	lone = token_make(3, "bob", "");
	assert_int_equal(store->session_insert(a), 0);
	assert_int_equal(store->session_insert(b), 0);
	assert_int_equal(store->token_insert(ta), 0);
	assert_int_equal(store->token_insert(tb), 0);
	assert_int_equal(store->token_insert(lone), 0);
	assert_int_equal(store->session_delete(a->id), 0);
	assert_int_equal(store->token_get(ta->id, 0, &got), 0);
	assert_int_equal(store->token_get(tb->id, 0, &got), 1);
	token_unmake(got);
	assert_int_equal(store->drop_user("bob"), 0);
	load_all();
	assert_int_equal(nloaded_s, 0);
	assert_int_equal(nloaded_t, 0);
	session_unmake(a);
	session_unmake(b);
	token_unmake(ta);
	token_unmake(tb);
	token_unmake(lone);
}

/* Sessions and tokens load oldest first; expired ones oldest first. */
static void
test_order_and_expiry(void **state)
{
	struct session	*s[4];
	char		 ids[4][33];
	int		 i;

	NEED_STORE();
	/* Created in order 3, 1, 2, 0; expiring in order 2, 0, 3, 1. */
	s[0] = session_make(0, "alice", 200);
	s[0]->created = 40;
	s[1] = session_make(1, "alice", 400);
	s[1]->created = 20;
	s[2] = session_make(2, "alice", 100);
	s[2]->created = 30;
	s[3] = session_make(3, "alice", 300);
	s[3]->created = 10;
	for (i = 0; i < 4; i++)
		assert_int_equal(store->session_insert(s[i]), 0);
	load_all();
	assert_int_equal(nloaded_s, 4);
	assert_string_equal(loaded_s[0]->id, s[3]->id);
	assert_string_equal(loaded_s[1]->id, s[1]->id);
	assert_string_equal(loaded_s[2]->id, s[2]->id);
	assert_string_equal(loaded_s[3]->id, s[0]->id);
	assert_int_equal(store->expired(250, ids, 4), 2);
	assert_string_equal(ids[0], s[2]->id);
	assert_string_equal(ids[1], s[0]->id);
	assert_int_equal(store->expired(1000, ids, 3), 3);
	assert_string_equal(ids[2], s[3]->id);
	assert_int_equal(store->expired(50, ids, 4), 0);
	for (i = 0; i < 4; i++)
		session_unmake(s[i]);
}

/*
 * A transaction writes everything or nothing: rolled back, or a step of
 * it failed (a duplicate id), nothing is stored; nested, the outermost
 * pair counts.
 */
static void
test_transactions(void **state)
{
	struct session	*a, *b, *got;

	NEED_STORE();
	a = session_make(1, "alice", 9000);
	b = session_make(2, "alice", 9000);
	assert_int_equal(store->begin(), 0);
	assert_int_equal(store->session_insert(a), 0);
	store->rollback();
	assert_int_equal(store->session_get(a->id, 0, &got), 0);

	assert_int_equal(store->begin(), 0);
	assert_int_equal(store->begin(), 0);
	assert_int_equal(store->session_insert(a), 0);
	assert_int_equal(store->commit(), 0);
	assert_int_equal(store->session_insert(b), 0);
	assert_int_equal(store->commit(), 0);
	load_all();
	assert_int_equal(nloaded_s, 2);

	snprintf(b->id, sizeof(b->id), "%032x", 3);
	snprintf(b->token_hash, sizeof(b->token_hash), "%064x", 3);
	assert_int_equal(store->begin(), 0);
	assert_int_equal(store->session_insert(b), 0);
	assert_int_equal(store->session_insert(a), -1);	/* a is there */
	assert_int_equal(store->commit(), -1);
	assert_int_equal(store->session_get(b->id, 0, &got), 0);
	session_unmake(a);
	session_unmake(b);
}

/* A number kept under a key; 0 for none; set again, replaced. */
static void
test_meta(void **state)
{
	NEED_STORE();
	assert_int_equal(store->meta_get("contract"), 0);
	assert_int_equal(store->meta_set("contract", 42), 0);
	assert_int_equal(store->meta_get("contract"), 42);
	assert_int_equal(store->meta_set("contract", INT64_C(1) << 40), 0);
	assert_int_equal(store->meta_get("contract"), INT64_C(1) << 40);
}

/* A user made from n. */
static struct user
user_make(const char *name, int64_t uid, const char *unix_user)
{
	struct user	u;

	memset(&u, 0, sizeof(u));
	u.name = (char *)name;
	u.admin = uid % 2;
	u.hash = (char *)"$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA";
	u.created = uid - 100;
	u.uid = uid;
	u.gid = uid + 1;
	u.unix_user = (char *)unix_user;
	return u;
}

/* Free a user read from the store. */
static void
user_unmake(struct user *u)
{
	if (u == NULL)
		return;
	free(u->name);
	free(u->hash);
	free(u->unix_user);
	json_object_put(u->egress_allow);
	free(u);
}

/* Every stored field of a user comes back as it went in. */
static void
user_same(const struct user *a, const struct user *b)
{
	assert_string_equal(a->name, b->name);
	assert_int_equal(a->admin, b->admin);
	assert_string_equal(a->hash, b->hash);
	assert_int_equal(a->created, b->created);
	assert_int_equal(a->uid, b->uid);
	assert_int_equal(a->gid, b->gid);
	if (a->unix_user == NULL)
		assert_null(b->unix_user);
	else
		assert_string_equal(a->unix_user, b->unix_user);
	assert_string_equal(json_text(a->egress_allow),
	    json_text(b->egress_allow));
}

static struct user	*loaded_u[8];
static size_t		 nloaded_u;

static int
load_user(struct user *u, char *why, size_t whysz)
{
	assert_true(nloaded_u < 8);
	loaded_u[nloaded_u++] = u;
	return 0;
}

/*
 * A user is stored whole; a second one with its name or its uid is
 * refused (0); updates and deletes say how many rows they changed; users
 * load oldest first.
 */
static void
test_users(void **state)
{
	struct user	 a = user_make("alice", 5001, NULL);
	struct user	 b = user_make("bob", 5000, "bob");
	struct user	 same_name = user_make("alice", 5007, NULL);
	struct user	 same_uid = user_make("carol", 5001, NULL);
	struct user	*got;
	size_t		 i;

	NEED_STORE();
	a.egress_allow = json_tokener_parse("[\"example.org\"]");
	assert_int_equal(store->user_insert(&a), 1);
	assert_int_equal(store->user_insert(&b), 1);
	assert_int_equal(store->user_insert(&same_name), 0);
	assert_int_equal(store->user_insert(&same_uid), 0);
	assert_int_equal(store->user_get("alice", &got), 1);
	user_same(&a, got);
	user_unmake(got);
	assert_int_equal(store->user_get("carol", &got), 0);
	assert_null(got);

	b.admin = 1;
	b.hash = (char *)"$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$bmV3";
	b.uid = b.gid = 5003;
	b.unix_user = NULL;
	assert_int_equal(store->user_update(&b), 1);
	assert_int_equal(store->user_update(&same_uid), 0);	/* no carol */
	nloaded_u = 0;
	assert_int_equal(store->user_load(load_user, err, sizeof(err)), 0);
	assert_int_equal(nloaded_u, 2);
	user_same(&b, loaded_u[0]);	/* created 4900, before alice */
	user_same(&a, loaded_u[1]);
	for (i = 0; i < nloaded_u; i++)
		user_unmake(loaded_u[i]);
	assert_int_equal(store->user_delete("alice"), 1);
	assert_int_equal(store->user_delete("alice"), 0);
	assert_int_equal(store->user_get("alice", &got), 0);
	json_object_put(a.egress_allow);
}

/* Ready, with a kind and a place to name in messages. */
static void
test_names(void **state)
{
	char	why[256];

	NEED_STORE();
	assert_int_equal(store->ready(why, sizeof(why)), 0);
	assert_non_null(store->kind);
	assert_non_null(store->where);
	assert_non_null(store->error());
}

/*
 * The fleet's hooks come as a set: a store with notifications has the
 * rest; the embedded store has none of them.
 */
static void
test_fleet_hooks(void **state)
{
	int	n;

	NEED_STORE();
	n = (store->events != NULL) + (store->over_tcp != NULL) +
	    (store->on_notify != NULL) + (store->on_reconnect != NULL) +
	    (store->rate != NULL) + (store->grant_claim != NULL) +
	    (store->grant_stored != NULL);
	assert_int_equal(n, store->one_host ? 0 : 7);
}

/* A fleet's grant is claimed once; its shared bucket empties. */
static void
test_fleet_grant_and_rate(void **state)
{
	struct session	*s;
	int		 i;

	NEED_STORE();
	if (store->grant_claim == NULL)
		skip();
	s = session_make(1, "alice", 9000);
	assert_int_equal(store->session_insert(s), 0);
	assert_int_equal(store->grant_stored(s->id), s->direct_until);
	assert_int_equal(store->grant_claim(s->id, s->direct_until + 1), 0);
	assert_int_equal(store->grant_claim(s->id, s->direct_until), 1);
	assert_int_equal(store->grant_claim(s->id, s->direct_until), 0);
	assert_int_equal(store->grant_stored(s->id), 0);
	assert_int_equal(store->grant_stored("nosuch"), 0);
	session_unmake(s);
	/* Two tokens, one a minute: two takes pass, the third waits. */
	for (i = 0; i < 2; i++)
		assert_int_equal(store->rate("contract", "k", "2",
		    "0.016666666666666666", 1, 0), 0);
	assert_true(store->rate("contract", "k", "2",
	    "0.016666666666666666", 1, 1) >= 1);
	assert_true(store->rate("contract", "k", "2",
	    "0.016666666666666666", 0, 0) >= 1);
	assert_int_equal(store->rate("contract", "other", "2",
	    "0.016666666666666666", 0, 0), 0);
}

#define CONTRACT							\
	cmocka_unit_test_setup(test_session_fields, setup),		\
	cmocka_unit_test_setup(test_token_fields, setup),		\
	cmocka_unit_test_setup(test_deletes, setup),			\
	cmocka_unit_test_setup(test_order_and_expiry, setup),		\
	cmocka_unit_test_setup(test_transactions, setup),		\
	cmocka_unit_test_setup(test_meta, setup),			\
	cmocka_unit_test_setup(test_users, setup),			\
	cmocka_unit_test_setup(test_names, setup),			\
	cmocka_unit_test_setup(test_fleet_hooks, setup),		\
	cmocka_unit_test_setup(test_fleet_grant_and_rate, setup)

int
main(void)
{
	const struct CMUnitTest embedded[] = { CONTRACT };
	const struct CMUnitTest postgresql[] = { CONTRACT };
	int	rc;

	log_init("test_store", 1);
	wanted = &store_sqlite;
	rc = _cmocka_run_group_tests("embedded", embedded,
	    sizeof(embedded) / sizeof(embedded[0]), group_setup,
	    group_teardown);
	wanted = &store_pg;
	rc |= _cmocka_run_group_tests("postgresql", postgresql,
	    sizeof(postgresql) / sizeof(postgresql[0]), group_setup,
	    group_teardown);
	return rc;
}
