/*
 * The PostgreSQL store of a fleet (struct store_ops store_pg,
 * HOSTGATE_STORE=postgresql://...): the users, sessions, tokens, meta and
 * rate-limit rows of store_sqlite.c's, in the fleet's shared tables (pg.c
 * holds the link and the schema). Every statement is one bounded pg_query
 * with text parameters; a change is written in the caller's transaction
 * (begin) or on its own. The
 * store's triggers NOTIFY the other hosts of each row changed, except of
 * a last_seen write (store_pg_session_touch), which changes nothing they
 * keep. Only hashes of secrets are stored, as in store.db.
 */

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "brokerd.h"

#define STORE_PG_SESSION_COLS "id, token_hash, csrf_hash, \"user\", " \
	"created, " \
	"last_seen, expires, permission, direct_until, egress_allow"
#define STORE_PG_TOKEN_COLS "id, hash, \"user\", session_id, created"
#define STORE_PG_USER_COLS "name, admin, hash, created, uid, gid, " \
	"unix_user, egress_allow, home"

static int	store_pg_depth;		/* nested begin calls */
static int	store_pg_failed;	/* a step of the open one failed */

/* An integer as the text of a parameter. */
static const char *
store_pg_num(char buf[24], int64_t v)
{
	snprintf(buf, 24, "%" PRId64, v);
	return buf;
}

/* Run one statement; its result (PQclear it), or NULL marking the failure. */
static PGresult *
store_pg_query(const char *sql, int n, const char *const *params)
{
	PGresult	*res;

	if ((res = pg_query(sql, n, params)) == NULL && store_pg_depth > 0)
		store_pg_failed = 1;
	return res;
}

/* Run one statement that returns no rows: the rows it changed, or -1. */
static int
store_pg_run(const char *sql, int n, const char *const *params)
{
	PGresult	*res;
	int		 rows;

	if ((res = store_pg_query(sql, n, params)) == NULL)
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
static int
store_pg_begin(void)
{
	if (store_pg_depth++ > 0)
		return 0;
	store_pg_failed = 0;
	if (pg_begin() == -1) {
		store_pg_depth = 0;
		return -1;
	}
	return 0;
}

/* End a transaction: 0 once committed; -1 (rolled back) if a step failed. */
static int
store_pg_commit(void)
{
	if (store_pg_depth == 0)
		return -1;
	if (--store_pg_depth > 0)
		return store_pg_failed ? -1 : 0;
	if (store_pg_failed) {
		pg_rollback();
		return -1;
	}
	return pg_commit();
}

/* Abandon the transaction (the outermost one rolls back). */
static void
store_pg_rollback(void)
{
	if (store_pg_depth == 0)
		return;
	store_pg_failed = 1;
	if (--store_pg_depth == 0)
		pg_rollback();
}

/* A JSON array (or NULL) as the text of a column, "[]" for none. */
static const char *
store_pg_json_text(struct json_object *arr)
{
	if (arr == NULL)
		return "[]";
	return json_object_to_json_string_ext(arr,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* Store a new session; 0, or -1 logged. */
static int
store_pg_session_insert(const struct session *s)
{
	char		 c[24], l[24], e[24], d[24];
	const char	*p[] = { s->id, s->token_hash, s->csrf_hash, s->user,
			    store_pg_num(c, s->created),
			    store_pg_num(l, s->last_seen),
			    store_pg_num(e, s->expires), s->permission,
			    store_pg_num(d, s->direct_until),
			    store_pg_json_text(s->egress_allow), pg_host() };

	return store_pg_run("INSERT INTO sessions (" STORE_PG_SESSION_COLS
	    ", host) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
	    11, p) == 1 ? 0 : -1;
}

/* Store what changes in a session (profile, grant, egress, last_seen). */
static int
store_pg_session_update(const struct session *s)
{
	char		 l[24], d[24];
	const char	*p[] = { s->id, store_pg_num(l, s->last_seen),
			    s->permission, store_pg_num(d, s->direct_until),
			    store_pg_json_text(s->egress_allow) };

	return store_pg_run("UPDATE sessions SET last_seen = $2, "
	    "permission = $3, direct_until = $4, egress_allow = $5 "
	    "WHERE id = $1", 5, p) == -1 ? -1 : 0;
}

/* Store a session's last_seen time alone (no other host is told). */
static int
store_pg_session_touch(const struct session *s)
{
	char		 l[24];
	const char	*p[] = { s->id, store_pg_num(l, s->last_seen) };

	return store_pg_run("UPDATE sessions SET last_seen = $2 WHERE id = $1 "
	    "AND last_seen < $2", 2, p) == -1 ? -1 : 0;
}

/*
 * Delete a session's row and its tokens' (another host may hold tokens of
 * it this one has not seen yet); 0, or -1 logged.
 */
static int
store_pg_session_delete(const char *id)
{
	const char	*p[] = { id };

	return store_pg_run("WITH t AS (DELETE FROM tokens WHERE "
	    "session_id = $1) DELETE FROM sessions WHERE id = $1", 1,
	    p) == -1 ? -1 : 0;
}

/* Store a new token; 0, or -1 logged. */
static int
store_pg_token_insert(const struct token *t)
{
	char		 c[24];
	const char	*p[] = { t->id, t->hash, t->user, t->session_id,
			    store_pg_num(c, t->created) };

	return store_pg_run("INSERT INTO tokens (" STORE_PG_TOKEN_COLS ") "
	    "VALUES ($1, $2, $3, $4, $5)", 5, p) == 1 ? 0 : -1;
}

/* Delete a token's row; 0, or -1 logged. */
static int
store_pg_token_delete(const char *id)
{
	const char	*p[] = { id };

	return store_pg_run("DELETE FROM tokens WHERE id = $1", 1, p) == -1 ?
	    -1 : 0;
}

/* The ids of at most max sessions expired at now, the oldest first. */
static size_t
store_pg_expired(int64_t now, char (*ids)[33], size_t max)
{
	PGresult	*res;
	char		 n[24], m[24];
	const char	*p[] = { store_pg_num(n, now), store_pg_num(m,
			    (int64_t)max) };
	size_t		 i, count = 0;

	if ((res = store_pg_query("SELECT id FROM sessions WHERE expires <= $1 "
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
static int64_t
store_pg_meta_get(const char *key)
{
	PGresult	*res;
	const char	*p[] = { key };
	int64_t		 v = 0;

	if ((res = store_pg_query("SELECT value FROM meta WHERE key = $1", 1,
	    p)) == NULL)
		return 0;
	if (PQntuples(res) > 0)
		v = pg_i64(res, 0, 0);
	PQclear(res);
	return v;
}

/* Keep a number under key; 0, or -1 logged. */
static int
store_pg_meta_set(const char *key, int64_t value)
{
	char		 v[24];
	const char	*p[] = { key, store_pg_num(v, value) };

	return store_pg_run("INSERT INTO meta (key, value) VALUES ($1, $2) "
	    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", 2,
	    p) == -1 ? -1 : 0;
}

/* Copy src into a fixed field; -1 when it does not fit. */
static int
store_pg_copy(char *dst, size_t dstsz, const char *src)
{
	if (strlen(src) >= dstsz)
		return -1;
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

/*
 * Row i of a STORE_PG_SESSION_COLS result as an allocated session (the
 * caller checks it), or NULL with why when a field does not fit.
 */
static struct session *
store_pg_session_row(PGresult *res, int i, char *why, size_t whysz)
{
	struct session	*s;
	int		 bad;

	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->user = strdup(pg_str(res, i, 3))) == NULL)
		fatal("%s", __func__);
	bad = store_pg_copy(s->id, sizeof(s->id), pg_str(res, i, 0)) |
	    store_pg_copy(s->token_hash, sizeof(s->token_hash),
	    pg_str(res, i, 1)) |
	    store_pg_copy(s->csrf_hash, sizeof(s->csrf_hash),
	    pg_str(res, i, 2)) |
	    store_pg_copy(s->permission, sizeof(s->permission),
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

/* The same for a token of a STORE_PG_TOKEN_COLS result. */
static struct token *
store_pg_token_row(PGresult *res, int i, char *why, size_t whysz)
{
	struct token	*t;
	int		 bad;

	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (t->user = strdup(pg_str(res, i, 2))) == NULL)
		fatal("%s", __func__);
	bad = store_pg_copy(t->id, sizeof(t->id), pg_str(res, i, 0)) |
	    store_pg_copy(t->hash, sizeof(t->hash), pg_str(res, i, 1)) |
	    store_pg_copy(t->session_id, sizeof(t->session_id),
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
static int
store_pg_load(int (*add_session)(struct session *, char *, size_t),
    int (*add_token)(struct token *, char *, size_t), char *err,
    size_t errsz)
{
	PGresult	*res;
	struct session	*s;
	struct token	*t;
	char		 why[256];
	int		 i;

	if ((res = store_pg_query("SELECT " STORE_PG_SESSION_COLS " FROM "
	    "sessions ORDER BY created, id", 0, NULL)) == NULL)
		goto pgerr;
	for (i = 0; i < PQntuples(res); i++) {
		if ((s = store_pg_session_row(res, i, why, sizeof(why))) ==
		    NULL || add_session(s, why, sizeof(why)) == -1)
			goto refused;
	}
	PQclear(res);
	if ((res = store_pg_query("SELECT " STORE_PG_TOKEN_COLS " FROM tokens "
	    "ORDER BY created, id", 0, NULL)) == NULL)
		goto pgerr;
	for (i = 0; i < PQntuples(res); i++) {
		if ((t = store_pg_token_row(res, i, why, sizeof(why))) ==
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
static int
store_pg_session_get(const char *key, int by_hash, struct session **out)
{
	PGresult	*res;
	const char	*p[] = { key };
	char		 why[256];
	int		 rc = 0;

	*out = NULL;
	res = store_pg_query(by_hash ? "SELECT " STORE_PG_SESSION_COLS " FROM "
	    "sessions WHERE token_hash = $1" : "SELECT " STORE_PG_SESSION_COLS
	    " FROM sessions WHERE id = $1", 1, p);
	if (res == NULL)
		return -1;
	if (PQntuples(res) > 0) {
		if ((*out = store_pg_session_row(res, 0, why, sizeof(why))) ==
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
static int
store_pg_token_get(const char *key, int by_hash, struct token **out)
{
	PGresult	*res;
	const char	*p[] = { key };
	char		 why[256];
	int		 rc = 0;

	*out = NULL;
	res = store_pg_query(by_hash ? "SELECT " STORE_PG_TOKEN_COLS " FROM "
	    "tokens WHERE hash = $1" : "SELECT " STORE_PG_TOKEN_COLS " FROM "
	    "tokens WHERE id = $1", 1, p);
	if (res == NULL)
		return -1;
	if (PQntuples(res) > 0) {
		if ((*out = store_pg_token_row(res, 0, why, sizeof(why))) ==
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
static int
store_pg_user_insert(const struct user *u)
{
	char		 c[24], uid[24], gid[24];
	const char	*p[] = { u->name, u->admin ? "t" : "f", u->hash,
			    store_pg_num(c, u->created),
			    store_pg_num(uid, u->uid),
			    store_pg_num(gid, u->gid),
			    u->unix_user, store_pg_json_text(u->egress_allow),
			    u->home[0] != '\0' ? u->home : NULL };

	return store_pg_run("INSERT INTO users (" STORE_PG_USER_COLS ") VALUES "
	    "($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING", 9,
	    p);
}

/* Store a user's changed fields (role, hash, ids, egress): rows or -1. */
static int
store_pg_user_update(const struct user *u)
{
	char		 uid[24], gid[24];
	const char	*p[] = { u->name, u->admin ? "t" : "f", u->hash,
			    store_pg_num(uid, u->uid),
			    store_pg_num(gid, u->gid),
			    u->unix_user, store_pg_json_text(u->egress_allow) };

	return store_pg_run("UPDATE users SET admin = $2, hash = $3, uid = $4, "
	    "gid = $5, unix_user = $6, egress_allow = $7 WHERE name = $1", 7,
	    p);
}

/* Delete a user's row: 1 deleted, 0 none was there, -1 the store failed. */
static int
store_pg_user_delete(const char *name)
{
	const char	*p[] = { name };

	return store_pg_run("DELETE FROM users WHERE name = $1", 1, p);
}

/* Row i of a STORE_PG_USER_COLS result as an allocated user (unchecked). */
static struct user *
store_pg_user_row(PGresult *res, int i)
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
	/* Written by hosts only, checked there: one that does not fit is none. */
	if (strlen(pg_str(res, i, 8)) < sizeof(u->home))
		memcpy(u->home, pg_str(res, i, 8), strlen(pg_str(res, i, 8)) + 1);
	return u;
}

/*
 * The user called name: 1 with *out (allocated, unchecked), 0 when there
 * is none, -1 when the store fails.
 */
static int
store_pg_user_get(const char *name, struct user **out)
{
	PGresult	*res;
	const char	*p[] = { name };
	int		 rc = 0;

	*out = NULL;
	if ((res = store_pg_query("SELECT " STORE_PG_USER_COLS " FROM users "
	    "WHERE name = $1", 1, p)) == NULL)
		return -1;
	if (PQntuples(res) > 0) {
		*out = store_pg_user_row(res, 0);
		rc = 1;
	}
	PQclear(res);
	return rc;
}

/*
 * Hand every user (allocated, the callee's) to add, oldest first; -1 with
 * err on the first refusal (add fills why) or a read error.
 */
static int
store_pg_user_load(int (*add)(struct user *, char *, size_t), char *err,
    size_t errsz)
{
	PGresult	*res;
	char		 why[256];
	int		 i;

	if ((res = store_pg_query("SELECT " STORE_PG_USER_COLS " FROM users "
	    "ORDER BY created, name", 0, NULL)) == NULL) {
		snprintf(err, errsz, "the PostgreSQL store: %s", pg_error());
		return -1;
	}
	for (i = 0; i < PQntuples(res); i++) {
		if (add(store_pg_user_row(res, i), why, sizeof(why)) == -1) {
			snprintf(err, errsz, "the PostgreSQL store: %s", why);
			PQclear(res);
			return -1;
		}
	}
	PQclear(res);
	return 0;
}

/* Delete every session and token row of a user; 0, or -1 logged. */
static int
store_pg_drop_user(const char *user)
{
	const char	*p[] = { user };

	if (store_pg_run("DELETE FROM tokens WHERE \"user\" = $1", 1,
	    p) == -1 || store_pg_run("DELETE FROM sessions WHERE \"user\" = "
	    "$1", 1, p) == -1)
		return -1;
	return 0;
}

/*
 * The level of a ratelimits row at the database's clock: refilled by the
 * time since its stamp (none for a clock that went back), never above the
 * burst b (tokens), at the rate r (tokens per second); b and r are
 * parameters.
 */
#define STORE_PG_RL_LEVEL(b, r) \
	"least(" b "::float8, r.tokens + greatest(0, extract(epoch FROM " \
	"clock_timestamp() - r.at))::float8 * " r "::float8)"
#define STORE_PG_RL_SWEEP_ROWS	"1000"	/* a sweep deletes at most */
#define STORE_PG_RL_KEY_MAX	128	/* longer: stored hashed */

/*
 * Take a token in one statement: a missing row is a full bucket; a row
 * with a token left is refilled and taken from (its lock serializes the
 * hosts); one without is left alone and the wait is computed from it (as
 * the statement's snapshot saw it: only the seconds of a refusal). Each
 * clock_timestamp() is a little later than the one before: the stamp set
 * is never earlier than the refill counted, so it can only come out short.
 */
static const char store_pg_rl_take[] =
	"WITH up AS ("
	" INSERT INTO ratelimits AS r (bucket, key, tokens, at)"
	" VALUES ($1, $2, $3::float8 - 1, clock_timestamp())"
	" ON CONFLICT (bucket, key) DO UPDATE SET"
	"  tokens = " STORE_PG_RL_LEVEL("$3", "$4") " - 1,"
	"  at = greatest(r.at, clock_timestamp())"
	" WHERE " STORE_PG_RL_LEVEL("$3", "$4") " >= 1"
	" RETURNING 1)"
	" SELECT true, 0::float8 FROM up"
	" UNION ALL"
	" SELECT false, (1 - " STORE_PG_RL_LEVEL("$3", "$4") ") / $4::float8"
	" FROM ratelimits r WHERE r.bucket = $1 AND r.key = $2"
	" AND NOT EXISTS (SELECT 1 FROM up)";

static const char store_pg_rl_peek[] =
	"SELECT false, (1 - " STORE_PG_RL_LEVEL("$3", "$4") ") / $4::float8"
	" FROM ratelimits r WHERE r.bucket = $1 AND r.key = $2";

/*
 * Full buckets say nothing a missing row would not: a bounded batch of
 * them goes (the outer test again on each row's last version, so that a
 * bucket taken from meanwhile stays).
 */
static const char store_pg_rl_sweep[] =
	"DELETE FROM ratelimits r WHERE r.bucket = $1"
	" AND " STORE_PG_RL_LEVEL("$2", "$3") " >= $2::float8"
	" AND r.key IN (SELECT r.key FROM ratelimits r WHERE r.bucket = $1"
	" AND " STORE_PG_RL_LEVEL("$2", "$3") " >= $2::float8"
	" LIMIT " STORE_PG_RL_SWEEP_ROWS ")";

/*
 * A rate-limit key as stored: as it is when short and printable ASCII,
 * else its SHA-256 (a user name of any bytes must not fail the statement).
 */
static const char *
store_pg_rl_key(const char *key, char out[72])
{
	const unsigned char	*p;
	size_t			 len = strlen(key);

	for (p = (const unsigned char *)key; *p != '\0'; p++)
		if (*p < 0x20 || *p > 0x7e)
			break;
	if (*p == '\0' && len <= STORE_PG_RL_KEY_MAX)
		return key;
	memcpy(out, "sha256:", 7);
	sha256_hex(key, len, out + 7);
	return out;
}

/* The seconds of a refusal from the store's (>= 1). */
static int
store_pg_rl_wait(double secs)
{
	if (!(secs >= 1))
		return 1;
	secs = ceil(secs);
	return secs >= INT_MAX ? INT_MAX : (int)secs;
}

/*
 * Take (take 1) or peek at key's shared bucket in the ratelimits table:
 * the seconds to wait (0: allowed), or -1 when the store failed; with
 * sweep, a batch of full buckets of this bucket goes too.
 */
static int
store_pg_rate(const char *bucket, const char *key, const char *burst,
    const char *rate, int take, int sweep)
{
	PGresult	*res;
	const char	*params[4];
	char		 hashed[72];
	int		 wait;

	params[0] = bucket;
	params[1] = store_pg_rl_key(key, hashed);
	params[2] = burst;
	params[3] = rate;
	if ((res = pg_query(take ? store_pg_rl_take : store_pg_rl_peek, 4,
	    params)) == NULL)
		return -1;
	if (PQntuples(res) != 1 || PQnfields(res) != 2)
		wait = take ? 1 : 0;	/* take: a row born meanwhile */
	else if (strcmp(PQgetvalue(res, 0, 0), "t") == 0)
		wait = 0;		/* taken */
	else if (!take && strtod(PQgetvalue(res, 0, 1), NULL) <= 0)
		wait = 0;		/* a token is there */
	else
		wait = store_pg_rl_wait(strtod(PQgetvalue(res, 0, 1), NULL));
	PQclear(res);
	if (sweep) {
		params[1] = burst;
		params[2] = rate;
		if (pg_exec(store_pg_rl_sweep, 3, params) == -1)
			log_warnx("rate limit %s: sweep: %s", bucket,
			    pg_error());
	}
	return wait;
}

/*
 * Clear a session's stored grant if it still is until: 1 when this
 * statement cleared it, 0 when another host changed it first (or the
 * session is gone), -1 on a store error.
 */
static int
store_pg_grant_claim(const char *id, int64_t until)
{
	char		 v[24];
	const char	*p[] = { id, store_pg_num(v, until) };
	int		 n;

	if ((n = store_pg_run("UPDATE sessions SET direct_until = 0 "
	    "WHERE id = $1 AND direct_until = $2", 2, p)) == -1)
		return -1;
	return n > 0;
}

/* A session's stored grant (0: none, or no such session), or -1. */
static int64_t
store_pg_grant_stored(const char *id)
{
	PGresult	*res;
	const char	*p[] = { id };
	int64_t		 until;

	if ((res = store_pg_query("SELECT direct_until FROM sessions "
	    "WHERE id = $1", 1, p)) == NULL)
		return -1;
	until = PQntuples(res) == 1 ? pg_i64(res, 0, 0) : 0;
	PQclear(res);
	return until;
}

/*
 * Make host the home of user name unless another host's claim came first
 * (one UPDATE ... WHERE home IS NULL: of hosts claiming at once, one
 * wins, and the others read its choice): 1 with the home in out, 0 when
 * there is no such user, -1 when the store failed.
 */
static int
store_pg_home_claim(const char *name, const char *host, char *out,
    size_t outsz)
{
	PGresult	*res;
	const char	*p[] = { name, host };
	int		 rc = 0;

	if ((res = store_pg_query("UPDATE users SET home = $2 WHERE name = $1 "
	    "AND home IS NULL RETURNING home", 2, p)) == NULL)
		return -1;
	/* Not ours: read the winner's (a statement of its own sees it). */
	if (PQntuples(res) == 0) {
		PQclear(res);
		if ((res = store_pg_query("SELECT home FROM users WHERE "
		    "name = $1", 1, p)) == NULL)
			return -1;
	}
	if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0)) {
		snprintf(out, outsz, "%s", pg_str(res, 0, 0));
		rc = 1;
	}
	PQclear(res);
	return rc;
}

/* Add to err what to do about a row this brokerd cannot use. */
static void
store_pg_unusable(char *err, size_t errsz)
{
	size_t	len = strlen(err);

	snprintf(err + len, errsz - len, "; the PostgreSQL store holds a row "
	    "this brokerd cannot use: correct or delete it");
}

const struct store_ops store_pg = {
	.kind = "postgresql",
	.where = "the PostgreSQL store",
	.one_host = 0,
	.open = pg_init,
	.close = pg_close,
	.unusable = store_pg_unusable,
	.ready = pg_ready,
	.begin = store_pg_begin,
	.commit = store_pg_commit,
	.rollback = store_pg_rollback,
	.session_insert = store_pg_session_insert,
	.session_update = store_pg_session_update,
	.session_touch = store_pg_session_touch,
	.session_delete = store_pg_session_delete,
	.session_get = store_pg_session_get,
	.token_insert = store_pg_token_insert,
	.token_delete = store_pg_token_delete,
	.token_get = store_pg_token_get,
	.drop_user = store_pg_drop_user,
	.expired = store_pg_expired,
	.meta_get = store_pg_meta_get,
	.meta_set = store_pg_meta_set,
	.load = store_pg_load,
	.user_insert = store_pg_user_insert,
	.user_update = store_pg_user_update,
	.user_delete = store_pg_user_delete,
	.user_get = store_pg_user_get,
	.user_load = store_pg_user_load,
	.error = pg_error,
	.events = pg_events,
	.over_tcp = pg_over_tcp,
	.on_notify = pg_on_notify,
	.on_reconnect = pg_on_reconnect,
	.rate = store_pg_rate,
	.grant_claim = store_pg_grant_claim,
	.grant_stored = store_pg_grant_stored,
	.home_claim = store_pg_home_claim,
	.audit = &audit_pg,
};
