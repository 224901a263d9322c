/*
 * sandboxd's side of brokerd: the one peer it takes requests from.
 */
#include <sys/types.h>

#include "sandboxd.h"

#define BROKER_PROBE_MAX_AGE_MS	30000

static void	broker_health(struct ipc_peer *, struct ipc_msg *);

static const struct ipc_handler broker_handlers[] = {
	{ "health",	ROLE_BROKERD, 0, broker_health },
	{ NULL, 0, 0, NULL }
};

/* The backend's state, probed again when the last probe is stale. */
static void
broker_health(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object	*res;

	backend_probe(BROKER_PROBE_MAX_AGE_MS);
	res = json_object_new_object();
	json_object_object_add(res, "backend", backend_json());
	ipc_reply(p, m, res, NULL, 0);
}

/* Serve the socket for brokerd's uid only. */
void
broker_init(struct event_base *base, struct config *conf, uid_t broker_uid,
    int fd)
{
	ipc_server_new(base, fd, ROLE_SANDBOXD, ROLE_BROKERD, &broker_uid, 1,
	    broker_handlers, NULL, NULL);
}
