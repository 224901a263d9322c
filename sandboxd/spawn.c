/*
 * The spawn engine: the process table, and each spawn's life around its
 * process. Every spawn gets a cgroup of its own (cgroup_spawn) and is
 * started by its user's spawner (spawner.c) as sandboxd's child, born in
 * that cgroup; sandboxd never waits for the spawner. Commands run with
 * pipes, a time limit and an output cap; terminals get a pty whose master
 * fd goes back to brokerd. When a spawn's process ends, its whole cgroup
 * is killed: nothing it forked, setsid'd or daemonized outlives it.
 */
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <linux/openat2.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sys/capability.h>

#include "sandboxd.h"

#define SPAWN_DRAIN_MS	200	/* output read after exit before replying */
#define SPAWN_HUP_GRACE	2	/* seconds from SIGHUP to SIGKILL */
#define SPAWN_DISCARDS	1024	/* children to reap that belong to no spawn */

struct proc {
	char			 id[17];
	enum spawn_kind		 kind;
	enum exec_mode		 mode;
	char			*user;
	char			 session[33];	/* "" when none */
	char			 request_id[LOG_REQUEST_ID_LEN + 1]; /* "": none */
	char			*backend;
	char			 cmd_sha256[65];
	uint64_t		 seq;		/* its request to the spawner */
	uid_t			 uid;		/* the uid it runs as */
	char			 cgroup[700];	/* "": none */
	int			 cg;		/* has a cgroup of its own */
	int64_t			 oom_start;	/* OOM kills when it started */
	int			 oom;		/* died of an OOM kill */
	int			 pending_sig;	/* to send once the pid is known */
	int			 killed;	/* sandboxd killed it (not OOM) */
	char			 error[512];	/* why it did not start, or "" */
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
	/* the allowlist profiles: its /proc/net/snmp and snmp6, and counts */
	int			 snmp[2];
	int			 bypass_read;
	int64_t			 bypass[3];	/* v4, v6 no route; UDP no port */
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
static uint64_t			 spawn_seq;
static int			 spawn_setid;	/* CAP_SETUID: a uid per user */
static pid_t			 spawn_discards[SPAWN_DISCARDS];
static int			 spawn_ndiscards;

/* A child to reap that belongs to no spawn any more (killed, leftover). */
static void
spawn_discard(pid_t pid)
{
	if (pid > 0 && spawn_ndiscards < SPAWN_DISCARDS)
		spawn_discards[spawn_ndiscards++] = pid;
}

/* The session a spawn's cgroup is grouped under: direct spawns only. */
static const char *
spawn_cg_session(const struct proc *p)
{
	return p->mode == MODE_DIRECT && p->session[0] != '\0' ?
	    p->session : NULL;
}

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

/* A fresh spawn id: 16 hex digits. */
void
spawn_new_id(char id[17])
{
	unsigned char	 rnd[8];
	int		 i;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		fatal("getrandom");
	for (i = 0; i < 8; i++)
		snprintf(id + 2 * i, 3, "%02x", rnd[i]);
}

/* Allocate a process-table entry with the spec's id, or a fresh one. */
static struct proc *
spawn_proc_new(const struct spawn_spec *s, const char *backend)
{
	struct proc	*p;

	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->user = strdup(s->user)) == NULL ||
	    (p->backend = strdup(backend)) == NULL)
		fatal("%s", __func__);
	if (s->id != NULL && strlen(s->id) == sizeof(p->id) - 1)
		memcpy(p->id, s->id, sizeof(p->id));
	else
		spawn_new_id(p->id);
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
	p->snmp[0] = p->snmp[1] = -1;
	p->oom_start = -1;
	p->seq = ++spawn_seq;
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
	for (i = 0; i < 2; i++)
		if (p->snmp[i] != -1)
			close(p->snmp[i]);
	/* Children of its that are still to be reaped. */
	spawn_discard(p->slirp);
	if (!p->relay_exited)
		spawn_discard(p->relay);
	if (!p->exited)
		spawn_discard(p->pid);
	json_object_put(p->container);
	/* An allowlist spawn's socket to the egress proxy goes with it. */
	egress_spawn_end(p->id);
	free(p->user);
	free(p->backend);
	free(p);
}

/*
 * One counter of a proc net file read from fd: "Ip:" "OutNoRoutes" in
 * snmp's pairs of lines (names, then values), or a "Udp6NoPorts 3" line
 * of snmp6 (row NULL). 0 when the file has no such counter.
 */
static int64_t
spawn_counter(int fd, const char *row, const char *name)
{
	char		 buf[16384], *line, *next, *names, *vals, *n, *v;
	char		*sn, *sv;
	size_t		 len = 0;
	ssize_t		 r;

	if (lseek(fd, 0, SEEK_SET) == -1)
		return 0;
	while (len < sizeof(buf) - 1 &&
	    (r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += r;
	buf[len] = '\0';
	for (line = buf; line != NULL && *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if (row == NULL) {
			n = strtok_r(line, " \t", &sn);
			v = strtok_r(NULL, " \t", &sn);
			if (n != NULL && v != NULL && strcmp(n, name) == 0)
				return strtoll(v, NULL, 10);
			continue;
		}
		if (strncmp(line, row, strlen(row)) != 0 || next == NULL ||
		    strncmp(next, row, strlen(row)) != 0)
			continue;
		names = line;
		vals = next;
		if ((next = strchr(vals, '\n')) != NULL)
			*next++ = '\0';
		(void)strtok_r(names, " ", &sn);
		(void)strtok_r(vals, " ", &sv);
		while ((n = strtok_r(NULL, " ", &sn)) != NULL &&
		    (v = strtok_r(NULL, " ", &sv)) != NULL)
			if (strcmp(n, name) == 0)
				return strtoll(v, NULL, 10);
	}
	return 0;
}

/*
 * An allowlist spawn's bypass attempts, read once when it ends from its
 * network namespace's counters (the kernel's, which nothing inside can
 * reset): connects and sends with no route out (IPv4, IPv6), and UDP to
 * a loopback port nothing listens on (a DNS query to 127.0.0.1:53).
 */
static void
spawn_bypass_read(struct proc *p)
{
	if (p->bypass_read || p->snmp[0] == -1)
		return;
	p->bypass_read = 1;
	p->bypass[0] = spawn_counter(p->snmp[0], "Ip:", "OutNoRoutes");
	p->bypass[1] = spawn_counter(p->snmp[1], NULL, "Ip6OutNoRoutes");
	p->bypass[2] = spawn_counter(p->snmp[0], "Udp:", "NoPorts") +
	    spawn_counter(p->snmp[1], NULL, "Udp6NoPorts");
	if (p->bypass[0] || p->bypass[1] || p->bypass[2])
		log_info("spawn %s of %s: egress bypass attempts: %lld IPv4 "
		    "and %lld IPv6 with no route, %lld UDP to no port", p->id,
		    p->user, (long long)p->bypass[0], (long long)p->bypass[1],
		    (long long)p->bypass[2]);
}

/*
 * What an allowlist spawn tried past the proxy, for brokerd's audit
 * (egress_bypass): NULL when nothing, or under another profile.
 */
struct json_object *
spawn_bypass_json(struct proc *p)
{
	struct json_object	*o;

	if (!p->bypass_read || (p->bypass[0] == 0 && p->bypass[1] == 0 &&
	    p->bypass[2] == 0))
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "ipv4_no_route",
	    json_object_new_int64(p->bypass[0]));
	json_object_object_add(o, "ipv6_no_route",
	    json_object_new_int64(p->bypass[1]));
	json_object_object_add(o, "udp_no_ports",
	    json_object_new_int64(p->bypass[2]));
	return o;
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
	if (p->pid <= 0) {
		/* Not started yet: the spawner has not answered. */
		if (p->pending_sig != SIGKILL)
			p->pending_sig = sig;
		return;
	}
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
	struct json_object	*res, *bypass;
	struct ipc_msg		 m;
	int			 fds[2], code = -1, sig = 0;

	memset(&m, 0, sizeof(m));
	m.id = p->req_id;
	if (p->error[0] != '\0') {
		/* It never ran: an error, as before it was started. */
		if (p->peer != NULL)
			ipc_reply_error(p->peer, &m, strstr(p->error,
			    "unavailable") != NULL ? ERR_UNAVAILABLE :
			    ERR_INTERNAL, "%s", p->error);
		return;
	}
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
	json_object_object_add(res, "oom", json_object_new_boolean(p->oom));
	if ((bypass = spawn_bypass_json(p)) != NULL)
		json_object_object_add(res, "egress_bypass", bypass);
	fds[0] = p->mem[0];
	fds[1] = p->mem[1];
	lseek(fds[0], 0, SEEK_SET);
	lseek(fds[1], 0, SEEK_SET);
	/* Logged first: whoever reads the answer finds the line written. */
	log_info("command %s of %s: %s %d, %zu+%zu bytes%s%s%s", p->id,
	    p->user, sig ? "signal" : "exit", sig ? sig : code, p->len[0],
	    p->len[1], p->timed_out ? ", timed out" : "",
	    p->truncated ? ", truncated" : "", p->oom ? ", OOM kill" : "");
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

	p->timed_out = p->killed = 1;
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

/*
 * A spawn's process ended: kill its whole cgroup (and group), then answer
 * or report once its output or recording is done.
 */
static void
spawn_exited(struct proc *p, int status)
{
	struct timeval	 tv = { 0, SPAWN_DRAIN_MS * 1000 };
	struct timeval	 rtv = { SPAWN_HUP_GRACE, 0 };
	int64_t		 ooms;

	p->exited = 1;
	p->status = status;
	spawn_proc_ctx(p);
	spawn_bypass_read(p);
	log_ctx_clear();
	if (p->cg) {
		/*
		 * Read before the cgroup goes. An OOM kill is a SIGKILL, which
		 * bwrap (or a shell) passes on as exit status 128 + 9.
		 */
		ooms = cgroup_oom_kills(p->user, p->id);
		p->oom = p->oom_start >= 0 && ooms > p->oom_start &&
		    ((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
		    (WIFEXITED(status) && WEXITSTATUS(status) == 128 +
		    SIGKILL)) && !p->killed;
		/*
		 * Gone already is no failure: a direct grant's end kills and
		 * removes the session's whole d-SESSION before its spawns'
		 * exits are read.
		 */
		errno = 0;
		if (cgroup_spawn_kill(p->user, spawn_cg_session(p), p->id) == -1 &&
		    errno != ENOENT)
			log_warnx("spawn %s: cannot kill its cgroup", p->id);
	}
	/*
	 * Whatever it left behind in its group goes too (without a cgroup,
	 * all there is). Only the group: the pid itself is reaped and may be
	 * reused.
	 */
	if (p->pid > 0)
		kill(-p->pid, SIGKILL);
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
		p->ev_relay = evtimer_new(spawn_base, spawn_relay_late, p);
		evtimer_add(p->ev_relay, &rtv);
	} else
		spawn_term_done(p);
}

/* A reaped child: whose it was, and what follows. */
static void
spawn_dispatch(pid_t pid, int status)
{
	struct proc	*p;
	int		 i;

	TAILQ_FOREACH(p, &procs, entry) {
		if (p->pid == pid && !p->exited) {
			spawn_exited(p, status);
			return;
		}
		if (p->relay == pid && !p->relay_exited) {
			p->relay_exited = 1;
			p->relay_status = status;
			if (p->exited)
				spawn_term_done(p);
			return;
		}
		if (p->slirp == pid) {
			p->slirp = -1;
			return;
		}
	}
	if (spawner_reaped(pid, status) || files_reaped(pid, status))
		return;
	for (i = 0; i < spawn_ndiscards; i++)
		if (spawn_discards[i] == pid) {
			spawn_discards[i] = spawn_discards[--spawn_ndiscards];
			return;
		}
}

/*
 * Reap children; finish what they leave. Spawns are sandboxd's children
 * but started by a spawner, so a spawn may exit before its pid arrives:
 * while a spawner owes an answer, only known pids are reaped (an unknown
 * zombie keeps its pid, never reused before it is known and reaped).
 */
void
spawn_reap(void)
{
	struct proc	*p;
	pid_t		*pids, pid;
	size_t		 n = 0, max, i;
	int		 status;

	if (spawner_pending() == 0) {
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			spawn_dispatch(pid, status);
		return;
	}
	max = 3 * 4096 + SPAWN_DISCARDS + 1024 + 256;
	if ((pids = calloc(max, sizeof(*pids))) == NULL)
		fatal("%s", __func__);
	TAILQ_FOREACH(p, &procs, entry) {
		if (n + 3 > max - SPAWN_DISCARDS - 1024)
			break;
		if (p->pid > 0 && !p->exited)
			pids[n++] = p->pid;
		if (p->relay > 0 && !p->relay_exited)
			pids[n++] = p->relay;
		if (p->slirp > 0)
			pids[n++] = p->slirp;
	}
	n += spawner_pids(pids + n, 1024);
	n += files_pids(pids + n, 256);	/* file operations (files.c) */
	for (i = 0; i < (size_t)spawn_ndiscards; i++)
		pids[n++] = spawn_discards[i];
	for (i = 0; i < n; i++)
		if (waitpid(pids[i], &status, WNOHANG) == pids[i])
			spawn_dispatch(pids[i], status);
	free(pids);
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

/* A spawn that could not start: it fails as a whole, cgroup and all. */
static void
spawn_failed(struct proc *p, const char *err)
{
	snprintf(p->error, sizeof(p->error), "%s", err);
	spawn_proc_ctx(p);
	log_warnx("spawn %s: %s", p->id, err);
	log_ctx_clear();
	/* A terminal reports an exit (127, as a shell does for "not found"). */
	spawn_exited(p, W_EXITCODE(127, 0));
}

/*
 * The spawner answered: the spawn's pid, or why it did not start (a pid
 * with an error is a child it killed). The child may have exited already.
 */
void
spawn_started(uint64_t seq, pid_t pid, pid_t slirp, int slirp_exit,
    const int *snmp, const char *err)
{
	struct proc	*p;
	int		 i;

	TAILQ_FOREACH(p, &procs, entry)
		if (p->seq == seq)
			break;
	if (p == NULL || p->pid != -1 || p->exited) {
		if (pid > 0)
			kill(pid, SIGKILL);
		spawn_discard(pid);
		spawn_discard(slirp);
		if (slirp_exit != -1)
			close(slirp_exit);
		for (i = 0; snmp != NULL && i < 2; i++)
			if (snmp[i] != -1)
				close(snmp[i]);
		spawn_reap();
		return;
	}
	p->slirp = slirp;
	p->slirp_exit = slirp_exit;
	for (i = 0; snmp != NULL && i < 2; i++)
		p->snmp[i] = snmp[i];
	if (err[0] != '\0') {
		snprintf(p->error, sizeof(p->error), "%s", err);
		if (pid <= 0) {
			spawn_failed(p, err);
			spawn_reap();
			return;
		}
		spawn_proc_ctx(p);
		log_warnx("spawn %s: %s", p->id, err);
		log_ctx_clear();
	}
	p->pid = pid;
	/* The parent makes the group too, so kill(-pid) works at once. */
	if (p->kind == SPAWN_COMMAND)
		setpgid(pid, pid);
	if (p->pending_sig != 0)
		spawn_signal(p, p->pending_sig);
	spawn_reap();
}

/* The uid and gid a spawn runs as, and whether the child switches. */
static int
spawn_ids(const struct spawn_spec *s, const char *backend, int *setid,
    char *err, size_t errsz)
{
	/* The docker CLI needs sandboxd's access to the engine's socket. */
	*setid = spawn_setid && strcmp(backend, "docker") != 0;
	if (*setid && (s->uid == 0 || s->gid == 0 || s->uid == getuid())) {
		snprintf(err, errsz, "no uid of its own for user %s", s->user);
		return -1;
	}
	return 0;
}

/*
 * Make the spawn's cgroup with its limits: cgfd and cgprocs are what the
 * spawner moves the child in by. -1 with err when it cannot be made.
 */
static int
spawn_cgroup(struct proc *p, const struct spawn_spec *s, int *cgfd,
    char *cgprocs, size_t cgprocssz, char *err, size_t errsz)
{
	struct cg_limits	lim;

	cgroup_limits_spawn(spawn_conf, &lim);
	if (cgroup_spawn(s->user, spawn_cg_session(p), p->id, &lim,
	    cgfd, cgprocs, cgprocssz, err, errsz) == -1)
		return -1;
	p->cg = 1;
	p->oom_start = cgroup_oom_kills(s->user, p->id);
	if (cgroup_path(s->user, spawn_cg_session(p), p->id, p->cgroup,
	    sizeof(p->cgroup)) == NULL)
		p->cgroup[0] = '\0';
	return 0;
}

/*
 * Open a terminal's pty of cols x rows: the master in p, the slave (the
 * child's stdio) in *slave, and its recording if one is wanted. -1 with err.
 */
static int
spawn_pty(struct proc *p, const struct spawn_spec *s, int setid, int cols,
    int rows, int *slave, char *err, size_t errsz)
{
	struct winsize	 ws;
	char		 ptsname_buf[64];

	p->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (p->master == -1 || grantpt(p->master) == -1 ||
	    unlockpt(p->master) == -1 ||
	    ptsname_r(p->master, ptsname_buf, sizeof(ptsname_buf)) != 0 ||
	    (*slave = open(ptsname_buf, O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "cannot spawn: %s", strerror(errno));
		return -1;
	}
	/* The user's shell owns its terminal (root mode). */
	if (setid)
		(void)!fchown(*slave, s->uid, -1);
	memset(&ws, 0, sizeof(ws));
	ws.ws_col = cols > 0 ? cols : 80;
	ws.ws_row = rows > 0 ? rows : 24;
	ioctl(p->master, TIOCSWINSZ, &ws);
	if (record_wanted(s) &&
	    spawn_record(p, s, ws.ws_col, ws.ws_row, err, errsz) == -1)
		return -1;
	return 0;
}

/*
 * Watch a started command: read its stdout and stderr (the read ends of
 * pout and perr) up to cap bytes, and kill it after timeout_ms; the answer
 * goes to peer's request req_id.
 */
static void
spawn_command_watch(struct proc *p, int pout[2], int perr[2], size_t cap,
    int timeout_ms, struct ipc_peer *peer, int64_t req_id)
{
	struct timeval	tv;

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

/*
 * One uid for everything: direct mode cannot see hostgate's files, and the
 * shared uid has the user's name, as in the sandbox. hide (4 entries) and
 * files hold what j points to until it is submitted.
 */
static int
spawn_direct_hider(struct spawner_job *j, const struct spawn_spec *s,
    const char *hide[4], struct passwd_files *files, char *err, size_t errsz)
{
	hide[0] = spawn_conf->state_dir;
	hide[1] = spawn_conf->run_dir;
	hide[2] = spawn_conf->workspace_root;
	hide[3] = NULL;
	j->hide = hide;
	j->workspace = s->workspace;
	if (passwd_ensure(s->user, getuid(), getgid(), s->workspace, files,
	    err, errsz) == -1)
		return -1;
	j->passwd = files->passwd;
	j->group = files->group;
	return 0;
}

/*
 * Start an approved spawn with the argv (and envp) a backend built.
 * Commands answer brokerd (peer, req_id) when done; terminals return at
 * once. The process itself is started by the user's spawner: its pid
 * arrives later (spawn_started). Returns the entry, or NULL with err.
 */
struct proc *
spawn_start(const struct spawn_spec *s, const char *backend,
    const struct strv *argv, char *const envp[], int stdin_fd,
    int timeout_ms, size_t cap, int cols, int rows, struct ipc_peer *peer,
    int64_t req_id, char *err, size_t errsz)
{
	struct spawner_job	 j;
	struct passwd_files	 files;
	struct proc		*p;
	char			*line, cgprocs[1024];
	const char		*hide[4];
	int			 pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int			 devnull = -1, slave = -1, cgfd = -1, setid;

	p = spawn_proc_new(s, backend);
	line = strv_join(argv);
	sha256_hex(line, strlen(line), p->cmd_sha256);
	log_info("spawn %s %s for %s (%s, %s): sha256 %s", p->id,
	    s->kind == SPAWN_TERMINAL ? "terminal" : "command", s->user,
	    s->mode == MODE_DIRECT ? "DIRECT" : "sandbox", backend,
	    p->cmd_sha256);
	log_debug("spawn %s: %s", p->id, line);
	free(line);

	if (spawn_ids(s, backend, &setid, err, errsz) == -1 ||
	    spawner_user(s->user, err, errsz) == -1)
		goto fail;
	p->uid = setid ? s->uid : getuid();
	snprintf(p->cwd, sizeof(p->cwd), "%s", s->cwd ? s->cwd : "");
	cgprocs[0] = '\0';
	if (cgroup_enabled() && spawn_cgroup(p, s, &cgfd, cgprocs,
	    sizeof(cgprocs), err, errsz) == -1)
		goto fail;
	if ((devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1)
		goto fail_errno;
	if (stdin_fd != -1)
		lseek(stdin_fd, 0, SEEK_SET);

	if (s->kind == SPAWN_TERMINAL) {
		if (spawn_pty(p, s, setid, cols, rows, &slave, err,
		    errsz) == -1)
			goto fail;
	} else {
		if (pipe2(pout, O_CLOEXEC) == -1 ||
		    pipe2(perr, O_CLOEXEC) == -1)
			goto fail_errno;
		if ((p->mem[0] = spawn_memfd("stdout")) == -1 ||
		    (p->mem[1] = spawn_memfd("stderr")) == -1)
			goto fail_errno;
	}

	memset(&j, 0, sizeof(j));
	j.seq = p->seq;
	j.user = s->user;
	j.tty = slave != -1;
	j.stdio[0] = slave != -1 ? slave : stdin_fd != -1 ? stdin_fd : devnull;
	j.stdio[1] = slave != -1 ? slave : pout[1];
	j.stdio[2] = slave != -1 ? slave : perr[1];
	/* What bwrap gets on fds 3...: see bwrap_build's fixed numbers. */
	j.keep = s->seccomp_fd;
	j.netgate = s->netgate;
	j.netcount = s->netcount;
	j.cgfd = cgfd;
	j.procs = cgprocs;
	j.setid = setid;
	j.uid = s->uid;
	j.gid = s->gid;
	j.cwd = s->mode == MODE_DIRECT ? s->cwd : NULL;
	if (s->mode == MODE_DIRECT && !setid && spawn_direct_hider(&j, s,
	    hide, &files, err, errsz) == -1)
		goto fail;
	j.nproc = p->cg ? SPAWN_NPROC_CG : SPAWN_NPROC;
	j.argv = argv->v;
	j.envp = envp;
	if (spawner_submit(&j, err, errsz) == -1)
		goto fail;
	p->started = now_mono_ms();
	close(devnull);
	if (cgfd != -1)
		close(cgfd);
	if (slave != -1)
		close(slave);
	if (s->kind == SPAWN_COMMAND)
		spawn_command_watch(p, pout, perr, cap, timeout_ms, peer,
		    req_id);
	TAILQ_INSERT_TAIL(&procs, p, entry);
	return p;

fail_errno:
	snprintf(err, errsz, "cannot spawn: %s", strerror(errno));
fail:
	log_warnx("spawn %s: %s", p->id, err);
	if (p->relay != -1)
		kill(p->relay, SIGKILL);
	if (p->cg)
		cgroup_spawn_kill(s->user, spawn_cg_session(p), p->id);
	if (cgfd != -1)
		close(cgfd);
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
	p->killed = 1;
	spawn_signal(p, SIGHUP);
	spawn_signal(p, SIGCONT);
	if (p->ev_kill == NULL)
		p->ev_kill = evtimer_new(spawn_base, spawn_kill_late, p);
	evtimer_add(p->ev_kill, &tv);
	return 0;
}

/*
 * Kill every live spawn of a session in a mode; for direct mode the whole
 * cgroup of the session's direct spawns too (what they left running).
 */
int
spawn_kill_session(const char *session, enum exec_mode mode)
{
	struct proc	*p;
	int		 n = 0;

	TAILQ_FOREACH(p, &procs, entry)
		if (p->session[0] != '\0' && strcmp(p->session, session) == 0 &&
		    p->mode == mode && !p->exited) {
			p->killed = 1;
			spawn_signal(p, SIGKILL);
			n++;
		}
	if (mode == MODE_DIRECT && cgroup_enabled() &&
	    cgroup_session_kill(session) == -1)
		log_warnx("session %.8s: cannot kill its direct cgroup",
		    session);
	return n;
}

/* Whether a spawn died of an OOM kill in its cgroup (terminals). */
int
spawn_oom(struct proc *p)
{
	return p->oom;
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

/*
 * Where a spawn runs, for its audit records: the uid it runs as, its
 * cgroup (or null), cwd.
 */
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

/* Whether spawns run as their user's own uid (CAP_SETUID kept). */
int
spawn_per_user(void)
{
	return spawn_setid;
}

/* The spawn engine's event base and the terminal-exit callback. */
void
spawn_init(struct event_base *base, struct config *conf,
    void (*exit_cb)(struct proc *))
{
	cap_t			caps;
	cap_flag_value_t	v = CAP_CLEAR, w = CAP_CLEAR;

	spawn_base = base;
	spawn_conf = conf;
	spawn_exit_cb = exit_cb;
	/* Root mode keeps CAP_SETUID and CAP_SETGID for exactly this. */
	if ((caps = cap_get_proc()) != NULL) {
		cap_get_flag(caps, CAP_SETUID, CAP_EFFECTIVE, &v);
		cap_get_flag(caps, CAP_SETGID, CAP_EFFECTIVE, &w);
		cap_free(caps);
	}
	spawn_setid = v == CAP_SET && w == CAP_SET && getuid() != 0;
	log_info("spawns run as %s", spawn_setid ? "their user's own uid" :
	    "sandboxd's uid (one uid for everything)");
	spawner_init(base, conf);
}
