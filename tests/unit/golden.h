/*
 * Golden files for the unit tests: what a builder produces is compared
 * with tests/unit/golden/NAME; HG_UPDATE_GOLDEN=1 rewrites them instead,
 * for a reviewer to read in the diff.
 */
#ifndef HG_GOLDEN_H
#define HG_GOLDEN_H

struct strv;

/* The source tree: HG_SRCDIR, else the current directory (make's). */
const char	*golden_srcdir(void);
/* A whole file, NUL-terminated, or NULL. */
char		*golden_slurp(const char *path);
/* Compare text with the golden file name, or write it when asked to. */
void		 golden_check(const char *name, const char *text);
/* A vector as one shell-quoted line plus a newline (malloc'ed). */
char		*golden_line(const struct strv *);

#endif
