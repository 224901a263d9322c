/*
 * bpfdump: write the seccomp BPF program that sandboxd hands bwrap on
 * --seccomp to a file, compiled by sandboxd's own policy.c from the same
 * policy file, so that the benchmark's reference runs bwrap with exactly
 * the filter hostgate loads.
 *
 *	bpfdump POLICY-FILE OUTPUT-FILE
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "sandboxd.h"

/* Copy everything from fd in to fd out; -1 on a read or write error. */
static int
bpfdump_copy(int in, int out)
{
	char	 buf[8192];
	ssize_t	 n, w, off;

	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (off = 0; off < n; off += w) {
			if ((w = write(out, buf + off, n - off)) == -1) {
				if (errno == EINTR) {
					w = 0;
					continue;
				}
				return -1;
			}
		}
	}
	return 0;
}

/* Load the policy, compile it as sandboxd does, copy the program out. */
int
main(int argc, char *argv[])
{
	struct policy	*pol;
	char		 err[512];
	int		 bpf, out;

	if (argc != 3) {
		fprintf(stderr, "usage: bpfdump POLICY-FILE OUTPUT-FILE\n");
		return 2;
	}
	if ((pol = policy_load(argv[1], err, sizeof(err))) == NULL) {
		fprintf(stderr, "bpfdump: %s\n", err);
		return 1;
	}
	if ((bpf = policy_bpf_fd(pol, err, sizeof(err))) == -1) {
		fprintf(stderr, "bpfdump: %s\n", err);
		return 1;
	}
	policy_free(pol);
	if ((out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) == -1) {
		fprintf(stderr, "bpfdump: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	if (bpfdump_copy(bpf, out) == -1 || close(out) == -1) {
		fprintf(stderr, "bpfdump: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	close(bpf);
	return 0;
}
