/*
 * brokerd: decides every request. It holds the users, sessions and tokens,
 * answers frontd and hgctl, and asks sandboxd to spawn. It never execs.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd.h"

/* What brokerd needs beyond the common event-loop set: its state files. */
static const char *const brokerd_syscalls[] = {
	"openat", "open", "rename", "renameat", "renameat2", "unlink",
	"unlinkat", "fsync", "fdatasync", "ftruncate", "fchmod", "umask",
	"getdents64", "fstatfs", "mkdir", "mkdirat", "accept4", "accept", "listen",
	/*
	 * sd_journal_sendv passes an entry too large for one datagram in a
	 * sealed memfd (our lines never are; a kill there would be absurd).
	 */
	"memfd_create",
	/*
	 * The SQLite store (store_sqlite.c): page reads and writes at an
	 * offset, the WAL's fsyncs (above), its truncation (ftruncate, above).
	 */
	"pread64", "pwrite64",
	NULL
};

static struct event_base	*brokerd_base;
static struct event		*brokerd_sweep_ev;

/*
 * The uids no hostgate user may be mapped to: the daemons' (as they run,
 * and their configured service users where those exist).
 */
static void
brokerd_reserve(struct config *conf, uid_t self, uid_t front, uid_t sandbox)
{
	const char *const	 names[][2] = {
		{ "brokerd", conf->broker_user },
		{ "frontd", conf->front_user },
		{ "sandboxd", conf->sandbox_user }
	};
	struct passwd		*pw;
	char			 why[80];
	size_t			 i;

	auth_uid_range(conf->uid_range[0], conf->uid_range[1]);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i][1] != NULL &&
		    (pw = getpwnam(names[i][1])) != NULL) {
			snprintf(why, sizeof(why), "%s's service user %s",
			    names[i][0], names[i][1]);
			auth_uid_reserve(pw->pw_uid, why);
		}
	auth_uid_reserve(self, "brokerd's own");
	auth_uid_reserve(front, "frontd's own");
	auth_uid_reserve(sandbox, "sandboxd's own");
}

/*
 * Every 30 s: drop expired sessions and write last-seen times, a bounded
 * batch of each; while batches come out full, the next one runs at once.
 */
static void
brokerd_sweep(evutil_socket_t fd, short ev, void *arg)
{
	struct timeval	now = { 0, 0 };

	if (session_sweep() == 1 && event_base_once(brokerd_base, -1,
	    EV_TIMEOUT, brokerd_sweep, NULL, &now) == -1)
		log_warnx("%s: event_base_once", __func__);
}

/*
 * Open the store, as the service user (store.db is its file), and load
 * the state that lives there: users, sessions and tokens, the audit
 * chain's tail. A PostgreSQL store's TCP link (not a Unix socket) is the
 * one reason brokerd's filter allows IPv4 and IPv6 sockets.
 */
static void
brokerd_load(struct config *conf, struct priv_plan *plan)
{
	char	err[512];

	if (store_init(conf, err, sizeof(err)) == -1)
		fatalx("%s", err);
	if (store->over_tcp != NULL && store->over_tcp()) {
		plan->unix_sockets = 0;
		plan->inet_sockets = 1;
	}
	if (auth_init(conf->state_dir, err, sizeof(err)) == -1)
		fatalx("%s", err);
	if (session_init(conf->state_dir, conf->session_lifetime, err,
	    sizeof(err)) == -1)
		fatalx("%s", err);
	/* The chain where the store keeps it (a fleet's: its audit table). */
	audit_set_host(conf->host_id);
	audit_use_store(store->audit);
	if (audit_init(conf->state_dir, conf->audit_rotate, conf->audit_syslog,
	    err, sizeof(err)) == -1)
		fatalx("%s", err);
}

int
main(int argc, char *argv[])
{
	struct config	 conf;
	struct priv_plan plan;
	struct timeval	 tv = { 30, 0 };
	char		*path;
	uid_t		 uid, front_uid, sandbox_uid, ctl_uids[2];
	gid_t		 gid, front_gid, sandbox_gid;
	int		 debug, check, front_fd, ctl_fd, separate;

	proc_options(argc, argv, "brokerd", &debug, &check);

	log_init("brokerd", debug || check);
	config_load_or_die(&conf);
	log_setlevel(conf.log_level);
	if (check) {
		fprintf(stderr, "brokerd: configuration OK\n");
		config_free(&conf);
		return 0;
	}

	/*
	 * Set-up: users, directories, sockets. Separate users: started as
	 * root, or directly as the broker user (systemd's User=).
	 */
	separate = priv_separate(conf.broker_user);
	priv_peer(conf.broker_user, conf.broker_user, &uid, &gid);
	priv_peer(conf.broker_user, conf.front_user, &front_uid, &front_gid);
	priv_peer(conf.broker_user, conf.sandbox_user, &sandbox_uid,
	    &sandbox_gid);
	/*
	 * 0711 under separate users: sandboxd passes through to its
	 * workspaces; the files here are 0600 and their names unlisted.
	 */
	priv_dir("state directory", conf.state_dir, uid, gid,
	    separate ? 0711 : 0700);
	if (mkdir(conf.run_dir, 0755) == -1 && errno != EEXIST)
		fatal("mkdir %s", conf.run_dir);

	/*
	 * frontd's socket: its group may connect, SO_PEERCRED checks the uid.
	 * In a directory of its own, which frontd's jail binds.
	 */
	path = path_join(conf.run_dir, SOCK_FRONT_DIR);
	priv_dir("front socket directory", path, uid, front_gid,
	    separate ? 0711 : 0700);
	free(path);
	path = path_join(conf.run_dir, SOCK_BROKER_FRONT);
	front_fd = ipc_listen(path, uid, front_gid, separate ? 0660 : 0600);
	free(path);
	/* hgctl's: root (who ignores modes) and the service user only. */
	path = path_join(conf.run_dir, SOCK_BROKER_CONTROL);
	ctl_fd = ipc_listen(path, uid, gid, 0600);
	free(path);
	ctl_uids[0] = 0;
	ctl_uids[1] = uid;
	brokerd_reserve(&conf, uid, front_uid, sandbox_uid);

	if (!debug && daemon(0, 0) == -1)
		fatal("daemon");

	memset(&plan, 0, sizeof(plan));
	plan.name = "brokerd";
	plan.user = conf.broker_user;
	plan.never_forks = 1;
	plan.syscalls = brokerd_syscalls;
	plan.unix_sockets = 1;
	plan.debug = conf.seccomp_debug;
	priv_drop(&plan);

	brokerd_load(&conf, &plan);
	prompt_init(&conf);
	egress_init(&conf);

	brokerd_base = proc_base();
	if (store->events != NULL)
		store->events(brokerd_base);
	brokerd_sweep_ev = event_new(brokerd_base, -1, EV_PERSIST,
	    brokerd_sweep, NULL);
	evtimer_add(brokerd_sweep_ev, &tv);
	audit_refusal_init(brokerd_base, conf.audit_refusal_interval);

	front_init(brokerd_base, &conf, front_uid, front_fd);
	control_init(brokerd_base, &conf, ctl_uids, 2, ctl_fd);
	sandbox_init(brokerd_base, &conf, sandbox_uid);
	/* Last: resuming or ending stored grants uses the peers above. */
	mode_init(brokerd_base, &conf);
	/* A fleet's: this host up on the store, and its heartbeat. */
	hosts_init(brokerd_base, &conf);

	priv_seccomp(&plan);
	log_info("brokerd %s ready (state %s)", HG_VERSION, conf.state_dir);
	event_base_dispatch(brokerd_base);

	hosts_stop();
	session_close();
	audit_close();
	store_close();
	config_free(&conf);
	return 0;
}
