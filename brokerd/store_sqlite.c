/*
 * The embedded store (struct store_ops store_sqlite): one SQLite file,
 * STATE_DIR/store.db (mode 0600, the broker user's), in WAL mode with
 * synchronous=FULL and an exclusive lock held for brokerd's lifetime:
 *   sessions(id, token_hash UNIQUE, csrf_hash, user, created, last_seen,
 *            expires INDEXED, permission, direct_until, egress_allow)
 *   tokens(id, hash UNIQUE, user, session_id INDEXED, created)
 *   meta(key, value)
 *   users(name, admin, hash, created, uid UNIQUE, gid, unix_user,
 *         egress_allow)
 * The schema's version is PRAGMA user_version; store_sqlite_migrations[i]
 * takes a store from version i to i + 1. Every change is one short
 * transaction: a login, a logout or a mint writes a few pages of the WAL
 * and one fsync, whatever the store holds. Only hashes of secrets are
 * stored. One brokerd holds it: the fleet's hooks of struct store_ops
 * (notifications, shared rate buckets, grant claims) are NULL here.
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
static const char *const store_sqlite_migrations[] = {
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
	/* 3: the users (users.json of earlier releases: auth.c takes it in) */
	"CREATE TABLE users ("
	"  name TEXT PRIMARY KEY NOT NULL,"
	"  admin INTEGER NOT NULL,"
	"  hash TEXT NOT NULL,"
	"  created INTEGER NOT NULL,"
	"  uid INTEGER NOT NULL UNIQUE,"
	"  gid INTEGER NOT NULL,"
	"  unix_user TEXT,"
	"  egress_allow TEXT NOT NULL DEFAULT '[]'"
	") STRICT;"
	/* A session's end takes its tokens: found by the index. */
	"CREATE INDEX tokens_session ON tokens (session_id);",
};
#define STORE_VERSION ((int)(sizeof(store_sqlite_migrations) / \
	sizeof(store_sqlite_migrations[0])))

#define STORE_SQLITE_SESSION_COLS "id, token_hash, csrf_hash, user, " \
	"created, last_seen, expires, permission, direct_until, egress_allow"
#define STORE_SQLITE_TOKEN_COLS "id, hash, user, session_id, created"
#define STORE_SQLITE_USER_COLS "name, admin, hash, created, uid, gid, " \
	"unix_user, egress_allow"

enum {
	ST_SESSION_INSERT,
	ST_SESSION_UPDATE,
	ST_SESSION_DELETE,
	ST_SESSION_TOKENS_DELETE,
	ST_SESSION_GET_ID,
	ST_SESSION_GET_HASH,
	ST_TOKEN_GET_ID,
	ST_TOKEN_GET_HASH,
	ST_DROP_USER_TOKENS,
	ST_DROP_USER_SESSIONS,
	ST_USER_INSERT,
	ST_USER_UPDATE,
	ST_USER_DELETE,
	ST_USER_GET,
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

static const char *const store_sqlite_sql[ST_COUNT] = {
	[ST_SESSION_INSERT] = "INSERT INTO sessions (id, token_hash, "
	    "csrf_hash, user, created, last_seen, expires, permission, "
	    "direct_until, egress_allow) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
	    "?8, ?9, ?10)",
	[ST_SESSION_UPDATE] = "UPDATE sessions SET last_seen = ?2, "
	    "permission = ?3, direct_until = ?4, egress_allow = ?5 "
	    "WHERE id = ?1",
	[ST_SESSION_DELETE] = "DELETE FROM sessions WHERE id = ?1",
	[ST_SESSION_TOKENS_DELETE] = "DELETE FROM tokens WHERE "
	    "session_id = ?1",
	[ST_SESSION_GET_ID] = "SELECT " STORE_SQLITE_SESSION_COLS " FROM "
	    "sessions WHERE id = ?1",
	[ST_SESSION_GET_HASH] = "SELECT " STORE_SQLITE_SESSION_COLS " FROM "
	    "sessions WHERE token_hash = ?1",
	[ST_TOKEN_GET_ID] = "SELECT " STORE_SQLITE_TOKEN_COLS " FROM tokens "
	    "WHERE id = ?1",
	[ST_TOKEN_GET_HASH] = "SELECT " STORE_SQLITE_TOKEN_COLS " FROM tokens "
	    "WHERE hash = ?1",
	[ST_DROP_USER_TOKENS] = "DELETE FROM tokens WHERE user = ?1",
	[ST_DROP_USER_SESSIONS] = "DELETE FROM sessions WHERE user = ?1",
	[ST_USER_INSERT] = "INSERT OR IGNORE INTO users ("
	    STORE_SQLITE_USER_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	[ST_USER_UPDATE] = "UPDATE users SET admin = ?2, hash = ?3, uid = ?4, "
	    "gid = ?5, unix_user = ?6, egress_allow = ?7 WHERE name = ?1",
	[ST_USER_DELETE] = "DELETE FROM users WHERE name = ?1",
	[ST_USER_GET] = "SELECT " STORE_SQLITE_USER_COLS " FROM users "
	    "WHERE name = ?1",
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

static void		 store_sqlite_close(void);
static sqlite3		*store_sqlite_db;
static sqlite3_stmt	*store_sqlite_st[ST_COUNT];
static char		*store_sqlite_path;
static int		 store_sqlite_depth;	/* nested begin calls */
static int		 store_sqlite_failed;	/* a step of it failed */

/* Log SQLite's own diagnostics (recovery, corruption) as ours. */
static void
store_sqlite_log(void *arg, int code, const char *msg)
{
	if ((code & 0xff) == SQLITE_NOTICE || (code & 0xff) == SQLITE_WARNING)
		log_debug("sqlite: %s", msg);
	else
		log_warnx("sqlite: %s (%d)", msg, code);
}

/* Run one statement of SQL text (no rows expected); fills err. */
static int
store_sqlite_exec(const char *sql, char *err, size_t errsz)
{
	char	*msg = NULL;

	if (sqlite3_exec(store_sqlite_db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errsz, "%s: %s", store_sqlite_path,
		    msg != NULL ? msg : sqlite3_errmsg(store_sqlite_db));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/* The text value of a one-row PRAGMA into out; fills err. */
static int
store_sqlite_pragma(const char *sql, char *out, size_t outsz, char *err,
    size_t errsz)
{
	sqlite3_stmt	*st;
	int		 rc;

	if (sqlite3_prepare_v2(store_sqlite_db, sql, -1, &st, NULL) !=
	    SQLITE_OK) {
		snprintf(err, errsz, "%s: %s", store_sqlite_path,
		    sqlite3_errmsg(store_sqlite_db));
		return -1;
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		snprintf(err, errsz, "%s: %s", store_sqlite_path,
		    rc == SQLITE_DONE ? "no answer to a PRAGMA" :
		    sqlite3_errmsg(store_sqlite_db));
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
 * and set a loose mode back to 0600. Fills err.
 */
static int
store_sqlite_file_check(const char *path, char *err, size_t errsz)
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
store_sqlite_migrate(char *err, size_t errsz)
{
	char	buf[32], sql[64];
	long	version;
	int	i;

	if (store_sqlite_pragma("PRAGMA user_version", buf, sizeof(buf), err,
	    errsz) == -1)
		return -1;
	version = strtol(buf, NULL, 10);
	if (version < 0 || version > STORE_VERSION) {
		snprintf(err, errsz, "%s: schema version %ld, but this brokerd "
		    "knows versions up to %d (a newer hostgate's store?)",
		    store_sqlite_path, version, STORE_VERSION);
		return -1;
	}
	for (i = (int)version; i < STORE_VERSION; i++) {
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", i + 1);
		if (store_sqlite_exec("BEGIN IMMEDIATE", err, errsz) == -1)
			return -1;
		if (store_sqlite_exec(store_sqlite_migrations[i], err,
		    errsz) == -1 ||
		    store_sqlite_exec(sql, err, errsz) == -1) {
			sqlite3_exec(store_sqlite_db, "ROLLBACK", NULL, NULL,
			    NULL);
			return -1;
		}
		if (store_sqlite_exec("COMMIT", err, errsz) == -1)
			return -1;
		log_info("%s: schema version %d", store_sqlite_path, i + 1);
	}
	return 0;
}

/* Whether PRAGMA quick_check finds the file whole; fills err. */
static int
store_sqlite_check(char *err, size_t errsz)
{
	char	buf[256];

	if (store_sqlite_pragma("PRAGMA quick_check", buf, sizeof(buf), err,
	    errsz) == -1)
		return -1;
	if (strcmp(buf, "ok") != 0) {
		snprintf(err, errsz, "%s: damaged: %s", store_sqlite_path, buf);
		return -1;
	}
	return 0;
}

/* Add to err what to do about a store that cannot be used. */
static void
store_sqlite_unusable(char *err, size_t errsz)
{
	size_t	len = strlen(err);

	snprintf(err + len, errsz - len, "; the store is unusable: restore it "
	    "from a backup, or move it and its -wal file aside to start with "
	    "no users, sessions and tokens");
}

/*
 * Open (creating it if absent) the store at path (":memory:": one in
 * memory), take its lock, bring the schema up to date and check it. -1
 * with err naming the file and what is wrong; the caller refuses to start.
 */
int
store_sqlite_open_path(const char *path, char *err, size_t errsz)
{
	static int	 configured;
	char		 buf[32], why[400];
	int		 i, rc, memory = strcmp(path, ":memory:") == 0;

	store_sqlite_close();
	if (!configured) {
		sqlite3_config(SQLITE_CONFIG_LOG, store_sqlite_log, NULL);
		configured = 1;
	}
	if ((store_sqlite_path = strdup(path)) == NULL)
		fatal("%s", __func__);
	/* ":memory:" (the contract tests): no file, no WAL. */
	if (memory == 0 && store_sqlite_file_check(path, err, errsz) == -1)
		goto fail;
	rc = sqlite3_open_v2(path, &store_sqlite_db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE,
	    NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errsz, "%s: %s", path, store_sqlite_db != NULL ?
		    sqlite3_errmsg(store_sqlite_db) : sqlite3_errstr(rc));
		goto fail;
	}
	/*
	 * Exclusive before WAL: no -shm file, no shared memory, and no other
	 * process can open the store while brokerd holds it, so session.c's
	 * copy in memory is always the store's. FULL: a commit (a revoked
	 * token, a minted one) is on disk before brokerd answers.
	 */
	if (store_sqlite_exec("PRAGMA locking_mode = EXCLUSIVE", err,
	    errsz) == -1 ||
	    store_sqlite_pragma("PRAGMA journal_mode = WAL", buf, sizeof(buf),
	    err, errsz) == -1)
		goto broken;
	if (strcmp(buf, memory ? "memory" : "wal") != 0) {
		snprintf(err, errsz, "%s: cannot use a WAL journal (%s)",
		    path, buf);
		goto fail;
	}
	if (store_sqlite_exec("PRAGMA synchronous = FULL;"
	    "PRAGMA temp_store = MEMORY;"
	    "PRAGMA journal_size_limit = 4194304;"
	    "PRAGMA cache_size = -16384;"
	    "PRAGMA foreign_keys = OFF", err, errsz) == -1)
		goto broken;
	/* Take the exclusive lock now, not at the first login. */
	if (store_sqlite_exec("BEGIN EXCLUSIVE; COMMIT", err, errsz) == -1)
		goto broken;
	if (store_sqlite_check(err, errsz) == -1 ||
	    store_sqlite_migrate(err, errsz) == -1)
		goto broken;
	for (i = 0; i < ST_COUNT; i++) {
		if (sqlite3_prepare_v3(store_sqlite_db, store_sqlite_sql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &store_sqlite_st[i], NULL) !=
		    SQLITE_OK) {
			snprintf(err, errsz, "%s: %s", path,
			    sqlite3_errmsg(store_sqlite_db));
			goto broken;
		}
	}
	return 0;
broken:
	rc = sqlite3_extended_errcode(store_sqlite_db);
	if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errsz, "%s (another brokerd on this state "
		    "directory?)", why);
	} else if ((rc & 0xff) == SQLITE_NOTADB ||
	    (rc & 0xff) == SQLITE_CORRUPT || strstr(err, "damaged") != NULL)
		store_sqlite_unusable(err, errsz);
fail:
	store_sqlite_close();
	return -1;
}

/* Open STATE_DIR/store.db (store_sqlite_open_path). */
static int
store_sqlite_open(struct config *conf, char *err, size_t errsz)
{
	char	*path;
	int	 rc;

	path = path_join(conf->state_dir, STORE_FILE);
	rc = store_sqlite_open_path(path, err, errsz);
	free(path);
	return rc;
}

/* Close the store (checkpointing its WAL into the file). */
static void
store_sqlite_close(void)
{
	int	i;

	for (i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(store_sqlite_st[i]);
		store_sqlite_st[i] = NULL;
	}
	if (store_sqlite_db != NULL && sqlite3_close(store_sqlite_db) !=
	    SQLITE_OK)
		log_warnx("%s: close: %s", store_sqlite_path,
		    sqlite3_errmsg(store_sqlite_db));
	store_sqlite_db = NULL;
	free(store_sqlite_path);
	store_sqlite_path = NULL;
	store_sqlite_depth = store_sqlite_failed = 0;
}

/* Run a prepared statement to its end; 0, or -1 logged. */
static int
store_sqlite_run(int which)
{
	sqlite3_stmt	*st = store_sqlite_st[which];
	int		 rc;

	if (st == NULL)
		return -1;
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		log_warnx("%s: %s: %s", store_sqlite_path, sqlite3_sql(st),
		    sqlite3_errmsg(store_sqlite_db));
		if (store_sqlite_depth > 0)
			store_sqlite_failed = 1;
		return -1;
	}
	return 0;
}

/* Bind a text parameter (SQLite copies it). */
static void
store_sqlite_bind_text(int which, int i, const char *s)
{
	sqlite3_bind_text(store_sqlite_st[which], i, s, -1, SQLITE_TRANSIENT);
}

/*
 * Begin a transaction: the changes up to the matching store_sqlite_commit are
 * written at once, or none is. Nests: only the outermost pair counts.
 */
static int
store_sqlite_begin(void)
{
	if (store_sqlite_db == NULL)
		return -1;
	if (store_sqlite_depth++ > 0)
		return 0;
	store_sqlite_failed = 0;
	if (store_sqlite_run(ST_BEGIN) == -1) {
		store_sqlite_depth = 0;
		return -1;
	}
	return 0;
}

/* End a transaction: 0 once on disk; -1 (rolled back) if a step failed. */
static int
store_sqlite_commit(void)
{
	if (store_sqlite_depth == 0)
		return -1;
	if (--store_sqlite_depth > 0)
		return store_sqlite_failed ? -1 : 0;
	if (store_sqlite_failed) {
		store_sqlite_run(ST_ROLLBACK);
		return -1;
	}
	if (store_sqlite_run(ST_COMMIT) == -1) {
		if (!sqlite3_get_autocommit(store_sqlite_db))
			store_sqlite_run(ST_ROLLBACK);
		return -1;
	}
	return 0;
}

/* Abandon the transaction (the outermost one rolls back). */
static void
store_sqlite_rollback(void)
{
	if (store_sqlite_depth == 0)
		return;
	store_sqlite_failed = 1;
	if (--store_sqlite_depth == 0)
		store_sqlite_run(ST_ROLLBACK);
}

/* A session's egress additions as the text of a JSON array. */
static const char *
store_sqlite_egress_text(const struct session *s)
{
	if (s->egress_allow == NULL)
		return "[]";
	return json_object_to_json_string_ext(s->egress_allow,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* Store a new session; 0, or -1 logged. */
static int
store_sqlite_session_insert(const struct session *s)
{
	store_sqlite_bind_text(ST_SESSION_INSERT, 1, s->id);
	store_sqlite_bind_text(ST_SESSION_INSERT, 2, s->token_hash);
	store_sqlite_bind_text(ST_SESSION_INSERT, 3, s->csrf_hash);
	store_sqlite_bind_text(ST_SESSION_INSERT, 4, s->user);
	sqlite3_bind_int64(store_sqlite_st[ST_SESSION_INSERT], 5, s->created);
	sqlite3_bind_int64(store_sqlite_st[ST_SESSION_INSERT], 6, s->last_seen);
	sqlite3_bind_int64(store_sqlite_st[ST_SESSION_INSERT], 7, s->expires);
	store_sqlite_bind_text(ST_SESSION_INSERT, 8, s->permission);
	sqlite3_bind_int64(store_sqlite_st[ST_SESSION_INSERT], 9,
	    s->direct_until);
	store_sqlite_bind_text(ST_SESSION_INSERT, 10,
	    store_sqlite_egress_text(s));
	return store_sqlite_run(ST_SESSION_INSERT);
}

/*
 * Store what changes in a session: last_seen, profile, grant, egress
 * additions; 0 or -1.
 */
static int
store_sqlite_session_update(const struct session *s)
{
	store_sqlite_bind_text(ST_SESSION_UPDATE, 1, s->id);
	sqlite3_bind_int64(store_sqlite_st[ST_SESSION_UPDATE], 2, s->last_seen);
	store_sqlite_bind_text(ST_SESSION_UPDATE, 3, s->permission);
	sqlite3_bind_int64(store_sqlite_st[ST_SESSION_UPDATE], 4,
	    s->direct_until);
	store_sqlite_bind_text(ST_SESSION_UPDATE, 5,
	    store_sqlite_egress_text(s));
	return store_sqlite_run(ST_SESSION_UPDATE);
}

/* Delete a session's row and its tokens'; 0, or -1 logged. */
static int
store_sqlite_session_delete(const char *id)
{
	store_sqlite_bind_text(ST_SESSION_DELETE, 1, id);
	if (store_sqlite_run(ST_SESSION_DELETE) == -1)
		return -1;
	store_sqlite_bind_text(ST_SESSION_TOKENS_DELETE, 1, id);
	return store_sqlite_run(ST_SESSION_TOKENS_DELETE);
}

/* Store a new token; 0, or -1 logged. */
static int
store_sqlite_token_insert(const struct token *t)
{
	store_sqlite_bind_text(ST_TOKEN_INSERT, 1, t->id);
	store_sqlite_bind_text(ST_TOKEN_INSERT, 2, t->hash);
	store_sqlite_bind_text(ST_TOKEN_INSERT, 3, t->user);
	store_sqlite_bind_text(ST_TOKEN_INSERT, 4, t->session_id);
	sqlite3_bind_int64(store_sqlite_st[ST_TOKEN_INSERT], 5, t->created);
	return store_sqlite_run(ST_TOKEN_INSERT);
}

/* Delete a token's row; 0, or -1 logged. */
static int
store_sqlite_token_delete(const char *id)
{
	store_sqlite_bind_text(ST_TOKEN_DELETE, 1, id);
	return store_sqlite_run(ST_TOKEN_DELETE);
}

/*
 * The ids of at most max sessions expired at now, the oldest first (by
 * the index on expires: the cost is that of the batch, not of the store).
 */
static size_t
store_sqlite_expired(int64_t now, char (*ids)[33], size_t max)
{
	sqlite3_stmt	*st = store_sqlite_st[ST_EXPIRED];
	const char	*id;
	size_t		 n = 0;
	int		 rc;

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
		log_warnx("%s: %s", store_sqlite_path,
		    sqlite3_errmsg(store_sqlite_db));
	sqlite3_reset(st);
	return n;
}

/* A number kept under key (0 when there is none). */
static int64_t
store_sqlite_meta_get(const char *key)
{
	sqlite3_stmt	*st = store_sqlite_st[ST_META_GET];
	int64_t		 v = 0;

	if (st == NULL)
		return 0;
	store_sqlite_bind_text(ST_META_GET, 1, key);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return v;
}

/* Keep a number under key; 0, or -1 logged. */
static int
store_sqlite_meta_set(const char *key, int64_t value)
{
	store_sqlite_bind_text(ST_META_SET, 1, key);
	sqlite3_bind_int64(store_sqlite_st[ST_META_SET], 2, value);
	return store_sqlite_run(ST_META_SET);
}

/* The text of column i, "" for NULL. */
static const char *
store_sqlite_text(sqlite3_stmt *st, int i)
{
	const unsigned char	*s = sqlite3_column_text(st, i);

	return s != NULL ? (const char *)s : "";
}

/* Copy src into a fixed field; -1 when it does not fit. */
static int
store_sqlite_copy(char *dst, size_t dstsz, const char *src)
{
	if (strlen(src) >= dstsz)
		return -1;
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

/*
 * The row st stands on (STORE_SQLITE_SESSION_COLS) as an allocated
 * session (the caller checks it), or NULL with why when a field does not
 * fit.
 */
static struct session *
store_sqlite_session_row(sqlite3_stmt *st, char *why, size_t whysz)
{
	struct session	*s;
	int		 bad;

	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->user = strdup(store_sqlite_text(st, 3))) == NULL)
		fatal("%s", __func__);
	bad = store_sqlite_copy(s->id, sizeof(s->id),
	    store_sqlite_text(st, 0)) |
	    store_sqlite_copy(s->token_hash, sizeof(s->token_hash),
	    store_sqlite_text(st, 1)) |
	    store_sqlite_copy(s->csrf_hash, sizeof(s->csrf_hash),
	    store_sqlite_text(st, 2)) |
	    store_sqlite_copy(s->permission, sizeof(s->permission),
	    store_sqlite_text(st, 7));
	s->created = sqlite3_column_int64(st, 4);
	s->last_seen = sqlite3_column_int64(st, 5);
	s->expires = sqlite3_column_int64(st, 6);
	s->direct_until = sqlite3_column_int64(st, 8);
	/* Checked by the caller; "[]" or bad text: none. */
	s->egress_allow = json_tokener_parse(store_sqlite_text(st, 9));
	if (bad) {
		snprintf(why, whysz, "session %.32s: a field too long",
		    store_sqlite_text(st, 0));
		json_object_put(s->egress_allow);
		free(s->user);
		free(s);
		return NULL;
	}
	return s;
}

/* The same for a token (STORE_SQLITE_TOKEN_COLS). */
static struct token *
store_sqlite_token_row(sqlite3_stmt *st, char *why, size_t whysz)
{
	struct token	*t;
	int		 bad;

	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (t->user = strdup(store_sqlite_text(st, 2))) == NULL)
		fatal("%s", __func__);
	bad = store_sqlite_copy(t->id, sizeof(t->id),
	    store_sqlite_text(st, 0)) |
	    store_sqlite_copy(t->hash, sizeof(t->hash),
	    store_sqlite_text(st, 1)) |
	    store_sqlite_copy(t->session_id, sizeof(t->session_id),
	    store_sqlite_text(st, 3));
	t->created = sqlite3_column_int64(st, 4);
	if (bad) {
		snprintf(why, whysz, "token %.16s: a field too long",
		    store_sqlite_text(st, 0));
		free(t->user);
		free(t);
		return NULL;
	}
	return t;
}

/*
 * Read every session, then every token, handing each (allocated, the
 * callee's) to add, which checks it and fills err when it refuses it. -1
 * with err "PATH: why" on the first refusal or read error.
 */
static int
store_sqlite_load(int (*add_session)(struct session *, char *, size_t),
    int (*add_token)(struct token *, char *, size_t), char *err,
    size_t errsz)
{
	sqlite3_stmt	*st = NULL;
	struct session	*s;
	struct token	*t;
	char		 why[256];
	int		 rc;

	if (sqlite3_prepare_v2(store_sqlite_db, "SELECT "
	    STORE_SQLITE_SESSION_COLS " FROM sessions ORDER BY created, id", -1,
	    &st, NULL) != SQLITE_OK)
		goto sqlerr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((s = store_sqlite_session_row(st, why, sizeof(why))) ==
		    NULL || add_session(s, why, sizeof(why)) == -1)
			goto refused;
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);

	if (sqlite3_prepare_v2(store_sqlite_db, "SELECT "
	    STORE_SQLITE_TOKEN_COLS " FROM tokens ORDER BY created, id", -1,
	    &st, NULL) != SQLITE_OK)
		goto sqlerr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((t = store_sqlite_token_row(st, why, sizeof(why))) ==
		    NULL || add_token(t, why, sizeof(why)) == -1)
			goto refused;
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	return 0;
refused:
	snprintf(err, errsz, "%s: %s", store_sqlite_path, why);
	sqlite3_finalize(st);
	return -1;
sqlerr:
	snprintf(err, errsz, "%s: %s", store_sqlite_path,
	    sqlite3_errmsg(store_sqlite_db));
	sqlite3_finalize(st);
	return -1;
}

/*
 * Step a one-row lookup bound to key: 1 on its row (left for the caller to
 * read, then reset), 0 when there is none, -1 on an error (logged).
 */
static int
store_sqlite_lookup(int which, const char *key)
{
	sqlite3_stmt	*st = store_sqlite_st[which];
	int		 rc;

	if (st == NULL)
		return -1;
	store_sqlite_bind_text(which, 1, key);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		return 1;
	if (rc != SQLITE_DONE)
		log_warnx("%s: %s", store_sqlite_path,
		    sqlite3_errmsg(store_sqlite_db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* End a lookup that returned its row. */
static void
store_sqlite_lookup_done(int which)
{
	sqlite3_reset(store_sqlite_st[which]);
	sqlite3_clear_bindings(store_sqlite_st[which]);
}

/*
 * The session whose id (by_hash 0) or token_hash (1) is key: 1 with *out
 * (allocated, the caller's to check), 0 when there is none, -1 when the
 * store fails or the row is unfit (logged).
 */
static int
store_sqlite_session_get(const char *key, int by_hash, struct session **out)
{
	int	which = by_hash ? ST_SESSION_GET_HASH : ST_SESSION_GET_ID;
	char	why[256];
	int	rc;

	*out = NULL;
	if ((rc = store_sqlite_lookup(which, key)) != 1)
		return rc;
	*out = store_sqlite_session_row(store_sqlite_st[which], why,
	    sizeof(why));
	store_sqlite_lookup_done(which);
	if (*out == NULL) {
		log_warnx("%s: %s", store_sqlite_path, why);
		return -1;
	}
	return 1;
}

/* The same for the token whose id (by_hash 0) or hash (1) is key. */
static int
store_sqlite_token_get(const char *key, int by_hash, struct token **out)
{
	int	which = by_hash ? ST_TOKEN_GET_HASH : ST_TOKEN_GET_ID;
	char	why[256];
	int	rc;

	*out = NULL;
	if ((rc = store_sqlite_lookup(which, key)) != 1)
		return rc;
	*out = store_sqlite_token_row(store_sqlite_st[which], why,
	    sizeof(why));
	store_sqlite_lookup_done(which);
	if (*out == NULL) {
		log_warnx("%s: %s", store_sqlite_path, why);
		return -1;
	}
	return 1;
}

/* Delete every session and token row of a user; 0, or -1 logged. */
static int
store_sqlite_drop_user(const char *user)
{
	store_sqlite_bind_text(ST_DROP_USER_TOKENS, 1, user);
	if (store_sqlite_run(ST_DROP_USER_TOKENS) == -1)
		return -1;
	store_sqlite_bind_text(ST_DROP_USER_SESSIONS, 1, user);
	return store_sqlite_run(ST_DROP_USER_SESSIONS);
}

/* A JSON array (or NULL) as the text of a column, "[]" for none. */
static const char *
store_sqlite_json_text(struct json_object *arr)
{
	if (arr == NULL)
		return "[]";
	return json_object_to_json_string_ext(arr,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* Run a user statement: the rows it changed, or -1 logged. */
static int
store_sqlite_user_run(int which)
{
	if (store_sqlite_run(which) == -1)
		return -1;
	return sqlite3_changes(store_sqlite_db);
}

/*
 * Store a new user: 1 when inserted; 0 when its name or its uid is another
 * user's already; -1 when the store fails.
 */
static int
store_sqlite_user_insert(const struct user *u)
{
	sqlite3_stmt	*st = store_sqlite_st[ST_USER_INSERT];

	store_sqlite_bind_text(ST_USER_INSERT, 1, u->name);
	sqlite3_bind_int(st, 2, u->admin != 0);
	store_sqlite_bind_text(ST_USER_INSERT, 3, u->hash);
	sqlite3_bind_int64(st, 4, u->created);
	sqlite3_bind_int64(st, 5, u->uid);
	sqlite3_bind_int64(st, 6, u->gid);
	if (u->unix_user != NULL)
		store_sqlite_bind_text(ST_USER_INSERT, 7, u->unix_user);
	store_sqlite_bind_text(ST_USER_INSERT, 8,
	    store_sqlite_json_text(u->egress_allow));
	return store_sqlite_user_run(ST_USER_INSERT);
}

/* Store a user's changed fields (role, hash, ids, egress): rows or -1. */
static int
store_sqlite_user_update(const struct user *u)
{
	sqlite3_stmt	*st = store_sqlite_st[ST_USER_UPDATE];

	store_sqlite_bind_text(ST_USER_UPDATE, 1, u->name);
	sqlite3_bind_int(st, 2, u->admin != 0);
	store_sqlite_bind_text(ST_USER_UPDATE, 3, u->hash);
	sqlite3_bind_int64(st, 4, u->uid);
	sqlite3_bind_int64(st, 5, u->gid);
	if (u->unix_user != NULL)
		store_sqlite_bind_text(ST_USER_UPDATE, 6, u->unix_user);
	store_sqlite_bind_text(ST_USER_UPDATE, 7,
	    store_sqlite_json_text(u->egress_allow));
	return store_sqlite_user_run(ST_USER_UPDATE);
}

/* Delete a user's row: 1 deleted, 0 none was there, -1 the store failed. */
static int
store_sqlite_user_delete(const char *name)
{
	store_sqlite_bind_text(ST_USER_DELETE, 1, name);
	return store_sqlite_user_run(ST_USER_DELETE);
}

/* The row st stands on (STORE_SQLITE_USER_COLS) as a user (unchecked). */
static struct user *
store_sqlite_user_row(sqlite3_stmt *st)
{
	struct user	*u;

	if ((u = calloc(1, sizeof(*u))) == NULL ||
	    (u->name = strdup(store_sqlite_text(st, 0))) == NULL ||
	    (u->hash = strdup(store_sqlite_text(st, 2))) == NULL)
		fatal("%s", __func__);
	u->admin = sqlite3_column_int(st, 1) != 0;
	u->created = sqlite3_column_int64(st, 3);
	u->uid = sqlite3_column_int64(st, 4);
	u->gid = sqlite3_column_int64(st, 5);
	if (sqlite3_column_type(st, 6) != SQLITE_NULL &&
	    (u->unix_user = strdup(store_sqlite_text(st, 6))) == NULL)
		fatal("%s", __func__);
	u->egress_allow = json_tokener_parse(store_sqlite_text(st, 7));
	return u;
}

/*
 * The user called name: 1 with *out (allocated, unchecked), 0 when there
 * is none, -1 when the store fails.
 */
static int
store_sqlite_user_get(const char *name, struct user **out)
{
	int	rc;

	*out = NULL;
	if ((rc = store_sqlite_lookup(ST_USER_GET, name)) != 1)
		return rc;
	*out = store_sqlite_user_row(store_sqlite_st[ST_USER_GET]);
	store_sqlite_lookup_done(ST_USER_GET);
	return 1;
}

/*
 * Hand every user (allocated, the callee's) to add, oldest first; -1 with
 * err on the first refusal (add fills why) or a read error.
 */
static int
store_sqlite_user_load(int (*add)(struct user *, char *, size_t), char *err,
    size_t errsz)
{
	sqlite3_stmt	*st = NULL;
	char		 why[256];
	int		 rc;

	if (sqlite3_prepare_v2(store_sqlite_db, "SELECT "
	    STORE_SQLITE_USER_COLS " FROM users ORDER BY created, name", -1,
	    &st, NULL) != SQLITE_OK)
		goto sqlerr;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (add(store_sqlite_user_row(st), why, sizeof(why)) == -1) {
			snprintf(err, errsz, "%s: %s", store_sqlite_path, why);
			sqlite3_finalize(st);
			return -1;
		}
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	return 0;
sqlerr:
	snprintf(err, errsz, "%s: %s", store_sqlite_path,
	    sqlite3_errmsg(store_sqlite_db));
	sqlite3_finalize(st);
	return -1;
}

/* Why the last statement failed. */
static const char *
store_sqlite_error(void)
{
	return store_sqlite_db != NULL ? sqlite3_errmsg(store_sqlite_db) :
	    "the store is not open";
}

/* Always reachable: a file of this host's. */
static int
store_sqlite_ready(char *why, size_t whysz)
{
	return 0;
}

const struct store_ops store_sqlite = {
	.kind = "embedded",
	.where = STORE_FILE,
	.one_host = 1,
	.open = store_sqlite_open,
	.close = store_sqlite_close,
	.unusable = store_sqlite_unusable,
	.ready = store_sqlite_ready,
	.begin = store_sqlite_begin,
	.commit = store_sqlite_commit,
	.rollback = store_sqlite_rollback,
	.session_insert = store_sqlite_session_insert,
	.session_update = store_sqlite_session_update,
	/* One host: last_seen alone is no cheaper to write. */
	.session_touch = store_sqlite_session_update,
	.session_delete = store_sqlite_session_delete,
	.session_get = store_sqlite_session_get,
	.token_insert = store_sqlite_token_insert,
	.token_delete = store_sqlite_token_delete,
	.token_get = store_sqlite_token_get,
	.drop_user = store_sqlite_drop_user,
	.expired = store_sqlite_expired,
	.meta_get = store_sqlite_meta_get,
	.meta_set = store_sqlite_meta_set,
	.load = store_sqlite_load,
	.user_insert = store_sqlite_user_insert,
	.user_update = store_sqlite_user_update,
	.user_delete = store_sqlite_user_delete,
	.user_get = store_sqlite_user_get,
	.user_load = store_sqlite_user_load,
	.error = store_sqlite_error,
	.audit = &audit_file,
};
