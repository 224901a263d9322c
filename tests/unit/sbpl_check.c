/*
 * A small checker of SBPL profiles: a tokenizer (parentheses, strings with
 * escapes, #"regex" literals, symbols, ; comments), a tree, and the rules
 * hostgate's profiles must follow. The lists of operations and filters are
 * exactly those profiles/macos.sb uses: adding one to the template means
 * adding it here, on purpose, after reading what it allows.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbpl_check.h"

#define SBPL_MAX_DEPTH	32
#define HG_SBPL_PRINTF	__attribute__((__format__(__printf__, 3, 4)))

/* Operations that may follow allow or deny. */
static const char *const sbpl_ops[] = {
	"default",
	"process-exec", "process-fork", "process-info*", "signal",
	"file-read*", "file-read-data", "file-read-xattr", "file-write*",
	"file-write-data", "file-ioctl", "file-map-executable",
	"pseudo-tty",
	"sysctl-read", "sysctl-write",
	"mach-host*", "mach-lookup",
	"ipc-posix-shm-read*", "ipc-posix-sem",
	"user-preference-read",
	"network-outbound", "network-inbound", "network-bind", "system-socket",
	NULL
};

/* Filters that may qualify an operation. */
static const char *const sbpl_filters[] = {
	"literal", "subpath", "regex", "param",
	"require-all",
	"target", "extension",
	"sysctl-name", "sysctl-name-prefix",
	"global-name", "ipc-posix-name",
	"remote", "local", "control-name", "socket-domain", "socket-protocol",
	NULL
};

enum sbpl_type { SBPL_LIST, SBPL_SYMBOL, SBPL_STRING, SBPL_REGEX };

struct sbpl_node {
	enum sbpl_type		  type;
	char			 *text;		/* atoms: decoded text */
	struct sbpl_node	**kid;
	size_t			  nkid;
	int			  line;
};

struct sbpl_lex {
	const char	*p;
	int		 line;
	char		*err;
	size_t		 errsz;
	const char *const *params;
	const char *const *forbidden;
};

/* Record the first error. */
static int HG_SBPL_PRINTF
sbpl_fail(struct sbpl_lex *lx, int line, const char *fmt, ...)
{
	va_list	ap;
	int	len;

	len = snprintf(lx->err, lx->errsz, "line %d: ", line);
	va_start(ap, fmt);
	if (len >= 0 && (size_t)len < lx->errsz)
		vsnprintf(lx->err + len, lx->errsz - len, fmt, ap);
	va_end(ap);
	return -1;
}

static void
sbpl_free(struct sbpl_node *n)
{
	size_t	i;

	if (n == NULL)
		return;
	for (i = 0; i < n->nkid; i++)
		sbpl_free(n->kid[i]);
	free(n->kid);
	free(n->text);
	free(n);
}

static struct sbpl_node *
sbpl_new(enum sbpl_type type, int line)
{
	struct sbpl_node	*n;

	if ((n = calloc(1, sizeof(*n))) == NULL)
		abort();
	n->type = type;
	n->line = line;
	return n;
}

static void
sbpl_adopt(struct sbpl_node *list, struct sbpl_node *kid)
{
	list->kid = realloc(list->kid, (list->nkid + 1) * sizeof(*list->kid));
	if (list->kid == NULL)
		abort();
	list->kid[list->nkid++] = kid;
}

/* Skip blanks and comments. */
static void
sbpl_skip(struct sbpl_lex *lx)
{
	for (;;) {
		if (*lx->p == '\n') {
			lx->line++;
			lx->p++;
		} else if (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\r')
			lx->p++;
		else if (*lx->p == ';') {
			while (*lx->p != '\0' && *lx->p != '\n')
				lx->p++;
		} else
			return;
	}
}

/* A string body after its opening quote, escapes decoded. */
static struct sbpl_node *
sbpl_string(struct sbpl_lex *lx, enum sbpl_type type)
{
	struct sbpl_node	*n;
	size_t			 len = 0;
	int			 line = lx->line;

	n = sbpl_new(type, line);
	if ((n->text = malloc(strlen(lx->p) + 1)) == NULL)
		abort();
	for (; *lx->p != '"'; lx->p++) {
		if (*lx->p == '\0') {
			sbpl_fail(lx, line, "unterminated string");
			sbpl_free(n);
			return NULL;
		}
		if (*lx->p == '\n')
			lx->line++;
		if (*lx->p == '\\' && lx->p[1] != '\0')
			lx->p++;
		n->text[len++] = *lx->p;
	}
	lx->p++;
	n->text[len] = '\0';
	return n;
}

/* One datum: an atom or a whole list. */
static struct sbpl_node *
sbpl_read(struct sbpl_lex *lx, int depth)
{
	struct sbpl_node	*n, *kid;
	size_t			 len;

	sbpl_skip(lx);
	if (*lx->p == '"') {
		lx->p++;
		return sbpl_string(lx, SBPL_STRING);
	}
	if (lx->p[0] == '#' && lx->p[1] == '"') {
		lx->p += 2;
		return sbpl_string(lx, SBPL_REGEX);
	}
	if (*lx->p == ')') {
		sbpl_fail(lx, lx->line, "unbalanced \")\"");
		return NULL;
	}
	if (*lx->p == '(') {
		if (depth >= SBPL_MAX_DEPTH) {
			sbpl_fail(lx, lx->line, "nested too deeply");
			return NULL;
		}
		n = sbpl_new(SBPL_LIST, lx->line);
		lx->p++;
		for (;;) {
			sbpl_skip(lx);
			if (*lx->p == '\0') {
				sbpl_fail(lx, n->line, "unbalanced \"(\"");
				sbpl_free(n);
				return NULL;
			}
			if (*lx->p == ')') {
				lx->p++;
				return n;
			}
			if ((kid = sbpl_read(lx, depth + 1)) == NULL) {
				sbpl_free(n);
				return NULL;
			}
			sbpl_adopt(n, kid);
		}
	}
	len = strcspn(lx->p, " \t\r\n()\";");
	n = sbpl_new(SBPL_SYMBOL, lx->line);
	if ((n->text = strndup(lx->p, len)) == NULL)
		abort();
	lx->p += len;
	return n;
}

static int
sbpl_known(const char *const *list, const char *s)
{
	for (; list != NULL && *list != NULL; list++)
		if (strcmp(*list, s) == 0)
			return 1;
	return 0;
}

/* No string anywhere under n may hold a forbidden value. */
static int
sbpl_strings(struct sbpl_lex *lx, const struct sbpl_node *n)
{
	const char *const	*f;
	size_t			 i;

	if (n->type == SBPL_STRING || n->type == SBPL_REGEX) {
		for (f = lx->forbidden; f != NULL && *f != NULL; f++)
			if (**f != '\0' && strstr(n->text, *f) != NULL)
				return sbpl_fail(lx, n->line, "string \"%s\" "
				    "holds \"%s\", which must come in as a "
				    "parameter", n->text, *f);
		return 0;
	}
	for (i = 0; i < n->nkid; i++)
		if (sbpl_strings(lx, n->kid[i]) == -1)
			return -1;
	return 0;
}

/* A filter: a known head, then atoms, parameters or (for require-all) filters. */
static int
sbpl_filter(struct sbpl_lex *lx, const struct sbpl_node *n)
{
	const struct sbpl_node	*head, *k;
	size_t			 i;

	if (n->type != SBPL_LIST)
		return sbpl_fail(lx, n->line, "an atom where a filter was "
		    "expected");
	if (n->nkid == 0 || (head = n->kid[0])->type != SBPL_SYMBOL)
		return sbpl_fail(lx, n->line, "a filter without a name");
	if (!sbpl_known(sbpl_filters, head->text))
		return sbpl_fail(lx, n->line, "unknown filter \"%s\"",
		    head->text);
	if (n->nkid < 2)
		return sbpl_fail(lx, n->line, "filter \"%s\" without an "
		    "argument", head->text);
	if (strcmp(head->text, "param") == 0) {
		k = n->kid[1];
		if (n->nkid != 2 || k->type != SBPL_STRING)
			return sbpl_fail(lx, n->line, "param takes one name");
		if (!sbpl_known(lx->params, k->text))
			return sbpl_fail(lx, n->line, "parameter \"%s\" is "
			    "not passed", k->text);
		return 0;
	}
	for (i = 1; i < n->nkid; i++) {
		k = n->kid[i];
		if (strcmp(head->text, "require-all") == 0 ||
		    k->type == SBPL_LIST) {
			if (strcmp(head->text, "require-all") != 0 &&
			    (k->nkid == 0 || k->kid[0]->type != SBPL_SYMBOL ||
			    strcmp(k->kid[0]->text, "param") != 0))
				return sbpl_fail(lx, k->line, "only (param) "
				    "may nest in filter \"%s\"", head->text);
			if (sbpl_filter(lx, k) == -1)
				return -1;
		}
	}
	return 0;
}

/* A top-level form: (version 1) first, then allow and deny rules. */
static int
sbpl_form(struct sbpl_lex *lx, const struct sbpl_node *n, int first)
{
	const char	*head;
	size_t		 i;

	if (n->type != SBPL_LIST)
		return sbpl_fail(lx, n->line, "an atom at the top level");
	if (n->nkid == 0 || n->kid[0]->type != SBPL_SYMBOL)
		return sbpl_fail(lx, n->line, "a form without a name");
	head = n->kid[0]->text;
	if (first) {
		if (strcmp(head, "version") != 0 || n->nkid != 2 ||
		    n->kid[1]->type != SBPL_SYMBOL ||
		    strcmp(n->kid[1]->text, "1") != 0)
			return sbpl_fail(lx, n->line, "the first form must be "
			    "(version 1)");
		return 0;
	}
	if (strcmp(head, "import") == 0)
		return sbpl_fail(lx, n->line, "import is not allowed: a "
		    "profile must say all it allows");
	if (strcmp(head, "allow") != 0 && strcmp(head, "deny") != 0)
		return sbpl_fail(lx, n->line, "unknown form \"%s\"", head);
	for (i = 1; i < n->nkid && n->kid[i]->type == SBPL_SYMBOL; i++)
		if (!sbpl_known(sbpl_ops, n->kid[i]->text))
			return sbpl_fail(lx, n->line, "unknown operation "
			    "\"%s\"", n->kid[i]->text);
	if (i == 1)
		return sbpl_fail(lx, n->line, "%s without an operation", head);
	for (; i < n->nkid; i++)
		if (sbpl_filter(lx, n->kid[i]) == -1)
			return -1;
	return 0;
}

int
sbpl_check(const char *text, const char *const *params,
    const char *const *forbidden, char *err, size_t errsz)
{
	struct sbpl_lex		 lx;
	struct sbpl_node	*n;
	int			 first = 1, rc = 0;

	lx.p = text;
	lx.line = 1;
	lx.err = err;
	lx.errsz = errsz;
	lx.params = params;
	lx.forbidden = forbidden;
	for (;;) {
		sbpl_skip(&lx);
		if (*lx.p == '\0')
			break;
		if ((n = sbpl_read(&lx, 0)) == NULL)
			return -1;
		rc = sbpl_form(&lx, n, first);
		if (rc == 0)
			rc = sbpl_strings(&lx, n);
		sbpl_free(n);
		if (rc == -1)
			return -1;
		first = 0;
	}
	if (first)
		return sbpl_fail(&lx, lx.line, "empty profile");
	return 0;
}
