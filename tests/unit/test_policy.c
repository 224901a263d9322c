/*
 * Unit tests for sandboxd/policy.c: the parser's errors, the sealed memfd,
 * and the filter itself, loaded into a child that then makes the calls.
 * Arguments are chosen, as in Flatpak's tests/try-syscall.c, so that an
 * allowed call fails with another errno than a denied one; each probe also
 * runs in a child without the filter to show that it does.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* CLONE_NEW*, F_GET_SEALS, posix_openpt */
#endif
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../sandboxd/sandboxd.h"
#include "child.h"

#define PTY_FD		(~0UL - 1)	/* replaced by a pty in the child */
#define HIGH32		(1UL << 32)
#define MAX_PROBES	64

/* What a probe must show. */
enum probe_kind {
	ALLOWED,	/* the filter lets it through: expect is the kernel's */
	DENIED,		/* the filter answers expect; unfiltered differs */
	DENIED_HOST,	/* the same, but the host may refuse it unfiltered */
};

struct probe {
	const char	*what;
	long		 nr;
	unsigned long	 a[6];
	int		 expect;	/* errno under the filter, 0: success */
	enum probe_kind	 kind;
};

/* The probes of the real profile. */
static const struct probe profile_probes[] = {
	{ "getpid", SYS_getpid, { 0 }, 0, ALLOWED },
	{ "socket(AF_VSOCK)", SYS_socket, { AF_VSOCK, 99, 0 }, EAFNOSUPPORT,
	    DENIED },
	{ "socket(AF_UNSPEC)", SYS_socket, { AF_UNSPEC, 99, 0 },
	    EAFNOSUPPORT, DENIED },
	{ "socket(AF_PACKET)", SYS_socket, { AF_PACKET, 99, 0 },
	    EAFNOSUPPORT, DENIED },
	{ "socket(AF_UNIX | 1 << 32)", SYS_socket, { AF_UNIX | HIGH32, 99, 0 },
	    EAFNOSUPPORT, DENIED },
	{ "socket(AF_INET)", SYS_socket, { AF_INET, SOCK_STREAM, 0 }, 0,
	    ALLOWED },
	{ "socket(AF_UNIX)", SYS_socket, { AF_UNIX, SOCK_STREAM, 0 }, 0,
	    ALLOWED },
	{ "socket(AF_INET6, bad type)", SYS_socket, { AF_INET6, 99, 0 },
	    EINVAL, ALLOWED },
	{ "socket(AF_NETLINK, bad type)", SYS_socket, { AF_NETLINK, 99, 0 },
	    EINVAL, ALLOWED },
	{ "unshare(CLONE_NEWUSER | bad flag)", SYS_unshare,
	    { CLONE_NEWUSER | 1 }, EPERM, DENIED },
	{ "clone(CLONE_NEWUSER | CLONE_FS)", SYS_clone,
	    { CLONE_NEWUSER | CLONE_FS }, EPERM, DENIED },
	{ "clone3(NULL, 0)", SYS_clone3, { 0, 0 }, ENOSYS, DENIED },
	{ "io_uring_setup(1, NULL)", SYS_io_uring_setup, { 1, 0 }, EPERM,
	    DENIED_HOST },
	{ "keyctl(9999)", SYS_keyctl, { 9999 }, EPERM, DENIED },
	{ "bpf(9999)", SYS_bpf, { 9999, 0, 0 }, EPERM, DENIED_HOST },
	{ "ioctl(-1, TIOCSTI)", SYS_ioctl, { -1UL, TIOCSTI }, EPERM, DENIED },
	{ "ioctl(-1, TIOCSTI | 1 << 32)", SYS_ioctl, { -1UL, TIOCSTI | HIGH32 },
	    EPERM, DENIED },
	{ "ioctl(-1, TIOCLINUX | ~0 << 32)", SYS_ioctl,
	    { -1UL, TIOCLINUX | 0xffffffff00000000UL }, EPERM, DENIED },
	{ "ioctl(pty, TIOCSTI | 1 << 32)", SYS_ioctl,
	    { PTY_FD, TIOCSTI | HIGH32, 0 }, EPERM, DENIED_HOST },
	{ "ioctl(-1, FIONREAD)", SYS_ioctl, { -1UL, FIONREAD }, EBADF,
	    ALLOWED },
	{ "personality(0xffffffff)", SYS_personality, { 0xffffffff }, 0,
	    ALLOWED },
	{ "personality(PER_LINUX)", SYS_personality, { 0 }, 0, ALLOWED },
	{ "personality(ADDR_NO_RANDOMIZE)", SYS_personality, { 0x0040000 },
	    EPERM, DENIED },
	{ "personality(1)", SYS_personality, { 1 }, EPERM, DENIED },
	{ "personality(0x80000000)", SYS_personality, { 0x80000000 }, EPERM,
	    DENIED },
	{ "personality(0xfffffffe)", SYS_personality, { 0xfffffffe }, EPERM,
	    DENIED },
	{ "personality(1 << 32)", SYS_personality, { HIGH32 }, EPERM, DENIED },
	{ "ptrace(PTRACE_TRACEME)", SYS_ptrace, { 0 }, EPERM, DENIED_HOST },
	{ "fsopen(NULL)", SYS_fsopen, { 0, 0 }, ENOSYS, DENIED },
	{ "mount(NULL)", SYS_mount, { 0 }, EPERM, DENIED_HOST },
	{ "userfaultfd(bad flags)", SYS_userfaultfd, { 0xffff }, EPERM,
	    DENIED_HOST },
	{ "process_vm_readv(flags 1)", SYS_process_vm_readv,
	    { 1, 0, 0, 0, 0, 1 }, EPERM, DENIED },
	{ "syslog(99)", SYS_syslog, { 99, 0, 0 }, EPERM, DENIED_HOST },
	{ "getppid", SYS_getppid, { 0 }, 0, ALLOWED },
	/* Last: unfiltered, it succeeds and drops our capabilities. */
	{ "unshare(CLONE_NEWUSER)", SYS_unshare, { CLONE_NEWUSER }, EPERM,
	    DENIED_HOST },
};

/* The path of the real profile, under $HG_PROFILES or profiles/. */
static const char *
profile_path(void)
{
	static char	 path[4096];
	const char	*dir;

	if ((dir = getenv("HG_PROFILES")) == NULL)
		dir = "profiles";
	snprintf(path, sizeof(path), "%s/seccomp.policy", dir);
	return (path);
}

/* Parse text and return the error, or "" when it parsed. */
static const char *
parse_error(const char *text, size_t len)
{
	static char	 err[512];
	struct policy	*pol;

	err[0] = '\0';
	pol = policy_parse(text, len, "t", err, sizeof(err));
	if (pol != NULL) {
		policy_free(pol);
		return ("");
	}
	return (err);
}

/* Read the whole BPF program from fd at its offset, as bwrap does. */
static void
read_bpf(int fd, struct sock_fprog *prog)
{
	struct stat	 st;
	ssize_t		 n;

	assert_int_equal(fstat(fd, &st), 0);
	prog->len = st.st_size / sizeof(struct sock_filter);
	prog->filter = malloc(st.st_size);
	assert_non_null(prog->filter);
	n = read(fd, prog->filter, st.st_size);
	assert_int_equal(n, st.st_size);
}

/* In a child: load the program, no way back. */
static void
child_load(const struct sock_fprog *prog)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog) == -1)
		_exit(99);
}

/*
 * Make each call in a child, filtered by prog (or not when NULL); the
 * child reports 0 or the errno of each through a pipe.
 */
static void
run_probes(const struct sock_fprog *prog, const struct probe *probes,
    size_t n, int *results)
{
	unsigned long	a[6];
	size_t		i, j;
	pid_t		pid;
	int		pfd[2], pty, status;
	long		rc;

	assert_true(n <= MAX_PROBES);
	assert_int_equal(pipe(pfd), 0);
	assert_int_not_equal(pid = test_fork(), -1);
	if (pid == 0) {
		close(pfd[0]);
		pty = posix_openpt(O_RDWR | O_NOCTTY);
		if (prog != NULL)
			child_load(prog);
		for (i = 0; i < n; i++) {
			for (j = 0; j < 6; j++)
				a[j] = probes[i].a[j] == PTY_FD ?
				    (unsigned long)pty : probes[i].a[j];
			errno = 0;
			rc = syscall(probes[i].nr, a[0], a[1], a[2], a[3],
			    a[4], a[5]);
			results[i] = rc == -1 ? errno : 0;
		}
		if (write(pfd[1], results, n * sizeof(*results)) !=
		    (ssize_t)(n * sizeof(*results)))
			_exit(98);
		_exit(0);
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], results, n * sizeof(*results)),
	    n * sizeof(*results));
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Run probes with and without the filter of pol, and check both. */
static void
check_probes(const struct policy *pol, const struct probe *probes, size_t n)
{
	struct sock_fprog	prog;
	int			filtered[MAX_PROBES], plain[MAX_PROBES];
	int			fd, failed = 0;
	size_t			i;
	char			err[512];

	fd = policy_bpf_fd(pol, err, sizeof(err));
	if (fd == -1)
		fail_msg("policy_bpf_fd: %s", err);
	read_bpf(fd, &prog);
	close(fd);
	run_probes(&prog, probes, n, filtered);
	run_probes(NULL, probes, n, plain);
	free(prog.filter);
	for (i = 0; i < n; i++) {
		if (filtered[i] != probes[i].expect) {
			print_error("%s: filtered gave %s, expected %s\n",
			    probes[i].what, strerror(filtered[i]),
			    strerror(probes[i].expect));
			failed = 1;
		}
		if (probes[i].kind == ALLOWED || plain[i] != probes[i].expect)
			continue;
		if (probes[i].kind == DENIED_HOST)
			print_message("note: %s: this host refuses it with %s "
			    "even unfiltered\n", probes[i].what,
			    strerror(plain[i]));
		else {
			print_error("%s: unfiltered also gave %s: the probe "
			    "cannot tell\n", probes[i].what,
			    strerror(plain[i]));
			failed = 1;
		}
	}
	if (failed)
		fail();
}

/* The shipped profile parses, and no deny line goes missing. */
static void
test_profile_parses(void **state)
{
	struct policy	*pol;
	char		 err[512], *text, *line;
	size_t		 ndeny = 0;

	pol = policy_load(profile_path(), err, sizeof(err));
	if (pol == NULL)
		fail_msg("%s", err);
	text = file_read(profile_path(), 1 << 20, NULL);
	assert_non_null(text);
	for (line = strtok(text, "\n"); line != NULL;
	    line = strtok(NULL, "\n"))
		if (strncmp(line, "deny ", 5) == 0)
			ndeny++;
	free(text);
	assert_true(ndeny >= 40);
	assert_int_equal(policy_nrules(pol), ndeny);
	policy_free(pol);
}

/* Comments, blank lines, CRLF and conditions; names other ABIs have. */
static void
test_parse_ok(void **state)
{
	static const char text[] =
	    "# a comment\n"
	    "\n"
	    "   \t# an indented one\n"
	    "deny getpid EPERM -- one\r\n"
	    "deny ioctl EPERM if arg1 == TIOCSTI -- two\n"
	    "deny ioctl EPERM if arg1 == 0x541c -- three\n"
	    "deny clone EPERM if arg0 & CLONE_NEWUSER && arg1 != 7 -- four\n"
	    "deny umount EPERM -- no such call on x86_64, but on others\n"
	    "deny socket EACCES unless arg0 in AF_UNIX, AF_INET ,AF_INET6 "
	    "-- if, unless, && and -- are free text here\n"
	    "deny getppid EACCES if arg0 >= 1 && arg1 <= 0xFFFF && arg2 < 3 "
	    "&& arg3 > 18446744073709551614 unless arg4 in 5 -- six";
	struct policy	*pol;
	char		 err[512];
	int		 fd;

	pol = policy_parse(text, sizeof(text) - 1, "t", err, sizeof(err));
	if (pol == NULL)
		fail_msg("%s", err);
	assert_int_equal(policy_nrules(pol), 7);
	fd = policy_bpf_fd(pol, err, sizeof(err));
	if (fd == -1)
		fail_msg("%s", err);
	close(fd);
	policy_free(pol);
}

/* Each mistake is reported with the file name and its line. */
static void
test_parse_errors(void **state)
{
	static const struct {
		const char	*text;
		const char	*err;
	} cases[] = {
		{ "deny nosuchcall EPERM -- x",
		  "t:1: unknown syscall \"nosuchcall\"" },
		{ "\n# c\ndeny getpid EWHAT -- x",
		  "t:3: unknown errno \"EWHAT\"" },
		{ "deny getpid EPERM",
		  "t:1: expected \"if\", \"unless\" or \"--\" and a reason, "
		  "found the end of the line" },
		{ "deny getpid EPERM if arg0 == 1",
		  "t:1: expected \"--\" and a reason, found the end of the "
		  "line" },
		{ "deny getpid EPERM if arg0 == 1 extra -- x",
		  "t:1: expected \"--\" and a reason, found 'e'" },
		{ "# fine\ndeny getpid EPERM --   \t",
		  "t:2: rule without a reason after \"--\"" },
		{ "deny getpid EPERM if arg6 == 1 -- x",
		  "t:1: arg6: a syscall has arguments arg0 to arg5" },
		{ "deny getpid EPERM if argv == 1 -- x",
		  "t:1: expected arg0 to arg5, found \"argv\"" },
		{ "deny getpid EPERM if arg0 == FOO -- x",
		  "t:1: unknown value \"FOO\"" },
		{ "deny getpid EPERM if arg0 =< 1 -- x",
		  "t:1: expected an operator (== != < <= > >= &) after arg0, "
		  "found '='" },
		{ "deny getpid EPERM if arg0 && 1 -- x",
		  "t:1: expected an operator after arg0, found '&&'" },
		{ "deny getpid EPERM if arg0 & 0 -- x",
		  "t:1: arg0 & 0 always holds" },
		{ "deny getpid EPERM if arg0 == 99999999999999999999 -- x",
		  "t:1: number out of range: \"99999999999999999999\"" },
		{ "deny getpid EPERM if arg0 == 0xZZ -- x",
		  "t:1: bad number \"0xZZ\"" },
		{ "deny getpid EPERM if arg0 == 0x -- x",
		  "t:1: bad number \"0x\"" },
		{ "deny getpid EPERM if arg0 == 1 && arg0 == 2 -- x",
		  "t:1: arg0 compared twice in one rule" },
		{ "deny getpid EPERM if arg0 == 1 unless arg0 in 2 -- x",
		  "t:1: arg0 compared twice in one rule" },
		{ "deny socket EPERM unless arg0 AF_UNIX -- x",
		  "t:1: expected \"in\" after arg0, found 'A'" },
		{ "deny socket EPERM unless arg0 in 1,2,1 -- x",
		  "t:1: value 0x1 listed twice" },
		{ "deny socket EPERM unless arg0 in 1, -- x",
		  "t:1: expected a value, found '-'" },
		{ "deny ioctl EPERM if arg1 > 5 -- x",
		  "t:1: ioctl arg1 is 32 bits for the kernel: only == and & "
		  "compare it safely" },
		{ "deny ioctl EPERM if arg1 == 0x100005412 -- x",
		  "t:1: ioctl arg1 is 32 bits for the kernel: 0x100005412 can "
		  "never match" },
		{ "deny ioctl EPERM unless arg1 in 1,2 -- x",
		  "t:1: ioctl arg1 is 32 bits for the kernel: use \"if arg1 == "
		  "VALUE\" rules" },
		{ "allow getpid -- x",
		  "t:1: unknown keyword \"allow\" (expected \"deny\")" },
		{ "deny -- x",
		  "t:1: expected a syscall name, found '-'" },
		{ "deny getpid EPERM -- a\ndeny getpid EPERM -- b",
		  "t:2: duplicate of line 1" },
		{ "deny getpid EPERM if arg0 == 1 -- a\n\n"
		  "deny getpid EACCES if arg0 == 2 -- b",
		  "t:3: getpid is denied with EPERM at line 1: one errno per "
		  "syscall" },
		{ "deny getpid EPERM if arg0 == 1 -- a\ndeny getpid EPERM -- b",
		  "t:2: getpid has a conditional rule at line 1 that this one "
		  "would override" },
		{ "deny getpid EPERM -- a\ndeny getpid EPERM if arg0 == 1 -- b",
		  "t:2: line 1 already denies getpid in every case" },
		{ "deny socket EPERM if arg0 == 1 && arg1 == 2 -- a\n"
		  "deny socket EPERM if arg1 == 2 && arg0 == 1 -- b",
		  "t:2: duplicate of line 1" },
		{ "deny socket EPERM unless arg0 in 2,1 -- a\n"
		  "deny socket EPERM unless arg0 in 1,2 -- b",
		  "t:2: duplicate of line 1" },
		{ "deny getpid EPERM -- x\ndeny\tgetpid!",
		  "t:2: expected an errno name, found '!'" },
		{ "", "t: no rules" },
		{ "# only a comment\n\n", "t: no rules" },
	};
	size_t	i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(parse_error(cases[i].text,
		    strlen(cases[i].text)), cases[i].err);
}

/* Bytes no text file holds are reported, not read past. */
static void
test_parse_binary(void **state)
{
	static const char	nul[] = "deny getpid\0 EPERM -- x";
	static const char	high[] = "deny getpid EPERM -- x\n\xff";
	static const char	word[] = "deny getpid EPERM if arg0 == "
	    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	    " -- x";

	assert_string_equal(parse_error(nul, sizeof(nul) - 1),
	    "t:1: expected an errno name, found byte 0x00");
	assert_string_equal(parse_error(high, sizeof(high) - 1),
	    "t:2: expected \"deny\", found byte 0xff");
	assert_string_equal(parse_error(word, sizeof(word) - 1),
	    "t:1: a value too long: \"AAAAAAAAAAAAAAAAAAAA...\"");
	/* Only len bytes count: what follows is not part of the text. */
	assert_string_equal(parse_error("deny getpid EPERM -- x!!", 22), "");
	assert_string_equal(parse_error("deny getpid EPERM -- x", 17),
	    "t:1: expected \"if\", \"unless\" or \"--\" and a reason, found "
	    "the end of the line");
}

/* Rules and lists are bounded, as the kernel bounds the program. */
static void
test_parse_limits(void **state)
{
	char	*text;
	size_t	 len = 0, cap = 1 << 16;
	int	 i;

	assert_non_null(text = malloc(cap));
	for (i = 0; i <= 1024; i++)
		len += snprintf(text + len, cap - len,
		    "deny getpid EPERM if arg0 == %d -- x\n", i);
	assert_true(len < cap);
	assert_string_equal(parse_error(text, len),
	    "t:1025: more than 1024 rules");
	len = snprintf(text, cap, "deny socket EPERM unless arg0 in 0");
	for (i = 1; i <= 64; i++)
		len += snprintf(text + len, cap - len, ",%d", i);
	len += snprintf(text + len, cap - len, " -- x");
	assert_string_equal(parse_error(text, len),
	    "t:1: more than 64 values");
	free(text);
}

/* policy_load names the path, both for a missing file and a bad line. */
static void
test_load_errors(void **state)
{
	char		 path[] = "/tmp/hg-test-policy.XXXXXX", err[512];
	char		 want[600];
	int		 fd;

	assert_null(policy_load("/nonexistent/seccomp.policy", err,
	    sizeof(err)));
	assert_string_equal(err, "/nonexistent/seccomp.policy: No such file "
	    "or directory");
	assert_int_not_equal(fd = mkstemp(path), -1);
	assert_int_equal(write(fd, "deny getpid EPERM -- ok\n\ndeny x", 31),
	    31);
	close(fd);
	assert_null(policy_load(path, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s:3: unknown syscall \"x\"", path);
	assert_string_equal(err, want);
	unlink(path);
}

/* The program comes in a sealed memfd, whole instructions, at offset 0. */
static void
test_memfd_sealed(void **state)
{
	struct policy	*pol;
	struct stat	 st;
	char		 err[512];
	int		 fd, fd2;

	pol = policy_load(profile_path(), err, sizeof(err));
	if (pol == NULL)
		fail_msg("%s", err);
	fd = policy_bpf_fd(pol, err, sizeof(err));
	if (fd == -1)
		fail_msg("%s", err);
	assert_int_equal(fcntl(fd, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_WRITE | F_SEAL_SEAL);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(st.st_size > 0);
	assert_int_equal(st.st_size % sizeof(struct sock_filter), 0);
	assert_true(st.st_size / sizeof(struct sock_filter) <= BPF_MAXINSNS);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(fd, "x", 1), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(fd, 0), -1);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, 0), -1);
	/* Each call makes a new program: spawns do not share an offset. */
	fd2 = policy_bpf_fd(pol, err, sizeof(err));
	assert_int_not_equal(fd2, -1);
	assert_int_not_equal(fd2, fd);
	/* The second comes from the cache: the same bytes, sealed alike. */
	{
		struct stat	 st2;
		char		*a, *b;

		assert_int_equal(fstat(fd2, &st2), 0);
		assert_int_equal(st2.st_size, st.st_size);
		assert_int_equal(fcntl(fd2, F_GET_SEALS), F_SEAL_SHRINK |
		    F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
		assert_int_equal(lseek(fd2, 0, SEEK_CUR), 0);
		a = malloc(st.st_size);
		b = malloc(st.st_size);
		assert_int_equal(pread(fd, a, st.st_size, 0), st.st_size);
		assert_int_equal(pread(fd2, b, st.st_size, 0), st.st_size);
		assert_memory_equal(a, b, st.st_size);
		free(a);
		free(b);
	}
	close(fd2);
	close(fd);
	policy_free(pol);
}

/* The shipped profile, enforced: each probe gets the errno it must. */
static void
test_enforce_profile(void **state)
{
	struct policy	*pol;
	char		 err[512];

	pol = policy_load(profile_path(), err, sizeof(err));
	if (pol == NULL)
		fail_msg("%s", err);
	check_probes(pol, profile_probes, sizeof(profile_probes) /
	    sizeof(profile_probes[0]));
	policy_free(pol);
}

/*
 * Every operator and the "unless" gaps, at their edges, on calls that
 * ignore their arguments, so that only the filter decides.
 */
static void
test_enforce_operators(void **state)
{
	static const char text[] =
	    "deny getppid EACCES if arg0 == 5 && arg1 & 0x30 -- t\n"
	    "deny getuid EPERM if arg2 > 0xffffffff -- t\n"
	    "deny getgid EINVAL unless arg0 in 0,7,1000,0xffffffffffffffff "
	    "-- t\n"
	    "deny geteuid ENOSYS if arg0 <= 3 && arg1 != 9 -- t\n"
	    "deny getegid EACCES if arg5 < 2 && arg4 >= 0x8000000000000000 "
	    "-- t\n"
	    "deny getpgrp ENOTTY if arg1 & 0x100000000 -- t\n"
	    "deny gettid EPERM if arg0 == 1 unless arg3 in 0x10,0x20 -- t\n"
	    "deny getpid EPERM unless arg0 in 2 -- t\n";
	static const struct probe probes[] = {
		{ "== and &", SYS_getppid, { 5, 0x30 }, EACCES, ALLOWED },
		{ "== and & (more bits)", SYS_getppid, { 5, 0xff }, EACCES,
		    ALLOWED },
		{ "& short of a bit", SYS_getppid, { 5, 0x20 }, 0, ALLOWED },
		{ "== off by one", SYS_getppid, { 6, 0x30 }, 0, ALLOWED },
		{ "== on 64 bits", SYS_getppid, { 5 | HIGH32, 0x30 }, 0,
		    ALLOWED },
		{ "> at the edge", SYS_getuid, { 0, 0, 0xffffffff }, 0,
		    ALLOWED },
		{ "> past the edge", SYS_getuid, { 0, 0, HIGH32 }, EPERM,
		    ALLOWED },
		{ "in: 0", SYS_getgid, { 0 }, 0, ALLOWED },
		{ "in: 7", SYS_getgid, { 7 }, 0, ALLOWED },
		{ "in: 1000", SYS_getgid, { 1000 }, 0, ALLOWED },
		{ "in: ~0", SYS_getgid, { ~0UL }, 0, ALLOWED },
		{ "not in: 1", SYS_getgid, { 1 }, EINVAL, ALLOWED },
		{ "not in: 6", SYS_getgid, { 6 }, EINVAL, ALLOWED },
		{ "not in: 8", SYS_getgid, { 8 }, EINVAL, ALLOWED },
		{ "not in: 512", SYS_getgid, { 512 }, EINVAL, ALLOWED },
		{ "not in: 999", SYS_getgid, { 999 }, EINVAL, ALLOWED },
		{ "not in: 1001", SYS_getgid, { 1001 }, EINVAL, ALLOWED },
		{ "not in: 1 << 32", SYS_getgid, { HIGH32 }, EINVAL, ALLOWED },
		{ "not in: 1 << 63", SYS_getgid, { 1UL << 63 }, EINVAL,
		    ALLOWED },
		{ "not in: ~1", SYS_getgid, { ~1UL }, EINVAL, ALLOWED },
		{ "<= and !=", SYS_geteuid, { 3, 8 }, ENOSYS, ALLOWED },
		{ "<= and != (0)", SYS_geteuid, { 0, 0 }, ENOSYS, ALLOWED },
		{ "!= fails", SYS_geteuid, { 3, 9 }, 0, ALLOWED },
		{ "<= fails", SYS_geteuid, { 4, 8 }, 0, ALLOWED },
		{ "< and >=", SYS_getegid, { 0, 0, 0, 0, 1UL << 63, 1 },
		    EACCES, ALLOWED },
		{ "< fails", SYS_getegid, { 0, 0, 0, 0, 1UL << 63, 2 }, 0,
		    ALLOWED },
		{ ">= fails", SYS_getegid, { 0, 0, 0, 0, (1UL << 63) - 1, 1 },
		    0, ALLOWED },
		{ "& above 32 bits", SYS_getpgrp, { 0, HIGH32 }, ENOTTY,
		    ALLOWED },
		{ "& below", SYS_getpgrp, { 0, 0xffffffff }, 0, ALLOWED },
		{ "if and unless", SYS_gettid, { 1, 0, 0, 0x11 }, EPERM,
		    ALLOWED },
		{ "if and unless: listed", SYS_gettid, { 1, 0, 0, 0x20 }, 0,
		    ALLOWED },
		{ "if fails", SYS_gettid, { 2, 0, 0, 0x11 }, 0, ALLOWED },
		{ "single value: below", SYS_getpid, { 1 }, EPERM, ALLOWED },
		{ "single value", SYS_getpid, { 2 }, 0, ALLOWED },
		{ "single value: above", SYS_getpid, { 3 }, EPERM, ALLOWED },
	};
	struct policy	*pol;
	char		 err[512];

	pol = policy_parse(text, sizeof(text) - 1, "t", err, sizeof(err));
	if (pol == NULL)
		fail_msg("%s", err);
	check_probes(pol, probes, sizeof(probes) / sizeof(probes[0]));
	policy_free(pol);
}

/*
 * A child's fault reaches its parent as the signal it is: cmocka's own
 * SIGSEGV handler, inherited by fork, would turn it into a printed
 * failure and an exit (what test_other_abis_killed relies on).
 */
static void
test_child_fault_is_a_signal(void **state)
{
	pid_t	pid;
	int	status;

	assert_int_not_equal(pid = test_fork(), -1);
	if (pid == 0) {
		raise(SIGSEGV);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGSEGV);
}

#ifdef __x86_64__
/* Fork a child that loads prog (unless NULL), then makes the call. */
static int
run_abi_call(const struct sock_fprog *prog, int int80)
{
	pid_t	pid;
	int	status;
	long	ret;

	assert_int_not_equal(pid = test_fork(), -1);
	if (pid == 0) {
		if (prog != NULL)
			child_load(prog);
		if (int80)
			/* i386 getpid (20), through the 32-bit entry point. */
			__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) :
			    "memory");
		else
			/* x86_64 getpid with the x32 bit. */
			ret = syscall(0x40000000L | SYS_getpid);
		(void)ret;
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return (status);
}

/*
 * The other entry points are not filtered: x32 calls and `int $0x80`
 * kill the process with SIGSYS. A kernel without ia32 emulation faults
 * on `int $0x80` before seccomp sees it: then the call dies of the same
 * signal with no filter at all, and that is accepted and said.
 */
static void
test_other_abis_killed(void **state)
{
	static const char	*name[] = { "x32 getpid", "int 0x80 getpid" };
	struct sock_fprog	 prog;
	struct policy		*pol;
	char			 err[512];
	int			 fd, status, bare, int80;

	pol = policy_load(profile_path(), err, sizeof(err));
	if (pol == NULL)
		fail_msg("%s", err);
	fd = policy_bpf_fd(pol, err, sizeof(err));
	assert_int_not_equal(fd, -1);
	read_bpf(fd, &prog);
	close(fd);
	policy_free(pol);
	for (int80 = 0; int80 <= 1; int80++) {
		status = run_abi_call(&prog, int80);
		if (!WIFSIGNALED(status))
			fail_msg("%s: went through the filter (exit %d)",
			    name[int80], WEXITSTATUS(status));
		if (WTERMSIG(status) == SIGSYS) {
			print_message("note: %s: killed by the filter "
			    "(SIGSYS)%s\n", name[int80], int80 ?
			    "; this kernel has ia32 emulation" : "");
			continue;
		}
		bare = run_abi_call(NULL, int80);
		if (!int80 || !WIFSIGNALED(bare) ||
		    WTERMSIG(bare) != WTERMSIG(status))
			fail_msg("%s: killed by signal %d, not SIGSYS",
			    name[int80], WTERMSIG(status));
		print_message("note: %s: signal %d with or without the "
		    "filter; this kernel has no ia32 emulation\n",
		    name[int80], WTERMSIG(status));
	}
	free(prog.filter);
}
#endif

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_profile_parses),
		cmocka_unit_test(test_parse_ok),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_parse_binary),
		cmocka_unit_test(test_parse_limits),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_memfd_sealed),
		cmocka_unit_test(test_enforce_profile),
		cmocka_unit_test(test_enforce_operators),
		cmocka_unit_test(test_child_fault_is_a_signal),
#ifdef __x86_64__
		cmocka_unit_test(test_other_abis_killed),
#endif
	};

	return (cmocka_run_group_tests(tests, NULL, NULL));
}
