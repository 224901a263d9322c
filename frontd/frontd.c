/*
 * frontd: the unprivileged HTTP(S) and WebSocket front of hostgate. It
 * binds, loads the TLS key, drops everything and then only parses HTTP and
 * relays to brokerd. It never forks, never execs, never authenticates.
 */
#include <sys/types.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontd.h"

/*
 * Beyond the common event-loop set: accepting TCP clients, and the memfds
 * that carry a command's stdin and output (and, for an entry too large
 * for one datagram, sd_journal_sendv's).
 */
static const char *const frontd_syscalls[] = {
	"accept4", "accept",
	"memfd_create", "pread64", "ftruncate",
	NULL
};

static struct event_base	*frontd_base;
static int64_t			 frontd_started;	/* wall seconds */

#define FRONTD_LISTEN_FILE	"frontd.listen"

/* What brokerd sends frontd unasked: the events for the SSE streams. */
const struct ipc_handler frontd_handlers[] = {
	{ MSG_EVENT,	sse_deliver },
	{ NULL, NULL }
};
static void	frontd_broker_ready(struct ipc_peer *);
static const struct ipc_peer_cbs frontd_broker_cbs = {
	frontd_broker_ready, NULL
};

/* brokerd is connected: tell it our version and start (hgctl status). */
static void
frontd_broker_ready(struct ipc_peer *p)
{
	struct json_object	*obj;

	obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(
	    MSG_FRONT_INFO));
	json_object_object_add(obj, "version",
	    json_object_new_string(HG_VERSION));
	json_object_object_add(obj, "started",
	    json_object_new_int64(frontd_started));
	ipc_send(p, obj, NULL, 0);
}

/* The address bound, port 0 resolved: "a.b.c.d:port" or "[a::b]:port". */
static void
frontd_bound(int fd, char *out, size_t outsz)
{
	struct sockaddr_storage	ss;
	struct sockaddr_in	*sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)&ss;
	socklen_t		len = sizeof(ss);
	char			host[INET6_ADDRSTRLEN];

	if (getsockname(fd, (struct sockaddr *)&ss, &len) == -1)
		fatal("getsockname");
	if (ss.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		snprintf(out, outsz, "[%s]:%u", host,
		    (unsigned)ntohs(sin6->sin6_port));
	} else {
		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		snprintf(out, outsz, "%s:%u", host,
		    (unsigned)ntohs(sin->sin_port));
	}
}

/* Bind the configured numeric address (already validated by config). */
static int
frontd_bind(struct config *conf, char *bound, size_t boundsz)
{
	struct sockaddr_storage	ss;
	struct sockaddr_in	*sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)&ss;
	socklen_t		len;
	int			fd, on = 1;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, conf->listen_host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(conf->listen_port);
		len = sizeof(*sin);
	} else if (inet_pton(AF_INET6, conf->listen_host,
	    &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(conf->listen_port);
		len = sizeof(*sin6);
	} else
		fatalx("HOSTGATE_LISTEN=%s: not a numeric address",
		    conf->listen);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd == -1)
		fatal("socket");
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) == -1)
		fatal("SO_REUSEADDR");
	if (bind(fd, (struct sockaddr *)&ss, len) == -1)
		fatal("bind %s", conf->listen);
	/* A burst of connections (a client opening hundreds) waits here. */
	if (listen(fd, SOMAXCONN) == -1)
		fatal("listen %s", conf->listen);
	frontd_bound(fd, bound, boundsz);
	return fd;
}

/*
 * Drop the address file of an earlier frontd, so that it never names a
 * port that this one failed to get.
 */
static void
frontd_listen_forget(const char *path)
{
	if (unlink(path) == -1 && errno != ENOENT)
		log_warn("unlink %s", path);
}

/*
 * Tell launchers the address actually bound (HOSTGATE_LISTEN may ask for
 * port 0): RUN_DIR/frontd.listen, written atomically while frontd may
 * still write the run directory.
 */
static void
frontd_listen_publish(const char *path, const char *bound)
{
	char	line[INET6_ADDRSTRLEN + 16];
	int	n;

	n = snprintf(line, sizeof(line), "%s\n", bound);
	if (file_write_atomic(path, line, (size_t)n, 0644) == -1)
		fatal("write %s", path);
}

/*
 * Enter the jail (common/jail.c) with brokerd's socket directory, made
 * here as brokerd makes it when frontd starts first. Returns in frontd proper;
 * the keeper lets go of the listener and the key and keeps frontd.
 */
static void
frontd_jail(struct config *conf, struct priv_plan *plan, int fd,
    SSL_CTX *ssl, const char *lpath)
{
	char	*dir, err[512];
	uid_t	 broker_uid, front_uid;
	gid_t	 broker_gid, front_gid;
	pid_t	 pid;
	int	 root = geteuid() == 0;

	priv_peer(conf->front_user, conf->broker_user, &broker_uid,
	    &broker_gid);
	priv_peer(conf->front_user, conf->front_user, &front_uid, &front_gid);
	if (root) {
		/* The passwd file stays behind: priv_drop gets the ids. */
		plan->uid = front_uid;
		plan->gid = front_gid;
		plan->have_ids = 1;
	}
	dir = path_join(conf->run_dir, SOCK_FRONT_DIR);
	priv_dir("front socket directory", dir, broker_uid, front_gid,
	    root ? 0711 : 0700);
	pid = jail_enter("frontd", dir, conf->run_dir, root ? 0 : JAIL_USERNS,
	    err, sizeof(err));
	free(dir);
	if (pid == -1) {
		/* No address may be left that nothing will ever serve. */
		frontd_listen_forget(lpath);
		fatalx("%s", err);
	}
	if (pid == 0)
		return;
	close(fd);
	SSL_CTX_free(ssl);
	jail_keeper(pid, plan);
}

/*
 * The connection limits: HOSTGATE_MAX_CONNECTIONS held below the
 * descriptor limit less HTTP_FD_RESERVE, after raising the soft limit to
 * the hard one, so that accept() never runs out of descriptors first.
 */
static void
frontd_limits(struct config *conf, struct http_limits *limits)
{
	struct rlimit	rl;
	long		room;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		fatal("getrlimit RLIMIT_NOFILE");
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			log_warn("setrlimit RLIMIT_NOFILE");
		if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
			fatal("getrlimit RLIMIT_NOFILE");
	}
	room = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > INT_MAX ?
	    INT_MAX : (long)rl.rlim_cur - HTTP_FD_RESERVE;
	memset(limits, 0, sizeof(*limits));
	limits->max_conns = conf->max_conns;
	if (room < limits->max_conns) {
		if (room < 16)
			fatalx("descriptor limit %ld: too low to serve (%d are "
			    "kept for other uses)", (long)rl.rlim_cur,
			    HTTP_FD_RESERVE);
		log_warnx("HOSTGATE_MAX_CONNECTIONS=%d is above the descriptor "
		    "limit %ld less %d: using %ld", conf->max_conns,
		    (long)rl.rlim_cur, HTTP_FD_RESERVE, room);
		limits->max_conns = (int)room;
	}
	limits->max_conns_per_addr = conf->max_conns_per_addr;
	if (limits->max_conns_per_addr > limits->max_conns)
		limits->max_conns_per_addr = limits->max_conns;
	limits->header_timeout = conf->header_timeout;
	log_info("connections: at most %d, %d per client address, %d s for "
	    "a request head (descriptor limit %ld)", limits->max_conns,
	    limits->max_conns_per_addr, limits->header_timeout,
	    rl.rlim_cur == RLIM_INFINITY ? -1L : (long)rl.rlim_cur);
}

/*
 * The HTTP server on the listening socket fd (TLS with ssl), with the
 * configured limits and the proxies whose X-Forwarded-For it trusts.
 */
static struct http_server *
frontd_server(struct config *conf, int fd, SSL_CTX *ssl)
{
	struct http_server	*server;
	struct http_limits	 limits;
	struct egress_nets	 trusted;
	char			 err[512];

	frontd_limits(conf, &limits);
	if ((server = http_server_new(frontd_base, fd, ssl, conf->max_body,
	    api_handle, NULL)) == NULL)
		fatalx("http_server_new");
	http_server_set_limits(server, &limits);
	if (conf->trusted_proxies != NULL && *conf->trusted_proxies != '\0') {
		if (egress_nets_parse(conf->trusted_proxies, &trusted, err,
		    sizeof(err)) == -1)
			fatalx("HOSTGATE_TRUSTED_PROXIES: %s", err);
		http_server_set_trusted(server, &trusted);
	}
	return server;
}

int
main(int argc, char *argv[])
{
	struct config	 conf;
	struct priv_plan plan;
	struct ipc_link	*broker;
	struct http_server *server;
	SSL_CTX		*ssl = NULL;
	char		 err[512], bound[INET6_ADDRSTRLEN + 16], *path, *lpath;
	uid_t		 broker_uid;
	gid_t		 broker_gid;
	int		 debug, check, fd, jailed;

	proc_options(argc, argv, "frontd", &debug, &check);
	frontd_started = now_wall_ms() / 1000;

	log_init("frontd", debug || check);
	config_load_or_die(&conf);
	log_setlevel(conf.log_level);

	/* The key is read now, before the drop; never again after it. */
	if (conf.tls_cert != NULL &&
	    (ssl = tls_ctx_new(conf.tls_cert, conf.tls_key, err,
	    sizeof(err))) == NULL)
		fatalx("%s", err);
	if (check) {
		fprintf(stderr, "frontd: configuration OK\n");
		SSL_CTX_free(ssl);
		config_free(&conf);
		return 0;
	}
	if (!conf.listen_loopback && ssl == NULL)
		log_warnx("HOSTGATE_INSECURE_HTTP=1: serving plain HTTP on %s; "
		    "passwords and cookies cross the network in clear",
		    conf.listen);

	/* Root, or started as the front user itself: brokerd has its own. */
	priv_peer(conf.front_user, conf.broker_user, &broker_uid, &broker_gid);
	/*
	 * Jailed unless started as the front user itself (systemd's User=,
	 * whose unit confines it): as root, and always when all three
	 * daemons share one uid, which alone would separate nothing.
	 */
	jailed = geteuid() == 0 || !priv_separate(conf.front_user);
	if (mkdir(conf.run_dir, 0755) == -1 && errno != EEXIST)
		fatal("mkdir %s", conf.run_dir);
	lpath = path_join(conf.run_dir, FRONTD_LISTEN_FILE);
	frontd_listen_forget(lpath);
	fd = frontd_bind(&conf, bound, sizeof(bound));
	/* The panel is read now: frontd opens no file after the drop. */
	if (static_load(conf.web_dir, err, sizeof(err)) == -1)
		fatalx("%s", err);
	frontd_listen_publish(lpath, bound);

	if (!debug && daemon(0, 0) == -1)
		fatal("daemon");

	memset(&plan, 0, sizeof(plan));
	plan.name = "frontd";
	plan.user = conf.front_user;
	plan.never_forks = 1;
	plan.syscalls = frontd_syscalls;
	plan.unix_sockets = 1;
	plan.debug = conf.seccomp_debug;
	if (jailed)
		frontd_jail(&conf, &plan, fd, ssl, lpath);
	priv_drop(&plan);
	if (jailed)
		jail_tie_to_keeper();

	frontd_base = proc_base();

	path = path_join(conf.run_dir, SOCK_BROKER_FRONT);
	broker = ipc_link_new(frontd_base, path, ROLE_FRONTD, ROLE_BROKERD,
	    broker_uid, frontd_handlers, &frontd_broker_cbs, NULL);
	free(path);
	api_init(frontd_base, &conf, broker);
	if (conf.store != NULL)
		mcp_set_host(conf.host_id);
	mcp_set_public_url(conf.public_url);
	ws_init();
	ws_origins_init(&conf, bound);
	sse_init(frontd_base);
	server = frontd_server(&conf, fd, ssl);
	files_init(&conf);
	http_server_set_spool(server, files_spool, files_check);

	priv_seccomp(&plan);
	log_info("frontd %s listening on %s (%s)", HG_VERSION, bound,
	    ssl ? "https" : "http");
	event_base_dispatch(frontd_base);
	free(lpath);
	config_free(&conf);
	return 0;
}
