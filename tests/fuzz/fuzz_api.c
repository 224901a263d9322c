/*
 * libFuzzer target for frontd's API (frontd/api.c): routing, the JSON
 * request bodies and their field checks, the path ids and the audit query,
 * and what frontd makes of brokerd's answer. The input, split at 0xff
 * bytes, is: the HTTP request (head and body) as a client sends it; then
 * brokerd's answer to the request frontd made of it (absent: no answer);
 * then the contents of the two output memfds of a command's result.
 * Besides the sanitizers it checks that every answer is an HTTP/1.1
 * response.
 */
#include <sys/mman.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front_harness.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

/* A memfd holding data (as sandboxd's output files are). */
static int
fuzz_memfd(const uint8_t *data, size_t len)
{
	int	fd;

	if ((fd = memfd_create("out", MFD_CLOEXEC)) == -1)
		abort();
	if (len > 0 && write(fd, data, len) != (ssize_t)len)
		abort();
	return fd;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t	*req, *reply, *out;
	size_t		 reqlen, replylen, outlen, got;
	char		 buf[4096];
	int		 fd, fds[2], nfds = 0, i;

	fuzz_det_reset();

	fh_init(NULL);
	reqlen = fh_part(data, size, 0, &req);
	replylen = fh_part(data, size, 1, &reply);
	for (i = 0; i < 2; i++) {
		outlen = fh_part(data, size, 2 + i, &out);
		if (out != NULL)
			fds[nfds++] = fuzz_memfd(out, outlen);
	}
	fd = fh_connect();
	fh_write(fd, req, reqlen);
	got = fh_read(fd, buf, sizeof(buf));
	if (fh_call.pending) {
		fh_answer((const char *)reply, replylen, fds, nfds);
		nfds = 0;
		got = fh_read(fd, buf, sizeof(buf));
	}
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	if (got > 0 && strncmp(buf, "HTTP/1.1 ", 9) != 0 && got >= 9)
		abort();
	fh_close(fd);
	return 0;
}
