/*
 * Logging for the daemons and hgctl: to stderr in the foreground, else to
 * syslog, in the style of OpenBSD's log.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "common.h"

static const char	*log_name = "hostgate";
static int		 log_foreground = 1;
static enum log_level	 log_level = LOG_LVL_INFO;

/* Set the program name and where lines go; also opens syslog when needed. */
void
log_init(const char *name, int foreground)
{
	log_name = name;
	log_foreground = foreground;
	if (!foreground)
		openlog(name, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* Set the most verbose level that is still logged. */
void
log_setlevel(enum log_level level)
{
	log_level = level;
}

/*
 * Format and emit one line. The line is built in a fixed buffer, not with
 * malloc, so that fatal() still works when memory ran out.
 */
static void
log_vemit(int priority, const char *label, const char *errstr,
    const char *fmt, va_list ap)
{
	char	line[4096];
	size_t	len;

	vsnprintf(line, sizeof line, fmt, ap);
	if (errstr != NULL) {
		len = strlen(line);
		snprintf(line + len, sizeof line - len, ": %s", errstr);
	}
	if (log_foreground) {
		/* One fprintf per line keeps lines whole when processes share stderr. */
		fprintf(stderr, "%s: %s: %s\n", log_name, label, line);
		fflush(stderr);
	} else
		syslog(priority, "%s", line);
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
