/*
 * The one definition of hostgate's messages: every type, who sends it, who
 * receives it, whether it needs an authenticated identity, may carry fds
 * or is one-way, its fields with their kinds and limits, and for requests
 * whose answers are passed on, the schema of the reply. common/ipc.c
 * checks every message against this table before any handler runs; each
 * daemon's handler map must match it (checked at start). The roles, the
 * flags of a row and the error codes are defined here too, and
 * docs/protocol.md's sections about all of them are generated from this
 * file (build/hg-protodoc).
 */
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

#define F_STR(n, fl, lo, hi)	{ n, PK_STRING, fl, lo, hi, NULL, NULL }
#define F_ENUM(n, fl, ch)	{ n, PK_ENUM, fl, 0, 0, NULL, ch }
#define F_INT(n, fl, lo, hi)	{ n, PK_INT, fl, lo, hi, NULL, NULL }
#define F_BOOL(n, fl)		{ n, PK_BOOL, fl, 0, 0, NULL, NULL }
#define F_OBJ(n, fl, sub)	{ n, PK_OBJECT, fl, 0, 0, sub, NULL }
#define F_ARR(n, fl, hi)	{ n, PK_ARRAY, fl, 0, hi, NULL, NULL }
#define F_STRS(n, fl, items, len) { n, PK_STRINGS, fl, items, len, NULL, NULL }
#define F_ADDR(n, fl)		{ n, PK_ADDRESS, fl, 0, 0, NULL, NULL }
#define F_USER(n, fl)		{ n, PK_USER, fl, 0, 0, NULL, NULL }
#define F_HEX(n, fl, digits)	{ n, PK_HEX, fl, digits, digits, NULL, NULL }
#define F_PATH(n, fl, hi)	{ n, PK_PATH, fl, 0, hi, NULL, NULL }
#define F_ANY(n, fl)		{ n, PK_ANY, fl, 0, 0, NULL, NULL }
#define F_END			{ NULL, 0, 0, 0, 0, NULL, NULL }

#define R		PF_REQ
#define O		0
/*
 * The integer bounds. Each is what the receiver takes, no more: a
 * configuration limit (common/config.c) where one applies, the range of
 * the C type the sender counts in, or for counters, sequence numbers and
 * byte totals, the largest integer a JavaScript client reads exactly.
 */
#define WALL_S_MAX	253402300799LL	/* 9999-12-31T23:59:59Z, Unix seconds */
#define WALL_MS_MAX	(WALL_S_MAX * 1000 + 999)	/* the same in ms */
/* HOSTGATE_COMMAND_TIMEOUT_MAX_SECONDS at most (config.c) */
#define TIMEOUT_S_MAX	86400
/* HOSTGATE_OUTPUT_CAP_BYTES at most (config.c): a stream's cap */
#define OUTPUT_CAP_MAX	16777216
/* HOSTGATE_MAX_UPLOAD_BYTES at most (config.c): a file written */
#define UPLOAD_MAX	(1LL << 40)
/* HOSTGATE_RECORDING_MAX_BYTES at most (config.c): a recording */
#define RECORDING_MAX	4294967296LL
/* audit records in one audit_show reply (brokerd/control.c) */
#define AUDIT_PAGE_MAX	500
/* entries of one listing (sandboxd/fileops.c) */
#define FILE_LIST_MAX	10000
#define UID_MAX		4294967294LL
#define TEXT_MAX	256	/* a query's value, as frontd takes it */

/*
 * The values of the enumerated fields, each list NULL-terminated. A value
 * not in its list is refused before any handler runs, which therefore
 * never checks it again.
 */
/* An execution mode. */
static const char *const c_mode[] = { "sandbox", "direct", NULL };
/* A permission profile (sandboxd/argv.c, brokerd/session.c). */
static const char *const c_permission[] = { "read-only", "workspace-write",
	"workspace-write+network", "workspace-write+allowlist",
	"read-only+allowlist", NULL };
/* What ran a spawn: a sandbox backend (sandboxd/backend.c), or none. */
static const char *const c_backend[] = { "bwrap", "sandbox-exec", "wsl2",
	"docker", "direct", NULL };
/* What a spawn runs. */
static const char *const c_spawn_kind[] = { "command", "terminal", NULL };
/* The language of a run's code (none: a shell command). */
static const char *const c_lang[] = { "python", NULL };
/* A workspace file operation (sandboxd/files.c). */
static const char *const c_file_op[] = { "read", "list", "write", "mkdir",
	"delete", NULL };
/* Whose egress additions: a user's or a login session's. */
static const char *const c_egress_scope[] = { "user", "session", NULL };
/* egressd's record: one connection attempt, or a minute's summary. */
static const char *const c_egress_kind[] = { "connect", "summary", NULL };
static const char *const c_egress_verdict[] = { "allowed", "refused", NULL };
/* An audit query's decision ("denied", an old name of "refused"). */
static const char *const c_decision[] = { "allowed", "refused", "denied",
	NULL };
/* The events brokerd sends frontd's streams. */
static const char *const c_event[] = { "mode_changed", "mode_expiring",
	"mode_reverted", "permission_changed", "session_ended",
	"terminal_exited", "token_revoked", NULL };

/*
 * The error codes: each code, the HTTP status frontd answers it with, and
 * when it is answered. An error reply's code is one of them (c_error).
 */
#define PROTO_ERRORS(E) \
	E(ERR_BAD_REQUEST, 400, "a malformed request: a field the protocol " \
	    "table refuses (the message names it and why), or a value its " \
	    "handler refuses") \
	E(ERR_UNAUTHORIZED, 401, "no credentials, or ones that are wrong, " \
	    "expired or revoked") \
	E(ERR_FORBIDDEN, 403, "the identity may not do this: a token asking " \
	    "for an admin's or a login session's request, a missing CSRF " \
	    "token, a profile or mode refused by policy") \
	E(ERR_NOT_FOUND, 404, "no such user, session, token, terminal, " \
	    "recording or file, or one of another user") \
	E(ERR_CONFLICT, 409, "the state forbids it: a user or uid that " \
	    "exists, direct mode on the docker runtime") \
	E(ERR_GONE, 410, "a terminal lost with its host (another hostgate " \
	    "of the fleet, now gone)") \
	E(ERR_MISDIRECTED, 421, "a terminal served by another host of the " \
	    "fleet, or a request needing the workspace of a user whose home " \
	    "is another host that is up (the message names it)") \
	E(ERR_HOST_DOWN, 503, "a request needing the workspace of a user " \
	    "whose home host is down, stopped or lost: the message names the " \
	    "host and since when; nothing was done, and no other host " \
	    "serves it") \
	E(ERR_TOO_LARGE, 413, "a body, an upload or a command over its limit") \
	E(ERR_NO_SPACE, 507, "the user's disk quota, or the disk, is full") \
	E(ERR_RATE_LIMITED, 429, "over a rate limit; `retry_after` says in " \
	    "how many seconds to try again (HTTP `Retry-After`)") \
	E(ERR_INTERNAL, 500, "a daemon's own failure, or a reply that did " \
	    "not match its schema") \
	E(ERR_UNAVAILABLE, 503, "the next daemon, the backend, the store or " \
	    "the audit log cannot be reached or written: nothing was done")

#define E_CODE(code, status, doc)	code,
#define E_ROW(code, status, doc)	{ code, status, doc },
/* An error reply's code. */
static const char *const c_error[] = { PROTO_ERRORS(E_CODE) NULL };
const struct proto_error proto_errors[] = {
	PROTO_ERRORS(E_ROW) { NULL, 0, NULL }
};
#undef E_CODE
#undef E_ROW

/* The HTTP status of an error code: its row's, 500 for none. */
int
proto_error_status(const char *code)
{
	const struct proto_error	*e;

	for (e = proto_errors; code != NULL && e->code != NULL; e++)
		if (strcmp(e->code, code) == 0)
			return e->status;
	return 500;
}

/* The roles: the name each says in its hello, and what it is. */
const struct proto_role proto_roles[] = {
	{ ROLE_FRONTD, "frontd", "the HTTP, WebSocket and SSE front: passes "
	    "the client's raw credentials and requests on to brokerd; never "
	    "forks or execs" },
	{ ROLE_BROKERD, "brokerd", "users, sessions, tokens, policy, TTLs, "
	    "rate limits and the audit log: decides every request" },
	{ ROLE_SANDBOXD, "sandboxd", "the only process that execs: "
	    "backends, ptys, cgroups, limits and workspace files" },
	{ ROLE_HGCTL, "hgctl", "the operators' command line, on brokerd's "
	    "control socket" },
	{ ROLE_EGRESSD, "egressd", "the egress proxy of the allowlist "
	    "profiles, their one way out, linked to sandboxd" },
	{ 0, NULL, NULL }
};

/* The flags of a row, by their C names and their names in the docs. */
#define FLAG(f, name, doc)	{ f, #f, name, doc }
const struct proto_flag proto_flags[] = {
	FLAG(PM_IDENT, "identity", "the request needs an authenticated "
	    "identity from its `auth` (brokerd then checks the finer needs: "
	    "a login session, CSRF, an admin)"),
	FLAG(PM_FDS, "fds", "it may carry fds (`SCM_RIGHTS`); a message of "
	    "any other type that carries fds is refused and its fds closed"),
	FLAG(PM_EVENT, "one-way", "it has no `id` and no reply"),
	FLAG(PM_RAW, "raw", "its result comes as a raw body (see Framing), "
	    "which frontd sends to the client as it came"),
	{ 0, NULL, NULL, NULL }
};
#undef FLAG

/* frontd's credentials for brokerd to check: each member when present. */
static const struct proto_field f_auth[] = {
	F_STR("cookie", O, 0, 512),
	F_STR("bearer", O, 0, 512),
	F_STR("csrf", O, 0, 512),
	F_END
};

/*
 * What every request of frontd may carry: its request id (not trusted: a
 * malformed one is replaced, front.c), the client's address and the raw
 * credentials.
 */
#define FRONT_COMMON \
	F_ANY("request_id", O), \
	F_ADDR("client", O), \
	F_OBJ("auth", O, f_auth)

const struct proto_field proto_front_common[] = { FRONT_COMMON, F_END };
#define f_front proto_front_common
static const struct proto_field f_health[] = { F_ANY("request_id", O), F_END };
static const struct proto_field f_login[] = {
	F_ANY("request_id", O),
	F_ADDR("client", R),
	F_STR("username", R, 0, TEXT_MAX),
	F_STR("password", R, 0, 4096),
	F_END
};
static const struct proto_field f_mode_set[] = {
	FRONT_COMMON, F_ENUM("mode", R, c_mode), F_END
};
static const struct proto_field f_events_subscribe[] = {
	FRONT_COMMON, F_INT("last_event_id", O, 0, PROTO_COUNT_MAX), F_END
};
static const struct proto_field f_session[] = {
	FRONT_COMMON, F_HEX("session", R, 32), F_END
};
/* A terminal: its 16 hex digits, and the host its id named, if any. */
static const struct proto_field f_terminal[] = {
	FRONT_COMMON, F_HEX("terminal", R, 16), F_STR("host", O, 1, 32), F_END
};
/* The filters of an audit query (audit_filter_parse reads the values). */
#define AUDIT_FILTERS \
	F_STR("user", O, 0, TEXT_MAX), \
	F_STR("action", O, 0, TEXT_MAX), \
	F_STR("session", O, 0, TEXT_MAX), \
	F_STR("record_request_id", O, 0, TEXT_MAX), \
	F_ENUM("decision", O, c_decision), \
	F_STR("since", O, 0, TEXT_MAX), \
	F_STR("until", O, 0, TEXT_MAX)
static const struct proto_field f_admin_audit[] = {
	FRONT_COMMON, AUDIT_FILTERS, F_INT("limit", O, 1, 10000), F_END
};
static const struct proto_field f_admin_recording[] = {
	FRONT_COMMON,
	F_HEX("recording", R, 16),
	F_INT("offset", O, 0, RECORDING_MAX),
	F_END
};
static const struct proto_field f_permission_set[] = {
	FRONT_COMMON, F_ENUM("permission", R, c_permission), F_END
};
static const struct proto_field f_run[] = {
	FRONT_COMMON,
	F_STR("command", O, 0, 32 * 1024),
	F_ENUM("lang", O, c_lang),
	F_STR("code", O, 0, 32 * 1024),
	F_PATH("cwd", O, 4096),
	F_INT("timeout", O, 1, TIMEOUT_S_MAX),
	F_OBJ("env", O, NULL),
	F_END
};
/* The workspace file API: a path relative to the workspace, "" its root. */
static const struct proto_field f_file_path[] = {
	FRONT_COMMON, F_PATH("path", R, 4096), F_END
};
static const struct proto_field f_file_write[] = {
	FRONT_COMMON,
	F_PATH("path", R, 4096),
	F_INT("size", R, 0, UPLOAD_MAX),
	F_BOOL("dir", O),
	F_BOOL("check", O),
	F_END
};
/* What every file reply carries: the session's current constraints. */
#define FILE_REPLY \
	F_PATH("path", R, 4096), \
	F_ENUM("mode", R, c_mode), \
	F_ENUM("permission", R, c_permission)
static const struct proto_field r_file_read[] = {
	FILE_REPLY,
	F_INT("size", R, 0, PROTO_COUNT_MAX),
	F_INT("mtime", R, -PROTO_COUNT_MAX, PROTO_COUNT_MAX),
	F_END
};
static const struct proto_field r_file_list[] = {
	FILE_REPLY,
	F_INT("count", R, 0, FILE_LIST_MAX),
	F_BOOL("truncated", R),
	F_END
};
static const struct proto_field r_file_write[] = {
	FILE_REPLY,
	F_INT("size", O, 0, UPLOAD_MAX),
	F_INT("mtime", O, -PROTO_COUNT_MAX, PROTO_COUNT_MAX),
	F_BOOL("created", R),
	F_BOOL("check", O),
	F_END
};
static const struct proto_field r_file_delete[] = {
	FILE_REPLY, F_BOOL("deleted", R), F_END
};
static const struct proto_field f_terminal_create[] = {
	FRONT_COMMON, F_INT("cols", O, 2, 1000), F_INT("rows", O, 2, 1000),
	F_END
};
static const struct proto_field f_front_info[] = {
	F_STR("version", O, 0, 64), F_INT("started", O, 0, WALL_S_MAX), F_END
};
static const struct proto_field f_session_token[] = {
	FRONT_COMMON, F_HEX("token", R, 16), F_END
};
static const struct proto_field f_terminal_resized[] = {
	F_HEX("terminal", R, 16), F_END
};
/*
 * An admin's egress additions: scope "user" or "session", target the user
 * name or session id, allow the patterns that replace that list.
 */
#define EGRESS_SET \
	F_ENUM("scope", R, c_egress_scope), \
	F_STR("target", R, 1, 64), \
	F_STRS("allow", R, EGRESS_ADDITIONS_MAX, 256)
static const struct proto_field f_egress_set_front[] = {
	FRONT_COMMON, EGRESS_SET, F_END
};
static const struct proto_field f_egress_set[] = { EGRESS_SET, F_END };

/* hgctl's requests. */
static const struct proto_field f_user_add[] = {
	F_USER("name", R),
	F_STR("password", O, 1, 4096),
	F_STR("hash", O, 1, 255),
	F_BOOL("admin", O),
	F_USER("unix_user", O),
	F_INT("uid", O, 0, UID_MAX),
	F_INT("gid", O, 0, UID_MAX),
	F_END
};
static const struct proto_field f_user_name[] = { F_USER("name", R), F_END };
static const struct proto_field f_user_passwd[] = {
	F_USER("name", R), F_STR("password", R, 1, 4096), F_END
};
static const struct proto_field f_token_create[] = {
	F_USER("user", R), F_END
};
static const struct proto_field f_token_revoke[] = {
	F_HEX("token", R, 16), F_END
};
/* A page of a list: after the id "after", at most "limit" items. */
static const struct proto_field f_token_page[] = {
	F_HEX("after", O, 16), F_INT("limit", O, 1, 1000), F_END
};
static const struct proto_field f_session_page[] = {
	F_HEX("after", O, 32), F_INT("limit", O, 1, 1000), F_END
};
static const struct proto_field f_session_id[] = {
	F_HEX("session", R, 32), F_END
};
static const struct proto_field f_audit_verify[] = {
	F_INT("head_seq", O, 1, PROTO_COUNT_MAX), F_HEX("head_hash", O, 64), F_END
};
static const struct proto_field f_audit_show[] = {
	AUDIT_FILTERS,
	F_INT("limit", O, 1, AUDIT_PAGE_MAX),
	F_INT("before_seq", O, 0, PROTO_COUNT_MAX),
	F_END
};
/* audit_archive: before an ISO 8601 time, to an absolute directory. */
static const struct proto_field f_audit_archive[] = {
	F_STR("before", R, 1, 64), F_PATH("to", O, 4096), F_END
};
static const struct proto_field f_audit_replay[] = {
	F_HEX("recording", R, 16), F_INT("offset", O, 0, RECORDING_MAX), F_END
};
static const struct proto_field f_none[] = { F_END };

/*
 * The egress proxy's messages (sandboxd/egress.c, egressd): an admin's
 * additions to the allowlist, replaced per user or session, and
 * egressd's record of each connection (or a minute's summary).
 */
#define EGRESS_ITEMS	1024	/* patterns in one list */
#define EGRESS_NAME_MAX	256	/* bytes of a pattern or host */
static const struct proto_field f_egress_update[] = {
	F_USER("user", R),
	F_HEX("session", O, 32),
	F_ENUM("scope", R, c_egress_scope),
	F_STRS("allow", R, EGRESS_ITEMS, EGRESS_NAME_MAX),
	F_END
};
static const struct proto_field f_egress_log[] = {
	F_ENUM("kind", R, c_egress_kind),
	F_HEX("spawn", R, 16),
	F_USER("user", R),
	F_HEX("session", O, 32),
	F_STR("host", R, 0, EGRESS_NAME_MAX),
	F_INT("port", R, 0, 65535),
	F_STR("addr", O, 0, 64),
	F_ENUM("verdict", R, c_egress_verdict),
	F_STR("reason", O, 0, 512),
	F_INT("bytes_up", R, 0, PROTO_COUNT_MAX),
	F_INT("bytes_down", R, 0, PROTO_COUNT_MAX),
	F_INT("duration_ms", R, 0, PROTO_COUNT_MAX),
	F_INT("count", R, 1, PROTO_COUNT_MAX),
	F_INT("since_ms", O, 0, WALL_MS_MAX),
	F_END
};
static const struct proto_field f_egress_listen[] = {
	F_HEX("spawn", R, 16),
	F_USER("user", R),
	F_HEX("session", O, 32),
	F_STRS("allow_user", O, EGRESS_ITEMS, EGRESS_NAME_MAX),
	F_STRS("allow_session", O, EGRESS_ITEMS, EGRESS_NAME_MAX),
	F_END
};
static const struct proto_field f_egress_close[] = {
	F_HEX("spawn", R, 16), F_END
};

/* brokerd's requests to sandboxd. */
static const struct proto_field f_spawn[] = {
	F_ENUM("kind", R, c_spawn_kind),
	F_ENUM("mode", R, c_mode),
	F_ENUM("permission", R, c_permission),
	F_USER("user", R),
	F_HEX("session", O, 32),
	F_HEX("request_id", O, LOG_REQUEST_ID_LEN),
	F_STRS("argv", R, 64, IPC_MAX_MSG),
	F_STRS("env", O, 64, IPC_MAX_MSG),
	F_PATH("cwd", O, 4096),
	F_INT("timeout_ms", O, 1, TIMEOUT_S_MAX * 1000),
	F_INT("output_cap", O, 1, OUTPUT_CAP_MAX),
	F_INT("cols", O, 1, 1000),
	F_INT("rows", O, 1, 1000),
	F_STR("term", O, 1, 64),
	F_INT("uid", O, 0, UID_MAX),
	F_INT("gid", O, 0, UID_MAX),
	F_INT("deadline_ms", O, 0, WALL_MS_MAX),
	/* allowlist profiles: an admin's additions for the user, session */
	F_STRS("egress_user", O, EGRESS_ITEMS, EGRESS_NAME_MAX),
	F_STRS("egress_session", O, EGRESS_ITEMS, EGRESS_NAME_MAX),
	F_END
};
/* A workspace file operation (sandboxd/files.c), path relative to it. */
static const struct proto_field f_file[] = {
	F_ENUM("op", R, c_file_op),
	F_USER("user", R),
	F_PATH("path", R, 4096),
	F_INT("size", O, 0, UPLOAD_MAX),
	F_INT("uid", O, 0, UID_MAX),
	F_INT("gid", O, 0, UID_MAX),
	F_HEX("session", O, 32),
	F_HEX("request_id", O, LOG_REQUEST_ID_LEN),
	F_END
};
static const struct proto_field f_proc[] = {
	F_HEX("proc", R, 16), F_HEX("request_id", O, LOG_REQUEST_ID_LEN), F_END
};
static const struct proto_field f_kill_session[] = {
	F_HEX("session", R, 32), F_ENUM("mode", R, c_mode), F_END
};
static const struct proto_field f_grant[] = {
	F_HEX("session", R, 32),
	F_USER("user", R),
	F_INT("deadline_ms", R, 0, WALL_MS_MAX),
	F_HEX("request_id", O, LOG_REQUEST_ID_LEN),
	F_END
};
static const struct proto_field f_user[] = {
	F_USER("user", R), F_HEX("request_id", O, LOG_REQUEST_ID_LEN), F_END
};
static const struct proto_field f_recording[] = {
	F_HEX("recording", R, 16), F_HEX("request_id", O, LOG_REQUEST_ID_LEN),
	F_END
};

/* An allowlist spawn's attempts past the proxy (the kernel's counters). */
static const struct proto_field f_egress_bypass[] = {
	F_INT("ipv4_no_route", R, 0, PROTO_COUNT_MAX),
	F_INT("ipv6_no_route", R, 0, PROTO_COUNT_MAX),
	F_INT("udp_no_ports", R, 0, PROTO_COUNT_MAX),
	F_END
};

/* sandboxd's replies, checked before brokerd uses them or passes them on. */
static const struct proto_field r_health[] = {
	F_OBJ("backend", R, NULL),
	F_OBJ("containment", O, NULL),
	F_STR("version", O, 0, 64),
	F_INT("started", O, 0, WALL_S_MAX),
	F_OBJ("egress", O, NULL),
	F_END
};
static const struct proto_field r_spawn[] = {
	F_HEX("id", R, 16),
	F_INT("exit_code", O, 0, 255),
	F_INT("signal", O, 1, 128),
	F_BOOL("truncated", O),
	F_BOOL("timed_out", O),
	F_BOOL("oom", O),
	F_INT("duration_ms", O, 0, PROTO_COUNT_MAX),
	F_INT("stdout_len", O, 0, OUTPUT_CAP_MAX),
	F_INT("stderr_len", O, 0, OUTPUT_CAP_MAX),
	F_ENUM("mode", R, c_mode),
	F_ENUM("backend", O, c_backend),
	F_STR("sha256", O, 0, 64),
	F_OBJ("container", O, NULL),
	F_OBJ("egress_bypass", O, f_egress_bypass),
	F_END
};
static const struct proto_field r_file[] = {
	F_INT("size", O, 0, PROTO_COUNT_MAX),
	F_INT("mtime", O, -PROTO_COUNT_MAX, PROTO_COUNT_MAX),
	F_BOOL("created", O),
	F_INT("count", O, 0, FILE_LIST_MAX),
	F_BOOL("truncated", O),
	F_BOOL("deleted", O),
	F_END
};
static const struct proto_field r_killed[] = {
	F_INT("killed", R, 0, INT_MAX), F_END
};
static const struct proto_field r_kill_user[] = {
	F_INT("killed", R, 0, INT_MAX), F_INT("processes", O, -1, INT_MAX),
	F_END
};
static const struct proto_field r_usage[] = {
	F_OBJ("memory", O, NULL),
	F_OBJ("pids", O, NULL),
	F_OBJ("disk", O, NULL),
	F_INT("oom_kills", O, 0, PROTO_COUNT_MAX),
	F_END
};
static const struct proto_field r_list[] = {
	F_ARR("procs", R, 100000), F_ARR("grants", O, 100000), F_END
};

/* sandboxd's requests to brokerd, and brokerd's events to frontd. */
static const struct proto_field f_proc_exited[] = {
	F_HEX("proc", R, 16),
	F_INT("status", O, -1, 0xffff),
	F_BOOL("oom", O),
	F_OBJ("recording", O, NULL),
	F_OBJ("egress_bypass", O, f_egress_bypass),
	F_END
};
static const struct proto_field f_event[] = {
	F_INT("seq", R, 0, PROTO_COUNT_MAX),
	F_ENUM("event", R, c_event),
	F_USER("user", O),
	F_HEX("session", O, 32),
	F_HEX("token", O, 64),
	F_ANY("data", O),
	F_END
};

#define FB	ROLE_FRONTD, ROLE_BROKERD
#define HB	ROLE_HGCTL, ROLE_BROKERD
#define BS	ROLE_BROKERD, ROLE_SANDBOXD
#define SB	ROLE_SANDBOXD, ROLE_BROKERD
#define BF	ROLE_BROKERD, ROLE_FRONTD
#define SE	ROLE_SANDBOXD, ROLE_EGRESSD
#define ES	ROLE_EGRESSD, ROLE_SANDBOXD

const struct proto_msg proto_msgs[] = {
	/* frontd -> brokerd */
	{ MSG_HEALTH, FB, 0, f_health, NULL,
	    "health of brokerd, sandboxd and its backend: `{brokerd: {ok, "
	    "reason}, sandboxd: {ok, reason}, backend: {name, ok, reason}}`" },
	{ MSG_LOGIN, FB, 0, f_login, NULL,
	    "verify a password, rate limited per user and per client address: "
	    "`{user, role, csrf_token, cookie, max_age}`, and in a fleet "
	    "`home`, the user's home host (frontd's `HGHOST` cookie)" },
	{ MSG_LOGOUT, FB, PM_IDENT, f_front, NULL,
	    "end the login session (+ CSRF) and its tokens: `{}`" },
	{ MSG_STATUS, FB, PM_IDENT | PM_RAW, f_front, NULL,
	    "who the caller is: `{user, role, auth, runtime, backend, "
	    "execution_mode, permission, uid, containment, limits, usage, "
	    "usage_reason}`" },
	{ MSG_TOKEN_MINT, FB, PM_IDENT, f_front, NULL,
	    "an agent token bound to the login session (+ CSRF): `{token, id}`" },
	{ MSG_SESSION_TOKENS, FB, PM_IDENT, f_front, NULL,
	    "the agent tokens bound to the login session, never their "
	    "secrets: `{tokens: [{id, created}]}`" },
	{ MSG_SESSION_TOKEN_REVOKE, FB, PM_IDENT, f_session_token, NULL,
	    "revoke an agent token bound to the login session (+ CSRF; "
	    "`not_found` for any other id): `{id, revoked}`" },
	{ MSG_MODE_GET, FB, PM_IDENT | PM_RAW, f_front, NULL,
	    "the execution-mode object" },
	{ MSG_MODE_SET, FB, PM_IDENT, f_mode_set, NULL,
	    "change the execution mode (+ CSRF; direct only for an admin "
	    "session on the host runtime): the execution-mode object" },
	{ MSG_EVENTS_SUBSCRIBE, FB, PM_IDENT, f_events_subscribe, NULL,
	    "an event stream: `{user, session, missed: [event...], complete, "
	    "last}`" },
	{ MSG_PROMPT, FB, PM_IDENT | PM_RAW, f_front, NULL,
	    "`{prompt, mode, permission, workspace, network, expires_at, "
	    "remaining_seconds}`, and in a fleet `home`, the host holding "
	    "the workspace (named in the prompt too)" },
	{ MSG_ADMIN_SESSIONS, FB, PM_IDENT | PM_RAW, f_front, NULL,
	    "every session (admin login session): see docs/api.md" },
	{ MSG_ADMIN_REVERT, FB, PM_IDENT, f_session, NULL,
	    "a session back to the sandbox (admin login session + CSRF): `{}`" },
	{ MSG_ADMIN_KILL, FB, PM_IDENT, f_terminal, NULL,
	    "kill any user's terminal (admin login session + CSRF): `{}`" },
	{ MSG_ADMIN_AUDIT, FB, PM_IDENT | PM_RAW, f_admin_audit, NULL,
	    "audit records (admin login session): `{records, truncated}`" },
	{ MSG_ADMIN_DEBUG, FB, PM_IDENT | PM_RAW, f_front, NULL,
	    "versions, uptime, backend, configuration and counters (admin "
	    "login session)" },
	{ MSG_ADMIN_RECORDING, FB, PM_IDENT, f_admin_recording, NULL,
	    "a terminal recording, in pieces (admin login session): `{data, "
	    "next, eof}`" },
	{ MSG_PERMISSION_GET, FB, PM_IDENT | PM_RAW, f_front, NULL,
	    "`{permission}` of the caller's session" },
	{ MSG_PERMISSION_SET, FB, PM_IDENT, f_permission_set, NULL,
	    "set the login session's permission profile (+ CSRF): "
	    "`{permission}`" },
	{ MSG_RUN, FB, PM_IDENT | PM_FDS, f_run, NULL,
	    "run a command, or Python (`lang`) whose code comes as the stdin "
	    "memfd, sealed against write, grow and shrink (+ CSRF for "
	    "cookies): the command's result with stdout and stderr as two "
	    "memfds" },
	{ MSG_FILE_READ, FB, PM_IDENT, f_file_path, r_file_read,
	    "a workspace file (sandboxd resolves `path` beneath the workspace, "
	    "as the user): `{path, size, mtime, mode, permission}` with the "
	    "file as an O_RDONLY fd" },
	{ MSG_FILE_LIST, FB, PM_IDENT, f_file_path, r_file_list,
	    "a workspace directory's listing: `{path, count, truncated, mode, "
	    "permission}` with a memfd holding the listing JSON object (the "
	    "HTTP body of `GET /api/files/{dir}/`)" },
	{ MSG_FILE_WRITE, FB, PM_IDENT | PM_FDS, f_file_write, r_file_write,
	    "write a workspace file atomically from the content memfd of "
	    "exactly `size` bytes, or with `dir` make a directory (+ CSRF for "
	    "cookies; refused under read-only; audited): `{path, size, mtime, "
	    "created, mode, permission}`; with `check` and no fd, only whether "
	    "it would be taken, asked before the body is read (a refusal "
	    "audited, nothing written): `{path, size, created: false, check: "
	    "true, mode, permission}`" },
	{ MSG_FILE_DELETE, FB, PM_IDENT, f_file_path, r_file_delete,
	    "delete a file, a symlink or an empty directory of the workspace "
	    "(+ CSRF for cookies; refused under read-only; audited): `{path, "
	    "deleted, mode, permission}`" },
	{ MSG_TERMINAL_CREATE, FB, PM_IDENT, f_terminal_create, NULL,
	    "a terminal (+ CSRF for cookies): `{id, mode, backend}`" },
	{ MSG_TERMINAL_LIST, FB, PM_IDENT | PM_RAW, f_front, NULL,
	    "`{terminals: [...]}`" },
	{ MSG_TERMINAL_ATTACH, FB, PM_IDENT, f_terminal, NULL,
	    "the owner's terminal: `{}` with the pty master as an fd" },
	{ MSG_TERMINAL_DELETE, FB, PM_IDENT, f_terminal, NULL,
	    "end the owner's terminal (+ CSRF for cookies): `{}`" },
	{ MSG_EGRESS_GET, FB, PM_IDENT, f_front, NULL,
	    "the egress allowlist and its additions (admin login session): "
	    "`{allow, deny, ports, deny_nets, allow_nets, users: {NAME: [..]}, "
	    "sessions: {ID: [..]}}`" },
	{ MSG_EGRESS_SET, FB, PM_IDENT, f_egress_set_front, NULL,
	    "replace a user's (`scope` user, `target` the name) or a login "
	    "session's (`scope` session, `target` its id) egress additions "
	    "(admin login session + CSRF; audited `egress_allow`): `{scope, "
	    "target, allow}`" },
	{ MSG_FRONT_INFO, FB, PM_EVENT, f_front_info, NULL,
	    "right after the hello: frontd's version and start (Unix seconds), "
	    "shown by `hgctl status`, never trusted for anything" },
	{ MSG_TERMINAL_RESIZED, FB, PM_EVENT, f_terminal_resized, NULL,
	    "frontd resized a terminal's pty: counted into its "
	    "`terminal_exited` record" },

	/* hgctl -> brokerd */
	{ MSG_USER_ADD, HB, 0, f_user_add, NULL,
	    "add a user with a `password` or a `hash` (an argon2id encoded "
	    "hash, stored as it is; one of the two, else `bad_request`; "
	    "`unix_user` needs its `uid` and `gid`, which hgctl looks up): "
	    "`{uid, gid}` (in a fleet also `home`, the host it was placed "
	    "on); `conflict` for root, a daemon's uid, a uid another user "
	    "has" },
	{ MSG_USER_DEL, HB, 0, f_user_name, NULL,
	    "delete a user, its sessions and tokens: `{}`" },
	{ MSG_USER_PASSWD, HB, 0, f_user_passwd, NULL,
	    "set a password; the user's sessions and tokens end: `{}`" },
	{ MSG_USER_LIST, HB, 0, f_none, NULL,
	    "`{items: [{name, role, created, uid, gid, unix_user}]}`; in a "
	    "fleet each also `home`, the user's home host (null until "
	    "placed)" },
	{ MSG_TOKEN_CREATE, HB, 0, f_token_create, NULL,
	    "a standalone agent token: `{id, token, user}`" },
	{ MSG_TOKEN_LIST, HB, 0, f_token_page, NULL,
	    "a page of the live tokens in id order, those after the id "
	    "`after` (none: from the first), at most `limit` (1000 without "
	    "one) and no more than one datagram holds: `{items: [{id, user, "
	    "session_id, created}], next}`; `next`, the page's last id, is "
	    "the next page's `after`, absent on the last page" },
	{ MSG_TOKEN_REVOKE, HB, 0, f_token_revoke, NULL,
	    "revoke a token by its id: `{}`" },
	{ MSG_SESSION_LIST, HB, 0, f_session_page, NULL,
	    "a page of the live sessions, paged as `token_list`: `{items: "
	    "[{id, user, created, last_seen, expires, mode, expires_at, "
	    "remaining_seconds}], next}`" },
	{ MSG_SESSION_REVOKE, HB, 0, f_session_id, NULL,
	    "end a login session: `{}`" },
	{ MSG_SESSION_REVERT, HB, 0, f_session_id, NULL,
	    "a session back to the sandbox: `{}`" },
	{ MSG_AUDIT_VERIFY, HB, 0, f_audit_verify, NULL,
	    "check the audit chain (up to a known head `head_seq` with "
	    "`head_hash`): `{ok, records, last_seq, bad_seq, error}`" },
	{ MSG_AUDIT_SHOW, HB, 0, f_audit_show, NULL,
	    "audit records, newest last, paged backwards by `before_seq`: "
	    "`{items: [record...], more}`" },
	{ MSG_AUDIT_FLUSH, HB, 0, f_none, NULL,
	    "write the counted refused requests now: `{records}`" },
	{ MSG_AUDIT_ARCHIVE, HB, 0, f_audit_archive, NULL,
	    "move the rotated audit files whose records are all older than "
	    "`before` (ISO 8601) to `to` (default STATE_DIR/audit-archive), "
	    "after an `audit_archived` record naming them; refused with a "
	    "PostgreSQL store: `{anchor_seq, to, files, first_seq, last_seq, "
	    "last_hash}`, `anchor_seq` null when nothing was old enough" },
	{ MSG_STATUS, HB, 0, f_none, NULL,
	    "`{state, problems, daemons: {brokerd, sandboxd, frontd}, runtime, "
	    "backend, direct_sessions, audit: {seq, hash}, containment, "
	    "limits}`; sandboxd is asked `health` afresh" },
	{ MSG_CONFIG, HB, 0, f_none, NULL,
	    "`{source: \"brokerd\", pid, env_file, config: {NAME: value}}`, "
	    "secrets masked" },
	{ MSG_EGRESS_GET, HB, 0, f_none, NULL,
	    "as frontd's `egress_get`" },
	{ MSG_EGRESS_SET, HB, 0, f_egress_set, NULL,
	    "as frontd's `egress_set` (audited with `by` hgctl)" },
	{ MSG_AUDIT_REPLAY, HB, 0, f_audit_replay, NULL,
	    "up to 24 KiB of a recording from `offset`: `{data, next, eof}`" },

	/* brokerd -> sandboxd */
	{ MSG_HEALTH, BS, 0, f_none, r_health,
	    "`{backend: {name, ok, reason}, version, started, containment, "
	    "egress: {ok, reason}}` (egress: whether egressd is linked); the "
	    "backend is probed again when the last probe is older than 30 s" },
	{ MSG_SPAWN, BS, PM_FDS, f_spawn, r_spawn,
	    "run an approved spawn (`kind` command or terminal), stdin as an "
	    "fd: commands when done `{id, exit_code, signal, truncated, "
	    "timed_out, oom, duration_ms, stdout_len, stderr_len, mode, "
	    "backend, sha256}` with two memfds; terminals at once `{id, mode, "
	    "backend}`" },
	{ MSG_FILE, BS, PM_FDS, f_file, r_file,
	    "a workspace file operation as the user's uid (`op` read, list, "
	    "write with the content memfd of `size` bytes, mkdir, delete): "
	    "read `{size, mtime}` with the file's fd, list `{count, "
	    "truncated}` with a memfd of the listing, write and mkdir "
	    "`{size, mtime, created}`, delete `{deleted}`" },
	{ MSG_ATTACH, BS, 0, f_proc, NULL,
	    "`{}` with a dup of the terminal's pty master" },
	{ MSG_HANGUP, BS, 0, f_proc, NULL,
	    "`{}`; SIGHUP to its group, SIGKILL 2 s later" },
	{ MSG_KILL_SESSION, BS, 0, f_kill_session, r_killed,
	    "kill a session's spawns of a mode: `{killed}`; `direct` also its "
	    "cgroup `d-SESSION` and deadline" },
	{ MSG_GRANT, BS, 0, f_grant, NULL,
	    "hold a direct grant's deadline (wall-clock ms; 0: none) and kill "
	    "the session's direct spawns at it: `{}`" },
	{ MSG_KILL_USER, BS, 0, f_user, r_kill_user,
	    "kill a deleted user's spawns and cgroup `u-USER`: `{killed, "
	    "processes}`" },
	{ MSG_USAGE, BS, 0, f_user, r_usage,
	    "`{memory: {current, max}, pids: {current, max}, disk: {used, max}, "
	    "oom_kills}` of the user's cgroup, null where unknown" },
	{ MSG_LIST, BS, 0, f_none, r_list,
	    "`{procs: [...], grants: [{session, user, deadline_ms}]}`" },
	{ MSG_RECORDING, BS, 0, f_recording, NULL,
	    "`{}` with an O_RDONLY fd of the recording; `not_found` when none" },

	/* sandboxd -> brokerd */
	{ MSG_PROC_EXITED, SB, 0, f_proc_exited, NULL,
	    "a terminal's process ended (`oom`: the OOM killer ended it; "
	    "`recording`: `{id, file, sha256, bytes, truncated, incomplete?, "
	    "user, session}`): `{}`" },

	/* the egress proxy: brokerd <-> sandboxd */
	{ MSG_EGRESS_UPDATE, BS, PM_EVENT, f_egress_update, NULL,
	    "an admin replaced the egress additions of a user (`scope` "
	    "user) or a session (`scope` session): sandboxd passes it on to "
	    "egressd, which applies it to every live listener of theirs" },
	{ MSG_EGRESS_LOG, SB, PM_EVENT, f_egress_log, NULL,
	    "egressd's record of one connection attempt (`kind` connect, "
	    "`count` 1) or of a minute's folded attempts (`kind` summary, "
	    "`since_ms`), passed on by sandboxd with the `user` and `session` "
	    "it holds for `spawn`; brokerd writes the audit record" },

	/* the egress proxy: sandboxd <-> egressd */
	{ MSG_EGRESS_LISTEN, SE, PM_EVENT | PM_FDS, f_egress_listen, NULL,
	    "a spawn under an allowlist profile started: the listening "
	    "socket its bridge reaches (one fd), with the admin additions of "
	    "its user and session" },
	{ MSG_EGRESS_CLOSE, SE, PM_EVENT, f_egress_close, NULL,
	    "the spawn was reaped: close its listener and every connection "
	    "of it" },
	{ MSG_EGRESS_UPDATE, SE, PM_EVENT, f_egress_update, NULL,
	    "brokerd's `egress_update`, passed on" },
	{ MSG_EGRESS_LOG, ES, PM_EVENT, f_egress_log, NULL,
	    "a connection attempt ended (`kind` connect; a refusal at once, "
	    "an allowed one at close) or a minute's folded attempts of one "
	    "(host, port, verdict) (`kind` summary): what brokerd audits" },

	/* brokerd -> frontd */
	{ MSG_EVENT, BF, PM_EVENT, f_event, NULL,
	    "an event for the server-sent event streams that match it; "
	    "`token`, the SHA-256 of a bearer token (frontd hashes the "
	    "bearers it relays; no client sees it), names the token whose "
	    "streams a `token_revoked` ends" },
	{ NULL, 0, 0, 0, NULL, NULL, NULL }
};

/* The name of a field kind, for messages and the documentation. */
const char *
proto_kind_name(enum proto_kind k)
{
	switch (k) {
	case PK_STRING:
		return "string";
	case PK_INT:
		return "int";
	case PK_BOOL:
		return "bool";
	case PK_OBJECT:
		return "object";
	case PK_ARRAY:
		return "array";
	case PK_STRINGS:
		return "array of strings";
	case PK_ADDRESS:
		return "IP address";
	case PK_USER:
		return "user name";
	case PK_HEX:
		return "hex";
	case PK_PATH:
		return "path";
	case PK_ENUM:
		return "one of";
	case PK_ANY:
		return "any";
	}
	return "?";
}

/* The row of type as sent from one role to another, or NULL. */
const struct proto_msg *
proto_find(const struct proto_msg *table, const char *type, unsigned from,
    unsigned to)
{
	const struct proto_msg	*pm;

	/* The roles and the first byte first: most rows end there. */
	for (pm = table; type != NULL && pm->type != NULL; pm++)
		if ((pm->from & from) && (pm->to & to) &&
		    pm->type[0] == type[0] && strcmp(pm->type, type) == 0)
			return pm;
	return NULL;
}

/*
 * The checks of one kind's values, after its JSON type (and for a string,
 * its lack of NUL) is right: 0, or -1 with err.
 */
typedef int (*proto_kind_fn)(const struct proto_field *, struct json_object *,
    char *, size_t);

/* PK_STRING: min to max bytes long. */
static int
proto_check_length(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	long long	len = json_object_get_string_len(v);

	if (len < f->min || len > f->max) {
		snprintf(err, errsz, "\"%s\" must be %lld to %lld bytes long",
		    f->name, f->min, f->max);
		return -1;
	}
	return 0;
}

/* PK_PATH: at most max bytes, no control character. */
static int
proto_check_path(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	const char	*s = json_object_get_string(v);
	size_t		 len = (size_t)json_object_get_string_len(v), i;

	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			break;
	if (len > (size_t)f->max || i < len) {
		snprintf(err, errsz, "\"%s\" must be a path of at most %lld "
		    "bytes without control characters", f->name, f->max);
		return -1;
	}
	return 0;
}

/* PK_ADDRESS: a numeric IPv4 or IPv6 address. */
static int
proto_check_address(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	const char	*s = json_object_get_string(v);
	unsigned char	 a[sizeof(struct in6_addr)];

	if (json_object_get_string_len(v) >= INET6_ADDRSTRLEN ||
	    (inet_pton(AF_INET, s, a) != 1 && inet_pton(AF_INET6, s, a) != 1)) {
		snprintf(err, errsz, "\"%s\" must be a numeric IPv4 or IPv6 "
		    "address", f->name);
		return -1;
	}
	return 0;
}

/* PK_USER: a hostgate user name. */
static int
proto_check_user(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	if (!str_is_user_name(json_object_get_string(v))) {
		snprintf(err, errsz, "\"%s\" must be a user name (a-z, 0-9, "
		    "_ . -, at most 32 bytes)", f->name);
		return -1;
	}
	return 0;
}

/* PK_HEX: exactly max lower-case hex digits. */
static int
proto_check_hex(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	size_t	len = (size_t)json_object_get_string_len(v);

	if (len != (size_t)f->max || !str_is_hex(json_object_get_string(v),
	    len)) {
		snprintf(err, errsz, "\"%s\" must be %lld lower-case hex digits",
		    f->name, f->max);
		return -1;
	}
	return 0;
}

/* PK_ENUM: one of its choices, which the error lists. */
static int
proto_check_enum(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	const char	*s = json_object_get_string(v);
	char		 esc[48];	/* the value, cut short */
	size_t		 i, off;
	int		 n;

	for (i = 0; f->choices != NULL && f->choices[i] != NULL; i++)
		if (strcmp(s, f->choices[i]) == 0)
			return 0;
	log_escape(s, (size_t)-1, esc, sizeof(esc));
	n = snprintf(err, errsz, "\"%s\" must be one of", f->name);
	off = n > 0 && (size_t)n < errsz ? (size_t)n : errsz - 1;
	for (i = 0; f->choices != NULL && f->choices[i] != NULL &&
	    off < errsz - 1; i++) {
		n = snprintf(err + off, errsz - off, "%s \"%s\"",
		    i > 0 ? "," : "", f->choices[i]);
		off = n > 0 && (size_t)n < errsz - off ? off + n : errsz - 1;
	}
	if (off < errsz - 1)
		snprintf(err + off, errsz - off, ", not \"%s\"", esc);
	return -1;
}

/* PK_INT: from min to max. */
static int
proto_check_int(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	int64_t	n = json_object_get_int64(v);

	/* json-c clamps integers above INT64_MAX: out of any range. */
	if ((n == INT64_MAX && json_object_get_uint64(v) !=
	    (uint64_t)INT64_MAX) || n < f->min || n > f->max) {
		snprintf(err, errsz, "\"%s\" must be from %lld to %lld",
		    f->name, f->min, f->max);
		return -1;
	}
	return 0;
}

/* PK_OBJECT: its members, when the field has a schema for them. */
static int
proto_check_object(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	char	sub[256];

	if (f->sub != NULL && proto_check_fields(f->sub, v, sub,
	    sizeof(sub)) == -1) {
		snprintf(err, errsz, "in \"%s\": %s", f->name, sub);
		return -1;
	}
	return 0;
}

/* PK_ARRAY: at most max items. */
static int
proto_check_array(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	if (json_object_array_length(v) > (size_t)f->max) {
		snprintf(err, errsz, "\"%s\" has more than %lld items",
		    f->name, f->max);
		return -1;
	}
	return 0;
}

/* PK_STRINGS: at most min items, strings without NUL of at most max. */
static int
proto_check_strings(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	struct json_object	*s;
	size_t			 i, len = json_object_array_length(v);

	if (len > (size_t)f->min) {
		snprintf(err, errsz, "\"%s\" has more than %lld items",
		    f->name, f->min);
		return -1;
	}
	for (i = 0; i < len; i++) {
		s = json_object_array_get_idx(v, i);
		if (!json_object_is_type(s, json_type_string) ||
		    strlen(json_object_get_string(s)) !=
		    (size_t)json_object_get_string_len(s) ||
		    json_object_get_string_len(s) > f->max) {
			snprintf(err, errsz, "\"%s\" must hold strings without "
			    "NUL of at most %lld bytes", f->name, f->max);
			return -1;
		}
	}
	return 0;
}

/*
 * Each kind: the JSON type its values have (what names it in an error;
 * NULL: "a string (kind)"), and the check of their content (NULL: none).
 */
static const struct {
	int		 any;	/* every value passes (PK_ANY) */
	enum json_type	 type;
	const char	*what;
	proto_kind_fn	 check;
} proto_kinds[] = {
	[PK_STRING] = { 0, json_type_string, "a string", proto_check_length },
	[PK_INT] = { 0, json_type_int, "an integer", proto_check_int },
	[PK_BOOL] = { 0, json_type_boolean, "true or false", NULL },
	[PK_OBJECT] = { 0, json_type_object, "an object", proto_check_object },
	[PK_ARRAY] = { 0, json_type_array, "an array", proto_check_array },
	[PK_STRINGS] = { 0, json_type_array, "an array", proto_check_strings },
	[PK_ADDRESS] = { 0, json_type_string, NULL, proto_check_address },
	[PK_USER] = { 0, json_type_string, NULL, proto_check_user },
	[PK_HEX] = { 0, json_type_string, NULL, proto_check_hex },
	[PK_PATH] = { 0, json_type_string, NULL, proto_check_path },
	[PK_ENUM] = { 0, json_type_string, "a string", proto_check_enum },
	[PK_ANY] = { 1, json_type_null, NULL, NULL },
};

/* Check one present, non-null value against its field. */
static int
proto_check_value(const struct proto_field *f, struct json_object *v,
    char *err, size_t errsz)
{
	if ((size_t)f->kind >= sizeof(proto_kinds) / sizeof(proto_kinds[0])) {
		snprintf(err, errsz, "\"%s\" has a kind of no check", f->name);
		return -1;
	}
	if (proto_kinds[f->kind].any)
		return 0;
	if (json_object_get_type(v) != proto_kinds[f->kind].type) {
		if (proto_kinds[f->kind].what != NULL)
			snprintf(err, errsz, "\"%s\" must be %s", f->name,
			    proto_kinds[f->kind].what);
		else
			snprintf(err, errsz, "\"%s\" must be a string (%s)",
			    f->name, proto_kind_name(f->kind));
		return -1;
	}
	if (proto_kinds[f->kind].type == json_type_string &&
	    strlen(json_object_get_string(v)) !=
	    (size_t)json_object_get_string_len(v)) {
		snprintf(err, errsz, "\"%s\" must not contain NUL", f->name);
		return -1;
	}
	if (proto_kinds[f->kind].check == NULL)
		return 0;
	return proto_kinds[f->kind].check(f, v, err, errsz);
}

/* Check the fields of obj (an object) against fields; 0, or -1 and err. */
int
proto_check_fields(const struct proto_field *fields, struct json_object *obj,
    char *err, size_t errsz)
{
	const struct proto_field	*f;
	struct json_object		*v;

	for (f = fields; f != NULL && f->name != NULL; f++) {
		if (!json_object_object_get_ex(obj, f->name, &v) || v == NULL) {
			if (f->flags & PF_REQ) {
				snprintf(err, errsz, "\"%s\" is required (%s)",
				    f->name, proto_kind_name(f->kind));
				return -1;
			}
			continue;
		}
		if (proto_check_value(f, v, err, errsz) == -1)
			return -1;
	}
	return 0;
}

/*
 * Check one received message against table: 0 and *out its row (NULL for
 * a reply, which proto_check_reply checks later), or -1 with err.
 */
int
proto_check(const struct proto_msg *table, struct json_object *obj,
    unsigned from, unsigned to, int nfds, const struct proto_msg **out,
    char *err, size_t errsz)
{
	const struct proto_msg	*pm;
	struct json_object	*v;
	const char		*type;
	char			 esc[LOG_ESCAPE_MAX];
	int			 has_id;

	*out = NULL;
	if (obj == NULL || !json_object_is_type(obj, json_type_object)) {
		snprintf(err, errsz, "a message is a JSON object");
		return -1;
	}
	has_id = json_object_object_get_ex(obj, "id", &v) &&
	    json_object_is_type(v, json_type_int) &&
	    json_object_get_int64(v) >= 0;
	if (!json_object_object_get_ex(obj, "type", &v) || v == NULL) {
		if (has_id && (json_object_object_get_ex(obj, "result", NULL) ||
		    json_object_object_get_ex(obj, "error", NULL)))
			return 0;	/* a reply */
		snprintf(err, errsz, "message has no type");
		return -1;
	}
	if ((type = json_str(obj, "type")) == NULL) {
		snprintf(err, errsz, "\"type\" must be a string");
		return -1;
	}
	if ((pm = proto_find(table, type, from, to)) == NULL) {
		log_escape(type, (size_t)-1, esc, sizeof(esc));
		if (proto_find(table, type, ~0U, to) != NULL)
			snprintf(err, errsz, "message type \"%s\" may not be "
			    "sent by %s", esc, ipc_role_name(from));
		else
			snprintf(err, errsz, "unknown message type \"%s\"",
			    esc);
		return -1;
	}
	if (nfds > 0 && (pm->flags & PM_FDS) == 0) {
		snprintf(err, errsz, "\"%s\" carries no fds", pm->type);
		return -1;
	}
	if (!has_id && (pm->flags & PM_EVENT) == 0) {
		snprintf(err, errsz, "message has no id");
		return -1;
	}
	if (proto_check_fields(pm->fields, obj, err, errsz) == -1)
		return -1;
	*out = pm;
	return 0;
}

/* proto_check against the real table, for fuzzing and tests. */
int
proto_validate(struct json_object *obj, unsigned from, unsigned to, int nfds,
    char *err, size_t errsz)
{
	const struct proto_msg	*pm;

	return proto_check(proto_msgs, obj, from, to, nfds, &pm, err, errsz);
}

/*
 * Check a reply to a request of msg: an error has a string code, a result
 * is an object that matches msg's reply schema, if it has one.
 */
int
proto_check_reply(const struct proto_msg *msg, struct json_object *reply,
    char *err, size_t errsz)
{
	static const struct proto_field	f_error[] = {
		F_ENUM("code", R, c_error), F_STR("message", O, 0, IPC_MAX_MSG),
		F_INT("retry_after", O, 0, INT_MAX),
		/* misdirected, host_down: the user's home host */
		F_STR("host", O, 1, 32), F_END
	};
	struct json_object		*v;

	if (json_object_object_get_ex(reply, "error", &v)) {
		if (v == NULL || !json_object_is_type(v, json_type_object)) {
			snprintf(err, errsz, "\"error\" must be an object");
			return -1;
		}
		return proto_check_fields(f_error, v, err, errsz);
	}
	if (!json_object_object_get_ex(reply, "result", &v) || v == NULL ||
	    !json_object_is_type(v, json_type_object)) {
		snprintf(err, errsz, "\"result\" must be an object");
		return -1;
	}
	return msg != NULL ? proto_check_fields(msg->reply, v, err, errsz) : 0;
}

/*
 * Check a raw-body reply: its envelope against the envelope's schema, its
 * stated length against the body's, and the body's framing (a JSON
 * object's braces, no NUL). The body is not parsed: it is passed on as
 * brokerd wrote it.
 */
int
proto_check_raw(struct json_object *env, const char *body, size_t len,
    char *err, size_t errsz)
{
	static const struct proto_field	f_env[] = {
		F_INT("id", R, 0, PROTO_COUNT_MAX), F_INT("body", R, 2, IPC_MAX_MSG),
		F_USER("user", O), F_END
	};
	struct json_object		*v;
	int64_t				 blen;

	if (json_object_object_get_ex(env, "result", NULL) ||
	    json_object_object_get_ex(env, "error", NULL) ||
	    json_object_object_get_ex(env, "type", NULL)) {
		snprintf(err, errsz, "a raw body's envelope holds only id, "
		    "body and user");
		return -1;
	}
	if (proto_check_fields(f_env, env, err, errsz) == -1)
		return -1;
	json_object_object_get_ex(env, "body", &v);
	blen = json_object_get_int64(v);
	if ((size_t)blen != len) {
		snprintf(err, errsz, "raw body of %zu bytes, its envelope "
		    "says %lld", len, (long long)blen);
		return -1;
	}
	if (len < 2 || body[0] != '{' || body[len - 1] != '}') {
		snprintf(err, errsz, "raw body is not a JSON object");
		return -1;
	}
	if (memchr(body, '\0', len) != NULL) {
		snprintf(err, errsz, "raw body holds a NUL");
		return -1;
	}
	return 0;
}
