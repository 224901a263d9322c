/*
 * sandboxd: the only process of hostgate that execs. It answers brokerd
 * alone and never falls back to a weaker backend.
 */
#include <sys/types.h>
#include <sys/capability.h>
#include <sys/stat.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxd.h"

/*
 * sandboxd's filter is inherited by everything it spawns, bwrap included,
 * so it cannot be an allowlist of sandboxd's own calls: it denies what no
 * spawned program has any business doing on a shared host. bwrap then adds
 * the tight per-sandbox filter of profiles/. Each entry with its reason.
 */
static const char *const sandboxd_denied[] = {
	/* priv_host_denied (common/priv.c), and: */
	"quotactl",				/* host quotas */
	NULL
};

/*
 * What sandboxd keeps when started as root, each for one reason:
 * CAP_SETUID, CAP_SETGID: each spawn runs as its user's uid and gid;
 * CAP_KILL: signal the spawns of those other uids;
 * CAP_CHOWN: a new workspace belongs to its user;
 * CAP_FOWNER: set up a workspace that is no longer sandboxd's own.
 * Every spawned child clears all of them before exec.
 */
static const int sandboxd_caps[] = {
	CAP_SETUID, CAP_SETGID, CAP_KILL, CAP_CHOWN, CAP_FOWNER, -1
};

static struct event_base	*sandboxd_base;

/*
 * The workspace root belongs to sandboxd (0711), and so does its .etc,
 * the sandboxes' account files (passwd.c); so does the recordings
 * directory in the state directory. When sandboxd starts first it creates
 * the state directory as brokerd would (the broker user's, 0711 under
 * separate users, so that sandboxd can pass through), and brokerd finds it
 * right. A workspace root elsewhere gets its parent made when missing.
 */
static void
sandboxd_dirs(struct config *conf, uid_t uid, gid_t gid,
    uid_t broker_uid, gid_t broker_gid, int separate)
{
	struct stat	 st;
	char		*parent, *slash, etc[4096];

	priv_dir("state directory", conf->state_dir, broker_uid, broker_gid,
	    separate ? 0711 : 0700);
	if ((parent = strdup(conf->workspace_root)) == NULL)
		fatal("strdup");
	if ((slash = strrchr(parent, '/')) != NULL && slash != parent) {
		*slash = '\0';
		if (strcmp(parent, conf->state_dir) != 0 &&
		    mkdir(parent, 0711) == -1 && errno != EEXIST)
			fatal("mkdir %s", parent);
	}
	free(parent);
	/*
	 * 0711: each user's workspace inside belongs to that user (0700),
	 * who must pass through; nobody can list the root. One left 0700 by
	 * an earlier version is opened up.
	 */
	if (stat(conf->workspace_root, &st) == 0 && S_ISDIR(st.st_mode) &&
	    st.st_uid == uid && (st.st_mode & 07777) == 0700 &&
	    chmod(conf->workspace_root, 0711) == -1)
		fatal("chmod %s", conf->workspace_root);
	priv_dir("workspace root", conf->workspace_root, uid, gid, 0711);
	/* 0711: each spawn's uid reaches its own /etc/passwd (passwd.c). */
	passwd_dir_of(conf->workspace_root, etc, sizeof(etc));
	priv_dir("sandbox /etc directory", etc, uid, gid, 0711);
}

/*
 * The name of sandboxd's cgroup subtree: stable for one configuration
 * (its run directory), so that a restarted sandboxd finds what it left.
 */
static void
sandboxd_instance(struct config *conf, char *out, size_t outsz)
{
	char	hex[65];

	sha256_hex(conf->run_dir, strlen(conf->run_dir), hex);
	snprintf(out, outsz, "hostgate-%.8s", hex);
}

/* SIGCHLD: reap. */
static void
sandboxd_sigchld(evutil_socket_t sig, short ev, void *arg)
{
	spawn_reap();
}


int
main(int argc, char *argv[])
{
	struct config	 conf;
	struct priv_plan plan;
	struct event	*ev_chld;
	char		*path, instance[32];
	uid_t		 uid, broker_uid;
	gid_t		 gid, broker_gid;
	int		 debug, check, fd, separate, root;

	/* A direct-mode spawn's first stage (spawner.c), not the daemon. */
	spawner_direct_main(argc, argv);
	proc_options(argc, argv, "sandboxd", &debug, &check);

	log_init("sandboxd", debug || check);
	config_load_or_die(&conf);
	log_setlevel(conf.log_level);
	if (check) {
		policy_free(backend_load(&conf));
		fprintf(stderr, "sandboxd: configuration OK\n");
		config_free(&conf);
		return 0;
	}

	separate = priv_separate(conf.sandbox_user);
	priv_peer(conf.sandbox_user, conf.sandbox_user, &uid, &gid);
	priv_peer(conf.sandbox_user, conf.broker_user, &broker_uid,
	    &broker_gid);
	if (mkdir(conf.run_dir, 0755) == -1 && errno != EEXIST)
		fatal("mkdir %s", conf.run_dir);
	sandboxd_dirs(&conf, uid, gid, broker_uid, broker_gid, separate);
	root = geteuid() == 0;
	if (root)
		ids_init(&conf);
	sandboxd_instance(&conf, instance, sizeof(instance));
	cgroup_init("", instance, uid, gid);
	/* Nothing a previous sandboxd started outlives it (crash safety). */
	cgroup_sweep();
	record_setup(&conf, uid, gid);
	/* Before the listening socket: the disk helper must not hold it. */
	workspace_init(&conf);
	path = path_join(conf.run_dir, SOCK_SANDBOX);
	fd = ipc_listen(path, uid, broker_gid, separate ? 0660 : 0600);
	free(path);
	/* egressd's socket, and the directory of each spawn's to it. */
	egress_init(&conf);

	if (!debug && daemon(0, 0) == -1)
		fatal("daemon");

	memset(&plan, 0, sizeof(plan));
	plan.name = "sandboxd";
	plan.user = conf.sandbox_user;
	plan.syscalls = sandboxd_denied;
	plan.deny = 1;
	plan.debug = conf.seccomp_debug;
	if (root)
		plan.keep_caps = sandboxd_caps;
	priv_drop(&plan);

	sandboxd_base = proc_base();
	cgroup_loop(sandboxd_base);
	ev_chld = evsignal_new(sandboxd_base, SIGCHLD, sandboxd_sigchld, NULL);
	evsignal_add(ev_chld, NULL);

	spawn_init(sandboxd_base, &conf, broker_proc_exited);
	passwd_init(&conf);
	backend_init(&conf);
	record_init(sandboxd_base);
	grant_init(sandboxd_base);
	broker_init(sandboxd_base, &conf, broker_uid, fd);
	egress_start(sandboxd_base);

	priv_seccomp(&plan);
	log_info("sandboxd %s ready", HG_VERSION);
	event_base_dispatch(sandboxd_base);
	workspace_fini();
	cgroup_fini();
	config_free(&conf);
	return 0;
}
