/*
 * hgctl: the ops CLI. It speaks to brokerd's control socket, which only
 * root and the broker's service user may open. Every command is one row of
 * hgctl_cmds below: its synopsis, its help, the options it takes and its
 * function, so that usage, help and parsing cannot disagree.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "brokerd.h"
#include "config_env.h"

#define HGCTL_TIMEOUT_MS	10000
#define HGCTL_AUDIT_TIMEOUT_MS	300000	/* verify reads the whole log */
#define HGCTL_AUDIT_PAGE	500	/* records asked for per request */
#define HGCTL_AUDIT_LIMIT	100	/* audit show's default --limit */

/* Exit codes (also in the help text). */
#define HGCTL_EXIT_OK		0
#define HGCTL_EXIT_FAIL		1	/* an error; status: degraded */
#define HGCTL_EXIT_USAGE	2
#define HGCTL_EXIT_DOWN		3	/* status: brokerd unreachable */

/* The options a command may take. */
#define OPT_JSON	0x01
#define OPT_ADMIN	0x02
#define OPT_PWSTDIN	0x04
#define OPT_FILTERS	0x08	/* audit show's --user ... --limit */
#define OPT_ANCHOR	0x10	/* audit verify's --head, --journal */
#define OPT_UNIX	0x20	/* user add's --unix-user */
#define OPT_TARGET	0x40	/* egress allow's --user or --session */
#define OPT_MORE	0x80	/* nargs or more positional arguments */
#define OPT_TO		0x100	/* store copy's --to */
#define OPT_HASHSTDIN	0x200	/* user add's --password-hash-stdin */
#define OPT_STATEDIR	0x400	/* audit verify's --state-dir */
#define OPT_ARCHIVE	0x800	/* audit archive's --before, --to */

/* How hgctl audit verify --journal asks the journal for anchors. */
#define HGCTL_JOURNALCTL \
	"journalctl -o json --no-pager SYSLOG_IDENTIFIER=hostgate-audit"

struct hgctl_cmd {
	const char	*group;		/* "user"; NULL: a command on its own */
	const char	*name;		/* "add" */
	const char	*args;		/* the synopsis after the name */
	const char	*about;		/* one line */
	const char	*details;	/* more, for CMD --help; or NULL */
	int		 nargs;		/* positional arguments */
	unsigned	 opts;		/* OPT_* */
	int		(*fn)(char **);
};

static int	hgctl_user_add(char **);
static int	hgctl_user_del(char **);
static int	hgctl_user_passwd(char **);
static int	hgctl_user_list(char **);
static int	hgctl_token_create(char **);
static int	hgctl_token_list(char **);
static int	hgctl_token_revoke(char **);
static int	hgctl_session_list(char **);
static int	hgctl_session_revoke(char **);
static int	hgctl_session_revert(char **);
static int	hgctl_audit_verify(char **);
static int	hgctl_audit_show(char **);
static int	hgctl_audit_replay(char **);
static int	hgctl_audit_flush(char **);
static int	hgctl_audit_archive(char **);
static struct json_object *hgctl_verify_dir(const char *, int64_t,
		    const char *);
static int	hgctl_status(char **);
static int	hgctl_config(char **);
static int	hgctl_egress_show(char **);
static int	hgctl_egress_allow(char **);
static int	hgctl_egress_revoke(char **);
static int	hgctl_store_migrate(char **);
static int	hgctl_store_status(char **);
static int	hgctl_store_copy(char **);

static const struct hgctl_cmd hgctl_cmds[] = {
	{ "user", "add", "NAME [--admin] [--password-stdin | "
	    "--password-hash-stdin]\n    [--unix-user UNIXNAME]",
	    "add a user (a plain user, or an admin with --admin)",
	    "Asks for the password twice on the terminal, or reads one line "
	    "of standard\ninput with --password-stdin. With "
	    "--password-hash-stdin, the line is the\npassword's argon2id "
	    "encoded hash ($argon2id$v=19$m=M,t=T,p=P$SALT$HASH),\nstored as "
	    "it is; anything else is refused and nothing changes. The user "
	    "gets\na uid and gid of their own, the lowest free one of "
	    "HOSTGATE_UID_RANGE; with\n--unix-user, those of that existing "
	    "Unix account instead (refused for root, a\ndaemon's user, or an "
	    "account another user is mapped to).\n",
	    1, OPT_ADMIN | OPT_PWSTDIN | OPT_HASHSTDIN | OPT_UNIX,
	    hgctl_user_add },
	{ "user", "del", "NAME", "delete a user; their sessions and tokens end",
	    NULL, 1, 0, hgctl_user_del },
	{ "user", "passwd", "NAME [--password-stdin]",
	    "change a user's password; their sessions and tokens end",
	    "Asks for the password twice on the terminal, or reads one line "
	    "of standard\ninput with --password-stdin.\n",
	    1, OPT_PWSTDIN, hgctl_user_passwd },
	{ "user", "list", "[--json]", "list the users",
	    "Columns: NAME, ROLE (admin or user), UID, GID, UNIX_USER (the "
	    "Unix account\nthe user is mapped to, - when none), CREATED.\n",
	    0, OPT_JSON, hgctl_user_list },
	{ "token", "create", "USER [--json]",
	    "mint a standalone agent token for USER",
	    "Prints the bearer token (hgt_...) once; brokerd keeps only its "
	    "hash. --json\nprints {\"id\", \"token\", \"user\"}.\n",
	    1, OPT_JSON, hgctl_token_create },
	{ "token", "list", "[--json]", "list the agent tokens",
	    "Columns: ID, USER, SESSION (the login session it is bound to, "
	    "- when\nstandalone), CREATED.\n",
	    0, OPT_JSON, hgctl_token_list },
	{ "token", "revoke", "ID", "revoke an agent token by its id", NULL,
	    1, 0, hgctl_token_revoke },
	{ "session", "list", "[--json]", "list the login sessions",
	    "Columns: ID, USER, MODE (sandbox or direct), DIRECT_UNTIL and "
	    "DIRECT_LEFT\n(the end of a direct-mode grant and the time left), "
	    "CREATED, LAST_SEEN,\nEXPIRES (the end of the session).\n",
	    0, OPT_JSON, hgctl_session_list },
	{ "session", "revoke", "ID",
	    "end a login session (its direct-mode grant too)", NULL,
	    1, 0, hgctl_session_revoke },
	{ "session", "revert", "ID",
	    "end a session's direct-mode grant now; the session stays", NULL,
	    1, 0, hgctl_session_revert },
	{ "audit", "verify", "[--head SEQ:HASH | --journal] [--state-dir DIR] "
	    "[--json]",
	    "check the audit log's hash chain",
	    "Exits 0 when the chain is whole, 1 at the first bad record.\n"
	    "--head SEQ:HASH also checks it against an anchor kept off the "
	    "file (from\n`hgctl status`, syslog or a collector): record SEQ "
	    "must have chain hash\nHASH, and the log must reach SEQ, which "
	    "finds records cut from the end\neven after a restart. --journal "
	    "takes the newest anchor brokerd sent to\nthe journal (" HGCTL_JOURNALCTL ").\n"
	    "Files archived by `hgctl audit archive` are not missing: the "
	    "check starts\nat the oldest record left, which the "
	    "audit_archived record must vouch for.\n--state-dir DIR checks "
	    "a copy or backup (DIR holding audit.key and\naudit.log*) in "
	    "hgctl itself, without brokerd, and writes nothing there; it\n"
	    "cannot tell records cut from the end without an anchor.\n"
	    "--json prints {\"ok\", \"records\", \"first_seq\", "
	    "\"last_seq\", \"anchor_seq\",\n\"bad_seq\", \"error\"}.\n",
	    0, OPT_JSON | OPT_ANCHOR | OPT_STATEDIR, hgctl_audit_verify },
	{ "audit", "archive", "--before TIME [--to DIR] [--json]",
	    "move old rotated audit files out of the state directory",
	    "brokerd moves the rotated files (audit.log.NNNNNN) whose records "
	    "are all\nolder than TIME (ISO 8601, e.g. 2026-11-01 or "
	    "2026-11-01T00:00:00Z), oldest\nfirst, never audit.log, into DIR "
	    "(an absolute path on the state directory's\nfile system, "
	    "writable by brokerd; default STATE_DIR/audit-archive, made\n"
	    "0700), after writing an audit_archived record that names them. "
	    "`hgctl\naudit verify` then accepts them as archived. Copy DIR "
	    "and audit.key off the\nhost, check the copy with `hgctl audit "
	    "verify --state-dir`, then remove DIR's\nfiles. Refused when the "
	    "chain is broken, and with a PostgreSQL store.\n--json prints "
	    "{\"anchor_seq\", \"to\", \"files\", \"first_seq\", "
	    "\"last_seq\", \"last_hash\"}.\n",
	    0, OPT_JSON | OPT_ARCHIVE, hgctl_audit_archive },
	{ "audit", "show", "[--user USER] [--type|--action ACTION] "
	    "[--session ID]\n        [--decision allowed|refused] "
	    "[--request-id RID] [--since TIME]\n        [--until TIME] "
	    "[--limit N] [--json]",
	    "show audit records, oldest first",
	    "The newest --limit matching records (default 100, 0: all); "
	    "brokerd filters\nthem. TIME is ISO 8601, e.g. 2026-11-29T17:20:13Z "
	    "or 2026-11-29; --since and\n--until both include their second. "
	    "--session takes the whole public id,\n--request-id an "
	    "X-Request-Id (detail.request_id). Columns: TIME, SEQ,\nACTION, "
	    "USER, RESULT (allowed or denied), REASON, DETAIL (compact JSON).\n"
	    "--json prints one record a line (JSON Lines), as in the file.\n",
	    0, OPT_JSON | OPT_FILTERS, hgctl_audit_show },
	{ "audit", "replay", "ID",
	    "write a terminal recording (asciicast v2) to stdout",
	    "ID is the recording's id (16 hex digits: the terminal's id, in "
	    "the detail of\nits \"recording\" audit record). Play it with "
	    "`hgctl audit replay ID | asciinema play -`.\n",
	    1, 0, hgctl_audit_replay },
	{ "audit", "flush", "[--json]",
	    "write the counted refused requests now",
	    "Refused requests repeated within "
	    "HOSTGATE_AUDIT_REFUSAL_INTERVAL_SECONDS are counted\nand written as "
	    "one record when the interval ends; this writes them now.\n"
	    "--json prints {\"records\": N}, the records written.\n",
	    0, OPT_JSON, hgctl_audit_flush },
	{ "egress", "show", "[--json]",
	    "show the egress allowlist and the admin's additions",
	    "The domains the allowlist profiles (workspace-write+allowlist, "
	    "read-only+allowlist)\nmay reach through the egress proxy: "
	    "HOSTGATE_EGRESS_ALLOW, the denylist that wins\nover it, the "
	    "allowed ports and denied networks, then a table of the "
	    "additions\nper user and per login session (SCOPE, TARGET, "
	    "ALLOW). --json prints\n{\"allow\", \"deny\", \"ports\", "
	    "\"deny_nets\", \"allow_nets\", \"users\": {NAME: [..]},\n"
	    "\"sessions\": {ID: [..]}}.\n",
	    0, OPT_JSON, hgctl_egress_show },
	{ "egress", "allow", "--user NAME|--session ID PATTERN...",
	    "let a user's or a login session's sandboxes reach more domains",
	    "Adds each PATTERN, a name (example.com) or *. and a suffix "
	    "(*.example.com, its\nsub-domains only), to the additions of the "
	    "user or of the session (its whole\npublic id, from hgctl session "
	    "list). The live sandboxes of that user or session\ntake the new "
	    "list at once. A pattern that is not valid changes nothing.\n"
	    "Audited as egress_allow. The additions end with the user or the "
	    "session.\n",
	    1, OPT_TARGET | OPT_MORE, hgctl_egress_allow },
	{ "egress", "revoke", "--user NAME|--session ID PATTERN...",
	    "take domains back from a user's or a login session's additions",
	    "Removes each PATTERN from the additions of the user or of the "
	    "session; one\nthat is not among them is an error, and nothing "
	    "changes. Connections already\nopen stay; new ones are refused. "
	    "Audited as egress_allow.\n",
	    1, OPT_TARGET | OPT_MORE, hgctl_egress_revoke },
	{ "store", "migrate", "",
	    "create or upgrade the PostgreSQL store's schema",
	    "Connects to HOSTGATE_STORE and brings its schema to the version "
	    "this hostgate\nneeds, in one transaction, under a lock that makes "
	    "hosts migrating at once\ntake turns. brokerd never migrates a "
	    "PostgreSQL store itself: it refuses to\nstart on an older schema "
	    "and says to run this. With the embedded store\n(HOSTGATE_STORE "
	    "empty) there is nothing to do: brokerd migrates store.db.\n",
	    0, 0, hgctl_store_migrate },
	{ "store", "status", "[--json]",
	    "show which store this host uses and what it holds",
	    "Shows the kind of store (embedded: STATE_DIR's store.db and\n"
	    "audit.log; postgresql: HOSTGATE_STORE), where it "
	    "is (the password masked),\nits schema version and how many users, "
	    "sessions and tokens (and, in\nPostgreSQL, audit records and hosts) "
	    "it holds. While brokerd holds store.db\nits schema version is not "
	    "shown and the counts are brokerd's. A running\nbrokerd is asked "
	    "which store it uses; with none running and no store in\n"
	    "STATE_DIR, \"no store at PATH\" and exit 1. --json prints\n"
	    "{\"kind\", "
	    "\"where\", \"schema\", \"counts\": {\"users\", \"sessions\", "
	    "\"tokens\", ...}}.\n",
	    0, OPT_JSON, hgctl_store_status },
	{ "store", "copy", "--to URL",
	    "copy this host's embedded store into an empty PostgreSQL store",
	    "Copies STATE_DIR's store.db (users, sessions, tokens; the "
	    "users.json of an\nearlier release never started on) and the "
	    "audit chain "
	    "(audit.log and its\nrotated files, every line verbatim, so the "
	    "chain goes on there) into the\nPostgreSQL store at URL, which "
	    "must be migrated (hgctl store migrate) and\nempty; all in one "
	    "transaction, or nothing.\nRefused while brokerd runs on "
	    "STATE_DIR.\nThen set HOSTGATE_STORE=URL and start the host: its "
	    "users, sessions and\ntokens are there.\n",
	    0, OPT_TO, hgctl_store_copy },
	{ NULL, "status", "[--json]",
	    "show whether hostgate runs: daemons, backend, direct sessions",
	    "Shows each daemon (brokerd, sandboxd, frontd) with its version, "
	    "start and\nuptime; the sandbox backend as sandboxd probes it now "
	    "(name, ok, reason);\nthe sessions in direct mode with the time "
	    "they have left; the containment:\nwhich mechanism enforces each "
	    "of uid, membership, kill, memory, pids,\ncpu, io and disk_quota, "
	    "and NOT ENFORCED with the reason for what is not;\nthe head of "
	    "the audit chain (sequence number and hash). --json adds\n"
	    "\"containment\" and the configured \"limits\".\n"
	    "Exits 0 when everything runs and the backend works (running), 1 "
	    "when\nsomething is down or the backend fails (degraded, with the "
	    "reasons), 3 when\nbrokerd cannot be reached.\n",
	    0, OPT_JSON, hgctl_status },
	{ NULL, "config", "[--json]",
	    "show the effective configuration, secrets masked",
	    "One NAME=value line per variable, as the running brokerd uses "
	    "it; when\nbrokerd cannot be reached, hgctl's own, and it says "
	    "so. The output is a\nvalid .env file: the first line, a comment, "
	    "says whose configuration it is.\n--json prints {\"source\": "
	    "\"brokerd\" | \"hgctl\", \"error\", \"pid\", \"env_file\",\n"
	    "\"config\": {NAME: value}}.\n",
	    0, OPT_JSON, hgctl_config },
	{ NULL, NULL, NULL, NULL, NULL, 0, 0, NULL }
};

static const char *const hgctl_groups[] = {
	"user", "token", "session", "audit", "egress", "store", NULL
};

static struct config	 conf;
static int		 conf_loaded;
static int		 json_out;
static int		 admin_flag;
static int		 pwstdin_flag;
static int		 hashstdin_flag;	/* --password-hash-stdin */
static const char	*unix_user;
static const char	*target_user;	/* egress allow --user */
static const char	*target_session; /* egress allow --session */
static const char	*store_to;	/* store copy --to */
static int		 hgctl_timeout = HGCTL_TIMEOUT_MS;

/* The value options of audit show. */
static struct {
	const char	*user;
	const char	*action;
	const char	*since;
	const char	*until;
	const char	*limit;
	const char	*session;
	const char	*decision;
	const char	*request_id;
	const char	*head;
	int		 journal;
	const char	*state_dir;	/* verify --state-dir */
	const char	*before;	/* archive --before */
	const char	*to;		/* archive --to */
} show;

/* Print the synopsis of one command. */
static void
hgctl_synopsis(FILE *f, const char *lead, const struct hgctl_cmd *c)
{
	fprintf(f, "%shgctl %s%s%s%s%s\n", lead, c->group ? c->group : "",
	    c->group ? " " : "", c->name, *c->args ? " " : "", c->args);
}

/* The compiled-in default of a variable ("" when none). */
static const char *
hgctl_default(const char *name)
{
	size_t	i;

	for (i = 0; i < config_var_count(); i++)
		if (strcmp(config_var_name(i), name) == 0)
			return config_var_default(i);
	return "";
}

/* hgctl --help: every command, the options, exit codes, environment. */
static void
hgctl_help_all(FILE *f)
{
	const struct hgctl_cmd	*c;

	fprintf(f, "usage: hgctl COMMAND [ARGUMENTS] [OPTIONS]\n"
	    "       hgctl help [COMMAND [SUBCOMMAND]]\n"
	    "       hgctl --version\n\n"
	    "The ops CLI of hostgate. It talks to brokerd over its control "
	    "socket,\nHOSTGATE_RUN_DIR/" SOCK_BROKER_CONTROL ", which only "
	    "root and the broker's user\nmay open.\n\nCommands:\n");
	for (c = hgctl_cmds; c->name != NULL; c++) {
		hgctl_synopsis(f, "  ", c);
		fprintf(f, "      %s\n", c->about);
	}
	fprintf(f, "\nOptions:\n"
	    "  --json       machine-readable output (every list, show, status "
	    "and config)\n"
	    "  --help, -h   help on the command it follows, on standard "
	    "output\n"
	    "  --version    print hgctl's version\n\n"
	    "Exit status: 0 done; 1 an error (the message is on standard "
	    "error);\n2 a usage error; status: 1 degraded, 3 brokerd "
	    "unreachable; audit verify:\n1 when the chain is broken.\n\n"
	    "Environment: the variables of docs/configuration.md, from the "
	    "environment or\nthe file HOSTGATE_ENV_FILE (when unset: %s,\nif "
	    "it exists).\nbrokerd's socket is in HOSTGATE_RUN_DIR (default "
	    "%s).\n", hgctl_default("HOSTGATE_ENV_FILE"),
	    hgctl_default("HOSTGATE_RUN_DIR"));
}

/* hgctl help user: the subcommands of a group, with what each does. */
static void
hgctl_help_group(FILE *f, const char *group, int verbose)
{
	const struct hgctl_cmd	*c;

	fprintf(f, "usage:\n");
	for (c = hgctl_cmds; c->name != NULL; c++) {
		if (c->group == NULL || strcmp(c->group, group) != 0)
			continue;
		hgctl_synopsis(f, "  ", c);
		if (verbose)
			fprintf(f, "      %s\n", c->about);
	}
}

/* hgctl user add --help: one command. */
static void
hgctl_help_cmd(FILE *f, const struct hgctl_cmd *c)
{
	hgctl_synopsis(f, "usage: ", c);
	fprintf(f, "\n%s.\n", c->about);
	if (c->details != NULL)
		fprintf(f, "\n%s", c->details);
}

/* The hint after a usage error: the most precise help there is. */
static void
hgctl_hint(const char *group, const struct hgctl_cmd *c)
{
	if (c != NULL)
		fprintf(stderr, "see hgctl help %s%s%s\n", c->group ?
		    c->group : "", c->group ? " " : "", c->name);
	else if (group != NULL)
		fprintf(stderr, "see hgctl help %s\n", group);
	else
		fprintf(stderr, "see hgctl help\n");
}

/* A usage error: the reason, the synopsis, a hint; exit 2. */
__dead static void
hgctl_usage(const char *group, const struct hgctl_cmd *c, const char *fmt,
    ...)
{
	va_list	ap;

	fprintf(stderr, "hgctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	if (c != NULL)
		hgctl_synopsis(stderr, "usage: ", c);
	else if (group != NULL)
		hgctl_help_group(stderr, group, 0);
	else
		fprintf(stderr, "usage: hgctl COMMAND [ARGUMENTS] [OPTIONS]\n");
	hgctl_hint(group, c);
	exit(HGCTL_EXIT_USAGE);
}

/* Whether name is a group of subcommands. */
static int
hgctl_is_group(const char *name)
{
	const char *const	*g;

	for (g = hgctl_groups; *g != NULL; g++)
		if (strcmp(*g, name) == 0)
			return 1;
	return 0;
}

/* The command group/name (group NULL for one on its own), or NULL. */
static const struct hgctl_cmd *
hgctl_find(const char *group, const char *name)
{
	const struct hgctl_cmd	*c;

	for (c = hgctl_cmds; c->name != NULL; c++)
		if (((group == NULL && c->group == NULL) ||
		    (group != NULL && c->group != NULL &&
		    strcmp(c->group, group) == 0)) && strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

/* Whether arg asks for help. */
static int
hgctl_is_help(const char *arg)
{
	return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

/* hgctl help [COMMAND [SUBCOMMAND]]: on stdout, exit 0. */
__dead static void
hgctl_help(int argc, char **argv)
{
	const struct hgctl_cmd	*c;

	if (argc == 0)
		hgctl_help_all(stdout);
	else if (hgctl_is_group(argv[0]) && argc == 1)
		hgctl_help_group(stdout, argv[0], 1);
	else if (hgctl_is_group(argv[0]) && argc == 2 &&
	    (c = hgctl_find(argv[0], argv[1])) != NULL)
		hgctl_help_cmd(stdout, c);
	else if (!hgctl_is_group(argv[0]) && argc == 1 &&
	    (c = hgctl_find(NULL, argv[0])) != NULL)
		hgctl_help_cmd(stdout, c);
	else if (strcmp(argv[0], "help") == 0 && argc == 1) {
		printf("usage: hgctl help [COMMAND [SUBCOMMAND]]\n\n"
		    "Help on every command, a group or one command, on "
		    "standard output.\n");
	} else
		hgctl_usage(NULL, NULL, "no help for \"%s%s%s\"", argv[0],
		    argc > 1 ? " " : "", argc > 1 ? argv[1] : "");
	exit(HGCTL_EXIT_OK);
}

/* Where a value option of audit show goes, or NULL. */
static const char **
hgctl_show_option(const char *arg)
{
	if (strcmp(arg, "--user") == 0)
		return &show.user;
	if (strcmp(arg, "--action") == 0 || strcmp(arg, "--type") == 0)
		return &show.action;
	if (strcmp(arg, "--session") == 0)
		return &show.session;
	if (strcmp(arg, "--decision") == 0)
		return &show.decision;
	if (strcmp(arg, "--request-id") == 0)
		return &show.request_id;
	if (strcmp(arg, "--since") == 0)
		return &show.since;
	if (strcmp(arg, "--until") == 0)
		return &show.until;
	if (strcmp(arg, "--limit") == 0)
		return &show.limit;
	return NULL;
}

/*
 * Parse the arguments after a command's name against what it takes; the
 * positional ones stay in argv, in order. Returns their number.
 */
static int
hgctl_parse(const struct hgctl_cmd *c, int argc, char **argv)
{
	const char	**vp;
	int		  i, n = 0;

	for (i = 0; i < argc; i++)
		if (hgctl_is_help(argv[i])) {
			hgctl_help_cmd(stdout, c);
			exit(HGCTL_EXIT_OK);
		}
	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0 && (c->opts & OPT_JSON))
			json_out = 1;
		else if (strcmp(argv[i], "--admin") == 0 &&
		    (c->opts & OPT_ADMIN))
			admin_flag = 1;
		else if (strcmp(argv[i], "--password-stdin") == 0 &&
		    (c->opts & OPT_PWSTDIN))
			pwstdin_flag = 1;
		else if (strcmp(argv[i], "--password-hash-stdin") == 0 &&
		    (c->opts & OPT_HASHSTDIN))
			hashstdin_flag = 1;
		else if (strcmp(argv[i], "--unix-user") == 0 &&
		    (c->opts & OPT_UNIX)) {
			if (i + 1 == argc)
				hgctl_usage(c->group, c,
				    "--unix-user needs a value");
			unix_user = argv[++i];
		} else if ((strcmp(argv[i], "--user") == 0 ||
		    strcmp(argv[i], "--session") == 0) &&
		    (c->opts & OPT_TARGET)) {
			if (i + 1 == argc)
				hgctl_usage(c->group, c, "%s needs a value",
				    argv[i]);
			if (target_user != NULL || target_session != NULL)
				hgctl_usage(c->group, c, "give one of --user "
				    "and --session, once");
			if (argv[i][2] == 'u')
				target_user = argv[++i];
			else
				target_session = argv[++i];
		} else if (strcmp(argv[i], "--to") == 0 &&
		    (c->opts & OPT_TO)) {
			if (i + 1 == argc)
				hgctl_usage(c->group, c, "--to needs a value");
			store_to = argv[++i];
		} else if (strcmp(argv[i], "--journal") == 0 &&
		    (c->opts & OPT_ANCHOR))
			show.journal = 1;
		else if (strcmp(argv[i], "--state-dir") == 0 &&
		    (c->opts & OPT_STATEDIR)) {
			if (i + 1 == argc)
				hgctl_usage(c->group, c,
				    "--state-dir needs a value");
			show.state_dir = argv[++i];
		} else if ((strcmp(argv[i], "--before") == 0 ||
		    strcmp(argv[i], "--to") == 0) && (c->opts & OPT_ARCHIVE)) {
			if (i + 1 == argc)
				hgctl_usage(c->group, c, "%s needs a value",
				    argv[i]);
			if (argv[i][2] == 'b')
				show.before = argv[++i];
			else
				show.to = argv[++i];
		} else if (strcmp(argv[i], "--head") == 0 &&
		    (c->opts & OPT_ANCHOR)) {
			if (i + 1 == argc)
				hgctl_usage(c->group, c, "--head needs a value");
			show.head = argv[++i];
		}
		else if ((vp = hgctl_show_option(argv[i])) != NULL &&
		    (c->opts & OPT_FILTERS)) {
			if (i + 1 == argc)
				hgctl_usage(c->group, c, "%s needs a value",
				    argv[i]);
			*vp = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1] != '\0')
			hgctl_usage(c->group, c, "%s%s%s takes no option %s",
			    c->group ? c->group : "", c->group ? " " : "",
			    c->name, argv[i]);
		else
			argv[n++] = argv[i];
	}
	if (pwstdin_flag && hashstdin_flag)
		hgctl_usage(c->group, c, "give one of --password-stdin and "
		    "--password-hash-stdin");
	if ((c->opts & OPT_ARCHIVE) && show.before == NULL)
		hgctl_usage(c->group, c, "give --before TIME");
	if ((c->opts & OPT_TO) && store_to == NULL)
		hgctl_usage(c->group, c, "give --to URL");
	if ((c->opts & OPT_TARGET) && target_user == NULL &&
	    target_session == NULL)
		hgctl_usage(c->group, c, "give --user NAME or --session ID");
	if (n < c->nargs)
		hgctl_usage(c->group, c, "missing argument");
	if (n > c->nargs && (c->opts & OPT_MORE) == 0)
		hgctl_usage(c->group, c, "unexpected argument \"%s\"",
		    argv[c->nargs]);
	argv[n] = NULL;		/* the end of a variable list */
	return n;
}

/* Read one line of at most size-1 bytes; strips the newline. */
static int
hgctl_readline(FILE *f, char *buf, size_t size)
{
	size_t	len;

	if (fgets(buf, size, f) == NULL)
		return -1;
	len = strlen(buf);
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	else if (!feof(f)) {
		fprintf(stderr, "hgctl: password too long\n");
		exit(1);
	}
	if (len > 0 && buf[len - 1] == '\r')
		buf[--len] = '\0';
	return 0;
}

/* Prompt on the terminal with echo off. */
static int
hgctl_prompt(const char *prompt, char *buf, size_t size)
{
	struct termios	old, noecho;
	FILE		*tty;
	int		 rc;

	if ((tty = fopen("/dev/tty", "r+")) == NULL)
		return -1;
	fputs(prompt, tty);
	fflush(tty);
	tcgetattr(fileno(tty), &old);
	noecho = old;
	noecho.c_lflag &= ~ECHO;
	tcsetattr(fileno(tty), TCSAFLUSH, &noecho);
	rc = hgctl_readline(tty, buf, size);
	tcsetattr(fileno(tty), TCSAFLUSH, &old);
	fputs("\n", tty);
	fclose(tty);
	return rc;
}

/* The new password: from stdin, or asked twice on the terminal. */
static void
hgctl_password(int from_stdin, char *buf, size_t size)
{
	char	again[1100];

	if (from_stdin) {
		if (hgctl_readline(stdin, buf, size) == -1) {
			fprintf(stderr, "hgctl: no password on stdin\n");
			exit(1);
		}
		return;
	}
	if (!isatty(STDIN_FILENO) ||
	    hgctl_prompt("Password: ", buf, size) == -1 ||
	    hgctl_prompt("Again: ", again, sizeof(again)) == -1) {
		fprintf(stderr, "hgctl: no terminal to ask for the password; "
		    "use --password-stdin\n");
		exit(1);
	}
	if (strcmp(buf, again) != 0) {
		fprintf(stderr, "hgctl: passwords do not match\n");
		exit(1);
	}
	explicit_bzero(again, sizeof(again));
}

/* Load hgctl's configuration once, or exit 1 with the reason. */
static void
hgctl_conf(void)
{
	char	err[1024];

	if (conf_loaded)
		return;
	if (config_load(&conf, err, sizeof(err)) == -1) {
		fprintf(stderr, "hgctl: %s\n", err);
		exit(HGCTL_EXIT_FAIL);
	}
	conf_loaded = 1;
}

/*
 * Send req to brokerd: 0 and its result in *res, or -1 with the reason in
 * err. A socket that cannot be reached is named with where its directory
 * came from.
 */
static int
hgctl_try(struct json_object *req, struct json_object **res, char *err,
    size_t errsz)
{
	struct json_object	*reply, *e;
	const char		*from;
	char			 why[512], *path, buf[PATH_MAX + 64];
	char			 origin[PATH_MAX + 128];
	int			 saved;

	hgctl_conf();
	*res = NULL;
	path = path_join(conf.run_dir, SOCK_BROKER_CONTROL);
	errno = 0;
	if (ipc_call(path, ROLE_HGCTL, ROLE_BROKERD, req, &reply,
	    hgctl_timeout, why, sizeof(why)) == -1) {
		saved = errno;
		from = config_origin(&conf, "HOSTGATE_RUN_DIR", buf,
		    sizeof(buf));
		if (strcmp(from, "the default") == 0)
			snprintf(origin, sizeof(origin), "the default "
			    "HOSTGATE_RUN_DIR; set HOSTGATE_RUN_DIR or "
			    "HOSTGATE_ENV_FILE to change it");
		else
			snprintf(origin, sizeof(origin), "HOSTGATE_RUN_DIR "
			    "from %s", from);
		snprintf(err, errsz, "%s (%s)%s", why, origin,
		    saved == ENOENT || saved == ECONNREFUSED ?
		    "; is brokerd running?" : saved == EACCES ?
		    "; only root and the broker's user may use it" : "");
		free(path);
		return -1;
	}
	free(path);
	if (json_object_object_get_ex(reply, "error", &e)) {
		snprintf(err, errsz, "%s", json_str(e, "message") ?
		    json_str(e, "message") : "error");
		json_object_put(reply);
		return -1;
	}
	if (!json_object_object_get_ex(reply, "result", res)) {
		snprintf(err, errsz, "malformed reply from brokerd");
		json_object_put(reply);
		return -1;
	}
	json_object_get(*res);
	json_object_put(reply);
	return 0;
}

/* Send req to brokerd; exit 1 with the reason on error. */
static struct json_object *
hgctl_call(struct json_object *req)
{
	struct json_object	*res;
	char			 err[PATH_MAX + 1024];

	if (hgctl_try(req, &res, err, sizeof(err)) == -1) {
		fprintf(stderr, "hgctl: %s\n", err);
		exit(HGCTL_EXIT_FAIL);
	}
	return res;
}

/* A request object of a type. */
static struct json_object *
hgctl_req(const char *type)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(type));
	return o;
}

/* Print JSON for --json. */
static void
hgctl_print_json(struct json_object *o)
{
	printf("%s\n", json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* A duration as 3d04h05m, 1h02m03s, 5m03s or 42s. */
static void
hgctl_duration(int64_t secs, char *buf, size_t bufsz)
{
	if (secs < 0)
		secs = 0;
	if (secs >= 86400)
		snprintf(buf, bufsz, "%lldd%02lldh%02lldm",
		    (long long)(secs / 86400), (long long)(secs % 86400 / 3600),
		    (long long)(secs % 3600 / 60));
	else if (secs >= 3600)
		snprintf(buf, bufsz, "%lldh%02lldm%02llds",
		    (long long)(secs / 3600), (long long)(secs % 3600 / 60),
		    (long long)(secs % 60));
	else if (secs >= 60)
		snprintf(buf, bufsz, "%lldm%02llds", (long long)(secs / 60),
		    (long long)(secs % 60));
	else
		snprintf(buf, bufsz, "%llds", (long long)secs);
}

/* How a table column shows its member. */
enum col_kind { COL_STR, COL_INT, COL_BOOL, COL_DURATION, COL_ALLOWED,
	COL_JSON };

struct hgctl_col {
	const char	*header;
	const char	*key;
	enum col_kind	 kind;
};

/*
 * JSON text as a cell: as it is, since json-c already escaped every
 * control character in its strings, but for any byte outside printable
 * ASCII (\xHH: no terminal sequence gets through); cut with "..." when it
 * does not fit.
 */
static void
hgctl_json_cell(const char *s, char *buf, size_t bufsz)
{
	static const char	 hex[] = "0123456789abcdef";
	const unsigned char	*p;
	size_t			 total = 0, room, pos = 0;

	for (p = (const unsigned char *)s; *p != '\0'; p++)
		total += *p >= 0x20 && *p < 0x7f ? 1 : 4;
	room = total < bufsz ? bufsz - 1 : bufsz - 4;	/* "...": bufsz > 4 */
	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p >= 0x20 && *p < 0x7f) {
			if (pos + 1 > room)
				break;
			buf[pos++] = *p;
			continue;
		}
		if (pos + 4 > room)
			break;
		buf[pos++] = '\\';
		buf[pos++] = 'x';
		buf[pos++] = hex[*p >> 4];
		buf[pos++] = hex[*p & 0xf];
	}
	if (*p != '\0') {
		memcpy(buf + pos, "...", 3);
		pos += 3;
	}
	buf[pos] = '\0';
}

/* One cell's text: escaped, "-" when missing or null. */
static void
hgctl_cell(struct json_object *row, const struct hgctl_col *col, char *buf,
    size_t bufsz)
{
	struct json_object	*v;
	int64_t			 n;
	int			 b;

	if (!json_object_object_get_ex(row, col->key, &v) || v == NULL) {
		snprintf(buf, bufsz, "-");
		return;
	}
	switch (col->kind) {
	case COL_INT:
		if (json_int(row, col->key, &n) == 0)
			snprintf(buf, bufsz, "%lld", (long long)n);
		else
			snprintf(buf, bufsz, "-");
		break;
	case COL_DURATION:
		if (json_int(row, col->key, &n) == 0)
			hgctl_duration(n, buf, bufsz);
		else
			snprintf(buf, bufsz, "-");
		break;
	case COL_BOOL:
	case COL_ALLOWED:
		if (json_flag(row, col->key, &b) == -1)
			snprintf(buf, bufsz, "-");
		else if (col->kind == COL_BOOL)
			snprintf(buf, bufsz, "%s", b ? "yes" : "no");
		else
			snprintf(buf, bufsz, "%s", b ? "allowed" : "denied");
		break;
	case COL_JSON:
		/* Compact JSON, "-" for an empty object. */
		if (json_object_is_type(v, json_type_object) &&
		    json_object_object_length(v) == 0)
			snprintf(buf, bufsz, "-");
		else
			hgctl_json_cell(json_object_to_json_string_ext(v,
			    JSON_C_TO_STRING_PLAIN |
			    JSON_C_TO_STRING_NOSLASHESCAPE), buf, bufsz);
		break;
	default:
		log_escape(json_object_get_string(v), (size_t)-1, buf, bufsz);
		if (*buf == '\0')
			snprintf(buf, bufsz, "-");
		break;
	}
}

#define HGCTL_CELL_MAX	LOG_ESCAPE_MAX

/*
 * Print an array of objects as a table: a header row, then one row per
 * item, tab-separated (cells are escaped, so none holds a tab), "-" for a
 * missing value. No items, no table: an empty list prints nothing, so
 * that scripts can still test for "no users" with an empty output.
 */
static size_t
hgctl_table(struct json_object *items, const struct hgctl_col *cols)
{
	struct json_object	*row;
	size_t			 n, i, k;
	char			 cell[HGCTL_CELL_MAX];

	n = items != NULL && json_object_is_type(items, json_type_array) ?
	    json_object_array_length(items) : 0;
	if (n == 0)
		return 0;
	for (k = 0; cols[k].header != NULL; k++)
		printf("%s%s", k ? "\t" : "", cols[k].header);
	printf("\n");
	for (i = 0; i < n; i++) {
		row = json_object_array_get_idx(items, i);
		for (k = 0; cols[k].header != NULL; k++) {
			hgctl_cell(row, &cols[k], cell, sizeof(cell));
			printf("%s%s", k ? "\t" : "", cell);
		}
		printf("\n");
	}
	return n;
}

/* Ask for a list and print its "items": JSON, or a table. */
static int
hgctl_list(const char *type, const struct hgctl_col *cols)
{
	struct json_object	*res, *items = NULL;

	res = hgctl_call(hgctl_req(type));
	json_object_object_get_ex(res, "items", &items);
	if (json_out && items == NULL)
		printf("[]\n");
	else if (json_out)
		hgctl_print_json(items);
	else
		hgctl_table(items, cols);
	json_object_put(res);
	return HGCTL_EXIT_OK;
}

#define HGCTL_LIST_PAGE	1000	/* items asked for per page */

/*
 * Ask for a paged list (token_list, session_list) page after page, each
 * after the last id of the one before: all their "items", or NULL (said)
 * when a cursor does not move on (an error, not a loop).
 */
static struct json_object *
hgctl_collect_pages(const char *type)
{
	struct json_object	*req, *res, *items, *all;
	const char		*next;
	char			 after[65] = "";
	size_t			 i;

	all = json_object_new_array();
	for (;;) {
		req = hgctl_req(type);
		json_object_object_add(req, "limit",
		    json_object_new_int(HGCTL_LIST_PAGE));
		if (after[0] != '\0')
			json_object_object_add(req, "after",
			    json_object_new_string(after));
		res = hgctl_call(req);
		if (json_object_object_get_ex(res, "items", &items) &&
		    json_object_is_type(items, json_type_array)) {
			for (i = 0; i < json_object_array_length(items); i++)
				json_object_array_add(all, json_object_get(
				    json_object_array_get_idx(items, i)));
		}
		if ((next = json_str(res, "next")) == NULL) {
			json_object_put(res);
			break;
		}
		if (strlen(next) >= sizeof(after) ||
		    strcmp(next, after) <= 0) {
			fprintf(stderr, "hgctl: %s: brokerd's next page does "
			    "not follow the last\n", type);
			json_object_put(res);
			json_object_put(all);
			return NULL;
		}
		snprintf(after, sizeof(after), "%s", next);
		json_object_put(res);
	}
	return all;
}

/* Print a paged list's items as hgctl_list prints one list. */
static int
hgctl_list_pages(const char *type, const struct hgctl_col *cols)
{
	struct json_object	*all;

	if ((all = hgctl_collect_pages(type)) == NULL)
		return HGCTL_EXIT_FAIL;
	if (json_out)
		hgctl_print_json(all);
	else
		hgctl_table(all, cols);
	json_object_put(all);
	return HGCTL_EXIT_OK;
}

/* A request naming one object: {"type": type, key: value}. */
static struct json_object *
hgctl_req_one(const char *type, const char *key, const char *value)
{
	struct json_object	*req;

	req = hgctl_req(type);
	json_object_object_add(req, key, json_object_new_string(value));
	return req;
}

/*
 * hgctl user add NAME [--admin] [--password-stdin | --password-hash-stdin]
 * [--unix-user UNIXNAME]: hgctl resolves the account; brokerd decides
 * whether it may be mapped, and whether a given hash is argon2id.
 */
static int
hgctl_user_add(char **argv)
{
	struct json_object	*req, *res;
	struct passwd		*pw = NULL;
	char			 pass[1100];
	int64_t			 uid = -1;

	hgctl_conf();
	if (unix_user != NULL && (pw = getpwnam(unix_user)) == NULL) {
		fprintf(stderr, "hgctl: no Unix user %s\n", unix_user);
		return HGCTL_EXIT_FAIL;
	}
	if (hashstdin_flag &&
	    hgctl_readline(stdin, pass, sizeof(pass)) == -1) {
		fprintf(stderr, "hgctl: no hash on stdin\n");
		return HGCTL_EXIT_FAIL;
	}
	if (!hashstdin_flag)
		hgctl_password(pwstdin_flag, pass, sizeof(pass));
	req = hgctl_req_one(MSG_USER_ADD, "name", argv[0]);
	json_object_object_add(req, "admin",
	    json_object_new_boolean(admin_flag));
	json_object_object_add(req, hashstdin_flag ? "hash" : "password",
	    json_object_new_string(pass));
	explicit_bzero(pass, sizeof(pass));
	if (pw != NULL) {
		json_object_object_add(req, "unix_user",
		    json_object_new_string(unix_user));
		json_object_object_add(req, "uid",
		    json_object_new_int64(pw->pw_uid));
		json_object_object_add(req, "gid",
		    json_object_new_int64(pw->pw_gid));
	}
	res = hgctl_call(req);
	json_int(res, "uid", &uid);
	if (json_str(res, "home") != NULL)
		printf("user %s added (uid %lld, home host %s)\n", argv[0],
		    (long long)uid, json_str(res, "home"));
	else
		printf("user %s added (uid %lld)\n", argv[0], (long long)uid);
	json_object_put(res);
	return HGCTL_EXIT_OK;
}

/* hgctl user del NAME */
static int
hgctl_user_del(char **argv)
{
	json_object_put(hgctl_call(hgctl_req_one(MSG_USER_DEL, "name",
	    argv[0])));
	printf("user %s deleted\n", argv[0]);
	return HGCTL_EXIT_OK;
}

/* hgctl user passwd NAME [--password-stdin] */
static int
hgctl_user_passwd(char **argv)
{
	struct json_object	*req;
	char			 pw[1100];

	hgctl_conf();
	hgctl_password(pwstdin_flag, pw, sizeof(pw));
	req = hgctl_req_one(MSG_USER_PASSWD, "name", argv[0]);
	json_object_object_add(req, "password", json_object_new_string(pw));
	explicit_bzero(pw, sizeof(pw));
	json_object_put(hgctl_call(req));
	printf("password of %s changed\n", argv[0]);
	return HGCTL_EXIT_OK;
}

/* hgctl user list: in a fleet, with each user's home host. */
static int
hgctl_user_list(char **argv)
{
	static const struct hgctl_col cols[] = {
		{ "NAME", "name", COL_STR },
		{ "ROLE", "role", COL_STR },
		{ "UID", "uid", COL_INT },
		{ "GID", "gid", COL_INT },
		{ "UNIX_USER", "unix_user", COL_STR },
		{ "CREATED", "created", COL_STR },
		{ NULL, NULL, 0 }
	};
	static const struct hgctl_col fleet_cols[] = {
		{ "NAME", "name", COL_STR },
		{ "ROLE", "role", COL_STR },
		{ "HOME", "home", COL_STR },
		{ "UID", "uid", COL_INT },
		{ "GID", "gid", COL_INT },
		{ "UNIX_USER", "unix_user", COL_STR },
		{ "CREATED", "created", COL_STR },
		{ NULL, NULL, 0 }
	};
	struct json_object	*res, *items = NULL;

	if (json_out)
		return hgctl_list(MSG_USER_LIST, cols);
	res = hgctl_call(hgctl_req(MSG_USER_LIST));
	json_object_object_get_ex(res, "items", &items);
	/* brokerd says "home" of every user in a fleet alone. */
	hgctl_table(items, items != NULL && json_object_is_type(items,
	    json_type_array) && json_object_array_length(items) > 0 &&
	    json_object_object_get_ex(json_object_array_get_idx(items, 0),
	    "home", NULL) ? fleet_cols : cols);
	json_object_put(res);
	return HGCTL_EXIT_OK;
}

/* hgctl token create USER: the bearer token alone, for scripts. */
static int
hgctl_token_create(char **argv)
{
	struct json_object	*res;

	res = hgctl_call(hgctl_req_one(MSG_TOKEN_CREATE, "user", argv[0]));
	if (json_out)
		hgctl_print_json(res);
	else
		printf("%s\n", json_str(res, "token"));
	json_object_put(res);
	return HGCTL_EXIT_OK;
}

/* hgctl token list */
static int
hgctl_token_list(char **argv)
{
	static const struct hgctl_col cols[] = {
		{ "ID", "id", COL_STR },
		{ "USER", "user", COL_STR },
		{ "SESSION", "session_id", COL_STR },
		{ "CREATED", "created", COL_STR },
		{ NULL, NULL, 0 }
	};

	return hgctl_list_pages(MSG_TOKEN_LIST, cols);
}

/* hgctl token revoke ID */
static int
hgctl_token_revoke(char **argv)
{
	json_object_put(hgctl_call(hgctl_req_one(MSG_TOKEN_REVOKE, "token",
	    argv[0])));
	printf("token %s revoked\n", argv[0]);
	return HGCTL_EXIT_OK;
}

/* hgctl session list */
static int
hgctl_session_list(char **argv)
{
	static const struct hgctl_col cols[] = {
		{ "ID", "id", COL_STR },
		{ "USER", "user", COL_STR },
		{ "MODE", "mode", COL_STR },
		{ "DIRECT_UNTIL", "expires_at", COL_STR },
		{ "DIRECT_LEFT", "remaining_seconds", COL_DURATION },
		{ "CREATED", "created", COL_STR },
		{ "LAST_SEEN", "last_seen", COL_STR },
		{ "EXPIRES", "expires", COL_STR },
		{ NULL, NULL, 0 }
	};

	return hgctl_list_pages(MSG_SESSION_LIST, cols);
}

/* hgctl session revoke ID */
static int
hgctl_session_revoke(char **argv)
{
	json_object_put(hgctl_call(hgctl_req_one(MSG_SESSION_REVOKE, "session",
	    argv[0])));
	printf("session %s revoked\n", argv[0]);
	return HGCTL_EXIT_OK;
}

/* hgctl session revert ID */
static int
hgctl_session_revert(char **argv)
{
	json_object_put(hgctl_call(hgctl_req_one(MSG_SESSION_REVERT, "session",
	    argv[0])));
	printf("session %s is sandboxed\n", argv[0]);
	return HGCTL_EXIT_OK;
}

/* Parse "SEQ:HASH" into seq and hash[65]; -1 when malformed. */
static int
hgctl_anchor_parse(const char *s, int64_t *seq, char hash[65])
{
	const char	*colon;
	char		*end;
	size_t		 i;

	if ((colon = strchr(s, ':')) == NULL || strlen(colon + 1) != 64)
		return -1;
	errno = 0;
	*seq = strtoll(s, &end, 10);
	if (errno != 0 || end != colon || end == s || *seq < 1)
		return -1;
	for (i = 0; i < 64; i++) {
		hash[i] = colon[1 + i];
		if (strchr("0123456789abcdef", hash[i]) == NULL)
			return -1;
	}
	hash[64] = '\0';
	return 0;
}

/*
 * The newest anchor in the journal (the highest HOSTGATE_AUDIT_SEQ among
 * the entries HGCTL_JOURNALCTL prints, one JSON object a line); exits 1
 * when journalctl fails or holds none.
 */
static void
hgctl_anchor_journal(int64_t *seq, char hash[65])
{
	struct json_object	*o;
	const char		*sv, *hv;
	FILE			*f;
	char			*line = NULL, *end;
	size_t			 cap = 0;
	ssize_t			 len;
	int64_t			 s;
	int			 st, found = 0;

	fflush(stdout);
	if ((f = popen(HGCTL_JOURNALCTL " 2>/dev/null", "r")) == NULL) {
		fprintf(stderr, "hgctl: cannot run journalctl: %s\n",
		    strerror(errno));
		exit(HGCTL_EXIT_FAIL);
	}
	while ((len = getline(&line, &cap, f)) != -1) {
		if ((o = json_tokener_parse(line)) == NULL)
			continue;
		sv = json_str(o, "HOSTGATE_AUDIT_SEQ");
		hv = json_str(o, "HOSTGATE_AUDIT_HASH");
		if (sv != NULL && hv != NULL) {
			errno = 0;
			s = strtoll(sv, &end, 10);
			if (errno == 0 && end != sv && *end == '\0' && s > 0 &&
			    s > *seq && strlen(hv) == 64 &&
			    strspn(hv, "0123456789abcdef") == 64) {
				*seq = s;
				memcpy(hash, hv, 65);
				found = 1;
			}
		}
		json_object_put(o);
	}
	free(line);
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "hgctl: journalctl failed (is the journal "
		    "readable here?); use --head SEQ:HASH\n");
		exit(HGCTL_EXIT_FAIL);
	}
	if (!found) {
		fprintf(stderr, "hgctl: no audit anchor in the journal "
		    "(HOSTGATE_AUDIT_SYSLOG=1 sends them)\n");
		exit(HGCTL_EXIT_FAIL);
	}
}

/* hgctl audit verify: exit 0 when the chain is whole, else 1. */
static int
hgctl_audit_verify(char **argv)
{
	struct json_object	*res, *req;
	const char		*err;
	char			 hash[65];
	int64_t			 n = 0, bad = 0, head = 0, first, last;
	int64_t			 anchor = 0;
	int			 ok = 0;

	if (show.head != NULL && show.journal)
		hgctl_usage("audit", hgctl_find("audit", "verify"),
		    "--head and --journal exclude each other");
	if (show.head != NULL && hgctl_anchor_parse(show.head, &head,
	    hash) == -1)
		hgctl_usage("audit", hgctl_find("audit", "verify"),
		    "--head wants SEQ:HASH, a seq >= 1 and 64 lowercase hex "
		    "digits");
	if (show.journal)
		hgctl_anchor_journal(&head, hash);
	if (show.state_dir != NULL)
		res = hgctl_verify_dir(show.state_dir, head, hash);
	else {
		hgctl_timeout = HGCTL_AUDIT_TIMEOUT_MS;
		req = hgctl_req(MSG_AUDIT_VERIFY);
		if (head > 0) {
			json_object_object_add(req, "head_seq",
			    json_object_new_int64(head));
			json_object_object_add(req, "head_hash",
			    json_object_new_string(hash));
		}
		res = hgctl_call(req);
	}
	json_flag(res, "ok", &ok);
	json_int(res, "records", &n);
	json_int(res, "bad_seq", &bad);
	if (json_int(res, "first_seq", &first) == -1)
		first = 1;
	if (json_int(res, "last_seq", &last) == -1)
		last = n;
	json_int(res, "anchor_seq", &anchor);
	err = json_str(res, "error");
	if (json_out)
		hgctl_print_json(res);
	else if (ok) {
		if (first > 1)
			printf("audit log OK: %lld records, seq %lld to %lld; "
			    "seq 1 to %lld archived (anchor at seq %lld)",
			    (long long)n, (long long)first, (long long)last,
			    (long long)first - 1, (long long)anchor);
		else
			printf("audit log OK: %lld records, last seq %lld",
			    (long long)n, (long long)last);
		if (head > 0)
			printf("; anchor seq %lld matches", (long long)head);
		printf("\n");
	} else
		printf("audit log: first bad record at seq %lld: %s\n",
		    (long long)bad, err != NULL ? err : "unknown error");
	json_object_put(res);
	return ok ? 0 : 1;
}

/*
 * audit verify --state-dir: check the copy in dir here, read-only, with
 * audit.c's own checks; the verdict as brokerd would answer it. Exits 1
 * when dir's log cannot be opened (no key, not a directory).
 */
static struct json_object *
hgctl_verify_dir(const char *dir, int64_t head, const char *hash)
{
	struct audit_verdict	 vd;
	struct json_object	*res;
	struct stat		 st;
	char			 err[1024];
	int			 ok;

	if (stat(dir, &st) == -1 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "hgctl: %s: not a directory\n", dir);
		exit(HGCTL_EXIT_FAIL);
	}
	if (audit_open_dir(dir, err, sizeof(err)) == -1) {
		fprintf(stderr, "hgctl: %s\n", err);
		exit(HGCTL_EXIT_FAIL);
	}
	ok = audit_verify_chain(head, head > 0 ? hash : NULL, &vd, err,
	    sizeof(err)) == 0;
	if (!ok && vd.bad_seq == 0) {
		fprintf(stderr, "hgctl: %s\n", err);
		exit(HGCTL_EXIT_FAIL);
	}
	res = audit_verdict_json(&vd, ok, err);
	audit_close();
	return res;
}

/* hgctl audit archive --before TIME [--to DIR] */
static int
hgctl_audit_archive(char **argv)
{
	struct json_object	*req, *res, *files;
	int64_t			 anchor = 0, first = 0, last = 0;
	size_t			 i, n = 0;

	req = hgctl_req(MSG_AUDIT_ARCHIVE);
	json_object_object_add(req, "before",
	    json_object_new_string(show.before));
	if (show.to != NULL)
		json_object_object_add(req, "to",
		    json_object_new_string(show.to));
	hgctl_timeout = HGCTL_AUDIT_TIMEOUT_MS;
	res = hgctl_call(req);
	if (json_out) {
		hgctl_print_json(res);
		json_object_put(res);
		return 0;
	}
	if (json_object_object_get_ex(res, "files", &files) &&
	    json_object_is_type(files, json_type_array))
		n = json_object_array_length(files);
	if (json_int(res, "anchor_seq", &anchor) == -1 || n == 0) {
		printf("nothing to archive: no rotated file holds only records "
		    "older than %s\n", show.before);
		json_object_put(res);
		return 0;
	}
	json_int(res, "first_seq", &first);
	json_int(res, "last_seq", &last);
	for (i = 0; i < n; i++)
		printf("%s\n", json_object_get_string(
		    json_object_array_get_idx(files, i)));
	printf("archived %zu file%s (seq %lld to %lld) to %s; anchor at seq "
	    "%lld\n", n, n == 1 ? "" : "s", (long long)first,
	    (long long)last, json_str(res, "to"), (long long)anchor);
	json_object_put(res);
	return 0;
}

/* hgctl audit replay ID: a terminal recording, as asciicast v2, to stdout. */
static int
hgctl_audit_replay(char **argv)
{
	struct json_object	*req, *res, *d;
	int64_t			 offset = 0, next;
	int			 eof = 0;
	size_t			 len;

	hgctl_timeout = HGCTL_AUDIT_TIMEOUT_MS;
	while (!eof) {
		req = hgctl_req(MSG_AUDIT_REPLAY);
		json_object_object_add(req, "recording",
		    json_object_new_string(argv[0]));
		json_object_object_add(req, "offset",
		    json_object_new_int64(offset));
		res = hgctl_call(req);
		if (!json_object_object_get_ex(res, "data", &d) ||
		    json_int(res, "next", &next) == -1 || next < offset) {
			fprintf(stderr, "hgctl: malformed reply from brokerd\n");
			exit(HGCTL_EXIT_FAIL);
		}
		json_flag(res, "eof", &eof);
		len = json_object_get_string_len(d);
		if (fwrite(json_object_get_string(d), 1, len, stdout) != len) {
			fprintf(stderr, "hgctl: write: %s\n", strerror(errno));
			exit(HGCTL_EXIT_FAIL);
		}
		offset = next;
		json_object_put(res);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

/* hgctl audit flush */
static int
hgctl_audit_flush(char **argv)
{
	struct json_object	*res;
	int64_t			 n = 0;

	res = hgctl_call(hgctl_req(MSG_AUDIT_FLUSH));
	json_int(res, "records", &n);
	if (json_out)
		hgctl_print_json(res);
	else
		printf("%lld refusal count record%s written\n", (long long)n,
		    n == 1 ? "" : "s");
	json_object_put(res);
	return HGCTL_EXIT_OK;
}

/* One audit_show request for at most want records below seq before. */
static struct json_object *
hgctl_audit_page(int64_t want, int64_t before)
{
	struct json_object	*req;

	req = hgctl_req(MSG_AUDIT_SHOW);
	if (show.user != NULL)
		json_object_object_add(req, "user",
		    json_object_new_string(show.user));
	if (show.action != NULL)
		json_object_object_add(req, "action",
		    json_object_new_string(show.action));
	if (show.since != NULL)
		json_object_object_add(req, "since",
		    json_object_new_string(show.since));
	if (show.until != NULL)
		json_object_object_add(req, "until",
		    json_object_new_string(show.until));
	if (show.session != NULL)
		json_object_object_add(req, "session",
		    json_object_new_string(show.session));
	if (show.decision != NULL)
		json_object_object_add(req, "decision",
		    json_object_new_string(show.decision));
	if (show.request_id != NULL)
		json_object_object_add(req, "record_request_id",
		    json_object_new_string(show.request_id));
	json_object_object_add(req, "limit", json_object_new_int64(want));
	if (before > 0)
		json_object_object_add(req, "before_seq",
		    json_object_new_int64(before));
	return hgctl_call(req);
}

/*
 * hgctl audit show: the newest --limit matching records (0: all), oldest
 * first. A reply holds one page; older pages are asked for below the
 * oldest seq seen so far.
 */
static int
hgctl_audit_show(char **argv)
{
	static const struct hgctl_col cols[] = {
		{ "TIME", "time", COL_STR },
		{ "SEQ", "seq", COL_INT },
		{ "ACTION", "action", COL_STR },
		{ "USER", "user", COL_STR },
		{ "RESULT", "allowed", COL_ALLOWED },
		{ "REASON", "reason", COL_STR },
		{ "DETAIL", "detail", COL_JSON },
		{ NULL, NULL, 0 }
	};
	struct json_object	*pages, *res, *items, *page, *all;
	int64_t			 limit = HGCTL_AUDIT_LIMIT, got = 0, before = 0;
	int64_t			 want, seq;
	size_t			 i, j, n;
	char			*end;
	int			 more;

	if (show.decision != NULL && strcmp(show.decision, "allowed") != 0 &&
	    strcmp(show.decision, "refused") != 0)
		hgctl_usage("audit", hgctl_find("audit", "show"),
		    "--decision wants allowed or refused");
	if (show.limit != NULL) {
		errno = 0;
		limit = strtoll(show.limit, &end, 10);
		if (errno != 0 || end == show.limit || *end != '\0' ||
		    limit < 0) {
			hgctl_usage("audit", hgctl_find("audit", "show"),
			    "--limit wants a number >= 0 (0: all)");
		}
	}
	hgctl_timeout = HGCTL_AUDIT_TIMEOUT_MS;
	pages = json_object_new_array();
	for (;;) {
		want = HGCTL_AUDIT_PAGE;
		if (limit > 0 && limit - got < want)
			want = limit - got;
		res = hgctl_audit_page(want, before);
		more = 0;
		json_flag(res, "more", &more);
		if (!json_object_object_get_ex(res, "items", &items) ||
		    (n = json_object_array_length(items)) == 0) {
			json_object_put(res);
			break;
		}
		json_object_array_add(pages, json_object_get(items));
		json_object_put(res);
		got += n;
		/* Each page must reach further back, or paging would loop. */
		if (json_int(json_object_array_get_idx(items, 0), "seq",
		    &seq) == -1 || (before > 0 && seq >= before))
			break;
		before = seq;
		if (!more || (limit > 0 && got >= limit) || before <= 1)
			break;
	}

	all = json_object_new_array();
	for (i = json_object_array_length(pages); i-- > 0;) {
		page = json_object_array_get_idx(pages, i);
		for (j = 0; j < json_object_array_length(page); j++)
			json_object_array_add(all, json_object_get(
			    json_object_array_get_idx(page, j)));
	}
	json_object_put(pages);
	if (json_out) {
		/* JSON Lines: one record a line, for jq -c, grep, tail. */
		for (i = 0; i < json_object_array_length(all); i++)
			printf("%s\n", json_object_to_json_string_ext(
			    json_object_array_get_idx(all, i),
			    JSON_C_TO_STRING_PLAIN |
			    JSON_C_TO_STRING_NOSLASHESCAPE));
	} else
		hgctl_table(all, cols);
	json_object_put(all);
	return HGCTL_EXIT_OK;
}

/* hgctl status with brokerd unreachable: what is known, exit 3. */
static int
hgctl_status_down(const char *err)
{
	struct json_object	*res, *d, *problems;
	char			 buf[PATH_MAX + 1100];

	snprintf(buf, sizeof(buf), "brokerd: %s", err);
	if (json_out) {
		res = json_object_new_object();
		json_object_object_add(res, "state",
		    json_object_new_string("down"));
		problems = json_object_new_array();
		json_object_array_add(problems, json_object_new_string(buf));
		json_object_object_add(res, "problems", problems);
		d = json_object_new_object();
		json_object_object_add(d, "up", json_object_new_boolean(0));
		json_object_object_add(d, "reason",
		    json_object_new_string(err));
		json_object_object_add(res, "daemons", json_object_new_object());
		json_object_object_add(json_object_object_get(res, "daemons"),
		    "brokerd", d);
		hgctl_print_json(res);
		json_object_put(res);
	} else
		printf("state: down\nproblem: %s\n", buf);
	fprintf(stderr, "hgctl: %s\n", err);
	return HGCTL_EXIT_DOWN;
}

/* The reason sandboxd gave for what key names not being enforced. */
static const char *
hgctl_containment_reason(struct json_object *c, const char *key)
{
	struct json_object	*r;

	if (json_object_object_get_ex(c, "not_enforced", &r) &&
	    json_str(r, key) != NULL)
		return json_str(r, key);
	return NULL;
}

/* One row of the containment table. */
static void
hgctl_containment_row(struct json_object *rows, const char *what,
    const char *how, const char *why)
{
	struct json_object	*row;

	row = json_object_new_object();
	json_object_object_add(row, "what", json_object_new_string(what));
	json_object_object_add(row, "enforced_by", json_object_new_string(how));
	json_object_object_add(row, "reason", why != NULL ?
	    json_object_new_string(why) : NULL);
	json_object_array_add(rows, row);
}

/*
 * The containment as rows {"what", "enforced_by", "reason"}: each thing
 * sandboxd reported with the mechanism that enforces it, and loudly what
 * is not enforced, with why.
 */
static struct json_object *
hgctl_containment_rows(struct json_object *c)
{
	struct json_object	*rows;
	const char		*how;

	rows = json_object_new_array();
	if (c == NULL || !json_object_is_type(c, json_type_object))
		return rows;
	if (!json_object_object_get_ex(c, "uid", NULL)) {
		hgctl_containment_row(rows, "all", "unknown", json_str(c,
		    "reason"));
		return rows;
	}
	/* Whose uid spawns run as first, then in sandboxd's order. */
	hgctl_containment_row(rows, "uid", json_str(c, "uid") != NULL ?
	    json_str(c, "uid") : "unknown", hgctl_containment_reason(c, "uid"));
	json_object_object_foreach(c, key, v) {
		/* Where the cgroup tree is, when there is one: no mechanism. */
		if (strcmp(key, "not_enforced") == 0 || strcmp(key, "uid") == 0 ||
		    (strcmp(key, "base") == 0 && v == NULL))
			continue;
		if (json_object_is_type(v, json_type_string))
			how = json_object_get_string(v);
		else if (json_object_is_type(v, json_type_boolean) &&
		    json_object_get_boolean(v))
			how = "yes";
		else if (v == NULL || json_object_is_type(v, json_type_boolean))
			how = "NOT ENFORCED";
		else
			continue;
		hgctl_containment_row(rows, key, how,
		    hgctl_containment_reason(c, key));
	}
	return rows;
}

/* Print a status reply as text: its state, its problems, then tables. */
static void
hgctl_status_print(struct json_object *res)
{
	static const struct hgctl_col daemon_cols[] = {
		{ "DAEMON", "name", COL_STR },
		{ "UP", "up", COL_BOOL },
		{ "VERSION", "version", COL_STR },
		{ "STARTED", "started", COL_STR },
		{ "UPTIME", "uptime_seconds", COL_DURATION },
		{ "REASON", "reason", COL_STR },
		{ NULL, NULL, 0 }
	};
	static const struct hgctl_col backend_cols[] = {
		{ "BACKEND", "name", COL_STR },
		{ "OK", "ok", COL_BOOL },
		{ "REASON", "reason", COL_STR },
		{ NULL, NULL, 0 }
	};
	static const struct hgctl_col store_cols[] = {
		{ "STORE", "kind", COL_STR },
		{ "OK", "ok", COL_BOOL },
		{ "REASON", "reason", COL_STR },
		{ NULL, NULL, 0 }
	};
	static const struct hgctl_col direct_cols[] = {
		{ "SESSION", "session", COL_STR },
		{ "USER", "user", COL_STR },
		{ "DIRECT_UNTIL", "expires_at", COL_STR },
		{ "DIRECT_LEFT", "remaining_seconds", COL_DURATION },
		{ NULL, NULL, 0 }
	};
	static const struct hgctl_col containment_cols[] = {
		{ "CONTAINMENT", "what", COL_STR },
		{ "ENFORCED_BY", "enforced_by", COL_STR },
		{ "REASON", "reason", COL_STR },
		{ NULL, NULL, 0 }
	};
	static const struct hgctl_col audit_cols[] = {
		{ "AUDIT_SEQ", "seq", COL_INT },
		{ "AUDIT_HASH", "hash", COL_STR },
		{ NULL, NULL, 0 }
	};
	struct json_object	*daemons = NULL, *rows, *v = NULL, *one;
	const char		*state = json_str(res, "state");
	char			 cell[HGCTL_CELL_MAX];
	size_t			 i;

	log_escape(state != NULL ? state : "unknown", (size_t)-1, cell,
	    sizeof(cell));
	printf("state: %s\n", cell);
	if (json_object_object_get_ex(res, "problems", &v) &&
	    json_object_is_type(v, json_type_array))
		for (i = 0; i < json_object_array_length(v); i++) {
			log_escape(json_object_get_string(
			    json_object_array_get_idx(v, i)), (size_t)-1, cell,
			    sizeof(cell));
			printf("problem: %s\n", cell);
		}
	printf("\n");
	rows = json_object_new_array();
	if (json_object_object_get_ex(res, "daemons", &daemons) &&
	    json_object_is_type(daemons, json_type_object)) {
		json_object_object_foreach(daemons, name, d) {
			if (!json_object_is_type(d, json_type_object))
				continue;
			json_object_object_add(d, "name",
			    json_object_new_string(name));
			json_object_array_add(rows, json_object_get(d));
		}
	}
	hgctl_table(rows, daemon_cols);
	json_object_put(rows);
	printf("\n");
	rows = json_object_new_array();
	if (json_object_object_get_ex(res, "backend", &v) && v != NULL)
		json_object_array_add(rows, json_object_get(v));
	hgctl_table(rows, backend_cols);
	json_object_put(rows);
	printf("\n");
	rows = json_object_new_array();
	if (json_object_object_get_ex(res, "store", &v) && v != NULL) {
		json_object_array_add(rows, json_object_get(v));
		hgctl_table(rows, store_cols);
		printf("\n");
	}
	json_object_put(rows);
	v = NULL;
	json_object_object_get_ex(res, "direct_sessions", &v);
	if (hgctl_table(v, direct_cols) == 0)
		printf("no session in direct mode\n");
	printf("\n");
	rows = hgctl_containment_rows(json_object_object_get(res,
	    "containment"));
	hgctl_table(rows, containment_cols);
	if (json_object_array_length(rows) > 0)
		printf("\n");
	json_object_put(rows);
	rows = json_object_new_array();
	if (json_object_object_get_ex(res, "audit", &one) && one != NULL)
		json_object_array_add(rows, json_object_get(one));
	hgctl_table(rows, audit_cols);
	json_object_put(rows);
}

/* hgctl status: exit 0 running, 1 degraded, 3 brokerd unreachable. */
static int
hgctl_status(char **argv)
{
	struct json_object	*res;
	const char		*state;
	char			 err[PATH_MAX + 1024];
	int			 running;

	if (hgctl_try(hgctl_req(MSG_STATUS), &res, err, sizeof(err)) == -1) {
		if (strncmp(err, "cannot connect to ", 18) == 0)
			return hgctl_status_down(err);
		fprintf(stderr, "hgctl: %s\n", err);
		return HGCTL_EXIT_FAIL;
	}
	if (json_out)
		hgctl_print_json(res);
	else
		hgctl_status_print(res);
	state = json_str(res, "state");
	running = state != NULL && strcmp(state, "running") == 0;
	json_object_put(res);
	return running ? HGCTL_EXIT_OK : HGCTL_EXIT_FAIL;
}

/* Print a value as .env syntax reads it back: bare, 'single' or "double". */
static void
hgctl_env_value(const char *s)
{
	const char	*p;

	if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_-./:@+,%[]") == strlen(s)) {
		printf("%s", s);
		return;
	}
	if (strchr(s, '\'') == NULL && strchr(s, '\n') == NULL) {
		printf("'%s'", s);
		return;
	}
	putchar('"');
	for (p = s; *p != '\0'; p++) {
		if (*p == '\n')
			printf("\\n");
		else if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

/*
 * hgctl config: brokerd's effective configuration (the running service's
 * truth), or hgctl's own when brokerd cannot be reached, saying which.
 */
static int
hgctl_config(char **argv)
{
	struct json_object	*res, *cfg = NULL;
	const char		*source, *file;
	char			 err[PATH_MAX + 1024], efile[LOG_ESCAPE_MAX];
	char			*text;
	int64_t			 pid = 0;
	size_t			 len;
	int			 masked;

	if (hgctl_try(hgctl_req(MSG_CONFIG), &res, err, sizeof(err)) == -1) {
		fprintf(stderr, "hgctl: cannot ask brokerd (%s); showing "
		    "hgctl's own configuration\n", err);
		res = json_object_new_object();
		json_object_object_add(res, "source",
		    json_object_new_string("hgctl"));
		json_object_object_add(res, "error",
		    json_object_new_string(err));
		json_object_object_add(res, "pid",
		    json_object_new_int64(getpid()));
		json_object_object_add(res, "env_file", conf.env_file ?
		    json_object_new_string(conf.env_file) : NULL);
		json_object_object_add(res, "config", config_to_json(&conf));
	} else if (!json_object_object_get_ex(res, "error", NULL))
		json_object_object_add(res, "error", NULL);
	if (json_out) {
		hgctl_print_json(res);
		json_object_put(res);
		return HGCTL_EXIT_OK;
	}
	source = json_str(res, "source");
	json_int(res, "pid", &pid);
	file = json_str(res, "env_file");
	log_escape(file != NULL ? file : "", (size_t)-1, efile, sizeof(efile));
	if (source != NULL && strcmp(source, "brokerd") == 0)
		printf("# the configuration of the running brokerd (pid %lld)",
		    (long long)pid);
	else
		printf("# hgctl's own configuration: brokerd cannot be "
		    "reached");
	if (file != NULL)
		printf(", read from %s\n", efile);
	else
		printf(", no configuration file\n");
	if (json_object_object_get_ex(res, "config", &cfg) &&
	    json_object_is_type(cfg, json_type_object)) {
		json_object_object_foreach(cfg, name, v) {
			/* Room for the value, or for a range of two longs. */
			len = (v != NULL ? strlen(json_object_get_string(v)) :
			    0) + 64;
			if ((text = malloc(len)) == NULL)
				fatal("%s", __func__);
			/* Masked ("***"): a comment, lest it be loaded back. */
			masked = config_env_text(name, v, text, len);
			printf("%s%s=", masked ? "# " : "", name);
			hgctl_env_value(text);
			printf("%s\n", masked ? "  (masked: not shown)" : "");
			free(text);
		}
	}
	json_object_put(res);
	return HGCTL_EXIT_OK;
}

/* The items of an array of strings joined by ", " ("-" for none). */
static struct json_object *
hgctl_joined(struct json_object *arr)
{
	struct printbuf	*pb;
	struct json_object	*o;
	size_t		 i, n;

	n = arr != NULL && json_object_is_type(arr, json_type_array) ?
	    json_object_array_length(arr) : 0;
	if (n == 0)
		return json_object_new_string("-");
	if ((pb = printbuf_new()) == NULL)
		fatal("%s", __func__);
	for (i = 0; i < n; i++) {
		if (i > 0)
			printbuf_strappend(pb, ", ");
		printbuf_memappend(pb, json_object_get_string(
		    json_object_array_get_idx(arr, i)), (int)strlen(
		    json_object_get_string(json_object_array_get_idx(arr, i))));
	}
	o = json_object_new_string_len(pb->buf, pb->bpos);
	printbuf_free(pb);
	return o;
}

/* Add a {scope, target, allow} row per member of an additions object. */
static void
hgctl_egress_rows(struct json_object *items, struct json_object *res,
    const char *key, const char *scope)
{
	struct json_object	*by, *row;

	if (!json_object_object_get_ex(res, key, &by) ||
	    !json_object_is_type(by, json_type_object))
		return;
	json_object_object_foreach(by, target, allow) {
		row = json_object_new_object();
		json_object_object_add(row, "scope",
		    json_object_new_string(scope));
		json_object_object_add(row, "target",
		    json_object_new_string(target));
		json_object_object_add(row, "allow", hgctl_joined(allow));
		json_object_array_add(items, row);
	}
}

/* hgctl egress show: the configured lists, then the additions. */
static int
hgctl_egress_show(char **argv)
{
	static const struct hgctl_col cols[] = {
		{ "SCOPE", "scope", COL_STR },
		{ "TARGET", "target", COL_STR },
		{ "ALLOW", "allow", COL_STR },
		{ NULL, NULL, 0 }
	};
	static const struct {
		const char	*key, *label;
	} lists[] = {
		{ "allow", "allow (HOSTGATE_EGRESS_ALLOW)" },
		{ "deny", "deny (HOSTGATE_EGRESS_DENY)" },
		{ "ports", "ports (HOSTGATE_EGRESS_PORTS)" },
		{ "deny_nets", "deny nets (HOSTGATE_EGRESS_DENY_NETS)" },
		{ "allow_nets", "allow nets (HOSTGATE_EGRESS_ALLOW_NETS)" },
	};
	struct json_object	*res, *items, *v, *j;
	size_t			 i;

	res = hgctl_call(hgctl_req(MSG_EGRESS_GET));
	if (json_out) {
		hgctl_print_json(res);
		json_object_put(res);
		return HGCTL_EXIT_OK;
	}
	for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		if (!json_object_object_get_ex(res, lists[i].key, &v))
			v = NULL;
		j = hgctl_joined(v);
		printf("%s: %s\n", lists[i].label, json_object_get_string(j));
		json_object_put(j);
	}
	items = json_object_new_array();
	hgctl_egress_rows(items, res, "users", "user");
	hgctl_egress_rows(items, res, "sessions", "session");
	printf("\n");
	if (hgctl_table(items, cols) == 0)
		printf("no additions\n");
	json_object_put(items);
	json_object_put(res);
	return HGCTL_EXIT_OK;
}

/*
 * The current additions of the target of --user or --session (an empty
 * array when it has none), from egress_get.
 */
static struct json_object *
hgctl_egress_current(void)
{
	struct json_object	*res, *by, *list, *out;

	res = hgctl_call(hgctl_req(MSG_EGRESS_GET));
	if (json_object_object_get_ex(res, target_user != NULL ? "users" :
	    "sessions", &by) && json_object_object_get_ex(by, target_user !=
	    NULL ? target_user : target_session, &list) &&
	    json_object_is_type(list, json_type_array))
		out = json_object_get(list);
	else
		out = json_object_new_array();
	json_object_put(res);
	return out;
}

/* The index of pattern in list, or -1. */
static int
hgctl_egress_find(struct json_object *list, const char *pattern)
{
	size_t	i;

	for (i = 0; i < json_object_array_length(list); i++)
		if (strcasecmp(json_object_get_string(
		    json_object_array_get_idx(list, i)), pattern) == 0)
			return (int)i;
	return -1;
}

/* Send the new list with egress_set and say what it is now. */
static int
hgctl_egress_set(struct json_object *list)
{
	struct json_object	*req, *res, *allow, *j;
	const char		*what = target_user != NULL ? "user" :
				    "session";

	req = hgctl_req(MSG_EGRESS_SET);
	json_object_object_add(req, "scope", json_object_new_string(what));
	json_object_object_add(req, "target", json_object_new_string(
	    target_user != NULL ? target_user : target_session));
	json_object_object_add(req, "allow", list);
	res = hgctl_call(req);
	if (!json_object_object_get_ex(res, "allow", &allow))
		allow = NULL;
	j = hgctl_joined(allow);
	printf("egress additions of %s %s: %s\n", what, target_user != NULL ?
	    target_user : target_session, json_object_get_string(j));
	json_object_put(j);
	json_object_put(res);
	return HGCTL_EXIT_OK;
}

/*
 * hgctl egress allow --user NAME|--session ID PATTERN...: the current
 * list and the new patterns; brokerd checks them all.
 */
static int
hgctl_egress_allow(char **argv)
{
	struct json_object	*list;

	list = hgctl_egress_current();
	for (; *argv != NULL; argv++)
		if (hgctl_egress_find(list, *argv) == -1)
			json_object_array_add(list,
			    json_object_new_string(*argv));
	return hgctl_egress_set(list);
}

/* hgctl egress revoke --user NAME|--session ID PATTERN... */
static int
hgctl_egress_revoke(char **argv)
{
	struct json_object	*list;
	int			 i;

	list = hgctl_egress_current();
	for (; *argv != NULL; argv++) {
		if ((i = hgctl_egress_find(list, *argv)) == -1) {
			fprintf(stderr, "hgctl: %s is not among the egress "
			    "additions of %s %s; nothing was changed\n", *argv,
			    target_user != NULL ? "user" : "session",
			    target_user != NULL ? target_user :
			    target_session);
			json_object_put(list);
			return HGCTL_EXIT_FAIL;
		}
		json_object_array_del_idx(list, (size_t)i, 1);
	}
	return hgctl_egress_set(list);
}

int
main(int argc, char *argv[])
{
	const struct hgctl_cmd	*c;
	char			**rest;
	int			  n, rv;

	log_init_cli("hgctl");
	if (argc < 2)
		hgctl_usage(NULL, NULL, "no command given");
	if (hgctl_is_help(argv[1])) {
		hgctl_help_all(stdout);
		return HGCTL_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("hgctl (hostgate) %s\n", HG_VERSION);
		return HGCTL_EXIT_OK;
	}
	if (strcmp(argv[1], "help") == 0)
		hgctl_help(argc - 2, argv + 2);
	if (hgctl_is_group(argv[1])) {
		if (argc < 3)
			hgctl_usage(argv[1], NULL, "\"%s\" needs a command",
			    argv[1]);
		if (hgctl_is_help(argv[2])) {
			hgctl_help_group(stdout, argv[1], 1);
			return HGCTL_EXIT_OK;
		}
		if ((c = hgctl_find(argv[1], argv[2])) == NULL)
			hgctl_usage(argv[1], NULL, "unknown command \"%s %s\"",
			    argv[1], argv[2]);
		rest = argv + 3;
		n = argc - 3;
	} else if ((c = hgctl_find(NULL, argv[1])) != NULL) {
		rest = argv + 2;
		n = argc - 2;
	} else
		hgctl_usage(NULL, NULL, "unknown command \"%s\"", argv[1]);
	hgctl_parse(c, n, rest);
	rv = c->fn(rest);
	if (conf_loaded)
		config_free(&conf);
	return rv;
}

/* hgctl store migrate: the PostgreSQL schema to this hostgate's version. */
static int
hgctl_store_migrate(char **argv)
{
	PGconn	*conn;
	char	 err[512], *where;
	int	 from, to;

	hgctl_conf();
	if (conf.store == NULL) {
		printf("the embedded store needs no migration: brokerd "
		    "upgrades %s/%s itself\n", conf.state_dir, STORE_FILE);
		return HGCTL_EXIT_OK;
	}
	where = config_store_mask(conf.store);
	if ((conn = pg_connect_once(conf.store, conf.store_timeout, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "hgctl: %s: %s\n", where, err);
		free(where);
		return HGCTL_EXIT_FAIL;
	}
	if (pg_migrate(conn, &from, &to, err, sizeof(err)) == -1) {
		fprintf(stderr, "hgctl: %s: %s\n", where, err);
		PQfinish(conn);
		free(where);
		return HGCTL_EXIT_FAIL;
	}
	if (from == to)
		printf("%s: schema version %d, up to date\n", where, to);
	else
		printf("%s: schema version %d -> %d\n", where, from, to);
	PQfinish(conn);
	free(where);
	return HGCTL_EXIT_OK;
}

/* The number of items brokerd lists for a paged list type, or -1. */
static int64_t
hgctl_count_pages(const char *type)
{
	struct json_object	*all;
	int64_t			 n;

	if ((all = hgctl_collect_pages(type)) == NULL)
		return -1;
	n = (int64_t)json_object_array_length(all);
	json_object_put(all);
	return n;
}

/* Add a count to o under key: a number, or null when unknown (-1). */
static void
hgctl_count_add(struct json_object *o, const char *key, int64_t n)
{
	json_object_object_add(o, key, n < 0 ? NULL :
	    json_object_new_int64(n));
}

/* One conninfo keyword's value, "" when unset. */
static const char *
hgctl_conninfo_get(PQconninfoOption *opts, const char *key)
{
	for (; opts != NULL && opts->keyword != NULL; opts++)
		if (strcmp(opts->keyword, key) == 0)
			return opts->val != NULL ? opts->val : "";
	return "";
}

/*
 * Whether two PostgreSQL stores, however spelt (a URI, KEY=VALUE, with or
 * without the password), name the same server, database and user.
 */
static int
hgctl_same_store(const char *a, const char *b)
{
	static const char	*keys[] = { "host", "hostaddr", "port", "dbname",
	    "user", NULL };
	PQconninfoOption	*oa, *ob;
	int			 i, same;

	oa = PQconninfoParse(a, NULL);
	ob = PQconninfoParse(b, NULL);
	same = oa != NULL && ob != NULL;
	for (i = 0; same && keys[i] != NULL; i++)
		same = strcmp(hgctl_conninfo_get(oa, keys[i]),
		    hgctl_conninfo_get(ob, keys[i])) == 0;
	PQconninfoFree(oa);
	PQconninfoFree(ob);
	return same;
}

/*
 * The store of the running brokerd, when it answers, rather than what
 * hgctl's own environment says: its state directory, or its PostgreSQL
 * store, whose password only hgctl's HOSTGATE_STORE can hold (brokerd
 * shows it masked). -1 with err when hgctl cannot reach the same store.
 */
static int
hgctl_store_brokerds(char *err, size_t errsz)
{
	struct json_object	*res, *cfg;
	const char		*dir, *theirs;
	char			 why[PATH_MAX + 1024], *mine;
	int			 rc = 0;

	if (hgctl_try(hgctl_req(MSG_CONFIG), &res, why, sizeof(why)) == -1)
		return 0;	/* not running: hgctl's own configuration */
	if (!json_object_object_get_ex(res, "config", &cfg) ||
	    (dir = json_str(cfg, "HOSTGATE_STATE_DIR")) == NULL ||
	    (theirs = json_str(cfg, "HOSTGATE_STORE")) == NULL) {
		json_object_put(res);
		return 0;
	}
	if (*theirs == '\0') {
		free(conf.state_dir);
		if ((conf.state_dir = strdup(dir)) == NULL)
			fatal("%s", __func__);
		free(conf.store);
		conf.store = NULL;
	} else if (conf.store == NULL) {
		snprintf(err, errsz, "brokerd uses the PostgreSQL store %s; "
		    "set HOSTGATE_STORE (with its password, as in brokerd's "
		    "environment file) for hgctl too", theirs);
		rc = -1;
	} else {
		mine = config_store_mask(conf.store);
		if (!hgctl_same_store(conf.store, theirs)) {
			snprintf(err, errsz, "hgctl's HOSTGATE_STORE (%s) is "
			    "not the running brokerd's (%s)", mine, theirs);
			rc = -1;
		}
		free(mine);
	}
	json_object_put(res);
	return rc;
}

/* hgctl store status: the kind of store, where, its schema, its counts. */
static int
hgctl_store_status(char **argv)
{
	struct storeadm_counts	 c;
	struct json_object	*o, *counts, *res, *items;
	char			 err[1024], *where, num[24];
	const char		*kind;
	int			 rc, pg;

	hgctl_conf();
	if (hgctl_store_brokerds(err, sizeof(err)) == -1) {
		fprintf(stderr, "hgctl: %s\n", err);
		return HGCTL_EXIT_FAIL;
	}
	pg = conf.store != NULL;
	kind = pg ? "postgresql" : "embedded";
	where = pg ? config_store_mask(conf.store) :
	    path_join(conf.state_dir, STORE_FILE);
	if (!pg && access(where, F_OK) == -1 && errno == ENOENT) {
		fprintf(stderr, "hgctl: no store at %s (brokerd is not "
		    "running, and has never run on HOSTGATE_STATE_DIR %s)\n",
		    where, conf.state_dir);
		free(where);
		return HGCTL_EXIT_FAIL;
	}
	if (pg)
		rc = storeadm_pg_status(conf.store, conf.store_timeout, &c, err,
		    sizeof(err));
	else if ((rc = storeadm_embedded_status(conf.state_dir, &c, err,
	    sizeof(err))) == 1) {
		/* brokerd holds store.db: its own counts, from memory. */
		c.sessions = hgctl_count_pages(MSG_SESSION_LIST);
		c.tokens = hgctl_count_pages(MSG_TOKEN_LIST);
		res = hgctl_call(hgctl_req(MSG_USER_LIST));
		if (json_object_object_get_ex(res, "items", &items))
			c.users = (int64_t)json_object_array_length(items);
		json_object_put(res);
		rc = 0;
	}
	if (rc == -1) {
		fprintf(stderr, "hgctl: %s: %s\n", where, err);
		free(where);
		return HGCTL_EXIT_FAIL;
	}
	o = json_object_new_object();
	counts = json_object_new_object();
	json_object_object_add(o, "kind", json_object_new_string(kind));
	json_object_object_add(o, "where", json_object_new_string(where));
	hgctl_count_add(o, "schema", c.schema);
	hgctl_count_add(counts, "users", c.users);
	hgctl_count_add(counts, "sessions", c.sessions);
	hgctl_count_add(counts, "tokens", c.tokens);
	if (pg) {
		hgctl_count_add(counts, "audit", c.audit);
		hgctl_count_add(counts, "hosts", c.hosts);
	}
	json_object_object_add(o, "counts", counts);
	if (json_out)
		hgctl_print_json(o);
	else {
		printf("kind:     %s\nwhere:    %s\n", kind, where);
		if (c.schema < 0)
			printf("schema:   unknown (brokerd holds %s)\n",
			    STORE_FILE);
		else if (pg && c.schema != PG_SCHEMA_VERSION)
			printf("schema:   %lld (this hostgate needs %d: run "
			    "hgctl store migrate)\n", (long long)c.schema,
			    PG_SCHEMA_VERSION);
		else
			printf("schema:   %lld\n", (long long)c.schema);
		json_object_object_foreach(counts, key, v) {
			snprintf(num, sizeof(num), "%s", v == NULL ? "-" :
			    json_object_get_string(v));
			printf("%s:%*s%s\n", key, (int)(9 - strlen(key)), "",
			    num);
		}
	}
	json_object_put(o);
	free(where);
	return HGCTL_EXIT_OK;
}

/* hgctl store copy --to URL: this host's embedded store into PostgreSQL. */
static int
hgctl_store_copy(char **argv)
{
	struct storeadm_counts	 c;
	char			 err[1024], *where;

	PQconninfoOption	*opts;
	char			*msg = NULL, *nl;

	hgctl_conf();
	if ((opts = PQconninfoParse(store_to, &msg)) == NULL) {
		if (msg != NULL && (nl = strchr(msg, '\n')) != NULL)
			*nl = '\0';
		snprintf(err, sizeof(err), "%s", msg != NULL ? msg :
		    "out of memory");
		PQfreemem(msg);
		hgctl_usage("store", hgctl_find("store", "copy"), "--to is "
		    "not a PostgreSQL URI or KEY=VALUE string: %s", err);
	}
	PQconninfoFree(opts);
	where = config_store_mask(store_to);
	if (storeadm_copy(conf.state_dir, conf.host_id, store_to,
	    conf.store_timeout, &c, err, sizeof(err)) == -1) {
		fprintf(stderr, "hgctl: %s: %s\n", where, err);
		free(where);
		return HGCTL_EXIT_FAIL;
	}
	printf("copied %s to %s: %lld users, %lld sessions, %lld tokens, "
	    "%lld audit records\n", conf.state_dir, where,
	    (long long)c.users, (long long)c.sessions, (long long)c.tokens,
	    (long long)c.audit);
	free(where);
	return HGCTL_EXIT_OK;
}
