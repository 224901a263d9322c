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
 * With a PostgreSQL store the buckets are the fleet's: a row of the
 * ratelimits table per (bucket, key), taken from by one statement that
 * refills it by the time elapsed on the database's clock, so that every
 * host shares one bucket exactly (the row lock serializes them).
 */

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

#define RL_UNIT		(60LL * 1000 * 1000)	/* units in one token */
#define RL_LIMIT	1e9			/* largest rate and burst */
#define RL_STORE_WAIT	5		/* seconds: a store error refuses */
#define RL_SWEEP_MS	(60 * 1000)	/* between sweeps of a table's rows */
#define RL_SWEEP_ROWS	"1000"		/* rows a sweep deletes at most */
#define RL_KEY_MAX	128		/* longer keys are stored hashed */

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
 * The level of a row at the database's clock: refilled by the time since
 * its stamp (none for a clock that went back), never above the burst b
 * (tokens), at the rate r (tokens per second); b and r are parameters.
 */
#define RL_SQL_LEVEL(b, r) \
	"least(" b "::float8, r.tokens + greatest(0, extract(epoch FROM " \
	"clock_timestamp() - r.at))::float8 * " r "::float8)"

/*
 * Take a token in one statement: a missing row is a full bucket; a row
 * with a token left is refilled and taken from (its lock serializes the
 * hosts); one without is left alone and the wait is computed from it (as
 * the statement's snapshot saw it: only the seconds of a refusal). Each
 * clock_timestamp() is a little later than the one before: the stamp set
 * is never earlier than the refill counted, so it can only come out short.
 */
static const char rl_sql_take[] =
	"WITH up AS ("
	" INSERT INTO ratelimits AS r (bucket, key, tokens, at)"
	" VALUES ($1, $2, $3::float8 - 1, clock_timestamp())"
	" ON CONFLICT (bucket, key) DO UPDATE SET"
	"  tokens = " RL_SQL_LEVEL("$3", "$4") " - 1,"
	"  at = greatest(r.at, clock_timestamp())"
	" WHERE " RL_SQL_LEVEL("$3", "$4") " >= 1"
	" RETURNING 1)"
	" SELECT true, 0::float8 FROM up"
	" UNION ALL"
	" SELECT false, (1 - " RL_SQL_LEVEL("$3", "$4") ") / $4::float8"
	" FROM ratelimits r WHERE r.bucket = $1 AND r.key = $2"
	" AND NOT EXISTS (SELECT 1 FROM up)";

static const char rl_sql_peek[] =
	"SELECT false, (1 - " RL_SQL_LEVEL("$3", "$4") ") / $4::float8"
	" FROM ratelimits r WHERE r.bucket = $1 AND r.key = $2";

/*
 * Full buckets say nothing a missing row would not: a bounded batch of
 * them goes (the outer test again on each row's last version, so that a
 * bucket taken from meanwhile stays).
 */
static const char rl_sql_sweep[] =
	"DELETE FROM ratelimits r WHERE r.bucket = $1"
	" AND " RL_SQL_LEVEL("$2", "$3") " >= $2::float8"
	" AND r.key IN (SELECT r.key FROM ratelimits r WHERE r.bucket = $1"
	" AND " RL_SQL_LEVEL("$2", "$3") " >= $2::float8"
	" LIMIT " RL_SWEEP_ROWS ")";

/*
 * The key as stored: as it is when short and printable ASCII, else its
 * SHA-256 (a user name of any bytes must not fail the statement).
 */
static const char *
rl_store_key(const char *key, char out[72])
{
	const unsigned char	*p;
	size_t			 len = strlen(key);

	for (p = (const unsigned char *)key; *p != '\0'; p++)
		if (*p < 0x20 || *p > 0x7e)
			break;
	if (*p == '\0' && len <= RL_KEY_MAX)
		return key;
	memcpy(out, "sha256:", 7);
	sha256_hex(key, len, out + 7);
	return out;
}

/* The seconds of a refusal from the store's (>= 1). */
static int
rl_store_wait(double secs)
{
	if (!(secs >= 1))
		return 1;
	secs = ceil(secs);
	return secs >= INT_MAX ? INT_MAX : (int)secs;
}

/*
 * Delete a bounded batch of the table's full rows: at its first take, then
 * once a minute.
 */
static void
rl_store_sweep(struct rl_table *t)
{
	const char	*params[3];
	int64_t		 now = now_mono_ms();

	if (now - t->swept < RL_SWEEP_MS)
		return;
	t->swept = now;
	params[0] = t->bucket;
	params[1] = t->burst_s;
	params[2] = t->rate_s;
	if (pg_exec(rl_sql_sweep, 3, params) == -1)
		log_warnx("rate limit %s: sweep: %s", t->bucket, pg_error());
}

/*
 * Take or peek at key's bucket in the store: the seconds to wait (0:
 * allowed). A store error refuses (RL_STORE_WAIT): a limit that cannot be
 * read is never waived.
 */
static int
rl_store(struct rl_table *t, const char *key, int take)
{
	PGresult	*res;
	const char	*params[4];
	char		 hashed[72];
	int		 wait;

	params[0] = t->bucket;
	params[1] = rl_store_key(key, hashed);
	params[2] = t->burst_s;
	params[3] = t->rate_s;
	if ((res = pg_query(take ? rl_sql_take : rl_sql_peek, 4,
	    params)) == NULL) {
		log_warnx("rate limit %s: refused, the store failed: %s",
		    t->bucket, pg_error());
		return RL_STORE_WAIT;
	}
	if (PQntuples(res) != 1 || PQnfields(res) != 2)
		wait = take ? 1 : 0;	/* take: a row born meanwhile */
	else if (strcmp(PQgetvalue(res, 0, 0), "t") == 0)
		wait = 0;		/* taken */
	else if (!take && strtod(PQgetvalue(res, 0, 1), NULL) <= 0)
		wait = 0;		/* a token is there */
	else
		wait = rl_store_wait(strtod(PQgetvalue(res, 0, 1), NULL));
	PQclear(res);
	if (take)
		rl_store_sweep(t);
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
	if (pg_enabled())
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
	if (pg_enabled())
		return rl_store(t, key, 0);
	if ((b = rl_find(t, key, rl_hash(key))) == NULL)
		return 0;
	return rl_wait(t, rl_level(t, b, now_ms));
}
