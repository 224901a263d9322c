/*
 * Logging for the daemons and hgctl, in the style of OpenBSD's log.c. A
 * line goes to one place, chosen once by log_init():
 *   - the systemd journal, natively (sd_journal_sendv), when JOURNAL_STREAM
 *     names the stderr we were given: systemd started us;
 *   - else stderr in the foreground (-d), as
 *     "2026-12-01T10:00:00.123Z INFO frontd: message";
 *   - else syslog, when /dev/log accepts a connection;
 *   - else the stderr we were started with (kept open across daemon(3),
 *     which points fd 2 at /dev/null), saying once that there is no syslog.
 * The request a line is about (log_ctx_set) starts its message as
 * "[0123456789abcdef] " on stderr and syslog, and becomes journal fields
 * (a prefix: what follows may be anything a user sent, escaped).
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/random.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* CODE_FILE=common/log.c on every entry would say nothing. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include "common.h"

enum log_dest { LOG_TO_STDERR, LOG_TO_SYSLOG, LOG_TO_JOURNAL };

static const char	*log_name = "hostgate";
static enum log_dest	 log_dest = LOG_TO_STDERR;
static enum log_level	 log_level = LOG_LVL_INFO;
static const char	*log_syslog_path = "/dev/log";
static int		 log_fd = STDERR_FILENO;	/* where stderr lines go */
static int		 log_plain;	/* a command's "name: LEVEL: message" */

/* The request, user and session the current lines are about. */
static char		 log_ctx_rid[LOG_REQUEST_ID_LEN + 1];
static char		 log_ctx_usr[64];
static char		 log_ctx_ses[LOG_SESSION_SHORT + 1];

/*
 * Whether JOURNAL_STREAM ("device:inode") names our stderr: then systemd
 * connected it to the journal and native entries are the better form.
 */
static int
log_journal_stream(void)
{
	const char		*v;
	unsigned long long	 dev, ino;
	struct stat		 st;
	char			 end;

	if ((v = getenv("JOURNAL_STREAM")) == NULL ||
	    sscanf(v, "%llu:%llu%c", &dev, &ino, &end) != 2)
		return 0;
	if (fstat(STDERR_FILENO, &st) == -1)
		return 0;
	return (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
}

/* Whether a syslog daemon listens on /dev/log (glibc would drop silently). */
static int
log_syslog_listens(void)
{
	struct sockaddr_un	 sun;
	int			 fd, ok;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", log_syslog_path);
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return 0;
	ok = connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0;
	if (!ok && errno == EPROTOTYPE) {
		/* Some syslog daemons listen on a stream socket. */
		close(fd);
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
			return 0;
		ok = connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0;
	}
	close(fd);
	return ok;
}

/* Set the program name and where lines go; also opens syslog when needed. */
void
log_init(const char *name, int foreground)
{
	log_name = name;
	if (log_fd != STDERR_FILENO) {
		close(log_fd);
		log_fd = STDERR_FILENO;
	}
	if (log_journal_stream()) {
		log_dest = LOG_TO_JOURNAL;
		/* Opens the journal socket now, before any seccomp filter. */
		log_info("logging to the systemd journal");
	} else if (foreground)
		log_dest = LOG_TO_STDERR;
	else if (log_syslog_listens()) {
		log_dest = LOG_TO_SYSLOG;
		openlog(name, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	} else {
		log_dest = LOG_TO_STDERR;
		/* A copy, so that daemon(3) cannot turn it into /dev/null. */
		log_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
		if (log_fd == -1)
			log_fd = STDERR_FILENO;
		log_warnx("no syslog daemon listens on %s: logging to stderr",
		    log_syslog_path);
	}
}

/*
 * For a command run by a person (hgctl): always stderr, as
 * "hgctl: WARN: message", with no timestamp and no journal.
 */
void
log_init_cli(const char *name)
{
	log_name = name;
	log_dest = LOG_TO_STDERR;
	log_plain = 1;
}

/* Where lines go now: "journal", "syslog" or "stderr". */
const char *
log_destination(void)
{
	switch (log_dest) {
	case LOG_TO_JOURNAL:
		return ("journal");
	case LOG_TO_SYSLOG:
		return ("syslog");
	default:
		return ("stderr");
	}
}

/* Set the most verbose level that is still logged. */
void
log_setlevel(enum log_level level)
{
	log_level = level;
}

/* Whether a line of level would be logged (to skip building one). */
int
log_enabled(enum log_level level)
{
	return (log_level >= level);
}

/* Copy s (NULL: empty) into dst of dstsz, cut short to fit. */
static void
log_ctx_copy(char *dst, size_t dstsz, const char *s)
{
	size_t	len;

	len = s != NULL ? strnlen(s, dstsz - 1) : 0;
	memcpy(dst, s != NULL ? s : "", len);
	dst[len] = '\0';
}

/*
 * Say which request, user and session the following lines are about (any
 * may be NULL); the session id is kept in its short form. Lasts until
 * log_ctx_clear() or the next log_ctx_set().
 */
void
log_ctx_set(const char *request_id, const char *user, const char *session)
{
	log_ctx_copy(log_ctx_rid, sizeof log_ctx_rid,
	    request_id != NULL && log_reqid_valid(request_id) ? request_id :
	    NULL);
	log_ctx_copy(log_ctx_usr, sizeof log_ctx_usr, user);
	log_ctx_copy(log_ctx_ses, sizeof log_ctx_ses, session);
}

/* The lines that follow are about no request in particular. */
void
log_ctx_clear(void)
{
	log_ctx_rid[0] = log_ctx_usr[0] = log_ctx_ses[0] = '\0';
}

/* The request id of the current context, or NULL. */
const char *
log_ctx_request_id(void)
{
	return (log_ctx_rid[0] != '\0' ? log_ctx_rid : NULL);
}

/* The user of the current context, or NULL. */
const char *
log_ctx_user(void)
{
	return (log_ctx_usr[0] != '\0' ? log_ctx_usr : NULL);
}

/* Whether s has the shape of a request id: LOG_REQUEST_ID_LEN hex digits. */
int
log_reqid_valid(const char *s)
{
	return (str_is_hex(s, LOG_REQUEST_ID_LEN));
}

/* A fresh random request id (unique, not a secret) into out. */
void
log_reqid_new(char out[LOG_REQUEST_ID_LEN + 1])
{
	static const char	hex[] = "0123456789abcdef";
	/*
	 * Drawn 64 ids at a time: one system call per request is costly.
	 * (A forked child would repeat its parent's next ids: frontd and
	 * brokerd, which draw them, do not fork.)
	 */
	static unsigned char	pool[64 * (LOG_REQUEST_ID_LEN / 2)];
	static size_t		used = sizeof pool;
	unsigned char		*rnd;
	size_t			i;

	if (used == sizeof pool) {
		if (getrandom(pool, sizeof pool, 0) != (ssize_t)sizeof pool)
			fatal("getrandom");
		used = 0;
	}
	rnd = pool + used;
	used += LOG_REQUEST_ID_LEN / 2;
	for (i = 0; i < LOG_REQUEST_ID_LEN / 2; i++) {
		out[2 * i] = hex[rnd[i] >> 4];
		out[2 * i + 1] = hex[rnd[i] & 0xf];
	}
	out[LOG_REQUEST_ID_LEN] = '\0';
}

/* The wall clock as RFC 3339 UTC with milliseconds, into out[32]. */
void
log_timestamp(char out[32])
{
	struct timespec	ts;
	struct tm	tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

/* Write all of buf to stderr in one write(2) (retried only when cut). */
static void
log_write_stderr(const char *buf, size_t len)
{
	ssize_t	n;

	while (len > 0) {
		if ((n = write(log_fd, buf, len)) == -1) {
			if (errno == EINTR)
				continue;
			return;
		}
		buf += n;
		len -= n;
	}
}

/* Send one native journal entry; -1 when the journal did not take it. */
static int
log_journal_send(int priority, const char *msg)
{
	struct iovec	iov[6];
	char		f_msg[4200], f_pri[16], f_id[64];
	char		f_rid[48], f_usr[96], f_ses[48];
	int		n = 0;

#define LOG_IOV(buf, ...) do {						\
	snprintf(buf, sizeof buf, __VA_ARGS__);				\
	iov[n].iov_base = buf;						\
	iov[n++].iov_len = strlen(buf);					\
} while (0)
	LOG_IOV(f_msg, "MESSAGE=%s", msg);
	LOG_IOV(f_pri, "PRIORITY=%d", priority);
	LOG_IOV(f_id, "SYSLOG_IDENTIFIER=%s", log_name);
	if (log_ctx_rid[0] != '\0')
		LOG_IOV(f_rid, "HOSTGATE_REQUEST_ID=%s", log_ctx_rid);
	if (log_ctx_usr[0] != '\0')
		LOG_IOV(f_usr, "HOSTGATE_USER=%s", log_ctx_usr);
	if (log_ctx_ses[0] != '\0')
		LOG_IOV(f_ses, "HOSTGATE_SESSION=%s", log_ctx_ses);
#undef LOG_IOV
	return (sd_journal_sendv(iov, n) < 0 ? -1 : 0);
}

/*
 * A message as one line: its control characters as \n, \r, \t or \xHH,
 * so that a message quoting what a client sent (a command line, a name)
 * cannot forge log lines of its own; cut where out is full.
 */
static void
log_flatten(const char *in, char *out, size_t outsz)
{
	static const char	hex[] = "0123456789abcdef";
	unsigned char		c;
	size_t			o = 0;

	for (; (c = *in) != '\0'; in++) {
		if (c >= 0x20 && c != 0x7f) {
			if (o + 1 >= outsz)
				break;
			out[o++] = c;
		} else if (c == '\n' || c == '\r' || c == '\t') {
			if (o + 2 >= outsz)
				break;
			out[o++] = '\\';
			out[o++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		} else {
			if (o + 4 >= outsz)
				break;
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 0xf];
		}
	}
	out[o] = '\0';
}

/*
 * Format and emit one line. The line is built in fixed buffers, not with
 * malloc, so that fatal() still works when memory ran out.
 */
static void
log_vemit(int priority, const char *label, const char *errstr,
    const char *fmt, va_list ap)
{
	char	raw[4096], line[4096], out[4096 + 128], when[32], rid[32];
	size_t	len;
	int	n;

	vsnprintf(raw, sizeof raw, fmt, ap);
	if (errstr != NULL) {
		len = strlen(raw);
		snprintf(raw + len, sizeof raw - len, ": %s", errstr);
	}
	log_flatten(raw, line, sizeof line);
	if (log_dest == LOG_TO_JOURNAL && log_journal_send(priority, line) == 0)
		return;
	rid[0] = '\0';
	if (log_ctx_rid[0] != '\0')
		snprintf(rid, sizeof rid, "[%s] ", log_ctx_rid);
	if (log_dest == LOG_TO_SYSLOG) {
		syslog(priority, "%s%s", rid, line);
		return;
	}
	/* One write(2) per line keeps lines whole when processes share stderr. */
	if (log_plain)
		n = snprintf(out, sizeof out, "%s: %s: %s%s\n", log_name, label,
		    rid, line);
	else {
		log_timestamp(when);
		n = snprintf(out, sizeof out, "%s %s %s: %s%s\n", when, label,
		    log_name, rid, line);
	}
	if (n < 0)
		return;
	if ((size_t)n >= sizeof out) {
		n = sizeof out - 1;
		out[n - 1] = '\n';
	}
	log_write_stderr(out, n);
}

/* Log a warning followed by the current errno's message. */
void
log_warn(const char *fmt, ...)
{
	va_list	 ap;
	int	 saved = errno;

	if (log_level < LOG_LVL_WARN)
		return;
	va_start(ap, fmt);
	log_vemit(LOG_WARNING, "WARN", strerror(saved), fmt, ap);
	va_end(ap);
	errno = saved;
}

/* Log a warning. */
void
log_warnx(const char *fmt, ...)
{
	va_list	ap;

	if (log_level < LOG_LVL_WARN)
		return;
	va_start(ap, fmt);
	log_vemit(LOG_WARNING, "WARN", NULL, fmt, ap);
	va_end(ap);
}

/* Log an informational message. */
void
log_info(const char *fmt, ...)
{
	va_list	ap;

	if (log_level < LOG_LVL_INFO)
		return;
	va_start(ap, fmt);
	log_vemit(LOG_INFO, "INFO", NULL, fmt, ap);
	va_end(ap);
}

/* Log a debugging message (off unless the level is debug). */
void
log_debug(const char *fmt, ...)
{
	va_list	ap;

	if (log_level < LOG_LVL_DEBUG)
		return;
	va_start(ap, fmt);
	log_vemit(LOG_DEBUG, "DEBUG", NULL, fmt, ap);
	va_end(ap);
}

/* Log an error with the current errno's message and exit. */
void
fatal(const char *fmt, ...)
{
	va_list	 ap;
	int	 saved = errno;

	va_start(ap, fmt);
	log_vemit(LOG_CRIT, "FATAL", strerror(saved), fmt, ap);
	va_end(ap);
	exit(1);
}

/* Log an error and exit. */
void
fatalx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vemit(LOG_CRIT, "FATAL", NULL, fmt, ap);
	va_end(ap);
	exit(1);
}

/* Log an error and abort(): a bug that a core or a debugger should show. */
void
fatalx_abort(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vemit(LOG_CRIT, "FATAL", NULL, fmt, ap);
	va_end(ap);
	abort();
}

/* Write the escaped form of byte c into out (at least 5 bytes); its length. */
static size_t
log_escape_byte(unsigned char c, char *out)
{
	static const char	hex[] = "0123456789abcdef";

	switch (c) {
	case '\n':
		memcpy(out, "\\n", 2);
		return (2);
	case '\r':
		memcpy(out, "\\r", 2);
		return (2);
	case '\t':
		memcpy(out, "\\t", 2);
		return (2);
	case '\\':
	case '"':
		out[0] = '\\';
		out[1] = c;
		return (2);
	}
	if (c >= 0x20 && c < 0x7f) {
		out[0] = c;
		return (1);
	}
	out[0] = '\\';
	out[1] = 'x';
	out[2] = hex[c >> 4];
	out[3] = hex[c & 0xf];
	return (4);
}

/*
 * Escape untrusted text (len bytes of s, or up to its NUL when len is
 * (size_t)-1) so it is printable ASCII without quotes; when it does not fit
 * in buf it is cut at a whole escape and ends with "...".
 */
const char *
log_escape(const char *s, size_t len, char *buf, size_t bufsz)
{
	char	 esc[5];
	size_t	 i, n, total, room, pos;

	if (bufsz == 0)
		return ("");
	if (s == NULL) {
		s = "(null)";
		len = (size_t)-1;
	}
	if (len == (size_t)-1)
		len = strlen(s);

	total = 0;
	for (i = 0; i < len && total < bufsz; i++)
		total += log_escape_byte(s[i], esc);
	room = bufsz - 1;
	if (total > room)	/* cut: keep room for the "..." */
		room = room >= 3 ? room - 3 : 0;

	pos = 0;
	for (i = 0; i < len; i++) {
		n = log_escape_byte(s[i], esc);
		if (pos + n > room)
			break;
		memcpy(buf + pos, esc, n);
		pos += n;
	}
	if (i < len) {
		n = bufsz - 1 - pos;
		if (n > 3)
			n = 3;
		memset(buf + pos, '.', n);
		pos += n;
	}
	buf[pos] = '\0';
	return (buf);
}
