/*
 * Terminal recordings: asciicast v2 files written by a relay process.
 *
 * A recorded terminal has two ptys. The shell's terminal is the inner
 * pty's slave; the relay, a fork of sandboxd (no exec), owns the inner
 * master and the outer pty's slave, its controlling terminal, whose master
 * goes to frontd as an unrecorded terminal's does. The relay copies bytes
 * both ways, appends an "o" event per read of the shell's output, and
 * turns the SIGWINCH a resize of the outer pty sends it into the same size
 * on the inner pty and an "r" event. Input is not recorded (passwords).
 */

#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "sandboxd.h"

#define RECORD_BUF	65536
#define RECORD_RESERVE	128	/* room kept under the cap for the marker */
#define RECORD_EXIT_CUT	3	/* the relay's exit status: cap reached */
#define RECORD_PRUNE_S	86400	/* retention is applied daily */

static char		*record_dir;	/* STATE_DIR/recordings */
static struct config	*record_conf;
static struct event	*record_ev_prune;

/* The relay's state. */
struct relay {
	FILE		*cast;
	size_t		 bytes;		/* written to the cast so far */
	size_t		 cap;
	int		 cut;
	struct timespec	 t0;
	unsigned char	 carry[4];	/* an incomplete UTF-8 sequence */
	size_t		 ncarry;
	char		*ev;		/* one encoded event */
	size_t		 evlen;
	size_t		 evcap;
};

static volatile sig_atomic_t	record_winch;

/* Whether a recording id is one: 16 lower-case hex digits. */
int
record_id_ok(const char *id)
{
	return str_is_hex(id, 16);
}

/* Whether user's name is in HOSTGATE_RECORD_USERS: 1, -1 with '-', 0. */
static int
record_user_listed(const char *list, const char *user)
{
	const char	*s, *e;
	size_t		 len = strlen(user);
	int		 neg;

	for (s = list; s != NULL && *s != '\0'; s = *e ? e + 1 : e) {
		if ((e = strchr(s, ',')) == NULL)
			e = s + strlen(s);
		neg = *s == '-';
		if ((size_t)(e - s - neg) == len &&
		    strncmp(s + neg, user, len) == 0)
			return neg ? -1 : 1;
	}
	return 0;
}

/* Whether a terminal of this spec is recorded. */
int
record_wanted(const struct spawn_spec *s)
{
	int	u;

	if (record_conf == NULL || s->kind != SPAWN_TERMINAL)
		return 0;
	if ((u = record_user_listed(record_conf->record_users, s->user)) != 0)
		return u > 0;
	switch (record_conf->record_terminals) {
	case RECORD_ALL:
		return 1;
	case RECORD_DIRECT:
		return s->mode == MODE_DIRECT;
	default:
		return 0;
	}
}

/* SIGWINCH in the relay: the outer pty was resized. */
static void
record_sigwinch(int sig)
{
	record_winch = 1;
}

/* Seconds since the recording started. */
static double
record_time(struct relay *r)
{
	struct timespec	now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - r->t0.tv_sec) +
	    (now.tv_nsec - r->t0.tv_nsec) / 1e9;
}

/* Append to the event buffer. */
static void
record_put(struct relay *r, const char *s, size_t len)
{
	size_t	 used = r->evlen;
	char	*n;

	if (used + len + 1 > r->evcap) {
		while (used + len + 1 > r->evcap)
			r->evcap *= 2;
		if ((n = realloc(r->ev, r->evcap)) == NULL)
			_exit(1);
		r->ev = n;
	}
	memcpy(r->ev + used, s, len);
	r->evlen = used + len;
	r->ev[r->evlen] = '\0';
}

/*
 * The length of the valid UTF-8 sequence at p (n bytes available): its
 * length, 0 when it is cut short by the end, -1 when invalid.
 */
static int
record_utf8(const unsigned char *p, size_t n)
{
	unsigned char	lo = 0x80, hi = 0xbf;
	int		len, i;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4;
	else
		return -1;
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	for (i = 1; i < len; i++) {
		if ((size_t)i >= n)
			return 0;
		if (p[i] < (i == 1 ? lo : 0x80) || p[i] > (i == 1 ? hi : 0xbf))
			return -1;
	}
	return len;
}

/* Append data as a JSON string's contents; keep a cut-short tail. */
static void
record_escape(struct relay *r, const unsigned char *p, size_t n, int last)
{
	char	u[8];
	size_t	i = 0;
	int	len;

	while (i < n) {
		/* A run of printable ASCII goes in at once. */
		for (len = 0; i + len < n && p[i + len] >= 0x20 &&
		    p[i + len] < 0x7f && p[i + len] != '"' &&
		    p[i + len] != '\\'; len++)
			;
		if (len > 0) {
			record_put(r, (const char *)p + i, len);
			i += len;
			continue;
		}
		len = record_utf8(p + i, n - i);
		if (len == 0 && !last) {
			memcpy(r->carry, p + i, n - i);
			r->ncarry = n - i;
			return;
		}
		if (len <= 0) {
			record_put(r, "\\ufffd", 6);
			i++;
			continue;
		}
		if (p[i] == '"' || p[i] == '\\') {
			u[0] = '\\';
			u[1] = p[i];
			record_put(r, u, 2);
		} else if (p[i] == '\n')
			record_put(r, "\\n", 2);
		else if (p[i] == '\r')
			record_put(r, "\\r", 2);
		else if (p[i] < 0x20 || p[i] == 0x7f) {
			snprintf(u, sizeof(u), "\\u%04x", p[i]);
			record_put(r, u, 6);
		} else
			record_put(r, (const char *)p + i, len);
		i += len;
	}
}

/* Write the encoded event, or the marker once it would pass the cap. */
static void
record_emit(struct relay *r, double t)
{
	size_t	len = r->evlen;
	int	n;

	if (r->cut)
		return;
	if (r->bytes + len + RECORD_RESERVE > r->cap) {
		n = fprintf(r->cast, "[%.6f, \"o\", \"\\r\\n[hostgate: recording "
		    "cut at %zu bytes]\\r\\n\"]\n", t, r->bytes);
		if (n > 0)
			r->bytes += n;
		r->cut = 1;
		fflush(r->cast);
		return;
	}
	if (fwrite(r->ev, 1, len, r->cast) == len)
		r->bytes += len;
}

/* Record output the shell wrote. */
static void
record_output(struct relay *r, const unsigned char *buf, size_t n)
{
	unsigned char	joined[RECORD_BUF + 4];
	char		head[64];
	double		t;

	if (r->cut)
		return;
	memcpy(joined, r->carry, r->ncarry);
	memcpy(joined + r->ncarry, buf, n);
	n += r->ncarry;
	r->ncarry = 0;
	t = record_time(r);
	snprintf(head, sizeof(head), "[%.6f, \"o\", \"", t);
	r->ev[0] = '\0';
	r->evlen = 0;
	record_put(r, head, strlen(head));
	record_escape(r, joined, n, 0);
	record_put(r, "\"]\n", 3);
	record_emit(r, t);
}

/* Copy the outer pty's size to the inner one and record it. */
static void
record_resize(struct relay *r, int outer, int inner)
{
	struct winsize	ws;
	double		t;

	if (ioctl(outer, TIOCGWINSZ, &ws) == -1)
		return;
	ioctl(inner, TIOCSWINSZ, &ws);
	t = record_time(r);
	r->ev[0] = '\0';
	r->evlen = 0;
	r->evlen = snprintf(r->ev, r->evcap, "[%.6f, \"r\", \"%ux%u\"]\n",
	    t, (unsigned)ws.ws_col, (unsigned)ws.ws_row);
	record_emit(r, t);
}

/*
 * The relay loop: shell output from inner to outer (and the cast), input
 * from outer to inner, until the shell's side of the inner pty is gone.
 */
static void __attribute__((noreturn))
record_relay(struct relay *r, int inner, int outer)
{
	unsigned char	 obuf[RECORD_BUF], ibuf[RECORD_BUF];
	size_t		 olen = 0, ooff = 0, ilen = 0, ioff = 0;
	struct pollfd	 pfd[2];
	sigset_t	 none;
	ssize_t		 n;
	int		 outer_gone = 0;

	sigemptyset(&none);
	sigaddset(&none, SIGWINCH);
	sigprocmask(SIG_BLOCK, &none, NULL);
	sigemptyset(&none);
	for (;;) {
		if (record_winch) {
			record_winch = 0;
			record_resize(r, outer, inner);
		}
		fflush(r->cast);
		/*
		 * While output waits for the outer side, the inner one is
		 * left alone: its hangup, reported whatever is asked, would
		 * wake the loop without end (and is read after the wait).
		 */
		pfd[0].fd = olen == 0 || ilen > 0 ? inner : -1;
		pfd[0].events = (olen == 0 ? POLLIN : 0) |
		    (ilen > 0 ? POLLOUT : 0);
		pfd[1].fd = outer_gone ? -1 : outer;
		pfd[1].events = (ilen == 0 ? POLLIN : 0) |
		    (olen > 0 ? POLLOUT : 0);
		pfd[0].revents = pfd[1].revents = 0;
		if (ppoll(pfd, 2, NULL, &none) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		/*
		 * Read only with room: the shell's side closed (POLLHUP) ends
		 * the loop once the read says so (EIO), after what it left.
		 */
		if (olen == 0 && (pfd[0].revents & (POLLIN | POLLHUP |
		    POLLERR))) {
			n = read(inner, obuf, sizeof(obuf));
			if (n > 0) {
				record_output(r, obuf, n);
				olen = n;
				ooff = 0;
			} else if (n == 0 || (errno != EAGAIN &&
			    errno != EINTR))
				break;	/* the shell's side closed: EIO */
		}
		if ((pfd[0].revents & (POLLOUT | POLLHUP | POLLERR)) &&
		    ilen > 0) {
			n = write(inner, ibuf + ioff, ilen - ioff);
			if (n > 0 && (ioff += n) == ilen)
				ilen = ioff = 0;
			else if (n == -1 && errno != EAGAIN && errno != EINTR)
				ilen = ioff = 0;	/* no shell to take it */
		}
		if (pfd[1].revents & POLLIN) {
			n = read(outer, ibuf, sizeof(ibuf));
			if (n > 0) {
				ilen = n;
				ioff = 0;
			} else if (n == 0 || (errno != EAGAIN &&
			    errno != EINTR))
				outer_gone = 1;
		} else if (pfd[1].revents & (POLLHUP | POLLERR))
			outer_gone = 1;
		if ((pfd[1].revents & POLLOUT) && olen > 0) {
			n = write(outer, obuf + ooff, olen - ooff);
			if (n > 0 && (ooff += n) == olen)
				olen = ooff = 0;
			else if (n == -1 && errno != EAGAIN && errno != EINTR)
				olen = ooff = 0;	/* nobody reads */
		}
		if (outer_gone)
			olen = ooff = 0;
	}
	/* A sequence cut short by the end is written as U+FFFD. */
	if (r->ncarry > 0 && !r->cut) {
		r->evlen = snprintf(r->ev, r->evcap, "[%.6f, \"o\", \"",
		    record_time(r));
		record_escape(r, r->carry, r->ncarry, 1);
		record_put(r, "\"]\n", 3);
		record_emit(r, record_time(r));
	}
	if (fflush(r->cast) != 0 || fsync(fileno(r->cast)) == -1)
		_exit(1);
	_exit(r->cut ? RECORD_EXIT_CUT : 0);
}

/* Write a JSON string (the title, the shell's TERM) as its contents. */
static void
record_header_str(FILE *f, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
}

/*
 * The relay, in the child of the fork: the inner pty's master, the outer
 * pty's slave and the cast move to fds 3, 4 and 5, the cast gets its
 * header, and record_relay copies until the shell is gone.
 */
static void __attribute__((noreturn))
record_child(const char *id, const char *user, const char *term, int inner,
    int slave, int fd, int cols, int rows)
{
	struct relay	 r;
	int		 hflags;
	FILE		*f;

	/* The relay: only the two ptys and the cast stay open. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGWINCH, record_sigwinch);
	/* Out of the way first, so that no dup2 overwrites one to be moved. */
	if ((inner = fcntl(inner, F_DUPFD, 64)) == -1 ||
	    (slave = fcntl(slave, F_DUPFD, 64)) == -1 ||
	    (fd = fcntl(fd, F_DUPFD, 64)) == -1 ||
	    dup2(inner, 3) == -1 || dup2(slave, 4) == -1 || dup2(fd, 5) == -1)
		_exit(1);
	close_range(6, ~0U, 0);
	inner = 3;
	slave = 4;
	fd = 5;
	if (setsid() == -1 || ioctl(slave, TIOCSCTTY, 0) == -1)
		_exit(1);
	hflags = fcntl(inner, F_GETFL);
	fcntl(inner, F_SETFL, hflags | O_NONBLOCK);
	hflags = fcntl(slave, F_GETFL);
	fcntl(slave, F_SETFL, hflags | O_NONBLOCK);
	if ((f = fdopen(fd, "w")) == NULL)
		_exit(1);
	memset(&r, 0, sizeof(r));
	r.cast = f;
	r.cap = record_conf->recording_max;
	r.evcap = 4 * RECORD_BUF;
	if ((r.ev = malloc(r.evcap)) == NULL)
		_exit(1);
	clock_gettime(CLOCK_MONOTONIC, &r.t0);
	r.bytes = fprintf(f, "{\"version\": 2, \"width\": %d, \"height\": %d, "
	    "\"timestamp\": %lld, \"env\": {\"TERM\": \"", cols, rows,
	    (long long)time(NULL));
	record_header_str(f, term != NULL ? term : "xterm-256color");
	fprintf(f, "\", \"SHELL\": \"/bin/bash\"}, \"title\": \"hostgate "
	    "terminal %s of ", id);
	record_header_str(f, user);
	fprintf(f, "\"}\n");
	r.bytes = ftell(f);
	/* A resize between the fork and the handler is not lost. */
	record_winch = 1;
	record_relay(&r, inner, slave);
}

/*
 * Start recording a terminal whose inner master is given: create the
 * cast, the outer pty and the relay. Returns the outer master (what frontd
 * gets) and the relay's pid, or -1 and err.
 */
int
record_start(const char *id, const char *user, const char *term,
    int inner, int cols, int rows, pid_t *relay_pid, char *err, size_t errsz)
{
	struct winsize	 ws;
	struct termios	 tio;
	char		*path, slave_name[64];
	int		 fd, outer = -1, slave = -1;
	pid_t		 pid;

	if (record_dir == NULL || !record_id_ok(id)) {
		snprintf(err, errsz, "recordings are not set up");
		return -1;
	}
	path = path_join(record_dir, id);
	if ((path = realloc(path, strlen(path) + 6)) == NULL)
		fatal("realloc");
	strcat(path, ".cast");
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	free(path);
	if (fd == -1)
		goto fail_errno;
	outer = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (outer == -1 || grantpt(outer) == -1 || unlockpt(outer) == -1 ||
	    ptsname_r(outer, slave_name, sizeof(slave_name)) != 0 ||
	    (slave = open(slave_name, O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1)
		goto fail_errno;
	memset(&ws, 0, sizeof(ws));
	ws.ws_col = cols;
	ws.ws_row = rows;
	ioctl(outer, TIOCSWINSZ, &ws);
	/* The outer pty passes bytes unchanged: the inner one is the tty. */
	if (tcgetattr(slave, &tio) == 0) {
		cfmakeraw(&tio);
		tcsetattr(slave, TCSANOW, &tio);
	}

	switch (pid = fork()) {
	case -1:
		goto fail_errno;
	case 0:
		record_child(id, user, term, inner, slave, fd, cols, rows);
	}
	close(fd);
	close(slave);
	*relay_pid = pid;
	return outer;

fail_errno:
	snprintf(err, errsz, "cannot record: %s", strerror(errno));
	if (fd != -1)
		close(fd);
	if (outer != -1)
		close(outer);
	if (slave != -1)
		close(slave);
	return -1;
}

/* Open a recording read-only: an fd, or -1 (errno ENOENT for none). */
int
record_open(const char *id)
{
	char	*path;
	int	 fd;

	if (record_dir == NULL || !record_id_ok(id)) {
		errno = ENOENT;
		return -1;
	}
	path = path_join(record_dir, id);
	if ((path = realloc(path, strlen(path) + 6)) == NULL)
		fatal("realloc");
	strcat(path, ".cast");
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	free(path);
	return fd;
}

/*
 * What a finished recording holds, for the audit: {id, file, sha256,
 * bytes, truncated}, or NULL when it cannot be read.
 */
struct json_object *
record_finish(const char *id, int relay_status)
{
	static const char	 hex[] = "0123456789abcdef";
	struct json_object	*o;
	EVP_MD_CTX		*ctx;
	unsigned char		 buf[65536], md[EVP_MAX_MD_SIZE];
	unsigned int		 mdlen, i;
	char			 sha[65], file[32];
	ssize_t			 n;
	size_t			 total = 0;
	int			 fd;

	if ((fd = record_open(id)) == -1) {
		log_warn("recording %s", id);
		return NULL;
	}
	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		fatalx("%s: EVP", __func__);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		EVP_DigestUpdate(ctx, buf, n);
		total += n;
	}
	close(fd);
	if (n == -1 || !EVP_DigestFinal_ex(ctx, md, &mdlen) || mdlen != 32) {
		EVP_MD_CTX_free(ctx);
		log_warn("recording %s: read", id);
		return NULL;
	}
	EVP_MD_CTX_free(ctx);
	for (i = 0; i < 32; i++) {
		sha[2 * i] = hex[md[i] >> 4];
		sha[2 * i + 1] = hex[md[i] & 0xf];
	}
	sha[64] = '\0';
	snprintf(file, sizeof(file), "%s.cast", id);
	o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "file", json_object_new_string(file));
	json_object_object_add(o, "sha256", json_object_new_string(sha));
	json_object_object_add(o, "bytes", json_object_new_int64(total));
	json_object_object_add(o, "truncated", json_object_new_boolean(
	    WIFEXITED(relay_status) &&
	    WEXITSTATUS(relay_status) == RECORD_EXIT_CUT));
	if (!WIFEXITED(relay_status) || (WEXITSTATUS(relay_status) != 0 &&
	    WEXITSTATUS(relay_status) != RECORD_EXIT_CUT))
		json_object_object_add(o, "incomplete",
		    json_object_new_boolean(1));
	log_info("recording %s: %zu bytes, sha256 %s%s", id, total, sha,
	    WIFEXITED(relay_status) &&
	    WEXITSTATUS(relay_status) == RECORD_EXIT_CUT ? ", cut at the cap" :
	    "");
	return o;
}

/* Remove recordings older than the retention (0 keeps them all). */
static void
record_prune(evutil_socket_t fd, short ev, void *arg)
{
	struct timeval	 tv = { RECORD_PRUNE_S, 0 };
	struct dirent	*de;
	struct stat	 st;
	time_t		 limit;
	DIR		*d;
	char		 id[17];
	int		 dfd, n = 0;

	if (record_conf->recording_retention > 0 &&
	    (d = opendir(record_dir)) != NULL) {
		limit = time(NULL) - (time_t)record_conf->recording_retention *
		    86400;
		dfd = dirfd(d);
		while ((de = readdir(d)) != NULL) {
			if (strlen(de->d_name) != 21 ||
			    strcmp(de->d_name + 16, ".cast") != 0)
				continue;
			memcpy(id, de->d_name, 16);
			id[16] = '\0';
			if (!record_id_ok(id) || spawn_find(id) != NULL ||
			    fstatat(dfd, de->d_name, &st,
			    AT_SYMLINK_NOFOLLOW) == -1 || !S_ISREG(st.st_mode) ||
			    st.st_mtime >= limit)
				continue;
			if (unlinkat(dfd, de->d_name, 0) == -1)
				log_warn("recording %s: unlink", id);
			else
				n++;
		}
		closedir(d);
		if (n > 0)
			log_info("pruned %d recording%s older than %d days", n,
			    n == 1 ? "" : "s", record_conf->recording_retention);
	}
	if (record_ev_prune != NULL)
		evtimer_add(record_ev_prune, &tv);
}

/*
 * Set recordings up before privileges are dropped: the directory, owned
 * by sandboxd's user, 0700.
 */
void
record_setup(struct config *conf, uid_t uid, gid_t gid)
{
	record_conf = conf;
	record_dir = path_join(conf->state_dir, "recordings");
	priv_dir("recordings directory", record_dir, uid, gid, 0700);
}

/* Prune now and daily. */
void
record_init(struct event_base *base)
{
	record_ev_prune = evtimer_new(base, record_prune, NULL);
	record_prune(-1, 0, NULL);
}
