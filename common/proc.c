/*
 * What every daemon's main does the same way: its options (-d, -n) and
 * its event base with the signals that end it.
 */
#include <sys/types.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

static struct event	*proc_ev_term, *proc_ev_int;

/* -d: foreground, log to stderr; -n: check the configuration and exit. */
void
proc_options(int argc, char *argv[], const char *name, int *debug,
    int *check)
{
	sigset_t	term;
	int		ch;

	/*
	 * SIGTERM and SIGINT wait until proc_base() has their handlers: a
	 * daemon stopped during its start-up then still exits cleanly
	 * (closing its peers, unmounting, removing what it made), not by
	 * the signal's default action.
	 */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	sigprocmask(SIG_BLOCK, &term, NULL);
	*debug = *check = 0;
	while ((ch = getopt(argc, argv, "dn")) != -1) {
		switch (ch) {
		case 'd':
			*debug = 1;
			break;
		case 'n':
			*check = 1;
			break;
		default:
			goto usage;
		}
	}
	if (optind == argc)
		return;
usage:
	fprintf(stderr, "usage: %s [-dn]\n", name);
	exit(2);
}

/* SIGTERM or SIGINT: leave the loop; main then cleans up. */
static void
proc_sig(evutil_socket_t sig, short ev, void *arg)
{
	log_info("signal %d, exiting", (int)sig);
	event_base_loopbreak(arg);
}

/* The event base, with SIGTERM and SIGINT ending the loop. */
struct event_base *
proc_base(void)
{
	struct event_base	*base;

	if ((base = event_base_new()) == NULL)
		fatalx("event_base_new");
	proc_signals(base);
	return base;
}

/*
 * SIGTERM and SIGINT end base's loop from now on; one that came during
 * start-up is handled now. A daemon that forks a keeper after making its
 * base (egressd) calls this after the fork, so that a pending signal is
 * the keeper's to pass on, not lost in the keeper's unused base.
 */
void
proc_signals(struct event_base *base)
{
	sigset_t	term;

	/* Peers that go away are seen as EPIPE, not a fatal signal. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	proc_ev_term = evsignal_new(base, SIGTERM, proc_sig, base);
	proc_ev_int = evsignal_new(base, SIGINT, proc_sig, base);
	if (proc_ev_term == NULL || proc_ev_int == NULL)
		fatalx("evsignal_new");
	evsignal_add(proc_ev_term, NULL);
	evsignal_add(proc_ev_int, NULL);
	/* One that came during start-up is handled now (proc_options). */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	sigprocmask(SIG_UNBLOCK, &term, NULL);
}
