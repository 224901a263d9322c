/*
 * String vectors for command lines and environments, the one check
 * every path passes before it reaches a profile or a command line, and
 * the names of the permission profiles.
 */
#include <sys/types.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

/* The profiles by name, in the order of enum permission. */
static const char *const perm_names[] = {
	"read-only", "workspace-write", "workspace-write+network",
	"workspace-write+allowlist", "read-only+allowlist", NULL
};

/* The profile's name, or NULL. */
const char *
perm_name(enum permission perm)
{
	if ((unsigned)perm >= sizeof(perm_names) / sizeof(perm_names[0]) - 1)
		return NULL;
	return perm_names[perm];
}

/* The profile of a name: 0, or -1 when there is none of that name. */
int
perm_parse(const char *name, enum permission *perm)
{
	int	i;

	for (i = 0; name != NULL && perm_names[i] != NULL; i++)
		if (strcmp(name, perm_names[i]) == 0) {
			*perm = (enum permission)i;
			return 0;
		}
	return -1;
}

/* Whether a profile binds the workspace read-only. */
int
perm_read_only(enum permission perm)
{
	return perm == PERM_READ_ONLY || perm == PERM_READ_ONLY_ALLOW;
}

/* Whether a profile's only way out is the egress proxy. */
int
perm_allowlist(enum permission perm)
{
	return perm == PERM_WORKSPACE_WRITE_ALLOW ||
	    perm == PERM_READ_ONLY_ALLOW;
}

/* An empty vector. */
void
strv_init(struct strv *sv)
{
	sv->n = 0;
	sv->cap = 8;
	if ((sv->v = calloc(sv->cap, sizeof(char *))) == NULL)
		fatal("%s", __func__);
}

/* Append a copy of s; the vector stays NULL-terminated. */
void
strv_add(struct strv *sv, const char *s)
{
	if (sv->n + 2 > sv->cap) {
		sv->cap *= 2;
		if ((sv->v = reallocarray(sv->v, sv->cap,
		    sizeof(char *))) == NULL)
			fatal("%s", __func__);
	}
	if ((sv->v[sv->n++] = strdup(s)) == NULL)
		fatal("%s", __func__);
	sv->v[sv->n] = NULL;
}

void
strv_addf(struct strv *sv, const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		fatal("%s", __func__);
	va_end(ap);
	strv_add(sv, s);
	free(s);
}

void
strv_free(struct strv *sv)
{
	size_t	i;

	for (i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = sv->cap = 0;
}

/* Whether s needs quoting for a POSIX shell. */
static int
strv_plain(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789@%+=:,./_-", *s) == NULL)
			return 0;
	return 1;
}

/* The vector as one shell-quoted line (malloc'ed). */
char *
strv_join(const struct strv *sv)
{
	size_t	 i, len = 1;
	char	*out, *p;
	const char *s;

	for (i = 0; i < sv->n; i++)
		len += strlen(sv->v[i]) * 4 + 3;
	if ((out = p = malloc(len)) == NULL)
		fatal("%s", __func__);
	for (i = 0; i < sv->n; i++) {
		if (i > 0)
			*p++ = ' ';
		if (strv_plain(sv->v[i])) {
			p = stpcpy(p, sv->v[i]);
			continue;
		}
		*p++ = '\'';
		for (s = sv->v[i]; *s != '\0'; s++) {
			if (*s == '\'')
				p = stpcpy(p, "'\\''");
			else
				*p++ = *s;
		}
		*p++ = '\'';
	}
	*p = '\0';
	return out;
}

/* Refuse a path that is not absolute and canonical, or is hostile. */
int
path_check(const char *what, const char *path, char *err, size_t errsz)
{
	const char	*c, *seg;
	char		 esc[LOG_ESCAPE_MAX];
	size_t		 len;

	log_escape(path, (size_t)-1, esc, sizeof(esc));
	if (path == NULL || path[0] != '/') {
		snprintf(err, errsz, "%s \"%s\": not an absolute path", what,
		    esc);
		return -1;
	}
	if (strlen(path) >= 4096) {
		snprintf(err, errsz, "%s: path too long", what);
		return -1;
	}
	for (c = path; *c != '\0'; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '"' ||
		    *c == '\'' || *c == '(' || *c == ')' || *c == '\\' ||
		    *c == '`') {
			snprintf(err, errsz, "%s \"%s\": contains a quote, "
			    "parenthesis, backslash or control character",
			    what, esc);
			return -1;
		}
	}
	if (strcmp(path, "/") == 0) {
		snprintf(err, errsz, "%s: \"/\" is not allowed", what);
		return -1;
	}
	for (seg = path + 1;; seg = c + 1) {
		c = strchrnul(seg, '/');
		len = c - seg;
		if (len == 0 || (len == 1 && seg[0] == '.') ||
		    (len == 2 && seg[0] == '.' && seg[1] == '.')) {
			snprintf(err, errsz, "%s \"%s\": not canonical (empty, "
			    "\".\" or \"..\" component, or trailing slash)",
			    what, esc);
			return -1;
		}
		if (*c == '\0')
			break;
	}
	return 0;
}
