/*
 * brokerd's side of the workspace file API: who may read, write or delete
 * (the identity as for a run, the session's permission), the audit of
 * every change, and the forwarding to sandboxd, which resolves the path
 * inside the user's workspace as the user. brokerd resolves nothing of
 * the path and never holds a file's bytes: the content memfd of a write
 * goes down to sandboxd, the file or listing fd of a read comes up to
 * frontd, each passed on as a descriptor, unread.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

/*
 * How long sandboxd may take: its own limit (HOSTGATE_FILE_TIMEOUT_SECONDS,
 * and 1 ms per 8 KiB a write carries, at most 6 hours: sandboxd/files.c)
 * and a grace.
 */
#define FILES_BYTES_PER_MS	8192
#define FILES_TIMEOUT_MAX_MS	(6 * 3600 * 1000LL)
#define FILES_GRACE_MS		10000

#define FILES_READ_ONLY	"this session's permission is read-only: the " \
	"workspace cannot be changed; ask an admin to switch the session to " \
	"workspace-write"

/* A frontd request waiting for sandboxd. */
struct files_wait {
	struct ipc_peer		*front;		/* NULL once frontd has gone */
	int64_t			 id;
	char			 op[8];		/* read list write mkdir delete */
	char			*path;
	int64_t			 size;
	char			 user[USER_NAME_MAX + 1];
	char			 session_id[33];
	char			 request_id[LOG_REQUEST_ID_LEN + 1];
	char			 mode[8];	/* the session's, at the request */
	char			 permission[32];
	TAILQ_ENTRY(files_wait)	 entry;
};

static TAILQ_HEAD(, files_wait)	 files_waits =
    TAILQ_HEAD_INITIALIZER(files_waits);
static struct config		*files_conf;
static struct rl_table		*files_rl;	/* file requests per user */

/* Set up the per-user rate limit: the spawns' rate, a table of its own. */
void
files_init(struct config *conf)
{
	files_conf = conf;
	files_rl = rl_new("files", conf->spawn_rate, conf->spawn_burst,
	    10000);
}

/* Whether an op changes the workspace (audited, refused under read-only). */
static int
files_changes(const char *op)
{
	return strcmp(op, "read") != 0 && strcmp(op, "list") != 0;
}

/* The audit action of a change. */
static const char *
files_action(const char *op)
{
	if (strcmp(op, "mkdir") == 0)
		return "file_mkdir";
	if (strcmp(op, "delete") == 0)
		return "file_delete";
	return "file_write";
}

/* The detail of a file record: op, path, size (writes). */
static struct json_object *
files_detail(const char *op, const char *path, int64_t size)
{
	struct json_object	*d;

	d = json_object_new_object();
	json_object_object_add(d, "op", json_object_new_string(op));
	json_object_object_add(d, "path", json_object_new_string(path));
	if (strcmp(op, "write") == 0)
		json_object_object_add(d, "size", json_object_new_int64(size));
	return d;
}

/* Refuse a change before sandboxd sees it: a file_refused record. */
static void
files_refuse(struct ipc_peer *p, struct ipc_msg *m, struct ident *id,
    const char *op, const char *path, int64_t size, const char *code,
    int retry, const char *why)
{
	audit_append("file_refused", id->user->name, id->session ?
	    id->session->id : NULL, 0, why, files_detail(op, path, size), 0);
	log_info("file %s of %s refused: %s", op, id->user->name, why);
	if (retry > 0)
		ipc_reply_retry(p, m, retry, why);
	else
		ipc_reply_error(p, m, code, "%s", why);
}

static void
files_wait_free(struct files_wait *w)
{
	TAILQ_REMOVE(&files_waits, w, entry);
	free(w->path);
	free(w);
}

/*
 * The reply to frontd from sandboxd's result: its members as the
 * protocol table has them, and the path, mode and permission.
 */
static struct json_object *
files_result(struct files_wait *w, struct json_object *res, int fd)
{
	static const char *const keep[] = { "size", "mtime", "created",
	    "count", "truncated", "deleted", NULL };
	struct json_object	*o, *v;
	struct stat		 st;
	size_t			 i;

	o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(w->path));
	for (i = 0; keep[i] != NULL; i++)
		if (json_object_object_get_ex(res, keep[i], &v) && v != NULL)
			json_object_object_add(o, keep[i], json_object_get(v));
	if (strcmp(w->op, "read") == 0 && fstat(fd, &st) == 0) {
		/* What frontd will send is what the fd holds. */
		json_object_object_add(o, "size",
		    json_object_new_int64(st.st_size));
		json_object_object_add(o, "mtime",
		    json_object_new_int64(st.st_mtime));
	}
	if (strcmp(w->op, "list") == 0) {
		if (!json_object_object_get_ex(o, "count", NULL))
			json_object_object_add(o, "count",
			    json_object_new_int64(0));
		if (!json_object_object_get_ex(o, "truncated", NULL))
			json_object_object_add(o, "truncated",
			    json_object_new_boolean(0));
	}
	if (files_changes(w->op) && strcmp(w->op, "delete") != 0 &&
	    !json_object_object_get_ex(o, "created", NULL))
		json_object_object_add(o, "created", json_object_new_boolean(0));
	if (strcmp(w->op, "delete") == 0)
		json_object_object_add(o, "deleted", json_object_new_boolean(1));
	json_object_object_add(o, "mode", json_object_new_string(w->mode));
	json_object_object_add(o, "permission",
	    json_object_new_string(w->permission));
	return o;
}

/*
 * Whether sandboxd's result for a read or a list carries what it must:
 * one fd, a regular file (a memfd for a listing). The fd is not read.
 */
static int
files_fd_ok(struct files_wait *w, struct ipc_msg *m)
{
	struct stat	st;

	if (files_changes(w->op))
		return 1;
	return m->nfds == 1 && fstat(m->fds[0], &st) == 0 &&
	    S_ISREG(st.st_mode);
}

/* sandboxd did the operation (or refused it): audit, relay to frontd. */
static void
files_done(struct ipc_peer *sp, struct ipc_msg *m, void *arg)
{
	struct files_wait	*w = arg;
	struct json_object	*err, *res, *d;
	struct ipc_msg		 fm;
	const char		*code = ERR_UNAVAILABLE;
	const char		*msg = "sandboxd did not answer";

	log_ctx_set(w->request_id, w->user, w->session_id[0] ?
	    w->session_id : NULL);
	memset(&fm, 0, sizeof(fm));
	fm.id = w->id;
	res = NULL;
	if (m != NULL && json_object_object_get_ex(m->obj, "error", &err)) {
		code = json_str(err, "code") ? json_str(err, "code") :
		    ERR_INTERNAL;
		msg = json_str(err, "message") ? json_str(err, "message") :
		    "sandboxd refused";
	} else if (m != NULL && (!json_object_object_get_ex(m->obj, "result",
	    &res) || !files_fd_ok(w, m))) {
		log_warnx("file %s: sandboxd sent a reply without its fd",
		    w->op);
		code = ERR_INTERNAL;
		msg = "malformed reply from sandboxd";
		res = NULL;
	}
	if (files_changes(w->op)) {
		d = files_detail(w->op, w->path, w->size);
		if (res != NULL) {
			int	created = 0;

			json_flag(res, "created", &created);
			if (strcmp(w->op, "delete") != 0)
				json_object_object_add(d, "created",
				    json_object_new_boolean(created));
		} else
			json_object_object_add(d, "error",
			    json_object_new_string(code));
		audit_append(files_action(w->op), w->user, w->session_id[0] ?
		    w->session_id : NULL, res != NULL, res != NULL ? NULL : msg,
		    d, 0);
	}
	if (res != NULL)
		log_info("file %s by %s: done", w->op, w->user);
	else
		log_info("file %s by %s: %s: %s", w->op, w->user, code, msg);
	if (w->front != NULL) {
		if (res != NULL)
			ipc_reply(w->front, &fm, files_result(w, res,
			    m->nfds > 0 ? m->fds[0] : -1), m->fds, m->nfds);
		else
			ipc_reply_error(w->front, &fm, code, "%s", msg);
	}
	files_wait_free(w);
	log_ctx_clear();
}

/* A check passed: what the write would be told, nothing written. */
static void
files_checked(struct ipc_peer *p, struct ipc_msg *m, struct ident *id,
    const char *path, int64_t size)
{
	struct json_object	*o;

	log_debug("file write by %s: may come (%lld bytes)", id->user->name,
	    (long long)size);
	o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "size", json_object_new_int64(size));
	json_object_object_add(o, "created", json_object_new_boolean(0));
	json_object_object_add(o, "check", json_object_new_boolean(1));
	json_object_object_add(o, "mode", json_object_new_string(
	    mode_is_direct(id->session) ? "direct" : "sandbox"));
	json_object_object_add(o, "permission",
	    json_object_new_string(session_permission(id->session)));
	ipc_reply(p, m, o, NULL, 0);
}

/* Remember a file request sent to sandboxd, to answer and audit it. */
static struct files_wait *
files_wait_new(struct ipc_peer *p, struct ipc_msg *m, struct ident *id,
    const char *op, const char *path, int64_t size)
{
	struct files_wait	*w;

	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->path = strdup(path)) == NULL)
		fatal("%s", __func__);
	w->front = p;
	w->id = m->id;
	w->size = size;
	snprintf(w->op, sizeof(w->op), "%s", op);
	snprintf(w->user, sizeof(w->user), "%s", id->user->name);
	snprintf(w->session_id, sizeof(w->session_id), "%s", id->session ?
	    id->session->id : "");
	snprintf(w->request_id, sizeof(w->request_id), "%s",
	    log_ctx_request_id() ? log_ctx_request_id() : "");
	snprintf(w->mode, sizeof(w->mode), "%s", mode_is_direct(id->session) ?
	    "direct" : "sandbox");
	snprintf(w->permission, sizeof(w->permission), "%s",
	    session_permission(id->session));
	TAILQ_INSERT_TAIL(&files_waits, w, entry);
	return w;
}

/* The request to sandboxd for a file operation op of id's user on path. */
static struct json_object *
files_request(struct ident *id, const char *op, const char *path,
    int64_t size)
{
	struct json_object	*req;

	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(MSG_FILE));
	json_object_object_add(req, "op", json_object_new_string(op));
	json_object_object_add(req, "user",
	    json_object_new_string(id->user->name));
	json_object_object_add(req, "path", json_object_new_string(path));
	/* The ids it is done as: the user's own (sandboxd checks them). */
	json_object_object_add(req, "uid",
	    json_object_new_int64(id->user->uid));
	json_object_object_add(req, "gid",
	    json_object_new_int64(id->user->gid));
	if (id->session != NULL)
		json_object_object_add(req, "session",
		    json_object_new_string(id->session->id));
	if (strcmp(op, "write") == 0)
		json_object_object_add(req, "size", json_object_new_int64(size));
	if (log_ctx_request_id() != NULL)
		json_object_object_add(req, "request_id",
		    json_object_new_string(log_ctx_request_id()));
	return req;
}

/*
 * Check a request of frontd and forward it to sandboxd as a "file"
 * operation op. Changes need a session that may write, an audit log that
 * takes records, and for a write the content memfd of exactly size bytes.
 * With check (a write whose body frontd has not read yet) it stops short
 * of the content and of sandboxd: the answer says whether it would be
 * taken, without taking a rate token; only a refusal is audited.
 */
static void
files_forward(struct ipc_peer *p, struct ipc_msg *m, struct ident *id,
    const char *op, int check)
{
	struct json_object	*req;
	struct ipc_peer		*sp;
	struct files_wait	*w;
	struct stat		 st;
	const char		*path = json_str(m->obj, "path");
	char			 why[300], esc[LOG_ESCAPE_MAX];
	int64_t			 size = 0;
	int64_t			 ms;
	int			 fd = -1, wait;

	json_int(m->obj, "size", &size);
	log_escape(path, (size_t)-1, esc, sizeof(esc));
	if ((wait = check ? rl_peek(files_rl, id->user->name, now_mono_ms()) :
	    rl_take(files_rl, id->user->name, now_mono_ms())) > 0) {
		if (files_changes(op))
			files_refuse(p, m, id, op, path, size, ERR_RATE_LIMITED,
			    wait, "too many file requests for this user; try "
			    "again later");
		else
			ipc_reply_retry(p, m, wait, "too many file requests "
			    "for this user; try again later");
		return;
	}
	if (files_changes(op) &&
	    session_permission_read_only(session_permission(id->session))) {
		files_refuse(p, m, id, op, path, size, ERR_FORBIDDEN, 0,
		    FILES_READ_ONLY);
		return;
	}
	if ((sp = sandbox_peer()) == NULL) {
		if (files_changes(op))
			files_refuse(p, m, id, op, path, size, ERR_UNAVAILABLE,
			    0, "sandboxd is unreachable");
		else
			ipc_reply_error(p, m, ERR_UNAVAILABLE,
			    "sandboxd is unreachable");
		return;
	}
	if (strcmp(op, "write") == 0) {
		if (files_conf->max_upload != -1 &&
		    size > files_conf->max_upload) {
			files_refuse(p, m, id, op, path, size, ERR_TOO_LARGE, 0,
			    "the file is larger than HOSTGATE_MAX_UPLOAD_BYTES");
			return;
		}
		if (!check && (m->nfds != 1 || fstat(m->fds[0], &st) == -1 ||
		    !S_ISREG(st.st_mode) || st.st_size != size)) {
			ipc_reply_error(p, m, ERR_BAD_REQUEST, "a write needs "
			    "the content as a memfd of exactly \"size\" bytes");
			return;
		}
		fd = check ? -1 : m->fds[0];
	}
	/* No record, no change: the log must take the change's record. */
	if (files_changes(op) && audit_ready(why, sizeof(why)) == -1) {
		log_warnx("file %s of %s refused: %s", op, id->user->name, why);
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "not done: %s", why);
		return;
	}
	if (check) {
		files_checked(p, m, id, path, size);
		return;
	}

	w = files_wait_new(p, m, id, op, path, size);
	req = files_request(id, op, path, size);
	log_debug("file %s by %s: \"%s\"", op, id->user->name, esc);
	ms = files_conf->file_timeout * 1000LL + size / FILES_BYTES_PER_MS;
	if (ms > FILES_TIMEOUT_MAX_MS)
		ms = FILES_TIMEOUT_MAX_MS;
	/* sandboxd's link died under us: answered as no answer. */
	if (ipc_request(sp, req, fd != -1 ? &fd : NULL, fd != -1 ? 1 : 0,
	    (int)(ms + FILES_GRACE_MS), files_done, w) == -1)
		files_done(sp, NULL, w);
}

/* file_read: a workspace file as an fd. */
void
files_read(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	files_forward(p, m, id, "read", 0);
}

/* file_list: a workspace directory's listing as a memfd. */
void
files_list(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	files_forward(p, m, id, "list", 0);
}

/*
 * file_write: a file from its content memfd, or a directory; with check,
 * only whether it would be taken (frontd asks before reading the body).
 */
void
files_write(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	int	dir = 0, check = 0;

	json_flag(m->obj, "dir", &dir);
	json_flag(m->obj, "check", &check);
	files_forward(p, m, id, dir ? "mkdir" : "write", check);
}

/* file_delete: a file, a symlink or an empty directory. */
void
files_delete(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	files_forward(p, m, id, "delete", 0);
}

/* A frontd connection closed: no answer may reach it any more. */
void
files_front_gone(struct ipc_peer *front)
{
	struct files_wait	*w;

	TAILQ_FOREACH(w, &files_waits, entry)
		if (w->front == front)
			w->front = NULL;
}
