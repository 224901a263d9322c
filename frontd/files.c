/*
 * The workspace file API, /api/files/...: GET and HEAD (a file, or a
 * directory's listing with a trailing slash), PUT (an upload, or a
 * directory with a trailing slash) and DELETE. frontd only decodes and
 * checks the shape of the path; brokerd decides who may, and sandboxd
 * resolves the path inside the user's workspace, as the user. File bytes
 * travel as fds: an upload is spooled into a memfd as it arrives (http.c),
 * a download is read from the fd sandboxd opened as the output drains.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "frontd.h"

#define FILES_PREFIX		"/api/files/"
#define FILES_PATH_MAX		4096	/* bytes of a decoded path */
#define FILES_NAME_MAX		255	/* bytes of one component */
/*
 * How long brokerd may take: sandboxd's limit (HOSTGATE_FILE_TIMEOUT_SECONDS,
 * and 1 ms per 8 KiB of a write, at most 6 hours), brokerd's grace beyond
 * it, and one more.
 */
#define FILES_BYTES_PER_MS	8192
#define FILES_TIMEOUT_MAX_MS	(6 * 3600 * 1000LL)
#define FILES_GRACE_MS		20000

/* A file request waiting for brokerd. */
struct files_call {
	struct http_request	*req;
	char			 path[FILES_PATH_MAX + 1];
	int			 dir;	/* the path had a trailing slash */
	int			 check;	/* an upload's check, body unread */
};

static struct config	*files_conf;

/* Remember the configuration (the upload cap, the timeout). */
void
files_init(struct config *conf)
{
	files_conf = conf;
}

/* How long to wait for brokerd's answer to a file request writing bytes. */
long long
files_wait_ms(long long bytes)
{
	long long	ms;

	ms = files_conf->file_timeout * 1000LL + bytes / FILES_BYTES_PER_MS;
	if (ms > FILES_TIMEOUT_MAX_MS)
		ms = FILES_TIMEOUT_MAX_MS;
	return ms + FILES_GRACE_MS;
}

/* Whether a request's body is spooled: every PUT under /api/files/. */
int
files_spool(struct http_request *req, long *cap)
{
	if (strcmp(req->method, "PUT") != 0 || req->path == NULL ||
	    strncmp(req->path, FILES_PREFIX, sizeof(FILES_PREFIX) - 1) != 0)
		return 0;
	*cap = files_conf != NULL ? files_conf->max_upload : -1;
	return 1;
}

/* The value of one hex digit, or -1. */
static int
files_hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * Decode and check the path after /api/files/ into out (without a
 * trailing slash; *dir set when it had one). NULL, or why it is refused.
 */
static const char *
files_path(const char *s, char *out, size_t outsz, int *dir)
{
	const char	*c, *next;
	size_t		 o = 0, len;
	int		 hi, lo;

	*dir = 0;
	for (; *s != '\0'; s++) {
		if (o + 1 >= outsz)
			return "the path is longer than 4096 bytes";
		if (*s != '%') {
			out[o++] = *s;
			continue;
		}
		if ((hi = files_hex(s[1])) == -1 || (lo = files_hex(s[2])) == -1)
			return "malformed percent-encoding in the path";
		if (hi == 0 && lo == 0)
			return "the path must not contain NUL";
		out[o++] = (char)(hi << 4 | lo);
		s += 2;
	}
	out[o] = '\0';
	if (out[0] == '/')
		return "the path must be relative to the workspace";
	if (o > 0 && out[o - 1] == '/') {
		*dir = 1;
		out[--o] = '\0';
	}
	for (c = out; o > 0; c = next + 1) {
		next = strchrnul(c, '/');
		len = (size_t)(next - c);
		if (len == 0)
			return "the path has an empty component";
		if ((len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return "the path must not contain . or .. components";
		if (len > FILES_NAME_MAX)
			return "a component of the path is longer than 255 "
			    "bytes";
		if (*next == '\0')
			break;
	}
	for (c = out; *c != '\0'; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return "the path must not contain control characters";
	return NULL;
}

/* The content type of a file name, from its extension. */
static const char *
files_type(const char *name)
{
	static const struct {
		const char	*ext;
		const char	*type;
	} types[] = {
		{ "txt", "text/plain; charset=utf-8" },
		{ "md", "text/markdown; charset=utf-8" },
		{ "log", "text/plain; charset=utf-8" },
		{ "csv", "text/csv; charset=utf-8" },
		{ "tsv", "text/tab-separated-values; charset=utf-8" },
		{ "html", "text/html; charset=utf-8" },
		{ "htm", "text/html; charset=utf-8" },
		{ "css", "text/css; charset=utf-8" },
		{ "js", "text/javascript; charset=utf-8" },
		{ "mjs", "text/javascript; charset=utf-8" },
		{ "ts", "text/plain; charset=utf-8" },
		{ "py", "text/x-python; charset=utf-8" },
		{ "sh", "text/x-shellscript; charset=utf-8" },
		{ "c", "text/x-c; charset=utf-8" },
		{ "h", "text/x-c; charset=utf-8" },
		{ "yaml", "text/yaml; charset=utf-8" },
		{ "yml", "text/yaml; charset=utf-8" },
		{ "toml", "text/plain; charset=utf-8" },
		{ "xml", "application/xml; charset=utf-8" },
		{ "json", "application/json; charset=utf-8" },
		{ "svg", "image/svg+xml" },
		{ "png", "image/png" },
		{ "jpg", "image/jpeg" },
		{ "jpeg", "image/jpeg" },
		{ "gif", "image/gif" },
		{ "webp", "image/webp" },
		{ "pdf", "application/pdf" },
		{ "zip", "application/zip" },
		{ "gz", "application/gzip" },
		{ "tgz", "application/gzip" },
		{ "tar", "application/x-tar" },
		{ "wasm", "application/wasm" },
	};
	const char	*dot;
	size_t		 i;

	if ((dot = strrchr(name, '.')) == NULL || dot == name)
		return "application/octet-stream";
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcasecmp(dot + 1, types[i].ext) == 0)
			return types[i].type;
	return "application/octet-stream";
}

/* The headers of a download: disposition, sandbox, Last-Modified. */
static void
files_download_headers(const char *path, time_t mtime, char *out,
    size_t outsz)
{
	static const char	 hex[] = "0123456789ABCDEF";
	const char		*name, *p;
	char			 enc[FILES_NAME_MAX * 3 + 1], date[64];
	struct tm		 tm;
	size_t			 o = 0;

	name = (p = strrchr(path, '/')) != NULL ? p + 1 : path;
	/* RFC 8187 attr-char as is, every other byte %XX. */
	for (p = name; *p != '\0' && o + 4 < sizeof(enc); p++) {
		unsigned char	c = *p;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("!#$&+-.^_`|~", c) != NULL)
			enc[o++] = c;
		else {
			enc[o++] = '%';
			enc[o++] = hex[c >> 4];
			enc[o++] = hex[c & 0xf];
		}
	}
	enc[o] = '\0';
	date[0] = '\0';
	if (gmtime_r(&mtime, &tm) != NULL)
		strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	snprintf(out, outsz, "Content-Disposition: attachment; "
	    "filename*=UTF-8''%s\r\n"
	    "Content-Security-Policy: sandbox\r\n"
	    "%s%s%s", enc, date[0] ? "Last-Modified: " : "", date,
	    date[0] ? "\r\n" : "");
}

/*
 * Send the regular file brokerd passed (fd, still its) as the body: a
 * download when c is given, a listing (a JSON object of two bytes or
 * more) when not.
 */
static void
files_send_fd(struct http_request *req, struct files_call *c, int fd)
{
	struct stat	 st;
	char		 extra[FILES_NAME_MAX * 3 + 256];
	int		 dfd;

	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    (c == NULL && st.st_size < 2)) {
		http_reply_error(req, 502, ERR_INTERNAL, c != NULL ?
		    "brokerd sent something that is not a file" :
		    "brokerd sent no listing", NULL);
		return;
	}
	if ((dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) == -1) {
		log_warn("%s: dup", __func__);
		http_reply_error(req, 503, ERR_UNAVAILABLE,
		    "out of descriptors", NULL);
		return;
	}
	if (c == NULL) {
		http_reply_fd(req, 200, "application/json", dfd,
		    (size_t)st.st_size, NULL);
		return;
	}
	files_download_headers(c->path, st.st_mtime, extra, sizeof(extra));
	log_debug("file read: %s, %lld bytes", c->path,
	    (long long)st.st_size);
	http_reply_fd(req, 200, files_type(c->path), dfd, (size_t)st.st_size,
	    extra);
}

/* brokerd answered a file request (or did not, m NULL). */
static void
files_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	struct files_call	*c = arg;
	struct http_request	*req = c->req;
	struct json_object	*res, *o, *v;
	const char		*type = req->method;
	char			 path[FILES_PATH_MAX + 2];
	int			 created = 0;

	req->pending = NULL;
	if (api_broker_failed(req, m)) {
		free(c);
		return;
	}
	if (c->check) {
		/* brokerd would take it: now the body may come. */
		free(c);
		http_spool_continue(req);
		return;
	}
	if (!json_object_object_get_ex(m->obj, "result", &res) ||
	    !json_object_is_type(res, json_type_object)) {
		free(c);
		http_reply_error(req, 502, ERR_INTERNAL,
		    "malformed reply from brokerd", NULL);
		return;
	}
	if (strcmp(type, "GET") == 0 || strcmp(type, "HEAD") == 0) {
		if (m->nfds != 1)
			http_reply_error(req, 502, ERR_INTERNAL,
			    "brokerd sent no file", NULL);
		else if (c->dir || c->path[0] == '\0')
			files_send_fd(req, NULL, m->fds[0]);
		else
			files_send_fd(req, c, m->fds[0]);
		free(c);
		return;
	}
	snprintf(path, sizeof(path), "%s%s", c->path, c->dir ? "/" : "");
	o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	if (strcmp(type, "DELETE") == 0) {
		json_object_object_add(o, "deleted", json_object_new_boolean(1));
		free(c);
		http_reply_json(req, 200, o, NULL);
		return;
	}
	json_flag(res, "created", &created);
	if (!c->dir) {
		json_object_object_get_ex(res, "size", &v);
		json_object_object_add(o, "size", json_object_get(v));
		json_object_object_get_ex(res, "mtime", &v);
		json_object_object_add(o, "mtime", json_object_get(v));
	}
	json_object_object_add(o, "created", json_object_new_boolean(created));
	log_debug("file %s: %s%s", c->dir ? "mkdir" : "write", path,
	    created ? " (created)" : "");
	free(c);
	http_reply_json(req, created ? 201 : 200, o, NULL);
}

/* Send a file request to brokerd (takes obj; fd, if any, is not taken). */
static void
files_send(struct http_request *req, struct files_call *c,
    struct json_object *obj, int fd)
{
	struct ipc_peer	*broker;
	long long	 ms;

	json_object_object_add(obj, "client", json_object_new_string(req->peer));
	api_add_auth(req, obj);
	if ((broker = api_broker_peer()) == NULL) {
		json_object_put(obj);
		free(c);
		http_reply_error(req, 503, ERR_UNAVAILABLE,
		    "brokerd is unreachable", NULL);
		return;
	}
	if (strlen(json_object_to_json_string_ext(obj,
	    JSON_C_TO_STRING_PLAIN)) > IPC_MAX_MSG - 512) {
		json_object_put(obj);
		free(c);
		http_reply_error(req, 413, ERR_TOO_LARGE,
		    "the request's credentials are too large", NULL);
		return;
	}
	ms = files_wait_ms((long long)req->body_len);
	req->pending = c;
	if (ipc_request(broker, obj, fd != -1 ? &fd : NULL, fd != -1 ? 1 : 0,
	    (int)ms, files_reply, c) == -1 &&
	    req->pending == c) {
		/* The link died under us; the callback did not run. */
		req->pending = NULL;
		free(c);
		http_reply_error(req, 503, ERR_UNAVAILABLE,
		    "brokerd is unreachable", NULL);
	}
}

/* Why a PUT of length bytes to c's path is refused, or NULL. */
static const char *
files_put_refused(struct files_call *c, long length)
{
	if (c->path[0] == '\0')
		return "the workspace itself always exists";
	if (c->dir && length > 0)
		return "a directory is made with an empty body";
	return NULL;
}

/*
 * An upload's head has come, its body not read: ask brokerd whether the
 * write would be taken (credentials, CSRF, permission, rate, size) before
 * any of it is held. The write itself is checked again when it comes.
 */
void
files_check(struct http_request *req)
{
	struct files_call	*c;
	struct json_object	*obj;
	const char		*why;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("%s", __func__);
	c->req = req;
	c->check = 1;
	if ((why = files_path(req->path + sizeof(FILES_PREFIX) - 1, c->path,
	    sizeof(c->path), &c->dir)) != NULL ||
	    (why = files_put_refused(c, req->content_length)) != NULL) {
		free(c);
		http_reply_error(req, 400, ERR_BAD_REQUEST, why, NULL);
		return;
	}
	obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(
	    MSG_FILE_WRITE));
	json_object_object_add(obj, "path", json_object_new_string(c->path));
	json_object_object_add(obj, "size",
	    json_object_new_int64((int64_t)req->content_length));
	json_object_object_add(obj, "dir", json_object_new_boolean(c->dir));
	json_object_object_add(obj, "check", json_object_new_boolean(1));
	files_send(req, c, obj, -1);
}

/* Route /api/files/...: check the path, then ask brokerd. */
void
files_handle(struct http_request *req)
{
	struct files_call	*c;
	struct json_object	*obj;
	const char		*why, *op;
	int			 fd = -1;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		fatal("%s", __func__);
	c->req = req;
	if ((why = files_path(req->path + sizeof(FILES_PREFIX) - 1, c->path,
	    sizeof(c->path), &c->dir)) != NULL) {
		free(c);
		http_reply_error(req, 400, ERR_BAD_REQUEST, why, NULL);
		return;
	}
	obj = json_object_new_object();
	if (strcmp(req->method, "GET") == 0 ||
	    strcmp(req->method, "HEAD") == 0)
		op = c->dir || c->path[0] == '\0' ? MSG_FILE_LIST : MSG_FILE_READ;
	else if (strcmp(req->method, "PUT") == 0) {
		op = MSG_FILE_WRITE;
		why = req->body_fd == -1 ? "an upload needs a body" :
		    files_put_refused(c, (long)req->body_len);
		if (why != NULL) {
			json_object_put(obj);
			free(c);
			http_reply_error(req, 400, ERR_BAD_REQUEST, why, NULL);
			return;
		}
		json_object_object_add(obj, "size",
		    json_object_new_int64((int64_t)req->body_len));
		json_object_object_add(obj, "dir",
		    json_object_new_boolean(c->dir));
		if (!c->dir)
			fd = req->body_fd;
	} else if (strcmp(req->method, "DELETE") == 0) {
		op = MSG_FILE_DELETE;
		if (c->path[0] == '\0') {
			json_object_put(obj);
			free(c);
			http_reply_error(req, 400, ERR_BAD_REQUEST,
			    "the workspace itself cannot be deleted", NULL);
			return;
		}
	} else {
		json_object_put(obj);
		free(c);
		http_reply_error(req, 405, "method_not_allowed",
		    "method not allowed here", "Allow: GET, HEAD, PUT, "
		    "DELETE\r\n");
		return;
	}
	json_object_object_add(obj, "type", json_object_new_string(op));
	json_object_object_add(obj, "path", json_object_new_string(c->path));
	files_send(req, c, obj, fd);
}
