/*
 * The sandbox backend, its probe and the command line of each spawn.
 * sandboxd never falls back: when the configured backend cannot run, or a
 * probe inside the real sandbox gets through, sandboxed spawns are refused
 * with the reason and nothing runs unsandboxed instead.
 */
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxd.h"

#define PROBE_TIMEOUT_MS	10000

static struct {
	const char	*name;
	int		 ok;
	char		 reason[1024];
	int64_t		 probed;	/* monotonic ms of the last probe */
	int		 probed_once;
	char		 bwrap[4096];	/* path of bwrap */
	char		 docker[4096];	/* path of the docker CLI */
	char		 bridge[4096];	/* hg-egress-bridge, next to sandboxd */
} backend;

static struct config	*backend_conf;
static struct policy	*backend_policy;

/* What sandboxd last learnt of each container (docker runtime). */
#define BACKEND_CONTAINERS	256
static struct {
	char	name[128];
	char	status[64];	/* running, started, created, failed: ... */
	int64_t	when;		/* wall seconds */
} backend_containers[BACKEND_CONTAINERS];
static int	backend_ncontainers;

/* Remember a container's status. */
static void
backend_container_set(const char *name, const char *status)
{
	int	i;

	for (i = 0; i < backend_ncontainers; i++)
		if (strcmp(backend_containers[i].name, name) == 0)
			break;
	if (i == backend_ncontainers) {
		if (backend_ncontainers == BACKEND_CONTAINERS)
			i = 0;		/* forget the oldest slot */
		else
			backend_ncontainers++;
	}
	snprintf(backend_containers[i].name, sizeof(backend_containers[i].name),
	    "%s", name);
	snprintf(backend_containers[i].status,
	    sizeof(backend_containers[i].status), "%s", status);
	backend_containers[i].when = now_wall_ms() / 1000;
}

/* {"name", "status", "checked"} of a user's container for a profile. */
struct json_object *
backend_container_json(const char *user, enum permission perm)
{
	struct json_object	*o;
	char			 name[128], when[32];
	int			 i;

	if (backend_conf == NULL || backend_conf->runtime != RUNTIME_DOCKER)
		return NULL;
	docker_name(user, perm, name, sizeof(name));
	o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(name));
	for (i = 0; i < backend_ncontainers; i++)
		if (strcmp(backend_containers[i].name, name) == 0)
			break;
	json_object_object_add(o, "status", json_object_new_string(
	    i < backend_ncontainers ? backend_containers[i].status :
	    "unknown"));
	if (i < backend_ncontainers) {
		iso8601(backend_containers[i].when, when);
		json_object_object_add(o, "checked",
		    json_object_new_string(when));
	}
	return o;
}

/*
 * Find prog on sandboxd's PATH at start-up, else in the system
 * directories; NULL when missing. Resolved once: the path is fixed then.
 */
static const char *
backend_which(const char *prog, char *buf, size_t size)
{
	static const char *const dirs[] = { "/usr/bin", "/bin",
	    "/usr/local/bin", "/usr/sbin", "/sbin", NULL };
	const char	*path = getenv("PATH"), *p, *e;
	size_t		 i;

	for (p = path; p != NULL && *p != '\0'; p = *e ? e + 1 : e) {
		e = strchrnul(p, ':');
		if (e == p || *p != '/')
			continue;
		snprintf(buf, size, "%.*s/%s", (int)(e - p), p, prog);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	for (i = 0; dirs[i] != NULL; i++) {
		snprintf(buf, size, "%s/%s", dirs[i], prog);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	buf[0] = '\0';
	return NULL;
}

/*
 * Run argv to completion with a clean environment and no inherited fds
 * (but keep_fd, as fd 3); collect its stdout and stderr into out.
 * Returns its exit status (128+signal when killed), or -1.
 */
static int
backend_run(char *const argv[], int keep_fd, char *out, size_t outsz)
{
	static char *const envp[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8",
	    NULL };
	struct pollfd	pfd;
	sigset_t	none;
	pid_t		pid;
	int		pipefd[2], status, devnull, n, r;
	size_t		len = 0;
	int64_t		deadline = now_mono_ms() + PROBE_TIMEOUT_MS;

	out[0] = '\0';
	if (pipe2(pipefd, O_CLOEXEC) == -1) {
		snprintf(out, outsz, "pipe: %s", strerror(errno));
		return -1;
	}
	switch (pid = fork()) {
	case -1:
		snprintf(out, outsz, "fork: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		return -1;
	case 0:
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		setpgid(0, 0);
		devnull = open("/dev/null", O_RDWR);
		dup2(devnull, STDIN_FILENO);
		dup2(pipefd[1], STDOUT_FILENO);
		dup2(pipefd[1], STDERR_FILENO);
		if (keep_fd != -1) {
			dup2(keep_fd, 3);
			close_range(4, ~0U, 0);
		} else
			close_range(3, ~0U, 0);
		execve(argv[0], argv, envp);
		dprintf(STDERR_FILENO, "exec %s: %s\n", argv[0],
		    strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	pfd.fd = pipefd[0];
	pfd.events = POLLIN;
	for (;;) {
		int	left = (int)(deadline - now_mono_ms());
		char	sink[512];

		if (left <= 0) {
			kill(-pid, SIGKILL);
			snprintf(out + len, outsz - len, " [timed out]");
			break;
		}
		r = poll(&pfd, 1, left);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		if (len + 1 < outsz)
			n = read(pipefd[0], out + len, outsz - len - 1);
		else
			n = read(pipefd[0], sink, sizeof(sink));
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (len + 1 < outsz)
			len += n;
		out[len] = '\0';
	}
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

/* The sandbox must hold: run the probe inside it and see every attack fail. */
static void
backend_probe_bwrap(void)
{
	struct spawn_spec	 s;
	struct passwd_files	 files;
	struct strv		 argv;
	char			 ws[4096], script[4096], pid[16], out[2048];
	char			 err[512], pidns[64], *nl;
	char			*args[] = { "/usr/bin/python3", "-I",
	    "/run/hostgate-probe.py", pid, pidns, NULL };
	ssize_t			 n;
	char			*extra[] = { "--ro-bind", script,
	    "/run/hostgate-probe.py", NULL };
	int			 rc, bpf;

	if (backend.bwrap[0] == '\0') {
		backend.ok = 0;
		snprintf(backend.reason, sizeof(backend.reason),
		    "bwrap is not installed (Debian package bubblewrap)");
		return;
	}
	snprintf(ws, sizeof(ws), "%s/.probe", backend_conf->workspace_root);
	if (mkdir(ws, 0700) == -1 && errno != EEXIST) {
		backend.ok = 0;
		snprintf(backend.reason, sizeof(backend.reason),
		    "cannot create %s: %s", ws, strerror(errno));
		return;
	}
	snprintf(script, sizeof(script), "%s/probe.py",
	    backend_conf->profiles_dir);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if ((n = readlink("/proc/self/ns/pid", pidns, sizeof(pidns) - 1)) < 0)
		n = 0;
	pidns[n] = '\0';

	memset(&s, 0, sizeof(s));
	s.kind = SPAWN_COMMAND;
	s.mode = MODE_SANDBOX;
	s.perm = PERM_WORKSPACE_WRITE;
	s.user = "probe";
	s.workspace = ws;
	s.cwd = ws;
	s.argv = args;
	s.extra = extra;
	if (passwd_ensure(s.user, getuid(), getgid(), ws, &files, err,
	    sizeof(err)) == -1) {
		backend.ok = 0;
		snprintf(backend.reason, sizeof(backend.reason), "%s", err);
		return;
	}
	s.passwd = files.passwd;
	s.group = files.group;
	s.mailname = files.mailname;
	if ((bpf = policy_bpf_fd(backend_policy, err, sizeof(err))) == -1) {
		backend.ok = 0;
		snprintf(backend.reason, sizeof(backend.reason), "%s", err);
		return;
	}
	/* bwrap reads the filter from fd 3 of the child. */
	s.seccomp_fd = 3;
	strv_init(&argv);
	if (bwrap_build(&s, backend.bwrap, "", &argv, err, sizeof(err)) == -1) {
		rc = -1;
		snprintf(out, sizeof(out), "%s", err);
	} else
		rc = backend_run(argv.v, bpf, out, sizeof(out));
	close(bpf);
	strv_free(&argv);
	if (rc == 0 && strstr(out, "PROBE OK") != NULL) {
		backend.ok = 1;
		backend.reason[0] = '\0';
		return;
	}
	backend.ok = 0;
	if ((nl = strrchr(out, '\n')) != NULL && nl[1] == '\0')
		*nl = '\0';
	for (nl = out; (nl = strchr(nl, '\n')) != NULL;)
		*nl = ';';
	snprintf(backend.reason, sizeof(backend.reason),
	    "the sandbox does not hold (probe exit %d): %s%s", rc, out,
	    strstr(out, "refused") == NULL && (strstr(out, "namespace") ||
	    strstr(out, "Operation not permitted")) ? " (are unprivileged "
	    "user namespaces disabled?)" : "");
}

/* The docker CLI must reach an engine. */
static void
backend_probe_docker(void)
{
	char	out[512], *nl;
	char	*argv[] = { backend.docker, "info", "--format",
	    "{{.ServerVersion}}", NULL };
	int	rc;

	if (backend.docker[0] == '\0') {
		backend.ok = 0;
		snprintf(backend.reason, sizeof(backend.reason),
		    "the docker CLI is not installed");
		return;
	}
	rc = backend_run(argv, -1, out, sizeof(out));
	backend.ok = rc == 0;
	if ((nl = strchr(out, '\n')) != NULL)
		*nl = '\0';
	if (rc != 0)
		snprintf(backend.reason, sizeof(backend.reason),
		    "docker engine unavailable (exit %d): %s", rc, out);
	else
		backend.reason[0] = '\0';
}

/*
 * The SBPL template under profiles/ is data ops review: check it at start
 * on every platform, so a broken one is caught before it ships to a Mac.
 */
static void
backend_check_macos(struct config *conf)
{
	char	path[4096], err[512], *text;

	snprintf(path, sizeof(path), "%s/macos.sb", conf->profiles_dir);
	if ((text = file_read(path, 1024 * 1024, NULL)) == NULL)
		fatal("%s", path);
	if (macos_template_check(text, err, sizeof(err)) == -1)
		fatalx("%s: %s", path, err);
	free(text);
}

/*
 * Load the profiles: the seccomp policy (an invalid one stops sandboxd,
 * naming the file and line) and the SBPL template. Also sandboxd -n.
 */
struct policy *
backend_load(struct config *conf)
{
	struct policy	*pol;
	char		 path[4096], err[1024];

	snprintf(path, sizeof(path), "%s/seccomp.policy", conf->profiles_dir);
	if ((pol = policy_load(path, err, sizeof(err))) == NULL)
		fatalx("%s", err);
	backend_check_macos(conf);
	return pol;
}

/*
 * The bridge of the allowlist profiles is installed beside sandboxd
 * (build/ in development, the install's sbin directory): found from
 * sandboxd's own executable, as the spawner finds sandboxd itself.
 */
static void
backend_find_bridge(void)
{
	char	exe[4096], *slash;
	ssize_t	n;

	backend.bridge[0] = '\0';
	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0) {
		log_warn("readlink /proc/self/exe");
		return;
	}
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')) == NULL)
		return;
	*slash = '\0';
	snprintf(backend.bridge, sizeof(backend.bridge), "%s/%s", exe,
	    EGRESS_BRIDGE_NAME);
}

/* The bridge binary's path ("" when sandboxd's own is unknown). */
const char *
backend_bridge(void)
{
	return backend.bridge;
}

/* Choose the backend the configuration asks for; load the policy. */
void
backend_init(struct config *conf)
{
	const char	*want = conf->sandbox_backend;
	char		 why[256];

	backend_conf = conf;
	backend_find_bridge();
	backend_which("bwrap", backend.bwrap, sizeof(backend.bwrap));
	backend_which("docker", backend.docker, sizeof(backend.docker));
	backend_policy = backend_load(conf);
	if (conf->runtime == RUNTIME_DOCKER)
		backend.name = "docker";
	else if (strcmp(want, "auto") == 0)
		backend.name = wsl_detect("", why, sizeof(why)) == 1 ? "wsl2" :
		    "bwrap";
	else
		backend.name = want;
	backend_probe(0);
}

/* Probe again when the last result is older than max_age_ms. */
void
backend_probe(int64_t max_age_ms)
{
	int64_t	now = now_mono_ms();

	if (backend.probed_once && now - backend.probed < max_age_ms)
		return;
	if (strcmp(backend.name, "bwrap") == 0 ||
	    strcmp(backend.name, "wsl2") == 0)
		backend_probe_bwrap();
	else if (strcmp(backend.name, "docker") == 0)
		backend_probe_docker();
	else {
		backend.ok = 0;
		snprintf(backend.reason, sizeof(backend.reason),
		    "backend %s cannot run on Linux", backend.name);
	}
	if (!backend.ok)
		log_warnx("backend %s: %s", backend.name, backend.reason);
	else if (!backend.probed_once)
		log_info("backend %s works: the probe inside it was refused "
		    "everything", backend.name);
	backend.probed = now_mono_ms();
	backend.probed_once = 1;
}

/* What a spec runs under. */
const char *
backend_name_of(const struct spawn_spec *s)
{
	return s->mode == MODE_DIRECT ? "direct" : backend.name;
}

/* The environment of a direct-mode spawn: clean, like the sandbox's. */
static void
backend_direct_env(const struct spawn_spec *s, struct strv *envp)
{
	char *const	*e;

	strv_add(envp, "PATH=/usr/local/bin:/usr/bin:/bin");
	strv_addf(envp, "HOME=%s", s->workspace);
	strv_addf(envp, "TERM=%s", s->term != NULL ? s->term : "dumb");
	strv_add(envp, "LANG=C.UTF-8");
	strv_addf(envp, "USER=%s", s->user);
	strv_addf(envp, "LOGNAME=%s", s->user);
	strv_add(envp, "HOSTGATE_MODE=direct");
	for (e = s->env; e != NULL && *e != NULL; e++)
		strv_add(envp, *e);
}

/*
 * Make sure the user's container for this profile runs: start it when it
 * stopped, create it when it is missing. Blocking, bounded by the probe
 * timeout; the engine's own words become the error.
 */
static int
backend_docker_ensure(const struct spawn_spec *s, char *err, size_t errsz)
{
	struct strv	 a;
	char		 name[128], out[1024], *nl;
	char		*inspect[] = { backend.docker, "inspect", "--format",
	    "{{.State.Status}}", name, NULL };
	char		*start[] = { backend.docker, "start", name, NULL };
	int		 rc;

	docker_name(s->user, s->perm, name, sizeof(name));
	rc = backend_run(inspect, -1, out, sizeof(out));
	if (rc == 0 && strncmp(out, "running", 7) == 0) {
		backend_container_set(name, "running");
		return 0;
	}
	if (rc == 0)
		rc = backend_run(start, -1, out, sizeof(out));
	else {
		strv_init(&a);
		if (docker_create_argv(backend.docker,
		    backend_conf->docker_image, s, &a, err, errsz) == -1) {
			strv_free(&a);
			return -1;
		}
		log_info("creating container %s", name);
		rc = backend_run(a.v, -1, out, sizeof(out));
		strv_free(&a);
	}
	if (rc == 0) {
		backend_container_set(name, "running");
		return 0;
	}
	if ((nl = strchr(out, '\n')) != NULL)
		*nl = '\0';
	snprintf(err, errsz, "docker: container %s: %s", name, out);
	backend_container_set(name, "failed");
	return -1;
}

/* A spawn under the docker runtime: `docker exec` in the container. */
static int
backend_build_docker(struct spawn_spec *s, struct strv *argv,
    struct strv *envp, char *err, size_t errsz)
{
	const char	*host;

	if (docker_refuse(s, err, errsz) == -1 ||
	    backend_docker_ensure(s, err, errsz) == -1)
		return -1;
	if (docker_exec_argv(backend.docker, s, argv, err, errsz) == -1)
		return -1;
	strv_add(envp, "PATH=/usr/bin:/bin");
	strv_add(envp, "LANG=C.UTF-8");
	if ((host = getenv("DOCKER_HOST")) != NULL)
		strv_addf(envp, "DOCKER_HOST=%s", host);
	return 0;
}

/* Turn an approved spec into what to exec; never a weaker backend. */
int
backend_build(struct spawn_spec *s, struct strv *argv, struct strv *envp,
    char *err, size_t errsz)
{
	struct passwd_files	 files;
	struct strv		 extra;
	char *const		*a;
	int			 keep, rc;

	if (s->mode == MODE_DIRECT) {
		/* Direct mode: no sandbox, the same hygiene and limits. */
		for (a = s->argv; *a != NULL; a++)
			strv_add(argv, *a);
		backend_direct_env(s, envp);
		return 0;
	}
	if (!backend.ok) {
		snprintf(err, errsz, "the %s sandbox is unavailable: %s",
		    backend.name, backend.reason);
		return -1;
	}
	if (strcmp(backend.name, "docker") == 0)
		return backend_build_docker(s, argv, envp, err, errsz);
	if (strcmp(backend.name, "bwrap") != 0 &&
	    strcmp(backend.name, "wsl2") != 0) {
		snprintf(err, errsz, "backend %s cannot spawn here",
		    backend.name);
		return -1;
	}
	if (s->perm == PERM_WORKSPACE_WRITE_NET &&
	    access("/usr/bin/slirp4netns", X_OK) == -1) {
		snprintf(err, errsz, "the workspace-write+network profile needs "
		    "slirp4netns (Debian package slirp4netns)");
		return -1;
	}
	if (perm_allowlist(s->perm)) {
		if (access(backend.bridge, X_OK) == -1) {
			snprintf(err, errsz, "the %s profile needs %s: %s",
			    perm_name(s->perm), backend.bridge[0] != '\0' ?
			    backend.bridge : EGRESS_BRIDGE_NAME,
			    strerror(errno));
			return -1;
		}
		s->egress_bridge = backend.bridge;
	}
	/* The user's name for the uid and gid inside (passwd.c). */
	if (passwd_ensure(s->user, s->uid, s->gid, s->workspace, &files, err,
	    errsz) == -1)
		return -1;
	s->passwd = files.passwd;
	s->group = files.group;
	s->mailname = files.mailname;
	if ((s->seccomp_fd = policy_bpf_fd(backend_policy, err, errsz)) == -1)
		return -1;
	/* In WSL2: interop blocked, Windows drives hidden. */
	strv_init(&extra);
	if (strcmp(backend.name, "wsl2") == 0 &&
	    wsl_harden(s, "", backend_conf->wsl_mnt_paths, &extra, err,
	    errsz) == -1) {
		strv_free(&extra);
		close(s->seccomp_fd);
		s->seccomp_fd = -1;
		return -1;
	}
	s->extra = extra.v;
	s->netgate = s->perm == PERM_WORKSPACE_WRITE_NET;
	s->netcount = perm_allowlist(s->perm);
	/* In the child the filter sits at fd 3 (spawn.c's convention). */
	keep = s->seccomp_fd;
	s->seccomp_fd = 3;
	rc = bwrap_build(s, backend.bwrap, "", argv, err, errsz);
	s->extra = NULL;
	s->passwd = s->group = s->mailname = NULL;
	strv_free(&extra);
	s->seccomp_fd = keep;
	if (rc == -1) {
		close(keep);
		s->seccomp_fd = -1;
		return -1;
	}
	strv_add(envp, "PATH=/usr/bin:/bin");
	strv_add(envp, "LANG=C.UTF-8");
	return 0;
}

/* The backend's state for brokerd. */
struct json_object *
backend_json(void)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(backend.name));
	json_object_object_add(o, "ok", json_object_new_boolean(backend.ok));
	json_object_object_add(o, "reason", backend.ok ? NULL :
	    json_object_new_string(backend.reason));
	return o;
}
