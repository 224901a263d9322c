/*
 * Terminal recordings, brokerd's part: the audit record when one closes,
 * and replay. The files are sandboxd's (its user, 0700 directory); brokerd
 * asks sandboxd for an O_RDONLY fd of one and hands the text on in pages,
 * so that hgctl's plain request/reply client needs no fd passing.
 */
#include <sys/types.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd.h"

#define RECORDING_PAGE		24576	/* bytes of cast per reply */
#define RECORDING_ASK_MS	10000

/* A replay request waiting for sandboxd's fd. */
struct recording_wait {
	struct ipc_peer			*peer;	/* NULL once it has gone */
	int64_t				 id;
	int64_t				 offset;
	char				 rec[17];
	TAILQ_ENTRY(recording_wait)	 entry;
};
static TAILQ_HEAD(, recording_wait) recording_waits =
    TAILQ_HEAD_INITIALIZER(recording_waits);

/* Whether a recording id is one: 16 lower-case hex digits. */
static int
recording_id_ok(const char *id)
{
	return str_is_hex(id, 16);
}

/*
 * sandboxd reported a closed recording with a terminal's exit: chain its
 * sha256 and size. The object carries the terminal's user and session.
 */
void
recording_closed(struct json_object *rec)
{
	struct json_object	*d, *v;
	const char		*user, *session, *keys[] = {
		"id", "file", "sha256", "bytes", "truncated", "incomplete",
		NULL
	};
	int			 i;

	if (!json_object_is_type(rec, json_type_object) ||
	    !recording_id_ok(json_str(rec, "id")) ||
	    json_str(rec, "sha256") == NULL ||
	    (user = json_str(rec, "user")) == NULL) {
		log_warnx("sandboxd reported a malformed recording");
		return;
	}
	session = json_str(rec, "session");
	d = json_object_new_object();
	for (i = 0; keys[i] != NULL; i++)
		if (json_object_object_get_ex(rec, keys[i], &v))
			json_object_object_add(d, i == 0 ? "terminal" : keys[i],
			    json_object_get(v));
	json_object_object_add(d, "recording",
	    json_object_new_string(json_str(rec, "id")));
	log_info("recording %s of %s closed: sha256 %s", json_str(rec, "id"),
	    user, json_str(rec, "sha256"));
	audit_append("recording", user, session != NULL && *session != '\0' ?
	    session : NULL, 1, NULL, d, 0);
}

/* Forget a wait. */
static void
recording_wait_free(struct recording_wait *w)
{
	TAILQ_REMOVE(&recording_waits, w, entry);
	free(w);
}

/* The length of data cut back so that no UTF-8 sequence is split. */
static size_t
recording_utf8_cut(const unsigned char *s, size_t n)
{
	size_t	i, need;

	for (i = n; i > 0 && n - i < 4; i--) {
		if ((s[i - 1] & 0xc0) == 0x80)
			continue;
		if (s[i - 1] < 0x80)
			return n;
		need = s[i - 1] >= 0xf0 ? 4 : s[i - 1] >= 0xe0 ? 3 : 2;
		return n - (i - 1) >= need ? n : i - 1;
	}
	return n;
}

/* sandboxd answered with the recording's fd: reply with one page. */
static void
recording_done(struct ipc_peer *sp, struct ipc_msg *r, void *arg)
{
	struct recording_wait	*w = arg;
	struct json_object	*res, *e;
	struct ipc_msg		 m;
	unsigned char		 buf[RECORDING_PAGE];
	ssize_t			 n;
	size_t			 len;
	int			 fd;

	memset(&m, 0, sizeof(m));
	m.id = w->id;
	fd = r != NULL && r->nfds > 0 ? r->fds[0] : -1;
	if (w->peer == NULL)
		goto out;
	if (r == NULL) {
		ipc_reply_error(w->peer, &m, ERR_UNAVAILABLE,
		    "sandboxd did not answer");
		goto out;
	}
	if (json_object_object_get_ex(r->obj, "error", &e) || fd == -1) {
		ipc_reply_error(w->peer, &m, ERR_NOT_FOUND,
		    "no such recording");
		goto out;
	}
	/* lseek and read: brokerd's seccomp filter has no pread. */
	if (lseek(fd, w->offset, SEEK_SET) == -1 ||
	    (n = read(fd, buf, sizeof(buf))) == -1) {
		log_warn("recording %s: read", w->rec);
		ipc_reply_error(w->peer, &m, ERR_INTERNAL,
		    "the recording cannot be read");
		goto out;
	}
	len = (size_t)n < sizeof(buf) ? (size_t)n :
	    recording_utf8_cut(buf, n);
	res = json_object_new_object();
	json_object_object_add(res, "data",
	    json_object_new_string_len((const char *)buf, len));
	json_object_object_add(res, "next",
	    json_object_new_int64(w->offset + len));
	json_object_object_add(res, "eof",
	    json_object_new_boolean(len == 0));
	ipc_reply(w->peer, &m, res, NULL, 0);
out:
	recording_wait_free(w);
}

/*
 * audit_replay {id, offset}: a page of a recording's text, {data, next,
 * eof}. An id is 16 lower-case hex digits; anything else is refused here
 * and again by sandboxd.
 */
void
recording_replay(struct ipc_peer *p, struct ipc_msg *m)
{
	struct recording_wait	*w;
	struct json_object	*req;
	struct ipc_peer		*sp;
	const char		*id = json_str(m->obj, "recording");
	int64_t			 offset = 0;

	if (!recording_id_ok(id)) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST,
		    "a recording id is 16 lower-case hex digits");
		return;
	}
	/* offset: absent, or 0 to a recording's largest size (the table) */
	json_int(m->obj, "offset", &offset);
	if ((sp = sandbox_peer()) == NULL) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE,
		    "sandboxd is unreachable");
		return;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("%s", __func__);
	w->peer = p;
	w->id = m->id;
	w->offset = offset;
	snprintf(w->rec, sizeof(w->rec), "%s", id);
	TAILQ_INSERT_TAIL(&recording_waits, w, entry);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string(MSG_RECORDING));
	json_object_object_add(req, "recording", json_object_new_string(id));
	if (ipc_request(sp, req, NULL, 0, RECORDING_ASK_MS, recording_done,
	    w) == -1) {
		recording_wait_free(w);
		ipc_reply_error(p, m, ERR_UNAVAILABLE,
		    "sandboxd is unreachable");
	}
}

/* A peer (hgctl) has gone: its waits answer nobody. */
void
recording_peer_closed(struct ipc_peer *p)
{
	struct recording_wait	*w;

	TAILQ_FOREACH(w, &recording_waits, entry)
		if (w->peer == p)
			w->peer = NULL;
}

/* GET /api/admin/recordings/{id}?offset=N: a page, as for hgctl. */
void
admin_recording(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	recording_replay(p, m);
}
