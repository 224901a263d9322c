/*
 * Token-bucket rate limits keyed by a string (a user name, an address).
 *
 * Levels are integers in units of 1/RL_UNIT token, where RL_UNIT is the
 * number of milliseconds in a minute times 1000: a rate of R tokens per
 * minute then refills exactly round(R * 1000) units per millisecond, so no
 * rounding drift can hand out a token early (rates have a resolution of
 * 0.001 per minute). Buckets sit in a hash table (FNV-1a, chained) for O(1)
 * lookups and in a list ordered by last use, for eviction.
 *
 * With a fleet's store (its rate hook) the buckets are the fleet's: a row
 * of the ratelimits table per (bucket, key), taken from by one statement
 * that refills it by the time elapsed on the database's clock, so that
 * every host shares one bucket exactly (the row lock serializes them).
 */

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

#define RL_UNIT		(60LL * 1000 * 1000)	/* units in one token */
#define RL_LIMIT	1e9			/* largest rate and burst */
#define RL_STORE_WAIT	5		/* seconds: a store error refuses */
#define RL_SWEEP_MS	(60 * 1000)	/* between sweeps of a table's rows */

struct rl_bucket {
	char			*key;
	uint32_t		 hash;
	int64_t			 level;		/* units */
	int64_t			 stamp;		/* ms of the last refill */
	LIST_ENTRY(rl_bucket)	 chain;
	TAILQ_ENTRY(rl_bucket)	 lru;		/* least recently used first */
};

LIST_HEAD(rl_chain, rl_bucket);
TAILQ_HEAD(rl_lru, rl_bucket);

struct rl_table {
	char			*bucket;	/* its rows' name in the store */
	char			 burst_s[32];	/* the store's parameters */
	char			 rate_s[32];	/* tokens per second */
	int64_t			 swept;		/* ms, monotonic */
	int64_t			 rate;		/* units per ms */
	int64_t			 burst;		/* units */
	size_t			 max_keys;
	size_t			 nkeys;
	size_t			 nchains;	/* a power of two */
	struct rl_chain		*chains;
	struct rl_lru		 lru;
};

/* FNV-1a hash of a string. */
static uint32_t
rl_hash(const char *key)
{
	uint32_t	h = 2166136261u;

	for (; *key != '\0'; key++) {
		h ^= (unsigned char)*key;
		h *= 16777619u;
	}
	return h;
}

/*
 * A table of buckets named bucket in the store; NULL when a parameter is
 * out of range.
 */
struct rl_table *
rl_new(const char *bucket, double per_minute, double burst, size_t max_keys)
{
	struct rl_table	*t;
	size_t		 i;

	if (bucket == NULL || *bucket == '\0' ||
	    !(per_minute >= 0.001 && per_minute <= RL_LIMIT) ||
	    !(burst >= 1 && burst <= RL_LIMIT) ||
	    max_keys == 0 || max_keys > SIZE_MAX / 4)
		return NULL;
	if ((t = calloc(1, sizeof *t)) == NULL)
		fatal("%s", __func__);
	/*
	 * Round down, never up, so the limit is never looser than asked; the
	 * epsilon keeps 0.29 * 1000 = 289.99999999999994 at 290.
	 */
	t->rate = (int64_t)(per_minute * 1000 + 1e-6);
	t->burst = (int64_t)(burst * RL_UNIT + 1e-6);
	t->max_keys = max_keys;
	if ((t->bucket = strdup(bucket)) == NULL)
		fatal("%s", __func__);
	snprintf(t->burst_s, sizeof(t->burst_s), "%.17g",
	    (double)t->burst / RL_UNIT);
	snprintf(t->rate_s, sizeof(t->rate_s), "%.17g",
	    (double)t->rate * 1000 / RL_UNIT);
	t->swept = now_mono_ms() - RL_SWEEP_MS;	/* at the first take */
	for (t->nchains = 16; t->nchains < max_keys; t->nchains *= 2)
		;
	if ((t->chains = calloc(t->nchains, sizeof *t->chains)) == NULL)
		fatal("%s", __func__);
	for (i = 0; i < t->nchains; i++)
		LIST_INIT(&t->chains[i]);
	TAILQ_INIT(&t->lru);
	return t;
}

/* Unlink and free one bucket. */
static void
rl_remove(struct rl_table *t, struct rl_bucket *b)
{
	LIST_REMOVE(b, chain);
	TAILQ_REMOVE(&t->lru, b, lru);
	t->nkeys--;
	free(b->key);
	free(b);
}

/* Free a table and its buckets. */
void
rl_free(struct rl_table *t)
{
	if (t == NULL)
		return;
	while (!TAILQ_EMPTY(&t->lru))
		rl_remove(t, TAILQ_FIRST(&t->lru));
	free(t->chains);
	free(t->bucket);
	free(t);
}

/* The bucket's level at now_ms, never above the burst. */
static int64_t
rl_level(const struct rl_table *t, const struct rl_bucket *b, int64_t now_ms)
{
	int64_t	elapsed = now_ms - b->stamp, need = t->burst - b->level;

	if (elapsed <= 0)
		return b->level;	/* a clock that went back refills nothing */
	/* Compare before multiplying, so a long idle time cannot overflow. */
	if (elapsed >= (need + t->rate - 1) / t->rate)
		return t->burst;
	return b->level + elapsed * t->rate;
}

/* Seconds until a bucket at level holds one token (0: it does now). */
static int
rl_wait(const struct rl_table *t, int64_t level)
{
	int64_t	ms, secs;

	if (level >= RL_UNIT)
		return 0;
	ms = (RL_UNIT - level + t->rate - 1) / t->rate;
	secs = (ms + 999) / 1000;
	return secs > INT_MAX ? INT_MAX : (int)secs;
}

/* The bucket for key, or NULL. */
static struct rl_bucket *
rl_find(struct rl_table *t, const char *key, uint32_t hash)
{
	struct rl_bucket	*b;

	LIST_FOREACH(b, &t->chains[hash & (t->nchains - 1)], chain) {
		if (b->hash == hash && strcmp(b->key, key) == 0)
			return b;
	}
	return NULL;
}

/*
 * Make room for one bucket. A full bucket says nothing a missing one would
 * not, so all of those go first; only when none is full does the least
 * recently used bucket go (its key gets a fresh burst).
 */
static void
rl_evict(struct rl_table *t, int64_t now_ms)
{
	struct rl_bucket	*b, *next;
	size_t			 before = t->nkeys;

	for (b = TAILQ_FIRST(&t->lru); b != NULL; b = next) {
		next = TAILQ_NEXT(b, lru);
		if (rl_level(t, b, now_ms) >= t->burst)
			rl_remove(t, b);
	}
	if (t->nkeys == before)
		rl_remove(t, TAILQ_FIRST(&t->lru));
}

/*
 * Take or peek at key's shared bucket in a fleet's store: the seconds to
 * wait (0: allowed). A store error refuses (RL_STORE_WAIT): a limit that
 * cannot be read is never waived. A batch of full buckets is swept at the
 * table's first take, then once a minute.
 */
static int
rl_store(struct rl_table *t, const char *key, int take)
{
	int64_t	now = now_mono_ms();
	int	sweep = 0, wait;

	if (take && now - t->swept >= RL_SWEEP_MS) {
		t->swept = now;
		sweep = 1;
	}
	if ((wait = store->rate(t->bucket, key, t->burst_s, t->rate_s, take,
	    sweep)) == -1) {
		log_warnx("rate limit %s: refused, the store failed: %s",
		    t->bucket, store->error());
		return RL_STORE_WAIT;
	}
	return wait;
}

/* Take a token for key: 0 when allowed, else seconds to wait (>= 1). */
int
rl_take(struct rl_table *t, const char *key, int64_t now_ms)
{
	struct rl_bucket	*b;
	uint32_t		 hash;
	int			 wait;

	if (key == NULL)
		key = "";
	if (store->rate != NULL)
		return rl_store(t, key, 1);
	hash = rl_hash(key);
	if ((b = rl_find(t, key, hash)) == NULL) {
		if (t->nkeys >= t->max_keys)
			rl_evict(t, now_ms);
		if ((b = calloc(1, sizeof *b)) == NULL ||
		    (b->key = strdup(key)) == NULL)
			fatal("%s", __func__);
		b->hash = hash;
		b->level = t->burst;
		b->stamp = now_ms;
		LIST_INSERT_HEAD(&t->chains[hash & (t->nchains - 1)], b, chain);
		t->nkeys++;
	} else {
		TAILQ_REMOVE(&t->lru, b, lru);
		b->level = rl_level(t, b, now_ms);
		if (now_ms > b->stamp)
			b->stamp = now_ms;
	}
	TAILQ_INSERT_TAIL(&t->lru, b, lru);

	if ((wait = rl_wait(t, b->level)) != 0)
		return wait;
	b->level -= RL_UNIT;
	return 0;
}

/* Seconds until key could take a token, without taking one (0: now). */
int
rl_peek(struct rl_table *t, const char *key, int64_t now_ms)
{
	struct rl_bucket	*b;

	if (key == NULL)
		key = "";
	if (store->rate != NULL)
		return rl_store(t, key, 0);
	if ((b = rl_find(t, key, rl_hash(key))) == NULL)
		return 0;
	return rl_wait(t, rl_level(t, b, now_ms));
}
