/*
 * libFuzzer target for frontd's event streams (frontd/sse.c): the
 * Last-Event-ID a client resumes from, then the stream frontd writes from
 * brokerd's answer and events. The input, split at 0xff bytes, is: the
 * Last-Event-ID value (sent as the header, or as ?last_event_id= when it
 * starts with '?'); brokerd's answer to events_subscribe (absent: a valid
 * one); then events from brokerd, one JSON object each. Besides the
 * sanitizers it checks that frontd asks brokerd for a non-negative id,
 * the very number the client sent when that is a plain decimal of at
 * most PROTO_COUNT_MAX, and 0 (from the start) for a larger one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front_harness.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

/* The id frontd must ask for: a plain decimal as sent (0 above the
 * protocol's bound), else none here. */
static int
fuzz_expect(const uint8_t *v, size_t len, long long *out)
{
	size_t	i;

	if (len == 0 || len > 18)
		return -1;
	for (i = 0; i < len; i++)
		if (v[i] < '0' || v[i] > '9')
			return -1;
	*out = 0;
	for (i = 0; i < len; i++)
		*out = *out * 10 + (v[i] - '0');
	if (*out > PROTO_COUNT_MAX)	/* beyond the protocol: a fresh stream */
		*out = 0;
	return 0;
}

/* One event stream: its Last-Event-ID, brokerd's answer, events. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char	 ok[] = "{\"result\":{\"user\":\"alice\","
	    "\"session\":\"0123456789abcdef0123456789abcdef\"}}";
	struct json_tokener	*tok;
	struct ipc_msg		 m;
	const uint8_t		*last, *reply, *ev;
	size_t			 lastlen, replylen, evlen;
	char			 buf[8192];
	long long		 want;
	int64_t			 id;
	int			 fd, n, query;

	fuzz_det_reset();
	fh_init(NULL);
	lastlen = fh_part(data, size, 0, &last);
	replylen = fh_part(data, size, 1, &reply);
	query = lastlen > 0 && last[0] == '?';
	if (query) {
		last++;
		lastlen--;
	}
	n = snprintf(buf, sizeof(buf), query ?
	    "GET /api/events?last_event_id=%.*s HTTP/1.1\r\nHost: h\r\n"
	    "Cookie: hg_session=c\r\n\r\n" :
	    "GET /api/events HTTP/1.1\r\nHost: h\r\nLast-Event-ID: %.*s\r\n"
	    "Cookie: hg_session=c\r\n\r\n", (int)lastlen, (const char *)last);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return 0;
	fd = fh_connect();
	fh_write(fd, buf, n);
	if (!fh_call.pending) {
		fh_close(fd);
		return 0;
	}
	if (strcmp(json_str(fh_call.obj, "type"), "events_subscribe") != 0 ||
	    json_int(fh_call.obj, "last_event_id", &id) == -1 || id < 0)
		abort();
	if (fuzz_expect(last, lastlen, &want) == 0 && id != want)
		abort();
	if (reply != NULL)
		fh_answer((const char *)reply, replylen, NULL, 0);
	else
		fh_answer(ok, sizeof(ok) - 1, NULL, 0);
	fh_read(fd, buf, sizeof(buf));
	for (n = 2; (evlen = fh_part(data, size, n, &ev)), ev != NULL; n++) {
		tok = json_tokener_new();
		memset(&m, 0, sizeof(m));
		m.obj = json_tokener_parse_ex(tok, (const char *)ev, evlen);
		json_tokener_free(tok);
		if (m.obj == NULL)
			continue;
		if (json_object_is_type(m.obj, json_type_object)) {
			m.type = json_str(m.obj, "type");
			m.id = -1;
			sse_deliver(NULL, &m);
			fh_run();
		}
		json_object_put(m.obj);
		fh_read(fd, buf, sizeof(buf));
	}
	fh_close(fd);
	return 0;
}
