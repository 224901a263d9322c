/*
 * This host among the others of a fleet on one PostgreSQL store: its row
 * in the hosts table (up at start, a heartbeat every second from the
 * database's clock, stopped at a clean exit), the live table's rows of its
 * running terminals and commands, and the watch on the others: a host
 * whose heartbeat is older than HOSTGATE_HOST_LOST_SECONDS is declared
 * lost by whichever host's UPDATE changes its row first, and that host
 * alone writes the host_lost record of the terminals and commands lost
 * with it. With the embedded store only the host's id is used here.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

#define HOSTS_BEAT_MS	1000	/* the heartbeat */
/* The database's clock: every host's times come from the same one. */
#define HOSTS_NOW_MS	"(floor(extract(epoch FROM clock_timestamp())" \
			" * 1000))::bigint"
#define HOSTS_NOW_S	"(floor(extract(epoch FROM clock_timestamp())))::bigint"

static struct config	*hosts_conf;
static struct event	*hosts_ev;
static int		 hosts_ticks;
static int		 hosts_every;	/* ticks between looks at the others */
static int		 hosts_up;	/* our row says up */
static int64_t		 hosts_since;	/* linked since (mono ms), 0: not */

static void	hosts_lost_record(const char *host, const char *why);
static int	hosts_place(char *home, size_t homesz);

/* This host's id (HOSTGATE_HOST_ID). */
const char *
hosts_self(void)
{
	return hosts_conf != NULL && hosts_conf->host_id != NULL ?
	    hosts_conf->host_id : "host";
}

/* Whether the store can be asked now (no query on a link known down). */
static int
hosts_linked(void)
{
	char	why[256];

	return pg_enabled() && pg_ready(why, sizeof(why)) == 0;
}

/* A terminal's or command's id as clients see it: HOST.HEX16 in a fleet. */
void
hosts_spawn_id(const char *hex, char *out, size_t outsz)
{
	if (pg_enabled())
		snprintf(out, outsz, "%s.%s", hosts_self(), hex);
	else
		snprintf(out, outsz, "%s", hex);
}

/* In a fleet, a spawn's answer o names its host: "id" HOST.HEX, "host". */
void
hosts_spawn_name(struct json_object *o, const char *hex)
{
	char	full[HOSTS_SPAWN_ID_MAX];

	if (!pg_enabled())
		return;
	hosts_spawn_id(hex, full, sizeof(full));
	json_object_object_add(o, "id", json_object_new_string(full));
	json_object_object_add(o, "host", json_object_new_string(hosts_self()));
}

/*
 * In a fleet, an event's "id" names the host: *dp becomes a copy with
 * HOST.HEX (the original, kept by its caller's caller, stays as it is).
 */
void
hosts_spawn_event(struct json_object **dp, const char *hex)
{
	struct json_object	*e = NULL;
	char			 full[HOSTS_SPAWN_ID_MAX];

	if (!pg_enabled() || json_object_deep_copy(*dp, &e, NULL) != 0)
		return;
	hosts_spawn_id(hex, full, sizeof(full));
	json_object_object_add(e, "id", json_object_new_string(full));
	json_object_put(*dp);
	*dp = e;
}

/* The number of rows a statement changed. */
static long
hosts_changed(PGresult *r)
{
	return r != NULL ? strtol(PQcmdTuples(r), NULL, 10) : 0;
}

/* Our row, up: inserted, or an old one (stopped, lost) made up again. */
static int
hosts_row_up(void)
{
	const char	*params[3];
	PGresult	*r;

	params[0] = hosts_self();
	params[1] = HG_VERSION;
	params[2] = hosts_conf->listen != NULL ? hosts_conf->listen : "";
	r = pg_query("INSERT INTO hosts (id, started, seen, state, version, "
	    "listen) VALUES ($1, " HOSTS_NOW_S ", " HOSTS_NOW_MS ", 'up', $2, "
	    "$3) ON CONFLICT (id) DO UPDATE SET started = EXCLUDED.started, "
	    "seen = EXCLUDED.seen, state = 'up', version = EXCLUDED.version, "
	    "listen = EXCLUDED.listen, lost_at = 0, lost_by = ''", 3, params);
	if (r == NULL)
		return -1;
	PQclear(r);
	hosts_up = 1;
	return 0;
}

static void	 hosts_reconnected(void);

/* Write the host_up record (again: rejoined after being declared lost). */
static void
hosts_up_record(int rejoined)
{
	struct json_object	*d;

	d = json_object_new_object();
	json_object_object_add(d, "host", json_object_new_string(hosts_self()));
	json_object_object_add(d, "version",
	    json_object_new_string(HG_VERSION));
	if (rejoined)
		json_object_object_add(d, "rejoined",
		    json_object_new_boolean(1));
	audit_append("host_up", NULL, NULL, 1, rejoined ? "up again after "
	    "another host declared it lost" : "started", d, 1);
}

/* Every second: our heartbeat; every few: the others' liveness. */
static void
hosts_tick(evutil_socket_t fd, short ev, void *arg)
{
	const char	*params[2];
	char		 ms[32];
	PGresult	*r;
	int		 i;

	if (!hosts_linked()) {
		hosts_since = 0;
		return;
	}
	params[0] = hosts_self();
	r = pg_query("UPDATE hosts SET seen = " HOSTS_NOW_MS " WHERE id = $1 "
	    "AND state = 'up'", 1, params);
	if (r == NULL) {
		hosts_since = 0;
		return;
	}
	if (hosts_since == 0)
		hosts_since = now_mono_ms();
	if (hosts_changed(r) == 0) {
		/*
		 * Another host declared us lost (our heartbeat stopped: the
		 * store unreachable, the host stalled); we are here, and so
		 * are our spawns: our live rows made again from what runs.
		 */
		log_warnx("host %s was declared lost by another host; up again",
		    hosts_self());
		if (hosts_row_up() == 0) {
			hosts_up_record(1);
			hosts_reconnected();
		}
	}
	PQclear(r);
	/*
	 * Judge the others only after a whole lost period linked: when the
	 * store itself was away, every heartbeat is old, and the hosts that
	 * are alive need that long to have beaten again.
	 */
	if (++hosts_ticks % hosts_every != 0 ||
	    now_mono_ms() - hosts_since < (int64_t)hosts_conf->host_lost * 1000)
		return;
	snprintf(ms, sizeof(ms), "%lld", (long long)hosts_conf->host_lost *
	    1000);
	params[1] = ms;
	/*
	 * One statement: of several hosts looking at once, the one whose
	 * UPDATE changed a row is the one that has it back, and writes.
	 */
	r = pg_query("UPDATE hosts SET state = 'lost', lost_at = " HOSTS_NOW_S
	    ", lost_by = $1 WHERE state = 'up' AND id <> $1 AND seen < "
	    HOSTS_NOW_MS " - $2::bigint RETURNING id", 2, params);
	if (r == NULL)
		return;
	for (i = 0; i < PQntuples(r); i++)
		hosts_lost_record(pg_str(r, i, 0), "no heartbeat");
	PQclear(r);
}

/*
 * The host_lost record of host (declared lost by us just now): its
 * terminals and commands as the live table has them. The rows stay, so
 * that the clients of that host's sessions, now served elsewhere, see
 * their terminals listed as lost with it; the host clears them when it
 * starts again.
 */
static void
hosts_lost_record(const char *host, const char *why)
{
	struct json_object	*d, *terms, *cmds;
	const char		*params[1];
	char			 reason[128];
	PGresult		*r;
	int			 i;

	params[0] = host;
	if ((r = pg_query("SELECT id, kind FROM live WHERE host = $1 "
	    "ORDER BY started, id", 1, params)) == NULL)
		return;
	terms = json_object_new_array();
	cmds = json_object_new_array();
	for (i = 0; i < PQntuples(r); i++)
		json_object_array_add(strcmp(pg_str(r, i, 1), "terminal") == 0 ?
		    terms : cmds, json_object_new_string(pg_str(r, i, 0)));
	PQclear(r);
	log_warnx("host %s lost (%s): %zu terminals and %zu commands lost "
	    "with it", host, why, json_object_array_length(terms),
	    json_object_array_length(cmds));
	d = json_object_new_object();
	json_object_object_add(d, "host", json_object_new_string(host));
	json_object_object_add(d, "lost_by",
	    json_object_new_string(hosts_self()));
	json_object_object_add(d, "terminals", terms);
	json_object_object_add(d, "commands", cmds);
	snprintf(reason, sizeof(reason), "host %s lost: %s", host, why);
	if (audit_append("host_lost", NULL, NULL, 1, reason, d, 1) == -1)
		log_warnx("host %s: the host_lost record could not be written",
		    host);
}

/*
 * The link is back: what ended or started while it was down never reached
 * the live table, so our rows are made again from what runs now.
 */
static void
hosts_reconnected(void)
{
	const char	*params[1];
	PGresult	*r;

	params[0] = hosts_self();
	if ((r = pg_query("DELETE FROM live WHERE host = $1", 1,
	    params)) == NULL)
		return;
	PQclear(r);
	spawn_live_again();
}

/*
 * At start, with a PostgreSQL store (after pg_init and audit_init): our
 * row up, and what an unclean end of our last run left accounted for.
 */
void
hosts_init(struct event_base *base, struct config *conf)
{
	struct timeval	 tv = { HOSTS_BEAT_MS / 1000, 0 };
	const char	*params[1];
	PGresult	*r;

	hosts_conf = conf;
	if (!pg_enabled())
		return;
	hosts_every = conf->host_lost / 4 > 1 ? conf->host_lost / 4 : 1;
	params[0] = hosts_self();
	/*
	 * Still up: our last run ended without a stop (killed, crashed) and
	 * no other host has declared it lost yet. Its spawns died with it.
	 */
	if ((r = pg_query("UPDATE hosts SET state = 'lost', lost_at = "
	    HOSTS_NOW_S ", lost_by = $1 WHERE id = $1 AND state = 'up' "
	    "RETURNING id", 1, params)) != NULL) {
		if (PQntuples(r) == 1)
			hosts_lost_record(hosts_self(), "restarted after an "
			    "unclean end");
		PQclear(r);
	}
	/* Rows a failed record left, or of a run before: none run now. */
	if ((r = pg_query("DELETE FROM live WHERE host = $1", 1,
	    params)) != NULL)
		PQclear(r);
	if (hosts_row_up() == -1)
		log_warnx("host %s: its row could not be written: %s",
		    hosts_self(), pg_error());
	else {
		hosts_up_record(0);
		log_info("host %s up on the store (lost after %d s without a "
		    "heartbeat)", hosts_self(), conf->host_lost);
	}
	pg_on_reconnect(hosts_reconnected);
	auth_on_place(hosts_place);
	hosts_ev = event_new(base, -1, EV_PERSIST, hosts_tick, NULL);
	evtimer_add(hosts_ev, &tv);
}

/* At a clean exit: our row stopped, our live rows gone, and recorded. */
void
hosts_stop(void)
{
	struct json_object	*d;
	const char		*params[1];
	PGresult		*r;

	if (!pg_enabled() || hosts_conf == NULL)
		return;
	if (hosts_ev != NULL) {
		event_free(hosts_ev);
		hosts_ev = NULL;
	}
	if (!hosts_linked() || !hosts_up)
		return;
	d = json_object_new_object();
	json_object_object_add(d, "host", json_object_new_string(hosts_self()));
	audit_append("host_stopped", NULL, NULL, 1, "stopped", d, 1);
	params[0] = hosts_self();
	if ((r = pg_query("UPDATE hosts SET state = 'stopped', seen = "
	    HOSTS_NOW_MS " WHERE id = $1", 1, params)) != NULL)
		PQclear(r);
	if ((r = pg_query("DELETE FROM live WHERE host = $1", 1,
	    params)) != NULL)
		PQclear(r);
	hosts_up = 0;
	log_info("host %s stopped on the store", hosts_self());
}

/*
 * A running terminal or command of this host into the live table (detail
 * is taken). A store that fails here costs the row, not the spawn.
 */
void
hosts_live_add(const char *hex, const char *kind, const char *user,
    const char *session, struct json_object *detail)
{
	const char	*params[6];
	char		 id[64];
	PGresult	*r;

	if (!pg_enabled()) {
		json_object_put(detail);
		return;
	}
	hosts_spawn_id(hex, id, sizeof(id));
	params[0] = id;
	params[1] = hosts_self();
	params[2] = kind;
	params[3] = user;
	params[4] = session != NULL ? session : "";
	params[5] = detail != NULL ? json_object_to_json_string_ext(detail,
	    JSON_C_TO_STRING_PLAIN) : "{}";
	if (!hosts_linked() || (r = pg_query("INSERT INTO live (id, host, "
	    "kind, \"user\", session, started, detail) VALUES ($1, $2, $3, "
	    "$4, $5, " HOSTS_NOW_S ", $6) ON CONFLICT (id) DO NOTHING", 6,
	    params)) == NULL)
		log_warnx("%s %s: not in the live table (the store is "
		    "unreachable)", kind, id);
	else
		PQclear(r);
	json_object_put(detail);
}

/* A terminal or command of this host ended: its live row goes. */
void
hosts_live_del(const char *hex)
{
	const char	*params[1];
	char		 id[64];
	PGresult	*r;

	if (!pg_enabled())
		return;
	hosts_spawn_id(hex, id, sizeof(id));
	params[0] = id;
	if (!hosts_linked() || (r = pg_query("DELETE FROM live WHERE id = $1",
	    1, params)) == NULL)
		log_warnx("%s: still in the live table (the store is "
		    "unreachable)", id);
	else
		PQclear(r);
}

/*
 * A terminal id from frontd that named host: 0 when it is ours (or named
 * none); else -1 after the answer: 421 when that host is up (ask it),
 * 410 when it was lost with its terminals, 404 otherwise.
 */
int
hosts_term_check(struct ipc_peer *p, struct ipc_msg *m, const char *host,
    const char *hex)
{
	const char	*params[1];
	char		 when[32], why[256];
	PGresult	*r;
	int64_t		 lost_at;

	if (host == NULL || *host == '\0' || strcmp(host, hosts_self()) == 0)
		return 0;
	if (!pg_enabled()) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such terminal");
		return -1;
	}
	if (pg_ready(why, sizeof(why)) == -1) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "%s", why);
		return -1;
	}
	params[0] = host;
	if ((r = pg_query("SELECT state, lost_at FROM hosts WHERE id = $1", 1,
	    params)) == NULL) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "the store is "
		    "unreachable: %s", pg_error());
		return -1;
	}
	if (PQntuples(r) == 1 && strcmp(pg_str(r, 0, 0), "up") == 0)
		ipc_reply_error(p, m, ERR_MISDIRECTED, "terminal %s.%s is "
		    "served by host %s", host, hex, host);
	else if (PQntuples(r) == 1 && strcmp(pg_str(r, 0, 0), "lost") == 0) {
		lost_at = pg_i64(r, 0, 1);
		iso8601(lost_at, when);
		ipc_reply_error(p, m, ERR_GONE, "terminal %s.%s was lost with "
		    "host %s at %s", host, hex, host, when);
	} else
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such terminal");
	PQclear(r);
	return -1;
}

/*
 * A terminal of another host as the live table has it, in the shape of
 * spawn.c's own, with its host and that host's state ("lost" once its
 * heartbeat is older than the limit, declared or not yet).
 */
static struct json_object *
hosts_live_json(PGresult *r, int i)
{
	struct json_object	*o, *d;
	const char		*state;
	char			 when[32];

	d = json_tokener_parse(pg_str(r, i, 4));
	state = pg_str(r, i, 5);
	iso8601(pg_i64(r, i, 3), when);
	o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(pg_str(r, i,
	    0)));
	json_object_object_add(o, "user", json_object_new_string(pg_str(r, i,
	    2)));
	json_object_object_add(o, "created", json_object_new_string(when));
	json_object_object_add(o, "mode", json_object_new_string(
	    json_str(d, "mode") ? json_str(d, "mode") : "?"));
	json_object_object_add(o, "backend", json_object_new_string(
	    json_str(d, "backend") ? json_str(d, "backend") : "?"));
	json_object_object_add(o, "running",
	    json_object_new_boolean(strcmp(state, "up") == 0));
	json_object_object_add(o, "host", json_object_new_string(pg_str(r, i,
	    1)));
	json_object_object_add(o, "state", json_object_new_string(state));
	json_object_put(d);
	return o;
}

/* The other hosts' live terminals, of one session or (NULL) of all. */
static PGresult *
hosts_live_query(const char *session)
{
	const char	*params[3];
	char		 ms[32];

	if (!hosts_linked())
		return NULL;
	snprintf(ms, sizeof(ms), "%lld", (long long)hosts_conf->host_lost *
	    1000);
	params[0] = hosts_self();
	params[1] = ms;
	params[2] = session;
	return pg_query("SELECT l.id, l.host, l.\"user\", l.started, "
	    "l.detail, CASE WHEN h.state = 'up' AND h.seen < " HOSTS_NOW_MS
	    " - $2::bigint THEN 'lost' ELSE coalesce(h.state, 'lost') END, "
	    "l.session FROM live l LEFT JOIN hosts h ON h.id = l.host WHERE "
	    "l.kind = 'terminal' AND l.host <> $1 AND ($3::text IS NULL OR "
	    "l.session = $3) ORDER BY l.started, l.id", 3, params);
}

/* Add a session's terminals on the other hosts to arr (a fleet's). */
void
hosts_live_terminals(struct json_object *arr, const char *session)
{
	PGresult	*r;
	int		 i;

	if (session == NULL || (r = hosts_live_query(session)) == NULL)
		return;
	for (i = 0; i < PQntuples(r); i++)
		json_object_array_add(arr, hosts_live_json(r, i));
	PQclear(r);
}

/*
 * The admin sessions view: each session's host (where it logged in), its
 * user's home host, and its terminals on the other hosts, two queries for
 * the whole view.
 */
void
hosts_admin_sessions(struct json_object *sessions)
{
	struct json_object	*o, *terms;
	const char		*params[1], *sid;
	char			*ids = NULL;
	size_t			 i, n = json_object_array_length(sessions), len;
	size_t			 at;
	PGresult		*r;
	struct user		*u;
	int			 j;

	for (i = 0; i < n; i++)
		json_object_object_add(json_object_array_get_idx(sessions, i),
		    "host", pg_enabled() ? NULL :
		    json_object_new_string(hosts_self()));
	if (!pg_enabled())
		return;
	/* The user's home host: where their workspace is (null: none yet). */
	for (i = 0; i < n; i++) {
		o = json_object_array_get_idx(sessions, i);
		u = json_str(o, "user") != NULL ? auth_find(json_str(o,
		    "user")) : NULL;
		json_object_object_add(o, "home", u != NULL &&
		    u->home[0] != '\0' ? json_object_new_string(u->home) : NULL);
	}
	if (n == 0 || !hosts_linked())
		return;
	/* A text array of the ids: hex, nothing to quote. */
	len = n * 33 + 3;
	if ((ids = calloc(1, len)) == NULL)
		fatal("%s", __func__);
	at = 0;
	ids[at++] = '{';
	for (i = 0; i < n; i++) {
		sid = json_str(json_object_array_get_idx(sessions, i), "id");
		if (sid == NULL || !str_is_hex(sid, 32))
			continue;
		if (at > 1)
			ids[at++] = ',';
		memcpy(ids + at, sid, 32);
		at += 32;
	}
	ids[at++] = '}';
	ids[at] = '\0';
	params[0] = ids;
	if ((r = pg_query("SELECT id, host FROM sessions WHERE id = "
	    "ANY($1::text[])", 1, params)) != NULL) {
		for (j = 0; j < PQntuples(r); j++)
			for (i = 0; i < n; i++) {
				o = json_object_array_get_idx(sessions, i);
				if ((sid = json_str(o, "id")) != NULL &&
				    strcmp(sid, pg_str(r, j, 0)) == 0 &&
				    *pg_str(r, j, 1) != '\0')
					json_object_object_add(o, "host",
					    json_object_new_string(pg_str(r, j,
					    1)));
			}
		PQclear(r);
	}
	free(ids);
	if ((r = hosts_live_query(NULL)) == NULL)
		return;
	for (j = 0; j < PQntuples(r); j++)
		for (i = 0; i < n; i++) {
			o = json_object_array_get_idx(sessions, i);
			if ((sid = json_str(o, "id")) == NULL ||
			    strcmp(sid, pg_str(r, j, 6)) != 0)
				continue;
			if (json_object_object_get_ex(o, "terminals", &terms))
				json_object_array_add(terms,
				    hosts_live_json(r, j));
		}
	PQclear(r);
}

/* /api/status's "host": this host's id and its store's kind. */
struct json_object *
hosts_status_json(void)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(hosts_self()));
	json_object_object_add(o, "store", json_object_new_string(
	    pg_enabled() ? "postgresql" : "embedded"));
	return o;
}

/*
 * /api/status's "hosts" for an admin in a fleet: every host with its
 * state, last heartbeat, and live terminals and commands; NULL when there
 * is no fleet or the store cannot say.
 */
struct json_object *
hosts_list_json(void)
{
	struct json_object	*arr, *o;
	PGresult		*r;
	char			 when[32];
	int			 i;

	if (!hosts_linked() || (r = pg_query("SELECT h.id, h.state, h.seen, "
	    "h.started, h.version, h.lost_at, h.lost_by, (SELECT count(*) "
	    "FROM live l WHERE l.host = h.id AND l.kind = 'terminal'), "
	    "(SELECT count(*) FROM live l WHERE l.host = h.id AND l.kind = "
	    "'command') FROM hosts h ORDER BY h.id", 0, NULL)) == NULL)
		return NULL;
	arr = json_object_new_array();
	for (i = 0; i < PQntuples(r); i++) {
		o = json_object_new_object();
		json_object_object_add(o, "id",
		    json_object_new_string(pg_str(r, i, 0)));
		json_object_object_add(o, "state",
		    json_object_new_string(pg_str(r, i, 1)));
		iso8601_ms(pg_i64(r, i, 2), when);
		json_object_object_add(o, "seen", json_object_new_string(when));
		iso8601(pg_i64(r, i, 3), when);
		json_object_object_add(o, "started",
		    json_object_new_string(when));
		json_object_object_add(o, "version",
		    json_object_new_string(pg_str(r, i, 4)));
		json_object_object_add(o, "terminals",
		    json_object_new_int64(pg_i64(r, i, 7)));
		json_object_object_add(o, "commands",
		    json_object_new_int64(pg_i64(r, i, 8)));
		if (strcmp(pg_str(r, i, 1), "lost") == 0) {
			iso8601(pg_i64(r, i, 5), when);
			json_object_object_add(o, "lost_at",
			    json_object_new_string(when));
			json_object_object_add(o, "lost_by",
			    json_object_new_string(pg_str(r, i, 6)));
		}
		json_object_array_add(arr, o);
	}
	PQclear(r);
	return arr;
}

/*
 * Where a new user of the fleet is placed (auth_on_place): the least
 * loaded of the hosts that are up with a fresh heartbeat (home_pick), this
 * one when the store names none (it is up: it is adding the user). 0 with
 * home filled, -1 when the store cannot say (the user is then claimed at
 * first use).
 */
static int
hosts_place(char *home, size_t homesz)
{
	struct home_load	*c;
	const char		*params[1];
	char			 ms[32];
	PGresult		*r;
	int			 i, n, best;

	if (!hosts_linked())
		return -1;
	snprintf(ms, sizeof(ms), "%lld", (long long)hosts_conf->host_lost *
	    1000);
	params[0] = ms;
	if ((r = pg_query("SELECT h.id, (SELECT count(*) FROM live l WHERE "
	    "l.host = h.id), (SELECT count(*) FROM users u WHERE u.home = "
	    "h.id) FROM hosts h WHERE h.state = 'up' AND h.seen >= "
	    HOSTS_NOW_MS " - $1::bigint", 1, params)) == NULL)
		return -1;
	n = PQntuples(r);
	if ((c = calloc(n > 0 ? (size_t)n : 1, sizeof(*c))) == NULL)
		fatal("%s", __func__);
	for (i = 0; i < n; i++) {
		snprintf(c[i].id, sizeof(c[i].id), "%s", pg_str(r, i, 0));
		c[i].live = pg_i64(r, i, 1);
		c[i].users = pg_i64(r, i, 2);
	}
	PQclear(r);
	best = home_pick(c, (size_t)n);
	snprintf(home, homesz, "%s", best >= 0 ? c[best].id : hosts_self());
	free(c);
	return 0;
}

/*
 * A fleet user's home host: the one the store names, or this host when
 * it names none yet (a user of an earlier release: the first host that
 * serves them claims them, atomically). NULL with one host, or when the
 * store cannot be asked.
 */
const char *
hosts_home(struct user *u)
{
	char	home[HOME_HOST_MAX + 1];

	if (!pg_enabled())
		return NULL;
	if (u->home[0] != '\0')
		return u->home;
	if (!hosts_linked() || store->home_claim(u->name, hosts_self(), home,
	    sizeof(home)) != 1 || !home_host_valid(home, strlen(home)))
		return NULL;
	memcpy(u->home, home, sizeof(u->home));
	log_info("user %s: home host %s%s", u->name, u->home,
	    strcmp(u->home, hosts_self()) == 0 ? " (claimed here)" : "");
	return u->home;
}

/*
 * A request that needs the caller's workspace: 0 when it is here (or
 * there is no fleet); else -1 after the answer, never served from this
 * host's copy: 421 naming the home host while it is up, 503 naming it
 * and why while it is down, stopped or lost.
 */
int
hosts_home_check(struct ipc_peer *p, struct ipc_msg *m, struct user *u)
{
	const char	*home, *params[2], *state;
	char		 ms[32], when[32], why[256];
	PGresult	*r;

	if (!pg_enabled())
		return 0;
	if ((home = hosts_home(u)) == NULL) {
		if (pg_ready(why, sizeof(why)) == -1)
			ipc_reply_error(p, m, ERR_UNAVAILABLE, "%s", why);
		else
			ipc_reply_error(p, m, ERR_UNAVAILABLE, "user %s has "
			    "no home host yet and none could be claimed: %s",
			    u->name, pg_error());
		return -1;
	}
	if (strcmp(home, hosts_self()) == 0)
		return 0;
	if (pg_ready(why, sizeof(why)) == -1) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "user %s's workspace is "
		    "on host %s, whose state is unknown: %s", u->name, home,
		    why);
		return -1;
	}
	snprintf(ms, sizeof(ms), "%lld", (long long)hosts_conf->host_lost *
	    1000);
	params[0] = home;
	params[1] = ms;
	if ((r = pg_query("SELECT state, seen, lost_at, seen < " HOSTS_NOW_MS
	    " - $2::bigint FROM hosts WHERE id = $1", 2, params)) == NULL) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "the store is "
		    "unreachable: %s", pg_error());
		return -1;
	}
	if (PQntuples(r) == 0) {
		ipc_reply_error_host(p, m, ERR_HOST_DOWN, home, "host %s is "
		    "down: it is "
		    "not in the fleet (user %s's workspace is there)", home,
		    u->name);
		PQclear(r);
		return -1;
	}
	state = pg_str(r, 0, 0);
	if (strcmp(state, "up") == 0 && strcmp(pg_str(r, 0, 3), "t") != 0)
		ipc_reply_error_host(p, m, ERR_MISDIRECTED, home, "user %s's "
		    "workspace is "
		    "on host %s; send the request there (the HGHOST cookie of "
		    "a login, or a token naming it, routes it)", u->name, home);
	else if (strcmp(state, "lost") == 0) {
		iso8601(pg_i64(r, 0, 2), when);
		ipc_reply_error_host(p, m, ERR_HOST_DOWN, home, "host %s is "
		    "down since %s (lost: no heartbeat); user %s's workspace is there",
		    home, when, u->name);
	} else {
		iso8601_ms(pg_i64(r, 0, 1), when);
		ipc_reply_error_host(p, m, ERR_HOST_DOWN, home, "host %s is "
		    "down since %s (%s); user %s's workspace is there", home, when,
		    strcmp(state, "up") == 0 ? "no heartbeat" : state, u->name);
	}
	PQclear(r);
	return -1;
}
