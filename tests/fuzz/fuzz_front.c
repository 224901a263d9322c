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
#include "fuzz_fixture.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

struct user *__wrap_auth_verify(const char *, const char *);
int	__wrap_rl_take(struct rl_table *, const char *, int64_t);
int	__wrap_rl_peek(struct rl_table *, const char *, int64_t);

extern char	**environ;

static struct ff_daemon		 fuzz_brokerd;
static struct config		 fuzz_conf;
static const char		*fuzz_dir;
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
	store_close();
	fuzz_rm("store.db");
	fuzz_rm("store.db-wal");
	fuzz_rm("sessions.json.migrated");
	fuzz_rm("users.json.migrated");
	fuzz_put("users.json", fuzz_users);
	fuzz_put("sessions.json", fuzz_sessions);
	if (store_init(&fuzz_conf, err, sizeof(err)) == -1 ||
	    auth_init(fuzz_conf.state_dir, err, sizeof(err)) == -1 ||
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

	fuzz_dir = ff_dir("fuzz_front", "/dev/shm");
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
	egress_init(&fuzz_conf);
	fd = ff_daemon_init(&fuzz_brokerd, "brokerd");
	audit_refusal_init(fuzz_brokerd.base, fuzz_conf.audit_refusal_interval);
	front_init(fuzz_brokerd.base, &fuzz_conf, geteuid(), fd);
	/* No sandboxd: its socket does not exist, spawns are refused. */
	sandbox_init(fuzz_brokerd.base, &fuzz_conf, geteuid());
	mode_init(fuzz_brokerd.base, &fuzz_conf);
	return 0;
}

/* Messages from frontd, after a hello, on a fixture state. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t	*d, *end = data + size, *cut;
	int		 fd;

	fuzz_det_reset();
	fuzz_reset();
	fd = ff_daemon_connect(&fuzz_brokerd, "frontd");
	for (d = data; d < end; d = cut + 1) {
		if ((cut = memchr(d, 0xff, end - d)) == NULL)
			cut = end;
		if (cut > d)
			ff_daemon_send(&fuzz_brokerd, fd, d, cut - d);
		else
			ff_daemon_drain(&fuzz_brokerd, fd);
		if (cut == end)
			break;
	}
	ff_daemon_close(&fuzz_brokerd, fd);
	return 0;
}
