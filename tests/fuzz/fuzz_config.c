/*
 * libFuzzer target for the configuration: the input is a .env file. It goes
 * through the .env parser alone, then through config_load() with
 * HOSTGATE_ENV_FILE pointing at it, so that every validator sees what the
 * parser lets through. Error messages must stay printable ASCII, since they
 * end up in logs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "config_env.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

extern char	**environ;

static char	fuzz_path[] = "/tmp/fuzz_config.XXXXXX";
static int	fuzz_fd = -1;

/* Remove the temporary .env file. */
static void
fuzz_cleanup(void)
{
	unlink(fuzz_path);
}

/* Abort unless msg is non-empty printable ASCII. */
static void
fuzz_check_message(const char *msg)
{
	const char	*p;

	if (*msg == '\0')
		abort();
	for (p = msg; *p != '\0'; p++)
		if (*p < 0x20 || *p > 0x7e)
			abort();
}

/* Start from an environment without hostgate variables, and a temp file. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char	**ep, name[256];
	size_t	  len;

	for (ep = environ; *ep != NULL;) {
		if (strncmp(*ep, "HOSTGATE_", 9) == 0 ||
		    strncmp(*ep, "HOST_EXECUTION_", 15) == 0 ||
		    strncmp(*ep, "HOST_SANDBOX_", 13) == 0) {
			len = strcspn(*ep, "=");
			snprintf(name, sizeof name, "%.*s", (int)len, *ep);
			unsetenv(name);
			ep = environ;
		} else
			ep++;
	}
	if ((fuzz_fd = mkstemp(fuzz_path)) == -1)
		fatal("mkstemp");
	atexit(fuzz_cleanup);
	setenv("HOSTGATE_ENV_FILE", fuzz_path, 1);
	log_init("fuzz_config", 1);
	return (0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config_env	 env;
	struct config		 cfg;
	struct json_object	*obj;
	char			 err[1024];
	size_t			 i;

	fuzz_det_reset();

	if (config_env_parse("fuzz.env", (const char *)data, size, &env, err,
	    sizeof err) == 0) {
		for (i = 0; i < env.nvars; i++)
			if (env.vars[i].name[0] == '\0' ||
			    env.vars[i].line < 1)
				abort();
		config_env_free(&env);
	} else {
		fuzz_check_message(err);
		if (env.nvars != 0 || env.vars != NULL)
			abort();
	}

	if (ftruncate(fuzz_fd, 0) == -1 ||
	    pwrite(fuzz_fd, data, size, 0) != (ssize_t)size)
		fatal("%s", fuzz_path);
	if (config_load(&cfg, err, sizeof err) == 0) {
		if (cfg.state_dir == NULL || cfg.state_dir[0] != '/' ||
		    cfg.workspace_root == NULL || cfg.listen_port < 1)
			abort();
		obj = config_to_json(&cfg);
		json_object_put(obj);
		config_free(&cfg);
	} else
		fuzz_check_message(err);
	return (0);
}
