/*
 * sandboxd's side of brokerd: the one peer it takes requests from. Each
 * spawn arrives approved (identity, mode, profile, argv, limits); sandboxd
 * checks its shape again, builds the backend command line and runs it.
 */
#include <sys/types.h>
#include <sys/fsuid.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxd.h"

#define BROKER_PROBE_MAX_AGE_MS	30000

static void	broker_health(struct ipc_peer *, struct ipc_msg *);
static void	broker_spawn(struct ipc_peer *, struct ipc_msg *);
static void	broker_attach(struct ipc_peer *, struct ipc_msg *);
static void	broker_hangup(struct ipc_peer *, struct ipc_msg *);
static void	broker_list(struct ipc_peer *, struct ipc_msg *);
static void	broker_kill_session(struct ipc_peer *, struct ipc_msg *);
static void	broker_recording(struct ipc_peer *, struct ipc_msg *);
static void	broker_grant(struct ipc_peer *, struct ipc_msg *);
static void	broker_kill_user(struct ipc_peer *, struct ipc_msg *);
static void	broker_usage(struct ipc_peer *, struct ipc_msg *);
static void	broker_file(struct ipc_peer *, struct ipc_msg *);
static void	broker_egress_update(struct ipc_peer *, struct ipc_msg *);
static void	broker_ready(struct ipc_peer *);
static void	broker_closed(struct ipc_peer *);

const struct ipc_handler broker_handlers[] = {
	{ MSG_HEALTH,	broker_health },
	/* a command's stdin arrives as a memfd */
	{ MSG_SPAWN,	broker_spawn },
	{ MSG_ATTACH,	broker_attach },
	{ MSG_HANGUP,	broker_hangup },
	{ MSG_LIST,	broker_list },
	{ MSG_KILL_SESSION, broker_kill_session },
	{ MSG_RECORDING,	broker_recording },
	{ MSG_GRANT,	broker_grant },
	{ MSG_KILL_USER,	broker_kill_user },
	{ MSG_USAGE,	broker_usage },
	/* a write's content arrives as a memfd (files.c) */
	{ MSG_FILE,	broker_file },
	/* an admin's egress additions, passed on to egressd */
	{ MSG_EGRESS_UPDATE, broker_egress_update },
	{ NULL, NULL }
};

static const struct ipc_peer_cbs broker_cbs = { broker_ready, broker_closed };

/*
 * The links of brokerd's uid, oldest first. Exit events go to the newest
 * (a restarted brokerd's); when it goes, to the newest left, since a link
 * that came and went (a probe of the same uid) leaves brokerd's own open.
 */
struct broker_link {
	struct ipc_peer			*peer;
	TAILQ_ENTRY(broker_link)	 entry;
};
static TAILQ_HEAD(broker_link_head, broker_link) broker_links =
    TAILQ_HEAD_INITIALIZER(broker_links);

static struct config	*broker_conf;
static int64_t		 broker_started;	/* wall seconds, for hgctl status */

/*
 * What enforces what: the cgroups' mechanisms, whether each user has a
 * uid of their own, and whether disks have quotas.
 */
static struct json_object *
broker_containment(void)
{
	struct json_object	*o, *why;

	o = cgroup_json();
	json_object_object_add(o, "uid", json_object_new_string(
	    ids_per_user() ? "per-user" : "shared"));
	if (!ids_per_user() && json_object_object_get_ex(o, "not_enforced",
	    &why))
		json_object_object_add(why, "uid", json_object_new_string(
		    "sandboxd was not started as root: every spawn runs as "
		    "sandboxd's own uid"));
	json_object_object_add(o, "disk_quota",
	    json_object_new_boolean(workspace_quota_enabled()));
	if (!workspace_quota_enabled() &&
	    json_object_object_get_ex(o, "not_enforced", &why))
		json_object_object_add(why, "disk_quota",
		    json_object_new_string(workspace_quota_why()));
	return o;
}

/* The backend's state, probed again when the last probe is stale. */
static void
broker_health(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;

	backend_probe(BROKER_PROBE_MAX_AGE_MS);
	res = json_object_new_object();
	json_object_object_add(res, "backend", backend_json());
	json_object_object_add(res, "containment", broker_containment());
	json_object_object_add(res, "version",
	    json_object_new_string(HG_VERSION));
	json_object_object_add(res, "started",
	    json_object_new_int64(broker_started));
	json_object_object_add(res, "egress", egress_json());
	ipc_reply(p, m, res, NULL, 0);
}

/*
 * The request, user and session a message from brokerd is about become
 * the log context (a malformed request id is not shown).
 */
static void
broker_ctx(struct ipc_msg *m)
{
	log_ctx_set(json_str(m->obj, "request_id"), json_str(m->obj, "user"),
	    json_str(m->obj, "session"));
}

/* An array of strings (the protocol table checked it) into a strv. */
static void
broker_strings(struct json_object *arr, struct strv *sv)
{
	size_t	i;

	for (i = 0; arr != NULL && i < json_object_array_length(arr); i++)
		strv_add(sv, json_object_get_string(
		    json_object_array_get_idx(arr, i)));
}

/*
 * The user's workspace (workspace.c): the user's own uid:gid, 0700, with
 * its quota filesystem mounted where quotas apply.
 */
static int
broker_workspace(const char *user, uid_t uid, gid_t gid, char *out,
    size_t outsz, char *err, size_t errsz)
{
	return workspace_ensure(user, uid, gid, out, outsz, err, errsz);
}

/*
 * Resolve a spawn's cwd with the file-system ids of its user, since a
 * workspace of another uid (0700) is closed to sandboxd itself.
 */
static int
broker_cwd(const struct spawn_spec *s, const char *ws, const char *cwd,
    char *out, size_t outsz, char *err, size_t errsz)
{
	int	rc, as_user = s->uid != geteuid();

	if (as_user) {
		setfsgid(s->gid);
		setfsuid(s->uid);
		if ((uid_t)setfsuid((uid_t)-1) != s->uid) {
			setfsgid(getegid());
			snprintf(err, errsz, "cannot take uid %ld to enter the "
			    "workspace", (long)s->uid);
			return -1;
		}
	}
	rc = spawn_cwd(ws, cwd, out, outsz, err, errsz);
	if (as_user) {
		setfsuid(geteuid());
		setfsgid(getegid());
	}
	return rc;
}

/*
 * The ids a spawn runs as: per user (sandboxd keeps CAP_SETUID), the
 * uid and gid brokerd sent, checked; otherwise sandboxd's own. -1, err.
 */
static int
broker_ids(struct ipc_msg *m, struct spawn_spec *s, char *err, size_t errsz)
{
	int64_t	uid = -1, gid = -1;
	int	has_uid, has_gid;

	/* Integers in range when present: the protocol table checked. */
	has_uid = json_int(m->obj, "uid", &uid) == 0;
	has_gid = json_int(m->obj, "gid", &gid) == 0;
	if (!ids_per_user()) {
		/* One uid for everything: the spawn runs as sandboxd. */
		s->uid = geteuid();
		s->gid = getegid();
		return 0;
	}
	if (!has_uid) {
		snprintf(err, errsz, "no \"uid\" for the user: every spawn "
		    "needs its user's own uid when sandboxd runs as root");
		return -1;
	}
	if (!has_gid)
		gid = uid;
	if (ids_check(uid, gid, err, errsz) == -1)
		return -1;
	s->uid = uid;
	s->gid = gid;
	return 0;
}

/*
 * A direct spawn's grant, whose end sandboxd holds itself, brokerd up or
 * down: NULL, or the error code with err when it is past or cannot be
 * held.
 */
static const char *
broker_spawn_deadline(struct spawn_spec *s, int64_t deadline, char *err,
    size_t errsz)
{
	if (s->mode != MODE_DIRECT || deadline == 0)
		return NULL;
	if (grant_expired(deadline)) {
		log_warnx("direct spawn refused: its grant ended %lld ms ago",
		    (long long)(now_wall_ms() - deadline));
		snprintf(err, errsz, "the direct-mode grant has ended "
		    "(deadline_ms %lld is past)", (long long)deadline);
		return ERR_FORBIDDEN;
	}
	if (s->session != NULL && grant_set(s->session, s->user, deadline,
	    err, errsz) == -1)
		return ERR_BAD_REQUEST;
	s->deadline_ms = deadline;
	return NULL;
}

/*
 * A spawn request into its spec: what runs, for whom, as which ids, in
 * which mode and profile, until when. Types, ranges, the kind, mode and
 * profile's names, the user name and the request id were checked by the
 * protocol table; what is left is what the values mean. NULL, or the
 * error code with err.
 */
static const char *
broker_spawn_spec(struct ipc_msg *m, struct spawn_spec *s, struct strv *argv,
    struct strv *env, char *err, size_t errsz)
{
	const char	*perm = json_str(m->obj, "permission");
	int64_t		 deadline = 0;

	s->kind = strcmp(json_str(m->obj, "kind"), "terminal") == 0 ?
	    SPAWN_TERMINAL : SPAWN_COMMAND;
	s->mode = strcmp(json_str(m->obj, "mode"), "direct") == 0 ?
	    MODE_DIRECT : MODE_SANDBOX;
	s->user = json_str(m->obj, "user");
	s->session = json_str(m->obj, "session");
	s->term = json_str(m->obj, "term");
	broker_strings(json_object_object_get(m->obj, "argv"), argv);
	broker_strings(json_object_object_get(m->obj, "env"), env);
	if (argv->n == 0) {
		snprintf(err, errsz, "\"argv\" is empty");
		return ERR_BAD_REQUEST;
	}
	if (perm_parse(perm, &s->perm) == -1) {
		/* The table's profiles and sandboxd's differ: a bug. */
		log_warnx("spawn refused: no profile \"%s\" in sandboxd", perm);
		snprintf(err, errsz, "no profile \"%s\" in sandboxd", perm);
		return ERR_INTERNAL;
	}
	if (broker_ids(m, s, err, errsz) == -1) {
		log_warnx("spawn refused: %s", err);
		return ERR_BAD_REQUEST;
	}
	json_int(m->obj, "deadline_ms", &deadline);
	/*
	 * Under the docker runtime the docker CLI, which runs as sandboxd,
	 * hands the workspace to the container: it stays sandboxd's.
	 */
	if (broker_conf->runtime == RUNTIME_DOCKER) {
		s->uid = geteuid();
		s->gid = getegid();
	}
	return broker_spawn_deadline(s, deadline, err, errsz);
}

/*
 * An allowlist profile's only way out is egressd: without it (or under
 * the docker runtime, which has no bridge) the spawn fails now, before
 * anything is made or run. NULL, or the error code with err.
 */
static const char *
broker_spawn_egress(const struct spawn_spec *s, char *err, size_t errsz)
{
	if (broker_conf->runtime == RUNTIME_DOCKER) {
		docker_refuse(s, err, errsz);
		return ERR_UNAVAILABLE;
	}
	if (!egress_up()) {
		log_warnx("spawn refused: %s: egressd is not linked",
		    perm_name(s->perm));
		snprintf(err, errsz, "the %s profile is unavailable: the "
		    "egress proxy (egressd) is not running", perm_name(s->perm));
		return ERR_UNAVAILABLE;
	}
	return NULL;
}

/* A terminal answers at once: its id, mode, backend and where it runs. */
static void
broker_spawn_terminal(struct ipc_peer *p, struct ipc_msg *m, struct proc *pr,
    const struct spawn_spec *s)
{
	struct json_object	*res, *o;

	res = json_object_new_object();
	json_object_object_add(res, "id", json_object_new_string(spawn_id(pr)));
	json_object_object_add(res, "mode", json_object_new_string(
	    s->mode == MODE_DIRECT ? "direct" : "sandbox"));
	json_object_object_add(res, "backend",
	    json_object_new_string(spawn_backend(pr)));
	json_object_object_add(res, "sha256",
	    json_object_new_string(spawn_sha256(pr)));
	spawn_where_json(pr, res);
	if ((o = backend_container_json(s->user, s->perm)) != NULL)
		json_object_object_add(res, "container", o);
	ipc_reply(p, m, res, NULL, 0);
}

/* Run an approved spawn. Commands answer when done; terminals at once. */
static void
broker_spawn(struct ipc_peer *p, struct ipc_msg *m)
{
	struct spawn_spec	 s;
	struct strv		 argv, env, cmd, envp;
	struct proc		*pr;
	const char		*code;
	char			 ws[4096], wd[4096], err[512], why[256];
	char			 id[17], sock[4096];
	int			 egress;
	/* the defaults; the protocol table bounds what brokerd sends */
	int64_t			 timeout = 60000, cap = 1048576;
	int64_t			 cols = 80, rows = 24;
	int			 stdin_fd = m->nfds > 0 ? m->fds[0] : -1;

	memset(&s, 0, sizeof(s));
	s.seccomp_fd = -1;
	strv_init(&argv);
	strv_init(&env);
	strv_init(&cmd);
	strv_init(&envp);
	broker_ctx(m);
	json_int(m->obj, "timeout_ms", &timeout);
	json_int(m->obj, "output_cap", &cap);
	json_int(m->obj, "cols", &cols);
	json_int(m->obj, "rows", &rows);
	if ((code = broker_spawn_spec(m, &s, &argv, &env, err,
	    sizeof(err))) != NULL)
		goto out;
	egress = s.mode == MODE_SANDBOX && perm_allowlist(s.perm);
	if (egress && (code = broker_spawn_egress(&s, err,
	    sizeof(err))) != NULL)
		goto out;
	code = ERR_BAD_REQUEST;
	if (broker_workspace(s.user, s.uid, s.gid, ws, sizeof(ws), err,
	    sizeof(err)) == -1 || broker_cwd(&s, ws, json_str(m->obj, "cwd"),
	    wd, sizeof(wd), err, sizeof(err)) == -1)
		goto out;
	code = ERR_UNAVAILABLE;
	if (egress) {
		spawn_new_id(id);
		s.id = id;
		if (egress_spawn_open(id, s.user, s.session, s.uid, sock,
		    sizeof(sock), why, sizeof(why)) == -1) {
			snprintf(err, sizeof(err), "the %s profile is "
			    "unavailable: %s", perm_name(s.perm), why);
			goto out;
		}
		s.egress_sock = sock;
	}
	s.workspace = ws;
	s.cwd = wd;
	s.argv = argv.v;
	s.env = env.v;
	if (backend_build(&s, &cmd, &envp, err, sizeof(err)) == -1) {
		/* Never a weaker backend: the spawn fails, with the reason. */
		if (egress)
			egress_spawn_end(id);
		goto out;
	}
	pr = spawn_start(&s, backend_name_of(&s), &cmd, envp.v, stdin_fd,
	    timeout, cap, cols, rows, p, m->id, err, sizeof(err));
	if (s.seccomp_fd != -1)
		close(s.seccomp_fd);
	/* spawn_start's failure took the egress socket with it. */
	code = ERR_INTERNAL;
	if (pr == NULL)
		goto out;
	code = NULL;
	/*
	 * The listener goes to egressd; should that fail, nobody accepts on
	 * it and the bridge closes every connection: still no way out.
	 */
	if (egress && egress_spawn_listen(id,
	    json_object_object_get(m->obj, "egress_user"),
	    json_object_object_get(m->obj, "egress_session"), err,
	    sizeof(err)) == -1)
		log_warnx("spawn %s: %s", id, err);
	if (s.kind == SPAWN_TERMINAL)
		broker_spawn_terminal(p, m, pr, &s);
out:
	if (code != NULL)
		ipc_reply_error(p, m, code, "%s", err);
	strv_free(&argv);
	strv_free(&env);
	strv_free(&cmd);
	strv_free(&envp);
	log_ctx_clear();
}

/*
 * A workspace file operation: the user's ids and workspace as for a
 * spawn, then a child of the user's spawner does it as the user
 * (files.c), and answers later.
 */
static void
broker_file(struct ipc_peer *p, struct ipc_msg *m)
{
	struct spawn_spec	 s;
	const char		*op, *path;
	char			 ws[4096], err[512];
	int64_t			 size = -1;
	int			 content = m->nfds > 0 ? m->fds[0] : -1;
	int			 writing = 0;

	memset(&s, 0, sizeof(s));
	broker_ctx(m);
	/* Required, a user name, a path without control characters. */
	op = json_str(m->obj, "op");
	path = json_str(m->obj, "path");
	s.user = json_str(m->obj, "user");
	json_int(m->obj, "size", &size);
	/* op: read, list, write, mkdir or delete (the protocol table) */
	writing = strcmp(op, "write") == 0;
	if (writing != (m->nfds == 1) || m->nfds > 1 || (writing && size < 0)) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "a write (and only a "
		    "write) carries its content as one fd, with its \"size\"");
		goto out;
	}
	if (writing && broker_conf->max_upload > 0 &&
	    size > broker_conf->max_upload) {
		ipc_reply_error(p, m, ERR_TOO_LARGE, "%lld bytes is over "
		    "HOSTGATE_MAX_UPLOAD_BYTES (%ld)", (long long)size,
		    broker_conf->max_upload);
		goto out;
	}
	if (!fileop_path_ok(path)) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "malformed path: "
		    "relative, no empty, \".\" or \"..\" component");
		goto out;
	}
	if (broker_ids(m, &s, err, sizeof(err)) == -1) {
		log_warnx("file %s refused: %s", op, err);
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "%s", err);
		goto out;
	}
	/* Under docker the workspace stays sandboxd's, as for spawns. */
	if (broker_conf->runtime == RUNTIME_DOCKER) {
		s.uid = geteuid();
		s.gid = getegid();
	}
	if (broker_workspace(s.user, s.uid, s.gid, ws, sizeof(ws), err,
	    sizeof(err)) == -1) {
		log_warnx("file %s: %s", op, err);
		ipc_reply_error(p, m, ERR_INTERNAL, "%s", err);
		goto out;
	}
	if (files_start(p, m->id, s.user, spawn_per_user() &&
	    s.uid != geteuid(), s.uid, s.gid, ws, op, path, content, size, err,
	    sizeof(err)) == -1) {
		log_warnx("file %s: %s", op, err);
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "%s", err);
	}
out:
	log_ctx_clear();
}

/* A dup of a terminal's pty master, for frontd (through brokerd). */
static void
broker_attach(struct ipc_peer *p, struct ipc_msg *m)
{
	struct proc	*pr;
	const char	*id;
	int		 fd;

	broker_ctx(m);
	if ((id = json_str(m->obj, "proc")) == NULL ||
	    (pr = spawn_find(id)) == NULL || (fd = spawn_master(pr)) == -1)
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such live terminal");
	else
		ipc_reply(p, m, NULL, &fd, 1);
	log_ctx_clear();
}

/* Hang up a terminal (or command). */
static void
broker_hangup(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*id;

	broker_ctx(m);
	if ((id = json_str(m->obj, "proc")) == NULL ||
	    spawn_hangup(id) == -1)
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such live process");
	else
		ipc_reply(p, m, NULL, NULL, 0);
	log_ctx_clear();
}

/* Kill every process of a session in a mode (a direct grant ended). */
static void
broker_kill_session(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;
	const char		*session, *mode;
	int			 n, k = 0;

	/* Required, session 32 hex digits: the protocol table checked. */
	session = json_str(m->obj, "session");
	mode = json_str(m->obj, "mode");
	n = spawn_kill_session(session, strcmp(mode, "direct") == 0 ?
	    MODE_DIRECT : MODE_SANDBOX);
	/* A direct grant ended: its spawns' whole cgroups, and its deadline. */
	if (strcmp(mode, "direct") == 0) {
		k = cgroup_session_kill(session);
		grant_end(session);
	}
	if (n > 0 || k > 0)
		log_info("killed %d %s-mode spawns of session %.8s (%d "
		    "processes in their cgroups)", n, mode, session, k);
	res = json_object_new_object();
	json_object_object_add(res, "killed", json_object_new_int(n));
	ipc_reply(p, m, res, NULL, 0);
}

/* A direct grant started or was renewed: hold its deadline. */
static void
broker_grant(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*session, *user;
	char		 err[256];
	int64_t		 deadline;

	broker_ctx(m);
	session = json_str(m->obj, "session");
	user = json_str(m->obj, "user");
	/* Shapes checked by the protocol table; grant_set checks the rest. */
	json_int(m->obj, "deadline_ms", &deadline);
	if (grant_set(session, user, deadline, err, sizeof(err)) == -1) {
		log_warnx("malformed grant");
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "a grant needs "
		    "\"session\" (32 hex digits), \"user\" and "
		    "\"deadline_ms\" (wall-clock ms; 0: none)");
	} else	/* one already past ends at once, by its timer */
		ipc_reply(p, m, NULL, NULL, 0);
	log_ctx_clear();
}

/* A user was deleted: kill everything of theirs, their whole cgroup. */
static void
broker_kill_user(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res, *procs, *o;
	const char		*user, *u, *id;
	size_t			 i;
	int			 n = 0, k;

	broker_ctx(m);
	user = json_str(m->obj, "user");	/* a user name: the table checked */
	/* The table's entries (they end as killed), then the cgroups. */
	procs = spawn_list();
	for (i = 0; i < json_object_array_length(procs); i++) {
		o = json_object_array_get_idx(procs, i);
		u = json_str(o, "user");
		id = json_str(o, "id");
		if (u != NULL && id != NULL && strcmp(u, user) == 0 &&
		    spawn_hangup(id) == 0)
			n++;
	}
	json_object_put(procs);
	k = cgroup_user_kill(user);
	log_info("user %s deleted: killed %d spawns, %d processes in their "
	    "cgroups", user, n, k);
	res = json_object_new_object();
	json_object_object_add(res, "killed", json_object_new_int(n));
	json_object_object_add(res, "processes", json_object_new_int(k));
	ipc_reply(p, m, res, NULL, 0);
	log_ctx_clear();
}

/* A user's current usage and limits. */
static void
broker_usage(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;
	const char		*user;

	user = json_str(m->obj, "user");	/* a user name: the table checked */
	log_debug("usage of %s", user);
	res = cgroup_usage(user);
	json_object_object_add(res, "disk", workspace_usage(user));
	ipc_reply(p, m, res, NULL, 0);
}

/* A recording, read-only, for brokerd to hand on (hgctl, the panel). */
static void
broker_recording(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*id;
	int		 fd;

	broker_ctx(m);
	id = json_str(m->obj, "recording");	/* 16 hex digits: checked */
	if ((fd = record_open(id)) == -1) {
		if (errno != ENOENT)
			log_warn("recording %s", id);
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such recording");
	} else {
		ipc_reply(p, m, NULL, &fd, 1);
		close(fd);
	}
	log_ctx_clear();
}

/* The process table. */
static void
broker_list(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;

	res = json_object_new_object();
	json_object_object_add(res, "procs", spawn_list());
	json_object_object_add(res, "grants", grant_json());
	ipc_reply(p, m, res, NULL, 0);
}

/* brokerd's egress_update (checked by the table): on to egressd. */
static void
broker_egress_update(struct ipc_peer *p, struct ipc_msg *m)
{
	log_debug("egress update of %s (%s)", json_str(m->obj, "user"),
	    json_str(m->obj, "scope"));
	egress_update(m->obj);
}

/* The link exit events and egress records go to, or NULL. */
static struct ipc_peer *
broker_peer(void)
{
	struct broker_link	*l;

	l = TAILQ_LAST(&broker_links, broker_link_head);
	return l != NULL ? l->peer : NULL;
}

/* egressd's egress_log, its user and session sandboxd's: to brokerd. */
static void
broker_egress_log(struct json_object *o)
{
	if (broker_peer() == NULL) {
		log_warnx("egress record of spawn %s lost: brokerd is not "
		    "linked", json_str(o, "spawn"));
		return;
	}
	if (ipc_send(broker_peer(), json_object_get(o), NULL, 0) == -1)
		log_warnx("egress record of spawn %s lost: brokerd's queue "
		    "is full", json_str(o, "spawn"));
}

/* The answer to an exit event: nothing to do. */
static void
broker_event_ack(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
}

/* A terminal ended: tell brokerd. */
void
broker_proc_exited(struct proc *pr)
{
	struct json_object	*req, *bypass;

	if (broker_peer() == NULL)
		return;
	req = json_object_new_object();
	json_object_object_add(req, "type",
	    json_object_new_string(MSG_PROC_EXITED));
	json_object_object_add(req, "proc",
	    json_object_new_string(spawn_id(pr)));
	json_object_object_add(req, "status",
	    json_object_new_int(spawn_status(pr)));
	json_object_object_add(req, "oom",
	    json_object_new_boolean(spawn_oom(pr)));
	if ((bypass = spawn_bypass_json(pr)) != NULL)
		json_object_object_add(req, "egress_bypass", bypass);
	if (spawn_recording(pr) != NULL)
		json_object_object_add(req, "recording",
		    json_object_get(spawn_recording(pr)));
	ipc_request(broker_peer(), req, NULL, 0, 5000, broker_event_ack, NULL);
}

/* A link of brokerd's uid said hello: the newest takes the events. */
static void
broker_ready(struct ipc_peer *p)
{
	struct broker_link	*l;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		fatal("%s", __func__);
	l->peer = p;
	TAILQ_INSERT_TAIL(&broker_links, l, entry);
}

/* A link went: the events go to the newest of those left. */
static void
broker_closed(struct ipc_peer *p)
{
	struct broker_link	*l;

	TAILQ_FOREACH(l, &broker_links, entry)
		if (l->peer == p) {
			TAILQ_REMOVE(&broker_links, l, entry);
			free(l);
			break;
		}
	files_peer_gone(p);
}

/* Serve the socket for brokerd's uid only. */
void
broker_init(struct event_base *base, struct config *conf, uid_t broker_uid,
    int fd)
{
	broker_conf = conf;
	files_init(base, conf);
	egress_log_sink(broker_egress_log);
	broker_started = now_wall_ms() / 1000;
	/* Rootless, the uid alone cannot tell brokerd from frontd's jail. */
	ipc_server_admit(ipc_server_new(base, fd, ROLE_SANDBOXD, ROLE_BROKERD,
	    &broker_uid, 1, broker_handlers, &broker_cbs, NULL),
	    priv_admit_same_pidns);
}
