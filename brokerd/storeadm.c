/*
 * hgctl's store commands, off-line: what a store holds (hgctl store
 * status) and the copy of a host's embedded store (store.db's users,
 * sessions and tokens, or the users.json of a host of an earlier release
 * that never started this one; the audit.log chain) into an empty
 * PostgreSQL store
 * (hgctl store copy). The copy takes store.db's exclusive lock, as brokerd
 * does, so that it refuses while brokerd runs and brokerd cannot start in
 * the middle of it; it writes everything in one transaction, or nothing.
 */
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "brokerd.h"

#define STOREADM_USERS_FILE	"users.json"
#define STOREADM_USERS_MAX	(4 * 1024 * 1024)
#define STOREADM_AUDIT_FILE	"audit.log"
#define STOREADM_TIMEOUT_MS	600000	/* a long audit log's inserts */

/* Open store.db for reading under its exclusive lock; fills err. */
static sqlite3 *
storeadm_sqlite(const char *state_dir, int *absent, char *err,
    size_t errsz)
{
	sqlite3	*db = NULL;
	char	*path;
	int	 rc;

	*absent = 0;
	path = path_join(state_dir, STORE_FILE);
	if (access(path, F_OK) == -1 && errno == ENOENT) {
		*absent = 1;
		free(path);
		return NULL;
	}
	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOFOLLOW, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(db, 0);
		rc = sqlite3_exec(db, "PRAGMA locking_mode = EXCLUSIVE; "
		    "BEGIN EXCLUSIVE", NULL, NULL, NULL);
	}
	if (rc != SQLITE_OK) {
		if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
			snprintf(err, errsz, "%s is locked: brokerd is running "
			    "on this state directory; stop it first", path);
		else
			snprintf(err, errsz, "%s: %s", path, db != NULL ?
			    sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		free(path);
		return NULL;
	}
	free(path);
	return db;
}

/* The number a one-value query of db answers, or -1. */
static int64_t
storeadm_sqlite_count(sqlite3 *db, const char *sql)
{
	sqlite3_stmt	*st;
	int64_t		 v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* store.db's users (schema 3 on) as users.json's array; NULL with err. */
static struct json_object *
storeadm_users_table(sqlite3 *db, char *err, size_t errsz)
{
	struct json_object	*arr, *o;
	sqlite3_stmt		*st;
	int			 rc;

	if (sqlite3_prepare_v2(db, "SELECT name, admin, hash, created, uid, "
	    "gid, unix_user, egress_allow FROM users ORDER BY created, name",
	    -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errsz, "%s: %s", STORE_FILE, sqlite3_errmsg(db));
		return NULL;
	}
	arr = json_object_new_array();
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(
		    (const char *)sqlite3_column_text(st, 0)));
		json_object_object_add(o, "role", json_object_new_string(
		    sqlite3_column_int(st, 1) ? "admin" : "user"));
		json_object_object_add(o, "hash", json_object_new_string(
		    (const char *)sqlite3_column_text(st, 2)));
		json_object_object_add(o, "created",
		    json_object_new_int64(sqlite3_column_int64(st, 3)));
		json_object_object_add(o, "uid",
		    json_object_new_int64(sqlite3_column_int64(st, 4)));
		json_object_object_add(o, "gid",
		    json_object_new_int64(sqlite3_column_int64(st, 5)));
		if (sqlite3_column_type(st, 6) != SQLITE_NULL)
			json_object_object_add(o, "unix_user",
			    json_object_new_string((const char *)
			    sqlite3_column_text(st, 6)));
		json_object_object_add(o, "egress_allow", json_tokener_parse(
		    (const char *)sqlite3_column_text(st, 7)));
		json_object_array_add(arr, o);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		snprintf(err, errsz, "%s: %s", STORE_FILE, sqlite3_errmsg(db));
		json_object_put(arr);
		return NULL;
	}
	return arr;
}

/*
 * The users of a host (the caller's array, as users.json holds them):
 * store.db's (db, when its schema has them), else those of the users.json
 * of an earlier release; NULL with err.
 */
static struct json_object *
storeadm_users(const char *state_dir, sqlite3 *db, char *err, size_t errsz)
{
	struct json_object	*root, *arr;
	char			*path, *text;
	int64_t			 version;
	int			 absent;

	if (db != NULL && storeadm_sqlite_count(db, "PRAGMA user_version") >= 3)
		return storeadm_users_table(db, err, errsz);
	path = path_join(state_dir, STOREADM_USERS_FILE);
	if ((text = file_read_private(path, STOREADM_USERS_MAX, &absent, err,
	    errsz)) == NULL) {
		free(path);
		return absent ? json_object_new_array() : NULL;
	}
	root = json_tokener_parse(text);
	free(text);
	if (root == NULL || json_int(root, "version", &version) == -1 ||
	    version != 1 || !json_object_object_get_ex(root, "users", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		snprintf(err, errsz, "%s: not a users file of version 1", path);
		json_object_put(root);
		free(path);
		return NULL;
	}
	json_object_get(arr);
	json_object_put(root);
	free(path);
	return arr;
}

/*
 * What the embedded store of state_dir holds. With brokerd running
 * store.db cannot be read: 1, and the sessions and tokens are -1 (the
 * caller asks brokerd); else 0, or -1 with err.
 */
int
storeadm_embedded_status(const char *state_dir, struct storeadm_counts *c,
    char *err, size_t errsz)
{
	struct json_object	*users;
	sqlite3			*db;
	int			 absent;

	memset(c, 0, sizeof(*c));
	c->schema = c->users = c->sessions = c->tokens = -1;
	if ((db = storeadm_sqlite(state_dir, &absent, err, errsz)) == NULL &&
	    !absent)
		return strstr(err, "brokerd is running") != NULL ? 1 : -1;
	if ((users = storeadm_users(state_dir, db, err, errsz)) == NULL) {
		sqlite3_close(db);
		return -1;
	}
	c->users = json_object_array_length(users);
	json_object_put(users);
	if (db == NULL) {
		c->schema = c->sessions = c->tokens = 0;
		return 0;
	}
	c->schema = storeadm_sqlite_count(db, "PRAGMA user_version");
	c->sessions = storeadm_sqlite_count(db, "SELECT count(*) FROM "
	    "sessions");
	c->tokens = storeadm_sqlite_count(db, "SELECT count(*) FROM tokens");
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(db);
	return 0;
}

/* One statement on a blocking connection of hgctl's: the result, or NULL. */
static PGresult *
storeadm_pg(PGconn *conn, const char *sql, int n, const char *const *p,
    char *err, size_t errsz)
{
	PGresult	*res;
	char		*nl;

	res = PQexecParams(conn, sql, n, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_COMMAND_OK ||
	    PQresultStatus(res) == PGRES_TUPLES_OK)
		return res;
	snprintf(err, errsz, "%s", PQresultErrorMessage(res)[0] != '\0' ?
	    PQresultErrorMessage(res) : PQerrorMessage(conn));
	if ((nl = strchr(err, '\n')) != NULL)
		*nl = '\0';
	PQclear(res);
	return NULL;
}

/* Connect to a PostgreSQL store for hgctl (blocking); NULL with err. */
static PGconn *
storeadm_connect(const char *conninfo, int timeout, char *err, size_t errsz)
{
	PGconn	*conn;

	if ((conn = pg_connect_once(conninfo, timeout, err, errsz)) == NULL)
		return NULL;
	if (PQsetnonblocking(conn, 0) == -1) {
		snprintf(err, errsz, "%s", PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* The rows counted in a PostgreSQL store at the current schema. */
static int
storeadm_pg_counts(PGconn *conn, struct storeadm_counts *c, char *err,
    size_t errsz)
{
	PGresult	*res;

	if ((res = storeadm_pg(conn, "SELECT (SELECT count(*) FROM users), "
	    "(SELECT count(*) FROM sessions), (SELECT count(*) FROM tokens), "
	    "(SELECT count(*) FROM audit), (SELECT count(*) FROM hosts)", 0,
	    NULL, err, errsz)) == NULL)
		return -1;
	c->users = pg_i64(res, 0, 0);
	c->sessions = pg_i64(res, 0, 1);
	c->tokens = pg_i64(res, 0, 2);
	c->audit = pg_i64(res, 0, 3);
	c->hosts = pg_i64(res, 0, 4);
	PQclear(res);
	return 0;
}

/*
 * What the PostgreSQL store at conninfo holds: its schema version (the
 * counts are -1 when it has no schema yet); -1 with err.
 */
int
storeadm_pg_status(const char *conninfo, int timeout,
    struct storeadm_counts *c, char *err, size_t errsz)
{
	PGconn	*conn;
	int	 rc = -1;

	memset(c, 0, sizeof(*c));
	c->users = c->sessions = c->tokens = c->audit = c->hosts = -1;
	if ((conn = storeadm_connect(conninfo, timeout, err, errsz)) == NULL)
		return -1;
	if ((c->schema = pg_schema_version(conn, err, errsz)) == -1)
		goto out;
	if (c->schema == PG_SCHEMA_VERSION &&
	    storeadm_pg_counts(conn, c, err, errsz) == -1)
		goto out;
	rc = 0;
out:
	PQfinish(conn);
	return rc;
}

/* An integer as a parameter's text. */
static const char *
storeadm_num(char buf[24], int64_t v)
{
	snprintf(buf, 24, "%" PRId64, v);
	return buf;
}

/* Copy a host's users into the users table; their number or -1. */
static int64_t
storeadm_copy_users(PGconn *conn, const char *state_dir, sqlite3 *db,
    char *err, size_t errsz)
{
	struct json_object	*users, *o, *allow;
	PGresult		*res;
	const char		*name, *role, *hash;
	char			 c[24], u[24], g[24];
	int64_t			 created, uid, gid;
	size_t			 i, n;

	if ((users = storeadm_users(state_dir, db, err, errsz)) == NULL)
		return -1;
	n = json_object_array_length(users);
	for (i = 0; i < n; i++) {
		o = json_object_array_get_idx(users, i);
		name = json_str(o, "name");
		role = json_str(o, "role");
		hash = json_str(o, "hash");
		if (!str_is_user_name(name) || role == NULL || hash == NULL ||
		    json_int(o, "created", &created) == -1) {
			snprintf(err, errsz, "%s: user %zu: missing or invalid "
			    "field", STOREADM_USERS_FILE, i);
			goto fail;
		}
		if (json_int(o, "uid", &uid) == -1 ||
		    json_int(o, "gid", &gid) == -1) {
			snprintf(err, errsz, "%s: user %s has no uid: start "
			    "brokerd once on the embedded store to give them "
			    "one", STOREADM_USERS_FILE, name);
			goto fail;
		}
		if (!json_object_object_get_ex(o, "egress_allow", &allow))
			allow = NULL;
		{
			const char *p[] = { name, strcmp(role, "admin") == 0 ?
			    "t" : "f", hash, storeadm_num(c, created),
			    storeadm_num(u, uid), storeadm_num(g, gid),
			    json_str(o, "unix_user"), allow == NULL ? "[]" :
			    json_object_to_json_string_ext(allow,
			    JSON_C_TO_STRING_PLAIN |
			    JSON_C_TO_STRING_NOSLASHESCAPE) };

			if ((res = storeadm_pg(conn, "INSERT INTO users (name, "
			    "admin, hash, created, uid, gid, unix_user, "
			    "egress_allow) VALUES ($1, $2, $3, $4, $5, $6, "
			    "$7, $8)", 8, p, err, errsz)) == NULL)
				goto fail;
			PQclear(res);
		}
	}
	json_object_put(users);
	return (int64_t)n;
fail:
	json_object_put(users);
	return -1;
}

/*
 * Copy the rows a SELECT of store.db returns into a table, column for
 * column as text (NULL stays NULL); their number or -1 with err.
 */
static int64_t
storeadm_copy_rows(sqlite3 *db, PGconn *conn, const char *select,
    const char *insert, int ncols, const char *extra, char *err,
    size_t errsz)
{
	sqlite3_stmt	*st;
	PGresult	*res;
	const char	*p[16];
	int64_t		 n = 0;
	int		 i, rc;

	if (sqlite3_prepare_v2(db, select, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errsz, "%s: %s", STORE_FILE, sqlite3_errmsg(db));
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (i = 0; i < ncols; i++)
			p[i] = (const char *)sqlite3_column_text(st, i);
		if (extra != NULL)
			p[i++] = extra;
		if ((res = storeadm_pg(conn, insert, i, p, err, errsz)) ==
		    NULL) {
			sqlite3_finalize(st);
			return -1;
		}
		PQclear(res);
		n++;
	}
	if (rc != SQLITE_DONE) {
		snprintf(err, errsz, "%s: %s", STORE_FILE, sqlite3_errmsg(db));
		n = -1;
	}
	sqlite3_finalize(st);
	return n;
}

/* A record's "time" (ISO 8601 UTC, with milliseconds) in ms; -1 if bad. */
static int64_t
storeadm_time_ms(const char *s)
{
	struct tm	 tm;
	const char	*end;
	int64_t		 ms = 0, scale = 100;

	memset(&tm, 0, sizeof(tm));
	if (s == NULL || (end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) ==
	    NULL)
		return -1;
	if (*end == '.')
		for (end++; *end >= '0' && *end <= '9'; end++) {
			ms += (*end - '0') * scale;
			scale /= 10;
		}
	if (*end != 'Z')
		return -1;
	return (int64_t)timegm(&tm) * 1000 + ms;
}

/* Compare two rotated audit files' names by their number. */
static int
storeadm_audit_cmp(const void *a, const void *b)
{
	const char	*x = *(const char *const *)a, *y = *(const char *const *)b;
	size_t		 lx = strlen(x), ly = strlen(y);

	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x, y);
}

/*
 * The audit files of state_dir in chain order: audit.log.NNNNNN by
 * number, then audit.log (when present); NULL-terminated, the caller's.
 */
static char **
storeadm_audit_files(const char *state_dir, char *err, size_t errsz)
{
	DIR		*d;
	struct dirent	*e;
	char		**names = NULL, *path;
	size_t		 n = 0, pre = strlen(STOREADM_AUDIT_FILE) + 1;
	const char	*p;

	if ((d = opendir(state_dir)) == NULL) {
		snprintf(err, errsz, "%s: %s", state_dir, strerror(errno));
		return NULL;
	}
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, STOREADM_AUDIT_FILE ".", pre) != 0 ||
		    e->d_name[pre] == '\0')
			continue;
		for (p = e->d_name + pre; *p >= '0' && *p <= '9'; p++)
			;
		if (*p != '\0')
			continue;
		if ((names = reallocarray(names, n + 2, sizeof(*names))) ==
		    NULL || (names[n++] = strdup(e->d_name)) == NULL)
			fatal("%s", __func__);
	}
	closedir(d);
	if (n > 0)
		qsort(names, n, sizeof(*names), storeadm_audit_cmp);
	path = path_join(state_dir, STOREADM_AUDIT_FILE);
	if ((names = reallocarray(names, n + 2, sizeof(*names))) == NULL)
		fatal("%s", __func__);
	if (access(path, F_OK) == 0 &&
	    (names[n++] = strdup(STOREADM_AUDIT_FILE)) == NULL)
		fatal("%s", __func__);
	names[n] = NULL;
	free(path);
	return names;
}

/* The chain as far as it is copied: the next seq, the last line's hash. */
struct storeadm_chain {
	int64_t		 seq;		/* 0 before the first record */
	char		 hash[65];
	int64_t		 n;
};

/* Insert one audit line (len bytes, no newline) after checking its link. */
static int
storeadm_audit_line(PGconn *conn, struct storeadm_chain *ch,
    const char *file, int64_t lineno, char *line, size_t len,
    const char *host, char *err, size_t errsz)
{
	struct json_object	*o, *detail, *v;
	PGresult		*res;
	const char		*prev, *h, *rid = NULL;
	char			 seq[24], ms[24], hash[65];
	int64_t			 s, t;
	int			 allowed;

	o = json_tokener_parse(line);
	if (o == NULL || !json_object_is_type(o, json_type_object) ||
	    json_int(o, "seq", &s) == -1 || json_str(o, "action") == NULL ||
	    (prev = json_str(o, "prev")) == NULL ||
	    (t = storeadm_time_ms(json_str(o, "time"))) == -1 ||
	    !json_object_object_get_ex(o, "allowed", &v) ||
	    !json_object_is_type(v, json_type_boolean)) {
		snprintf(err, errsz, "%s:%" PRId64 ": not an audit record",
		    file, lineno);
		json_object_put(o);
		return -1;
	}
	if (ch->seq != 0 && (s != ch->seq + 1 || strcmp(prev,
	    ch->hash) != 0)) {
		snprintf(err, errsz, "%s:%" PRId64 ": record %" PRId64 " does "
		    "not follow record %" PRId64 " (run hgctl audit verify)",
		    file, lineno, s, ch->seq);
		json_object_put(o);
		return -1;
	}
	allowed = json_object_get_boolean(v);
	sha256_hex(line, len, hash);
	if (json_object_object_get_ex(o, "detail", &detail) &&
	    json_object_is_type(detail, json_type_object))
		rid = json_str(detail, "request_id");
	if ((h = json_str(o, "host")) == NULL)
		h = host;
	{
		const char *p[] = { storeadm_num(seq, s), storeadm_num(ms, t),
		    h, json_str(o, "action"), json_str(o, "user"),
		    json_str(o, "session"), allowed ? "t" : "f", rid, hash,
		    line };

		res = storeadm_pg(conn, "INSERT INTO audit (seq, time, host, "
		    "action, \"user\", session, allowed, request_id, hash, "
		    "line) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
		    10, p, err, errsz);
	}
	json_object_put(o);
	if (res == NULL)
		return -1;
	PQclear(res);
	ch->seq = s;
	memcpy(ch->hash, hash, sizeof(hash));
	ch->n++;
	return 0;
}

/* Copy the audit chain's lines, file by file, verbatim; their number. */
static int64_t
storeadm_copy_audit(PGconn *conn, const char *state_dir, const char *host,
    char *err, size_t errsz)
{
	struct storeadm_chain	 ch;
	FILE			*f;
	char			**names, *path, *line = NULL;
	size_t			 cap = 0, i;
	ssize_t			 len;
	int64_t			 lineno;
	int			 rc = 0;

	memset(&ch, 0, sizeof(ch));
	if ((names = storeadm_audit_files(state_dir, err, errsz)) == NULL)
		return -1;
	for (i = 0; rc == 0 && names[i] != NULL; i++) {
		path = path_join(state_dir, names[i]);
		if ((f = fopen(path, "re")) == NULL) {
			snprintf(err, errsz, "%s: %s", path, strerror(errno));
			rc = -1;
		}
		for (lineno = 1; rc == 0 &&
		    (len = getline(&line, &cap, f)) != -1; lineno++) {
			if (len == 0 || line[len - 1] != '\n') {
				snprintf(err, errsz, "%s:%" PRId64 ": a cut "
				    "last line (start brokerd once on the "
				    "embedded store to set it aside)", names[i],
				    lineno);
				rc = -1;
				break;
			}
			line[--len] = '\0';
			rc = storeadm_audit_line(conn, &ch, names[i], lineno,
			    line, (size_t)len, host, err, errsz);
		}
		if (f != NULL)
			fclose(f);
		free(path);
	}
	for (i = 0; names[i] != NULL; i++)
		free(names[i]);
	free(names);
	free(line);
	return rc == 0 ? ch.n : -1;
}

/*
 * Copy this host's embedded store (state_dir) into the empty, migrated
 * PostgreSQL store at to, in one transaction: the counts copied, or -1
 * with err (nothing was written).
 */
int
storeadm_copy(const char *state_dir, const char *host, const char *to,
    int timeout, struct storeadm_counts *c, char *err, size_t errsz)
{
	sqlite3		*db = NULL;
	PGconn		*conn = NULL;
	PGresult	*res;
	char		 why[512];
	int		 absent, rc = -1;

	memset(c, 0, sizeof(*c));
	if ((conn = storeadm_connect(to, timeout, err, errsz)) == NULL)
		return -1;
	if ((c->schema = pg_schema_version(conn, err, errsz)) == -1)
		goto out;
	if (c->schema != PG_SCHEMA_VERSION) {
		snprintf(err, errsz, "the store is at schema version %" PRId64
		    "; this hostgate needs %d: run hgctl store migrate on it "
		    "first", c->schema, PG_SCHEMA_VERSION);
		goto out;
	}
	/* Before anything is read: brokerd must not be running. */
	if ((db = storeadm_sqlite(state_dir, &absent, err, errsz)) == NULL &&
	    !absent)
		goto out;
	if ((res = storeadm_pg(conn, "BEGIN", 0, NULL, err, errsz)) == NULL)
		goto out;
	PQclear(res);
	/* Emptiness checked under the lock: a host starting meanwhile waits. */
	if ((res = storeadm_pg(conn, "LOCK TABLE users, sessions, tokens, "
	    "audit IN EXCLUSIVE MODE", 0, NULL, err, errsz)) == NULL)
		goto rollback;
	PQclear(res);
	if (storeadm_pg_counts(conn, c, err, errsz) == -1)
		goto rollback;
	if (c->users + c->sessions + c->tokens + c->audit > 0) {
		snprintf(err, errsz, "the store is not empty (%" PRId64
		    " users, %" PRId64 " sessions, %" PRId64 " tokens, %"
		    PRId64 " audit records): copy into a new one only",
		    c->users, c->sessions, c->tokens, c->audit);
		goto rollback;
	}
	if ((c->users = storeadm_copy_users(conn, state_dir, db, err,
	    errsz)) == -1)
		goto rollback;
	c->sessions = c->tokens = 0;
	if (db != NULL && ((c->sessions = storeadm_copy_rows(db, conn,
	    "SELECT id, token_hash, csrf_hash, user, created, last_seen, "
	    "expires, permission, direct_until, egress_allow FROM sessions "
	    "ORDER BY created, id", "INSERT INTO sessions (id, token_hash, "
	    "csrf_hash, \"user\", created, last_seen, expires, permission, "
	    "direct_until, egress_allow, host) VALUES ($1, $2, $3, $4, $5, "
	    "$6, $7, $8, $9, $10, $11)", 10, host, err, errsz)) == -1 ||
	    (c->tokens = storeadm_copy_rows(db, conn, "SELECT id, hash, user, "
	    "session_id, created FROM tokens ORDER BY created, id",
	    "INSERT INTO tokens (id, hash, \"user\", session_id, created) "
	    "VALUES ($1, $2, $3, $4, $5)", 5, NULL, err, errsz)) == -1))
		goto rollback;
	if ((c->audit = storeadm_copy_audit(conn, state_dir, host, err,
	    errsz)) == -1)
		goto rollback;
	if ((res = storeadm_pg(conn, "COMMIT", 0, NULL, err, errsz)) == NULL)
		goto out;
	PQclear(res);
	rc = 0;
	goto out;
rollback:
	if ((res = storeadm_pg(conn, "ROLLBACK", 0, NULL, why,
	    sizeof(why))) != NULL)
		PQclear(res);
out:
	if (db != NULL) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		sqlite3_close(db);
	}
	PQfinish(conn);
	return rc;
}
