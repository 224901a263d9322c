/*
 * HOSTGATE_EGRESS_HOSTS: names pinned by the operator, in /etc/hosts
 * format, read once before the jail. Its names resolve here first (and
 * only here: no DNS query for them); their addresses still meet the
 * denied networks like any other.
 */
#include <sys/types.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd.h"

#define HOSTS_FILE_MAX	(1024 * 1024)
#define HOSTS_MAX	65536

/* A numeric v4 or v6 address into ss; -1 when it is not one. */
static int
hosts_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in	*sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, s, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		*len = sizeof(*sin);
		return 0;
	}
	if (inet_pton(AF_INET6, s, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		*len = sizeof(*sin6);
		return 0;
	}
	return -1;
}

/* Add one name of a line: lower-cased, checked as a DNS name. */
static int
hosts_add(struct hosts *h, const char *name, const struct sockaddr_storage *ss,
    socklen_t len, int lineno, char *err, size_t errsz)
{
	struct hosts_entry	*e, *v;
	size_t			 i, n = strlen(name);

	if (n > EGRESS_HOST_MAX) {
		snprintf(err, errsz, "line %d: name too long", lineno);
		return -1;
	}
	if (h->n >= HOSTS_MAX) {
		snprintf(err, errsz, "line %d: more than %d names", lineno,
		    HOSTS_MAX);
		return -1;
	}
	if ((v = reallocarray(h->v, h->n + 1, sizeof(*v))) == NULL) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	h->v = v;
	e = &h->v[h->n];
	for (i = 0; i <= n; i++)
		e->name[i] = tolower((unsigned char)name[i]);
	if (n > 1 && e->name[n - 1] == '.')
		e->name[n - 1] = '\0';
	if (!egress_host_valid(e->name) || egress_host_is_literal(e->name)) {
		snprintf(err, errsz, "line %d: %s is not a host name", lineno,
		    name);
		return -1;
	}
	e->addr = *ss;
	e->addrlen = len;
	h->n++;
	return 0;
}

/* Parse a hosts file's text; 0, or -1 with "line N: why" in err. */
int
hosts_parse(const char *text, struct hosts *h, char *err, size_t errsz)
{
	struct sockaddr_storage	 ss;
	socklen_t		 len;
	char			*copy, *line, *next, *tok, *save, *hash;
	int			 lineno = 0, names, rc = -1;

	memset(h, 0, sizeof(*h));
	if ((copy = strdup(text)) == NULL) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	for (line = copy; line != NULL; line = next) {
		lineno++;
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if ((hash = strchr(line, '#')) != NULL)
			*hash = '\0';
		if ((tok = strtok_r(line, " \t\r", &save)) == NULL)
			continue;
		if (hosts_addr(tok, &ss, &len) == -1) {
			snprintf(err, errsz, "line %d: %.64s is not a numeric "
			    "IPv4 or IPv6 address", lineno, tok);
			goto out;
		}
		names = 0;
		while ((tok = strtok_r(NULL, " \t\r", &save)) != NULL) {
			if (hosts_add(h, tok, &ss, len, lineno, err,
			    errsz) == -1)
				goto out;
			names++;
		}
		if (names == 0) {
			snprintf(err, errsz, "line %d: an address without a "
			    "name", lineno);
			goto out;
		}
	}
	rc = 0;
out:
	free(copy);
	if (rc == -1)
		hosts_free(h);
	return rc;
}

/* Read and parse a hosts file; 0, or -1 and err. */
int
hosts_load(const char *path, struct hosts *h, char *err, size_t errsz)
{
	char	*text, sub[256];
	size_t	 len;

	memset(h, 0, sizeof(*h));
	if ((text = file_read(path, HOSTS_FILE_MAX, &len)) == NULL) {
		snprintf(err, errsz, "HOSTGATE_EGRESS_HOSTS=%s: %s", path,
		    strerror(errno));
		return -1;
	}
	if (strlen(text) != len) {
		snprintf(err, errsz, "HOSTGATE_EGRESS_HOSTS=%s: a NUL byte in "
		    "the file", path);
		free(text);
		return -1;
	}
	if (hosts_parse(text, h, sub, sizeof(sub)) == -1) {
		snprintf(err, errsz, "HOSTGATE_EGRESS_HOSTS=%s: %s", path,
		    sub);
		free(text);
		return -1;
	}
	free(text);
	return 0;
}

/* The addresses pinned for name, at most max into out; their number. */
int
hosts_lookup(const struct hosts *h, const char *name,
    struct sockaddr_storage *out, socklen_t *lens, int max)
{
	size_t	i;
	int	n = 0;

	for (i = 0; i < h->n && n < max; i++)
		if (strcmp(h->v[i].name, name) == 0) {
			out[n] = h->v[i].addr;
			lens[n] = h->v[i].addrlen;
			n++;
		}
	return n;
}

/* Free what hosts_parse made. */
void
hosts_free(struct hosts *h)
{
	free(h->v);
	h->v = NULL;
	h->n = 0;
}
