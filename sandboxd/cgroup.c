/*
 * sandboxd's cgroup subtree: a cgroup per user that carries the user's
 * limits, and under it one per spawn, so that ending a spawn, a direct
 * grant, a session or a user kills a whole cgroup, whatever its processes
 * forked, setsid'd or daemonized. A process group is escaped by one
 * setsid; a cgroup is not.
 *
 * cgroup v2 first: membership and kill go through the v2 hierarchy
 * wherever one is mounted (/sys/fs/cgroup on a pure v2 host, the often
 * empty /sys/fs/cgroup/unified on a hybrid one), limits through whichever
 * hierarchy carries each controller. Where only v1 exists, the freezer
 * hierarchy holds the spawns: a kill freezes the cgroup, SIGKILLs every
 * process in it and thaws it.
 *
 * The layout under BASE, the same in every hierarchy used:
 *	BASE/daemon			sandboxd itself (v2: no internal process)
 *	BASE/u-USER			the user's limits
 *	BASE/u-USER/spawner-PID		the user's spawner process
 *	BASE/u-USER/s-ID		a spawn (sandboxed, or direct without session)
 *	BASE/u-USER/d-SESSION/s-ID	a direct spawn of a login session
 * BASE is the unit's own cgroup under systemd (Delegate=yes), else, as
 * root, a directory named after the instance under sandboxd's own cgroup;
 * its name is stable for one configuration, so that a restarted sandboxd
 * finds and kills what the previous one left (cgroup_sweep).
 *
 * Every path starts with cg_fsroot: "" for the real /sys/fs/cgroup, or a
 * temporary directory holding a fake cgroupfs for the unit tests. With a
 * fake root, files are created when written and plain files are removed
 * with their directory, as the kernel would do by itself.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandboxd.h"

/* The hierarchies sandboxd may use. */
enum cg_hier { H_V2, H_MEMORY, H_PIDS, H_CPU, H_BLKIO, H_FREEZER, H_N };
/* The limits and mechanisms cgroup_json reports. */
enum cg_what { W_MEMBERSHIP, W_KILL, W_MEMORY, W_SWAP, W_PIDS, W_CPU,
	W_CPU_MAX, W_IO, W_SPAWN_MEMORY, W_SPAWN_PIDS, W_N };
/* How a cgroup is killed. */
enum cg_kill { K_NONE, K_V2_KILL, K_V2_FREEZE, K_V1_FREEZER };

static const char *const cg_hier_names[H_N] = {
	"", "memory", "pids", "cpu", "blkio", "freezer"
};
static const struct {
	const char	*key;	/* in cgroup_json */
	const char	*what;	/* in log lines */
} cg_whats[W_N] = {
	{ "membership",	"a cgroup per spawn" },
	{ "kill",	"whole-cgroup kills" },
	{ "memory",	"memory limits (HOSTGATE_USER_MEMORY_MAX)" },
	{ "swap",	"swap limits (HOSTGATE_USER_SWAP_MAX)" },
	{ "pids",	"process limits (HOSTGATE_USER_PIDS_MAX)" },
	{ "cpu",	"CPU weights (HOSTGATE_USER_CPU_WEIGHT)" },
	{ "cpu_max",	"CPU caps (HOSTGATE_USER_CPU_MAX_PERCENT)" },
	{ "io",		"IO weights (HOSTGATE_USER_IO_WEIGHT)" },
	{ "spawn_memory", "per-spawn memory limits (HOSTGATE_SPAWN_MEMORY_MAX)" },
	{ "spawn_pids",	"per-spawn process limits (HOSTGATE_SPAWN_PIDS_MAX)" },
};

#define CG_USERS	4096	/* users whose limits are cached */
#define CG_RETRY_MS	100	/* between two tries to remove a cgroup */
#define CG_RETRIES	100	/* then the next start's sweep does it */
#define CG_FREEZE_TRIES	2000	/* 100 us apart: 200 ms to freeze */

static char	 cg_fsroot[PATH_MAX];
static int	 cg_fake;		/* a fake cgroupfs: tests */
static char	 cg_base[H_N][PATH_MAX];	/* "": hierarchy unused */
static int	 cg_ctl[W_N];		/* the hierarchy enforcing it, or -1 */
static char	 cg_how[W_N][96];	/* how, for cgroup_json */
static char	 cg_why[W_N][256];	/* why not, when cg_ctl is -1 */
static int	 cg_member = -1;	/* H_V2, H_FREEZER or -1 */
static enum cg_kill cg_killer;
static char	 cg_v2ctl[64];		/* "+memory +pids ..." for children */
static int	 cg_own;		/* v2 BASE is our own (delegated) cgroup */
static const char *cg_io_file;		/* the IO weight file, or NULL */

/* Users whose cgroups exist with these limits. */
static struct cg_user {
	char		 name[40];
	struct cg_limits lim;
} cg_users[CG_USERS];
static int	 cg_nusers;

/* Directories to remove once their dying processes are gone. */
struct cg_pending {
	TAILQ_ENTRY(cg_pending)	 entry;
	char			*path;
	int			 tries;
};
static TAILQ_HEAD(, cg_pending) cg_pending = TAILQ_HEAD_INITIALIZER(cg_pending);
static struct event_base *cg_evbase;
static struct event	*cg_ev_retry;

static int	cg_remove(const char *dir);

/* Write a short string to a cgroup file (created in a fake tree). */
static int
cg_write(const char *path, const char *text)
{
	ssize_t	n;
	int	fd, save;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC |
	    (cg_fake ? O_CREAT | O_TRUNC : 0), 0644)) == -1)
		return -1;
	n = write(fd, text, strlen(text));
	save = errno;
	close(fd);
	errno = save;
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* cg_write of a formatted path. */
static int HG_PRINTF(3, 4)
cg_writef(const char *text, const char *dir, const char *fmt, ...)
{
	char	path[PATH_MAX + 64], name[64];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return cg_write(path, text);
}

/* Read a small cgroup file into buf (NUL-terminated); -1 when unreadable. */
static int
cg_read(const char *dir, const char *name, char *buf, size_t bufsz)
{
	char	path[PATH_MAX + 64];
	ssize_t	n;
	int	fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, bufsz - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* Whether dir/name exists. */
static int
cg_has(const char *dir, const char *name)
{
	char	path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/* A number file ("max" and v1's huge "unlimited" give -1); -2 unknown. */
static int64_t
cg_read_num(const char *dir, const char *name)
{
	char		 buf[64], *end;
	long long	 v;

	if (cg_read(dir, name, buf, sizeof(buf)) == -1)
		return -2;
	if (strncmp(buf, "max", 3) == 0)
		return -1;
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno != 0 || end == buf)
		return -2;
	return v >= (1LL << 62) ? -1 : v;
}

/* The value of "key N" in a flat keyed file (memory.events); -1 unknown. */
static int64_t
cg_read_key(const char *dir, const char *name, const char *key)
{
	char	buf[2048], *line, *save;
	size_t	kl = strlen(key);

	if (cg_read(dir, name, buf, sizeof(buf)) == -1)
		return -1;
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			return strtoll(line + kl + 1, NULL, 10);
	return -1;
}

/* A name that may become one path component of the tree. */
static int
cg_name_ok(const char *s)
{
	if (s == NULL || *s == '\0' || *s == '.' || strlen(s) > 64)
		return 0;
	return strchr(s, '/') == NULL;
}

/* Our path in a hierarchy ("" for its root), from /proc/self/cgroup. */
static int
cg_self(enum cg_hier h, char *out, size_t outsz)
{
	FILE	*f = NULL;
	char	 line[1024], path[PATH_MAX + 32], *ctl, *p, *tok, *save;
	int	 found = -1;

	if (cg_fake) {
		snprintf(path, sizeof(path), "%s/proc/self/cgroup", cg_fsroot);
		f = fopen(path, "re");
	}
	if (f == NULL && (f = fopen("/proc/self/cgroup", "re")) == NULL)
		return -1;
	while (found == -1 && fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		/* "ID:CONTROLLERS:PATH"; v2 is "0::PATH" */
		if ((ctl = strchr(line, ':')) == NULL ||
		    (p = strchr(ctl + 1, ':')) == NULL)
			continue;
		*p++ = '\0';
		*ctl++ = '\0';
		if (h == H_V2) {
			if (strcmp(line, "0") == 0 && *ctl == '\0')
				found = 0;
		} else
			for (tok = strtok_r(ctl, ",", &save); tok != NULL;
			    tok = strtok_r(NULL, ",", &save))
				if (strcmp(tok, cg_hier_names[h]) == 0)
					found = 0;
		if (found == 0)
			snprintf(out, outsz, "%s", strcmp(p, "/") == 0 ?
			    "" : p);
	}
	fclose(f);
	return found;
}

/* The mount point of a hierarchy, or -1 when it is not mounted. */
static int
cg_mount(enum cg_hier h, char *out, size_t outsz)
{
	char	dir[PATH_MAX];

	if (h == H_V2) {
		/* pure v2 at /sys/fs/cgroup, else a hybrid's unified */
		snprintf(out, outsz, "%s/sys/fs/cgroup", cg_fsroot);
		if (cg_has(out, "cgroup.controllers"))
			return 0;
		snprintf(out, outsz, "%s/sys/fs/cgroup/unified", cg_fsroot);
		return cg_has(out, "cgroup.controllers") ? 0 : -1;
	}
	snprintf(dir, sizeof(dir), "%s/sys/fs/cgroup", cg_fsroot);
	if (cg_has(dir, "cgroup.controllers"))
		return -1;	/* pure v2: no v1 hierarchy */
	snprintf(out, outsz, "%s/sys/fs/cgroup/%s", cg_fsroot,
	    cg_hier_names[h]);
	return cg_has(out, "cgroup.procs") && !cg_has(out,
	    "cgroup.controllers") ? 0 : -1;
}

/* Whether word is in a space-separated list. */
static int
cg_word(const char *list, const char *word)
{
	size_t	wl = strlen(word);
	const char *p;

	for (p = list; (p = strstr(p, word)) != NULL; p += wl)
		if ((p == list || p[-1] == ' ') &&
		    (p[wl] == '\0' || p[wl] == ' ' || p[wl] == '\n'))
			return 1;
	return 0;
}

/* Mark a mechanism as working, with how, and log it. */
static void
cg_set(enum cg_what w, int h, const char *fmt, ...)
{
	va_list	ap;

	cg_ctl[w] = h;
	va_start(ap, fmt);
	vsnprintf(cg_how[w], sizeof(cg_how[w]), fmt, ap);
	va_end(ap);
	cg_why[w][0] = '\0';
}

/* Mark a mechanism as not enforced, with the reason. */
static void HG_PRINTF(2, 3)
cg_unset(enum cg_what w, const char *fmt, ...)
{
	va_list	ap;

	cg_ctl[w] = -1;
	cg_how[w][0] = '\0';
	va_start(ap, fmt);
	vsnprintf(cg_why[w], sizeof(cg_why[w]), fmt, ap);
	va_end(ap);
}

/* chown a directory and, for a delegate's own cgroup, the files it writes. */
static void
cg_give(const char *dir, uid_t uid, gid_t gid, int all)
{
	static const char *const files[] = { "cgroup.procs", "tasks",
	    "cgroup.subtree_control", "cgroup.threads", NULL };
	struct dirent	*de;
	DIR		*d;
	char		 path[PATH_MAX + 300];
	size_t		 i;

	(void)!chown(dir, uid, gid);
	if (!all) {
		for (i = 0; files[i] != NULL; i++) {
			snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
			(void)!chown(path, uid, gid);
		}
		return;
	}
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (de->d_type == DT_DIR)
			cg_give(path, uid, gid, 1);
		else
			(void)!chown(path, uid, gid);
	}
	closedir(d);
}

/* mkdir that accepts an existing directory. */
static int
cg_mkdir(const char *dir)
{
	return mkdir(dir, 0755) == -1 && errno != EEXIST ? -1 : 0;
}

/*
 * Find or make BASE in the v2 hierarchy: the unit's cgroup under systemd,
 * as root a directory named instance under our own cgroup, rootless our
 * own cgroup when it is delegated to us. Moves sandboxd into BASE/daemon.
 */
static int
cg_init_v2(const char *instance, char *why, size_t whysz)
{
	char	 mnt[PATH_MAX], self[PATH_MAX], own[PATH_MAX * 2], *slash, *prev;
	char	 base[PATH_MAX], path[PATH_MAX + 64], pid[32];
	int	 root = geteuid() == 0, delegated;

	if (cg_mount(H_V2, mnt, sizeof(mnt)) == -1) {
		snprintf(why, whysz, "no cgroup v2 hierarchy is mounted");
		return -1;
	}
	if (cg_self(H_V2, self, sizeof(self)) == -1) {
		snprintf(why, whysz, "cannot read /proc/self/cgroup");
		return -1;
	}
	/* A restart from inside BASE/daemon: BASE is the parent. */
	if ((slash = strrchr(self, '/')) != NULL &&
	    strcmp(slash, "/daemon") == 0) {
		*slash = '\0';
		if (getenv("INVOCATION_ID") == NULL && root) {
			if ((prev = strrchr(self, '/')) != NULL &&
			    strcmp(prev + 1, instance) == 0)
				*prev = '\0';
			else
				*slash = '/';	/* not ours */
		}
	}
	snprintf(own, sizeof(own), "%s%s", mnt, self);
	snprintf(path, sizeof(path), "%s/cgroup.procs", own);
	delegated = self[0] != '\0' && access(own, W_OK) == 0 &&
	    access(path, W_OK) == 0;
	cg_own = delegated && (getenv("INVOCATION_ID") != NULL || !root);
	if (cg_own)
		snprintf(base, sizeof(base), "%s", own);
	else if (root)
		snprintf(base, sizeof(base), "%s/%s", own, instance);
	else {
		snprintf(why, whysz, "sandboxd was not started as root and "
		    "its own cgroup %s is not delegated to it (run it as a "
		    "systemd service with Delegate=yes)", own);
		return -1;
	}
	if (cg_mkdir(base) == -1) {
		snprintf(why, whysz, "mkdir %s: %s", base, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/daemon", base);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (cg_mkdir(path) == -1 || cg_writef(pid, path, "cgroup.procs") == -1) {
		snprintf(why, whysz, "cannot move sandboxd into %s: %s", path,
		    strerror(errno));
		return -1;
	}
	snprintf(cg_base[H_V2], sizeof(cg_base[H_V2]), "%s", base);
	return 0;
}

/* Make BASE in a v1 hierarchy, under our own cgroup there (root only). */
static void
cg_init_v1(enum cg_hier h, const char *instance)
{
	char	mnt[PATH_MAX], self[PATH_MAX], base[PATH_MAX * 2 + 64];

	if (geteuid() != 0 || cg_mount(h, mnt, sizeof(mnt)) == -1 ||
	    cg_self(h, self, sizeof(self)) == -1)
		return;
	snprintf(base, sizeof(base), "%s%s/%s", mnt, self, instance);
	if (strlen(base) >= sizeof(cg_base[h]) || cg_mkdir(base) == -1) {
		log_warn("cgroup: mkdir %s", base);
		return;
	}
	snprintf(cg_base[h], sizeof(cg_base[h]), "%s", base);
}

/* Decide which hierarchy carries a controller: v2 when enabled there. */
static void
cg_pick(enum cg_what w, const char *v2ctl, const char *v2file,
    enum cg_hier h1, const char *v1file, const char *unwhy)
{
	char	plus[32];

	snprintf(plus, sizeof(plus), "+%s", v2ctl != NULL ? v2ctl : "");
	if (cg_base[H_V2][0] != '\0' && v2ctl != NULL &&
	    cg_word(cg_v2ctl, plus))
		cg_set(w, H_V2, "cgroup v2 %s", v2file);
	else if (h1 != H_N && cg_base[h1][0] != '\0' &&
	    cg_has(cg_base[h1], v1file))
		cg_set(w, h1, "cgroup v1 %s", v1file);
	else if (h1 != H_N && cg_base[h1][0] != '\0')
		cg_unset(w, "%s has no %s%s", cg_base[h1], v1file, unwhy);
	else
		cg_unset(w, "no cgroup hierarchy carries the %s controller "
		    "for sandboxd%s", v2ctl != NULL ? v2ctl :
		    cg_hier_names[h1], unwhy);
}

/* Enable the v2 controllers that BASE offers for its children. */
static void
cg_enable_v2(int systemd)
{
	static const char *const want[] = { "memory", "pids", "cpu", "io",
	    NULL };
	char	 avail[512], parent[PATH_MAX], *slash, one[32];
	size_t	 i;

	cg_v2ctl[0] = '\0';
	if (cg_read(cg_base[H_V2], "cgroup.controllers", avail,
	    sizeof(avail)) == -1)
		return;
	/* As root, ask our own cgroup to pass on what it has and BASE lacks. */
	snprintf(parent, sizeof(parent), "%s", cg_base[H_V2]);
	if (!systemd && (slash = strrchr(parent, '/')) != NULL) {
		*slash = '\0';
		for (i = 0; want[i] != NULL; i++)
			if (!cg_word(avail, want[i])) {
				snprintf(one, sizeof(one), "+%s", want[i]);
				(void)cg_writef(one, parent,
				    "cgroup.subtree_control");
			}
		(void)cg_read(cg_base[H_V2], "cgroup.controllers", avail,
		    sizeof(avail));
	}
	for (i = 0; want[i] != NULL; i++)
		if (cg_word(avail, want[i]))
			snprintf(cg_v2ctl + strlen(cg_v2ctl), sizeof(cg_v2ctl) -
			    strlen(cg_v2ctl), "%s+%s", cg_v2ctl[0] ? " " : "",
			    want[i]);
	if (cg_v2ctl[0] == '\0' || cg_writef(cg_v2ctl, cg_base[H_V2],
	    "cgroup.subtree_control") == 0)
		return;
	/* One at a time: keep those the kernel takes. */
	cg_v2ctl[0] = '\0';
	for (i = 0; want[i] != NULL; i++) {
		snprintf(one, sizeof(one), "+%s", want[i]);
		if (cg_word(avail, want[i]) && cg_writef(one, cg_base[H_V2],
		    "cgroup.subtree_control") == 0)
			snprintf(cg_v2ctl + strlen(cg_v2ctl), sizeof(cg_v2ctl) -
			    strlen(cg_v2ctl), "%s%s", cg_v2ctl[0] ? " " : "",
			    one);
		else if (cg_word(avail, want[i]))
			log_warn("cgroup: %s/cgroup.subtree_control: +%s",
			    cg_base[H_V2], want[i]);
	}
}

/* Whether a disk uses an IO scheduler (/sys/block/DISK/queue/scheduler). */
static int
cg_scheduler(const char *name)
{
	struct dirent	*de;
	DIR		*d;
	char		 dir[PATH_MAX], path[PATH_MAX + 300], buf[256], want[32];
	int		 found = 0;

	snprintf(dir, sizeof(dir), "%s/sys/block", cg_fsroot);
	snprintf(want, sizeof(want), "[%s]", name);
	if ((d = opendir(dir)) == NULL)
		return 0;
	while (!found && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/queue", dir, de->d_name);
		found = cg_read(path, "scheduler", buf, sizeof(buf)) == 0 &&
		    strstr(buf, want) != NULL;
	}
	closedir(d);
	return found;
}

/*
 * IO weights: only where something applies them. v2's io.weight needs
 * iocost enabled on a disk (io.cost.qos of the root), BFQ's weight files
 * (v2 io.bfq.weight, v1 blkio.bfq.weight) a disk on BFQ, v1's
 * blkio.weight a disk on CFQ. A file nothing reads is not a limit.
 */
static void
cg_pick_io(void)
{
	char	mnt[PATH_MAX], buf[4096];

	cg_io_file = NULL;
	if (cg_base[H_V2][0] != '\0' && cg_word(cg_v2ctl, "+io")) {
		if (cg_mount(H_V2, mnt, sizeof(mnt)) == 0 &&
		    cg_read(mnt, "io.cost.qos", buf, sizeof(buf)) == 0 &&
		    strstr(buf, "enable=1") != NULL)
			cg_io_file = "io.weight";
		else if (cg_scheduler("bfq"))
			cg_io_file = "io.bfq.weight";
		if (cg_io_file != NULL) {
			cg_set(W_IO, H_V2, "cgroup v2 %s", cg_io_file);
			return;
		}
		cg_unset(W_IO, "no disk has iocost enabled (io.cost.qos) or "
		    "uses the BFQ scheduler: io.weight would do nothing");
		return;
	}
	if (cg_base[H_BLKIO][0] == '\0') {
		cg_unset(W_IO, "no cgroup hierarchy carries the io (blkio) "
		    "controller for sandboxd");
		return;
	}
	if (cg_has(cg_base[H_BLKIO], "blkio.bfq.weight") && cg_scheduler("bfq"))
		cg_io_file = "blkio.bfq.weight";
	else if (cg_has(cg_base[H_BLKIO], "blkio.weight") && cg_scheduler("cfq"))
		cg_io_file = "blkio.weight";
	if (cg_io_file != NULL)
		cg_set(W_IO, H_BLKIO, "cgroup v1 %s", cg_io_file);
	else
		cg_unset(W_IO, "no disk uses the BFQ (blkio.bfq.weight) or CFQ "
		    "(blkio.weight) scheduler: v1 IO weights would do nothing");
}

/* Remove the v1 BASE directories that no controller decision uses. */
static void
cg_drop_unused(void)
{
	int	h, w, used;

	for (h = H_MEMORY; h < H_N; h++) {
		if (cg_base[h][0] == '\0')
			continue;
		used = h == H_FREEZER && cg_member == H_FREEZER;
		for (w = W_MEMORY; w < W_N; w++)
			used |= cg_ctl[w] == h;
		if (!used) {
			(void)cg_remove(cg_base[h]);
			cg_base[h][0] = '\0';
		}
	}
}

/* Log one line per mechanism, and loudly each one not enforced. */
static void
cg_log(void)
{
	int	w;

	for (w = 0; w < W_N; w++)
		if (cg_ctl[w] != -1)
			log_info("containment: %s by %s", cg_whats[w].what,
			    cg_how[w]);
		else
			log_warnx("containment: %s NOT ENFORCED: %s",
			    cg_whats[w].what, cg_why[w]);
}

/*
 * Decide how spawns are made members of a cgroup and how a cgroup is
 * killed, from the hierarchies found; why says why none was when none was.
 */
static void
cg_pick_membership(char *why, size_t whysz)
{
	if (cg_member == H_V2) {
		cg_set(W_MEMBERSHIP, H_V2, "cgroup v2 %s", cg_base[H_V2]);
		if (cg_has(cg_base[H_V2], "cgroup.kill")) {
			cg_killer = K_V2_KILL;
			cg_set(W_KILL, H_V2, "cgroup v2 cgroup.kill");
		} else if (cg_has(cg_base[H_V2], "cgroup.freeze")) {
			cg_killer = K_V2_FREEZE;
			cg_set(W_KILL, H_V2, "cgroup v2 cgroup.freeze, then "
			    "SIGKILL to every process");
		} else
			cg_unset(W_KILL, "the kernel has neither cgroup.kill "
			    "nor cgroup.freeze (needs Linux 5.14, or 5.2)");
	} else if (cg_member == H_FREEZER) {
		cg_killer = K_V1_FREEZER;
		cg_set(W_MEMBERSHIP, H_FREEZER, "cgroup v1 freezer %s",
		    cg_base[H_FREEZER]);
		cg_set(W_KILL, H_FREEZER, "cgroup v1 freezer.state, then "
		    "SIGKILL to every process");
	} else {
		if (why[0] == '\0' || geteuid() == 0)
			snprintf(why + strlen(why), whysz - strlen(why),
			    "%sno cgroup v1 freezer hierarchy for sandboxd",
			    why[0] ? "; " : "");
		cg_unset(W_MEMBERSHIP, "%s", why);
		cg_unset(W_KILL, "%s", why);
	}
}

/* Decide which hierarchy carries each limit, per user and per spawn. */
static void
cg_pick_limits(void)
{
	cg_pick(W_MEMORY, "memory", "memory.max", H_MEMORY,
	    "memory.limit_in_bytes", "");
	if (cg_ctl[W_MEMORY] == H_V2) {
		if (cg_has(cg_base[H_V2], "memory.swap.max"))
			cg_set(W_SWAP, H_V2, "cgroup v2 memory.swap.max");
		else
			cg_unset(W_SWAP, "no memory.swap.max (swap accounting "
			    "is off: swapaccount=1 on the kernel command line)");
	} else if (cg_ctl[W_MEMORY] == H_MEMORY) {
		if (cg_has(cg_base[H_MEMORY], "memory.memsw.limit_in_bytes"))
			cg_set(W_SWAP, H_MEMORY, "cgroup v1 "
			    "memory.memsw.limit_in_bytes");
		else
			cg_unset(W_SWAP, "no memory.memsw.limit_in_bytes (swap "
			    "accounting is off: swapaccount=1 on the kernel "
			    "command line)");
	} else
		cg_unset(W_SWAP, "%s", cg_why[W_MEMORY]);
	cg_pick(W_PIDS, "pids", "pids.max", H_PIDS, "pids.max", "");
	cg_pick(W_CPU, "cpu", "cpu.weight", H_CPU, "cpu.shares", "");
	if (cg_ctl[W_CPU] == H_V2)
		cg_set(W_CPU_MAX, H_V2, "cgroup v2 cpu.max");
	else if (cg_ctl[W_CPU] == H_CPU)
		cg_pick(W_CPU_MAX, NULL, NULL, H_CPU, "cpu.cfs_quota_us",
		    " (a kernel without CONFIG_CFS_BANDWIDTH)");
	else
		cg_unset(W_CPU_MAX, "%s", cg_why[W_CPU]);
	cg_pick_io();
	/* per spawn: only v2 controllers nest below the user's cgroup */
	if (cg_ctl[W_MEMORY] == H_V2)
		cg_set(W_SPAWN_MEMORY, H_V2, "cgroup v2 memory.max");
	else
		cg_unset(W_SPAWN_MEMORY, "%s", cg_ctl[W_MEMORY] == -1 ?
		    cg_why[W_MEMORY] : "the memory controller is on cgroup "
		    "v1, where spawns share their user's cgroup: per user "
		    "only");
	if (cg_ctl[W_PIDS] == H_V2)
		cg_set(W_SPAWN_PIDS, H_V2, "cgroup v2 pids.max");
	else
		cg_unset(W_SPAWN_PIDS, "%s", cg_ctl[W_PIDS] == -1 ?
		    cg_why[W_PIDS] : "the pids controller is on cgroup v1, "
		    "where spawns share their user's cgroup: per user only");
}

/* Hand the tree to sandboxd's service user: below each BASE, all is ours. */
static void
cg_give_tree(uid_t uid, gid_t gid)
{
	int	h;

	for (h = 0; h < H_N; h++) {
		char		 path[PATH_MAX + 16];
		DIR		*d;
		struct dirent	*de;

		if (cg_base[h][0] == '\0')
			continue;
		/* BASE's own limits stay its parent's; below, all is ours */
		cg_give(cg_base[h], uid, gid, 0);
		if ((d = opendir(cg_base[h])) == NULL)
			continue;
		while ((de = readdir(d)) != NULL)
			if (de->d_type == DT_DIR && de->d_name[0] != '.') {
				snprintf(path, sizeof(path), "%s/%s",
				    cg_base[h], de->d_name);
				cg_give(path, uid, gid, 1);
			}
		closedir(d);
	}
}

void
cgroup_init(const char *fsroot, const char *instance, uid_t uid, gid_t gid)
{
	char	 why[512];
	int	 h, w;

	snprintf(cg_fsroot, sizeof(cg_fsroot), "%s", fsroot ? fsroot : "");
	cg_fake = cg_fsroot[0] != '\0';
	for (h = 0; h < H_N; h++)
		cg_base[h][0] = '\0';
	cg_member = -1;
	cg_killer = K_NONE;
	cg_nusers = 0;
	cg_v2ctl[0] = '\0';
	for (w = 0; w < W_N; w++)
		cg_unset(w, "not initialised");
	if (!cg_name_ok(instance)) {
		for (w = 0; w < W_N; w++)
			cg_unset(w, "bad instance name");
		cg_log();
		return;
	}

	why[0] = '\0';
	if (cg_init_v2(instance, why, sizeof(why)) == 0) {
		cg_member = H_V2;
		cg_enable_v2(cg_own);
	}
	for (h = H_MEMORY; h < H_N; h++)
		if (h != H_FREEZER || cg_member == -1)
			cg_init_v1(h, instance);
	if (cg_member == -1 && cg_base[H_FREEZER][0] != '\0')
		cg_member = H_FREEZER;

	cg_pick_membership(why, sizeof(why));

	/* limits: each through whichever hierarchy carries its controller */
	if (cg_member == -1) {
		for (h = H_MEMORY; h < H_N; h++)
			if (cg_base[h][0] != '\0')
				(void)cg_remove(cg_base[h]);
		for (h = 0; h < H_N; h++)
			cg_base[h][0] = '\0';
		for (w = W_MEMORY; w < W_N; w++)
			cg_unset(w, "no cgroup per spawn: %s",
			    cg_why[W_MEMBERSHIP]);
		cg_log();
		return;
	}
	cg_pick_limits();
	cg_drop_unused();
	cg_give_tree(uid, gid);
	cg_log();
}

int
cgroup_enabled(void)
{
	return cg_member != -1;
}

/* Retry the removals that waited for dying processes. */
static void
cg_retry(evutil_socket_t fd, short ev, void *arg)
{
	struct cg_pending	*p, *next;
	struct timeval		 tv = { 0, CG_RETRY_MS * 1000 };

	for (p = TAILQ_FIRST(&cg_pending); p != NULL; p = next) {
		next = TAILQ_NEXT(p, entry);
		if (cg_remove(p->path) == 0 || errno == ENOENT ||
		    ++p->tries >= CG_RETRIES) {
			if (p->tries >= CG_RETRIES && access(p->path, F_OK) == 0)
				log_warnx("cgroup: cannot remove %s; the next "
				    "start removes it", p->path);
			TAILQ_REMOVE(&cg_pending, p, entry);
			free(p->path);
			free(p);
		}
	}
	if (!TAILQ_EMPTY(&cg_pending) && cg_ev_retry != NULL)
		evtimer_add(cg_ev_retry, &tv);
}

void
cgroup_loop(struct event_base *base)
{
	cg_evbase = base;
	struct timeval	tv = { 0, CG_RETRY_MS * 1000 };

	if (cg_ev_retry == NULL && base != NULL &&
	    (cg_ev_retry = evtimer_new(base, cg_retry, NULL)) == NULL)
		fatalx("evtimer_new");
	/* what the sweep could not remove yet */
	if (cg_ev_retry != NULL && !TAILQ_EMPTY(&cg_pending))
		evtimer_add(cg_ev_retry, &tv);
}

/* Remove dir later: it still holds processes on their way out. */
static void
cg_remove_later(const char *dir)
{
	struct cg_pending	*p;
	struct timeval		 tv = { 0, CG_RETRY_MS * 1000 };

	TAILQ_FOREACH(p, &cg_pending, entry)
		if (strcmp(p->path, dir) == 0)
			return;
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->path = strdup(dir)) == NULL) {
		free(p);
		return;
	}
	TAILQ_INSERT_TAIL(&cg_pending, p, entry);
	if (cg_ev_retry != NULL && !evtimer_pending(cg_ev_retry, NULL))
		evtimer_add(cg_ev_retry, &tv);
}

/*
 * Remove a cgroup and its descendants, deepest first; -1 (errno EBUSY)
 * while a process is still in one of them.
 */
static int
cg_remove(const char *dir)
{
	struct dirent	*de;
	DIR		*d;
	char		 path[PATH_MAX + 300];
	int		 rc = 0, save;

	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (de->d_type == DT_DIR) {
			if (cg_remove(path) == -1)
				rc = -1;
		} else if (cg_fake)
			(void)unlink(path);
	}
	closedir(d);
	if (rc == -1) {
		errno = EBUSY;
		return -1;
	}
	if (rmdir(dir) == -1) {
		save = errno;
		errno = save == ENOENT ? ENOENT : EBUSY;
		return -1;
	}
	return 0;
}

/* Remove dir now, or once its dying processes are gone. */
static void
cg_remove_soon(const char *dir)
{
	if (cg_remove(dir) == -1 && errno != ENOENT)
		cg_remove_later(dir);
}

/* Visit every pid in dir's cgroup.procs and below; the count. */
static int
cg_pids(const char *dir, int sig)
{
	struct dirent	*de;
	DIR		*d;
	FILE		*f;
	char		 path[PATH_MAX + 300], line[32];
	long		 pid;
	int		 n = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if ((f = fopen(path, "re")) != NULL) {
		while (fgets(line, sizeof(line), f) != NULL)
			if ((pid = strtol(line, NULL, 10)) > 1) {
				n++;
				if (sig != 0)
					(void)kill((pid_t)pid, sig);
			}
		fclose(f);
	}
	if ((d = opendir(dir)) == NULL)
		return n;
	while ((de = readdir(d)) != NULL)
		if (de->d_type == DT_DIR && de->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			n += cg_pids(path, sig);
		}
	closedir(d);
	return n;
}

/* Poll a freezer until it reports frozen; bounded, microseconds usually. */
static int
cg_frozen(const char *dir, int v2)
{
	struct timespec	 ts = { 0, 100000 };
	char		 buf[512];
	int		 i;

	for (i = 0; i < CG_FREEZE_TRIES; i++) {
		if (v2 ? cg_read_key(dir, "cgroup.events", "frozen") == 1 :
		    cg_read(dir, "freezer.state", buf, sizeof(buf)) == 0 &&
		    strncmp(buf, "FROZEN", 6) == 0)
			return 0;
		nanosleep(&ts, NULL);
	}
	return -1;
}

/*
 * Kill every process in a cgroup and its descendants; the number of
 * processes it held, or -1 when the cgroup does not exist.
 */
static int
cg_kill(const char *dir)
{
	int	n, v2 = cg_killer == K_V2_FREEZE;

	if (access(dir, F_OK) == -1)
		return -1;
	n = cg_pids(dir, 0);
	switch (cg_killer) {
	case K_V2_KILL:
		if (cg_writef("1", dir, "cgroup.kill") == -1)
			log_warn("cgroup: %s/cgroup.kill", dir);
		break;
	case K_V2_FREEZE:
	case K_V1_FREEZER:
		/* Frozen, nothing can fork while its siblings are killed. */
		if ((v2 ? cg_writef("1", dir, "cgroup.freeze") :
		    cg_writef("FROZEN", dir, "freezer.state")) == -1)
			log_warn("cgroup: freeze %s", dir);
		else if (cg_frozen(dir, v2) == -1)
			log_warnx("cgroup: %s did not freeze; killing anyway",
			    dir);
		n = cg_pids(dir, SIGKILL);
		/* A frozen process dies only once thawed. */
		if ((v2 ? cg_writef("0", dir, "cgroup.freeze") :
		    cg_writef("THAWED", dir, "freezer.state")) == -1)
			log_warn("cgroup: thaw %s", dir);
		break;
	case K_NONE:
		break;
	}
	return n;
}

/* The directory of a user's cgroup in hierarchy h. */
static int
cg_user_dir(enum cg_hier h, const char *user, char *out, size_t outsz)
{
	if ((int)h < 0 || h >= H_N || cg_base[h][0] == '\0' ||
	    !cg_name_ok(user))
		return -1;
	snprintf(out, outsz, "%s/u-%s", cg_base[h], user);
	return 0;
}

/*
 * The directory of a spawn's cgroup in the membership hierarchy; when
 * session is NULL, a session's d-* is searched too (existing only).
 */
static int
cg_spawn_dir(const char *user, const char *session, const char *id,
    int search, char *out, size_t outsz)
{
	struct dirent	*de;
	DIR		*d;
	char		 udir[PATH_MAX];

	if (cg_member == -1 || !cg_name_ok(id) ||
	    (session != NULL && !cg_name_ok(session)) ||
	    cg_user_dir(cg_member, user, udir, sizeof(udir)) == -1)
		return -1;
	if (session != NULL) {
		snprintf(out, outsz, "%s/d-%s/s-%s", udir, session, id);
		return 0;
	}
	snprintf(out, outsz, "%s/s-%s", udir, id);
	if (!search || access(out, F_OK) == 0 || (d = opendir(udir)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, "d-", 2) == 0) {
			snprintf(out, outsz, "%s/%s/s-%s", udir, de->d_name, id);
			if (access(out, F_OK) == 0)
				break;
			snprintf(out, outsz, "%s/s-%s", udir, id);
		}
	closedir(d);
	return 0;
}

/* A limit as a cgroup v2 value: a number, or "max". */
static void
cg_v2val(int64_t v, char *buf, size_t bufsz)
{
	if (v < 0)
		snprintf(buf, bufsz, "max");
	else
		snprintf(buf, bufsz, "%lld", (long long)v);
}

/* Write the limits of l that v2 carries into dir; -1 and err. */
static int
cg_limits_v2(const char *dir, const struct cg_limits *l, int spawn,
    char *err, size_t errsz)
{
	char	val[64];

#define CG_TRY(file, value) do {					\
	if (cg_writef((value), dir, "%s", (file)) == -1) {		\
		snprintf(err, errsz, "%s/%s: %s", dir, (file),		\
		    strerror(errno));					\
		return -1;						\
	}								\
} while (0)
	if (cg_ctl[W_MEMORY] == H_V2) {
		cg_v2val(l->memory_max, val, sizeof(val));
		CG_TRY("memory.max", val);
		if (cg_ctl[W_SWAP] == H_V2 && (!spawn || l->swap_max >= 0)) {
			cg_v2val(l->swap_max, val, sizeof(val));
			CG_TRY("memory.swap.max", val);
		}
	}
	if (cg_ctl[W_PIDS] == H_V2) {
		cg_v2val(l->pids_max, val, sizeof(val));
		CG_TRY("pids.max", val);
	}
	if (cg_ctl[W_CPU] == H_V2 && l->cpu_weight > 0) {
		snprintf(val, sizeof(val), "%lld", (long long)l->cpu_weight);
		CG_TRY("cpu.weight", val);
	}
	if (cg_ctl[W_CPU_MAX] == H_V2 && (!spawn || l->cpu_max > 0)) {
		if (l->cpu_max > 0)
			snprintf(val, sizeof(val), "%lld 100000",
			    (long long)l->cpu_max * 1000);
		else
			snprintf(val, sizeof(val), "max 100000");
		CG_TRY("cpu.max", val);
	}
	if (cg_ctl[W_IO] == H_V2 && l->io_weight > 0) {
		/* iocost takes 1..10000; BFQ 1..1000, both 100 by default */
		if (strcmp(cg_io_file, "io.weight") == 0)
			snprintf(val, sizeof(val), "default %lld",
			    (long long)l->io_weight);
		else
			snprintf(val, sizeof(val), "%lld", (long long)(
			    l->io_weight > 1000 ? 1000 : l->io_weight));
		CG_TRY(cg_io_file, val);
	}
	return 0;
}

/* Write a user's limits into their v1 cgroups; -1 and err. */
static int
cg_limits_v1(const char *user, const struct cg_limits *l, char *err,
    size_t errsz)
{
	char		 dir[PATH_MAX + 64], val[64];
	long long	 v;

	if (cg_ctl[W_MEMORY] == H_MEMORY &&
	    cg_user_dir(H_MEMORY, user, dir, sizeof(dir)) == 0) {
		/* memsw >= limit at every step: lift it, set both. */
		if (cg_ctl[W_SWAP] == H_MEMORY)
			(void)cg_writef("-1", dir, "memory.memsw.limit_in_bytes");
		snprintf(val, sizeof(val), "%lld", (long long)l->memory_max);
		CG_TRY("memory.limit_in_bytes", val);
		if (cg_ctl[W_SWAP] == H_MEMORY && l->memory_max >= 0 &&
		    l->swap_max >= 0) {
			snprintf(val, sizeof(val), "%lld",
			    (long long)(l->memory_max + l->swap_max));
			CG_TRY("memory.memsw.limit_in_bytes", val);
		}
	}
	if (cg_ctl[W_PIDS] == H_PIDS &&
	    cg_user_dir(H_PIDS, user, dir, sizeof(dir)) == 0) {
		cg_v2val(l->pids_max, val, sizeof(val));
		CG_TRY("pids.max", val);
	}
	if (cg_ctl[W_CPU] == H_CPU &&
	    cg_user_dir(H_CPU, user, dir, sizeof(dir)) == 0) {
		/* v2's default weight 100 is v1's default 1024 shares */
		v = l->cpu_weight > 0 ? l->cpu_weight * 1024 / 100 : 1024;
		snprintf(val, sizeof(val), "%lld", v < 2 ? 2 : v);
		CG_TRY("cpu.shares", val);
	}
	if (cg_ctl[W_CPU_MAX] == H_CPU &&
	    cg_user_dir(H_CPU, user, dir, sizeof(dir)) == 0) {
		CG_TRY("cpu.cfs_period_us", "100000");
		snprintf(val, sizeof(val), "%lld", l->cpu_max > 0 ?
		    (long long)l->cpu_max * 1000 : -1LL);
		CG_TRY("cpu.cfs_quota_us", val);
	}
	if (cg_ctl[W_IO] == H_BLKIO && l->io_weight > 0 &&
	    cg_user_dir(H_BLKIO, user, dir, sizeof(dir)) == 0) {
		if (strcmp(cg_io_file, "blkio.weight") == 0) {
			/* CFQ: 10..1000, 500 by default (v2's 100) */
			v = l->io_weight * 5;
			v = v < 10 ? 10 : v > 1000 ? 1000 : v;
		} else	/* BFQ: 1..1000, 100 by default */
			v = l->io_weight > 1000 ? 1000 : l->io_weight;
		snprintf(val, sizeof(val), "%lld", v);
		CG_TRY(cg_io_file, val);
	}
#undef CG_TRY
	return 0;
}

/* The cache entry of a user, or NULL. */
static struct cg_user *
cg_user_find(const char *user)
{
	int	i;

	for (i = 0; i < cg_nusers; i++)
		if (strcmp(cg_users[i].name, user) == 0)
			return &cg_users[i];
	return NULL;
}

/* Forget a user's cached limits (their cgroups went). */
static void
cg_user_forget(const char *user)
{
	struct cg_user	*u;

	if ((u = cg_user_find(user)) != NULL)
		*u = cg_users[--cg_nusers];
}

int
cgroup_user(const char *user, const struct cg_limits *l, char *err,
    size_t errsz)
{
	struct cg_user	*u;
	char		 dir[PATH_MAX + 64];
	int		 h;

	if (!cgroup_enabled())
		return 0;
	if (!cg_name_ok(user) || strlen(user) >= sizeof(cg_users[0].name)) {
		snprintf(err, errsz, "bad user name for a cgroup");
		return -1;
	}
	if ((u = cg_user_find(user)) != NULL &&
	    memcmp(&u->lim, l, sizeof(*l)) == 0 &&
	    cg_user_dir(cg_member, user, dir, sizeof(dir)) == 0 &&
	    access(dir, F_OK) == 0)
		return 0;
	for (h = 0; h < H_N; h++) {
		if (cg_user_dir(h, user, dir, sizeof(dir)) == -1)
			continue;
		if (cg_mkdir(dir) == -1) {
			snprintf(err, errsz, "mkdir %s: %s", dir,
			    strerror(errno));
			return -1;
		}
		if (h == H_V2 && cg_v2ctl[0] != '\0' &&
		    cg_writef(cg_v2ctl, dir, "cgroup.subtree_control") == -1) {
			snprintf(err, errsz, "%s/cgroup.subtree_control: %s",
			    dir, strerror(errno));
			return -1;
		}
	}
	if (cg_user_dir(H_V2, user, dir, sizeof(dir)) == 0 &&
	    cg_limits_v2(dir, l, 0, err, errsz) == -1)
		return -1;
	if (cg_limits_v1(user, l, err, errsz) == -1)
		return -1;
	if (u == NULL && cg_nusers < CG_USERS) {
		u = &cg_users[cg_nusers++];
		snprintf(u->name, sizeof(u->name), "%s", user);
	}
	if (u != NULL)
		u->lim = *l;
	return 0;
}

int
cgroup_user_join(const char *user)
{
	char	dir[PATH_MAX + 64], leaf[PATH_MAX + 96];
	int	h;

	if (!cgroup_enabled())
		return 0;
	for (h = H_MEMORY; h < H_N; h++)
		if (h != cg_member &&
		    cg_user_dir(h, user, dir, sizeof(dir)) == 0 &&
		    cg_writef("0", dir, "cgroup.procs") == -1)
			return -1;
	/*
	 * A leaf of its own, never one that was killed before: the kernel
	 * (6.18) SIGKILLs a clone3(CLONE_INTO_CGROUP) child whenever the
	 * parent's cgroup has seen more cgroup.kill writes than the child's
	 * (it compares the kill counters of two different cgroups), so a
	 * spawner in a reused, once-killed leaf would have every spawn die.
	 */
	if (cg_user_dir(cg_member, user, dir, sizeof(dir)) == -1)
		return -1;
	if ((size_t)snprintf(leaf, sizeof(leaf), "%s/spawner-%d", dir,
	    (int)getpid()) >= sizeof(leaf) || cg_mkdir(leaf) == -1 ||
	    cg_writef("0", leaf, "cgroup.procs") == -1)
		return -1;
	return 0;
}

/* A spawner is gone: remove its leaf once the kernel lets go of it. */
void
cgroup_spawner_gone(const char *user, pid_t pid)
{
	char	dir[PATH_MAX + 64], leaf[PATH_MAX + 96];

	if (!cgroup_enabled() ||
	    cg_user_dir(cg_member, user, dir, sizeof(dir)) == -1)
		return;
	snprintf(leaf, sizeof(leaf), "%s/spawner-%d", dir, (int)pid);
	cg_remove_soon(leaf);
}

int
cgroup_spawn(const char *user, const char *session, const char *id,
    const struct cg_limits *l, int *v2fd, char *procs, size_t procssz,
    char *err, size_t errsz)
{
	char	dir[PATH_MAX + 128], sdir[PATH_MAX + 64], *slash;

	*v2fd = -1;
	if (procssz > 0)
		procs[0] = '\0';
	if (!cgroup_enabled())
		return 0;
	if (cg_spawn_dir(user, session, id, 0, dir, sizeof(dir)) == -1) {
		snprintf(err, errsz, "bad user, session or spawn id for a "
		    "cgroup");
		return -1;
	}
	if (session != NULL) {
		/* d-SESSION passes the controllers on, as u-USER does. */
		snprintf(sdir, sizeof(sdir), "%s", dir);
		if ((slash = strrchr(sdir, '/')) != NULL)
			*slash = '\0';
		if (access(sdir, F_OK) == -1 && (cg_mkdir(sdir) == -1 ||
		    (cg_member == H_V2 && cg_v2ctl[0] != '\0' &&
		    cg_writef(cg_v2ctl, sdir, "cgroup.subtree_control") == -1))) {
			snprintf(err, errsz, "cgroup %s: %s", sdir,
			    strerror(errno));
			return -1;
		}
	}
	if (cg_mkdir(dir) == -1) {
		snprintf(err, errsz, "mkdir %s: %s", dir, strerror(errno));
		return -1;
	}
	if (cg_member == H_V2 && l != NULL &&
	    cg_limits_v2(dir, l, 1, err, errsz) == -1) {
		(void)cg_remove(dir);
		return -1;
	}
	if (cg_member == H_V2) {
		if ((*v2fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1) {
			snprintf(err, errsz, "open %s: %s", dir,
			    strerror(errno));
			(void)cg_remove(dir);
			return -1;
		}
	} else
		snprintf(procs, procssz, "%s/cgroup.procs", dir);
	return 0;
}

int
cgroup_spawn_kill(const char *user, const char *session, const char *id)
{
	char	dir[PATH_MAX + 128];
	int	n;

	if (cg_spawn_dir(user, session, id, 1, dir, sizeof(dir)) == -1)
		return -1;
	if ((n = cg_kill(dir)) == -1)
		return -1;
	cg_remove_soon(dir);
	return n;
}

int
cgroup_session_kill(const char *session)
{
	struct dirent	*de;
	DIR		*d;
	char		 dir[PATH_MAX + 300];
	int		 n = 0, k;

	if (cg_member == -1 || !cg_name_ok(session) ||
	    (d = opendir(cg_base[cg_member])) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "u-", 2) != 0)
			continue;
		snprintf(dir, sizeof(dir), "%s/%s/d-%s", cg_base[cg_member],
		    de->d_name, session);
		if ((k = cg_kill(dir)) == -1)
			continue;
		n += k;
		cg_remove_soon(dir);
	}
	closedir(d);
	return n;
}

int
cgroup_user_kill(const char *user)
{
	char	dir[PATH_MAX + 64];
	int	n = 0, h;

	if (cg_user_dir(cg_member, user, dir, sizeof(dir)) == -1)
		return 0;
	if ((n = cg_kill(dir)) == -1)
		n = 0;
	for (h = 0; h < H_N; h++)
		if (cg_user_dir(h, user, dir, sizeof(dir)) == 0 &&
		    access(dir, F_OK) == 0)
			cg_remove_soon(dir);
	cg_user_forget(user);
	return n;
}

int
cgroup_sweep(void)
{
	struct dirent	*de, *se;
	DIR		*d, *sd;
	char		 udir[PATH_MAX + 300], dir[PATH_MAX + 600];
	int		 n = 0, k, ncg = 0;

	if (cg_member == -1 || (d = opendir(cg_base[cg_member])) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "u-", 2) != 0 || de->d_type != DT_DIR)
			continue;
		snprintf(udir, sizeof(udir), "%s/%s", cg_base[cg_member],
		    de->d_name);
		if ((sd = opendir(udir)) == NULL)
			continue;
		/* s-*, d-*, the old spawner: everything but the limits */
		while ((se = readdir(sd)) != NULL) {
			if (se->d_type != DT_DIR || se->d_name[0] == '.')
				continue;
			snprintf(dir, sizeof(dir), "%s/%s", udir, se->d_name);
			if ((k = cg_kill(dir)) > 0) {
				n += k;
				ncg++;
			}
			cg_remove_soon(dir);
		}
		closedir(sd);
	}
	closedir(d);
	if (n > 0)
		log_warnx("killed %d processes that a previous sandboxd left in "
		    "%d cgroups of %s", n, ncg, cg_base[cg_member]);
	else
		log_info("no process left by a previous sandboxd in %s",
		    cg_base[cg_member]);
	return n;
}

int64_t
cgroup_oom_kills(const char *user, const char *id)
{
	char	dir[PATH_MAX + 128];

	if (cg_ctl[W_MEMORY] == H_V2) {
		if (id != NULL ? cg_spawn_dir(user, NULL, id, 1, dir,
		    sizeof(dir)) == -1 : cg_user_dir(H_V2, user, dir,
		    sizeof(dir)) == -1)
			return -1;
		return cg_read_key(dir, "memory.events", "oom_kill");
	}
	/* v1: one count per user; the caller compares before and after. */
	if (cg_ctl[W_MEMORY] == H_MEMORY &&
	    cg_user_dir(H_MEMORY, user, dir, sizeof(dir)) == 0)
		return cg_read_key(dir, "memory.oom_control", "oom_kill");
	return -1;
}

/* {"current", "max"} of one controller, null where unknown or none. */
static struct json_object *
cg_usage_one(int h, const char *user, const char *cur, const char *max)
{
	struct json_object	*o;
	char			 dir[PATH_MAX + 64];
	int64_t			 v;

	o = json_object_new_object();
	if (h == -1 || cg_user_dir(h, user, dir, sizeof(dir)) == -1) {
		json_object_object_add(o, "current", NULL);
		json_object_object_add(o, "max", NULL);
		return o;
	}
	v = cg_read_num(dir, cur);
	json_object_object_add(o, "current", v >= 0 ?
	    json_object_new_int64(v) : NULL);
	v = cg_read_num(dir, max);
	json_object_object_add(o, "max", v >= 0 ?
	    json_object_new_int64(v) : NULL);
	return o;
}

struct json_object *
cgroup_usage(const char *user)
{
	struct json_object	*o;
	int64_t			 oom;

	o = json_object_new_object();
	json_object_object_add(o, "memory", cg_usage_one(cg_ctl[W_MEMORY],
	    user, cg_ctl[W_MEMORY] == H_V2 ? "memory.current" :
	    "memory.usage_in_bytes", cg_ctl[W_MEMORY] == H_V2 ?
	    "memory.max" : "memory.limit_in_bytes"));
	json_object_object_add(o, "pids", cg_usage_one(cg_ctl[W_PIDS], user,
	    "pids.current", "pids.max"));
	oom = cgroup_oom_kills(user, NULL);
	json_object_object_add(o, "oom_kills", oom >= 0 ?
	    json_object_new_int64(oom) : NULL);
	return o;
}

struct json_object *
cgroup_json(void)
{
	struct json_object	*o, *why;
	int			 w;

	o = json_object_new_object();
	why = json_object_new_object();
	json_object_object_add(o, "base", cg_member != -1 ?
	    json_object_new_string(cg_base[cg_member]) : NULL);
	for (w = 0; w < W_N; w++) {
		json_object_object_add(o, cg_whats[w].key, cg_ctl[w] != -1 ?
		    json_object_new_string(cg_how[w]) : NULL);
		if (cg_ctl[w] == -1)
			json_object_object_add(why, cg_whats[w].key,
			    json_object_new_string(cg_why[w]));
	}
	json_object_object_add(o, "not_enforced", why);
	return o;
}

const char *
cgroup_path(const char *user, const char *session, const char *id,
    char *buf, size_t bufsz)
{
	if (cg_spawn_dir(user, session, id, 0, buf, bufsz) == -1)
		return NULL;
	return buf;
}

void
cgroup_limits_user(const struct config *conf, struct cg_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->memory_max = conf->user_memory_max;
	l->swap_max = conf->user_swap_max;
	l->pids_max = conf->user_pids_max;
	l->cpu_weight = conf->user_cpu_weight;
	l->cpu_max = conf->user_cpu_max;
	l->io_weight = conf->user_io_weight;
}

void
cgroup_limits_spawn(const struct config *conf, struct cg_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->memory_max = conf->spawn_memory_max;
	l->swap_max = -1;
	l->pids_max = conf->spawn_pids_max;
}

void
cgroup_fini(void)
{
	struct cg_pending	*p;
	char			 path[PATH_MAX + 64];
	int			 h;

	while ((p = TAILQ_FIRST(&cg_pending)) != NULL) {
		(void)cg_remove(p->path);
		TAILQ_REMOVE(&cg_pending, p, entry);
		free(p->path);
		free(p);
	}
	if (cg_ev_retry != NULL) {
		event_free(cg_ev_retry);
		cg_ev_retry = NULL;
	}
	/*
	 * Empty user cgroups go, and v1's BASE when empty; v2's BASE and
	 * its daemon leaf stay while we are in it (the next start's).
	 */
	for (; cg_nusers > 0; cg_nusers--)
		for (h = 0; h < H_N; h++)
			if (cg_user_dir(h, cg_users[cg_nusers - 1].name, path,
			    sizeof(path)) == 0)
				(void)cg_remove(path);
	for (h = H_MEMORY; h < H_N; h++)
		if (cg_base[h][0] != '\0' && h != cg_member)
			(void)rmdir(cg_base[h]);
	cg_member = -1;
}
