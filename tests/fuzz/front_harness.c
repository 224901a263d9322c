/*
 * The frontd of the fuzz targets (front_harness.h). frontd's own code runs
 * unchanged; only its link to brokerd (common/ipc.c's client side) is
 * replaced: ipc_request holds the request for fh_answer, ipc_send drops.
 * Everything goes over unix sockets, so that what the client writes is
 * there for frontd at once and each run takes the same path.
 */
#include <sys/types.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front_harness.h"

struct fh_call		 fh_call;
int			 fh_sent;

static struct event_base	*fh_base;
static struct config		 fh_conf;
static int			 fh_peer_dummy;
static struct sockaddr_un	 fh_addr;
static socklen_t		 fh_addrlen;

/* brokerd's link: always up, as far as frontd can tell. */
struct ipc_peer *
ipc_link_peer(struct ipc_link *l)
{
	return (struct ipc_peer *)&fh_peer_dummy;
}

/* A request to brokerd: held for fh_answer (one at a time). */
int
ipc_request(struct ipc_peer *p, struct json_object *obj, const int *fds,
    int nfds, int timeout_ms, ipc_reply_cb cb, void *arg)
{
	const char	*s;

	/* What frontd sends must be a JSON object that serializes. */
	if (obj == NULL || !json_object_is_type(obj, json_type_object) ||
	    (s = json_object_to_json_string_ext(obj,
	    JSON_C_TO_STRING_PLAIN)) == NULL || json_str(obj, "type") == NULL)
		abort();
	if (fh_call.pending)
		abort();	/* one request per connection at a time */
	if (getenv("FUZZ_VERBOSE") != NULL)
		fprintf(stderr, "to brokerd: %s\n", s);
	(void)s;
	fh_call.pending = 1;
	fh_call.obj = obj;
	fh_call.nfds = nfds;
	fh_call.cb = cb;
	fh_call.arg = arg;
	return 0;
}

/* The name of a role, for proto.c's messages (ipc.c is not linked). */
const char *
ipc_role_name(unsigned role)
{
	switch (role) {
	case ROLE_FRONTD:
		return "frontd";
	case ROLE_BROKERD:
		return "brokerd";
	case ROLE_SANDBOXD:
		return "sandboxd";
	case ROLE_HGCTL:
		return "hgctl";
	}
	return "?";
}

/* A request printed by frontd itself: it must be an object that parses. */
int
ipc_request_text(struct ipc_peer *p, const char *type, const char *members,
    size_t len, int timeout_ms, ipc_reply_cb cb, void *arg)
{
	struct json_object	*obj;
	char			*text;

	if (asprintf(&text, "{\"type\":\"%s\",%.*s}", type, (int)len,
	    members) == -1)
		abort();
	if ((obj = json_tokener_parse(text)) == NULL ||
	    !json_object_is_type(obj, json_type_object))
		abort();	/* frontd printed broken JSON */
	free(text);
	return ipc_request(p, obj, NULL, 0, timeout_ms, cb, arg);
}

/* A one-way message to brokerd (terminal_resized): counted, dropped. */
int
ipc_send(struct ipc_peer *p, struct json_object *obj, const int *fds,
    int nfds)
{
	if (obj == NULL || json_str(obj, "type") == NULL)
		abort();
	fh_sent++;
	json_object_put(obj);
	return 0;
}

/* Set up frontd once: logging, the panel, the API, the HTTP server. */
void
fh_init(const char *web_dir)
{
	struct http_limits	limits;
	struct http_server	*server;
	char			err[256];
	int			fd;

	if (fh_base != NULL)
		return;
	/* As frontd does: a client gone is an error, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	log_init("fuzz", 1);
	log_setlevel(LOG_LVL_ERROR);
	if ((fh_base = event_base_new()) == NULL)
		abort();
	fh_conf.command_timeout_max = 600;
	fh_conf.file_timeout = 30;
	fh_conf.max_body = FH_MAX_BODY;
	/* Small, so that uploads over the cap (413) are within reach. */
	fh_conf.max_upload = FH_MAX_UPLOAD;
	fh_conf.listen_loopback = 1;
	fh_conf.allowed_origins = "https://panel.example.com,http://[::1]:8443";
	memset(&limits, 0, sizeof(limits));
	limits.max_conns = 64;
	limits.max_conns_per_addr = 16;
	limits.header_timeout = 10;
	if (web_dir != NULL && static_load(web_dir, err, sizeof(err)) == -1) {
		fprintf(stderr, "static_load: %s\n", err);
		abort();
	}
	api_init(fh_base, &fh_conf, NULL);
	files_init(&fh_conf);
	ws_init();
	/* The origins of a frontd listening on 127.0.0.1:8080, and two more. */
	ws_origins_init(&fh_conf, "127.0.0.1:8080");
	/* An abstract socket of this process: nothing on disk, no clash. */
	memset(&fh_addr, 0, sizeof(fh_addr));
	fh_addr.sun_family = AF_UNIX;
	snprintf(fh_addr.sun_path + 1, sizeof(fh_addr.sun_path) - 1,
	    "hostgate-fuzz-front-%ld", (long)getpid());
	fh_addrlen = offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(fh_addr.sun_path + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&fh_addr, fh_addrlen) == -1 ||
	    listen(fd, 16) == -1)
		abort();
	if ((server = http_server_new(fh_base, fd, NULL, fh_conf.max_body,
	    api_handle, NULL)) == NULL)
		abort();
	http_server_set_limits(server, &limits);
	/* As frontd does: PUT /api/files/ checked, then spooled to a memfd. */
	http_server_set_spool(server, files_spool, files_check);
}

/* A new client connection, accepted by frontd before this returns. */
int
fh_connect(void)
{
	int	fd;

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0)) == -1 || connect(fd, (struct sockaddr *)&fh_addr,
	    fh_addrlen) == -1)
		abort();
	fh_run();
	return fd;
}

/* Run frontd's event loop until nothing more happens now. */
void
fh_run(void)
{
	int	i;

	/* Unix sockets deliver at once: a few passes settle everything. */
	for (i = 0; i < 12; i++)
		event_base_loop(fh_base, EVLOOP_NONBLOCK);
}

/* Write all of data as the client, reading frontd's answers if it stalls. */
void
fh_write(int fd, const void *data, size_t len)
{
	const char	*p = data;
	char		 sink[65536];
	ssize_t		 n;
	int		 stuck = 0;

	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno != EAGAIN || ++stuck > 64)
				return;	/* frontd stopped reading: fine */
			/* Make room: frontd may be blocked on its replies. */
			while (read(fd, sink, sizeof(sink)) > 0)
				;
			fh_run();
			continue;
		}
		p += n;
		len -= n;
		fh_run();
	}
}

/* What frontd sent the client so far, NUL-terminated in buf. */
size_t
fh_read(int fd, char *buf, size_t bufsz)
{
	size_t	got = 0;
	ssize_t	n;
	char	sink[4096];

	for (;;) {
		if (got + 1 < bufsz)
			n = read(fd, buf + got, bufsz - 1 - got);
		else
			n = read(fd, sink, sizeof(sink));
		if (n <= 0)
			break;
		if (got + 1 < bufsz)
			got += n;
	}
	if (bufsz > 0)
		buf[got] = '\0';
	/* FUZZ_VERBOSE=1 shows what frontd answered, to check a seed. */
	if (got > 0 && getenv("FUZZ_VERBOSE") != NULL)
		fprintf(stderr, "frontd sent:\n%s\n", buf);
	return got;
}

/* Answer the held brokerd request as ipc.c would pass brokerd's reply on. */
void
fh_answer(const char *reply, size_t len, int *fds, int nfds)
{
	struct json_tokener	*tok;
	struct ipc_msg		 m;
	struct json_object	*obj = NULL;
	ipc_reply_cb		 cb = fh_call.cb;
	void			*arg = fh_call.arg;
	const struct proto_msg	*pm;
	const char		*body = NULL, *nul;
	size_t			 bodylen = 0;
	char			 err[256];
	int			 i;

	if (!fh_call.pending) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		return;
	}
	fh_call.pending = 0;
	pm = proto_find(proto_msgs, json_str(fh_call.obj, "type"), ROLE_FRONTD,
	    ROLE_BROKERD);
	json_object_put(fh_call.obj);
	fh_call.obj = NULL;
	/* A raw-body reply (PM_RAW): the envelope, a NUL, the body. */
	if (reply != NULL && (nul = memchr(reply, '\0', len)) != NULL) {
		body = nul + 1;
		bodylen = len - (size_t)(body - reply);
		len = (size_t)(nul - reply);
	}
	if (reply != NULL) {
		tok = json_tokener_new();
		obj = json_tokener_parse_ex(tok, reply, len);
		/*
		 * ipc.c passes on only a datagram that is one object, nothing
		 * after it; anything else is no answer.
		 */
		if (obj != NULL && (!json_object_is_type(obj, json_type_object) ||
		    json_tokener_get_parse_end(tok) != len)) {
			json_object_put(obj);
			obj = NULL;
		}
		json_tokener_free(tok);
	}
	/* As ipc.c checks it: a raw body only where the table allows one. */
	if (obj != NULL && body != NULL && (pm == NULL ||
	    (pm->flags & PM_RAW) == 0 ||
	    proto_check_raw(obj, body, bodylen, err, sizeof(err)) == -1)) {
		json_object_put(obj);
		obj = NULL;
	}
	if (obj == NULL) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		cb((struct ipc_peer *)&fh_peer_dummy, NULL, arg);
		fh_run();
		return;
	}
	memset(&m, 0, sizeof(m));
	m.obj = obj;
	m.type = json_str(obj, "type");
	m.id = -1;
	/* As ipc.c has it during the callback: the text the object came from. */
	m.raw = reply;
	m.rawlen = len;
	m.body = body;
	m.bodylen = bodylen;
	m.pm = pm;
	for (i = 0; i < IPC_MAX_FDS; i++)
		m.fds[i] = i < nfds ? fds[i] : -1;
	m.nfds = nfds;
	cb((struct ipc_peer *)&fh_peer_dummy, &m, arg);
	/* As ipc.c does: the fds the callback did not take are closed. */
	for (i = 0; i < nfds; i++)
		if (m.fds[i] != -1)
			close(m.fds[i]);
	json_object_put(obj);
	fh_run();
}

/* Close the client; answer what frontd still waits for, let it clean up. */
void
fh_close(int fd)
{
	char	sink[4096];

	while (read(fd, sink, sizeof(sink)) > 0)
		;
	close(fd);
	fh_run();
	/*
	 * A request still held when the client left: brokerd never answers;
	 * each such answer lets frontd take the next pipelined request.
	 */
	while (fh_call.pending)
		fh_answer(NULL, 0, NULL, 0);
	fh_run();
}

/* The n-th 0xff-separated part of the input. */
size_t
fh_part(const uint8_t *data, size_t size, int n, const uint8_t **part)
{
	const uint8_t	*p = data, *end = data + size, *cut;

	for (;;) {
		if ((cut = memchr(p, 0xff, end - p)) == NULL)
			cut = end;
		if (n-- == 0) {
			*part = p;
			return cut - p;
		}
		if (cut == end) {
			*part = NULL;
			return 0;
		}
		p = cut + 1;
	}
}

/* A memfd holding data, as brokerd's fds are (output, a file, a listing). */
int
fh_memfd(const void *data, size_t len)
{
	int	fd;

	if ((fd = memfd_create("fuzz", MFD_CLOEXEC)) == -1)
		abort();
	if (len > 0 && write(fd, data, len) != (ssize_t)len)
		abort();
	return fd;
}
