/*
 * libFuzzer target for brokerd's handling of frontd's requests
 * (brokerd/front.c and the handlers behind its table: sessions, tokens,
 * mode, permission, admin, audit queries, spawn requests): the input,
 * split at 0xff bytes, arrives as messages on brokerd's frontd socket
 * after a valid hello, through the real IPC code. brokerd runs whole but
 * for its main, on a state directory made at start: two users (alice, an
 * admin, and bob), a login session and a token of each, an audit log.
 * Each input starts from those files again (sessions.json migrated into a
 * new store.db; all on /dev/shm, where SQLite's flushes cost nothing).
 * sandboxd is absent (spawns are refused as unreachable); password
 * hashing and the login rate
 * limits are replaced (linked with --wrap): argon2id is slow by design,
 * and with the fuzzers' clock standing still a bucket would never refill.
 * The password of both users is "correct horse".
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../brokerd/brokerd.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

struct user *__wrap_auth_verify(const char *, const char *);
int	__wrap_rl_take(struct rl_table *, const char *, int64_t);
int	__wrap_rl_peek(struct rl_table *, const char *, int64_t);

extern char	**environ;

static struct event_base	*fuzz_base;
static struct config		 fuzz_conf;
static struct sockaddr_un	 fuzz_addr;
static socklen_t		 fuzz_addrlen;
static char			 fuzz_dir[] = "/dev/shm/fuzz_front.XXXXXX";
static char			*fuzz_users, *fuzz_sessions;

#define FUZZ_HASH "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$" \
	"aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"

/* A password check without argon2id: the one password of the fixture. */
struct user *
__wrap_auth_verify(const char *name, const char *password)
{
	if (name == NULL || password == NULL ||
	    strcmp(password, "correct horse") != 0)
		return NULL;
	return auth_find(name);
}

/* Every login allowed: the rate limit's clock would never move. */
int
__wrap_rl_take(struct rl_table *t, const char *key, int64_t now_ms)
{
	if (key == NULL)
		abort();
	return 0;
}

/* Nothing to wait for (see __wrap_rl_take). */
int
__wrap_rl_peek(struct rl_table *t, const char *key, int64_t now_ms)
{
	if (key == NULL)
		abort();
	return 0;
}

/* Remove the state directory. */
static void
fuzz_cleanup(void)
{
	char	cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", fuzz_dir);
	(void)!system(cmd);
}

/* Write a file of the state directory (0600, as brokerd wants them). */
static void
fuzz_put(const char *name, const char *text)
{
	char	path[256];
	int	fd;

	snprintf(path, sizeof(path), "%s/state/%s", fuzz_dir, name);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1 ||
	    write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	close(fd);
}

/* The sha256 hex of s, for the fixture's stored hashes. */
static const char *
fuzz_sha(const char *s)
{
	static char	out[8][65];
	static int	i;

	i = (i + 1) % 8;
	sha256_hex(s, strlen(s), out[i]);
	return out[i];
}

/* Remove a file of the state directory. */
static void
fuzz_rm(const char *name)
{
	char	path[256];

	snprintf(path, sizeof(path), "%s/state/%s", fuzz_dir, name);
	unlink(path);
}

/* Load the fixture's users and sessions afresh (into a new store.db). */
static void
fuzz_reset(void)
{
	char	err[512];

	session_close();
	fuzz_rm("store.db");
	fuzz_rm("store.db-wal");
	fuzz_rm("sessions.json.migrated");
	fuzz_put("users.json", fuzz_users);
	fuzz_put("sessions.json", fuzz_sessions);
	if (auth_init(fuzz_conf.state_dir, err, sizeof(err)) == -1 ||
	    session_init(fuzz_conf.state_dir, fuzz_conf.session_lifetime, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "fuzz_front: %s\n", err);
		abort();
	}
}

/* Make the fixture once, before the first input. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char	path[PATH_MAX], err[512], **e, *eq, name[128];
	size_t	n;
	int	fd;

	signal(SIGPIPE, SIG_IGN);
	log_init("fuzz_front", 1);
	log_setlevel(LOG_LVL_ERROR);
	if (mkdtemp(fuzz_dir) == NULL)
		abort();
	atexit(fuzz_cleanup);
	/* The defaults alone: no HOSTGATE_* of this environment. */
	for (e = environ; *e != NULL;) {
		if (strncmp(*e, "HOSTGATE_", 9) == 0 &&
		    (eq = strchr(*e, '=')) != NULL) {
			n = eq - *e < (long)sizeof(name) ? eq - *e :
			    sizeof(name) - 1;
			memcpy(name, *e, n);
			name[n] = '\0';
			unsetenv(name);
			e = environ;
		} else
			e++;
	}
	snprintf(path, sizeof(path), "%s/empty.env", fuzz_dir);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	setenv("HOSTGATE_ENV_FILE", path, 1);
	snprintf(path, sizeof(path), "%s/state", fuzz_dir);
	mkdir(path, 0700);
	setenv("HOSTGATE_STATE_DIR", path, 1);
	snprintf(path, sizeof(path), "%s/run", fuzz_dir);
	mkdir(path, 0700);
	setenv("HOSTGATE_RUN_DIR", path, 1);
	setenv("HOSTGATE_AUDIT_ROTATE_BYTES", "65536", 1);
	/* The prompts are read from the checkout's profiles (run from its top). */
	if (realpath("profiles", path) == NULL) {
		fprintf(stderr, "fuzz_front: run from the top of the checkout\n");
		abort();
	}
	setenv("HOSTGATE_PROFILES_DIR", path, 1);
	if (config_load(&fuzz_conf, err, sizeof(err)) == -1) {
		fprintf(stderr, "fuzz_front: %s\n", err);
		abort();
	}

	if (asprintf(&fuzz_users, "{\"version\":1,\"users\":["
	    "{\"name\":\"alice\",\"role\":\"admin\",\"hash\":\"%s\","
	    "\"created\":1767139200,\"uid\":1879048193,\"gid\":1879048193},"
	    "{\"name\":\"bob\",\"role\":\"user\",\"hash\":\"%s\","
	    "\"created\":1767139200,\"uid\":1879048194,\"gid\":1879048194}]}",
	    FUZZ_HASH, FUZZ_HASH) == -1)
		abort();
	/* Cookie, CSRF and bearer values are those of tests/fuzz/seeds.py. */
	if (asprintf(&fuzz_sessions, "{\"version\":1,\"sessions\":["
	    "{\"id\":\"%s\",\"token_hash\":\"%s\",\"csrf_hash\":\"%s\","
	    "\"user\":\"alice\",\"created\":1767225000,\"last_seen\":1767225500,"
	    "\"expires\":1767229200},"
	    "{\"id\":\"%s\",\"token_hash\":\"%s\",\"csrf_hash\":\"%s\","
	    "\"user\":\"bob\",\"created\":1767225000,\"last_seen\":1767225500,"
	    "\"expires\":1767229200}],\"tokens\":["
	    "{\"id\":\"b2b2b2b2b2b2b2b2\",\"hash\":\"%s\",\"user\":\"alice\","
	    "\"session_id\":\"%s\",\"created\":1767225100},"
	    "{\"id\":\"c3c3c3c3c3c3c3c3\",\"hash\":\"%s\",\"user\":\"bob\","
	    "\"session_id\":\"\",\"created\":1767225100}]}",
	    "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1", fuzz_sha("hgs_alice"),
	    fuzz_sha("csrf_alice"), "d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4",
	    fuzz_sha("hgs_bob"), fuzz_sha("csrf_bob"), fuzz_sha("hgt_alice"),
	    "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1", fuzz_sha("hgt_bob")) == -1)
		abort();
	fuzz_reset();
	if (audit_init(fuzz_conf.state_dir, fuzz_conf.audit_rotate, 0, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "fuzz_front: %s\n", err);
		abort();
	}
	prompt_init(&fuzz_conf);
	if ((fuzz_base = event_base_new()) == NULL)
		abort();
	audit_refusal_init(fuzz_base, fuzz_conf.audit_refusal_interval);

	memset(&fuzz_addr, 0, sizeof(fuzz_addr));
	fuzz_addr.sun_family = AF_UNIX;
	snprintf(fuzz_addr.sun_path + 1, sizeof(fuzz_addr.sun_path) - 1,
	    "hostgate-fuzz-front-%ld", (long)getpid());
	fuzz_addrlen = offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(fuzz_addr.sun_path + 1);
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&fuzz_addr, fuzz_addrlen) == -1 ||
	    listen(fd, 16) == -1)
		abort();
	front_init(fuzz_base, &fuzz_conf, geteuid(), fd);
	/* No sandboxd: its socket does not exist, spawns are refused. */
	sandbox_init(fuzz_base, &fuzz_conf, geteuid());
	mode_init(fuzz_base, &fuzz_conf);
	return 0;
}

/* Run brokerd's loop until nothing more happens now. */
static void
fuzz_run(void)
{
	int	i;

	for (i = 0; i < 8; i++)
		event_base_loop(fuzz_base, EVLOOP_NONBLOCK);
}

/* Messages from frontd, after a hello, on a fixture state. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char	 hello[] =
	    "{\"type\":\"hello\",\"version\":1,\"role\":\"frontd\"}";
	const uint8_t		*d, *end = data + size, *cut;
	char			 sink[IPC_MAX_MSG];
	ssize_t			 n;
	int			 fd;

	fuzz_det_reset();
	fuzz_reset();
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) == -1 || connect(fd,
	    (struct sockaddr *)&fuzz_addr, fuzz_addrlen) == -1)
		abort();
	fuzz_run();
	(void)!send(fd, hello, sizeof(hello) - 1, 0);
	fuzz_run();
	for (d = data; d < end; d = cut + 1) {
		if ((cut = memchr(d, 0xff, end - d)) == NULL)
			cut = end;
		if (cut > d)
			(void)!send(fd, d, cut - d, 0);
		fuzz_run();
		while ((n = recv(fd, sink, sizeof(sink) - 1, 0)) > 0)
			if (getenv("FUZZ_VERBOSE") != NULL) {
				sink[n] = '\0';
				fprintf(stderr, "brokerd: %s\n", sink);
			}
		if (cut == end)
			break;
	}
	close(fd);
	fuzz_run();
	return 0;
}
