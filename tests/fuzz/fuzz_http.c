/*
 * libFuzzer target for frontd's HTTP request head parser and cookie
 * lookup. Besides the sanitizers, it checks what callers rely on: a
 * complete head is never longer than the input or HTTP_MAX_HEAD, has an
 * origin-form path and a method, and every strict prefix of it still
 * parses as "need more"; a refused head leaves nothing behind.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../frontd/frontd.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

/* Parse len bytes of data and return the result, leaving nothing held. */
static int
fuzz_parse(const char *data, size_t len)
{
	struct http_request	req;
	int			rc;

	http_request_init(&req);
	rc = http_parse_head(data, len, &req);
	if (rc <= 0 && (req.target != NULL || !TAILQ_EMPTY(&req.headers)))
		abort();
	http_request_clear(&req);
	return (rc);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_request	 req;
	const char		*buf = (const char *)data;
	char			 out[64], tiny[2];
	int			 rc;

	fuzz_det_reset();

	http_request_init(&req);
	rc = http_parse_head(buf, size, &req);
	if (rc > 0) {
		if ((size_t)rc > size || rc > HTTP_MAX_HEAD)
			abort();
		if (req.method[0] == '\0' || req.path == NULL ||
		    req.path[0] != '/' || strlen(req.target) > 8192)
			abort();
		if (req.minor != 0 && req.minor != 1)
			abort();
		if (http_cookie(&req, "hg_session", out, sizeof out) == 0 &&
		    strlen(out) >= sizeof out)
			abort();
		http_cookie(&req, "a", tiny, sizeof tiny);
		http_header(&req, "Host");
		if (fuzz_parse(buf, rc - 1) != 0 || fuzz_parse(buf, rc / 2) != 0)
			abort();
	} else if (rc < 0) {
		switch (-rc) {
		case 400: case 414: case 431: case 501: case 505:
			break;
		default:
			abort();
		}
		if (req.target != NULL || !TAILQ_EMPTY(&req.headers))
			abort();
	} else if (req.target != NULL)
		abort();
	http_request_clear(&req);
	return (0);
}
