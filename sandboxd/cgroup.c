/*
 * A pids cgroup per user. Every sandbox runs as sandboxd's uid, so
 * RLIMIT_NPROC alone is one budget shared by all users: one user's fork
 * bomb would starve everyone else's spawns until its time limit. With a
 * cgroup of their own (pids.max), a user's bomb fills only their budget.
 * One per user rather than per spawn: creating a cgroup for every spawn
 * doubled the cost of a short command (docs/performance.md).
 *
 * Started as root, sandboxd makes itself a directory in the pids hierarchy
 * (cgroup v2, or v1's pids controller), gives it to its service user, and
 * from then on creates one child cgroup per user on first use; each spawn
 * joins its user's before exec. Where that is impossible (no pids
 * controller, or sandboxd not started as root), spawns keep the per-uid
 * RLIMIT_NPROC only, and the start-up log says so.
 */
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <linux/magic.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxd.h"

#define CGROUP_PENDING	1024	/* users with a cgroup */

static char	cgroup_base[512];	/* "" when disabled */
static char	cgroup_users[CGROUP_PENDING][40];
static int	cgroup_nusers;
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
 * Remove the directories of sandboxd processes that are gone (killed
 * before they could clean up): hostgate-PID with no process PID.
 */
static void
cgroup_sweep_stale(const char *parent)
{
	struct dirent	*de, *sub;
	DIR		*d, *sd;
	char		 path[1024], child[1400];
	long		 pid;
	char		*end;

	if ((d = opendir(parent)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "hostgate-", 9) != 0)
			continue;
		pid = strtol(de->d_name + 9, &end, 10);
		if (*end != '\0' || pid <= 0 ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", parent, de->d_name);
		if ((sd = opendir(path)) != NULL) {
			while ((sub = readdir(sd)) != NULL)
				if (sub->d_type == DT_DIR &&
				    sub->d_name[0] != '.') {
					snprintf(child, sizeof(child), "%s/%s",
					    path, sub->d_name);
					rmdir(child);
				}
			closedir(sd);
		}
		if (rmdir(path) == 0)
			log_debug("removed stale cgroup %s", path);
	}
	closedir(d);
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
	{
		char	parent[600], *slash;

		snprintf(parent, sizeof(parent), "%s", dir);
		if ((slash = strrchr(parent, '/')) != NULL) {
			*slash = '\0';
			cgroup_sweep_stale(parent);
		}
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


/*
 * The cgroup of a user (u-NAME), made with pids.max on first use; its
 * cgroup.procs path goes into procs, for the child to join before exec.
 * -1 when disabled or failed.
 */
int
cgroup_user(const char *user, int pids_max, char *procs, size_t procssz)
{
	char	dir[700], path[800], val[16];

	if (!cgroup_enabled())
		return -1;
	snprintf(dir, sizeof(dir), "%s/u-%s", cgroup_base, user);
	snprintf(procs, procssz, "%s/cgroup.procs", dir);
	if (access(procs, W_OK) == 0)
		return 0;
	if (mkdir(dir, 0755) == -1 && errno != EEXIST) {
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
	if (cgroup_nusers < CGROUP_PENDING)
		snprintf(cgroup_users[cgroup_nusers++], 40, "u-%s", user);
	return 0;
}

/* At exit: remove sandboxd's own directory (empty by then, or left). */
void
cgroup_fini(void)
{
	char	path[700];

	int	i;

	if (!cgroup_enabled())
		return;
	for (i = 0; i < cgroup_nusers; i++) {
		snprintf(path, sizeof(path), "%s/%s", cgroup_base,
		    cgroup_users[i]);
		rmdir(path);	/* fails while processes remain: harmless */
	}
	if (cgroup_v2) {
		snprintf(path, sizeof(path), "%s/daemon", cgroup_base);
		rmdir(path);	/* fails while sandboxd is in it: harmless */
	}
	rmdir(cgroup_base);
}
