/*
 * The web panel's files. frontd reads the whole built panel into memory at
 * start-up, before it drops privileges, and never opens a file again: a
 * compromised frontd has no file to open and its seccomp filter allows
 * none.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontd.h"

#define STATIC_MAX_FILES	512
#define STATIC_MAX_TOTAL	(32 * 1024 * 1024)

struct static_file {
	char	*path;		/* URL path: "/index.html", "/assets/x.js" */
	char	*data;
	size_t	 len;
	char	 etag[24];
	int	 hashed;	/* name carries a content hash: cache for long */
};

static struct static_file	*static_files;
static size_t			 static_nfiles;
static size_t			 static_total;

/*
 * The Content-Security-Policy of the panel: no inline script, no framing,
 * connections to this origin only (fetch, SSE and WebSocket).
 * 'wasm-unsafe-eval' lets the recording player compile its WebAssembly
 * terminal emulator; it allows no eval() of JavaScript.
 */
#define STATIC_CSP	"Content-Security-Policy: default-src 'self'; " \
	"script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data:; " \
	"font-src 'self'; connect-src 'self'; object-src 'none'; " \
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'\r\n"

/* The content type of a file name. */
static const char *
static_type(const char *path)
{
	static const struct {
		const char	*ext;
		const char	*type;
	} types[] = {
		{ ".html", "text/html; charset=utf-8" },
		{ ".js", "text/javascript; charset=utf-8" },
		{ ".mjs", "text/javascript; charset=utf-8" },
		{ ".css", "text/css; charset=utf-8" },
		{ ".json", "application/json" },
		{ ".svg", "image/svg+xml" },
		{ ".png", "image/png" },
		{ ".ico", "image/x-icon" },
		{ ".woff2", "font/woff2" },
		{ ".woff", "font/woff" },
		{ ".txt", "text/plain; charset=utf-8" },
		{ ".map", "application/json" },
	};
	const char	*dot = strrchr(path, '.');
	size_t		 i;

	for (i = 0; dot != NULL && i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(dot, types[i].ext) == 0)
			return types[i].type;
	return "application/octet-stream";
}

/* Whether a Vite asset name carries a content hash (name-HASH.ext). */
static int
static_is_hashed(const char *path)
{
	const char	*dash, *dot;
	size_t		 n;

	if (strncmp(path, "/assets/", 8) != 0 ||
	    (dash = strrchr(path, '-')) == NULL ||
	    (dot = strchr(dash, '.')) == NULL)
		return 0;
	n = dot - dash - 1;
	return n >= 8 && strspn(dash + 1, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") >= n;
}

/* Read one file into the table. */
static int
static_add(const char *fs, const char *url, char *err, size_t errsz)
{
	struct static_file	*f;
	char			 hex[65];
	size_t			 len;
	char			*data;

	if (static_nfiles == STATIC_MAX_FILES) {
		snprintf(err, errsz, "web panel: more than %d files",
		    STATIC_MAX_FILES);
		return -1;
	}
	if ((data = file_read(fs, STATIC_MAX_TOTAL, &len)) == NULL) {
		snprintf(err, errsz, "web panel: %s: %s", fs, strerror(errno));
		return -1;
	}
	if ((static_total += len) > STATIC_MAX_TOTAL) {
		free(data);
		snprintf(err, errsz, "web panel: larger than %d bytes",
		    STATIC_MAX_TOTAL);
		return -1;
	}
	static_files = reallocarray(static_files, static_nfiles + 1,
	    sizeof(*static_files));
	if (static_files == NULL)
		fatal("%s", __func__);
	f = &static_files[static_nfiles++];
	if ((f->path = strdup(url)) == NULL)
		fatal("%s", __func__);
	f->data = data;
	f->len = len;
	sha256_hex(data, len, hex);
	snprintf(f->etag, sizeof(f->etag), "\"%.16s\"", hex);
	f->hashed = static_is_hashed(url);
	return 0;
}

/* Walk dir (its URL prefix is url) and read every regular file. */
static int
static_walk(const char *dir, const char *url, int depth, char *err,
    size_t errsz)
{
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	char		 fs[4096], u[2048];
	int		 rc = 0;

	if (depth > 8) {
		snprintf(err, errsz, "web panel: %s: too deep", dir);
		return -1;
	}
	if ((d = opendir(dir)) == NULL) {
		snprintf(err, errsz, "web panel: %s: %s", dir, strerror(errno));
		return -1;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;	/* ., .., and hidden files */
		snprintf(fs, sizeof(fs), "%s/%s", dir, de->d_name);
		snprintf(u, sizeof(u), "%s/%s", url, de->d_name);
		/* lstat: a symlink out of the panel is not followed. */
		if (lstat(fs, &st) == -1)
			continue;
		if (S_ISDIR(st.st_mode))
			rc = static_walk(fs, u, depth + 1, err, errsz);
		else if (S_ISREG(st.st_mode))
			rc = static_add(fs, u, err, errsz);
	}
	closedir(d);
	return rc;
}

/*
 * Read the built panel under dir into memory. A missing directory is not
 * an error: the API works without a panel, and "/" says it is not built.
 */
int
static_load(const char *dir, char *err, size_t errsz)
{
	struct stat	st;

	if (stat(dir, &st) == -1 && errno == ENOENT) {
		log_warnx("web panel not built (%s missing)", dir);
		return 0;
	}
	if (static_walk(dir, "", 0, err, errsz) == -1)
		return -1;
	log_info("web panel: %zu files, %zu bytes from %s", static_nfiles,
	    static_total, dir);
	return 0;
}

static struct static_file *
static_find(const char *path)
{
	size_t	i;

	for (i = 0; i < static_nfiles; i++)
		if (strcmp(static_files[i].path, path) == 0)
			return &static_files[i];
	return NULL;
}

/*
 * Answer GET or HEAD for a panel path. Hashed assets are cached for a
 * year; everything else is revalidated by ETag. Paths that name no file
 * get index.html (the panel routes on the client), except under /assets/.
 */
void
static_serve(struct http_request *req)
{
	struct static_file	*f;
	const char		*inm;
	char			 extra[1024];

	if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
		http_reply_error(req, 405, "method_not_allowed",
		    "method not allowed here", "Allow: GET, HEAD\r\n");
		return;
	}
	if ((f = static_find(req->path)) == NULL &&
	    strncmp(req->path, "/assets/", 8) != 0)
		f = static_find("/index.html");
	if (f == NULL) {
		if (static_nfiles == 0)
			http_reply_error(req, 503, ERR_UNAVAILABLE, "the web "
			    "panel is not built (make builds it)", NULL);
		else
			http_reply_error(req, 404, ERR_NOT_FOUND, "no such file",
			    NULL);
		return;
	}
	snprintf(extra, sizeof(extra), "%sETag: %s\r\nCache-Control: %s\r\n",
	    STATIC_CSP, f->etag, f->hashed ? "public, max-age=31536000, "
	    "immutable" : "no-cache");
	if ((inm = http_header(req, "If-None-Match")) != NULL &&
	    strcmp(inm, f->etag) == 0) {
		http_reply(req, 304, NULL, NULL, 0, extra);
		return;
	}
	http_reply(req, 200, static_type(f->path), f->data, f->len, extra);
}
