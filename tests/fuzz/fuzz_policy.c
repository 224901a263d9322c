/*
 * libFuzzer target for the seccomp policy parser: the input is a policy
 * file. It must parse or fail with a printable "fuzz.policy:LINE: ..."
 * message, never crash or read past the input; the BPF export is left out,
 * as it runs on the trusted profile only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../sandboxd/sandboxd.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

/* Abort unless msg names the file and is printable ASCII. */
static void
fuzz_check_message(const char *msg)
{
	const char	*p;

	if (strncmp(msg, "fuzz.policy:", 12) != 0 || msg[12] == '\0')
		abort();
	for (p = msg; *p != '\0'; p++)
		if (*p < 0x20 || *p > 0x7e)
			abort();
}

/* Parse one input: it fails cleanly, or holds one rule per line at most. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy	*pol;
	char		 err[512];
	size_t		 i, lines = 1;

	fuzz_det_reset();

	err[0] = '\0';
	pol = policy_parse((const char *)data, size, "fuzz.policy", err,
	    sizeof(err));
	if (pol == NULL) {
		fuzz_check_message(err);
		return (0);
	}
	/* At most one rule per line, and at least one. */
	for (i = 0; i < size; i++)
		if (data[i] == '\n')
			lines++;
	if (policy_nrules(pol) < 1 || policy_nrules(pol) > lines)
		abort();
	policy_free(pol);
	return (0);
}
