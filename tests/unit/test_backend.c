/*
 * Unit tests of the Linux command lines: bwrap_build (backend_bwrap.c) and
 * the docker runtime's run and exec lines (backend_docker.c), against
 * golden files (tests/unit/golden/bwrap_*, docker_*; HG_UPDATE_GOLDEN=1
 * rewrites them), plus the refusals of hostile paths, and the sandbox's
 * /etc/passwd and /etc/group (passwd.c). A fake root with a
 * fixed set of /etc files and /usr symlinks makes the output independent
 * of the machine.
 */
#include <sys/stat.h>

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

static char	 root[PATH_MAX];
static char	*cmd_argv[] = { "/bin/bash", "-c", "echo 'hi there'; id", NULL };
static char	*env_extra[] = { "FOO=bar baz", NULL };

/* A fake root: merged /usr links and a few /etc entries. */
static int
setup(void **state)
{
	char	path[PATH_MAX + 32];

	snprintf(root, sizeof(root), "/tmp/hg-test-backend-XXXXXX");
	if (mkdtemp(root) == NULL)
		return -1;
	snprintf(path, sizeof(path), "%s/etc", root);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/etc/passwd", root);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof(path), "%s/etc/ld.so.cache", root);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof(path), "%s/etc/resolv.conf", root);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof(path), "%s/bin", root);
	if (symlink("usr/bin", path) == -1)
		return -1;
	snprintf(path, sizeof(path), "%s/lib64", root);
	if (symlink("usr/lib64", path) == -1)
		return -1;
	snprintf(path, sizeof(path), "%s/sbin", root);
	mkdir(path, 0755);	/* a real directory: bound, not linked */
	return 0;
}

static int
teardown(void **state)
{
	char	cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static struct spawn_spec
spec(enum spawn_kind kind, enum permission perm)
{
	struct spawn_spec	s;

	memset(&s, 0, sizeof(s));
	s.kind = kind;
	s.mode = MODE_SANDBOX;
	s.perm = perm;
	s.user = "alice";
	s.workspace = "/srv/hostgate/workspaces/alice";
	s.cwd = "/srv/hostgate/workspaces/alice/src";
	s.argv = cmd_argv;
	s.env = env_extra;
	s.term = kind == SPAWN_TERMINAL ? "xterm-256color" : NULL;
	s.seccomp_fd = 3;
	s.passwd = "/srv/hostgate/workspaces/.etc/alice.passwd";
	s.group = "/srv/hostgate/workspaces/.etc/alice.group";
	s.mailname = "/srv/hostgate/workspaces/.etc/mailname";
	if (perm_allowlist(perm)) {
		s.egress_bridge = "/usr/local/sbin/hg-egress-bridge";
		s.egress_sock = "/run/hostgate/proxy/0123456789abcdef.sock";
	}
	return s;
}

/* Build with bwrap_build and compare with a golden file. */
static void
bwrap_golden(const char *name, const struct spawn_spec *s)
{
	struct strv	 a;
	char		 err[256], *line;

	strv_init(&a);
	assert_int_equal(bwrap_build(s, "/usr/bin/bwrap", root, &a, err,
	    sizeof(err)), 0);
	line = golden_line(&a);
	golden_check(name, line);
	free(line);
	strv_free(&a);
}

/* Whether the vector holds s, and where (-1 when not). */
static int
argv_index(const struct strv *a, const char *s)
{
	size_t	i;

	for (i = 0; i < a->n; i++)
		if (strcmp(a->v[i], s) == 0)
			return (int)i;
	return -1;
}

/* Where s last occurs in the vector (-1 when not). */
static int
argv_last(const struct strv *a, const char *s)
{
	int	i;

	for (i = (int)a->n - 1; i >= 0; i--)
		if (strcmp(a->v[i], s) == 0)
			return i;
	return -1;
}

static void
test_bwrap_goldens(void **state)
{
	struct spawn_spec	s;

	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
	bwrap_golden("bwrap_command_write.argv", &s);
	s = spec(SPAWN_COMMAND, PERM_READ_ONLY);
	bwrap_golden("bwrap_command_read_only.argv", &s);
	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE_NET);
	bwrap_golden("bwrap_command_network.argv", &s);
	s = spec(SPAWN_TERMINAL, PERM_WORKSPACE_WRITE);
	bwrap_golden("bwrap_terminal.argv", &s);
	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE_ALLOW);
	bwrap_golden("bwrap_command_allowlist.argv", &s);
	s = spec(SPAWN_COMMAND, PERM_READ_ONLY_ALLOW);
	bwrap_golden("bwrap_command_read_only_allowlist.argv", &s);
}

/* The value that follows name in a vector of --setenv triples, or NULL. */
static const char *
argv_env(const struct strv *a, const char *name)
{
	const char	*v = NULL;
	size_t		 i;

	for (i = 0; i + 2 < a->n; i++)
		if (strcmp(a->v[i], "--setenv") == 0 &&
		    strcmp(a->v[i + 1], name) == 0)
			v = a->v[i + 2];	/* the last one wins in bwrap */
	return v;
}

/* The allowlist profiles: no route out but the bridge and its socket. */
static void
test_bwrap_allowlist(void **state)
{
	static const char *const proxy_env[] = { "HTTP_PROXY", "HTTPS_PROXY",
	    "http_proxy", "https_proxy", NULL };
	static char		*env_hostile[] = { "http_proxy=http://evil:1",
	    "NO_PROXY=*", NULL };
	const char *const	*v;
	struct spawn_spec	 s;
	struct strv		 a;
	char			 err[256];
	int			 sep, ws, i;

	for (i = 0; i < 2; i++) {
		s = spec(SPAWN_COMMAND, i == 0 ? PERM_WORKSPACE_WRITE_ALLOW :
		    PERM_READ_ONLY_ALLOW);
		s.env = env_hostile;
		strv_init(&a);
		assert_int_equal(bwrap_build(&s, "/usr/bin/bwrap", root, &a,
		    err, sizeof(err)), 0);
		/* Loopback alone, no slirp4netns, no nested namespaces. */
		assert_true(argv_index(&a, "--unshare-net") > 0);
		assert_true(argv_index(&a, "--disable-userns") > 0);
		assert_int_equal(argv_index(&a, "--userns-block-fd"), -1);
		/*
		 * bwrap reports its pid on fd 4 and waits on fd 5 while the
		 * spawner opens the sandbox's network counters (spawner.c).
		 */
		assert_string_equal(a.v[argv_index(&a, "--info-fd") + 1], "4");
		assert_string_equal(a.v[argv_index(&a, "--block-fd") + 1], "5");
		assert_int_equal(argv_index(&a, "/etc/resolv.conf"), -1);
		assert_int_equal(argv_index(&a, "/etc/hosts"), -1);
		/* The workspace rw, or ro for the read-only twin. */
		ws = argv_index(&a, "/srv/hostgate/workspaces/alice");
		assert_string_equal(a.v[ws - 1], i == 0 ? "--bind" :
		    "--ro-bind");
		/* The bridge read-only, the socket at its fixed place. */
		ws = argv_index(&a, "/run/hostgate/hg-egress-bridge");
		assert_string_equal(a.v[ws - 2], "--ro-bind");
		assert_string_equal(a.v[ws - 1],
		    "/usr/local/sbin/hg-egress-bridge");
		ws = argv_index(&a, "/run/hostgate/egress.sock");
		assert_string_equal(a.v[ws - 2], "--bind");
		assert_string_equal(a.v[ws - 1],
		    "/run/hostgate/proxy/0123456789abcdef.sock");
		/* The proxy variables win over the caller's extras. */
		for (v = proxy_env; *v != NULL; v++)
			assert_string_equal(argv_env(&a, *v),
			    "http://127.0.0.1:3128");
		assert_string_equal(argv_env(&a, "NO_PROXY"),
		    "localhost,127.0.0.1,::1");
		assert_string_equal(argv_env(&a, "no_proxy"),
		    "localhost,127.0.0.1,::1");
		assert_string_equal(argv_env(&a, "HOSTGATE_EGRESS"), "proxy");
		/* The argv: the bridge, then the command verbatim. */
		sep = argv_index(&a, "--");
		assert_string_equal(a.v[sep + 1],
		    "/run/hostgate/hg-egress-bridge");
		assert_string_equal(a.v[sep + 2], "3128");
		assert_string_equal(a.v[sep + 3], "/run/hostgate/egress.sock");
		assert_string_equal(a.v[sep + 4], "--");
		assert_string_equal(a.v[sep + 5], cmd_argv[0]);
		assert_string_equal(a.v[sep + 7], cmd_argv[2]);
		assert_null(a.v[sep + 8]);
		strv_free(&a);

		/* Without the bridge or the socket: refused, nothing built. */
		s.egress_sock = NULL;
		strv_init(&a);
		assert_int_equal(bwrap_build(&s, "/usr/bin/bwrap", root, &a,
		    err, sizeof(err)), -1);
		assert_non_null(strstr(err, "needs the egress bridge"));
		assert_int_equal(a.n, 0);
		strv_free(&a);
		s.egress_sock = "/run/hostgate/proxy/../x.sock";
		strv_init(&a);
		assert_int_equal(bwrap_build(&s, "/usr/bin/bwrap", root, &a,
		    err, sizeof(err)), -1);
		assert_int_equal(a.n, 0);
		strv_free(&a);
	}
	/* The other profiles have none of it. */
	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
	strv_init(&a);
	assert_int_equal(bwrap_build(&s, "/usr/bin/bwrap", root, &a, err,
	    sizeof(err)), 0);
	assert_int_equal(argv_index(&a, "/run/hostgate/hg-egress-bridge"), -1);
	assert_null(argv_env(&a, "HTTP_PROXY"));
	strv_free(&a);
}

/* The profile names, both ways. */
static void
test_perm_names(void **state)
{
	static const char *const names[] = { "read-only", "workspace-write",
	    "workspace-write+network", "workspace-write+allowlist",
	    "read-only+allowlist", NULL };
	enum permission	 p;
	int		 i;

	for (i = 0; names[i] != NULL; i++) {
		assert_int_equal(perm_parse(names[i], &p), 0);
		assert_string_equal(perm_name(p), names[i]);
	}
	assert_int_equal(perm_parse("read-only+network", &p), -1);
	assert_int_equal(perm_parse("workspace-write+allowlist ", &p), -1);
	assert_int_equal(perm_parse("", &p), -1);
	assert_int_equal(perm_parse(NULL, &p), -1);
	assert_null(perm_name((enum permission)5));
	assert_true(perm_read_only(PERM_READ_ONLY_ALLOW));
	assert_false(perm_read_only(PERM_WORKSPACE_WRITE_ALLOW));
	assert_true(perm_allowlist(PERM_READ_ONLY_ALLOW));
	assert_false(perm_allowlist(PERM_WORKSPACE_WRITE_NET));
}

/* The properties the goldens stand for, asserted one by one. */
static void
test_bwrap_properties(void **state)
{
	struct spawn_spec	 s;
	struct strv		 a;
	char			 err[256];
	int			 ws, sep, i;

	s = spec(SPAWN_COMMAND, PERM_READ_ONLY);
	strv_init(&a);
	assert_int_equal(bwrap_build(&s, "/usr/bin/bwrap", root, &a, err,
	    sizeof(err)), 0);
	sep = argv_index(&a, "--");
	assert_true(sep > 0);
	/* Every namespace, and the network one always. */
	assert_true(argv_index(&a, "--unshare-net") > 0);
	assert_true(argv_index(&a, "--unshare-user") > 0);
	assert_true(argv_index(&a, "--unshare-pid") > 0);
	assert_true(argv_index(&a, "--die-with-parent") > 0);
	assert_true(argv_index(&a, "--clearenv") > 0);
	assert_true(argv_index(&a, "--new-session") > 0);
	assert_true(argv_index(&a, "--disable-userns") > 0);
	/* Read-only: the workspace is bound read-only, nothing --bind. */
	ws = argv_index(&a, "/srv/hostgate/workspaces/alice");
	assert_true(ws > 0);
	assert_string_equal(a.v[ws - 1], "--ro-bind");
	assert_int_equal(argv_index(&a, "--bind"), -1);
	/* /etc files that exist, and not those that do not. */
	assert_true(argv_index(&a, "/etc/ld.so.cache") > 0);
	assert_int_equal(argv_index(&a, "/etc/nsswitch.conf"), -1);
	/*
	 * sandboxd's passwd, group and mailname, read-only; never the
	 * host's passwd, which the fake root has.
	 */
	i = argv_index(&a, "/etc/passwd");
	assert_true(i > 1);
	assert_string_equal(a.v[i - 2], "--ro-bind");
	assert_string_equal(a.v[i - 1], s.passwd);
	assert_int_equal(argv_index(&a, "/etc/passwd"),
	    argv_last(&a, "/etc/passwd"));
	i = argv_index(&a, "/etc/group");
	assert_true(i > 1);
	assert_string_equal(a.v[i - 2], "--ro-bind");
	assert_string_equal(a.v[i - 1], s.group);
	i = argv_index(&a, "/etc/mailname");
	assert_true(i > 1);
	assert_string_equal(a.v[i - 2], "--ro-bind");
	assert_string_equal(a.v[i - 1], s.mailname);
	/* USER and LOGNAME name the user /etc/passwd names; HOME its home. */
	assert_string_equal(argv_env(&a, "USER"), "alice");
	assert_string_equal(argv_env(&a, "LOGNAME"), "alice");
	assert_string_equal(argv_env(&a, "HOME"), s.workspace);
	/* resolv.conf only with a network. */
	assert_int_equal(argv_index(&a, "/etc/resolv.conf"), -1);
	/* The command, verbatim, after "--". */
	assert_string_equal(a.v[sep + 3], cmd_argv[2]);
	strv_free(&a);

	/* Terminals keep their controlling tty: no --new-session. */
	s = spec(SPAWN_TERMINAL, PERM_WORKSPACE_WRITE);
	strv_init(&a);
	assert_int_equal(bwrap_build(&s, "/usr/bin/bwrap", root, &a, err,
	    sizeof(err)), 0);
	assert_int_equal(argv_index(&a, "--new-session"), -1);
	strv_free(&a);
}

/* Hostile workspace and cwd values are refused, never pasted. */
static void
test_bwrap_hostile(void **state)
{
	static const char *const bad[] = {
		"/srv/ws/../../etc", "relative/path", "/srv/ws/", "/srv//ws",
		"/srv/ws\nx", "/srv/w\"s", "/srv/w's", "/srv/(ws)", "/srv/w\\s",
		"/", "/srv/./ws", NULL
	};
	struct spawn_spec	 s;
	struct strv		 a;
	char			 err[256];
	size_t			 i;

	for (i = 0; bad[i] != NULL; i++) {
		s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
		s.workspace = bad[i];
		s.cwd = bad[i];
		strv_init(&a);
		err[0] = '\0';
		assert_int_equal(bwrap_build(&s, "/usr/bin/bwrap", root, &a,
		    err, sizeof(err)), -1);
		assert_true(err[0] != '\0');
		assert_int_equal(a.n, 0);
		strv_free(&a);
	}
	/* No account files, or a hostile path to one: refused. */
	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
	s.passwd = NULL;
	strv_init(&a);
	assert_int_equal(bwrap_build(&s, "/usr/bin/bwrap", root, &a, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "/etc/passwd"));
	assert_int_equal(a.n, 0);
	strv_free(&a);
	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
	s.group = "/srv/hostgate/workspaces/.etc/../alice/group";
	strv_init(&a);
	assert_int_equal(bwrap_build(&s, "/usr/bin/bwrap", root, &a, err,
	    sizeof(err)), -1);
	assert_int_equal(a.n, 0);
	strv_free(&a);

	/* A cwd outside the workspace, or a sibling sharing its prefix. */
	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
	s.cwd = "/srv/hostgate/workspaces/alice2";
	strv_init(&a);
	assert_int_equal(bwrap_build(&s, "/usr/bin/bwrap", root, &a, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "outside"));
	strv_free(&a);
}

static void
test_docker_goldens(void **state)
{
	struct spawn_spec	 s;
	struct strv		 a;
	char			 err[256], *line;

	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
	strv_init(&a);
	assert_int_equal(docker_create_argv("docker", "debian:12-slim", &s, &a,
	    err, sizeof(err)), 0);
	line = golden_line(&a);
	golden_check("docker_run_write.argv", line);
	free(line);
	strv_free(&a);

	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE_NET);
	strv_init(&a);
	assert_int_equal(docker_create_argv("docker", "debian:12-slim", &s, &a,
	    err, sizeof(err)), 0);
	assert_true(argv_index(&a, "--network=bridge") > 0);
	assert_true(argv_index(&a, "hostgate-alice-net") > 0);
	strv_free(&a);

	s = spec(SPAWN_TERMINAL, PERM_READ_ONLY);
	strv_init(&a);
	assert_int_equal(docker_exec_argv("docker", &s, &a, err, sizeof(err)),
	    0);
	line = golden_line(&a);
	golden_check("docker_exec_terminal.argv", line);
	free(line);
	strv_free(&a);

	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE);
	s.cwd = "/srv/ws/../x";
	strv_init(&a);
	assert_int_equal(docker_exec_argv("docker", &s, &a, err, sizeof(err)),
	    -1);
	strv_free(&a);

	/* The allowlist profiles need the bridge: refused, nothing built. */
	s = spec(SPAWN_COMMAND, PERM_WORKSPACE_WRITE_ALLOW);
	strv_init(&a);
	assert_int_equal(docker_create_argv("docker", "debian:12-slim", &s, &a,
	    err, sizeof(err)), -1);
	assert_string_equal(err, "the workspace-write+allowlist profile is "
	    "not available with the docker runtime");
	assert_int_equal(docker_exec_argv("docker", &s, &a, err, sizeof(err)),
	    -1);
	assert_int_equal(a.n, 0);
	s = spec(SPAWN_TERMINAL, PERM_READ_ONLY_ALLOW);
	assert_int_equal(docker_refuse(&s, err, sizeof(err)), -1);
	assert_string_equal(err, "the read-only+allowlist profile is not "
	    "available with the docker runtime");
	strv_free(&a);
}

/* The sandbox's /etc/passwd and /etc/group, whole. */
static void
test_passwd_format(void **state)
{
	char	pw[2048], gr[2048], err[256];

	assert_int_equal(passwd_format("alice", 1879048192, 1879048192,
	    "/srv/hostgate/workspaces/alice", pw, sizeof(pw), gr, sizeof(gr),
	    err, sizeof(err)), 0);
	assert_string_equal(pw,
	    "root:x:0:0:root:/root:/bin/bash\n"
	    "alice:x:1879048192:1879048192:alice:"
	    "/srv/hostgate/workspaces/alice:/bin/bash\n"
	    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
	assert_string_equal(gr,
	    "root:x:0:\n"
	    "alice:x:1879048192:\n"
	    "nogroup:x:65534:\n");

	/* A mapped account's group differs from its uid. */
	assert_int_equal(passwd_format("bob.smith-2", 1001, 100,
	    "/w/bob.smith-2", pw, sizeof(pw), gr, sizeof(gr), err,
	    sizeof(err)), 0);
	assert_non_null(strstr(pw, "\nbob.smith-2:x:1001:100:bob.smith-2:"
	    "/w/bob.smith-2:/bin/bash\n"));
	assert_non_null(strstr(gr, "\nbob.smith-2:x:100:\n"));

	/* A user called root or nobody is the one account of that name. */
	assert_int_equal(passwd_format("root", 1879048192, 1879048192,
	    "/w/root", pw, sizeof(pw), gr, sizeof(gr), err, sizeof(err)), 0);
	assert_string_equal(pw, "root:x:1879048192:1879048192:root:/w/root:"
	    "/bin/bash\n"
	    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
	assert_string_equal(gr, "root:x:1879048192:\nnogroup:x:65534:\n");
	assert_int_equal(passwd_format("nobody", 1879048192, 1879048192,
	    "/w/nobody", pw, sizeof(pw), gr, sizeof(gr), err, sizeof(err)),
	    0);
	assert_null(strstr(pw, ":65534:"));
	assert_non_null(strstr(gr, "nogroup:x:65534:"));
	assert_int_equal(passwd_format("nogroup", 1879048192, 1879048192,
	    "/w/nogroup", pw, sizeof(pw), gr, sizeof(gr), err, sizeof(err)),
	    0);
	assert_null(strstr(gr, ":65534:"));
}

/*
 * A hostile name or home cannot add a line or a field: every name that
 * is not a user name (as brokerd checks them), and every home with a
 * separator of the format, is refused.
 */
static void
test_passwd_hostile(void **state)
{
	static const char *const names[] = {
		"alice:x:0:0::/:/bin/sh", "alice\nroot", "alice,", "Alice",
		"", "-alice", ".alice", "../alice", "alice/x", "al ice",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "al\x7fice", NULL
	};
	static const char *const homes[] = {
		"/w/a:b", "/w/a\nroot:x:0:0::/:/bin/sh", "/w/a,b", "w/alice",
		"/w/a\tb", NULL
	};
	const char *const	*p;
	char			 pw[2048], gr[2048], err[256];

	for (p = names; *p != NULL; p++) {
		err[0] = '\0';
		assert_int_equal(passwd_format(*p, 1879048192, 1879048192,
		    "/w/alice", pw, sizeof(pw), gr, sizeof(gr), err,
		    sizeof(err)), -1);
		assert_true(err[0] != '\0');
	}
	for (p = homes; *p != NULL; p++)
		assert_int_equal(passwd_format("alice", 1879048192,
		    1879048192, *p, pw, sizeof(pw), gr, sizeof(gr), err,
		    sizeof(err)), -1);
}

/*
 * passwd_ensure writes a user's files 0644 in WORKSPACE_ROOT/.etc, with
 * the mailname, and replaces one that says something else.
 */
static void
test_passwd_ensure(void **state)
{
	struct passwd_files	 f;
	struct config		 conf;
	struct stat		 st;
	char			 dir[PATH_MAX + 16], err[256], *text;
	ino_t			 ino;

	memset(&conf, 0, sizeof(conf));
	conf.workspace_root = root;
	passwd_dir_of(root, dir, sizeof(dir));
	assert_int_equal(mkdir(dir, 0711), 0);
	passwd_init(&conf);
	assert_int_equal(passwd_ensure("alice", 1879048192, 1879048193,
	    "/w/alice", &f, err, sizeof(err)), 0);
	assert_non_null(strstr(f.passwd, "/.etc/alice.passwd"));
	assert_non_null(strstr(f.group, "/.etc/alice.group"));
	assert_non_null(strstr(f.mailname, "/.etc/mailname"));
	assert_int_equal(stat(f.passwd, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	ino = st.st_ino;
	assert_non_null(text = golden_slurp(f.passwd));
	assert_non_null(strstr(text, "\nalice:x:1879048192:1879048193:"));
	free(text);
	assert_non_null(text = golden_slurp(f.group));
	assert_non_null(strstr(text, "\nalice:x:1879048193:\n"));
	free(text);
	assert_non_null(text = golden_slurp(f.mailname));
	assert_string_equal(text, "hostgate\n");
	free(text);

	/* The same again: the file stays as it is. */
	assert_int_equal(passwd_ensure("alice", 1879048192, 1879048193,
	    "/w/alice", &f, err, sizeof(err)), 0);
	assert_int_equal(stat(f.passwd, &st), 0);
	assert_int_equal(st.st_ino, ino);
	/* Another uid (the user deleted and made again): replaced whole. */
	assert_int_equal(passwd_ensure("alice", 1879048195, 1879048195,
	    "/w/alice", &f, err, sizeof(err)), 0);
	assert_non_null(text = golden_slurp(f.passwd));
	assert_non_null(strstr(text, "\nalice:x:1879048195:1879048195:"));
	assert_null(strstr(text, "1879048192"));
	free(text);
	/* A hostile name writes nothing. */
	assert_int_equal(passwd_ensure("../alice", 1879048192, 1879048192,
	    "/w/alice", &f, err, sizeof(err)), -1);
}

/* path_check, the gate of every path. */
static void
test_path_check(void **state)
{
	char	err[256];

	assert_int_equal(path_check("p", "/a/b/c", err, sizeof(err)), 0);
	assert_int_equal(path_check("p", "/a/b/../c", err, sizeof(err)), -1);
	assert_int_equal(path_check("p", "/a/b/..", err, sizeof(err)), -1);
	assert_int_equal(path_check("p", "/a/b/", err, sizeof(err)), -1);
	assert_int_equal(path_check("p", "a/b", err, sizeof(err)), -1);
	assert_int_equal(path_check("p", "/a/`b`", err, sizeof(err)), -1);
	assert_int_equal(path_check("p", "/a/b\x7f", err, sizeof(err)), -1);
	assert_int_equal(path_check("p", "/a/...", err, sizeof(err)), 0);
}

/* strv_join quotes for a shell, so a golden line reads as the command. */
static void
test_strv_join(void **state)
{
	struct strv	 a;
	char		*line;

	strv_init(&a);
	strv_add(&a, "plain");
	strv_add(&a, "two words");
	strv_add(&a, "it's");
	strv_add(&a, "");
	line = strv_join(&a);
	assert_string_equal(line, "plain 'two words' 'it'\\''s' ''");
	free(line);
	strv_free(&a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bwrap_goldens),
		cmocka_unit_test(test_bwrap_properties),
		cmocka_unit_test(test_bwrap_hostile),
		cmocka_unit_test(test_bwrap_allowlist),
		cmocka_unit_test(test_perm_names),
		cmocka_unit_test(test_docker_goldens),
		cmocka_unit_test(test_passwd_format),
		cmocka_unit_test(test_passwd_hostile),
		cmocka_unit_test(test_passwd_ensure),
		cmocka_unit_test(test_path_check),
		cmocka_unit_test(test_strv_join),
	};

	log_init("test_backend", 1);
	log_setlevel(LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, setup, teardown);
}
