/*
 * libFuzzer target for egressd's request head parser (egressd/request.c)
 * and what is built from a parsed head. Besides the sanitizers, it checks
 * what egressd relies on: a head's length is never more than the input, a
 * parsed head has a lower-case host without control characters and a port
 * in 1..65535, its headers lie inside the input, and the head forwarded
 * upstream ends in Connection: close; an upstream response head rewritten
 * for the client stays within twice its size.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../egressd/egressd.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

/* Check the invariants of a parsed head of len bytes at buf. */
static void
fuzz_check(const char *buf, size_t len, const struct egress_req *req)
{
	const char	*h;
	char		*out;
	size_t		 n, i;
	int		 k;

	if (req->port < 1 || req->port > 65535 || req->host[0] == '\0')
		abort();
	for (h = req->host; *h != '\0'; h++)
		if ((unsigned char)*h <= ' ' || (*h >= 'A' && *h <= 'Z'))
			abort();
	for (k = 0; k < req->nhdrs; k++)
		if (req->hdrs[k].name < buf || req->hdrs[k].value +
		    req->hdrs[k].valuelen > buf + len)
			abort();
	if (req->connect)
		return;
	if ((out = request_forward(req, &n)) == NULL)
		return;
	if (n < 21 || strcmp(out + n - 21, "Connection: close\r\n\r\n") != 0)
		abort();
	for (i = 0; i + 1 < n; i++)
		if (out[i] == '\0')
			abort();
	free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct egress_req	*req;
	struct refusal_ctx	 ctx;
	const char		*buf = (const char *)data;
	char			 err[256], *out;
	size_t			 hl, n;
	int			 interim;

	fuzz_det_reset();
	if ((req = malloc(sizeof(*req))) == NULL)
		return 0;
	hl = request_head_len(buf, size);
	if (hl > size)
		abort();
	if (hl > 0 && request_parse(buf, hl, req, err, sizeof(err)) == 0) {
		fuzz_check(buf, hl, req);
		memset(&ctx, 0, sizeof(ctx));
		ctx.host = req->host;
		ctx.port = req->port;
		ctx.ports = "443, 80";
		if ((out = refusal_response(REF_ALLOWLIST, &ctx, &n)) != NULL)
			free(out);
	}
	/* The whole input as a head too: any garbage is refused cleanly. */
	(void)request_parse(buf, size, req, err, sizeof(err));
	if (hl > 0 && (out = response_rewrite(buf, hl, &n, &interim)) != NULL) {
		if (n > 2 * hl + 32)
			abort();
		free(out);
	}
	free(req);
	return 0;
}
