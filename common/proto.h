/*
 * The wire format between hostgate's processes.
 *
 * Every link is a SOCK_SEQPACKET Unix socket. One datagram holds one JSON
 * object (at most IPC_MAX_MSG bytes) and, for the message types that allow
 * it, file descriptors passed with SCM_RIGHTS. The first message each way is
 *   {"type": "hello", "version": HG_PROTO_VERSION, "role": "<sender>"}
 * Requests carry "type" and an integer "id"; a reply echoes "id" and holds
 * either "result": {...} or "error": {"code": "...", "message": "..."}.
 * Every message type, who sends it, who receives it and its fields are
 * defined once, in the table of common/proto.c (proto_msgs); common/ipc.c
 * checks each message against it before any handler runs (and, in a debug
 * build, each message sent), and docs/protocol.md's roles, flags, error
 * codes and message reference are generated from it (build/hg-protodoc).
 */
#ifndef HG_PROTO_H
#define HG_PROTO_H

#define HG_PROTO_VERSION 1
#define IPC_MAX_MSG	(64 * 1024)
#define IPC_MAX_FDS	4
/*
 * The bound of counters, sequence numbers and byte totals: 2^53 - 1, the
 * largest integer a JavaScript client reads exactly.
 */
#define PROTO_COUNT_MAX	9007199254740991LL
/* Domain patterns an admin may add to one user's or session's allowlist. */
#define EGRESS_ADDITIONS_MAX	64

/*
 * Socket names inside HOSTGATE_RUN_DIR. frontd's is in a directory of its
 * own, the one directory frontd's jail shows it (common/jail.c): a bind
 * of the directory still shows the new socket of a restarted brokerd.
 */
#define SOCK_FRONT_DIR		"front"
#define SOCK_BROKER_FRONT	SOCK_FRONT_DIR "/broker.sock"	/* frontd -> brokerd */
#define SOCK_BROKER_CONTROL	"broker-control.sock"	/* hgctl -> brokerd */
#define SOCK_SANDBOX		"sandbox.sock"		/* brokerd -> sandboxd */
/* egressd -> sandboxd: the one directory of egressd's jail */
#define SOCK_EGRESS_DIR		"egress"
#define SOCK_SANDBOX_EGRESS	SOCK_EGRESS_DIR "/sandbox.sock"

/*
 * The message types, one name each: every row of the table, every handler
 * map and every sender names a type by these, so that a misspelt one is a
 * compile error. A type on several links (health, status...) is one name.
 */
#define MSG_HELLO		"hello"	/* the first message each way */
#define MSG_HEALTH		"health"
#define MSG_LOGIN		"login"
#define MSG_LOGOUT		"logout"
#define MSG_STATUS		"status"
#define MSG_TOKEN_MINT		"token_mint"
#define MSG_SESSION_TOKENS	"session_tokens"
#define MSG_SESSION_TOKEN_REVOKE	"session_token_revoke"
#define MSG_MODE_GET		"mode_get"
#define MSG_MODE_SET		"mode_set"
#define MSG_EVENTS_SUBSCRIBE	"events_subscribe"
#define MSG_PROMPT		"prompt"
#define MSG_ADMIN_SESSIONS	"admin_sessions"
#define MSG_ADMIN_REVERT	"admin_revert"
#define MSG_ADMIN_KILL		"admin_kill"
#define MSG_ADMIN_AUDIT		"admin_audit"
#define MSG_ADMIN_DEBUG		"admin_debug"
#define MSG_ADMIN_RECORDING	"admin_recording"
#define MSG_PERMISSION_GET	"permission_get"
#define MSG_PERMISSION_SET	"permission_set"
#define MSG_RUN			"run"
#define MSG_FILE_READ		"file_read"
#define MSG_FILE_LIST		"file_list"
#define MSG_FILE_WRITE		"file_write"
#define MSG_FILE_DELETE		"file_delete"
#define MSG_TERMINAL_CREATE	"terminal_create"
#define MSG_TERMINAL_LIST	"terminal_list"
#define MSG_TERMINAL_ATTACH	"terminal_attach"
#define MSG_TERMINAL_DELETE	"terminal_delete"
#define MSG_EGRESS_GET		"egress_get"
#define MSG_EGRESS_SET		"egress_set"
#define MSG_FRONT_INFO		"front_info"
#define MSG_TERMINAL_RESIZED	"terminal_resized"
#define MSG_USER_ADD		"user_add"
#define MSG_USER_DEL		"user_del"
#define MSG_USER_PASSWD		"user_passwd"
#define MSG_USER_LIST		"user_list"
#define MSG_TOKEN_CREATE	"token_create"
#define MSG_TOKEN_LIST		"token_list"
#define MSG_TOKEN_REVOKE	"token_revoke"
#define MSG_SESSION_LIST	"session_list"
#define MSG_SESSION_REVOKE	"session_revoke"
#define MSG_SESSION_REVERT	"session_revert"
#define MSG_AUDIT_VERIFY	"audit_verify"
#define MSG_AUDIT_SHOW		"audit_show"
#define MSG_AUDIT_FLUSH		"audit_flush"
#define MSG_AUDIT_ARCHIVE	"audit_archive"
#define MSG_CONFIG		"config"
#define MSG_AUDIT_REPLAY	"audit_replay"
#define MSG_SPAWN		"spawn"
#define MSG_FILE		"file"
#define MSG_ATTACH		"attach"
#define MSG_HANGUP		"hangup"
#define MSG_KILL_SESSION	"kill_session"
#define MSG_GRANT		"grant"
#define MSG_KILL_USER		"kill_user"
#define MSG_USAGE		"usage"
#define MSG_LIST		"list"
#define MSG_RECORDING		"recording"
#define MSG_PROC_EXITED		"proc_exited"
#define MSG_EGRESS_UPDATE	"egress_update"
#define MSG_EGRESS_LOG		"egress_log"
#define MSG_EGRESS_LISTEN	"egress_listen"
#define MSG_EGRESS_CLOSE	"egress_close"
#define MSG_EVENT		"event"

/* Who is at the other end of a link. */
enum ipc_role {
	ROLE_FRONTD = 1 << 0,
	ROLE_BROKERD = 1 << 1,
	ROLE_SANDBOXD = 1 << 2,
	ROLE_HGCTL = 1 << 3,
	ROLE_EGRESSD = 1 << 4,
};

/*
 * The roles, their names in the hello and what each is: proto_roles
 * (common/proto.c).
 */
struct proto_role {
	enum ipc_role	 role;
	const char	*name;
	const char	*doc;
};
extern const struct proto_role proto_roles[];	/* ended by role 0 */

/*
 * Error codes. Each, its HTTP status (frontd answers it) and when it is
 * answered are one row of proto_errors (common/proto.c), which an error
 * reply's code must be one of.
 */
#define ERR_BAD_REQUEST		"bad_request"		/* 400 */
#define ERR_UNAUTHORIZED	"unauthorized"		/* 401 */
#define ERR_FORBIDDEN		"forbidden"		/* 403 */
#define ERR_NOT_FOUND		"not_found"		/* 404 */
#define ERR_CONFLICT		"conflict"		/* 409 */
#define ERR_GONE		"gone"			/* 410: lost with its host */
#define ERR_MISDIRECTED		"misdirected"		/* 421: another host's */
#define ERR_HOST_DOWN		"host_down"		/* 503: the home host's down */
#define ERR_TOO_LARGE		"too_large"		/* 413 */
#define ERR_NO_SPACE		"no_space"		/* 507: a quota or the disk is full */
#define ERR_RATE_LIMITED	"rate_limited"		/* 429, with retry_after */
#define ERR_INTERNAL		"internal"		/* 500 */
#define ERR_UNAVAILABLE		"unavailable"		/* 503 */

struct proto_error {
	const char	*code;		/* ERR_* */
	int		 status;	/* the HTTP status frontd answers */
	const char	*doc;
};
extern const struct proto_error proto_errors[];	/* ended by a NULL code */
/* The HTTP status of an error code: its row's, 500 for none. */
int	 proto_error_status(const char *code);

/* The kind of a field's value. */
enum proto_kind {
	PK_STRING,	/* a string without NUL, length min..max bytes */
	PK_INT,		/* an integer in min..max */
	PK_BOOL,
	PK_OBJECT,	/* an object, its members checked by sub when set */
	PK_ARRAY,	/* an array of at most max items of anything */
	PK_STRINGS,	/* an array of at most min items, strings of <= max */
	PK_ADDRESS,	/* a numeric IPv4 or IPv6 literal (inet_pton) */
	PK_USER,	/* a hostgate user name (lower case, <= 32 bytes) */
	PK_HEX,		/* exactly max lower-case hex digits (ids, hashes) */
	PK_PATH,	/* a path: no NUL, no control character, <= max bytes */
	PK_ENUM,	/* a string, one of choices */
	PK_ANY,		/* anything; the handler checks it */
};

#define PF_REQ		0x1	/* required (a null value counts as absent) */

/* One field of a message. */
struct proto_field {
	const char			*name;
	enum proto_kind			 kind;
	unsigned			 flags;	/* PF_* */
	long long			 min, max;
	const struct proto_field	*sub;	/* PK_OBJECT: its members */
	const char *const		*choices; /* PK_ENUM: NULL-terminated */
};

#define PM_IDENT	0x1	/* needs an authenticated identity ("auth") */
#define PM_FDS		0x2	/* may carry fds */
#define PM_EVENT	0x4	/* one-way: no id, no reply */
/*
 * Its result travels as a raw body: the datagram is a small JSON envelope
 * {"id", "body": <length>, "user"?}, a NUL, then the result object's JSON
 * text, which the receiver passes on without parsing (proto_check_raw).
 * Errors stay plain JSON replies.
 */
#define PM_RAW		0x8

/* A PM_* flag: its C name, its name in the documentation, its meaning. */
struct proto_flag {
	unsigned	 flag;
	const char	*macro;
	const char	*name;
	const char	*doc;
};
extern const struct proto_flag proto_flags[];	/* ended by flag 0 */

/* One message type: a request or an event, with its reply's schema. */
struct proto_msg {
	const char			*type;
	unsigned			 from;	/* mask of enum ipc_role */
	unsigned			 to;	/* the receiving role */
	unsigned			 flags;	/* PM_* */
	const struct proto_field	*fields;	/* NULL-terminated */
	const struct proto_field	*reply;	/* result; NULL: unchecked */
	const char			*doc;	/* what it does and returns */
};

struct json_object;

/* What every request of frontd may carry (request_id, client, auth). */
extern const struct proto_field proto_front_common[];
/* The one table of every message type, ended by a NULL type. */
extern const struct proto_msg proto_msgs[];

/* The row of type as sent from one role to another, or NULL. */
const struct proto_msg *proto_find(const struct proto_msg *table,
	    const char *type, unsigned from, unsigned to);
/*
 * Check one received message (pure: no socket, no state) against table:
 * its type (a reply when it has none: then 0 and *out NULL), its sender,
 * its id, its fds and its fields. 0 and *out its row, or -1 with err
 * naming the field and why.
 */
int	 proto_check(const struct proto_msg *table, struct json_object *obj,
	    unsigned from, unsigned to, int nfds, const struct proto_msg **out,
	    char *err, size_t errsz);
/* proto_check against the real table, for fuzzing and tests. */
int	 proto_validate(struct json_object *obj, unsigned from, unsigned to,
	    int nfds, char *err, size_t errsz);
/* Check the fields of obj (an object) against fields; 0, or -1 and err. */
int	 proto_check_fields(const struct proto_field *fields,
	    struct json_object *obj, char *err, size_t errsz);
/* Check a reply's result against the reply schema of msg; 0 or -1, err. */
int	 proto_check_reply(const struct proto_msg *msg,
	    struct json_object *reply, char *err, size_t errsz);
/*
 * Check a raw-body reply (PM_RAW): the envelope env (its "id" already
 * matched) and the body of len bytes: "body" is len, the text is framed as
 * a JSON object and holds no NUL. 0, or -1 with err.
 */
int	 proto_check_raw(struct json_object *env, const char *body, size_t len,
	    char *err, size_t errsz);
/* The name of a field kind, for messages and the documentation. */
const char *proto_kind_name(enum proto_kind);

#endif
