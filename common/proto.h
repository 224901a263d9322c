/*
 * The wire format between hostgate's processes.
 *
 * Every link is a SOCK_SEQPACKET Unix socket. One datagram holds one JSON
 * object (at most IPC_MAX_MSG bytes) and, for the message types that allow
 * it, file descriptors passed with SCM_RIGHTS. The first message each way is
 *   {"type": "hello", "version": HG_PROTO_VERSION, "role": "<sender>"}
 * Requests carry "type" and an integer "id"; a reply echoes "id" and holds
 * either "result": {...} or "error": {"code": "...", "message": "..."}.
 * Payloads are documented once, in docs/protocol.md.
 */
#ifndef HG_PROTO_H
#define HG_PROTO_H

#define HG_PROTO_VERSION 1
#define IPC_MAX_MSG	(64 * 1024)
#define IPC_MAX_FDS	4

/*
 * Socket names inside HOSTGATE_RUN_DIR. frontd's is in a directory of its
 * own, the one directory frontd's jail shows it (frontd/jail.c): a bind
 * of the directory still shows the new socket of a restarted brokerd.
 */
#define SOCK_FRONT_DIR		"front"
#define SOCK_BROKER_FRONT	SOCK_FRONT_DIR "/broker.sock"	/* frontd -> brokerd */
#define SOCK_BROKER_CONTROL	"broker-control.sock"	/* hgctl -> brokerd */
#define SOCK_SANDBOX		"sandbox.sock"		/* brokerd -> sandboxd */

/* Who is at the other end of a link. */
enum ipc_role {
	ROLE_FRONTD = 1 << 0,
	ROLE_BROKERD = 1 << 1,
	ROLE_SANDBOXD = 1 << 2,
	ROLE_HGCTL = 1 << 3,
};

/* Error codes, mapped to HTTP statuses by frontd (frontd/api.c). */
#define ERR_BAD_REQUEST		"bad_request"		/* 400 */
#define ERR_UNAUTHORIZED	"unauthorized"		/* 401 */
#define ERR_FORBIDDEN		"forbidden"		/* 403 */
#define ERR_NOT_FOUND		"not_found"		/* 404 */
#define ERR_CONFLICT		"conflict"		/* 409 */
#define ERR_TOO_LARGE		"too_large"		/* 413 */
#define ERR_RATE_LIMITED	"rate_limited"		/* 429, with retry_after */
#define ERR_INTERNAL		"internal"		/* 500 */
#define ERR_UNAVAILABLE		"unavailable"		/* 503 */

#endif
