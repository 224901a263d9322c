/*
 * The spawn engine: fork, child hygiene, exec of what a backend built, and
 * the process table. Commands run with pipes, a time limit and an output
 * cap; terminals get a pty whose master fd goes back to brokerd.
 */
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <linux/openat2.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "sandboxd.h"

/* Limits set on every spawned process (setrlimit before exec). */
#define SPAWN_NOFILE	1024
#define SPAWN_NPROC	512	/* per uid: all sandboxes together */
#define SPAWN_NPROC_CG	16384	/* the same with a pids cgroup per spawn */
#define SPAWN_PIDS_MAX	1024	/* processes of one user (pids.max) */
#define SPAWN_FSIZE	(1024L * 1024 * 1024)	/* largest file: 1 GiB */

#define SPAWN_DRAIN_MS	200	/* output read after exit before replying */
#define SPAWN_MAX_KEEP	4	/* fds passed to bwrap: 3, 4, 5, 6 */
#define SPAWN_NET_MS	5000	/* to set the network of a sandbox up */
#define SPAWN_HUP_GRACE	2	/* seconds from SIGHUP to SIGKILL */

struct proc {
	char			 id[17];
	enum spawn_kind		 kind;
	enum exec_mode		 mode;
	char			*user;
	char			 session[33];	/* "" when none */
	char			 request_id[LOG_REQUEST_ID_LEN + 1]; /* "": none */
	char			*backend;
	char			 cmd_sha256[65];
	uid_t			 uid;		/* the uid it runs as */
	char			 cgroup[700];	/* "": none */
	char			 cwd[4096];	/* where it starts */
	struct json_object	*container;	/* docker: its container */
	pid_t			 pid;		/* process group leader */
	int64_t			 started;	/* monotonic ms */
	int			 exited;
	int			 status;
	/* terminals */
	int			 master;
	pid_t			 relay;		/* the recording relay, or -1 */
	int			 relay_status;
	int			 relay_exited;
	struct event		*ev_relay;	/* kills a relay that lingers */
	struct json_object	*recording;	/* what record_finish said */
	/* the network profile: slirp4netns and the fd whose close ends it */
	pid_t			 slirp;
	int			 slirp_exit;
	/* commands */
	struct ipc_peer		*peer;		/* brokerd, to answer */
	int64_t			 req_id;
	int			 out[2];	/* pipe read ends */
	struct event		*ev_out[2];
	int			 mem[2];	/* memfds holding the output */
	size_t			 len[2];
	int			 truncated;
	size_t			 cap;
	int			 timed_out;
	struct event		*ev_timeout;
	struct event		*ev_drain;
	struct event		*ev_kill;
	TAILQ_ENTRY(proc)	 entry;
};

static TAILQ_HEAD(, proc)	 procs = TAILQ_HEAD_INITIALIZER(procs);
static struct event_base	*spawn_base;
static struct config		*spawn_conf;
static void			(*spawn_exit_cb)(struct proc *);

/* The proc of an id, or NULL. */
struct proc *
spawn_find(const char *id)
{
	struct proc	*p;

	TAILQ_FOREACH(p, &procs, entry)
		if (strcmp(p->id, id) == 0)
			return p;
	return NULL;
}

/* Allocate a process-table entry with a fresh id. */
static struct proc *
spawn_proc_new(const struct spawn_spec *s, const char *backend)
{
	struct proc	*p;
	unsigned char	 rnd[8];
	int		 i;

	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->user = strdup(s->user)) == NULL ||
	    (p->backend = strdup(backend)) == NULL)
		fatal("%s", __func__);
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		fatal("getrandom");
	for (i = 0; i < 8; i++)
		snprintf(p->id + 2 * i, 3, "%02x", rnd[i]);
	p->kind = s->kind;
	p->mode = s->mode;
	p->container = backend_container_json(s->user, s->perm);
	snprintf(p->session, sizeof(p->session), "%s",
	    s->session != NULL ? s->session : "");
	/* The request brokerd is serving (broker.c set the log context). */
	snprintf(p->request_id, sizeof(p->request_id), "%s",
	    log_ctx_request_id() != NULL ? log_ctx_request_id() : "");
	p->master = p->out[0] = p->out[1] = p->mem[0] = p->mem[1] = -1;
	p->pid = p->slirp = p->relay = -1;
	p->slirp_exit = -1;
	return p;
}

/* What is logged next is about the request that started p. */
static void
spawn_proc_ctx(struct proc *p)
{
	log_ctx_set(p->request_id, p->user, p->session);
}

/* Free an entry and everything it holds. */
static void
spawn_proc_free(struct proc *p)
{
	int	i;

	for (i = 0; i < 2; i++) {
		if (p->ev_out[i] != NULL)
			event_free(p->ev_out[i]);
		if (p->out[i] != -1)
			close(p->out[i]);
		if (p->mem[i] != -1)
			close(p->mem[i]);
	}
	if (p->ev_timeout != NULL)
		event_free(p->ev_timeout);
	if (p->ev_drain != NULL)
		event_free(p->ev_drain);
	if (p->ev_kill != NULL)
		event_free(p->ev_kill);
	if (p->ev_relay != NULL)
		event_free(p->ev_relay);
	json_object_put(p->recording);
	if (p->master != -1)
		close(p->master);
	/* slirp4netns leaves when its exit fd closes. */
	if (p->slirp_exit != -1)
		close(p->slirp_exit);
	json_object_put(p->container);
	free(p->user);
	free(p->backend);
	free(p);
}

/*
 * In the child, between fork and exec: a clean slate. Only async-signal-
 * safe calls here; on failure, report on stderr and _exit.
 */
static void
spawn_child(const struct spawn_spec *s, char *const argv[],
    char *const envp[], int in, int out, int err, int tty, const int *keep,
    int nkeep, const char *cg)
{
	int	high[SPAWN_MAX_KEEP], i, fd;
	struct rlimit	rl;
	sigset_t	none;
	int		sig;

	/* Signals: nothing blocked, nothing ignored or handled. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	/* Die with sandboxd. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1)
		_exit(126);
	/* Into its user's cgroups and its own, before anything can fork. */
	if (cg != NULL) {
		if (cgroup_user_join(s->user) == -1 ||
		    (fd = open(cg, O_WRONLY | O_CLOEXEC)) == -1 ||
		    write(fd, "0", 1) != 1)
			_exit(126);
		close(fd);
	}
	if (tty != -1) {
		/* A session of its own with the pty as controlling tty. */
		if (setsid() == -1 || ioctl(tty, TIOCSCTTY, 0) == -1)
			_exit(126);
	} else if (setpgid(0, 0) == -1)
		_exit(126);

	/*
	 * The fds bwrap is told about go to 3, 4, ... (seccomp program, info,
	 * user-namespace and start gates); out of the way first, so that no
	 * dup2 overwrites one still to be moved.
	 */
	for (i = 0; i < nkeep; i++)
		if ((high[i] = fcntl(keep[i], F_DUPFD, 64)) == -1)
			_exit(126);
	if (dup2(in, 0) == -1 || dup2(out, 1) == -1 || dup2(err, 2) == -1)
		_exit(126);
	for (i = 0; i < nkeep; i++)
		if (dup2(high[i], 3 + i) == -1)
			_exit(126);
	close_range(3 + nkeep, ~0U, 0);

	rl.rlim_cur = rl.rlim_max = 0;
	setrlimit(RLIMIT_CORE, &rl);
	rl.rlim_cur = rl.rlim_max = SPAWN_FSIZE;
	setrlimit(RLIMIT_FSIZE, &rl);
	rl.rlim_cur = rl.rlim_max = SPAWN_NOFILE;
	setrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max = cg != NULL ? SPAWN_NPROC_CG : SPAWN_NPROC;
	setrlimit(RLIMIT_NPROC, &rl);
	umask(077);
	if (s->mode == MODE_DIRECT && chdir(s->cwd) == -1) {
		dprintf(2, "hostgate: cannot enter %s\n", s->cwd);
		_exit(126);
	}
	execve(argv[0], argv, envp);
	dprintf(2, "hostgate: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/*
 * Signal a spawn's process group. A child that has not yet run setsid()
 * or setpgid() has no group of its own: then signal the child itself,
 * which has started nothing yet.
 */
static void
spawn_signal(struct proc *p, int sig)
{
	if (p->exited)
		return;		/* reaped: its pid may be another's now */
	if (kill(-p->pid, sig) == -1 && errno == ESRCH)
		kill(p->pid, sig);
}

/* Read what a command wrote into its memfd, up to the cap. */
static void
spawn_read(evutil_socket_t fd, short ev, void *arg)
{
	struct proc	*p = arg;
	char		 buf[65536];
	ssize_t		 n;
	size_t		 room;
	int		 i = fd == p->out[0] ? 0 : 1;

	n = read(fd, buf, sizeof(buf));
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		event_free(p->ev_out[i]);
		p->ev_out[i] = NULL;
		close(p->out[i]);
		p->out[i] = -1;
		/* Exited and both streams at EOF: answer now, not after the drain. */
		if (p->exited && p->out[0] == -1 && p->out[1] == -1 &&
		    p->ev_drain != NULL && ev != 0)
			event_active(p->ev_drain, EV_TIMEOUT, 0);
		return;
	}
	room = p->cap - p->len[i];
	if ((size_t)n > room) {
		p->truncated = 1;
		n = room;
	}
	/* Past the cap the output is read and dropped: the writer never blocks. */
	if (n > 0 && write(p->mem[i], buf, n) == n)
		p->len[i] += n;
}

/* Answer brokerd with the result of a finished command. */
static void
spawn_reply(struct proc *p)
{
	struct json_object	*res;
	struct ipc_msg		 m;
	int			 fds[2], code = -1, sig = 0;

	if (WIFEXITED(p->status))
		code = WEXITSTATUS(p->status);
	else if (WIFSIGNALED(p->status))
		sig = WTERMSIG(p->status);
	res = json_object_new_object();
	json_object_object_add(res, "id", json_object_new_string(p->id));
	json_object_object_add(res, "exit_code", code >= 0 ?
	    json_object_new_int(code) : NULL);
	json_object_object_add(res, "signal", sig ?
	    json_object_new_int(sig) : NULL);
	json_object_object_add(res, "truncated",
	    json_object_new_boolean(p->truncated));
	json_object_object_add(res, "timed_out",
	    json_object_new_boolean(p->timed_out));
	json_object_object_add(res, "duration_ms",
	    json_object_new_int64(now_mono_ms() - p->started));
	json_object_object_add(res, "stdout_len",
	    json_object_new_int64(p->len[0]));
	json_object_object_add(res, "stderr_len",
	    json_object_new_int64(p->len[1]));
	json_object_object_add(res, "mode", json_object_new_string(
	    p->mode == MODE_DIRECT ? "direct" : "sandbox"));
	json_object_object_add(res, "backend",
	    json_object_new_string(p->backend));
	json_object_object_add(res, "sha256",
	    json_object_new_string(p->cmd_sha256));
	if (p->container != NULL)
		json_object_object_add(res, "container",
		    json_object_get(p->container));
	spawn_where_json(p, res);
	/* A pids cgroup holds no memory events: an OOM kill is not known. */
	json_object_object_add(res, "oom", NULL);
	memset(&m, 0, sizeof(m));
	m.id = p->req_id;
	fds[0] = p->mem[0];
	fds[1] = p->mem[1];
	lseek(fds[0], 0, SEEK_SET);
	lseek(fds[1], 0, SEEK_SET);
	/* Logged first: whoever reads the answer finds the line written. */
	log_info("command %s of %s: %s %d, %zu+%zu bytes%s%s", p->id, p->user,
	    sig ? "signal" : "exit", sig ? sig : code, p->len[0], p->len[1],
	    p->timed_out ? ", timed out" : "",
	    p->truncated ? ", truncated" : "");
	if (p->peer != NULL)
		ipc_reply(p->peer, &m, res, fds, 2);
	else
		json_object_put(res);
}

/* After exit, output still in the pipes has had its chance: answer. */
static void
spawn_drained(evutil_socket_t fd, short ev, void *arg)
{
	struct proc	*p = arg;
	int		 i;

	for (i = 0; i < 2; i++)
		while (p->out[i] != -1)
			spawn_read(p->out[i], 0, p);
	spawn_proc_ctx(p);
	spawn_reply(p);
	log_ctx_clear();
	TAILQ_REMOVE(&procs, p, entry);
	spawn_proc_free(p);
}

/* The time limit ran out: kill the whole process group. */
static void
spawn_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct proc	*p = arg;

	p->timed_out = 1;
	spawn_proc_ctx(p);
	log_info("command %s of %s timed out; killing its group", p->id,
	    p->user);
	log_ctx_clear();
	spawn_signal(p, SIGKILL);
}

/* SIGHUP was not enough: kill. */
static void
spawn_kill_late(evutil_socket_t fd, short ev, void *arg)
{
	struct proc	*p = arg;

	if (!p->exited)
		spawn_signal(p, SIGKILL);
}

/* A recording relay still running after its shell left: kill it. */
static void
spawn_relay_late(evutil_socket_t fd, short ev, void *arg)
{
	struct proc	*p = arg;

	if (!p->relay_exited)
		kill(p->relay, SIGKILL);
}

/* A terminal and its relay, if any, are gone: report and forget it. */
static void
spawn_term_done(struct proc *p)
{
	spawn_proc_ctx(p);
	log_info("terminal %s of %s exited", p->id, p->user);
	if (p->relay != -1 &&
	    (p->recording = record_finish(p->id, p->relay_status)) != NULL) {
		json_object_object_add(p->recording, "user",
		    json_object_new_string(p->user));
		json_object_object_add(p->recording, "session",
		    json_object_new_string(p->session));
	}
	log_ctx_clear();
	if (spawn_exit_cb != NULL)
		spawn_exit_cb(p);
	TAILQ_REMOVE(&procs, p, entry);
	spawn_proc_free(p);
}

/* Reap children; finish what they leave. */
void
spawn_reap(void)
{
	struct proc	*p;
	struct timeval	 tv = { 0, SPAWN_DRAIN_MS * 1000 };
	struct timeval	 rtv = { SPAWN_HUP_GRACE, 0 };
	pid_t		 pid;
	int		 status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		TAILQ_FOREACH(p, &procs, entry)
			if (p->pid == pid || p->relay == pid)
				break;
		if (p == NULL)
			continue;
		if (p->relay == pid) {
			p->relay_exited = 1;
			p->relay_status = status;
			if (p->exited)
				spawn_term_done(p);
			continue;
		}
		p->exited = 1;
		p->status = status;
		/*
		 * Whatever it left behind in its group goes too. Only the
		 * group: the pid itself is reaped and may be reused.
		 */
		kill(-p->pid, SIGKILL);
		if (p->cgroup[0] != '\0')
			cgroup_spawn_kill(p->user, p->mode == MODE_DIRECT &&
			    p->session[0] != '\0' ? p->session : NULL, p->id);
		if (p->kind == SPAWN_COMMAND) {
			if (p->ev_timeout != NULL)
				evtimer_del(p->ev_timeout);
			p->ev_drain = evtimer_new(spawn_base, spawn_drained, p);
			if (p->out[0] == -1 && p->out[1] == -1)
				event_active(p->ev_drain, EV_TIMEOUT, 0);
			else
				evtimer_add(p->ev_drain, &tv);
		} else if (p->relay != -1 && !p->relay_exited) {
			/* The relay drains what is left, then exits. */
			p->ev_relay = evtimer_new(spawn_base, spawn_relay_late,
			    p);
			evtimer_add(p->ev_relay, &rtv);
		} else
			spawn_term_done(p);
	}
}

/* The pipes of a network sandbox's start-up. */
struct net {
	int	info[2];	/* bwrap --info-fd: the sandbox's pid */
	int	ublock[2];	/* bwrap --userns-block-fd: maps written */
	int	block[2];	/* bwrap --block-fd: the network is up */
};

static void
net_close(struct net *n)
{
	int	i;

	for (i = 0; i < 2; i++) {
		if (n->info[i] != -1)
			close(n->info[i]);
		if (n->ublock[i] != -1)
			close(n->ublock[i]);
		if (n->block[i] != -1)
			close(n->block[i]);
		n->info[i] = n->ublock[i] = n->block[i] = -1;
	}
}

/* Read from fd until pat appears or the deadline passes; 0 when found. */
static int
net_wait(int fd, const char *pat, char *buf, size_t bufsz, int64_t deadline)
{
	struct pollfd	pfd = { fd, POLLIN, 0 };
	size_t		len = 0;
	ssize_t		n;
	int		left;

	buf[0] = '\0';
	while (strstr(buf, pat) == NULL) {
		if ((left = (int)(deadline - now_mono_ms())) <= 0)
			return -1;
		if (poll(&pfd, 1, left) <= 0)
			continue;
		if (len + 1 >= bufsz)
			return -1;
		n = read(fd, buf + len, bufsz - len - 1);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		len += n;
		buf[len] = '\0';
	}
	return 0;
}

/* Write a /proc/PID file (uid_map, gid_map, setgroups). */
static int
net_proc_write(pid_t pid, const char *name, const char *text)
{
	char	path[64];
	int	fd, ok;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

/* Wait until pid sits in read(6, ...): bwrap waiting on its --block-fd. */
static int
net_wait_blocked(pid_t pid, int64_t deadline)
{
	char	path[64], buf[64];
	ssize_t	n;
	int	fd;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	while (now_mono_ms() < deadline) {
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			return -1;	/* gone */
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			if (strncmp(buf, "0 0x6 ", 6) == 0)
				return 0;
		}
		usleep(500);
	}
	return -1;
}

/*
 * Give a workspace-write+network sandbox its way out: bwrap waits (its
 * --userns-block-fd) while sandboxd maps the user namespace it made, then
 * builds the sandbox and waits again (--block-fd) while slirp4netns puts a
 * tap device into its network namespace, with the host's loopback out of
 * reach (--disable-host-loopback). Only then does the command start.
 */
static int
net_start(struct net *n, pid_t bwrap, struct proc *p, char *err,
    size_t errsz)
{
	char		 buf[512], map[64], pidarg[16], userns[64], netns[64];
	char		 readyarg[16], exitarg[16];
	int		 ready[2] = { -1, -1 }, ex[2] = { -1, -1 }, errp[2];
	int64_t		 deadline = now_mono_ms() + SPAWN_NET_MS;
	const char	*q;
	pid_t		 child, sp;
	sigset_t	 none;
	int		 devnull;

	if (net_wait(n->info[0], "child-pid", buf, sizeof(buf), deadline) ||
	    (q = strstr(buf, "\"child-pid\":")) == NULL) {
		snprintf(err, errsz, "network sandbox: bwrap gave no pid");
		return -1;
	}
	child = (pid_t)strtol(q + strlen("\"child-pid\":"), NULL, 10);
	if (child <= 1) {
		snprintf(err, errsz, "network sandbox: bad pid from bwrap");
		return -1;
	}
	/* The sandbox's ids are sandboxd's own, as bwrap would map them. */
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)getuid(),
	    (unsigned)getuid());
	if (net_proc_write(child, "uid_map", map) == -1 ||
	    net_proc_write(child, "setgroups", "deny\n") == -1)
		goto maperr;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)getgid(),
	    (unsigned)getgid());
	if (net_proc_write(child, "gid_map", map) == -1)
		goto maperr;
	if (write(n->ublock[1], "1", 1) != 1)
		goto maperr;
	/*
	 * bwrap now sets up the sandbox, its loopback first; slirp4netns
	 * must not configure the namespace at the same time (both then fail).
	 * Wait until bwrap blocks reading its --block-fd (fd 6): the kernel
	 * shows that in /proc/PID/syscall as "0 0x6 ..." (read(6, ...)).
	 */
	if (net_wait_blocked(child, deadline) == -1) {
		snprintf(err, errsz, "network sandbox: bwrap did not get ready");
		return -1;
	}

	if (pipe2(ready, O_CLOEXEC) == -1 || pipe2(ex, O_CLOEXEC) == -1 ||
	    pipe2(errp, O_CLOEXEC) == -1) {
		snprintf(err, errsz, "network sandbox: %s", strerror(errno));
		return -1;
	}
	snprintf(pidarg, sizeof(pidarg), "%d", (int)child);
	snprintf(userns, sizeof(userns), "--userns-path=/proc/%d/ns/user",
	    (int)child);
	snprintf(netns, sizeof(netns), "/proc/%d/ns/net", (int)child);
	snprintf(readyarg, sizeof(readyarg), "--ready-fd=3");
	snprintf(exitarg, sizeof(exitarg), "--exit-fd=4");
	switch (sp = fork()) {
	case -1:
		snprintf(err, errsz, "network sandbox: fork: %s",
		    strerror(errno));
		return -1;
	case 0: {
		char *argv[] = { "/usr/bin/slirp4netns", "--configure",
		    "--mtu=65520", "--disable-host-loopback", userns,
		    "--netns-type=path", readyarg, exitarg, netns, "tap0",
		    NULL };
		char *envp[] = { "PATH=/usr/bin:/bin", NULL };

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setpgid(0, 0);
		devnull = open("/dev/null", O_RDWR);
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(errp[1], 2);
		dup2(ready[1], 3);
		dup2(ex[0], 4);
		close_range(5, ~0U, 0);
		execve(argv[0], argv, envp);
		dprintf(2, "cannot run slirp4netns: %s\n", strerror(errno));
		_exit(127);
	}
	}
	close(ready[1]);
	close(ex[0]);
	close(errp[1]);
	p->slirp = sp;
	p->slirp_exit = ex[1];
	if (net_wait(ready[0], "1", buf, sizeof(buf), deadline) == -1) {
		net_wait(errp[0], "\n", buf, sizeof(buf), now_mono_ms() + 200);
		buf[strcspn(buf, "\n")] = '\0';
		snprintf(err, errsz, "the network profile is unavailable: "
		    "slirp4netns: %s", buf[0] ? buf : "did not start");
		close(ready[0]);
		close(errp[0]);
		kill(sp, SIGKILL);
		return -1;
	}
	close(ready[0]);
	close(errp[0]);
	/* The network is up: let the command start. */
	if (write(n->block[1], "1", 1) != 1) {
		snprintf(err, errsz, "network sandbox: bwrap went away");
		return -1;
	}
	return 0;
maperr:
	snprintf(err, errsz, "network sandbox: cannot map the user namespace: "
	    "%s", strerror(errno));
	return -1;
}

/* Put a recording relay between a terminal and frontd: 0, or -1, err. */
static int
spawn_record(struct proc *p, const struct spawn_spec *s, int cols, int rows,
    char *err, size_t errsz)
{
	int	outer;

	if ((outer = record_start(p->id, p->user, s->term, p->master, cols,
	    rows, &p->relay, err, errsz)) == -1)
		return -1;
	close(p->master);
	p->master = outer;
	return 0;
}

/* What a terminal's recording holds, or NULL when it has none. */
struct json_object *
spawn_recording(struct proc *p)
{
	return p->recording;
}

/* An anonymous file for a command's output. */
static int
spawn_memfd(const char *name)
{
	int	fd;

	if ((fd = memfd_create(name, MFD_CLOEXEC)) == -1)
		log_warn("memfd_create");
	return fd;
}

/*
 * Start an approved spawn with the argv (and envp) a backend built.
 * Commands answer brokerd (peer, req_id) when done; terminals return at
 * once. Returns the entry, or NULL with err.
 */
struct proc *
spawn_start(const struct spawn_spec *s, const char *backend,
    const struct strv *argv, char *const envp[], int stdin_fd,
    int timeout_ms, size_t cap, int cols, int rows, struct ipc_peer *peer,
    int64_t req_id, char *err, size_t errsz)
{
	struct proc	*p;
	struct winsize	 ws;
	struct timeval	 tv;
	char		*line, ptsname_buf[64];
	struct net	 net = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
	int		 pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int		 devnull = -1, slave = -1, in, keep[SPAWN_MAX_KEEP], nkeep = 0;
	struct cg_limits ulim, slim;
	int		 cg, v2fd = -1;
	char		 cgprocs[1024];
	pid_t		 pid;

	p = spawn_proc_new(s, backend);
	line = strv_join(argv);
	sha256_hex(line, strlen(line), p->cmd_sha256);
	log_info("spawn %s %s for %s (%s, %s): sha256 %s", p->id,
	    s->kind == SPAWN_TERMINAL ? "terminal" : "command", s->user,
	    s->mode == MODE_DIRECT ? "DIRECT" : "sandbox", backend,
	    p->cmd_sha256);
	log_debug("spawn %s: %s", p->id, line);
	free(line);

	if ((devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1)
		goto fail_errno;
	/*
	 * Interim (until the spawner): the child migrates into its user's
	 * cgroups and into its own, which dies with the spawn (spawn_reap).
	 */
	cgroup_limits_user(spawn_conf, &ulim);
	cgroup_limits_spawn(spawn_conf, &slim);
	cg = cgroup_enabled() && cgroup_user(s->user, &ulim, err,
	    errsz) == 0 && cgroup_spawn(s->user, s->mode == MODE_DIRECT ?
	    s->session : NULL, p->id, &slim, &v2fd, cgprocs, sizeof(cgprocs),
	    err, errsz) == 0 && cgroup_path(s->user, s->mode == MODE_DIRECT ?
	    s->session : NULL, p->id, p->cgroup, sizeof(p->cgroup)) != NULL;
	if (cgroup_enabled() && !cg)
		goto fail;
	if (v2fd != -1) {
		close(v2fd);
		snprintf(cgprocs, sizeof(cgprocs), "%s/cgroup.procs",
		    p->cgroup);
	}
	/* The child keeps sandboxd's uid: no setuid between fork and exec. */
	p->uid = getuid();
	snprintf(p->cwd, sizeof(p->cwd), "%s", s->cwd ? s->cwd : "");
	/* What bwrap gets on fds 3...: see bwrap_build's fixed numbers. */
	if (s->seccomp_fd != -1)
		keep[nkeep++] = s->seccomp_fd;
	if (s->netgate) {
		if (pipe2(net.info, O_CLOEXEC) == -1 ||
		    pipe2(net.ublock, O_CLOEXEC) == -1 ||
		    pipe2(net.block, O_CLOEXEC) == -1)
			goto fail_errno;
		keep[nkeep++] = net.info[1];
		keep[nkeep++] = net.ublock[0];
		keep[nkeep++] = net.block[0];
	}
	in = stdin_fd != -1 ? stdin_fd : devnull;
	if (stdin_fd != -1)
		lseek(stdin_fd, 0, SEEK_SET);

	if (s->kind == SPAWN_TERMINAL) {
		p->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (p->master == -1 || grantpt(p->master) == -1 ||
		    unlockpt(p->master) == -1 ||
		    ptsname_r(p->master, ptsname_buf, sizeof(ptsname_buf)) != 0)
			goto fail_errno;
		if ((slave = open(ptsname_buf, O_RDWR | O_NOCTTY |
		    O_CLOEXEC)) == -1)
			goto fail_errno;
		memset(&ws, 0, sizeof(ws));
		ws.ws_col = cols > 0 ? cols : 80;
		ws.ws_row = rows > 0 ? rows : 24;
		ioctl(p->master, TIOCSWINSZ, &ws);
	} else {
		if (pipe2(pout, O_CLOEXEC) == -1 ||
		    pipe2(perr, O_CLOEXEC) == -1)
			goto fail_errno;
		if ((p->mem[0] = spawn_memfd("stdout")) == -1 ||
		    (p->mem[1] = spawn_memfd("stderr")) == -1)
			goto fail_errno;
	}

	switch (pid = fork()) {
	case -1:
		goto fail_errno;
	case 0:
		if (slave != -1)
			spawn_child(s, argv->v, envp, slave, slave, slave, slave,
			    keep, nkeep, cg ? cgprocs : NULL);
		else
			spawn_child(s, argv->v, envp, in, pout[1], perr[1], -1,
			    keep, nkeep, cg ? cgprocs : NULL);
		_exit(127);
	}
	if (net.info[1] != -1) {
		close(net.info[1]);
		net.info[1] = -1;
		close(net.ublock[0]);
		net.ublock[0] = -1;
		close(net.block[0]);
		net.block[0] = -1;
		if (net_start(&net, pid, p, err, errsz) == -1) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			net_close(&net);
			goto fail;
		}
	}
	/* The parent makes the group too, so kill(-pid) works at once. */
	if (s->kind == SPAWN_COMMAND)
		setpgid(pid, pid);
	p->pid = pid;
	p->started = now_mono_ms();
	if (s->kind == SPAWN_TERMINAL && record_wanted(s) &&
	    spawn_record(p, s, ws.ws_col, ws.ws_row, err, errsz) == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto fail;
	}
	close(devnull);
	if (slave != -1)
		close(slave);
	if (s->kind == SPAWN_COMMAND) {
		close(pout[1]);
		close(perr[1]);
		p->out[0] = pout[0];
		p->out[1] = perr[0];
		p->cap = cap;
		p->peer = peer;
		p->req_id = req_id;
		fcntl(p->out[0], F_SETFL, O_NONBLOCK);
		fcntl(p->out[1], F_SETFL, O_NONBLOCK);
		p->ev_out[0] = event_new(spawn_base, p->out[0],
		    EV_READ | EV_PERSIST, spawn_read, p);
		p->ev_out[1] = event_new(spawn_base, p->out[1],
		    EV_READ | EV_PERSIST, spawn_read, p);
		event_add(p->ev_out[0], NULL);
		event_add(p->ev_out[1], NULL);
		p->ev_timeout = evtimer_new(spawn_base, spawn_timeout, p);
		tv.tv_sec = timeout_ms / 1000;
		tv.tv_usec = (timeout_ms % 1000) * 1000;
		evtimer_add(p->ev_timeout, &tv);
	}
	TAILQ_INSERT_TAIL(&procs, p, entry);
	return p;

fail_errno:
	snprintf(err, errsz, "cannot spawn: %s", strerror(errno));
fail:
	log_warnx("spawn %s: %s", p->id, err);
	net_close(&net);
	if (devnull != -1)
		close(devnull);
	if (slave != -1)
		close(slave);
	if (pout[0] != -1) {
		close(pout[0]);
		close(pout[1]);
	}
	if (perr[0] != -1) {
		close(perr[0]);
		close(perr[1]);
	}
	spawn_proc_free(p);
	return NULL;
}

/* Hang up a terminal or command: SIGHUP to its group, SIGKILL later. */
int
spawn_hangup(const char *id)
{
	struct proc	*p;
	struct timeval	 tv = { SPAWN_HUP_GRACE, 0 };

	if ((p = spawn_find(id)) == NULL || p->exited)
		return -1;
	spawn_signal(p, SIGHUP);
	spawn_signal(p, SIGCONT);
	if (p->ev_kill == NULL)
		p->ev_kill = evtimer_new(spawn_base, spawn_kill_late, p);
	evtimer_add(p->ev_kill, &tv);
	return 0;
}

/* Kill every live process group of a session in a mode. */
int
spawn_kill_session(const char *session, enum exec_mode mode)
{
	struct proc	*p;
	int		 n = 0;

	TAILQ_FOREACH(p, &procs, entry)
		if (p->session[0] != '\0' && strcmp(p->session, session) == 0 &&
		    p->mode == mode && !p->exited) {
			spawn_signal(p, SIGKILL);
			n++;
		}
	return n;
}

/* A terminal's master fd (sandboxd keeps its own; callers dup). */
int
spawn_master(struct proc *p)
{
	return p->kind == SPAWN_TERMINAL && !p->exited ? p->master : -1;
}

const char *
spawn_id(struct proc *p)
{
	return p->id;
}

/* The SHA-256 of the exact command line that ran. */
const char *
spawn_sha256(struct proc *p)
{
	return p->cmd_sha256;
}

/* Where a spawn runs, for its audit records: uid, cgroup (or null), cwd. */
void
spawn_where_json(struct proc *p, struct json_object *o)
{
	json_object_object_add(o, "uid", json_object_new_int64(p->uid));
	json_object_object_add(o, "cgroup", p->cgroup[0] != '\0' ?
	    json_object_new_string(p->cgroup) : NULL);
	json_object_object_add(o, "cwd", json_object_new_string(p->cwd));
}

const char *
spawn_backend(struct proc *p)
{
	return p->backend;
}

int
spawn_status(struct proc *p)
{
	return p->status;
}

/*
 * INTERIM (wt-cg, to be dropped at the merge for the spawner's own): no
 * OOM kill is known yet.
 */
int
spawn_oom(struct proc *p)
{
	return 0;
}

/* The process table as JSON. */
struct json_object *
spawn_list(void)
{
	struct json_object	*arr, *o;
	struct proc		*p;

	arr = json_object_new_array();
	TAILQ_FOREACH(p, &procs, entry) {
		o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_string(p->id));
		json_object_object_add(o, "user",
		    json_object_new_string(p->user));
		json_object_object_add(o, "session", p->session[0] ?
		    json_object_new_string(p->session) : NULL);
		json_object_object_add(o, "kind", json_object_new_string(
		    p->kind == SPAWN_TERMINAL ? "terminal" : "command"));
		json_object_object_add(o, "mode", json_object_new_string(
		    p->mode == MODE_DIRECT ? "direct" : "sandbox"));
		json_object_object_add(o, "backend",
		    json_object_new_string(p->backend));
		json_object_object_add(o, "pid", json_object_new_int(p->pid));
		json_object_object_add(o, "running",
		    json_object_new_boolean(!p->exited));
		json_object_array_add(arr, o);
	}
	return arr;
}

/*
 * Resolve cwd (relative to the workspace, or absolute inside it) without
 * following any symlink out of it. Writes the absolute path into out.
 */
int
spawn_cwd(const char *workspace, const char *cwd, char *out, size_t outsz,
    char *err, size_t errsz)
{
	struct open_how	 how;
	const char	*rel;
	size_t		 wl = strlen(workspace);
	int		 wfd, fd;

	if (cwd == NULL || *cwd == '\0' || strcmp(cwd, ".") == 0) {
		snprintf(out, outsz, "%s", workspace);
		return 0;
	}
	if (cwd[0] == '/') {
		if (strncmp(cwd, workspace, wl) != 0 ||
		    (cwd[wl] != '\0' && cwd[wl] != '/')) {
			snprintf(err, errsz, "cwd must be inside the "
			    "workspace %s", workspace);
			return -1;
		}
		rel = cwd[wl] == '\0' ? "." : cwd + wl + 1;
	} else
		rel = cwd;
	if ((size_t)snprintf(out, outsz, "%s/%s", workspace, rel) >= outsz) {
		snprintf(err, errsz, "cwd too long");
		return -1;
	}
	if (strcmp(rel, ".") == 0)
		snprintf(out, outsz, "%s", workspace);
	if (path_check("cwd", out, err, errsz) == -1)
		return -1;
	if ((wfd = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "workspace: %s", strerror(errno));
		return -1;
	}
	memset(&how, 0, sizeof(how));
	how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
	    RESOLVE_NO_SYMLINKS;
	fd = syscall(SYS_openat2, wfd, rel, &how, sizeof(how));
	close(wfd);
	if (fd == -1) {
		snprintf(err, errsz, "cwd %s: %s", cwd, errno == EXDEV ||
		    errno == ELOOP ? "leaves the workspace through a symlink" :
		    strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

/* The spawn engine's event base and the terminal-exit callback. */
void
spawn_init(struct event_base *base, struct config *conf,
    void (*exit_cb)(struct proc *))
{
	spawn_base = base;
	spawn_conf = conf;
	spawn_exit_cb = exit_cb;
}
