/*
 * A small checker of SBPL (Seatbelt) profiles, for the macOS backend's
 * tests: this machine has no sandbox-exec to try a profile with.
 */
#ifndef HG_SBPL_CHECK_H
#define HG_SBPL_CHECK_H

#include <stddef.h>

/*
 * 0 when text is balanced, starts with (version 1), holds only (version),
 * (allow) and (deny) forms with known operations and filters, reads only
 * parameters listed in params, and has no string containing one of
 * forbidden (values must come in as parameters). Else -1 and err. params
 * and forbidden are NULL-terminated lists, or NULL.
 */
int	sbpl_check(const char *text, const char *const *params,
	    const char *const *forbidden, char *err, size_t errsz);

#endif
