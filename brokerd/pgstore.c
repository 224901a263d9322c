/*
 * The PostgreSQL side of store.c (HOSTGATE_STORE=postgresql://...): the
 * same sessions, tokens and meta rows, plus the users (auth.c), in the
 * fleet's shared tables (pg.c holds the link and the schema). Every
 * statement is one bounded pg_query with text parameters; a change is
 * written in the caller's transaction (store_begin) or on its own. The
 * store's triggers NOTIFY the other hosts of each row changed, except of
 * a last_seen write (pgstore_session_touch), which changes nothing they
 * keep. Only hashes of secrets are stored, as in store.db.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "brokerd.h"

#define PGSTORE_SESSION_COLS "id, token_hash, csrf_hash, \"user\", created, " \
	"last_seen, expires, permission, direct_until, egress_allow"
#define PGSTORE_TOKEN_COLS "id, hash, \"user\", session_id, created"
#define PGSTORE_USER_COLS "name, admin, hash, created, uid, gid, " \
	"unix_user, egress_allow"

static int	pgstore_depth;		/* nested pgstore_begin calls */
static int	pgstore_failed;		/* a step of the open one failed */

/* An integer as the text of a parameter. */
static const char *
pgstore_num(char buf[24], int64_t v)
{
	snprintf(buf, 24, "%" PRId64, v);
	return buf;
}

/* Run one statement; its result (PQclear it), or NULL marking the failure. */
static PGresult *
pgstore_query(const char *sql, int n, const char *const *params)
{
	PGresult	*res;

	if ((res = pg_query(sql, n, params)) == NULL && pgstore_depth > 0)
		pgstore_failed = 1;
	return res;
}

/* Run one statement that returns no rows: the rows it changed, or -1. */
static int
pgstore_run(const char *sql, int n, const char *const *params)
{
	PGresult	*res;
	int		 rows;

	if ((res = pgstore_query(sql, n, params)) == NULL)
		return -1;
	rows = atoi(PQcmdTuples(res));
	PQclear(res);
	return rows;
}

/*
 * Begin a transaction (nests as store_begin does). A failed step marks it,
 * and its commit rolls it back: PostgreSQL answers COMMIT of an aborted
 * transaction with a rollback, not an error.
 */
int
pgstore_begin(void)
{
	if (pgstore_depth++ > 0)
		return 0;
	pgstore_failed = 0;
	if (pg_begin() == -1) {
		pgstore_depth = 0;
		return -1;
	}
	return 0;
}

/* End a transaction: 0 once committed; -1 (rolled back) if a step failed. */
int
pgstore_commit(void)
{
	if (pgstore_depth == 0)
		return -1;
	if (--pgstore_depth > 0)
		return pgstore_failed ? -1 : 0;
	if (pgstore_failed) {
		pg_rollback();
		return -1;
	}
	return pg_commit();
}

/* Abandon the transaction (the outermost one rolls back). */
void
pgstore_rollback(void)
{
	if (pgstore_depth == 0)
		return;
	pgstore_failed = 1;
	if (--pgstore_depth == 0)
		pg_rollback();
}

/* A JSON array (or NULL) as the text of a column, "[]" for none. */
static const char *
pgstore_json_text(struct json_object *arr)
{
	if (arr == NULL)
		return "[]";
	return json_object_to_json_string_ext(arr,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* Store a new session; 0, or -1 logged. */
int
pgstore_session_insert(const struct session *s)
{
	char		 c[24], l[24], e[24], d[24];
	const char	*p[] = { s->id, s->token_hash, s->csrf_hash, s->user,
			    pgstore_num(c, s->created),
			    pgstore_num(l, s->last_seen),
			    pgstore_num(e, s->expires), s->permission,
			    pgstore_num(d, s->direct_until),
			    pgstore_json_text(s->egress_allow), pg_host() };

	return pgstore_run("INSERT INTO sessions (" PGSTORE_SESSION_COLS
	    ", host) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
	    11, p) == 1 ? 0 : -1;
}

/* Store what changes in a session (profile, grant, egress, last_seen). */
int
pgstore_session_update(const struct session *s)
{
	char		 l[24], d[24];
	const char	*p[] = { s->id, pgstore_num(l, s->last_seen),
			    s->permission, pgstore_num(d, s->direct_until),
			    pgstore_json_text(s->egress_allow) };

	return pgstore_run("UPDATE sessions SET last_seen = $2, "
	    "permission = $3, direct_until = $4, egress_allow = $5 "
	    "WHERE id = $1", 5, p) == -1 ? -1 : 0;
}

/* Store a session's last_seen time alone (no other host is told). */
int
pgstore_session_touch(const struct session *s)
{
	char		 l[24];
	const char	*p[] = { s->id, pgstore_num(l, s->last_seen) };

	return pgstore_run("UPDATE sessions SET last_seen = $2 WHERE id = $1 "
	    "AND last_seen < $2", 2, p) == -1 ? -1 : 0;
}

/*
 * Delete a session's row and its tokens' (another host may hold tokens of
 * it this one has not seen yet); 0, or -1 logged.
 */
int
pgstore_session_delete(const char *id)
{
	const char	*p[] = { id };

	return pgstore_run("WITH t AS (DELETE FROM tokens WHERE "
	    "session_id = $1) DELETE FROM sessions WHERE id = $1", 1,
	    p) == -1 ? -1 : 0;
}

/* Store a new token; 0, or -1 logged. */
int
pgstore_token_insert(const struct token *t)
{
	char		 c[24];
	const char	*p[] = { t->id, t->hash, t->user, t->session_id,
			    pgstore_num(c, t->created) };

	return pgstore_run("INSERT INTO tokens (" PGSTORE_TOKEN_COLS ") "
	    "VALUES ($1, $2, $3, $4, $5)", 5, p) == 1 ? 0 : -1;
}

/* Delete a token's row; 0, or -1 logged. */
int
pgstore_token_delete(const char *id)
{
	const char	*p[] = { id };

	return pgstore_run("DELETE FROM tokens WHERE id = $1", 1, p) == -1 ?
	    -1 : 0;
}

/* The ids of at most max sessions expired at now, the oldest first. */
size_t
pgstore_expired(int64_t now, char (*ids)[33], size_t max)
{
	PGresult	*res;
	char		 n[24], m[24];
	const char	*p[] = { pgstore_num(n, now), pgstore_num(m,
			    (int64_t)max) };
	size_t		 i, count = 0;

	if ((res = pgstore_query("SELECT id FROM sessions WHERE expires <= $1 "
	    "ORDER BY expires LIMIT $2", 2, p)) == NULL)
		return 0;
	for (i = 0; i < (size_t)PQntuples(res) && count < max; i++)
		if (strlen(pg_str(res, i, 0)) < sizeof(ids[0]))
			snprintf(ids[count++], sizeof(ids[0]), "%s",
			    pg_str(res, i, 0));
	PQclear(res);
	return count;
}

/* A number kept under key in meta (0 when there is none). */
int64_t
pgstore_meta_get(const char *key)
{
	PGresult	*res;
	const char	*p[] = { key };
	int64_t		 v = 0;

	if ((res = pgstore_query("SELECT value FROM meta WHERE key = $1", 1,
	    p)) == NULL)
		return 0;
	if (PQntuples(res) > 0)
		v = pg_i64(res, 0, 0);
	PQclear(res);
	return v;
}

/* Keep a number under key; 0, or -1 logged. */
int
pgstore_meta_set(const char *key, int64_t value)
{
	char		 v[24];
	const char	*p[] = { key, pgstore_num(v, value) };

	return pgstore_run("INSERT INTO meta (key, value) VALUES ($1, $2) "
	    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", 2,
	    p) == -1 ? -1 : 0;
}

/* Copy src into a fixed field; -1 when it does not fit. */
static int
pgstore_copy(char *dst, size_t dstsz, const char *src)
{
	if (strlen(src) >= dstsz)
		return -1;
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

/*
 * Row i of a PGSTORE_SESSION_COLS result as an allocated session (the
 * caller checks it), or NULL with why when a field does not fit.
 */
static struct session *
pgstore_session_row(PGresult *res, int i, char *why, size_t whysz)
{
	struct session	*s;
	int		 bad;

	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->user = strdup(pg_str(res, i, 3))) == NULL)
		fatal("%s", __func__);
	bad = pgstore_copy(s->id, sizeof(s->id), pg_str(res, i, 0)) |
	    pgstore_copy(s->token_hash, sizeof(s->token_hash),
	    pg_str(res, i, 1)) |
	    pgstore_copy(s->csrf_hash, sizeof(s->csrf_hash),
	    pg_str(res, i, 2)) |
	    pgstore_copy(s->permission, sizeof(s->permission),
	    pg_str(res, i, 7));
	s->created = pg_i64(res, i, 4);
	s->last_seen = pg_i64(res, i, 5);
	s->expires = pg_i64(res, i, 6);
	s->direct_until = pg_i64(res, i, 8);
	s->egress_allow = json_tokener_parse(pg_str(res, i, 9));
	if (bad) {
		snprintf(why, whysz, "session %.32s: a field too long",
		    pg_str(res, i, 0));
		json_object_put(s->egress_allow);
		free(s->user);
		free(s);
		return NULL;
	}
	return s;
}

/* The same for a token of a PGSTORE_TOKEN_COLS result. */
static struct token *
pgstore_token_row(PGresult *res, int i, char *why, size_t whysz)
{
	struct token	*t;
	int		 bad;

	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (t->user = strdup(pg_str(res, i, 2))) == NULL)
		fatal("%s", __func__);
	bad = pgstore_copy(t->id, sizeof(t->id), pg_str(res, i, 0)) |
	    pgstore_copy(t->hash, sizeof(t->hash), pg_str(res, i, 1)) |
	    pgstore_copy(t->session_id, sizeof(t->session_id),
	    pg_str(res, i, 3));
	t->created = pg_i64(res, i, 4);
	if (bad) {
		snprintf(why, whysz, "token %.16s: a field too long",
		    pg_str(res, i, 0));
		free(t->user);
		free(t);
		return NULL;
	}
	return t;
}

/*
 * Read every session, then every token, as store_load does for store.db.
 * -1 with err "the store: why" on the first refusal or read error.
 */
int
pgstore_load(int (*add_session)(struct session *, char *, size_t),
    int (*add_token)(struct token *, char *, size_t), char *err,
    size_t errsz)
{
	PGresult	*res;
	struct session	*s;
	struct token	*t;
	char		 why[256];
	int		 i;

	if ((res = pgstore_query("SELECT " PGSTORE_SESSION_COLS " FROM "
	    "sessions ORDER BY created, id", 0, NULL)) == NULL)
		goto pgerr;
	for (i = 0; i < PQntuples(res); i++) {
		if ((s = pgstore_session_row(res, i, why, sizeof(why))) ==
		    NULL || add_session(s, why, sizeof(why)) == -1)
			goto refused;
	}
	PQclear(res);
	if ((res = pgstore_query("SELECT " PGSTORE_TOKEN_COLS " FROM tokens "
	    "ORDER BY created, id", 0, NULL)) == NULL)
		goto pgerr;
	for (i = 0; i < PQntuples(res); i++) {
		if ((t = pgstore_token_row(res, i, why, sizeof(why))) ==
		    NULL || add_token(t, why, sizeof(why)) == -1)
			goto refused;
	}
	PQclear(res);
	return 0;
refused:
	PQclear(res);
	snprintf(err, errsz, "the PostgreSQL store: %s", why);
	return -1;
pgerr:
	snprintf(err, errsz, "the PostgreSQL store: %s", pg_error());
	return -1;
}

/*
 * The session whose id (by_hash 0) or token_hash (1) is key: 1 with *out
 * (allocated, the caller's to check), 0 when there is none, -1 when the
 * store fails or the row is unfit (logged).
 */
int
pgstore_session_get(const char *key, int by_hash, struct session **out)
{
	PGresult	*res;
	const char	*p[] = { key };
	char		 why[256];
	int		 rc = 0;

	*out = NULL;
	res = pgstore_query(by_hash ? "SELECT " PGSTORE_SESSION_COLS " FROM "
	    "sessions WHERE token_hash = $1" : "SELECT " PGSTORE_SESSION_COLS
	    " FROM sessions WHERE id = $1", 1, p);
	if (res == NULL)
		return -1;
	if (PQntuples(res) > 0) {
		if ((*out = pgstore_session_row(res, 0, why, sizeof(why))) ==
		    NULL) {
			log_warnx("the PostgreSQL store: %s", why);
			rc = -1;
		} else
			rc = 1;
	}
	PQclear(res);
	return rc;
}

/* The same for the token whose id (by_hash 0) or hash (1) is key. */
int
pgstore_token_get(const char *key, int by_hash, struct token **out)
{
	PGresult	*res;
	const char	*p[] = { key };
	char		 why[256];
	int		 rc = 0;

	*out = NULL;
	res = pgstore_query(by_hash ? "SELECT " PGSTORE_TOKEN_COLS " FROM "
	    "tokens WHERE hash = $1" : "SELECT " PGSTORE_TOKEN_COLS " FROM "
	    "tokens WHERE id = $1", 1, p);
	if (res == NULL)
		return -1;
	if (PQntuples(res) > 0) {
		if ((*out = pgstore_token_row(res, 0, why, sizeof(why))) ==
		    NULL) {
			log_warnx("the PostgreSQL store: %s", why);
			rc = -1;
		} else
			rc = 1;
	}
	PQclear(res);
	return rc;
}

/*
 * Store a new user. 1 when inserted; 0 when its name or its uid is another
 * user's already (the UNIQUE constraints: another host's add may have won
 * the race); -1 when the store fails.
 */
int
pgstore_user_insert(const struct user *u)
{
	char		 c[24], uid[24], gid[24];
	const char	*p[] = { u->name, u->admin ? "t" : "f", u->hash,
			    pgstore_num(c, u->created),
			    pgstore_num(uid, u->uid), pgstore_num(gid, u->gid),
			    u->unix_user, pgstore_json_text(u->egress_allow) };

	return pgstore_run("INSERT INTO users (" PGSTORE_USER_COLS ") VALUES "
	    "($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING", 8, p);
}

/* Store a user's changed fields (role, hash, ids, egress): rows or -1. */
int
pgstore_user_update(const struct user *u)
{
	char		 uid[24], gid[24];
	const char	*p[] = { u->name, u->admin ? "t" : "f", u->hash,
			    pgstore_num(uid, u->uid), pgstore_num(gid, u->gid),
			    u->unix_user, pgstore_json_text(u->egress_allow) };

	return pgstore_run("UPDATE users SET admin = $2, hash = $3, uid = $4, "
	    "gid = $5, unix_user = $6, egress_allow = $7 WHERE name = $1", 7,
	    p);
}

/* Delete a user's row: 1 deleted, 0 none was there, -1 the store failed. */
int
pgstore_user_delete(const char *name)
{
	const char	*p[] = { name };

	return pgstore_run("DELETE FROM users WHERE name = $1", 1, p);
}

/* Row i of a PGSTORE_USER_COLS result as an allocated user (unchecked). */
static struct user *
pgstore_user_row(PGresult *res, int i)
{
	struct user	*u;

	if ((u = calloc(1, sizeof(*u))) == NULL ||
	    (u->name = strdup(pg_str(res, i, 0))) == NULL ||
	    (u->hash = strdup(pg_str(res, i, 2))) == NULL)
		fatal("%s", __func__);
	u->admin = strcmp(pg_str(res, i, 1), "t") == 0;
	u->created = pg_i64(res, i, 3);
	u->uid = pg_i64(res, i, 4);
	u->gid = pg_i64(res, i, 5);
	if (!PQgetisnull(res, i, 6) &&
	    (u->unix_user = strdup(pg_str(res, i, 6))) == NULL)
		fatal("%s", __func__);
	u->egress_allow = json_tokener_parse(pg_str(res, i, 7));
	return u;
}

/*
 * The user called name: 1 with *out (allocated, unchecked), 0 when there
 * is none, -1 when the store fails.
 */
int
pgstore_user_get(const char *name, struct user **out)
{
	PGresult	*res;
	const char	*p[] = { name };
	int		 rc = 0;

	*out = NULL;
	if ((res = pgstore_query("SELECT " PGSTORE_USER_COLS " FROM users "
	    "WHERE name = $1", 1, p)) == NULL)
		return -1;
	if (PQntuples(res) > 0) {
		*out = pgstore_user_row(res, 0);
		rc = 1;
	}
	PQclear(res);
	return rc;
}

/*
 * Hand every user (allocated, the callee's) to add, oldest first; -1 with
 * err on the first refusal (add fills why) or a read error.
 */
int
pgstore_user_load(int (*add)(struct user *, char *, size_t), char *err,
    size_t errsz)
{
	PGresult	*res;
	char		 why[256];
	int		 i;

	if ((res = pgstore_query("SELECT " PGSTORE_USER_COLS " FROM users "
	    "ORDER BY created, name", 0, NULL)) == NULL) {
		snprintf(err, errsz, "the PostgreSQL store: %s", pg_error());
		return -1;
	}
	for (i = 0; i < PQntuples(res); i++) {
		if (add(pgstore_user_row(res, i), why, sizeof(why)) == -1) {
			snprintf(err, errsz, "the PostgreSQL store: %s", why);
			PQclear(res);
			return -1;
		}
	}
	PQclear(res);
	return 0;
}

/* Delete every session and token row of a user (in the caller's transaction). */
int
pgstore_drop_user(const char *user)
{
	const char	*p[] = { user };

	if (pgstore_run("DELETE FROM tokens WHERE \"user\" = $1", 1, p) == -1 ||
	    pgstore_run("DELETE FROM sessions WHERE \"user\" = $1", 1, p) == -1)
		return -1;
	return 0;
}
