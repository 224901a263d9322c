/*
 * hg-docvars: every configuration variable of common/config.c's table, one
 * line each, "NAME<TAB>KIND<TAB>DEFAULT", for scripts/docs.sh to hold
 * docs/configuration.md's table against. KIND says what the page must show
 * as the default:
 *   literal  the value, as written in the table (DEFAULT);
 *   path     a place compiled in from the Makefile's paths (paths.h), which
 *            the page writes with its make variables: not compared;
 *   none     no literal default (unset, empty or computed at start-up).
 */
#include <sys/types.h>

#include <stdio.h>
#include <string.h>

#include "common.h"
#include "config_env.h"
#include "paths.h"

/* The defaults that are the build's paths, not values of the table. */
static const char *const docvars_paths[] = {
	HG_STATE_DIR, HG_RUN_DIR, HG_PROFILES_DIR, HG_WEB_DIR, HG_ENV_FILE,
	NULL
};

int
main(void)
{
	const char *const	*p;
	const char		*def, *kind;
	size_t			 i;

	for (i = 0; i < config_var_count(); i++) {
		def = config_var_default(i);
		kind = *def == '\0' ? "none" : "literal";
		for (p = docvars_paths; *p != NULL; p++)
			if (strcmp(def, *p) == 0)
				kind = "path";
		printf("%s\t%s\t%s\n", config_var_name(i), kind, def);
	}
	return ferror(stdout) || fflush(stdout) != 0;
}
