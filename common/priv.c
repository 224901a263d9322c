/*
 * The privilege drop, the same short sequence in every daemon (STYLE.md):
 * bounding set, ids, capabilities, rlimits, no_new_privs, then seccomp.
 */
#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <errno.h>
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

/* Empty the capability bounding set; needs CAP_SETPCAP, so root only. */
static void
priv_trim_bounding(void)
{
	cap_value_t	c;

	for (c = 0; c <= CAP_LAST_CAP; c++)
		if (cap_drop_bound(c) == -1 && errno != EINVAL)
			fatal("cap_drop_bound %d", (int)c);
}

/* Switch to the service user for good. */
static void
priv_switch_user(const char *name, const char *user)
{
	uid_t	uid;
	gid_t	gid;

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

/* Clear every capability set, ambient included. */
static void
priv_clear_caps(void)
{
	cap_t	caps;

	if ((caps = cap_init()) == NULL)
		fatal("cap_init");
	if (cap_set_proc(caps) == -1)
		fatal("cap_set_proc");
	cap_free(caps);
	if (CAP_AMBIENT_SUPPORTED() && cap_reset_ambient() == -1)
		fatal("cap_reset_ambient");
}

/* Steps 2 to 6 of the drop. */
void
priv_drop(const struct priv_plan *pp)
{
	struct rlimit	rl = { 0, 0 };

	if (geteuid() == 0) {
		priv_trim_bounding();
		priv_switch_user(pp->name, pp->user);
	}
	priv_clear_caps();
	if (setrlimit(RLIMIT_CORE, &rl) == -1)
		fatal("setrlimit RLIMIT_CORE");
	/* A daemon that never forks gets no process slots at all. */
	if (pp->never_forks && setrlimit(RLIMIT_NPROC, &rl) == -1)
		fatal("setrlimit RLIMIT_NPROC");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		fatal("PR_SET_NO_NEW_PRIVS");
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

/* Add one rule per listed syscall name known on this architecture. */
static void
priv_seccomp_rules(scmp_filter_ctx ctx, const char *const *names,
    uint32_t action, int unix_sockets)
{
	int	nr, rc;

	for (; *names != NULL; names++) {
		nr = seccomp_syscall_resolve_name(*names);
		if (nr == __NR_SCMP_ERROR)
			continue;	/* not on this architecture */
		if (unix_sockets && strcmp(*names, "socket") == 0)
			rc = seccomp_rule_add(ctx, action, nr, 1,
			    SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
		else
			rc = seccomp_rule_add(ctx, action, nr, 0);
		if (rc < 0 && rc != -EEXIST)
			fatalx("seccomp_rule_add %s: %s", *names, strerror(-rc));
	}
}

/* Step 7: load the filter. */
void
priv_seccomp(const struct priv_plan *pp)
{
	scmp_filter_ctx		ctx;
	struct sigaction	sa;
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
	if (pp->deny)
		priv_seccomp_rules(ctx, pp->syscalls, SCMP_ACT_ERRNO(EPERM), 0);
	else {
		priv_seccomp_rules(ctx, priv_base_syscalls, SCMP_ACT_ALLOW,
		    pp->unix_sockets);
		priv_seccomp_rules(ctx, pp->syscalls, SCMP_ACT_ALLOW,
		    pp->unix_sockets);
	}
	if ((rc = seccomp_load(ctx)) < 0)
		fatalx("seccomp_load: %s", strerror(-rc));
	seccomp_release(ctx);
	log_debug("%s: seccomp filter loaded", pp->name);
}
