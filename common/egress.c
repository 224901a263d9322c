/*
 * Egress by allowlist: the vocabulary every daemon shares. Domain names
 * and patterns ("name" or "*.suffix"), the test for a host that is an IP
 * literal in any spelling, CIDR lists and port lists. egressd decides with
 * these; brokerd validates an admin's additions with the same functions,
 * so what it stores is what egressd can match.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define EGRESS_NAME_MAX		253
#define EGRESS_LABEL_MAX	63

/* Whether c separates the items of a list: ',' or white space. */
static int
egress_sep(int c)
{
	return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * The next item of list into buf (NUL-terminated), advancing *p: 1, 0 at
 * the end, -1 when an item does not fit in bufsz.
 */
static int
egress_next(const char **p, char *buf, size_t bufsz)
{
	const char	*s = *p, *e;

	while (*s != '\0' && egress_sep((unsigned char)*s))
		s++;
	if (*s == '\0') {
		*p = s;
		return 0;
	}
	for (e = s; *e != '\0' && !egress_sep((unsigned char)*e); e++)
		;
	*p = e;
	if ((size_t)(e - s) >= bufsz)
		return -1;
	memcpy(buf, s, e - s);
	buf[e - s] = '\0';
	return 1;
}

/* Whether s, len bytes, is all digits (base 10), or 0x and hex digits. */
static int
egress_numeric(const char *s, size_t len)
{
	size_t	i = 0;

	if (len == 0)
		return 0;
	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < len; i++)
			if (!isxdigit((unsigned char)s[i]))
				return 0;
		return 1;
	}
	for (; i < len; i++)
		if (!isdigit((unsigned char)s[i]))
			return 0;
	return 1;
}

/*
 * Whether host names an address rather than a name: dotted quads, and
 * every other form a resolver or a URL parser turns into an IPv4 address
 * (2130706433, 0x7f.1, 0177.0.0.1: inet_aton's, and any host whose last
 * label is numeric, as the WHATWG URL parser reads it), or IPv6, bracketed
 * or not.
 */
int
egress_host_is_literal(const char *host)
{
	struct in_addr	 a4;
	struct in6_addr	 a6;
	char		 buf[INET6_ADDRSTRLEN + 16];
	const char	*last;
	size_t		 len = strlen(host);

	if (len == 0)
		return 0;
	if (host[0] == '[' && len >= 2 && host[len - 1] == ']' &&
	    len - 2 < sizeof(buf)) {
		memcpy(buf, host + 1, len - 2);
		buf[len - 2] = '\0';
		host = buf;
		len -= 2;
	}
	if (strchr(host, ':') != NULL)
		return 1;	/* no name has one */
	if (inet_aton(host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1)
		return 1;
	if (host[len - 1] == '.')
		len--;
	for (last = host + len; last > host && last[-1] != '.'; last--)
		;
	return egress_numeric(last, host + len - last);
}

/*
 * Whether host is a DNS name the proxy may look up: lower-case labels of
 * letters, digits and '-' (not at either end), 1 to 63 bytes each, at most
 * 253 in all, and not an address in disguise. The caller lower-cases and
 * drops one trailing dot first.
 */
int
egress_host_valid(const char *host)
{
	size_t	 len = strlen(host), label = 0, i;
	char	 c, prev = '.';

	if (len == 0 || len > EGRESS_NAME_MAX || egress_host_is_literal(host))
		return 0;
	for (i = 0; i < len; i++) {
		c = host[i];
		if (c == '.') {
			if (label == 0 || prev == '-')
				return 0;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-') {
			if (c == '-' && prev == '.')
				return 0;
			if (++label > EGRESS_LABEL_MAX)
				return 0;
		} else
			return 0;
		prev = c;
	}
	return label > 0 && prev != '-';
}

/* Whether p is a pattern: a valid name, or "*." and a valid name. */
int
egress_pattern_valid(const char *p)
{
	if (p[0] == '*' && p[1] == '.')
		p += 2;
	return egress_host_valid(p);
}

/*
 * Whether host matches pattern: the same name, or for "*.suffix" any name
 * that ends in ".suffix" (sub-domains only; the suffix itself is not
 * matched).
 */
int
egress_match(const char *pattern, const char *host)
{
	size_t	hl, sl;

	if (pattern[0] != '*' || pattern[1] != '.')
		return strcmp(pattern, host) == 0;
	pattern += 1;	/* ".suffix" */
	hl = strlen(host);
	sl = strlen(pattern);
	return hl > sl && strcmp(host + hl - sl, pattern) == 0;
}

/* Whether list (patterns by ',' or white space) is empty or all valid. */
int
egress_list_valid(const char *list, char *bad, size_t badsz)
{
	char	buf[EGRESS_NAME_MAX + 8];
	int	r;

	while ((r = egress_next(&list, buf, sizeof(buf))) != 0)
		if (r == -1 || !egress_pattern_valid(buf)) {
			if (bad != NULL)
				snprintf(bad, badsz, "%s", r == -1 ?
				    "an item longer than 253 bytes" : buf);
			return 0;
		}
	return 1;
}

/* The first pattern of list that host matches, into out; 1, or 0. */
int
egress_list_match(const char *list, const char *host, char *out,
    size_t outsz)
{
	char	buf[EGRESS_NAME_MAX + 8];
	int	r;

	if (list == NULL)
		return 0;
	while ((r = egress_next(&list, buf, sizeof(buf))) != 0)
		if (r == 1 && egress_match(buf, host)) {
			if (out != NULL)
				snprintf(out, outsz, "%s", buf);
			return 1;
		}
	return 0;
}

/* The items of list as a JSON array of strings. */
struct json_object *
egress_list_json(const char *list)
{
	struct json_object	*a = json_object_new_array();
	char			 buf[EGRESS_NAME_MAX + 8];
	int			 r;

	while (list != NULL && (r = egress_next(&list, buf, sizeof(buf))) != 0)
		if (r == 1)
			json_object_array_add(a, json_object_new_string(buf));
	return a;
}

/* Parse "ADDR/PREFIX" (or a bare address: all its bits) into n. */
static int
egress_net_parse(const char *s, struct egress_net *n)
{
	char		 buf[INET6_ADDRSTRLEN + 8], *slash, *end;
	long		 prefix;
	int		 max, i;

	if (strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	snprintf(n->text, sizeof(n->text), "%s", s);
	if ((slash = strchr(buf, '/')) != NULL)
		*slash++ = '\0';
	memset(n->addr, 0, sizeof(n->addr));
	if (inet_pton(AF_INET, buf, n->addr) == 1) {
		n->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, buf, n->addr) == 1) {
		n->family = AF_INET6;
		max = 128;
	} else
		return -1;
	prefix = max;
	if (slash != NULL) {
		errno = 0;
		prefix = strtol(slash, &end, 10);
		if (*slash == '\0' || *end != '\0' || errno != 0 ||
		    prefix < 0 || prefix > max ||
		    !isdigit((unsigned char)*slash))
			return -1;
	}
	n->prefix = (int)prefix;
	/* No bits set past the prefix: 10.1.0.0/8 is a typo, not a net. */
	for (i = n->prefix; i < max; i++)
		if (n->addr[i / 8] & (0x80 >> (i % 8)))
			return -1;
	return 0;
}

/* Parse a list of CIDRs (by ',' or white space) into nets: 0, or -1, err. */
int
egress_nets_parse(const char *list, struct egress_nets *nets, char *err,
    size_t errsz)
{
	struct egress_net	*v;
	char			 buf[INET6_ADDRSTRLEN + 8];
	int			 r;

	nets->v = NULL;
	nets->n = 0;
	while (list != NULL && (r = egress_next(&list, buf, sizeof(buf))) != 0) {
		if ((v = reallocarray(nets->v, nets->n + 1,
		    sizeof(*nets->v))) == NULL)
			fatal("%s", __func__);
		nets->v = v;
		if (r == -1 || egress_net_parse(buf, &nets->v[nets->n]) == -1) {
			snprintf(err, errsz, "%s: not a network ADDRESS/PREFIX "
			    "with no bits set past the prefix", r == -1 ?
			    "an item" : buf);
			egress_nets_free(nets);
			return -1;
		}
		nets->n++;
	}
	return 0;
}

void
egress_nets_free(struct egress_nets *nets)
{
	free(nets->v);
	nets->v = NULL;
	nets->n = 0;
}

/* Whether the first prefix bits of a and b agree. */
static int
egress_prefix_eq(const unsigned char *a, const unsigned char *b, int prefix)
{
	int	full = prefix / 8, rest = prefix % 8;

	if (memcmp(a, b, full) != 0)
		return 0;
	return rest == 0 ||
	    ((a[full] ^ b[full]) & (0xff00 >> rest) & 0xff) == 0;
}

/*
 * The first network of nets that holds sa (AF_INET or AF_INET6; an
 * IPv4-mapped IPv6 address is looked up as the IPv4 address it is), as
 * its text, or NULL.
 */
const char *
egress_nets_find(const struct egress_nets *nets, const struct sockaddr *sa)
{
	static const unsigned char mapped[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};
	const unsigned char	*addr;
	int			 family;
	size_t			 i;

	if (sa->sa_family == AF_INET) {
		family = AF_INET;
		addr = (const unsigned char *)
		    &((const struct sockaddr_in *)sa)->sin_addr;
	} else if (sa->sa_family == AF_INET6) {
		addr = (const unsigned char *)
		    &((const struct sockaddr_in6 *)sa)->sin6_addr;
		family = AF_INET6;
		if (memcmp(addr, mapped, sizeof(mapped)) == 0) {
			family = AF_INET;
			addr += 12;
		}
	} else
		return NULL;
	for (i = 0; i < nets->n; i++)
		if (nets->v[i].family == family &&
		    egress_prefix_eq(addr, nets->v[i].addr, nets->v[i].prefix))
			return nets->v[i].text;
	return NULL;
}

/* Parse a list of ports 1..65535 into ports[max]: how many, or -1. */
int
egress_ports_parse(const char *list, int ports[], int max)
{
	char	 buf[16], *end;
	long	 p;
	int	 n = 0, r;

	while ((r = egress_next(&list, buf, sizeof(buf))) != 0) {
		if (r == -1 || n == max || !isdigit((unsigned char)buf[0]))
			return -1;
		errno = 0;
		p = strtol(buf, &end, 10);
		if (*end != '\0' || errno != 0 || p < 1 || p > 65535)
			return -1;
		ports[n++] = (int)p;
	}
	return n;
}
