/*
 * Shared code of hostgate's daemons and hgctl: logging, configuration,
 * IPC, privilege drop and small helpers. Prototypes grouped by file.
 */
#ifndef HG_COMMON_H
#define HG_COMMON_H

#include <sys/types.h>
#include <sys/queue.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "proto.h"

#define HG_VERSION "0.1.0"

#ifndef __dead
#define __dead __attribute__((__noreturn__))
#endif
#define HG_PRINTF(a, b) __attribute__((__format__(__printf__, a, b)))

/* log.c */
enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };
void	log_init(const char *name, int foreground);
void	log_init_cli(const char *name);
void	log_setlevel(enum log_level);
int	log_enabled(enum log_level);
void	log_warn(const char *, ...) HG_PRINTF(1, 2);
void	log_warnx(const char *, ...) HG_PRINTF(1, 2);
void	log_info(const char *, ...) HG_PRINTF(1, 2);
void	log_debug(const char *, ...) HG_PRINTF(1, 2);
__dead void fatal(const char *, ...) HG_PRINTF(1, 2);
__dead void fatalx(const char *, ...) HG_PRINTF(1, 2);
/* Log an error and abort(): a bug that a core or a debugger should show. */
__dead void fatalx_abort(const char *, ...) HG_PRINTF(1, 2);
/* Escape untrusted text for a log line into buf; returns buf. */
const char *log_escape(const char *s, size_t len, char *buf, size_t bufsz);
#define LOG_ESCAPE_MAX 256
/* "journal", "syslog" or "stderr": where log_init sent the lines. */
const char *log_destination(void);
/*
 * The request a line is about: its id (frontd makes one per HTTP request),
 * user and session, shown at the start of each line ("[id] ") and as
 * journal fields. Sessions are logged by the first LOG_SESSION_SHORT hex
 * digits of their public id ("%.8s"), never by anything secret.
 */
#define LOG_REQUEST_ID_LEN	16	/* lowercase hex */
#define LOG_SESSION_SHORT	8
void	 log_ctx_set(const char *request_id, const char *user,
	    const char *session);
void	 log_ctx_clear(void);
const char *log_ctx_request_id(void);	/* NULL when none */
const char *log_ctx_user(void);		/* NULL when none */
int	 log_reqid_valid(const char *);
void	 log_reqid_new(char out[LOG_REQUEST_ID_LEN + 1]);
/* RFC 3339 UTC with milliseconds, "2026-12-01T10:00:00.123Z". */
void	 log_timestamp(char out[32]);

/* config.c */
enum exec_mode { MODE_SANDBOX, MODE_DIRECT };
enum runtime { RUNTIME_HOST, RUNTIME_DOCKER };
enum on_expiry { EXPIRY_TERMINATE, EXPIRY_KEEP };

/* HOSTGATE_RECORD_TERMINALS: which terminals are recorded. */
enum record_mode { RECORD_NONE, RECORD_DIRECT, RECORD_ALL };

struct config {
	/* the names docs/configuration.md gives them */
	enum exec_mode	 mode_default;		/* HOST_EXECUTION_MODE_DEFAULT */
	int		 direct_ttl;		/* HOST_EXECUTION_DIRECT_TTL_SECONDS */
	char		*macos_writable;	/* HOST_SANDBOX_MACOS_WRITABLE_PATHS */
	char		*listen;		/* HOSTGATE_LISTEN, as given */
	char		 listen_host[64];	/* numeric address, no brackets */
	int		 listen_port;
	int		 listen_loopback;	/* address is in 127/8 or ::1 */
	char		*tls_cert;		/* HOSTGATE_TLS_CERT or NULL */
	char		*tls_key;		/* HOSTGATE_TLS_KEY or NULL */
	int		 insecure_http;		/* HOSTGATE_INSECURE_HTTP */
	char		*state_dir;		/* HOSTGATE_STATE_DIR, absolute */
	char		*run_dir;		/* HOSTGATE_RUN_DIR, absolute */
	char		*workspace_root;	/* HOSTGATE_WORKSPACE_ROOT, absolute */
	enum runtime	 runtime;		/* HOSTGATE_RUNTIME */
	char		*sandbox_backend;	/* HOSTGATE_SANDBOX_BACKEND */
	enum on_expiry	 on_expiry;		/* HOSTGATE_DIRECT_ON_EXPIRY */
	/* service users, used when a daemon starts as root */
	char		*front_user;		/* HOSTGATE_FRONT_USER */
	char		*broker_user;		/* HOSTGATE_BROKER_USER */
	char		*sandbox_user;		/* HOSTGATE_SANDBOX_USER */
	char		*egress_user;		/* HOSTGATE_EGRESS_USER */
	/* limits */
	long		 max_body;		/* HOSTGATE_MAX_BODY_BYTES */
	long		 max_upload;		/* HOSTGATE_MAX_UPLOAD_BYTES */
	int		 file_timeout;		/* HOSTGATE_FILE_TIMEOUT_SECONDS */
	int		 max_conns;		/* HOSTGATE_MAX_CONNECTIONS */
	int		 max_conns_per_addr;	/* ..._PER_ADDRESS */
	int		 header_timeout;	/* HOSTGATE_HEADER_TIMEOUT_SECONDS */
	char		*allowed_origins;	/* HOSTGATE_ALLOWED_ORIGINS */
	char		*public_url;		/* HOSTGATE_PUBLIC_URL, no '/' at
						   the end; NULL: unset */
	int		 login_rate;		/* HOSTGATE_LOGIN_RATE_PER_MINUTE */
	int		 login_burst;		/* HOSTGATE_LOGIN_BURST */
	int		 session_lifetime;	/* HOSTGATE_SESSION_LIFETIME_SECONDS */
	enum log_level	 log_level;		/* HOSTGATE_LOG_LEVEL */
	/* spawning */
	char		*profiles_dir;		/* HOSTGATE_PROFILES_DIR */
	int		 command_timeout;	/* HOSTGATE_COMMAND_TIMEOUT_SECONDS */
	int		 command_timeout_max;	/* ..._TIMEOUT_MAX_SECONDS */
	long		 output_cap;		/* HOSTGATE_OUTPUT_CAP_BYTES */
	int		 max_terminals;		/* ..._MAX_TERMINALS_PER_USER */
	int		 max_commands;		/* ..._MAX_COMMANDS_PER_USER */
	char		*docker_image;		/* HOSTGATE_DOCKER_IMAGE */
	char		*wsl_mnt_paths;		/* HOSTGATE_WSL_MNT_PATHS */
	/* policy */
	int		 mode_rate;		/* HOSTGATE_MODE_RATE_PER_MINUTE */
	int		 spawn_rate;		/* HOSTGATE_SPAWN_RATE_PER_MINUTE */
	int		 spawn_burst;		/* HOSTGATE_SPAWN_BURST */
	int		 network_admin_only;	/* HOSTGATE_NETWORK_ADMIN_ONLY */
	/* egress by allowlist (egressd; brokerd shows them) */
	char		*egress_allow;		/* HOSTGATE_EGRESS_ALLOW */
	char		*egress_deny;		/* HOSTGATE_EGRESS_DENY */
	char		*egress_hosts;		/* HOSTGATE_EGRESS_HOSTS or NULL */
	char		*egress_deny_nets;	/* HOSTGATE_EGRESS_DENY_NETS */
	char		*egress_allow_nets;	/* HOSTGATE_EGRESS_ALLOW_NETS */
	char		*egress_ports;		/* HOSTGATE_EGRESS_PORTS */
	/* the fleet (docs/fleet.md) */
	char		*store;			/* HOSTGATE_STORE, NULL: embedded */
	int		 store_timeout;		/* ..._STORE_TIMEOUT_SECONDS */
	char		*host_id;		/* HOSTGATE_HOST_ID */
	int		 host_lost;		/* HOSTGATE_HOST_LOST_SECONDS */
	char		*trusted_proxies;	/* HOSTGATE_TRUSTED_PROXIES */
	long		 audit_rotate;		/* HOSTGATE_AUDIT_ROTATE_BYTES */
	int		 audit_syslog;		/* HOSTGATE_AUDIT_SYSLOG */
	/* terminal recordings */
	enum record_mode record_terminals;	/* HOSTGATE_RECORD_TERMINALS */
	char		*record_users;		/* HOSTGATE_RECORD_USERS */
	long		 recording_max;		/* HOSTGATE_RECORDING_MAX_BYTES */
	int		 recording_retention;	/* ..._RECORDING_RETENTION_DAYS */
	int		 audit_refusal_interval; /* ..._REFUSAL_INTERVAL_SECONDS */
	/* containment (sandboxd): bytes, -1 for "max" */
	long		 user_memory_max;	/* HOSTGATE_USER_MEMORY_MAX */
	long		 user_swap_max;		/* HOSTGATE_USER_SWAP_MAX */
	int		 user_pids_max;		/* HOSTGATE_USER_PIDS_MAX */
	int		 user_cpu_weight;	/* HOSTGATE_USER_CPU_WEIGHT */
	int		 user_cpu_max;		/* ..._CPU_MAX_PERCENT, 0: none */
	int		 user_io_weight;	/* HOSTGATE_USER_IO_WEIGHT */
	long		 user_disk_max;		/* HOSTGATE_USER_DISK_MAX, 0: none */
	long		 spawn_memory_max;	/* HOSTGATE_SPAWN_MEMORY_MAX */
	int		 spawn_pids_max;	/* HOSTGATE_SPAWN_PIDS_MAX */
	long		 uid_range[2];		/* HOSTGATE_UID_RANGE, inclusive */
	/* the web panel */
	char		*web_dir;		/* HOSTGATE_WEB_DIR */
	int		 seccomp_debug;		/* HOSTGATE_SECCOMP_DEBUG */
	char		*env_file;		/* the .env file read, or NULL */
	int		*origins;		/* per variable, see config.c */
};

/*
 * Load the configuration from the environment and the optional .env file
 * (HOSTGATE_ENV_FILE, else HG_ENV_FILE when present; the
 * environment wins).
 * On an invalid value, writes "VARIABLE=value: reason (allowed: ...)" into
 * err and returns -1.
 */
int	 config_load(struct config *, char *err, size_t errsz);
void	 config_free(struct config *);
/* The effective configuration as JSON, secrets masked. */
struct json_object *config_to_json(const struct config *);
int	config_env_text(const char *, struct json_object *, char *, size_t);
/* HOSTGATE_STORE with its password masked (allocated). */
char	*config_store_mask(const char *store);
/* Where a variable's value came from: "the environment", "FILE line N"... */
const char *config_origin(const struct config *, const char *name,
	    char *buf, size_t bufsz);
/* Load or fatalx() with the message. */
void	 config_load_or_die(struct config *);
/* A web origin (RFC 6454) as a browser sends it in Origin. */
struct web_origin {
	int		 https;		/* scheme https, else http */
	char		 host[256];	/* lower case; IPv6 in brackets */
	int		 port;		/* the scheme's default when absent */
};
/* Parse "http[s]://host[:port]" (len bytes); 0, or -1 when it is not one. */
int	 config_parse_web_origin(const char *s, size_t len,
	    struct web_origin *);

/* ipc.c */
struct ipc_peer;
struct ipc_msg {
	struct json_object	*obj;	/* the message, owned by the caller */
	const char		*type;
	int64_t			 id;	/* -1 when absent */
	int			 fds[IPC_MAX_FDS];
	int			 nfds;	/* fds[0..nfds): a handler that keeps one
					   sets its slot to -1; ipc.c closes the
					   rest once the handler returns */
	const char		*raw;	/* its text, during the callback */
	size_t			 rawlen;
	const char		*body;	/* a PM_RAW reply's body, or NULL */
	size_t			 bodylen;
	const struct proto_msg	*pm;	/* a request's row in the table */
};

/*
 * One row of a daemon's handler map: a message type it receives (which
 * must be in the protocol table, common/proto.c) and its function. A map
 * must match the table (ipc_handlers_match), or the daemon stops at start.
 */
struct ipc_handler {
	const char	*type;
	void		(*fn)(struct ipc_peer *, struct ipc_msg *);
};

/* Outgoing queue bound of one peer: past it, ipc_send fails (see ipc.c). */
#define IPC_QUEUE_MAX_MSGS	1024
#define IPC_QUEUE_MAX_BYTES	(4 * 1024 * 1024)

/* Called with the reply, or with NULL when the peer went away or timed out. */
typedef void (*ipc_reply_cb)(struct ipc_peer *, struct ipc_msg *, void *);

struct ipc_peer_cbs {
	void	(*ready)(struct ipc_peer *);	/* hello exchanged */
	void	(*closed)(struct ipc_peer *);	/* before the peer is freed */
};

/* Listen on run_dir/name; the socket file gets owner uid:gid and mode. */
int	 ipc_listen(const char *path, uid_t uid, gid_t gid, mode_t mode);
/*
 * Wrap a connected socket. self is this process's role, expect the role
 * (or mask of roles) the other side must claim in its hello. NULL when
 * the other side is already gone (the fd is closed then).
 */
struct ipc_peer *ipc_peer_new(struct event_base *, int fd, enum ipc_role self,
	    unsigned expect, const struct ipc_handler *table,
	    const struct ipc_peer_cbs *, void *arg);
void	 ipc_peer_free(struct ipc_peer *);
const char *ipc_role_name(unsigned role);
/* Queue a message (takes ownership of obj; fds are dup'ed). */
int	 ipc_send(struct ipc_peer *, struct json_object *obj, const int *fds,
	    int nfds);
/* Send a request: sets "id" in obj, calls cb once with the reply or NULL. */
int	 ipc_request(struct ipc_peer *, struct json_object *obj,
	    const int *fds, int nfds, int timeout_ms, ipc_reply_cb cb, void *arg);
/*
 * Send a request printed by the caller: members is the JSON text of its
 * members other than "type" and "id", without braces; as ipc_request.
 */
int	 ipc_request_text(struct ipc_peer *, const char *type,
	    const char *members, size_t len, int timeout_ms, ipc_reply_cb cb,
	    void *arg);
/* Reply to msg with a result (takes ownership of result; may be NULL). */
int	 ipc_reply(struct ipc_peer *, struct ipc_msg *, struct json_object *result,
	    const int *fds, int nfds);
/* Reply to a PM_RAW request with the result's JSON text (not taken). */
int	 ipc_reply_body(struct ipc_peer *, struct ipc_msg *, const char *body,
	    size_t len, const int *fds, int nfds);
int	 ipc_reply_error(struct ipc_peer *, struct ipc_msg *, const char *code,
	    const char *fmt, ...) HG_PRINTF(4, 5);
/* Reply error with "host", the user's home host (misdirected, host_down). */
int	 ipc_reply_error_host(struct ipc_peer *, struct ipc_msg *,
	    const char *code, const char *host, const char *fmt, ...)
	    HG_PRINTF(5, 6);
/* Reply error with "retry_after" seconds (rate limits). */
int	 ipc_reply_retry(struct ipc_peer *, struct ipc_msg *, int retry_after,
	    const char *message);

/* A server socket: accepts, checks SO_PEERCRED against allowed uids. */
struct ipc_server;
struct ipc_server *ipc_server_new(struct event_base *, int fd,
	    enum ipc_role self, unsigned expect, const uid_t *uids, int nuids,
	    const struct ipc_handler *, const struct ipc_peer_cbs *, void *arg);

/*
 * A server's check at accept, after the uid's: admit(SO_PEERCRED pid,
 * uid) says 0 to admit the peer, -1 to refuse it with the reason in why.
 */
typedef int (*ipc_admit_cb)(pid_t, uid_t, char *why, size_t whysz);
void	 ipc_server_admit(struct ipc_server *, ipc_admit_cb);
/* Send a copy of obj to every ready peer of a server (takes obj). */
void	 ipc_server_broadcast(struct ipc_server *, struct json_object *);
/* A client link that (re)connects with backoff. */
struct ipc_link;
struct ipc_link *ipc_link_new(struct event_base *, const char *path,
	    enum ipc_role self, enum ipc_role expect, uid_t uid,
	    const struct ipc_handler *, const struct ipc_peer_cbs *, void *arg);
void	 ipc_link_free(struct ipc_link *);
/* The connected, hello-exchanged peer, or NULL. */
struct ipc_peer *ipc_link_peer(struct ipc_link *);
/* 0 when a handler map matches what self receives from expect; else err. */
int	 ipc_handlers_match(const struct proto_msg *,
	    const struct ipc_handler *, unsigned self, unsigned expect,
	    char *err, size_t errsz);
/* Check received messages against another table (unit tests; NULL: real). */
void	 ipc_proto_set(const struct proto_msg *);
/*
 * Whether outgoing messages are checked against the table, a message
 * that does not match aborting (on in debug builds, HG_DEBUG): tests
 * that send bad messages on purpose turn it off.
 */
void	 ipc_out_check_set(int on);
/* Bytes (and messages, when nmsgs) in a peer's outgoing queue. */
size_t	 ipc_peer_queued(struct ipc_peer *, size_t *nmsgs);
/*
 * The daemons' handler maps, each defined in its daemon (brokerd/front.c,
 * brokerd/control.c, brokerd/sandbox.c, sandboxd/broker.c,
 * frontd/frontd.c, egressd/sandbox.c); a unit test checks them all
 * against the table.
 */
const struct ipc_handler *front_handler_map(void);
extern const struct ipc_handler control_handlers[];
extern const struct ipc_handler sandbox_handlers[];
extern const struct ipc_handler broker_handlers[];
extern const struct ipc_handler frontd_handlers[];
extern const struct ipc_handler egressd_handlers[];
/* Blocking one-shot client for hgctl: connect, hello, request, reply. */
int	 ipc_call(const char *path, enum ipc_role self, enum ipc_role expect,
	    struct json_object *req, struct json_object **reply, int timeout_ms,
	    char *err, size_t errsz);

/* proc.c */
void	 proc_options(int argc, char *argv[], const char *name, int *debug,
	    int *check);
struct event_base *proc_base(void);
/* The signals of proc_base() for a base made otherwise (after a fork). */
void	 proc_signals(struct event_base *);

/* priv.c */
struct priv_plan {
	const char	*name;		/* daemon name, for messages */
	const char	*user;		/* switch to this user when root */
	int		 never_forks;	/* RLIMIT_NPROC 0 */
	const char *const *syscalls;	/* allowlist, or denylist when deny */
	int		 deny;		/* 1: default allow, priv_host_denied
					   and the listed calls EPERM */
	int		 unix_sockets;	/* socket(2) only for AF_UNIX */
	int		 inet_sockets;	/* only AF_UNIX, AF_INET, AF_INET6 */
	int		 debug;		/* trap and name an offending syscall */
	/*
	 * Capabilities kept across the drop (permitted and effective; the
	 * bounding set keeps them too), ended by -1; NULL: none. Only a
	 * daemon started as root has any to keep.
	 */
	const int	*keep_caps;
	/*
	 * The user's ids when looked up beforehand (have_ids): a daemon that
	 * has left the host's filesystem (frontd's jail) has no passwd file.
	 */
	int		 have_ids;
	uid_t		 uid;
	gid_t		 gid;
};
/* Look up a service user; fatalx when missing. */
void	 priv_lookup(const char *user, uid_t *, gid_t *);
/* Separate users: root, or started as self_user itself. */
int	 priv_separate(const char *self_user);
/* A peer's uid: its service user's when separate, else our own. */
void	 priv_peer(const char *self_user, const char *peer_user, uid_t *,
	    gid_t *);
/* Create a directory with owner and mode, or check the one there. */
int	 priv_dir(const char *what, const char *dir, uid_t, gid_t, mode_t);
/*
 * The privilege drop but its last step (docs/architecture.md, "Privilege
 * drop"): bounding set, ids, capabilities, rlimits, no_new_privs, not
 * dumpable; priv_seccomp() loads the filter once the loop is set up.
 */
void	 priv_drop(const struct priv_plan *);
/*
 * An ipc_peer_cbs admit check: a peer of this process's own uid (which
 * SO_PEERCRED cannot tell from frontd's) must be in this process's PID
 * namespace; frontd's jail, or any container, is not.
 */
int	 priv_admit_same_pidns(pid_t, uid_t, char *why, size_t whysz);
/* Step 7: the steady-state seccomp filter, loaded last. */
void	 priv_seccomp(const struct priv_plan *);
/* The syscalls every daemon's event loop needs (NULL-terminated). */
extern const char *const priv_base_syscalls[];
extern const char *const priv_host_denied[];

/* egress.c: domain patterns, CIDR lists and ports of the allowlist proxy */
struct sockaddr;
/* Whether host is an IP address in any spelling (2130706433, [::1], ...). */
int	 egress_host_is_literal(const char *host);
/* A lower-case DNS name of LDH labels, not a literal (one trailing dot
 * dropped by the caller). */
int	 egress_host_valid(const char *host);
/* "name" or "*.name" (sub-domains only). */
int	 egress_pattern_valid(const char *pattern);
int	 egress_match(const char *pattern, const char *host);
/* Lists: patterns separated by ',' or white space. bad: the first bad one. */
int	 egress_list_valid(const char *list, char *bad, size_t badsz);
/* The first pattern of list matching host into out (may be NULL): 1 or 0. */
int	 egress_list_match(const char *list, const char *host, char *out,
	    size_t outsz);
struct json_object *egress_list_json(const char *list);
struct egress_net {
	int		 family;	/* AF_INET or AF_INET6 */
	unsigned char	 addr[16];
	int		 prefix;
	char		 text[64];	/* as configured */
};
struct egress_nets {
	struct egress_net *v;
	size_t		   n;
};
int	 egress_nets_parse(const char *list, struct egress_nets *, char *err,
	    size_t errsz);
void	 egress_nets_free(struct egress_nets *);
/* The text of the first net holding sa (v4-mapped v6 as v4), or NULL. */
const char *egress_nets_find(const struct egress_nets *,
	    const struct sockaddr *sa);
/* Ports 1..65535 by ',' or white space into ports[max]: how many, or -1. */
int	 egress_ports_parse(const char *list, int ports[], int max);

/* jail.c */
#define JAIL_USERNS	0x1	/* rootless: a user namespace of its own */
#define JAIL_HOSTNET	0x2	/* keep the host's network namespace */
/*
 * Namespaces and an empty root holding only dir (and the log socket),
 * made on mountpoint. Returns 0 in the daemon proper, the daemon's pid
 * in its keeper, which then calls jail_keeper(); -1 and err when there
 * is no user namespace to be had.
 */
pid_t	 jail_enter(const char *name, const char *dir, const char *mountpoint,
	    int flags, char *err, size_t errsz);
/* The keeper: pass stop signals on to the daemon, end as it ends. */
__attribute__((noreturn))
void	 jail_keeper(pid_t, const struct priv_plan *);
/* In the daemon, after its drop: die with the keeper. */
void	 jail_tie_to_keeper(void);

/* util.c */
/*
 * Typed JSON field access: NULL / -1 when missing or of the wrong type;
 * json_str also refuses a string with a NUL inside.
 */
const char *json_str(struct json_object *, const char *key);
int	 json_int(struct json_object *, const char *key, int64_t *out);
int	 json_flag(struct json_object *, const char *key, int *out);
/* Write data to path atomically (temp file, fsync, rename, fsync dir). */
int	 file_write_atomic(const char *path, const void *data, size_t len,
	    mode_t mode);
/* Read a whole small file; NUL-terminated; returns NULL and errno. */
char	*file_read(const char *path, size_t max, size_t *lenp);
/* A private state file: absent (NULL, *absent) or 0600, NUL-free text. */
char	*file_read_private(const char *path, size_t max, int *absent,
	    char *err, size_t errsz);
/* Random bytes as base64url (no padding) into out (>= 4*n/3+2 bytes). */
int	 rand_token(char *out, size_t outsz, size_t nbytes);
/* Lowercase hex SHA-256 of data into out[65]. */
void	 sha256_hex(const void *data, size_t len, char out[65]);
/* Constant-time compare of two NUL-terminated strings. */
int	 str_ct_equal(const char *, const char *);
/* Whether s is exactly len lower-case hex digits (ids, hashes). */
int	 str_is_hex(const char *s, size_t len);
/* Whether s is a host id: [a-z0-9][a-z0-9-]{0,31} (HOSTGATE_HOST_ID). */
int	 str_is_host_id(const char *s);
/*
 * A terminal id of len bytes at s, "HEX16" or "HOST.HEX16": the host into
 * host ("" without one) and the 16 hex digits into id; -1 if malformed.
 */
int	 term_id_parse(const char *s, size_t len, char host[33], char id[17]);
/* Whether s is a user name as users.json holds them (1 to 32 bytes). */
int	 str_is_user_name(const char *s);
/* Decode the \ooo escapes of a /proc/self/mountinfo field in place. */
void	 mountinfo_unescape(char *);
/* Monotonic and wall clocks in milliseconds. */
int64_t	 now_mono_ms(void);
int64_t	 now_wall_ms(void);
/* ISO 8601 UTC ("2026-11-29T17:20:13Z") of a wall time in seconds. */
void	 iso8601(int64_t secs, char out[32]);
/* The same with milliseconds, of a wall time in ms (the audit log's). */
void	 iso8601_ms(int64_t ms, char out[32]);
/* Path of name inside dir; fatalx if too long. */
char	*path_join(const char *dir, const char *name);

#endif
