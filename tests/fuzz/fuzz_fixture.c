/*
 * The fixture directory and the daemon socket of the fuzz targets
 * (fuzz_fixture.h).
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "fuzz_fixture.h"

static char	ff_path[128];

/* Remove the fixture directory. */
static void
ff_cleanup(void)
{
	char	cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", ff_path);
	(void)!system(cmd);
}

/* Start logging and make the fixture directory, removed at exit. */
char *
ff_dir(const char *name, const char *parent)
{
	log_init(name, 1);
	log_setlevel(LOG_LVL_ERROR);
	if (ff_path[0] != '\0')
		abort();	/* one fixture directory a target */
	snprintf(ff_path, sizeof(ff_path), "%s/%s.XXXXXX", parent, name);
	if (mkdtemp(ff_path) == NULL)
		abort();
	atexit(ff_cleanup);
	return ff_path;
}

/* Abort unless msg is a non-empty line of printable text. */
void
ff_check_message(const char *msg)
{
	const unsigned char	*p;

	if (getenv("FUZZ_VERBOSE") != NULL)
		fprintf(stderr, "refused: %s\n", msg);
	if (*msg == '\0')
		abort();
	for (p = (const unsigned char *)msg; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f)
			abort();
}

/* Make the event base and the daemon's listening socket. */
int
ff_daemon_init(struct ff_daemon *d, const char *name)
{
	int	fd;

	/* As the daemons do: a peer gone is an error, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	d->name = name;
	if ((d->base = event_base_new()) == NULL)
		abort();
	/* An abstract socket of this process: nothing on disk, no clash. */
	memset(&d->addr, 0, sizeof(d->addr));
	d->addr.sun_family = AF_UNIX;
	snprintf(d->addr.sun_path + 1, sizeof(d->addr.sun_path) - 1,
	    "hostgate-fuzz-%s-%ld", name, (long)getpid());
	d->addrlen = offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(d->addr.sun_path + 1);
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&d->addr, d->addrlen) == -1 ||
	    listen(fd, 16) == -1)
		abort();
	return fd;
}

/* Run the daemon's loop until nothing more happens now. */
void
ff_daemon_run(struct ff_daemon *d)
{
	int	i;

	/* Unix sockets deliver at once: a few passes settle everything. */
	for (i = 0; i < 8; i++)
		event_base_loop(d->base, EVLOOP_NONBLOCK);
}

/* Connect as a peer and send the hello of role. */
int
ff_daemon_connect(struct ff_daemon *d, const char *role)
{
	char	hello[128];
	int	fd, n;

	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) == -1 || connect(fd,
	    (struct sockaddr *)&d->addr, d->addrlen) == -1)
		abort();
	ff_daemon_run(d);
	n = snprintf(hello, sizeof(hello),
	    "{\"type\":\"hello\",\"version\":1,\"role\":\"%s\"}", role);
	(void)!send(fd, hello, n, 0);
	ff_daemon_run(d);
	return fd;
}

/* One message to the daemon, and its answers read. */
void
ff_daemon_send(struct ff_daemon *d, int fd, const void *msg, size_t len)
{
	(void)!send(fd, msg, len, 0);
	ff_daemon_drain(d, fd);
}

/* Let the daemon run, and read what it answered. */
void
ff_daemon_drain(struct ff_daemon *d, int fd)
{
	char	sink[IPC_MAX_MSG];
	ssize_t	n;

	ff_daemon_run(d);
	while ((n = recv(fd, sink, sizeof(sink) - 1, 0)) > 0)
		if (getenv("FUZZ_VERBOSE") != NULL) {
			sink[n] = '\0';
			fprintf(stderr, "%s: %s\n", d->name, sink);
		}
}

/* Close the client; the daemon frees its peer. */
void
ff_daemon_close(struct ff_daemon *d, int fd)
{
	close(fd);
	ff_daemon_run(d);
}
