/*
 * libFuzzer target for frontd's WebSocket terminals (frontd/ws.c): the
 * upgrade checks, then what frontd does with the client's frames once
 * wslay has them (frame header tracking, the 1 MiB limit, binary input to
 * the pty, JSON control messages such as resize). The input is what a
 * client sends: an upgrade request head, up to its empty line, and then
 * raw WebSocket frames. brokerd's attach answer carries a real pty
 * master; the pty says something too, so that output frames go out.
 * Besides the sanitizers it checks that a resize frontd applied is within
 * its limits.
 */
#include <sys/ioctl.h>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "front_harness.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

/* One upgrade and the frames after it, on a real pty. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char	 attached[] = "{\"result\":{}}";
	const uint8_t		*end;
	struct winsize		 sz;
	struct termios		 raw;
	struct pollfd		 pfd;
	char			 buf[4096];
	size_t			 head;
	int			 fd, master, slave, fds[1];

	fuzz_det_reset();
	/* Less than the pty holds unread, so that no write of frontd waits. */
	if (size > 60000)
		return 0;
	fh_init(NULL);
	fh_sent = 0;
	end = memmem(data, size, "\r\n\r\n", 4);
	head = end != NULL ? (size_t)(end - data) + 4 : size;

	fd = fh_connect();
	fh_write(fd, data, head);
	if (!fh_call.pending) {
		/* Refused (or incomplete): an HTTP answer, or nothing yet. */
		fh_read(fd, buf, sizeof(buf));
		fh_close(fd);
		return 0;
	}
	if (openpty(&master, &slave, NULL, NULL, NULL) == -1)
		abort();
	tcgetattr(slave, &raw);
	cfmakeraw(&raw);
	tcsetattr(slave, TCSANOW, &raw);
	fcntl(slave, F_SETFL, O_NONBLOCK);
	fds[0] = master;
	fh_answer(attached, sizeof(attached) - 1, fds, 1);
	fh_read(fd, buf, sizeof(buf));
	/*
	 * The pty passes bytes on in a kernel worker, not at once: wait until
	 * they are there, so that frontd reads them in the same pass each run.
	 */
	pfd.fd = master;
	pfd.events = POLLIN;
	if (write(slave, "$ ", 2) == 2 && poll(&pfd, 1, 1000) == 1)
		fh_run();
	fh_write(fd, data + head, size - head);
	while (read(slave, buf, sizeof(buf)) > 0)
		fh_run();
	/* (Once frontd closed the master, the slave can no longer tell.) */
	if (fh_sent > 0 && ioctl(slave, TIOCGWINSZ, &sz) == 0 &&
	    (sz.ws_col < 1 || sz.ws_col > 1000 || sz.ws_row < 1 ||
	    sz.ws_row > 1000))
		abort();
	fh_read(fd, buf, sizeof(buf));
	fh_close(fd);
	close(slave);
	return 0;
}
