/*
 * sandboxd: the only process that spawns. It builds the backend command
 * lines, runs them and answers to brokerd alone.
 */
#ifndef HG_SANDBOXD_H
#define HG_SANDBOXD_H

#include "common.h"

/* backend.c */
void	 backend_init(struct config *);
/* Probe the backend now when the last probe is older than max_age_ms. */
void	 backend_probe(int64_t max_age_ms);
/* {"name", "ok", "reason"} */
struct json_object *backend_json(void);

/* broker.c */
void	 broker_init(struct event_base *, struct config *, uid_t broker_uid,
	    int fd);

#endif
