/*
 * hg-egress-bridge: the allowlist profiles' way out, started inside the
 * sandbox by bwrap as
 *	hg-egress-bridge PORT SOCKET -- CMD [ARG...]
 * It listens on 127.0.0.1:PORT and [::1]:PORT (the sandbox's loopback:
 * its network namespace has nothing else), starts its relay in the
 * background and execs CMD, which keeps its pid, its terminal and its
 * exit status. Each TCP connection gets a connection of its own to the
 * Unix socket SOCKET (bound in by bwrap; egressd holds its listener) and
 * bytes are moved both ways, half-closes passed on: by splice(2) through
 * a pipe per direction for the first BRIDGE_PIPES_MAX connections (the
 * kernel moves them, one wake-up per pipeful), copied through a buffer
 * for the others (or when a pipe cannot be had). The bridge decides
 * nothing: egressd checks every request and explains every refusal;
 * when SOCKET cannot be reached the client's connection is closed.
 *
 * The relay is a grandchild, reparented to the sandbox's init (bwrap,
 * pid 1 of the sandbox's pid namespace), so that CMD has no child it did
 * not make; it ends when CMD does: with the pid namespace, or when its
 * pidfd of CMD says CMD has exited. Plain C and libc: it runs under the
 * sandbox's seccomp policy like any program there.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <netinet/in.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BRIDGE_MAX_CONNS	256
#define BRIDGE_BUF		16384	/* bytes buffered per direction */
#define BRIDGE_BACKLOG		64
#define BRIDGE_PIPES_MAX	32	/* connections spliced through pipes */
#define BRIDGE_BUDGET		(1024 * 1024)	/* spliced a turn, a way */

/*
 * One direction of a connection: what was read and not written yet, in
 * buf, or in the pipe p (p[0] -1: no pipe) of at most cap bytes.
 */
struct half {
	char	buf[BRIDGE_BUF];
	size_t	off, len;
	int	p[2];
	size_t	inpipe, cap;
	int	eof;		/* the source said EOF (or failed) */
	int	shut;		/* the destination got SHUT_WR (or failed) */
};

/* One client: its TCP connection and its connection to the socket. */
struct conn {
	int		tcp, unx;
	struct half	up;	/* tcp -> unx */
	struct half	down;	/* unx -> tcp */
};

static struct conn	*conns[BRIDGE_MAX_CONNS];
static int		 nconns;
/* Out of descriptors: the listeners wait for a connection to close. */
static int		 starved;
static int		 npiped;	/* connections with pipes */
static const char	*bridge_sock;

/* Print why the bridge cannot start, and exit as a shell would. */
static void __attribute__((noreturn, format(printf, 2, 3)))
bridge_fail(int code, const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "hg-egress-bridge: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(code);
}

/* A listening TCP socket on a loopback address; -1 with errno. */
static int
bridge_listen(int family, int port)
{
	struct sockaddr_in	 sin;
	struct sockaddr_in6	 sin6;
	int			 fd, on = 1, saved;

	if ((fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (family == AF_INET) {
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons(port);
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1)
			goto fail;
	} else {
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on,
		    sizeof(on));
		memset(&sin6, 0, sizeof(sin6));
		sin6.sin6_family = AF_INET6;
		sin6.sin6_port = htons(port);
		sin6.sin6_addr = in6addr_loopback;
		if (bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) == -1)
			goto fail;
	}
	if (listen(fd, BRIDGE_BACKLOG) == -1)
		goto fail;
	return fd;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

/* A connection to the egress socket, or -1: then the client is closed. */
static int
bridge_connect(void)
{
	struct sockaddr_un	sun;
	int			fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", bridge_sock);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return -1;
	/* A Unix socket connects at once, or fails (EAGAIN: backlog full). */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A pipe for a direction, or none (p[0] -1): then its buffer is used. */
static void
bridge_pipe(struct half *h)
{
	int	sz;

	if (pipe2(h->p, O_NONBLOCK | O_CLOEXEC) == -1) {
		h->p[0] = h->p[1] = -1;
		return;
	}
	if ((sz = fcntl(h->p[1], F_GETPIPE_SZ)) <= 0) {
		close(h->p[0]);
		close(h->p[1]);
		h->p[0] = h->p[1] = -1;
		return;
	}
	h->cap = (size_t)sz;
}

/* Pipes for both directions of a connection, or for neither. */
static void
bridge_pipes(struct conn *c)
{
	c->up.p[0] = c->up.p[1] = c->down.p[0] = c->down.p[1] = -1;
	if (npiped >= BRIDGE_PIPES_MAX)
		return;
	bridge_pipe(&c->up);
	if (c->up.p[0] != -1)
		bridge_pipe(&c->down);
	if (c->down.p[0] == -1) {
		if (c->up.p[0] != -1) {
			close(c->up.p[0]);
			close(c->up.p[1]);
		}
		c->up.p[0] = c->up.p[1] = -1;
		return;
	}
	npiped++;
}

/* Take every pending client of a listener while there is room. */
static void
bridge_accept(int lfd)
{
	struct conn	*c;
	int		 fd, unx, i;

	while (nconns < BRIDGE_MAX_CONNS) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			/*
			 * The connection stays queued: polling the listener
			 * again before one of ours closes would spin.
			 */
			if (errno == EMFILE || errno == ENFILE)
				starved = nconns > 0;
			return;
		}
		if ((unx = bridge_connect()) == -1 ||
		    (c = calloc(1, sizeof(*c))) == NULL) {
			if (unx != -1)
				close(unx);
			close(fd);
			continue;
		}
		c->tcp = fd;
		c->unx = unx;
		bridge_pipes(c);
		for (i = 0; i < BRIDGE_MAX_CONNS; i++)
			if (conns[i] == NULL)
				break;
		conns[i] = c;
		nconns++;
	}
}

/*
 * A piped direction: from src through the pipe to dst until neither
 * moves, or BRIDGE_BUDGET bytes went (the other connections' turn: poll
 * says at once which end is still ready). Stopped with bytes in the
 * pipe, dst would block; with none, src would. EOF or a failure of src
 * ends the direction, a failure of dst too (nobody takes its bytes).
 */
static void
bridge_splice(int src, int dst, struct half *h)
{
	const unsigned int	 fl = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
	ssize_t			 n;
	size_t			 moved = 0;
	int			 progress;

	do {
		progress = 0;
		if (h->inpipe > 0) {
			n = splice(h->p[0], NULL, dst, NULL, h->inpipe, fl);
			if (n > 0) {
				h->inpipe -= (size_t)n;
				progress = 1;
			} else if (n == -1 && errno == EINTR)
				progress = 1;
			else if (n == -1 && errno != EAGAIN) {
				h->inpipe = 0;
				h->eof = h->shut = 1;
				return;
			}
		}
		if (!h->eof && h->inpipe < h->cap) {
			n = splice(src, NULL, h->p[1], NULL, h->cap - h->inpipe,
			    fl);
			if (n > 0) {
				h->inpipe += (size_t)n;
				moved += (size_t)n;
				progress = 1;
			} else if (n == 0 || (errno != EAGAIN && errno != EINTR))
				h->eof = 1;
			else if (errno == EINTR)
				progress = 1;
		}
	} while (progress && moved < BRIDGE_BUDGET);
}

/* Read into a direction's buffer once it is empty; EOF or failure ends it. */
static void
bridge_read(int fd, struct half *h)
{
	ssize_t	n;

	n = read(fd, h->buf, sizeof(h->buf));
	if (n > 0) {
		h->off = 0;
		h->len = (size_t)n;
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR))
		h->eof = 1;
}

/* Write what a direction holds; a failed destination ends it. */
static void
bridge_write(int fd, struct half *h)
{
	ssize_t	n;

	n = send(fd, h->buf + h->off, h->len - h->off, MSG_NOSIGNAL);
	if (n > 0) {
		h->off += (size_t)n;
		if (h->off == h->len)
			h->off = h->len = 0;
	} else if (n == -1 && errno != EAGAIN && errno != EINTR) {
		/* Nobody takes this direction's bytes any more. */
		h->off = h->len = 0;
		h->eof = h->shut = 1;
	}
}

/* Pass a source's EOF on once its bytes are written. */
static void
bridge_shut(int fd, struct half *h)
{
	if (h->eof && h->len == 0 && h->inpipe == 0 && !h->shut) {
		(void)shutdown(fd, SHUT_WR);
		h->shut = 1;
	}
}

/* What a side is polled for: its source read, its destination written. */
static short
bridge_events(const struct half *in, const struct half *out)
{
	short	ev = 0;

	if (!in->eof && in->len == 0 && in->inpipe == 0)
		ev |= POLLIN;
	if (out->len > 0 || out->inpipe > 0)
		ev |= POLLOUT;
	return ev;
}

/* Close a finished connection and free its slot. */
static void
bridge_close(int i)
{
	struct conn	*c = conns[i];

	starved = 0;
	close(c->tcp);
	close(c->unx);
	if (c->up.p[0] != -1) {
		close(c->up.p[0]);
		close(c->up.p[1]);
		close(c->down.p[0]);
		close(c->down.p[1]);
		npiped--;
	}
	free(c);
	conns[i] = NULL;
	nconns--;
}

/*
 * The relay: until CMD exits (pidfd readable) or the pid namespace goes.
 * Slot k of the poll set: 0, 1 the listeners, 2 the pidfd, then two per
 * connection.
 */
static void __attribute__((noreturn))
bridge_relay(int l4, int l6, int pidfd)
{
	struct pollfd	 pfd[3 + 2 * BRIDGE_MAX_CONNS];
	struct conn	*c;
	int		 i, k;

	for (;;) {
		pfd[0].fd = nconns < BRIDGE_MAX_CONNS && !starved ? l4 : -1;
		pfd[1].fd = nconns < BRIDGE_MAX_CONNS && !starved ? l6 : -1;
		pfd[0].events = pfd[1].events = POLLIN;
		pfd[2].fd = pidfd;
		pfd[2].events = POLLIN;
		for (i = 0; i < BRIDGE_MAX_CONNS; i++) {
			k = 3 + 2 * i;
			pfd[k].fd = pfd[k + 1].fd = -1;
			pfd[k].revents = pfd[k + 1].revents = 0;
			if ((c = conns[i]) == NULL)
				continue;
			pfd[k].events = bridge_events(&c->up, &c->down);
			pfd[k + 1].events = bridge_events(&c->down, &c->up);
			/* Nothing wanted: not polled, or a hang-up would spin. */
			pfd[k].fd = pfd[k].events ? c->tcp : -1;
			pfd[k + 1].fd = pfd[k + 1].events ? c->unx : -1;
		}
		if (poll(pfd, 3 + 2 * BRIDGE_MAX_CONNS, -1) == -1) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (pfd[2].revents != 0)
			_exit(0);	/* CMD is gone */
		for (i = 0; i < BRIDGE_MAX_CONNS; i++) {
			if ((c = conns[i]) == NULL)
				continue;
			k = 3 + 2 * i;
			if (pfd[k].revents & (POLLERR | POLLNVAL)) {
				bridge_close(i);
				continue;
			}
			if (pfd[k + 1].revents & (POLLERR | POLLNVAL)) {
				bridge_close(i);
				continue;
			}
			if (c->up.p[0] != -1) {
				/* Either end ready: each direction moves. */
				if (pfd[k].revents || pfd[k + 1].revents) {
					bridge_splice(c->tcp, c->unx, &c->up);
					bridge_splice(c->unx, c->tcp, &c->down);
				}
				goto ends;
			}
			if ((pfd[k].revents & (POLLIN | POLLHUP)) &&
			    (pfd[k].events & POLLIN))
				bridge_read(c->tcp, &c->up);
			if ((pfd[k + 1].revents & (POLLIN | POLLHUP)) &&
			    (pfd[k + 1].events & POLLIN))
				bridge_read(c->unx, &c->down);
			if (pfd[k + 1].revents & (POLLOUT | POLLHUP) &&
			    (pfd[k + 1].events & POLLOUT))
				bridge_write(c->unx, &c->up);
			if (pfd[k].revents & (POLLOUT | POLLHUP) &&
			    (pfd[k].events & POLLOUT))
				bridge_write(c->tcp, &c->down);
ends:
			bridge_shut(c->unx, &c->up);
			bridge_shut(c->tcp, &c->down);
			if (c->up.shut && c->down.shut)
				bridge_close(i);
		}
		if (pfd[0].revents & POLLIN)
			bridge_accept(l4);
		if (l6 != -1 && (pfd[1].revents & POLLIN))
			bridge_accept(l6);
	}
}

/*
 * In the relay's process: no terminal, no stdio (the command's output
 * and the command's end do not wait for it), SIGPIPE ignored.
 */
static void
bridge_detach(void)
{
	int	fd;

	(void)setsid();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	if ((fd = open("/dev/null", O_RDWR)) != -1) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
}

/* Listen, start the relay, exec the command. */
int
main(int argc, char *argv[])
{
	struct sockaddr_un	 sun;
	char			*end;
	long			 port;
	pid_t			 cmd, pid;
	int			 l4, l6, pidfd, status;

	if (argc < 5 || strcmp(argv[3], "--") != 0)
		bridge_fail(125, "usage: hg-egress-bridge PORT SOCKET -- CMD "
		    "[ARG...]");
	errno = 0;
	port = strtol(argv[1], &end, 10);
	if (errno != 0 || *end != '\0' || end == argv[1] || port < 1 ||
	    port > 65535)
		bridge_fail(125, "bad port %s", argv[1]);
	bridge_sock = argv[2];
	if (bridge_sock[0] == '\0' ||
	    strlen(bridge_sock) >= sizeof(sun.sun_path))
		bridge_fail(125, "bad socket path %s", bridge_sock);

	if ((l4 = bridge_listen(AF_INET, (int)port)) == -1)
		bridge_fail(125, "listen on 127.0.0.1:%ld: %s", port,
		    strerror(errno));
	/* IPv6 loopback when the sandbox has it; IPv4 alone otherwise. */
	l6 = bridge_listen(AF_INET6, (int)port);

	cmd = getpid();
	switch (pid = fork()) {
	case -1:
		bridge_fail(125, "fork: %s", strerror(errno));
	case 0:
		bridge_detach();
		/* The relay's parent exits: init (bwrap) reaps the relay. */
		switch (fork()) {
		case -1:
			_exit(1);
		case 0:
			break;
		default:
			_exit(0);
		}
		pidfd = (int)syscall(SYS_pidfd_open, cmd, 0);
		if (pidfd == -1 && errno != ENOSYS)
			_exit(0);	/* CMD has gone already */
		bridge_relay(l4, l6, pidfd);
	}
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	close(l4);
	if (l6 != -1)
		close(l6);
	execvp(argv[4], argv + 4);
	bridge_fail(errno == ENOENT ? 127 : 126, "%s: %s", argv[4],
	    strerror(errno));
}
