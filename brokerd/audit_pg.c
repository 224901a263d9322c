/*
 * The audit chain in a PostgreSQL store: the lines audit.c makes, one row
 * each of the store's audit table (seq, time, host, action, user, session,
 * allowed, request_id, hash, line), shared by every host of a fleet. A
 * record is appended in one transaction under the advisory lock
 * pg_advisory_xact_lock(hashtext('hostgate audit')): the last row's seq
 * and hash are read under it, so that two hosts never write the same seq
 * or chain two records to the same predecessor; the database orders the
 * records. The line is the record: the columns beside it are copies for
 * the queries, and the hash column (the line's SHA-256, the next record's
 * prev) is what the next append chains to. All hosts share the HMAC key
 * (STATE_DIR/audit.key, copied by the operator); the store's meta row
 * audit_key_id names it.
 */
#include <sys/types.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "brokerd.h"

#define AUDIT_PG_WHERE		"the store's audit table"
#define AUDIT_PG_PAGE		500	/* rows a step of a walk reads */
#define AUDIT_PG_STR(x)		AUDIT_PG_STR2(x)
#define AUDIT_PG_STR2(x)	#x
#define AUDIT_PG_LOCK \
	"SELECT pg_advisory_xact_lock(hashtext('hostgate audit'))"
#define AUDIT_PG_ZERO_HASH \
	"0000000000000000000000000000000000000000000000000000000000000000"

static int64_t	 audit_pg_down_at;	/* mono ms the link was lost, 0: up */
static char	 audit_pg_down_why[256];
static int	 audit_pg_failed;	/* the last append failed, link up */
static char	 audit_pg_fail_why[256];
static int	 audit_pg_hooked;

/* A key id (16 hex digits) as the bigint meta holds, and back. */
static int64_t
audit_pg_id_value(const char *hex)
{
	return (int64_t)strtoull(hex, NULL, 16);
}

/* The 16 hex digits of a meta audit_key_id value. */
static void
audit_pg_id_hex(int64_t v, char out[17])
{
	snprintf(out, 17, "%016" PRIx64, (uint64_t)v);
}

/* Whether the store holds a chain or names a key: the key is not made. */
static int
audit_pg_exists(int *have, char *err, size_t errsz)
{
	PGresult	*res;

	*have = 0;
	res = pg_query("SELECT EXISTS (SELECT 1 FROM audit), EXISTS "
	    "(SELECT 1 FROM meta WHERE key = 'audit_key_id')", 0, NULL);
	if (res == NULL) {
		snprintf(err, errsz, "audit: cannot read %s: %s",
		    AUDIT_PG_WHERE, pg_error());
		return -1;
	}
	*have = strcmp(pg_str(res, 0, 0), "t") == 0 ||
	    strcmp(pg_str(res, 0, 1), "t") == 0;
	PQclear(res);
	return 0;
}

/* The link is down: remember since when and why, for store_back. */
static void
audit_pg_lost(const char *why)
{
	if (audit_pg_down_at != 0)
		return;
	audit_pg_down_at = now_mono_ms();
	snprintf(audit_pg_down_why, sizeof audit_pg_down_why, "%s",
	    why != NULL ? why : "the store is unreachable");
	log_warnx("audit: %s; no record can be written, so no state change "
	    "is made until it is back", audit_pg_down_why);
}

/* The link is back: the store_back record, {down_ms, reason}. */
static void
audit_pg_back(void)
{
	struct json_object	*d;
	int64_t			 down_ms;

	audit_pg_failed = 0;
	if (audit_pg_down_at == 0)
		return;
	down_ms = now_mono_ms() - audit_pg_down_at;
	d = json_object_new_object();
	json_object_object_add(d, "down_ms", json_object_new_int64(down_ms));
	json_object_object_add(d, "reason",
	    json_object_new_string(audit_pg_down_why));
	audit_pg_down_at = 0;
	if (audit_append("store_back", NULL, NULL, 1, NULL, d, 0) < 0)
		log_warnx("audit: the store is back after %lld ms but its "
		    "store_back record could not be written",
		    (long long)down_ms);
	else
		log_info("audit: the store is back after %lld ms",
		    (long long)down_ms);
}

/*
 * With the key loaded: the store's key id must be this key's (the first
 * brokerd on an empty store sets it), and the last row must be a whole
 * record under it. The tail's seq and hash.
 */
static int
audit_pg_open(int64_t *seq, char hash[65], char *err, size_t errsz)
{
	PGresult	*res;
	const char	*params[1];
	char		 mine[17], theirs[17], val[24], msg[256], h[65];
	int64_t		 s;
	int		 named, bad;

	*seq = 0;
	memcpy(hash, AUDIT_PG_ZERO_HASH, 65);
	audit_key_id(mine);
	if ((res = pg_query("SELECT value FROM meta WHERE key = "
	    "'audit_key_id'", 0, NULL)) == NULL)
		goto sqlfail;
	named = PQntuples(res) > 0;
	if (named)
		audit_pg_id_hex(pg_i64(res, 0, 0), theirs);
	PQclear(res);
	if (named && strcmp(mine, theirs) != 0) {
		snprintf(err, errsz, "audit: this host's audit key %s has id "
		    "%s but the fleet's audit chain in the store is kept under "
		    "the key with id %s: copy audit.key from a host of the "
		    "fleet to %s (mode 0600, owned by brokerd's user), then "
		    "start brokerd again", audit_key_path(), mine, theirs,
		    audit_key_path());
		return -1;
	}

	/* The tail, which the next append chains to (a host's check). */
	if ((res = pg_query("SELECT seq, hash, line FROM audit ORDER BY seq "
	    "DESC LIMIT 1", 0, NULL)) == NULL)
		goto sqlfail;
	if (PQntuples(res) > 0) {
		bad = audit_line_check(pg_str(res, 0, 2), strlen(pg_str(res,
		    0, 2)), &s, h, msg, sizeof msg) == -1;
		if (!bad && (s != pg_i64(res, 0, 0) ||
		    strcmp(h, pg_str(res, 0, 1)) != 0)) {
			snprintf(msg, sizeof msg, "the seq or hash column "
			    "does not match the line");
			bad = 1;
		}
		if (bad) {
			snprintf(err, errsz, "audit: the last row of %s (seq "
			    "%lld) is damaged: %s%s; run hgctl audit verify "
			    "on a host that runs, and repair the table",
			    AUDIT_PG_WHERE, (long long)pg_i64(res, 0, 0), msg,
			    named ? "" : " (is this the fleet's audit.key?)");
			PQclear(res);
			return -1;
		}
		*seq = s;
		memcpy(hash, h, 65);
	}
	PQclear(res);

	if (!named) {
		snprintf(val, sizeof val, "%lld",
		    (long long)audit_pg_id_value(mine));
		params[0] = val;
		if (pg_exec("INSERT INTO meta (key, value) VALUES "
		    "('audit_key_id', $1) ON CONFLICT (key) DO NOTHING", 1,
		    params) == -1)
			goto sqlfail;
		/* Another host may have named its key first. */
		if ((res = pg_query("SELECT value FROM meta WHERE key = "
		    "'audit_key_id'", 0, NULL)) == NULL)
			goto sqlfail;
		audit_pg_id_hex(PQntuples(res) > 0 ? pg_i64(res, 0, 0) : 0,
		    theirs);
		PQclear(res);
		if (strcmp(mine, theirs) != 0) {
			snprintf(err, errsz, "audit: this host's audit key %s "
			    "has id %s but another host named the key with id "
			    "%s as the fleet's a moment ago: copy its "
			    "audit.key to %s (mode 0600, owned by brokerd's "
			    "user), then start brokerd again",
			    audit_key_path(), mine, theirs, audit_key_path());
			return -1;
		}
		log_info("audit: the store's audit key is now %s (%s)", mine,
		    audit_key_path());
	}
	if (!audit_pg_hooked) {
		pg_on_lost(audit_pg_lost);
		pg_on_reconnect(audit_pg_back);
		audit_pg_hooked = 1;
	}
	audit_pg_failed = 0;
	audit_pg_down_at = 0;
	return 0;

sqlfail:
	snprintf(err, errsz, "audit: cannot read %s: %s", AUDIT_PG_WHERE,
	    pg_error());
	return -1;
}

/* A member of rec as a text parameter (NULL for null or absent). */
static const char *
audit_pg_member(struct json_object *rec, const char *key)
{
	return json_str(rec, key);
}

/*
 * Append rec in one transaction under the advisory lock, chained to the
 * table's last row. Non-sync records are committed without waiting for
 * the store's disk (synchronous_commit off for that transaction only).
 */
static int64_t
audit_pg_append(struct json_object *rec, int64_t time_ms, int sync,
    char hash[65], char **linep, size_t *lenp)
{
	struct json_object	*detail;
	PGresult		*res;
	const char		*params[10], *action;
	char			 why[256], seqs[24], times[24], prev[65];
	char			*line = NULL;
	size_t			 len;
	int64_t			 seq;
	int			 allowed = 0;

	*linep = NULL;
	action = audit_pg_member(rec, "action");
	if (pg_ready(why, sizeof why) == -1)
		goto lost;
	/* (A failed begin nested in another transaction still counts.) */
	if (pg_begin() == -1)
		goto rollback;
	/* One round trip (the simple protocol takes both statements). */
	if (pg_exec(sync ? AUDIT_PG_LOCK : "SET LOCAL synchronous_commit TO "
	    "OFF; " AUDIT_PG_LOCK, 0, NULL) == -1)
		goto rollback;
	/* Read under the lock: every row committed before it is seen. */
	if ((res = pg_query("SELECT seq, hash FROM audit ORDER BY seq DESC "
	    "LIMIT 1", 0, NULL)) == NULL)
		goto rollback;
	if (PQntuples(res) > 0) {
		seq = pg_i64(res, 0, 0) + 1;
		snprintf(prev, sizeof prev, "%s", pg_str(res, 0, 1));
	} else {
		seq = 1;
		memcpy(prev, AUDIT_PG_ZERO_HASH, sizeof prev);
	}
	PQclear(res);
	if (audit_line_make(rec, seq, prev, &line, &len) == -1) {
		snprintf(audit_pg_fail_why, sizeof audit_pg_fail_why,
		    "cannot make a %s record", action != NULL ? action : "?");
		log_warnx("audit: %s", audit_pg_fail_why);
		pg_rollback();
		audit_pg_failed = 1;
		return -1;
	}
	sha256_hex(line, len, hash);
	snprintf(seqs, sizeof seqs, "%lld", (long long)seq);
	snprintf(times, sizeof times, "%lld", (long long)time_ms);
	json_flag(rec, "allowed", &allowed);
	detail = json_object_object_get(rec, "detail");
	params[0] = seqs;
	params[1] = times;
	params[2] = audit_pg_member(rec, "host") != NULL ?
	    audit_pg_member(rec, "host") : pg_host();
	params[3] = action;
	params[4] = audit_pg_member(rec, "user");
	params[5] = audit_pg_member(rec, "session");
	params[6] = allowed ? "true" : "false";
	params[7] = detail != NULL ? json_str(detail, "request_id") : NULL;
	params[8] = hash;
	params[9] = line;
	if (pg_exec("INSERT INTO audit (seq, time, host, action, \"user\", "
	    "session, allowed, request_id, hash, line) VALUES ($1, $2, $3, "
	    "$4, $5, $6, $7, $8, $9, $10)", 10, params) == -1)
		goto rollback;
	if (pg_commit() == -1)
		goto fail;
	audit_pg_failed = 0;
	*linep = line;
	*lenp = len;
	return seq;

rollback:
	pg_rollback();
fail:
	free(line);
	/* A lost link is pg_ready's to report; anything else is ours. */
	if (pg_ready(why, sizeof why) == 0) {
		snprintf(audit_pg_fail_why, sizeof audit_pg_fail_why,
		    "%s: %s", AUDIT_PG_WHERE, pg_error());
		audit_pg_failed = 1;
	}
lost:
	log_warnx("audit: %s; a %s record is lost", AUDIT_PG_WHERE,
	    action != NULL ? action : "?");
	return -1;
}

/* Whether a record can be written now: the link is up, no append failed. */
static int
audit_pg_ready(char *why, size_t whysz)
{
	if (pg_ready(why, whysz) == -1)
		return -1;
	if (audit_pg_failed) {
		snprintf(why, whysz, "the last record could not be written "
		    "(%s)", audit_pg_fail_why);
		return -1;
	}
	return 0;
}

/*
 * Hand every row's line to fn by seq, in pages. A row whose seq or hash
 * column does not match its (otherwise valid) line is reported as such:
 * the next append would chain to the column.
 */
static int
audit_pg_walk(audit_line_fn fn, void *arg)
{
	PGresult	*res;
	const char	*params[1], *line;
	char		 after[24], msg[300], h[65];
	int64_t		 last = 0, seq, s;
	size_t		 len;
	int		 i, n, rv = 0;

	do {
		snprintf(after, sizeof after, "%lld", (long long)last);
		params[0] = after;
		res = pg_query("SELECT seq, hash, line FROM audit WHERE seq > $1 "
		    "ORDER BY seq LIMIT " AUDIT_PG_STR(AUDIT_PG_PAGE), 1, params);
		if (res == NULL) {
			snprintf(msg, sizeof msg, "cannot read: %s",
			    pg_error());
			fn(AUDIT_PG_WHERE, last + 1, msg, strlen(msg),
			    AUDIT_IOERR, arg);
			return 0;
		}
		n = PQntuples(res);
		for (i = 0; i < n && rv == 0; i++) {
			seq = pg_i64(res, i, 0);
			line = pg_str(res, i, 2);
			len = strlen(line);
			last = seq;
			if (len > AUDIT_LINE_MAX) {
				rv = fn(AUDIT_PG_WHERE, seq, line, len,
				    AUDIT_LONG, arg);
				continue;
			}
			if (audit_line_check(line, len, &s, h, msg,
			    sizeof msg) == 0 && (s != seq ||
			    strcmp(h, pg_str(res, i, 1)) != 0)) {
				snprintf(msg, sizeof msg, "the row's %s column "
				    "does not match its line (row edited)",
				    s != seq ? "seq" : "hash");
				rv = fn(AUDIT_PG_WHERE, seq, msg, strlen(msg),
				    AUDIT_IOERR, arg);
				continue;
			}
			rv = fn(AUDIT_PG_WHERE, seq, line, len, AUDIT_WHOLE,
			    arg);
		}
		PQclear(res);
	} while (rv == 0 && n == AUDIT_PG_PAGE);
	return 0;
}

/*
 * The newest records matching f (and the time bounds in ms, INT64_MIN
 * and INT64_MAX when open) below before_seq, filtered by the columns: at
 * most cap, newest last; *more when older matches were left out.
 */
static struct json_object *
audit_pg_query(const struct audit_filter *f, int64_t since_ms,
    int64_t until_ms, int64_t before_seq, size_t cap, int *more)
{
	struct json_object	*arr, *obj, **objs;
	PGresult		*res;
	const char		*params[10];
	char			 sql[1024], nums[4][24];
	size_t			 np = 0, nn = 0, off;
	int			 i, n, count;

	arr = json_object_new_array();
	if (more != NULL)
		*more = 0;
	off = snprintf(sql, sizeof sql, "SELECT line FROM audit WHERE true");
#define AUDIT_PG_COND(cond, value) do {					\
		params[np++] = (value);					\
		off += snprintf(sql + off, sizeof sql - off,		\
		    " AND " cond " $%zu", np);				\
	} while (0)
#define AUDIT_PG_NUM(cond, v) do {					\
		snprintf(nums[nn], sizeof nums[nn], "%lld",		\
		    (long long)(v));					\
		AUDIT_PG_COND(cond, nums[nn]);				\
		nn++;							\
	} while (0)
	if (f->user != NULL)
		AUDIT_PG_COND("\"user\" =", f->user);
	if (f->action != NULL)
		AUDIT_PG_COND("action =", f->action);
	if (f->session != NULL)
		AUDIT_PG_COND("session =", f->session);
	if (f->decision != -1)
		AUDIT_PG_COND("allowed =", f->decision ? "true" : "false");
	if (f->request_id != NULL)
		AUDIT_PG_COND("request_id =", f->request_id);
	if (since_ms != INT64_MIN)
		AUDIT_PG_NUM("time >=", since_ms);
	if (until_ms != INT64_MAX)
		AUDIT_PG_NUM("time <", until_ms);
	if (before_seq > 0)
		AUDIT_PG_NUM("seq <", before_seq);
	snprintf(sql + off, sizeof sql - off, " ORDER BY seq DESC LIMIT %zu",
	    cap + 1);
#undef AUDIT_PG_NUM
#undef AUDIT_PG_COND

	if ((res = pg_query(sql, (int)np, params)) == NULL) {
		log_warnx("audit: cannot query %s: %s", AUDIT_PG_WHERE,
		    pg_error());
		return arr;
	}
	n = PQntuples(res);
	if (more != NULL)
		*more = (size_t)n > cap;
	count = (size_t)n > cap ? (int)cap : n;
	if ((objs = calloc(count + 1, sizeof *objs)) == NULL) {
		PQclear(res);
		return arr;
	}
	/* Rows come newest first; records are read as they are. */
	for (i = 0; i < count; i++) {
		obj = json_tokener_parse(pg_str(res, i, 0));
		if (obj != NULL &&
		    !json_object_is_type(obj, json_type_object)) {
			json_object_put(obj);
			obj = NULL;
		}
		objs[i] = obj;
	}
	for (i = count; i-- > 0;)
		if (objs[i] != NULL)
			json_object_array_add(arr, objs[i]);
	free(objs);
	PQclear(res);
	return arr;
}

const struct audit_store audit_pg = {
	.where = AUDIT_PG_WHERE,
	.shared = 1,
	.exists = audit_pg_exists,
	.open = audit_pg_open,
	.append = audit_pg_append,
	.ready = audit_pg_ready,
	.walk = audit_pg_walk,
	.query = audit_pg_query,
	.close = NULL,
};


/*
 * The store as a link of the chain, for /healthz and hgctl status:
 * {"ok", "reason", "kind": "embedded" | "postgresql"}.
 */
struct json_object *
audit_store_json(void)
{
	struct json_object	*o;
	char			 why[300];
	int			 ok = 1;

	why[0] = '\0';
	ok = store->ready(why, sizeof why) == 0;
	o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	json_object_object_add(o, "reason", ok ? NULL :
	    json_object_new_string(why));
	json_object_object_add(o, "kind", json_object_new_string(
	    store->kind));
	return o;
}
