/*
 * The seccomp policy of sandboxed programs: a deny list in a small line
 * format under profiles/ (docs/sandbox.md, "seccomp policy format"),
 * compiled with libseccomp into the BPF program bwrap loads with --seccomp.
 *
 *	deny SYSCALL ERRNO [if COND [&& COND]...] [unless argN in V,V...] -- why
 *
 * The default action is allow, as in bubblewrap's and Flatpak's model: the
 * list takes away what a sandboxed shell has no business doing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* CLONE_NEW*, memfd_create, F_ADD_SEALS */
#endif
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <linux/filter.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <seccomp.h>

#include "sandboxd.h"

#define POLICY_MAX_SIZE		(1024 * 1024)
#define POLICY_MAX_RULES	1024	/* the kernel takes 4096 instructions */
#define POLICY_MAX_ARGS		6	/* arg0 to arg5 */
#define POLICY_MAX_VALUES	64	/* values of one "unless ... in" list */
#define POLICY_WORD_MAX		64

#ifndef nitems
#define nitems(a)	(sizeof(a) / sizeof((a)[0]))
#endif

enum policy_op { OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_MASK };

struct policy_cond {
	unsigned	 arg;
	enum policy_op	 op;
	uint64_t	 value;
};

struct policy_rule {
	TAILQ_ENTRY(policy_rule) entry;
	unsigned		 line;
	char			 syscall[POLICY_WORD_MAX];
	int			 nr;
	int			 errnum;
	struct policy_cond	 conds[POLICY_MAX_ARGS];	/* by arg */
	unsigned		 nconds;
	int			 unless_arg;	/* -1: no "unless" clause */
	uint64_t		 allowed[POLICY_MAX_VALUES];	/* sorted */
	unsigned		 nallowed;
};
TAILQ_HEAD(policy_rules, policy_rule);

struct policy {
	char			*name;
	struct policy_rules	 rules;
	size_t			 nrules;
	/* The compiled program, kept after the first export (a cache). */
	unsigned char		*bpf;
	size_t			 bpflen;
};

/* Where the parser is: one line at a time. */
struct policy_parser {
	const char	*p;
	const char	*end;		/* end of the current line */
	const char	*name;		/* file name for messages */
	unsigned	 line;
	char		*err;
	size_t		 errsz;
};

struct policy_name {
	const char	*name;
	uint64_t	 value;
};

#define POLICY_SYM(x)	{ #x, (uint64_t)(x) }

/* The errnos a rule may return. */
static const struct policy_name policy_errnos[] = {
	POLICY_SYM(EPERM), POLICY_SYM(EACCES), POLICY_SYM(ENOSYS),
	POLICY_SYM(EINVAL), POLICY_SYM(EAFNOSUPPORT),
	POLICY_SYM(EPROTONOSUPPORT), POLICY_SYM(EOPNOTSUPP),
	POLICY_SYM(ENOTTY), POLICY_SYM(ENODEV),
	{ NULL, 0 }
};

/* The symbolic values a condition may compare with. */
static const struct policy_name policy_symbols[] = {
	/* clone(2) and unshare(2) flags */
	POLICY_SYM(CLONE_NEWNS), POLICY_SYM(CLONE_NEWCGROUP),
	POLICY_SYM(CLONE_NEWUTS), POLICY_SYM(CLONE_NEWIPC),
	POLICY_SYM(CLONE_NEWUSER), POLICY_SYM(CLONE_NEWPID),
	POLICY_SYM(CLONE_NEWNET),
	/* ioctl(2) requests that reach other processes' terminals */
	POLICY_SYM(TIOCSTI), POLICY_SYM(TIOCLINUX),
	/* personality(2) */
	POLICY_SYM(PER_LINUX), POLICY_SYM(PER_LINUX32),
	POLICY_SYM(ADDR_NO_RANDOMIZE), POLICY_SYM(ADDR_COMPAT_LAYOUT),
	POLICY_SYM(READ_IMPLIES_EXEC),
	/* socket(2) types */
	POLICY_SYM(SOCK_STREAM), POLICY_SYM(SOCK_DGRAM), POLICY_SYM(SOCK_RAW),
	POLICY_SYM(SOCK_SEQPACKET), POLICY_SYM(SOCK_PACKET),
	/* socket(2) families, in numerical order */
	POLICY_SYM(AF_UNSPEC), POLICY_SYM(AF_UNIX), POLICY_SYM(AF_LOCAL),
	POLICY_SYM(AF_INET), POLICY_SYM(AF_AX25), POLICY_SYM(AF_IPX),
	POLICY_SYM(AF_APPLETALK), POLICY_SYM(AF_NETROM), POLICY_SYM(AF_BRIDGE),
	POLICY_SYM(AF_ATMPVC), POLICY_SYM(AF_X25), POLICY_SYM(AF_INET6),
	POLICY_SYM(AF_ROSE), POLICY_SYM(AF_DECnet), POLICY_SYM(AF_NETBEUI),
	POLICY_SYM(AF_SECURITY), POLICY_SYM(AF_KEY), POLICY_SYM(AF_NETLINK),
	POLICY_SYM(AF_ROUTE), POLICY_SYM(AF_PACKET), POLICY_SYM(AF_ASH),
	POLICY_SYM(AF_ECONET), POLICY_SYM(AF_ATMSVC), POLICY_SYM(AF_RDS),
	POLICY_SYM(AF_SNA), POLICY_SYM(AF_IRDA), POLICY_SYM(AF_PPPOX),
	POLICY_SYM(AF_WANPIPE), POLICY_SYM(AF_LLC), POLICY_SYM(AF_IB),
	POLICY_SYM(AF_MPLS), POLICY_SYM(AF_CAN), POLICY_SYM(AF_TIPC),
	POLICY_SYM(AF_BLUETOOTH), POLICY_SYM(AF_IUCV), POLICY_SYM(AF_RXRPC),
	POLICY_SYM(AF_ISDN), POLICY_SYM(AF_PHONET), POLICY_SYM(AF_IEEE802154),
	POLICY_SYM(AF_CAIF), POLICY_SYM(AF_ALG), POLICY_SYM(AF_NFC),
	POLICY_SYM(AF_VSOCK), POLICY_SYM(AF_KCM), POLICY_SYM(AF_QIPCRTR),
	POLICY_SYM(AF_SMC), POLICY_SYM(AF_XDP), POLICY_SYM(AF_MCTP),
	POLICY_SYM(AF_MAX),
	{ NULL, 0 }
};

/*
 * Arguments the kernel reads as 32 bits although a 64-bit register carries
 * them. ioctl's request is an unsigned int, so the kernel ignores its upper
 * half: a filter that compared all 64 bits let TIOCSTI | 1 << 32 through
 * (CVE-2019-10063 in Flatpak). "==" on these compares the low 32 bits only
 * (SCMP_CMP_MASKED_EQ with 0xffffffff); the other comparisons cannot be
 * masked that way and are refused.
 */
static const struct {
	const char	*syscall;
	unsigned	 arg;
} policy_narrow[] = {
	{ "ioctl", 1 },
};

/* Operators, the two-character ones first so "<=" is not read as "<". */
static const struct {
	const char	*text;
	enum policy_op	 op;
} policy_ops[] = {
	{ "==", OP_EQ }, { "!=", OP_NE }, { "<=", OP_LE }, { ">=", OP_GE },
	{ "<", OP_LT }, { ">", OP_GT }, { "&", OP_MASK },
};

/* Format "NAME:LINE: message" into the caller's buffer; returns -1. */
static int HG_PRINTF(2, 3)
policy_error(struct policy_parser *pp, const char *fmt, ...)
{
	va_list	ap;
	int	n;

	n = snprintf(pp->err, pp->errsz, "%s:%u: ", pp->name, pp->line);
	if (n < 0 || (size_t)n >= pp->errsz)
		return (-1);
	va_start(ap, fmt);
	vsnprintf(pp->err + n, pp->errsz - n, fmt, ap);
	va_end(ap);
	return (-1);
}

/* Name an errno value for messages. */
static const char *
policy_errno_name(int errnum)
{
	const struct policy_name	*n;

	for (n = policy_errnos; n->name != NULL; n++)
		if (n->value == (uint64_t)errnum)
			return (n->name);
	return ("?");
}

/* Look a name up in a table; 0 and *value, or -1. */
static int
policy_lookup(const struct policy_name *table, const char *name,
    uint64_t *value)
{
	for (; table->name != NULL; table++)
		if (strcmp(table->name, name) == 0) {
			*value = table->value;
			return (0);
		}
	return (-1);
}

/* Whether the kernel reads only the low 32 bits of this argument. */
static int
policy_is_narrow(const char *syscall, unsigned arg)
{
	size_t	i;

	for (i = 0; i < nitems(policy_narrow); i++)
		if (strcmp(policy_narrow[i].syscall, syscall) == 0 &&
		    policy_narrow[i].arg == arg)
			return (1);
	return (0);
}

/* Skip blanks within the line. */
static void
policy_skip(struct policy_parser *pp)
{
	while (pp->p < pp->end && (*pp->p == ' ' || *pp->p == '\t'))
		pp->p++;
}

/* Describe what is at the cursor, for "expected X, found Y" messages. */
static const char *
policy_found(struct policy_parser *pp, char *buf, size_t bufsz)
{
	unsigned char	c;

	if (pp->p == pp->end)
		return ("the end of the line");
	c = *pp->p;
	if (c > ' ' && c < 0x7f)
		snprintf(buf, bufsz, "'%c'", c);
	else
		snprintf(buf, bufsz, "byte 0x%02x", c);
	return (buf);
}

/* Whether c may appear in a word (names, numbers). */
static int
policy_wordchar(char c)
{
	return ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_');
}

/* Read one word into buf; what names the expected thing in errors. */
static int
policy_word(struct policy_parser *pp, const char *what, char *buf,
    size_t bufsz)
{
	const char	*start;
	char		 found[16];

	policy_skip(pp);
	start = pp->p;
	while (pp->p < pp->end && policy_wordchar(*pp->p))
		pp->p++;
	if (pp->p == start)
		return (policy_error(pp, "expected %s, found %s", what,
		    policy_found(pp, found, sizeof(found))));
	if ((size_t)(pp->p - start) >= bufsz)
		return (policy_error(pp, "%s too long: \"%.20s...\"", what,
		    start));
	memcpy(buf, start, pp->p - start);
	buf[pp->p - start] = '\0';
	return (0);
}

/* Consume the keyword or punctuation s if it comes next. */
static int
policy_accept(struct policy_parser *pp, const char *s)
{
	size_t	len = strlen(s);

	policy_skip(pp);
	if ((size_t)(pp->end - pp->p) < len || memcmp(pp->p, s, len) != 0)
		return (0);
	/* A keyword must end where the word ends: "iffy" is not "if". */
	if (policy_wordchar(s[0]) && pp->p + len < pp->end &&
	    policy_wordchar(pp->p[len]))
		return (0);
	pp->p += len;
	return (1);
}

/* Read argN. */
static int
policy_arg(struct policy_parser *pp, unsigned *arg)
{
	char	word[POLICY_WORD_MAX];

	if (policy_word(pp, "argN", word, sizeof(word)) == -1)
		return (-1);
	if (strncmp(word, "arg", 3) != 0 || word[3] < '0' || word[3] > '9' ||
	    word[4] != '\0')
		return (policy_error(pp, "expected arg0 to arg5, found \"%s\"",
		    word));
	*arg = word[3] - '0';
	if (*arg >= POLICY_MAX_ARGS)
		return (policy_error(pp, "%s: a syscall has arguments arg0 to "
		    "arg5", word));
	return (0);
}

/* Read a value: decimal, 0x hex, or a name from policy_symbols. */
static int
policy_value(struct policy_parser *pp, uint64_t *value)
{
	char			 word[POLICY_WORD_MAX], *end;
	const char		*digits;
	unsigned long long	 v;
	int			 base = 10;

	if (policy_word(pp, "a value", word, sizeof(word)) == -1)
		return (-1);
	if (word[0] < '0' || word[0] > '9') {
		if (policy_lookup(policy_symbols, word, value) == -1)
			return (policy_error(pp, "unknown value \"%s\"", word));
		return (0);
	}
	digits = word;
	if (word[0] == '0' && (word[1] == 'x' || word[1] == 'X')) {
		digits = word + 2;
		base = 16;
	}
	errno = 0;
	v = strtoull(digits, &end, base);
	/* strtoull would skip a sign or blanks: the word has neither. */
	if (*digits == '\0' || *end != '\0')
		return (policy_error(pp, "bad number \"%s\"", word));
	if (errno == ERANGE)
		return (policy_error(pp, "number out of range: \"%s\"", word));
	*value = v;
	return (0);
}

/* Read "argN OP VALUE" into the rule's conditions. */
static int
policy_cond(struct policy_parser *pp, struct policy_rule *r)
{
	struct policy_cond	*c;
	unsigned		 arg, i;
	size_t			 op;
	char			 found[16];

	if (r->nconds == POLICY_MAX_ARGS)
		return (policy_error(pp, "too many conditions"));
	if (policy_arg(pp, &arg) == -1)
		return (-1);
	for (i = 0; i < r->nconds; i++)
		if (r->conds[i].arg == arg)
			/* libseccomp allows one comparison per argument. */
			return (policy_error(pp, "arg%u compared twice in one "
			    "rule", arg));
	if (policy_accept(pp, "&&"))
		return (policy_error(pp, "expected an operator after arg%u, "
		    "found '&&'", arg));
	for (op = 0; op < nitems(policy_ops); op++)
		if (policy_accept(pp, policy_ops[op].text))
			break;
	if (op == nitems(policy_ops))
		return (policy_error(pp, "expected an operator (== != < <= > "
		    ">= &) after arg%u, found %s", arg, policy_found(pp, found,
		    sizeof(found))));
	c = &r->conds[r->nconds++];
	c->arg = arg;
	c->op = policy_ops[op].op;
	if (policy_value(pp, &c->value) == -1)
		return (-1);
	if (c->op == OP_MASK && c->value == 0)
		return (policy_error(pp, "arg%u & 0 always holds", arg));
	if (policy_is_narrow(r->syscall, arg)) {
		if (c->op != OP_EQ && c->op != OP_MASK)
			return (policy_error(pp, "%s arg%u is 32 bits for the "
			    "kernel: only == and & compare it safely",
			    r->syscall, arg));
		if (c->value > 0xffffffffULL)
			return (policy_error(pp, "%s arg%u is 32 bits for the "
			    "kernel: %#llx can never match", r->syscall, arg,
			    (unsigned long long)c->value));
	}
	return (0);
}

/* Order uint64_t values for qsort. */
static int
policy_cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

/* Order conditions by argument for qsort, so equal rules compare equal. */
static int
policy_cmp_cond(const void *a, const void *b)
{
	const struct policy_cond	*x = a, *y = b;

	return (x->arg < y->arg ? -1 : x->arg > y->arg);
}

/* Read "argN in V,V,..." after "unless". */
static int
policy_unless(struct policy_parser *pp, struct policy_rule *r)
{
	unsigned	arg, i;
	char		found[16];

	if (policy_arg(pp, &arg) == -1)
		return (-1);
	for (i = 0; i < r->nconds; i++)
		if (r->conds[i].arg == arg)
			return (policy_error(pp, "arg%u compared twice in one "
			    "rule", arg));
	if (policy_is_narrow(r->syscall, arg))
		return (policy_error(pp, "%s arg%u is 32 bits for the kernel: "
		    "use \"if arg%u == VALUE\" rules", r->syscall, arg, arg));
	if (!policy_accept(pp, "in"))
		return (policy_error(pp, "expected \"in\" after arg%u, found "
		    "%s", arg, policy_found(pp, found, sizeof(found))));
	r->unless_arg = arg;
	do {
		if (r->nallowed == POLICY_MAX_VALUES)
			return (policy_error(pp, "more than %d values",
			    POLICY_MAX_VALUES));
		if (policy_value(pp, &r->allowed[r->nallowed]) == -1)
			return (-1);
		r->nallowed++;
	} while (policy_accept(pp, ","));
	qsort(r->allowed, r->nallowed, sizeof(r->allowed[0]), policy_cmp_u64);
	for (i = 1; i < r->nallowed; i++)
		if (r->allowed[i] == r->allowed[i - 1])
			return (policy_error(pp, "value %#llx listed twice",
			    (unsigned long long)r->allowed[i]));
	return (0);
}

/* Whether two rules for one syscall have the very same conditions. */
static int
policy_same(const struct policy_rule *a, const struct policy_rule *b)
{
	unsigned	i;

	if (a->nconds != b->nconds || a->unless_arg != b->unless_arg ||
	    a->nallowed != b->nallowed)
		return (0);
	for (i = 0; i < a->nconds; i++)
		if (a->conds[i].arg != b->conds[i].arg ||
		    a->conds[i].op != b->conds[i].op ||
		    a->conds[i].value != b->conds[i].value)
			return (0);
	for (i = 0; i < a->nallowed; i++)
		if (a->allowed[i] != b->allowed[i])
			return (0);
	return (1);
}

/*
 * Refuse a rule that clashes with an earlier one for the same syscall.
 * libseccomp would merge such rules silently (an unconditional rule wipes
 * out conditional ones), or pick one errno of two when conditions overlap.
 */
static int
policy_conflicts(struct policy_parser *pp, const struct policy *pol,
    const struct policy_rule *r)
{
	const struct policy_rule	*o;

	TAILQ_FOREACH(o, &pol->rules, entry) {
		if (o->nr != r->nr)
			continue;
		if (o->errnum != r->errnum)
			return (policy_error(pp, "%s is denied with %s at line "
			    "%u: one errno per syscall", r->syscall,
			    policy_errno_name(o->errnum), o->line));
		if (policy_same(o, r))
			return (policy_error(pp, "duplicate of line %u",
			    o->line));
		if (o->nconds == 0 && o->unless_arg == -1)
			return (policy_error(pp, "line %u already denies %s in "
			    "every case", o->line, r->syscall));
		if (r->nconds == 0 && r->unless_arg == -1)
			return (policy_error(pp, "%s has a conditional rule at "
			    "line %u that this one would override", r->syscall,
			    o->line));
	}
	return (0);
}

/* Parse one line; blank lines and comments add nothing. */
static int
policy_line(struct policy_parser *pp, struct policy *pol)
{
	struct policy_rule	*r;
	char			 word[POLICY_WORD_MAX], found[16];
	uint64_t		 errnum;

	policy_skip(pp);
	if (pp->p == pp->end || *pp->p == '#')
		return (0);
	if (policy_word(pp, "\"deny\"", word, sizeof(word)) == -1)
		return (-1);
	if (strcmp(word, "deny") != 0)
		return (policy_error(pp, "unknown keyword \"%s\" (expected "
		    "\"deny\")", word));
	if (pol->nrules == POLICY_MAX_RULES)
		return (policy_error(pp, "more than %d rules",
		    POLICY_MAX_RULES));
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return (policy_error(pp, "out of memory"));
	r->line = pp->line;
	r->unless_arg = -1;
	if (policy_word(pp, "a syscall name", r->syscall,
	    sizeof(r->syscall)) == -1)
		goto fail;
	/*
	 * A name libseccomp knows but this architecture lacks (umount on
	 * x86_64) resolves to a negative pseudo-number: the rule is kept and
	 * has no effect here, so that one policy serves every architecture.
	 */
	if ((r->nr = seccomp_syscall_resolve_name(r->syscall)) ==
	    __NR_SCMP_ERROR) {
		policy_error(pp, "unknown syscall \"%s\"", r->syscall);
		goto fail;
	}
	if (policy_word(pp, "an errno name", word, sizeof(word)) == -1)
		goto fail;
	if (policy_lookup(policy_errnos, word, &errnum) == -1) {
		policy_error(pp, "unknown errno \"%s\"", word);
		goto fail;
	}
	r->errnum = (int)errnum;
	if (policy_accept(pp, "if")) {
		do {
			if (policy_cond(pp, r) == -1)
				goto fail;
		} while (policy_accept(pp, "&&"));
		qsort(r->conds, r->nconds, sizeof(r->conds[0]),
		    policy_cmp_cond);
	}
	if (policy_accept(pp, "unless") && policy_unless(pp, r) == -1)
		goto fail;
	if (!policy_accept(pp, "--")) {
		policy_error(pp, "expected %s\"--\" and a reason, found %s",
		    r->nconds == 0 && r->unless_arg == -1 ? "\"if\", "
		    "\"unless\" or " : "", policy_found(pp, found,
		    sizeof(found)));
		goto fail;
	}
	policy_skip(pp);
	if (pp->p == pp->end) {
		policy_error(pp, "rule without a reason after \"--\"");
		goto fail;
	}
	if (policy_conflicts(pp, pol, r) == -1)
		goto fail;
	TAILQ_INSERT_TAIL(&pol->rules, r, entry);
	pol->nrules++;
	return (0);

fail:
	free(r);
	return (-1);
}

/* Parse a policy held in memory; name is for messages. */
struct policy *
policy_parse(const char *text, size_t len, const char *name, char *err,
    size_t errsz)
{
	struct policy_parser	 pp;
	struct policy		*pol;
	const char		*end = text + len, *nl;

	memset(&pp, 0, sizeof(pp));
	pp.name = name;
	pp.err = err;
	pp.errsz = errsz;
	if ((pol = calloc(1, sizeof(*pol))) == NULL ||
	    (pol->name = strdup(name)) == NULL) {
		free(pol);
		snprintf(err, errsz, "%s: out of memory", name);
		return (NULL);
	}
	TAILQ_INIT(&pol->rules);
	while (text < end) {
		pp.line++;
		if ((nl = memchr(text, '\n', end - text)) == NULL)
			nl = end;
		pp.p = text;
		pp.end = nl;
		/* A file written on Windows still parses. */
		if (pp.end > pp.p && pp.end[-1] == '\r')
			pp.end--;
		if (policy_line(&pp, pol) == -1) {
			policy_free(pol);
			return (NULL);
		}
		text = nl < end ? nl + 1 : end;
	}
	if (pol->nrules == 0) {
		snprintf(err, errsz, "%s: no rules", name);
		policy_free(pol);
		return (NULL);
	}
	return (pol);
}

/* Read and parse a policy file. */
struct policy *
policy_load(const char *path, char *err, size_t errsz)
{
	struct policy	*pol;
	char		*text;
	size_t		 len;

	if ((text = file_read(path, POLICY_MAX_SIZE, &len)) == NULL) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		return (NULL);
	}
	pol = policy_parse(text, len, path, err, errsz);
	free(text);
	return (pol);
}

/* Free a policy; NULL is fine. */
void
policy_free(struct policy *pol)
{
	struct policy_rule	*r;

	if (pol == NULL)
		return;
	while ((r = TAILQ_FIRST(&pol->rules)) != NULL) {
		TAILQ_REMOVE(&pol->rules, r, entry);
		free(r);
	}
	free(pol->bpf);
	free(pol->name);
	free(pol);
}

/* The number of rules (deny lines). */
size_t
policy_nrules(const struct policy *pol)
{
	return (pol->nrules);
}

/* One condition as libseccomp sees it. */
static struct scmp_arg_cmp
policy_scmp(const struct policy_rule *r, const struct policy_cond *c)
{
	static const enum scmp_compare	 ops[] = {
		[OP_EQ] = SCMP_CMP_EQ, [OP_NE] = SCMP_CMP_NE,
		[OP_LT] = SCMP_CMP_LT, [OP_LE] = SCMP_CMP_LE,
		[OP_GT] = SCMP_CMP_GT, [OP_GE] = SCMP_CMP_GE,
	};
	struct scmp_arg_cmp		 cmp;

	memset(&cmp, 0, sizeof(cmp));
	cmp.arg = c->arg;
	if (c->op == OP_MASK) {
		cmp.op = SCMP_CMP_MASKED_EQ;
		cmp.datum_a = c->value;
		cmp.datum_b = c->value;
	} else if (c->op == OP_EQ && policy_is_narrow(r->syscall, c->arg)) {
		/* The kernel ignores the upper half: so do we. */
		cmp.op = SCMP_CMP_MASKED_EQ;
		cmp.datum_a = 0xffffffffULL;
		cmp.datum_b = c->value;
	} else {
		cmp.op = ops[c->op];
		cmp.datum_a = c->value;
	}
	return (cmp);
}

/* Add one libseccomp rule: the rule's conditions plus an optional extra. */
static int
policy_add(scmp_filter_ctx ctx, const struct policy *pol,
    const struct policy_rule *r, const struct scmp_arg_cmp *extra,
    char *err, size_t errsz)
{
	struct scmp_arg_cmp	cmps[POLICY_MAX_ARGS];
	unsigned		i, n = 0;
	int			rc;

	for (i = 0; i < r->nconds; i++)
		cmps[n++] = policy_scmp(r, &r->conds[i]);
	if (extra != NULL)
		cmps[n++] = *extra;
	rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(r->errnum), r->nr, n,
	    cmps);
	if (rc < 0) {
		snprintf(err, errsz, "%s:%u: seccomp_rule_add %s: %s",
		    pol->name, r->line, r->syscall, strerror(-rc));
		return (-1);
	}
	return (0);
}

/* Add a rule matching arg in [lo, hi], where 0 < lo <= hi < UINT64_MAX. */
static int
policy_add_range(scmp_filter_ctx ctx, const struct policy *pol,
    const struct policy_rule *r, uint64_t lo, uint64_t hi, char *err,
    size_t errsz)
{
	struct scmp_arg_cmp	cmp;
	uint64_t		size;

	/*
	 * libseccomp cannot AND two comparisons of one argument, so the range
	 * is cut into aligned power-of-two blocks, each one masked
	 * comparison, as a route table cuts an address range into prefixes:
	 * at most 128 blocks, one "==" when the range is a single value.
	 */
	memset(&cmp, 0, sizeof(cmp));
	cmp.arg = r->unless_arg;
	for (;;) {
		size = lo & -lo;	/* the largest block aligned at lo */
		while (size - 1 > hi - lo)
			size >>= 1;
		if (size == 1) {
			cmp.op = SCMP_CMP_EQ;
			cmp.datum_a = lo;
		} else {
			cmp.op = SCMP_CMP_MASKED_EQ;
			cmp.datum_a = ~(size - 1);
			cmp.datum_b = lo;
		}
		if (policy_add(ctx, pol, r, &cmp, err, errsz) == -1)
			return (-1);
		if (size - 1 == hi - lo)
			return (0);
		lo += size;
	}
}

/*
 * Add "unless argN in V,...": deny every value outside the list, as
 * rules for the gaps between the listed values. Flatpak enumerates each
 * socket family up to AF_MAX; gaps do the same in fewer rules, and also
 * hold for lists like personality's 0,0xffffffff that no loop could
 * enumerate. Comparing all 64 bits can only deny more than the kernel
 * would see (socket(AF_UNIX | 1 << 32) is refused), never less.
 */
static int
policy_add_unless(scmp_filter_ctx ctx, const struct policy *pol,
    const struct policy_rule *r, char *err, size_t errsz)
{
	struct scmp_arg_cmp	cmp;
	uint64_t		first = r->allowed[0];
	uint64_t		last = r->allowed[r->nallowed - 1];
	unsigned		i;

	memset(&cmp, 0, sizeof(cmp));
	cmp.arg = r->unless_arg;
	if (first > 0) {
		cmp.op = SCMP_CMP_LT;
		cmp.datum_a = first;
		if (policy_add(ctx, pol, r, &cmp, err, errsz) == -1)
			return (-1);
	}
	for (i = 1; i < r->nallowed; i++)
		if (r->allowed[i] - r->allowed[i - 1] > 1 &&
		    policy_add_range(ctx, pol, r, r->allowed[i - 1] + 1,
		    r->allowed[i] - 1, err, errsz) == -1)
			return (-1);
	if (last < UINT64_MAX) {
		cmp.op = SCMP_CMP_GT;
		cmp.datum_a = last;
		if (policy_add(ctx, pol, r, &cmp, err, errsz) == -1)
			return (-1);
	}
	return (0);
}

/* Build the filter context of a policy. */
static scmp_filter_ctx
policy_compile(const struct policy *pol, char *err, size_t errsz)
{
	const struct policy_rule	*r;
	scmp_filter_ctx			 ctx;
	int				 rc;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL) {
		snprintf(err, errsz, "seccomp_init failed");
		return (NULL);
	}
	/*
	 * Only the native ABI is let through; a syscall made through any
	 * other (int 0x80 and the x32 numbers on x86_64, the arm32 compat
	 * layer on arm64) kills the process. Filtering those the same way
	 * would not hold: on i386, socket() can go through socketcall(),
	 * whose arguments sit in memory where seccomp cannot read them, so
	 * the family rule would be moot. The compat layers are also a rich
	 * source of kernel bugs (CVE-2021-22555 went through compat
	 * setsockopt), and sandboxed shells run the host's 64-bit userland.
	 */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_KILL_PROCESS)) < 0) {
		snprintf(err, errsz, "seccomp_attr_set: %s", strerror(-rc));
		goto fail;
	}
	TAILQ_FOREACH(r, &pol->rules, entry) {
		if (r->unless_arg == -1)
			rc = policy_add(ctx, pol, r, NULL, err, errsz);
		else
			rc = policy_add_unless(ctx, pol, r, err, errsz);
		if (rc == -1)
			goto fail;
	}
	return (ctx);

fail:
	seccomp_release(ctx);
	return (NULL);
}

/* The BPF program in a sealed memfd at offset 0, for bwrap --seccomp FD. */
int
policy_bpf_fd(const struct policy *pol, char *err, size_t errsz)
{
	struct policy	*cache = (struct policy *)pol;	/* bpf: a cache */
	scmp_filter_ctx	ctx;
	struct stat	st;
	int		fd, rc;

	if ((fd = memfd_create("hostgate-seccomp", MFD_CLOEXEC |
	    MFD_ALLOW_SEALING)) == -1) {
		snprintf(err, errsz, "memfd_create: %s", strerror(errno));
		return (-1);
	}
	if (pol->bpf != NULL) {
		/* Compiled before: a spawn need not pay libseccomp again. */
		if (write(fd, pol->bpf, pol->bpflen) != (ssize_t)pol->bpflen) {
			snprintf(err, errsz, "write: %s", strerror(errno));
			goto fail;
		}
	} else {
		if ((ctx = policy_compile(pol, err, errsz)) == NULL)
			goto fail;
		rc = seccomp_export_bpf(ctx, fd);
		seccomp_release(ctx);
		if (rc < 0) {
			snprintf(err, errsz, "seccomp_export_bpf: %s",
			    strerror(-rc));
			goto fail;
		}
	}
	if (fstat(fd, &st) == -1) {
		snprintf(err, errsz, "fstat: %s", strerror(errno));
		goto fail;
	}
	if (st.st_size == 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
	    st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		snprintf(err, errsz, "%s: the filter has %lld bytes; the kernel "
		    "takes 1 to %d instructions of %zu", pol->name,
		    (long long)st.st_size, BPF_MAXINSNS,
		    sizeof(struct sock_filter));
		goto fail;
	}
	/* Sealed, so that nothing can change the program bwrap will load. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_WRITE | F_SEAL_SEAL) == -1) {
		snprintf(err, errsz, "F_ADD_SEALS: %s", strerror(errno));
		goto fail;
	}
	if (lseek(fd, 0, SEEK_SET) == -1) {
		snprintf(err, errsz, "lseek: %s", strerror(errno));
		goto fail;
	}
	if (cache->bpf == NULL && (cache->bpf = malloc(st.st_size)) != NULL) {
		if (pread(fd, cache->bpf, st.st_size, 0) == st.st_size)
			cache->bpflen = st.st_size;
		else {
			free(cache->bpf);
			cache->bpf = NULL;
		}
	}
	return (fd);

fail:
	close(fd);
	return (-1);
}
