/*
 * Workspaces: WORKSPACE_ROOT/USER, owned by the user's uid:gid, mode 0700.
 * In root mode with HOSTGATE_USER_DISK_MAX > 0, each is the mount point of
 * the user's own quota-limited filesystem, which the disk helper (disk.c,
 * the one part that stays root) mounts on the first spawn of the user
 * after sandboxd starts. Rootless, no quota is possible, and sandboxd
 * says so at start and in its health.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandboxd.h"

#define WORKSPACE_HELPER_MS	10000	/* the longest a first mount takes */

/* A workspace the helper has mounted, as far as sandboxd knows. */
struct ws_mounted {
	char			 user[DISK_USER_MAX + 1];
	char			 fsid[40];
	int64_t			 max;
	TAILQ_ENTRY(ws_mounted)	 entry;
};

static TAILQ_HEAD(, ws_mounted) ws_list = TAILQ_HEAD_INITIALIZER(ws_list);
static struct config	*ws_conf;
static int		 ws_fd = -1;		/* the disk helper */
static pid_t		 ws_pid = -1;
static int		 ws_gone;		/* the helper exited */
static int		 ws_project;		/* project quotas, no images */
static char		 ws_why[300] = "not initialised";

/*
 * Decide whether workspaces get quotas, and start the helper when they
 * do. Never fatal: where no quota can be had, sandboxd says why, loudly.
 */
void
workspace_init(struct config *conf)
{
	char	kind[16], why[256];
	pid_t	pid;

	ws_conf = conf;
	if (conf->user_disk_max == 0 || conf->user_disk_max == -1) {
		snprintf(ws_why, sizeof(ws_why), "HOSTGATE_USER_DISK_MAX is %s",
		    conf->user_disk_max == 0 ? "0" : "max");
		log_info("disk quota: none (%s)", ws_why);
		return;
	}
	if (geteuid() != 0) {
		snprintf(ws_why, sizeof(ws_why), "sandboxd does not run as "
		    "root: a filesystem per user needs mounts and loop "
		    "devices");
		log_warnx("disk quota: not enforced: %s", ws_why);
		return;
	}
	if ((ws_fd = disk_start(conf, &pid, kind, sizeof(kind), why,
	    sizeof(why))) == -1) {
		snprintf(ws_why, sizeof(ws_why), "%s", why);
		log_warnx("disk quota: not enforced: %s", ws_why);
		return;
	}
	ws_pid = pid;
	ws_project = strcmp(kind, "project") == 0;
	ws_why[0] = '\0';
	log_info("disk quota: %lld bytes per user, %s (helper pid %d)",
	    (long long)conf->user_disk_max, ws_project ?
	    "project quotas of the workspace root's filesystem" :
	    "a btrfs image per user with a qgroup limit", (int)pid);
}

/* Whether workspaces get a quota the kernel enforces. */
int
workspace_quota_enabled(void)
{
	return ws_fd != -1 && !ws_gone;
}

/* Why they do not, or NULL when they do. */
const char *
workspace_quota_why(void)
{
	return workspace_quota_enabled() ? NULL : ws_why;
}

/*
 * The helper is gone (killed, crashed): no workspace can be mounted any
 * more, and none is made without its quota: spawns are refused until
 * sandboxd restarts (and its new helper mounts them again).
 */
static void
workspace_gone(char *err, size_t errsz)
{
	if (!ws_gone)
		log_warnx("disk quota: the helper exited: spawns that need a "
		    "workspace mounted are refused until sandboxd restarts");
	ws_gone = 1;
	snprintf(ws_why, sizeof(ws_why), "the disk quota helper exited; "
	    "restart sandboxd");
	snprintf(err, errsz, "%s", ws_why);
}

/* What sandboxd knows of a user's mounted workspace, or NULL. */
static struct ws_mounted *
workspace_find(const char *user)
{
	struct ws_mounted	*m;

	TAILQ_FOREACH(m, &ws_list, entry)
		if (strcmp(m->user, user) == 0)
			return m;
	return NULL;
}

/*
 * Whether path is still a mount point (its device is not its parent's):
 * a workspace unmounted behind sandboxd's back is mounted again rather
 * than written to without a quota.
 */
static int
workspace_is_mounted(const char *path)
{
	struct stat	st, pst;

	return stat(path, &st) == 0 && stat(ws_conf->workspace_root,
	    &pst) == 0 && st.st_dev != pst.st_dev;
}

/* Ask the helper for a user's workspace; fills m. 0, or -1 and err. */
static int
workspace_helper(const char *user, uid_t uid, gid_t gid,
    struct ws_mounted *m, char *err, size_t errsz)
{
	struct disk_req	 rq;
	struct disk_rep	 r;
	struct pollfd	 pfd;
	int64_t		 t0 = now_mono_ms(), left;
	ssize_t		 got;
	int		 n;

	memset(&rq, 0, sizeof(rq));
	rq.op = DISK_OP_ENSURE;
	rq.uid = uid;
	rq.gid = gid;
	rq.max = ws_conf->user_disk_max;
	snprintf(rq.user, sizeof(rq.user), "%s", user);
	if (ws_gone) {
		snprintf(err, errsz, "%s", ws_why);
		return -1;
	}
	while ((got = send(ws_fd, &rq, sizeof(rq), MSG_NOSIGNAL)) == -1 &&
	    errno == EINTR)
		continue;
	if (got != sizeof(rq)) {
		workspace_gone(err, errsz);
		return -1;
	}
	pfd.fd = ws_fd;
	pfd.events = POLLIN;
	/* SIGCHLD of the spawns that end meanwhile interrupts the wait. */
	do {
		left = t0 + WORKSPACE_HELPER_MS - now_mono_ms();
		n = poll(&pfd, 1, left > 0 ? (int)left : 0);
	} while (n == -1 && errno == EINTR);
	if (n != 1) {
		/* Its answer would come late, to the next request: no more. */
		workspace_gone(err, errsz);
		return -1;
	}
	while ((got = recv(ws_fd, &r, sizeof(r), 0)) == -1 && errno == EINTR)
		continue;
	if (got != sizeof(r)) {
		workspace_gone(err, errsz);
		return -1;
	}
	r.err[sizeof(r.err) - 1] = '\0';
	r.fsid[sizeof(r.fsid) - 1] = '\0';
	if (!r.ok) {
		snprintf(err, errsz, "workspace disk: %s", r.err);
		return -1;
	}
	snprintf(m->user, sizeof(m->user), "%s", user);
	snprintf(m->fsid, sizeof(m->fsid), "%s", r.fsid);
	m->max = rq.max;
	log_debug("disk quota: %s's workspace ready in %lld ms", user,
	    (long long)(now_mono_ms() - t0));
	return 0;
}

/*
 * Without quotas: make or check a plain directory of the user's. It is
 * opened O_PATH: a workspace of another uid is closed to sandboxd (0700).
 * One that sandboxd made (just now, or an earlier version without a uid
 * per user) is handed over to the user.
 */
static int
workspace_dir(const char *path, uid_t uid, gid_t gid, char *err,
    size_t errsz)
{
	struct stat	st;
	char		proc[64];
	int		fd, made;

	/*
	 * An empty mount point of root's, mode 0, is what disk quotas left
	 * (turned off since): sandboxd owns the parent, and makes it anew.
	 */
	if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
	    (st.st_mode & 07777) == 0 && rmdir(path) == 0)
		log_info("removed the disk quota mount point %s", path);
	made = mkdir(path, 0700) == 0;
	if (!made && errno != EEXIST) {
		snprintf(err, errsz, "cannot create the workspace: %s",
		    strerror(errno));
		return -1;
	}
	/* A workspace must be a real directory, not a symlink. */
	if ((fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1 || fstat(fd, &st) == -1) {
		snprintf(err, errsz, "the workspace is not a directory");
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (st.st_uid != uid && st.st_uid == geteuid()) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		if (chmod(proc, 0700) == -1 ||
		    fchownat(fd, "", uid, gid, AT_EMPTY_PATH) == -1) {
			snprintf(err, errsz, "cannot give the workspace to "
			    "%u:%u: %s", (unsigned)uid, (unsigned)gid,
			    strerror(errno));
			close(fd);
			return -1;
		}
		if (!made)
			log_info("workspace %s handed over to uid %u", path,
			    (unsigned)uid);
	} else if (st.st_uid != uid) {
		snprintf(err, errsz, "the workspace belongs to uid %u, not "
		    "%u (chown -R %u:%u it)", (unsigned)st.st_uid,
		    (unsigned)uid, (unsigned)uid, (unsigned)gid);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* The user's workspace, made on first use, its quota mounted. */
int
workspace_ensure(const char *user, uid_t uid, gid_t gid, char *path,
    size_t pathsz, char *err, size_t errsz)
{
	struct ws_mounted	*m, n;

	if (!disk_user_ok(user)) {
		snprintf(err, errsz, "bad user name");
		return -1;
	}
	if ((size_t)snprintf(path, pathsz, "%s/%s", ws_conf->workspace_root,
	    user) >= pathsz) {
		snprintf(err, errsz, "workspace path too long");
		return -1;
	}
	if (ws_gone) {
		snprintf(err, errsz, "%s", ws_why);
		return -1;
	}
	if (ws_fd == -1 || ws_project) {
		if (ws_project && workspace_helper(user, uid, gid, &n, err,
		    errsz) == -1)
			return -1;
		return workspace_dir(path, uid, gid, err, errsz);
	}
	if ((m = workspace_find(user)) != NULL && m->max ==
	    ws_conf->user_disk_max && workspace_is_mounted(path))
		return 0;
	if (workspace_helper(user, uid, gid, &n, err, errsz) == -1)
		return -1;
	if (m == NULL) {
		if ((m = calloc(1, sizeof(*m))) == NULL)
			fatal("calloc");
		TAILQ_INSERT_TAIL(&ws_list, m, entry);
	}
	memcpy(m->user, n.user, sizeof(m->user));
	memcpy(m->fsid, n.fsid, sizeof(m->fsid));
	m->max = n.max;
	return 0;
}

/*
 * A number from a one-line sysfs file; -1 when it cannot be read. (Read
 * by hand: sysfs files say they are 4096 bytes long, whatever they hold.)
 */
static int
workspace_sysfs(const char *path, int64_t *out)
{
	char		 text[64], *end;
	long long	 v;
	ssize_t		 n;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || end == text || (*end != '\n' && *end != '\0'))
		return -1;
	*out = v;
	return 0;
}

/*
 * What qgroup 1/1 of a btrfs filesystem has referenced, and its limit,
 * from /sys/fs/btrfs/FSID/qgroups/1_1/ (world-readable: sandboxd needs
 * no privilege for it). Counted at each transaction commit.
 */
int
workspace_btrfs_usage(const char *sysroot, const char *fsid, int64_t *used,
    int64_t *max)
{
	char	path[512];
	const char *c;

	for (c = fsid; *c != '\0'; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') ||
		    *c == '-'))
			return -1;
	if (*fsid == '\0')
		return -1;
	snprintf(path, sizeof(path), "%s/sys/fs/btrfs/%s/qgroups/1_1/"
	    "referenced", sysroot, fsid);
	if (workspace_sysfs(path, used) == -1)
		return -1;
	snprintf(path, sizeof(path), "%s/sys/fs/btrfs/%s/qgroups/1_1/"
	    "max_referenced", sysroot, fsid);
	return workspace_sysfs(path, max);
}

/*
 * A user's disk use and limit: {"used", "max"} in bytes, "used" null
 * while the workspace has not been mounted since sandboxd started; NULL
 * when no quota applies.
 */
struct json_object *
workspace_usage(const char *user)
{
	struct json_object	*o;
	struct ws_mounted	*m;
	struct statfs		 sf;
	char			 path[4200];
	int64_t			 used, max = ws_conf != NULL ?
				    ws_conf->user_disk_max : 0;

	if (!workspace_quota_enabled() || !disk_user_ok(user))
		return NULL;
	o = json_object_new_object();
	snprintf(path, sizeof(path), "%s/%s", ws_conf->workspace_root, user);
	if (ws_project) {
		/* ext4 and xfs report a project's limit in its statfs. */
		if (statfs(path, &sf) == 0) {
			json_object_object_add(o, "used", json_object_new_int64(
			    (int64_t)(sf.f_blocks - sf.f_bfree) * sf.f_bsize));
		} else
			json_object_object_add(o, "used", NULL);
	} else if ((m = workspace_find(user)) != NULL &&
	    workspace_btrfs_usage("", m->fsid, &used, &max) == 0)
		json_object_object_add(o, "used", json_object_new_int64(used));
	else
		json_object_object_add(o, "used", NULL);
	json_object_object_add(o, "max", json_object_new_int64(max));
	return o;
}

/*
 * sandboxd stops: close the helper's socket, and wait a little for it to
 * unmount every workspace and exit, so that nothing stays mounted once
 * sandboxd is gone. A helper that takes longer finishes on its own.
 */
void
workspace_fini(void)
{
	struct timespec	ts = { 0, 10 * 1000000 };
	int		i;

	if (ws_fd == -1)
		return;
	close(ws_fd);
	ws_fd = -1;
	for (i = 0; i < 500; i++) {
		if (waitpid(ws_pid, NULL, WNOHANG) != 0)
			return;	/* gone, or reaped already (ECHILD) */
		nanosleep(&ts, NULL);
	}
	log_warnx("disk quota: the helper (pid %d) still unmounts",
	    (int)ws_pid);
}
