/*
 * egressd: the egress proxy of the +allowlist profiles (egressd.h). It
 * reads its configuration, the hosts file and resolv.conf, enters a jail
 * with no filesystem but sandboxd's socket directory (keeping the host's
 * network: it connects out), drops to its own user, links to sandboxd,
 * loads its seccomp filter and serves the listeners sandboxd passes it.
 * It never forks (but for the jail's keeper), never execs, opens no file.
 */
#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egressd.h"

#define EGRESS_RESOLV_CONF	"/etc/resolv.conf"

/*
 * Beyond the common event-loop set: accepting on the spawns' listeners.
 * socket(2) is limited to AF_UNIX (sandboxd, the log), AF_INET and
 * AF_INET6 (upstream, DNS); no open, execve or fork is in the list.
 */
static const char *const egressd_syscalls[] = {
	"accept4", "accept",
	/* the relay: splice(2) through a pipe each way */
	"splice",
	NULL
};

/* HOSTGATE_EGRESS_PORTS as the refusal text shows it: "443, 80". */
static void
egressd_ports_text(struct egress_policy *pol)
{
	size_t	off = 0;
	int	i;

	pol->ports_text[0] = '\0';
	for (i = 0; i < pol->nports; i++)
		off += snprintf(pol->ports_text + off,
		    sizeof(pol->ports_text) - off, "%s%d", i ? ", " : "",
		    pol->ports[i]);
}

/* The policy from the configuration (already validated by config.c). */
static void
egressd_policy(struct config *conf, struct egress_policy *pol,
    struct egress_nets *deny, struct egress_nets *allow, struct hosts *hosts)
{
	char	err[512];

	memset(pol, 0, sizeof(*pol));
	pol->allow = conf->egress_allow;
	pol->deny = conf->egress_deny;
	if (egress_nets_parse(conf->egress_deny_nets, deny, err,
	    sizeof(err)) == -1)
		fatalx("HOSTGATE_EGRESS_DENY_NETS: %s", err);
	if (egress_nets_parse(conf->egress_allow_nets, allow, err,
	    sizeof(err)) == -1)
		fatalx("HOSTGATE_EGRESS_ALLOW_NETS: %s", err);
	pol->deny_nets = deny;
	pol->allow_nets = allow;
	if ((pol->nports = egress_ports_parse(conf->egress_ports, pol->ports,
	    EGRESS_PORTS_MAX)) <= 0)
		fatalx("HOSTGATE_EGRESS_PORTS=%s: no ports", conf->egress_ports);
	egressd_ports_text(pol);
	memset(hosts, 0, sizeof(*hosts));
	if (conf->egress_hosts != NULL && conf->egress_hosts[0] != '\0' &&
	    hosts_load(conf->egress_hosts, hosts, err, sizeof(err)) == -1)
		fatalx("%s", err);
	pol->hosts = hosts;
}

/*
 * The resolver, from /etc/resolv.conf read now (the jail hides it): its
 * nameservers and options, never its search list (a name is looked up as
 * given) nor /etc/hosts (HOSTGATE_EGRESS_HOSTS is the only pinned one).
 */
static struct evdns_base *
egressd_dns(struct event_base *base)
{
	struct evdns_base	*dns;
	int			 rc;

	if ((dns = evdns_base_new(base, 0)) == NULL)
		fatalx("evdns_base_new");
	rc = evdns_base_resolv_conf_parse(dns, DNS_OPTION_NAMESERVERS |
	    DNS_OPTION_MISC | DNS_OPTION_NAMESERVERS_NO_DEFAULT,
	    EGRESS_RESOLV_CONF);
	if (rc != 0 || evdns_base_count_nameservers(dns) == 0)
		log_warnx("%s: %s; only the names of HOSTGATE_EGRESS_HOSTS "
		    "resolve", EGRESS_RESOLV_CONF, rc == 1 ? "cannot open" :
		    rc == 6 || rc == 0 ? "no nameserver" : "cannot read");
	return dns;
}

/*
 * Enough descriptors for EGRESS_CONNS_MAX connections of two sockets
 * each: the soft limit raised to the hard one, with a warning when even
 * that is short.
 */
static void
egressd_limits(void)
{
	struct rlimit	rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		fatal("getrlimit RLIMIT_NOFILE");
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			log_warn("setrlimit RLIMIT_NOFILE");
	}
	if (rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < 2 * EGRESS_CONNS_MAX + 256)
		log_warnx("descriptor limit %ld: fewer than the %d "
		    "connections allowed may be served", (long)rl.rlim_cur,
		    EGRESS_CONNS_MAX);
}

/*
 * Enter the jail with sandboxd's socket directory for egressd, made here
 * as sandboxd makes it when egressd starts first. Returns in egressd
 * proper; the keeper never returns.
 */
static void
egressd_jail(struct config *conf, struct priv_plan *plan, uid_t sandbox_uid)
{
	char	*dir, err[512];
	uid_t	 uid;
	gid_t	 gid;
	pid_t	 pid;
	int	 root = geteuid() == 0;

	priv_peer(conf->egress_user, conf->egress_user, &uid, &gid);
	if (root) {
		/* The passwd file stays behind: priv_drop gets the ids. */
		plan->uid = uid;
		plan->gid = gid;
		plan->have_ids = 1;
	}
	dir = path_join(conf->run_dir, SOCK_EGRESS_DIR);
	priv_dir("egress socket directory", dir, sandbox_uid, gid,
	    root ? 0711 : 0700);
	pid = jail_enter("egressd", dir, conf->run_dir, JAIL_HOSTNET |
	    (root ? 0 : JAIL_USERNS), err, sizeof(err));
	free(dir);
	if (pid == -1)
		fatalx("%s", err);
	if (pid == 0)
		return;
	jail_keeper(pid, plan);
}

int
main(int argc, char *argv[])
{
	struct config		 conf;
	struct priv_plan	 plan;
	struct egress_policy	 policy;
	struct egress_nets	 deny_nets, allow_nets;
	struct hosts		 hosts;
	struct event_base	*base;
	char			*path;
	uid_t			 sandbox_uid;
	gid_t			 sandbox_gid;
	int			 debug, check, jailed;

	proc_options(argc, argv, "egressd", &debug, &check);
	log_init("egressd", debug || check);
	config_load_or_die(&conf);
	log_setlevel(conf.log_level);
	egressd_policy(&conf, &policy, &deny_nets, &allow_nets, &hosts);
	if (check) {
		fprintf(stderr, "egressd: configuration OK (%zu pinned names, "
		    "ports %s)\n", hosts.n, policy.ports_text);
		hosts_free(&hosts);
		egress_nets_free(&deny_nets);
		egress_nets_free(&allow_nets);
		config_free(&conf);
		return 0;
	}
	if (policy.allow[0] == '\0')
		log_info("HOSTGATE_EGRESS_ALLOW is empty: only an admin's "
		    "additions are reachable");

	/* Root, or started as the egress user itself: sandboxd has its own. */
	priv_peer(conf.egress_user, conf.sandbox_user, &sandbox_uid,
	    &sandbox_gid);
	/* As frontd's: jailed unless its own unit confines it (User=). */
	jailed = geteuid() == 0 || !priv_separate(conf.egress_user);
	if (mkdir(conf.run_dir, 0755) == -1 && errno != EEXIST)
		fatal("mkdir %s", conf.run_dir);
	egressd_limits();

	if (!debug && daemon(0, 0) == -1)
		fatal("daemon");

	/*
	 * The base and the resolver now: resolv.conf is read (and the
	 * nameservers' sockets made) before the jail hides the filesystem.
	 */
	if ((base = event_base_new()) == NULL)
		fatalx("event_base_new");
	policy.dns = egressd_dns(base);

	memset(&plan, 0, sizeof(plan));
	plan.name = "egressd";
	plan.user = conf.egress_user;
	plan.never_forks = 1;
	plan.syscalls = egressd_syscalls;
	plan.inet_sockets = 1;
	plan.debug = conf.seccomp_debug;
	if (jailed) {
		egressd_jail(&conf, &plan, sandbox_uid);
		/* The keeper's fork left the event base to be made anew. */
		if (event_reinit(base) == -1)
			fatalx("event_reinit");
	}
	/* SIGTERM and SIGINT stayed blocked: one pending is the keeper's. */
	proc_signals(base);
	priv_drop(&plan);
	if (jailed)
		jail_tie_to_keeper();

	proxy_init(base, &policy);
	path = path_join(conf.run_dir, SOCK_SANDBOX_EGRESS);
	sandbox_init(base, path, sandbox_uid);
	free(path);

	priv_seccomp(&plan);
	log_info("egressd %s: %zu pinned names, ports %s%s", HG_VERSION,
	    hosts.n, policy.ports_text, jailed ? ", jailed" : "");
	event_base_dispatch(base);
	hosts_free(&hosts);
	egress_nets_free(&deny_nets);
	egress_nets_free(&allow_nets);
	config_free(&conf);
	return 0;
}
