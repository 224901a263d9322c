/*
 * The store brokerd keeps its state in, chosen once at start-up by
 * HOSTGATE_STORE: the embedded one (store_sqlite.c) unless it names a
 * PostgreSQL database (store_pg.c). Callers use its operations through
 * store; nothing else asks which one it is.
 */

#include "brokerd.h"

const struct store_ops	*store = &store_sqlite;

/* Pick the store HOSTGATE_STORE names and open it; -1 with err. */
int
store_init(struct config *conf, char *err, size_t errsz)
{
	store = conf->store != NULL ? &store_pg : &store_sqlite;
	return store->open(conf, err, errsz);
}

/* Close the store (at exit). */
void
store_close(void)
{
	store->close();
}
