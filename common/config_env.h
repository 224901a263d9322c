/*
 * Internals of config.c shared with its unit test and fuzzer: the .env
 * parser and the table of variables (so tests can check that .env.example
 * and docs/configuration.md list every variable).
 */
#ifndef HG_CONFIG_ENV_H
#define HG_CONFIG_ENV_H

#include <stddef.h>

/* One NAME=value line of a .env file. */
struct config_env_var {
	char	*name;
	char	*value;
	int	 line;
};

/* The variables of a .env file, in file order (a later duplicate wins). */
struct config_env {
	struct config_env_var	*vars;
	size_t			 nvars;
};

/*
 * Parse len bytes of .env text; file names it in error messages
 * ("file:line: reason"). Returns 0, or -1 with err set and env empty.
 */
int	 config_env_parse(const char *file, const char *text, size_t len,
	    struct config_env *env, char *err, size_t errsz);
void	 config_env_free(struct config_env *env);

struct config;
/* config_load with deffile read instead of HG_ENV_FILE (for tests). */
int	 config_load_from(struct config *cfg, const char *deffile, char *err,
	    size_t errsz);

/* The known variables: count, then name and default of the i-th. */
size_t	 config_var_count(void);
const char *config_var_name(size_t i);
/* The default as .env.example writes it ("" when unset or computed). */
const char *config_var_default(size_t i);

#endif
