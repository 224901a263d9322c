/*
 * What the fuzz targets of brokerd and sandboxd share: a fixture directory
 * that goes away at exit, the check of an error message, and a daemon's
 * socket driven from the target (connect, hello, messages, its event loop
 * run until nothing more happens).
 */
#ifndef HG_FUZZ_FIXTURE_H
#define HG_FUZZ_FIXTURE_H

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <stddef.h>

#include <event2/event.h>

/*
 * Start logging as name (errors only) and make the fixture directory
 * parent/name.XXXXXX, removed at exit; its path. parent is "/tmp", or
 * "/dev/shm" where SQLite's flushes should cost nothing.
 */
char		*ff_dir(const char *name, const char *parent);
/* Abort unless msg is a non-empty line of printable text. */
void		 ff_check_message(const char *msg);

/* A daemon behind a socket of this process, and its event loop. */
struct ff_daemon {
	const char		*name;		/* for FUZZ_VERBOSE */
	struct event_base	*base;
	struct sockaddr_un	 addr;
	socklen_t		 addrlen;
};

/*
 * Make d's event base and its listening socket (SOCK_SEQPACKET, abstract,
 * named after the daemon, name, and this process); the socket's fd, for
 * the daemon.
 */
int	 ff_daemon_init(struct ff_daemon *d, const char *name);
/* Run d's event loop until nothing more happens now. */
void	 ff_daemon_run(struct ff_daemon *d);
/* Connect to d and say hello as role; the client's fd. */
int	 ff_daemon_connect(struct ff_daemon *d, const char *role);
/* Send one message of len bytes, then ff_daemon_drain. */
void	 ff_daemon_send(struct ff_daemon *d, int fd, const void *msg,
	    size_t len);
/* Run d, and read (and drop) what it answered. */
void	 ff_daemon_drain(struct ff_daemon *d, int fd);
/* Close the client and let d see it. */
void	 ff_daemon_close(struct ff_daemon *d, int fd);

#endif
