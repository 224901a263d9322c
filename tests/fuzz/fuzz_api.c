/*
 * libFuzzer target for frontd's API (frontd/api.c): routing, the JSON
 * request bodies and their field checks, the path ids and the audit query,
 * and what frontd makes of brokerd's answer. The input, split at 0xff
 * bytes, is: the HTTP request (head and body) as a client sends it; then
 * brokerd's answer to the request frontd made of it (absent: no answer);
 * then the contents of the two output memfds of a command's result (or
 * the file or listing of a file read). An upload (PUT /api/files/) asks
 * brokerd twice, its check before the body and its write after: both
 * get the same answer, the memfds going with the second. Besides the sanitizers it checks that every answer is an HTTP/1.1
 * response and that where frontd passes brokerd's result on as it is
 * (every route but health, login, logout, run and the file routes), the
 * body is that result: the same JSON as json-c reads it.
 */
#include <sys/mman.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front_harness.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

/* The routes whose answer is not brokerd's result as it is. */
static int
fuzz_own_reply(const char *op)
{
	return strcmp(op, "health") == 0 || strcmp(op, "login") == 0 ||
	    strcmp(op, "logout") == 0 || strcmp(op, "run") == 0 ||
	    strncmp(op, "file_", 5) == 0;
}

/* Whether a request is for /mcp, which answers in JSON-RPC (fuzz_mcp). */
static int
fuzz_is_mcp(const uint8_t *req, size_t len)
{
	const uint8_t	*sp;

	if (req == NULL || (sp = memchr(req, ' ', len)) == NULL ||
	    (size_t)(sp - req) + 5 > len)
		return 0;
	return memcmp(sp + 1, "/mcp", 4) == 0;
}

/*
 * Check an answer with a body for brokerd's reply (len bytes): when frontd
 * passed the result on, the body must be that result.
 */
static void
fuzz_check_result(const char *buf, const char *reply, size_t len)
{
	struct json_tokener	*tok;
	struct json_object	*o, *res, *body;
	const char		*head, *cl;
	int			 status;
	long			 blen;

	/* An interim 100 Continue first. */
	if (strncmp(buf, "HTTP/1.1 100 ", 13) == 0 &&
	    (head = strstr(buf, "\r\n\r\n")) != NULL)
		buf = head + 4;
	if (sscanf(buf, "HTTP/1.1 %d ", &status) != 1 ||
	    (status != 200 && status != 201) ||
	    (head = strstr(buf, "\r\n\r\n")) == NULL ||
	    (cl = strstr(buf, "\r\nContent-Length: ")) == NULL || cl > head)
		return;
	blen = strtol(cl + 18, NULL, 10);
	/* No body: a HEAD (the next answer, or nothing, follows); too long. */
	if ((size_t)blen > strlen(head + 4) ||
	    strncmp(head + 4, "HTTP/1.1 ", 9) == 0)
		return;
	tok = json_tokener_new();
	o = json_tokener_parse_ex(tok, reply, len);
	json_tokener_free(tok);
	if (o == NULL || !json_object_object_get_ex(o, "result", &res) ||
	    !json_object_is_type(res, json_type_object) ||
	    json_object_object_get_ex(o, "error", NULL)) {
		json_object_put(o);
		return;
	}
	tok = json_tokener_new();
	body = json_tokener_parse_ex(tok, head + 4, blen);
	if (body == NULL || json_tokener_get_parse_end(tok) != (size_t)blen ||
	    !json_object_equal(body, res)) {
		fprintf(stderr, "result %s\nbody %.*s\n",
		    json_object_to_json_string(res), (int)blen, head + 4);
		abort();
	}
	json_tokener_free(tok);
	json_object_put(body);
	json_object_put(o);
}

/* One client request, brokerd's answer to it, and the checks. */
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

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t	*req, *reply, *out;
	size_t		 reqlen, replylen, outlen, got;
	char		 buf[4096], op[64];
	int		 fd, fds[2], nfds = 0, i, own, fds_before, round, check;

	fuzz_det_reset();

	fh_init(NULL);
	fds_before = fuzz_fds_open();
	reqlen = fh_part(data, size, 0, &req);
	replylen = fh_part(data, size, 1, &reply);
	for (i = 0; i < 2; i++) {
		outlen = fh_part(data, size, 2 + i, &out);
		if (out != NULL)
			fds[nfds++] = fh_memfd(out, outlen);
	}
	fd = fh_connect();
	fh_write(fd, req, reqlen);
	got = fh_read(fd, buf, sizeof(buf));
	/* An upload's check, then its write; any other request once. */
	for (round = 0; fh_call.pending && round < 2; round++) {
		snprintf(op, sizeof(op), "%s", json_str(fh_call.obj, "type"));
		own = fuzz_own_reply(op) || fuzz_is_mcp(req, reqlen);
		check = 0;
		json_flag(fh_call.obj, "check", &check);
		if (check && (strcmp(op, "file_write") != 0 ||
		    fh_call.nfds != 0))
			abort();	/* a check carries no content */
		if (check) {
			fh_answer((const char *)reply, replylen, NULL, 0);
			/* The body (if it came) is read now. */
			got = fh_read(fd, buf, sizeof(buf));
			continue;
		}
		fh_answer((const char *)reply, replylen, fds, nfds);
		nfds = 0;
		got = fh_read(fd, buf, sizeof(buf));
		if (reply != NULL && !own && got < sizeof(buf) - 1)
			fuzz_check_result(buf, (const char *)reply, replylen);
		break;
	}
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	if (got > 0 && strncmp(buf, "HTTP/1.1 ", 9) != 0 && got >= 9)
		abort();
	fh_close(fd);
	/* Once its client is gone, frontd holds nothing of the connection. */
	if (fuzz_fds_open() > fds_before)
		abort();
	return 0;
}
