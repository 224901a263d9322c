/*
 * The per-user spawner: a process forked from sandboxd the first time a
 * user spawns. It keeps sandboxd's uid and kept capabilities, joins the
 * user's cgroups once (the v1 limit hierarchies and u-USER/spawner in v2)
 * and from then on starts that user's spawns on request. Each spawn is
 * created with clone3(CLONE_PARENT | CLONE_INTO_CGROUP): it is sandboxd's
 * child (sandboxd reaps it, PR_SET_PDEATHSIG points at sandboxd), born in
 * its own v2 cgroup and in the spawner's v1 cgroups, so no spawn pays for
 * a migration (a write to cgroup.procs waits for an RCU grace period).
 *
 * sandboxd never waits on a spawner: requests and replies are messages on
 * a SOCK_SEQPACKET socketpair, read by sandboxd's event loop. A spawner
 * may wait (a network-profile spawn waits for its network), and delays
 * only its own user's spawns then. When sandboxd goes away, the socket
 * closes and the spawner kills its user's cgroups before it exits, so that
 * nothing outlives sandboxd.
 */
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sys/capability.h>

#include "sandboxd.h"

#define SPAWNER_MSG_MAX	(256 * 1024)	/* one request: argv, envp, paths */
#define SPAWNER_BUF	(1024 * 1024)	/* socket buffers: queued requests */
#define SPAWNER_INFLIGHT 256		/* requests sent, not yet answered */
#define SPAWNER_FDS	(3 + SPAWN_MAX_KEEP + 1)
#define SPAWNER_NET_MS	5000		/* to bring a sandbox's network up */
#define SPAWNER_SLIRP	"/usr/bin/slirp4netns"

/* Request flags. */
#define SPAWNER_F_TTY	0x1	/* one stdio fd, a pty slave */
#define SPAWNER_F_NET	0x2	/* bwrap waits for its network (fds 4-6) */
#define SPAWNER_F_SETID	0x4	/* switch to uid/gid */
#define SPAWNER_F_CG	0x8	/* the last fd is the v2 cgroup directory */
#define SPAWNER_F_FILE	0x10	/* a workspace file operation (files.c) */
#define SPAWNER_F_COUNT	0x20	/* bwrap reports its pid, waits (fds 4-5) */
#define SPAWNER_HIDE_MAX 8	/* directories a direct spawn cannot see */
#define SPAWNER_DIRECT	"hostgate-direct"	/* argv[0] of the hider */

/*
 * sandboxd -> spawner: this header, then NUL-terminated strings (the v1
 * cgroup.procs path, the cwd to enter, argc args, envc variables, nhide
 * directories to hide and, when nhide > 0, the workspace to keep and the
 * passwd and group files to bind, "" for none), and as
 * SCM_RIGHTS: stdio (3, or 1 with SPAWNER_F_TTY), nkeep fds for bwrap,
 * and the cgroup directory with SPAWNER_F_CG. A file operation
 * (SPAWNER_F_FILE) has the workspace, op and path as its strings, and as
 * fds the socket its answer goes to and, for a write, the content.
 */
struct spawner_req {
	uint64_t	seq;
	uint32_t	flags;
	uint32_t	nkeep;
	uint32_t	uid;
	uint32_t	gid;
	int32_t		nproc;		/* RLIMIT_NPROC */
	uint32_t	argc;
	uint32_t	envc;
	uint32_t	nhide;		/* then workspace, passwd, group */
	uint32_t	pad;
	int64_t		fsize;		/* SPAWNER_F_FILE: bytes to write */
};

/*
 * spawner -> sandboxd, one per request in order: the pid (or -1), the
 * pid of slirp4netns (or -1), and why it failed ("" when it did not); as
 * SCM_RIGHTS, in this order, the fds that fdmask names: slirp4netns's
 * exit fd, the sandbox's /proc/net/snmp and /proc/net/snmp6. A pid with
 * an error is a child that was killed: sandboxd reaps it.
 */
struct spawner_rep {
	uint64_t	seq;
	int32_t		pid;
	int32_t		slirp;
	uint32_t	fdmask;		/* SPAWNER_REP_* */
	uint32_t	pad;
	char		err[480];
};
#define SPAWNER_REP_SLIRP	0x1
#define SPAWNER_REP_SNMP	0x2
#define SPAWNER_REP_SNMP6	0x4
#define SPAWNER_REP_FDS		3

/* sandboxd's side: one entry per user with a spawner. */
struct spawner {
	char			 user[40];
	pid_t			 pid;		/* -1 once reaped */
	int			 fd;		/* -1 once closed */
	struct event		*ev;
	uint64_t		 inflight[SPAWNER_INFLIGHT];
	size_t			 head, n;
	TAILQ_ENTRY(spawner)	 entry;
};

static TAILQ_HEAD(, spawner)	 spawners = TAILQ_HEAD_INITIALIZER(spawners);
static struct event_base	*spawner_base;
static struct config		*spawner_conf;
static size_t			 spawner_ninflight;

/* Send everything a message holds, with fds; 0 or -1 (errno). */
static int
spawner_send(int fd, const void *buf, size_t len, const int *fds, int nfds,
    int flags)
{
	struct msghdr	 msg;
	struct iovec	 iov;
	struct cmsghdr	*cm;
	union {
		char		buf[CMSG_SPACE(sizeof(int) * SPAWNER_FDS)];
		struct cmsghdr	align;
	} cmsgbuf;

	memset(&msg, 0, sizeof(msg));
	iov.iov_base = (void *)buf;
	iov.iov_len = len;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (nfds > 0) {
		memset(&cmsgbuf, 0, sizeof(cmsgbuf));
		msg.msg_control = cmsgbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	for (;;) {
		if (sendmsg(fd, &msg, MSG_NOSIGNAL | flags) == (ssize_t)len)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

/* Receive one message and its fds (*nfds in: room, out: count). */
static ssize_t
spawner_recv(int fd, void *buf, size_t len, int *fds, int *nfds, int flags)
{
	struct msghdr	 msg;
	struct iovec	 iov;
	struct cmsghdr	*cm;
	union {
		char		buf[CMSG_SPACE(sizeof(int) * SPAWNER_FDS)];
		struct cmsghdr	align;
	} cmsgbuf;
	ssize_t		 n;
	int		 room = *nfds, got, i;

	memset(&msg, 0, sizeof(msg));
	iov.iov_base = buf;
	iov.iov_len = len;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cmsgbuf.buf;
	msg.msg_controllen = sizeof(cmsgbuf.buf);
	*nfds = 0;
	while ((n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | flags)) == -1 &&
	    errno == EINTR)
		;
	if (n == -1)
		return -1;
	for (cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		got = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < got; i++) {
			int	f;

			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (*nfds < room)
				fds[(*nfds)++] = f;
			else
				close(f);
		}
	}
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		errno = EMSGSIZE;
		return -1;
	}
	return n;
}

/* ------------------------------------------------------------------ */
/* The spawner process.                                                */

static struct {
	const char	*user;
	int		 sock;
	pid_t		 sandboxd;	/* the parent of every spawn */
	cap_t		 nocaps;	/* what a spawn keeps: nothing */
	char		 joined[256];	/* why the user's cgroups failed, or "" */
} sp;

/* Write all of text to fd; -1 on a short write. */
static int
spawner_write(int fd, const char *text)
{
	size_t	len = strlen(text);

	return write(fd, text, len) == (ssize_t)len ? 0 : -1;
}

/* The kernel's clone3: a child like fork's, with the given flags. */
static pid_t
spawner_clone(uint64_t flags, int cgfd, int *pidfd)
{
	struct clone_args	ca;

	memset(&ca, 0, sizeof(ca));
	ca.flags = flags;
	if (cgfd != -1) {
		ca.flags |= CLONE_INTO_CGROUP;
		ca.cgroup = (uint64_t)cgfd;
	}
	if (pidfd != NULL) {
		ca.flags |= CLONE_PIDFD;
		ca.pidfd = (uint64_t)(uintptr_t)pidfd;
	}
	/* With CLONE_PARENT the child's exit signal is the spawner's. */
	ca.exit_signal = (flags & CLONE_PARENT) ? 0 : SIGCHLD;
	return (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
}

/*
 * In a new child: who it is from now on. The user's ids (root mode), no
 * capability left, and SIGKILL when sandboxd dies (set after the id
 * switch, which clears it). Exits on failure.
 */
static void
spawner_become(int setid, uid_t uid, gid_t gid)
{
	if (setid && (setgroups(1, &gid) == -1 ||
	    setresgid(gid, gid, gid) == -1 || setresuid(uid, uid, uid) == -1)) {
		dprintf(2, "hostgate: cannot switch to uid %u: %s\n",
		    (unsigned)uid, strerror(errno));
		_exit(126);
	}
	if (cap_set_proc(sp.nocaps) == -1 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1) {
		dprintf(2, "hostgate: cannot drop capabilities: %s\n",
		    strerror(errno));
		_exit(126);
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1)
		_exit(126);
	if (getppid() != sp.sandboxd)
		_exit(126);	/* sandboxd died before the line above */
}

/* Signals of a fresh child: nothing blocked, nothing caught or ignored. */
static void
spawner_signals_default(void)
{
	sigset_t	none;
	int		sig;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
}

/* The limits of every spawned process. */
static void
spawner_rlimits(int nproc)
{
	struct rlimit	rl;

	rl.rlim_cur = rl.rlim_max = 0;
	setrlimit(RLIMIT_CORE, &rl);
	rl.rlim_cur = rl.rlim_max = SPAWN_FSIZE;
	setrlimit(RLIMIT_FSIZE, &rl);
	rl.rlim_cur = rl.rlim_max = SPAWN_NOFILE;
	setrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max = nproc;
	setrlimit(RLIMIT_NPROC, &rl);
}

/* Write a /proc/PID file (uid_map, gid_map, setgroups). */
static int
spawner_proc_write(pid_t pid, const char *name, const char *text)
{
	char	path[64];
	int	fd, rc;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	rc = spawner_write(fd, text);
	close(fd);
	return rc;
}

/* mkdir -p of a mount point, in a tmpfs made just before. */
static int
spawner_mkdirs(const char *path)
{
	char	buf[4096], *p;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -1;
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0755) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

/* Bind the file fd holds (O_PATH) over path, read-only; 0, or -1. */
static int
spawner_bind_ro(int fd, const char *path)
{
	char	src[64];

	struct statvfs	 sv;
	unsigned long	 keep = 0;

	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	if (mount(src, path, NULL, MS_BIND, NULL) == -1 ||
	    statvfs(path, &sv) == -1)
		return -1;
	/* The flags the namespace may not drop, kept (as bwrap does). */
	if (sv.f_flag & ST_NOSUID)
		keep |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		keep |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		keep |= MS_NOEXEC;
	if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | keep,
	    NULL) == -1)
		return -1;
	close(fd);
	return 0;
}

/*
 * One uid for everything (rootless): a direct spawn gets a user and mount
 * namespace of its own where hostgate's directories are empty tmpfs and
 * only the user's workspace is bound back, with the user's /etc/passwd
 * and /etc/group (passwd.c) over the host's. Same uid, host network and
 * processes: it hides what the uid could otherwise read, no more. The
 * namespace's capabilities end at exec (the uid inside is not 0). Runs in
 * a fresh image of sandboxd's binary (spawner_direct_main): it writes its
 * own uid_map, which a non-dumpable process cannot, and a copy of
 * sandboxd's memory must never be dumpable.
 */
static void
spawner_hide(char **hide, int nhide, const char *workspace,
    const char *passwd, const char *group)
{
	char	map[64], src[64];
	uid_t	uid = getuid();
	gid_t	gid = getgid();
	int	ws, pw = -1, gr = -1, i;

	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == -1)
		goto fail;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (spawner_proc_write(getpid(), "uid_map", map) == -1 ||
	    spawner_proc_write(getpid(), "setgroups", "deny\n") == -1)
		goto fail;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (spawner_proc_write(getpid(), "gid_map", map) == -1 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1)
		goto fail;
	/* Held in the new namespace's tree: bound back once hidden. */
	if ((ws = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1)
		goto fail;
	/* sandboxd's files under the workspace root, held the same way. */
	if (passwd[0] != '\0' && (pw = open(passwd, O_PATH | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		goto fail;
	if (group[0] != '\0' && (gr = open(group, O_PATH | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		goto fail;
	for (i = 0; i < nhide; i++)
		if (mount("tmpfs", hide[i], "tmpfs", MS_NOSUID | MS_NODEV |
		    MS_NOEXEC, "size=64k,mode=0755") == -1 && errno != ENOENT)
			goto fail;
	snprintf(src, sizeof(src), "/proc/self/fd/%d", ws);
	if (spawner_mkdirs(workspace) == -1 ||
	    mount(src, workspace, NULL, MS_BIND | MS_REC, NULL) == -1)
		goto fail;
	close(ws);
	/*
	 * The user's name for the shared uid, as in the sandbox: the files
	 * are the uid's own, so the binds are read-only (and stay so: the
	 * namespace's capabilities end at exec).
	 */
	if ((pw != -1 && spawner_bind_ro(pw, "/etc/passwd") == -1) ||
	    (gr != -1 && spawner_bind_ro(gr, "/etc/group") == -1))
		goto fail;
	return;
fail:
	dprintf(2, "hostgate: cannot hide hostgate's directories: %s\n",
	    strerror(errno));
	_exit(126);
}

/*
 * The spawn itself, in the child of clone3: a clean slate, then exec.
 * What it prints on failure reaches the command's stderr or the terminal.
 */
static void
spawner_child(const struct spawner_req *rq, const char *procs,
    const char *cwd, char **argv, char **envp, char **hide,
    char *const *etc, const int *stdio, const int *keep, int nkeep)
{
	int	high[SPAWN_MAX_KEEP], i, fd;

	spawner_signals_default();
	/* v1 only: into the spawn's own cgroup, before anything can fork. */
	if (procs[0] != '\0') {
		if ((fd = open(procs, O_WRONLY | O_CLOEXEC)) == -1 ||
		    write(fd, "0", 1) != 1) {
			dprintf(stdio[2], "hostgate: cannot join %s: %s\n",
			    procs, strerror(errno));
			_exit(126);
		}
		close(fd);
	}
	if (rq->flags & SPAWNER_F_TTY) {
		/* A session of its own with the pty as controlling tty. */
		if (setsid() == -1 || ioctl(stdio[0], TIOCSCTTY, 0) == -1)
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
	if (dup2(stdio[0], 0) == -1 || dup2(stdio[1], 1) == -1 ||
	    dup2(stdio[2], 2) == -1)
		_exit(126);
	for (i = 0; i < nkeep; i++)
		if (dup2(high[i], 3 + i) == -1)
			_exit(126);
	close_range(3 + nkeep, ~0U, 0);
	spawner_rlimits(rq->nproc);
	spawner_become(rq->flags & SPAWNER_F_SETID, rq->uid, rq->gid);
	umask(077);
	if (rq->nhide > 0) {
		char	**nargv;
		int	  n = 0;

		/*
		 * hostgate-direct DIR... -- WORKSPACE PASSWD GROUP CWD
		 * ARGV...
		 */
		if ((nargv = calloc(rq->nhide + rq->argc + 7,
		    sizeof(*nargv))) == NULL)
			_exit(126);
		nargv[n++] = SPAWNER_DIRECT;
		for (i = 0; i < (int)rq->nhide; i++)
			nargv[n++] = hide[i];
		nargv[n++] = "--";
		for (i = 0; i < 3; i++)
			nargv[n++] = etc[i];
		nargv[n++] = (char *)cwd;
		for (i = 0; i < (int)rq->argc; i++)
			nargv[n++] = argv[i];
		execve("/proc/self/exe", nargv, envp);
		dprintf(2, "hostgate: cannot run sandboxd's binary: %s\n",
		    strerror(errno));
		_exit(127);
	}
	if (cwd[0] != '\0' && chdir(cwd) == -1) {
		dprintf(2, "hostgate: cannot enter %s\n", cwd);
		_exit(126);
	}
	execve(argv[0], argv, envp);
	dprintf(2, "hostgate: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Whether fd becomes readable before the deadline; 0 yes, -1 no. */
static int
spawner_poll(int fd, int pidfd, int64_t deadline)
{
	struct pollfd	pfd[2];
	int		left, n;

	pfd[0].fd = fd;
	pfd[0].events = POLLIN;
	pfd[1].fd = pidfd;
	pfd[1].events = POLLIN;
	for (;;) {
		if ((left = (int)(deadline - now_mono_ms())) <= 0)
			return -1;
		n = poll(pfd, pidfd != -1 ? 2 : 1, left);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		/* Data first: a child may write and exit at once. */
		if (pfd[0].revents)
			return 0;
		if (pfd[1].revents)
			return -1;	/* bwrap exited */
	}
}

/* Read from fd until pat appears or the deadline passes; 0 when found. */
static int
spawner_wait(int fd, int pidfd, const char *pat, char *buf, size_t bufsz,
    int64_t deadline)
{
	size_t	len = 0;
	ssize_t	n;

	buf[0] = '\0';
	while (strstr(buf, pat) == NULL) {
		if (spawner_poll(fd, pidfd, deadline) == -1 || len + 1 >= bufsz)
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

/*
 * Map the sandbox's user namespace: the user's uid and gid to themselves,
 * as bwrap would. The writer's effective ids must own the namespace, so
 * the spawner borrows the user's for the three writes (root mode).
 */
static const char *
spawner_map(pid_t child, int setid, uid_t uid, gid_t gid)
{
	char		 map[64];
	const char	*what = "ids";
	int		 saved;

	if (setid && (setresgid(-1, gid, -1) == -1 ||
	    setresuid(-1, uid, -1) == -1))
		goto out;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (spawner_proc_write(child, what = "uid_map", map) == -1 ||
	    spawner_proc_write(child, what = "setgroups", "deny\n") == -1)
		goto out;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (spawner_proc_write(child, what = "gid_map", map) == -1)
		goto out;
	what = NULL;
out:
	saved = errno;
	if (setid && (setresuid(-1, getuid(), -1) == -1 ||
	    setresgid(-1, getgid(), -1) == -1))
		_exit(1);	/* cannot get its own ids back: never go on */
	errno = saved;
	return what;
}

/* Whether the namespace's loopback is up with 127.0.0.1 (ioctl on s). */
static int
spawner_lo_ready(int s)
{
	struct ifreq	ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == -1 || !(ifr.ifr_flags & IFF_UP))
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	return ioctl(s, SIOCGIFADDR, &ifr) == 0;
}

/*
 * A watcher, in a child that joins the sandbox's user and network
 * namespaces: it reports "1" on ready once bwrap has set the loopback up
 * (address, then link), seen through the kernel's own rtnetlink events.
 * slirp4netns configures the namespace after that, never at the same
 * time (both would fail). No architecture, syscall or fd number involved.
 */
static void
spawner_lo_watch(pid_t child, int ready)
{
	struct sockaddr_nl	 snl;
	char			 path[64], buf[8192];
	int			 fd, nl, s;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)child);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    setns(fd, CLONE_NEWUSER) == -1)
		_exit(1);
	close(fd);
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)child);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    setns(fd, CLONE_NEWNET) == -1)
		_exit(1);
	close(fd);
	/* Subscribe first, then look: no change can fall between the two. */
	if ((nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC,
	    NETLINK_ROUTE)) == -1)
		_exit(1);
	memset(&snl, 0, sizeof(snl));
	snl.nl_family = AF_NETLINK;
	snl.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR;
	if (bind(nl, (struct sockaddr *)&snl, sizeof(snl)) == -1 ||
	    (s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		_exit(1);
	while (!spawner_lo_ready(s))
		if (recv(nl, buf, sizeof(buf), 0) == -1 && errno != EINTR &&
		    errno != ENOBUFS)
			_exit(1);
	(void)!write(ready, "1", 1);
	_exit(0);
}

/* Close both ends of a pipe that are still open (-1: closed). */
static void
spawner_close_pair(int p[2])
{
	if (p[0] != -1)
		close(p[0]);
	if (p[1] != -1)
		close(p[1]);
}

/*
 * slirp4netns for the network namespace netns of the user namespace
 * userns (an --userns-path= option), as the user, in the child of clone3:
 * stderr to errp, ready and exit fds 3 and 4. Never returns.
 */
static void __attribute__((noreturn))
spawner_slirp_exec(const struct spawner_req *rq, char *userns, char *netns,
    int ready[2], int ex[2], int errp[2])
{
	char *argv[] = { SPAWNER_SLIRP, "--configure", "--mtu=65520",
	    "--disable-host-loopback", userns, "--netns-type=path",
	    "--ready-fd=3", "--exit-fd=4", netns, "tap0", NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", NULL };
	int	devnull;

	spawner_signals_default();
	setpgid(0, 0);
	if ((devnull = open("/dev/null", O_RDWR)) == -1 ||
	    dup2(devnull, 0) == -1 || dup2(devnull, 1) == -1 ||
	    dup2(errp[1], 2) == -1 || dup2(ready[1], 3) == -1 ||
	    dup2(ex[0], 4) == -1)
		_exit(126);
	close_range(5, ~0U, 0);
	spawner_become(rq->flags & SPAWNER_F_SETID, rq->uid, rq->gid);
	execve(argv[0], argv, envp);
	dprintf(2, "cannot run slirp4netns: %s\n", strerror(errno));
	_exit(127);
}

/*
 * Bring a workspace-write+network sandbox's network up. bwrap reports
 * the sandbox's pid (--info-fd), waits while its user namespace is mapped
 * (--userns-block-fd), sets its loopback up, and waits again before the
 * command (--block-fd) while slirp4netns puts a tap device into the
 * network namespace, with the host's loopback out of reach
 * (--disable-host-loopback). slirp4netns runs as the user, in the spawn's
 * cgroup, as sandboxd's child. 0, or -1 and err.
 */
static int
spawner_net(const struct spawner_req *rq, int bwrap, int info, int ublock,
    int block, int cgfd, pid_t *slirp, int *slirp_exit, char *err,
    size_t errsz)
{
	char		 buf[512], userns[64], netns[64];
	int		 ready[2] = { -1, -1 }, ex[2] = { -1, -1 };
	int		 errp[2] = { -1, -1 }, lo[2] = { -1, -1 };
	int64_t		 deadline = now_mono_ms() + SPAWNER_NET_MS;
	int		 setid = rq->flags & SPAWNER_F_SETID, rc = -1;
	const char	*q;
	pid_t		 child, w = -1, sl;

	/* {"child-pid": N}: the whole object, not a part of the number. */
	if (spawner_wait(info, bwrap, "}", buf, sizeof(buf), deadline) == -1 ||
	    (q = strstr(buf, "\"child-pid\":")) == NULL) {
		snprintf(err, errsz, "network sandbox: bwrap gave no pid (%s)",
		    now_mono_ms() >= deadline ? "timed out" : "it exited");
		goto out;
	}
	child = (pid_t)strtol(q + strlen("\"child-pid\":"), NULL, 10);
	if (child <= 1) {
		snprintf(err, errsz, "network sandbox: bad pid from bwrap");
		goto out;
	}
	if ((q = spawner_map(child, setid, rq->uid, rq->gid)) != NULL) {
		snprintf(err, errsz, "network sandbox: cannot map the user "
		    "namespace (%s): %s", q, strerror(errno));
		goto out;
	}
	/* The watcher needs the user's ids to enter the namespace it owns. */
	if (pipe2(lo, O_CLOEXEC) == -1)
		goto errno_out;
	switch (w = fork()) {
	case -1:
		goto errno_out;
	case 0:
		close(lo[0]);
		if (setid && (setresgid(rq->gid, rq->gid, rq->gid) == -1 ||
		    setresuid(rq->uid, rq->uid, rq->uid) == -1))
			_exit(1);
		spawner_lo_watch(child, lo[1]);
		_exit(1);
	}
	close(lo[1]);
	lo[1] = -1;
	/* The maps are written: bwrap goes on, its loopback first. */
	if (write(ublock, "1", 1) != 1) {
		snprintf(err, errsz, "network sandbox: bwrap went away");
		goto out;
	}
	if (spawner_wait(lo[0], bwrap, "1", buf, sizeof(buf), deadline) == -1) {
		snprintf(err, errsz, "network sandbox: bwrap did not set its "
		    "loopback up");
		goto out;
	}

	if (pipe2(ready, O_CLOEXEC) == -1 || pipe2(ex, O_CLOEXEC) == -1 ||
	    pipe2(errp, O_CLOEXEC) == -1)
		goto errno_out;
	snprintf(userns, sizeof(userns), "--userns-path=/proc/%d/ns/user",
	    (int)child);
	snprintf(netns, sizeof(netns), "/proc/%d/ns/net", (int)child);
	switch (sl = spawner_clone(CLONE_PARENT, cgfd, NULL)) {
	case -1:
		goto errno_out;
	case 0:
		spawner_slirp_exec(rq, userns, netns, ready, ex, errp);
	}
	*slirp = sl;
	close(ready[1]);
	close(ex[0]);
	close(errp[1]);
	ready[1] = ex[0] = errp[1] = -1;
	if (spawner_wait(ready[0], -1, "1", buf, sizeof(buf), deadline) == -1) {
		spawner_wait(errp[0], -1, "\n", buf, sizeof(buf),
		    now_mono_ms() + 200);
		buf[strcspn(buf, "\n")] = '\0';
		snprintf(err, errsz, "the network profile is unavailable: "
		    "slirp4netns: %s", buf[0] ? buf : "did not start");
		kill(sl, SIGKILL);
		goto out;
	}
	/* The network is up: let the command start. */
	if (write(block, "1", 1) != 1) {
		snprintf(err, errsz, "network sandbox: bwrap went away");
		goto out;
	}
	*slirp_exit = ex[1];
	ex[1] = -1;
	rc = 0;
	goto out;
errno_out:
	snprintf(err, errsz, "network sandbox: %s", strerror(errno));
out:
	if (w > 0) {
		kill(w, SIGKILL);
		while (waitpid(w, NULL, 0) == -1 && errno == EINTR)
			;
	}
	spawner_close_pair(lo);
	spawner_close_pair(ready);
	spawner_close_pair(ex);
	spawner_close_pair(errp);
	return rc;
}

/*
 * An allowlist sandbox's network counters: bwrap reports the sandbox's
 * pid (--info-fd) and waits before the command (--block-fd) while its
 * /proc/net/snmp and snmp6 are opened. An open proc net file holds its
 * network namespace: sandboxd reads the counters from it when the spawn
 * ends, after every process of the sandbox is gone. The opens borrow the
 * user's ids, as spawner_map does: under the unit's ProtectProc=invisible
 * another uid's process is not in /proc at all. 0, or -1 and err.
 */
static int
spawner_count(int bwrap, int info, int block, int counters[2], int setid,
    uid_t uid, gid_t gid, char *err, size_t errsz)
{
	char		 buf[512], path[64];
	const char	*q;
	pid_t		 child;
	int64_t		 deadline = now_mono_ms() + SPAWNER_NET_MS;
	int		 saved;

	/* {"child-pid": N}: the whole object, not a part of the number. */
	if (spawner_wait(info, bwrap, "}", buf, sizeof(buf), deadline) == -1 ||
	    (q = strstr(buf, "\"child-pid\":")) == NULL) {
		snprintf(err, errsz, "allowlist sandbox: bwrap gave no pid "
		    "(%s)", now_mono_ms() >= deadline ? "timed out" :
		    "it exited");
		return -1;
	}
	child = (pid_t)strtol(q + strlen("\"child-pid\":"), NULL, 10);
	if (child <= 1) {
		snprintf(err, errsz, "allowlist sandbox: bad pid from bwrap");
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/net/snmp", (int)child);
	if (setid && (setresgid(-1, gid, -1) == -1 ||
	    setresuid(-1, uid, -1) == -1))
		snprintf(path, sizeof(path), "the user's ids");
	else if ((counters[0] = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
		snprintf(path, sizeof(path), "/proc/%d/net/snmp6", (int)child);
		counters[1] = open(path, O_RDONLY | O_CLOEXEC);
	}
	saved = errno;
	if (setid && (setresuid(-1, getuid(), -1) == -1 ||
	    setresgid(-1, getgid(), -1) == -1))
		_exit(1);	/* cannot get its own ids back: never go on */
	errno = saved;
	if (counters[0] == -1 || counters[1] == -1)
		goto fail;
	/* Counted from here on: let the command start. */
	if (write(block, "1", 1) != 1) {
		snprintf(err, errsz, "allowlist sandbox: bwrap went away");
		goto out;
	}
	return 0;
fail:
	snprintf(err, errsz, "allowlist sandbox: cannot open %s: %s", path,
	    strerror(errno));
out:
	if (counters[0] != -1)
		close(counters[0]);
	if (counters[1] != -1)
		close(counters[1]);
	counters[0] = counters[1] = -1;
	return -1;
}

/* The next NUL-terminated string of a request, or NULL past its end. */
static char *
spawner_str(char **p, const char *end)
{
	char	*s = *p, *z;

	if (s >= end || (z = memchr(s, '\0', end - s)) == NULL)
		return NULL;
	*p = z + 1;
	return s;
}

/*
 * A workspace file operation, in the child of clone3: the user's ids, no
 * capability, no_new_privs, and the operation (files_child), whose answer
 * goes to sandboxd on its own socket. Never returns.
 */
static void __attribute__((noreturn))
spawner_file_child(const struct spawner_req *rq, const char *workspace,
    const char *op, const char *path, int sock, int content)
{
	struct rlimit	rl;

	spawner_signals_default();
	prctl(PR_SET_NAME, "hg-file");	/* not taken for the spawner */
	/* Its two fds at 3 and 4 (fd 3 was the spawner's socket): no more. */
	if ((sock = fcntl(sock, F_DUPFD, 64)) == -1 || (content != -1 &&
	    (content = fcntl(content, F_DUPFD, 64)) == -1) ||
	    dup2(sock, 3) == -1 || (content != -1 && dup2(content, 4) == -1))
		_exit(126);
	close_range(content != -1 ? 5 : 4, ~0U, 0);
	rl.rlim_cur = rl.rlim_max = 0;
	setrlimit(RLIMIT_CORE, &rl);
	/* It never forks, and never holds more than a few fds. */
	setrlimit(RLIMIT_NPROC, &rl);
	rl.rlim_cur = rl.rlim_max = 64;
	setrlimit(RLIMIT_NOFILE, &rl);
	spawner_become(rq->flags & SPAWNER_F_SETID, rq->uid, rq->gid);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		_exit(126);
	umask(077);
	files_child(workspace, op, path, content != -1 ? 4 : -1, rq->fsize, 3);
	_exit(0);
}

/* Start a file operation's child; fill the reply (its pid, or why not). */
static void
spawner_file(const struct spawner_req *rq, char *p, const char *end,
    int *fds, int nfds, struct spawner_rep *rep)
{
	const char	*workspace, *op, *path;
	pid_t		 pid;

	if ((workspace = spawner_str(&p, end)) == NULL ||
	    (op = spawner_str(&p, end)) == NULL ||
	    (path = spawner_str(&p, end)) == NULL || nfds < 1 || nfds > 2) {
		snprintf(rep->err, sizeof(rep->err), "malformed file request");
		return;
	}
	/* sandboxd's child, as spawns are: it reaps it and may kill it. */
	pid = spawner_clone(CLONE_PARENT, -1, NULL);
	if (pid == 0)
		spawner_file_child(rq, workspace, op, path, fds[0],
		    nfds == 2 ? fds[1] : -1);
	if (pid == -1)
		snprintf(rep->err, sizeof(rep->err), "clone3: %s",
		    strerror(errno));
	rep->pid = pid;
}

/* Read n strings of a request into v; -1 if it ends before them. */
static int
spawner_strv(char **p, const char *end, char **v, uint32_t n)
{
	uint32_t	k;

	for (k = 0; k < n; k++)
		if ((v[k] = spawner_str(p, end)) == NULL)
			return -1;
	return 0;
}

/*
 * Make the pipes bwrap synchronises with the spawner on (a network or
 * counted spawn's) and add bwrap's ends to keep. -1 with err.
 */
static int
spawner_pipes(const struct spawner_req *rq, int info[2], int ub[2],
    int bl[2], int *keep, int *nkeep, char *err, size_t errsz)
{
	if (rq->flags & SPAWNER_F_NET) {
		/* bwrap's fds 4, 5, 6: see bwrap_build. */
		if (pipe2(info, O_CLOEXEC) == -1 || pipe2(ub, O_CLOEXEC) == -1 ||
		    pipe2(bl, O_CLOEXEC) == -1) {
			snprintf(err, errsz, "pipe: %s", strerror(errno));
			return -1;
		}
		keep[(*nkeep)++] = info[1];
		keep[(*nkeep)++] = ub[0];
		keep[(*nkeep)++] = bl[0];
	} else if (rq->flags & SPAWNER_F_COUNT) {
		/* bwrap's fds 4, 5: see bwrap_build. */
		if (pipe2(info, O_CLOEXEC) == -1 || pipe2(bl, O_CLOEXEC) == -1) {
			snprintf(err, errsz, "pipe: %s", strerror(errno));
			return -1;
		}
		keep[(*nkeep)++] = info[1];
		keep[(*nkeep)++] = bl[0];
	}
	return 0;
}

/*
 * While bwrap (pidfd) waits on its pipes: bring up a network spawn's
 * slirp4netns, or open a counted spawn's network counters. On failure the
 * spawn is killed, and told why on errfd.
 */
static void
spawner_sync(const struct spawner_req *rq, int pidfd, int info[2],
    int ub[2], int bl[2], int cgfd, int errfd, struct spawner_rep *rep,
    int *slirp_exit, int counters[2])
{
	if (rq->flags & SPAWNER_F_NET) {
		close(info[1]);
		close(ub[0]);
		close(bl[0]);
		info[1] = ub[0] = bl[0] = -1;
		if (spawner_net(rq, pidfd, info[0], ub[1], bl[1], cgfd,
		    &rep->slirp, slirp_exit, rep->err, sizeof(rep->err)) == -1) {
			/* Said where the user looks: the command or terminal. */
			dprintf(errfd, "hostgate: %s\n", rep->err);
			syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		}
	} else if (rq->flags & SPAWNER_F_COUNT) {
		close(info[1]);
		close(bl[0]);
		info[1] = bl[0] = -1;
		if (spawner_count(pidfd, info[0], bl[1], counters,
		    rq->flags & SPAWNER_F_SETID, rq->uid, rq->gid, rep->err,
		    sizeof(rep->err)) == -1) {
			dprintf(errfd, "hostgate: %s\n", rep->err);
			syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		}
	}
}

/* Start one spawn; fill the reply. */
static void
spawner_serve(char *msg, size_t len, int *fds, int nfds,
    struct spawner_rep *rep, int *slirp_exit, int counters[2])
{
	struct spawner_req	 rq;
	char			*p, *end = msg + len, *procs, *cwd;
	char			**argv = NULL, **envp = NULL;
	char			*hide[SPAWNER_HIDE_MAX];
	char			*etc[3] = { NULL, NULL, NULL };
	int			 stdio[3], keep[SPAWN_MAX_KEEP], nkeep, nstdio;
	int			 info[2] = { -1, -1 }, ub[2] = { -1, -1 };
	int			 bl[2] = { -1, -1 }, pidfd = -1, cgfd = -1, i;
	pid_t			 pid;

	if (len < sizeof(rq)) {
		snprintf(rep->err, sizeof(rep->err), "short request");
		return;
	}
	memcpy(&rq, msg, sizeof(rq));
	rep->seq = rq.seq;
	/* Without a switch, the spawn's ids are the spawner's own. */
	if (!(rq.flags & SPAWNER_F_SETID)) {
		rq.uid = getuid();
		rq.gid = getgid();
	}
	nstdio = (rq.flags & SPAWNER_F_TTY) ? 1 : 3;
	if (sp.joined[0] != '\0') {
		snprintf(rep->err, sizeof(rep->err), "%s", sp.joined);
		return;
	}
	if (rq.flags & SPAWNER_F_FILE) {
		spawner_file(&rq, msg + sizeof(rq), end, fds, nfds, rep);
		return;
	}
	if (rq.nkeep > 1 || rq.argc == 0 || rq.argc > 4096 ||
	    rq.nhide > SPAWNER_HIDE_MAX ||
	    rq.envc > 4096 || nfds != nstdio + (int)rq.nkeep +
	    ((rq.flags & SPAWNER_F_CG) ? 1 : 0)) {
		snprintf(rep->err, sizeof(rep->err), "malformed spawn request");
		return;
	}
	p = msg + sizeof(rq);
	if ((procs = spawner_str(&p, end)) == NULL ||
	    (cwd = spawner_str(&p, end)) == NULL ||
	    (argv = calloc(rq.argc + 1, sizeof(*argv))) == NULL ||
	    (envp = calloc(rq.envc + 1, sizeof(*envp))) == NULL)
		goto bad;
	if (spawner_strv(&p, end, argv, rq.argc) == -1 ||
	    spawner_strv(&p, end, envp, rq.envc) == -1 ||
	    spawner_strv(&p, end, hide, rq.nhide) == -1)
		goto bad;
	/* The workspace, passwd and group of a hidden direct spawn. */
	if (rq.nhide > 0 && spawner_strv(&p, end, etc, 3) == -1)
		goto bad;
	for (i = 0; i < 3; i++)
		stdio[i] = fds[nstdio == 1 ? 0 : i];
	nkeep = 0;
	if (rq.nkeep == 1)
		keep[nkeep++] = fds[nstdio];
	if (rq.flags & SPAWNER_F_CG)
		cgfd = fds[nfds - 1];
	if (spawner_pipes(&rq, info, ub, bl, keep, &nkeep, rep->err,
	    sizeof(rep->err)) == -1)
		goto out;
	pid = spawner_clone(CLONE_PARENT, cgfd, &pidfd);
	if (pid == 0)
		spawner_child(&rq, procs, cwd, argv, envp, hide, etc,
		    stdio, keep, nkeep);
	if (pid == -1) {
		snprintf(rep->err, sizeof(rep->err), "clone3: %s",
		    strerror(errno));
		goto out;
	}
	rep->pid = pid;
	spawner_sync(&rq, pidfd, info, ub, bl, cgfd, stdio[2], rep, slirp_exit,
	    counters);
	goto out;
bad:
	snprintf(rep->err, sizeof(rep->err), "malformed spawn request");
out:
	for (i = 0; i < 2; i++) {
		if (info[i] != -1)
			close(info[i]);
		if (ub[i] != -1)
			close(ub[i]);
		if (bl[i] != -1)
			close(bl[i]);
	}
	if (pidfd != -1)
		close(pidfd);
	free(argv);
	free(envp);
}

/* The spawner's life: join the user's cgroups, serve until sandboxd goes. */
static void __attribute__((noreturn))
spawner_main(const char *user, int sock)
{
	static char		 msg[SPAWNER_MSG_MAX];
	struct spawner_rep	 rep;
	int			 fds[SPAWNER_FDS], nfds, i, slirp_exit;
	int			 counters[2], out[SPAWNER_REP_FDS], nout;
	ssize_t			 n;

	sp.user = user;
	sp.sandboxd = getppid();
	spawner_signals_default();
	signal(SIGPIPE, SIG_IGN);
	/* Its socket on fd 3; nothing else of sandboxd's (stdio stays). */
	if (dup2(sock, 3) == -1)
		_exit(1);
	close_range(4, ~0U, 0);
	sp.sock = 3;
	prctl(PR_SET_NAME, "hg-spawner");
	if ((sp.nocaps = cap_init()) == NULL)
		_exit(1);
	if (cgroup_enabled() && cgroup_user_join(user) == -1)
		snprintf(sp.joined, sizeof(sp.joined), "cannot join the "
		    "cgroups of %s: %s", user, strerror(errno));
	for (;;) {
		nfds = SPAWNER_FDS;
		n = spawner_recv(sp.sock, msg, sizeof(msg), fds, &nfds, 0);
		if (n == 0 || (n == -1 && errno != EMSGSIZE))
			break;		/* sandboxd went away */
		memset(&rep, 0, sizeof(rep));
		rep.pid = rep.slirp = -1;
		slirp_exit = counters[0] = counters[1] = -1;
		if (n == -1)
			snprintf(rep.err, sizeof(rep.err), "request too large");
		else
			spawner_serve(msg, n, fds, nfds, &rep, &slirp_exit,
			    counters);
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		nout = 0;
		if (slirp_exit != -1) {
			out[nout++] = slirp_exit;
			rep.fdmask |= SPAWNER_REP_SLIRP;
		}
		if (counters[0] != -1) {
			out[nout++] = counters[0];
			out[nout++] = counters[1];
			rep.fdmask |= SPAWNER_REP_SNMP | SPAWNER_REP_SNMP6;
		}
		if (spawner_send(sp.sock, &rep, sizeof(rep), out, nout,
		    0) == -1)
			break;
		for (i = 0; i < nout; i++)
			close(out[i]);
	}
	/* Nothing of this user's outlives sandboxd. */
	if (cgroup_enabled())
		cgroup_user_kill(user);
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* sandboxd's side.                                                    */

/* The entry of a user's live spawner, or NULL. */
static struct spawner *
spawner_find(const char *user)
{
	struct spawner	*s;

	TAILQ_FOREACH(s, &spawners, entry)
		if (s->fd != -1 && strcmp(s->user, user) == 0)
			return s;
	return NULL;
}

/* Free an entry once its process is reaped and its socket closed. */
static void
spawner_free(struct spawner *s)
{
	if (s->pid != -1 || s->fd != -1)
		return;
	TAILQ_REMOVE(&spawners, s, entry);
	free(s);
}

/* The socket closed (the spawner died): what it had not answered fails. */
static void
spawner_lost(struct spawner *s)
{
	uint64_t	seqs[SPAWNER_INFLIGHT];
	size_t		n = 0, i;

	if (s->ev != NULL)
		event_free(s->ev);
	s->ev = NULL;
	close(s->fd);
	s->fd = -1;
	if (s->n > 0)
		log_warnx("the spawner of %s went away with %zu spawn(s) "
		    "unanswered", s->user, s->n);
	while (s->n > 0) {
		seqs[n++] = s->inflight[s->head];
		s->head = (s->head + 1) % SPAWNER_INFLIGHT;
		s->n--;
		spawner_ninflight--;
	}
	/* Before the answers: they reap, which may free s too. */
	spawner_free(s);
	for (i = 0; i < n; i++) {
		if (seqs[i] & FILES_SEQ)
			files_started(seqs[i], -1, "the spawner went away");
		else
			spawn_started(seqs[i], -1, -1, -1, NULL,
			    "the spawner went away");
	}
}

/* How many fds a reply's fdmask names: -1 when it names others too. */
static int
spawner_rep_nfds(uint32_t mask)
{
	if (mask & ~(uint32_t)(SPAWNER_REP_SLIRP | SPAWNER_REP_SNMP |
	    SPAWNER_REP_SNMP6))
		return -1;
	return !!(mask & SPAWNER_REP_SLIRP) + !!(mask & SPAWNER_REP_SNMP) +
	    !!(mask & SPAWNER_REP_SNMP6);
}

/* Replies from a spawner: each one ends a request, in order. */
static void
spawner_read(evutil_socket_t fd, short ev, void *arg)
{
	struct spawner		*s = arg;
	struct spawner_rep	 rep;
	int			 fds[SPAWNER_FDS], nfds, slirp_exit, k;
	int			 counters[2];
	ssize_t			 n;

	for (;;) {
		nfds = SPAWNER_FDS;
		n = spawner_recv(s->fd, &rep, sizeof(rep), fds, &nfds,
		    MSG_DONTWAIT);
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n != sizeof(rep) || s->n == 0 ||
		    rep.seq != s->inflight[s->head] ||
		    nfds != spawner_rep_nfds(rep.fdmask)) {
			while (nfds > 0)
				close(fds[--nfds]);
			if (n > 0)
				log_warnx("the spawner of %s sent a bad reply",
				    s->user);
			if (s->pid != -1)
				kill(s->pid, SIGKILL);
			spawner_lost(s);
			return;
		}
		s->head = (s->head + 1) % SPAWNER_INFLIGHT;
		s->n--;
		spawner_ninflight--;
		rep.err[sizeof(rep.err) - 1] = '\0';
		if (rep.seq & FILES_SEQ) {
			while (nfds > 0)
				close(fds[--nfds]);
			files_started(rep.seq, rep.pid, rep.err);
			continue;
		}
		k = 0;
		slirp_exit = (rep.fdmask & SPAWNER_REP_SLIRP) ? fds[k++] : -1;
		counters[0] = (rep.fdmask & SPAWNER_REP_SNMP) ? fds[k++] : -1;
		counters[1] = (rep.fdmask & SPAWNER_REP_SNMP6) ? fds[k++] : -1;
		spawn_started(rep.seq, rep.pid, rep.slirp, slirp_exit, counters,
		    rep.err);
	}
}

/* Fork a user's spawner: its cgroups made, its socket on sandboxd's loop. */
static struct spawner *
spawner_new(const char *user, char *err, size_t errsz)
{
	struct spawner	*s;
	struct cg_limits lim;
	int		 sv[2], size = SPAWNER_BUF, i;
	pid_t		 pid;

	if (cgroup_enabled()) {
		cgroup_limits_user(spawner_conf, &lim);
		if (cgroup_user(user, &lim, err, errsz) == -1)
			return NULL;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(err, errsz, "socketpair: %s", strerror(errno));
		return NULL;
	}
	for (i = 0; i < 2; i++) {
		setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
		setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	}
	switch (pid = fork()) {
	case -1:
		snprintf(err, errsz, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return NULL;
	case 0:
		spawner_main(user, sv[1]);
	}
	close(sv[1]);
	if ((s = calloc(1, sizeof(*s))) == NULL)
		fatal("%s", __func__);
	snprintf(s->user, sizeof(s->user), "%s", user);
	s->pid = pid;
	s->fd = sv[0];
	if ((s->ev = event_new(spawner_base, s->fd, EV_READ | EV_PERSIST,
	    spawner_read, s)) == NULL)
		fatalx("event_new");
	event_add(s->ev, NULL);
	TAILQ_INSERT_TAIL(&spawners, s, entry);
	log_info("spawner %d for %s", (int)pid, user);
	return s;
}

/*
 * A user's spawner, forked with the user's cgroups made when there is
 * none yet: 0, or -1 and err.
 */
int
spawner_user(const char *user, char *err, size_t errsz)
{
	if (spawner_find(user) != NULL ||
	    spawner_new(user, err, errsz) != NULL)
		return 0;
	return -1;
}

/* Append a string and its NUL to a request; -1 when it would not fit. */
static int
spawner_put(char *buf, size_t *len, const char *str)
{
	size_t	l = strlen(str) + 1;

	if (*len + l > SPAWNER_MSG_MAX)
		return -1;
	memcpy(buf + *len, str, l);
	*len += l;
	return 0;
}

/*
 * Send a request to spawner s without waiting and count it in flight
 * until its answer: 0, or -1 and err ("too many WHAT queued" when the
 * socket is full).
 */
static int
spawner_queue(struct spawner *s, uint64_t seq, const void *buf, size_t len,
    const int *fds, int nfds, const char *what, char *err, size_t errsz)
{
	if (spawner_send(s->fd, buf, len, fds, nfds, MSG_DONTWAIT) == -1) {
		if (errno == EAGAIN)
			snprintf(err, errsz, "the spawner of %s: too many %s "
			    "queued", s->user, what);
		else
			snprintf(err, errsz, "the spawner of %s: %s", s->user,
			    strerror(errno));
		return -1;
	}
	s->inflight[(s->head + s->n) % SPAWNER_INFLIGHT] = seq;
	s->n++;
	spawner_ninflight++;
	return 0;
}

/*
 * Hand a spawn to its user's spawner (forked on first use). Never waits:
 * the answer comes to spawn_started() from the event loop. 0, or -1 and
 * err (nothing was started then).
 */
int
spawner_submit(const struct spawner_job *j, char *err, size_t errsz)
{
	static char		 buf[SPAWNER_MSG_MAX];
	struct spawner_req	 rq;
	struct spawner		*s;
	char *const		*a;
	const char *const	*h;
	size_t			 len;
	int			 fds[SPAWNER_FDS], nfds = 0, i;

	if ((s = spawner_find(j->user)) == NULL &&
	    (s = spawner_new(j->user, err, errsz)) == NULL)
		return -1;
	if (s->n == SPAWNER_INFLIGHT) {
		snprintf(err, errsz, "too many spawns starting for %s",
		    j->user);
		return -1;
	}
	memset(&rq, 0, sizeof(rq));
	rq.seq = j->seq;
	rq.flags = (j->tty ? SPAWNER_F_TTY : 0) |
	    (j->netgate ? SPAWNER_F_NET : 0) |
	    (j->netcount ? SPAWNER_F_COUNT : 0) |
	    (j->setid ? SPAWNER_F_SETID : 0) |
	    (j->cgfd != -1 ? SPAWNER_F_CG : 0);
	rq.uid = j->uid;
	rq.gid = j->gid;
	rq.nproc = j->nproc;
	rq.nkeep = j->keep != -1;
	for (a = j->argv; *a != NULL; a++)
		rq.argc++;
	for (a = j->envp; a != NULL && *a != NULL; a++)
		rq.envc++;
	for (h = j->hide; h != NULL && *h != NULL; h++)
		if (rq.nhide++ == SPAWNER_HIDE_MAX)
			goto toolong;
	memcpy(buf, &rq, sizeof(rq));
	len = sizeof(rq);
	if (spawner_put(buf, &len, j->procs ? j->procs : "") == -1 ||
	    spawner_put(buf, &len, j->cwd ? j->cwd : "") == -1)
		goto toolong;
	for (a = j->argv; *a != NULL; a++)
		if (spawner_put(buf, &len, *a) == -1)
			goto toolong;
	for (a = j->envp; a != NULL && *a != NULL; a++)
		if (spawner_put(buf, &len, *a) == -1)
			goto toolong;
	for (h = j->hide; h != NULL && *h != NULL; h++)
		if (spawner_put(buf, &len, *h) == -1)
			goto toolong;
	if (rq.nhide > 0 && (spawner_put(buf, &len, j->workspace) == -1 ||
	    spawner_put(buf, &len, j->passwd ? j->passwd : "") == -1 ||
	    spawner_put(buf, &len, j->group ? j->group : "") == -1))
		goto toolong;
	for (i = 0; i < (j->tty ? 1 : 3); i++)
		fds[nfds++] = j->stdio[i];
	if (j->keep != -1)
		fds[nfds++] = j->keep;
	if (j->cgfd != -1)
		fds[nfds++] = j->cgfd;
	return spawner_queue(s, j->seq, buf, len, fds, nfds, "spawns", err,
	    errsz);
toolong:
	snprintf(err, errsz, "the command line is too long");
	return -1;
}

/*
 * Hand a file operation to its user's spawner (forked on first use), which
 * starts a child for it: the answer (its pid) comes to files_started(),
 * the operation's own to j->sock. Never waits. 0, or -1 and err.
 */
int
spawner_file_submit(const struct spawner_file_job *j, char *err, size_t errsz)
{
	static char		 buf[SPAWNER_MSG_MAX];
	struct spawner_req	 rq;
	struct spawner		*s;
	size_t			 len;
	int			 fds[2], nfds = 0;

	if ((s = spawner_find(j->user)) == NULL &&
	    (s = spawner_new(j->user, err, errsz)) == NULL)
		return -1;
	if (s->n == SPAWNER_INFLIGHT) {
		snprintf(err, errsz, "too many requests queued for %s",
		    j->user);
		return -1;
	}
	memset(&rq, 0, sizeof(rq));
	rq.seq = j->seq;
	rq.flags = SPAWNER_F_FILE | (j->setid ? SPAWNER_F_SETID : 0);
	rq.uid = j->uid;
	rq.gid = j->gid;
	rq.fsize = j->size;
	memcpy(buf, &rq, sizeof(rq));
	len = sizeof(rq);
	if (spawner_put(buf, &len, j->workspace) == -1 ||
	    spawner_put(buf, &len, j->op) == -1 ||
	    spawner_put(buf, &len, j->path) == -1) {
		snprintf(err, errsz, "the file request is too long");
		return -1;
	}
	fds[nfds++] = j->sock;
	if (j->content != -1)
		fds[nfds++] = j->content;
	return spawner_queue(s, j->seq, buf, len, fds, nfds, "requests", err,
	    errsz);
}

/* How many spawns were sent to a spawner and not answered yet. */
size_t
spawner_pending(void)
{
	return spawner_ninflight;
}

/* Reap spawners that exited; 1 when pid was one. */
int
spawner_reaped(pid_t pid, int status)
{
	struct spawner	*s;

	TAILQ_FOREACH(s, &spawners, entry)
		if (s->pid == pid)
			break;
	if (s == NULL)
		return 0;
	if (WIFSIGNALED(status) || WEXITSTATUS(status) != 0)
		log_warnx("the spawner of %s exited (status %d)", s->user,
		    status);
	cgroup_spawner_gone(s->user, pid);
	s->pid = -1;
	spawner_free(s);
	return 1;
}

/* The pids of live spawners, for spawn_reap's wait: -1 terminated. */
int
spawner_pids(pid_t *pids, int max)
{
	struct spawner	*s;
	int		 n = 0;

	TAILQ_FOREACH(s, &spawners, entry)
		if (s->pid != -1 && n < max)
			pids[n++] = s->pid;
	return n;
}

/* The event base and configuration of the spawners. */
void
spawner_init(struct event_base *base, struct config *conf)
{
	spawner_base = base;
	spawner_conf = conf;
}

/*
 * sandboxd's binary run as "hostgate-direct DIR... -- WORKSPACE PASSWD
 * GROUP CWD PROGRAM ARGS...": hide the directories and bind the files
 * ("" for none) (spawner_hide), enter CWD and run the program. Only the
 * spawner's child starts it so; it returns when argv is not such a line,
 * else never.
 */
void
spawner_direct_main(int argc, char *argv[])
{
	int	i, nhide;

	if (argc < 1 || strcmp(argv[0], SPAWNER_DIRECT) != 0)
		return;
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		;
	nhide = i - 1;
	if (i + 5 >= argc || nhide < 1) {
		fprintf(stderr, "usage: %s DIR... -- WORKSPACE PASSWD GROUP "
		    "CWD PROGRAM [ARG...]\n", SPAWNER_DIRECT);
		_exit(2);
	}
	spawner_hide(argv + 1, nhide, argv[i + 1], argv[i + 2], argv[i + 3]);
	if (chdir(argv[i + 4]) == -1) {
		dprintf(2, "hostgate: cannot enter %s\n", argv[i + 4]);
		_exit(126);
	}
	execv(argv[i + 5], argv + i + 5);
	dprintf(2, "hostgate: cannot run %s: %s\n", argv[i + 5],
	    strerror(errno));
	_exit(127);
}
