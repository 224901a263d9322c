/*
 * The "file" message of brokerd: one workspace file operation (read,
 * list, write, mkdir, delete), done by a short-lived child that the
 * user's spawner starts (spawner.c): in the user's cgroups, with the
 * user's uid and gid, no capability and no_new_privs, it opens the
 * workspace and resolves the path beneath it (fileops.c), then answers
 * on a socketpair of its own with the result and, for read and list, an
 * fd. sandboxd's event loop only reads that answer: a slow or hung file
 * system delays this operation alone, and past its timeout the child is
 * killed and brokerd told.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxd.h"

#define FILES_BYTES_PER_MS	8192	/* a write's size adds time: 8 MB/s */
#define FILES_TIMEOUT_MAX_MS	(6 * 3600 * 1000)	/* the longest */
#define FILES_MAX		256	/* operations at once, all users */

/* child -> sandboxd: one datagram, with an fd for read and list. */
struct files_rep {
	char		code[16];	/* "" when done, else an ERR_* code */
	char		msg[256];
	int64_t		size;
	int64_t		mtime;
	int64_t		count;
	int32_t		truncated;
	int32_t		created;
	int32_t		deleted;
	int32_t		pad;
};

/* One operation under way. */
struct files_job {
	uint64_t		 seq;
	pid_t			 pid;		/* 0 until the spawner says */
	int			 started;	/* the spawner answered */
	int			 exited;	/* reaped (or never ran) */
	int			 sock;		/* -1 once answered */
	struct event		*ev;
	struct event		*ev_timeout;
	struct ipc_peer		*peer;		/* brokerd, to answer */
	int64_t			 req_id;
	char			 op[8];
	char			 user[40];
	char			 request_id[LOG_REQUEST_ID_LEN + 1];
	int64_t			 begun;		/* monotonic ms */
	int64_t			 limit;		/* its timeout, ms */
	TAILQ_ENTRY(files_job)	 entry;
};

static TAILQ_HEAD(, files_job)	 files_jobs =
    TAILQ_HEAD_INITIALIZER(files_jobs);
static struct event_base	*files_base;
static uint64_t			 files_seq;
static size_t			 files_n;
static int64_t			 files_timeout_ms;	/* beside the bytes */

/* Free a job once it is answered, started (or failed) and reaped. */
static void
files_free(struct files_job *j)
{
	if (j->sock != -1 || !j->started || !j->exited)
		return;
	if (j->ev != NULL)
		event_free(j->ev);
	if (j->ev_timeout != NULL)
		event_free(j->ev_timeout);
	TAILQ_REMOVE(&files_jobs, j, entry);
	files_n--;
	free(j);
}

/* Stop listening for the child: the answer is given (or never will be). */
static void
files_done(struct files_job *j)
{
	if (j->ev != NULL)
		event_del(j->ev);
	if (j->ev_timeout != NULL)
		evtimer_del(j->ev_timeout);
	if (j->sock != -1)
		close(j->sock);
	j->sock = -1;
}

/* Answer brokerd with an error, unless it has gone; the job is done. */
static void
files_fail(struct files_job *j, const char *code, const char *msg)
{
	struct ipc_msg	m;

	memset(&m, 0, sizeof(m));
	m.id = j->req_id;
	log_ctx_set(j->request_id[0] ? j->request_id : NULL, j->user, NULL);
	log_warnx("file %s: %s", j->op, msg);
	if (j->peer != NULL)
		ipc_reply_error(j->peer, &m, code, "%s", msg);
	log_ctx_clear();
	files_done(j);
}

/* The child's answer: a result (and fd) for brokerd. */
static void
files_answer(struct files_job *j, const struct files_rep *rep, int fd)
{
	struct json_object	*res;
	struct ipc_msg		 m;

	memset(&m, 0, sizeof(m));
	m.id = j->req_id;
	if (rep->code[0] != '\0') {
		log_ctx_set(j->request_id[0] ? j->request_id : NULL, j->user,
		    NULL);
		/* The user's own paths: a debug line, not a warning. */
		log_debug("file %s refused: %s: %s", j->op, rep->code,
		    rep->msg);
		if (j->peer != NULL)
			ipc_reply_error(j->peer, &m, rep->code, "%s", rep->msg);
		log_ctx_clear();
		return;
	}
	res = json_object_new_object();
	if (strcmp(j->op, "read") == 0) {
		json_object_object_add(res, "size",
		    json_object_new_int64(rep->size));
		json_object_object_add(res, "mtime",
		    json_object_new_int64(rep->mtime));
	} else if (strcmp(j->op, "list") == 0) {
		json_object_object_add(res, "count",
		    json_object_new_int64(rep->count));
		json_object_object_add(res, "truncated",
		    json_object_new_boolean(rep->truncated));
	} else if (strcmp(j->op, "delete") == 0)
		json_object_object_add(res, "deleted",
		    json_object_new_boolean(1));
	else {
		json_object_object_add(res, "size",
		    json_object_new_int64(rep->size));
		json_object_object_add(res, "mtime",
		    json_object_new_int64(rep->mtime));
		json_object_object_add(res, "created",
		    json_object_new_boolean(rep->created));
	}
	log_ctx_set(j->request_id[0] ? j->request_id : NULL, j->user, NULL);
	log_debug("file %s done in %lld ms", j->op,
	    (long long)(now_mono_ms() - j->begun));
	log_ctx_clear();
	if (j->peer != NULL)
		ipc_reply(j->peer, &m, res, fd != -1 ? &fd : NULL,
		    fd != -1 ? 1 : 0);
	else
		json_object_put(res);
}

/* The child's socket is readable: its answer, or its end without one. */
static void
files_read(evutil_socket_t fd, short ev, void *arg)
{
	struct files_job	*j = arg;
	struct files_rep	 rep;
	struct msghdr		 msg;
	struct iovec		 iov;
	struct cmsghdr		*cm;
	union {
		char		buf[CMSG_SPACE(sizeof(int) * 2)];
		struct cmsghdr	align;
	} cmsgbuf;
	ssize_t			 n;
	int			 fds[2], nfds = 0, got, i, want;

	memset(&rep, 0, sizeof(rep));
	memset(&msg, 0, sizeof(msg));
	iov.iov_base = &rep;
	iov.iov_len = sizeof(rep);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cmsgbuf.buf;
	msg.msg_controllen = sizeof(cmsgbuf.buf);
	n = recvmsg(j->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	for (cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		got = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < got; i++) {
			int	f;

			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (nfds < 2)
				fds[nfds++] = f;
			else
				close(f);
		}
	}
	rep.code[sizeof(rep.code) - 1] = '\0';
	rep.msg[sizeof(rep.msg) - 1] = '\0';
	want = rep.code[0] == '\0' && (strcmp(j->op, "read") == 0 ||
	    strcmp(j->op, "list") == 0);
	if (n == 0)
		files_fail(j, ERR_INTERNAL, "the file operation ended without "
		    "an answer");
	else if (n != sizeof(rep) || (msg.msg_flags & (MSG_TRUNC |
	    MSG_CTRUNC)) || nfds != want)
		files_fail(j, ERR_INTERNAL, "the file operation gave a "
		    "malformed answer");
	else {
		files_answer(j, &rep, want ? fds[0] : -1);
		files_done(j);
	}
	while (nfds > 0)
		close(fds[--nfds]);
	files_free(j);
}

/* The operation took too long: its child is killed, brokerd told. */
static void
files_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct files_job	*j = arg;
	char			 msg[160];

	if (j->pid > 0 && !j->exited)
		kill(j->pid, SIGKILL);
	snprintf(msg, sizeof(msg), "the file operation timed out after %lld "
	    "ms, its limit %lld ms (the workspace's file system is slow or "
	    "hung)", (long long)(now_mono_ms() - j->begun),
	    (long long)j->limit);
	files_fail(j, ERR_UNAVAILABLE, msg);
	files_free(j);
}

/* Hand an operation to the user's spawner and wait for it on the loop. */
int
files_start(struct ipc_peer *peer, int64_t req_id, const char *user,
    int setid, uid_t uid, gid_t gid, const char *workspace, const char *op,
    const char *path, int content, int64_t size, char *err, size_t errsz)
{
	struct spawner_file_job	 sj;
	struct files_job	*j;
	struct timeval		 tv;
	const char		*rid;
	int64_t			 ms;
	int			 sv[2];

	if (files_n >= FILES_MAX) {
		snprintf(err, errsz, "too many file operations at once");
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(err, errsz, "socketpair: %s", strerror(errno));
		return -1;
	}
	if ((j = calloc(1, sizeof(*j))) == NULL)
		fatal("%s", __func__);
	j->seq = FILES_SEQ | ++files_seq;
	j->sock = sv[0];
	j->peer = peer;
	j->req_id = req_id;
	j->begun = now_mono_ms();
	snprintf(j->op, sizeof(j->op), "%s", op);
	snprintf(j->user, sizeof(j->user), "%s", user);
	if ((rid = log_ctx_request_id()) != NULL)
		snprintf(j->request_id, sizeof(j->request_id), "%s", rid);
	memset(&sj, 0, sizeof(sj));
	sj.seq = j->seq;
	sj.user = user;
	sj.setid = setid;
	sj.uid = uid;
	sj.gid = gid;
	sj.workspace = workspace;
	sj.op = op;
	sj.path = path;
	sj.size = size;
	sj.sock = sv[1];
	sj.content = content;
	if (spawner_file_submit(&sj, err, errsz) == -1) {
		close(sv[0]);
		close(sv[1]);
		free(j);
		return -1;
	}
	close(sv[1]);
	if ((j->ev = event_new(files_base, j->sock, EV_READ | EV_PERSIST,
	    files_read, j)) == NULL ||
	    (j->ev_timeout = evtimer_new(files_base, files_timeout, j)) == NULL)
		fatalx("event_new");
	event_add(j->ev, NULL);
	ms = files_timeout_ms + (size > 0 ? size / FILES_BYTES_PER_MS : 0);
	if (ms > FILES_TIMEOUT_MAX_MS)
		ms = FILES_TIMEOUT_MAX_MS;	/* HOSTGATE_MAX_UPLOAD_BYTES=max */
	j->limit = ms;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(j->ev_timeout, &tv);
	TAILQ_INSERT_TAIL(&files_jobs, j, entry);
	files_n++;
	return 0;
}

/* The spawner's answer: the child's pid, or why it did not start. */
void
files_started(uint64_t seq, pid_t pid, const char *err)
{
	struct files_job	*j;

	TAILQ_FOREACH(j, &files_jobs, entry)
		if (j->seq == seq)
			break;
	if (j == NULL) {
		if (pid > 0)
			kill(pid, SIGKILL);	/* reaped as nobody's (spawn.c) */
		return;
	}
	j->started = 1;
	if (pid > 0) {
		j->pid = pid;
		if (j->sock == -1)
			kill(pid, SIGKILL);	/* timed out meanwhile */
	} else
		j->exited = 1;
	if (err[0] != '\0' && j->sock != -1)
		files_fail(j, ERR_INTERNAL, err);
	files_free(j);
	/* It may have exited before its pid was known: reap it now. */
	spawn_reap();
}

/* The pids spawn_reap may wait for. */
int
files_pids(pid_t *pids, int max)
{
	struct files_job	*j;
	int			 n = 0;

	TAILQ_FOREACH(j, &files_jobs, entry)
		if (j->pid > 0 && !j->exited && n < max)
			pids[n++] = j->pid;
	return n;
}

/* A reaped child: 1 when it was an operation's. */
int
files_reaped(pid_t pid, int status)
{
	struct files_job	*j;

	TAILQ_FOREACH(j, &files_jobs, entry)
		if (j->pid == pid && !j->exited)
			break;
	if (j == NULL)
		return 0;
	j->exited = 1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		log_debug("file %s of %s: its child ended with status %d",
		    j->op, j->user, status);
	/* An answer it sent is still in the socket: read before giving up. */
	if (j->sock != -1)
		files_read(j->sock, EV_READ, j);
	else
		files_free(j);
	return 1;
}

/* brokerd went away: its answers are dropped. */
void
files_peer_gone(struct ipc_peer *peer)
{
	struct files_job	*j;

	TAILQ_FOREACH(j, &files_jobs, entry)
		if (j->peer == peer)
			j->peer = NULL;
}

/* Send the child's answer and its fd (or -1) to sandboxd. */
static void
files_send(int sock, const struct files_rep *rep, int fd)
{
	struct msghdr	 msg;
	struct iovec	 iov;
	struct cmsghdr	*cm;
	union {
		char		buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr	align;
	} cmsgbuf;

	memset(&msg, 0, sizeof(msg));
	iov.iov_base = (void *)rep;
	iov.iov_len = sizeof(*rep);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (fd != -1) {
		memset(&cmsgbuf, 0, sizeof(cmsgbuf));
		msg.msg_control = cmsgbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	while (sendmsg(sock, &msg, MSG_NOSIGNAL) == -1 && errno == EINTR)
		;
}

/* The operation itself, in the child of the user's uid. */
void
files_child(const char *workspace, const char *op, const char *path,
    int content, int64_t size, int sock)
{
	struct fileop_result	 r;
	struct files_rep	 rep;
	int			 wsfd;

	memset(&rep, 0, sizeof(rep));
	/* The workspace as the user sees it: their own directory, no link. */
	if ((wsfd = fileop_workspace(workspace)) == -1) {
		snprintf(rep.code, sizeof(rep.code), "%s", errno == ENOENT ?
		    ERR_NOT_FOUND : ERR_INTERNAL);
		snprintf(rep.msg, sizeof(rep.msg), "the workspace cannot be "
		    "opened: %s", strerror(errno));
		files_send(sock, &rep, -1);
		return;
	}
	fileop_run(wsfd, op, path, content, size, &r);
	if (r.code != NULL)
		snprintf(rep.code, sizeof(rep.code), "%s", r.code);
	snprintf(rep.msg, sizeof(rep.msg), "%s", r.msg);
	rep.size = r.size;
	rep.mtime = r.mtime;
	rep.count = r.count;
	rep.truncated = r.truncated;
	rep.created = r.created;
	rep.deleted = r.deleted;
	files_send(sock, &rep, r.code == NULL ? r.fd : -1);
	if (r.fd != -1)
		close(r.fd);
	close(wsfd);
}

/* The operations' event base and timeout (HOSTGATE_FILE_TIMEOUT_SECONDS). */
void
files_init(struct event_base *base, struct config *conf)
{
	files_base = base;
	files_timeout_ms = (int64_t)conf->file_timeout * 1000;
}
