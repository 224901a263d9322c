/*
 * egressd: the egress proxy of the +allowlist profiles. It accepts on
 * each spawn's listening socket (passed by sandboxd), parses one proxy
 * request (CONNECT or absolute-form), checks it against the allowlist,
 * the denylist and the ports, resolves the name itself, refuses denied
 * networks after resolution, connects and relays bytes. Its own uid, no
 * filesystem, a seccomp allowlist.
 */
#ifndef HG_EGRESSD_H
#define HG_EGRESSD_H

#include <sys/types.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>

#include "common.h"

#define EGRESS_HEAD_MAX		(16 * 1024)	/* a request head, bytes */
#define EGRESS_HEAD_TIMEOUT	10		/* seconds for the head */
#define EGRESS_CONNECT_TIMEOUT	10		/* seconds to connect */
#define EGRESS_IDLE_TIMEOUT	600		/* seconds, a quiet tunnel */
#define EGRESS_CONNS_LISTENER	64		/* per spawn */
#define EGRESS_CONNS_MAX	4096		/* overall */
#define EGRESS_BUF_MAX		(256 * 1024)	/* buffered per direction */
#define EGRESS_ADDRS_MAX	16		/* resolved addresses kept */
#define EGRESS_HEADERS_MAX	100
#define EGRESS_LOG_PER_MINUTE	20		/* connect records a listener */
#define EGRESS_SUMMARIES_MAX	256		/* distinct folded keys */
#define EGRESS_PORTS_MAX	64
#define EGRESS_HOST_MAX		253

/* request.c */
struct egress_header {
	const char	*name;
	size_t		 namelen;
	const char	*value;
	size_t		 valuelen;
};

/* One parsed request head; its pointers point into the parsed text. */
struct egress_req {
	int		 connect;	/* CONNECT host:port, else absolute-form */
	char		 method[33];
	char		 host[EGRESS_HOST_MAX + 3]; /* lower case, as given */
	int		 port;
	const char	*path;		/* origin-form target (absolute-form) */
	size_t		 pathlen;
	int		 minor;		/* HTTP/1.minor */
	struct egress_header hdrs[EGRESS_HEADERS_MAX];
	int		 nhdrs;
};

/* The length of a complete head in buf (through its blank line), or 0. */
size_t	 request_head_len(const char *buf, size_t len);
/*
 * Parse a complete request head of len bytes; 0, or -1 with the reason
 * (for a 400) in err.
 */
int	 request_parse(const char *head, size_t len, struct egress_req *,
	    char *err, size_t errsz);
/*
 * The head to send upstream for an absolute-form request: origin-form
 * target, Host from the URL, Proxy-* and hop-by-hop headers dropped,
 * Connection: close. Returns a malloc'ed text and its length in *len.
 */
char	*request_forward(const struct egress_req *, size_t *len);
/*
 * An upstream response head for the client: Connection: close in place of
 * the hop-by-hop headers; an interim (1xx) one unchanged (*interim). NULL
 * when it is not an HTTP/1.x response head (then relayed as it is).
 */
char	*response_rewrite(const char *head, size_t len, size_t *outlen,
	    int *interim);

/* Why a request is refused or failed: the agent's text (refusal_text). */
enum refusal {
	REF_NONE,
	REF_PORT,		/* 403 */
	REF_LITERAL,		/* 403 */
	REF_DENYLIST,		/* 403 */
	REF_ALLOWLIST,		/* 403 */
	REF_DENY_NET,		/* 403 */
	REF_RESOLVE,		/* 502 */
	REF_CONNECT,		/* 502 */
	REF_TIMEOUT,		/* 504 */
	REF_BUSY,		/* 503 */
	REF_BAD_REQUEST,	/* 400 */
	REF_HEAD_TIMEOUT,	/* 408 */
};
/* What refusal_text needs to say. */
struct refusal_ctx {
	const char	*host;
	int		 port;
	const char	*ports;		/* "443, 80" */
	const char	*addr;		/* the resolved address in question */
	const char	*cidr;		/* the denied network it is in */
	const char	*detail;	/* connect error, a 400's reason */
	int		 limit;		/* REF_BUSY */
};
/* The HTTP status of a refusal. */
int	 refusal_status(enum refusal);
/* The agent's text (reason phrase and body) into buf. */
const char *refusal_text(enum refusal, const struct refusal_ctx *,
	    char *buf, size_t bufsz);
/* The short reason of an egress_log record ("not on the allowlist"...). */
const char *refusal_reason(enum refusal, const struct refusal_ctx *,
	    char *buf, size_t bufsz);
/* The whole HTTP response of a refusal (malloc'ed, *len its length). */
char	*refusal_response(enum refusal, const struct refusal_ctx *,
	    size_t *len);

/* hosts.c */
struct hosts_entry {
	char			 name[EGRESS_HOST_MAX + 1];
	struct sockaddr_storage	 addr;
	socklen_t		 addrlen;
};
struct hosts {
	struct hosts_entry	*v;
	size_t			 n;
};
/*
 * Parse a file in /etc/hosts format ("ADDR name name...", # comments,
 * v4 and v6 addresses); 0, or -1 with "line N: why" in err.
 */
int	 hosts_parse(const char *text, struct hosts *, char *err,
	    size_t errsz);
/* Read and parse a hosts file; 0, or -1 and err. */
int	 hosts_load(const char *path, struct hosts *, char *err, size_t errsz);
/* The addresses pinned for name, at most max into out; their number. */
int	 hosts_lookup(const struct hosts *, const char *name,
	    struct sockaddr_storage *out, socklen_t *lens, int max);
void	 hosts_free(struct hosts *);

/* proxy.c */
struct listener;
/* The policy every listener shares (from the configuration). */
struct egress_policy {
	const char		*allow;		/* HOSTGATE_EGRESS_ALLOW */
	const char		*deny;		/* HOSTGATE_EGRESS_DENY */
	struct egress_nets	*deny_nets;
	struct egress_nets	*allow_nets;
	int			 ports[EGRESS_PORTS_MAX];
	int			 nports;
	char			 ports_text[EGRESS_PORTS_MAX * 7];
	struct hosts		*hosts;
	struct evdns_base	*dns;
};
void	 proxy_init(struct event_base *, struct egress_policy *);
/* A new spawn's listener (fd taken); -1 and err when refused. */
int	 proxy_listen(int fd, const char *spawn, const char *user,
	    const char *session, struct json_object *allow_user,
	    struct json_object *allow_session, char *err, size_t errsz);
/* Close a spawn's listener and its connections; -1 when unknown. */
int	 proxy_close(const char *spawn);
/* Close every listener (the link to sandboxd went away). */
void	 proxy_close_all(void);
/* Replace a scope's additions of the matching listeners; their number. */
int	 proxy_update(const char *user, const char *session, int session_scope,
	    struct json_object *allow);

/* sandbox.c */
void	 sandbox_init(struct event_base *, const char *path, uid_t uid);
/* Send an egress_log record to sandboxd (taken); dropped when no link. */
void	 sandbox_log(struct json_object *);

#endif
