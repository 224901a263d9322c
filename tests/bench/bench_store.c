/*
 * The cost of brokerd's session and token store as it grows: a store of
 * SMALL tokens beside one of LARGE, measured in turns (small, large,
 * small, ...) so that both see the same machine, each op's figure the
 * median of its rounds:
 *
 *   mint      token_create of a standalone token (one durable transaction)
 *   revoke    token_revoke of one of them (idem; keeps the size constant)
 *   login     auth_verify (argon2id) + session_create, as POST /api/login,
 *             beside the argon2id verification alone
 *   logout    session_destroy of such a session and its token
 *   lookup    token_lookup of the newest, the oldest and a middle token,
 *             and session_lookup of a cookie (CPU time: they never wait)
 *
 * The stores are real SQLite files (brokerd/store.c) in a temporary
 * directory on the file system of /tmp, written with synchronous=FULL.
 * Prints one line per op and store size and the ratio large / small.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../brokerd/brokerd.h"

#define SMALL		100
#define LARGE		100000
#define ROUNDS		7
#define MINTS		40	/* per round, then revoked */
#define LOGINS		6	/* per round, then logged out */
#define LOOKUPS		200000	/* per round */
#define PASSWORD	"bench-password-1"

enum { OP_MINT, OP_REVOKE, OP_LOGIN, OP_ARGON2, OP_LOGOUT, OP_TLOOKUP,
    OP_SLOOKUP, OP_COUNT };

static const char *const op_names[OP_COUNT] = {
	"mint (token_create)", "revoke (token_revoke)",
	"login (argon2id verify + session_create)", "argon2id verify alone",
	"logout (session_destroy)", "token lookup (bearer)",
	"session lookup (cookie)"
};

struct store {
	char	dir[64];
	int	size;
	char	oldest[64], middle[64], newest[64];	/* bearers */
	char	cookie[64];
	double	us[OP_COUNT][ROUNDS];
};

/* Microseconds on the monotonic clock (what a client waits). */
static double
now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/*
 * Microseconds of this process's CPU time: for the lookups, which never
 * wait, so that another process's turn on a busy machine is not counted.
 */
static double
cpu_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Open a store's directory as brokerd does at start-up. */
static void
store_enter(struct store *st)
{
	char	err[512];

	if (auth_init(st->dir, err, sizeof(err)) == -1 ||
	    session_init(st->dir, 3600, err, sizeof(err)) == -1)
		fatalx("%s", err);
}

/* A store of size tokens (a tenth of them bound to 100 sessions). */
static void
store_make(struct store *st, int size)
{
	struct session	*s[100];
	char		 err[512], cookie[64], csrf[64], bearer[64];
	int		 i;

	snprintf(st->dir, sizeof(st->dir), "/tmp/hg-bench-store-XXXXXX");
	if (mkdtemp(st->dir) == NULL)
		fatal("mkdtemp");
	st->size = size;
	store_enter(st);
	if (auth_user_add("bench", 0, PASSWORD, err, sizeof(err)) == -1)
		fatalx("%s", err);
	/* Filled in one transaction: how, is not what is measured. */
	if (store_begin() == -1)
		fatalx("store_begin");
	for (i = 0; i < 100; i++)
		if ((s[i] = session_create("bench", st->cookie,
		    sizeof(st->cookie), csrf, sizeof(csrf))) == NULL)
			fatalx("session_create");
	for (i = 0; i < size; i++) {
		if (token_create("bench", i % 10 == 0 ? s[i % 100]->id : NULL,
		    bearer, sizeof(bearer)) == NULL)
			fatalx("token_create");
		if (i == 0)
			memcpy(st->oldest, bearer, sizeof(bearer));
		if (i == size / 2)
			memcpy(st->middle, bearer, sizeof(bearer));
		memcpy(st->newest, bearer, sizeof(bearer));
	}
	if (store_commit() == -1)
		fatalx("store_commit");
	(void)cookie;
	session_close();
}

/* One round of every op on a store; figures in st->us[op][round]. */
static void
store_round(struct store *st, int round)
{
	static char	 bearers[MINTS][64];
	struct session	*s[LOGINS];
	struct token	*t;
	char		 ids[MINTS][17], cookie[64], csrf[64];
	const char	*look[3] = { st->newest, st->oldest, st->middle };
	double		 t0, t1;
	int		 i;

	store_enter(st);

	t0 = now_us();
	for (i = 0; i < MINTS; i++) {
		if ((t = token_create("bench", NULL, bearers[i],
		    sizeof(bearers[i]))) == NULL)
			fatalx("token_create");
		memcpy(ids[i], t->id, sizeof(ids[i]));
	}
	st->us[OP_MINT][round] = (now_us() - t0) / MINTS;
	t0 = now_us();
	for (i = 0; i < MINTS; i++)
		if (token_revoke(ids[i]) == -1)
			fatalx("token_revoke");
	st->us[OP_REVOKE][round] = (now_us() - t0) / MINTS;

	t0 = now_us();
	for (i = 0; i < LOGINS; i++)
		if (auth_verify("bench", PASSWORD) == NULL)
			fatalx("auth_verify");
	t1 = now_us();
	st->us[OP_ARGON2][round] = (t1 - t0) / LOGINS;
	for (i = 0; i < LOGINS; i++) {
		if (auth_verify("bench", PASSWORD) == NULL ||
		    (s[i] = session_create("bench", cookie, sizeof(cookie),
		    csrf, sizeof(csrf))) == NULL)
			fatalx("login");
	}
	st->us[OP_LOGIN][round] = (now_us() - t1) / LOGINS;
	for (i = 0; i < LOGINS; i++)
		if (token_create("bench", s[i]->id, bearers[i],
		    sizeof(bearers[i])) == NULL)
			fatalx("token_create");
	t0 = now_us();
	for (i = 0; i < LOGINS; i++)
		session_destroy(s[i]);
	st->us[OP_LOGOUT][round] = (now_us() - t0) / LOGINS;

	t0 = cpu_us();
	for (i = 0; i < LOOKUPS; i++)
		if (token_lookup(look[i % 3]) == NULL)
			fatalx("token_lookup");
	st->us[OP_TLOOKUP][round] = (cpu_us() - t0) / LOOKUPS;
	t0 = cpu_us();
	for (i = 0; i < LOOKUPS; i++)
		if (session_lookup(st->cookie) == NULL)
			fatalx("session_lookup");
	st->us[OP_SLOOKUP][round] = (cpu_us() - t0) / LOOKUPS;

	session_close();
}

/* Sort helper for the medians. */
static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of a store's rounds of op. */
static double
store_median(struct store *st, int op)
{
	double	v[ROUNDS];

	memcpy(v, st->us[op], sizeof(v));
	qsort(v, ROUNDS, sizeof(v[0]), cmp_double);
	return v[ROUNDS / 2];
}

int
main(void)
{
	struct store	 small, large;
	struct stat	 sb;
	char		 cmd[128], *path;
	double		 a, b, worst = 0;
	int		 r, op;

	log_init("bench_store", 1);
	log_setlevel(LOG_LVL_WARN);
	auth_uid_range(1879048192, 1879113727);
	memset(&small, 0, sizeof(small));
	memset(&large, 0, sizeof(large));
	store_make(&small, SMALL);
	store_make(&large, LARGE);
	for (r = 0; r < ROUNDS; r++) {
		store_round(r % 2 ? &large : &small, r);
		store_round(r % 2 ? &small : &large, r);
	}
	path = path_join(large.dir, STORE_FILE);
	if (stat(path, &sb) == 0)
		printf("store.db with %d tokens: %lld KiB\n", LARGE,
		    (long long)sb.st_size / 1024);
	free(path);
	printf("%-44s %12s %12s %7s\n", "op (median of rounds, us)", "100",
	    "100000", "ratio");
	for (op = 0; op < OP_COUNT; op++) {
		a = store_median(&small, op);
		b = store_median(&large, op);
		printf("%-44s %12.2f %12.2f %7.2f\n", op_names[op], a, b, b / a);
		if (op != OP_ARGON2 && b / a > worst)
			worst = b / a;
	}
	printf("worst ratio (100000 / 100 tokens): %.2f (%s 1.2)\n", worst,
	    worst <= 1.2 ? "within" : "beyond");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", small.dir, large.dir);
	if (system(cmd) != 0)
		log_warnx("cannot remove %s, %s", small.dir, large.dir);
	return 0;
}
