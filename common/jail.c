/*
 * The jail of frontd and egressd: namespaces that leave a daemon nothing
 * to reach but its own link to its peer, whatever uid it shares with the
 * other daemons.
 *
 * After the daemon has done its privileged set-up (frontd: bound its
 * listener, read its TLS key and loaded the panel; egressd: read its
 * hosts file and resolv.conf), jail_enter() unshares a user namespace
 * (when not root: the uid and gid mapped to themselves, setgroups
 * denied) and mount, network (but with JAIL_HOSTNET: egressd connects
 * out), IPC, UTS and PID namespaces; builds a new root on an empty tmpfs
 * that holds only a read-only bind of one directory (RUN_DIR/front,
 * brokerd's socket for frontd; RUN_DIR/egress, sandboxd's for egressd:
 * each in a directory of its own so that a restarted peer's new socket
 * is seen) and of the log socket in use; pivots into it and detaches the
 * old root. Then it forks: the child is the daemon proper, pid 1 of a
 * PID namespace in which no other daemon has a pid to signal; the parent
 * stays outside as its keeper, holding nothing, passing on the signals
 * that stop the daemon and ending as it ends, so that launchers keep one
 * pid. A listening socket made before belongs to the original network
 * namespace and goes on accepting.
 */
#include <sys/types.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define JAIL_JOURNAL	"/run/systemd/journal/socket"
#define JAIL_SYSLOG	"/dev/log"

/* What the keeper does besides an idle process's calls: wait for its daemon. */
static const char *const jail_keeper_syscalls[] = {
	"wait4", "waitid", "rt_sigtimedwait",
	NULL
};

/* The signals the keeper passes on to its daemon. */
static const int jail_forwarded[] = {
	SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2
};

static int	jail_tie = -1;	/* the daemon's end: EOF once the keeper is gone */
static int	jail_ready = -1; /* the other way: a byte once the daemon dropped */
static const char *jail_name = "daemon";	/* for messages */

/* Write a short text to a file of /proc/self, or die saying which. */
static void
jail_write(const char *path, const char *text)
{
	ssize_t	n;
	int	fd;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		fatal("jail: open %s", path);
	n = write(fd, text, strlen(text));
	if (n != (ssize_t)strlen(text))
		fatal("jail: write %s", path);
	close(fd);
}

/*
 * Rootless: a user namespace of the daemon's own, its uid and gid mapped
 * to themselves, so that it may make the other namespaces. -1 and err
 * when the system refuses one.
 */
static int
jail_userns(char *err, size_t errsz)
{
	char	map[64];
	uid_t	uid = geteuid();
	gid_t	gid = getegid();

	if (unshare(CLONE_NEWUSER) == -1) {
		snprintf(err, errsz, "%s runs as the same user as the other "
		    "daemons (uid %u) and keeps away from their sockets "
		    "and files in namespaces of its own, but the system "
		    "refuses it a user namespace (%s): allow unprivileged "
		    "user namespaces (sysctl user.max_user_namespaces, "
		    "kernel.unprivileged_userns_clone, AppArmor's "
		    "restrict_unprivileged_userns, the unit's "
		    "RestrictNamespaces=) or start hostgate as root",
		    jail_name, (unsigned)uid, strerror(errno));
		return (-1);
	}
	jail_write("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	jail_write("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	jail_write("/proc/self/gid_map", map);
	return (0);
}

/* mkdir -p of an absolute path below root; the last part as a file too. */
static void
jail_mkpath(const char *root, const char *path, int file)
{
	char	buf[PATH_MAX], *p;
	int	fd;

	if (snprintf(buf, sizeof(buf), "%s%s", root, path) >= (int)sizeof(buf))
		fatalx("jail: path too long: %s", path);
	for (p = buf + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(buf, 0755) == -1 && errno != EEXIST)
			fatal("jail: mkdir %s", buf);
		*p = '/';
	}
	if (!file) {
		if (mkdir(buf, 0755) == -1 && errno != EEXIST)
			fatal("jail: mkdir %s", buf);
		return;
	}
	if ((fd = open(buf, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) == -1)
		fatal("jail: create %s", buf);
	close(fd);
}

/*
 * Bind what fd is (opened before the tmpfs hid it) at the same path in
 * the new root, read-only: the daemon may connect to a socket there,
 * never create, remove or replace one.
 */
static void
jail_bind(int fd, const char *root, const char *path, int file)
{
	char	src[64], dst[PATH_MAX];

	jail_mkpath(root, path, file);
	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	snprintf(dst, sizeof(dst), "%s%s", root, path);
	if (mount(src, dst, NULL, MS_BIND, NULL) == -1)
		fatal("jail: bind %s", path);
	if (mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY |
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == -1)
		fatal("jail: read-only %s", path);
	close(fd);
}

/*
 * The log socket the daemon writes to, opened now: the journal's (its
 * client sends each entry to the path) or syslog's (glibc reconnects to
 * the path when syslogd went away). -1 when logging goes to a file.
 */
static int
jail_log_socket(const char **path)
{
	int	fd;

	if (strcmp(log_destination(), "journal") == 0)
		*path = JAIL_JOURNAL;
	else if (strcmp(log_destination(), "syslog") == 0)
		*path = JAIL_SYSLOG;
	else
		return (-1);
	/* /dev/log is often a symlink into /run: bind what it names. */
	if ((fd = open(*path, O_PATH | O_CLOEXEC)) == -1)
		log_warn("jail: %s", *path);
	return (fd);
}

/* Replace the root by an empty tmpfs with only dir in it. */
static void
jail_root(const char *dir, const char *mountpoint)
{
	const char	*logpath = NULL;
	int		 dirfd, logfd;

	if (dir[0] != '/')
		fatalx("jail: %s is not an absolute path", dir);
	if ((dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1)
		fatal("jail: %s", dir);
	logfd = jail_log_socket(&logpath);
	/* Nothing done here propagates back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1)
		fatal("jail: make / private");
	if (mount("tmpfs", mountpoint, "tmpfs", MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755") == -1)
		fatal("jail: tmpfs on %s", mountpoint);
	jail_bind(dirfd, mountpoint, dir, 0);
	if (logfd != -1)
		jail_bind(logfd, mountpoint, logpath, 1);
	if (chdir(mountpoint) == -1)
		fatal("jail: chdir %s", mountpoint);
	/* The old root ends up under the new one, then goes for good. */
	if (syscall(SYS_pivot_root, ".", ".") == -1)
		fatal("jail: pivot_root");
	if (umount2(".", MNT_DETACH) == -1)
		fatal("jail: detach the old root");
	if (chdir("/") == -1)
		fatal("jail: chdir /");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY |
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == -1)
		fatal("jail: read-only root");
}

/* The keeper ends as its daemon ended: same status, or same signal. */
static __attribute__((noreturn)) void
jail_exit(int status)
{
	sigset_t	set;
	int		sig;

	if (WIFEXITED(status))
		_exit(WEXITSTATUS(status));
	sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	_exit(128 + sig);
}

/*
 * Enter the jail (see the top of this file) as name. Returns in the
 * daemon proper, with 0; in the keeper it returns the pid of the daemon,
 * and the caller lets go of what it holds and calls jail_keeper(). No
 * user namespace: -1 and err; any other failure is fatal. A jailed
 * daemon never runs without the separation.
 */
pid_t
jail_enter(const char *name, const char *dir, const char *mountpoint,
    int flags, char *err, size_t errsz)
{
	sigset_t	set, old;
	pid_t		pid;
	size_t		i;
	int		tie[2], ready[2], ns;

	jail_name = name;
	/* Local time is read now, while /etc/localtime is still there. */
	tzset();
	if ((flags & JAIL_USERNS) && jail_userns(err, errsz) == -1)
		return (-1);
	ns = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID;
	if (!(flags & JAIL_HOSTNET))
		ns |= CLONE_NEWNET;
	if (unshare(ns) == -1)
		fatal("jail: unshare");
	jail_root(dir, mountpoint);

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (i = 0; i < sizeof(jail_forwarded) / sizeof(jail_forwarded[0]);
	    i++)
		sigaddset(&set, jail_forwarded[i]);
	if (sigprocmask(SIG_BLOCK, &set, &old) == -1)
		fatal("sigprocmask");
	if (pipe2(tie, O_CLOEXEC) == -1 || pipe2(ready, O_CLOEXEC) == -1)
		fatal("pipe2");
	if ((pid = fork()) == -1)
		fatal("jail: fork");
	if (pid != 0) {
		close(tie[0]);
		close(ready[1]);
		/* tie[1] stays open for as long as the keeper lives. */
		jail_ready = ready[0];
		return (pid);
	}
	close(tie[1]);
	close(ready[0]);
	jail_tie = tie[0];
	jail_ready = ready[1];
	if (sigprocmask(SIG_SETMASK, &old, NULL) == -1)
		fatal("sigprocmask");
	return (0);
}

/*
 * The keeper, after the caller let go of what it held (frontd: the
 * listener and the TLS key): pass the stop signals on to the daemon
 * (child), end when it ends.
 */
void
jail_keeper(pid_t child, const struct priv_plan *pp)
{
	struct priv_plan	plan = *pp;
	sigset_t		set;
	siginfo_t		si;
	size_t			i;
	pid_t			r;
	int			sig, status;
	char			c;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (i = 0; i < sizeof(jail_forwarded) / sizeof(jail_forwarded[0]);
	    i++)
		sigaddset(&set, jail_forwarded[i]);
	priv_drop(&plan);
	plan.syscalls = jail_keeper_syscalls;
	/* Its sockets are the log's at most, whatever the daemon's are. */
	plan.unix_sockets = 1;
	plan.inet_sockets = 0;
	priv_seccomp(&plan);
	/*
	 * Signals wait (blocked) until the daemon has switched to the uid
	 * the keeper now has: a root daemon could not be sent them.
	 */
	while (read(jail_ready, &c, 1) == -1 && errno == EINTR)
		;
	close(jail_ready);
	log_debug("%s: jailed as pid %d", jail_name, (int)child);
	for (;;) {
		if ((sig = sigwaitinfo(&set, &si)) == -1) {
			if (errno == EINTR)
				continue;
			fatal("sigwaitinfo");
		}
		if (sig != SIGCHLD) {
			if (kill(child, sig) == -1 && errno != ESRCH)
				log_warn("kill %d", (int)child);
			continue;
		}
		while ((r = waitpid(child, &status, WNOHANG)) == -1 &&
		    errno == EINTR)
			;
		if (r == child)
			jail_exit(status);
	}
}

/*
 * In the daemon proper, after its own drop (a change of uid would clear
 * it): die with the keeper, so that no daemon outlives the pid its
 * launcher knows.
 */
void
jail_tie_to_keeper(void)
{
	char	c;

	if (jail_tie == -1)
		return;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == -1)
		fatal("PR_SET_PDEATHSIG");
	/* Gone before the line above: nothing would ever send the signal. */
	if (fcntl(jail_tie, F_SETFL, O_NONBLOCK) == -1)
		fatal("fcntl");
	if (read(jail_tie, &c, 1) == 0)
		fatalx("%s's keeper is gone", jail_name);
	close(jail_tie);
	jail_tie = -1;
	/* The keeper may pass signals on now. */
	if (write(jail_ready, "", 1) != 1)
		fatal("%s's keeper", jail_name);
	close(jail_ready);
	jail_ready = -1;
}
