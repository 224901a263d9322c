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

static struct config	 conf;
static int		 json_out;

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
	    "       hgctl session revoke ID\n");
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
	    HGCTL_TIMEOUT_MS, err, sizeof(err)) == -1) {
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

/* Strip --json, --admin and --password-stdin; the rest stays in order. */
static int
hgctl_flags(int argc, char *argv[], int *admin, int *pwstdin)
{
	int	i, n = 0;

	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json_out = 1;
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

int
main(int argc, char *argv[])
{
	static const char *const user_keys[] = { "name", "role", "created",
	    NULL };
	static const char *const token_keys[] = { "id", "user", "session_id",
	    "created", NULL };
	static const char *const session_keys[] = { "id", "user", "created",
	    "last_seen", "expires", NULL };
	struct json_object	*req, *res;
	char			 pw[1100];
	int			 admin = 0, pwstdin = 0;

	log_init("hgctl", 1);
	argc = hgctl_flags(argc - 1, argv + 1, &admin, &pwstdin);
	argv++;
	if (argc < 2)
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
		} else
			hgctl_usage();
	} else
		hgctl_usage();
	config_free(&conf);
	return 0;
}
