/*
 * Events for the clients' server-sent event streams: brokerd numbers them,
 * keeps the latest in a ring for Last-Event-ID resumption, and sends each
 * to frontd, which holds the streams and delivers an event to the streams
 * of its session (or user).
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

#define EVENTS_RING	512

struct event_rec {
	int64_t			 seq;
	char			 session[33];	/* "" when for a user */
	char			*user;
	struct json_object	*obj;		/* {"type":"event",...} */
};

static struct event_rec		 events_ring[EVENTS_RING];
static int64_t			 events_seq;
static struct ipc_server	*events_front;

/*
 * The sequence numbers must grow across restarts too, or a client's
 * Last-Event-ID would skip new events: start from the wall clock in
 * milliseconds, which a restart does not take back.
 */
void
events_init(struct ipc_server *front)
{
	events_front = front;
	events_seq = now_wall_ms();
}

/*
 * Emit an event for a session (its id) or, with session NULL, for every
 * stream of user. data is taken.
 */
void
events_emit(const char *session, const char *user, const char *name,
    struct json_object *data)
{
	events_emit_token(session, user, NULL, name, data);
}

/*
 * The same, naming a bearer token by its SHA-256 (hex, what frontd
 * computes of the bearers it relays) in "token", beside the data: frontd
 * ends that token's streams and never shows a client the hash.
 */
void
events_emit_token(const char *session, const char *user, const char *token,
    const char *name, struct json_object *data)
{
	struct event_rec	*r;
	struct json_object	*obj;

	r = &events_ring[++events_seq % EVENTS_RING];
	json_object_put(r->obj);
	free(r->user);
	r->seq = events_seq;
	snprintf(r->session, sizeof(r->session), "%s", session ? session : "");
	if ((r->user = strdup(user)) == NULL)
		fatal("%s", __func__);
	obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(MSG_EVENT));
	json_object_object_add(obj, "seq", json_object_new_int64(r->seq));
	json_object_object_add(obj, "event", json_object_new_string(name));
	json_object_object_add(obj, "session",
	    session ? json_object_new_string(session) : NULL);
	json_object_object_add(obj, "user", json_object_new_string(user));
	if (token != NULL)
		json_object_object_add(obj, "token",
		    json_object_new_string(token));
	json_object_object_add(obj, "data",
	    data ? data : json_object_new_object());
	r->obj = obj;
	log_debug("event %lld %s for %s%s%.8s", (long long)r->seq, name, user,
	    session ? " session " : "", session ? session : "");
	if (events_front != NULL)
		ipc_server_broadcast(events_front, json_object_get(obj));
}

/* Whether an event goes to a stream of (session, user). */
static int
events_match(const struct event_rec *r, const char *session,
    const char *user)
{
	if (strcmp(r->user, user) != 0)
		return 0;
	return r->session[0] == '\0' ||
	    (session != NULL && strcmp(r->session, session) == 0);
}

/*
 * The events after last_id that a stream of (session, user) missed, oldest
 * first. When the ring no longer holds them all, "complete" is false and
 * the client should read the state afresh.
 */
struct json_object *
events_since(int64_t last_id, const char *session, const char *user,
    int *complete)
{
	struct json_object	*arr;
	struct event_rec	*r;
	int64_t			 seq, first;

	arr = json_object_new_array();
	first = events_seq - EVENTS_RING + 1;
	*complete = last_id + 1 >= first || last_id <= 0;
	if (last_id <= 0)
		return arr;
	for (seq = last_id + 1 < first ? first : last_id + 1;
	    seq <= events_seq; seq++) {
		r = &events_ring[seq % EVENTS_RING];
		if (r->seq == seq && r->obj != NULL &&
		    events_match(r, session, user))
			json_object_array_add(arr, json_object_get(r->obj));
	}
	return arr;
}

/* The newest sequence number. */
int64_t
events_last(void)
{
	return events_seq;
}
