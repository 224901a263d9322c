/*
 * The sandbox backend and its probe. sandboxd never falls back: when the
 * configured backend cannot run, it says so and refuses to spawn.
 */
#include <sys/types.h>
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

#define PROBE_TIMEOUT_MS	5000

static struct {
	const char	*name;
	int		 ok;
	char		 reason[512];
	int64_t		 probed;	/* monotonic ms of the last probe */
	int		 probed_once;
} backend;

static struct config	*backend_conf;

/* Find prog in the usual system directories; NULL when missing. */
static const char *
backend_which(const char *prog, char *buf, size_t size)
{
	static const char *const dirs[] = { "/usr/bin", "/bin",
	    "/usr/local/bin", "/usr/sbin", "/sbin", NULL };
	size_t	i;

	for (i = 0; dirs[i] != NULL; i++) {
		snprintf(buf, size, "%s/%s", dirs[i], prog);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return NULL;
}

/*
 * Run argv with a clean environment and no inherited fds; collect the first
 * line of its stderr into why. Returns its exit status, or -1.
 */
static int
backend_run(char *const argv[], char *why, size_t whysz)
{
	static char *const envp[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8",
	    NULL };
	struct pollfd	pfd;
	sigset_t	all;
	pid_t		pid;
	int		pipefd[2], status, devnull, n, r;
	size_t		len = 0;
	int64_t		deadline = now_mono_ms() + PROBE_TIMEOUT_MS;

	why[0] = '\0';
	if (pipe2(pipefd, O_CLOEXEC) == -1) {
		snprintf(why, whysz, "pipe: %s", strerror(errno));
		return -1;
	}
	switch (pid = fork()) {
	case -1:
		snprintf(why, whysz, "fork: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		return -1;
	case 0:
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		signal(SIGPIPE, SIG_DFL);
		setpgid(0, 0);
		devnull = open("/dev/null", O_RDWR);
		dup2(devnull, STDIN_FILENO);
		dup2(devnull, STDOUT_FILENO);
		dup2(pipefd[1], STDERR_FILENO);
		closefrom(3);
		execve(argv[0], argv, envp);
		dprintf(STDERR_FILENO, "exec %s: %s\n", argv[0],
		    strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	pfd.fd = pipefd[0];
	pfd.events = POLLIN;
	for (;;) {
		int left = (int)(deadline - now_mono_ms());

		if (left <= 0) {
			kill(-pid, SIGKILL);
			snprintf(why, whysz, "%s timed out", argv[0]);
			break;
		}
		r = poll(&pfd, 1, left);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		if (len + 1 >= whysz) {
			char sink[256];

			n = read(pipefd[0], sink, sizeof(sink));
		} else
			n = read(pipefd[0], why + len, whysz - len - 1);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (len + 1 < whysz)
			len += n;
	}
	why[len] = '\0';
	why[strcspn(why, "\n")] = '\0';
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

/* bubblewrap must be able to build an empty sandbox of its own. */
static void
backend_probe_bwrap(void)
{
	char	path[64], why[400];
	char	*argv[] = { path, "--unshare-all", "--die-with-parent",
	    "--new-session", "--ro-bind", "/usr", "/usr",
	    "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
	    "--symlink", "usr/lib64", "/lib64", "--proc", "/proc",
	    "--dev", "/dev", "--", "/usr/bin/true", NULL };
	int	rc;

	if (backend_which("bwrap", path, sizeof(path)) == NULL) {
		backend.ok = 0;
		snprintf(backend.reason, sizeof(backend.reason),
		    "bwrap is not installed (Debian package bubblewrap)");
		return;
	}
	rc = backend_run(argv, why, sizeof(why));
	backend.ok = rc == 0;
	if (rc != 0)
		snprintf(backend.reason, sizeof(backend.reason),
		    "bwrap cannot create a sandbox (exit %d): %s%s", rc, why,
		    strstr(why, "namespace") ? " (are unprivileged user "
		    "namespaces disabled?)" : "");
	else
		backend.reason[0] = '\0';
}

/* The docker CLI must reach an engine. */
static void
backend_probe_docker(void)
{
	char	path[64], why[400];
	char	*argv[] = { path, "info", "--format", "{{.ServerVersion}}",
	    NULL };
	int	rc;

	if (backend_which("docker", path, sizeof(path)) == NULL) {
		backend.ok = 0;
		snprintf(backend.reason, sizeof(backend.reason),
		    "the docker CLI is not installed");
		return;
	}
	rc = backend_run(argv, why, sizeof(why));
	backend.ok = rc == 0;
	if (rc != 0)
		snprintf(backend.reason, sizeof(backend.reason),
		    "docker engine unavailable (exit %d): %s", rc, why);
	else
		backend.reason[0] = '\0';
}

/* Choose the backend the configuration asks for; never a weaker one. */
void
backend_init(struct config *conf)
{
	const char	*want = conf->sandbox_backend;

	backend_conf = conf;
	if (conf->runtime == RUNTIME_DOCKER)
		backend.name = "docker";
	else if (strcmp(want, "auto") == 0 || strcmp(want, "bwrap") == 0)
		backend.name = "bwrap";
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
	if (strcmp(backend.name, "bwrap") == 0)
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
		log_info("backend %s works", backend.name);
	backend.probed = now_mono_ms();
	backend.probed_once = 1;
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
