/*
 * libFuzzer target for brokerd's session store (brokerd/session.c,
 * store.c): the former STATE_DIR/sessions.json migrated into a new
 * store.db at start, and the cookie, CSRF and bearer values of each
 * request checked against the store. The input, split at 0xff bytes, is:
 * sessions.json (empty: none); a cookie value; a bearer value; a CSRF
 * token. Besides the sanitizers it checks: an error is one printable line;
 * a file that migrates is renamed aside, and the store then loads again to
 * the same sessions and tokens; a lookup finds only the session or token
 * whose hash the value has; a session and a token made now are found by
 * their own values, and are gone once the session is destroyed. The state
 * directory is on /dev/shm: SQLite's own flushes cost nothing there.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../brokerd/brokerd.h"
#include "fuzz_fixture.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_seed(const uint8_t *, size_t);

static const char	*fuzz_dir;
static char		 fuzz_file[64], fuzz_done[80], fuzz_db[64], fuzz_wal[80];

/* Make the fixture once, before the first input. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_dir = ff_dir("fuzz_session", "/dev/shm");
	snprintf(fuzz_file, sizeof(fuzz_file), "%s/sessions.json", fuzz_dir);
	snprintf(fuzz_done, sizeof(fuzz_done), "%s.migrated", fuzz_file);
	snprintf(fuzz_db, sizeof(fuzz_db), "%s/store.db", fuzz_dir);
	snprintf(fuzz_wal, sizeof(fuzz_wal), "%s-wal", fuzz_db);
	return 0;
}

/* The n-th 0xff-separated part of the input as a string (NULL: absent). */
static char *
fuzz_part(const uint8_t *data, size_t size, int n)
{
	const uint8_t	*p = data, *end = data + size, *cut;
	char		*s;

	for (; n > 0; n--) {
		if ((cut = memchr(p, 0xff, end - p)) == NULL)
			return NULL;
		p = cut + 1;
	}
	if ((cut = memchr(p, 0xff, end - p)) == NULL)
		cut = end;
	if ((s = malloc(cut - p + 1)) == NULL)
		abort();
	memcpy(s, p, cut - p);
	s[cut - p] = '\0';
	return s;
}

/* Order two strings (for qsort). */
static int
fuzz_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The elements of arr as sorted lines appended to out; arr is taken. */
static void
fuzz_lines(struct json_object *arr, char **out)
{
	char	**v, *s;
	size_t	  i, n = json_object_array_length(arr);

	if ((v = calloc(n + 1, sizeof(*v))) == NULL)
		abort();
	for (i = 0; i < n; i++)
		if ((v[i] = strdup(json_object_to_json_string(
		    json_object_array_get_idx(arr, i)))) == NULL)
			abort();
	qsort(v, n, sizeof(*v), fuzz_cmp);
	for (i = 0; i < n; i++) {
		if (asprintf(&s, "%s%s\n", *out, v[i]) == -1)
			abort();
		free(*out);
		*out = s;
		free(v[i]);
	}
	free(v);
	json_object_put(arr);
}

/* The live sessions and tokens, in any order the store keeps them. */
static char *
fuzz_dump(void)
{
	char	*s;

	if ((s = strdup("")) == NULL)
		abort();
	fuzz_lines(session_list(), &s);
	fuzz_lines(token_list(), &s);
	return s;
}

/* One first start from a sessions.json, then lookups in the store. */
/* Open store.db of dir afresh, as brokerd does before loading anything. */
static int
fuzz_store_open(const char *dir, char *err, size_t errsz)
{
	char	*path = path_join(dir, STORE_FILE);
	int	 rc;

	store_close();
	rc = store_sqlite_open_path(path, err, errsz);
	free(path);
	return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct session	*s;
	struct token	*t;
	char		*former, *cookie, *bearer, *csrf, *before, *after;
	const uint8_t	*cut;
	char		 err[512], hash[65], c[128], x[128], b[128];
	size_t		 len;
	int		 fd;

	/* Not fuzz_det_reset: the fuzzer would plant the next token's hash. */
	fuzz_det_seed(data, size);
	former = fuzz_part(data, size, 0);
	cookie = fuzz_part(data, size, 1);
	bearer = fuzz_part(data, size, 2);
	csrf = fuzz_part(data, size, 3);
	/* A first start: no store yet, maybe the former file. */
	session_close();
	unlink(fuzz_file);
	unlink(fuzz_done);
	unlink(fuzz_db);
	unlink(fuzz_wal);
	cut = memchr(data, 0xff, size);
	len = cut != NULL ? (size_t)(cut - data) : size;
	if (len > 0) {
		if ((fd = open(fuzz_file, O_WRONLY | O_CREAT | O_TRUNC, 0600)) ==
		    -1 || write(fd, data, len) != (ssize_t)len)
			abort();
		close(fd);
	}
	if (fuzz_store_open(fuzz_dir, err, sizeof(err)) == -1 ||
	    session_init(fuzz_dir, 3600, err, sizeof(err)) == -1) {
		ff_check_message(err);
		goto out;
	}
	/* What migrated is in the store: it loads again the same. */
	if (access(fuzz_file, F_OK) == 0)
		abort();
	before = fuzz_dump();
	session_close();
	if (fuzz_store_open(fuzz_dir, err, sizeof(err)) == -1 ||
	    session_init(fuzz_dir, 3600, err, sizeof(err)) == -1)
		abort();
	after = fuzz_dump();
	if (strcmp(before, after) != 0) {
		fprintf(stderr, "migrated: %s\nreloaded: %s\n", before, after);
		abort();
	}
	free(before);
	free(after);

	if (cookie != NULL && (s = session_lookup(cookie)) != NULL) {
		sha256_hex(cookie, strlen(cookie), hash);
		if (strcmp(hash, s->token_hash) != 0)
			abort();
		if (csrf != NULL && session_csrf_ok(s, csrf)) {
			sha256_hex(csrf, strlen(csrf), hash);
			if (strcmp(hash, s->csrf_hash) != 0)
				abort();
		}
	}
	if (bearer != NULL && (t = token_lookup(bearer)) != NULL) {
		sha256_hex(bearer, strlen(bearer), hash);
		if (strcmp(hash, t->hash) != 0 || strncmp(bearer, "hgt_", 4) != 0)
			abort();
	}
	/* A session and a token made now are found by their own values. */
	if ((s = session_create("fuzz", c, sizeof(c), x, sizeof(x))) != NULL) {
		if (session_lookup(c) != s || !session_csrf_ok(s, x))
			abort();
		if ((t = token_create("fuzz", s->id, b, sizeof(b))) == NULL ||
		    token_lookup(b) != t)
			abort();
		session_destroy(s);
		if (session_lookup(c) != NULL || token_lookup(b) != NULL)
			abort();
	}
out:
	free(former);
	free(cookie);
	free(bearer);
	free(csrf);
	return 0;
}
