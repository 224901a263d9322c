/*
 * libFuzzer target for the web panel's files (frontd/static.c): the
 * lookup of a request path among the files read at start-up, with hostile
 * paths. The panel is a small fixture made at start: a page, hashed and
 * plain assets, a nested file, and a hidden file and a symlink out of the
 * panel that must never be served. The input, split at 0xff bytes, is the
 * request target, then the method (absent: GET), then an If-None-Match
 * value (absent: none). Besides the sanitizers it checks every answer: a
 * 200 or 304 is for exactly the file the path names, or index.html for a
 * path outside /assets/ that names none; anything else under /assets/ is a
 * 404; no other content ever goes out.
 */
#include <sys/stat.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front_harness.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

static const struct {
	const char	*path;
	const char	*data;
} fuzz_files[] = {
	{ "/index.html", "<!doctype html><title>hostgate</title>" },
	{ "/favicon.ico", "ICO" },
	{ "/assets/index-AbCdEf12.js", "console.log('panel')" },
	{ "/assets/app.css", "body{margin:0}" },
	{ "/assets/player/term-0123456789.wasm", "wasm" },
	{ "/docs/readme.txt", "read me" },
};
#define FUZZ_NFILES	(sizeof(fuzz_files) / sizeof(fuzz_files[0]))

static char	fuzz_dir[] = "/tmp/fuzz_static.XXXXXX";

/* Remove the fixture (it is in memory from the start on). */
static void
fuzz_cleanup(void)
{
	char	cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", fuzz_dir);
	(void)!system(cmd);
}

/* Write path (a URL path) under the fixture, with its directories. */
static void
fuzz_put(const char *path, const char *data)
{
	char	fs[256], *slash;
	FILE	*f;

	snprintf(fs, sizeof(fs), "%s%s", fuzz_dir, path);
	for (slash = fs + strlen(fuzz_dir) + 1; (slash = strchr(slash, '/')) !=
	    NULL; slash++) {
		*slash = '\0';
		mkdir(fs, 0700);
		*slash = '/';
	}
	if ((f = fopen(fs, "w")) == NULL)
		abort();
	fputs(data, f);
	fclose(f);
}

/* Make the fixture once, before the first input. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char	fs[256];
	size_t	i;

	if (mkdtemp(fuzz_dir) == NULL)
		abort();
	atexit(fuzz_cleanup);
	for (i = 0; i < FUZZ_NFILES; i++)
		fuzz_put(fuzz_files[i].path, fuzz_files[i].data);
	fuzz_put("/.secret", "SECRET");
	fuzz_put("/assets/.env", "SECRET");
	snprintf(fs, sizeof(fs), "%s/passwd", fuzz_dir);
	if (symlink("/etc/passwd", fs) == -1)
		abort();
	fh_init(fuzz_dir);
	return 0;
}

/* The file a path must get, or NULL for a 404. */
static const char *
fuzz_expected(const char *path)
{
	size_t	i;

	for (i = 0; i < FUZZ_NFILES; i++)
		if (strcmp(fuzz_files[i].path, path) == 0)
			return fuzz_files[i].data;
	if (strncmp(path, "/assets/", 8) == 0)
		return NULL;
	return fuzz_files[0].data;
}

/* Check one answer against the path it was for. */
static void
fuzz_check(const char *buf, const char *path, int head)
{
	const char	*body, *want, *cl;
	int		 status;
	long		 len;

	if (sscanf(buf, "HTTP/1.1 %d ", &status) != 1)
		abort();
	if (status != 200 && status != 304)
		return;
	/* Only a panel path (not /api, /healthz) reaches static.c. */
	want = fuzz_expected(path);
	if (want == NULL || (body = strstr(buf, "\r\n\r\n")) == NULL ||
	    (cl = strstr(buf, "\r\nContent-Length: ")) == NULL || cl > body)
		abort();
	body += 4;
	len = strtol(cl + 18, NULL, 10);
	/* The body (before any answer to a next request) is that file. */
	if (status == 200 && (len != (long)strlen(want) ||
	    (!head && strncmp(body, want, len) != 0)))
		abort();
}

/* One request for a panel path, and the check of its answer. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t	*target, *method, *inm;
	size_t		 tlen, mlen, ilen;
	char		 req[4096], buf[8192], path[4096], *q;
	int		 fd, n;

	fuzz_det_reset();
	tlen = fh_part(data, size, 0, &target);
	mlen = fh_part(data, size, 1, &method);
	ilen = fh_part(data, size, 2, &inm);
	if (method == NULL) {
		method = (const uint8_t *)"GET";
		mlen = 3;
	}
	/* The method a token (the request line is fuzz_http's part). */
	for (n = 0; n < (int)mlen; n++)
		if (method[n] <= ' ' || method[n] >= 0x7f)
			return 0;
	if (memchr(target, '\0', tlen) != NULL || tlen >= sizeof(path) ||
	    (inm != NULL && memchr(inm, '\0', ilen) != NULL))
		return 0;
	n = snprintf(req, sizeof(req), "%.*s %.*s HTTP/1.1\r\nHost: h\r\n"
	    "%s%.*s%s\r\n", (int)mlen, (const char *)method, (int)tlen,
	    (const char *)target, inm != NULL ? "If-None-Match: " : "",
	    inm != NULL ? (int)ilen : 0, inm != NULL ? (const char *)inm : "",
	    inm != NULL ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(req))
		return 0;
	fd = fh_connect();
	fh_write(fd, req, n);
	if (fh_call.pending) {
		/* An API path: brokerd is not the point here. */
		fh_close(fd);
		return 0;
	}
	if (fh_read(fd, buf, sizeof(buf)) > 0 && strncmp(buf, "HTTP/1.1 2",
	    10) == 0 && strncmp(req, "GET /api", 8) != 0 &&
	    strncmp(req, "HEAD /api", 9) != 0 &&
	    strncmp(req, "GET /healthz", 12) != 0) {
		memcpy(path, target, tlen);
		path[tlen] = '\0';
		if ((q = strchr(path, '?')) != NULL)
			*q = '\0';
		fuzz_check(buf, path, mlen == 4 && memcmp(method, "HEAD", 4) ==
		    0);
	}
	if (strstr(buf, "SECRET") != NULL || strstr(buf, "root:") != NULL)
		abort();
	fh_close(fd);
	return 0;
}
