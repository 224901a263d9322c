/*
 * A pids cgroup per spawn. Every sandbox runs as sandboxd's uid, so
 * RLIMIT_NPROC alone is one budget shared by all users: one user's fork
 * bomb would starve everyone else's spawns until its time limit. With a
 * cgroup of its own per spawn (pids.max), a bomb fills only its own.
 *
 * Started as root, sandboxd makes itself a directory in the pids hierarchy
 * (cgroup v2, or v1's pids controller), gives it to its service user, and
 * from then on creates one child cgroup per spawn; the child joins it
 * before exec. Where that is impossible (no pids controller, or sandboxd
 * not started as root), spawns keep the per-uid RLIMIT_NPROC only, and the
 * start-up log and /api/admin/debug say so.
 */
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <linux/magic.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxd.h"

#define CGROUP_PENDING	256

static char	cgroup_base[512];	/* "" when disabled */
/* Spawn cgroups still holding dying processes: removed later. */
static char	cgroup_pending[CGROUP_PENDING][17];
static int	cgroup_npending;
static int	cgroup_v2;
static char	cgroup_why[256] = "not initialised";

/* Write a short string to a cgroup file. */
static int
cgroup_write(const char *path, const char *text)
{
	int	fd, ok;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

/* Our cgroup path in a hierarchy, from /proc/self/cgroup. */
static int
cgroup_self(const char *want, char *out, size_t outsz)
{
	FILE	*f;
	char	 line[1024], *ctl, *path;
	int	 found = -1;

	if ((f = fopen("/proc/self/cgroup", "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		/* "ID:CONTROLLERS:PATH" */
		if ((ctl = strchr(line, ':')) == NULL ||
		    (path = strchr(ctl + 1, ':')) == NULL)
			continue;
		*path++ = '\0';
		ctl++;
		if (strcmp(ctl, want) == 0) {
			snprintf(out, outsz, "%s", strcmp(path, "/") == 0 ?
			    "" : path);
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

/* chown a cgroup directory and the files a delegate writes. */
static void
cgroup_give(const char *dir, uid_t uid, gid_t gid)
{
	static const char *const files[] = { "cgroup.procs", "tasks",
	    "cgroup.subtree_control", "cgroup.threads", NULL };
	char	path[600];
	size_t	i;

	(void)!chown(dir, uid, gid);
	for (i = 0; files[i] != NULL; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		(void)!chown(path, uid, gid);
	}
}

/*
 * As root, before the privilege drop: make sandboxd's cgroup directory
 * and hand it to uid. Never fatal: without it spawns share RLIMIT_NPROC.
 */
void
cgroup_init(uid_t uid, gid_t gid)
{
	struct statfs	sf;
	char		self[512], dir[600], path[700], pid[32];

	cgroup_base[0] = '\0';
	if (geteuid() != 0) {
		snprintf(cgroup_why, sizeof(cgroup_why), "sandboxd was not "
		    "started as root: no cgroup of its own to delegate");
		goto off;
	}
	if (statfs("/sys/fs/cgroup", &sf) == 0 &&
	    sf.f_type == CGROUP2_SUPER_MAGIC) {
		cgroup_v2 = 1;
		if (cgroup_self("", self, sizeof(self)) == -1)
			goto nofile;
		snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s/hostgate-%d",
		    self, (int)getpid());
	} else if (access("/sys/fs/cgroup/pids/cgroup.procs", F_OK) == 0) {
		if (cgroup_self("pids", self, sizeof(self)) == -1)
			goto nofile;
		snprintf(dir, sizeof(dir), "/sys/fs/cgroup/pids%s/hostgate-%d",
		    self, (int)getpid());
	} else {
		snprintf(cgroup_why, sizeof(cgroup_why), "no pids cgroup "
		    "controller mounted");
		goto off;
	}
	if (mkdir(dir, 0755) == -1 && errno != EEXIST) {
		snprintf(cgroup_why, sizeof(cgroup_why), "mkdir %s: %s", dir,
		    strerror(errno));
		goto off;
	}
	if (cgroup_v2) {
		/* v2: no processes in an inner node; sandboxd goes to a leaf. */
		snprintf(path, sizeof(path), "%s/daemon", dir);
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		if ((mkdir(path, 0755) == -1 && errno != EEXIST) ||
		    (snprintf(path, sizeof(path), "%s/daemon/cgroup.procs",
		    dir), cgroup_write(path, pid)) == -1 ||
		    (snprintf(path, sizeof(path), "%s/cgroup.subtree_control",
		    dir), cgroup_write(path, "+pids")) == -1) {
			snprintf(cgroup_why, sizeof(cgroup_why), "%s: cannot "
			    "enable the pids controller: %s", dir,
			    strerror(errno));
			rmdir(dir);
			goto off;
		}
	}
	cgroup_give(dir, uid, gid);
	snprintf(cgroup_base, sizeof(cgroup_base), "%s", dir);
	log_info("per-spawn pids cgroups under %s", dir);
	return;
nofile:
	snprintf(cgroup_why, sizeof(cgroup_why), "cannot read /proc/self/cgroup");
off:
	log_warnx("no per-spawn pids cgroup (%s): sandboxes share one process "
	    "limit (RLIMIT_NPROC) per uid", cgroup_why);
}

/* Whether spawns get a cgroup each. */
int
cgroup_enabled(void)
{
	return cgroup_base[0] != '\0';
}

/* Why not, for /healthz and the debug view. */
const char *
cgroup_reason(void)
{
	return cgroup_enabled() ? NULL : cgroup_why;
}

/*
 * A cgroup for spawn id with pids.max; its cgroup.procs path goes into
 * procs, for the child to join before exec. -1 when disabled or failed.
 */
int
cgroup_create(const char *id, int pids_max, char *procs, size_t procssz)
{
	char	dir[700], path[800], val[16];

	if (!cgroup_enabled())
		return -1;
	snprintf(dir, sizeof(dir), "%s/%s", cgroup_base, id);
	if (mkdir(dir, 0755) == -1) {
		log_warn("mkdir %s", dir);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/pids.max", dir);
	snprintf(val, sizeof(val), "%d", pids_max);
	if (cgroup_write(path, val) == -1) {
		log_warn("%s", path);
		rmdir(dir);
		return -1;
	}
	snprintf(procs, procssz, "%s/cgroup.procs", dir);
	return 0;
}

/* rmdir a spawn cgroup: 0, or -1 while processes are still in it. */
static int
cgroup_rmdir(const char *id)
{
	char	dir[700];

	snprintf(dir, sizeof(dir), "%s/%s", cgroup_base, id);
	if (rmdir(dir) == -1 && errno != ENOENT)
		return -1;
	return 0;
}

/* Remove a spawn's cgroup, now or, while it empties, at a later sweep. */
void
cgroup_remove(const char *id)
{
	if (!cgroup_enabled() || cgroup_rmdir(id) == 0)
		return;
	if (cgroup_npending < CGROUP_PENDING)
		snprintf(cgroup_pending[cgroup_npending++], 17, "%s", id);
	else
		log_warnx("cgroup %s/%s left behind", cgroup_base, id);
}

/* Retry the removals that found their cgroup busy. */
void
cgroup_sweep(void)
{
	int	i, n = 0;

	for (i = 0; i < cgroup_npending; i++)
		if (cgroup_rmdir(cgroup_pending[i]) == -1)
			memcpy(cgroup_pending[n++], cgroup_pending[i], 17);
	cgroup_npending = n;
}

/* At exit: remove sandboxd's own directory (empty by then, or left). */
void
cgroup_fini(void)
{
	char	path[700];

	if (!cgroup_enabled())
		return;
	if (cgroup_v2) {
		snprintf(path, sizeof(path), "%s/daemon", cgroup_base);
		rmdir(path);	/* fails while sandboxd is in it: harmless */
	}
	rmdir(cgroup_base);
}
