/*
 * libFuzzer target for the MCP server (frontd/mcp.c, mcp_tools.c): the
 * JSON-RPC parser, the revision checks, the lifecycle, the tools and what
 * they make of brokerd's answers, and the events of mcp_deliver. The
 * input, split at 0xff bytes, is: a control part (its first byte picks
 * the method: 'G' GET, 'D' DELETE, else POST; a second byte '+' makes an
 * MCP session first and sends its id; the rest are more header lines);
 * the body; then brokerd's answers to the requests frontd makes, one part
 * each, in turn; what is left, events delivered to the open streams.
 * Besides the sanitizers it checks that every answer is an HTTP/1.1
 * response, that a JSON answer of /mcp is a JSON-RPC 2.0 message, that a
 * request's id comes back as the client wrote it, and that nothing of a
 * connection (a stream, a memfd) stays once its client is gone.
 */
#include <sys/mman.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front_harness.h"

#define FUZZ_BEARER	"hgt_fuzzfuzzfuzzfuzzfuzzfuzzfuzzfuzzfuzzfuzz"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

static char	fuzz_buf[256 * 1024];

/* The descriptors this process holds. */
static int
fuzz_fds_open(void)
{
	DIR		*d;
	struct dirent	*e;
	int		 n = 0;

	if ((d = opendir("/proc/self/fd")) == NULL)
		abort();
	while ((e = readdir(d)) != NULL)
		n++;
	closedir(d);
	return n;
}

/*
 * Answer frontd's brokerd requests in turn from the parts from *next on;
 * a part is the reply's JSON text, given two memfds of its own bytes (as
 * a run's output, a file, a listing).
 */
static void
fuzz_answer(const uint8_t *data, size_t size, int *next)
{
	const uint8_t	*reply;
	size_t		 len;
	int		 fds[2], rounds = 0;

	while (fh_call.pending && rounds++ < 8) {
		len = fh_part(data, size, (*next)++, &reply);
		fds[0] = fh_memfd(reply, reply ? len : 0);
		fds[1] = fh_memfd(reply, reply ? len / 2 : 0);
		fh_answer((const char *)reply, len, fds, 2);
	}
	/* More requests than parts: they go unanswered (a timeout). */
	while (fh_call.pending)
		fh_answer(NULL, 0, NULL, 0);
}

/* A request on a fresh connection; what frontd answered into fuzz_buf. */
static size_t
fuzz_request(const char *head, const uint8_t *body, size_t blen, int *fdp)
{
	int	fd;

	fd = fh_connect();
	fh_write(fd, head, strlen(head));
	if (blen > 0)
		fh_write(fd, body, blen);
	*fdp = fd;
	return fh_read(fd, fuzz_buf, sizeof(fuzz_buf) - 1);
}

/* Make an MCP session with a canned initialize; its id into sid. */
static void
fuzz_session(char sid[64])
{
	static const char	 body[] = "{\"jsonrpc\":\"2.0\",\"id\":1,"
	    "\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
	    "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":"
	    "\"f\",\"version\":\"1\"}}}";
	static const char	 reply[] = "{\"user\":\"alice\",\"id\":1,"
	    "\"result\":{\"prompt\":\"be careful\",\"mode\":\"sandbox\"}}";
	char			 head[512];
	const char		*h;
	size_t			 got;
	int			 fd;

	sid[0] = '\0';
	snprintf(head, sizeof(head), "POST /mcp HTTP/1.1\r\nHost: x\r\n"
	    "Authorization: Bearer " FUZZ_BEARER "\r\n"
	    "Content-Type: application/json\r\n"
	    "Accept: application/json, text/event-stream\r\n"
	    "Content-Length: %zu\r\n\r\n", sizeof(body) - 1);
	fd = fh_connect();
	fh_write(fd, head, strlen(head));
	fh_write(fd, body, sizeof(body) - 1);
	if (fh_call.pending)
		fh_answer(reply, sizeof(reply) - 1, NULL, 0);
	got = fh_read(fd, fuzz_buf, sizeof(fuzz_buf) - 1);
	fuzz_buf[got] = '\0';
	if ((h = strstr(fuzz_buf, "\r\nMcp-Session-Id: ")) == NULL)
		abort();	/* the canned initialize must work */
	snprintf(sid, 64, "%.32s", h + 18);
	fh_close(fd);
}

/* The raw "id" of the body, if it is a simple integer or string. */
static int
fuzz_simple_id(const uint8_t *body, size_t len, char *out, size_t outsz)
{
	struct json_object	*o, *id;
	struct json_tokener	*tok;
	const char		*p;
	int			 ok = 0;

	tok = json_tokener_new();
	o = json_tokener_parse_ex(tok, (const char *)body, len);
	if (o != NULL && json_tokener_get_parse_end(tok) == len &&
	    json_object_is_type(o, json_type_object) &&
	    json_object_object_get_ex(o, "id", &id) &&
	    json_object_is_type(id, json_type_int) &&
	    json_object_get_int64(id) > -1000000 &&
	    json_object_get_int64(id) < 1000000) {
		/* Only when the text has one "id" written plainly. */
		snprintf(out, outsz, "\"id\":%lld",
		    (long long)json_object_get_int64(id));
		p = memmem(body, len, out, strlen(out));
		ok = p != NULL && memmem(p + 1, len - (p + 1 -
		    (const char *)body), "\"id\"", 4) == NULL &&
		    memmem(body, p - (const char *)body, "\"id\"", 4) == NULL &&
		    memchr(body, '\\', len) == NULL;
	}
	json_tokener_free(tok);
	json_object_put(o);
	return ok;
}

/* Check a JSON answer of /mcp: a JSON-RPC message, the id as sent. */
static void
fuzz_check(const char *buf, size_t got, const char *idtext)
{
	struct json_tokener	*tok;
	struct json_object	*o;
	const char		*head, *cl, *ct;
	long			 blen;

	if (got >= 9 && strncmp(buf, "HTTP/1.1 ", 9) != 0)
		abort();
	if ((head = strstr(buf, "\r\n\r\n")) == NULL ||
	    (ct = strstr(buf, "\r\nContent-Type: application/json")) == NULL ||
	    ct > head || (cl = strstr(buf, "\r\nContent-Length: ")) == NULL ||
	    cl > head || strstr(buf, "\"jsonrpc\"") == NULL)
		return;
	blen = strtol(cl + 18, NULL, 10);
	if ((size_t)blen > strlen(head + 4))
		return;
	tok = json_tokener_new();
	o = json_tokener_parse_ex(tok, head + 4, blen);
	if (o == NULL || json_tokener_get_parse_end(tok) != (size_t)blen ||
	    json_str(o, "jsonrpc") == NULL ||
	    strcmp(json_str(o, "jsonrpc"), "2.0") != 0 ||
	    json_object_object_get_ex(o, "result", NULL) ==
	    json_object_object_get_ex(o, "error", NULL)) {
		fprintf(stderr, "not a JSON-RPC answer: %.*s\n", (int)blen,
		    head + 4);
		abort();
	}
	if (idtext != NULL && json_object_object_get_ex(o, "id", NULL) &&
	    memmem(head + 4, blen, idtext, strlen(idtext)) == NULL) {
		fprintf(stderr, "id %s lost: %.*s\n", idtext, (int)blen,
		    head + 4);
		abort();
	}
	json_tokener_free(tok);
	json_object_put(o);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t		*ctl, *body, *ev;
	struct json_object	*obj;
	struct json_tokener	*tok;
	size_t			 clen, blen, elen, got;
	char			*head, sid[64], idtext[64];
	const char		*method = "POST";
	int			 fd, next = 2, fds_before, simple;

	fuzz_det_reset();
	fh_init(NULL);
	clen = fh_part(data, size, 0, &ctl);
	blen = fh_part(data, size, 1, &body);
	if (ctl == NULL)
		return 0;
	if (clen > 0 && ctl[0] == 'G')
		method = "GET";
	else if (clen > 0 && ctl[0] == 'D')
		method = "DELETE";
	sid[0] = '\0';
	if (clen > 1 && ctl[1] == '+')
		fuzz_session(sid);
	fds_before = fuzz_fds_open();
	if (asprintf(&head, "%s /mcp HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
	    "Authorization: Bearer " FUZZ_BEARER "\r\n%s%s%s%.*s"
	    "Content-Length: %zu\r\n\r\n", method,
	    sid[0] ? "Mcp-Session-Id: " : "", sid, sid[0] ? "\r\n" : "",
	    (int)(clen > 2 ? clen - 2 : 0), clen > 2 ? (const char *)ctl + 2 :
	    "", body ? blen : 0) == -1)
		abort();
	simple = body != NULL && fuzz_simple_id(body, blen, idtext,
	    sizeof(idtext));
	got = fuzz_request(head, body, body ? blen : 0, &fd);
	free(head);
	fuzz_answer(data, size, &next);
	got = fh_read(fd, fuzz_buf, sizeof(fuzz_buf) - 1);
	fuzz_buf[got] = '\0';
	fuzz_check(fuzz_buf, got, simple ? idtext : NULL);
	/* What is left: events for the streams (one may be open now). */
	while ((elen = fh_part(data, size, next++, &ev)), ev != NULL) {
		tok = json_tokener_new();
		obj = json_tokener_parse_ex(tok, (const char *)ev, elen);
		json_tokener_free(tok);
		if (obj != NULL && json_object_is_type(obj, json_type_object))
			mcp_deliver(obj);
		json_object_put(obj);
		fh_run();
	}
	fh_read(fd, fuzz_buf, sizeof(fuzz_buf) - 1);
	fh_close(fd);
	if (fuzz_fds_open() > fds_before)
		abort();
	return 0;
}
