/*
 * The privilege drop, the same short sequence in every daemon
 * (docs/architecture.md, "Privilege drop"): bounding set, ids,
 * capabilities, rlimits, no_new_privs, then seccomp.
 */
#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/capability.h>
#include <seccomp.h>

#include "common.h"

/*
 * What an idle libevent loop, json-c, the logger and the IPC code use.
 * Grouped by category, as chrony's sys_linux.c does.
 */
const char *const priv_base_syscalls[] = {
	/* process and threads of glibc */
	"exit", "exit_group", "restart_syscall", "getpid", "gettid",
	"getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
	"getresgid", "futex", "sched_yield", "rseq", "set_robust_list",
	"uname", "prlimit64", "getrlimit",
	/* abort() and raise() on a broken invariant */
	"tgkill", "kill",
	/* memory */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise",
	/* signals */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	/* time */
	"clock_gettime", "clock_nanosleep", "nanosleep", "gettimeofday",
	"time", "clock_getres",
	/* randomness for tokens and json-c's hash seed */
	"getrandom",
	/* the event loop */
	"epoll_wait", "epoll_pwait", "epoll_ctl", "epoll_create1", "poll",
	"ppoll", "select", "pselect6", "pipe2", "eventfd2",
	/* descriptors */
	"read", "write", "readv", "writev", "close", "fcntl", "dup", "dup3",
	"ioctl", "fstat", "newfstatat", "statx", "lseek",
	/* IPC and syslog: Unix sockets */
	"recvmsg", "sendmsg", "recvfrom", "sendto", "connect", "socket",
	"getsockopt", "setsockopt", "getsockname", "getpeername", "shutdown",
	NULL
};

/*
 * What no process of hostgate's, nor anything it spawns, has any business
 * doing on a shared host: the base of every deny-list filter (sandboxd's,
 * inherited by its spawns, and its disk helper's). Each with its reason.
 */
const char *const priv_host_denied[] = {
	"kexec_load", "kexec_file_load",	/* replace the running kernel */
	"init_module", "finit_module",		/* load kernel code */
	"delete_module",
	"reboot",				/* host power state */
	"swapon", "swapoff",			/* host memory layout */
	"acct",					/* host process accounting */
	"settimeofday", "clock_settime",	/* host clock */
	"clock_adjtime", "adjtimex",
	"iopl", "ioperm",			/* raw port I/O */
	"syslog",				/* kernel log: info leaks */
	"open_by_handle_at",			/* the 2014 "shocker" container escape */
	"lookup_dcookie",			/* kernel profiling internals */
	"uselib",				/* obsolete loader, old bugs */
	"vhangup",				/* hang up other terminals */
	"nfsservctl",
	NULL
};

/* Find a service user. */
void
priv_lookup(const char *user, uid_t *uid, gid_t *gid)
{
	struct passwd	*pw;

	errno = 0;
	if ((pw = getpwnam(user)) == NULL)
		fatalx("user %s does not exist (scripts/users.sh creates the "
		    "service users)", user);
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
}

/*
 * Whether this daemon runs with separate users: started as root (it drops
 * to self_user), or started directly as self_user (systemd's User=).
 */
int
priv_separate(const char *self_user)
{
	struct passwd	*pw;

	if (geteuid() == 0)
		return (1);
	errno = 0;
	if ((pw = getpwnam(self_user)) == NULL)
		return (0);
	return (pw->pw_uid == geteuid());
}

/*
 * The uid and gid a peer runs as: its service user's under separate
 * users, else this daemon's own (everything under the invoking user).
 */
void
priv_peer(const char *self_user, const char *peer_user, uid_t *uid,
    gid_t *gid)
{
	if (priv_separate(self_user))
		priv_lookup(peer_user, uid, gid);
	else {
		*uid = getuid();
		*gid = getgid();
	}
}

/* The number of PID namespace levels /proc/PID/status shows, or -1. */
static int
priv_pidns_depth(const char *status)
{
	char	 line[256], *p;
	FILE	*f;
	int	 n = -1;

	if ((f = fopen(status, "re")) == NULL)
		return (-1);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "NSpid:", 6) != 0)
			continue;
		for (n = 0, p = line + 6; *p != '\0'; ) {
			p += strspn(p, " \t\n");
			if (*p == '\0')
				break;
			n++;
			p += strcspn(p, " \t\n");
		}
		break;
	}
	fclose(f);
	return (n);
}

/*
 * A peer of another uid is the uid check's business; one of our own uid
 * must be in our PID namespace: seen from here, its NSpid has as many
 * levels as ours (one more: it is pid 1 of frontd's jail, say).
 */
int
priv_admit_same_pidns(pid_t pid, uid_t uid, char *why, size_t whysz)
{
	char	path[64];
	int	mine, theirs;

	if (uid != geteuid())
		return (0);
	if (pid <= 0) {
		snprintf(why, whysz, "its pid is not in this PID namespace");
		return (-1);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	mine = priv_pidns_depth("/proc/self/status");
	theirs = priv_pidns_depth(path);
	if (mine > 0 && theirs == mine)
		return (0);
	if (theirs == -1)
		snprintf(why, whysz, "cannot read %s: %s", path,
		    strerror(errno));
	else
		snprintf(why, whysz, "it runs in another PID namespace (%d "
		    "levels, this daemon %d): frontd's jail or a container",
		    theirs, mine);
	return (-1);
}

/* A uid's name for a message, or its number, copied into buf. */
static const char *
priv_uid_name(uid_t uid, char *buf, size_t sz)
{
	struct passwd	*pw;

	if ((pw = getpwuid(uid)) != NULL)
		snprintf(buf, sz, "%s", pw->pw_name);
	else
		snprintf(buf, sz, "%u", (unsigned)uid);
	return (buf);
}

/* A gid's name for a message, or its number, copied into buf. */
static const char *
priv_gid_name(gid_t gid, char *buf, size_t sz)
{
	struct group	*gr;

	if ((gr = getgrgid(gid)) != NULL)
		snprintf(buf, sz, "%s", gr->gr_name);
	else
		snprintf(buf, sz, "%u", (unsigned)gid);
	return (buf);
}

/*
 * Create dir, or check the one that is there. A directory the daemon
 * creates gets owner uid:gid and mode; it appears whole, so a peer that
 * checks it at the same moment never sees it half set up. One that exists
 * is never changed: its owner must be uid, no group or other may write to
 * it, and it must grant the bits of mode & 0711 that the daemons need.
 * Anything else stops the daemon with what it found and the fix.
 */
int
priv_dir(const char *what, const char *dir, uid_t uid, gid_t gid,
    mode_t mode)
{
	struct stat	 st;
	char		*tmp, ub[64], gb[64], wb[64];
	mode_t		 need = mode & 0711;
	const char	*want;

	if (stat(dir, &st) == -1) {
		if (errno != ENOENT)
			fatal("%s %s", what, dir);
		if (asprintf(&tmp, "%s.new-%d", dir, (int)getpid()) == -1)
			fatal("asprintf");
		(void)rmdir(tmp);
		if (mkdir(tmp, 0700) == -1)
			fatal("%s %s: mkdir %s", what, dir, tmp);
		if ((geteuid() == 0 && chown(tmp, uid, gid) == -1) ||
		    chmod(tmp, mode) == -1) {
			(void)rmdir(tmp);
			fatal("%s %s: set up %s", what, dir, tmp);
		}
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir,
		    RENAME_NOREPLACE) == 0) {
			free(tmp);
			log_info("created %s %s (mode %04o)", what, dir,
			    (unsigned)mode);
			return (1);
		}
		if (errno != EEXIST)
			fatal("%s %s: rename %s", what, dir, tmp);
		/* Another daemon made it meanwhile: check theirs. */
		(void)rmdir(tmp);
		free(tmp);
		if (stat(dir, &st) == -1)
			fatal("%s %s", what, dir);
	}
	if (!S_ISDIR(st.st_mode))
		fatalx("%s %s is not a directory; remove it or point the "
		    "configuration elsewhere", what, dir);
	if (st.st_uid == uid && (st.st_mode & 022) == 0 &&
	    (st.st_mode & need) == need)
		return (0);
	want = priv_uid_name(uid, wb, sizeof(wb));
	fatalx("%s %s is owned by %s:%s mode %04o; want %s, mode %04o: "
	    "run chown %s: %s && chmod %04o %s, or remove it", what, dir,
	    priv_uid_name(st.st_uid, ub, sizeof(ub)),
	    priv_gid_name(st.st_gid, gb, sizeof(gb)),
	    (unsigned)(st.st_mode & 07777), want, (unsigned)mode, want, dir,
	    (unsigned)mode, dir);
}

/* Whether c is in a list ended by -1. */
static int
priv_kept(const int *keep, cap_value_t c)
{
	for (; keep != NULL && *keep != -1; keep++)
		if (*keep == (int)c)
			return (1);
	return (0);
}

/*
 * Empty the capability bounding set but for what the daemon keeps; needs
 * CAP_SETPCAP, so root only.
 */
static void
priv_trim_bounding(const int *keep)
{
	cap_value_t	c;

	for (c = 0; c <= CAP_LAST_CAP; c++)
		if (!priv_kept(keep, c) && cap_drop_bound(c) == -1 &&
		    errno != EINVAL)
			fatal("cap_drop_bound %d", (int)c);
}

/* Switch to the service user for good. */
static void
priv_switch_user(const struct priv_plan *pp)
{
	const char	*name = pp->name, *user = pp->user;
	uid_t		 uid = pp->uid;
	gid_t		 gid = pp->gid;

	if (!pp->have_ids)
		priv_lookup(user, &uid, &gid);
	if (setgroups(1, &gid) == -1)
		fatal("setgroups");
	if (setresgid(gid, gid, gid) == -1)
		fatal("setresgid");
	if (setresuid(uid, uid, uid) == -1)
		fatal("setresuid");
	/* Going back must fail, or the drop did not happen. */
	if (uid != 0 && (setuid(0) != -1 || seteuid(0) != -1))
		fatalx("%s: could regain root after dropping to %s", name,
		    user);
	log_debug("%s: running as %s (%u:%u)", name, user, (unsigned)uid,
	    (unsigned)gid);
}

/*
 * Clear every capability set, ambient included, but for the kept ones
 * (permitted and effective, never inheritable: nothing exec'd gets them).
 */
static void
priv_clear_caps(const int *keep)
{
	cap_value_t	c;
	cap_t		caps;

	if ((caps = cap_init()) == NULL)
		fatal("cap_init");
	for (c = 0; c <= CAP_LAST_CAP; c++)
		if (priv_kept(keep, c) &&
		    (cap_set_flag(caps, CAP_PERMITTED, 1, &c, CAP_SET) == -1 ||
		    cap_set_flag(caps, CAP_EFFECTIVE, 1, &c, CAP_SET) == -1))
			fatal("cap_set_flag");
	if (cap_set_proc(caps) == -1)
		fatal("cap_set_proc");
	cap_free(caps);
	if (CAP_AMBIENT_SUPPORTED() && cap_reset_ambient() == -1)
		fatal("cap_reset_ambient");
}

/* Steps 1 to 5 of the drop (docs/architecture.md); priv_seccomp is 6. */
void
priv_drop(const struct priv_plan *pp)
{
	struct rlimit	rl = { 0, 0 };

	const int	*keep = geteuid() == 0 ? pp->keep_caps : NULL;

	if (geteuid() == 0) {
		priv_trim_bounding(keep);
		/* Kept capabilities survive the switch from uid 0. */
		if (keep != NULL && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) == -1)
			fatal("PR_SET_KEEPCAPS");
		priv_switch_user(pp);
		if (keep != NULL && prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) == -1)
			fatal("PR_SET_KEEPCAPS");
	}
	priv_clear_caps(keep);
	if (setrlimit(RLIMIT_CORE, &rl) == -1)
		fatal("setrlimit RLIMIT_CORE");
	/* A daemon that never forks gets no process slots at all. */
	if (pp->never_forks && setrlimit(RLIMIT_NPROC, &rl) == -1)
		fatal("setrlimit RLIMIT_NPROC");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		fatal("PR_SET_NO_NEW_PRIVS");
	/*
	 * Not dumpable: a process of the same uid (rootless, everything runs
	 * as one) can neither ptrace the daemon, read its memory through
	 * /proc/PID/mem, nor enter /proc/PID/root or its fds.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1)
		fatal("PR_SET_DUMPABLE");
}

/* Debug filters trap: name the syscall that was refused, then die. */
static void
priv_sigsys(int sig, siginfo_t *si, void *ctx)
{
	char	buf[128];
	char	*name;
	int	n;

	name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE,
	    si->si_syscall);
	n = snprintf(buf, sizeof(buf), "seccomp: refused syscall %d (%s)\n",
	    si->si_syscall, name != NULL ? name : "?");
	if (n > 0)
		(void)!write(STDERR_FILENO, buf, (size_t)n);
	_exit(128 + SIGSYS);
}

/* What socket(2) may make: any family, or only these (ended by -1). */
static const int priv_unix_families[] = { AF_UNIX, -1 };
static const int priv_inet_families[] = { AF_UNIX, AF_INET, AF_INET6, -1 };

/* One socket(2) rule per allowed family. */
static int
priv_socket_rules(scmp_filter_ctx ctx, uint32_t action, int nr,
    const int *families)
{
	int	rc = 0;

	for (; *families != -1 && rc >= 0; families++) {
		rc = seccomp_rule_add(ctx, action, nr, 1,
		    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)*families));
		if (rc == -EEXIST)
			rc = 0;
	}
	return rc;
}

/* Add one rule per listed syscall name known on this architecture. */
static void
priv_seccomp_rules(scmp_filter_ctx ctx, const char *const *names,
    uint32_t action, const int *families)
{
	int	nr, rc;

	for (; *names != NULL; names++) {
		nr = seccomp_syscall_resolve_name(*names);
		if (nr == __NR_SCMP_ERROR)
			continue;	/* not on this architecture */
		if (families != NULL && strcmp(*names, "socket") == 0)
			rc = priv_socket_rules(ctx, action, nr, families);
		else
			rc = seccomp_rule_add(ctx, action, nr, 0);
		if (rc < 0 && rc != -EEXIST)
			fatalx("seccomp_rule_add %s: %s", *names, strerror(-rc));
	}
}

/* Step 6 of the drop: load the filter. */
void
priv_seccomp(const struct priv_plan *pp)
{
	scmp_filter_ctx		ctx;
	struct sigaction	sa;
	const int		*families = NULL;
	uint32_t		def;
	int			rc;

	if (pp->deny)
		def = SCMP_ACT_ALLOW;
	else if (pp->debug) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = priv_sigsys;
		sa.sa_flags = SA_SIGINFO;
		sigaction(SIGSYS, &sa, NULL);
		def = SCMP_ACT_TRAP;
	} else
		def = SCMP_ACT_KILL_PROCESS;
#ifdef HG_SANITIZE
	/* The sanitizers' runtime makes calls no daemon does: log them. */
	if (!pp->deny)
		def = SCMP_ACT_LOG;
#endif
	if ((ctx = seccomp_init(def)) == NULL)
		fatalx("seccomp_init");
	if (pp->deny) {
		priv_seccomp_rules(ctx, priv_host_denied,
		    SCMP_ACT_ERRNO(EPERM), NULL);
		priv_seccomp_rules(ctx, pp->syscalls, SCMP_ACT_ERRNO(EPERM),
		    NULL);
	}
	else {
		if (pp->unix_sockets)
			families = priv_unix_families;
		else if (pp->inet_sockets)
			families = priv_inet_families;
		priv_seccomp_rules(ctx, priv_base_syscalls, SCMP_ACT_ALLOW,
		    families);
		priv_seccomp_rules(ctx, pp->syscalls, SCMP_ACT_ALLOW,
		    families);
	}
	if ((rc = seccomp_load(ctx)) < 0)
		fatalx("seccomp_load: %s", strerror(-rc));
	seccomp_release(ctx);
	log_debug("%s: seccomp filter loaded", pp->name);
}
