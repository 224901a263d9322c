/*
 * The cost of brokerd's session and token store as it grows: a store of
 * SMALL tokens beside one of LARGE. Each store is opened by a process of
 * its own (session.c keeps one store per process, as brokerd does); the
 * parent asks them in turns for one operation at a time (small, large,
 * large, small, ...), so that both meet the same machine and the same
 * disk at the same moments, and reports each operation's median:
 *
 *   mint      token_create of a standalone token (one durable transaction)
 *   revoke    token_revoke of that token (idem; the size stays constant)
 *   login     auth_verify (argon2id) + session_create, as POST /api/login,
 *             beside the argon2id verification alone
 *   logout    session_destroy of such a session and of a token bound to it
 *   lookup    token_lookup of the newest, the oldest and a middle token,
 *             and session_lookup of a cookie: CPU time per lookup over a
 *             batch (they never wait)
 *
 * The stores are real SQLite files (brokerd/store_sqlite.c) in a temporary
 * directory on the file system of /tmp, written with synchronous=FULL.
 * Prints one line per operation: the medians, and the median of the
 * ratios large / small of the pairs measured side by side.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../brokerd/brokerd.h"

#define SMALL		100
#define LARGE		100000
#define MINTS		300	/* each followed by its revocation */
#define LOGINS		30	/* with argon2id, each alone beside one */
#define LOGOUTS		300	/* each after a session_create */
#define BATCHES		100	/* of lookups */
#define BATCH		5000	/* lookups per batch */
#define PASSWORD	"bench-password-1"

enum { OP_MINT, OP_REVOKE, OP_LOGIN, OP_ARGON2, OP_LOGOUT, OP_TLOOKUP,
    OP_SLOOKUP, OP_OPEN, OP_SESSION, OP_COUNT };

static const char *const op_names[OP_COUNT] = {
	"mint (token_create)", "revoke (token_revoke)",
	"login (argon2id verify + session_create)", "argon2id verify alone",
	"logout (session_destroy)", "token lookup (bearer)",
	"session lookup (cookie)", "start-up (open, check, load: O(n))",
	"session_create alone (the store's part of a login)"
};

/*
 * auth.c kills the spawns of a user another host deleted (a fleet's store
 * only) through sandbox.c, which a benchmark of the embedded store never
 * reaches: linked, never called.
 */
void	sandbox_kill_user(const char *);

void
sandbox_kill_user(const char *user)
{
	fatalx("sandbox_kill_user(%s) in a benchmark", user);
}

/* A store and the process that holds it. */
struct store {
	char	 dir[64];
	int	 size;
	pid_t	 pid;
	int	 to, from;		/* pipes to and from it */
	double	*us[OP_COUNT];		/* figures, in order */
	int	 n[OP_COUNT];
};

/* What the child keeps between requests. */
static char	 oldest[64], middle[64], newest[64], cookie[64];

/* Microseconds on the monotonic clock (what a client waits). */
static double
now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Microseconds of this process's CPU time. */
static double
cpu_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Open a store's directory as brokerd does at start-up. */
static void
child_enter(const char *dir)
{
	char	err[512], *path = path_join(dir, STORE_FILE);

	if (store_sqlite_open_path(path, err, sizeof(err)) == -1)
		fatalx("%s", err);
	free(path);
	if (auth_init(dir, err, sizeof(err)) == -1 ||
	    session_init(dir, 3600, err, sizeof(err)) == -1)
		fatalx("%s", err);
}

/* Fill a new store with size tokens (a tenth bound to 100 sessions). */
static void
child_fill(const char *dir, int size)
{
	struct session	*s[100];
	char		 err[512], csrf[64], bearer[64];
	int		 i;

	child_enter(dir);
	if (auth_user_add("bench", 0, PASSWORD, err, sizeof(err)) == -1)
		fatalx("%s", err);
	/* Filled in one transaction: how, is not what is measured. */
	if (store->begin() == -1)
		fatalx("store begin");
	for (i = 0; i < 100; i++)
		if ((s[i] = session_create("bench", cookie, sizeof(cookie),
		    csrf, sizeof(csrf))) == NULL)
			fatalx("session_create");
	for (i = 0; i < size; i++) {
		if (token_create("bench", i % 10 == 0 ? s[i % 100]->id : NULL,
		    bearer, sizeof(bearer)) == NULL)
			fatalx("token_create");
		if (i == 0)
			memcpy(oldest, bearer, sizeof(bearer));
		if (i == size / 2)
			memcpy(middle, bearer, sizeof(bearer));
		memcpy(newest, bearer, sizeof(bearer));
	}
	if (store->commit() == -1)
		fatalx("store commit");
	session_close();
	store_close();
	/* Reopened as at a start, timed. */
}

/* One operation of the child; its cost in microseconds. */
static double
child_op(int op)
{
	static char	 bearer[64], tid[17];
	static struct session *s;
	const char	*look[3] = { newest, oldest, middle };
	struct token	*t;
	char		 csrf[64], c[64];
	double		 t0;
	int		 i;

	switch (op) {
	case OP_MINT:
		t0 = now_us();
		if ((t = token_create("bench", NULL, bearer,
		    sizeof(bearer))) == NULL)
			fatalx("token_create");
		memcpy(tid, t->id, sizeof(tid));
		return now_us() - t0;
	case OP_REVOKE:
		t0 = now_us();
		if (token_revoke(tid) == -1)
			fatalx("token_revoke");
		return now_us() - t0;
	case OP_ARGON2:
		t0 = now_us();
		if (auth_verify("bench", PASSWORD) == NULL)
			fatalx("auth_verify");
		return now_us() - t0;
	case OP_LOGIN:
		t0 = now_us();
		if (auth_verify("bench", PASSWORD) == NULL ||
		    (s = session_create("bench", c, sizeof(c), csrf,
		    sizeof(csrf))) == NULL)
			fatalx("login");
		t0 = now_us() - t0;
		if (token_create("bench", s->id, bearer, sizeof(bearer)) ==
		    NULL)
			fatalx("token_create");
		return t0;
	case OP_SESSION:
		t0 = now_us();
		if ((s = session_create("bench", c, sizeof(c), csrf,
		    sizeof(csrf))) == NULL)
			fatalx("session_create");
		t0 = now_us() - t0;
		if (token_create("bench", s->id, bearer, sizeof(bearer)) ==
		    NULL)
			fatalx("token_create");
		return t0;
	case OP_LOGOUT:
		t0 = now_us();
		session_destroy(s);
		return now_us() - t0;
	case OP_TLOOKUP:
		t0 = cpu_us();
		for (i = 0; i < BATCH; i++)
			if (token_lookup(look[i % 3]) == NULL)
				fatalx("token_lookup");
		return (cpu_us() - t0) / BATCH;
	case OP_SLOOKUP:
		t0 = cpu_us();
		for (i = 0; i < BATCH; i++)
			if (session_lookup(cookie) == NULL)
				fatalx("session_lookup");
		return (cpu_us() - t0) / BATCH;
	case OP_OPEN:
		session_close();
		store_close();
		t0 = now_us();
		child_enter(getenv("BENCH_STORE_DIR"));
		return now_us() - t0;
	}
	fatalx("op %d", op);
}

/* The child: fill its store, then answer each op byte with its cost. */
static void
child_main(struct store *st, int in, int out)
{
	unsigned char	op;
	double		us;

	setenv("BENCH_STORE_DIR", st->dir, 1);
	child_fill(st->dir, st->size);
	child_enter(st->dir);
	while (read(in, &op, 1) == 1) {
		us = child_op(op);
		if (write(out, &us, sizeof(us)) != sizeof(us))
			fatal("write");
	}
	session_close();
	_exit(0);
}

/* Start the process of a store of size tokens. */
static void
store_start(struct store *st, int size)
{
	int	to[2], from[2], op;

	memset(st, 0, sizeof(*st));
	snprintf(st->dir, sizeof(st->dir), "/tmp/hg-bench-store-XXXXXX");
	if (mkdtemp(st->dir) == NULL)
		fatal("mkdtemp");
	st->size = size;
	for (op = 0; op < OP_COUNT; op++)
		if ((st->us[op] = calloc(MINTS, sizeof(double))) == NULL)
			fatal("calloc");
	if (pipe(to) == -1 || pipe(from) == -1)
		fatal("pipe");
	if ((st->pid = fork()) == -1)
		fatal("fork");
	if (st->pid == 0) {
		close(to[1]);
		close(from[0]);
		child_main(st, to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	st->to = to[1];
	st->from = from[0];
}

/* Ask a store's process for one op and keep its figure. */
static void
store_ask(struct store *st, int op)
{
	unsigned char	b = (unsigned char)op;
	double		us;

	if (write(st->to, &b, 1) != 1 ||
	    read(st->from, &us, sizeof(us)) != sizeof(us))
		fatalx("the %d-token store's process is gone", st->size);
	if (st->n[op] < MINTS)
		st->us[op][st->n[op]++] = us;
}

/* The same op on both, the order alternating with i. */
static void
both(struct store *a, struct store *b, int op, int i)
{
	store_ask(i % 2 ? b : a, op);
	store_ask(i % 2 ? a : b, op);
}

/* Sort helper for the medians. */
static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of n figures (sorts them). */
static double
median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return v[n / 2];
}

/*
 * The median of the ratios large / small of the pairs of figures taken
 * side by side: each pair met the same moment of the machine.
 */
static double
pair_ratio(struct store *small, struct store *large, int op)
{
	double	r[MINTS];
	int	i, n = small->n[op] < large->n[op] ? small->n[op] :
		    large->n[op];

	for (i = 0; i < n; i++)
		r[i] = large->us[op][i] / small->us[op][i];
	return median(r, n);
}

int
main(void)
{
	struct store	 small, large;
	struct stat	 sb;
	char		 cmd[160], *path;
	double		 a, b, r, worst = 0;
	int		 i, op, status;

	log_init("bench_store", 1);
	log_setlevel(LOG_LVL_WARN);
	signal(SIGPIPE, SIG_IGN);
	auth_uid_range(1879048192, 1879113727);
	store_start(&small, SMALL);
	store_start(&large, LARGE);

	for (i = 0; i < 5; i++)
		both(&small, &large, OP_OPEN, i);
	for (i = 0; i < MINTS; i++) {
		both(&small, &large, OP_MINT, i);
		both(&small, &large, OP_REVOKE, i);
	}
	for (i = 0; i < LOGINS; i++) {
		both(&small, &large, OP_ARGON2, i);
		both(&small, &large, OP_LOGIN, i);
		both(&small, &large, OP_LOGOUT, i);
	}
	for (i = LOGINS; i < LOGOUTS; i++) {
		both(&small, &large, OP_SESSION, i);
		both(&small, &large, OP_LOGOUT, i);
	}
	for (i = 0; i < BATCHES; i++) {
		both(&small, &large, OP_TLOOKUP, i);
		both(&small, &large, OP_SLOOKUP, i);
	}
	close(small.to);
	close(large.to);
	waitpid(small.pid, &status, 0);
	waitpid(large.pid, &status, 0);

	path = path_join(large.dir, STORE_FILE);
	if (stat(path, &sb) == 0)
		printf("store.db with %d tokens: %lld KiB\n", LARGE,
		    (long long)sb.st_size / 1024);
	free(path);
	printf("%-50s %10s %10s %7s\n", "operation (median, us)", "100 tokens",
	    "100000", "ratio");
	for (op = 0; op < OP_COUNT; op++) {
		r = pair_ratio(&small, &large, op);
		a = median(small.us[op], small.n[op]);
		b = median(large.us[op], large.n[op]);
		if (op == OP_OPEN) {
			printf("%-50s %10.0f %10.0f %7s\n", op_names[op], a, b,
			    "-");
			continue;
		}
		printf("%-50s %10.2f %10.2f %7.2f\n", op_names[op], a, b, r);
		if (op != OP_ARGON2 && r > worst)
			worst = r;
	}
	printf("samples per store: %d mints and revocations, %d logins, %d "
	    "logouts, %d batches of %d lookups; ratio: the median of the "
	    "ratios of the pairs measured side by side\n", MINTS, LOGINS,
	    LOGOUTS, BATCHES, BATCH);
	printf("worst ratio (100000 / 100 tokens): %.2f (%s 1.2)\n", worst,
	    worst <= 1.2 ? "within" : "beyond");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", small.dir, large.dir);
	if (system(cmd) != 0)
		log_warnx("cannot remove %s, %s", small.dir, large.dir);
	return 0;
}
