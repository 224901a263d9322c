/*
 * egressd's one peer: sandboxd, reached at RUN_DIR/egress/sandbox.sock
 * (the only directory of egressd's jail) with the usual reconnect
 * backoff. sandboxd passes each +allowlist spawn's listening socket
 * (egress_listen), closes it (egress_close) and live-updates the admin
 * additions (egress_update); egressd sends it an egress_log record per
 * attempt, which sandboxd relays to brokerd's audit.
 *
 * A link that goes away takes every listener of it along: a new link is
 * a new sandboxd, whose spawns the old one's listeners no longer serve,
 * and a proxy that cannot log what it relays relays nothing.
 */
#include <sys/types.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "egressd.h"

static struct ipc_link	*sandbox_link;
static int		 sandbox_up;	/* hello exchanged, not closed */
static struct event	*sandbox_ev_gone;	/* closes the listeners */

/* A spawn under an +allowlist profile: serve its listening socket. */
static void
sandbox_egress_listen(struct ipc_peer *p, struct ipc_msg *m)
{
	char	err[256];
	int	fd;

	if (m->nfds != 1) {
		log_warnx("egress_listen of spawn %s with %d fds, want 1; "
		    "ignored", json_str(m->obj, "spawn"), m->nfds);
		return;
	}
	fd = m->fds[0];
	m->fds[0] = -1;		/* taken: proxy_listen closes it on refusal */
	if (proxy_listen(fd, json_str(m->obj, "spawn"),
	    json_str(m->obj, "user"), json_str(m->obj, "session"),
	    json_object_object_get(m->obj, "allow_user"),
	    json_object_object_get(m->obj, "allow_session"), err,
	    sizeof(err)) == -1)
		log_warnx("egress_listen refused: %s", err);
}

/* A spawn ended: its listener and connections go. */
static void
sandbox_egress_close(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*spawn = json_str(m->obj, "spawn");

	if (proxy_close(spawn) == -1)
		log_debug("egress_close of spawn %s: no listener", spawn);
}

/* An admin replaced a user's or a session's additions. */
static void
sandbox_egress_update(struct ipc_peer *p, struct ipc_msg *m)
{
	const char	*user = json_str(m->obj, "user");
	const char	*session = json_str(m->obj, "session");
	const char	*scope = json_str(m->obj, "scope");
	int		 n, sess;

	/* scope is user or session: the protocol table checked. */
	sess = strcmp(scope, "session") == 0;
	if (sess && session == NULL) {
		log_warnx("egress_update: scope session without a session; "
		    "ignored");
		return;
	}
	n = proxy_update(user, session, sess,
	    json_object_object_get(m->obj, "allow"));
	log_info("egress: %s %s%s%s: additions replaced on %d listeners",
	    scope, user, sess ? " session " : "", sess ? session : "", n);
}

/* What sandboxd sends egressd. */
const struct ipc_handler egressd_handlers[] = {
	{ MSG_EGRESS_LISTEN,	sandbox_egress_listen },
	{ MSG_EGRESS_CLOSE,	sandbox_egress_close },
	{ MSG_EGRESS_UPDATE,	sandbox_egress_update },
	{ NULL, NULL }
};

/* The link is up: nothing is owed, the listeners come from sandboxd. */
static void
sandbox_ready(struct ipc_peer *p)
{
	sandbox_up = 1;
	log_info("sandboxd connected");
}

/* The listeners of a link that went away go (see the top of this file). */
static void
sandbox_gone(evutil_socket_t fd, short ev, void *arg)
{
	proxy_close_all();
}

/*
 * The link went away. Its listeners close from the event loop, not here:
 * a send that fails drops the peer from inside sandbox_log, and so from
 * inside the very connection's end that was logging.
 */
static void
sandbox_closed(struct ipc_peer *p)
{
	/* What the closing listeners log now has nowhere to go. */
	sandbox_up = 0;
	event_active(sandbox_ev_gone, EV_TIMEOUT, 0);
}

static const struct ipc_peer_cbs sandbox_cbs = {
	sandbox_ready, sandbox_closed
};

/* Connect to sandboxd (uid: its service user's, or ours), and keep at it. */
void
sandbox_init(struct event_base *base, const char *path, uid_t uid)
{
	if ((sandbox_ev_gone = evtimer_new(base, sandbox_gone, NULL)) == NULL)
		fatalx("evtimer_new");
	sandbox_link = ipc_link_new(base, path, ROLE_EGRESSD, ROLE_SANDBOXD,
	    uid, egressd_handlers, &sandbox_cbs, NULL);
}

/* Send an egress_log record to sandboxd (taken); dropped when no link. */
void
sandbox_log(struct json_object *obj)
{
	struct ipc_peer	*p;

	if (!sandbox_up || (p = ipc_link_peer(sandbox_link)) == NULL) {
		json_object_put(obj);
		return;
	}
	if (ipc_send(p, obj, NULL, 0) == -1)
		log_warnx("egress_log: sandboxd's queue is full; a record is "
		    "lost");
}
