/*
 * The PostgreSQL link of a fleet (HOSTGATE_STORE=postgresql://...): one
 * connection from brokerd, its schema and the notifications by which the
 * hosts sharing the store learn of each other's changes.
 *
 * Every query is bounded: it is sent and read without blocking, and past
 * HOSTGATE_STORE_TIMEOUT_SECONDS the link is declared lost. A lost link is
 * connected again in the background (libpq's asynchronous connect, driven
 * by the event loop), once a second; in between, pg_ready() says why the
 * store cannot be used, and every state change is refused with that reason.
 *
 * The schema's triggers NOTIFY channel "hostgate" with "TABLE KEY" on every
 * change another host must see; brokerd LISTENs on it and hands each
 * notification to the handler registered for its table, from the event
 * loop, never from inside a query. After a reconnect notifications may
 * have been missed, so the reconnect handlers reload everything.
 */
#include <sys/types.h>

#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd.h"

/*
 * The schema, one step per version: never edit a step, add one. Step i
 * takes a store from version i to i + 1; meta 'schema' holds the version.
 */
static const char *const pg_migrations[] = {
	/* 1: what the embedded store held then, and the fleet's */
	"CREATE TABLE meta ("
	"  key text PRIMARY KEY,"
	"  value bigint NOT NULL);"
	"CREATE TABLE users ("
	"  name text PRIMARY KEY,"
	"  admin boolean NOT NULL,"
	"  hash text NOT NULL,"
	"  created bigint NOT NULL,"
	"  uid bigint NOT NULL UNIQUE,"
	"  gid bigint NOT NULL,"
	"  unix_user text,"
	"  egress_allow text NOT NULL DEFAULT '[]');"
	"CREATE TABLE sessions ("
	"  id text PRIMARY KEY,"
	"  token_hash text NOT NULL UNIQUE,"
	"  csrf_hash text NOT NULL,"
	"  \"user\" text NOT NULL,"
	"  created bigint NOT NULL,"
	"  last_seen bigint NOT NULL,"
	"  expires bigint NOT NULL,"
	"  permission text NOT NULL DEFAULT '',"
	"  direct_until bigint NOT NULL DEFAULT 0,"
	"  egress_allow text NOT NULL DEFAULT '[]',"
	"  host text NOT NULL DEFAULT '');"
	"CREATE INDEX sessions_expires ON sessions (expires);"
	"CREATE TABLE tokens ("
	"  id text PRIMARY KEY,"
	"  hash text NOT NULL UNIQUE,"
	"  \"user\" text NOT NULL,"
	"  session_id text NOT NULL DEFAULT '',"
	"  created bigint NOT NULL);"
	"CREATE TABLE ratelimits ("
	"  bucket text NOT NULL,"
	"  key text NOT NULL,"
	"  tokens double precision NOT NULL,"
	"  at timestamptz NOT NULL,"
	"  PRIMARY KEY (bucket, key));"
	"CREATE TABLE audit ("
	"  seq bigint PRIMARY KEY,"
	"  time bigint NOT NULL,"
	"  host text NOT NULL,"
	"  action text NOT NULL,"
	"  \"user\" text,"
	"  session text,"
	"  allowed boolean NOT NULL,"
	"  request_id text,"
	"  hash text NOT NULL,"
	"  line text NOT NULL);"
	"CREATE INDEX audit_user ON audit (\"user\", seq);"
	"CREATE INDEX audit_action ON audit (action, seq);"
	"CREATE INDEX audit_session ON audit (session, seq);"
	"CREATE INDEX audit_time ON audit (time);"
	"CREATE TABLE hosts ("
	"  id text PRIMARY KEY,"
	"  started bigint NOT NULL,"
	"  seen bigint NOT NULL,"
	"  state text NOT NULL,"
	"  version text NOT NULL,"
	"  listen text NOT NULL DEFAULT '',"
	"  lost_at bigint NOT NULL DEFAULT 0,"
	"  lost_by text NOT NULL DEFAULT '');"
	"CREATE TABLE live ("
	"  id text PRIMARY KEY,"
	"  host text NOT NULL,"
	"  kind text NOT NULL,"
	"  \"user\" text NOT NULL,"
	"  session text NOT NULL DEFAULT '',"
	"  started bigint NOT NULL,"
	"  detail text NOT NULL DEFAULT '{}');"
	"CREATE INDEX live_host ON live (host);"
	/* "TABLE KEY" on channel hostgate; TG_ARGV[0] names the key column */
	"CREATE FUNCTION hostgate_notify() RETURNS trigger "
	"LANGUAGE plpgsql AS $$ "
	"DECLARE k text; "
	"BEGIN "
	"  IF TG_OP = 'DELETE' THEN k := to_jsonb(OLD) ->> TG_ARGV[0]; "
	"  ELSE k := to_jsonb(NEW) ->> TG_ARGV[0]; END IF; "
	"  PERFORM pg_notify('hostgate', TG_TABLE_NAME || ' ' || k); "
	"  RETURN NULL; "
	"END $$;"
	"CREATE TRIGGER users_notify AFTER INSERT OR UPDATE OR DELETE "
	"  ON users FOR EACH ROW EXECUTE FUNCTION hostgate_notify('name');"
	"CREATE TRIGGER sessions_notify AFTER INSERT OR DELETE "
	"  ON sessions FOR EACH ROW EXECUTE FUNCTION hostgate_notify('id');"
	/* not last_seen: its batches would wake every host for nothing */
	"CREATE TRIGGER sessions_changed AFTER UPDATE OF permission, "
	"  direct_until, egress_allow, expires ON sessions FOR EACH ROW "
	"  WHEN (OLD.permission IS DISTINCT FROM NEW.permission OR "
	"    OLD.direct_until IS DISTINCT FROM NEW.direct_until OR "
	"    OLD.egress_allow IS DISTINCT FROM NEW.egress_allow OR "
	"    OLD.expires IS DISTINCT FROM NEW.expires) "
	"  EXECUTE FUNCTION hostgate_notify('id');"
	"CREATE TRIGGER tokens_notify AFTER INSERT OR DELETE "
	"  ON tokens FOR EACH ROW EXECUTE FUNCTION hostgate_notify('id');"
	"CREATE TRIGGER hosts_notify AFTER INSERT OR UPDATE OF state "
	"  ON hosts FOR EACH ROW EXECUTE FUNCTION hostgate_notify('id');",
	/* 2: each user's home host (NULL: not placed yet, claimed at use) */
	"ALTER TABLE users ADD COLUMN home text;"
	"CREATE INDEX users_home ON users (home);",
};
#define PG_SCHEMA_COUNT \
	((int)(sizeof(pg_migrations) / sizeof(pg_migrations[0])))
_Static_assert(PG_SCHEMA_COUNT == PG_SCHEMA_VERSION, "pg_migrations");

#define PG_RETRY_MS	1000		/* between reconnect attempts */
#define PG_HANDLERS_MAX	16

struct pg_handler {
	const char	*table;
	store_notify_fn	 fn;
};

/* A notification read during a query, handed out from the event loop. */
struct pg_note {
	char			*payload;
	int			 own;
	TAILQ_ENTRY(pg_note)	 entry;
};
TAILQ_HEAD(pg_note_list, pg_note);

static struct event_base	*pg_base;
static char			*pg_conninfo;	/* NULL: the embedded store */
static int			 pg_timeout_ms;
static char			 pg_hostid[33];
static PGconn			*pg_conn;	/* NULL while the link is down */
static PGconn			*pg_pending;	/* a reconnect under way */
static struct event		*pg_ev_read;	/* pg_conn's socket */
static struct event		*pg_ev_connect;	/* pg_pending's socket */
static struct event		*pg_ev_retry;
static struct event		*pg_ev_notes;
static struct pg_note_list	 pg_notes = TAILQ_HEAD_INITIALIZER(pg_notes);
static char			 pg_why[400];	/* why the link is down */
static char			 pg_err[512];	/* the last failure */
static int			 pg_depth;	/* nested pg_begin calls */
static int			 pg_failed;	/* a step of the open one failed */
static int64_t			 pg_down_at;	/* mono ms the link went down */
static struct pg_handler	 pg_handlers[PG_HANDLERS_MAX];
static size_t			 pg_nhandlers;
static void			(*pg_reconnect_fns[PG_HANDLERS_MAX])(void);
static size_t			 pg_nreconnect;
static void			(*pg_lost_fns[PG_HANDLERS_MAX])(const char *);
static size_t			 pg_nlost;

static void	 pg_lost(const char *why);
static void	 pg_retry_later(void);

/* Whether HOSTGATE_STORE names a PostgreSQL database. */
int
pg_enabled(void)
{
	return pg_conninfo != NULL;
}

/* This host's id in the fleet (HOSTGATE_HOST_ID). */
const char *
pg_host(void)
{
	return pg_hostid;
}

/* The text of the last failure (a query's error, the link's loss). */
const char *
pg_error(void)
{
	return pg_err;
}

/* libpq's message without its trailing newline, on one line. */
static void
pg_message(char *out, size_t outsz, const char *msg)
{
	size_t	i, n = 0;

	for (i = 0; msg != NULL && msg[i] != '\0' && n + 1 < outsz; i++) {
		if (msg[i] == '\n' || msg[i] == '\t' || msg[i] == ' ') {
			if (n > 0 && out[n - 1] != ' ')
				out[n++] = ' ';
		} else if ((unsigned char)msg[i] >= 0x20)
			out[n++] = msg[i];
	}
	while (n > 0 && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
}

/*
 * Start a connection to conninfo: libpq's own string or URI, plus our
 * application name and keepalives so that a dead peer is noticed.
 */
static PGconn *
pg_start(const char *conninfo, int timeout_ms)
{
	char		 utimeout[32];
	const char	*keys[] = {
		"dbname", "application_name", "keepalives",
		"keepalives_idle", "keepalives_interval", "keepalives_count",
		"tcp_user_timeout", NULL
	};
	const char	*vals[] = {
		conninfo, "hostgate-brokerd", "1", "5", "2", "3", utimeout,
		NULL
	};

	snprintf(utimeout, sizeof(utimeout), "%d", timeout_ms);
	/* expand_dbname: conninfo is a whole connection string or URI. */
	return PQconnectStartParams(keys, vals, 1);
}

/* Wait until conn's socket is ready for ev (POLLIN/POLLOUT) or deadline. */
static int
pg_wait(PGconn *conn, short ev, int64_t deadline)
{
	struct pollfd	pfd;
	int64_t		left;
	int		rc;

	for (;;) {
		if ((left = deadline - now_mono_ms()) <= 0)
			return -1;
		pfd.fd = PQsocket(conn);
		pfd.events = ev;
		pfd.revents = 0;
		if (pfd.fd < 0)
			return -1;
		rc = poll(&pfd, 1, (int)left);
		if (rc > 0)
			return 0;
		if (rc == 0)
			return -1;
		if (errno != EINTR)
			return -1;
	}
}

/*
 * Run one statement on conn and wait for its result, within timeout_ms.
 * The result, or NULL with err; *broken is set when the connection is
 * unusable afterwards (lost, timed out). Notifications that arrive on
 * the way are left in libpq's queue.
 */
static PGresult *
pg_run(PGconn *conn, const char *sql, int n, const char *const *params,
    int timeout_ms, int *broken, char *err, size_t errsz)
{
	PGresult	*res = NULL, *r;
	ExecStatusType	 st;
	int64_t		 deadline = now_mono_ms() + timeout_ms;
	int		 rc;

	*broken = 0;
	/*
	 * Without parameters the simple protocol, which also takes several
	 * statements (a migration step); then an error of any is the answer.
	 */
	if ((n == 0 ? PQsendQuery(conn, sql) :
	    PQsendQueryParams(conn, sql, n, NULL, params, NULL, NULL, 0)) != 1)
		goto lost;
	while ((rc = PQflush(conn)) == 1)
		if (pg_wait(conn, POLLOUT | POLLIN, deadline) == -1 ||
		    PQconsumeInput(conn) != 1)
			goto timeout_or_lost;
	if (rc == -1)
		goto lost;
	for (;;) {
		while (PQisBusy(conn)) {
			if (pg_wait(conn, POLLIN, deadline) == -1 ||
			    PQconsumeInput(conn) != 1)
				goto timeout_or_lost;
		}
		if ((r = PQgetResult(conn)) == NULL)
			break;
		st = PQresultStatus(r);
		if (res == NULL || (st != PGRES_COMMAND_OK &&
		    st != PGRES_TUPLES_OK && (PQresultStatus(res) ==
		    PGRES_COMMAND_OK || PQresultStatus(res) ==
		    PGRES_TUPLES_OK))) {
			PQclear(res);	/* the first result, or an error */
			res = r;
		} else
			PQclear(r);
	}
	if (res == NULL)
		goto lost;
	st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		pg_message(err, errsz, PQresultErrorMessage(res));
		PQclear(res);
		if (PQstatus(conn) == CONNECTION_BAD)
			*broken = 1;
		return NULL;
	}
	return res;
timeout_or_lost:
	if (now_mono_ms() >= deadline) {
		PQclear(res);
		*broken = 1;
		snprintf(err, errsz, "no answer within %d s", timeout_ms / 1000);
		return NULL;
	}
lost:
	PQclear(res);
	*broken = 1;
	pg_message(err, errsz, PQerrorMessage(conn));
	if (err[0] == '\0')
		snprintf(err, errsz, "the connection was lost");
	return NULL;
}

/* Move what libpq queued of notifications into pg_notes, for the loop. */
static void
pg_collect(void)
{
	PGnotify	*n;
	struct pg_note	*note;
	int		 me;

	if (pg_conn == NULL)
		return;
	me = PQbackendPID(pg_conn);
	while ((n = PQnotifies(pg_conn)) != NULL) {
		if ((note = calloc(1, sizeof(*note))) == NULL ||
		    (note->payload = strdup(n->extra)) == NULL)
			fatal("%s", __func__);
		note->own = n->be_pid == me;
		TAILQ_INSERT_TAIL(&pg_notes, note, entry);
		PQfreemem(n);
	}
	if (!TAILQ_EMPTY(&pg_notes) && pg_ev_notes != NULL)
		event_active(pg_ev_notes, EV_TIMEOUT, 0);
}

/* Hand each collected notification to its table's handler. */
static void
pg_dispatch(evutil_socket_t fd, short ev, void *arg)
{
	struct pg_note	*note;
	const char	*key;
	size_t		 i, len;

	while ((note = TAILQ_FIRST(&pg_notes)) != NULL) {
		TAILQ_REMOVE(&pg_notes, note, entry);
		if ((key = strchr(note->payload, ' ')) != NULL) {
			len = key - note->payload;
			key++;
			for (i = 0; i < pg_nhandlers; i++)
				if (strlen(pg_handlers[i].table) == len &&
				    strncmp(pg_handlers[i].table,
				    note->payload, len) == 0)
					pg_handlers[i].fn(key, note->own);
		}
		free(note->payload);
		free(note);
	}
}

/*
 * One statement with text parameters (NULL: SQL NULL), bounded by the
 * store's timeout: its result (PQclear it), or NULL with the reason logged
 * and in pg_error(). A lost link is declared lost here.
 */
PGresult *
pg_query(const char *sql, int nparams, const char *const *params)
{
	PGresult	*res;
	char		 err[sizeof(pg_err)];
	int		 broken;

	if (pg_conn == NULL) {
		snprintf(pg_err, sizeof(pg_err), "the store is unreachable: %s",
		    pg_why);
		if (pg_depth > 0)
			pg_failed = 1;
		return NULL;
	}
	res = pg_run(pg_conn, sql, nparams, params, pg_timeout_ms, &broken,
	    err, sizeof(err));
	pg_collect();
	if (res == NULL) {
		if (pg_depth > 0)
			pg_failed = 1;
		snprintf(pg_err, sizeof(pg_err), "%s", err);
		log_warnx("store: %.60s...: %s", sql, err);
		if (broken)
			pg_lost(err);
	}
	return res;
}

/* The same for a statement whose rows do not matter: 0, or -1 logged. */
int
pg_exec(const char *sql, int nparams, const char *const *params)
{
	PGresult	*res;

	if ((res = pg_query(sql, nparams, params)) == NULL)
		return -1;
	PQclear(res);
	return 0;
}

/* Begin a transaction; nests, only the outermost pair counts. */
int
pg_begin(void)
{
	if (pg_depth++ > 0)
		return pg_failed ? -1 : 0;
	pg_failed = 0;
	if (pg_exec("BEGIN", 0, NULL) == -1) {
		pg_depth = 0;
		return -1;
	}
	return 0;
}

/* End a transaction: 0 once committed; -1 (rolled back) if a step failed. */
int
pg_commit(void)
{
	if (pg_depth == 0)
		return -1;
	if (--pg_depth > 0)
		return pg_failed ? -1 : 0;
	if (pg_failed) {
		if (pg_conn != NULL)
			pg_exec("ROLLBACK", 0, NULL);
		return -1;
	}
	return pg_exec("COMMIT", 0, NULL);
}

/* Abandon the transaction (the outermost one rolls back). */
void
pg_rollback(void)
{
	if (pg_depth == 0)
		return;
	pg_failed = 1;
	if (--pg_depth == 0 && pg_conn != NULL)
		pg_exec("ROLLBACK", 0, NULL);
}

/* 0 while the link is up; -1 with why ("the store is unreachable: ..."). */
int
pg_ready(char *why, size_t whysz)
{
	if (pg_conninfo == NULL || pg_conn != NULL)
		return 0;
	snprintf(why, whysz, "the store is unreachable: %s", pg_why);
	return -1;
}

/*
 * Whether the store may be reached over TCP: a host of the connection
 * that is not a Unix socket's directory (libpq's "host" starting with /),
 * looking at the conninfo rather than the connection, since a reconnect
 * may reach another of its hosts.
 */
int
pg_over_tcp(void)
{
	PQconninfoOption	*opts, *o;
	char			*msg = NULL;
	const char		*h;
	int			 tcp = 1;

	if (pg_conninfo == NULL)
		return 0;
	if ((opts = PQconninfoParse(pg_conninfo, &msg)) == NULL) {
		PQfreemem(msg);
		return 1;
	}
	for (o = opts; o->keyword != NULL; o++) {
		if (strcmp(o->keyword, "hostaddr") == 0 && o->val != NULL &&
		    o->val[0] != '\0')
			break;
		if (strcmp(o->keyword, "host") != 0)
			continue;
		/* every host of a comma-separated list a socket directory */
		if ((h = o->val) != NULL && h[0] == '/' &&
		    strstr(h, ",") == NULL)
			tcp = 0;
	}
	PQconninfoFree(opts);
	return tcp;
}

/* Register the handler of a table's notifications. */
void
pg_on_notify(const char *table, store_notify_fn fn)
{
	if (pg_nhandlers == PG_HANDLERS_MAX)
		fatalx("%s: too many handlers", __func__);
	pg_handlers[pg_nhandlers].table = table;
	pg_handlers[pg_nhandlers++].fn = fn;
}

/* Register a function called once a lost link is back. */
void
pg_on_reconnect(void (*fn)(void))
{
	if (pg_nreconnect == PG_HANDLERS_MAX)
		fatalx("%s: too many handlers", __func__);
	pg_reconnect_fns[pg_nreconnect++] = fn;
}

/* Register a function called when the link goes down. */
void
pg_on_lost(void (*fn)(const char *))
{
	if (pg_nlost == PG_HANDLERS_MAX)
		fatalx("%s: too many handlers", __func__);
	pg_lost_fns[pg_nlost++] = fn;
}

/* A column as a number (0 for NULL or text that is not one). */
int64_t
pg_i64(PGresult *res, int row, int col)
{
	if (row >= PQntuples(res) || col >= PQnfields(res) ||
	    PQgetisnull(res, row, col))
		return 0;
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* A column as text ("" for NULL). */
const char *
pg_str(PGresult *res, int row, int col)
{
	if (row >= PQntuples(res) || col >= PQnfields(res) ||
	    PQgetisnull(res, row, col))
		return "";
	return PQgetvalue(res, row, col);
}

/* The same on a connection of its own (hgctl, set-up), no link state. */
static PGresult *
pg_once(PGconn *conn, const char *sql, int n, const char *const *params,
    int timeout_ms, char *err, size_t errsz)
{
	int	broken;

	return pg_run(conn, sql, n, params, timeout_ms, &broken, err, errsz);
}

/*
 * Connect to conninfo within timeout seconds (hgctl, and brokerd's first
 * connect): the connection, non-blocking, or NULL with err.
 */
PGconn *
pg_connect_once(const char *conninfo, int timeout, char *err, size_t errsz)
{
	PostgresPollingStatusType	 st = PGRES_POLLING_WRITING;
	PGconn				*conn;
	int64_t				 deadline;
	char				 msg[400];

	deadline = now_mono_ms() + (int64_t)timeout * 1000;
	if ((conn = pg_start(conninfo, timeout * 1000)) == NULL)
		fatal("%s", __func__);
	if (PQstatus(conn) == CONNECTION_BAD)
		goto fail;
	for (;;) {
		if (st == PGRES_POLLING_OK)
			break;
		if (st == PGRES_POLLING_FAILED)
			goto fail;
		if (pg_wait(conn, st == PGRES_POLLING_READING ? POLLIN :
		    POLLOUT, deadline) == -1) {
			snprintf(err, errsz, "cannot connect within %d s",
			    timeout);
			PQfinish(conn);
			return NULL;
		}
		st = PQconnectPoll(conn);
	}
	if (PQsetnonblocking(conn, 1) == -1)
		goto fail;
	return conn;
fail:
	pg_message(msg, sizeof(msg), PQerrorMessage(conn));
	snprintf(err, errsz, "%s", msg[0] != '\0' ? msg : "cannot connect");
	PQfinish(conn);
	return NULL;
}

/* Where conn leads, for messages: "host:port/db" or "socket dir/db". */
static void
pg_where(PGconn *conn, char *out, size_t outsz)
{
	const char	*host = PQhost(conn), *port = PQport(conn);

	snprintf(out, outsz, "%s%s%s/%s", host != NULL ? host : "?",
	    port != NULL && port[0] != '\0' ? ":" : "",
	    port != NULL ? port : "", PQdb(conn) != NULL ? PQdb(conn) : "?");
}

/* The schema version of the store on conn (0: none yet), or -1 with err. */
int
pg_schema_version(PGconn *conn, char *err, size_t errsz)
{
	PGresult	*res;
	int		 v;

	/* Two statements: a missing table fails the parse of the second. */
	if ((res = pg_once(conn, "SELECT to_regclass('meta') IS NOT NULL", 0,
	    NULL, 30000, err, errsz)) == NULL)
		return -1;
	v = strcmp(pg_str(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!v)
		return 0;
	if ((res = pg_once(conn, "SELECT coalesce(max(value), 0) FROM meta "
	    "WHERE key = 'schema'", 0, NULL, 30000, err, errsz)) == NULL)
		return -1;
	v = (int)pg_i64(res, 0, 0);
	PQclear(res);
	return v;
}

/*
 * Bring the store on conn to PG_SCHEMA_VERSION in one transaction, under
 * an advisory lock (hosts migrating at once take turns): the version
 * before and after, or -1 with err (nothing changed).
 */
int
pg_migrate(PGconn *conn, int *from, int *to, char *err, size_t errsz)
{
	PGresult	*res;
	char		 v[16];
	const char	*p[1] = { v };
	int		 i, version;

	if ((res = pg_once(conn, "BEGIN", 0, NULL, 30000, err, errsz)) == NULL)
		return -1;
	PQclear(res);
	if ((res = pg_once(conn, "SELECT pg_advisory_xact_lock("
	    "hashtext('hostgate migrate'))", 0, NULL, 60000, err,
	    errsz)) == NULL)
		goto fail;
	PQclear(res);
	if ((version = pg_schema_version(conn, err, errsz)) == -1)
		goto fail;
	if (version > PG_SCHEMA_VERSION) {
		snprintf(err, errsz, "the store is at schema version %d, but "
		    "this hostgate knows versions up to %d (a newer "
		    "hostgate's store?)", version, PG_SCHEMA_VERSION);
		goto fail;
	}
	*from = version;
	for (i = version; i < PG_SCHEMA_VERSION; i++) {
		snprintf(v, sizeof(v), "%d", i + 1);
		if ((res = pg_once(conn, pg_migrations[i], 0, NULL, 60000, err,
		    errsz)) == NULL)
			goto fail;
		PQclear(res);
		if ((res = pg_once(conn, "INSERT INTO meta (key, value) "
		    "VALUES ('schema', $1) ON CONFLICT (key) DO UPDATE SET "
		    "value = EXCLUDED.value", 1, p, 30000, err, errsz)) == NULL)
			goto fail;
		PQclear(res);
	}
	if ((res = pg_once(conn, "COMMIT", 0, NULL, 60000, err, errsz)) ==
	    NULL)
		return -1;
	PQclear(res);
	*to = PG_SCHEMA_VERSION;
	return 0;
fail:
	if ((res = pg_once(conn, "ROLLBACK", 0, NULL, 30000, v, sizeof(v))) !=
	    NULL)
		PQclear(res);
	return -1;
}

/*
 * Make conn brokerd's link: the server's timeouts, the schema's version
 * checked, LISTEN. 0, or -1 with err (conn is then the caller's to end).
 */
static int
pg_adopt(PGconn *conn, char *err, size_t errsz)
{
	PGresult	*res;
	char		 sql[160], where[300], msg[400];
	int		 version;

	snprintf(sql, sizeof(sql), "SET statement_timeout = %d; "
	    "SET lock_timeout = %d; SET idle_in_transaction_session_timeout "
	    "= %d", pg_timeout_ms, pg_timeout_ms, 4 * pg_timeout_ms);
	/* Several statements: the simple protocol, not PQsendQueryParams. */
	if (PQsendQuery(conn, sql) != 1)
		goto lost;
	while (PQflush(conn) == 1)
		if (pg_wait(conn, POLLOUT, now_mono_ms() + pg_timeout_ms) == -1)
			goto lost;
	for (;;) {
		while (PQisBusy(conn))
			if (pg_wait(conn, POLLIN, now_mono_ms() +
			    pg_timeout_ms) == -1 || PQconsumeInput(conn) != 1)
				goto lost;
		if ((res = PQgetResult(conn)) == NULL)
			break;
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			pg_message(msg, sizeof(msg),
			    PQresultErrorMessage(res));
			snprintf(err, errsz, "%s", msg);
			PQclear(res);
			return -1;
		}
		PQclear(res);
	}
	if ((version = pg_schema_version(conn, msg, sizeof(msg))) == -1) {
		snprintf(err, errsz, "%s", msg);
		return -1;
	}
	if (version != PG_SCHEMA_VERSION) {
		pg_where(conn, where, sizeof(where));
		if (version < PG_SCHEMA_VERSION)
			snprintf(err, errsz, "the store at %s is at schema "
			    "version %d; this hostgate needs %d: run hgctl "
			    "store migrate", where, version, PG_SCHEMA_VERSION);
		else
			snprintf(err, errsz, "the store at %s is at schema "
			    "version %d, but this hostgate knows versions up "
			    "to %d (a newer hostgate's store?)", where, version,
			    PG_SCHEMA_VERSION);
		return -1;
	}
	if ((res = pg_once(conn, "LISTEN hostgate", 0, NULL, pg_timeout_ms,
	    msg, sizeof(msg))) == NULL) {
		snprintf(err, errsz, "%s", msg);
		return -1;
	}
	PQclear(res);
	return 0;
lost:
	pg_message(msg, sizeof(msg), PQerrorMessage(conn));
	snprintf(err, errsz, "%s", msg[0] != '\0' ? msg :
	    "no answer from the store");
	return -1;
}

/* The link's socket is readable: notifications, or the end of the link. */
static void
pg_readable(evutil_socket_t fd, short ev, void *arg)
{
	char	msg[400];

	if (pg_conn == NULL)
		return;
	if (PQconsumeInput(pg_conn) != 1 ||
	    PQstatus(pg_conn) == CONNECTION_BAD) {
		pg_message(msg, sizeof(msg), PQerrorMessage(pg_conn));
		pg_lost(msg[0] != '\0' ? msg : "the connection was closed");
		return;
	}
	pg_collect();
}

/* Make conn the link and watch its socket. */
static void
pg_up(PGconn *conn)
{
	pg_conn = conn;
	pg_why[0] = '\0';
	if (pg_base == NULL)
		return;		/* pg_events arms it */
	pg_ev_read = event_new(pg_base, PQsocket(conn), EV_READ | EV_PERSIST,
	    pg_readable, NULL);
	if (pg_ev_read == NULL || event_add(pg_ev_read, NULL) == -1)
		fatalx("%s: event_add", __func__);
}

/* The link is gone: end it, tell who asked, and connect again later. */
static void
pg_lost(const char *why)
{
	size_t	i;

	if (pg_conn == NULL)
		return;
	snprintf(pg_why, sizeof(pg_why), "%s", why);
	log_warnx("store: link lost: %s", why);
	if (pg_ev_read != NULL)
		event_free(pg_ev_read);
	pg_ev_read = NULL;
	pg_collect();		/* what came before the end still counts */
	PQfinish(pg_conn);
	pg_conn = NULL;
	pg_down_at = now_mono_ms();
	if (pg_depth > 0)
		pg_failed = 1;
	for (i = 0; i < pg_nlost; i++)
		pg_lost_fns[i](pg_why);
	pg_retry_later();
}

/* A reconnect attempt failed: say why once in a while, try again later. */
static void
pg_pending_failed(const char *why)
{
	if (strcmp(pg_why, why) != 0)
		log_warnx("store: cannot connect: %s", why);
	snprintf(pg_why, sizeof(pg_why), "%s", why);
	if (pg_ev_connect != NULL)
		event_free(pg_ev_connect);
	pg_ev_connect = NULL;
	PQfinish(pg_pending);
	pg_pending = NULL;
	pg_retry_later();
}

static void	 pg_connect_step(evutil_socket_t, short, void *);

/* Wait for pg_pending's socket as libpq asked, within what is left. */
static void
pg_connect_wait(PostgresPollingStatusType st)
{
	struct timeval	tv;

	if (pg_ev_connect != NULL)
		event_free(pg_ev_connect);
	tv.tv_sec = pg_timeout_ms / 1000;
	tv.tv_usec = (pg_timeout_ms % 1000) * 1000;
	pg_ev_connect = event_new(pg_base, PQsocket(pg_pending),
	    st == PGRES_POLLING_READING ? EV_READ : EV_WRITE,
	    pg_connect_step, NULL);
	if (pg_ev_connect == NULL || event_add(pg_ev_connect, &tv) == -1)
		fatalx("%s: event_add", __func__);
}

/* One step of the background connect. */
static void
pg_connect_step(evutil_socket_t fd, short ev, void *arg)
{
	PostgresPollingStatusType	 st;
	PGconn				*conn;
	char				 msg[400];
	int64_t				 down;
	size_t				 i;

	if (ev & EV_TIMEOUT) {
		snprintf(msg, sizeof(msg), "cannot connect within %d s",
		    pg_timeout_ms / 1000);
		pg_pending_failed(msg);
		return;
	}
	st = PQconnectPoll(pg_pending);
	if (st == PGRES_POLLING_READING || st == PGRES_POLLING_WRITING) {
		pg_connect_wait(st);
		return;
	}
	if (st != PGRES_POLLING_OK || PQsetnonblocking(pg_pending, 1) == -1) {
		pg_message(msg, sizeof(msg), PQerrorMessage(pg_pending));
		pg_pending_failed(msg[0] != '\0' ? msg : "cannot connect");
		return;
	}
	if (pg_adopt(pg_pending, msg, sizeof(msg)) == -1) {
		pg_pending_failed(msg);
		return;
	}
	event_free(pg_ev_connect);
	pg_ev_connect = NULL;
	conn = pg_pending;
	pg_pending = NULL;
	down = now_mono_ms() - pg_down_at;
	pg_up(conn);
	log_info("store: link back after %lld ms", (long long)down);
	for (i = 0; i < pg_nreconnect; i++)
		pg_reconnect_fns[i]();
}

/* Start a background connect. */
static void
pg_retry(evutil_socket_t fd, short ev, void *arg)
{
	PostgresPollingStatusType	st = PGRES_POLLING_WRITING;
	char				msg[400];

	if (pg_conn != NULL || pg_pending != NULL)
		return;
	if ((pg_pending = pg_start(pg_conninfo, pg_timeout_ms)) == NULL)
		fatal("%s", __func__);
	if (PQstatus(pg_pending) == CONNECTION_BAD) {
		pg_message(msg, sizeof(msg), PQerrorMessage(pg_pending));
		pg_pending_failed(msg[0] != '\0' ? msg : "cannot connect");
		return;
	}
	pg_connect_wait(st);
}

/* Try to connect again in PG_RETRY_MS. */
static void
pg_retry_later(void)
{
	struct timeval	tv = { PG_RETRY_MS / 1000, (PG_RETRY_MS % 1000) * 1000 };

	if (pg_ev_retry != NULL)
		evtimer_add(pg_ev_retry, &tv);
}

/*
 * Connect to the configured store (bounded), check its schema and LISTEN:
 * 0, or -1 with err (brokerd refuses to start). Nothing to do, and 0,
 * with the embedded store. After the privilege drop (the service user
 * reads a passfile and certificates), before the seccomp filter.
 */
int
pg_init(struct config *conf, char *err, size_t errsz)
{
	struct passwd	*pw;
	PGconn		*conn;
	char		 msg[400];

	snprintf(pg_hostid, sizeof(pg_hostid), "%s", conf->host_id);
	if (conf->store == NULL)
		return 0;
	/*
	 * libpq looks for ~/.pgpass and ~/.postgresql/ (client certificate,
	 * root CA) under HOME: after the privilege drop, the service user's
	 * home, not the one of who started brokerd (root's is unreadable).
	 */
	if ((pw = getpwuid(geteuid())) != NULL && pw->pw_dir != NULL &&
	    setenv("HOME", pw->pw_dir, 1) == -1)
		fatal("setenv HOME");
	pg_timeout_ms = conf->store_timeout * 1000;
	if ((pg_conninfo = strdup(conf->store)) == NULL)
		fatal("%s", __func__);
	if ((conn = pg_connect_once(pg_conninfo, conf->store_timeout, msg,
	    sizeof(msg))) == NULL) {
		snprintf(err, errsz, "HOSTGATE_STORE: %s", msg);
		return -1;
	}
	if (pg_adopt(conn, msg, sizeof(msg)) == -1) {
		PQfinish(conn);
		snprintf(err, errsz, "HOSTGATE_STORE: %s", msg);
		return -1;
	}
	pg_up(conn);
	pg_where(conn, msg, sizeof(msg));
	log_info("store: PostgreSQL at %s, schema version %d, host %s", msg,
	    PG_SCHEMA_VERSION, pg_hostid);
	return 0;
}

/*
 * Watch the link from the event loop: notifications, its loss, the
 * reconnects. Before that, nothing is dispatched (pg_init's callers load
 * everything anyway).
 */
void
pg_events(struct event_base *base)
{
	if (pg_conninfo == NULL)
		return;
	pg_base = base;
	if ((pg_ev_retry = evtimer_new(base, pg_retry, NULL)) == NULL ||
	    (pg_ev_notes = event_new(base, -1, 0, pg_dispatch, NULL)) ==
	    NULL)
		fatalx("%s: event_new", __func__);
	if (pg_conn != NULL) {
		pg_ev_read = event_new(pg_base, PQsocket(pg_conn),
		    EV_READ | EV_PERSIST, pg_readable, NULL);
		if (pg_ev_read == NULL || event_add(pg_ev_read, NULL) == -1)
			fatalx("%s: event_add", __func__);
	} else
		pg_retry_later();
	if (!TAILQ_EMPTY(&pg_notes))
		event_active(pg_ev_notes, EV_TIMEOUT, 0);
}

/* End the link (at exit). */
void
pg_close(void)
{
	struct pg_note	*note;

	if (pg_ev_read != NULL)
		event_free(pg_ev_read);
	if (pg_ev_connect != NULL)
		event_free(pg_ev_connect);
	if (pg_ev_retry != NULL)
		event_free(pg_ev_retry);
	if (pg_ev_notes != NULL)
		event_free(pg_ev_notes);
	pg_ev_read = pg_ev_connect = pg_ev_retry = pg_ev_notes = NULL;
	PQfinish(pg_conn);
	PQfinish(pg_pending);
	pg_conn = pg_pending = NULL;
	while ((note = TAILQ_FIRST(&pg_notes)) != NULL) {
		TAILQ_REMOVE(&pg_notes, note, entry);
		free(note->payload);
		free(note);
	}
	free(pg_conninfo);
	pg_conninfo = NULL;
}
