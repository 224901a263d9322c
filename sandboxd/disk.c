/*
 * The disk helper: the one part of sandboxd that stays root. Forked by
 * sandboxd before its privilege drop (the OpenSSH monitor model, upside
 * down: here the helper is the privileged side), it gives each user a
 * filesystem of their own whose size the kernel enforces, mounted on
 * their workspace:
 *
 *   STATE_DIR/disks/USER.img   a sparse file, btrfs (mkfs.btrfs), with
 *                              quotas on and a subvolume "workspace"
 *                              whose qgroup 1/1 carries the user's limit;
 *   WORKSPACE_ROOT/USER        where that subvolume is mounted, nosuid,
 *                              nodev, through a loop device that clears
 *                              itself (LO_FLAGS_AUTOCLEAR) when unmounted.
 *
 * A write past the limit fails with EDQUOT. Where the workspace root's
 * own filesystem has project quotas on (ext4 or xfs with prjquota), the
 * workspace is a plain directory with a project id and a project limit
 * instead, and no image is made.
 *
 * The helper trusts nothing sandboxd says but a user name (checked here
 * too), a uid, a gid (never 0) and a size: it computes every path itself
 * from the configuration it was forked with. It keeps uid 0 with only
 * CAP_SYS_ADMIN (mount, loop devices, btrfs quota ioctls, quotactl),
 * CAP_DAC_OVERRIDE (the workspace root belongs to sandboxd's user) and
 * CAP_CHOWN (a new workspace goes to its user); SECBIT_NOROOT, so that
 * the one program it execs, mkfs.btrfs, runs with no capability at all;
 * no_new_privs and a seccomp deny list. When sandboxd goes away (its end
 * of the socketpair closes) or the helper gets SIGTERM, it unmounts every
 * workspace it mounted, so that nothing outlives the daemon; a helper
 * killed with SIGKILL leaves its mounts to the next helper's sweep.
 */
#include <sys/types.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/quota.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/securebits.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/capability.h>

#include "sandboxd.h"

#ifndef BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA
#define BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA 4	/* Linux 6.7 */
#endif

#define DISK_SUBVOL	"workspace"
#define DISK_QGROUP	((1ULL << 48) | 1)	/* 1/1: the user's limit */
#define DISK_LOCK_MS	3000	/* to wait for an image a helper releases */

/*
 * QCMD(cmd, PRJQUOTA) for quotactl_fd: glibc's QCMD shifts the signed
 * command past the top bit of an int (undefined behaviour, UBSan says).
 */
#define DISK_PRJQCMD(cmd)	((int)((unsigned)(cmd) << SUBCMDSHIFT | \
			    (PRJQUOTA & SUBCMDMASK)))

/* The btrfs-progs locations of Debian and the other distributions. */
static const char *const disk_mkfs_paths[] = {
	"/usr/sbin/mkfs.btrfs", "/sbin/mkfs.btrfs", "/usr/bin/mkfs.btrfs",
	NULL
};

/*
 * The helper inherits no filter from sandboxd (it is forked before
 * sandboxd loads one) and loads this deny list, which mkfs.btrfs inherits
 * too. Each entry with its reason.
 */
static const char *const disk_denied[] = {
	/* priv_host_denied (common/priv.c), and: */
	"ptrace", "process_vm_readv",		/* other processes' memory */
	"process_vm_writev", "kcmp",
	"bpf", "perf_event_open",		/* kernel programs, profiling */
	"userfaultfd",				/* race widening in exploits */
	"keyctl", "add_key", "request_key",	/* the kernel keyrings */
	"setns", "unshare", "pivot_root",	/* no other namespace or root */
	"chroot",
	"setuid", "setgid", "setreuid",		/* stays uid 0, never another */
	"setregid", "setresuid", "setresgid", "setgroups",
	"io_uring_setup",			/* a syscall surface of its own */
	NULL
};

/* A workspace this helper mounted. */
struct disk_ws {
	char			 user[DISK_USER_MAX + 1];
	int			 img;		/* the image, locked */
	int			 loop;		/* its loop device */
	int			 mnt;		/* the mounted workspace */
	int64_t			 max;		/* the limit set */
	char			 fsid[40];
	TAILQ_ENTRY(disk_ws)	 entry;
};

static TAILQ_HEAD(, disk_ws) disk_mounts = TAILQ_HEAD_INITIALIZER(disk_mounts);
static struct config	*disk_conf;
static char		 disk_dir[4096];	/* STATE_DIR/disks */
static int		 disk_rootfd = -1;	/* the workspace root */
static int		 disk_dirfd = -1;	/* disk_dir */
static const char	*disk_mkfs;
static int		 disk_project;		/* project quotas instead */
static uid_t		 disk_daemon_uids[2];	/* frontd's, brokerd's */
static volatile sig_atomic_t disk_stop;

static int	disk_umount_fd(int);

/* A hostgate user name, as brokerd's auth.c allows them. */
int
disk_user_ok(const char *name)
{
	const char	*c;

	if (name == NULL || !((name[0] >= 'a' && name[0] <= 'z') ||
	    name[0] == '_') || strlen(name) > DISK_USER_MAX)
		return 0;
	for (c = name; *c != '\0'; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		    *c == '_' || *c == '.' || *c == '-'))
			return 0;
	return 1;
}

/*
 * The size of a user's image for a limit: the limit, plus room for
 * btrfs's own chunks (DUP metadata and system chunks take about 80 MiB of
 * a small filesystem) and metadata growth: an eighth, at least 128 MiB;
 * in whole MiB. The image is sparse: it takes on the host only what is
 * written.
 */
int64_t
disk_image_size(int64_t max)
{
	int64_t	room = max / 8;

	if (room < (128LL << 20))
		room = 128LL << 20;
	return (max + room + (1LL << 20) - 1) & ~((1LL << 20) - 1);
}

/*
 * One line of mountinfo: its mount point, filesystem type and source,
 * pointers into line (decoded). 0, or -1 when the line is not one.
 */
int
disk_mountinfo_line(char *line, char **mnt, char **fstype, char **source)
{
	char	*f[6], *sep, *save = NULL;
	int	 i;

	line[strcspn(line, "\n")] = '\0';
	if ((sep = strstr(line, " - ")) == NULL)
		return -1;
	*sep = '\0';
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...]" */
	for (i = 0; i < 5; i++)
		if ((f[i] = strtok_r(i == 0 ? line : NULL, " ", &save)) ==
		    NULL)
			return -1;
	save = NULL;
	/* "FSTYPE SOURCE SUPEROPTIONS" */
	if ((*fstype = strtok_r(sep + 3, " ", &save)) == NULL ||
	    (*source = strtok_r(NULL, " ", &save)) == NULL)
		return -1;
	*mnt = f[4];
	mountinfo_unescape(*mnt);
	mountinfo_unescape(*source);
	return 0;
}

/* Reply to sandboxd. */
static void
disk_reply(int sock, int ok, const char *kind, const char *fsid,
    const char *fmt, ...)
{
	struct disk_rep	r;
	va_list		ap;

	memset(&r, 0, sizeof(r));
	r.ok = ok;
	snprintf(r.kind, sizeof(r.kind), "%s", kind != NULL ? kind : "");
	snprintf(r.fsid, sizeof(r.fsid), "%s", fsid != NULL ? fsid : "");
	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(r.err, sizeof(r.err), fmt, ap);
		va_end(ap);
	}
	if (send(sock, &r, sizeof(r), MSG_NOSIGNAL) != sizeof(r))
		log_warn("disk: reply to sandboxd");
}

/*
 * Run mkfs.btrfs on an image, with no capability (SECBIT_NOROOT); on a
 * failure, its first line of complaint goes into err.
 */
static int
disk_mkfs_run(const char *path, char *err, size_t errsz)
{
	char *const	 envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
	    "LANG=C", NULL };
	char		 out[512], *line;
	size_t		 len = 0;
	ssize_t		 n;
	pid_t		 pid;
	int		 status, fd, p[2];

	if (pipe2(p, O_CLOEXEC) == -1 || (pid = fork()) == -1) {
		snprintf(err, errsz, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		if ((fd = open("/dev/null", O_RDWR)) != -1) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
		}
		dup2(p[1], STDERR_FILENO);
		/* -q: no banner; -K: a sparse file needs no discard. */
		execle(disk_mkfs, "mkfs.btrfs", "-q", "-K", "-L", "hostgate",
		    path, (char *)NULL, envp);
		_exit(127);
	}
	close(p[1]);
	while ((n = read(p[0], out + len, sizeof(out) - 1 - len)) > 0 ||
	    (n == -1 && errno == EINTR))
		if (n > 0)
			len += (size_t)n;
	close(p[0]);
	out[len] = '\0';
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR) {
			snprintf(err, errsz, "waitpid: %s", strerror(errno));
			return -1;
		}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if ((line = strstr(out, "ERROR: ")) == NULL)
			line = out;
		line[strcspn(line, "\n")] = '\0';
		snprintf(err, errsz, "mkfs.btrfs failed (status %d): %s",
		    status, *line != '\0' ? line : "no message");
		return -1;
	}
	return 0;
}

/*
 * Make a user's image whole: a sparse file made under a temporary name,
 * formatted, then renamed into place, so that an interrupted mkfs never
 * leaves an image that is no filesystem. Under the lock of the directory.
 */
static int
disk_image_make(const char *name, int64_t size, char *err, size_t errsz)
{
	char	tmp[DISK_USER_MAX + 16], path[4200];
	int	fd, rc = -1;

	snprintf(tmp, sizeof(tmp), "%s.new", name);
	snprintf(path, sizeof(path), "%s/%s", disk_dir, tmp);
	if (flock(disk_dirfd, LOCK_EX) == -1) {
		snprintf(err, errsz, "lock %s: %s", disk_dir, strerror(errno));
		return -1;
	}
	if (faccessat(disk_dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		rc = 0;		/* another helper made it meanwhile */
		goto out;
	}
	if ((fd = openat(disk_dirfd, tmp, O_RDWR | O_CREAT | O_TRUNC |
	    O_NOFOLLOW | O_CLOEXEC, 0600)) == -1) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (ftruncate(fd, size) == -1) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		close(fd);
		goto gone;
	}
	close(fd);
	if (disk_mkfs_run(path, err, errsz) == -1)
		goto gone;
	if (renameat(disk_dirfd, tmp, disk_dirfd, name) == -1) {
		snprintf(err, errsz, "rename %s: %s", path, strerror(errno));
		goto gone;
	}
	fsync(disk_dirfd);
	rc = 0;
	goto out;
gone:
	unlinkat(disk_dirfd, tmp, 0);
out:
	flock(disk_dirfd, LOCK_UN);
	return rc;
}

/* Bind an image to a free loop device; its fd and /dev/loopN in dev. */
static int
disk_loop_attach(int img, const char *path, char *dev, size_t devsz,
    char *err, size_t errsz)
{
	struct loop_config	lc;
	int			ctl, nr, fd, tries;

	if ((ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "/dev/loop-control: %s", strerror(errno));
		return -1;
	}
	for (tries = 0; tries < 16; tries++) {
		if ((nr = ioctl(ctl, LOOP_CTL_GET_FREE)) == -1) {
			snprintf(err, errsz, "LOOP_CTL_GET_FREE: %s",
			    strerror(errno));
			break;
		}
		snprintf(dev, devsz, "/dev/loop%d", nr);
		if ((fd = open(dev, O_RDWR | O_CLOEXEC)) == -1) {
			snprintf(err, errsz, "%s: %s", dev, strerror(errno));
			break;
		}
		memset(&lc, 0, sizeof(lc));
		lc.fd = (uint32_t)img;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		snprintf((char *)lc.info.lo_file_name,
		    sizeof(lc.info.lo_file_name), "%s", path);
		if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) {
			close(ctl);
			return fd;
		}
		close(fd);
		/* Another process took it between GET_FREE and here. */
		if (errno != EBUSY) {
			snprintf(err, errsz, "LOOP_CONFIGURE %s: %s", dev,
			    strerror(errno));
			break;
		}
	}
	close(ctl);
	return -1;
}

/* A detached btrfs mount of dev (subvol: NULL for the top level). */
static int
disk_fsmount(const char *dev, const char *subvol, char *err, size_t errsz)
{
	int	fs, m;

	if ((fs = fsopen("btrfs", FSOPEN_CLOEXEC)) == -1) {
		snprintf(err, errsz, "fsopen btrfs: %s", strerror(errno));
		return -1;
	}
	if (fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) == -1 ||
	    (subvol != NULL &&
	    fsconfig(fs, FSCONFIG_SET_STRING, "subvol", subvol, 0) == -1) ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == -1 ||
	    (m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID |
	    MOUNT_ATTR_NODEV)) == -1) {
		snprintf(err, errsz, "mount %s: %s", dev, strerror(errno));
		close(fs);
		return -1;
	}
	close(fs);
	return m;
}

/*
 * An open directory of a mount's root: fsmount gives an O_PATH fd, and
 * ioctls need more. The O_PATH fd stays open while the mount is detached:
 * closing it dissolves the mount.
 */
static int
disk_opendir(int m, char *err, size_t errsz)
{
	int	fd;

	if ((fd = openat(m, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		snprintf(err, errsz, "open a mount: %s", strerror(errno));
	return fd;
}

/* Set the limit of qgroup 1/1 of the filesystem of fd. */
static int
disk_limit(int fd, int64_t max, char *err, size_t errsz)
{
	struct btrfs_ioctl_qgroup_limit_args	l;

	memset(&l, 0, sizeof(l));
	l.qgroupid = DISK_QGROUP;
	l.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
	l.lim.max_rfer = (uint64_t)max;
	if (ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &l) == -1) {
		snprintf(err, errsz, "qgroup limit: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * First mount of a new image (or one whose set-up was interrupted): turn
 * quotas on, make the workspace subvolume in qgroup 1/1, give it to its
 * user. Simple quotas (Linux 6.7) where the kernel has them: a subvolume
 * or snapshot the user makes inside their workspace joins 1/1 by itself,
 * so the limit holds for it too; with full qgroups it would not, and only
 * the image's size bounds it.
 */
static int
disk_setup(int top, uid_t uid, gid_t gid, char *err, size_t errsz)
{
	struct btrfs_ioctl_quota_ctl_args	q;
	struct btrfs_ioctl_vol_args_v2		v;
	struct btrfs_ioctl_qgroup_create_args	c;
	struct btrfs_ioctl_qgroup_assign_args	a;
	struct btrfs_ioctl_ino_lookup_args	il;
	int					ws, simple = 1;

	memset(&q, 0, sizeof(q));
	q.cmd = BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA;
	if (ioctl(top, BTRFS_IOC_QUOTA_CTL, &q) == -1) {
		simple = 0;
		q.cmd = BTRFS_QUOTA_CTL_ENABLE;
		if (ioctl(top, BTRFS_IOC_QUOTA_CTL, &q) == -1) {
			snprintf(err, errsz, "enable quotas: %s",
			    strerror(errno));
			return -1;
		}
	}
	memset(&v, 0, sizeof(v));
	snprintf(v.name, sizeof(v.name), "%s", DISK_SUBVOL);
	if (ioctl(top, BTRFS_IOC_SUBVOL_CREATE_V2, &v) == -1 &&
	    errno != EEXIST) {
		snprintf(err, errsz, "create subvolume: %s", strerror(errno));
		return -1;
	}
	if ((ws = openat(top, DISK_SUBVOL, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "open subvolume: %s", strerror(errno));
		return -1;
	}
	memset(&il, 0, sizeof(il));
	il.objectid = BTRFS_FIRST_FREE_OBJECTID;
	memset(&c, 0, sizeof(c));
	c.create = 1;
	c.qgroupid = DISK_QGROUP;
	memset(&a, 0, sizeof(a));
	a.assign = 1;
	a.dst = DISK_QGROUP;
	/* The subvolume's tree id is its level-0 qgroup. */
	if (ioctl(ws, BTRFS_IOC_INO_LOOKUP, &il) == -1)
		goto bad;
	a.src = il.treeid;
	/* Assigning may answer 1: "rescan needed", moot for an empty one. */
	if ((ioctl(top, BTRFS_IOC_QGROUP_CREATE, &c) == -1 &&
	    errno != EEXIST) || ioctl(top, BTRFS_IOC_QGROUP_ASSIGN, &a) == -1 ||
	    fchmod(ws, 0700) == -1 || fchown(ws, uid, gid) == -1)
		goto bad;
	close(ws);
	log_info("disk: new workspace filesystem, %s quotas",
	    simple ? "simple" : "full (Linux < 6.7: nested subvolumes "
	    "escape the qgroup; the image size bounds them)");
	return 0;
bad:
	snprintf(err, errsz, "set up the workspace subvolume: %s",
	    strerror(errno));
	close(ws);
	return -1;
}

/* The filesystem id of a btrfs fd as the text of /sys/fs/btrfs/. */
static void
disk_fsid(int fd, char *out, size_t outsz)
{
	struct btrfs_ioctl_fs_info_args	fi;
	const unsigned char		*u = fi.fsid;

	memset(&fi, 0, sizeof(fi));
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) == -1) {
		*out = '\0';
		return;
	}
	snprintf(out, outsz, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4], u[5],
	    u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/*
 * The backing file of loop device dev ("loop3"), from sysfs, into out:
 * 0, or -1 when it has none or cannot be read.
 */
static int
disk_loop_backing(const char *dev, char *out, size_t outsz)
{
	char	path[300], *nl;
	ssize_t	n;
	int	fd;

	if ((size_t)snprintf(path, sizeof(path),
	    "/sys/block/%s/loop/backing_file", dev) >= sizeof(path) ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, out, outsz - 1);
	close(fd);
	if (n <= 0)
		return -1;
	out[n] = '\0';
	if ((nl = strchr(out, '\n')) != NULL)
		*nl = '\0';
	return 0;
}

/*
 * Whether a loop device is still bound to the image: its filesystem is
 * still alive somewhere (unmounted lazily, and a process still has a file
 * or its working directory in it). Mounting the image again then would
 * run two filesystems on one image.
 */
static int
disk_image_bound(const struct stat *img)
{
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	char		 back[4200];
	int		 bound = 0;

	if ((d = opendir("/sys/block")) == NULL)
		return 0;
	while (!bound && (de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		if (disk_loop_backing(de->d_name, back, sizeof(back)) == -1)
			continue;
		if (stat(back, &st) == 0 && st.st_dev == img->st_dev &&
		    st.st_ino == img->st_ino)
			bound = 1;
	}
	closedir(d);
	return bound;
}

/*
 * Take the lock of an image and make sure no filesystem of it is alive,
 * waiting a little for a helper that is letting it go.
 */
static int
disk_lock(int img, const struct stat *st, char *err, size_t errsz)
{
	struct timespec	ts = { 0, 20 * 1000000 };
	int		i, locked = 0;

	for (i = 0; i < DISK_LOCK_MS / 20; i++) {
		if (!locked && flock(img, LOCK_EX | LOCK_NB) == 0)
			locked = 1;
		else if (!locked && errno != EWOULDBLOCK) {
			snprintf(err, errsz, "lock: %s", strerror(errno));
			return -1;
		}
		if (locked && !disk_image_bound(st))
			return 0;
		nanosleep(&ts, NULL);
	}
	snprintf(err, errsz, locked ? "the image is still mounted from "
	    "before (a process keeps its old mount busy)" : "the image is "
	    "in use (another helper holds it)");
	return -1;
}

/*
 * The mount point WORKSPACE_ROOT/USER: made root's, mode 0, so that
 * nothing is ever written there while no image is mounted; it must be an
 * empty directory that is no mount point yet. An O_PATH fd, never
 * followed through a symlink.
 */
static int
disk_mountpoint(const char *user, char *err, size_t errsz)
{
	struct stat	 st, rst;
	struct dirent	*de;
	DIR		*d;
	int		 fd, n = 0;

	if (mkdirat(disk_rootfd, user, 0) == -1 && errno != EEXIST) {
		snprintf(err, errsz, "mkdir the workspace: %s",
		    strerror(errno));
		return -1;
	}
	if ((fd = openat(disk_rootfd, user, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "the workspace is not a directory: %s",
		    strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || fstat(disk_rootfd, &rst) == -1 ||
	    st.st_dev != rst.st_dev) {
		snprintf(err, errsz, "the workspace is a mount point already");
		close(fd);
		return -1;
	}
	if ((d = fdopendir(dup(fd))) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") != 0 &&
			    strcmp(de->d_name, "..") != 0)
				n++;
		closedir(d);
	}
	if (n > 0) {
		snprintf(err, errsz, "the workspace holds files from before "
		    "disk quotas: move them out of %s/%s and back in once it "
		    "is mounted (docs/operations.md)", disk_conf->workspace_root,
		    user);
		close(fd);
		return -1;
	}
	if (fchown(fd, 0, 0) == -1 || fchmod(fd, 0) == -1) {
		snprintf(err, errsz, "workspace mount point: %s",
		    strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Grow an image to size and its filesystem with it. */
static int
disk_grow(struct disk_ws *w, int64_t size, char *err, size_t errsz)
{
	struct btrfs_ioctl_vol_args	v;

	if (ftruncate(w->img, size) == -1 ||
	    ioctl(w->loop, LOOP_SET_CAPACITY, 0) == -1) {
		snprintf(err, errsz, "grow the image: %s", strerror(errno));
		return -1;
	}
	memset(&v, 0, sizeof(v));
	snprintf(v.name, sizeof(v.name), "1:max");
	if (ioctl(w->mnt, BTRFS_IOC_RESIZE, &v) == -1) {
		snprintf(err, errsz, "resize the filesystem: %s",
		    strerror(errno));
		return -1;
	}
	return 0;
}

/* Set a mounted workspace's limit; grow its image when it is raised. */
static int
disk_update(struct disk_ws *w, int64_t max, char *err, size_t errsz)
{
	struct stat	st;
	int64_t		want = disk_image_size(max);

	if (w->max == max)
		return 0;
	if (fstat(w->img, &st) == -1) {
		snprintf(err, errsz, "image: %s", strerror(errno));
		return -1;
	}
	if (st.st_size < want && disk_grow(w, want, err, errsz) == -1)
		return -1;
	if (disk_limit(w->mnt, max, err, errsz) == -1)
		return -1;
	log_info("disk: %s: limit %lld bytes (was %lld)", w->user,
	    (long long)max, (long long)w->max);
	w->max = max;
	return 0;
}

/*
 * Open the image name (at path, for messages), made on first use (*t_mkfs
 * its ms), checked to be root's, locked, and grown to want bytes (*grown).
 * The image's fd, or -1 with err.
 */
static int
disk_image_open(const char *name, const char *path, int64_t want,
    int64_t *t_mkfs, int *grown, char *err, size_t errsz)
{
	struct stat	st;
	int64_t		t0 = now_mono_ms();
	int		img;

	if ((img = openat(disk_dirfd, name, O_RDWR | O_NOFOLLOW |
	    O_CLOEXEC)) == -1 && errno == ENOENT) {
		if (disk_image_make(name, want, err, errsz) == -1)
			return -1;
		*t_mkfs = now_mono_ms() - t0;
		img = openat(disk_dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	}
	if (img == -1) {
		snprintf(err, errsz, "image %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(img, &st) == -1 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    st.st_nlink != 1) {
		snprintf(err, errsz, "image %s is not a file of root's", path);
		goto fail;
	}
	/* One mount per image, whichever helper holds it. */
	if (disk_lock(img, &st, err, errsz) == -1)
		goto fail;
	if (st.st_size < want) {
		if (ftruncate(img, want) == -1) {
			snprintf(err, errsz, "grow %s: %s", path,
			    strerror(errno));
			goto fail;
		}
		*grown = 1;
	}
	return img;
fail:
	close(img);
	return -1;
}

/*
 * Prepare the image's top-level (top) for user: its workspace subvolume
 * made on first use (*t_setup its ms) or checked to be uid:gid's, its quota
 * limit max, and the filesystem grown to fill a grown image. -1 with err.
 */
static int
disk_top_prepare(int top, const char *user, uid_t uid, gid_t gid,
    int64_t max, int grown, int64_t *t_setup, char *err, size_t errsz)
{
	struct stat	st;
	int		ws;

	if ((ws = openat(top, DISK_SUBVOL, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1) {
		*t_setup = now_mono_ms();
		if (disk_setup(top, uid, gid, err, errsz) == -1)
			return -1;
		*t_setup = now_mono_ms() - *t_setup;
	} else {
		if (fstat(ws, &st) == -1 || st.st_uid != uid ||
		    st.st_gid != gid) {
			snprintf(err, errsz, "the workspace image of %s belongs "
			    "to %u:%u, not %u:%u", user, (unsigned)st.st_uid,
			    (unsigned)st.st_gid, (unsigned)uid, (unsigned)gid);
			close(ws);
			return -1;
		}
		close(ws);
	}
	if (disk_limit(top, max, err, errsz) == -1)
		return -1;
	if (grown) {
		struct btrfs_ioctl_vol_args	v;

		memset(&v, 0, sizeof(v));
		snprintf(v.name, sizeof(v.name), "1:max");
		if (ioctl(top, BTRFS_IOC_RESIZE, &v) == -1) {
			snprintf(err, errsz, "resize: %s", strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Mount a user's image on their workspace, making it on first use. */
static struct disk_ws *
disk_mount(const char *user, uid_t uid, gid_t gid, int64_t max, char *err,
    size_t errsz)
{
	struct disk_ws	*w;
	char		 name[DISK_USER_MAX + 8], path[4200], dev[64];
	int		 img, loop = -1, tm = -1, top = -1, wm = -1, mnt = -1;
	int		 mp = -1, back = -1;
	int64_t		 want = disk_image_size(max), t0 = now_mono_ms();
	int64_t		 t_mkfs = 0, t_setup = 0;
	int		 grown = 0;

	snprintf(name, sizeof(name), "%s.img", user);
	snprintf(path, sizeof(path), "%s/%s", disk_dir, name);
	if ((img = disk_image_open(name, path, want, &t_mkfs, &grown, err,
	    errsz)) == -1)
		return NULL;
	/*
	 * The loop device gets a file description of its own: the lock is
	 * the helper's, and must go with it, whatever the loop device keeps.
	 */
	if ((back = openat(disk_dirfd, name, O_RDWR | O_NOFOLLOW |
	    O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "image %s: %s", path, strerror(errno));
		goto fail;
	}
	if ((mp = disk_mountpoint(user, err, errsz)) == -1 ||
	    (loop = disk_loop_attach(back, path, dev, sizeof(dev), err,
	    errsz)) == -1 ||
	    (tm = disk_fsmount(dev, NULL, err, errsz)) == -1 ||
	    (top = disk_opendir(tm, err, errsz)) == -1)
		goto fail;
	if (disk_top_prepare(top, user, uid, gid, max, grown, &t_setup, err,
	    errsz) == -1)
		goto fail;
	if ((wm = disk_fsmount(dev, DISK_SUBVOL, err, errsz)) == -1)
		goto fail;
	if (move_mount(wm, "", mp, "", MOVE_MOUNT_F_EMPTY_PATH |
	    MOVE_MOUNT_T_EMPTY_PATH) == -1) {
		snprintf(err, errsz, "mount the workspace: %s", strerror(errno));
		goto fail;
	}
	/* Attached now: the fd of the mounted workspace is all we keep. */
	if ((mnt = disk_opendir(wm, err, errsz)) == -1) {
		disk_umount_fd(wm);
		goto fail;
	}
	close(wm);
	close(top);
	close(tm);
	close(mp);
	close(back);
	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("calloc");
	snprintf(w->user, sizeof(w->user), "%s", user);
	w->img = img;
	w->loop = loop;
	w->mnt = mnt;
	w->max = max;
	disk_fsid(mnt, w->fsid, sizeof(w->fsid));
	TAILQ_INSERT_TAIL(&disk_mounts, w, entry);
	log_info("disk: %s: %s mounted on %s/%s (%s, limit %lld bytes) in "
	    "%lld ms (mkfs %lld, quota set-up %lld)", user, path,
	    disk_conf->workspace_root, user, dev, (long long)max,
	    (long long)(now_mono_ms() - t0), (long long)t_mkfs,
	    (long long)t_setup);
	return w;
fail:
	if (wm != -1)
		close(wm);
	if (top != -1)
		close(top);
	if (tm != -1)
		close(tm);
	if (loop != -1)
		close(loop);
	if (mp != -1)
		close(mp);
	if (back != -1)
		close(back);
	close(img);
	return NULL;
}

/* Unmount, lazily (a sandbox may still hold it), the mount of an fd. */
static int
disk_umount_fd(int fd)
{
	char	path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return umount2(path, MNT_DETACH);
}

/* Unmount a workspace and forget it. */
static void
disk_unmount(struct disk_ws *w)
{
	if (disk_umount_fd(w->mnt) == -1)
		log_warn("disk: unmount %s/%s", disk_conf->workspace_root,
		    w->user);
	else
		log_info("disk: %s: unmounted", w->user);
	close(w->mnt);
	close(w->loop);
	close(w->img);
	TAILQ_REMOVE(&disk_mounts, w, entry);
	free(w);
}

/*
 * Project quotas: the workspace is a directory with project id uid
 * (inherited by everything made in it) and a project limit. Only where
 * the workspace root's filesystem has them on; this machine's have not.
 */
static int
disk_project_set(const char *user, uid_t uid, gid_t gid, int64_t max,
    char *err, size_t errsz)
{
#ifdef SYS_quotactl_fd
	struct fsxattr	fx;
	struct if_dqblk	dq;
	int		fd;

	if (mkdirat(disk_rootfd, user, 0700) == 0 &&
	    (fd = openat(disk_rootfd, user, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) != -1) {
		if (fchown(fd, uid, gid) == -1)
			goto bad;
	} else if ((fd = openat(disk_rootfd, user, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) == -1) {
		snprintf(err, errsz, "workspace: %s", strerror(errno));
		return -1;
	}
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fx) == -1)
		goto bad;
	fx.fsx_projid = uid;
	fx.fsx_xflags |= FS_XFLAG_PROJINHERIT;
	if (ioctl(fd, FS_IOC_FSSETXATTR, &fx) == -1)
		goto bad;
	memset(&dq, 0, sizeof(dq));
	dq.dqb_bhardlimit = (uint64_t)max / QIF_DQBLKSIZE;
	dq.dqb_bsoftlimit = dq.dqb_bhardlimit;
	dq.dqb_valid = QIF_BLIMITS;
	if (syscall(SYS_quotactl_fd, disk_rootfd, DISK_PRJQCMD(Q_SETQUOTA),
	    uid, &dq) == -1)
		goto bad;
	close(fd);
	return 0;
bad:
	snprintf(err, errsz, "project quota of %s: %s", user, strerror(errno));
	close(fd);
	return -1;
#else
	snprintf(err, errsz, "no quotactl_fd on this system");
	return -1;
#endif
}

/* Whether the workspace root's filesystem enforces project quotas. */
int
disk_project_detect(int rootfd)
{
#ifdef SYS_quotactl_fd
	struct if_dqinfo	di;

	return syscall(SYS_quotactl_fd, rootfd, DISK_PRJQCMD(Q_GETINFO), 0,
	    &di) == 0;
#else
	return 0;
#endif
}

/* One request of sandboxd. */
static void
disk_request(int sock, const struct disk_req *rq)
{
	struct disk_ws	*w;
	char		 user[DISK_USER_MAX + 1], err[256];

	memcpy(user, rq->user, sizeof(user));
	user[DISK_USER_MAX] = '\0';
	if (rq->op != DISK_OP_ENSURE || memchr(rq->user, '\0',
	    sizeof(rq->user)) == NULL || !disk_user_ok(user) || rq->uid == 0 ||
	    rq->gid == 0 || rq->uid == (uint32_t)-1 || rq->gid == (uint32_t)-1 ||
	    rq->uid == disk_daemon_uids[0] || rq->uid == disk_daemon_uids[1] ||
	    rq->max <= 0 || rq->max > (1LL << 50)) {
		log_warnx("disk: refused a malformed request");
		disk_reply(sock, 0, NULL, NULL, "malformed disk request");
		return;
	}
	if (disk_project) {
		if (disk_project_set(user, rq->uid, rq->gid, rq->max, err,
		    sizeof(err)) == -1) {
			log_warnx("disk: %s", err);
			disk_reply(sock, 0, NULL, NULL, "%s", err);
		} else
			disk_reply(sock, 1, "project", NULL, NULL);
		return;
	}
	TAILQ_FOREACH(w, &disk_mounts, entry)
		if (strcmp(w->user, user) == 0)
			break;
	if (w == NULL)
		w = disk_mount(user, rq->uid, rq->gid, rq->max, err,
		    sizeof(err));
	else if (disk_update(w, rq->max, err, sizeof(err)) == -1)
		w = NULL;
	if (w == NULL) {
		log_warnx("disk: %s: %s", user, err);
		disk_reply(sock, 0, NULL, NULL, "%s", err);
		return;
	}
	disk_reply(sock, 1, "btrfs", w->fsid, NULL);
}

/*
 * Unmount what a helper killed by SIGKILL left: btrfs mounts on
 * WORKSPACE_ROOT/NAME whose loop device is backed by an image of ours
 * that no live helper holds (its lock is free).
 */
static void
disk_sweep(void)
{
	FILE	*f;
	char	 line[8192], back[4200], *mnt, *fstype, *src, *base;
	size_t	 rl = strlen(disk_conf->workspace_root);
	int	 img;

	if ((f = fopen("/proc/self/mountinfo", "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (disk_mountinfo_line(line, &mnt, &fstype, &src) == -1 ||
		    strcmp(fstype, "btrfs") != 0 ||
		    strncmp(src, "/dev/loop", 9) != 0 ||
		    strncmp(mnt, disk_conf->workspace_root, rl) != 0 ||
		    mnt[rl] != '/' || !disk_user_ok(base = mnt + rl + 1))
			continue;
		if (disk_loop_backing(src + 5, back, sizeof(back)) == -1)
			continue;
		if (strncmp(back, disk_dir, strlen(disk_dir)) != 0 ||
		    back[strlen(disk_dir)] != '/')
			continue;
		if ((img = open(back, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) ==
		    -1)
			continue;
		if (flock(img, LOCK_EX | LOCK_NB) == 0) {
			if (umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
				log_info("disk: unmounted %s, left by an "
				    "earlier helper", mnt);
			else
				log_warn("disk: unmount %s", mnt);
		}
		close(img);
	}
	fclose(f);
}

/* SIGTERM, SIGINT: unmount and go. */
static void
disk_sigterm(int sig)
{
	disk_stop = 1;
}

/*
 * Keep root's identity with three capabilities, SECBIT_NOROOT (what it
 * execs gets none), no_new_privs, not dumpable, then the deny list.
 */
static void
disk_drop(int debug)
{
	static const cap_value_t keep[] = { CAP_SYS_ADMIN, CAP_DAC_OVERRIDE,
	    CAP_CHOWN };
	struct priv_plan	 plan;
	cap_value_t		 c;
	cap_t			 caps;
	size_t			 i;
	int			 kept;

	for (c = 0; c <= CAP_LAST_CAP; c++) {
		for (kept = 0, i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			if (keep[i] == c)
				kept = 1;
		if (!kept && cap_drop_bound(c) == -1 && errno != EINVAL)
			fatal("disk: cap_drop_bound %d", (int)c);
	}
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
	    SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
	    0, 0, 0) == -1)
		fatal("disk: PR_SET_SECUREBITS");
	if ((caps = cap_init()) == NULL ||
	    cap_set_flag(caps, CAP_PERMITTED, 3, keep, CAP_SET) == -1 ||
	    cap_set_flag(caps, CAP_EFFECTIVE, 3, keep, CAP_SET) == -1 ||
	    cap_set_proc(caps) == -1)
		fatal("disk: cap_set_proc");
	cap_free(caps);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1)
		fatal("disk: prctl");
	memset(&plan, 0, sizeof(plan));
	plan.name = "sandboxd disk helper";
	plan.syscalls = disk_denied;
	plan.deny = 1;
	plan.debug = debug;
	priv_seccomp(&plan);
}

/*
 * SIGTERM and SIGINT end the helper, and are blocked but while it waits
 * for a request: *old is the mask to wait with. SIGHUP and SIGPIPE do not.
 */
static void
disk_signals(sigset_t *old)
{
	struct sigaction	sa;
	sigset_t		block;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = disk_sigterm;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, old);
	/* Forked during sandboxd's start-up, when these wait (proc.c). */
	sigdelset(old, SIGTERM);
	sigdelset(old, SIGINT);
}

/*
 * Check that images can be made and mounted (mkfs.btrfs, btrfs, loop
 * devices) and open their directory, sweeping what a past helper left;
 * else tell sandboxd why and exit.
 */
static void
disk_images_ready(struct config *conf, int sock)
{
	int	fd;

	if (disk_mkfs == NULL) {
		disk_reply(sock, 0, NULL, NULL, "no mkfs.btrfs (install "
		    "btrfs-progs) and no project quotas on %s",
		    conf->workspace_root);
		_exit(1);
	}
	/* Loads the btrfs module when it is one. */
	if ((fd = fsopen("btrfs", FSOPEN_CLOEXEC)) == -1) {
		disk_reply(sock, 0, NULL, NULL, "no btrfs in this "
		    "kernel: %s", strerror(errno));
		_exit(1);
	}
	close(fd);
	if (access("/dev/loop-control", R_OK | W_OK) == -1) {
		disk_reply(sock, 0, NULL, NULL, "/dev/loop-control: %s",
		    strerror(errno));
		_exit(1);
	}
	if (mkdir(disk_dir, 0700) == -1 && errno != EEXIST) {
		disk_reply(sock, 0, NULL, NULL, "mkdir %s: %s",
		    disk_dir, strerror(errno));
		_exit(1);
	}
	if ((disk_dirfd = open(disk_dir, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) == -1) {
		disk_reply(sock, 0, NULL, NULL, "%s: %s", disk_dir,
		    strerror(errno));
		_exit(1);
	}
	if (fchown(disk_dirfd, 0, 0) == -1 ||
	    fchmod(disk_dirfd, 0700) == -1)
		log_warn("disk: %s", disk_dir);
	disk_sweep();
}

/* Answer sandboxd's requests until it goes or the helper is told to end. */
static void
disk_serve(int sock, const sigset_t *old)
{
	struct disk_req	rq;
	struct pollfd	pfd;
	ssize_t		n;

	pfd.fd = sock;
	pfd.events = POLLIN;
	while (!disk_stop) {
		if (ppoll(&pfd, 1, NULL, old) == -1) {
			if (errno == EINTR)
				continue;
			log_warn("disk: poll");
			break;
		}
		n = recv(sock, &rq, sizeof(rq), MSG_TRUNC);
		if (n == 0 || (n == -1 && errno != EINTR && errno != EAGAIN))
			break;	/* sandboxd is gone */
		if (n != (ssize_t)sizeof(rq)) {
			if (n > 0) {
				log_warnx("disk: refused a message of %zd "
				    "bytes", n);
				disk_reply(sock, 0, NULL, NULL,
				    "malformed disk request");
			}
			continue;
		}
		disk_request(sock, &rq);
	}
}

/* The helper's life: set up, say hello, serve, unmount everything. */
static __dead void
disk_main(struct config *conf, int sock)
{
	struct disk_ws		*w;
	struct passwd		*pw;
	sigset_t		 old;
	const char *const	*p;
	int			 i;

	disk_conf = conf;
	/* Only its end of the socketpair and the log are of use here. */
	for (i = 3; i < 1024; i++)
		if (i != sock && fcntl(i, F_GETFD) != -1 &&
		    (fcntl(i, F_GETFD) & FD_CLOEXEC) == 0)
			close(i);
	disk_signals(&old);
	prctl(PR_SET_NAME, "sandboxd-disk", 0, 0, 0);
	/*
	 * A session of its own: its life follows sandboxd's socket, not a
	 * terminal's signals or a supervisor's process group.
	 */
	(void)setsid();

	snprintf(disk_dir, sizeof(disk_dir), "%s/disks", conf->state_dir);
	/* No workspace is ever given to frontd's or brokerd's user. */
	disk_daemon_uids[0] = disk_daemon_uids[1] = 0;
	if (conf->front_user != NULL && (pw = getpwnam(conf->front_user)) !=
	    NULL)
		disk_daemon_uids[0] = pw->pw_uid;
	if (conf->broker_user != NULL && (pw = getpwnam(conf->broker_user)) !=
	    NULL)
		disk_daemon_uids[1] = pw->pw_uid;
	for (p = disk_mkfs_paths; *p != NULL; p++)
		if (access(*p, X_OK) == 0)
			break;
	disk_mkfs = *p;
	if ((disk_rootfd = open(conf->workspace_root, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) == -1) {
		disk_reply(sock, 0, NULL, NULL, "workspace root %s: %s",
		    conf->workspace_root, strerror(errno));
		_exit(1);
	}
	disk_project = disk_project_detect(disk_rootfd);
	if (!disk_project)
		disk_images_ready(conf, sock);
	disk_drop(conf->seccomp_debug);
	disk_reply(sock, 1, disk_project ? "project" : "btrfs", NULL, NULL);

	disk_serve(sock, &old);
	while ((w = TAILQ_FIRST(&disk_mounts)) != NULL)
		disk_unmount(w);
	log_debug("disk: helper exits");
	_exit(0);
}

/*
 * In sandboxd, as root, before the privilege drop: fork the helper.
 * Returns sandboxd's end of the socketpair and the helper's kind of quota
 * ("btrfs" or "project") in kind, or -1 and why.
 */
int
disk_start(struct config *conf, pid_t *pidp, char *kind, size_t kindsz,
    char *why, size_t whysz)
{
	struct disk_rep	 r;
	struct pollfd	 pfd;
	int		 sv[2], n;
	pid_t		 pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(why, whysz, "socketpair: %s", strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		snprintf(why, whysz, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		disk_main(conf, sv[1]);
	}
	close(sv[1]);
	pfd.fd = sv[0];
	pfd.events = POLLIN;
	while ((n = poll(&pfd, 1, 10000)) == -1 && errno == EINTR)
		continue;
	if (n != 1 || recv(sv[0], &r, sizeof(r), 0) != sizeof(r)) {
		snprintf(why, whysz, "the disk helper did not answer");
		close(sv[0]);
		return -1;
	}
	r.err[sizeof(r.err) - 1] = '\0';
	r.kind[sizeof(r.kind) - 1] = '\0';
	if (!r.ok) {
		snprintf(why, whysz, "%s", r.err);
		close(sv[0]);
		waitpid(pid, NULL, 0);
		return -1;
	}
	snprintf(kind, kindsz, "%s", r.kind);
	*pidp = pid;
	return sv[0];
}
