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
 * 404, a method other than GET or HEAD a 405; no other content ever goes
 * out. CR LF in the parts makes more requests, pipelined: the answers are
 * checked in order against the requests frontd takes from the stream, as
 * its own parser splits it.
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

/* A request as frontd reads it off the connection. */
struct fuzz_req {
	char	*path;		/* NULL for a refused head */
	int	 get;		/* GET or HEAD */
	int	 head;		/* HEAD: an answer without a body */
	int	 refused;	/* the status frontd refuses the head with */
};

/* At most this many requests fit in one input's 4096 bytes. */
#define FUZZ_MAXREQ	256

/*
 * Split what the client sends (len bytes at s) into the requests frontd
 * takes from it, in order, with frontd's own parser: empty lines before a
 * request skipped, a body skipped by its Content-Length, and nothing after
 * a refused head, a request that closes, or a head or body that has not
 * fully arrived (frontd waits for the rest). The number of requests.
 */
static size_t
fuzz_split(const char *s, size_t len, struct fuzz_req *rq)
{
	struct http_request	 r;
	size_t			 n = 0, off = 0;
	long			 cl;
	int			 rc, keep;

	while (n < FUZZ_MAXREQ) {
		while (off < len && (s[off] == '\r' || s[off] == '\n'))
			off++;
		if (off == len)
			break;
		http_request_init(&r);
		if ((rc = http_parse_head(s + off, len - off, &r)) == 0)
			break;
		memset(&rq[n], 0, sizeof(rq[n]));
		if (rc < 0) {
			rq[n++].refused = -rc;
			break;
		}
		off += rc;
		cl = r.content_length;
		keep = r.keep_alive;
		rq[n].head = strcmp(r.method, "HEAD") == 0;
		rq[n].get = rq[n].head || strcmp(r.method, "GET") == 0;
		if (cl > FH_MAX_BODY)
			rq[n].refused = 413;
		else if ((rq[n].path = strdup(r.path)) == NULL)
			abort();
		http_request_clear(&r);
		if (rq[n++].refused != 0 || (cl > 0 && len - off < (size_t)cl))
			break;
		if (cl > 0)
			off += cl;
		if (!keep)
			break;
	}
	return n;
}

/*
 * Check one answer against the request it is for: a refused head gets its
 * status; a panel path (not /api, /healthz, /mcp or the MCP metadata:
 * static.c never sees those) gets 405 for a method other than GET and
 * HEAD, else exactly the file it names (200, or 304), index.html outside
 * /assets/, or a 404.
 */
static void
fuzz_check(const struct fuzz_req *r, int status, long len, const char *body)
{
	const char	*want;

	if (r->refused != 0) {
		if (status != r->refused)
			abort();
		return;
	}
	if (strncmp(r->path, "/api/", 5) == 0 || strcmp(r->path, "/api") ==
	    0 || strcmp(r->path, "/healthz") == 0 ||
	    strcmp(r->path, "/mcp") == 0 || strncmp(r->path,
	    "/.well-known/oauth-protected-resource", 37) == 0)
		return;
	if (!r->get) {
		if (status != 405)
			abort();
		return;
	}
	if ((want = fuzz_expected(r->path)) == NULL) {
		if (status != 404)
			abort();
		return;
	}
	if (status == 304)
		return;
	if (status != 200 || len != (long)strlen(want) || (!r->head &&
	    memcmp(body, want, len) != 0))
		abort();
}

/*
 * Walk the answers in buf (got bytes, NUL-terminated) in order, each
 * against the next of the nrq requests frontd took; the last answer may be
 * cut short by the size of buf.
 */
static void
fuzz_answers(const char *buf, size_t got, const struct fuzz_req *rq,
    size_t nrq)
{
	const char	*p = buf, *end = buf + got, *hend, *cl;
	size_t		 i = 0;
	long		 len, blen;
	int		 status;

	while (p < end) {
		if ((hend = memmem(p, end - p, "\r\n\r\n", 4)) == NULL)
			break;
		hend += 4;
		if (sscanf(p, "HTTP/1.1 %d ", &status) != 1)
			abort();
		if (status >= 100 && status < 200) {
			/* 100 Continue, before the body it asks for. */
			p = hend;
			continue;
		}
		if (i == nrq) {
			/* A head that never ended may time out, nothing else. */
			if (status != 408)
				abort();
			break;
		}
		len = -1;
		if ((cl = memmem(p, hend - p, "\r\nContent-Length: ", 18)) !=
		    NULL)
			len = strtol(cl + 18, NULL, 10);
		else if (status != 204 && status != 304)
			abort();
		blen = status == 204 || status == 304 || rq[i].head ? 0 : len;
		if (end - hend < blen)
			break;
		if (getenv("FUZZ_VERBOSE") != NULL)
			fprintf(stderr, "answer %d to %s\n", status,
			    rq[i].path != NULL ? rq[i].path : "a refused head");
		fuzz_check(&rq[i++], status, len, hend);
		p = hend + blen;
	}
}

/* One input: its requests to frontd, and the check of each answer. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t	*target, *method, *inm;
	size_t		 tlen, mlen, ilen, got, nrq, i;
	struct fuzz_req	 rq[FUZZ_MAXREQ];
	static char	 buf[65536];
	char		 req[4096];
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
	if (memchr(target, '\0', tlen) != NULL ||
	    (inm != NULL && memchr(inm, '\0', ilen) != NULL))
		return 0;
	n = snprintf(req, sizeof(req), "%.*s %.*s HTTP/1.1\r\nHost: h\r\n"
	    "%s%.*s%s\r\n", (int)mlen, (const char *)method, (int)tlen,
	    (const char *)target, inm != NULL ? "If-None-Match: " : "",
	    inm != NULL ? (int)ilen : 0, inm != NULL ? (const char *)inm : "",
	    inm != NULL ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(req))
		return 0;
	/*
	 * The target and the header may hold CR LF: then this is several
	 * requests, pipelined, and each answer is for the one frontd took.
	 */
	nrq = fuzz_split(req, n, rq);
	fd = fh_connect();
	fh_write(fd, req, n);
	/* Up to a request for brokerd, which is not the point here. */
	got = fh_read(fd, buf, sizeof(buf));
	fuzz_answers(buf, got, rq, nrq);
	if (strstr(buf, "SECRET") != NULL || strstr(buf, "root:") != NULL)
		abort();
	fh_close(fd);
	for (i = 0; i < nrq; i++)
		free(rq[i].path);
	return 0;
}
