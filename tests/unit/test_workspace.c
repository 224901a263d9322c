/*
 * Unit tests for sandboxd/workspace.c and the parts of sandboxd/disk.c
 * that need no root: user names, image sizes, mountinfo lines, the btrfs
 * usage read from a fake sysfs tree, project-quota detection, and
 * workspaces without quotas.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../sandboxd/sandboxd.h"

/* The names brokerd allows, and nothing that could make a path. */
static void
test_user_ok(void **state)
{
	assert_true(disk_user_ok("alice"));
	assert_true(disk_user_ok("_svc-1.b"));
	assert_true(disk_user_ok("abcdefghijklmnopqrstuvwxyz012345"));
	assert_false(disk_user_ok("abcdefghijklmnopqrstuvwxyz0123456"));
	assert_false(disk_user_ok(""));
	assert_false(disk_user_ok(NULL));
	assert_false(disk_user_ok(".."));
	assert_false(disk_user_ok("."));
	assert_false(disk_user_ok("../etc"));
	assert_false(disk_user_ok("a/b"));
	assert_false(disk_user_ok("Alice"));
	assert_false(disk_user_ok("-rf"));
	assert_false(disk_user_ok("a b"));
	assert_false(disk_user_ok("a\nb"));
}

/* Room for btrfs's chunks and metadata, whole MiB. */
static void
test_image_size(void **state)
{
	int64_t	M = 1LL << 20, G = 1LL << 30;

	assert_int_equal(disk_image_size(1), 129 * M);
	assert_int_equal(disk_image_size(64 * M), 192 * M);
	assert_int_equal(disk_image_size(100 * M), 228 * M);
	assert_int_equal(disk_image_size(10 * G), 10 * G + 10 * G / 8);
	assert_int_equal(disk_image_size(G + 1) % M, 0);
	assert_true(disk_image_size(G + 1) > G + 1);
}

/* Octal escapes of mountinfo decoded; fields found around " - ". */
static void
test_mountinfo(void **state)
{
	char	line[] = "36 35 0:41 /workspace /tmp/hg\\040x/ws/alice "
	    "rw,nosuid,nodev,relatime shared:1 - btrfs /dev/loop3 "
	    "rw,space_cache=v2,subvolid=256\n";
	char	bad[] = "36 35 0:41 / /mnt rw\n";
	char	esc[] = "a\\134b\\011c\\0";
	char	*mnt, *fstype, *src;

	assert_int_equal(disk_mountinfo_line(line, &mnt, &fstype, &src), 0);
	assert_string_equal(mnt, "/tmp/hg x/ws/alice");
	assert_string_equal(fstype, "btrfs");
	assert_string_equal(src, "/dev/loop3");
	assert_int_equal(disk_mountinfo_line(bad, &mnt, &fstype, &src), -1);
	mountinfo_unescape(esc);
	assert_string_equal(esc, "a\\b\tc\\0");
}

/* Write text to dir/rel, making the directories on the way. */
static void
put(const char *dir, const char *rel, const char *text)
{
	char	path[PATH_MAX], *s;
	FILE	*f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	for (s = path + strlen(dir) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		mkdir(path, 0755);
		*s = '/';
	}
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

/* Usage and limit of qgroup 1/1 from a fake /sys; bad fsids refused. */
static void
test_btrfs_usage(void **state)
{
	char	dir[] = "/tmp/hg-test-ws.XXXXXX", cmd[PATH_MAX];
	int64_t	used = 0, max = 0;
	const char *fsid = "b413dcbe-708e-48cc-92cb-e761a70b8f8d";

	assert_non_null(mkdtemp(dir));
	put(dir, "sys/fs/btrfs/b413dcbe-708e-48cc-92cb-e761a70b8f8d/"
	    "qgroups/1_1/referenced", "67092480\n");
	put(dir, "sys/fs/btrfs/b413dcbe-708e-48cc-92cb-e761a70b8f8d/"
	    "qgroups/1_1/max_referenced", "67108864\n");
	assert_int_equal(workspace_btrfs_usage(dir, fsid, &used, &max), 0);
	assert_int_equal(used, 67092480);
	assert_int_equal(max, 67108864);
	assert_int_equal(workspace_btrfs_usage(dir, "../../etc", &used,
	    &max), -1);
	assert_int_equal(workspace_btrfs_usage(dir, "", &used, &max), -1);
	assert_int_equal(workspace_btrfs_usage(dir,
	    "00000000-0000-0000-0000-000000000000", &used, &max), -1);
	put(dir, "sys/fs/btrfs/b413dcbe-708e-48cc-92cb-e761a70b8f8d/"
	    "qgroups/1_1/referenced", "lots\n");
	assert_int_equal(workspace_btrfs_usage(dir, fsid, &used, &max), -1);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* No project quotas on a temporary directory's filesystem here. */
static void
test_project_detect(void **state)
{
	int	fd;

	assert_true((fd = open("/tmp", O_RDONLY | O_DIRECTORY)) != -1);
	assert_int_equal(disk_project_detect(fd), 0);
	close(fd);
}

/*
 * Without quotas (HOSTGATE_USER_DISK_MAX=0): a 0700 directory of the
 * user's; a symlink or a directory of someone else refused; no usage.
 */
static void
test_ensure_plain(void **state)
{
	struct config	conf;
	struct stat	st;
	char		root[] = "/tmp/hg-test-ws.XXXXXX", path[PATH_MAX];
	char		err[256], cmd[PATH_MAX];

	assert_non_null(mkdtemp(root));
	memset(&conf, 0, sizeof(conf));
	conf.workspace_root = root;
	conf.user_disk_max = 0;
	workspace_init(&conf);
	assert_false(workspace_quota_enabled());
	assert_string_equal(workspace_quota_why(),
	    "HOSTGATE_USER_DISK_MAX is 0");
	assert_null(workspace_usage("alice"));

	assert_int_equal(workspace_ensure("alice", geteuid(), getegid(), path,
	    sizeof(path), err, sizeof(err)), 0);
	snprintf(cmd, sizeof(cmd), "%s/alice", root);
	assert_string_equal(path, cmd);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(st.st_uid, geteuid());
	/* again: the same directory is fine */
	assert_int_equal(workspace_ensure("alice", geteuid(), getegid(), path,
	    sizeof(path), err, sizeof(err)), 0);

	snprintf(cmd, sizeof(cmd), "%s/bob", root);
	assert_int_equal(symlink("/etc", cmd), 0);
	assert_int_equal(workspace_ensure("bob", geteuid(), getegid(), path,
	    sizeof(path), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a directory"));

	assert_int_equal(workspace_ensure("../x", geteuid(), getegid(), path,
	    sizeof(path), err, sizeof(err)), -1);
	assert_string_equal(err, "bad user name");

	/* a new workspace of another uid needs CAP_CHOWN */
	assert_int_equal(workspace_ensure("carol", geteuid() + 1, getegid(),
	    path, sizeof(path), err, sizeof(err)), geteuid() == 0 ? 0 : -1);
	if (geteuid() == 0) {
		/* one of sandboxd's own (no uid per user before) is handed over */
		assert_int_equal(workspace_ensure("alice", 4242, 4242, path,
		    sizeof(path), err, sizeof(err)), 0);
		assert_int_equal(lstat(path, &st), 0);
		assert_int_equal(st.st_uid, 4242);
		assert_int_equal(st.st_mode & 07777, 0700);
		/* one of another uid's, never */
		assert_int_equal(workspace_ensure("alice", 4343, 4343, path,
		    sizeof(path), err, sizeof(err)), -1);
		assert_non_null(strstr(err, "belongs to uid 4242"));
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
}

/* One request to the helper and its answer. */
static struct disk_rep
ask(int fd, const char *user, size_t ulen, uint32_t uid, int64_t max,
    uint32_t op)
{
	struct disk_req	rq;
	struct disk_rep	r;

	memset(&rq, 0, sizeof(rq));
	memset(&r, 0, sizeof(r));
	rq.op = op;
	rq.uid = uid;
	rq.gid = uid;
	rq.max = max;
	memcpy(rq.user, user, ulen);
	assert_int_equal(send(fd, &rq, sizeof(rq), 0), sizeof(rq));
	assert_int_equal(recv(fd, &r, sizeof(r), 0), sizeof(r));
	return r;
}

/* The number of entries of a directory but . and .. */
static int
entries(const char *dir)
{
	struct dirent	*de;
	DIR		*d;
	int		 n = 0;

	assert_non_null(d = opendir(dir));
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/* Whether path is a mount point in /proc/self/mountinfo. */
static int
mounted(const char *path)
{
	char	 line[8192], *mnt, *fstype, *src;
	FILE	*f;
	int	 found = 0;

	assert_non_null(f = fopen("/proc/self/mountinfo", "r"));
	while (fgets(line, sizeof(line), f) != NULL)
		if (disk_mountinfo_line(line, &mnt, &fstype, &src) == 0 &&
		    strcmp(mnt, path) == 0)
			found = 1;
	fclose(f);
	return found;
}

/*
 * The helper itself (root only): it refuses every request that is not a
 * plain user name, a uid and gid other than 0 and a sane size, making
 * nothing; it mounts a good one, the user's and 0700; and it unmounts it
 * when its socket closes.
 */
static void
test_helper(void **state)
{
	struct config	conf;
	struct disk_rep	r;
	struct stat	st;
	char		dir[] = "/tmp/hg-test-disk.XXXXXX", sd[PATH_MAX];
	char		wr[PATH_MAX], ws[PATH_MAX], kind[16], why[256];
	char		cmd[PATH_MAX], disks[PATH_MAX], longname[40];
	char		img[PATH_MAX];
	struct statvfs	sv;
	int64_t		used, max;
	const char	*bad[] = { "../x", "a/b", "", "..", "Alice", "-x" };
	pid_t		pid;
	size_t		i;
	int		fd, n;

	if (geteuid() != 0 || access("/usr/sbin/mkfs.btrfs", X_OK) != 0)
		skip();
	assert_non_null(mkdtemp(dir));
	snprintf(sd, sizeof(sd), "%s/state", dir);
	snprintf(wr, sizeof(wr), "%s/ws", dir);
	snprintf(disks, sizeof(disks), "%s/disks", sd);
	assert_int_equal(mkdir(sd, 0700), 0);
	assert_int_equal(mkdir(wr, 0700), 0);
	memset(&conf, 0, sizeof(conf));
	conf.state_dir = sd;
	conf.workspace_root = wr;
	conf.user_disk_max = 64LL << 20;
	conf.broker_user = "nobody";	/* a daemon's user: never given one */
	fd = disk_start(&conf, &pid, kind, sizeof(kind), why, sizeof(why));
	assert_true(fd != -1);
	assert_string_equal(kind, "btrfs");

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = ask(fd, bad[i], strlen(bad[i]), 4242, 64LL << 20,
		    DISK_OP_ENSURE);
		assert_int_equal(r.ok, 0);
	}
	memset(longname, 'a', sizeof(longname));
	r = ask(fd, longname, DISK_USER_MAX + 1, 4242, 64LL << 20,
	    DISK_OP_ENSURE);	/* no NUL */
	assert_int_equal(r.ok, 0);
	r = ask(fd, "alice", 5, 0, 64LL << 20, DISK_OP_ENSURE);
	assert_int_equal(r.ok, 0);
	r = ask(fd, "alice", 5, 4242, 0, DISK_OP_ENSURE);
	assert_int_equal(r.ok, 0);
	r = ask(fd, "alice", 5, 65534, 64LL << 20, DISK_OP_ENSURE);
	assert_int_equal(r.ok, 0);
	r = ask(fd, "alice", 5, (uint32_t)-1, 64LL << 20, DISK_OP_ENSURE);
	assert_int_equal(r.ok, 0);
	r = ask(fd, "alice", 5, 4242, 64LL << 20, 99);
	assert_int_equal(r.ok, 0);
	assert_int_equal(send(fd, "short", 5, 0), 5);
	assert_int_equal(recv(fd, &r, sizeof(r), 0), sizeof(r));
	assert_int_equal(r.ok, 0);
	assert_string_equal(r.err, "malformed disk request");
	assert_int_equal(entries(disks), 0);
	assert_int_equal(entries(wr), 0);

	r = ask(fd, "alice", 5, 4242, 64LL << 20, DISK_OP_ENSURE);
	assert_int_equal(r.ok, 1);
	assert_true(strlen(r.fsid) == 36);
	snprintf(ws, sizeof(ws), "%s/alice", wr);
	assert_true(mounted(ws));
	assert_int_equal(stat(ws, &st), 0);
	assert_int_equal(st.st_uid, 4242);
	assert_int_equal(st.st_mode & 07777, 0700);
	/* again: nothing more is mounted */
	r = ask(fd, "alice", 5, 4242, 64LL << 20, DISK_OP_ENSURE);
	assert_int_equal(r.ok, 1);
	assert_int_equal(workspace_btrfs_usage("", r.fsid, &used, &max), 0);
	assert_int_equal(max, 64LL << 20);
	/* a raised limit while mounted: the image grows, the limit follows */
	r = ask(fd, "alice", 5, 4242, 512LL << 20, DISK_OP_ENSURE);
	assert_int_equal(r.ok, 1);
	snprintf(img, sizeof(img), "%s/alice.img", disks);
	assert_int_equal(stat(img, &st), 0);
	assert_int_equal(st.st_size, disk_image_size(512LL << 20));
	assert_int_equal(workspace_btrfs_usage("", r.fsid, &used, &max), 0);
	assert_int_equal(max, 512LL << 20);
	assert_int_equal(statvfs(ws, &sv), 0);
	assert_true((int64_t)sv.f_blocks * (int64_t)sv.f_frsize >
	    (512LL << 20));
	/* lowered: the limit only */
	r = ask(fd, "alice", 5, 4242, 64LL << 20, DISK_OP_ENSURE);
	assert_int_equal(r.ok, 1);
	assert_int_equal(workspace_btrfs_usage("", r.fsid, &used, &max), 0);
	assert_int_equal(max, 64LL << 20);
	assert_int_equal(stat(img, &st), 0);
	assert_int_equal(st.st_size, disk_image_size(512LL << 20));

	close(fd);
	assert_int_equal(waitpid(pid, &n, 0), pid);
	assert_true(WIFEXITED(n) && WEXITSTATUS(n) == 0);
	assert_false(mounted(ws));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_user_ok),
		cmocka_unit_test(test_image_size),
		cmocka_unit_test(test_mountinfo),
		cmocka_unit_test(test_btrfs_usage),
		cmocka_unit_test(test_project_detect),
		cmocka_unit_test(test_ensure_plain),
		cmocka_unit_test(test_helper),
	};

	log_init("test_workspace", 1);
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
