/*
 * brokerd: users, sessions, tokens, policy, rate limits. It answers frontd
 * and hgctl, and is the only peer sandboxd accepts. It never execs.
 */
#ifndef HG_BROKERD_H
#define HG_BROKERD_H

#include <sys/queue.h>

#include <libpq-fe.h>

#include "common.h"

#define USER_NAME_MAX	32
#define PASSWORD_MIN	8
#define PASSWORD_MAX	1024
#define HOME_HOST_MAX	32	/* a host id's length (HOSTGATE_HOST_ID) */
#define TOKEN_PREFIX	"hgt_"	/* every bearer token's */

struct user {
	char			*name;
	int			 admin;
	char			*hash;		/* argon2id encoded string */
	int64_t			 created;	/* wall seconds */
	int64_t			 uid;		/* its own or unix_user's */
	int64_t			 gid;
	char			*unix_user;	/* NULL unless mapped */
	/* a fleet's: the host that holds the workspace ("": none yet) */
	char			 home[HOME_HOST_MAX + 1];
	/* an admin's egress additions (egress.c): an array, NULL for none */
	struct json_object	*egress_allow;
	TAILQ_ENTRY(user)	 entry;
};

struct token;
TAILQ_HEAD(token_list, token);

struct session {
	char			 id[33];	/* public id, hex */
	char			 token_hash[65];/* sha256 of the cookie value */
	char			 csrf_hash[65];	/* sha256 of the CSRF token */
	char			*user;
	int64_t			 created;	/* wall seconds */
	int64_t			 last_seen;	/* wall seconds */
	int64_t			 expires;	/* wall seconds */
	char			 permission[32];/* "" means workspace-write */
	/* an admin's egress additions (egress.c): an array, NULL for none */
	struct json_object	*egress_allow;
	/* a direct-mode grant (mode.c) */
	int64_t			 direct_until;	/* wall ms, stored; 0: none */
	int64_t			 direct_mono;	/* the same deadline, monotonic */
	struct event		*ev_expiring;	/* 60 s before */
	struct event		*ev_expire;
	TAILQ_ENTRY(session)	 entry;
	/* session.c's indexes and lists */
	struct token_list	 tokens;	/* the tokens bound to it */
	struct session		*by_cookie;	/* hash chains */
	struct session		*by_id;
	int			 dirty;		/* last_seen not yet stored */
	TAILQ_ENTRY(session)	 dirty_entry;
};

struct token {
	char			 id[17];	/* public id, hex */
	char			 hash[65];	/* sha256 of the bearer value */
	char			*user;
	char			 session_id[33];/* "" for a standalone token */
	int64_t			 created;
	TAILQ_ENTRY(token)	 entry;
	/* session.c's indexes and lists */
	struct session		*session;	/* NULL for a standalone one */
	TAILQ_ENTRY(token)	 session_entry;	/* in session->tokens */
	struct token		*by_hash;	/* hash chains */
	struct token		*by_id;
};

/* Who sent a request, as brokerd established it (front.c). */
struct ident {
	struct user	*user;
	struct session	*session;	/* the login session, or the token's */
	struct token	*token;		/* NULL for a cookie session */
};

/* auth.c */
int	 auth_init(const char *state_dir, char *err, size_t errsz);
struct user *auth_find(const char *name);
int	 auth_name_valid(const char *name);
int	 auth_user_add(const char *name, int admin, const char *password,
	    char *err, size_t errsz);
/* password NULL: given, an argon2id encoded hash, is stored instead. */
int	 auth_user_add_unix(const char *name, int admin,
	    const char *password, const char *given, const char *unix_user, int64_t uid, int64_t gid, char *err,
	    size_t errsz);
/* Before auth_init: the uid range, and the uids no user may have. */
void	 auth_uid_range(int64_t lo, int64_t hi);
void	 auth_uid_reserve(uid_t uid, const char *why);
int	 auth_user_del(const char *name, char *err, size_t errsz);
int	 auth_user_passwd(const char *name, const char *password, char *err,
	    size_t errsz);
/* Every user, in the file's order. */
struct user *auth_user_first(void);
struct user *auth_user_next(struct user *);
/* Replace a user's egress additions (an array, taken; NULL: none). */
int	 auth_user_egress(struct user *, struct json_object *allow, char *err,
	    size_t errsz);
struct json_object *auth_user_list(void);
/* The user when name and password match; NULL otherwise, in like time. */
struct user *auth_verify(const char *name, const char *password);
int	 auth_hash_password(const char *password, char *out, size_t outsz);
/* Whether hash is an argon2id encoded string; fills err if not. */
int	 auth_hash_valid(const char *hash, char *err, size_t errsz);
/* PostgreSQL store: make memory the users table's again; 0 or -1. */
int	 auth_reconcile(void);

/* session.c */
int	 session_init(const char *state_dir, int lifetime, char *err, size_t);
/* New login session; writes the cookie value and CSRF token. */
struct session *session_create(const char *user, char *cookie, size_t,
	    char *csrf, size_t);
/* The live session for a cookie value, or NULL; touches last_seen. */
struct session *session_lookup(const char *cookie);
struct session *session_by_id(const char *id);
int	 session_csrf_ok(struct session *, const char *csrf);
void	 session_destroy(struct session *);	/* its tokens die with it */
void	 session_drop_user(const char *user);	/* sessions and tokens */
struct json_object *session_list(void);
/*
 * The live sessions (tokens) whose id sorts after `after` (NULL: from the
 * first): the max smallest ids in id order into out; their number.
 */
size_t	 session_page(const char *after, struct session **out, size_t max);
size_t	 token_page(const char *after, struct token **out, size_t max);
struct json_object *session_json(const struct session *);
struct json_object *token_json(const struct token *);
struct token *token_create(const char *user, const char *session_id,
	    char *bearer, size_t);
/* The same naming host, the user's home in a fleet (NULL: none). */
#define TOKEN_BEARER_MAX	(4 + HOME_HOST_MAX + 1 + 43 + 1)
struct token *token_create_home(const char *user, const char *session_id,
	    const char *host, char *bearer, size_t);
struct token *token_lookup(const char *bearer);
int	 token_revoke(const char *id);
struct json_object *token_list(void);
/*
 * Expire a bounded batch of old sessions and store a bounded batch of
 * last_seen times: 1 when more of either is left (call again soon).
 */
int	 session_sweep(void);
/* Store every pending last_seen time (at exit). */
int	 session_flush(void);
/* Store the pending last_seen times and close the store (at exit). */
void	 session_close(void);
/* Store a session's changed fields (grant, profile, last_seen). */
int	 session_save(struct session *);

/*
 * store.c: where users, sessions, tokens, meta numbers and rate buckets
 * are kept, picked once at start-up: store_sqlite.c (STATE_DIR/store.db,
 * one host) or store_pg.c (HOSTGATE_STORE=postgresql://..., a fleet). A
 * stored field is added to both, each with its schema step. The fleet's
 * hooks are NULL on the embedded store.
 */
#define STORE_FILE	"store.db"
struct audit_store;
/* A notification of a changed row "TABLE KEY": KEY; own: sent by us. */
typedef void (*store_notify_fn)(const char *key, int own);
struct store_ops {
	const char *kind;	/* "embedded" or "postgresql" */
	const char *where;	/* for messages: "the PostgreSQL store" */
	/*
	 * 1: one brokerd owns it: memory is the store's (a miss is not asked
	 * of it); it takes in the files of an earlier release at start-up,
	 * and moves uids out of HOSTGATE_UID_RANGE.
	 */
	int	 one_host;
	/* Open it (as the service user); -1 with err: refuse to start. */
	int	 (*open)(struct config *, char *err, size_t errsz);
	void	 (*close)(void);
	/* Add to err what to do about a store that cannot be used. */
	void	 (*unusable)(char *err, size_t errsz);
	/* 0 while it can be written; -1 with why. */
	int	 (*ready)(char *why, size_t whysz);
	/* Transactions; they nest: only the outermost pair counts. */
	int	 (*begin)(void);
	int	 (*commit)(void);	/* -1: rolled back */
	void	 (*rollback)(void);
	/* Each 0, or -1 logged (marking the open transaction failed). */
	int	 (*session_insert)(const struct session *);
	/* last_seen, permission, direct_until, egress_allow */
	int	 (*session_update)(const struct session *);
	/* last_seen alone */
	int	 (*session_touch)(const struct session *);
	/* The session's row and its tokens' */
	int	 (*session_delete)(const char *id);
	int	 (*token_insert)(const struct token *);
	int	 (*token_delete)(const char *id);
	/* Every session and token row of a user */
	int	 (*drop_user)(const char *user);
	/* By id, or by the secret's hash: 1 (*out allocated), 0 none, -1. */
	int	 (*session_get)(const char *key, int by_hash,
		    struct session **);
	int	 (*token_get)(const char *key, int by_hash, struct token **);
	/* The ids of at most max sessions expired at now, oldest first. */
	size_t	 (*expired)(int64_t now, char (*ids)[33], size_t max);
	/* A number kept under key (0: none). */
	int64_t	 (*meta_get)(const char *key);
	int	 (*meta_set)(const char *key, int64_t value);
	/*
	 * Every session, then every token, each (allocated) handed to the
	 * callee, which fills err when it refuses it: -1 with err then.
	 */
	int	 (*load)(int (*)(struct session *, char *, size_t),
		    int (*)(struct token *, char *, size_t), char *err,
		    size_t errsz);
	/* 1 inserted, 0 the name or the uid is taken, -1 the store failed. */
	int	 (*user_insert)(const struct user *);
	/* The rows changed, or -1. */
	int	 (*user_update)(const struct user *);
	int	 (*user_delete)(const char *name);
	/* 1 with *out (allocated, unchecked), 0 none, -1 failed. */
	int	 (*user_get)(const char *name, struct user **);
	/* Every user, oldest first, as load does. */
	int	 (*user_load)(int (*)(struct user *, char *, size_t),
		    char *err, size_t errsz);
	/* Why the last statement failed (for messages). */
	const char *(*error)(void);

	/* The fleet's hooks: NULL on the embedded store. */
	/* Watch the link from the loop (notifications, reconnects). */
	void	 (*events)(struct event_base *);
	/* Whether its link needs IPv4 and IPv6 sockets (seccomp). */
	int	 (*over_tcp)(void);
	/* Call fn on each change of a row of table made by any host. */
	void	 (*on_notify)(const char *table, store_notify_fn);
	/* Call fn once a lost link is back (notifications were missed). */
	void	 (*on_reconnect)(void (*)(void));
	/*
	 * Take (or peek at, take 0) a token of the shared bucket key of
	 * bucket (burst tokens, rate per second, as text): seconds to wait
	 * (0: allowed), or -1 when the store failed. sweep: also delete a
	 * batch of full buckets.
	 */
	int	 (*rate)(const char *bucket, const char *key,
		    const char *burst, const char *rate, int take, int sweep);
	/*
	 * Clear a session's stored grant if it still is until: 1 cleared by
	 * this call, 0 changed by another host first (or gone), -1 failed.
	 */
	int	 (*grant_claim)(const char *id, int64_t until);
	/* A session's stored grant (0: none or no session), or -1. */
	int64_t	 (*grant_stored)(const char *id);
	/*
	 * A user's home: host, unless the row names one already (another
	 * host's claim came first): 1 with the home in out, 0 no such user,
	 * -1 failed.
	 */
	int	 (*home_claim)(const char *name, const char *host, char *out,
		    size_t outsz);
	/* Where the audit chain is kept (audit_use_store). */
	const struct audit_store *audit;
};
extern const struct store_ops	*store;
extern const struct store_ops	 store_sqlite, store_pg;
/* Pick the store HOSTGATE_STORE names and open it; -1 with err. */
int	 store_init(struct config *, char *err, size_t errsz);
void	 store_close(void);
/* store_sqlite.c: the embedded store at path (tests, tools). */
int	 store_sqlite_open_path(const char *path, char *err, size_t errsz);

/*
 * pg.c: the PostgreSQL store of a fleet (HOSTGATE_STORE). The schema is
 * PG_SCHEMA_VERSION; hgctl store migrate brings a store to it.
 */
#define PG_SCHEMA_VERSION	2
int	 pg_enabled(void);		/* HOSTGATE_STORE names PostgreSQL */
/* Connect (bounded), check the schema, LISTEN; -1 with err: refuse start. */
int	 pg_init(struct config *, char *err, size_t errsz);
/* Watch the link from the loop: notifications, loss, reconnects. */
void	 pg_events(struct event_base *);
void	 pg_close(void);
/* 0 while the link is up; -1 with why ("the store is unreachable: ..."). */
int	 pg_ready(char *why, size_t whysz);
int	 pg_over_tcp(void);		/* whether it may use TCP (seccomp) */
const char *pg_host(void);		/* HOSTGATE_HOST_ID */
/*
 * One statement, text parameters (NULL: SQL NULL), bounded by the store's
 * timeout: the result (PQclear it), or NULL with the reason logged and in
 * pg_error(); a lost link is declared lost and connected again later.
 */
PGresult *pg_query(const char *sql, int nparams, const char *const *params);
int	 pg_exec(const char *sql, int nparams, const char *const *params);
const char *pg_error(void);
/* Transactions; nest like store_begin: only the outermost pair counts. */
int	 pg_begin(void);
int	 pg_commit(void);
void	 pg_rollback(void);
/* Notifications "TABLE KEY": the handler gets KEY, own: sent by us. */
void	 pg_on_notify(const char *table, store_notify_fn);
/* Called once a lost link is back: reload, notifications were missed. */
void	 pg_on_reconnect(void (*)(void));
/* Called when the link goes down, with why. */
void	 pg_on_lost(void (*)(const char *why));
int64_t	 pg_i64(PGresult *, int row, int col);	/* 0 for NULL */
const char *pg_str(PGresult *, int row, int col);	/* "" for NULL */
/* Standalone connections (hgctl): connect, read the version, migrate. */
PGconn	*pg_connect_once(const char *conninfo, int timeout, char *err,
	    size_t errsz);
int	 pg_schema_version(PGconn *, char *err, size_t errsz);
int	 pg_migrate(PGconn *, int *from, int *to, char *err, size_t errsz);

/* home.c: a user's home host, the plain rules */
int	 home_host_valid(const char *s, size_t len);
/* The HOST of "hgt_HOST.SECRET": 1; 0 for a token naming none; -1 bad. */
int	 home_token_host(const char *bearer, char *out, size_t outsz);
/* A host that is up, as a new user's placement weighs it. */
struct home_load {
	char	 id[HOME_HOST_MAX + 1];
	int64_t	 live;		/* its rows in the live table */
	int64_t	 users;		/* the users homed there */
};
/* The least loaded of n hosts (live, then users, then id); -1: none. */
int	 home_pick(const struct home_load *, size_t n);

/* hosts.c: this host in a fleet (hosts and live tables) */
void	 hosts_init(struct event_base *, struct config *);
void	 hosts_stop(void);
const char *hosts_self(void);			/* HOSTGATE_HOST_ID */
/* A spawn's id as clients see it: HOST.HEX16 in a fleet, else HEX16. */
#define HOSTS_SPAWN_ID_MAX	(32 + 1 + 16 + 1)
void	 hosts_spawn_id(const char *hex, char *out, size_t outsz);
/* In a fleet: a spawn's answer and an event name the host (no-ops else). */
void	 hosts_spawn_name(struct json_object *o, const char *hex);
void	 hosts_spawn_event(struct json_object **dp, const char *hex);
/* The live table's row of a running terminal or command (detail taken). */
void	 hosts_live_add(const char *hex, const char *kind, const char *user,
	    const char *session, struct json_object *detail);
void	 hosts_live_del(const char *hex);
/* 0: a terminal id of this host; -1 after a 421, 410 or 404 reply. */
int	 hosts_term_check(struct ipc_peer *, struct ipc_msg *,
	    const char *host, const char *hex);
/* The other hosts' live terminals of a session, added to arr. */
void	 hosts_live_terminals(struct json_object *arr, const char *session);
/* Each session's host, and its terminals elsewhere, in the admin view. */
void	 hosts_admin_sessions(struct json_object *sessions);
/* A fleet user's home host (claimed here when none); NULL: no fleet. */
const char *hosts_home(struct user *);
/* 0: the user's workspace is here; -1 after a 421 or 503 reply. */
int	 hosts_home_check(struct ipc_peer *, struct ipc_msg *, struct user *);
struct json_object *hosts_status_json(void);	/* {id, store} */
struct json_object *hosts_list_json(void);	/* admins: the fleet's hosts */

/* storeadm.c: hgctl store status and copy, off-line */
struct storeadm_counts {
	int64_t	 schema;	/* -1: unknown (store.db held by brokerd) */
	int64_t	 users, sessions, tokens, audit, hosts;	/* -1: unknown */
};
int	 storeadm_embedded_status(const char *state_dir,
	    struct storeadm_counts *, char *err, size_t errsz);
int	 storeadm_pg_status(const char *conninfo, int timeout,
	    struct storeadm_counts *, char *err, size_t errsz);
int	 storeadm_copy(const char *state_dir, const char *host, const char *to,
	    int timeout, struct storeadm_counts *, char *err, size_t errsz);

/* ratelimit.c */
struct rl_table;
/*
 * rate tokens per minute, burst bucket size, at most max_keys keys; with a
 * PostgreSQL store, the rows named bucket in the ratelimits table.
 */
struct rl_table *rl_new(const char *bucket, double per_minute, double burst,
	    size_t max_keys);
void	 rl_free(struct rl_table *);
/* Take a token for key: 0 when allowed, else seconds to wait (>= 1). */
int	 rl_take(struct rl_table *, const char *key, int64_t now_ms);
/* Seconds until key could take a token, without taking one (0: now). */
int	 rl_peek(struct rl_table *, const char *key, int64_t now_ms);

/* The permission profile of a session (the default without one). */
const char *session_permission(struct session *);
int	 session_permission_valid(const char *);
int	 session_set_permission(struct session *, const char *);
/* Whether a profile reaches the network only through the egress proxy. */
int	 session_permission_allowlist(const char *);
/* Whether a profile keeps the workspace read-only. */
int	 session_permission_read_only(const char *);
/* Replace a session's egress additions (an array, taken; NULL: none). */
int	 session_set_egress(struct session *, struct json_object *allow);
/* Called after another host changed a session's (user's) additions. */
void	 session_on_egress(void (*)(struct session *));
void	 auth_on_egress(void (*)(struct user *));
/* Where a new user's home is (fills it; -1: none found), in a fleet. */
void	 auth_on_place(int (*)(char *home, size_t));
/* Called before a session is freed (mode.c drops its timers). */
void	 session_on_remove(void (*)(struct session *));
/*
 * Called after another host's change to a session was applied here (its
 * permission, direct_until, egress_allow or expires; or a session new here
 * with a grant: old 0). direct_mono is already that of the new deadline.
 */
void	 session_on_change(void (*)(struct session *,
	    int64_t old_direct_until));
/* Whether another host's change is being applied (no store write, no record). */
int	 session_remote(void);
/* Make memory the PostgreSQL store's again (after a lost link). */
void	 session_reconcile(void);
/* Forget a user's sessions and tokens here only (deleted on another host). */
void	 session_forget_user(const char *user);
/* Every live session, for mode.c and the admin API. */
struct session *session_first(void);
struct session *session_next(struct session *);

/* spawn.c */
void	 spawn_init(struct config *);
void	 spawn_run(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 spawn_terminal_create(struct ipc_peer *, struct ipc_msg *,
	    struct ident *);
void	 spawn_terminal_list(struct ipc_peer *, struct ipc_msg *,
	    struct ident *);
void	 spawn_terminal_attach(struct ipc_peer *, struct ipc_msg *,
	    struct ident *);
void	 spawn_terminal_delete(struct ipc_peer *, struct ipc_msg *,
	    struct ident *);
void	 spawn_exited(const char *proc_id, int status, int oom,
	    struct json_object *bypass);
void	 spawn_term_resized(const char *proc_id);
void	 spawn_sandbox_gone(void);
void	 spawn_session_expiring(const char *session_id);
void	 spawn_front_gone(struct ipc_peer *);
/* Our live rows again, after another host declared us lost. */
void	 spawn_live_again(void);
/* The docker runtime: the container status last reported for a user. */
struct json_object *spawn_container_json(const char *user);
/* The terminals of a session (admin view). */
struct json_object *spawn_terminals_json(const char *session_id);
/* DELETE /api/admin/terminals/{id}: any user's terminal. */
void	 spawn_admin_kill(struct ipc_peer *, struct ipc_msg *,
	    struct ident *);

/* admin.c */
struct counters {
	int64_t	logins, logins_failed, spawns, spawns_refused, grants,
		refusals;
};
extern struct counters counters;
void	 admin_init(struct config *);
void	 admin_sessions(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 admin_revert(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 admin_kill(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 admin_audit(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 admin_debug(struct ipc_peer *, struct ipc_msg *, struct ident *);

/* egress.c */
void	 egress_init(struct config *);
void	 egress_front_get(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 egress_front_set(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 egress_control_get(struct ipc_peer *, struct ipc_msg *);
void	 egress_control_set(struct ipc_peer *, struct ipc_msg *);
void	 egress_spawn_add(struct json_object *req, struct ident *);
struct json_object *egress_domains(struct ident *);
struct json_object *egress_status_json(struct ident *);
void	 egress_proxy_keep(struct json_object *health_result);
void	 egress_session_gone(struct session *);

void	 egress_sandbox_ready(void);
void	 egress_log(struct ipc_peer *, struct ipc_msg *);
/* An allowlist spawn's attempts past the proxy: an egress_bypass record. */
void	 egress_bypass(const char *user, const char *session,
	    const char *spawn, struct json_object *bypass);

/* prompt.c */
void	 prompt_init(struct config *);
void	 prompt_get(struct ipc_peer *, struct ipc_msg *, struct ident *);

/* ttl.c */
void	 ttl_grant(int64_t now_wall, int64_t now_mono, int ttl, int64_t *wall,
	    int64_t *mono);
int	 ttl_resume(int64_t stored_wall, int64_t now_wall, int64_t now_mono,
	    int64_t *mono);
int64_t	 ttl_remaining(int64_t mono_deadline, int64_t now_mono);
int64_t	 ttl_warn_in(int64_t mono_deadline, int64_t now_mono, int warn_secs);

/* mode.c */
void	 mode_init(struct event_base *, struct config *);
int	 mode_is_direct(struct session *);
const char *mode_unavailable(struct ident *);
struct json_object *mode_json(struct ident *);
void	 mode_get(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 mode_set(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 mode_revert(struct session *, const char *reason, const char *by);
void	 mode_login(struct session *, struct user *);
void	 mode_describe(struct session *, struct json_object *);

/* events.c */
void	 events_init(struct ipc_server *front);
void	 events_emit(const char *session, const char *user, const char *name,
	    struct json_object *data);
void	 events_emit_token(const char *session, const char *user,
	    const char *token, const char *name, struct json_object *data);
struct json_object *events_since(int64_t last_id, const char *session,
	    const char *user, int *complete);
int64_t	 events_last(void);

/* front.c */
void	 front_init(struct event_base *, struct config *, uid_t front_uid,
	    int fd);
/* frontd as hgctl status shows it: {up, version, started, reason}. */
struct json_object *front_info_json(void);
/* A request of frontd answered later (once sandboxd has). */
struct front_pending {
	struct ipc_peer		*peer;		/* NULL once frontd gone */
	int64_t			 id;
	const struct proto_msg	*pm;		/* the request's row */
	struct json_object	*res;		/* the answer being made */
	int			 waiting;	/* answers still due */
	char			 rid[LOG_REQUEST_ID_LEN + 1];
	char			 user[USER_NAME_MAX + 1];
	TAILQ_ENTRY(front_pending) entry;
};
struct front_pending *front_pending_new(struct ipc_peer *, struct ipc_msg *);
void	 front_pending_reply(struct front_pending *, struct json_object *);
/* The configured per-user and per-spawn limits, null for none. */
struct json_object *front_limits_json(void);
/* A value that prints as obj prints now (for sending only). */
struct json_object *front_json_raw(struct json_object *obj);
#define FRONT_USAGE_MS	1000	/* frontd waits five seconds for us */
/* recording.c */
void	 recording_closed(struct json_object *);
void	 recording_replay(struct ipc_peer *, struct ipc_msg *);
void	 recording_peer_closed(struct ipc_peer *);
void	 admin_recording(struct ipc_peer *, struct ipc_msg *, struct ident *);

/* control.c */
void	 control_init(struct event_base *, struct config *, const uid_t *,
	    int, int fd);
/* sandbox.c */
void	 sandbox_init(struct event_base *, struct config *, uid_t sandbox_uid);
struct ipc_peer *sandbox_peer(void);
/* Answer a health request of frontd with the chain's state. */
void	 sandbox_health(struct ipc_peer *front, struct ipc_msg *);
/* The backend as last reported by sandboxd: {"name", "ok", "reason"}. */
struct json_object *sandbox_backend_json(void);
void	 sandbox_front_gone(struct ipc_peer *front);
/* Ask sandboxd's health for hgctl status: the result or NULL and why. */
typedef void (*sandbox_health_cb)(struct json_object *, const char *, void *);
void	 sandbox_health_ask(int timeout_ms, sandbox_health_cb, void *);
/* Ask sandboxd's health in the background when the last is older. */
void	 sandbox_health_refresh(int max_age_ms);
/* Kill the direct-mode processes of a session (grant ended). */
void	 sandbox_kill_session(const char *session_id);
/* Tell sandboxd a session's grant deadline (started, renewed). */
void	 sandbox_grant(struct session *);
/* Kill everything of a deleted user. */
void	 sandbox_kill_user(const char *user);
/* Ask sandboxd for a user's usage: the result or NULL and why. */
void	 sandbox_usage_ask(const char *user, int timeout_ms,
	    sandbox_health_cb, void *);
/*
 * A user's usage from sandboxd, kept at most SANDBOX_USAGE_MAX_MS and asked
 * again after SANDBOX_USAGE_FRESH_MS: the object (borrowed) and its age, or
 * NULL and why.
 */
#define SANDBOX_USAGE_FRESH_MS	500
#define SANDBOX_USAGE_MAX_MS	1000
typedef void (*sandbox_usage_cb)(struct json_object *, int64_t age_ms,
	    const char *, void *);
void	 sandbox_usage_get(const char *user, sandbox_usage_cb, void *);
struct json_object *sandbox_usage_kept(const char *user, int64_t *age_ms);
void	 sandbox_usage_drop(const char *user);
/* What enforces what ({"uid", "membership", ...}), as last reported. */
struct json_object *sandbox_containment_json(void);
/* The same two, as front_json_raw values (for sending only). */
struct json_object *sandbox_backend_raw(void);
struct json_object *sandbox_containment_raw(void);

/* files.c */
void	 files_init(struct config *);
void	 files_read(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 files_list(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 files_write(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 files_delete(struct ipc_peer *, struct ipc_msg *, struct ident *);
void	 files_front_gone(struct ipc_peer *);

/* audit.c */
#define AUDIT_LINE_MAX	(64 * 1024)	/* a longer line is a bad record */
/*
 * Open STATE/audit.log: load or create the key STATE/audit.key (0600) and
 * find the chain's tail. -1 with err when the last record is damaged or the
 * key of an existing log is missing. Call it after the privilege drop, so
 * that the files belong to the service user, and before the seccomp filter.
 */
int	 audit_init(const char *state_dir, long rotate_bytes, int syslog_mirror,
	    char *err, size_t errsz);
/*
 * One record of a decision (user, session, reason may be NULL; detail is
 * taken and may be NULL). With sync, returns once it is on disk. The seq,
 * or -1 (logged): a caller that asked for sync then refuses the grant.
 */
int64_t	 audit_append(const char *action, const char *user,
	    const char *session, int allowed, const char *reason,
	    struct json_object *detail, int sync);
/* 0 when the chain is whole; -1 with the first bad seq and what is wrong. */
int64_t	 audit_refused(const char *action, const char *user,
	    const char *session, const char *reason, const char *client);
int	 audit_refusal_flush(void);
void	 audit_refusal_init(struct event_base *, int interval);
int	 audit_verify_head(int64_t head_seq, const char *head_hash,
	    int64_t *nrecords, int64_t *bad_seq, char *err, size_t errsz);
int	 audit_verify(int64_t *nrecords, int64_t *bad_seq, char *err,
	    size_t errsz);
/* What a check of the chain found (audit_verify_chain). */
struct audit_verdict {
	int64_t	 records;	/* records checked */
	int64_t	 first_seq;	/* the oldest here: 1, or past archived ones */
	int64_t	 last_seq;
	int64_t	 bad_seq;	/* 0 when whole */
	int64_t	 anchor_seq;	/* the audit_archived record of the gap, or 0 */
};
int	 audit_verify_chain(int64_t head_seq, const char *head_hash,
	    struct audit_verdict *, char *err, size_t errsz);
struct json_object *audit_verdict_json(const struct audit_verdict *, int ok,
	    const char *err);
/* Open a copy's audit log in dir to verify it, read-only (hgctl). */
int	 audit_open_dir(const char *dir, char *err, size_t errsz);
/* Move the rotated files older than before_ms to to (NULL: the default). */
int	 audit_archive(int64_t before_ms, const char *to,
	    struct json_object **resp, char *err, size_t errsz);
/*
 * Records by user and action (NULL: any) and time (Unix seconds, both
 * inclusive, 0: open): the newest limit of them, newest last.
 */
/* What audit_query_filter matches; NULL, 0 or -1: any. */
struct audit_filter {
	const char	*user;
	const char	*action;
	const char	*session;
	const char	*request_id;
	int		 decision;	/* -1 any, 0 refused, 1 allowed */
	int64_t		 since;		/* Unix seconds, inclusive */
	int64_t		 until;
};
int	 audit_filter_parse(struct json_object *, struct audit_filter *,
	    char *err, size_t errsz);
struct json_object *audit_query_filter(const struct audit_filter *,
	    int64_t before_seq, size_t limit, int *more);
struct json_object *audit_query(const char *user, const char *action,
	    int64_t since, int64_t until, size_t limit);
/* The same below seq before_seq (0: any); *more: older matches remain. */
struct json_object *audit_query_page(const char *user, const char *action,
	    int64_t since, int64_t until, int64_t before_seq, size_t limit,
	    int *more);
/* Drop the oldest records of a query until it fits in maxbytes of JSON. */
size_t	 audit_trim(struct json_object *items, size_t maxbytes);
/* An ISO 8601 time ("2026-11-29", "2026-11-29T17:20:13Z", ...) in seconds. */
int	 audit_time_parse(const char *, int64_t *secs);
int	 audit_time_ms(const char *, int64_t *ms);
/*
 * 0 when the next record can be written (log open, room on its file
 * system, no failed write pending); -1 with the reason. Every state
 * change asks first: no record, no action.
 */
int	 audit_ready(char *why, size_t whysz);
int64_t	 audit_last_seq(void);
const char *audit_last_hash(void);
void	 audit_close(void);
/* Before audit_init: the "host" member of every record (HOSTGATE_HOST_ID). */
void	 audit_set_host(const char *host_id);
/* The store as a link of /healthz: {"ok", "reason", "kind"}. */
struct json_object *audit_store_json(void);

/* How a line of the chain came to its reader. */
enum audit_kind {
	AUDIT_WHOLE,	/* ended by a newline (a row: its line) */
	AUDIT_LONG,	/* longer than AUDIT_LINE_MAX */
	AUDIT_CUT,	/* the file ends before its newline */
	AUDIT_IOERR,	/* could not be read or is inconsistent; line: why */
};
/* Called for each line of a walk, in chain order: 0 goes on, 1 stops. */
typedef int (*audit_line_fn)(const char *where, int64_t lineno,
	    const char *line, size_t len, enum audit_kind, void *arg);
/*
 * Where the chain is kept: the files (audit_file, audit.c) or the store's
 * audit table (audit_pg, audit_pg.c). audit.c makes and checks the lines
 * either way.
 */
struct audit_store {
	const char *where;	/* for messages: "the store's audit table" */
	/* 1: other hosts append too; its lines are numbered by their seq. */
	int	 shared;
	/* Whether a chain exists (for the key's creation). */
	int	 (*exists)(int *have, char *err, size_t errsz);
	/* With the key loaded: check it is the store's, find the tail. */
	int	 (*open)(int64_t *seq, char hash[65], char *err, size_t errsz);
	/* Append rec (audit_line_make's input): its seq and chain hash. */
	int64_t	 (*append)(struct json_object *rec, int64_t time_ms, int sync,
		    char hash[65], char **linep, size_t *lenp);
	int	 (*ready)(char *why, size_t whysz);
	/* Hand every line, by seq (lineno: its seq column), to fn. */
	int	 (*walk)(audit_line_fn, void *arg);
	/* The newest matches of f below before_seq, newest last. */
	struct json_object *(*query)(const struct audit_filter *,
		    int64_t since_ms, int64_t until_ms, int64_t before_seq,
		    size_t cap, int *more);
	/* audit_archive; NULL: the chain is not in files to move. */
	int	 (*archive)(int64_t before_ms, const char *to,
		    struct json_object **resp, char *err, size_t errsz);
	void	 (*close)(void);
};
void	 audit_use_store(const struct audit_store *);
/* The line of rec with seq and prev set (malloc'd, no newline). */
int	 audit_line_make(struct json_object *rec, int64_t seq,
	    const char *prev, char **linep, size_t *lenp);
/* Check a line's HMAC, seq and prev: 0 with its seq and hash, or -1. */
int	 audit_line_check(const char *line, size_t len, int64_t *seq,
	    char hash[65], char *err, size_t errsz);
/* The key's id: the first 16 hex digits of its SHA-256. */
void	 audit_key_id(char out[17]);
const char *audit_key_path(void);
/* The chain in STATE_DIR/audit.log (audit.c), or in the store's table. */
extern const struct audit_store	audit_file;
/* audit_pg.c: the chain in the PostgreSQL store's audit table. */
extern const struct audit_store	audit_pg;

#endif
