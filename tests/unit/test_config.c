/*
 * Unit tests for common/config.c: defaults, validation of every variable,
 * the .env file and its precedence, and that the documentation lists every
 * variable.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "config_env.h"

extern char	**environ;

static char	 srcdir[PATH_MAX];	/* where the tests were started */
static char	 tmpdir[PATH_MAX];	/* the current test's directory */
static char	 err[1024];

/* Remove every variable with hostgate's prefixes from the environment. */
static void
clear_env(void)
{
	char	name[256], **ep;
	size_t	len;
	int	again = 1;

	while (again) {
		again = 0;
		for (ep = environ; *ep != NULL; ep++) {
			if (strncmp(*ep, "HOSTGATE_", 9) != 0 &&
			    strncmp(*ep, "HOST_EXECUTION_", 15) != 0 &&
			    strncmp(*ep, "HOST_SANDBOX_", 13) != 0)
				continue;
			len = strcspn(*ep, "=");
			if (len >= sizeof name)
				len = sizeof name - 1;
			memcpy(name, *ep, len);
			name[len] = '\0';
			unsetenv(name);
			again = 1;	/* environ changed: start over */
			break;
		}
	}
}

/* Each test runs in a fresh empty directory with a clean environment. */
static int
setup(void **state)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/hg-test-config.XXXXXX");
	if (mkdtemp(tmpdir) == NULL || chdir(tmpdir) == -1)
		return (-1);
	clear_env();
	return (0);
}

static int
teardown(void **state)
{
	DIR		*d;
	struct dirent	*de;

	if ((d = opendir(".")) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") != 0 &&
			    strcmp(de->d_name, "..") != 0)
				unlink(de->d_name);
		closedir(d);
	}
	if (chdir(srcdir) == -1)
		return (-1);
	rmdir(tmpdir);
	clear_env();
	return (0);
}

/* Write a file in the test directory. */
static void
write_file(const char *name, const char *text)
{
	FILE	*f;

	assert_non_null(f = fopen(name, "w"));
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/*
 * Load with ./.env as the default .env file, so that no file of this
 * machine (HG_ENV_FILE) is read.
 */
static int
load(struct config *cfg)
{
	return (config_load_from(cfg, "./.env", err, sizeof err));
}

/* The compiled-in default of a variable. */
static const char *
var_default(const char *name)
{
	size_t	i;

	for (i = 0; i < config_var_count(); i++)
		if (strcmp(config_var_name(i), name) == 0)
			return (config_var_default(i));
	fail_msg("no variable %s", name);
	return (NULL);
}

/* Run fn with stderr going to a file; returns what it wrote (static). */
static const char *
capture_stderr(void (*fn)(void *), void *arg)
{
	static char	 out[8192];
	FILE		*f;
	size_t		 n;
	int		 saved;

	fflush(stderr);
	assert_non_null(f = tmpfile());
	assert_int_not_equal(saved = dup(2), -1);
	assert_int_not_equal(dup2(fileno(f), 2), -1);
	fn(arg);
	fflush(stderr);
	assert_int_not_equal(dup2(saved, 2), -1);
	close(saved);
	rewind(f);
	n = fread(out, 1, sizeof out - 1, f);
	out[n] = '\0';
	fclose(f);
	return (out);
}

/* Load, expecting success. */
static void
load_ok(struct config *cfg)
{
	err[0] = '\0';
	if (load(cfg) != 0)
		fail_msg("config_load failed: %s", err);
}

/* Load, expecting failure; returns the message. */
static const char *
load_fail(void)
{
	struct config	cfg;

	err[0] = '\0';
	if (load(&cfg) != -1) {
		config_free(&cfg);
		fail_msg("config_load succeeded");
	}
	return (err);
}

/* Set one variable and expect the load to fail with exactly msg. */
static void
expect_error(const char *name, const char *value, const char *msg)
{
	assert_int_equal(setenv(name, value, 1), 0);
	assert_string_equal(load_fail(), msg);
	unsetenv(name);
}

/* Set one variable and expect the load to fail naming it and the value. */
static void
expect_refused(const char *name, const char *value)
{
	char	prefix[512], evalue[LOG_ESCAPE_MAX];

	assert_int_equal(setenv(name, value, 1), 0);
	snprintf(prefix, sizeof prefix, "%s=%s: ", name,
	    log_escape(value, (size_t)-1, evalue, sizeof evalue));
	load_fail();
	if (strncmp(err, prefix, strlen(prefix)) != 0 ||
	    strstr(err, "(allowed: ") == NULL)
		fail_msg("for %s=%s got: %s", name, value, err);
	unsetenv(name);
}

/* Set one variable and expect the load to succeed. */
static void
expect_accepted(const char *name, const char *value)
{
	struct config	cfg;

	assert_int_equal(setenv(name, value, 1), 0);
	if (load(&cfg) != 0)
		fail_msg("%s=%s refused: %s", name, value, err);
	config_free(&cfg);
	unsetenv(name);
}

/* With nothing set, every field has its documented default. */
static void
test_defaults(void **state)
{
	struct config	cfg;
	char		want[PATH_MAX + 32];

	load_ok(&cfg);
	assert_int_equal(cfg.mode_default, MODE_SANDBOX);
	assert_int_equal(cfg.direct_ttl, 600);
	assert_string_equal(cfg.macos_writable, "");
	assert_string_equal(cfg.listen, "127.0.0.1:8080");
	assert_string_equal(cfg.listen_host, "127.0.0.1");
	assert_int_equal(cfg.listen_port, 8080);
	assert_int_equal(cfg.listen_loopback, 1);
	assert_null(cfg.tls_cert);
	assert_null(cfg.tls_key);
	assert_int_equal(cfg.insecure_http, 0);
	/* The compiled-in places of an installed hostgate, not ./var. */
	assert_string_equal(cfg.state_dir, var_default("HOSTGATE_STATE_DIR"));
	assert_string_equal(cfg.run_dir, var_default("HOSTGATE_RUN_DIR"));
	assert_int_equal(cfg.state_dir[0], '/');
	assert_int_equal(cfg.run_dir[0], '/');
	snprintf(want, sizeof want, "%s/workspaces", cfg.state_dir);
	assert_string_equal(cfg.workspace_root, want);
	assert_int_equal(cfg.runtime, RUNTIME_HOST);
	assert_string_equal(cfg.sandbox_backend, "auto");
	assert_int_equal(cfg.on_expiry, EXPIRY_TERMINATE);
	assert_string_equal(cfg.front_user, "hostgate-front");
	assert_string_equal(cfg.broker_user, "hostgate-broker");
	assert_string_equal(cfg.sandbox_user, "hostgate-sandbox");
	assert_int_equal(cfg.max_body, 1048576);
	assert_int_equal(cfg.login_rate, 10);
	assert_int_equal(cfg.login_burst, 5);
	assert_int_equal(cfg.session_lifetime, 43200);
	assert_int_equal(cfg.log_level, LOG_LVL_INFO);
	assert_int_equal(cfg.seccomp_debug, 0);
	assert_null(cfg.env_file);
	config_free(&cfg);
	assert_null(cfg.state_dir);
}

/* Valid values of the enumerated and numeric variables land in the struct. */
static void
test_values(void **state)
{
	struct config	cfg;

	setenv("HOST_EXECUTION_MODE_DEFAULT", "direct", 1);
	setenv("HOST_EXECUTION_DIRECT_TTL_SECONDS", "86400", 1);
	setenv("HOSTGATE_RUNTIME", "docker", 1);
	setenv("HOSTGATE_SANDBOX_BACKEND", "sandbox-exec", 1);
	setenv("HOSTGATE_DIRECT_ON_EXPIRY", "keep", 1);
	setenv("HOSTGATE_FRONT_USER", "_front", 1);
	setenv("HOSTGATE_BROKER_USER", "b-2_x", 1);
	setenv("HOSTGATE_SANDBOX_USER", "abcdefghijklmnopqrstuvwxyz012345", 1);
	setenv("HOSTGATE_MAX_BODY_BYTES", "67108864", 1);
	setenv("HOSTGATE_LOGIN_RATE_PER_MINUTE", "10000", 1);
	setenv("HOSTGATE_LOGIN_BURST", "1", 1);
	setenv("HOSTGATE_SESSION_LIFETIME_SECONDS", "60", 1);
	setenv("HOSTGATE_LOG_LEVEL", "debug", 1);
	setenv("HOSTGATE_SECCOMP_DEBUG", "1", 1);
	setenv("HOSTGATE_INSECURE_HTTP", "1", 1);
	load_ok(&cfg);
	assert_int_equal(cfg.mode_default, MODE_DIRECT);
	assert_int_equal(cfg.direct_ttl, 86400);
	assert_int_equal(cfg.runtime, RUNTIME_DOCKER);
	assert_string_equal(cfg.sandbox_backend, "sandbox-exec");
	assert_int_equal(cfg.on_expiry, EXPIRY_KEEP);
	assert_string_equal(cfg.front_user, "_front");
	assert_string_equal(cfg.broker_user, "b-2_x");
	assert_string_equal(cfg.sandbox_user,
	    "abcdefghijklmnopqrstuvwxyz012345");
	assert_int_equal(cfg.max_body, 67108864);
	assert_int_equal(cfg.login_rate, 10000);
	assert_int_equal(cfg.login_burst, 1);
	assert_int_equal(cfg.session_lifetime, 60);
	assert_int_equal(cfg.log_level, LOG_LVL_DEBUG);
	assert_int_equal(cfg.seccomp_debug, 1);
	assert_int_equal(cfg.insecure_http, 1);
	config_free(&cfg);

	expect_accepted("HOSTGATE_SANDBOX_BACKEND", "bwrap");
	expect_accepted("HOSTGATE_SANDBOX_BACKEND", "wsl2");
	expect_accepted("HOSTGATE_LOG_LEVEL", "error");
	expect_accepted("HOSTGATE_LOG_LEVEL", "warn");
	expect_accepted("HOST_EXECUTION_DIRECT_TTL_SECONDS", "1");
	expect_accepted("HOSTGATE_MAX_BODY_BYTES", "1024");
	expect_accepted("HOSTGATE_SESSION_LIFETIME_SECONDS", "31536000");
}

/* Invalid values are refused with the variable, the value and the rule. */
static void
test_invalid_messages(void **state)
{
	expect_error("HOST_EXECUTION_DIRECT_TTL_SECONDS", "0",
	    "HOST_EXECUTION_DIRECT_TTL_SECONDS=0: out of range "
	    "(allowed: an integer from 1 to 86400)");
	expect_error("HOST_EXECUTION_DIRECT_TTL_SECONDS", "10m",
	    "HOST_EXECUTION_DIRECT_TTL_SECONDS=10m: not a number "
	    "(allowed: an integer from 1 to 86400)");
	expect_error("HOSTGATE_RUNTIME", "dokcer",
	    "HOSTGATE_RUNTIME=dokcer: unknown value "
	    "(allowed: host, docker)");
	expect_error("HOSTGATE_LOG_LEVEL", "info\n",
	    "HOSTGATE_LOG_LEVEL=info\\n: unknown value "
	    "(allowed: error, warn, info, debug)");
	expect_error("HOSTGATE_INSECURE_HTTP", "yes",
	    "HOSTGATE_INSECURE_HTTP=yes: not 0 or 1 (allowed: 0, 1)");
	expect_error("HOSTGATE_FRONT_USER", "Front",
	    "HOSTGATE_FRONT_USER=Front: not a valid user name "
	    "(allowed: a user name matching [a-z_][a-z0-9_-]{0,31})");
	expect_error("HOSTGATE_LISTEN", "localhost:8080",
	    "HOSTGATE_LISTEN=localhost:8080: not a numeric IPv4 address "
	    "(allowed: a numeric IPv4 address or a bracketed IPv6 address, "
	    "':' and a port from 0 to 65535, e.g. 127.0.0.1:8080 or "
	    "[::1]:8080)");
}

/* Every variable refuses what it does not allow. */
static void
test_invalid_values(void **state)
{
	static const char *const bad[][2] = {
		{ "HOST_EXECUTION_MODE_DEFAULT", "Sandbox" },
		{ "HOST_EXECUTION_MODE_DEFAULT", "sandbox " },
		{ "HOST_EXECUTION_DIRECT_TTL_SECONDS", "86401" },
		{ "HOST_EXECUTION_DIRECT_TTL_SECONDS", "+60" },
		{ "HOST_EXECUTION_DIRECT_TTL_SECONDS", "-1" },
		{ "HOST_EXECUTION_DIRECT_TTL_SECONDS", " 60" },
		{ "HOST_EXECUTION_DIRECT_TTL_SECONDS", "0x10" },
		{ "HOST_EXECUTION_DIRECT_TTL_SECONDS",
		    "99999999999999999999999999" },
		{ "HOSTGATE_RUNTIME", "podman" },
		{ "HOSTGATE_SANDBOX_BACKEND", "firejail" },
		{ "HOSTGATE_DIRECT_ON_EXPIRY", "kill" },
		{ "HOSTGATE_FRONT_USER", "1abc" },
		{ "HOSTGATE_BROKER_USER", "a b" },
		{ "HOSTGATE_SANDBOX_USER", "abcdefghijklmnopqrstuvwxyz0123456" },
		{ "HOSTGATE_SANDBOX_USER", "root\n" },
		{ "HOSTGATE_MAX_BODY_BYTES", "1023" },
		{ "HOSTGATE_MAX_BODY_BYTES", "67108865" },
		{ "HOSTGATE_LOGIN_RATE_PER_MINUTE", "0" },
		{ "HOSTGATE_LOGIN_RATE_PER_MINUTE", "10001" },
		{ "HOSTGATE_LOGIN_BURST", "0" },
		{ "HOSTGATE_SESSION_LIFETIME_SECONDS", "59" },
		{ "HOSTGATE_SESSION_LIFETIME_SECONDS", "31536001" },
		{ "HOSTGATE_LOG_LEVEL", "verbose" },
		{ "HOSTGATE_SECCOMP_DEBUG", "2" },
		{ "HOSTGATE_INSECURE_HTTP", "true" },
		{ "HOSTGATE_STATE_DIR", "/var/lib/hg\nx" },
		{ "HOSTGATE_RUN_DIR", "run\t1" },
		{ "HOSTGATE_TLS_CERT", "/etc/cert\r.pem" },
	};
	size_t	i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		expect_refused(bad[i][0], bad[i][1]);
}

/* HOSTGATE_LISTEN: IPv4 and bracketed IPv6, loopback detection. */
static void
test_listen(void **state)
{
	struct config	cfg;

	setenv("HOSTGATE_LISTEN", "[::1]:8443", 1);
	load_ok(&cfg);
	assert_string_equal(cfg.listen, "[::1]:8443");
	assert_string_equal(cfg.listen_host, "::1");
	assert_int_equal(cfg.listen_port, 8443);
	assert_int_equal(cfg.listen_loopback, 1);
	config_free(&cfg);

	setenv("HOSTGATE_LISTEN", "127.1.2.3:1", 1);
	load_ok(&cfg);
	assert_string_equal(cfg.listen_host, "127.1.2.3");
	assert_int_equal(cfg.listen_port, 1);
	assert_int_equal(cfg.listen_loopback, 1);
	config_free(&cfg);

	setenv("HOSTGATE_LISTEN", "[::ffff:127.0.0.1]:65535", 1);
	load_ok(&cfg);
	assert_string_equal(cfg.listen_host, "::ffff:127.0.0.1");
	assert_int_equal(cfg.listen_port, 65535);
	assert_int_equal(cfg.listen_loopback, 1);
	config_free(&cfg);

	/* Not loopback: allowed with HOSTGATE_INSECURE_HTTP=1. */
	setenv("HOSTGATE_INSECURE_HTTP", "1", 1);
	setenv("HOSTGATE_LISTEN", "[2001:db8::1]:80", 1);
	load_ok(&cfg);
	assert_string_equal(cfg.listen_host, "2001:db8::1");
	assert_int_equal(cfg.listen_loopback, 0);
	config_free(&cfg);
	setenv("HOSTGATE_LISTEN", "0.0.0.0:8080", 1);
	load_ok(&cfg);
	assert_int_equal(cfg.listen_loopback, 0);
	config_free(&cfg);
	setenv("HOSTGATE_LISTEN", "128.0.0.1:8080", 1);
	load_ok(&cfg);
	assert_int_equal(cfg.listen_loopback, 0);
	config_free(&cfg);
	/* Port 0: the kernel picks a free one. */
	setenv("HOSTGATE_LISTEN", "127.0.0.1:0", 1);
	load_ok(&cfg);
	assert_int_equal(cfg.listen_port, 0);
	config_free(&cfg);
	unsetenv("HOSTGATE_INSECURE_HTTP");
	unsetenv("HOSTGATE_LISTEN");

	expect_refused("HOSTGATE_LISTEN", "127.0.0.1");
	expect_refused("HOSTGATE_LISTEN", "127.0.0.1:");
	expect_refused("HOSTGATE_LISTEN", "127.0.0.1:65536");
	expect_refused("HOSTGATE_LISTEN", "127.0.0.1:80x");
	expect_refused("HOSTGATE_LISTEN", "127.0.0.1:-80");
	expect_refused("HOSTGATE_LISTEN", "127.1:8080");
	expect_refused("HOSTGATE_LISTEN", ":8080");
	expect_refused("HOSTGATE_LISTEN", "[::1]8080");
	expect_refused("HOSTGATE_LISTEN", "[::1:8080");
	expect_refused("HOSTGATE_LISTEN", "[]:8080");
	expect_refused("HOSTGATE_LISTEN", "[127.0.0.1]:8080");
	expect_refused("HOSTGATE_LISTEN", "[fe80::1%eth0]:8080");
	expect_error("HOSTGATE_LISTEN", "::1:8080",
	    "HOSTGATE_LISTEN=::1:8080: an IPv6 address needs brackets, as in "
	    "[::1]:8080 (allowed: a numeric IPv4 address or a bracketed IPv6 "
	    "address, ':' and a port from 0 to 65535, e.g. 127.0.0.1:8080 or "
	    "[::1]:8080)");
}

/* Plain HTTP off loopback needs TLS or an explicit opt-in. */
static void
test_plain_http_refused(void **state)
{
	struct config	cfg;

	expect_error("HOSTGATE_LISTEN", "0.0.0.0:8080",
	    "HOSTGATE_LISTEN=0.0.0.0:8080: plain HTTP is only allowed on "
	    "loopback; set HOSTGATE_TLS_CERT and HOSTGATE_TLS_KEY, or "
	    "HOSTGATE_INSECURE_HTTP=1");
	expect_error("HOSTGATE_LISTEN", "[::]:443",
	    "HOSTGATE_LISTEN=[::]:443: plain HTTP is only allowed on "
	    "loopback; set HOSTGATE_TLS_CERT and HOSTGATE_TLS_KEY, or "
	    "HOSTGATE_INSECURE_HTTP=1");

	setenv("HOSTGATE_LISTEN", "192.0.2.1:443", 1);
	setenv("HOSTGATE_TLS_CERT", "/etc/hg/cert.pem", 1);
	setenv("HOSTGATE_TLS_KEY", "key.pem", 1);
	load_ok(&cfg);
	assert_string_equal(cfg.tls_cert, "/etc/hg/cert.pem");
	assert_string_equal(cfg.tls_key + strlen(tmpdir), "/key.pem");
	assert_int_equal(cfg.listen_loopback, 0);
	config_free(&cfg);
}

/* HOSTGATE_TLS_CERT and HOSTGATE_TLS_KEY come together. */
static void
test_tls_pair(void **state)
{
	expect_error("HOSTGATE_TLS_CERT", "/etc/c.pem",
	    "HOSTGATE_TLS_CERT=/etc/c.pem: HOSTGATE_TLS_KEY is not set "
	    "(allowed: both HOSTGATE_TLS_CERT and HOSTGATE_TLS_KEY, "
	    "or neither)");
	expect_error("HOSTGATE_TLS_KEY", "/etc/k.pem",
	    "HOSTGATE_TLS_KEY=/etc/k.pem: HOSTGATE_TLS_CERT is not set "
	    "(allowed: both HOSTGATE_TLS_CERT and HOSTGATE_TLS_KEY, "
	    "or neither)");
}

/* Directories are made absolute without resolving symlinks. */
static void
test_dirs(void **state)
{
	struct config	cfg;
	char		want[PATH_MAX + 64], *parent;

	setenv("HOSTGATE_STATE_DIR", "./a//b/./c/", 1);
	setenv("HOSTGATE_RUN_DIR", "/run/hostgate/", 1);
	load_ok(&cfg);
	snprintf(want, sizeof want, "%s/a/b/c", tmpdir);
	assert_string_equal(cfg.state_dir, want);
	snprintf(want, sizeof want, "%s/a/b/c/workspaces", tmpdir);
	assert_string_equal(cfg.workspace_root, want);
	assert_string_equal(cfg.run_dir, "/run/hostgate");
	config_free(&cfg);

	/* A leading ".." climbs the current directory. */
	setenv("HOSTGATE_STATE_DIR", "../state", 1);
	setenv("HOSTGATE_RUN_DIR", "/", 1);
	load_ok(&cfg);
	assert_non_null(parent = strdup(tmpdir));
	*strrchr(parent, '/') = '\0';
	snprintf(want, sizeof want, "%s/state", parent);
	free(parent);
	assert_string_equal(cfg.state_dir, want);
	assert_string_equal(cfg.run_dir, "/");
	config_free(&cfg);

	/* A later ".." is left to the kernel, which follows symlinks. */
	setenv("HOSTGATE_STATE_DIR", "/srv/link/../hg", 1);
	setenv("HOSTGATE_WORKSPACE_ROOT", "/srv/ws", 1);
	load_ok(&cfg);
	assert_string_equal(cfg.state_dir, "/srv/link/../hg");
	assert_string_equal(cfg.workspace_root, "/srv/ws");
	config_free(&cfg);
}

/* The run directory must leave room for socket names in sun_path. */
static void
test_run_dir_length(void **state)
{
	char	dir[128], msg[512];

	/* 87 bytes: "/" + 86; with "/broker-control.sock" that is 107. */
	memset(dir, 'r', sizeof dir);
	dir[0] = '/';
	dir[87] = '\0';
	expect_accepted("HOSTGATE_RUN_DIR", dir);
	dir[87] = 'r';
	dir[88] = '\0';
	snprintf(msg, sizeof msg, "HOSTGATE_RUN_DIR=%s: too long for the Unix "
	    "sockets inside it: 88 bytes once absolute, the limit is 87 "
	    "(sun_path) (allowed: a path without control characters, at most "
	    "87 bytes once absolute)", dir);
	expect_error("HOSTGATE_RUN_DIR", dir, msg);
}

/* The workspace root is held to the rules of paths that reach profiles. */
static void
test_workspace_root(void **state)
{
	struct config	cfg;
	char		want[PATH_MAX + 64];

	setenv("HOSTGATE_WORKSPACE_ROOT", "ws", 1);
	load_ok(&cfg);
	snprintf(want, sizeof want, "%s/ws", tmpdir);
	assert_string_equal(cfg.workspace_root, want);
	config_free(&cfg);
	unsetenv("HOSTGATE_WORKSPACE_ROOT");

	expect_refused("HOSTGATE_WORKSPACE_ROOT", "/srv/it's");
	expect_refused("HOSTGATE_WORKSPACE_ROOT", "/srv/a\"b");
	expect_refused("HOSTGATE_WORKSPACE_ROOT", "/srv/(x)");
	expect_refused("HOSTGATE_WORKSPACE_ROOT", "/srv/a\\b");
	expect_refused("HOSTGATE_WORKSPACE_ROOT", "/srv/a/../b");
	expect_refused("HOSTGATE_WORKSPACE_ROOT", "/srv/\n");
	expect_refused("HOSTGATE_WORKSPACE_ROOT", "/");

	/* The default inherits from the state directory and is checked too. */
	setenv("HOSTGATE_STATE_DIR", "/srv/it's", 1);
	assert_string_equal(load_fail(), "HOSTGATE_WORKSPACE_ROOT="
	    "/srv/it's/workspaces: contains a quote, parenthesis or "
	    "backslash (the default, inside HOSTGATE_STATE_DIR) (allowed: a "
	    "path other than / without '..' components, quotes, parentheses, "
	    "backslashes or control characters)");
}

/* A state directory too long to hold the default workspace root. */
static void
test_workspace_too_long(void **state)
{
	char	*dir;

	assert_non_null(dir = malloc(PATH_MAX));
	memset(dir, 'a', PATH_MAX - 5);
	dir[0] = '/';
	dir[PATH_MAX - 5] = '\0';
	setenv("HOSTGATE_STATE_DIR", dir, 1);
	free(dir);
	load_fail();
	assert_true(strncmp(err, "HOSTGATE_WORKSPACE_ROOT=/aaa", 28) == 0);
	assert_non_null(strstr(err, ": path too long (the default"));
}

/* HOST_SANDBOX_MACOS_WRITABLE_PATHS: canonical absolute paths only. */
static void
test_macos_paths(void **state)
{
	static const char *const bad[] = {
		"relative", "/a:relative", "/", "/a/", "/a//b", "/a/./b",
		"/a/../b", "/a/..", "/a/.", "/a::/b", "/a:", ":/a", "/it's",
		"/a\"b", "/a(b", "/a)b", "/a\\b", "/a\nb", "/a\x7f",
	};
	struct config	cfg;
	size_t		i;

	setenv("HOST_SANDBOX_MACOS_WRITABLE_PATHS",
	    "/Users/me/Library/Caches:/opt/data set/..x:/caf\xc3\xa9", 1);
	load_ok(&cfg);
	assert_string_equal(cfg.macos_writable,
	    "/Users/me/Library/Caches:/opt/data set/..x:/caf\xc3\xa9");
	config_free(&cfg);
	unsetenv("HOST_SANDBOX_MACOS_WRITABLE_PATHS");

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		expect_refused("HOST_SANDBOX_MACOS_WRITABLE_PATHS", bad[i]);
	expect_error("HOST_SANDBOX_MACOS_WRITABLE_PATHS", "/ok:/a/../b",
	    "HOST_SANDBOX_MACOS_WRITABLE_PATHS=/ok:/a/../b: /a/../b: contains "
	    "a '.' or '..' component (allowed: absolute paths separated by "
	    "':', without '.', '..' or empty components, a trailing '/', "
	    "quotes, parentheses, backslashes or control characters)");
}

/* A .env file in the current directory is read, with its syntax. */
static void
test_env_file(void **state)
{
	struct config	cfg;
	char		want[PATH_MAX + 32];

	write_file(".env",
	    "# hostgate settings\n"
	    "\n"
	    "   # indented comment\n"
	    "HOSTGATE_RUNTIME=docker\n"
	    "export HOSTGATE_LOG_LEVEL=debug\n"
	    "HOSTGATE_STATE_DIR='/srv/hg state'   # a comment\n"
	    "HOSTGATE_FRONT_USER=\"www\"\r\n"
	    "HOSTGATE_BROKER_USER=  broker  # trimmed\n"
	    "OTHER_TOOL_SETTING=whatever $HOME\n"
	    "HOST_EXECUTION_DIRECT_TTL_SECONDS=60\n"
	    "HOST_EXECUTION_DIRECT_TTL_SECONDS=120\n"
	    "HOSTGATE_TLS_CERT=\n"
	    "HOSTGATE_SANDBOX_USER=sb");	/* no final newline */
	load_ok(&cfg);
	snprintf(want, sizeof want, "%s/.env", tmpdir);
	assert_string_equal(cfg.env_file, want);
	assert_int_equal(cfg.runtime, RUNTIME_DOCKER);
	assert_int_equal(cfg.log_level, LOG_LVL_DEBUG);
	assert_string_equal(cfg.state_dir, "/srv/hg state");
	assert_string_equal(cfg.front_user, "www");
	assert_string_equal(cfg.broker_user, "broker");
	assert_string_equal(cfg.sandbox_user, "sb");
	assert_int_equal(cfg.direct_ttl, 120);	/* the last line wins */
	assert_null(cfg.tls_cert);		/* empty means the default */
	config_free(&cfg);
	/* Only hostgate's variables are taken, and none are exported. */
	assert_null(getenv("OTHER_TOOL_SETTING"));
	assert_null(getenv("HOSTGATE_RUNTIME"));
}

/* The environment wins over the .env file. */
static void
test_env_wins(void **state)
{
	struct config	cfg;

	write_file(".env", "HOSTGATE_RUNTIME=docker\n"
	    "HOSTGATE_LOGIN_BURST=7\n");
	setenv("HOSTGATE_RUNTIME", "host", 1);
	load_ok(&cfg);
	assert_int_equal(cfg.runtime, RUNTIME_HOST);
	assert_int_equal(cfg.login_burst, 7);
	config_free(&cfg);

	/* Set but empty in the environment: the default, not the file. */
	setenv("HOSTGATE_LOGIN_BURST", "", 1);
	load_ok(&cfg);
	assert_int_equal(cfg.login_burst, 5);
	config_free(&cfg);
}

/* HOSTGATE_ENV_FILE names the file, which must exist; the default is skipped. */
static void
test_env_file_variable(void **state)
{
	struct config	cfg;
	char		path[PATH_MAX + 32], msg[PATH_MAX + 256];

	write_file(".env", "HOSTGATE_RUNTIME=bogus\n");
	write_file("other.env", "HOSTGATE_LOGIN_BURST=9\n");
	snprintf(path, sizeof path, "%s/other.env", tmpdir);
	setenv("HOSTGATE_ENV_FILE", path, 1);
	load_ok(&cfg);
	assert_string_equal(cfg.env_file, path);
	assert_int_equal(cfg.login_burst, 9);
	config_free(&cfg);

	snprintf(path, sizeof path, "%s/missing.env", tmpdir);
	snprintf(msg, sizeof msg, "HOSTGATE_ENV_FILE=%s: cannot read it: No "
	    "such file or directory (allowed: the path of a readable .env "
	    "file)", path);
	expect_error("HOSTGATE_ENV_FILE", path, msg);

	/* The default file is used when HOSTGATE_ENV_FILE is not set. */
	assert_string_equal(load_fail(), "./.env:1: HOSTGATE_RUNTIME=bogus: "
	    "unknown value (allowed: host, docker)");
}

/* Malformed .env lines are reported with the file and line number. */
static void
test_env_malformed(void **state)
{
	static const char *const cases[][2] = {
		{ "# ok\nHOSTGATE_RUNTIME=host\njust words\n",
		    "./.env:3: expected NAME=value" },
		{ "HOSTGATE_RUNTIME = host\n", "./.env:1: expected NAME=value" },
		{ "\n\n=value\n", "./.env:3: expected NAME=value" },
		{ "1ABC=x\n", "./.env:1: expected NAME=value" },
		{ "export\n", "./.env:1: expected NAME=value" },
		{ "HOSTGATE_RUNTIME='host\n",
		    "./.env:1: unterminated single quote" },
		{ "A=1\nHOSTGATE_RUNTIME=\"host\n",
		    "./.env:2: unterminated double quote" },
		{ "HOSTGATE_RUNTIME=\"host\"x\n",
		    "./.env:1: text after the closing quote" },
		{ "HOSTGATE_RUNTIME=\"ho\\st\"\n",
		    "./.env:1: unknown escape in double quotes "
		    "(allowed: \\\", \\\\, \\n)" },
	};
	size_t	i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		write_file(".env", cases[i][0]);
		assert_string_equal(load_fail(), cases[i][1]);
	}
}

/* config_load, for capture_stderr. */
static void
load_quietly(void *arg)
{
	struct config	*cfg = arg;

	if (load(cfg) != 0)
		fail_msg("config_load failed: %s", err);
}

/*
 * An unknown name with hostgate's prefixes in the environment is a warning
 * naming the closest known variable; the load goes on.
 */
static void
test_unknown_in_environment(void **state)
{
	struct config	 cfg;
	const char	*out;

	setenv("HOSTGATE_LISTN", "127.0.0.1:9", 1);
	setenv("HOST_EXECUTION_DIRECT_TTL", "5", 1);
	setenv("HOSTGATE_LOG_LEVLE", "debug", 1);
	out = capture_stderr(load_quietly, &cfg);
	assert_string_equal(cfg.listen, "127.0.0.1:8080");
	assert_int_equal(cfg.direct_ttl, 600);
	config_free(&cfg);
	assert_non_null(strstr(out, "unknown variable HOSTGATE_LISTN in the "
	    "environment, ignored (did you mean HOSTGATE_LISTEN?)\n"));
	assert_non_null(strstr(out, "unknown variable "
	    "HOST_EXECUTION_DIRECT_TTL in the environment, ignored (did you "
	    "mean HOST_EXECUTION_DIRECT_TTL_SECONDS?)\n"));
	/* A swap of neighbours counts as one edit. */
	assert_non_null(strstr(out, "(did you mean HOSTGATE_LOG_LEVEL?)\n"));
	assert_non_null(strstr(out, "WARN"));

	/* Other prefixes are other programs' business. */
	unsetenv("HOSTGATE_LISTN");
	unsetenv("HOST_EXECUTION_DIRECT_TTL");
	unsetenv("HOSTGATE_LOG_LEVLE");
	setenv("HOSTNAME_X", "1", 1);
	setenv("HOST_OTHER", "1", 1);
	out = capture_stderr(load_quietly, &cfg);
	config_free(&cfg);
	unsetenv("HOSTNAME_X");
	unsetenv("HOST_OTHER");
	assert_string_equal(out, "");
}

/* In the .env file an unknown name is an error with file, line and hint. */
static void
test_unknown_in_file(void **state)
{
	write_file(".env", "HOSTGATE_RUNTIME=host\nHOST_SANDBOX_MACOS_PATHS=/x\n");
	assert_string_equal(load_fail(), "./.env:2: unknown variable "
	    "HOST_SANDBOX_MACOS_PATHS (did you mean "
	    "HOST_SANDBOX_MACOS_WRITABLE_PATHS?)");
	write_file(".env", "\n# x\nHOSTGATE_LISTN=127.0.0.1:9\n");
	assert_string_equal(load_fail(), "./.env:3: unknown variable "
	    "HOSTGATE_LISTN (did you mean HOSTGATE_LISTEN?)");
}

/*
 * Known names that configure nothing: what hostgate sets in the
 * environment of its spawns (so hgctl works in a hostgate terminal), the
 * first admin's password of make run, and the build scripts' variable.
 */
static void
test_ignored_variables(void **state)
{
	struct config		 cfg;
	struct json_object	*obj;
	const char		*out;

	setenv("HOSTGATE_MODE", "sandbox", 1);
	setenv("HOSTGATE_BUILD", "build", 1);
	write_file(".env", "HOSTGATE_ADMIN_PASSWORD=secret\n");
	out = capture_stderr(load_quietly, &cfg);
	assert_string_equal(out, "");
	obj = config_to_json(&cfg);
	assert_false(json_object_object_get_ex(obj, "HOSTGATE_MODE", NULL));
	assert_false(json_object_object_get_ex(obj, "HOSTGATE_BUILD", NULL));
	json_object_put(obj);
	config_free(&cfg);

	setenv("HOSTGATE_MODE", "direct", 1);
	load_ok(&cfg);
	assert_int_equal(cfg.mode_default, MODE_SANDBOX);
	config_free(&cfg);
}

/*
 * The default .env file (HG_ENV_FILE, here a file of the test directory)
 * is read when it exists and skipped when it does not; one that exists but
 * cannot be read is an error naming it.
 */
static void
test_default_env_file(void **state)
{
	struct config	cfg;
	char		path[PATH_MAX + 32];

	snprintf(path, sizeof path, "%s/hostgate.env", tmpdir);
	assert_int_equal(config_load_from(&cfg, path, err, sizeof err), 0);
	assert_null(cfg.env_file);
	config_free(&cfg);

	write_file("hostgate.env", "HOSTGATE_LOGIN_BURST=9\n");
	assert_int_equal(config_load_from(&cfg, path, err, sizeof err), 0);
	assert_string_equal(cfg.env_file, path);
	assert_int_equal(cfg.login_burst, 9);
	config_free(&cfg);

	/* ./.env is no longer read by itself. */
	write_file(".env", "HOSTGATE_LOGIN_BURST=8\n");
	assert_int_equal(config_load_from(&cfg, path, err, sizeof err), 0);
	assert_int_equal(cfg.login_burst, 9);
	config_free(&cfg);

	assert_int_equal(mkdir("dir.env", 0700), 0);
	snprintf(path, sizeof path, "%s/dir.env", tmpdir);
	assert_int_equal(config_load_from(&cfg, path, err, sizeof err), -1);
	assert_non_null(strstr(err, "/dir.env: cannot read it: "));
	assert_non_null(strstr(err, "(the default configuration file; "
	    "HOSTGATE_ENV_FILE names another)"));
	rmdir("dir.env");

	/* The compiled-in names. */
	assert_string_equal(var_default("HOSTGATE_ENV_FILE"),
	    "/etc/hostgate/hostgate.env");
	assert_string_equal(var_default("HOSTGATE_STATE_DIR"),
	    "/var/lib/hostgate");
	assert_string_equal(var_default("HOSTGATE_RUN_DIR"), "/run/hostgate");
}

/* Where each value came from, for hgctl's messages. */
static void
test_origin(void **state)
{
	struct config	cfg;
	char		buf[PATH_MAX + 64], want[PATH_MAX + 64];

	write_file(".env", "# x\nHOSTGATE_RUN_DIR=/run/x\n"
	    "HOSTGATE_LOGIN_BURST=\n");
	setenv("HOSTGATE_STATE_DIR", "/var/x", 1);
	load_ok(&cfg);
	snprintf(want, sizeof want, "%s/.env line 2", tmpdir);
	assert_string_equal(config_origin(&cfg, "HOSTGATE_RUN_DIR", buf,
	    sizeof buf), want);
	assert_string_equal(config_origin(&cfg, "HOSTGATE_STATE_DIR", buf,
	    sizeof buf), "the environment");
	assert_string_equal(config_origin(&cfg, "HOSTGATE_LOGIN_BURST", buf,
	    sizeof buf), "the default");
	assert_string_equal(config_origin(&cfg, "HOSTGATE_LISTEN", buf,
	    sizeof buf), "the default");
	assert_string_equal(config_origin(&cfg, "HOSTGATE_NOPE", buf,
	    sizeof buf), "unknown");
	config_free(&cfg);
	assert_null(cfg.origins);
}

/* Errors in values from .env name the file and line. */
static void
test_env_value_error(void **state)
{
	write_file(".env", "HOSTGATE_RUNTIME=host\n"
	    "HOSTGATE_LISTEN=0.0.0.0:80\n");
	assert_string_equal(load_fail(), "./.env:2: HOSTGATE_LISTEN="
	    "0.0.0.0:80: plain HTTP is only allowed on loopback; set "
	    "HOSTGATE_TLS_CERT and HOSTGATE_TLS_KEY, or "
	    "HOSTGATE_INSECURE_HTTP=1");
}

/* The egress lists: each bad item named, and the default deny list. */
static void
test_egress_values(void **state)
{
	struct config	cfg;

	write_file(".env", "HOSTGATE_EGRESS_ALLOW=pypi.org, *.pythonhosted.org\n"
	    "HOSTGATE_EGRESS_ALLOW_NETS=10.213.0.0/16\n");
	load_ok(&cfg);
	assert_string_equal(cfg.egress_allow, "pypi.org, *.pythonhosted.org");
	assert_non_null(strstr(cfg.egress_deny_nets, "127.0.0.0/8"));
	assert_string_equal(cfg.egress_ports, "443,80");
	config_free(&cfg);
	write_file(".env", "HOSTGATE_EGRESS_ALLOW=pypi.org,10.0.0.1\n");
	assert_non_null(strstr(load_fail(), "10.0.0.1 is not a domain name"));
	write_file(".env", "HOSTGATE_EGRESS_DENY=*\n");
	assert_non_null(strstr(load_fail(), "* is not a domain name"));
	write_file(".env", "HOSTGATE_EGRESS_DENY_NETS=10.1.0.0/8\n");
	assert_non_null(strstr(load_fail(), "10.1.0.0/8: not a network"));
	write_file(".env", "HOSTGATE_EGRESS_PORTS=443,0\n");
	assert_non_null(strstr(load_fail(), "not a list of ports"));
}

/* The fleet's variables: the store's forms, host ids, the default id. */
static void
test_fleet_values(void **state)
{
	struct config	cfg;
	char		name[256], *m;

	write_file(".env", "HOSTGATE_HOST_ID=h-1\n");
	load_ok(&cfg);
	assert_null(cfg.store);
	assert_string_equal(cfg.host_id, "h-1");
	assert_int_equal(cfg.store_timeout, 5);
	assert_int_equal(cfg.host_lost, 10);
	config_free(&cfg);
	write_file(".env", "HOSTGATE_STORE=postgresql://u:pw@db/hg\n");
	load_ok(&cfg);
	assert_string_equal(cfg.store, "postgresql://u:pw@db/hg");
	/* the default id: the short host name, lower case, [a-z0-9-] */
	assert_true(strlen(cfg.host_id) >= 1 && strlen(cfg.host_id) <= 32);
	assert_int_equal(strspn(cfg.host_id,
	    "abcdefghijklmnopqrstuvwxyz0123456789-"), strlen(cfg.host_id));
	if (gethostname(name, sizeof(name)) == 0 && name[0] >= 'a' &&
	    name[0] <= 'z' && strcspn(name, ".") <= 32)
		assert_int_equal(strncmp(cfg.host_id, name,
		    strlen(cfg.host_id)), 0);
	config_free(&cfg);
	write_file(".env", "HOSTGATE_STORE=host=/run/pg dbname=hg\n");
	load_ok(&cfg);
	config_free(&cfg);
	write_file(".env", "HOSTGATE_STORE=mysql://db/hg\n");
	assert_non_null(strstr(load_fail(), "not a PostgreSQL URI"));
	write_file(".env", "HOSTGATE_HOST_ID=H1\n");
	assert_non_null(strstr(load_fail(), "not a host id"));
	write_file(".env", "HOSTGATE_HOST_ID=-h\n");
	assert_non_null(strstr(load_fail(), "not a host id"));
	write_file(".env", "HOSTGATE_HOST_ID=h.1\n");
	assert_non_null(strstr(load_fail(), "not a host id"));
	write_file(".env", "HOSTGATE_HOST_ID=abcdefghijabcdefghijabcdefghijabc\n");
	assert_non_null(strstr(load_fail(), "not a host id"));
	write_file(".env", "HOSTGATE_TRUSTED_PROXIES=10.1.0.0/8\n");
	assert_non_null(strstr(load_fail(), "HOSTGATE_TRUSTED_PROXIES"));

	m = config_store_mask("postgresql://u:secret@db:5432/hg?sslmode=require");
	assert_string_equal(m, "postgresql://u:***@db:5432/hg?sslmode=require");
	free(m);
	m = config_store_mask("postgresql://u@db/hg");
	assert_string_equal(m, "postgresql://u@db/hg");
	free(m);
	m = config_store_mask("host=db password='s e\\'c' dbname=hg");
	assert_string_equal(m, "host=db password=*** dbname=hg");
	free(m);
	m = config_store_mask("password=secret host=db");
	assert_string_equal(m, "password=*** host=db");
	free(m);
}

/*
 * HOSTGATE_PUBLIC_URL: unset by default; an origin written as a URL, a
 * trailing '/' dropped; a path, a query, user information or another
 * scheme refused, each with its reason.
 */
static void
test_public_url(void **state)
{
	struct config	cfg;

	load_ok(&cfg);
	assert_null(cfg.public_url);
	config_free(&cfg);
	write_file(".env", "HOSTGATE_PUBLIC_URL=https://hostgate.example.org\n");
	load_ok(&cfg);
	assert_string_equal(cfg.public_url, "https://hostgate.example.org");
	config_free(&cfg);
	write_file(".env", "HOSTGATE_PUBLIC_URL=http://127.0.0.1:8080/\n");
	load_ok(&cfg);
	assert_string_equal(cfg.public_url, "http://127.0.0.1:8080");
	config_free(&cfg);
	write_file(".env", "HOSTGATE_PUBLIC_URL=\n");
	load_ok(&cfg);
	assert_null(cfg.public_url);
	config_free(&cfg);
	write_file(".env", "");
	expect_accepted("HOSTGATE_PUBLIC_URL", "https://[2001:db8::1]:8443");
	expect_accepted("HOSTGATE_PUBLIC_URL", "https://Hg.Example.org");
	expect_refused("HOSTGATE_PUBLIC_URL", "HTTPS://hg.example.org");
	expect_error("HOSTGATE_PUBLIC_URL", "https://hg.example.org/hostgate",
	    "HOSTGATE_PUBLIC_URL=https://hg.example.org/hostgate: has a "
	    "path: hostgate is served at the root of its address, give "
	    "scheme://HOST[:PORT] only (allowed: empty, or http://HOST or "
	    "https://HOST, maybe with :PORT, no path, e.g. "
	    "https://hostgate.example.org)");
	expect_refused("HOSTGATE_PUBLIC_URL", "hg.example.org");
	expect_refused("HOSTGATE_PUBLIC_URL", "ftp://hg.example.org");
	expect_refused("HOSTGATE_PUBLIC_URL", "https://hg.example.org?x=1");
	expect_refused("HOSTGATE_PUBLIC_URL", "https://u:p@hg.example.org");
	expect_refused("HOSTGATE_PUBLIC_URL", "https://hg.example.org:0");
	expect_refused("HOSTGATE_PUBLIC_URL", "https://hg.example.org:99999");
	expect_refused("HOSTGATE_PUBLIC_URL", "https://");
	expect_refused("HOSTGATE_PUBLIC_URL", "https:///");
	expect_refused("HOSTGATE_PUBLIC_URL", "https://hg example.org");
	expect_refused("HOSTGATE_PUBLIC_URL", "https://hg.example.org//");
	assert_non_null(strstr((expect_refused("HOSTGATE_PUBLIC_URL",
	    "https://u@hg.example.org"), err), "user information"));
	assert_non_null(strstr((expect_refused("HOSTGATE_PUBLIC_URL",
	    "https://hg.example.org/#x"), err), "query or a fragment"));
}

/* The .env parser on its own: quoting and escapes. */
static void
test_env_parse(void **state)
{
	struct config_env	env;
	const char		*text =
	    "A='single \"quoted\" \\n # not a comment'\n"
	    "B=\"a\\\"b\\\\c\\nd\" # comment\n"
	    "C=x#y\n"
	    "D=$HOME/x\n"
	    "export\tE=''\n"
	    "exported=1\n";

	assert_int_equal(config_env_parse("t", text, strlen(text), &env, err,
	    sizeof err), 0);
	assert_int_equal(env.nvars, 6);
	assert_string_equal(env.vars[0].name, "A");
	assert_string_equal(env.vars[0].value,
	    "single \"quoted\" \\n # not a comment");
	assert_string_equal(env.vars[1].value, "a\"b\\c\nd");
	assert_string_equal(env.vars[2].value, "x#y");
	assert_string_equal(env.vars[3].value, "$HOME/x");
	assert_string_equal(env.vars[4].name, "E");
	assert_string_equal(env.vars[4].value, "");
	assert_int_equal(env.vars[4].line, 5);
	assert_string_equal(env.vars[5].name, "exported");
	config_env_free(&env);

	assert_int_equal(config_env_parse("t", "A=1\nB\0=2\n", 9, &env, err,
	    sizeof err), -1);
	assert_string_equal(err, "t:2: contains a NUL byte");
	assert_int_equal(env.nvars, 0);
}

/* The effective configuration as JSON, with secrets masked. */
static void
test_to_json(void **state)
{
	struct config		 cfg;
	struct json_object	*obj, *v;
	size_t			 i;

	setenv("HOSTGATE_ADMIN_PASSWORD", "hunter2", 1);
	setenv("HOSTGATE_TLS_CERT", "/c.pem", 1);
	setenv("HOSTGATE_TLS_KEY", "/k.pem", 1);
	load_ok(&cfg);
	assert_non_null(obj = config_to_json(&cfg));
	assert_string_equal(json_str(obj, "HOST_EXECUTION_MODE_DEFAULT"),
	    "sandbox");
	assert_string_equal(json_str(obj, "HOSTGATE_LISTEN"),
	    "127.0.0.1:8080");
	assert_string_equal(json_str(obj, "HOSTGATE_TLS_KEY"), "/k.pem");
	assert_string_equal(json_str(obj, "HOSTGATE_ADMIN_PASSWORD"), "***");
	assert_string_equal(json_str(obj, "HOSTGATE_LOG_LEVEL"), "info");
	assert_true(json_object_object_get_ex(obj,
	    "HOSTGATE_MAX_BODY_BYTES", &v));
	assert_int_equal(json_object_get_int64(v), 1048576);
	assert_true(json_object_object_get_ex(obj, "HOSTGATE_ENV_FILE", &v));
	assert_null(v);
	assert_null(strstr(json_object_to_json_string(obj), "hunter2"));
	for (i = 0; i < config_var_count(); i++)
		if (strcmp(config_var_name(i), "HOSTGATE_BUILD") != 0 &&
		    strcmp(config_var_name(i), "HOSTGATE_MODE") != 0)
			assert_true(json_object_object_get_ex(obj,
			    config_var_name(i), NULL));
	json_object_put(obj);
	config_free(&cfg);

	unsetenv("HOSTGATE_ADMIN_PASSWORD");
	load_ok(&cfg);
	obj = config_to_json(&cfg);
	assert_false(json_object_object_get_ex(obj, "HOSTGATE_ADMIN_PASSWORD",
	    NULL));
	json_object_put(obj);
	config_free(&cfg);

	/* A secret from the file is masked too. */
	write_file(".env", "HOSTGATE_ADMIN_PASSWORD='from the file'\n");
	load_ok(&cfg);
	obj = config_to_json(&cfg);
	assert_string_equal(json_str(obj, "HOSTGATE_ADMIN_PASSWORD"), "***");
	assert_null(strstr(json_object_to_json_string(obj), "from the file"));
	json_object_put(obj);
	config_free(&cfg);
}

/* Read a file of the source tree, or skip the test when not there. */
static char *
read_source(const char *name)
{
	char	path[PATH_MAX * 2], *text;

	snprintf(path, sizeof path, "%s/%s", srcdir, name);
	if ((text = file_read(path, 1 << 20, NULL)) == NULL) {
		print_message("cannot read %s: %s\n", path, strerror(errno));
		skip();
	}
	return (text);
}

/* .env.example lists every variable, commented out, with its default. */
static void
test_env_example(void **state)
{
	struct config_env	 env;
	char			*text, line[512];
	size_t			 i;

	text = read_source(".env.example");
	for (i = 0; i < config_var_count(); i++) {
		snprintf(line, sizeof line, "\n# %s=%s\n", config_var_name(i),
		    config_var_default(i));
		if (strstr(text, line) == NULL)
			fail_msg(".env.example lacks the line: %s", line + 1);
	}
	/* Everything is commented out: it parses to nothing. */
	assert_int_equal(config_env_parse(".env.example", text, strlen(text),
	    &env, err, sizeof err), 0);
	assert_int_equal(env.nvars, 0);
	free(text);
}

/* docs/configuration.md has a table row for every variable. */
static void
test_docs(void **state)
{
	char	*text, row[256];
	size_t	 i;

	text = read_source("docs/configuration.md");
	for (i = 0; i < config_var_count(); i++) {
		snprintf(row, sizeof row, "\n| `%s` |", config_var_name(i));
		if (strstr(text, row) == NULL)
			fail_msg("docs/configuration.md lacks a row for %s",
			    config_var_name(i));
	}
	free(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_messages, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_invalid_values, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_listen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plain_http_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_tls_pair, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_dir_length, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_workspace_root, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_workspace_too_long, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_macos_paths, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_env_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_wins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_file_variable, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_env_malformed, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_unknown_in_environment,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_in_file, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_ignored_variables, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_default_env_file, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_origin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_value_error, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_egress_values, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_fleet_values, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_public_url, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_env_parse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_to_json, setup, teardown),
		cmocka_unit_test(test_env_example),
		cmocka_unit_test(test_docs),
	};

	if (getcwd(srcdir, sizeof srcdir) == NULL)
		return (1);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
