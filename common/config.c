/*
 * Configuration: environment variables, optionally from a .env file.
 *
 * Every variable is one row of config_vars below: its name, default, kind
 * and where it lands in struct config. Loading, validation, the effective
 * configuration as JSON and freeing all walk that table, and the unit test
 * checks .env.example and docs/configuration.md against it.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "config_env.h"
/*
 * The installed layout's defaults (HG_WEB_DIR, HG_PROFILES_DIR,
 * HG_STATE_DIR, HG_RUN_DIR, HG_ENV_FILE), written into the build
 * directory by the Makefile (scripts/paths.sh) from PREFIX and the other
 * path variables: a change to one rebuilds this file.
 */
#include "paths.h"

#define ENV_FILE_MAX	(1024 * 1024)
#define CONFIG_NAME_MAX	63	/* longest name compared for suggestions */

/* Longest "run_dir/socket" that fits in sockaddr_un.sun_path. */
#define SUN_PATH_SIZE	sizeof(((struct sockaddr_un *)0)->sun_path)
_Static_assert(sizeof(SOCK_BROKER_CONTROL) >= sizeof(SOCK_BROKER_FRONT) &&
    sizeof(SOCK_BROKER_CONTROL) >= sizeof(SOCK_SANDBOX),
    "RUN_DIR_MAX assumes broker-control.sock is the longest socket name");
#define RUN_DIR_MAX	((long)(SUN_PATH_SIZE - sizeof("/" SOCK_BROKER_CONTROL)))

enum config_kind {
	KIND_CHOICE,	/* one of choices, stored as its index (an enum) */
	KIND_WORD,	/* one of choices, stored as a string */
	KIND_INT,	/* decimal digits, min..max, stored as int or long */
	KIND_SIZE,	/* bytes with an optional K, M, G or T suffix, or
			   "max" (stored as -1); min..max bytes, a long */
	KIND_RANGE,	/* "FIRST-LAST" uids, min..max: two longs */
	KIND_FLAG,	/* 0 or 1 */
	KIND_USER,	/* a user name */
	KIND_USERS,	/* hostgate user names, each maybe with '-', by ',' */
	KIND_IMAGE,	/* a docker image reference */
	KIND_DIR,	/* a path, made absolute; at most max bytes when max > 0 */
	KIND_WORKSPACE,	/* a path, made absolute, then held to canonical rules */
	KIND_FILE,	/* an optional path, made absolute */
	KIND_PATHS,	/* colon-separated canonical absolute paths */
	KIND_LISTEN,	/* host:port */
	KIND_ORIGINS,	/* web origins scheme://host[:port], by ',' */
	KIND_URL,	/* one origin as a URL: a trailing '/' dropped */
	KIND_DOMAINS,	/* domain patterns name or *.name, by ',' or spaces */
	KIND_NETS,	/* CIDRs ADDRESS/PREFIX, by ',' or spaces */
	KIND_PORTS,	/* TCP ports, by ',' or spaces */
	KIND_SECRET,	/* not used by the daemons; masked in the JSON */
	KIND_STORE,	/* "" (embedded) or a PostgreSQL URI or conninfo */
	KIND_HOSTID,	/* [a-z0-9][a-z0-9-]{0,31}; default from the host name */
	KIND_ENV_FILE,	/* names the .env file; environment only */
	KIND_IGNORED,	/* known, configures nothing (scripts, spawns) */
};

struct config_var {
	const char		*name;
	const char		*def;		/* NULL: unset or computed */
	enum config_kind	 kind;
	size_t			 off;		/* field in struct config */
	size_t			 size;		/* its size */
	long			 min, max;
	const char *const	*choices;	/* NULL-terminated */
};

/*
 * The networks no sandbox may reach through the egress proxy, after the
 * proxy resolved the name: "this network", private, shared (CGNAT),
 * loopback, link-local, the IETF and documentation blocks, benchmarking,
 * 6to4 relays, multicast and reserved; in IPv6 the unspecified and
 * loopback addresses, NAT64, discard, the IETF protocol block (Teredo
 * among them), documentation, 6to4, unique-local, link- and site-local
 * and multicast. IPv4-mapped IPv6 addresses are checked as IPv4.
 */
#define EGRESS_DENY_NETS_DEFAULT \
	"0.0.0.0/8,10.0.0.0/8,100.64.0.0/10,127.0.0.0/8,169.254.0.0/16," \
	"172.16.0.0/12,192.0.0.0/24,192.0.2.0/24,192.88.99.0/24," \
	"192.168.0.0/16,198.18.0.0/15,198.51.100.0/24,203.0.113.0/24," \
	"224.0.0.0/4,240.0.0.0/4,::/128,::1/128,64:ff9b::/96," \
	"64:ff9b:1::/48,100::/64,2001::/23,2001:db8::/32,2002::/16," \
	"fc00::/7,fe80::/10,fec0::/10,ff00::/8"

#define F(f)	offsetof(struct config, f), sizeof(((struct config *)0)->f)
#define NOF	0, 0

static const char *const mode_choices[] = { "sandbox", "direct", NULL };
static const char *const runtime_choices[] = { "host", "docker", NULL };
static const char *const backend_choices[] = {
	"auto", "bwrap", "sandbox-exec", "wsl2", NULL
};
static const char *const expiry_choices[] = { "terminate", "keep", NULL };
static const char *const record_choices[] = {
	"none", "direct", "all", NULL
};
static const char *const level_choices[] = {
	"error", "warn", "info", "debug", NULL
};

/* Index order of each choices array matches its enum. */
_Static_assert(MODE_SANDBOX == 0 && MODE_DIRECT == 1, "mode_choices");
_Static_assert(RUNTIME_HOST == 0 && RUNTIME_DOCKER == 1, "runtime_choices");
_Static_assert(EXPIRY_TERMINATE == 0 && EXPIRY_KEEP == 1, "expiry_choices");
_Static_assert(RECORD_NONE == 0 && RECORD_ALL == 2, "record_choices");
_Static_assert(LOG_LVL_ERROR == 0 && LOG_LVL_DEBUG == 3, "level_choices");

static const struct config_var config_vars[] = {
	{ "HOST_EXECUTION_MODE_DEFAULT", "sandbox", KIND_CHOICE,
	    F(mode_default), 0, 0, mode_choices },
	{ "HOST_EXECUTION_DIRECT_TTL_SECONDS", "600", KIND_INT,
	    F(direct_ttl), 1, 86400, NULL },
	{ "HOST_SANDBOX_MACOS_WRITABLE_PATHS", "", KIND_PATHS,
	    F(macos_writable), 0, 0, NULL },
	{ "HOSTGATE_LISTEN", "127.0.0.1:8080", KIND_LISTEN,
	    F(listen), 0, 0, NULL },
	{ "HOSTGATE_TLS_CERT", NULL, KIND_FILE, F(tls_cert), 0, 0, NULL },
	{ "HOSTGATE_TLS_KEY", NULL, KIND_FILE, F(tls_key), 0, 0, NULL },
	{ "HOSTGATE_INSECURE_HTTP", "0", KIND_FLAG,
	    F(insecure_http), 0, 1, NULL },
	{ "HOSTGATE_STATE_DIR", HG_STATE_DIR, KIND_DIR,
	    F(state_dir), 0, 0, NULL },
	{ "HOSTGATE_RUN_DIR", HG_RUN_DIR, KIND_DIR,
	    F(run_dir), 0, RUN_DIR_MAX, NULL },
	/* After HOSTGATE_STATE_DIR: its default is computed from it. */
	{ "HOSTGATE_WORKSPACE_ROOT", NULL, KIND_WORKSPACE,
	    F(workspace_root), 0, 0, NULL },
	{ "HOSTGATE_RUNTIME", "host", KIND_CHOICE,
	    F(runtime), 0, 0, runtime_choices },
	{ "HOSTGATE_SANDBOX_BACKEND", "auto", KIND_WORD,
	    F(sandbox_backend), 0, 0, backend_choices },
	{ "HOSTGATE_DIRECT_ON_EXPIRY", "terminate", KIND_CHOICE,
	    F(on_expiry), 0, 0, expiry_choices },
	{ "HOSTGATE_FRONT_USER", "hostgate-front", KIND_USER,
	    F(front_user), 0, 0, NULL },
	{ "HOSTGATE_BROKER_USER", "hostgate-broker", KIND_USER,
	    F(broker_user), 0, 0, NULL },
	{ "HOSTGATE_EGRESS_USER", "hostgate-egress", KIND_USER,
	    F(egress_user), 0, 0, NULL },
	{ "HOSTGATE_SANDBOX_USER", "hostgate-sandbox", KIND_USER,
	    F(sandbox_user), 0, 0, NULL },
	{ "HOSTGATE_MAX_BODY_BYTES", "1048576", KIND_INT,
	    F(max_body), 1024, 67108864, NULL },
	{ "HOSTGATE_MAX_UPLOAD_BYTES", "256M", KIND_SIZE,
	    F(max_upload), 1024, 1L << 40, NULL },
	{ "HOSTGATE_FILE_TIMEOUT_SECONDS", "30", KIND_INT,
	    F(file_timeout), 1, 3600, NULL },
	{ "HOSTGATE_MAX_CONNECTIONS", "1024", KIND_INT,
	    F(max_conns), 16, 1048576, NULL },
	{ "HOSTGATE_MAX_CONNECTIONS_PER_ADDRESS", "64", KIND_INT,
	    F(max_conns_per_addr), 1, 1048576, NULL },
	{ "HOSTGATE_HEADER_TIMEOUT_SECONDS", "10", KIND_INT,
	    F(header_timeout), 1, 300, NULL },
	{ "HOSTGATE_ALLOWED_ORIGINS", "", KIND_ORIGINS,
	    F(allowed_origins), 0, 0, NULL },
	{ "HOSTGATE_PUBLIC_URL", NULL, KIND_URL, F(public_url), 0, 0, NULL },
	{ "HOSTGATE_LOGIN_RATE_PER_MINUTE", "10", KIND_INT,
	    F(login_rate), 1, 10000, NULL },
	{ "HOSTGATE_LOGIN_BURST", "5", KIND_INT,
	    F(login_burst), 1, 10000, NULL },
	{ "HOSTGATE_SESSION_LIFETIME_SECONDS", "43200", KIND_INT,
	    F(session_lifetime), 60, 31536000, NULL },
	{ "HOSTGATE_LOG_LEVEL", "info", KIND_CHOICE,
	    F(log_level), 0, 0, level_choices },
	{ "HOSTGATE_SECCOMP_DEBUG", "0", KIND_FLAG,
	    F(seccomp_debug), 0, 1, NULL },
	{ "HOSTGATE_PROFILES_DIR", HG_PROFILES_DIR, KIND_DIR,
	    F(profiles_dir), 0, 0, NULL },
	{ "HOSTGATE_COMMAND_TIMEOUT_SECONDS", "60", KIND_INT,
	    F(command_timeout), 1, 86400, NULL },
	{ "HOSTGATE_COMMAND_TIMEOUT_MAX_SECONDS", "600", KIND_INT,
	    F(command_timeout_max), 1, 86400, NULL },
	{ "HOSTGATE_OUTPUT_CAP_BYTES", "1048576", KIND_INT,
	    F(output_cap), 1024, 16777216, NULL },
	{ "HOSTGATE_MAX_TERMINALS_PER_USER", "8", KIND_INT,
	    F(max_terminals), 1, 1000, NULL },
	{ "HOSTGATE_MAX_COMMANDS_PER_USER", "4", KIND_INT,
	    F(max_commands), 1, 1000, NULL },
	{ "HOSTGATE_DOCKER_IMAGE", "debian:12-slim", KIND_IMAGE,
	    F(docker_image), 0, 0, NULL },
	{ "HOSTGATE_WSL_MNT_PATHS", "", KIND_PATHS,
	    F(wsl_mnt_paths), 0, 0, NULL },
	{ "HOSTGATE_MODE_RATE_PER_MINUTE", "6", KIND_INT,
	    F(mode_rate), 1, 10000, NULL },
	{ "HOSTGATE_SPAWN_RATE_PER_MINUTE", "120", KIND_INT,
	    F(spawn_rate), 1, 100000, NULL },
	{ "HOSTGATE_SPAWN_BURST", "30", KIND_INT,
	    F(spawn_burst), 1, 100000, NULL },
	{ "HOSTGATE_NETWORK_ADMIN_ONLY", "0", KIND_FLAG,
	    F(network_admin_only), 0, 1, NULL },
	{ "HOSTGATE_EGRESS_ALLOW", "", KIND_DOMAINS,
	    F(egress_allow), 0, 0, NULL },
	{ "HOSTGATE_EGRESS_DENY", "", KIND_DOMAINS,
	    F(egress_deny), 0, 0, NULL },
	{ "HOSTGATE_EGRESS_HOSTS", NULL, KIND_FILE,
	    F(egress_hosts), 0, 0, NULL },
	{ "HOSTGATE_EGRESS_DENY_NETS", EGRESS_DENY_NETS_DEFAULT, KIND_NETS,
	    F(egress_deny_nets), 0, 0, NULL },
	{ "HOSTGATE_EGRESS_ALLOW_NETS", "", KIND_NETS,
	    F(egress_allow_nets), 0, 0, NULL },
	{ "HOSTGATE_EGRESS_PORTS", "443,80", KIND_PORTS,
	    F(egress_ports), 0, 0, NULL },
	{ "HOSTGATE_AUDIT_ROTATE_BYTES", "16777216", KIND_INT,
	    F(audit_rotate), 4096, 1073741824, NULL },
	{ "HOSTGATE_AUDIT_SYSLOG", "1", KIND_FLAG,
	    F(audit_syslog), 0, 1, NULL },
	{ "HOSTGATE_RECORD_TERMINALS", "direct", KIND_CHOICE,
	    F(record_terminals), 0, 0, record_choices },
	{ "HOSTGATE_RECORD_USERS", "", KIND_USERS, F(record_users), 0, 0,
	    NULL },
	{ "HOSTGATE_RECORDING_MAX_BYTES", "67108864", KIND_INT,
	    F(recording_max), 4096, 4294967296L, NULL },
	{ "HOSTGATE_RECORDING_RETENTION_DAYS", "90", KIND_INT,
	    F(recording_retention), 0, 36500, NULL },
	{ "HOSTGATE_AUDIT_REFUSAL_INTERVAL_SECONDS", "60", KIND_INT,
	    F(audit_refusal_interval), 1, 86400, NULL },
	/* containment (sandboxd): per user, then per spawn */
	{ "HOSTGATE_USER_MEMORY_MAX", "4G", KIND_SIZE,
	    F(user_memory_max), 16777216, 1L << 50, NULL },
	{ "HOSTGATE_USER_SWAP_MAX", "0", KIND_SIZE,
	    F(user_swap_max), 0, 1L << 50, NULL },
	{ "HOSTGATE_USER_PIDS_MAX", "1024", KIND_INT,
	    F(user_pids_max), 16, 4194304, NULL },
	{ "HOSTGATE_USER_CPU_WEIGHT", "100", KIND_INT,
	    F(user_cpu_weight), 1, 10000, NULL },
	{ "HOSTGATE_USER_CPU_MAX_PERCENT", "0", KIND_INT,
	    F(user_cpu_max), 0, 100000, NULL },
	{ "HOSTGATE_USER_IO_WEIGHT", "100", KIND_INT,
	    F(user_io_weight), 1, 10000, NULL },
	{ "HOSTGATE_USER_DISK_MAX", "10G", KIND_SIZE,
	    F(user_disk_max), 0, 1L << 50, NULL },
	{ "HOSTGATE_SPAWN_MEMORY_MAX", "max", KIND_SIZE,
	    F(spawn_memory_max), 16777216, 1L << 50, NULL },
	{ "HOSTGATE_SPAWN_PIDS_MAX", "512", KIND_INT,
	    F(spawn_pids_max), 16, 4194304, NULL },
	{ "HOSTGATE_UID_RANGE", "1879048192-1879113727", KIND_RANGE,
	    F(uid_range), 65536, 4294967293L, NULL },
	{ "HOSTGATE_WEB_DIR", HG_WEB_DIR, KIND_DIR, F(web_dir), 0, 0, NULL },
	{ "HOSTGATE_ADMIN_PASSWORD", NULL, KIND_SECRET, NOF, 0, 0, NULL },
	/* The fleet: a PostgreSQL store shared by hosts (docs/fleet.md). */
	{ "HOSTGATE_STORE", "", KIND_STORE, F(store), 0, 1024, NULL },
	{ "HOSTGATE_STORE_TIMEOUT_SECONDS", "5", KIND_INT,
	    F(store_timeout), 1, 60, NULL },
	{ "HOSTGATE_HOST_ID", NULL, KIND_HOSTID, F(host_id), 0, 0, NULL },
	{ "HOSTGATE_HOST_LOST_SECONDS", "10", KIND_INT,
	    F(host_lost), 2, 3600, NULL },
	{ "HOSTGATE_TRUSTED_PROXIES", "", KIND_NETS,
	    F(trusted_proxies), 0, 0, NULL },
	/* Its default is read only when it exists. */
	{ "HOSTGATE_ENV_FILE", HG_ENV_FILE, KIND_ENV_FILE,
	    F(env_file), 0, 0, NULL },
	{ "HOSTGATE_BUILD", NULL, KIND_IGNORED, NOF, 0, 0, NULL },
	/*
	 * Set by sandboxd in the environment of every spawn, so a daemon or
	 * hgctl started inside a hostgate terminal sees it.
	 */
	{ "HOSTGATE_MODE", NULL, KIND_IGNORED, NOF, 0, 0, NULL },
};
#define NVARS	(sizeof config_vars / sizeof config_vars[0])

/* Prefixes of the variables that belong to hostgate. */
static const char *const config_prefixes[] = {
	"HOST_EXECUTION_", "HOST_SANDBOX_", "HOSTGATE_", NULL
};

/* The value of a variable while loading, and where it came from. */
struct config_value {
	const char	*value;		/* NULL: use the default */
	int		 line;		/* line in the .env file; 0: environment */
};

/* The field of cfg that var fills. */
static void *
config_field(const struct config *cfg, const struct config_var *var)
{
	return ((char *)cfg + var->off);
}

/* Whether a string field is one the table allocates (and frees). */
static int
config_is_string(const struct config_var *var)
{
	switch (var->kind) {
	case KIND_WORD:
	case KIND_USER:
	case KIND_USERS:
	case KIND_IMAGE:
	case KIND_DIR:
	case KIND_WORKSPACE:
	case KIND_FILE:
	case KIND_PATHS:
	case KIND_LISTEN:
	case KIND_ORIGINS:
	case KIND_URL:
	case KIND_DOMAINS:
	case KIND_NETS:
	case KIND_PORTS:
	case KIND_ENV_FILE:
	case KIND_STORE:
	case KIND_HOSTID:
		return (1);
	default:
		return (0);
	}
}

/* Describe the values var allows, for error messages. */
static void
config_allowed(const struct config_var *var, char *buf, size_t bufsz)
{
	const char *const	*c;
	size_t			 len;

	buf[0] = '\0';
	switch (var->kind) {
	case KIND_CHOICE:
	case KIND_WORD:
		for (c = var->choices; *c != NULL; c++) {
			len = strlen(buf);
			snprintf(buf + len, bufsz - len, "%s%s",
			    c == var->choices ? "" : ", ", *c);
		}
		break;
	case KIND_INT:
		snprintf(buf, bufsz, "an integer from %ld to %ld", var->min,
		    var->max);
		break;
	case KIND_FLAG:
		snprintf(buf, bufsz, "0, 1");
		break;
	case KIND_SIZE:
		snprintf(buf, bufsz, "a size in bytes from %ld to %ld, with an "
		    "optional K, M, G or T suffix (powers of 1024), or max",
		    var->min, var->max);
		break;
	case KIND_RANGE:
		snprintf(buf, bufsz, "FIRST-LAST, two integers from %ld to %ld, "
		    "FIRST below LAST", var->min, var->max);
		break;
	case KIND_USER:
		snprintf(buf, bufsz, "a user name matching "
		    "[a-z_][a-z0-9_-]{0,31}");
		break;
	case KIND_USERS:
		snprintf(buf, bufsz, "user names separated by ',', each "
		    "of [a-z_][a-z0-9_.-]{0,31} and maybe preceded by '-'");
		break;
	case KIND_ORIGINS:
		snprintf(buf, bufsz, "origins separated by ',', each "
		    "http://HOST or https://HOST, maybe with :PORT, no path");
		break;
	case KIND_URL:
		snprintf(buf, bufsz, "empty, or http://HOST or https://HOST, "
		    "maybe with :PORT, no path, e.g. "
		    "https://hostgate.example.org");
		break;
	case KIND_DOMAINS:
		snprintf(buf, bufsz, "domain names or *.NAME patterns (sub-"
		    "domains of NAME), lower case, separated by ',' or spaces; "
		    "no IP addresses");
		break;
	case KIND_NETS:
		snprintf(buf, bufsz, "networks ADDRESS/PREFIX, IPv4 or IPv6, "
		    "no bits set past the prefix, separated by ',' or spaces");
		break;
	case KIND_PORTS:
		snprintf(buf, bufsz, "at most 64 TCP ports from 1 to 65535, "
		    "separated by ',' or spaces");
		break;
	case KIND_STORE:
		snprintf(buf, bufsz, "empty (the embedded store) or a "
		    "PostgreSQL connection URI postgresql://... or postgres://..."
		    ", or a libpq KEY=VALUE connection string, at most %ld "
		    "bytes, without control characters", var->max);
		break;
	case KIND_HOSTID:
		snprintf(buf, bufsz, "a host id of lower-case letters, digits "
		    "and '-', starting with a letter or digit, at most 32 "
		    "characters");
		break;
	case KIND_IMAGE:
		snprintf(buf, bufsz, "an image reference of letters, digits "
		    "and . _ - / : @, not starting with -");
		break;
	case KIND_DIR:
		if (var->max > 0)
			snprintf(buf, bufsz, "a path without control "
			    "characters, at most %ld bytes once absolute",
			    var->max);
		else
			snprintf(buf, bufsz, "a path without control "
			    "characters");
		break;
	case KIND_WORKSPACE:
		snprintf(buf, bufsz, "a path other than / without '..' "
		    "components, quotes, parentheses, backslashes or control "
		    "characters");
		break;
	case KIND_FILE:
	case KIND_ENV_FILE:
		snprintf(buf, bufsz, "a path without control characters");
		break;
	case KIND_PATHS:
		snprintf(buf, bufsz, "absolute paths separated by ':', "
		    "without '.', '..' or empty components, a trailing '/', "
		    "quotes, parentheses, backslashes or control characters");
		break;
	case KIND_LISTEN:
		snprintf(buf, bufsz, "a numeric IPv4 address or a bracketed "
		    "IPv6 address, ':' and a port from 0 to 65535, e.g. "
		    "127.0.0.1:8080 or [::1]:8080");
		break;
	default:
		snprintf(buf, bufsz, "anything");
		break;
	}
}

/*
 * Write "VARIABLE=value: reason (allowed: ...)" into err and return -1.
 * where prefixes "file:line: " for values from the .env file; allowed NULL
 * describes the variable's values, "" leaves the part out.
 */
static int
config_error(char *err, size_t errsz, const char *where,
    const struct config_var *var, const char *value, const char *why,
    const char *allowed)
{
	char	evalue[LOG_ESCAPE_MAX], buf[512];

	if (allowed == NULL) {
		config_allowed(var, buf, sizeof buf);
		allowed = buf;
	}
	log_escape(value, (size_t)-1, evalue, sizeof evalue);
	if (*allowed == '\0')
		snprintf(err, errsz, "%s%s=%s: %s", where, var->name, evalue,
		    why);
	else
		snprintf(err, errsz, "%s%s=%s: %s (allowed: %s)", where,
		    var->name, evalue, why, allowed);
	return (-1);
}

/* The "file:line: " prefix of a value from the .env file, else "". */
static const char *
config_where(const char *envpath, int line, char *buf, size_t bufsz)
{
	char	epath[LOG_ESCAPE_MAX];

	if (line <= 0 || envpath == NULL)
		return ("");
	snprintf(buf, bufsz, "%s:%d: ",
	    log_escape(envpath, (size_t)-1, epath, sizeof epath), line);
	return (buf);
}

/* Find a variable by name, or NULL. */
static const struct config_var *
config_var_find(const char *name, size_t len)
{
	size_t	i;

	for (i = 0; i < NVARS; i++)
		if (strncmp(config_vars[i].name, name, len) == 0 &&
		    config_vars[i].name[len] == '\0')
			return (&config_vars[i]);
	return (NULL);
}

/* Whether a variable name (len bytes) has one of hostgate's prefixes. */
static int
config_is_ours(const char *name, size_t len)
{
	const char *const	*p;
	size_t			 plen;

	for (p = config_prefixes; *p != NULL; p++) {
		plen = strlen(*p);
		if (len >= plen && strncmp(name, *p, plen) == 0)
			return (1);
	}
	return (0);
}

/* Whether s holds a control character (newline included) or DEL. */
static int
config_has_control(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return (1);
	return (0);
}

/*
 * Parse a strictly decimal number within min..max into *out; returns the
 * reason it is not one, or NULL.
 */
static const char *
config_parse_number(const char *s, long min, long max, long *out)
{
	long	v = 0;

	if (*s == '\0')
		return ("not a number");
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return ("not a number");
		if (v > (LONG_MAX - 9) / 10)
			return ("out of range");
		v = v * 10 + (*s - '0');
	}
	if (v < min || v > max)
		return ("out of range");
	*out = v;
	return (NULL);
}

/*
 * A size: digits and an optional K, M, G or T (powers of 1024), or "max"
 * (-1, no limit). NULL and *out, or the reason it is refused.
 */
static const char *
config_parse_size(const char *s, long min, long max, long *out)
{
	char		 digits[32];
	size_t		 len = strlen(s);
	const char	*why;
	long		 v, mult = 1;

	if (strcmp(s, "max") == 0) {
		*out = -1;
		return (NULL);
	}
	if (len == 0 || len >= sizeof(digits))
		return ("not a size");
	memcpy(digits, s, len + 1);
	switch (digits[len - 1]) {
	case 'K': mult = 1L << 10; break;
	case 'M': mult = 1L << 20; break;
	case 'G': mult = 1L << 30; break;
	case 'T': mult = 1L << 40; break;
	}
	if (mult > 1)
		digits[len - 1] = '\0';
	if ((why = config_parse_number(digits, 0, LONG_MAX / mult, &v)) != NULL)
		return (strcmp(why, "out of range") == 0 ? why : "not a size");
	v *= mult;
	/* 0 means "none" where the minimum allows it. */
	if (v != 0 && (v < min || v > max))
		return ("out of range");
	if (v == 0 && min > 0)
		return ("out of range");
	*out = v;
	return (NULL);
}

/* Whether s is "" or names separated by ',', each maybe after '-'. */
static int
config_valid_users(const char *s)
{
	size_t	len;

	while (*s != '\0') {
		if (*s == '-')
			s++;
		len = strcspn(s, ",");
		if (len == 0 || len > 32 || !((*s >= 'a' && *s <= 'z') ||
		    *s == '_') || strspn(s, "abcdefghijklmnopqrstuvwxyz"
		    "0123456789_.-") < len)
			return (0);
		s += len;
		if (*s == ',' && *++s == '\0')
			return (0);
	}
	return (1);
}

/*
 * Parse a web origin as browsers send it: "http" or "https", "://", a
 * host (a DNS name or IPv4 address, or an IPv6 address in brackets) and
 * maybe ":port" (1 to 65535), nothing else. The host is lower-cased and
 * the port defaults to the scheme's.
 */
int
config_parse_web_origin(const char *s, size_t len, struct web_origin *o)
{
	const char	*p, *end = s + len, *hend;
	char		 v6[INET6_ADDRSTRLEN];
	struct in6_addr	 a6;
	size_t		 hlen, i;
	long		 port = 0;

	memset(o, 0, sizeof(*o));
	if (len > 8 && strncmp(s, "https://", 8) == 0) {
		o->https = 1;
		p = s + 8;
	} else if (len > 7 && strncmp(s, "http://", 7) == 0)
		p = s + 7;
	else
		return (-1);
	if (*p == '[') {
		if ((hend = memchr(p, ']', end - p)) == NULL ||
		    (size_t)(hend - p - 1) >= sizeof(v6))
			return (-1);
		memcpy(v6, p + 1, hend - p - 1);
		v6[hend - p - 1] = '\0';
		if (inet_pton(AF_INET6, v6, &a6) != 1)
			return (-1);
		hend++;
	} else {
		for (hend = p; hend < end && *hend != ':'; hend++)
			if (!((*hend >= 'a' && *hend <= 'z') ||
			    (*hend >= 'A' && *hend <= 'Z') ||
			    (*hend >= '0' && *hend <= '9') || *hend == '.' ||
			    *hend == '-'))
				return (-1);
		if (hend == p || *p == '.' || *p == '-')
			return (-1);
	}
	if ((hlen = hend - p) >= sizeof(o->host))
		return (-1);
	for (i = 0; i < hlen; i++)
		o->host[i] = (p[i] >= 'A' && p[i] <= 'Z') ? p[i] - 'A' + 'a' :
		    p[i];
	o->host[hlen] = '\0';
	if (hend == end) {
		o->port = o->https ? 443 : 80;
		return (0);
	}
	if (*hend != ':' || end - hend < 2 || end - hend > 6)
		return (-1);
	for (p = hend + 1; p < end; p++) {
		if (*p < '0' || *p > '9')
			return (-1);
		port = port * 10 + (*p - '0');
	}
	if (port < 1 || port > 65535)
		return (-1);
	o->port = (int)port;
	return (0);
}

/* Whether s is "" or web origins separated by ','. */
static int
config_valid_origins(const char *s)
{
	struct web_origin	o;
	size_t			len;

	while (*s != '\0') {
		len = strcspn(s, ",");
		if (config_parse_web_origin(s, len, &o) == -1)
			return (0);
		s += len;
		if (*s == ',' && *++s == '\0')
			return (0);
	}
	return (1);
}

/*
 * Why s is not a public URL (scheme://host[:port], maybe a trailing '/'),
 * or NULL. The path, the query and user information each get a reason of
 * their own: hostgate serves at the root of its address.
 */
static const char *
config_check_url(const char *s)
{
	struct web_origin	 o;
	const char		*host, *slash;
	size_t			 len = strlen(s);

	if (config_has_control(s))
		return ("contains a control character");
	if (strncmp(s, "https://", 8) == 0)
		host = s + 8;
	else if (strncmp(s, "http://", 7) == 0)
		host = s + 7;
	else
		return ("not an http:// or https:// URL");
	if (strpbrk(host, "?#") != NULL)
		return ("has a query or a fragment: give scheme://HOST[:PORT] "
		    "only");
	if ((slash = strchr(host, '/')) != NULL) {
		if (slash[1] != '\0')
			return ("has a path: hostgate is served at the root of "
			    "its address, give scheme://HOST[:PORT] only");
		len--;
	}
	if (memchr(host, '@', s + len - host) != NULL)
		return ("has user information ('@'): give "
		    "scheme://HOST[:PORT] only");
	if (config_parse_web_origin(s, len, &o) == -1)
		return ("not scheme://HOST[:PORT] with a host name or address "
		    "and a port from 1 to 65535");
	return (NULL);
}

/* Whether s is a host id: [a-z0-9][a-z0-9-]{0,31}. */
static int
config_valid_host(const char *s)
{
	size_t	len = strlen(s);

	return (len >= 1 && len <= 32 && s[0] != '-' &&
	    strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == len);
}

/*
 * The default host id: the machine's short host name, lower-cased, with
 * what a host id cannot hold dropped; "host" when nothing is left.
 */
static void
config_default_host(char *out, size_t outsz)
{
	char	name[256];
	size_t	i, n = 0;

	if (gethostname(name, sizeof(name)) == -1)
		name[0] = '\0';
	name[sizeof(name) - 1] = '\0';
	for (i = 0; name[i] != '\0' && name[i] != '.' && n < 32 &&
	    n + 1 < outsz; i++) {
		char	c = name[i] >= 'A' && name[i] <= 'Z' ?
		    name[i] - 'A' + 'a' : name[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    (c == '-' && n > 0))
			out[n++] = c;
	}
	out[n] = '\0';
	if (n == 0)
		snprintf(out, outsz, "host");
}

/* Whether s is a valid user name: [a-z_][a-z0-9_-]{0,31}. */
static int
config_valid_user(const char *s)
{
	size_t	i;

	if (!((*s >= 'a' && *s <= 'z') || *s == '_'))
		return (0);
	for (i = 1; s[i] != '\0'; i++) {
		if (i > 31)
			return (0);
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return (0);
	}
	return (1);
}

/*
 * Why path (len bytes) is not a canonical absolute path safe to paste into
 * a sandbox profile, or NULL when it is.
 */
static const char *
config_check_canonical(const char *path, size_t len)
{
	const char	*p, *end, *c;
	size_t		 n;

	if (len == 0)
		return ("empty path");
	if (path[0] != '/')
		return ("not an absolute path");
	if (len == 1)
		return ("/ is not allowed");
	if (path[len - 1] == '/')
		return ("trailing '/'");
	for (c = path; c < path + len; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return ("contains a control character");
		if (strchr("'\"()\\", *c) != NULL)
			return ("contains a quote, parenthesis or backslash");
	}
	for (p = path + 1; p <= path + len; p = end + 1) {
		if ((end = memchr(p, '/', path + len - p)) == NULL)
			end = path + len;
		n = end - p;
		if (n == 0)
			return ("empty component ('//')");
		if ((n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return ("contains a '.' or '..' component");
	}
	return (NULL);
}

/*
 * Make path absolute against the current directory without resolving
 * symlinks: "." and empty components and a trailing '/' go, and ".."
 * components before any of path's own climb the directory above (exact,
 * since getcwd() has no symlinks); later ".." stay for the kernel. Returns
 * a malloc'ed path, or NULL with the reason in why.
 */
static char *
config_abspath(const char *path, const char **why)
{
	char		 buf[PATH_MAX], *abs;
	const char	*p, *end;
	size_t		 len = 0, n;
	int		 own = 0;

	if (path[0] != '/') {
		if (getcwd(buf, sizeof buf) == NULL) {
			*why = "cannot get the current directory";
			return (NULL);
		}
		len = strlen(buf);
		if (len == 1)	/* "/" */
			len = 0;
	}
	for (p = path; *p != '\0'; p = end) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		if ((end = strchr(p, '/')) == NULL)
			end = p + strlen(p);
		n = end - p;
		if (n == 1 && p[0] == '.')
			continue;
		if (n == 2 && p[0] == '.' && p[1] == '.' && !own) {
			while (len > 0 && buf[len - 1] != '/')
				len--;
			if (len > 0)
				len--;
			continue;
		}
		if (len + 1 + n >= sizeof buf) {
			*why = "path too long";
			return (NULL);
		}
		buf[len++] = '/';
		memcpy(buf + len, p, n);
		len += n;
		own = 1;
	}
	if (len == 0)
		buf[len++] = '/';
	buf[len] = '\0';
	if ((abs = strdup(buf)) == NULL)
		fatal("%s", __func__);
	return (abs);
}

/* Parse host:port or [host]:port into cfg; the reason it is wrong or NULL. */
static const char *
config_parse_listen(struct config *cfg, const char *value)
{
	const char	*host, *port, *close;
	unsigned char	 addr[sizeof(struct in6_addr)];
	size_t		 hlen;
	long		 n;
	int		 family;

	if (value[0] == '[') {
		if ((close = strchr(value, ']')) == NULL || close[1] != ':')
			return ("expected [address]:port");
		host = value + 1;
		hlen = close - host;
		port = close + 2;
		family = AF_INET6;
	} else {
		if ((port = strrchr(value, ':')) == NULL)
			return ("missing ':port'");
		host = value;
		hlen = port - value;
		port++;
		if (memchr(host, ':', hlen) != NULL)
			return ("an IPv6 address needs brackets, as in "
			    "[::1]:8080");
		family = AF_INET;
	}
	if (hlen == 0 || hlen >= sizeof cfg->listen_host)
		return ("not a numeric address");
	memcpy(cfg->listen_host, host, hlen);
	cfg->listen_host[hlen] = '\0';
	if (inet_pton(family, cfg->listen_host, addr) != 1)
		return (family == AF_INET ? "not a numeric IPv4 address" :
		    "not a numeric IPv6 address");
	/* Port 0: the kernel picks one; frontd reports the one it got. */
	if (config_parse_number(port, 0, 65535, &n) != NULL)
		return ("not a port from 0 to 65535");
	cfg->listen_port = n;
	if (family == AF_INET)
		cfg->listen_loopback = addr[0] == 127;
	else
		cfg->listen_loopback =
		    IN6_IS_ADDR_LOOPBACK((struct in6_addr *)addr) ||
		    (IN6_IS_ADDR_V4MAPPED((struct in6_addr *)addr) &&
		    addr[12] == 127);
	return (NULL);
}

/* Check a colon-separated list of paths; the reason it is wrong or NULL. */
static const char *
config_check_paths(const char *value, char *why, size_t whysz)
{
	const char	*p, *end, *reason;
	char		 epath[LOG_ESCAPE_MAX];

	if (*value == '\0')
		return (NULL);
	for (p = value;; p = end + 1) {
		if ((end = strchr(p, ':')) == NULL)
			end = p + strlen(p);
		if ((reason = config_check_canonical(p, end - p)) != NULL) {
			snprintf(why, whysz, "%s: %s",
			    log_escape(p, end - p, epath, sizeof epath), reason);
			return (why);
		}
		if (*end == '\0')
			return (NULL);
	}
}

/* Store one of var's choices: its index (KIND_CHOICE) or a copy (KIND_WORD). */
static int
config_set_choice(void *field, const struct config_var *var,
    const char *value, const char *where, char *err, size_t errsz)
{
	const char *const *c;

	for (c = var->choices; *c != NULL; c++)
		if (strcmp(value, *c) == 0)
			break;
	if (*c == NULL)
		return (config_error(err, errsz, where, var, value,
		    "unknown value", NULL));
	if (var->kind == KIND_CHOICE)
		*(int *)field = c - var->choices;
	else if ((*(char **)field = strdup(value)) == NULL)
		fatal("%s", __func__);
	return (0);
}

/* Store a number (KIND_INT, KIND_FLAG) or a size (KIND_SIZE) within limits. */
static int
config_set_number(void *field, const struct config_var *var,
    const char *value, const char *where, char *err, size_t errsz)
{
	const char	*why;
	long		 n;

	if (var->kind == KIND_SIZE) {
		if ((why = config_parse_size(value, var->min, var->max,
		    &n)) != NULL)
			return (config_error(err, errsz, where, var, value, why,
			    NULL));
		*(long *)field = n;
		return (0);
	}
	if ((why = config_parse_number(value, var->min, var->max,
	    &n)) != NULL)
		return (config_error(err, errsz, where, var, value,
		    var->kind == KIND_FLAG ? "not 0 or 1" : why, NULL));
	if (var->size == sizeof(long))
		*(long *)field = n;
	else
		*(int *)field = n;
	return (0);
}

/* Store "FIRST-LAST" as two longs, each within var's limits, FIRST < LAST. */
static int
config_set_range(long *field, const struct config_var *var,
    const char *value, const char *where, char *err, size_t errsz)
{
	const char	*dash = strchr(value, '-'), *why;
	char		 buf[LOG_ESCAPE_MAX + 128];
	long		 lo, hi;

	if (dash == NULL || (size_t)(dash - value) >= sizeof(buf))
		return (config_error(err, errsz, where, var, value,
		    "not FIRST-LAST", NULL));
	memcpy(buf, value, dash - value);
	buf[dash - value] = '\0';
	if ((why = config_parse_number(buf, var->min, var->max,
	    &lo)) != NULL || (why = config_parse_number(dash + 1,
	    var->min, var->max, &hi)) != NULL)
		return (config_error(err, errsz, where, var, value, why,
		    NULL));
	if (lo >= hi)
		return (config_error(err, errsz, where, var, value,
		    "FIRST is not below LAST", NULL));
	field[0] = lo;
	field[1] = hi;
	return (0);
}

/*
 * Check a value that is stored as it is written (names, lists, addresses);
 * the reason it is wrong, maybe written in buf, or NULL.
 */
static const char *
config_check_string(struct config *cfg, const struct config_var *var,
    const char *value, char *buf, size_t bufsz)
{
	switch (var->kind) {
	case KIND_USER:
		if (!config_valid_user(value))
			return ("not a valid user name");
		break;
	case KIND_USERS:
		if (!config_valid_users(value))
			return ("not a list of user names");
		break;
	case KIND_STORE:
		if (config_has_control(value))
			return ("contains a control character");
		if (strlen(value) > (size_t)var->max)
			return ("too long");
		if (strncmp(value, "postgresql://", 13) != 0 &&
		    strncmp(value, "postgres://", 11) != 0 &&
		    strchr(value, '=') == NULL)
			return ("not a PostgreSQL URI or KEY=VALUE string");
		break;
	case KIND_HOSTID:
		if (!config_valid_host(value))
			return ("not a host id");
		break;
	case KIND_IMAGE:
		if (value[0] == '\0' || value[0] == '-' || strlen(value) > 255 ||
		    strspn(value, "abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") !=
		    strlen(value))
			return ("not an image reference");
		break;
	case KIND_ORIGINS:
		if (!config_valid_origins(value))
			return ("not a list of web origins");
		break;
	case KIND_URL:
		return (config_check_url(value));
	case KIND_DOMAINS: {
		char	bad[300];

		if (!egress_list_valid(value, bad, sizeof(bad))) {
			snprintf(buf, bufsz, "%.*s is not a domain name or "
			    "*.NAME pattern", LOG_ESCAPE_MAX, bad);
			return (buf);
		}
		break;
	}
	case KIND_NETS: {
		struct egress_nets	nets;

		if (egress_nets_parse(value, &nets, buf, bufsz) == -1)
			return (buf);
		egress_nets_free(&nets);
		break;
	}
	case KIND_PORTS: {
		int	ports[64];

		if (egress_ports_parse(value, ports, 64) == -1)
			return ("not a list of ports");
		break;
	}
	case KIND_LISTEN:
		return (config_parse_listen(cfg, value));
	case KIND_PATHS:
		return (config_check_paths(value, buf, bufsz));
	default:
		break;
	}
	return (NULL);
}

/* Store a path made absolute (KIND_DIR, KIND_FILE), within var's length. */
static int
config_set_path(char **field, const struct config_var *var,
    const char *value, const char *where, char *err, size_t errsz)
{
	const char	*why = NULL;
	char		*abs, buf[LOG_ESCAPE_MAX + 128];

	if (config_has_control(value))
		return (config_error(err, errsz, where, var, value,
		    "contains a control character", NULL));
	if ((abs = config_abspath(value, &why)) == NULL)
		return (config_error(err, errsz, where, var, value, why,
		    NULL));
	if (var->max > 0 && strlen(abs) > (size_t)var->max) {
		snprintf(buf, sizeof buf, "too long for the Unix "
		    "sockets inside it: %zu bytes once absolute, the "
		    "limit is %ld (sun_path)", strlen(abs), var->max);
		free(abs);
		return (config_error(err, errsz, where, var, value, buf,
		    NULL));
	}
	*field = abs;
	return (0);
}

/*
 * Store the workspace root made absolute and held to the canonical rules;
 * value NULL means the default, "workspaces" inside the state directory.
 */
static int
config_set_workspace(char **field, struct config *cfg,
    const struct config_var *var, const char *value, int defaulted,
    const char *where, char *err, size_t errsz)
{
	const char	*why = NULL;
	char		*abs = NULL, buf[LOG_ESCAPE_MAX + 128];

	if (value == NULL) {
		if (strlen(cfg->state_dir) + sizeof "/workspaces" >
		    PATH_MAX) {
			why = "path too long (the default, inside "
			    "HOSTGATE_STATE_DIR)";
			value = cfg->state_dir;
		} else
			abs = path_join(cfg->state_dir, "workspaces");
	} else if (config_has_control(value))
		why = "contains a control character";
	else
		abs = config_abspath(value, &why);
	if (abs != NULL && (why = config_check_canonical(abs,
	    strlen(abs))) != NULL) {
		snprintf(buf, sizeof buf, "%s%s", why, defaulted ?
		    " (the default, inside HOSTGATE_STATE_DIR)" : "");
		why = buf;
		if (defaulted)
			value = abs;
	}
	if (why != NULL) {
		config_error(err, errsz, where, var, value, why, NULL);
		free(abs);
		return (-1);
	}
	*field = abs;
	return (0);
}

/*
 * Validate value and store it in cfg. value NULL means unset: the default
 * applies (a computed one for HOSTGATE_WORKSPACE_ROOT).
 */
static int
config_set(struct config *cfg, const struct config_var *var,
    const char *value, const char *where, char *err, size_t errsz)
{
	void		*field = config_field(cfg, var);
	const char	*why;
	char		 buf[LOG_ESCAPE_MAX + 128];
	int		 defaulted = 0;

	if (value == NULL) {
		value = var->def;
		defaulted = 1;
	}
	switch (var->kind) {
	case KIND_CHOICE:
	case KIND_WORD:
		return (config_set_choice(field, var, value, where, err,
		    errsz));
	case KIND_INT:
	case KIND_FLAG:
	case KIND_SIZE:
		return (config_set_number(field, var, value, where, err,
		    errsz));
	case KIND_RANGE:
		return (config_set_range(field, var, value, where, err, errsz));
	case KIND_FILE:
		if (value == NULL)
			return (0);
		/* FALLTHROUGH */
	case KIND_DIR:
		return (config_set_path(field, var, value, where, err, errsz));
	case KIND_WORKSPACE:
		return (config_set_workspace(field, cfg, var, value, defaulted,
		    where, err, errsz));
	case KIND_STORE:
		if (value[0] == '\0')
			return (0);	/* embedded: the field stays NULL */
		break;
	case KIND_URL:
		if (value == NULL || value[0] == '\0')
			return (0);	/* unset: the field stays NULL */
		if ((why = config_check_url(value)) != NULL)
			return (config_error(err, errsz, where, var, value, why,
			    NULL));
		/* Stored without its trailing '/', ready for a path. */
		if ((*(char **)field = strndup(value, strlen(value) -
		    (value[strlen(value) - 1] == '/'))) == NULL)
			fatal("%s", __func__);
		return (0);
	case KIND_HOSTID:
		if (!defaulted)
			break;
		/* Computed from the host name: nothing to check. */
		config_default_host(buf, sizeof(buf));
		if ((*(char **)field = strdup(buf)) == NULL)
			fatal("%s", __func__);
		return (0);
	case KIND_USER:
	case KIND_USERS:
	case KIND_IMAGE:
	case KIND_ORIGINS:
	case KIND_DOMAINS:
	case KIND_NETS:
	case KIND_PORTS:
	case KIND_LISTEN:
	case KIND_PATHS:
		break;
	default:
		return (0);
	}
	if ((why = config_check_string(cfg, var, value, buf,
	    sizeof buf)) != NULL)
		return (config_error(err, errsz, where, var, value, why, NULL));
	if ((*(char **)field = strdup(value)) == NULL)
		fatal("%s", __func__);
	return (0);
}

/* Append one variable to env. */
static void
config_env_add(struct config_env *env, const char *name, size_t namelen,
    const char *value, size_t valuelen, int line)
{
	struct config_env_var	*v;

	v = reallocarray(env->vars, env->nvars + 1, sizeof *env->vars);
	if (v == NULL)
		fatal("%s", __func__);
	env->vars = v;
	v = &env->vars[env->nvars++];
	if ((v->name = strndup(name, namelen)) == NULL ||
	    (v->value = strndup(value, valuelen)) == NULL)
		fatal("%s", __func__);
	v->line = line;
}

/*
 * Parse the value after '=' (p to e) into out, which has room for e - p
 * bytes plus a NUL; returns the reason it is malformed, or NULL.
 */
static const char *
config_env_value(const char *p, const char *e, char *out, size_t *outlen)
{
	size_t		 n = 0;
	const char	*q;
	char		 quote;

	if (p < e && (*p == '\'' || *p == '"')) {
		quote = *p++;
		for (;; p++) {
			if (p == e)
				return (quote == '"' ? "unterminated double quote" :
				    "unterminated single quote");
			if (*p == quote)
				break;
			if (quote == '"' && *p == '\\') {
				if (++p == e)
					return ("unterminated double quote");
				if (*p == 'n')
					out[n++] = '\n';
				else if (*p == '"' || *p == '\\')
					out[n++] = *p;
				else
					return ("unknown escape in double quotes "
					    "(allowed: \\\", \\\\, \\n)");
				continue;
			}
			out[n++] = *p;
		}
		/* After the closing quote: blanks, then maybe a comment. */
		for (p++; p < e && (*p == ' ' || *p == '\t'); p++)
			;
		if (p < e && *p != '#')
			return ("text after the closing quote");
	} else {
		/* Unquoted: trimmed; " #" starts a comment. */
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		for (q = p; q < e; q++)
			if (*q == '#' && q > p && (q[-1] == ' ' || q[-1] == '\t'))
				break;
		while (q > p && (q[-1] == ' ' || q[-1] == '\t'))
			q--;
		memcpy(out, p, q - p);
		n = q - p;
	}
	out[n] = '\0';
	*outlen = n;
	return (NULL);
}

/* Parse .env text: NAME=value lines, blank lines and # comments. */
int
config_env_parse(const char *file, const char *text, size_t len,
    struct config_env *env, char *err, size_t errsz)
{
	const char	*p, *e, *next, *end = text + len, *name, *why;
	char		*value = NULL, efile[LOG_ESCAPE_MAX];
	size_t		 n, namelen, valuelen;
	int		 line = 0;

	env->vars = NULL;
	env->nvars = 0;
	for (p = text; p < end; p = next) {
		line++;
		if ((e = memchr(p, '\n', end - p)) == NULL)
			e = end;
		next = e < end ? e + 1 : end;
		n = e - p;
		if (n > 0 && p[n - 1] == '\r')
			n--;
		e = p + n;
		if (memchr(p, '\0', n) != NULL) {
			why = "contains a NUL byte";
			goto fail;
		}
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		if (p == e || *p == '#')
			continue;
		if (e - p > 7 && strncmp(p, "export", 6) == 0 &&
		    (p[6] == ' ' || p[6] == '\t')) {
			for (p += 7; p < e && (*p == ' ' || *p == '\t'); p++)
				;
		}
		name = p;
		if (p < e && ((*p >= 'A' && *p <= 'Z') ||
		    (*p >= 'a' && *p <= 'z') || *p == '_')) {
			while (p < e && ((*p >= 'A' && *p <= 'Z') ||
			    (*p >= 'a' && *p <= 'z') ||
			    (*p >= '0' && *p <= '9') || *p == '_'))
				p++;
		}
		namelen = p - name;
		if (namelen == 0 || p == e || *p != '=') {
			why = "expected NAME=value";
			goto fail;
		}
		p++;
		if ((value = malloc(e - p + 1)) == NULL)
			fatal("%s", __func__);
		if ((why = config_env_value(p, e, value, &valuelen)) != NULL)
			goto fail;
		config_env_add(env, name, namelen, value, valuelen, line);
		free(value);
		value = NULL;
	}
	return (0);

fail:
	free(value);
	config_env_free(env);
	snprintf(err, errsz, "%s:%d: %s",
	    log_escape(file, (size_t)-1, efile, sizeof efile), line, why);
	return (-1);
}

/* Free what config_env_parse returned. */
void
config_env_free(struct config_env *env)
{
	size_t	i;

	for (i = 0; i < env->nvars; i++) {
		free(env->vars[i].name);
		free(env->vars[i].value);
	}
	free(env->vars);
	env->vars = NULL;
	env->nvars = 0;
}

/*
 * Read the .env file: HOSTGATE_ENV_FILE, which must exist when set, else
 * deffile (HG_ENV_FILE) when there is one. *path is set to the file read,
 * or NULL.
 */
static int
config_read_env(struct config *cfg, const char *deffile,
    struct config_env *env, const char **path, char *err, size_t errsz)
{
	const struct config_var	*var;
	const char		*given, *why;
	char			*text, epath[LOG_ESCAPE_MAX];
	size_t			 len;
	int			 rv;

	*path = NULL;
	given = getenv("HOSTGATE_ENV_FILE");
	if (given != NULL && *given != '\0') {
		if ((text = file_read(given, ENV_FILE_MAX, &len)) == NULL) {
			var = config_var_find("HOSTGATE_ENV_FILE",
			    strlen("HOSTGATE_ENV_FILE"));
			snprintf(epath, sizeof epath, "cannot read it: %s",
			    strerror(errno));
			return (config_error(err, errsz, "", var, given, epath,
			    "the path of a readable .env file"));
		}
	} else {
		if (deffile == NULL || *deffile == '\0')
			return (0);
		given = deffile;
		if ((text = file_read(given, ENV_FILE_MAX, &len)) == NULL) {
			if (errno == ENOENT)
				return (0);
			snprintf(err, errsz, "%s: cannot read it: %s (the "
			    "default configuration file; HOSTGATE_ENV_FILE "
			    "names another)", log_escape(given, (size_t)-1,
			    epath, sizeof epath), strerror(errno));
			return (-1);
		}
	}
	rv = config_env_parse(given, text, len, env, err, errsz);
	free(text);
	if (rv == -1)
		return (-1);
	*path = given;
	if ((cfg->env_file = config_abspath(given, &why)) == NULL &&
	    (cfg->env_file = strdup(given)) == NULL)
		fatal("%s", __func__);
	return (0);
}

/*
 * The edit distance of a and b (optimal string alignment: insertions,
 * deletions, substitutions and swaps of neighbours each cost one).
 */
static size_t
config_distance(const char *a, const char *b)
{
	size_t	d[CONFIG_NAME_MAX + 1][CONFIG_NAME_MAX + 1];
	size_t	la = strlen(a), lb = strlen(b), i, j, c, v;

	if (la > CONFIG_NAME_MAX)
		la = CONFIG_NAME_MAX;
	if (lb > CONFIG_NAME_MAX)
		lb = CONFIG_NAME_MAX;
	for (i = 0; i <= la; i++)
		d[i][0] = i;
	for (j = 0; j <= lb; j++)
		d[0][j] = j;
	for (i = 1; i <= la; i++) {
		for (j = 1; j <= lb; j++) {
			c = a[i - 1] != b[j - 1];
			v = d[i - 1][j - 1] + c;
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return (d[la][lb]);
}

/* The known variable closest to name (one that configures something). */
static const char *
config_closest(const char *name)
{
	const char	*best = NULL;
	size_t		 i, dist, bestdist = (size_t)-1;

	for (i = 0; i < NVARS; i++) {
		if (config_vars[i].kind == KIND_IGNORED)
			continue;
		dist = config_distance(name, config_vars[i].name);
		if (dist < bestdist) {
			bestdist = dist;
			best = config_vars[i].name;
		}
	}
	return (best);
}

/*
 * Check the names with hostgate's prefixes. An unknown one in the
 * environment is a warning: the environment is shared with other programs,
 * and a daemon or hgctl must not refuse to start over what it inherited. In
 * the .env file, which is hostgate's alone, it is an error, so that a typo
 * does not silently leave a default in place. Both name the closest known
 * variable.
 */
static int
config_check_names(const struct config_env *env, const char *envpath,
    char *err, size_t errsz)
{
	extern char	**environ;
	char		**ep, ename[LOG_ESCAPE_MAX], where[PATH_MAX];
	const char	*eq;
	size_t		 i, len;

	for (ep = environ; *ep != NULL; ep++) {
		if ((eq = strchr(*ep, '=')) == NULL)
			continue;
		len = eq - *ep;
		if (config_is_ours(*ep, len) && config_var_find(*ep, len) == NULL) {
			log_escape(*ep, len, ename, sizeof ename);
			log_warnx("unknown variable %s in the environment, "
			    "ignored (did you mean %s?)", ename,
			    config_closest(ename));
		}
	}
	for (i = 0; i < env->nvars; i++) {
		len = strlen(env->vars[i].name);
		if (config_is_ours(env->vars[i].name, len) &&
		    config_var_find(env->vars[i].name, len) == NULL) {
			snprintf(err, errsz, "%sunknown variable %s (did you "
			    "mean %s?)", config_where(envpath,
			    env->vars[i].line, where, sizeof where),
			    env->vars[i].name,
			    config_closest(env->vars[i].name));
			return (-1);
		}
	}
	return (0);
}

/*
 * Pick each variable's raw value: the environment wins over the .env file,
 * where the last line naming it counts. An empty value means the default.
 */
static void
config_gather(const struct config_env *env, struct config_value *vals)
{
	const struct config_var	*var;
	size_t			 i, j;

	for (i = 0; i < NVARS; i++) {
		var = &config_vars[i];
		vals[i].value = getenv(var->name);
		vals[i].line = 0;
		if (vals[i].value == NULL) {
			for (j = env->nvars; j-- > 0;) {
				if (strcmp(env->vars[j].name, var->name) == 0) {
					vals[i].value = env->vars[j].value;
					vals[i].line = env->vars[j].line;
					break;
				}
			}
		}
		if (vals[i].value != NULL && *vals[i].value == '\0')
			vals[i].value = NULL;
	}
}

/* The index of a variable in config_vars. */
static size_t
config_index(const char *name)
{
	const struct config_var	*var;

	if ((var = config_var_find(name, strlen(name))) == NULL)
		fatalx("%s: no variable %s", __func__, name);
	return (var - config_vars);
}

/* Checks that involve more than one variable. */
static int
config_check(const struct config *cfg, const struct config_value *vals,
    const char *envpath, char *err, size_t errsz)
{
	const struct config_value	*v;
	const char			*missing;
	char				 where[PATH_MAX], why[128];
	size_t				 have;

	if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL)) {
		if (cfg->tls_cert != NULL) {
			have = config_index("HOSTGATE_TLS_CERT");
			missing = "HOSTGATE_TLS_KEY";
		} else {
			have = config_index("HOSTGATE_TLS_KEY");
			missing = "HOSTGATE_TLS_CERT";
		}
		v = &vals[have];
		snprintf(why, sizeof why, "%s is not set", missing);
		return (config_error(err, errsz,
		    config_where(envpath, v->line, where, sizeof where),
		    &config_vars[have], v->value, why,
		    "both HOSTGATE_TLS_CERT and HOSTGATE_TLS_KEY, or neither"));
	}
	if (!cfg->listen_loopback && cfg->tls_cert == NULL &&
	    !cfg->insecure_http) {
		have = config_index("HOSTGATE_LISTEN");
		v = &vals[have];
		return (config_error(err, errsz,
		    config_where(envpath, v->line, where, sizeof where),
		    &config_vars[have], cfg->listen, "plain HTTP is only "
		    "allowed on loopback; set HOSTGATE_TLS_CERT and "
		    "HOSTGATE_TLS_KEY, or HOSTGATE_INSECURE_HTTP=1", ""));
	}
	return (0);
}

/* Load and validate the configuration; see common.h. */
int
config_load(struct config *cfg, char *err, size_t errsz)
{
	return (config_load_from(cfg, HG_ENV_FILE, err, errsz));
}

/* config_load with another default .env file; see config_env.h. */
int
config_load_from(struct config *cfg, const char *deffile, char *err,
    size_t errsz)
{
	struct config_env	 env = { NULL, 0 };
	struct config_value	 vals[NVARS];
	const char		*envpath;
	char			 where[PATH_MAX];
	size_t			 i;
	int			 rv = -1;

	memset(cfg, 0, sizeof *cfg);
	if ((cfg->origins = calloc(NVARS, sizeof *cfg->origins)) == NULL)
		fatal("%s", __func__);
	if (config_read_env(cfg, deffile, &env, &envpath, err, errsz) == -1)
		goto out;
	if (config_check_names(&env, envpath, err, errsz) == -1)
		goto out;
	config_gather(&env, vals);
	for (i = 0; i < NVARS; i++) {
		if (vals[i].value != NULL)
			cfg->origins[i] = vals[i].line > 0 ? vals[i].line : -1;
		if (config_set(cfg, &config_vars[i], vals[i].value,
		    config_where(envpath, vals[i].line, where, sizeof where),
		    err, errsz) == -1)
			goto out;
	}
	rv = config_check(cfg, vals, envpath, err, errsz);
out:
	config_env_free(&env);
	if (rv == -1)
		config_free(cfg);
	return (rv);
}

/*
 * Where the value of a variable came from, for messages: "the environment",
 * "FILE line N" or "the default".
 */
const char *
config_origin(const struct config *cfg, const char *name, char *buf,
    size_t bufsz)
{
	const struct config_var	*var;
	char			 epath[LOG_ESCAPE_MAX];
	int			 o;

	if ((var = config_var_find(name, strlen(name))) == NULL ||
	    cfg->origins == NULL)
		return ("unknown");
	o = cfg->origins[var - config_vars];
	if (o == -1)
		return ("the environment");
	if (o > 0 && cfg->env_file != NULL) {
		snprintf(buf, bufsz, "%s line %d", log_escape(cfg->env_file,
		    (size_t)-1, epath, sizeof epath), o);
		return (buf);
	}
	return ("the default");
}

/* Free the strings of a configuration. */
void
config_free(struct config *cfg)
{
	size_t	i;
	char	**field;

	for (i = 0; i < NVARS; i++) {
		if (!config_is_string(&config_vars[i]))
			continue;
		field = config_field(cfg, &config_vars[i]);
		free(*field);
		*field = NULL;
	}
	free(cfg->origins);
	cfg->origins = NULL;
}

/*
 * HOSTGATE_STORE as a string with its password masked: the part between
 * "user:" and "@" of a URI, the value of a password= key of a conninfo.
 */
char *
config_store_mask(const char *store)
{
	const char	*p, *at, *colon, *q;
	char		*out;
	size_t		 len = strlen(store);

	if ((out = malloc(len + 4)) == NULL)
		fatal("%s", __func__);
	if ((p = strstr(store, "://")) != NULL) {
		p += 3;
		at = strchr(p, '@');
		colon = strchr(p, ':');
		if (at != NULL && colon != NULL && colon < at &&
		    strchr(p, '/') > at) {
			snprintf(out, len + 4, "%.*s***%s",
			    (int)(colon + 1 - store), store, at);
			return (out);
		}
		snprintf(out, len + 4, "%s", store);
		return (out);
	}
	if ((p = strstr(store, "password")) != NULL &&
	    (p == store || p[-1] == ' ') && (q = strchr(p, '=')) != NULL) {
		q++;
		while (*q == ' ')
			q++;
		at = q;
		if (*at == '\'') {
			for (at++; *at != '\0' && *at != '\''; at++)
				if (*at == '\\' && at[1] != '\0')
					at++;
			if (*at == '\'')
				at++;
		} else
			at += strcspn(at, " ");
		snprintf(out, len + 4, "%.*s***%s", (int)(q - store), store,
		    at);
		return (out);
	}
	snprintf(out, len + 4, "%s", store);
	return (out);
}

/* The same as a JSON string. */
static struct json_object *
config_store_masked(const char *store)
{
	struct json_object	*v;
	char			*m = config_store_mask(store);

	v = json_object_new_string(m);
	free(m);
	return (v);
}

/* The effective configuration, one member per variable, secrets masked. */
struct json_object *
config_to_json(const struct config *cfg)
{
	const struct config_var	*var;
	struct json_object	*obj, *v;
	const void		*field;
	const char		*s;
	size_t			 i;

	if ((obj = json_object_new_object()) == NULL)
		fatalx("%s: out of memory", __func__);
	for (i = 0; i < NVARS; i++) {
		var = &config_vars[i];
		field = config_field(cfg, var);
		switch (var->kind) {
		case KIND_CHOICE:
			v = json_object_new_string(
			    var->choices[*(const int *)field]);
			break;
		case KIND_INT:
		case KIND_FLAG:
			if (var->size == sizeof(long))
				v = json_object_new_int64(*(const long *)field);
			else
				v = json_object_new_int64(*(const int *)field);
			break;
		case KIND_SIZE:
			v = json_object_new_int64(*(const long *)field);
			break;
		case KIND_RANGE:
			v = json_object_new_array();
			json_object_array_add(v, json_object_new_int64(
			    ((const long *)field)[0]));
			json_object_array_add(v, json_object_new_int64(
			    ((const long *)field)[1]));
			break;
		case KIND_SECRET:
			/* Set in the environment or the file: masked. */
			if (cfg->origins == NULL ? (s = getenv(var->name)) ==
			    NULL || *s == '\0' : cfg->origins[i] == 0)
				continue;
			v = json_object_new_string("***");
			break;
		case KIND_STORE:
			s = *(char *const *)field;
			v = s == NULL ? json_object_new_string("") :
			    config_store_masked(s);
			break;
		case KIND_IGNORED:
			continue;
		default:
			s = *(char *const *)field;
			v = s == NULL ? NULL : json_object_new_string(s);
			break;
		}
		json_object_object_add(obj, var->name, v);
	}
	return (obj);
}

/*
 * The value v of config_to_json's member name as an environment file
 * states it, so that config_read_env reads it back the same: a size "max"
 * (-1), a range "FIRST-LAST", other values as they are. 1 when the value
 * is masked (a secret, a store's password): stated, it would change it.
 */
int
config_env_text(const char *name, struct json_object *v, char *buf,
    size_t bufsz)
{
	const struct config_var	*var = config_var_find(name, strlen(name));
	const char		*s = v != NULL ? json_object_get_string(v) : "";

	snprintf(buf, bufsz, "%s", s);
	if (var == NULL)
		return (0);
	switch (var->kind) {
	case KIND_SIZE:
		if (json_object_is_type(v, json_type_int) &&
		    json_object_get_int64(v) == -1)
			snprintf(buf, bufsz, "max");
		return (0);
	case KIND_RANGE:
		if (json_object_is_type(v, json_type_array) &&
		    json_object_array_length(v) == 2)
			snprintf(buf, bufsz, "%lld-%lld", (long long)
			    json_object_get_int64(json_object_array_get_idx(v,
			    0)), (long long)json_object_get_int64(
			    json_object_array_get_idx(v, 1)));
		return (0);
	case KIND_SECRET:
		return (1);
	case KIND_STORE:
		return (strstr(s, "***") != NULL);
	default:
		return (0);
	}
}

/* Load the configuration or exit with the reason. */
void
config_load_or_die(struct config *cfg)
{
	char	err[1024];

	if (config_load(cfg, err, sizeof err) == -1)
		fatalx("%s", err);
}

/* The number of known variables. */
size_t
config_var_count(void)
{
	return (NVARS);
}

/* The name of the i-th variable. */
const char *
config_var_name(size_t i)
{
	return (i < NVARS ? config_vars[i].name : NULL);
}

/* The i-th variable's default as .env.example writes it. */
const char *
config_var_default(size_t i)
{
	if (i >= NVARS)
		return (NULL);
	return (config_vars[i].def == NULL ? "" : config_vars[i].def);
}
