/*
 * Unit tests for sandboxd/backend_wsl.c: WSL2 detection against fake /proc
 * trees, the hardening arguments and the wsl.exe launcher line against
 * golden files (tests/unit/golden/wsl_*; HG_UPDATE_GOLDEN=1 rewrites them),
 * and refusal of hostile names and paths.
 */
#include <sys/stat.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../sandboxd/sandboxd.h"
#include "golden.h"

#define WS	"/home/hg/workspaces/alice"

/*
 * A WSL2 mount table: the root, WSL's own mounts, drives under /mnt, a
 * drive under another automount root, a virtiofs drive with a space in its
 * mount point, and the GPU driver share (not a drive).
 */
static const char mountinfo_wsl2[] =
    "22 1 8:48 / / rw,relatime - ext4 /dev/sdd rw,discard,errors=remount-ro\n"
    "60 22 0:52 / /mnt/wsl rw,relatime shared:1 - tmpfs none rw\n"
    "61 22 0:53 / /mnt/wslg rw,relatime - tmpfs none rw\n"
    "80 22 0:60 / /mnt/c rw,noatime - 9p C:\\134 rw,dirsync,aname=drvfs;"
    "path=C:\\;uid=1000;gid=1000;symlinkroot=/mnt/,mfsymlinks,cache=5,"
    "access=client,msize=65536,trans=fd,rfd=5,wfd=5\n"
    "81 22 0:61 / /mnt/d rw,noatime - 9p D:\\134 rw,aname=drvfs;path=D:\\;"
    "uid=1000\n"
    "82 22 0:62 / /win/e rw,noatime shared:5 master:3 - 9p drvfs "
    "rw,aname=drvfs;path=E:\\;uid=1000\n"
    "83 22 0:63 / /data/Windows\\040Share rw,noatime - virtiofs drvfsaF rw\n"
    "84 22 0:64 / /usr/lib/wsl/drivers ro,nosuid,nodev,noatime - 9p drivers "
    "ro,dirsync,aname=drivers;fmask=222;dmask=222\n";





/* Create root/rel with its parents; content NULL makes a directory. */
static void
put(const char *root, const char *rel, const char *content)
{
	char	 path[PATH_MAX], *p;
	FILE	*f;

	snprintf(path, sizeof(path), "%s%s", root, rel);
	for (p = path + strlen(root); *p == '/' &&
	    (p = strchr(p + 1, '/')) != NULL;) {
		*p = '\0';
		if (mkdir(path, 0755) == -1 && errno != EEXIST)
			fail_msg("mkdir %s: %s", path, strerror(errno));
		*p = '/';
	}
	if (content == NULL) {
		if (mkdir(path, 0755) == -1 && errno != EEXIST)
			fail_msg("mkdir %s: %s", path, strerror(errno));
		return;
	}
	assert_non_null(f = fopen(path, "w"));
	assert_true(fputs(content, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* A fresh fake root per test, removed afterwards. */
static int
setup_root(void **state)
{
	char	*dir;

	if ((dir = strdup("/tmp/hg-test-wsl.XXXXXX")) == NULL ||
	    mkdtemp(dir) == NULL)
		return -1;
	*state = dir;
	return 0;
}

static int
teardown_root(void **state)
{
	nftw(*state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(*state);
	return 0;
}

/* One fake system and what detection must say of it. */
struct detect_case {
	const char	*osrelease;	/* NULL: absent */
	const char	*version;	/* /proc/version, NULL: absent */
	int		 interop;	/* binfmt_misc/WSLInterop present */
	int		 runwsl;	/* /run/WSL present */
	int		 want;
	const char	*why;
};

static const struct detect_case detect_cases[] = {
	{ "5.15.153.1-microsoft-standard-WSL2\n", NULL, 1, 1, 1,
	    "WSL2 (kernel \"5.15.153.1-microsoft-standard-WSL2\"); interop: "
	    "enabled, will be blocked" },
	{ "4.19.128-microsoft-standard\n", NULL, 0, 0, 1,
	    "interop: appears disabled" },
	{ "4.4.0-19041-Microsoft\n", NULL, 1, 1, 0, "WSL1 (kernel" },
	{ "6.1.0-18-amd64\n", "Linux version 6.1.0-18-amd64\n", 0, 0, 0,
	    "not WSL (kernel \"6.1.0-18-amd64\")" },
	{ "6.6.36-custom\n", NULL, 1, 0, 1, "WSL2 with a custom kernel" },
	{ "6.6.36-custom\n", NULL, 0, 1, 1, "/run/WSL present" },
	{ NULL, "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@b) "
	    "(gcc (GCC) 11.2.0) #1 SMP\n", 0, 0, 1, "WSL2 (kernel \"Linux "
	    "version 5.15" },
	{ NULL, "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com)"
	    " (gcc version 5.4.0 (GCC) ) #1237-Microsoft\n", 0, 0, 0, "WSL1" },
	{ NULL, NULL, 0, 0, 0, "cannot read /proc/sys/kernel/osrelease nor "
	    "/proc/version" },
	{ "", NULL, 0, 0, 0, "cannot read" },
	{ "6.1.0\x1b[31m-microsoft\n", NULL, 0, 0, 1, "6.1.0\\x1b[31m" },
};

/* Detection against each fake system, in its own fresh tree. */
static void
test_detect(void **state)
{
	const struct detect_case	*c;
	char				 root[PATH_MAX], why[512];
	size_t				 i;
	int				 got;

	for (i = 0; i < sizeof(detect_cases) / sizeof(detect_cases[0]); i++) {
		c = &detect_cases[i];
		snprintf(root, sizeof(root), "%s/%zu", (char *)*state, i);
		put(root, "", NULL);
		if (c->osrelease != NULL)
			put(root, "/proc/sys/kernel/osrelease", c->osrelease);
		if (c->version != NULL)
			put(root, "/proc/version", c->version);
		if (c->interop)
			put(root, "/proc/sys/fs/binfmt_misc/WSLInterop",
			    "enabled\ninterpreter /init\nflags: PF\n");
		if (c->runwsl)
			put(root, "/run/WSL", NULL);
		why[0] = '\0';
		got = wsl_detect(root, why, sizeof(why));
		if (got != c->want || strstr(why, c->why) == NULL)
			fail_msg("case %zu: %d \"%s\", want %d \"%s\"", i, got,
			    why, c->want, c->why);
		assert_null(strchr(why, '\x1b'));
	}
	/* The real system: no crash, a reason either way. */
	why[0] = '\0';
	got = wsl_detect("", why, sizeof(why));
	assert_true(got == 0 || got == 1);
	assert_true(why[0] != '\0');
}

/* A sandboxed command of alice's. */
static struct spawn_spec
spec_make(enum permission perm, const char *workspace)
{
	static char		*argv[] = { "/bin/true", NULL };
	struct spawn_spec	 s;

	memset(&s, 0, sizeof(s));
	s.kind = SPAWN_COMMAND;
	s.mode = MODE_SANDBOX;
	s.perm = perm;
	s.user = "alice";
	s.workspace = workspace;
	s.cwd = workspace;
	s.argv = argv;
	s.seccomp_fd = -1;
	return s;
}

/* Index of the pair a b in sv, or -1. */
static long
strv_pair(const struct strv *sv, const char *a, const char *b)
{
	size_t	i;

	for (i = 0; i + 1 < sv->n; i++)
		if (strcmp(sv->v[i], a) == 0 && strcmp(sv->v[i + 1], b) == 0)
			return (long)i;
	return -1;
}

/* The hardening arguments, writable and read-only, against goldens. */
static void
test_harden_golden(void **state)
{
	static const struct {
		enum permission	 perm;
		const char	*golden;
	} cases[] = {
		{ PERM_WORKSPACE_WRITE, "wsl_harden_write.argv" },
		{ PERM_READ_ONLY, "wsl_harden_read_only.argv" },
	};
	struct spawn_spec	 s;
	struct strv		 extra;
	char			 err[512], *line;
	size_t			 i;

	put(*state, "/proc/self/mountinfo", mountinfo_wsl2);
	for (i = 0; i < 2; i++) {
		s = spec_make(cases[i].perm, WS);
		strv_init(&extra);
		if (wsl_harden(&s, *state, "/mnt/c/Users/dev/src::/mnt/d/data",
		    &extra, err, sizeof(err)) != 0)
			fail_msg("wsl_harden: %s", err);
		line = golden_line(&extra);
		golden_check(cases[i].golden, line);
		free(line);

		assert_true(strv_pair(&extra, "--tmpfs", "/run/WSL") >= 0);
		assert_true(strv_pair(&extra, "--tmpfs", "/mnt") >= 0);
		/* Drives outside /mnt are found and masked; others are not. */
		assert_true(strv_pair(&extra, "--tmpfs", "/win/e") >= 0);
		assert_true(strv_pair(&extra, "--tmpfs",
		    "/data/Windows Share") >= 0);
		assert_true(strv_pair(&extra, "--tmpfs", "/mnt/c") < 0);
		assert_true(strv_pair(&extra, "--tmpfs",
		    "/usr/lib/wsl/drivers") < 0);
		/* Allowlisted paths come back after the mask. */
		assert_true(strv_pair(&extra, cases[i].perm == PERM_READ_ONLY ?
		    "--ro-bind-try" : "--bind-try", "/mnt/d/data") >
		    strv_pair(&extra, "--tmpfs", "/mnt"));
		assert_true(strv_pair(&extra, "--unsetenv", "WSL_INTEROP") >= 0);
		assert_true(strv_pair(&extra, "--unsetenv", "WSLENV") >= 0);
		/* The workspace is not under a mask: no second bind. */
		assert_true(strv_pair(&extra, "--bind", WS) < 0);
		strv_free(&extra);
	}
}

/* A workspace on a Windows drive is bound again over the masks. */
static void
test_harden_workspace_on_drive(void **state)
{
	static const char *const spaces[] = { "/mnt/c/hg/alice",
	    "/win/e/hg/alice", NULL };
	struct spawn_spec	 s;
	struct strv		 extra;
	char			 err[512];
	size_t			 i;

	put(*state, "/proc/self/mountinfo", mountinfo_wsl2);
	for (i = 0; spaces[i] != NULL; i++) {
		s = spec_make(PERM_WORKSPACE_WRITE, spaces[i]);
		strv_init(&extra);
		assert_int_equal(wsl_harden(&s, *state, NULL, &extra, err,
		    sizeof(err)), 0);
		assert_true(strv_pair(&extra, "--bind", spaces[i]) >
		    strv_pair(&extra, "--tmpfs", "/win/e"));
		assert_true(strv_pair(&extra, "--tmpfs", "/mnt") >= 0);
		strv_free(&extra);
	}
	s = spec_make(PERM_READ_ONLY, spaces[0]);
	strv_init(&extra);
	assert_int_equal(wsl_harden(&s, *state, NULL, &extra, err,
	    sizeof(err)), 0);
	assert_true(strv_pair(&extra, "--ro-bind", spaces[0]) > 0);
	strv_free(&extra);
}

/* Hostile allowlists, environments and mount tables are refused. */
static void
test_harden_refusals(void **state)
{
	static const struct {
		const char	*mnt;
		const char	*env;
		const char	*want;
	} cases[] = {
		{ "/mnt/c/../etc", NULL, "not canonical" },
		{ "/mnt/c/x:/home/alice", NULL, "not below /mnt" },
		{ "/mnt", NULL, "not below /mnt" },
		{ "/mntx/c", NULL, "not below /mnt" },
		{ "/mnt/wslg/runtime-dir", NULL, "WSL's own" },
		{ "/mnt/wsl", NULL, "WSL's own" },
		{ "/mnt/c/a\"b", NULL, "quote" },
		{ "/mnt/c/a\nb", NULL, "control character" },
		{ "/mnt/c/a/", NULL, "trailing slash" },
		{ "mnt/c", NULL, "absolute" },
		{ NULL, "WSL_INTEROP=/run/WSL/1_interop", "WSL_INTEROP may not" },
		{ NULL, "WSLENV=PATH/l", "WSLENV may not" },
		{ NULL, "DISPLAY=:0", "DISPLAY may not" },
	};
	struct spawn_spec	 s;
	struct strv		 extra;
	char			 err[512], many[40 * 12] = "";
	char			*env[2] = { NULL, NULL };
	size_t			 i;

	put(*state, "/proc/self/mountinfo", mountinfo_wsl2);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		s = spec_make(PERM_WORKSPACE_WRITE, WS);
		env[0] = (char *)cases[i].env;
		s.env = env;
		strv_init(&extra);
		err[0] = '\0';
		if (wsl_harden(&s, *state, cases[i].mnt, &extra, err,
		    sizeof(err)) != -1)
			fail_msg("case %zu accepted", i);
		if (strstr(err, cases[i].want) == NULL)
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err,
			    cases[i].want);
		assert_int_equal(extra.n, 0);
		strv_free(&extra);
	}

	/* A name that merely starts like one is fine. */
	s = spec_make(PERM_WORKSPACE_WRITE, WS);
	env[0] = "WSL_INTEROPERABLE=1";
	s.env = env;
	strv_init(&extra);
	assert_int_equal(wsl_harden(&s, *state, NULL, &extra, err,
	    sizeof(err)), 0);
	strv_free(&extra);

	/* Too many paths. */
	s = spec_make(PERM_WORKSPACE_WRITE, WS);
	for (i = 0; i < 33; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many),
		    "%s/mnt/c/p%zu", i ? ":" : "", i);
	strv_init(&extra);
	assert_int_equal(wsl_harden(&s, *state, many, &extra, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "more than 32"));
	strv_free(&extra);
}

/* Without a mount table, or with a drive that cannot be masked: no spawn. */
static void
test_harden_mountinfo(void **state)
{
	struct spawn_spec	 s = spec_make(PERM_WORKSPACE_WRITE, WS);
	struct strv		 extra;
	char			 err[512];

	strv_init(&extra);
	assert_int_equal(wsl_harden(&s, *state, NULL, &extra, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot read /proc/self/mountinfo"));
	put(*state, "/proc/self/mountinfo", "22 1 8:48 / / rw - ext4 /dev/sdd "
	    "rw\n90 22 0:70 / /win/a\\134b rw - 9p drvfs rw,aname=drvfs\n");
	assert_int_equal(wsl_harden(&s, *state, NULL, &extra, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "Windows drive mount point"));
	assert_non_null(strstr(err, "backslash"));
	/* Short and odd lines are skipped, not misread. */
	put(*state, "/proc/self/mountinfo", "garbage\n1 2 3\n"
	    "1 2 3 4 /x 6 - \n91 22 0:71 / /win/f rw - drvfs F: rw\n");
	assert_int_equal(wsl_harden(&s, *state, NULL, &extra, err,
	    sizeof(err)), 0);
	assert_true(strv_pair(&extra, "--tmpfs", "/win/f") >= 0);
	assert_true(strv_pair(&extra, "--tmpfs", "/x") < 0);
	strv_free(&extra);
}

/* The launcher line for a fixed bwrap command line, against a golden. */
static void
test_launcher_golden(void **state)
{
	static const char *const bwrap[] = { "/usr/bin/bwrap",
	    "--die-with-parent", "--unshare-all", "--tmpfs", "/run/WSL",
	    "--chdir", WS, "--", "/bin/sh", "-c", "echo 'hi there'", NULL };
	struct strv	 b, out;
	char		 err[512], *line;
	size_t		 i;

	strv_init(&b);
	for (i = 0; bwrap[i] != NULL; i++)
		strv_add(&b, bwrap[i]);
	strv_init(&out);
	if (wsl_launcher_argv("Ubuntu-22.04", WS, &b, &out, err,
	    sizeof(err)) != 0)
		fail_msg("wsl_launcher_argv: %s", err);
	assert_string_equal(out.v[0], "wsl.exe");
	assert_string_equal(out.v[5], "--exec");
	assert_int_equal(out.n, 6 + b.n);
	line = golden_line(&out);
	golden_check("wsl_launcher.argv", line);
	free(line);
	strv_free(&out);
	strv_free(&b);
}

/* Hostile distro names and directories, and a bad bwrap line. */
static void
test_launcher_refusals(void **state)
{
	static const struct {
		const char	*distro;
		const char	*dir;
		const char	*want;
	} cases[] = {
		{ "Ubuntu; calc.exe", WS, "WSL distro \"Ubuntu; calc.exe\"" },
		{ "-d", WS, "WSL distro" },
		{ "--exec", WS, "WSL distro" },
		{ ".hidden", WS, "WSL distro" },
		{ "", WS, "WSL distro" },
		{ "Ubuntu\n", WS, "WSL distro \"Ubuntu\\n\"" },
		{ "Ubu ntu", WS, "WSL distro" },
		{ "Ubuntu\"&calc", WS, "WSL distro" },
		{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		    "aaaa", WS, "WSL distro" },
		{ NULL, WS, "WSL distro" },
		{ "Ubuntu", "../x", "absolute" },
		{ "Ubuntu", "/home/a/../b", "canonical" },
		{ "Ubuntu", "home/a", "absolute" },
		{ "Ubuntu", "/home/a/", "trailing slash" },
		{ "Ubuntu", "C:\\Users", "absolute" },
		{ "Ubuntu", "/home/a\"b", "quote" },
		{ "Ubuntu", NULL, "absolute" },
	};
	struct strv	 b, out;
	char		 err[512];
	size_t		 i;

	strv_init(&b);
	strv_add(&b, "/usr/bin/bwrap");
	strv_init(&out);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		if (wsl_launcher_argv(cases[i].distro, cases[i].dir, &b, &out,
		    err, sizeof(err)) != -1)
			fail_msg("case %zu accepted", i);
		if (strstr(err, cases[i].want) == NULL)
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err,
			    cases[i].want);
		assert_int_equal(out.n, 0);
	}
	/* 64 characters is the limit, and fine. */
	assert_int_equal(wsl_launcher_argv("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", WS, &b, &out, err,
	    sizeof(err)), 0);
	strv_free(&out);
	strv_free(&b);

	/* bwrap must be named by an absolute path; the line not be empty. */
	strv_init(&b);
	strv_init(&out);
	assert_int_equal(wsl_launcher_argv("Ubuntu", WS, &b, &out, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "no bwrap command line"));
	strv_add(&b, "bwrap");
	assert_int_equal(wsl_launcher_argv("Ubuntu", WS, &b, &out, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "absolute"));
	assert_int_equal(out.n, 0);
	strv_free(&out);
	strv_free(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_detect, setup_root,
		    teardown_root),
		cmocka_unit_test_setup_teardown(test_harden_golden, setup_root,
		    teardown_root),
		cmocka_unit_test_setup_teardown(test_harden_workspace_on_drive,
		    setup_root, teardown_root),
		cmocka_unit_test_setup_teardown(test_harden_refusals,
		    setup_root, teardown_root),
		cmocka_unit_test_setup_teardown(test_harden_mountinfo,
		    setup_root, teardown_root),
		cmocka_unit_test(test_launcher_golden),
		cmocka_unit_test(test_launcher_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
