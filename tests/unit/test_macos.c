/*
 * Unit tests for sandboxd/backend_macos.c. This machine has no
 * sandbox-exec: the command lines and profiles are compared with golden
 * files (tests/unit/golden/macos_*; HG_UPDATE_GOLDEN=1 rewrites them), every
 * profile goes through a small SBPL checker, and hostile paths must be
 * refused.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../sandboxd/sandboxd.h"
#include "golden.h"
#include "sbpl_check.h"

#define WS	"/Users/hg/workspaces/alice"
#define TMPD	"/private/var/folders/zz/hg-spawn-42/T"
#define TTY	"/dev/ttys003"
#define SHARED	"/Users/hg/shared"
#define OPTDATA	"/opt/data"
#define STATE	"/Users/hg/state"
#define WSROOT	"/Users/hg/workspaces"
#define RUNDIR	"/Users/hg/run"

static char	*tmpl;




static int
setup(void **state)
{
	char	path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/profiles/macos.sb", golden_srcdir());
	if ((tmpl = golden_slurp(path)) == NULL) {
		fprintf(stderr, "cannot read %s (run from the source tree or "
		    "set HG_SRCDIR)\n", path);
		return -1;
	}
	return 0;
}

static int
teardown(void **state)
{
	free(tmpl);
	return 0;
}

static char *cmd_argv[] = { "python3", "-c", "print('hi')", NULL };
static char *sh_argv[] = { "/bin/zsh", "-l", NULL };

/* A sandboxed spawn of alice's, in her workspace. */
static struct spawn_spec
spec_make(enum spawn_kind kind, enum permission perm)
{
	struct spawn_spec	s;

	memset(&s, 0, sizeof(s));
	s.kind = kind;
	s.mode = MODE_SANDBOX;
	s.perm = perm;
	s.user = "alice";
	s.workspace = WS;
	s.cwd = WS "/proj";
	s.argv = kind == SPAWN_TERMINAL ? sh_argv : cmd_argv;
	s.term = kind == SPAWN_TERMINAL ? "xterm-256color" : NULL;
	s.seccomp_fd = -1;
	s.tmpdir = TMPD;
	return s;
}

/* Options with the shipped template. */
static struct macos_opts
opts_make(const char *writable, const char *hidden, const char *tty)
{
	struct macos_opts	o;

	o.tmpl = tmpl;
	o.writable = writable;
	o.hidden = hidden;
	o.tty = tty;
	return o;
}

/*
 * Run the SBPL checker on the profile (argv[2]) with the -D names as the
 * parameters and every input path as forbidden text; each parameter passed
 * must also be used, and the command must follow the parameters.
 */
static void
profile_check(const struct strv *argv)
{
	const char	*forbidden[] = { WS, TMPD, TTY, SHARED, OPTDATA, STATE,
	    WSROOT, RUNDIR, "/Users", NULL };
	const char	*params[40];
	char		 names[40][32], use[1400], err[512];
	size_t		 i, np = 0, len;

	assert_true(argv->n > 3);
	assert_string_equal(argv->v[0], "/usr/bin/sandbox-exec");
	assert_string_equal(argv->v[1], "-p");
	for (i = 3; i + 1 < argv->n && strcmp(argv->v[i], "-D") == 0; i += 2) {
		len = strcspn(argv->v[i + 1], "=");
		assert_int_equal(argv->v[i + 1][len], '=');
		assert_true(len < sizeof(names[0]) && np + 1 < 40);
		memcpy(names[np], argv->v[i + 1], len);
		names[np][len] = '\0';
		snprintf(use, sizeof(use), "(param \"%s\")", names[np]);
		if (strstr(argv->v[2], use) == NULL)
			fail_msg("-D %s is passed but not used", names[np]);
		params[np] = names[np];
		np++;
	}
	params[np] = NULL;
	assert_string_equal(argv->v[i], "/usr/bin/env");
	if (sbpl_check(argv->v[2], params, forbidden, err, sizeof(err)) != 0)
		fail_msg("profile rejected: %s", err);
}

/* The argv as one line with the profile replaced, for the golden file. */
static char *
argv_line(const struct strv *argv)
{
	struct strv	 copy;
	char		*line, *out;
	size_t		 i;

	strv_init(&copy);
	for (i = 0; i < argv->n; i++)
		strv_add(&copy, i == 2 ? "@PROFILE@" : argv->v[i]);
	line = strv_join(&copy);
	strv_free(&copy);
	if (asprintf(&out, "%s\n", line) == -1)
		fail();
	free(line);
	return out;
}

/* Build, check and compare one configuration with its two goldens. */
static void
config_check(const char *name, const struct spawn_spec *s,
    const struct macos_opts *o, struct strv *argv)
{
	char	 err[512], golden[128], *line;

	strv_init(argv);
	if (macos_build(s, o, argv, err, sizeof(err)) != 0)
		fail_msg("macos_build: %s", err);
	profile_check(argv);
	snprintf(golden, sizeof(golden), "macos_%s.argv", name);
	line = argv_line(argv);
	golden_check(golden, line);
	free(line);
	snprintf(golden, sizeof(golden), "macos_%s.sb", name);
	golden_check(golden, argv->v[2]);
}

/* Whether argv holds the element s. */
static int
argv_has(const struct strv *argv, const char *s)
{
	size_t	i;

	for (i = 0; i < argv->n; i++)
		if (strcmp(argv->v[i], s) == 0)
			return 1;
	return 0;
}

/* The shipped template expands in every configuration. */
static void
test_template_ok(void **state)
{
	char	err[256] = "";

	assert_int_equal(macos_template_check(tmpl, err, sizeof(err)), 0);
	assert_string_equal(err, "");
}

/* Read-only: no write to the workspace, the writable paths ignored. */
static void
test_command_read_only(void **state)
{
	struct spawn_spec	s = spec_make(SPAWN_COMMAND, PERM_READ_ONLY);
	struct macos_opts	o = opts_make(SHARED ":" OPTDATA, NULL, NULL);
	struct strv		argv;

	config_check("command_read_only", &s, &o, &argv);
	assert_null(strstr(argv.v[2], "(allow file-write* (subpath (param "
	    "\"WORKSPACE\")))"));
	assert_null(strstr(argv.v[2], "(param \"WRITABLE_"));
	assert_false(argv_has(&argv, "WRITABLE_0=" SHARED));
	assert_null(strstr(argv.v[2], "network-outbound"));
	assert_null(strstr(argv.v[2], "pseudo-tty"));
	assert_non_null(strstr(argv.v[2], "(deny default)"));
	strv_free(&argv);
}

/* workspace-write: the workspace writable, env passed, cwd by argument. */
static void
test_command_write(void **state)
{
	static char		*env[] = { "PYTHONUNBUFFERED=1", "FOO=a b", NULL };
	struct spawn_spec	 s = spec_make(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
	struct macos_opts	 o = opts_make(NULL, NULL, NULL);
	struct strv		 argv;
	size_t			 i;

	s.env = env;
	config_check("command_write", &s, &o, &argv);
	assert_non_null(strstr(argv.v[2], "(allow file-write* (subpath (param "
	    "\"WORKSPACE\")))"));
	assert_null(strstr(argv.v[2], "network-outbound"));
	/* HOSTGATE_MODE comes after the spec's env, so it cannot be changed. */
	for (i = 0; strcmp(argv.v[i], "FOO=a b") != 0; i++)
		;
	assert_string_equal(argv.v[i + 1], "HOSTGATE_MODE=sandbox");
	/* The directory and the command are arguments of a fixed script. */
	assert_string_equal(argv.v[i + 4], "cd \"$1\" && shift && exec \"$@\"");
	assert_string_equal(argv.v[i + 6], WS "/proj");
	assert_string_equal(argv.v[argv.n - 1], "print('hi')");
	strv_free(&argv);
}

/* A terminal: its own pty, TERM, and pty creation inside. */
static void
test_terminal(void **state)
{
	struct spawn_spec	s = spec_make(SPAWN_TERMINAL, PERM_WORKSPACE_WRITE);
	struct macos_opts	o = opts_make(NULL, NULL, TTY);
	struct strv		argv;

	config_check("terminal", &s, &o, &argv);
	assert_true(argv_has(&argv, "TTY=" TTY));
	assert_true(argv_has(&argv, "TERM=xterm-256color"));
	assert_non_null(strstr(argv.v[2], "(literal (param \"TTY\"))"));
	assert_non_null(strstr(argv.v[2], "(allow pseudo-tty)"));
	/* Other terminals' ptys only when created inside (the extension). */
	assert_non_null(strstr(argv.v[2], "com.apple.sandbox.pty"));
	strv_free(&argv);
}

/* workspace-write+network: IP out, loopback and Unix sockets denied. */
static void
test_network(void **state)
{
	struct spawn_spec	s = spec_make(SPAWN_COMMAND,
	    PERM_WORKSPACE_WRITE_NET);
	struct macos_opts	o = opts_make(NULL, NULL, NULL);
	struct strv		argv;
	const char		*allow, *deny;

	config_check("network", &s, &o, &argv);
	allow = strstr(argv.v[2], "(allow network-outbound (remote ip \"*:*\"))");
	deny = strstr(argv.v[2], "(deny network-outbound (remote ip "
	    "\"localhost:*\"))");
	assert_non_null(allow);
	assert_non_null(deny);
	assert_true(deny > allow);	/* the last matching rule wins */
	assert_null(strstr(argv.v[2], "(allow network*"));
	assert_null(strstr(argv.v[2], "pseudo-tty"));
	strv_free(&argv);
}

/* Two writable paths and three hidden directories, numbered. */
static void
test_writable_hidden(void **state)
{
	struct spawn_spec	s = spec_make(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
	struct macos_opts	o = opts_make(SHARED "::" OPTDATA ":",
	    STATE ":" WSROOT ":" RUNDIR, NULL);
	struct strv		argv;
	const char		*hide, *own;

	config_check("writable_hidden", &s, &o, &argv);
	assert_true(argv_has(&argv, "WRITABLE_0=" SHARED));
	assert_true(argv_has(&argv, "WRITABLE_1=" OPTDATA));
	assert_false(argv_has(&argv, "WRITABLE_2=" OPTDATA));
	assert_true(argv_has(&argv, "HIDDEN_2=" RUNDIR));
	assert_non_null(strstr(argv.v[2], "(subpath (param \"WRITABLE_1\"))"));
	assert_null(strstr(argv.v[2], "WRITABLE_2"));
	assert_null(strstr(argv.v[2], "_N\""));
	/* The own workspace is allowed after the hidden roots that hold it. */
	hide = strstr(argv.v[2], "(subpath (param \"HIDDEN_1\"))");
	own = strstr(argv.v[2], "(allow file-read* (subpath (param "
	    "\"WORKSPACE\")))");
	assert_non_null(hide);
	assert_non_null(own);
	assert_true(own > hide);
	strv_free(&argv);
}

/* One hostile input and the words its refusal must contain. */
struct hostile {
	const char	*field;
	const char	*value;
	const char	*want;
};

static const struct hostile hostiles[] = {
	{ "workspace", "/Users/a/ws\"", "quote" },
	{ "workspace", "/Users/a/ws)(allow default", "parenthesis" },
	{ "workspace", "/Users/a/(ws", "parenthesis" },
	{ "workspace", "/Users/a/w\ns", "control character" },
	{ "workspace", "/Users/a/../b", "canonical" },
	{ "workspace", "Users/a/ws", "absolute" },
	{ "workspace", "/Users/a/ws/", "trailing slash" },
	{ "workspace", "/Users//a", "empty" },
	{ "workspace", "/Users/a/./ws", "canonical" },
	{ "workspace", "/Users/a\\b", "backslash" },
	{ "workspace", "/Users/a'b", "quote" },
	{ "workspace", "/", "not allowed" },
	{ "workspace", "/tmp/ws", "symbolic link" },
	{ "workspace", "", "absolute" },
	{ "tmpdir", "/var/folders/zz/T", "/private/var/folders/zz/T" },
	{ "tmpdir", "/private/tmp/x\")) (allow file-write*", "quote" },
	{ "cwd", "/Users/other", "outside the workspace" },
	{ "cwd", WS "2/proj", "outside the workspace" },
	{ "cwd", WS "/../bob", "canonical" },
	{ "writable", SHARED ":/Users/b\")(allow default)(\"", "quote" },
	{ "writable", SHARED ":relative/x", "absolute" },
	{ "writable", "/Users/a/x/..", "canonical" },
	{ "writable", "/etc/hosts", "symbolic link" },
	{ "writable", "/Users/a\n(allow default)", "control character" },
	{ "hidden", STATE ":/Users/x\\", "backslash" },
	{ "hidden", "/Users/x/", "trailing slash" },
	{ "tty", "/dev/ttys0(", "parenthesis" },
	{ "tty", "/dev/tty", "not /dev/ttysNNN" },
	{ "tty", "/dev/ttys003x", "not /dev/ttysNNN" },
	{ "tty", "/dev/ttys", "not /dev/ttysNNN" },
	{ "tty", NULL, "needs its pty" },
	{ "term", "xterm\n", "TERM" },
	{ "term", "", "TERM" },
	{ "env", "NOEQUALS", "environment entry 0" },
	{ "env", "=x", "environment entry 0" },
	{ "env", "1A=b", "environment entry 0" },
	{ "env", "A-B=c", "environment entry 0" },
	{ "env", "-i=c", "environment entry 0" },
};

/* Every hostile value is refused, with a clear error and no argv. */
static void
test_hostile(void **state)
{
	struct spawn_spec	 s;
	struct macos_opts	 o;
	struct strv		 argv;
	char			 err[512];
	char			*env[2] = { NULL, NULL };
	size_t			 i;

	for (i = 0; i < sizeof(hostiles) / sizeof(hostiles[0]); i++) {
		const struct hostile *h = &hostiles[i];

		s = spec_make(SPAWN_TERMINAL, PERM_WORKSPACE_WRITE);
		o = opts_make(NULL, NULL, TTY);
		if (strcmp(h->field, "workspace") == 0) {
			s.workspace = h->value;
			s.cwd = NULL;
		} else if (strcmp(h->field, "tmpdir") == 0)
			s.tmpdir = h->value;
		else if (strcmp(h->field, "cwd") == 0)
			s.cwd = h->value;
		else if (strcmp(h->field, "writable") == 0)
			o.writable = h->value;
		else if (strcmp(h->field, "hidden") == 0)
			o.hidden = h->value;
		else if (strcmp(h->field, "tty") == 0)
			o.tty = h->value;
		else if (strcmp(h->field, "term") == 0)
			s.term = h->value;
		else {
			env[0] = (char *)h->value;
			s.env = env;
		}
		strv_init(&argv);
		err[0] = '\0';
		if (macos_build(&s, &o, &argv, err, sizeof(err)) != -1)
			fail_msg("%s \"%s\" was accepted", h->field, h->value);
		if (strstr(err, h->want) == NULL)
			fail_msg("%s \"%s\": error \"%s\" lacks \"%s\"",
			    h->field, h->value, err, h->want);
		assert_int_equal(argv.n, 0);
		strv_free(&argv);
	}
}

/* Direct mode, no command, no template and too many paths are refused. */
static void
test_refusals(void **state)
{
	struct spawn_spec	 s = spec_make(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
	struct macos_opts	 o = opts_make(NULL, NULL, NULL);
	struct strv		 argv;
	char			 err[512], many[40 * 12] = "", *empty[] = { NULL };
	int			 i;

	strv_init(&argv);
	s.mode = MODE_DIRECT;
	assert_int_equal(macos_build(&s, &o, &argv, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a sandboxed spawn"));
	s.mode = MODE_SANDBOX;
	s.argv = empty;
	assert_int_equal(macos_build(&s, &o, &argv, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "nothing to run"));
	s.argv = cmd_argv;
	s.tmpdir = NULL;
	assert_int_equal(macos_build(&s, &o, &argv, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "temp dir missing"));
	s.tmpdir = TMPD;
	o.tmpl = NULL;
	assert_int_equal(macos_build(&s, &o, &argv, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no profile template"));
	o.tmpl = tmpl;
	/* No bridge to the egress proxy under sandbox-exec: refused. */
	s.perm = PERM_WORKSPACE_WRITE_ALLOW;
	assert_int_equal(macos_build(&s, &o, &argv, err, sizeof(err)), -1);
	assert_string_equal(err, "the workspace-write+allowlist profile is "
	    "not available on macOS");
	s.perm = PERM_READ_ONLY_ALLOW;
	assert_int_equal(macos_build(&s, &o, &argv, err, sizeof(err)), -1);
	assert_string_equal(err, "the read-only+allowlist profile is not "
	    "available on macOS");
	s.perm = PERM_WORKSPACE_WRITE;
	for (i = 0; i < 33; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many),
		    "%s/Users/p%d", i ? ":" : "", i);
	o.writable = many;
	assert_int_equal(macos_build(&s, &o, &argv, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than 32"));
	assert_int_equal(argv.n, 0);
	/* Exactly the limit is fine. */
	*strrchr(many, ':') = '\0';
	assert_int_equal(macos_build(&s, &o, &argv, err, sizeof(err)), 0);
	assert_true(argv_has(&argv, "WRITABLE_31=/Users/p31"));
	strv_free(&argv);
}

/* Template mistakes are found, with the line number. */
static void
test_template_errors(void **state)
{
	static const struct {
		const char	*tmpl;
		const char	*want;
	} bad[] = {
		{ "(version 1)\n(allow file-read*) ;@sometimes\n",
		    "line 2: unknown or repeated tag \"sometimes\"" },
		{ "(version 1)\n(allow file-read* (subpath (param \"WRITABLE_N\")))\n",
		    "line 2: WRITABLE_N without its repeat tag" },
		{ "(version 1)\n(allow file-read*) ;@writable\n",
		    "line 2: repeat tag without WRITABLE_N" },
		{ "(version 1)\n(deny file-read-data (subpath (param \"HIDDEN_N\"))) ;@writable\n",
		    "HIDDEN_N without its repeat tag" },
		{ "(version 1)\n(x (param \"HIDDEN_N\")) ;@hidden hidden\n",
		    "repeated tag \"hidden\"" },
		{ "(version 1)\n(allow file-read* ;@terminal\n(literal \"/x\"))\n",
		    "unbalanced" },
		{ "(version 1)\n(allow file-read* (literal \"/x)))\n",
		    "unbalanced" },
		{ "(deny default)\n", "no (version 1)" },
	};
	char	err[256];
	size_t	i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (macos_template_check(bad[i].tmpl, err, sizeof(err)) != -1)
			fail_msg("template %zu accepted", i);
		if (strstr(err, bad[i].want) == NULL)
			fail_msg("template %zu: \"%s\" lacks \"%s\"", i, err,
			    bad[i].want);
	}
	/* Tags: kept only when all hold; comments dropped; markers cut. */
	{
		struct spawn_spec	 s = spec_make(SPAWN_COMMAND,
		    PERM_WORKSPACE_WRITE);
		struct macos_opts	 o = opts_make(NULL, NULL, NULL);
		struct strv		 argv;

		o.tmpl = ";; a note\n\n(version 1)\n  ; (allow z)\n"
		    "(allow a) ;@write\n"
		    "(allow b) ;@write network\n(allow c) ;@terminal\n"
		    "(allow d (param \"WORKSPACE\"))\n(allow e (param \"TMPDIR\"))";
		strv_init(&argv);
		assert_int_equal(macos_build(&s, &o, &argv, err, sizeof(err)),
		    0);
		assert_string_equal(argv.v[2], "(version 1)\n(allow a)\n"
		    "(allow d (param \"WORKSPACE\"))\n"
		    "(allow e (param \"TMPDIR\"))\n");
		strv_free(&argv);
	}
}

/* The checker accepts a good profile and refuses each kind of bad one. */
static void
test_checker(void **state)
{
	static const char *params[] = { "A", NULL };
	static const char *forbidden[] = { "/Users/a/ws", NULL };
	static const struct {
		const char	*text;
		const char	*want;	/* NULL: accepted */
	} cases[] = {
		{ "(version 1)\n; a (((comment\n(deny default)\n"
		    "(allow file-read* (subpath (param \"A\")))\n"
		    "(allow file-ioctl (require-all (regex #\"^/dev/ttys[0-9]+$\")"
		    " (extension \"x\\\"y\")))\n", NULL },
		{ "(version 1)\n(allow file-read*", "unbalanced \"(\"" },
		{ "(version 1))", "unbalanced \")\"" },
		{ "(version 1)\n(allow frobnicate)", "unknown operation" },
		{ "(version 1)\n(allow file-read* (vnode-type REGULAR-FILE))",
		    "unknown filter" },
		{ "(deny default)", "(version 1)" },
		{ "(version 2)", "(version 1)" },
		{ "", "empty profile" },
		{ "(version 1)\n(import \"system.sb\")", "import" },
		{ "(version 1)\n(define x 1)", "unknown form" },
		{ "(version 1)\n(allow)", "without an operation" },
		{ "(version 1)\nallow", "atom at the top level" },
		{ "(version 1)\n(allow file-read* \"x\")", "atom where a filter" },
		{ "(version 1)\n(allow file-read* (literal \"/x))",
		    "unterminated string" },
		{ "(version 1)\n(allow file-write* (subpath \"/Users/a/ws\"))",
		    "must come in as a parameter" },
		{ "(version 1)\n(allow file-write* (regex #\"^/Users/a/ws/\"))",
		    "must come in as a parameter" },
		{ "(version 1)\n(allow file-read* (subpath (param \"B\")))",
		    "parameter \"B\" is not passed" },
		{ "(version 1)\n(allow file-read* (subpath (literal \"x\")))",
		    "only (param) may nest" },
		{ "(version 1)\n(allow file-read* (literal))", "without an argument" },
	};
	char	err[256];
	size_t	i;
	int	rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		rc = sbpl_check(cases[i].text, params, forbidden, err,
		    sizeof(err));
		if (cases[i].want == NULL) {
			if (rc != 0)
				fail_msg("case %zu refused: %s", i, err);
			continue;
		}
		if (rc != -1)
			fail_msg("case %zu accepted", i);
		if (strstr(err, cases[i].want) == NULL)
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err,
			    cases[i].want);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_template_ok),
		cmocka_unit_test(test_command_read_only),
		cmocka_unit_test(test_command_write),
		cmocka_unit_test(test_terminal),
		cmocka_unit_test(test_network),
		cmocka_unit_test(test_writable_hidden),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_template_errors),
		cmocka_unit_test(test_checker),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
