/*
 * The durable side of session.c: one SQLite file, STATE_DIR/store.db (mode
 * 0600, the broker user's), in WAL mode with synchronous=FULL and an
 * exclusive lock held for brokerd's lifetime:
 *   sessions(id, token_hash UNIQUE, csrf_hash, user, created, last_seen,
 *            expires INDEXED, permission, direct_until, egress_allow)
 *   tokens(id, hash UNIQUE, user, session_id, created)
 *   meta(key, value)
 * The schema's version is PRAGMA user_version; store_migrations[i] takes a
 * store from version i to i + 1. Every change is one short transaction: a
 * login, a logout or a mint writes a few pages of the WAL and one fsync,
 * whatever the store holds. Only hashes of secrets are stored.
 *
 * With a PostgreSQL store (HOSTGATE_STORE, pg_enabled()) each function
 * below hands over to its pgstore.c twin instead, and store.db is not
 * opened at all.
 */

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "brokerd.h"

/* The schema, one step per version: never edit a step, add one. */
static const char *const store_migrations[] = {
	/* 1: sessions and tokens (what sessions.json version 1 held) */
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
	") STRICT;",
	/* 2: an admin's egress additions per session, a JSON array's text */
	"ALTER TABLE sessions ADD COLUMN egress_allow TEXT NOT NULL "
	"DEFAULT '[]';",
};
#define STORE_VERSION \
	((int)(sizeof(store_migrations) / sizeof(store_migrations[0])))

enum {
	ST_SESSION_INSERT,
	ST_SESSION_UPDATE,
	ST_SESSION_DELETE,
	ST_TOKEN_INSERT,
	ST_TOKEN_DELETE,
	ST_EXPIRED,
	ST_META_GET,
	ST_META_SET,
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_COUNT
};

static const char *const store_sql[ST_COUNT] = {
	[ST_SESSION_INSERT] = "INSERT INTO sessions (id, token_hash, "
	    "csrf_hash, user, created, last_seen, expires, permission, "
	    "direct_until, egress_allow) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
	    "?8, ?9, ?10)",
	[ST_SESSION_UPDATE] = "UPDATE sessions SET last_seen = ?2, "
	    "permission = ?3, direct_until = ?4, egress_allow = ?5 "
	    "WHERE id = ?1",
	[ST_SESSION_DELETE] = "DELETE FROM sessions WHERE id = ?1",
	[ST_TOKEN_INSERT] = "INSERT INTO tokens (id, hash, user, session_id, "
	    "created) VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_TOKEN_DELETE] = "DELETE FROM tokens WHERE id = ?1",
	[ST_EXPIRED] = "SELECT id FROM sessions WHERE expires <= ?1 "
	    "ORDER BY expires LIMIT ?2",
	[ST_META_GET] = "SELECT value FROM meta WHERE key = ?1",
	[ST_META_SET] = "INSERT OR REPLACE INTO meta (key, value) "
	    "VALUES (?1, ?2)",
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
};

static sqlite3		*store_db;
static sqlite3_stmt	*store_st[ST_COUNT];
static char		*store_path;
static int		 store_depth;	/* nested store_begin calls */
static int		 store_failed;	/* a step of the open one failed */

/* Log SQLite's own diagnostics (recovery, corruption) as ours. */
static void
store_log(void *arg, int code, const char *msg)
{
	if ((code & 0xff) == SQLITE_NOTICE || (code & 0xff) == SQLITE_WARNING)
		log_debug("sqlite: %s", msg);
	else
		log_warnx("sqlite: %s (%d)", msg, code);
}

/* Run one statement of SQL text (no rows expected); fills err. */
static int
store_exec(const char *sql, char *err, size_t errsz)
{
	char	*msg = NULL;

	if (sqlite3_exec(store_db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errsz, "%s: %s", store_path,
		    msg != NULL ? msg : sqlite3_errmsg(store_db));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/* The text value of a one-row PRAGMA into out; fills err. */
static int
store_pragma(const char *sql, char *out, size_t outsz, char *err,
    size_t errsz)
{
	sqlite3_stmt	*st;
	int		 rc;

	if (sqlite3_prepare_v2(store_db, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errsz, "%s: %s", store_path,
		    sqlite3_errmsg(store_db));
		return -1;
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		snprintf(err, errsz, "%s: %s", store_path,
		    rc == SQLITE_DONE ? "no answer to a PRAGMA" :
		    sqlite3_errmsg(store_db));
		sqlite3_finalize(st);
		return -1;
	}
	snprintf(out, outsz, "%s", sqlite3_column_text(st, 0) != NULL ?
	    (const char *)sqlite3_column_text(st, 0) : "");
	sqlite3_finalize(st);
	return 0;
}

/*
 * Create the file 0600 if absent, else check that it is a regular file
 * and set a loose mode back to 0600 (as for users.json). Fills err.
 */
static int
store_file_check(const char *path, char *err, size_t errsz)
{
	struct stat	st;
	int		fd;

	if (lstat(path, &st) == -1) {
		if (errno != ENOENT) {
			snprintf(err, errsz, "%s: %s", path, strerror(errno));
			return -1;
		}
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
		if (fd == -1) {
			snprintf(err, errsz, "%s: cannot create: %s", path,
			    strerror(errno));
			return -1;
		}
		close(fd);
		log_info("%s: created", path);
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errsz, "%s: not a regular file", path);
		return -1;
	}
	if ((st.st_mode & 07777) != 0600) {
		log_warnx("%s: mode %04o, setting it to 0600", path,
		    (unsigned)(st.st_mode & 07777));
		if (chmod(path, 0600) == -1) {
			snprintf(err, errsz, "%s: cannot set mode 0600: %s",
			    path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Bring the schema to STORE_VERSION, one transaction per step; fills err. */
static int
store_migrate(char *err, size_t errsz)
{
	char	buf[32], sql[64];
	long	version;
	int	i;

	if (store_pragma("PRAGMA user_version", buf, sizeof(buf), err,
	    errsz) == -1)
		return -1;
	version = strtol(buf, NULL, 10);
	if (version < 0 || version > STORE_VERSION) {
		snprintf(err, errsz, "%s: schema version %ld, but this brokerd "
		    "knows versions up to %d (a newer hostgate's store?)",
		    store_path, version, STORE_VERSION);
		return -1;
	}
	for (i = (int)version; i < STORE_VERSION; i++) {
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", i + 1);
		if (store_exec("BEGIN IMMEDIATE", err, errsz) == -1)
			return -1;
		if (store_exec(store_migrations[i], err, errsz) == -1 ||
		    store_exec(sql, err, errsz) == -1) {
			sqlite3_exec(store_db, "ROLLBACK", NULL, NULL, NULL);
			return -1;
		}
		if (store_exec("COMMIT", err, errsz) == -1)
			return -1;
		log_info("%s: schema version %d", store_path, i + 1);
	}
	return 0;
}

/* Whether PRAGMA quick_check finds the file whole; fills err. */
static int
store_check(char *err, size_t errsz)
{
	char	buf[256];

	if (store_pragma("PRAGMA quick_check", buf, sizeof(buf), err,
	    errsz) == -1)
		return -1;
	if (strcmp(buf, "ok") != 0) {
		snprintf(err, errsz, "%s: damaged: %s", store_path, buf);
		return -1;
	}
	return 0;
}

/* Add to err what to do about a store that cannot be used. */
void
store_unusable(char *err, size_t errsz)
{
	size_t	len = strlen(err);

	if (pg_enabled()) {
		snprintf(err + len, errsz - len, "; the PostgreSQL store holds "
		    "a row this brokerd cannot use: correct or delete it");
		return;
	}
	snprintf(err + len, errsz - len, "; the session store is unusable: "
	    "restore it from a backup, or move it and its -wal file aside to "
	    "start with no sessions and tokens");
}

/*
 * Open (creating it if absent) the store at path, take its lock, bring the
 * schema up to date and check it. -1 with err naming the file and what is
 * wrong; the caller refuses to start.
 */
int
store_open(const char *path, char *err, size_t errsz)
{
	static int	 configured;
	char		 buf[32], why[400];
	int		 i, rc;

	store_close();
	if (pg_enabled())
		return 0;	/* pg.c's link, opened by brokerd.c */
	if (!configured) {
		sqlite3_config(SQLITE_CONFIG_LOG, store_log, NULL);
		configured = 1;
	}
	if ((store_path = strdup(path)) == NULL)
		fatal("%s", __func__);
	if (store_file_check(path, err, errsz) == -1)
		goto fail;
	rc = sqlite3_open_v2(path, &store_db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE,
	    NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errsz, "%s: %s", path, store_db != NULL ?
		    sqlite3_errmsg(store_db) : sqlite3_errstr(rc));
		goto fail;
	}
	/*
	 * Exclusive before WAL: no -shm file, no shared memory, and no other
	 * process can open the store while brokerd holds it, so session.c's
	 * copy in memory is always the store's. FULL: a commit (a revoked
	 * token, a minted one) is on disk before brokerd answers.
	 */
	if (store_exec("PRAGMA locking_mode = EXCLUSIVE", err, errsz) == -1 ||
	    store_pragma("PRAGMA journal_mode = WAL", buf, sizeof(buf), err,
	    errsz) == -1)
		goto broken;
	if (strcmp(buf, "wal") != 0) {
		snprintf(err, errsz, "%s: cannot use a WAL journal (%s)",
		    path, buf);
		goto fail;
	}
	if (store_exec("PRAGMA synchronous = FULL;"
	    "PRAGMA temp_store = MEMORY;"
	    "PRAGMA journal_size_limit = 4194304;"
	    "PRAGMA cache_size = -16384;"
	    "PRAGMA foreign_keys = OFF", err, errsz) == -1)
		goto broken;
	/* Take the exclusive lock now, not at the first login. */
	if (store_exec("BEGIN EXCLUSIVE; COMMIT", err, errsz) == -1)
		goto broken;
	if (store_check(err, errsz) == -1 || store_migrate(err, errsz) == -1)
		goto broken;
	for (i = 0; i < ST_COUNT; i++) {
		if (sqlite3_prepare_v3(store_db, store_sql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &store_st[i], NULL) !=
		    SQLITE_OK) {
			snprintf(err, errsz, "%s: %s", path,
			    sqlite3_errmsg(store_db));
			goto broken;
		}
	}
	return 0;
broken:
	rc = sqlite3_extended_errcode(store_db);
	if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errsz, "%s (another brokerd on this state "
		    "directory?)", why);
	} else if ((rc & 0xff) == SQLITE_NOTADB ||
	    (rc & 0xff) == SQLITE_CORRUPT || strstr(err, "damaged") != NULL)
		store_unusable(err, errsz);
fail:
	store_close();
	return -1;
}

/* Close the store (checkpointing its WAL into the file). */
void
store_close(void)
{
	int	i;

	for (i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(store_st[i]);
		store_st[i] = NULL;
	}
	if (store_db != NULL && sqlite3_close(store_db) != SQLITE_OK)
		log_warnx("%s: close: %s", store_path, sqlite3_errmsg(store_db));
	store_db = NULL;
	free(store_path);
	store_path = NULL;
	store_depth = store_failed = 0;
}

/* Run a prepared statement to its end; 0, or -1 logged. */
static int
store_run(int which)
{
	sqlite3_stmt	*st = store_st[which];
	int		 rc;

	if (st == NULL)
		return -1;
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		log_warnx("%s: %s: %s", store_path, sqlite3_sql(st),
		    sqlite3_errmsg(store_db));
		if (store_depth > 0)
			store_failed = 1;
		return -1;
	}
	return 0;
}

/* Bind a text parameter (SQLite copies it). */
static void
store_bind_text(int which, int i, const char *s)
{
	sqlite3_bind_text(store_st[which], i, s, -1, SQLITE_TRANSIENT);
}

/*
 * Begin a transaction: the changes up to the matching store_commit are
 * written at once, or none is. Nests: only the outermost pair counts.
 */
int
store_begin(void)
{
	if (pg_enabled())
		return pgstore_begin();
	if (store_db == NULL)
		return -1;
	if (store_depth++ > 0)
		return 0;
	store_failed = 0;
	if (store_run(ST_BEGIN) == -1) {
		store_depth = 0;
		return -1;
	}
	return 0;
}

/* End a transaction: 0 once it is on disk; -1 (rolled back) if a step failed. */
int
store_commit(void)
{
	if (pg_enabled())
		return pgstore_commit();
	if (store_depth == 0)
		return -1;
	if (--store_depth > 0)
		return store_failed ? -1 : 0;
	if (store_failed) {
		store_run(ST_ROLLBACK);
		return -1;
	}
	if (store_run(ST_COMMIT) == -1) {
		if (!sqlite3_get_autocommit(store_db))
			store_run(ST_ROLLBACK);
		return -1;
	}
	return 0;
}

/* Abandon the transaction (the outermost one rolls back). */
void
store_rollback(void)
{
	if (pg_enabled()) {
		pgstore_rollback();
		return;
	}
	if (store_depth == 0)
		return;
	store_failed = 1;
	if (--store_depth == 0)
		store_run(ST_ROLLBACK);
}

/* A session's egress additions as the text of a JSON array. */
static const char *
store_egress_text(const struct session *s)
{
	if (s->egress_allow == NULL)
		return "[]";
	return json_object_to_json_string_ext(s->egress_allow,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* Store a new session; 0, or -1 logged. */
int
store_session_insert(const struct session *s)
{
	if (pg_enabled())
		return pgstore_session_insert(s);
	store_bind_text(ST_SESSION_INSERT, 1, s->id);
	store_bind_text(ST_SESSION_INSERT, 2, s->token_hash);
	store_bind_text(ST_SESSION_INSERT, 3, s->csrf_hash);
	store_bind_text(ST_SESSION_INSERT, 4, s->user);
	sqlite3_bind_int64(store_st[ST_SESSION_INSERT], 5, s->created);
	sqlite3_bind_int64(store_st[ST_SESSION_INSERT], 6, s->last_seen);
	sqlite3_bind_int64(store_st[ST_SESSION_INSERT], 7, s->expires);
	store_bind_text(ST_SESSION_INSERT, 8, s->permission);
	sqlite3_bind_int64(store_st[ST_SESSION_INSERT], 9, s->direct_until);
	store_bind_text(ST_SESSION_INSERT, 10, store_egress_text(s));
	return store_run(ST_SESSION_INSERT);
}

/*
 * Store what changes in a session: last_seen, profile, grant, egress
 * additions; 0 or -1.
 */
int
store_session_update(const struct session *s)
{
	if (pg_enabled())
		return pgstore_session_update(s);
	store_bind_text(ST_SESSION_UPDATE, 1, s->id);
	sqlite3_bind_int64(store_st[ST_SESSION_UPDATE], 2, s->last_seen);
	store_bind_text(ST_SESSION_UPDATE, 3, s->permission);
	sqlite3_bind_int64(store_st[ST_SESSION_UPDATE], 4, s->direct_until);
	store_bind_text(ST_SESSION_UPDATE, 5, store_egress_text(s));
	return store_run(ST_SESSION_UPDATE);
}

/*
 * Store a session's last_seen time (session_sweep's batches): in store.db
 * the same as store_session_update; in PostgreSQL that column alone, so
 * that no other host is notified of it.
 */
int
store_session_touch(const struct session *s)
{
	if (pg_enabled())
		return pgstore_session_touch(s);
	return store_session_update(s);
}

/* Delete a session's row (not its tokens'); 0, or -1 logged. */
int
store_session_delete(const char *id)
{
	if (pg_enabled())
		return pgstore_session_delete(id);
	store_bind_text(ST_SESSION_DELETE, 1, id);
	return store_run(ST_SESSION_DELETE);
}

/* Store a new token; 0, or -1 logged. */
int
store_token_insert(const struct token *t)
{
	if (pg_enabled())
		return pgstore_token_insert(t);
	store_bind_text(ST_TOKEN_INSERT, 1, t->id);
	store_bind_text(ST_TOKEN_INSERT, 2, t->hash);
	store_bind_text(ST_TOKEN_INSERT, 3, t->user);
	store_bind_text(ST_TOKEN_INSERT, 4, t->session_id);
	sqlite3_bind_int64(store_st[ST_TOKEN_INSERT], 5, t->created);
	return store_run(ST_TOKEN_INSERT);
}

/* Delete a token's row; 0, or -1 logged. */
int
store_token_delete(const char *id)
{
	if (pg_enabled())
		return pgstore_token_delete(id);
	store_bind_text(ST_TOKEN_DELETE, 1, id);
	return store_run(ST_TOKEN_DELETE);
}

/*
 * The ids of at most max sessions expired at now, the oldest first (by
 * the index on expires: the cost is that of the batch, not of the store).
 */
size_t
store_expired(int64_t now, char (*ids)[33], size_t max)
{
	sqlite3_stmt	*st = store_st[ST_EXPIRED];
	const char	*id;
	size_t		 n = 0;
	int		 rc;

	if (pg_enabled())
		return pgstore_expired(now, ids, max);
	if (st == NULL)
		return 0;
	sqlite3_bind_int64(st, 1, now);
	sqlite3_bind_int64(st, 2, (int64_t)max);
	while (n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((id = (const char *)sqlite3_column_text(st, 0)) != NULL &&
		    strlen(id) < sizeof(ids[0]))
			snprintf(ids[n++], sizeof(ids[0]), "%s", id);
	}
	if (n < max && rc != SQLITE_DONE)
		log_warnx("%s: %s", store_path, sqlite3_errmsg(store_db));
	sqlite3_reset(st);
	return n;
}

/* A number kept under key (0 when there is none). */
int64_t
store_meta_get(const char *key)
{
	sqlite3_stmt	*st = store_st[ST_META_GET];
	int64_t		 v = 0;

	if (pg_enabled())
		return pgstore_meta_get(key);
	if (st == NULL)
		return 0;
	store_bind_text(ST_META_GET, 1, key);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return v;
}

/* Keep a number under key; 0, or -1 logged. */
int
store_meta_set(const char *key, int64_t value)
{
	if (pg_enabled())
		return pgstore_meta_set(key, value);
	store_bind_text(ST_META_SET, 1, key);
	sqlite3_bind_int64(store_st[ST_META_SET], 2, value);
	return store_run(ST_META_SET);
}

/* The text of column i, "" for NULL. */
static const char *
store_text(sqlite3_stmt *st, int i)
{
	const unsigned char	*s = sqlite3_column_text(st, i);

	return s != NULL ? (const char *)s : "";
}

/* Copy src into a fixed field; -1 when it does not fit. */
static int
store_copy(char *dst, size_t dstsz, const char *src)
{
	if (strlen(src) >= dstsz)
		return -1;
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

/*
 * Read every session, then every token, handing each (allocated, the
 * callee's) to add, which checks it and fills err when it refuses it. -1
 * with err "PATH: why" on the first refusal or read error.
 */
int
store_load(int (*add_session)(struct session *, char *, size_t),
    int (*add_token)(struct token *, char *, size_t), char *err,
    size_t errsz)
{
	sqlite3_stmt	*st = NULL;
	struct session	*s;
	struct token	*t;
	char		 why[256];
	int		 rc, bad;

	if (pg_enabled())
		return pgstore_load(add_session, add_token, err, errsz);
	if (sqlite3_prepare_v2(store_db, "SELECT id, token_hash, csrf_hash, "
	    "user, created, last_seen, expires, permission, direct_until, "
	    "egress_allow FROM sessions ORDER BY created, id", -1, &st,
	    NULL) != SQLITE_OK)
		goto sqlerr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((s = calloc(1, sizeof(*s))) == NULL ||
		    (s->user = strdup(store_text(st, 3))) == NULL)
			fatal("%s", __func__);
		bad = store_copy(s->id, sizeof(s->id), store_text(st, 0)) |
		    store_copy(s->token_hash, sizeof(s->token_hash),
		    store_text(st, 1)) |
		    store_copy(s->csrf_hash, sizeof(s->csrf_hash),
		    store_text(st, 2)) |
		    store_copy(s->permission, sizeof(s->permission),
		    store_text(st, 7));
		s->created = sqlite3_column_int64(st, 4);
		s->last_seen = sqlite3_column_int64(st, 5);
		s->expires = sqlite3_column_int64(st, 6);
		s->direct_until = sqlite3_column_int64(st, 8);
		/* Checked by add_session; "[]" or bad text: none. */
		s->egress_allow = json_tokener_parse(store_text(st, 9));
		if (bad) {
			snprintf(why, sizeof(why), "session %.32s: a field "
			    "too long", store_text(st, 0));
			json_object_put(s->egress_allow);
			free(s->user);
			free(s);
			goto refused;
		}
		if (add_session(s, why, sizeof(why)) == -1)
			goto refused;
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);

	if (sqlite3_prepare_v2(store_db, "SELECT id, hash, user, session_id, "
	    "created FROM tokens ORDER BY created, id", -1, &st, NULL) !=
	    SQLITE_OK)
		goto sqlerr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((t = calloc(1, sizeof(*t))) == NULL ||
		    (t->user = strdup(store_text(st, 2))) == NULL)
			fatal("%s", __func__);
		bad = store_copy(t->id, sizeof(t->id), store_text(st, 0)) |
		    store_copy(t->hash, sizeof(t->hash), store_text(st, 1)) |
		    store_copy(t->session_id, sizeof(t->session_id),
		    store_text(st, 3));
		t->created = sqlite3_column_int64(st, 4);
		if (bad) {
			snprintf(why, sizeof(why), "token %.16s: a field too "
			    "long", store_text(st, 0));
			free(t->user);
			free(t);
			goto refused;
		}
		if (add_token(t, why, sizeof(why)) == -1)
			goto refused;
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	return 0;
refused:
	snprintf(err, errsz, "%s: %s", store_path, why);
	sqlite3_finalize(st);
	return -1;
sqlerr:
	snprintf(err, errsz, "%s: %s", store_path, sqlite3_errmsg(store_db));
	sqlite3_finalize(st);
	return -1;
}
