/*
 * A forked child in a unit test starts from the kernel's defaults, not
 * from cmocka's: cmocka catches SIGSEGV, SIGILL, SIGBUS and the like to
 * report a crashing test, so a child that inherits its handlers turns a
 * fault the test means to observe (a kernel without ia32 emulation
 * faults on `int $0x80`) into a printed failure and a normal exit.
 */
#ifndef HG_TEST_CHILD_H
#define HG_TEST_CHILD_H

#include <signal.h>
#include <unistd.h>

/* Restore every signal's default disposition and unblock them all. */
static inline void
child_defaults(void)
{
	sigset_t	all;
	int		sig;

	for (sig = 1; sig < NSIG; sig++)
		(void)signal(sig, SIG_DFL);	/* SIGKILL, SIGSTOP: EINVAL */
	sigemptyset(&all);
	(void)sigprocmask(SIG_SETMASK, &all, NULL);
}

/* fork(2), with the child's signals back at their defaults. */
static inline pid_t
test_fork(void)
{
	pid_t	pid;

	if ((pid = fork()) == 0)
		child_defaults();
	return (pid);
}

#endif
