/*
 * A user's home host in a fleet: the plain rules, apart from the store
 * that hosts.c asks. A token minted in a fleet names its user's home
 * ("hgt_HOST.SECRET"), so that the balancer can send it there; a new
 * user's home is the least loaded host that is up.
 */
#include <stdio.h>
#include <string.h>

#include "brokerd.h"

/* Whether s is a host id (HOSTGATE_HOST_ID: [a-z0-9][a-z0-9-]{0,31}). */
int
home_host_valid(const char *s, size_t len)
{
	size_t	i;

	if (len == 0 || len > HOME_HOST_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9'))
			continue;
		if (s[i] == '-' && i > 0)
			continue;
		return 0;
	}
	return 1;
}

/*
 * The host a bearer token names: "hgt_HOST.SECRET" (a fleet's) writes
 * HOST into out and returns 1; a token without one (one host's, or of an
 * earlier release: its secret never holds a '.') returns 0 with out "";
 * anything else -1. The secret is base64url, so the first '.' ends HOST.
 */
int
home_token_host(const char *bearer, char *out, size_t outsz)
{
	const char	*p, *dot;
	size_t		 len;

	if (outsz > 0)
		out[0] = '\0';
	if (bearer == NULL || strncmp(bearer, TOKEN_PREFIX,
	    strlen(TOKEN_PREFIX)) != 0)
		return -1;
	p = bearer + strlen(TOKEN_PREFIX);
	if ((dot = strchr(p, '.')) == NULL)
		return 0;
	len = (size_t)(dot - p);
	if (!home_host_valid(p, len) || dot[1] == '\0' || len >= outsz)
		return -1;
	memcpy(out, p, len);
	out[len] = '\0';
	return 1;
}

/*
 * Where a new user goes: of the n hosts that are up, the one with the
 * fewest live terminals and commands, then the fewest users homed there,
 * then the smallest id. Its index, or -1 when n is 0.
 */
int
home_pick(const struct home_load *hosts, size_t n)
{
	size_t	i, best = 0;

	if (n == 0)
		return -1;
	for (i = 1; i < n; i++) {
		const struct home_load	*a = &hosts[i], *b = &hosts[best];

		if (a->live != b->live ? a->live < b->live :
		    a->users != b->users ? a->users < b->users :
		    strcmp(a->id, b->id) < 0)
			best = i;
	}
	return (int)best;
}
