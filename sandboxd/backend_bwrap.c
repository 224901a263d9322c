/*
 * The Linux backend: the bubblewrap command line for one approved spawn.
 * Every flag carries its reason. Nothing here runs anything; spawn.c execs
 * what this builds, and tests compare it with golden files.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxd.h"

/* System directories that merged-/usr systems keep as symlinks. */
static const char *const bwrap_usr_links[] = {
	"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL
};

/*
 * The parts of /etc that programs need to start and to name things; not
 * the rest (shadow, ssh keys, service configuration), and not the host's
 * passwd and group: the sandbox gets its own (passwd.c).
 */
static const char *const bwrap_etc[] = {
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/alternatives", "/etc/nsswitch.conf",
	"/etc/localtime", "/etc/bash.bashrc", "/etc/inputrc", "/etc/terminfo",
	"/etc/mime.types", "/etc/python3", "/etc/python3.11", "/etc/ssl",
	"/etc/ca-certificates", "/etc/profile", "/etc/host.conf", "/etc/gai.conf",
	"/etc/protocols", "/etc/services", "/etc/magic", NULL
};

/* Name resolution, only when the profile has a network. */
static const char *const bwrap_etc_net[] = {
	"/etc/resolv.conf", "/etc/hosts", NULL
};

/*
 * The read-only system mounts of a root ("" on the host): which /usr
 * links are links and which /etc files exist. Looked up once, not for
 * every spawn (some 30 lstat and access calls on a hot path); a change of
 * the host's layout shows after a restart of sandboxd.
 */
static struct {
	char		root[256];
	int		done;
	struct strv	sys;	/* /usr links and /etc for every profile */
	struct strv	net;	/* /etc for name resolution, with a network */
} bwrap_plan;

/* --ro-bind each of paths that exists under root. */
static void
bwrap_ro_existing(struct strv *v, const char *root, const char *const *paths)
{
	char	path[4096];

	for (; *paths != NULL; paths++) {
		snprintf(path, sizeof(path), "%s%s", root, *paths);
		if (access(path, F_OK) == 0) {
			strv_add(v, "--ro-bind");
			strv_add(v, *paths);
			strv_add(v, *paths);
		}
	}
}

/* Fill bwrap_plan for root, unless it holds that root's plan already. */
static void
bwrap_system(const char *root)
{
	const char *const	*p;
	struct stat		 st;
	char			 path[4096], target[256];
	ssize_t			 n;

	if (bwrap_plan.done && strcmp(bwrap_plan.root, root) == 0)
		return;
	if (bwrap_plan.done) {
		strv_free(&bwrap_plan.sys);
		strv_free(&bwrap_plan.net);
	}
	strv_init(&bwrap_plan.sys);
	strv_init(&bwrap_plan.net);
	snprintf(bwrap_plan.root, sizeof(bwrap_plan.root), "%s", root);
	bwrap_plan.done = 1;
	for (p = bwrap_usr_links; *p != NULL; p++) {
		snprintf(path, sizeof(path), "%s%s", root, *p);
		if (lstat(path, &st) == -1)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(path, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			strv_add(&bwrap_plan.sys, "--symlink");
			strv_add(&bwrap_plan.sys, target);
			strv_add(&bwrap_plan.sys, *p);
		} else {
			strv_add(&bwrap_plan.sys, "--ro-bind");
			strv_add(&bwrap_plan.sys, *p);
			strv_add(&bwrap_plan.sys, *p);
		}
	}
	bwrap_ro_existing(&bwrap_plan.sys, root, bwrap_etc);
	bwrap_ro_existing(&bwrap_plan.net, root, bwrap_etc_net);
}

#define BWRAP_TMP_SIZE	"268435456"	/* 256 MiB of tmpfs for /tmp */

/*
 * The allowlist profiles' environment: every tool that honours a proxy
 * variable goes through the bridge; loopback stays direct.
 */
static const char *const bwrap_env_proxy[] = {
	"HTTP_PROXY", EGRESS_PROXY_URL,
	"HTTPS_PROXY", EGRESS_PROXY_URL,
	"http_proxy", EGRESS_PROXY_URL,
	"https_proxy", EGRESS_PROXY_URL,
	"NO_PROXY", EGRESS_NO_PROXY,
	"no_proxy", EGRESS_NO_PROXY,
	"HOSTGATE_EGRESS", "proxy",
	NULL
};

/*
 * Append the environment: PATH, HOME, TERM, LANG, TMPDIR, USER, LOGNAME,
 * HOSTGATE_MODE, extras. HOME and USER are what /etc/passwd says.
 */
static void
bwrap_env(const struct spawn_spec *s, struct strv *a)
{
	char *const		*e;
	const char *const	*p;
	const char		*eq;
	char			 name[128];

	/* Nothing of sandboxd's environment crosses into the sandbox. */
	strv_add(a, "--clearenv");
	strv_add(a, "--setenv");
	strv_add(a, "PATH");
	strv_add(a, "/usr/local/bin:/usr/bin:/bin");
	strv_add(a, "--setenv");
	strv_add(a, "HOME");
	strv_add(a, s->workspace);
	strv_add(a, "--setenv");
	strv_add(a, "TERM");
	strv_add(a, s->term != NULL ? s->term : "dumb");
	strv_add(a, "--setenv");
	strv_add(a, "LANG");
	strv_add(a, "C.UTF-8");
	strv_add(a, "--setenv");
	strv_add(a, "TMPDIR");
	strv_add(a, "/tmp");
	strv_add(a, "--setenv");
	strv_add(a, "USER");
	strv_add(a, s->user);
	strv_add(a, "--setenv");
	strv_add(a, "LOGNAME");
	strv_add(a, s->user);
	strv_add(a, "--setenv");
	strv_add(a, "HOSTGATE_MODE");
	strv_add(a, "sandbox");
	for (e = s->env; e != NULL && *e != NULL; e++) {
		if ((eq = strchr(*e, '=')) == NULL ||
		    (size_t)(eq - *e) >= sizeof(name))
			continue;	/* brokerd validated; be safe anyway */
		memcpy(name, *e, eq - *e);
		name[eq - *e] = '\0';
		strv_add(a, "--setenv");
		strv_add(a, name);
		strv_add(a, eq + 1);
	}
	/* Last, so that no extra variable points the tools elsewhere. */
	if (perm_allowlist(s->perm))
		for (p = bwrap_env_proxy; *p != NULL; p += 2) {
			strv_add(a, "--setenv");
			strv_add(a, p[0]);
			strv_add(a, p[1]);
		}
}

/* Check what the argv is built from; -1 with err if it cannot be built. */
static int
bwrap_check(const struct spawn_spec *s, char *err, size_t errsz)
{
	if (path_check("workspace", s->workspace, err, errsz) == -1 ||
	    path_check("cwd", s->cwd, err, errsz) == -1)
		return -1;
	if (strncmp(s->cwd, s->workspace, strlen(s->workspace)) != 0 ||
	    (s->cwd[strlen(s->workspace)] != '\0' &&
	    s->cwd[strlen(s->workspace)] != '/')) {
		snprintf(err, errsz, "cwd is outside the workspace");
		return -1;
	}
	if (s->argv == NULL || s->argv[0] == NULL) {
		snprintf(err, errsz, "nothing to run");
		return -1;
	}
	if (s->passwd == NULL || s->group == NULL || s->mailname == NULL) {
		snprintf(err, errsz, "no /etc/passwd for the sandbox");
		return -1;
	}
	if (path_check("passwd", s->passwd, err, errsz) == -1 ||
	    path_check("group", s->group, err, errsz) == -1 ||
	    path_check("mailname", s->mailname, err, errsz) == -1)
		return -1;
	if (perm_allowlist(s->perm) && (s->egress_bridge == NULL ||
	    s->egress_sock == NULL ||
	    path_check("egress bridge", s->egress_bridge, err, errsz) == -1 ||
	    path_check("egress socket", s->egress_sock, err, errsz) == -1)) {
		if (s->egress_bridge == NULL || s->egress_sock == NULL)
			snprintf(err, errsz, "the %s profile needs the egress "
			    "bridge and socket", perm_name(s->perm));
		return -1;
	}
	return 0;
}

/*
 * Append the namespaces the sandbox gets, the fds bwrap synchronises on
 * with sandboxd, its host name, and the capabilities it drops.
 */
static void
bwrap_namespaces(const struct spawn_spec *s, struct strv *a)
{
	/* Namespaces: own users, pids, IPC, hostname, cgroup view, network. */
	strv_add(a, "--unshare-user");
	strv_add(a, "--unshare-pid");
	strv_add(a, "--unshare-ipc");
	strv_add(a, "--unshare-uts");
	strv_add(a, "--unshare-cgroup");
	/* Always a network namespace: only loopback, never the host's. */
	strv_add(a, "--unshare-net");
	/*
	 * No user namespaces inside: the kernel's largest attack surface. The
	 * seccomp policy refuses them in every profile; bwrap's own switch
	 * adds a nested namespace that slirp4netns could not join, so the
	 * network profile relies on seccomp alone (the probe checks it).
	 */
	if (s->perm != PERM_WORKSPACE_WRITE_NET) {
		strv_add(a, "--disable-userns");
		/*
		 * The allowlist profiles: sandboxd's fds 4, 5 (spawn.c):
		 * bwrap reports its pid and waits while the sandbox's network
		 * counters are opened, to audit the attempts past the proxy.
		 */
		if (perm_allowlist(s->perm)) {
			strv_add(a, "--info-fd");
			strv_add(a, "4");
			strv_add(a, "--block-fd");
			strv_add(a, "5");
		}
	} else {
		/*
		 * sandboxd's fds 4, 5, 6 (spawn.c): bwrap reports its pid, then
		 * waits while sandboxd maps its user namespace, then waits
		 * again while slirp4netns brings the network up.
		 */
		strv_add(a, "--info-fd");
		strv_add(a, "4");
		strv_add(a, "--userns-block-fd");
		strv_add(a, "5");
		strv_add(a, "--block-fd");
		strv_add(a, "6");
	}
	strv_add(a, "--hostname");
	strv_add(a, SANDBOX_HOSTNAME);
	/* No capabilities, not even inside the user namespace. */
	strv_add(a, "--cap-drop");
	strv_add(a, "ALL");
}

/* Append the mounts: the system read-only, /proc, /dev, /tmp, workspace. */
static void
bwrap_mounts(const struct spawn_spec *s, const char *root, struct strv *a)
{
	size_t	i;

	/* The system, read-only. */
	strv_add(a, "--ro-bind");
	strv_add(a, "/usr");
	strv_add(a, "/usr");
	bwrap_system(root);
	for (i = 0; i < bwrap_plan.sys.n; i++)
		strv_add(a, bwrap_plan.sys.v[i]);
	if (s->perm == PERM_WORKSPACE_WRITE_NET)
		for (i = 0; i < bwrap_plan.net.n; i++)
			strv_add(a, bwrap_plan.net.v[i]);
	/*
	 * The user's uid and gid by name (whoami, the prompt, git's default
	 * identity): sandboxd's files, which the user cannot write.
	 */
	strv_add(a, "--ro-bind");
	strv_add(a, s->passwd);
	strv_add(a, "/etc/passwd");
	strv_add(a, "--ro-bind");
	strv_add(a, s->group);
	strv_add(a, "/etc/group");
	/* The host part of git's default e-mail address: user@hostgate. */
	strv_add(a, "--ro-bind");
	strv_add(a, s->mailname);
	strv_add(a, "/etc/mailname");
	/* Its own /proc (of its own pid namespace) and a minimal /dev. */
	strv_add(a, "--proc");
	strv_add(a, "/proc");
	strv_add(a, "--dev");
	strv_add(a, "/dev");
	/* A private, bounded /tmp; /run and /var exist but are empty. */
	strv_add(a, "--size");
	strv_add(a, BWRAP_TMP_SIZE);
	strv_add(a, "--tmpfs");
	strv_add(a, "/tmp");
	strv_add(a, "--dir");
	strv_add(a, "/run");
	strv_add(a, "--dir");
	strv_add(a, "/var/tmp");
	/* The workspace, last, so that it shows through /tmp if under it. */
	strv_add(a, perm_read_only(s->perm) ? "--ro-bind" : "--bind");
	strv_add(a, s->workspace);
	strv_add(a, s->workspace);
	/*
	 * The allowlist profiles: no route out (the network namespace has
	 * loopback alone, no /etc/resolv.conf or /etc/hosts); the bridge,
	 * read-only, and the spawn's own socket to the egress proxy.
	 */
	if (perm_allowlist(s->perm)) {
		strv_add(a, "--ro-bind");
		strv_add(a, s->egress_bridge);
		strv_add(a, EGRESS_BRIDGE_IN);
		strv_add(a, "--bind");
		strv_add(a, s->egress_sock);
		strv_add(a, EGRESS_SOCK_IN);
	}
}

/*
 * Build the bwrap argv for a sandboxed spawn. root is "" normally; tests
 * point it at a fake tree so that which /etc files exist is fixed.
 */
int
bwrap_build(const struct spawn_spec *s, const char *bwrap, const char *root,
    struct strv *a, char *err, size_t errsz)
{
	const char *const	*p;

	if (bwrap_check(s, err, errsz) == -1)
		return -1;
	strv_add(a, bwrap);
	/* The sandbox dies with sandboxd instead of outliving it. */
	strv_add(a, "--die-with-parent");
	bwrap_namespaces(s, a);
	bwrap_mounts(s, root, a);
	/* What a caller adds: WSL2's masks, the probe's script. */
	for (p = (const char *const *)s->extra; p != NULL && *p != NULL; p++)
		strv_add(a, *p);
	/* bwrap's root is a tmpfs: nothing but the mounts above is writable. */
	strv_add(a, "--remount-ro");
	strv_add(a, "/");
	strv_add(a, "--chdir");
	strv_add(a, s->cwd);
	bwrap_env(s, a);
	/*
	 * Commands get a session of their own, so TIOCSTI has no terminal to
	 * push into; terminals keep their pty as controlling terminal and the
	 * seccomp policy refuses TIOCSTI and TIOCLINUX.
	 */
	if (s->kind == SPAWN_COMMAND)
		strv_add(a, "--new-session");
	if (s->seccomp_fd >= 0) {
		strv_add(a, "--seccomp");
		strv_addf(a, "%d", s->seccomp_fd);
	}
	strv_add(a, "--");
	/*
	 * The bridge listens on loopback, forks its relay and execs the
	 * command: the command keeps its pid, terminal and exit status.
	 */
	if (perm_allowlist(s->perm)) {
		strv_add(a, EGRESS_BRIDGE_IN);
		strv_add(a, EGRESS_PORT);
		strv_add(a, EGRESS_SOCK_IN);
		strv_add(a, "--");
	}
	for (p = (const char *const *)s->argv; *p != NULL; p++)
		strv_add(a, *p);
	return 0;
}
