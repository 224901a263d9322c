/*
 * libFuzzer target for the audit log reader (brokerd/audit.c). The first
 * byte of an input picks a mode, the rest is data:
 *   bit 2 set: the data's NUL-separated fields become the user, reason
 *     and command of appended records, which must then verify and read
 *     back as written (cut to the field limit);
 *   else the data is the content of a rotated file audit.log.000001, each
 *     of its lines ending in "}" first signed with the log's key when bit 0
 *     is set (so that the checks after the HMAC are reached), followed by
 *     a genuine record as audit.log when bit 1 is set; audit_init,
 *     audit_verify and the queries then run on it, and must never crash.
 * The key is fixed, so tests/fuzz/corpus/fuzz_audit holds valid chains.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "../../brokerd/brokerd.h"

#define FUZZ_ROTATE	600	/* small, so that appends rotate */

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

static char		 fuzz_dir[64];
static char		*fuzz_log, *fuzz_rotated, *fuzz_key;
static char		*fuzz_tail;	/* a genuine record line, with newline */
static size_t		 fuzz_tail_len;
static unsigned char	 fuzz_keybytes[32];

/* Remove the log files of the scratch directory, keeping the key. */
static void
fuzz_clean(void)
{
	struct dirent	*de;
	DIR		*d;
	char		*p;

	if ((d = opendir(fuzz_dir)) == NULL)
		abort();
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "audit.log", 9) != 0)
			continue;
		p = path_join(fuzz_dir, de->d_name);
		unlink(p);
		free(p);
	}
	closedir(d);
}

/* Remove the scratch directory at exit. */
static void
fuzz_cleanup(void)
{
	audit_close();
	fuzz_clean();
	unlink(fuzz_key);
	rmdir(fuzz_dir);
}

/* Write len bytes to path, replacing it. */
static void
fuzz_write(const char *path, const void *data, size_t len)
{
	FILE	*fp;

	if ((fp = fopen(path, "w")) == NULL ||
	    (len > 0 && fwrite(data, 1, len, fp) != len) || fclose(fp) != 0)
		abort();
}

/* A scratch state directory with the fixed key and a genuine record. */
static void
fuzz_setup(void)
{
	char	err[512];
	size_t	i;

	snprintf(fuzz_dir, sizeof fuzz_dir, "%s/fuzz_audit.XXXXXX",
	    access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (mkdtemp(fuzz_dir) == NULL)
		abort();
	fuzz_log = path_join(fuzz_dir, "audit.log");
	fuzz_rotated = path_join(fuzz_dir, "audit.log.000001");
	fuzz_key = path_join(fuzz_dir, "audit.key");
	for (i = 0; i < sizeof fuzz_keybytes; i++)
		fuzz_keybytes[i] = i;
	if (file_write_atomic(fuzz_key, fuzz_keybytes, sizeof fuzz_keybytes,
	    0600) == -1)
		abort();
	if (audit_init(fuzz_dir, FUZZ_ROTATE, 0, err, sizeof err) == -1 ||
	    audit_append("login", "alice", "0123", 1, NULL, NULL, 0) != 1)
		abort();
	audit_close();
	if ((fuzz_tail = file_read(fuzz_log, 4096, &fuzz_tail_len)) == NULL)
		abort();
	fuzz_clean();
	log_setlevel(LOG_LVL_ERROR);
	atexit(fuzz_cleanup);
}

/*
 * Sign each line of data that ends in "}" as audit_append would, turning
 * its final "}" into ,"hmac":"<hex>"}; other lines stay as they are.
 */
static char *
fuzz_sign(const uint8_t *data, size_t size, size_t *outlen)
{
	const uint8_t	*p, *nl, *end = data + size;
	unsigned char	 md[32];
	unsigned int	 mdlen;
	char		*out, *o;
	size_t		 len, i;

	/* Each line grows by at most the 75 bytes of the hmac member. */
	if ((out = malloc(size + 80 * (size / 2 + 1))) == NULL)
		abort();
	o = out;
	for (p = data; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', end - p)) == NULL)
			nl = end;
		len = nl - p;
		if (len >= 2 && p[len - 1] == '}') {
			if (HMAC(EVP_sha256(), fuzz_keybytes,
			    sizeof fuzz_keybytes, p, len, md, &mdlen) == NULL)
				abort();
			memcpy(o, p, len - 1);
			o += len - 1;
			o += sprintf(o, ",\"hmac\":\"");
			for (i = 0; i < 32; i++)
				o += sprintf(o, "%02x", md[i]);
			o += sprintf(o, "\"}");
		} else {
			memcpy(o, p, len);
			o += len;
		}
		if (nl < end)
			*o++ = '\n';
	}
	*outlen = o - out;
	return out;
}

/* Run the reader on a log; a failure must be reported, never crash. */
static void
fuzz_read(const uint8_t *data, size_t size, int sign, int tail)
{
	struct json_object	*arr;
	char			 err[512], *text;
	size_t			 len;
	int64_t			 n, bad;
	int			 more;

	fuzz_clean();
	if (sign) {
		text = fuzz_sign(data, size, &len);
		fuzz_write(fuzz_rotated, text, len);
		free(text);
	} else
		fuzz_write(fuzz_rotated, data, size);
	fuzz_write(fuzz_log, fuzz_tail, tail ? fuzz_tail_len : 0);

	err[0] = '\0';
	if (audit_init(fuzz_dir, FUZZ_ROTATE, 0, err, sizeof err) == -1) {
		if (err[0] == '\0')
			abort();
		return;
	}
	if (audit_verify(&n, &bad, err, sizeof err) == -1) {
		if (bad < 1 || err[0] == '\0')
			abort();
	} else if (n != audit_last_seq())
		abort();
	arr = audit_query(NULL, NULL, 0, 0, 0);
	audit_trim(arr, 4096);
	json_object_put(arr);
	arr = audit_query_page("alice", "login", 1, 2000000000, 3, 2, &more);
	if (json_object_array_length(arr) > 2)
		abort();
	json_object_put(arr);
	/* The tail was taken as genuine: the chain must go on from it. */
	if (audit_append("logout", NULL, NULL, 1, NULL, NULL, 0) !=
	    audit_last_seq())
		abort();
	audit_close();
}

/* Append records of the data's fields: they must verify and read back. */
static void
fuzz_append(const uint8_t *data, size_t size)
{
	struct json_object	*arr, *rec, *detail, *d;
	const char		*user, *reason, *cmd, *got;
	char			 err[512], *copy;
	int64_t			 n, bad;
	int			 i;

	/* Three NUL-terminated fields, missing ones empty. */
	if ((copy = calloc(1, size + 3)) == NULL)
		abort();
	memcpy(copy, data, size);
	user = copy;
	reason = user + strlen(user) + 1;
	cmd = reason + strlen(reason) + 1;

	fuzz_clean();
	if (audit_init(fuzz_dir, FUZZ_ROTATE, 0, err, sizeof err) == -1)
		abort();
	for (i = 0; i < 3; i++) {
		detail = json_object_new_object();
		json_object_object_add(detail, "command",
		    json_object_new_string(cmd));
		if (audit_append("spawn", user, reason, i != 1, reason, detail,
		    0) != i + 1)
			abort();
	}
	/* Verified, each record is one line, whatever its fields held. */
	if (audit_verify(&n, &bad, err, sizeof err) != 0 || n != 3)
		abort();
	arr = audit_query(NULL, "spawn", 0, 0, 0);
	if (json_object_array_length(arr) != 3)
		abort();
	rec = json_object_array_get_idx(arr, 2);
	/* Cut, perhaps, but never changed. */
	if ((got = json_str(rec, "user")) == NULL ||
	    strncmp(got, user, strlen(got)) != 0 || strlen(got) > 512)
		abort();
	if (!json_object_object_get_ex(rec, "detail", &d))
		abort();
	if ((got = json_str(d, "command")) != NULL && strcmp(got, cmd) != 0)
		abort();
	json_object_put(arr);
	audit_close();
	free(copy);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	t[64];
	int64_t	secs;
	size_t	n;

	fuzz_det_reset();

	if (fuzz_tail == NULL)
		fuzz_setup();
	if (size < 1)
		return 0;
	n = size - 1 < sizeof t - 1 ? size - 1 : sizeof t - 1;
	memcpy(t, data + 1, n);
	t[n] = '\0';
	audit_time_parse(t, &secs);

	if (data[0] & 4)
		fuzz_append(data + 1, size - 1);
	else
		fuzz_read(data + 1, size - 1, data[0] & 1, data[0] & 2);
	return 0;
}
