/*
 * libFuzzer target for brokerd's users file (brokerd/auth.c): the input,
 * split at 0xff bytes, is STATE_DIR/users.json and then a user name. The
 * file is loaded as at start (ids given to users without them, and the
 * file written back then); a name is looked up and, when it is a user,
 * deleted. Besides the sanitizers it checks: an error is one printable
 * line; a file that loads loads again, from what brokerd wrote, to the
 * same users; only valid names are found; a deleted user is gone, also
 * after a reload. Password hashing is left out (argon2id is slow by
 * design).
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
void	fuzz_det_reset(void);

static const char	*fuzz_dir;
static char		 fuzz_file[64], fuzz_done[80], fuzz_db[64], fuzz_wal[80];

/*
 * A user deleted on another host has their spawns killed through
 * sandbox.c, which only a PostgreSQL store reaches: linked, never called.
 */
void	sandbox_kill_user(const char *);

void
sandbox_kill_user(const char *user)
{
	abort();
}

/* Make the fixture once, before the first input. */
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
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_dir = ff_dir("fuzz_auth", "/tmp");
	snprintf(fuzz_file, sizeof(fuzz_file), "%s/users.json", fuzz_dir);
	snprintf(fuzz_done, sizeof(fuzz_done), "%s.migrated", fuzz_file);
	snprintf(fuzz_db, sizeof(fuzz_db), "%s/store.db", fuzz_dir);
	snprintf(fuzz_wal, sizeof(fuzz_wal), "%s-wal", fuzz_db);
	/* The default HOSTGATE_UID_RANGE, and one id a daemon holds. */
	auth_uid_range(1879048192, 1879113727);
	auth_uid_reserve(1879048200, "the uid of hostgate-front");
	return 0;
}

/* The users as one string, to compare two loads. */
static char *
fuzz_dump(void)
{
	struct json_object	*o = auth_user_list();
	char			*s;

	if ((s = strdup(json_object_to_json_string(o))) == NULL)
		abort();
	json_object_put(o);
	return s;
}

/* One users.json loaded twice, and a name looked up and deleted. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t	*cut, *name = NULL;
	char		 err[512], user[64], *before, *after;
	size_t		 len, nlen = 0;
	int		 fd;

	fuzz_det_reset();
	cut = memchr(data, 0xff, size);
	len = cut != NULL ? (size_t)(cut - data) : size;
	if (cut != NULL) {
		name = cut + 1;
		nlen = data + size - name;
		if (memchr(name, '\0', nlen) != NULL || nlen >= sizeof(user))
			return 0;
		memcpy(user, name, nlen);
		user[nlen] = '\0';
	}
	/* A first start: an empty store, maybe an earlier release's file. */
	store_close();
	unlink(fuzz_file);
	unlink(fuzz_done);
	unlink(fuzz_db);
	unlink(fuzz_wal);
	if (fuzz_store_open(fuzz_dir, err, sizeof(err)) == -1)
		abort();
	if (len > 0) {
		if ((fd = open(fuzz_file, O_WRONLY | O_CREAT | O_TRUNC, 0600)) ==
		    -1 || write(fd, data, len) != (ssize_t)len)
			abort();
		close(fd);
	}
	if (auth_init(fuzz_dir, err, sizeof(err)) == -1) {
		ff_check_message(err);
		return 0;
	}
	/* What was taken in (given ids) loads again the same. */
	before = fuzz_dump();
	if (fuzz_store_open(fuzz_dir, err, sizeof(err)) == -1 ||
	    auth_init(fuzz_dir, err, sizeof(err)) == -1)
		abort();
	after = fuzz_dump();
	if (strcmp(before, after) != 0)
		abort();
	free(before);
	free(after);
	if (name == NULL)
		return 0;
	if (auth_find(user) != NULL) {
		if (!auth_name_valid(user))
			abort();
		if (auth_user_del(user, err, sizeof(err)) == -1)
			ff_check_message(err);
		else if (auth_find(user) != NULL ||
		    fuzz_store_open(fuzz_dir, err, sizeof(err)) == -1 ||
		    auth_init(fuzz_dir, err, sizeof(err)) == -1 ||
		    auth_find(user) != NULL)
			abort();
	}
	return 0;
}
