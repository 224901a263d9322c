/*
 * Unit tests for sandboxd/cgroup.c and sandboxd/ids.c. The cgroup code
 * runs against fake cgroupfs trees (a temporary directory with the files
 * a kernel would show) for a pure-v2 host, under systemd and not, for a
 * hybrid host like the one the tests run on (limits on v1, membership on
 * an empty v2) and for a v1-only host, and the files it writes are
 * checked. As root, two more run against the real kernel: a spawn born
 * into its v2 cgroup with clone3(CLONE_INTO_CGROUP) whose setsid'd
 * grandchild dies with it, and the same through the v1 freezer.
 */
#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <linux/sched.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../sandboxd/sandboxd.h"
#include "child.h"

#define INST	"hostgate-0123abcd"
#define ID1	"0123456789abcdef"
#define ID2	"fedcba9876543210"
#define SESS	"00112233445566778899aabbccddeeff"

static char	root[PATH_MAX];

/* Create root/rel with its parents; content NULL makes a directory. */
static void
put(const char *rel, const char *content)
{
	char	 path[PATH_MAX], *p;
	FILE	*f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		(void)mkdir(path, 0755);
		*p = '/';
	}
	if (content == NULL) {
		(void)mkdir(path, 0755);
		return;
	}
	assert_non_null(f = fopen(path, "w"));
	fputs(content, f);
	fclose(f);
}

/* The content of root/rel, or "(none)". */
static const char *
get(const char *rel)
{
	static char	 buf[4096];
	char		 path[PATH_MAX];
	FILE		*f;
	size_t		 n;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if ((f = fopen(path, "r")) == NULL)
		return "(none)";
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Whether root/rel exists. */
static int
has(const char *rel)
{
	char	path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	return access(path, F_OK) == 0;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int
setup(void **state)
{
	snprintf(root, sizeof(root), "/tmp/hg-cgroup-XXXXXX");
	assert_non_null(mkdtemp(root));
	unsetenv("INVOCATION_ID");
	return 0;
}

static int
teardown(void **state)
{
	cgroup_fini();
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	unsetenv("INVOCATION_ID");
	return 0;
}

/* A string member of cgroup_json(), or NULL. */
static const char *
how(const char *key)
{
	static char		 buf[512];
	struct json_object	*o, *v;
	const char		*s = NULL;

	o = cgroup_json();
	if (json_object_object_get_ex(o, key, &v) && v != NULL) {
		snprintf(buf, sizeof(buf), "%s", json_object_get_string(v));
		s = buf;
	}
	json_object_put(o);
	return s;
}

/* The reason cgroup_json() gives for what it does not enforce, or NULL. */
static const char *
why(const char *key)
{
	static char		 buf[512];
	struct json_object	*o, *n, *v;
	const char		*s = NULL;

	o = cgroup_json();
	if (json_object_object_get_ex(o, "not_enforced", &n) &&
	    json_object_object_get_ex(n, key, &v)) {
		snprintf(buf, sizeof(buf), "%s", json_object_get_string(v));
		s = buf;
	}
	json_object_put(o);
	return s;
}

/* The user limits of the default configuration. */
static void
user_limits(struct cg_limits *l)
{
	l->memory_max = 4LL << 30;
	l->swap_max = 0;
	l->pids_max = 1024;
	l->cpu_weight = 100;
	l->cpu_max = 0;
	l->io_weight = 100;
}

/* A pure v2 host: our cgroup, BASE below it with the files it shows. */
static void
tree_v2(const char *self, const char *base)
{
	char	rel[PATH_MAX], line[PATH_MAX];

	put("sys/fs/cgroup/cgroup.controllers",
	    "cpuset cpu io memory hugetlb pids rdma misc\n");
	put("sys/fs/cgroup/cgroup.procs", "");
	put("sys/fs/cgroup/cgroup.subtree_control", "cpu io memory pids\n");
	snprintf(line, sizeof(line), "0::%s\n", self);
	put("proc/self/cgroup", line);
	snprintf(rel, sizeof(rel), "sys/fs/cgroup%s/cgroup.procs", self);
	put(rel, "");
	snprintf(rel, sizeof(rel), "sys/fs/cgroup%s/cgroup.controllers", base);
	put(rel, "cpu io memory pids\n");
	snprintf(rel, sizeof(rel), "sys/fs/cgroup%s/cgroup.kill", base);
	put(rel, "");
	snprintf(rel, sizeof(rel), "sys/fs/cgroup%s/memory.swap.max", base);
	put(rel, "max\n");
	put("sys/block/sda/queue/scheduler", "mq-deadline kyber [bfq] none\n");
}

/*
 * A pure v2 host, as root outside systemd: BASE is INST under our own
 * cgroup, sandboxd moves into BASE/daemon, the four controllers are
 * passed on, and every mechanism is v2.
 */
static void
test_v2_init(void **state)
{
	char	pid[32];

	tree_v2("/user.slice/session-1.scope",
	    "/user.slice/session-1.scope/" INST);
	cgroup_init(root, INST, getuid(), getgid());
	assert_true(cgroup_enabled());
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	assert_string_equal(get("sys/fs/cgroup/user.slice/session-1.scope/"
	    INST "/daemon/cgroup.procs"), pid);
	assert_string_equal(get("sys/fs/cgroup/user.slice/session-1.scope/"
	    INST "/cgroup.subtree_control"), "+memory +pids +cpu +io");
	assert_non_null(strstr(how("membership"), "cgroup v2"));
	assert_string_equal(how("kill"), "cgroup v2 cgroup.kill");
	assert_string_equal(how("memory"), "cgroup v2 memory.max");
	assert_string_equal(how("swap"), "cgroup v2 memory.swap.max");
	assert_string_equal(how("pids"), "cgroup v2 pids.max");
	assert_string_equal(how("cpu"), "cgroup v2 cpu.weight");
	assert_string_equal(how("cpu_max"), "cgroup v2 cpu.max");
	assert_string_equal(how("io"), "cgroup v2 io.bfq.weight");
	assert_string_equal(how("spawn_memory"), "cgroup v2 memory.max");
	assert_string_equal(how("spawn_pids"), "cgroup v2 pids.max");
	assert_null(why("memory"));
}

/* Under systemd the unit's own cgroup is BASE, also after a restart. */
static void
test_v2_systemd(void **state)
{
	char	pid[32];

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("INVOCATION_ID", "0123", 1);
	tree_v2("/system.slice/hostgate-sandboxd.service",
	    "/system.slice/hostgate-sandboxd.service");
	cgroup_init(root, INST, getuid(), getgid());
	assert_string_equal(how("base"), strcat(strcpy((char[PATH_MAX]){ 0 },
	    root), "/sys/fs/cgroup/system.slice/hostgate-sandboxd.service"));
	assert_string_equal(get("sys/fs/cgroup/system.slice/"
	    "hostgate-sandboxd.service/daemon/cgroup.procs"), pid);
	assert_false(has("sys/fs/cgroup/system.slice/"
	    "hostgate-sandboxd.service/" INST));
	cgroup_fini();

	/* restarted: we sit in BASE/daemon already */
	put("proc/self/cgroup",
	    "0::/system.slice/hostgate-sandboxd.service/daemon\n");
	cgroup_init(root, INST, getuid(), getgid());
	assert_string_equal(how("base"), strcat(strcpy((char[PATH_MAX]){ 0 },
	    root), "/sys/fs/cgroup/system.slice/hostgate-sandboxd.service"));
	assert_false(has("sys/fs/cgroup/system.slice/"
	    "hostgate-sandboxd.service/daemon/daemon"));
}

/* A user's cgroup carries the limits, a spawn's its own, in v2 files. */
static void
test_v2_limits(void **state)
{
	struct cg_limits	 l, s;
	char			 err[256], procs[512];
	int			 fd;

#define B "sys/fs/cgroup/" INST "/"
	tree_v2("", "/" INST);
	cgroup_init(root, INST, getuid(), getgid());
	user_limits(&l);
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_string_equal(get(B "u-alice/memory.max"), "4294967296");
	assert_string_equal(get(B "u-alice/memory.swap.max"), "0");
	assert_string_equal(get(B "u-alice/pids.max"), "1024");
	assert_string_equal(get(B "u-alice/cpu.weight"), "100");
	assert_string_equal(get(B "u-alice/cpu.max"), "max 100000");
	assert_string_equal(get(B "u-alice/io.bfq.weight"), "100");
	assert_string_equal(get(B "u-alice/cgroup.subtree_control"),
	    "+memory +pids +cpu +io");
	/* the spawner's leaf is its own, made when it joins */
	assert_false(has(B "u-alice/spawner"));

	/* raised limits are written again; a CPU cap */
	l.memory_max = -1;
	l.cpu_max = 50;
	l.cpu_weight = 200;
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_string_equal(get(B "u-alice/memory.max"), "max");
	assert_string_equal(get(B "u-alice/cpu.max"), "50000 100000");
	assert_string_equal(get(B "u-alice/cpu.weight"), "200");

	/* a sandboxed spawn: s-ID with the per-spawn limits, an O_PATH fd */
	memset(&s, 0, sizeof(s));
	s.memory_max = 256LL << 20;
	s.swap_max = -1;
	s.pids_max = 512;
	assert_int_equal(cgroup_spawn("alice", NULL, ID1, &s, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	assert_true(fd >= 0);
	close(fd);
	assert_string_equal(procs, "");
	assert_string_equal(get(B "u-alice/s-" ID1 "/memory.max"),
	    "268435456");
	assert_string_equal(get(B "u-alice/s-" ID1 "/pids.max"), "512");
	assert_false(has(B "u-alice/s-" ID1 "/memory.swap.max"));
	assert_false(has(B "u-alice/s-" ID1 "/cpu.max"));

	/* a direct spawn of a session: d-SESSION passes the controllers on */
	assert_int_equal(cgroup_spawn("alice", SESS, ID2, &s, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	close(fd);
	assert_string_equal(get(B "u-alice/d-" SESS "/cgroup.subtree_control"),
	    "+memory +pids +cpu +io");
	assert_true(has(B "u-alice/d-" SESS "/s-" ID2));
	assert_non_null(cgroup_path("alice", SESS, ID2, procs, sizeof(procs)));
	assert_non_null(strstr(procs, "/u-alice/d-" SESS "/s-" ID2));

	/* hostile names never become paths */
	assert_int_equal(cgroup_user("../x", &l, err, sizeof(err)), -1);
	assert_int_equal(cgroup_spawn("alice", "../..", ID1, &s, &fd, procs,
	    sizeof(procs), err, sizeof(err)), -1);
	assert_int_equal(fd, -1);
	assert_int_equal(cgroup_spawn("alice", NULL, "a/b", &s, &fd, procs,
	    sizeof(procs), err, sizeof(err)), -1);
	assert_null(cgroup_path("alice", NULL, "..", procs, sizeof(procs)));
#undef B
}

/* IO weights: iocost's io.weight where enabled; nothing without a user. */
static void
test_v2_io(void **state)
{
	struct cg_limits	 l;
	char			 err[256];

	tree_v2("", "/" INST);
	put("sys/fs/cgroup/io.cost.qos", "8:0 enable=1 ctrl=auto rpct=95.00 "
	    "rlat=10000 wpct=95.00 wlat=20000 min=50.00 max=150.00\n");
	cgroup_init(root, INST, getuid(), getgid());
	assert_string_equal(how("io"), "cgroup v2 io.weight");
	user_limits(&l);
	l.io_weight = 10000;
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_string_equal(get("sys/fs/cgroup/" INST "/u-alice/io.weight"),
	    "default 10000");
	cgroup_fini();

	/* neither iocost nor BFQ: a weight would do nothing, and says so */
	put("sys/fs/cgroup/io.cost.qos", "8:0 enable=0\n");
	put("sys/block/sda/queue/scheduler", "[mq-deadline] kyber bfq none\n");
	cgroup_init(root, INST, getuid(), getgid());
	assert_null(how("io"));
	assert_non_null(strstr(why("io"), "BFQ"));
	assert_int_equal(cgroup_user("bob", &l, err, sizeof(err)), 0);
	assert_false(has("sys/fs/cgroup/" INST "/u-bob/io.weight"));
	assert_false(has("sys/fs/cgroup/" INST "/u-bob/io.bfq.weight"));
}

/*
 * Kills write "1" to cgroup.kill (seen through a FIFO standing for the
 * file) and remove the cgroup; a session's kill takes its d-SESSION, a
 * user's the whole u-USER.
 */
static void
test_v2_kill(void **state)
{
	struct cg_limits	 l;
	char			 err[256], procs[512], path[PATH_MAX], buf[8];
	int			 fd, rd;

#define B "sys/fs/cgroup/" INST "/"
	tree_v2("", "/" INST);
	cgroup_init(root, INST, getuid(), getgid());
	user_limits(&l);
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_int_equal(cgroup_spawn("alice", NULL, ID1, NULL, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	close(fd);
	put(B "u-alice/s-" ID1 "/cgroup.procs", "4000001\n4000002\n");
	snprintf(path, sizeof(path), "%s/" B "u-alice/s-" ID1 "/cgroup.kill",
	    root);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_true((rd = open(path, O_RDONLY | O_NONBLOCK)) >= 0);
	assert_int_equal(cgroup_spawn_kill("alice", NULL, ID1), 2);
	assert_int_equal(read(rd, buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], '1');
	close(rd);
	assert_false(has(B "u-alice/s-" ID1));
	assert_int_equal(cgroup_spawn_kill("alice", NULL, ID1), -1);

	/* a session: found under any user, its d-SESSION goes whole */
	assert_int_equal(cgroup_spawn("alice", SESS, ID1, NULL, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	close(fd);
	assert_int_equal(cgroup_spawn("alice", SESS, ID2, NULL, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	close(fd);
	put(B "u-alice/d-" SESS "/s-" ID1 "/cgroup.procs", "4000003\n");
	put(B "u-alice/d-" SESS "/s-" ID2 "/cgroup.procs", "4000004\n");
	snprintf(path, sizeof(path), "%s/" B "u-alice/d-" SESS "/cgroup.kill",
	    root);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_true((rd = open(path, O_RDONLY | O_NONBLOCK)) >= 0);
	assert_int_equal(cgroup_session_kill(SESS), 2);
	assert_int_equal(read(rd, buf, sizeof(buf)), 1);
	close(rd);
	assert_false(has(B "u-alice/d-" SESS));
	assert_int_equal(cgroup_session_kill(SESS), 0);

	/* a user: everything, the spawner and the limits included */
	assert_int_equal(cgroup_spawn("alice", NULL, ID2, NULL, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	close(fd);
	put(B "u-alice/spawner-4000005/cgroup.procs", "4000005\n");
	snprintf(path, sizeof(path), "%s/" B "u-alice/cgroup.kill", root);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_true((rd = open(path, O_RDONLY | O_NONBLOCK)) >= 0);
	assert_int_equal(cgroup_user_kill("alice"), 1);
	assert_int_equal(read(rd, buf, sizeof(buf)), 1);
	close(rd);
	assert_false(has(B "u-alice"));
	/* made again on the next spawn, limits and all */
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_string_equal(get(B "u-alice/pids.max"), "1024");
#undef B
}

/* At start, what a previous sandboxd left is killed; the limits stay. */
static void
test_v2_sweep(void **state)
{
#define B "sys/fs/cgroup/" INST "/"
	tree_v2("", "/" INST);
	put(B "u-bob/pids.max", "1024");
	put(B "u-bob/s-" ID1 "/cgroup.procs", "4000001\n");
	put(B "u-bob/d-" SESS "/s-" ID2 "/cgroup.procs", "4000002\n4000003\n");
	put(B "u-bob/spawner-4000004/cgroup.procs", "4000004\n");
	put(B "u-carol/s-" ID2 "/cgroup.procs", "");
	cgroup_init(root, INST, getuid(), getgid());
	assert_int_equal(cgroup_sweep(), 4);
	assert_false(has(B "u-bob/s-" ID1));
	assert_false(has(B "u-bob/d-" SESS));
	assert_false(has(B "u-carol/s-" ID2));
	/* the old spawner's leaf too: killed, then gone, never reused */
	assert_false(has(B "u-bob/spawner-4000004"));
	assert_string_equal(get(B "u-bob/pids.max"), "1024");
	assert_int_equal(cgroup_sweep(), 0);
#undef B
}

/* Usage and OOM kills come from the v2 files; "max" is null. */
static void
test_v2_usage(void **state)
{
	struct json_object	*u, *o, *v;
	struct cg_limits	 l;
	char			 err[256], procs[512];
	int			 fd;

#define B "sys/fs/cgroup/" INST "/"
	tree_v2("", "/" INST);
	cgroup_init(root, INST, getuid(), getgid());
	user_limits(&l);
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_int_equal(cgroup_spawn("alice", SESS, ID1, NULL, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	close(fd);
	put(B "u-alice/memory.current", "123456\n");
	put(B "u-alice/pids.current", "7\n");
	put(B "u-alice/pids.max", "max\n");
	put(B "u-alice/memory.events",
	    "low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\noom_group_kill 0\n");
	put(B "u-alice/d-" SESS "/s-" ID1 "/memory.events",
	    "low 0\nhigh 0\nmax 1\noom 1\noom_kill 1\n");
	assert_int_equal(cgroup_oom_kills("alice", NULL), 2);
	assert_int_equal(cgroup_oom_kills("alice", ID1), 1);
	assert_int_equal(cgroup_oom_kills("alice", ID2), -1);
	u = cgroup_usage("alice");
	assert_true(json_object_object_get_ex(u, "memory", &o));
	assert_true(json_object_object_get_ex(o, "current", &v));
	assert_int_equal(json_object_get_int64(v), 123456);
	assert_true(json_object_object_get_ex(o, "max", &v));
	assert_int_equal(json_object_get_int64(v), 4LL << 30);
	assert_true(json_object_object_get_ex(u, "pids", &o));
	assert_true(json_object_object_get_ex(o, "current", &v));
	assert_int_equal(json_object_get_int64(v), 7);
	assert_true(json_object_object_get_ex(o, "max", &v));
	assert_null(v);
	assert_true(json_object_object_get_ex(u, "oom_kills", &v));
	assert_int_equal(json_object_get_int64(v), 2);
	json_object_put(u);
#undef B
}

/* The hybrid layout of the machine the tests run on, BASE's files too. */
static void
tree_hybrid(const char *sched)
{
	put("proc/self/cgroup", "9:name=systemd:/\n8:pids:/\n7:blkio:/\n"
	    "6:freezer:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n");
	put("sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n");
	put("sys/fs/cgroup/unified/cgroup.procs", "");
	put("sys/fs/cgroup/unified/" INST "/cgroup.controllers", "");
	put("sys/fs/cgroup/unified/" INST "/cgroup.kill", "");
	put("sys/fs/cgroup/memory/cgroup.procs", "");
	put("sys/fs/cgroup/memory/process_api/abc/" INST
	    "/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/memory/process_api/abc/" INST
	    "/memory.memsw.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/pids/cgroup.procs", "");
	put("sys/fs/cgroup/pids/" INST "/pids.max", "max\n");
	put("sys/fs/cgroup/cpu/cgroup.procs", "");
	put("sys/fs/cgroup/cpu/" INST "/cpu.shares", "1024\n");
	put("sys/fs/cgroup/cpu/" INST "/cpu.cfs_quota_us", "-1\n");
	put("sys/fs/cgroup/blkio/cgroup.procs", "");
	put("sys/fs/cgroup/blkio/" INST "/blkio.throttle.io_serviced", "");
	put("sys/fs/cgroup/blkio/" INST "/blkio.bfq.weight", "100\n");
	if (sched != NULL && strcmp(sched, "cfq") == 0)
		put("sys/fs/cgroup/blkio/" INST "/blkio.weight", "500\n");
	put("sys/block/vda/queue/scheduler", sched == NULL ?
	    "[none] mq-deadline kyber bfq\n" : strcmp(sched, "bfq") == 0 ?
	    "none mq-deadline kyber [bfq]\n" : "noop deadline [cfq]\n");
	put("sys/fs/cgroup/freezer/cgroup.procs", "");
}

/*
 * Hybrid: membership and kill through the empty v2, limits per user
 * through v1 (memory under our own memory cgroup), per-spawn limits not
 * enforced, IO weights not without blkio.weight; the freezer unused.
 */
static void
test_hybrid(void **state)
{
	struct cg_limits	 l;
	char			 err[256], procs[512];
	const char		*r;
	int			 fd, status;
	pid_t			 pid;

#define M "sys/fs/cgroup/memory/process_api/abc/" INST "/u-alice/"
	tree_hybrid(NULL);
	cgroup_init(root, INST, getuid(), getgid());
	assert_non_null(strstr(how("membership"), "cgroup v2"));
	assert_string_equal(how("kill"), "cgroup v2 cgroup.kill");
	assert_string_equal(how("memory"), "cgroup v1 memory.limit_in_bytes");
	assert_string_equal(how("swap"), "cgroup v1 "
	    "memory.memsw.limit_in_bytes");
	assert_string_equal(how("pids"), "cgroup v1 pids.max");
	assert_string_equal(how("cpu"), "cgroup v1 cpu.shares");
	assert_string_equal(how("cpu_max"), "cgroup v1 cpu.cfs_quota_us");
	assert_null(how("io"));
	assert_non_null(r = why("io"));
	assert_non_null(strstr(r, "BFQ"));
	assert_null(how("spawn_memory"));
	assert_non_null(strstr(why("spawn_memory"), "v1"));
	assert_null(how("spawn_pids"));
	assert_false(has("sys/fs/cgroup/freezer/" INST));
	assert_false(has("sys/fs/cgroup/blkio/" INST));
	assert_string_equal(get("sys/fs/cgroup/unified/" INST
	    "/cgroup.subtree_control"), "(none)");

	user_limits(&l);
	l.cpu_weight = 50;
	l.swap_max = 1LL << 30;
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_string_equal(get(M "memory.limit_in_bytes"), "4294967296");
	assert_string_equal(get(M "memory.memsw.limit_in_bytes"), "5368709120");
	assert_string_equal(get("sys/fs/cgroup/pids/" INST "/u-alice/pids.max"),
	    "1024");
	assert_string_equal(get("sys/fs/cgroup/cpu/" INST "/u-alice/"
	    "cpu.shares"), "512");
	assert_string_equal(get("sys/fs/cgroup/cpu/" INST "/u-alice/"
	    "cpu.cfs_quota_us"), "-1");
	assert_false(has("sys/fs/cgroup/unified/" INST "/u-alice/pids.max"));

	/* a spawn: v2 only, no limits of its own */
	assert_int_equal(cgroup_spawn("alice", NULL, ID1, &l, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	assert_true(fd >= 0);
	close(fd);
	assert_false(has("sys/fs/cgroup/unified/" INST "/u-alice/s-" ID1
	    "/memory.max"));

	/* a spawner joins the v1 limits and its v2 leaf */
	if ((pid = test_fork()) == 0)
		_exit(cgroup_user_join("alice") == 0 ? 0 : 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_string_equal(get(M "cgroup.procs"), "0");
	assert_string_equal(get("sys/fs/cgroup/pids/" INST
	    "/u-alice/cgroup.procs"), "0");
	assert_string_equal(get("sys/fs/cgroup/cpu/" INST
	    "/u-alice/cgroup.procs"), "0");
	{
		char	leaf[256];

		snprintf(leaf, sizeof(leaf), "sys/fs/cgroup/unified/" INST
		    "/u-alice/spawner-%d/cgroup.procs", (int)pid);
		assert_string_equal(get(leaf), "0");
	}
	/* reaped, its leaf goes (the fake one holds a file: it stays) */
	cgroup_spawner_gone("alice", pid);

	/* usage and OOM kills from the v1 files */
	put(M "memory.usage_in_bytes", "1000\n");
	put(M "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n"
	    "oom_kill 3\n");
	assert_int_equal(cgroup_oom_kills("alice", ID1), 3);
	assert_int_equal(cgroup_oom_kills("alice", NULL), 3);
#undef M
}

/*
 * With a disk on BFQ, IO weights go to blkio.bfq.weight (1..1000, 100 by
 * default); on CFQ to blkio.weight, scaled to its 10..1000 (500).
 */
static void
test_hybrid_blkio(void **state)
{
	struct cg_limits	 l;
	char			 err[256];

	tree_hybrid("bfq");
	cgroup_init(root, INST, getuid(), getgid());
	assert_string_equal(how("io"), "cgroup v1 blkio.bfq.weight");
	user_limits(&l);
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_string_equal(get("sys/fs/cgroup/blkio/" INST
	    "/u-alice/blkio.bfq.weight"), "100");
	l.io_weight = 10000;
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_string_equal(get("sys/fs/cgroup/blkio/" INST
	    "/u-alice/blkio.bfq.weight"), "1000");
	cgroup_fini();

	tree_hybrid("cfq");
	cgroup_init(root, INST, getuid(), getgid());
	assert_string_equal(how("io"), "cgroup v1 blkio.weight");
	user_limits(&l);
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_string_equal(get("sys/fs/cgroup/blkio/" INST
	    "/u-alice/blkio.weight"), "500");
	l.io_weight = 10000;
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_string_equal(get("sys/fs/cgroup/blkio/" INST
	    "/u-alice/blkio.weight"), "1000");
	l.io_weight = 1;
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_string_equal(get("sys/fs/cgroup/blkio/" INST
	    "/u-alice/blkio.weight"), "10");
}

/*
 * v1 only: spawns live in the freezer hierarchy and join by writing; a
 * kill freezes, SIGKILLs every process listed and thaws.
 */
static void
test_v1_freezer(void **state)
{
	struct cg_limits	 l;
	char			 err[256], procs[PATH_MAX], line[32];
	int			 fd, status;
	pid_t			 pid;

#define F "sys/fs/cgroup/freezer/" INST "/"
	put("proc/self/cgroup", "3:pids:/\n2:freezer:/\n1:memory:/\n");
	put("sys/fs/cgroup/freezer/cgroup.procs", "");
	put("sys/fs/cgroup/pids/cgroup.procs", "");
	put("sys/fs/cgroup/pids/" INST "/pids.max", "max\n");
	put(F "freezer.state", "THAWED\n");
	cgroup_init(root, INST, getuid(), getgid());
	assert_true(cgroup_enabled());
	assert_non_null(strstr(how("membership"), "freezer"));
	assert_non_null(strstr(how("kill"), "freezer.state"));
	assert_string_equal(how("pids"), "cgroup v1 pids.max");
	assert_null(how("memory"));
	assert_non_null(why("memory"));

	user_limits(&l);
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_int_equal(cgroup_spawn("alice", NULL, ID1, NULL, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(procs, "/freezer/" INST "/u-alice/s-" ID1
	    "/cgroup.procs"));

	/* a real process listed in the fake cgroup dies */
	if ((pid = test_fork()) == 0) {
		pause();
		_exit(0);
	}
	snprintf(line, sizeof(line), "%d\n", (int)pid);
	put(F "u-alice/s-" ID1 "/cgroup.procs", line);
	assert_int_equal(cgroup_spawn_kill("alice", NULL, ID1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_false(has(F "u-alice/s-" ID1));
#undef F
}

/* Nothing mounted: disabled, every mechanism with its reason. */
static void
test_none(void **state)
{
	struct cg_limits	 l;
	char			 err[256], procs[64];
	int			 fd;

	put("proc/self/cgroup", "0::/\n");
	put("sys/fs/cgroup/x", "");
	cgroup_init(root, INST, getuid(), getgid());
	assert_false(cgroup_enabled());
	assert_null(how("membership"));
	assert_non_null(why("membership"));
	assert_non_null(why("memory"));
	user_limits(&l);
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_int_equal(cgroup_spawn("alice", NULL, ID1, NULL, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	assert_int_equal(fd, -1);
	assert_string_equal(procs, "");
	assert_int_equal(cgroup_sweep(), 0);
}

/* clone3 with CLONE_INTO_CGROUP: born in the cgroup; -1 when refused. */
static pid_t
clone_into(int cgfd)
{
	struct clone_args	args;

	memset(&args, 0, sizeof(args));
	args.flags = CLONE_INTO_CGROUP;
	args.exit_signal = SIGCHLD;
	args.cgroup = (uint64_t)cgfd;
	return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}

/*
 * The child of a spawn: forks a grandchild that setsid()s (it would
 * escape a process-group kill), reports its pid on w, and waits.
 */
static void
spawn_body(int w)
{
	pid_t	gc;

	if ((gc = test_fork()) == 0) {
		setsid();
		for (;;)
			pause();
	}
	(void)!write(w, &gc, sizeof(gc));
	for (;;)
		pause();
}

/* Wait for pid, ours to reap (a child, or an orphan we are reaper of). */
static void
reaped_killed(pid_t pid)
{
	int	status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
}

/* Our v2 cgroup path, to come back to. */
static void
self_v2(char *out, size_t outsz)
{
	FILE	*f;
	char	 line[PATH_MAX];

	out[0] = '\0';
	assert_non_null(f = fopen("/proc/self/cgroup", "r"));
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(out, outsz, "%s", line + 3);
		}
	fclose(f);
}

/*
 * As root, the real kernel: a spawn born into its v2 cgroup, with a
 * setsid'd grandchild; cgroup_spawn_kill ends both.
 */
static void
test_real_v2(void **state)
{
	struct cg_limits	 l;
	char			 err[256], procs[512], inst[64], self[PATH_MAX];
	char			 path[PATH_MAX * 2], pid[32], dir[PATH_MAX];
	int			 fd, p[2], n;
	pid_t			 child, gc;
	FILE			*f;

	if (geteuid() != 0 || (access("/sys/fs/cgroup/unified/cgroup.procs",
	    F_OK) != 0 && access("/sys/fs/cgroup/cgroup.controllers",
	    F_OK) != 0)) {
		skip();
		return;
	}
	self_v2(self, sizeof(self));
	snprintf(inst, sizeof(inst), "hostgate-unit%d", (int)getpid());
	cgroup_init("", inst, getuid(), getgid());
	if (!cgroup_enabled()) {
		skip();
		return;
	}
	assert_non_null(cgroup_path("alice", NULL, ID1, dir, sizeof(dir)));
	user_limits(&l);
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_int_equal(cgroup_spawn("alice", NULL, ID1, NULL, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	assert_true(fd >= 0);
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	assert_int_equal(pipe(p), 0);
	alarm(60);	/* a guard only: a broken kill must not hang make unit */
	if ((child = clone_into(fd)) == 0) {
		close(p[0]);
		spawn_body(p[1]);
	}
	assert_true(child > 0);
	close(fd);
	close(p[1]);
	assert_int_equal(read(p[0], &gc, sizeof(gc)), sizeof(gc));
	close(p[0]);
	/* both in the spawn's cgroup, born there */
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	assert_non_null(f = fopen(path, "r"));
	for (n = 0; fgets(pid, sizeof(pid), f) != NULL; n++)
		assert_true(atoi(pid) == child || atoi(pid) == gc);
	fclose(f);
	assert_int_equal(n, 2);

	assert_int_equal(cgroup_spawn_kill("alice", NULL, ID1), 2);
	reaped_killed(child);
	reaped_killed(gc);
	assert_int_equal(kill(gc, 0), -1);
	assert_int_equal(errno, ESRCH);
	alarm(0);
	prctl(PR_SET_CHILD_SUBREAPER, 0);

	/* leave the kernel as it was: back to our cgroup, the tree gone */
	assert_int_equal(cgroup_user_kill("alice"), 0);
	cgroup_fini();
	snprintf(path, sizeof(path), "%s%s/cgroup.procs",
	    access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ?
	    "/sys/fs/cgroup" : "/sys/fs/cgroup/unified", self);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	snprintf(path, sizeof(path), "%s", dir);
	*strstr(path, "/u-alice") = '\0';
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "/daemon");
	(void)rmdir(path);
	*strrchr(path, '/') = '\0';
	assert_int_equal(rmdir(path), 0);
	/* the v1 directories of the limits */
	for (n = 0; n < 4; n++) {
		static const char *const h[] = { "memory", "pids", "cpu",
		    "blkio" };
		char	own[PATH_MAX], line[PATH_MAX], *c;

		own[0] = '\0';
		assert_non_null(f = fopen("/proc/self/cgroup", "r"));
		while (fgets(line, sizeof(line), f) != NULL) {
			line[strcspn(line, "\n")] = '\0';
			if ((c = strchr(line, ':')) != NULL &&
			    strncmp(c + 1, h[n], strlen(h[n])) == 0 &&
			    (c[1 + strlen(h[n])] == ':' ||
			    c[1 + strlen(h[n])] == ','))
				snprintf(own, sizeof(own), "%s",
				    strchr(c + 1, ':') + 1);
		}
		fclose(f);
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s/%s", h[n],
		    strcmp(own, "/") == 0 ? "" : own, inst);
		(void)rmdir(path);
		assert_int_equal(access(path, F_OK), -1);
	}
}

/*
 * As root, the real v1 freezer alone (a v1-only host): a spawn joins its
 * freezer cgroup by writing; the kill freezes, kills and thaws, and the
 * setsid'd grandchild goes too.
 */
static void
test_real_freezer(void **state)
{
	struct cg_limits	 l;
	char			 err[256], procs[PATH_MAX], inst[64];
	char			 path[PATH_MAX * 2], dir[PATH_MAX];
	int			 fd, p[2], cfd;
	pid_t			 child, gc;

	if (geteuid() != 0 ||
	    access("/sys/fs/cgroup/freezer/cgroup.procs", F_OK) != 0) {
		skip();
		return;
	}
	/* a root whose only hierarchy is the real freezer */
	put("sys/fs/cgroup", NULL);
	snprintf(path, sizeof(path), "%s/sys/fs/cgroup/freezer", root);
	assert_int_equal(symlink("/sys/fs/cgroup/freezer", path), 0);
	snprintf(inst, sizeof(inst), "hostgate-unit%d", (int)getpid());
	cgroup_init(root, inst, getuid(), getgid());
	assert_non_null(strstr(how("kill"), "freezer.state"));
	user_limits(&l);
	assert_int_equal(cgroup_user("alice", &l, err, sizeof(err)), 0);
	assert_int_equal(cgroup_spawn("alice", NULL, ID1, NULL, &fd, procs,
	    sizeof(procs), err, sizeof(err)), 0);
	assert_int_equal(fd, -1);
	assert_non_null(cgroup_path("alice", NULL, ID1, dir, sizeof(dir)));
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	assert_int_equal(pipe(p), 0);
	alarm(60);	/* a guard only */
	if ((child = test_fork()) == 0) {
		close(p[0]);
		if ((cfd = open(procs, O_WRONLY)) == -1 ||
		    write(cfd, "0", 1) != 1)
			_exit(3);
		close(cfd);
		spawn_body(p[1]);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &gc, sizeof(gc)), sizeof(gc));
	close(p[0]);
	assert_int_equal(cgroup_spawn_kill("alice", NULL, ID1), 2);
	reaped_killed(child);
	reaped_killed(gc);
	alarm(0);
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	/* gone now that nothing is left in it */
	(void)rmdir(dir);
	assert_int_equal(access(dir, F_OK), -1);
	assert_int_equal(cgroup_user_kill("alice"), 0);
	cgroup_fini();
	snprintf(path, sizeof(path), "/sys/fs/cgroup/freezer/%s/u-alice/"
	    "spawner", inst);
	(void)rmdir(path);
	*strrchr(path, '/') = '\0';
	(void)rmdir(path);
	*strrchr(path, '/') = '\0';
	assert_int_equal(rmdir(path), 0);
}

/* /etc/subuid-style files: an overlap names the file and the line. */
static void
test_ids_subid(void **state)
{
	char	err[512], path[PATH_MAX];

	put("subuid", "# comment\nalice:100000:65536\nbob:1879100000:10\n");
	snprintf(path, sizeof(path), "%s/subuid", root);
	assert_int_equal(ids_check_subid(path, 200000, 300000, err,
	    sizeof(err)), 0);
	assert_int_equal(ids_check_subid(path, 1879048192, 1879113727, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "line 3"));
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "HOSTGATE_UID_RANGE=1879048192-1879113727"));
	/* the range's first id against an entry's last one */
	assert_int_equal(ids_check_subid(path, 165535, 170000, err,
	    sizeof(err)), -1);
	assert_int_equal(ids_check_subid(path, 165536, 170000, err,
	    sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/absent", root);
	assert_int_equal(ids_check_subid(path, 1, 2, err, sizeof(err)), 0);
}

/* NSS: a range holding root's uid is refused; the default one is free. */
static void
test_ids_nss(void **state)
{
	char	err[512];

	assert_int_equal(ids_check_nss(0, 10, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "root"));
	assert_int_equal(ids_check_nss(1879048192, 1879113727, err,
	    sizeof(err)), 0);
}

/* Spawn ids: in the range, or a mapped account; never 0 or a daemon's. */
static void
test_ids_check(void **state)
{
	struct config	 conf;
	char		 err[512];

	memset(&conf, 0, sizeof(conf));
	conf.uid_range[0] = 1879048192;
	conf.uid_range[1] = 1879113727;
	conf.sandbox_user = "hostgate-test";	/* a daemon's, here */
	ids_setup(&conf);
	assert_int_equal(ids_check(1879048192, 1879048192, err,
	    sizeof(err)), 0);
	assert_int_equal(ids_check(1879113727, 1879113727, err,
	    sizeof(err)), 0);
	assert_int_equal(ids_check(1879113728, 1879113728, err,
	    sizeof(err)), -1);
	assert_int_equal(ids_check(1879048192, 5, err, sizeof(err)), -1);
	assert_int_equal(ids_check(0, 0, err, sizeof(err)), -1);
	assert_int_equal(ids_check(-1, 1879048192, err, sizeof(err)), -1);
	assert_int_equal(ids_check(999, 999, err, sizeof(err)), -1);
	assert_int_equal(ids_check(65534, 65534, err, sizeof(err)), -1);
	/* a mapped account: its uid and primary gid only; never a daemon's */
	if (getpwuid(1000) != NULL && getpwuid(1000)->pw_gid == 1000) {
		assert_int_equal(ids_check(1000, 1000, err, sizeof(err)), 0);
		assert_int_equal(ids_check(1000, 0, err, sizeof(err)), -1);
		assert_int_equal(ids_check(1000, 1001, err, sizeof(err)), -1);
	}
	if (getpwnam("hostgate-test") != NULL) {
		assert_int_equal(ids_check(getpwnam("hostgate-test")->pw_uid,
		    getpwnam("hostgate-test")->pw_gid, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "daemon"));
	}
	/* a uid no account has */
	assert_int_equal(ids_check(4000000000LL, 4000000000LL, err,
	    sizeof(err)), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_v2_init, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_systemd, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_v2_limits, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_v2_io, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_kill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_sweep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_usage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_blkio, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_v1_freezer, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_none, setup, teardown),
		cmocka_unit_test_setup_teardown(test_real_v2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_real_freezer, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_ids_subid, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_ids_nss, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ids_check, setup,
		    teardown),
	};

	log_init("test_cgroup", 1);
	log_setlevel(getenv("V") ? LOG_LVL_DEBUG : LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
