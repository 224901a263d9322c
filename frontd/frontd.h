/*
 * frontd: the unprivileged HTTP(S) front. It parses HTTP, forwards every
 * credential to brokerd and answers with what brokerd decides. It never
 * authenticates by itself, never forks and never execs.
 */
#ifndef HG_FRONTD_H
#define HG_FRONTD_H

#include <sys/queue.h>
#include <sys/socket.h>
#include <openssl/ssl.h>
#include <event2/bufferevent.h>

#include "common.h"

/*
 * An MCP session id: 32 hex digits, after "HOST." in a fleet (the balancer
 * routes by it), so at most a host id, a dot, 32 digits and a NUL.
 */
#define MCP_SID_MAX	(32 + 1 + 32 + 1)
#define HTTP_MAX_HEAD		(16 * 1024)	/* request line + headers */
#define HTTP_MAX_HEADERS	64
#define HTTP_IDLE_TIMEOUT	60		/* seconds of keep-alive idle */
/*
 * Descriptors kept out of the connection limit: the listener, brokerd's
 * link, the fds brokerd passes (ptys, memfds), the streams taken over
 * (WebSocket, SSE) and the connections being answered 503.
 */
#define HTTP_FD_RESERVE		256
#define HTTP_RETRY_AFTER	5		/* seconds, in a 503 at a limit */

/* The connection limits of an HTTP server. */
struct http_limits {
	int		 max_conns;		/* below the descriptor limit */
	int		 max_conns_per_addr;	/* from one client address */
	int		 header_timeout;	/* seconds to send a head */
};

struct http_header {
	char			*name;
	char			*value;
	TAILQ_ENTRY(http_header) entry;
};
TAILQ_HEAD(http_headers, http_header);

struct http_conn;

struct http_request {
	struct http_conn	*conn;		/* NULL once the client has gone */
	char			 method[16];
	char			*target;	/* as sent: path and query */
	char			*path;		/* target before '?', not decoded */
	char			*query;		/* after '?', or NULL */
	int			 minor;		/* HTTP/1.minor */
	struct http_headers	 headers;
	char			*body;		/* NUL-terminated, may be NULL */
	size_t			 body_len;
	int			 body_fd;	/* a spooled body's memfd, or -1 */
	long			 spooled;	/* of all spools' bytes: its own */
	long			 content_length; /* -1 when absent */
	int			 keep_alive;
	int			 tls;
	int			 proxied;	/* from HOSTGATE_TRUSTED_PROXIES */
	char			 peer[64];	/* client address, numeric */
	void			*pending;	/* brokerd request in flight */
	/* for the X-Request-Id header and the access line */
	char			 request_id[LOG_REQUEST_ID_LEN + 1];
	int64_t			 started;	/* monotonic ms */
	char			 user[64];	/* as brokerd said, or "" */
};

typedef void (*http_handler)(struct http_request *, void *);
/*
 * Asked when a request's head is complete: 1 (and *cap, -1 for none) when
 * its body goes to a sealed memfd, req->body_fd, instead of the heap.
 */
typedef int (*http_spool_fn)(struct http_request *, long *cap);
/*
 * Asked, with the body still unread, whether a spooled body may come: it
 * answers later with http_spool_continue, or refuses with any http_reply
 * (the body is then dropped if small, else the connection closed).
 */
typedef void (*http_check_fn)(struct http_request *);

/* http.c */
/*
 * Parse a request head (request line and headers up to the empty line) in
 * buf. Returns the bytes consumed when complete, 0 when more is needed, or
 * minus an HTTP status for a bad head (400, 414, 431, 501, 505).
 */
int	 http_parse_head(const char *buf, size_t len, struct http_request *);
void	 http_request_init(struct http_request *);
void	 http_request_clear(struct http_request *);
/* Case-insensitive header lookup; NULL when absent. */
const char *http_header(struct http_request *, const char *name);
/* Value of cookie name in the Cookie header(s) into out; -1 when absent. */
int	 http_cookie(struct http_request *, const char *name, char *out,
	    size_t outsz);
/*
 * The key of a client address (peer as logged) for the per-address
 * connection limit: the address itself, or an IPv6 one's /64 prefix.
 */
void	 http_addr_key(const struct sockaddr *, const char *peer, char *out,
	    size_t outsz);
/*
 * Serve HTTP(S) on a listening socket; the limits are the configuration's
 * defaults (1024, 64 per address, 10 s) until http_server_set_limits().
 */
struct http_server *http_server_new(struct event_base *, int fd, SSL_CTX *,
	    long max_body, http_handler, void *arg);
void	 http_server_set_limits(struct http_server *,
	    const struct http_limits *);
/* Peers whose X-Forwarded-For names the client (nets is taken). */
void	 http_server_set_trusted(struct http_server *, struct egress_nets *);
/* A trusted proxy's client: the last X-Forwarded-For entry; -1: none. */
int	 http_forwarded_for(struct http_request *, char *out, size_t outsz);
/*
 * The scheme://host[:port] a client reached a request by: a trusted
 * proxy's X-Forwarded-Proto and -Host when it sent them, else frontd's
 * scheme and the Host header. For URLs handed to clients, never origins.
 */
void	 http_base_url(struct http_request *, char *out, size_t outsz);
/*
 * Spool the bodies the hook picks into memfds as they arrive: 411 without
 * Content-Length, 413 over the cap before any of it is read.
 */
void	 http_server_set_spool(struct http_server *, http_spool_fn,
	    http_check_fn);
/* The check let a spooled body come: 100 Continue if asked, then read. */
void	 http_spool_continue(struct http_request *);
/*
 * Answer a request. extra is NULL or more header lines, each ending in
 * "\r\n". The request is freed after this call (or now, when its client
 * has gone). Security headers and Content-Length are added here.
 */
void	 http_reply(struct http_request *, int status, const char *ctype,
	    const void *body, size_t len, const char *extra);
/*
 * As http_reply with a body of len bytes read from fd (taken) as the
 * output drains: frontd's memory stays bounded whatever the size.
 */
void	 http_reply_fd(struct http_request *, int status, const char *ctype,
	    int fd, size_t len, const char *extra);
/* As http_reply with a JSON body; takes ownership of obj. */
void	 http_reply_json(struct http_request *, int status,
	    struct json_object *obj, const char *extra);
/* {"error": {"code": code, "message": message}} */
void	 http_reply_error(struct http_request *, int status, const char *code,
	    const char *message, const char *extra);
const char *http_status_text(int status);
/*
 * Take a request's connection over (WebSocket, SSE) to answer it with
 * status: logs its access line, frees the request and returns its
 * bufferevent, or NULL when the client has gone. It counts against the
 * global connection limit until http_released().
 */
struct bufferevent *http_takeover(struct http_request *, int status);
/*
 * The owner of a connection taken over has closed it: it no longer counts
 * against the connection limit.
 */
void	 http_released(void);
/* Log the access line of a request: one per request, at info. */
void	 http_access_log(struct http_request *, int status, size_t bytes);

/* tls.c */
/* A server SSL_CTX (TLS 1.2+) with cert and key loaded; NULL + err. */
SSL_CTX	*tls_ctx_new(const char *cert, const char *key, char *err, size_t);

/* api.c */
void	 api_init(struct event_base *, struct config *, struct ipc_link *);
void	 api_handle(struct http_request *, void *);
/* Answer a request brokerd refused or left unanswered; 1 when done. */
int	 api_broker_failed(struct http_request *, struct ipc_msg *);
/*
 * The terminal id of /api/[admin/]terminals/{id}[/...], HEX16 or
 * HOST.HEX16: its host ("" without one) and its hex digits; -1 if none.
 */
int	 api_terminal_id(const char *path, char host[33], char id[17]);
/* The connected brokerd, or NULL. */
struct ipc_peer *api_broker_peer(void);
/* Credentials of a request into a brokerd request's "auth". */
void	 api_add_auth(struct http_request *, struct json_object *);
/*
 * The brokerd "run" request of a run_command (python 0) or run_python (1)
 * body as the HTTP API builds it, and its stdin memfd (-1 when none); 0,
 * or the HTTP status of the refusal and its reason.
 */
int	 api_run_request(int python, struct json_object *body,
	    struct json_object **objp, int *fd, char *msg, size_t msgsz);
int	 api_run_timeout_ms(void);
/* A "run" reply's result as the HTTP API answers it, output from fds. */
struct json_object *api_run_result(struct json_object *res, const int fds[2]);
/* A sealed memfd holding data at offset 0; -1 on failure. */
int	 api_memfd(const char *data, size_t len);
/* A copy of s, len bytes, as valid UTF-8 (U+FFFD for bad bytes). */
char	*utf8_clean(const char *s, size_t len, size_t *outlen);

/* files.c */
void	 files_init(struct config *);
/* Whether a request's body is spooled to a memfd (PUT /api/files/...). */
int	 files_spool(struct http_request *, long *cap);
/* Ask brokerd, the body unread, whether an upload may come. */
void	 files_check(struct http_request *);
/* GET, HEAD, PUT and DELETE /api/files/...: the workspace's files. */
void	 files_handle(struct http_request *);
/* How long to wait for brokerd's answer to a file request writing bytes. */
long long files_wait_ms(long long bytes);

/* static.c */
/* Read the built panel into memory (before the drop); 0, or -1 and err. */
int	 static_load(const char *dir, char *err, size_t);
/* Answer GET or HEAD for a path of the panel. */
void	 static_serve(struct http_request *);

/* sse.c */
void	 sse_init(struct event_base *);
void	 sse_handle(struct http_request *);
void	 sse_deliver(struct ipc_peer *, struct ipc_msg *);

/* ws.c */
void	 ws_init(void);
/*
 * Whether a request's Origin (when it sends one) is this site's, that of
 * HOSTGATE_PUBLIC_URL or one of HOSTGATE_ALLOWED_ORIGINS: the
 * DNS-rebinding and cross-site check.
 */
int	 ws_origin_allowed(struct http_request *);
/* The origins allowed to open terminals, from the address bound. */
void	 ws_origins_init(const struct config *, const char *bound);
/* GET /api/terminals/{id}/ws: authorize, upgrade, bridge to the pty. */
void	 ws_handle(struct http_request *);
/* An event from brokerd: a terminal_exited ends its terminal's bridge. */
void	 ws_deliver(struct json_object *);

/* mcp.c */
/* JSON-RPC and MCP error codes. */
#define MCP_PARSE_ERROR		(-32700)
#define MCP_INVALID_REQUEST	(-32600)
#define MCP_METHOD_NOT_FOUND	(-32601)
#define MCP_INVALID_PARAMS	(-32602)
#define MCP_INTERNAL_ERROR	(-32603)
#define MCP_RESOURCE_NOT_FOUND	(-32002)	/* before 2026-07-28 */
#define MCP_HEADER_MISMATCH	(-32020)	/* 2026-07-28 */
#define MCP_UNSUPPORTED_VERSION	(-32022)	/* 2026-07-28 */
/* The resource holding the sandbox prompt (the instructions). */
#define MCP_PROMPT_URI		"hostgate://sandbox/prompt"

/* One JSON-RPC message of a POST (or a GET, a DELETE) being answered. */
struct mcp_call {
	struct http_request	*req;
	struct json_object	*msg;		/* the parsed message */
	struct json_object	*params;	/* in msg, or NULL */
	char			*id;		/* raw JSON text; NULL: none */
	char			 method[48];
	char			 version[16];	/* the revision it speaks */
	int			 modern;	/* 2026-07-28: stateless */
	int			 sse;		/* answer as an SSE event */
	char			 session[MCP_SID_MAX];	/* its MCP session, or "" */
	char			 new_session[MCP_SID_MAX]; /* minted by initialize */
	char			 token[65];	/* SHA-256 of the bearer */
	int			 listen_prompt;	/* listen: the prompt resource */
	int			 pending;	/* brokerd requests in flight */
};
typedef void (*mcp_broker_cb)(struct mcp_call *, struct ipc_msg *, void *);

/* /mcp and /.well-known/oauth-protected-resource[/mcp]. */
void	 mcp_handle(struct http_request *);
void	 mcp_wellknown(struct http_request *);
/* Send brokerd a request for a call (obj, fd taken); cb gets the reply. */
void	 mcp_broker(struct mcp_call *, struct json_object *obj, int fd,
	    int timeout_ms, mcp_broker_cb, void *);
/* A reply's result (a raw one parsed), a new reference; NULL if none. */
struct json_object *mcp_result(struct ipc_msg *);
/*
 * 1 after answering a call whose brokerd request failed: no reply (m or
 * env NULL), or the token refused (401).
 */
int	 mcp_call_refused(struct mcp_call *, struct ipc_msg *);
int	 mcp_call_failed(struct mcp_call *, struct json_object *env);
/* Answer a call: a result (taken), or a JSON-RPC error (data taken). */
void	 mcp_call_result(struct mcp_call *, struct json_object *);
void	 mcp_call_error(struct mcp_call *, int code, const char *message,
	    struct json_object *data);
/* Whether bad tool arguments are a tool result (not a protocol error). */
int	 mcp_call_lenient(struct mcp_call *);
/* Free a call once its request is answered (or taken over). */
void	 mcp_call_free(struct mcp_call *);
/* Whether an MCP session subscribed to the prompt resource. */
int	 mcp_session_subscribed(const char *id);
/* A token (its SHA-256) was revoked: its MCP sessions answer 401. */
void	 mcp_session_forget_token(const char *token);
/* In a fleet: the host id that prefixes the session ids minted here. */
void	 mcp_set_host(const char *host_id);
/* HOSTGATE_PUBLIC_URL (NULL: unset): the base of the URLs built. */
void	 mcp_set_public_url(const char *url);

/* mcp_stream.c */
/* The brokerd reply of a GET stream or a listen (whoami): open it. */
void	 mcp_stream_open(struct mcp_call *, struct ipc_msg *, void *);
/* Close the stream of an MCP session. */
void	 mcp_stream_close_session(const char *id, const char *why);
/* A brokerd event (sse_deliver): notify the MCP streams it is for. */
void	 mcp_deliver(struct json_object *ev);

/* mcp_tools.c */
/* The tools/list array (a new reference). */
struct json_object *mcp_tools_list(void);
/*
 * Run tools/call "name" with arguments (NULL: none): 0 when under way (it
 * answers the call), -1 when there is no such tool.
 */
int	 mcp_tools_call(struct mcp_call *, const char *name,
	    struct json_object *args);

#endif
