/*
 * brokerd's spawn policy: who may run what, in which mode and profile,
 * within which per-user limits. It forwards approved spawns to sandboxd
 * and relays the answers (and their fds) to frontd; output and terminal
 * bytes never pass through brokerd's memory.
 */
#include <sys/types.h>
#include <sys/random.h>
#include <sys/wait.h>

#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd.h"

#define SPAWN_MAX_ARGS		64
#define SPAWN_MAX_ENV		64
#define SPAWN_GRACE_MS		10000	/* beyond a command's own limit */
#define SPAWN_QUICK_MS		10000	/* terminal create, attach, kill */
#define SPAWN_TEXT_MAX		4096	/* longer command text: hash and size */
#define SPAWN_SUMMARY_MAX	160	/* the one-line reason of a record */
#define SPAWN_CODE_MAX		(16L * 1024 * 1024) /* code read to record */
#define SPAWN_DEADLINE_SLACK_MS	1000	/* sandboxd's kill at a deadline */

/* A terminal brokerd knows of. */
struct term {
	char			 id[17];
	char			*user;
	char			 session_id[33];
	int64_t			 created;	/* wall seconds */
	char			 mode[8];
	char			*backend;
	int			 running;
	int64_t			 open_seq;	/* its terminal_open record */
	int64_t			 started;	/* monotonic ms */
	const char		*end_reason;	/* kill, admin_kill, expiry */
	int64_t			 resizes;	/* as frontd reported them */
	TAILQ_ENTRY(term)	 entry;
};

/* A frontd request waiting for sandboxd. */
struct spawn_wait {
	struct ipc_peer		*front;		/* NULL once frontd has gone */
	int64_t			 id;
	char			*user;
	int			 kind;		/* SPAWN_WAIT_* */
	char			 session_id[33];
	char			 request_id[LOG_REQUEST_ID_LEN + 1];
	int64_t			 allow_seq;	/* the spawn's allow record */
	char			 live[17];	/* a command's live row, or "" */
	TAILQ_ENTRY(spawn_wait)	 entry;
};
#define SPAWN_WAIT_COMMAND	1
#define SPAWN_WAIT_TERMINAL	2
#define SPAWN_WAIT_RELAY	3

static int	spawn_refuse(struct ipc_peer *, struct ipc_msg *, struct ident *,
		    const char *, const char *, int, const char *);
static int	spawn_rate_ok(struct ipc_peer *, struct ipc_msg *,
		    struct ident *, const char *);
static void	spawn_audit(struct spawn_wait *, struct ipc_msg *,
		    const char *);
struct term;
static struct json_object *spawn_term_ref(struct term *);
static void	spawn_new_id(char [17]);
static struct json_object *spawn_live_detail(struct spawn_wait *,
		    const char *);
static struct json_object *spawn_term_end(struct term *, int,
		    const char *);

static TAILQ_HEAD(, term)	 terms = TAILQ_HEAD_INITIALIZER(terms);

/* The docker runtime: the last container status sandboxd reported per user. */
#define SPAWN_CONTAINERS	256
static struct {
	char			 user[40];
	struct json_object	*container;
} spawn_containers[SPAWN_CONTAINERS];
static TAILQ_HEAD(, spawn_wait)	 waits = TAILQ_HEAD_INITIALIZER(waits);
static struct config		*spawn_conf;
static struct rl_table		*spawn_rl;	/* spawns per user */

/* Live commands of a user (those waiting for sandboxd). */
static int
spawn_commands_of(const char *user)
{
	struct spawn_wait	*w;
	int			 n = 0;

	TAILQ_FOREACH(w, &waits, entry)
		if (w->kind == SPAWN_WAIT_COMMAND && strcmp(w->user, user) == 0)
			n++;
	return n;
}

/* Live terminals of a user. */
static int
spawn_terminals_of(const char *user)
{
	struct term	*t;
	int		 n = 0;

	TAILQ_FOREACH(t, &terms, entry)
		if (t->running && strcmp(t->user, user) == 0)
			n++;
	return n;
}

static struct term *
spawn_term_find(const char *id)
{
	struct term	*t;

	TAILQ_FOREACH(t, &terms, entry)
		if (strcmp(t->id, id) == 0)
			return t;
	return NULL;
}

/* Whether an environment variable name is acceptable. */
static int
spawn_env_name_ok(const char *name)
{
	const char	*c;

	if (!isupper((unsigned char)name[0]) && name[0] != '_')
		return 0;
	for (c = name; *c != '\0'; c++)
		if (!isupper((unsigned char)*c) && !isdigit((unsigned char)*c) &&
		    *c != '_')
			return 0;
	/* The sandbox sets these itself. */
	return strcmp(name, "PATH") != 0 && strcmp(name, "HOME") != 0 &&
	    strcmp(name, "HOSTGATE_MODE") != 0 && strncmp(name, "LD_", 3) != 0 &&
	    c - name < 128;
}

/*
 * Copy the optional "env" object of a request into an array of
 * "NAME=VALUE" strings; -1 with a reply on a bad one.
 */
static int
spawn_env(struct ipc_peer *p, struct ipc_msg *m, struct json_object *out)
{
	struct json_object	*env;
	char			*kv;
	int			 n = 0;

	if (!json_object_object_get_ex(m->obj, "env", &env) || env == NULL)
		return 0;
	if (!json_object_is_type(env, json_type_object)) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST,
		    "\"env\" must be an object of strings");
		return -1;
	}
	json_object_object_foreach(env, k, v) {
		if (++n > SPAWN_MAX_ENV || !json_object_is_type(v,
		    json_type_string) || !spawn_env_name_ok(k) ||
		    strlen(json_object_get_string(v)) !=
		    (size_t)json_object_get_string_len(v)) {
			ipc_reply_error(p, m, ERR_BAD_REQUEST,
			    "\"env\": at most %d variables, names in capitals "
			    "(not PATH, HOME, LD_*), string values", SPAWN_MAX_ENV);
			return -1;
		}
		if (asprintf(&kv, "%s=%s", k, json_object_get_string(v)) == -1)
			fatal("%s", __func__);
		json_object_array_add(out, json_object_new_string(kv));
		free(kv);
	}
	return 0;
}

/* The names of "NAME=VALUE" strings: values may be secrets. */
static struct json_object *
spawn_env_names(struct json_object *env)
{
	struct json_object	*names;
	const char		*kv, *eq;
	size_t			 i;

	names = json_object_new_array();
	for (i = 0; i < json_object_array_length(env); i++) {
		kv = json_object_get_string(json_object_array_get_idx(env, i));
		if ((eq = strchr(kv, '=')) != NULL)
			json_object_array_add(names,
			    json_object_new_string_len(kv, eq - kv));
	}
	return names;
}

/* The id of the HTTP request being served, for sandboxd's log lines. */
static void
spawn_add_request_id(struct json_object *req)
{
	if (log_ctx_request_id() != NULL)
		json_object_object_add(req, "request_id",
		    json_object_new_string(log_ctx_request_id()));
}

/*
 * What will run, into d: the text itself up to SPAWN_TEXT_MAX bytes, else
 * its SHA-256; its size either way.
 */
static void
spawn_text(struct json_object *d, const char *field, const char *text)
{
	char	 name[64], hex[65];
	size_t	 len = strlen(text);

	if (len <= SPAWN_TEXT_MAX)
		json_object_object_add(d, field, json_object_new_string(text));
	else {
		sha256_hex(text, len, hex);
		snprintf(name, sizeof name, "%s_sha256", field);
		json_object_object_add(d, name, json_object_new_string(hex));
	}
	snprintf(name, sizeof name, "%s_bytes", field);
	json_object_object_add(d, name, json_object_new_int64((int64_t)len));
}

/* Whether fd is a memfd that no one can write, grow or shrink any more. */
static int
spawn_sealed(int fd)
{
	int	want = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK, seals;

	return (seals = fcntl(fd, F_GET_SEALS)) != -1 &&
	    (seals & want) == want;
}

/*
 * The Python code frontd put in the stdin memfd, read for its record (at
 * most SPAWN_CODE_MAX bytes); NULL when it cannot be read.
 */
static char *
spawn_code_read(int fd)
{
	struct stat	 st;
	char		*buf;
	size_t		 len = 0;
	ssize_t		 n;

	if (fd == -1 || fstat(fd, &st) == -1 || st.st_size < 0 ||
	    st.st_size > SPAWN_CODE_MAX || lseek(fd, 0, SEEK_SET) == -1)
		return NULL;
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL)
		fatal("%s", __func__);
	while (len < (size_t)st.st_size) {
		n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += n;
	}
	lseek(fd, 0, SEEK_SET);
	buf[len] = '\0';
	if (strlen(buf) != len) {
		free(buf);	/* NUL bytes: not text */
		return NULL;
	}
	return buf;
}

/* The record's one-line reason: prefix and text, controls as spaces. */
static void
spawn_summary(char *out, size_t outsz, const char *prefix, const char *text)
{
	size_t	i, n;

	n = (size_t)snprintf(out, outsz, "%s%s", prefix, text);
	if (n >= outsz && outsz > 4)
		memcpy(out + outsz - 4, "...", 4);
	for (i = 0; out[i] != '\0'; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			out[i] = ' ';
}

/*
 * Write the allow record of a spawn before it starts (detail is taken):
 * its seq, or -1 after a 503 when the record cannot be written, and then
 * nothing is started.
 */
static int64_t
spawn_allow(struct ipc_peer *p, struct ipc_msg *m, struct ident *id,
    const char *action, const char *reason, struct json_object *d)
{
	char	why[300];
	int64_t	seq;

	if (audit_ready(why, sizeof why) == -1) {
		json_object_put(d);
		log_warnx("%s of %s not started: %s", action, id->user->name,
		    why);
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "not started: %s", why);
		return -1;
	}
	if ((seq = audit_append(action, id->user->name, id->session ?
	    id->session->id : NULL, 1, reason, d, 1)) == -1) {
		log_warnx("%s of %s not started: its record could not be "
		    "written", action, id->user->name);
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "not started: the "
		    "audit log cannot take its record");
		return -1;
	}
	return seq;
}

/* The spawn request common to commands and terminals. */
static struct json_object *
spawn_request(struct ident *id, const char *kind)
{
	struct json_object	*req;

	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(MSG_SPAWN));
	json_object_object_add(req, "kind", json_object_new_string(kind));
	json_object_object_add(req, "user",
	    json_object_new_string(id->user->name));
	json_object_object_add(req, "session", id->session ?
	    json_object_new_string(id->session->id) : NULL);
	/* The ids it runs as: the user's own (sandboxd checks them). */
	json_object_object_add(req, "uid",
	    json_object_new_int64(id->user->uid));
	json_object_object_add(req, "gid",
	    json_object_new_int64(id->user->gid));
	/* The mode at this very instant: nothing caches it. */
	json_object_object_add(req, "mode", json_object_new_string(
	    mode_is_direct(id->session) ? "direct" : "sandbox"));
	/* A direct spawn ends with its grant: sandboxd holds the deadline. */
	if (mode_is_direct(id->session) &&
	    spawn_conf->on_expiry == EXPIRY_TERMINATE)
		json_object_object_add(req, "deadline_ms",
		    json_object_new_int64(id->session->direct_until));
	log_debug("%s for %s: uid %lld gid %lld, %s, deadline_ms %lld", kind,
	    id->user->name, (long long)id->user->uid,
	    (long long)id->user->gid, mode_is_direct(id->session) ? "direct" :
	    "sandbox", mode_is_direct(id->session) &&
	    spawn_conf->on_expiry == EXPIRY_TERMINATE ?
	    (long long)id->session->direct_until : 0LL);
	json_object_object_add(req, "permission",
	    json_object_new_string(session_permission(id->session)));
	egress_spawn_add(req, id);
	spawn_add_request_id(req);
	return req;
}

static struct spawn_wait *
spawn_wait_new(struct ipc_peer *front, struct ipc_msg *m, const char *user,
    int kind, const char *session_id)
{
	struct spawn_wait	*w;

	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->user = strdup(user)) == NULL)
		fatal("%s", __func__);
	w->front = front;
	w->id = m->id;
	w->kind = kind;
	snprintf(w->session_id, sizeof(w->session_id), "%s",
	    session_id ? session_id : "");
	snprintf(w->request_id, sizeof(w->request_id), "%s",
	    log_ctx_request_id() ? log_ctx_request_id() : "");
	TAILQ_INSERT_TAIL(&waits, w, entry);
	return w;
}

/* sandboxd's answer is about the request w waits for: log it as such. */
static void
spawn_wait_ctx(struct spawn_wait *w)
{
	log_ctx_set(w->request_id, w->user, w->session_id);
}

static void
spawn_wait_free(struct spawn_wait *w)
{
	TAILQ_REMOVE(&waits, w, entry);
	free(w->user);
	free(w);
}

/* Pass sandboxd's answer (result or error, and fds) on to frontd. */
static void
spawn_relay(struct spawn_wait *w, struct ipc_msg *m)
{
	struct json_object	*err, *res;
	struct ipc_msg		 fm;
	const char		*code, *msg;

	memset(&fm, 0, sizeof(fm));
	fm.id = w->id;
	if (w->front == NULL)
		return;
	if (m == NULL) {
		ipc_reply_error(w->front, &fm, ERR_UNAVAILABLE,
		    "sandboxd did not answer");
		return;
	}
	if (json_object_object_get_ex(m->obj, "error", &err)) {
		code = json_str(err, "code");
		msg = json_str(err, "message");
		ipc_reply_error(w->front, &fm, code ? code : ERR_INTERNAL, "%s",
		    msg ? msg : "sandboxd refused");
		return;
	}
	if (!json_object_object_get_ex(m->obj, "result", &res)) {
		ipc_reply_error(w->front, &fm, ERR_INTERNAL,
		    "malformed reply from sandboxd");
		return;
	}
	ipc_reply(w->front, &fm, json_object_get(res), m->fds, m->nfds);
}

/* sandboxd finished a command (or refused it). */
static void
spawn_command_done(struct ipc_peer *sp, struct ipc_msg *m, void *arg)
{
	struct spawn_wait	*w = arg;

	spawn_wait_ctx(w);
	if (w->live[0] != '\0')
		hosts_live_del(w->live);
	spawn_audit(w, m, "command");
	spawn_relay(w, m);
	spawn_wait_free(w);
	log_ctx_clear();
}

/*
 * A command's argv: bash -c COMMAND, or python3 reading its code on stdin
 * (lang "python"). *command or *code is what runs; NULL once m is answered.
 */
static struct json_object *
spawn_run_argv(struct ipc_peer *p, struct ipc_msg *m, const char **command,
    const char **code)
{
	struct json_object	*argv;
	const char		*lang;

	lang = json_str(m->obj, "lang");
	argv = json_object_new_array();
	/* "python", the one lang the protocol table takes */
	if (lang != NULL) {
		if ((*code = json_str(m->obj, "code")) == NULL) {
			json_object_put(argv);
			ipc_reply_error(p, m, ERR_BAD_REQUEST,
			    "\"code\" is required and must be a string");
			return NULL;
		}
		/* The code arrives on stdin (frontd's memfd), never in argv. */
		json_object_array_add(argv,
		    json_object_new_string("/usr/bin/python3"));
		json_object_array_add(argv, json_object_new_string("-"));
	} else {
		if ((*command = json_str(m->obj, "command")) == NULL ||
		    **command == '\0') {
			json_object_put(argv);
			ipc_reply_error(p, m, ERR_BAD_REQUEST,
			    "\"command\" is required and must be a string");
			return NULL;
		}
		json_object_array_add(argv, json_object_new_string("/bin/bash"));
		json_object_array_add(argv, json_object_new_string("-c"));
		json_object_array_add(argv, json_object_new_string(*command));
	}
	return argv;
}

/*
 * A command's audit detail: what runs (code, read from stdin_fd when it
 * came there, or command), where and how; its one-line summary in sum.
 */
static struct json_object *
spawn_run_detail(struct ident *id, struct json_object *argv,
    struct json_object *env, const char *command, const char *code,
    const char *cwd, int64_t timeout, int stdin_fd, char *sum, size_t sumsz)
{
	struct json_object	*d;
	char			*text = NULL;

	d = json_object_new_object();
	json_object_object_add(d, "kind", json_object_new_string("command"));
	json_object_object_add(d, "lang", json_object_new_string(
	    code != NULL ? "python" : "bash"));
	/* argv without the command, which follows as text or hash. */
	json_object_object_add(d, "argv", json_object_new_array());
	json_object_array_add(json_object_object_get(d, "argv"),
	    json_object_get(json_object_array_get_idx(argv, 0)));
	json_object_array_add(json_object_object_get(d, "argv"),
	    json_object_get(json_object_array_get_idx(argv, 1)));
	/* frontd sends the code in the stdin memfd: the record reads it. */
	if (code != NULL && *code == '\0' &&
	    (text = spawn_code_read(stdin_fd)) != NULL)
		code = text;
	spawn_text(d, code != NULL ? "code" : "command",
	    code != NULL ? code : command);
	json_object_object_add(d, "cwd", cwd != NULL ?
	    json_object_new_string(cwd) : NULL);
	json_object_object_add(d, "permission",
	    json_object_new_string(session_permission(id->session)));
	json_object_object_add(d, "mode", json_object_new_string(
	    mode_is_direct(id->session) ? "direct" : "sandbox"));
	json_object_object_add(d, "timeout_s", json_object_new_int64(timeout));
	json_object_object_add(d, "env", spawn_env_names(env));
	spawn_summary(sum, sumsz, code != NULL ? "python3: " : "",
	    code != NULL ? code : command);
	free(text);
	return d;
}

/* POST /api/run_command and /api/run_python. */
void
spawn_run(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*req, *argv, *env;
	struct ipc_peer		*sp;
	struct spawn_wait	*w;
	struct json_object	*d;
	const char		*command = NULL, *code = NULL, *cwd;
	char			 sum[SPAWN_SUMMARY_MAX];
	int64_t			 timeout = spawn_conf->command_timeout, seq;
	int			 stdin_fd = m->nfds > 0 ? m->fds[0] : -1;

	if ((sp = sandbox_peer()) == NULL) {
		spawn_refuse(p, m, id, "command", ERR_UNAVAILABLE, 0,
		    "sandboxd is unreachable");
		return;
	}
	if (spawn_rate_ok(p, m, id, "command") == -1)
		return;
	/*
	 * stdin (Python's code) must be sealed: else frontd could change it
	 * after brokerd recorded it, and the record would lie.
	 */
	if (stdin_fd != -1 && !spawn_sealed(stdin_fd)) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST,
		    "stdin must be a sealed memfd (write, grow and shrink)");
		return;
	}
	if (spawn_commands_of(id->user->name) >= spawn_conf->max_commands) {
		spawn_refuse(p, m, id, "command", ERR_RATE_LIMITED, 1,
		    "too many commands running for this user; wait for one to "
		    "finish");
		return;
	}
	if ((argv = spawn_run_argv(p, m, &command, &code)) == NULL)
		return;
	/* 1 to 86400 (the table), and within this host's own maximum */
	if (json_int(m->obj, "timeout", &timeout) == 0 &&
	    timeout > spawn_conf->command_timeout_max) {
		json_object_put(argv);
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "\"timeout\" must be "
		    "whole seconds from 1 to %d", spawn_conf->command_timeout_max);
		return;
	}
	cwd = json_str(m->obj, "cwd");	/* a path or absent: the table */
	env = json_object_new_array();
	if (spawn_env(p, m, env) == -1) {
		json_object_put(argv);
		json_object_put(env);
		return;
	}

	/* No record, no action: what will run is on disk before it starts. */
	d = spawn_run_detail(id, argv, env, command, code, cwd, timeout,
	    stdin_fd, sum, sizeof sum);
	if ((seq = spawn_allow(p, m, id, "spawn", sum, d)) == -1) {
		json_object_put(argv);
		json_object_put(env);
		return;
	}

	req = spawn_request(id, "command");
	json_object_object_add(req, "argv", argv);
	json_object_object_add(req, "env", env);
	if (cwd != NULL)
		json_object_object_add(req, "cwd", json_object_new_string(cwd));
	json_object_object_add(req, "timeout_ms",
	    json_object_new_int64(timeout * 1000));
	json_object_object_add(req, "output_cap",
	    json_object_new_int64(spawn_conf->output_cap));
	w = spawn_wait_new(p, m, id->user->name, SPAWN_WAIT_COMMAND,
	    id->session ? id->session->id : NULL);
	w->allow_seq = seq;
	if (ipc_request(sp, req, stdin_fd != -1 ? &stdin_fd : NULL,
	    stdin_fd != -1 ? 1 : 0, timeout * 1000 + SPAWN_GRACE_MS,
	    spawn_command_done, w) == -1) {
		spawn_audit(w, NULL, "command");
		spawn_wait_free(w);
		ipc_reply_error(p, m, ERR_UNAVAILABLE,
		    "sandboxd is unreachable");
		return;
	}
	/* sandboxd has it: a fleet's live table shows it until it ends. */
	spawn_new_id(w->live);
	hosts_live_add(w->live, "command", w->user, w->session_id,
	    spawn_live_detail(w, sum));
}

/* A fresh id of 16 hex digits (a command's live row). */
static void
spawn_new_id(char id[17])
{
	unsigned char	rnd[8];
	int		i;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		fatal("getrandom");
	for (i = 0; i < 8; i++)
		snprintf(id + 2 * i, 3, "%02x", rnd[i]);
}

/* What a command's live row says of it: its allow record and text. */
static struct json_object *
spawn_live_detail(struct spawn_wait *w, const char *summary)
{
	struct json_object	*d;

	d = json_object_new_object();
	json_object_object_add(d, "spawn_seq",
	    json_object_new_int64(w->allow_seq));
	json_object_object_add(d, "request_id", w->request_id[0] ?
	    json_object_new_string(w->request_id) : NULL);
	json_object_object_add(d, "summary", json_object_new_string(summary));
	return d;
}

/* A terminal's live row: its record, mode and backend. */
static void
spawn_term_live(struct term *t)
{
	struct json_object	*d;

	d = json_object_new_object();
	json_object_object_add(d, "open_seq",
	    json_object_new_int64(t->open_seq));
	json_object_object_add(d, "mode", json_object_new_string(t->mode));
	json_object_object_add(d, "backend",
	    json_object_new_string(t->backend));
	hosts_live_add(t->id, "terminal", t->user, t->session_id, d);
}

/* sandboxd started a terminal (or refused to). */
static void
spawn_terminal_done(struct ipc_peer *sp, struct ipc_msg *m, void *arg)
{
	struct spawn_wait	*w = arg;
	struct json_object	*res;
	struct term		*t;
	const char		*tid, *mode, *backend;

	spawn_wait_ctx(w);
	spawn_audit(w, m, "terminal");
	if (m != NULL && json_object_object_get_ex(m->obj, "result", &res) &&
	    (tid = json_str(res, "id")) != NULL && strlen(tid) == 16) {
		mode = json_str(res, "mode");
		backend = json_str(res, "backend");
		if ((t = calloc(1, sizeof(*t))) == NULL ||
		    (t->user = strdup(w->user)) == NULL ||
		    (t->backend = strdup(backend ? backend : "?")) == NULL)
			fatal("%s", __func__);
		memcpy(t->id, tid, 17);
		snprintf(t->session_id, sizeof(t->session_id), "%s",
		    w->session_id);
		snprintf(t->mode, sizeof(t->mode), "%s", mode ? mode : "?");
		t->created = now_wall_ms() / 1000;
		t->started = now_mono_ms();
		t->open_seq = w->allow_seq;
		t->running = 1;
		TAILQ_INSERT_TAIL(&terms, t, entry);
		log_info("terminal %s opened for %s (%s, %s)", t->id, t->user,
		    t->mode, t->backend);
		spawn_term_live(t);
		/* Outside brokerd a fleet's terminal id names its host. */
		hosts_spawn_name(res, t->id);
	}
	spawn_relay(w, m);
	spawn_wait_free(w);
	log_ctx_clear();
}

/* POST /api/terminals {cols, rows} */
void
spawn_terminal_create(struct ipc_peer *p, struct ipc_msg *m,
    struct ident *id)
{
	struct json_object	*req, *argv;
	struct ipc_peer		*sp;
	struct spawn_wait	*w;
	struct json_object	*d;
	int64_t			 cols = 80, rows = 24, seq;

	if ((sp = sandbox_peer()) == NULL) {
		spawn_refuse(p, m, id, "terminal", ERR_UNAVAILABLE, 0,
		    "sandboxd is unreachable");
		return;
	}
	/* absent, or 2 to 1000: the protocol table checked */
	json_int(m->obj, "cols", &cols);
	json_int(m->obj, "rows", &rows);
	if (spawn_rate_ok(p, m, id, "terminal") == -1)
		return;
	if (spawn_terminals_of(id->user->name) >= spawn_conf->max_terminals) {
		spawn_refuse(p, m, id, "terminal", ERR_RATE_LIMITED, 1,
		    "too many terminals open for this user; close one first");
		return;
	}
	argv = json_object_new_array();
	json_object_array_add(argv, json_object_new_string("/bin/bash"));
	json_object_array_add(argv, json_object_new_string("-i"));
	d = json_object_new_object();
	json_object_object_add(d, "kind", json_object_new_string("terminal"));
	json_object_object_add(d, "argv", json_object_get(argv));
	json_object_object_add(d, "permission",
	    json_object_new_string(session_permission(id->session)));
	json_object_object_add(d, "mode", json_object_new_string(
	    mode_is_direct(id->session) ? "direct" : "sandbox"));
	json_object_object_add(d, "cols", json_object_new_int64(cols));
	json_object_object_add(d, "rows", json_object_new_int64(rows));
	if ((seq = spawn_allow(p, m, id, "terminal_open", "/bin/bash -i",
	    d)) == -1) {
		json_object_put(argv);
		return;
	}
	req = spawn_request(id, "terminal");
	json_object_object_add(req, "argv", argv);
	json_object_object_add(req, "cols", json_object_new_int64(cols));
	json_object_object_add(req, "rows", json_object_new_int64(rows));
	json_object_object_add(req, "term",
	    json_object_new_string("xterm-256color"));
	w = spawn_wait_new(p, m, id->user->name, SPAWN_WAIT_TERMINAL,
	    id->session ? id->session->id : NULL);
	w->allow_seq = seq;
	if (ipc_request(sp, req, NULL, 0, SPAWN_QUICK_MS, spawn_terminal_done,
	    w) == -1) {
		spawn_audit(w, NULL, "terminal");
		spawn_wait_free(w);
		ipc_reply_error(p, m, ERR_UNAVAILABLE,
		    "sandboxd is unreachable");
	}
}

/* A terminal as JSON. */
static struct json_object *
spawn_term_json(struct term *t)
{
	struct json_object	*o;
	char			 when[32], id[HOSTS_SPAWN_ID_MAX];

	iso8601(t->created, when);
	hosts_spawn_id(t->id, id, sizeof(id));
	o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "user", json_object_new_string(t->user));
	json_object_object_add(o, "created", json_object_new_string(when));
	json_object_object_add(o, "mode", json_object_new_string(t->mode));
	json_object_object_add(o, "backend",
	    json_object_new_string(t->backend));
	json_object_object_add(o, "running",
	    json_object_new_boolean(t->running));
	json_object_object_add(o, "host", json_object_new_string(hosts_self()));
	return o;
}

/* GET /api/terminals: the caller's terminals. */
void
spawn_terminal_list(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*arr, *res;
	struct term		*t;

	arr = json_object_new_array();
	TAILQ_FOREACH(t, &terms, entry)
		if (strcmp(t->user, id->user->name) == 0)
			json_object_array_add(arr, spawn_term_json(t));
	/* A fleet's: this session's terminals on the other hosts too. */
	if (id->session != NULL)
		hosts_live_terminals(arr, id->session->id);
	res = json_object_new_object();
	json_object_object_add(res, "terminals", arr);
	ipc_reply(p, m, res, NULL, 0);
}

/* The caller's terminal named in the request, or NULL after a reply. */
static struct term *
spawn_term_owned(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct term	*t;
	const char	*tid;

	if ((tid = json_str(m->obj, "terminal")) != NULL &&
	    hosts_term_check(p, m, json_str(m->obj, "host"), tid) == -1)
		return NULL;
	if (tid == NULL || (t = spawn_term_find(tid)) == NULL ||
	    strcmp(t->user, id->user->name) != 0) {
		/* Another user's terminal is as absent as a missing one. */
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such terminal");
		return NULL;
	}
	return t;
}

/* sandboxd answered an attach or a kill. */
static void
spawn_relay_done(struct ipc_peer *sp, struct ipc_msg *m, void *arg)
{
	struct spawn_wait	*w = arg;

	spawn_wait_ctx(w);
	spawn_relay(w, m);
	spawn_wait_free(w);
	log_ctx_clear();
}

/* Ask sandboxd something about a terminal and relay its answer. */
static void
spawn_terminal_ask(struct ipc_peer *p, struct ipc_msg *m, struct ident *id,
    const char *type, struct term *t)
{
	struct json_object	*req;
	struct ipc_peer		*sp;
	struct spawn_wait	*w;

	if ((sp = sandbox_peer()) == NULL) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE,
		    "sandboxd is unreachable");
		return;
	}
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(type));
	json_object_object_add(req, "proc", json_object_new_string(t->id));
	spawn_add_request_id(req);
	w = spawn_wait_new(p, m, id->user->name, SPAWN_WAIT_RELAY, NULL);
	if (ipc_request(sp, req, NULL, 0, SPAWN_QUICK_MS, spawn_relay_done,
	    w) == -1) {
		spawn_wait_free(w);
		ipc_reply_error(p, m, ERR_UNAVAILABLE,
		    "sandboxd is unreachable");
	}
}

/* GET /api/terminals/{id}/ws: a dup of the pty master for frontd. */
void
spawn_terminal_attach(struct ipc_peer *p, struct ipc_msg *m,
    struct ident *id)
{
	struct term	*t;

	if ((t = spawn_term_owned(p, m, id)) == NULL)
		return;
	if (!t->running) {
		ipc_reply_error(p, m, ERR_CONFLICT, "the terminal has exited");
		return;
	}
	spawn_terminal_ask(p, m, id, MSG_ATTACH, t);
}

/* DELETE /api/terminals/{id}: hang it up. */
void
spawn_terminal_delete(struct ipc_peer *p, struct ipc_msg *m,
    struct ident *id)
{
	struct term	*t;

	if ((t = spawn_term_owned(p, m, id)) == NULL)
		return;
	if (audit_append("terminal_closed", t->user, id->session ?
	    id->session->id : NULL, 1, "closed by its user",
	    spawn_term_ref(t), 1) == -1) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "the audit log cannot "
		    "take the record of the close; the terminal is left open");
		return;
	}
	log_info("terminal %s of %s closed by its user", t->id, t->user);
	t->end_reason = "kill";
	if (!t->running) {
		TAILQ_REMOVE(&terms, t, entry);
		free(t->user);
		free(t->backend);
		free(t);
		ipc_reply(p, m, NULL, NULL, 0);
		return;
	}
	spawn_terminal_ask(p, m, id, MSG_HANGUP, t);
}

/*
 * Whether a session's direct-mode grant has run out, or is within a second
 * of it: sandboxd's clock and timer are not ours, and ours may be late.
 */
static int
spawn_grant_over(const char *session_id)
{
	struct session	*s;

	for (s = session_first(); s != NULL; s = session_next(s))
		if (strcmp(s->id, session_id) == 0)
			return s->direct_until > 0 &&
			    now_wall_ms() + SPAWN_DEADLINE_SLACK_MS >=
			    s->direct_until;
	return 0;
}

/*
 * sandboxd says a terminal's process is gone; oom: the kernel's OOM killer
 * ended it (its user's memory limit), which is its reason then.
 */
void
spawn_exited(const char *proc_id, int status, int oom,
    struct json_object *bypass)
{
	struct json_object	*d;
	struct term		*t;

	if ((t = spawn_term_find(proc_id)) == NULL || !t->running)
		return;
	/*
	 * sandboxd holds the deadline too: its kill may come before our
	 * timer has ended the grant. A direct terminal whose grant has run
	 * out ended by expiry.
	 */
	if (t->end_reason == NULL && strcmp(t->mode, "direct") == 0 &&
	    spawn_grant_over(t->session_id))
		t->end_reason = "expiry";
	log_info("terminal %s of %s exited (status %d%s)", t->id, t->user,
	    status, oom ? ", out of memory" : "");
	d = spawn_term_end(t, status, oom ? "oom" : t->end_reason ?
	    t->end_reason : "exit");
	egress_bypass(t->user, t->session_id[0] ? t->session_id : NULL, t->id,
	    bypass);
	/* The event is the client's: a fleet's id names the host. */
	hosts_spawn_event(&d, t->id);
	events_emit(NULL, t->user, "terminal_exited", d);
}

/* frontd resized a terminal's pty. */
void
spawn_term_resized(const char *proc_id)
{
	struct term	*t;

	if ((t = spawn_term_find(proc_id)) != NULL && t->running)
		t->resizes++;
}

/* A reference to a terminal for the records about it. */
static struct json_object *
spawn_term_ref(struct term *t)
{
	struct json_object	*d;

	d = json_object_new_object();
	json_object_object_add(d, "id", json_object_new_string(t->id));
	json_object_object_add(d, "open_seq",
	    json_object_new_int64(t->open_seq));
	return d;
}

/*
 * The close record of a terminal whose process is gone: how (status,
 * -1 when unknown) and why (exit, kill, expiry, restart). The detail is
 * returned, also for the event; the recorder of a session may add to it.
 */
static struct json_object *
spawn_term_end(struct term *t, int status, const char *why)
{
	struct json_object	*d;

	t->running = 0;
	hosts_live_del(t->id);
	d = spawn_term_ref(t);
	json_object_object_add(d, "status", status >= 0 ?
	    json_object_new_int(status) : NULL);
	json_object_object_add(d, "exit_code", status >= 0 &&
	    WIFEXITED(status) ? json_object_new_int(WEXITSTATUS(status)) :
	    NULL);
	json_object_object_add(d, "signal", status >= 0 &&
	    WIFSIGNALED(status) ? json_object_new_int(WTERMSIG(status)) :
	    NULL);
	json_object_object_add(d, "reason", json_object_new_string(why));
	json_object_object_add(d, "duration_ms",
	    json_object_new_int64(now_mono_ms() - t->started));
	json_object_object_add(d, "mode", json_object_new_string(t->mode));
	json_object_object_add(d, "resizes", json_object_new_int64(t->resizes));
	audit_append("terminal_exited", t->user, t->session_id[0] ?
	    t->session_id : NULL, 1, why, json_object_get(d), 0);
	return d;
}

/* A session's grant ended: its direct terminals end by expiry. */
void
spawn_session_expiring(const char *session_id)
{
	struct term	*t;

	TAILQ_FOREACH(t, &terms, entry)
		if (t->running && t->end_reason == NULL &&
		    strcmp(t->session_id, session_id) == 0 &&
		    strcmp(t->mode, "direct") == 0)
			t->end_reason = "expiry";
}

/* The terminals of a session, for the admin view. */
struct json_object *
spawn_terminals_json(const char *session_id)
{
	struct json_object	*arr;
	struct term		*t;

	arr = json_object_new_array();
	TAILQ_FOREACH(t, &terms, entry)
		if (strcmp(t->session_id, session_id) == 0)
			json_object_array_add(arr, spawn_term_json(t));
	return arr;
}

/* DELETE /api/admin/terminals/{id}: hang up any user's terminal. */
void
spawn_admin_kill(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct term	*t;
	const char	*tid;

	if ((tid = json_str(m->obj, "terminal")) != NULL &&
	    hosts_term_check(p, m, json_str(m->obj, "host"), tid) == -1)
		return;
	if (tid == NULL || (t = spawn_term_find(tid)) == NULL) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such terminal");
		return;
	}
	log_info("admin %s kills terminal %s of %s", id->user->name, t->id,
	    t->user);
	if (audit_append("admin_kill", id->user->name, id->session->id, 1,
	    t->id, spawn_term_ref(t), 1) == -1) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "the audit log cannot "
		    "take the record of the kill; the terminal is left open");
		return;
	}
	t->end_reason = "admin_kill";
	if (!t->running) {
		ipc_reply(p, m, NULL, NULL, 0);
		return;
	}
	spawn_terminal_ask(p, m, id, MSG_HANGUP, t);
}

/*
 * sandboxd went away: its processes died with it (--die-with-parent). Their
 * clients are told, as of any other end.
 */
void
spawn_sandbox_gone(void)
{
	struct json_object	*d;
	struct term		*t;

	TAILQ_FOREACH(t, &terms, entry)
		if (t->running) {
			d = spawn_term_end(t, -1, "restart");
			hosts_spawn_event(&d, t->id);
			events_emit(NULL, t->user, "terminal_exited", d);
		}
}

/* Our live rows again (another host had declared us lost, and dropped them). */
void
spawn_live_again(void)
{
	struct spawn_wait	*w;
	struct term		*t;

	TAILQ_FOREACH(t, &terms, entry)
		if (t->running)
			spawn_term_live(t);
	TAILQ_FOREACH(w, &waits, entry)
		if (w->kind == SPAWN_WAIT_COMMAND && w->live[0] != '\0')
			hosts_live_add(w->live, "command", w->user,
			    w->session_id, spawn_live_detail(w, ""));
}

/* A frontd connection closed: forget the answers it waits for. */
void
spawn_front_gone(struct ipc_peer *front)
{
	struct spawn_wait	*w;

	TAILQ_FOREACH(w, &waits, entry)
		if (w->front == front)
			w->front = NULL;
}

void
spawn_init(struct config *conf)
{
	spawn_conf = conf;
	spawn_rl = rl_new("spawn", conf->spawn_rate, conf->spawn_burst,
	    10000);
}

/*
 * Refuse a spawn: audited, counted, answered. Returns -1 for the callers'
 * convenience.
 */
static int
spawn_refuse(struct ipc_peer *p, struct ipc_msg *m, struct ident *id,
    const char *kind, const char *code, int retry, const char *why)
{
	struct json_object	*d;

	counters.spawns_refused++;
	d = json_object_new_object();
	json_object_object_add(d, "kind", json_object_new_string(kind));
	json_object_object_add(d, "mode", json_object_new_string(
	    mode_is_direct(id->session) ? "direct" : "sandbox"));
	audit_append("spawn_refused", id->user->name,
	    id->session ? id->session->id : NULL, 0, why, d, 0);
	if (retry > 0)
		ipc_reply_retry(p, m, retry, why);
	else
		ipc_reply_error(p, m, code, "%s", why);
	return -1;
}

/* The per-user spawn rate limit; -1 after a 429. */
static int
spawn_rate_ok(struct ipc_peer *p, struct ipc_msg *m, struct ident *id,
    const char *kind)
{
	char	why[300];
	int	wait;

	/* No record, no spawn: the reason, before unreadable buckets. */
	if (audit_ready(why, sizeof(why)) == -1) {
		log_warnx("%s of %s not started: %s", kind, id->user->name,
		    why);
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "not started: %s", why);
		return -1;
	}
	if ((wait = rl_take(spawn_rl, id->user->name, now_mono_ms())) > 0)
		return spawn_refuse(p, m, id, kind, ERR_RATE_LIMITED, wait,
		    "too many spawns for this user; try again later");
	return 0;
}

/* Keep what sandboxd said of a user's container. */
static void
spawn_container_keep(const char *user, struct json_object *c)
{
	int	i, free_slot = -1;

	if (c == NULL || !json_object_is_type(c, json_type_object))
		return;
	for (i = 0; i < SPAWN_CONTAINERS; i++) {
		if (strcmp(spawn_containers[i].user, user) == 0)
			break;
		if (free_slot == -1 && spawn_containers[i].user[0] == '\0')
			free_slot = i;
	}
	if (i == SPAWN_CONTAINERS && (i = free_slot) == -1)
		i = 0;
	snprintf(spawn_containers[i].user, sizeof(spawn_containers[i].user),
	    "%s", user);
	json_object_put(spawn_containers[i].container);
	spawn_containers[i].container = json_object_get(c);
}

/* The container status last reported for a user, or NULL. */
struct json_object *
spawn_container_json(const char *user)
{
	int	i;

	for (i = 0; i < SPAWN_CONTAINERS; i++)
		if (strcmp(spawn_containers[i].user, user) == 0)
			return json_object_get(spawn_containers[i].container);
	return NULL;
}

/* What an end record takes from sandboxd's result: its name, ours. */
static const char *const spawn_started_fields[][2] = {
	{ "id", "id" }, { "mode", "mode" }, { "backend", "backend" },
	{ "sha256", "sha256" }, { "uid", "uid" }, { "cgroup", "cgroup" },
	{ "cwd", "cwd" }, { NULL, NULL }
};
/* And, for a command, how it ended. */
static const char *const spawn_ended_fields[][2] = {
	{ "exit_code", "exit_code" }, { "signal", "signal" },
	{ "timed_out", "timed_out" }, { "oom", "oom" },
	{ "duration_ms", "duration_ms" }, { "stdout_len", "stdout_bytes" },
	{ "stderr_len", "stderr_bytes" }, { "truncated", "truncated" },
	{ NULL, NULL }
};

/* Copy a member of sandboxd's result into an audit detail (null if none). */
static void
spawn_copy(struct json_object *d, struct json_object *res, const char *from,
    const char *to)
{
	json_object_object_add(d, to, json_object_get(
	    json_object_object_get(res, from)));
}

/*
 * The end record of a command (spawn_end) or the start record of a
 * terminal (terminal_opened): what sandboxd did with an allowed spawn,
 * linked to its allow record by spawn_seq / open_seq.
 */
static void
spawn_audit(struct spawn_wait *w, struct ipc_msg *m, const char *kind)
{
	struct json_object	*res = NULL, *err, *d;
	const char		*msg;
	char			 why[64];
	int			 term = strcmp(kind, "terminal") == 0, ok = 0;
	int			 i;
	int64_t			 v;
	size_t			 n;

	d = json_object_new_object();
	json_object_object_add(d, "kind", json_object_new_string(kind));
	json_object_object_add(d, term ? "open_seq" : "spawn_seq",
	    json_object_new_int64(w->allow_seq));
	if (m == NULL)
		msg = "sandboxd did not answer";
	else if (json_object_object_get_ex(m->obj, "error", &err)) {
		msg = json_str(err, "message") ? json_str(err, "message") :
		    "sandboxd refused";
		json_object_object_add(d, "error", json_object_get(
		    json_object_object_get(err, "code")));
	} else if (!json_object_object_get_ex(m->obj, "result", &res))
		msg = "malformed reply from sandboxd";
	else
		msg = NULL, ok = 1;
	if (ok) {
		counters.spawns++;
		spawn_container_keep(w->user, json_object_object_get(res,
		    "container"));
		for (i = 0; spawn_started_fields[i][0] != NULL; i++)
			spawn_copy(d, res, spawn_started_fields[i][0],
			    spawn_started_fields[i][1]);
	}
	if (ok && !term) {
		for (i = 0; spawn_ended_fields[i][0] != NULL; i++)
			spawn_copy(d, res, spawn_ended_fields[i][0],
			    spawn_ended_fields[i][1]);
		if (json_int(res, "signal", &v) == 0)
			snprintf(why, sizeof why, "signal %lld", (long long)v);
		else if (json_int(res, "exit_code", &v) == 0)
			snprintf(why, sizeof why, "exit %lld", (long long)v);
		else
			snprintf(why, sizeof why, "ended");
		n = strlen(why);
		if (json_object_get_boolean(json_object_object_get(res,
		    "timed_out")))
			n += snprintf(why + n, sizeof why - n, ", timed out");
		if (json_object_get_boolean(json_object_object_get(res,
		    "oom")) && n < sizeof why)
			n += snprintf(why + n, sizeof why - n,
			    ", out of memory");
		if (json_object_get_boolean(json_object_object_get(res,
		    "truncated")) && n < sizeof why)
			snprintf(why + n, sizeof why - n, ", output truncated");
		msg = why;
		log_info("command %s of %s ran (%s, %s)",
		    json_str(res, "id") ? json_str(res, "id") : "?", w->user,
		    json_str(res, "mode") ? json_str(res, "mode") : "?",
		    json_str(res, "backend") ? json_str(res, "backend") : "?");
	}
	audit_append(term ? "terminal_opened" : "spawn_end", w->user,
	    w->session_id[0] ? w->session_id : NULL, ok, msg, d, 0);
	if (ok && !term)
		egress_bypass(w->user, w->session_id[0] ? w->session_id : NULL,
		    json_str(res, "id"), json_object_object_get(res,
		    "egress_bypass"));
}
