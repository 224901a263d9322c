/*
 * The macOS backend: a Seatbelt (SBPL) profile filled in from the template
 * profiles/macos.sb and run by sandbox-exec. Paths reach the profile only as
 * parameters (-D NAME=VALUE), never pasted into its text, and each one
 * passes path_check() first. Nothing here runs anything: spawn.c execs what
 * this builds, and tests compare it with golden files.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

#define MACOS_SANDBOX_EXEC	"/usr/bin/sandbox-exec"
#define MACOS_ENV		"/usr/bin/env"
#define MACOS_SH		"/bin/sh"
#define MACOS_PATH		"/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:" \
				"/usr/sbin:/sbin"
/* macOS has no C.UTF-8 locale on every release; this one it always has. */
#define MACOS_LANG		"en_US.UTF-8"
#define MACOS_MAX_PATHS		32

/*
 * sandbox-exec cannot change directory: a fixed script does it, with the
 * directory and the command as its arguments, never inside its text.
 */
#define MACOS_CD_SCRIPT		"cd \"$1\" && shift && exec \"$@\""

/* What a template line's tags test. */
struct macos_cond {
	int	terminal;
	int	write;
	int	network;
	size_t	nwritable;
	size_t	nhidden;
};

/* A colon-separated list of paths, split in place and checked. */
struct macos_list {
	char	*buf;
	char	*path[MACOS_MAX_PATHS];
	size_t	 n;
};

/* The parts of a macOS path that are symbolic links to /private. */
static const char *const macos_links[] = { "/tmp", "/var", "/etc", NULL };

/*
 * path_check() plus what is particular to macOS: Seatbelt matches the real
 * path of a file, so a path under a symbolic link never matches and would
 * only look like it was allowed.
 */
static int
macos_path(const char *what, const char *path, char *err, size_t errsz)
{
	const char *const	*l;
	size_t			 len;

	if (path_check(what, path, err, errsz) == -1)
		return -1;
	for (l = macos_links; *l != NULL; l++) {
		len = strlen(*l);
		if (strncmp(path, *l, len) == 0 &&
		    (path[len] == '\0' || path[len] == '/')) {
			snprintf(err, errsz, "%s \"%s\": %s is a symbolic link "
			    "on macOS and the sandbox matches real paths; use "
			    "/private%s", what, path, *l, path);
			return -1;
		}
	}
	return 0;
}

/* Split a colon-separated list of paths; empty entries are skipped. */
static int
macos_split(const char *what, const char *list, struct macos_list *l,
    char *err, size_t errsz)
{
	char	*p, *next;

	l->n = 0;
	l->buf = NULL;
	if (list == NULL || *list == '\0')
		return 0;
	if ((l->buf = strdup(list)) == NULL)
		fatal("%s", __func__);
	for (p = l->buf; p != NULL; p = next) {
		if ((next = strchr(p, ':')) != NULL)
			*next++ = '\0';
		if (*p == '\0')
			continue;
		if (l->n == MACOS_MAX_PATHS) {
			snprintf(err, errsz, "%s: more than %d paths", what,
			    MACOS_MAX_PATHS);
			return -1;
		}
		if (macos_path(what, p, err, errsz) == -1)
			return -1;
		l->path[l->n++] = p;
	}
	return 0;
}

/* The start of a line's ";@tags" marker (the last one), or NULL. */
static char *
macos_marker(char *line)
{
	char	*p, *mark = NULL;

	for (p = line; (p = strstr(p, ";@")) != NULL; p += 2)
		mark = p;
	return mark;
}

/*
 * Read a line's tags: whether to keep it, how many times, and which
 * placeholder the repetition numbers.
 */
static int
macos_tags(const char *tags, int lineno, const struct macos_cond *c,
    int *keep, size_t *times, const char **ph, char *err, size_t errsz)
{
	char	 tag[32];
	size_t	 len;

	*keep = 1;
	*times = 1;
	*ph = NULL;
	for (;;) {
		tags += strspn(tags, " \t");
		if ((len = strcspn(tags, " \t")) == 0)
			break;
		if (len >= sizeof(tag))
			len = sizeof(tag) - 1;
		memcpy(tag, tags, len);
		tag[len] = '\0';
		tags += strcspn(tags, " \t");
		if (strcmp(tag, "terminal") == 0)
			*keep &= c->terminal;
		else if (strcmp(tag, "write") == 0)
			*keep &= c->write;
		else if (strcmp(tag, "network") == 0)
			*keep &= c->network;
		else if (strcmp(tag, "writable") == 0 && *ph == NULL) {
			*ph = "WRITABLE_N";
			*times = c->nwritable;
		} else if (strcmp(tag, "hidden") == 0 && *ph == NULL) {
			*ph = "HIDDEN_N";
			*times = c->nhidden;
		} else {
			snprintf(err, errsz, "macOS profile template line %d: "
			    "unknown or repeated tag \"%s\"", lineno, tag);
			return -1;
		}
	}
	return 0;
}

/* Write line with each placeholder ph numbered n. */
static void
macos_put(FILE *f, const char *line, const char *ph, size_t n)
{
	const char	*p;
	size_t		 stem;

	if (ph == NULL) {
		fprintf(f, "%s\n", line);
		return;
	}
	stem = strlen(ph) - 1;		/* "WRITABLE_N" without the N */
	while ((p = strstr(line, ph)) != NULL) {
		fwrite(line, 1, p - line, f);
		fwrite(ph, 1, stem, f);
		fprintf(f, "%zu", n);
		line = p + stem + 1;
	}
	fprintf(f, "%s\n", line);
}

/* Whether a line's placeholders agree with its repeat tag. */
static int
macos_placeholders(const char *line, const char *ph, int lineno, char *err,
    size_t errsz)
{
	static const char *const all[] = { "WRITABLE_N", "HIDDEN_N", NULL };
	const char *const	*p;

	for (p = all; *p != NULL; p++) {
		if (strstr(line, *p) != NULL &&
		    (ph == NULL || strcmp(ph, *p) != 0)) {
			snprintf(err, errsz, "macOS profile template line %d: "
			    "%s without its repeat tag", lineno, *p);
			return -1;
		}
	}
	if (ph != NULL && strstr(line, ph) == NULL) {
		snprintf(err, errsz, "macOS profile template line %d: repeat "
		    "tag without %s", lineno, ph);
		return -1;
	}
	return 0;
}

/* The profile for one set of conditions (malloc'ed), or NULL and err. */
static char *
macos_expand(const char *tmpl, const struct macos_cond *c, char *err,
    size_t errsz)
{
	FILE		*f;
	char		*out = NULL, *line, *mark;
	const char	*p, *eol, *ph;
	size_t		 outlen, times, i, len;
	int		 lineno = 0, keep;

	if ((f = open_memstream(&out, &outlen)) == NULL)
		fatal("%s", __func__);
	for (p = tmpl; *p != '\0'; p = *eol == '\0' ? eol : eol + 1) {
		eol = strchrnul(p, '\n');
		lineno++;
		/* Comments and blank lines stay in the template. */
		len = strspn(p, " \t");
		if (p + len == eol || p[len] == ';')
			continue;
		if ((line = strndup(p, eol - p)) == NULL)
			fatal("%s", __func__);
		keep = 1;
		times = 1;
		ph = NULL;
		if ((mark = macos_marker(line)) != NULL) {
			*mark = '\0';
			if (macos_tags(mark + 2, lineno, c, &keep, &times, &ph,
			    err, errsz) == -1)
				goto fail;
			len = strlen(line);
			while (len > 0 && (line[len - 1] == ' ' ||
			    line[len - 1] == '\t'))
				line[--len] = '\0';
		}
		if (macos_placeholders(line, ph, lineno, err, errsz) == -1)
			goto fail;
		for (i = 0; keep && i < times; i++)
			macos_put(f, line, ph, i);
		free(line);
	}
	fclose(f);
	return out;
fail:
	free(line);
	fclose(f);
	free(out);
	return NULL;
}

/* Whether the parentheses of SBPL text balance (strings, comments aside). */
static int
macos_balanced(const char *s)
{
	long	depth = 0;

	for (; *s != '\0'; s++) {
		if (*s == ';')
			s = strchrnul(s, '\n') - 1;
		else if (*s == '"') {
			for (s++; *s != '\0' && *s != '"'; s++)
				if (*s == '\\' && s[1] != '\0')
					s++;
			if (*s == '\0')
				return 0;
		} else if (*s == '(')
			depth++;
		else if (*s == ')' && --depth < 0)
			return 0;
	}
	return depth == 0;
}

/* Check the template once, at start-up, in every configuration. */
int
macos_template_check(const char *tmpl, char *err, size_t errsz)
{
	struct macos_cond	 c;
	char			*out;
	int			 kind, perm;

	if (tmpl == NULL || strstr(tmpl, "(version 1)") == NULL) {
		snprintf(err, errsz, "macOS profile template: no (version 1)");
		return -1;
	}
	for (kind = 0; kind < 2; kind++) {
		for (perm = 0; perm < 3; perm++) {
			c.terminal = kind;
			c.write = perm != PERM_READ_ONLY;
			c.network = perm == PERM_WORKSPACE_WRITE_NET;
			c.nwritable = c.nhidden = 2;
			if ((out = macos_expand(tmpl, &c, err, errsz)) == NULL)
				return -1;
			if (!macos_balanced(out)) {
				snprintf(err, errsz, "macOS profile template: "
				    "unbalanced parentheses or string (%s, "
				    "permission %d)", kind ? "terminal" :
				    "command", perm);
				free(out);
				return -1;
			}
			free(out);
		}
	}
	return 0;
}

/* NAME=VALUE with a name env(1) cannot take for its command. */
static int
macos_env_ok(const char *s)
{
	const char	*p;

	if (!(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') ||
	    (s[0] >= 'a' && s[0] <= 'z')))
		return 0;
	for (p = s + 1; *p != '='; p++)
		if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			return 0;
	return 1;
}

/* A TERM value: a terminfo name. */
static int
macos_term_ok(const char *s)
{
	size_t	len = strlen(s);

	return len > 0 && len <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+_-") == len;
}

/* A pty slave as macOS names it: /dev/ttys followed by digits. */
static int
macos_tty_ok(const char *s)
{
	const char	*d = s + strlen("/dev/ttys");

	return strncmp(s, "/dev/ttys", strlen("/dev/ttys")) == 0 &&
	    *d != '\0' && strlen(d) <= 6 && strspn(d, "0123456789") ==
	    strlen(d);
}

/* Check everything of the spec that reaches the command line. */
static int
macos_check_spec(const struct spawn_spec *s, const struct macos_opts *o,
    char *err, size_t errsz)
{
	char *const	*e;
	size_t		 wlen;

	if (s->mode != MODE_SANDBOX) {
		snprintf(err, errsz, "macOS backend: not a sandboxed spawn");
		return -1;
	}
	/* No in-sandbox bridge to the egress proxy under sandbox-exec. */
	if (perm_allowlist(s->perm)) {
		snprintf(err, errsz, "the %s profile is not available on macOS",
		    perm_name(s->perm));
		return -1;
	}
	if (o->tmpl == NULL) {
		snprintf(err, errsz, "macOS backend: no profile template");
		return -1;
	}
	if (s->argv == NULL || s->argv[0] == NULL || s->argv[0][0] == '\0') {
		snprintf(err, errsz, "nothing to run");
		return -1;
	}
	if (s->workspace == NULL || s->tmpdir == NULL) {
		snprintf(err, errsz, "macOS backend: %s missing",
		    s->workspace == NULL ? "workspace" : "temp dir");
		return -1;
	}
	if (macos_path("workspace", s->workspace, err, errsz) == -1 ||
	    macos_path("temp dir", s->tmpdir, err, errsz) == -1)
		return -1;
	if (s->cwd != NULL) {
		if (macos_path("cwd", s->cwd, err, errsz) == -1)
			return -1;
		wlen = strlen(s->workspace);
		if (strncmp(s->cwd, s->workspace, wlen) != 0 ||
		    (s->cwd[wlen] != '\0' && s->cwd[wlen] != '/')) {
			snprintf(err, errsz, "cwd is outside the workspace");
			return -1;
		}
	}
	if (s->kind == SPAWN_TERMINAL) {
		if (o->tty == NULL) {
			snprintf(err, errsz, "macOS backend: a terminal needs "
			    "its pty's path");
			return -1;
		}
		if (path_check("pty", o->tty, err, errsz) == -1)
			return -1;
		if (!macos_tty_ok(o->tty)) {
			snprintf(err, errsz, "pty \"%s\": not /dev/ttysNNN",
			    o->tty);
			return -1;
		}
	}
	if (s->term != NULL && !macos_term_ok(s->term)) {
		snprintf(err, errsz, "TERM: only letters, digits and . + _ - "
		    "(at most 64)");
		return -1;
	}
	for (e = s->env; e != NULL && *e != NULL; e++) {
		if (strchr(*e, '=') == NULL || !macos_env_ok(*e)) {
			snprintf(err, errsz, "environment entry %zu: not "
			    "NAME=VALUE with a name of letters, digits and _",
			    (size_t)(e - s->env));
			return -1;
		}
	}
	return 0;
}

/*
 * The sandbox-exec command line of a spawn:
 *   sandbox-exec -p PROFILE -D WORKSPACE=.. -D TMPDIR=.. [-D TTY=..]
 *       [-D WRITABLE_n=..] [-D HIDDEN_n=..]
 *     env -i PATH=.. HOME=.. TMPDIR=.. TERM=.. LANG=.. [USER=..] ENV..
 *         HOSTGATE_MODE=sandbox
 *     sh -c 'cd "$1" && shift && exec "$@"' sh CWD ARGV..
 * No "--" after the options: sandbox-exec stops at its first operand, an
 * absolute path that cannot be taken for an option.
 */
int
macos_build(const struct spawn_spec *s, const struct macos_opts *o,
    struct strv *argv, char *err, size_t errsz)
{
	struct macos_list	 writable, hidden;
	struct macos_cond	 c;
	struct strv		 a;
	char			*profile = NULL;
	char *const		*e;
	size_t			 i;
	int			 rc = -1;

	writable.buf = hidden.buf = NULL;
	strv_init(&a);
	if (macos_check_spec(s, o, err, errsz) == -1 ||
	    macos_split("writable path", o->writable, &writable, err,
	    errsz) == -1 ||
	    macos_split("hidden path", o->hidden, &hidden, err, errsz) == -1)
		goto out;

	c.terminal = s->kind == SPAWN_TERMINAL;
	c.write = !perm_read_only(s->perm);
	c.network = s->perm == PERM_WORKSPACE_WRITE_NET;
	/* Read-only means nothing but the temp dir and /dev/null. */
	c.nwritable = c.write ? writable.n : 0;
	c.nhidden = hidden.n;
	if ((profile = macos_expand(o->tmpl, &c, err, errsz)) == NULL)
		goto out;

	strv_add(&a, MACOS_SANDBOX_EXEC);
	strv_add(&a, "-p");
	strv_add(&a, profile);
	strv_add(&a, "-D");
	strv_addf(&a, "WORKSPACE=%s", s->workspace);
	strv_add(&a, "-D");
	strv_addf(&a, "TMPDIR=%s", s->tmpdir);
	if (c.terminal) {
		strv_add(&a, "-D");
		strv_addf(&a, "TTY=%s", o->tty);
	}
	for (i = 0; i < c.nwritable; i++) {
		strv_add(&a, "-D");
		strv_addf(&a, "WRITABLE_%zu=%s", i, writable.path[i]);
	}
	for (i = 0; i < c.nhidden; i++) {
		strv_add(&a, "-D");
		strv_addf(&a, "HIDDEN_%zu=%s", i, hidden.path[i]);
	}

	/* A clean environment; HOSTGATE_MODE last, so nothing overrides it. */
	strv_add(&a, MACOS_ENV);
	strv_add(&a, "-i");
	strv_add(&a, "PATH=" MACOS_PATH);
	strv_addf(&a, "HOME=%s", s->workspace);
	strv_addf(&a, "TMPDIR=%s", s->tmpdir);
	strv_addf(&a, "TERM=%s", s->term != NULL ? s->term : "dumb");
	strv_add(&a, "LANG=" MACOS_LANG);
	if (s->user != NULL)
		strv_addf(&a, "USER=%s", s->user);
	for (e = s->env; e != NULL && *e != NULL; e++)
		strv_add(&a, *e);
	strv_add(&a, "HOSTGATE_MODE=sandbox");

	strv_add(&a, MACOS_SH);
	strv_add(&a, "-c");
	strv_add(&a, MACOS_CD_SCRIPT);
	strv_add(&a, "sh");
	strv_add(&a, s->cwd != NULL ? s->cwd : s->workspace);
	for (e = s->argv; *e != NULL; e++)
		strv_add(&a, *e);

	for (i = 0; i < a.n; i++)
		strv_add(argv, a.v[i]);
	rc = 0;
out:
	free(profile);
	free(writable.buf);
	free(hidden.buf);
	strv_free(&a);
	return rc;
}
