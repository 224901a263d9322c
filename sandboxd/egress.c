/*
 * sandboxd's side of the egress proxy. egressd connects to
 * RUN_DIR/egress/sandbox.sock (the one directory of its jail); one
 * egressd at a time, a new one replaces the old. Each spawn under an
 * allowlist profile gets a listening Unix socket of its own,
 * RUN_DIR/proxy/SPAWNID.sock, which bwrap binds into the sandbox and
 * whose fd goes to egressd in `egress_listen`; sandboxd keeps no copy.
 * When the spawn is reaped the file goes and egressd gets `egress_close`.
 * With egressd not linked, allowlist spawns fail at once: never a
 * sandbox with a network it should not have, nor one with none that
 * the agent takes for a broken proxy.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxd.h"

#define EGRESS_BACKLOG	128	/* pending connections of one spawn */
#define EGRESS_RECENT	128	/* ended spawns whose late records count */

static void	egress_log(struct ipc_peer *, struct ipc_msg *);
static void	egress_ready(struct ipc_peer *);
static void	egress_closed(struct ipc_peer *);

/* What egressd sends sandboxd. */
static const struct ipc_handler egress_handlers[] = {
	{ MSG_EGRESS_LOG,	egress_log },
	{ NULL, NULL }
};

static const struct ipc_peer_cbs egress_cbs = { egress_ready, egress_closed };

/* A live allowlist spawn: its socket, and whose it is. */
struct egress_spawn {
	char			 id[17];
	char			 user[64];
	char			 session[33];	/* "" when none */
	char			 path[4096];
	int			 fd;		/* until handed to egressd */
	int			 sent;		/* egressd has its listener */
	TAILQ_ENTRY(egress_spawn) entry;
};

static TAILQ_HEAD(, egress_spawn) egress_spawns =
    TAILQ_HEAD_INITIALIZER(egress_spawns);

static struct {
	struct config	*conf;
	struct ipc_peer	*peer;		/* the linked egressd, or NULL */
	int		 fd;		/* sandbox.sock, listening, or -1 */
	int		 separate;	/* spawns have uids of their own */
	uid_t		 uid;		/* egressd's */
	char		 why[256];	/* why egressd cannot link */
	char		 proxy_dir[4096];
	void		(*sink)(struct json_object *);
	/* spawns ended lately: their summaries arrive after egress_close */
	struct {
		char	id[17];
		char	user[64];
		char	session[33];
	}		 recent[EGRESS_RECENT];
	int		 nrecent;
} eg = { .fd = -1 };

/* A spawn's entry, or NULL. */
static struct egress_spawn *
egress_find(const char *id)
{
	struct egress_spawn	*e;

	TAILQ_FOREACH(e, &egress_spawns, entry)
		if (strcmp(e->id, id) == 0)
			return e;
	return NULL;
}

/*
 * Remove the socket files a previous sandboxd left in RUN_DIR/proxy:
 * their spawns are gone with it.
 */
static void
egress_sweep(const char *dir)
{
	struct dirent	*d;
	DIR		*dp;
	char		 path[4096];
	int		 n = 0;

	if ((dp = opendir(dir)) == NULL) {
		log_warn("opendir %s", dir);
		return;
	}
	while ((d = readdir(dp)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (unlink(path) == 0)
			n++;
		else
			log_warn("unlink %s", path);
	}
	closedir(dp);
	if (n > 0)
		log_info("egress: removed %d stale spawn sockets from %s", n,
		    dir);
}

/*
 * As root before the privilege drop (or rootless at start): the
 * directories, the sweep, and the socket egressd connects to, which only
 * HOSTGATE_EGRESS_USER (rootless: sandboxd's own uid) may reach.
 */
void
egress_init(struct config *conf)
{
	struct passwd	*pw;
	char		*dir, *path;
	uid_t		 uid = getuid(), peer_uid = getuid();
	gid_t		 gid = getgid(), peer_gid = getgid();
	int		 fd, separate;

	eg.conf = conf;
	eg.fd = -1;
	separate = priv_separate(conf->sandbox_user);
	eg.separate = separate;
	if (separate)
		priv_lookup(conf->sandbox_user, &uid, &gid);
	snprintf(eg.proxy_dir, sizeof(eg.proxy_dir), "%s/proxy", conf->run_dir);
	/* 0711: each spawn's uid reaches its own socket (0600) by name. */
	priv_dir("egress spawn socket directory", eg.proxy_dir, uid, gid,
	    separate ? 0711 : 0700);
	egress_sweep(eg.proxy_dir);

	if (separate) {
		errno = 0;
		if ((pw = getpwnam(conf->egress_user)) == NULL) {
			snprintf(eg.why, sizeof(eg.why), "HOSTGATE_EGRESS_USER "
			    "%s does not exist: egressd cannot link",
			    conf->egress_user);
			log_warnx("egress: %s", eg.why);
			return;
		}
		peer_uid = pw->pw_uid;
		peer_gid = pw->pw_gid;
	}
	dir = path_join(conf->run_dir, SOCK_EGRESS_DIR);
	/* 0711: egressd passes through to the socket, lists nothing. */
	priv_dir("egress directory", dir, uid, gid, separate ? 0711 : 0700);
	free(dir);
	path = path_join(conf->run_dir, SOCK_SANDBOX_EGRESS);
	/* Owner sandboxd, group egressd's: nobody else may connect. */
	fd = ipc_listen(path, uid, separate ? peer_gid : gid,
	    separate ? 0660 : 0600);
	free(path);
	eg.fd = fd;
	eg.uid = peer_uid;
	snprintf(eg.why, sizeof(eg.why), "the egress proxy (egressd) is not "
	    "running");
}

/* Serve egressd's socket on base's loop (after the privilege drop). */
void
egress_start(struct event_base *base)
{
	if (eg.fd == -1)
		return;
	/*
	 * The uid alone tells egressd: no same-pidns check, since egressd
	 * runs in a PID namespace of its own (its jail), as frontd does.
	 */
	ipc_server_new(base, eg.fd, ROLE_SANDBOXD, ROLE_EGRESSD, &eg.uid, 1,
	    egress_handlers, &egress_cbs, NULL);
}

/*
 * Whether each spawn's uid can reach its socket by name: bwrap, as that
 * uid, resolves the path it binds into the sandbox, so the run directory
 * must let others through (1771 from tmpfiles.d; 0755 when sandboxd made
 * it). When it does not, why (one uid for everything: always fine).
 */
static const char *
egress_reachable(void)
{
	static char	 why[512];
	struct stat	 st;

	if (!eg.separate)
		return NULL;
	if (stat(eg.conf->run_dir, &st) == -1) {
		snprintf(why, sizeof(why), "%s: %s", eg.conf->run_dir,
		    strerror(errno));
		return why;
	}
	if ((st.st_mode & S_IXOTH) == 0) {
		snprintf(why, sizeof(why), "the run directory %s is mode %04o: "
		    "the spawns' uids cannot reach their sockets in %s/proxy "
		    "(give it o+x, as tmpfiles.d's 1771)", eg.conf->run_dir,
		    (unsigned)(st.st_mode & 07777), eg.conf->run_dir);
		return why;
	}
	return NULL;
}

/* Whether egressd is linked now. */
int
egress_up(void)
{
	return eg.peer != NULL;
}

/* {"ok", "reason"} for sandboxd's health reply. */
struct json_object *
egress_json(void)
{
	struct json_object	*o;
	const char		*why = NULL;

	if (!egress_up())
		why = eg.why[0] != '\0' ? eg.why :
		    "the egress proxy (egressd) is not running";
	else
		why = egress_reachable();
	o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(why == NULL));
	json_object_object_add(o, "reason", why != NULL ?
	    json_object_new_string(why) : NULL);
	return o;
}

/* Where egressd's records go on (broker.c: to brokerd). */
void
egress_log_sink(void (*sink)(struct json_object *))
{
	eg.sink = sink;
}

/*
 * Make a spawn's listening socket RUN_DIR/proxy/ID.sock for uid (0600;
 * in root mode the spawn's own uid owns it): 0, or -1 and err.
 */
int
egress_spawn_open(const char *id, const char *user, const char *session,
    uid_t uid, char *path, size_t pathsz, char *err, size_t errsz)
{
	struct sockaddr_un	 sun;
	struct egress_spawn	*e;
	const char		*why;
	int			 fd;

	if (!egress_up()) {
		snprintf(err, errsz, "%s", eg.why);
		return -1;
	}
	if ((why = egress_reachable()) != NULL) {
		log_warnx("egress: %s", why);
		snprintf(err, errsz, "%s", why);
		return -1;
	}
	if ((e = calloc(1, sizeof(*e))) == NULL)
		fatal("%s", __func__);
	snprintf(e->id, sizeof(e->id), "%s", id);
	snprintf(e->user, sizeof(e->user), "%s", user);
	snprintf(e->session, sizeof(e->session), "%s",
	    session != NULL ? session : "");
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if ((size_t)snprintf(e->path, sizeof(e->path), "%s/%s.sock",
	    eg.proxy_dir, id) >= sizeof(sun.sun_path)) {
		snprintf(err, errsz, "egress socket path too long: %s",
		    e->path);
		free(e);
		return -1;
	}
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", e->path);
	(void)unlink(e->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		snprintf(err, errsz, "egress socket %s: %s", e->path,
		    strerror(errno));
		goto fail;
	}
	/* Owner and mode first, then listen: nobody connects in between. */
	if ((uid != geteuid() && chown(e->path, uid, -1) == -1) ||
	    chmod(e->path, 0600) == -1 || listen(fd, EGRESS_BACKLOG) == -1) {
		snprintf(err, errsz, "egress socket %s: %s", e->path,
		    strerror(errno));
		(void)unlink(e->path);
		goto fail;
	}
	e->fd = fd;
	TAILQ_INSERT_TAIL(&egress_spawns, e, entry);
	snprintf(path, pathsz, "%s", e->path);
	return 0;
fail:
	if (fd != -1)
		close(fd);
	free(e);
	return -1;
}

/* An array of strings for egressd: a copy of arr, or an empty one. */
static struct json_object *
egress_list(struct json_object *arr)
{
	if (arr != NULL && json_object_is_type(arr, json_type_array))
		return json_object_get(arr);
	return json_object_new_array();
}

/*
 * The spawn started: its listener goes to egressd with the admin
 * additions of its user and session; sandboxd's copy is closed.
 */
int
egress_spawn_listen(const char *id, struct json_object *allow_user,
    struct json_object *allow_session, char *err, size_t errsz)
{
	struct json_object	*o;
	struct egress_spawn	*e;
	int			 rc;

	if ((e = egress_find(id)) == NULL || e->fd == -1) {
		snprintf(err, errsz, "egress: no socket for spawn %s", id);
		return -1;
	}
	if (eg.peer == NULL) {
		snprintf(err, errsz, "%s", eg.why);
		return -1;
	}
	o = json_object_new_object();
	json_object_object_add(o, "type",
	    json_object_new_string(MSG_EGRESS_LISTEN));
	json_object_object_add(o, "spawn", json_object_new_string(e->id));
	json_object_object_add(o, "user", json_object_new_string(e->user));
	if (e->session[0] != '\0')
		json_object_object_add(o, "session",
		    json_object_new_string(e->session));
	json_object_object_add(o, "allow_user", egress_list(allow_user));
	json_object_object_add(o, "allow_session", egress_list(allow_session));
	rc = ipc_send(eg.peer, o, &e->fd, 1);
	close(e->fd);
	e->fd = -1;
	if (rc == -1) {
		snprintf(err, errsz, "egress: cannot hand the socket of spawn "
		    "%s to egressd", id);
		return -1;
	}
	e->sent = 1;
	log_debug("egress: spawn %s listens through egressd", id);
	return 0;
}

/* Remember an ended spawn, so that its last summaries still count. */
static void
egress_recent(const struct egress_spawn *e)
{
	int	i = eg.nrecent++ % EGRESS_RECENT;

	snprintf(eg.recent[i].id, sizeof(eg.recent[i].id), "%s", e->id);
	snprintf(eg.recent[i].user, sizeof(eg.recent[i].user), "%s", e->user);
	snprintf(eg.recent[i].session, sizeof(eg.recent[i].session), "%s",
	    e->session);
}

/* The spawn is gone, or never started: its socket and listener go. */
void
egress_spawn_end(const char *id)
{
	struct json_object	*o;
	struct egress_spawn	*e;

	if ((e = egress_find(id)) == NULL)
		return;
	TAILQ_REMOVE(&egress_spawns, e, entry);
	if (e->fd != -1)
		close(e->fd);
	if (unlink(e->path) == -1 && errno != ENOENT)
		log_warn("unlink %s", e->path);
	if (e->sent && eg.peer != NULL) {
		o = json_object_new_object();
		json_object_object_add(o, "type",
		    json_object_new_string(MSG_EGRESS_CLOSE));
		json_object_object_add(o, "spawn",
		    json_object_new_string(e->id));
		if (ipc_send(eg.peer, o, NULL, 0) == -1)
			log_warnx("egress: cannot send egress_close of spawn %s",
			    e->id);
	}
	if (e->sent)
		egress_recent(e);
	free(e);
}

/* brokerd's egress_update: the same to egressd (its live listeners). */
void
egress_update(struct json_object *obj)
{
	if (eg.peer == NULL) {
		log_debug("egress: update not passed on: egressd not linked");
		return;
	}
	if (ipc_send(eg.peer, json_object_get(obj), NULL, 0) == -1)
		log_warnx("egress: cannot pass an update on to egressd");
}

/*
 * Whose spawn a record is about, as sandboxd knows it: 0 with user and
 * session (NULL for none), or -1 when the spawn is none of egressd's.
 */
static int
egress_owner(const char *id, const char **user, const char **session)
{
	struct egress_spawn	*e;
	int			 i, n;

	if ((e = egress_find(id)) != NULL && e->sent) {
		*user = e->user;
		*session = e->session[0] != '\0' ? e->session : NULL;
		return 0;
	}
	n = eg.nrecent < EGRESS_RECENT ? eg.nrecent : EGRESS_RECENT;
	for (i = 0; i < n; i++)
		if (strcmp(eg.recent[i].id, id) == 0) {
			*user = eg.recent[i].user;
			*session = eg.recent[i].session[0] != '\0' ?
			    eg.recent[i].session : NULL;
			return 0;
		}
	return -1;
}

/*
 * egressd's record of a connection (or a minute's summary): passed on to
 * brokerd for the audit log, with the user and session sandboxd holds
 * for the spawn, not egressd's word for them.
 */
static void
egress_log(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*o;
	const char		*id, *user, *session;

	id = json_str(m->obj, "spawn");
	if (id == NULL || egress_owner(id, &user, &session) == -1) {
		log_warnx("egress: record for unknown spawn %s dropped",
		    id != NULL ? id : "(none)");
		return;
	}
	if (eg.sink == NULL)
		return;
	o = json_object_get(m->obj);
	json_object_object_del(o, "id");
	json_object_object_add(o, "user", json_object_new_string(user));
	if (session != NULL)
		json_object_object_add(o, "session",
		    json_object_new_string(session));
	else
		json_object_object_del(o, "session");
	eg.sink(o);
	json_object_put(o);
}

/* egressd said hello: it is the one egressd now, the earlier one goes. */
static void
egress_ready(struct ipc_peer *p)
{
	struct ipc_peer	*old = eg.peer;

	eg.peer = p;
	if (old != NULL && old != p) {
		log_warnx("egress: a new egressd linked; dropping the earlier "
		    "one");
		ipc_peer_free(old);
	}
	log_info("egress: egressd linked");
}

/* egressd went away: allowlist spawns fail until one links again. */
static void
egress_closed(struct ipc_peer *p)
{
	if (eg.peer != p)
		return;
	eg.peer = NULL;
	log_warnx("egress: egressd unlinked: spawns under the allowlist "
	    "profiles fail until it is back");
}
