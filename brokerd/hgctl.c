/*
 * hgctl: the ops CLI. It speaks to brokerd's control socket, which only
 * root and the broker's service user may open.
 */
#include <sys/types.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common.h"

#define HGCTL_TIMEOUT_MS	10000
#define HGCTL_AUDIT_TIMEOUT_MS	300000	/* verify reads the whole log */
#define HGCTL_AUDIT_PAGE	500	/* records asked for per request */
#define HGCTL_AUDIT_LIMIT	100	/* audit show's default --limit */

static struct config	 conf;
static int		 json_out;
static int		 hgctl_timeout = HGCTL_TIMEOUT_MS;

/* The value options of audit show. */
static struct {
	const char	*user;
	const char	*action;
	const char	*since;
	const char	*until;
	const char	*limit;
	int		 used;
} show;

__dead static void
hgctl_usage(void)
{
	fprintf(stderr,
	    "usage: hgctl user add NAME [--admin] [--password-stdin]\n"
	    "       hgctl user del NAME\n"
	    "       hgctl user passwd NAME [--password-stdin]\n"
	    "       hgctl user list [--json]\n"
	    "       hgctl token create USER [--json]\n"
	    "       hgctl token list [--json]\n"
	    "       hgctl token revoke ID\n"
	    "       hgctl session list [--json]\n"
	    "       hgctl session revoke ID\n"
	    "       hgctl session revert ID\n"
	    "       hgctl audit verify [--json]\n"
	    "       hgctl audit show [--user USER] [--action ACTION] "
	    "[--since TIME]\n"
	    "                        [--until TIME] [--limit N] [--json]\n");
	exit(2);
}

/* Read one line of at most size-1 bytes; strips the newline. */
static int
hgctl_readline(FILE *f, char *buf, size_t size)
{
	size_t	len;

	if (fgets(buf, size, f) == NULL)
		return -1;
	len = strlen(buf);
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	else if (!feof(f)) {
		fprintf(stderr, "hgctl: password too long\n");
		exit(1);
	}
	if (len > 0 && buf[len - 1] == '\r')
		buf[--len] = '\0';
	return 0;
}

/* Prompt on the terminal with echo off. */
static int
hgctl_prompt(const char *prompt, char *buf, size_t size)
{
	struct termios	old, noecho;
	FILE		*tty;
	int		 rc;

	if ((tty = fopen("/dev/tty", "r+")) == NULL)
		return -1;
	fputs(prompt, tty);
	fflush(tty);
	tcgetattr(fileno(tty), &old);
	noecho = old;
	noecho.c_lflag &= ~ECHO;
	tcsetattr(fileno(tty), TCSAFLUSH, &noecho);
	rc = hgctl_readline(tty, buf, size);
	tcsetattr(fileno(tty), TCSAFLUSH, &old);
	fputs("\n", tty);
	fclose(tty);
	return rc;
}

/* The new password: from stdin, or asked twice on the terminal. */
static void
hgctl_password(int from_stdin, char *buf, size_t size)
{
	char	again[1100];

	if (from_stdin) {
		if (hgctl_readline(stdin, buf, size) == -1) {
			fprintf(stderr, "hgctl: no password on stdin\n");
			exit(1);
		}
		return;
	}
	if (!isatty(STDIN_FILENO) ||
	    hgctl_prompt("Password: ", buf, size) == -1 ||
	    hgctl_prompt("Again: ", again, sizeof(again)) == -1) {
		fprintf(stderr, "hgctl: no terminal to ask for the password; "
		    "use --password-stdin\n");
		exit(1);
	}
	if (strcmp(buf, again) != 0) {
		fprintf(stderr, "hgctl: passwords do not match\n");
		exit(1);
	}
	explicit_bzero(again, sizeof(again));
}

/* Send req to brokerd; exit 1 with its message on error. */
static struct json_object *
hgctl_call(struct json_object *req)
{
	struct json_object	*reply, *res, *e;
	char			 err[512], *path;

	path = path_join(conf.run_dir, SOCK_BROKER_CONTROL);
	if (ipc_call(path, ROLE_HGCTL, ROLE_BROKERD, req, &reply,
	    hgctl_timeout, err, sizeof(err)) == -1) {
		fprintf(stderr, "hgctl: %s\n", err);
		exit(1);
	}
	free(path);
	if (json_object_object_get_ex(reply, "error", &e)) {
		fprintf(stderr, "hgctl: %s\n", json_str(e, "message") ?
		    json_str(e, "message") : "error");
		exit(1);
	}
	if (!json_object_object_get_ex(reply, "result", &res)) {
		fprintf(stderr, "hgctl: malformed reply\n");
		exit(1);
	}
	json_object_get(res);
	json_object_put(reply);
	return res;
}

/* A request object of a type. */
static struct json_object *
hgctl_req(const char *type)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(type));
	return o;
}

/* Print a list reply: JSON, or one line per item with the given keys. */
static void
hgctl_print_items(struct json_object *res, const char *const *keys)
{
	struct json_object	*items, *it;
	const char		*v;
	size_t			 i, k;

	if (!json_object_object_get_ex(res, "items", &items))
		return;
	if (json_out) {
		printf("%s\n", json_object_to_json_string_ext(items,
		    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		return;
	}
	for (i = 0; i < json_object_array_length(items); i++) {
		it = json_object_array_get_idx(items, i);
		for (k = 0; keys[k] != NULL; k++) {
			v = json_str(it, keys[k]);
			printf("%s%s", k ? "\t" : "", v ? v : "-");
		}
		printf("\n");
	}
}

/* Where a value option of audit show goes, or NULL. */
static const char **
hgctl_show_option(const char *arg)
{
	if (strcmp(arg, "--user") == 0)
		return &show.user;
	if (strcmp(arg, "--action") == 0)
		return &show.action;
	if (strcmp(arg, "--since") == 0)
		return &show.since;
	if (strcmp(arg, "--until") == 0)
		return &show.until;
	if (strcmp(arg, "--limit") == 0)
		return &show.limit;
	return NULL;
}

/*
 * Strip --json, --admin, --password-stdin and audit show's options with
 * their values; the rest stays in order.
 */
static int
hgctl_flags(int argc, char *argv[], int *admin, int *pwstdin)
{
	const char	**vp;
	int		  i, n = 0;

	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json_out = 1;
		else if ((vp = hgctl_show_option(argv[i])) != NULL) {
			if (i + 1 == argc)
				hgctl_usage();
			*vp = argv[++i];
			show.used = 1;
		}
		else if (strcmp(argv[i], "--admin") == 0)
			*admin = 1;
		else if (strcmp(argv[i], "--password-stdin") == 0)
			*pwstdin = 1;
		else if (argv[i][0] == '-' && argv[i][1] == '-')
			hgctl_usage();
		else
			argv[n++] = argv[i];
	}
	return n;
}

/* hgctl audit verify: exit 0 when the chain is whole, else 1. */
static int
hgctl_audit_verify(void)
{
	struct json_object	*res;
	const char		*err;
	int64_t			 n = 0, bad = 0;
	int			 ok = 0;

	hgctl_timeout = HGCTL_AUDIT_TIMEOUT_MS;
	res = hgctl_call(hgctl_req("audit_verify"));
	json_flag(res, "ok", &ok);
	json_int(res, "records", &n);
	json_int(res, "bad_seq", &bad);
	err = json_str(res, "error");
	if (json_out)
		printf("%s\n", json_object_to_json_string_ext(res,
		    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	else if (ok)
		printf("audit log OK: %lld records, last seq %lld\n",
		    (long long)n, (long long)n);
	else
		printf("audit log: first bad record at seq %lld: %s\n",
		    (long long)bad, err != NULL ? err : "unknown error");
	json_object_put(res);
	return ok ? 0 : 1;
}

/* Print a record on one line: time, seq, action, user, verdict, reason. */
static void
hgctl_audit_print(struct json_object *rec)
{
	char	 when[64], action[128], user[256], reason[1024];
	int64_t	 seq = 0;
	int	 allowed;

	json_int(rec, "seq", &seq);
	log_escape(json_str(rec, "time") ? json_str(rec, "time") : "-",
	    (size_t)-1, when, sizeof when);
	log_escape(json_str(rec, "action") ? json_str(rec, "action") : "-",
	    (size_t)-1, action, sizeof action);
	log_escape(json_str(rec, "user") ? json_str(rec, "user") : "-",
	    (size_t)-1, user, sizeof user);
	log_escape(json_str(rec, "reason") ? json_str(rec, "reason") : "-",
	    (size_t)-1, reason, sizeof reason);
	printf("%s\t%lld\t%s\t%s\t%s\t%s\n", when, (long long)seq, action,
	    user, json_flag(rec, "allowed", &allowed) == -1 ? "-" :
	    allowed ? "allowed" : "denied", reason);
}

/* One audit_show request for at most want records below seq before. */
static struct json_object *
hgctl_audit_page(int64_t want, int64_t before)
{
	struct json_object	*req;

	req = hgctl_req("audit_show");
	if (show.user != NULL)
		json_object_object_add(req, "user",
		    json_object_new_string(show.user));
	if (show.action != NULL)
		json_object_object_add(req, "action",
		    json_object_new_string(show.action));
	if (show.since != NULL)
		json_object_object_add(req, "since",
		    json_object_new_string(show.since));
	if (show.until != NULL)
		json_object_object_add(req, "until",
		    json_object_new_string(show.until));
	json_object_object_add(req, "limit", json_object_new_int64(want));
	if (before > 0)
		json_object_object_add(req, "before_seq",
		    json_object_new_int64(before));
	return hgctl_call(req);
}

/*
 * hgctl audit show: the newest --limit matching records (0: all), oldest
 * first. A reply holds one page; older pages are asked for below the
 * oldest seq seen so far.
 */
static int
hgctl_audit_show(void)
{
	struct json_object	*pages, *res, *items, *page, *all;
	int64_t			 limit = HGCTL_AUDIT_LIMIT, got = 0, before = 0;
	int64_t			 want, seq;
	size_t			 i, j, n;
	char			*end;
	int			 more;

	if (show.limit != NULL) {
		errno = 0;
		limit = strtoll(show.limit, &end, 10);
		if (errno != 0 || end == show.limit || *end != '\0' ||
		    limit < 0) {
			fprintf(stderr, "hgctl: --limit wants a number >= 0 "
			    "(0: all)\n");
			return 1;
		}
	}
	hgctl_timeout = HGCTL_AUDIT_TIMEOUT_MS;
	pages = json_object_new_array();
	for (;;) {
		want = HGCTL_AUDIT_PAGE;
		if (limit > 0 && limit - got < want)
			want = limit - got;
		res = hgctl_audit_page(want, before);
		more = 0;
		json_flag(res, "more", &more);
		if (!json_object_object_get_ex(res, "items", &items) ||
		    (n = json_object_array_length(items)) == 0) {
			json_object_put(res);
			break;
		}
		json_object_array_add(pages, json_object_get(items));
		json_object_put(res);
		got += n;
		/* Each page must reach further back, or paging would loop. */
		if (json_int(json_object_array_get_idx(items, 0), "seq",
		    &seq) == -1 || (before > 0 && seq >= before))
			break;
		before = seq;
		if (!more || (limit > 0 && got >= limit) || before <= 1)
			break;
	}

	all = json_object_new_array();
	for (i = json_object_array_length(pages); i-- > 0;) {
		page = json_object_array_get_idx(pages, i);
		for (j = 0; j < json_object_array_length(page); j++)
			json_object_array_add(all, json_object_get(
			    json_object_array_get_idx(page, j)));
	}
	json_object_put(pages);
	if (json_out)
		printf("%s\n", json_object_to_json_string_ext(all,
		    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		for (i = 0; i < json_object_array_length(all); i++)
			hgctl_audit_print(json_object_array_get_idx(all, i));
	json_object_put(all);
	return 0;
}

int
main(int argc, char *argv[])
{
	static const char *const user_keys[] = { "name", "role", "created",
	    NULL };
	static const char *const token_keys[] = { "id", "user", "session_id",
	    "created", NULL };
	static const char *const session_keys[] = { "id", "user", "mode",
	    "expires_at", "created", "last_seen", NULL };
	struct json_object	*req, *res;
	char			 pw[1100];
	int			 admin = 0, pwstdin = 0, rv = 0;

	log_init("hgctl", 1);
	argc = hgctl_flags(argc - 1, argv + 1, &admin, &pwstdin);
	argv++;
	if (argc < 2)
		hgctl_usage();
	if (show.used && (strcmp(argv[0], "audit") != 0 ||
	    strcmp(argv[1], "show") != 0))
		hgctl_usage();
	config_load_or_die(&conf);

	if (strcmp(argv[0], "user") == 0) {
		if (strcmp(argv[1], "add") == 0 && argc == 3) {
			hgctl_password(pwstdin, pw, sizeof(pw));
			req = hgctl_req("user_add");
			json_object_object_add(req, "name",
			    json_object_new_string(argv[2]));
			json_object_object_add(req, "admin",
			    json_object_new_boolean(admin));
			json_object_object_add(req, "password",
			    json_object_new_string(pw));
			explicit_bzero(pw, sizeof(pw));
			json_object_put(hgctl_call(req));
			printf("user %s added\n", argv[2]);
		} else if (strcmp(argv[1], "del") == 0 && argc == 3) {
			req = hgctl_req("user_del");
			json_object_object_add(req, "name",
			    json_object_new_string(argv[2]));
			json_object_put(hgctl_call(req));
			printf("user %s deleted\n", argv[2]);
		} else if (strcmp(argv[1], "passwd") == 0 && argc == 3) {
			hgctl_password(pwstdin, pw, sizeof(pw));
			req = hgctl_req("user_passwd");
			json_object_object_add(req, "name",
			    json_object_new_string(argv[2]));
			json_object_object_add(req, "password",
			    json_object_new_string(pw));
			explicit_bzero(pw, sizeof(pw));
			json_object_put(hgctl_call(req));
			printf("password of %s changed\n", argv[2]);
		} else if (strcmp(argv[1], "list") == 0 && argc == 2) {
			res = hgctl_call(hgctl_req("user_list"));
			hgctl_print_items(res, user_keys);
			json_object_put(res);
		} else
			hgctl_usage();
	} else if (strcmp(argv[0], "token") == 0) {
		if (strcmp(argv[1], "create") == 0 && argc == 3) {
			req = hgctl_req("token_create");
			json_object_object_add(req, "user",
			    json_object_new_string(argv[2]));
			res = hgctl_call(req);
			if (json_out)
				printf("%s\n", json_object_to_json_string_ext(
				    res, JSON_C_TO_STRING_PLAIN));
			else
				printf("%s\n", json_str(res, "token"));
			json_object_put(res);
		} else if (strcmp(argv[1], "list") == 0 && argc == 2) {
			res = hgctl_call(hgctl_req("token_list"));
			hgctl_print_items(res, token_keys);
			json_object_put(res);
		} else if (strcmp(argv[1], "revoke") == 0 && argc == 3) {
			req = hgctl_req("token_revoke");
			json_object_object_add(req, "token",
			    json_object_new_string(argv[2]));
			json_object_put(hgctl_call(req));
			printf("token %s revoked\n", argv[2]);
		} else
			hgctl_usage();
	} else if (strcmp(argv[0], "session") == 0) {
		if (strcmp(argv[1], "list") == 0 && argc == 2) {
			res = hgctl_call(hgctl_req("session_list"));
			hgctl_print_items(res, session_keys);
			json_object_put(res);
		} else if (strcmp(argv[1], "revoke") == 0 && argc == 3) {
			req = hgctl_req("session_revoke");
			json_object_object_add(req, "session",
			    json_object_new_string(argv[2]));
			json_object_put(hgctl_call(req));
			printf("session %s revoked\n", argv[2]);
		} else if (strcmp(argv[1], "revert") == 0 && argc == 3) {
			req = hgctl_req("session_revert");
			json_object_object_add(req, "session",
			    json_object_new_string(argv[2]));
			json_object_put(hgctl_call(req));
			printf("session %s is sandboxed\n", argv[2]);
		} else
			hgctl_usage();
	} else if (strcmp(argv[0], "audit") == 0) {
		if (strcmp(argv[1], "verify") == 0 && argc == 2)
			rv = hgctl_audit_verify();
		else if (strcmp(argv[1], "show") == 0 && argc == 2)
			rv = hgctl_audit_show();
		else
			hgctl_usage();
	} else
		hgctl_usage();
	config_free(&conf);
	return rv;
}
