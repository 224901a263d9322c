/*
 * Small helpers shared by every program: typed JSON access, atomic file
 * writes, random tokens, hashing and clocks.
 */
#include <sys/random.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "common.h"

/* The member key of obj if obj is an object and the member has type t. */
static struct json_object *
json_member(struct json_object *obj, const char *key, enum json_type t)
{
	struct json_object	*v;

	if (obj == NULL || !json_object_is_type(obj, json_type_object))
		return (NULL);
	if (!json_object_object_get_ex(obj, key, &v))
		return (NULL);
	if (!json_object_is_type(v, t))
		return (NULL);
	return (v);
}

/* A string member, or NULL when missing or not a string. */
const char *
json_str(struct json_object *obj, const char *key)
{
	struct json_object	*v;

	if ((v = json_member(obj, key, json_type_string)) == NULL)
		return (NULL);
	/*
	 * JSON strings may hold NUL; as a C string one would be cut short
	 * without notice ("secret\u0000junk" logging in as "secret").
	 */
	if (strlen(json_object_get_string(v)) !=
	    (size_t)json_object_get_string_len(v))
		return (NULL);
	return (json_object_get_string(v));
}

/* An integer member into out; -1 when missing, not an integer or too big. */
int
json_int(struct json_object *obj, const char *key, int64_t *out)
{
	struct json_object	*v;
	int64_t			 n;

	if ((v = json_member(obj, key, json_type_int)) == NULL)
		return (-1);
	n = json_object_get_int64(v);
	/* json-c keeps integers above INT64_MAX as uint64 and clamps them. */
	if (n == INT64_MAX && json_object_get_uint64(v) != (uint64_t)INT64_MAX)
		return (-1);
	*out = n;
	return (0);
}

/* A boolean member into out as 0 or 1; -1 when missing or not a boolean. */
int
json_flag(struct json_object *obj, const char *key, int *out)
{
	struct json_object	*v;

	if ((v = json_member(obj, key, json_type_boolean)) == NULL)
		return (-1);
	*out = json_object_get_boolean(v) ? 1 : 0;
	return (0);
}

/* Write all of len bytes to fd, retrying short writes. */
static int
file_write_all(int fd, const void *data, size_t len)
{
	const char	*p = data;
	ssize_t		 n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return (-1);
		}
		p += n;
		len -= n;
	}
	return (0);
}

/* Create a new hidden temporary file next to path; its name goes in tmp. */
static int
file_create_temp(const char *path, mode_t mode, char *tmp, size_t tmpsz)
{
	const char	*slash, *base;
	int		 dirlen, fd, try, n;
	uint32_t	 rnd;

	if ((slash = strrchr(path, '/')) != NULL) {
		dirlen = slash - path + 1;
		base = slash + 1;
	} else {
		dirlen = 0;
		base = path;
	}
	if (*base == '\0') {
		errno = EISDIR;
		return (-1);
	}
	for (try = 0; try < 16; try++) {
		if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
			return (-1);
		n = snprintf(tmp, tmpsz, "%.*s.%s.%08x.tmp", dirlen, path, base,
		    rnd);
		if (n < 0 || (size_t)n >= tmpsz) {
			errno = ENAMETOOLONG;
			return (-1);
		}
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
		if (fd != -1 || errno != EEXIST)
			return (fd);
	}
	return (-1);
}

/* Open path's directory and fsync it, so that a rename inside it is durable. */
static int
file_sync_dir(const char *path)
{
	char		 dir[PATH_MAX];
	const char	*slash;
	int		 fd, rv;

	if ((slash = strrchr(path, '/')) == NULL)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return (-1);
	rv = fsync(fd);
	close(fd);
	return (rv);
}

/*
 * Replace path with data so that a reader sees the old or the new content,
 * never a part, even after a crash. The file gets exactly mode, whatever
 * the umask.
 */
int
file_write_atomic(const char *path, const void *data, size_t len,
    mode_t mode)
{
	char	tmp[PATH_MAX];
	int	fd, saved;

	if ((fd = file_create_temp(path, mode, tmp, sizeof tmp)) == -1)
		return (-1);
	if (fchmod(fd, mode) == -1 || file_write_all(fd, data, len) == -1 ||
	    fsync(fd) == -1) {
		saved = errno;
		close(fd);
		unlink(tmp);
		errno = saved;
		return (-1);
	}
	if (close(fd) == -1 || rename(tmp, path) == -1) {
		saved = errno;
		unlink(tmp);
		errno = saved;
		return (-1);
	}
	return (file_sync_dir(path));
}

/*
 * Read the whole of a small file into a malloc'ed, NUL-terminated buffer;
 * fails with EFBIG when it holds more than max bytes.
 */
char *
file_read(const char *path, size_t max, size_t *lenp)
{
	struct stat	 st;
	char		*buf = NULL, *nbuf;
	size_t		 len = 0, cap;
	ssize_t		 n;
	int		 fd, saved;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (NULL);
	if (fstat(fd, &st) == -1)
		goto fail;
	if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > max) {
		errno = EFBIG;
		goto fail;
	}
	/* Files in /proc claim size 0: start small and grow up to max + 1. */
	if (max > SIZE_MAX - 2)
		max = SIZE_MAX - 2;
	cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 :
	    4096;
	if (cap > max + 1)
		cap = max + 1;
	if ((buf = malloc(cap + 1)) == NULL)
		goto fail;
	for (;;) {
		if (len == cap) {
			if (cap > max) {
				errno = EFBIG;
				goto fail;
			}
			cap = cap > (max + 1) / 2 ? max + 1 : cap * 2;
			if ((nbuf = realloc(buf, cap + 1)) == NULL)
				goto fail;
			buf = nbuf;
		}
		n = read(fd, buf + len, cap - len);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		if (n == 0)
			break;
		len += n;
	}
	if (len > max) {
		errno = EFBIG;
		goto fail;
	}
	close(fd);
	buf[len] = '\0';
	if (lenp != NULL)
		*lenp = len;
	return (buf);

fail:
	saved = errno;
	free(buf);
	close(fd);
	errno = saved;
	return (NULL);
}

/* Fill buf with len bytes from the kernel's random generator. */
static int
rand_bytes(void *buf, size_t len)
{
	unsigned char	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		n = getrandom(p, len, 0);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return (-1);
		}
		p += n;
		len -= n;
	}
	return (0);
}

/*
 * Write nbytes of fresh randomness as unpadded base64url into out; -1 with
 * ERANGE when out is too small.
 */
int
rand_token(char *out, size_t outsz, size_t nbytes)
{
	static const char	 b64[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	unsigned char		 chunk[48], *p;
	size_t			 need, done, n, i, pos = 0;
	uint32_t		 v;

	if (nbytes > (SIZE_MAX - 2) / 4) {
		errno = ERANGE;
		return (-1);
	}
	need = (nbytes * 4 + 2) / 3;
	if (outsz < need + 1) {
		errno = ERANGE;
		return (-1);
	}
	/* Chunks are a multiple of 3 bytes, so only the last one has a tail. */
	for (done = 0; done < nbytes; done += n) {
		n = nbytes - done < sizeof chunk ? nbytes - done : sizeof chunk;
		if (rand_bytes(chunk, n) == -1) {
			explicit_bzero(chunk, sizeof chunk);
			return (-1);
		}
		for (i = 0, p = chunk; i < n; i += 3, p += 3) {
			v = (uint32_t)p[0] << 16;
			if (i + 1 < n)
				v |= (uint32_t)p[1] << 8;
			if (i + 2 < n)
				v |= p[2];
			out[pos++] = b64[(v >> 18) & 63];
			out[pos++] = b64[(v >> 12) & 63];
			if (i + 1 < n)
				out[pos++] = b64[(v >> 6) & 63];
			if (i + 2 < n)
				out[pos++] = b64[v & 63];
		}
	}
	out[pos] = '\0';
	explicit_bzero(chunk, sizeof chunk);
	return (0);
}

/*
 * Lowercase hex SHA-256 of data into out. The algorithm is fetched once
 * (EVP_sha256() in a digest call fetches it from the provider each time:
 * a session lookup hashes its cookie), and one context is reused.
 */
void
sha256_hex(const void *data, size_t len, char out[65])
{
	static const char	hex[] = "0123456789abcdef";
	static EVP_MD		*sha256;
	static EVP_MD_CTX	*ctx;
	unsigned char		md[EVP_MAX_MD_SIZE];
	unsigned int		mdlen, i;

	if (sha256 == NULL &&
	    (sha256 = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL)
		fatalx("%s: EVP_MD_fetch SHA256 failed", __func__);
	if (ctx == NULL && (ctx = EVP_MD_CTX_new()) == NULL)
		fatalx("%s: EVP_MD_CTX_new failed", __func__);
	if (!EVP_DigestInit_ex2(ctx, sha256, NULL) ||
	    !EVP_DigestUpdate(ctx, data, len) ||
	    !EVP_DigestFinal_ex(ctx, md, &mdlen) || mdlen != 32)
		fatalx("%s: SHA-256 failed", __func__);
	for (i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 0xf];
	}
	out[64] = '\0';
}

/*
 * Compare two secrets in time that depends only on their lengths; 1 when
 * equal. A length mismatch still does the work of a full compare.
 */
int
str_ct_equal(const char *a, const char *b)
{
	size_t		 la, lb;
	const char	*longer;

	if (a == NULL || b == NULL)
		return (0);
	la = strlen(a);
	lb = strlen(b);
	if (la == lb)
		return (CRYPTO_memcmp(a, b, la) == 0);
	longer = la > lb ? a : b;
	(void)CRYPTO_memcmp(longer, longer, la > lb ? la : lb);
	return (0);
}

/*
 * Decode a field of /proc/self/mountinfo in place: the kernel writes space,
 * tab, newline and backslash as \ooo octal escapes.
 */
void
mountinfo_unescape(char *s)
{
	char	*w = s;

	for (; *s != '\0'; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
			    (s[3] - '0'));
			s += 3;
		} else
			*w++ = *s;
	}
	*w = '\0';
}

/*
 * Whether s is a hostgate user name, ^[a-z_][a-z0-9_.-]{0,31}$: what
 * users.json holds (brokerd's USER_NAME_MAX is 32), and so the only names
 * the protocol, the session store and sandboxd take.
 */
int
str_is_user_name(const char *s)
{
	size_t	i;

	if (s == NULL || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return (0);
	for (i = 1; s[i] != '\0'; i++) {
		if (i >= 32)
			return (0);
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		    s[i] == '.' || s[i] == '-'))
			return (0);
	}
	return (1);
}

/* Whether s is exactly len lower-case hex digits (ids, hashes). */
int
str_is_hex(const char *s, size_t len)
{
	size_t	i;

	if (s == NULL || strlen(s) != len)
		return (0);
	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return (0);
	return (1);
}

/* Whether s is a host id: [a-z0-9][a-z0-9-]{0,31} (HOSTGATE_HOST_ID). */
int
str_is_host_id(const char *s)
{
	size_t	i;

	if (s == NULL || !((s[0] >= 'a' && s[0] <= 'z') ||
	    (s[0] >= '0' && s[0] <= '9')))
		return (0);
	for (i = 1; s[i] != '\0'; i++)
		if (i >= 32 || !((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return (0);
	return (1);
}

/* A terminal id "HEX16" or "HOST.HEX16" of len bytes: host and hex apart. */
int
term_id_parse(const char *s, size_t len, char host[33], char id[17])
{
	char		 buf[33 + 17];
	const char	*dot;
	size_t		 hlen;

	host[0] = id[0] = '\0';
	if (s == NULL || len < 16 || len >= sizeof(buf) ||
	    memchr(s, '\0', len) != NULL)
		return (-1);
	memcpy(buf, s, len);
	buf[len] = '\0';
	if ((dot = strchr(buf, '.')) != NULL) {
		hlen = dot - buf;
		if (hlen == 0 || hlen > 32 || strlen(dot + 1) != 16)
			return (-1);
		memcpy(host, buf, hlen);
		host[hlen] = '\0';
		if (!str_is_host_id(host) || !str_is_hex(dot + 1, 16)) {
			host[0] = '\0';
			return (-1);
		}
		memcpy(id, dot + 1, 17);
		return (0);
	}
	if (!str_is_hex(buf, 16))
		return (-1);
	memcpy(id, buf, 17);
	return (0);
}

/* Read a clock in milliseconds. */
static int64_t
clock_ms(clockid_t id)
{
	struct timespec	ts;

	if (clock_gettime(id, &ts) == -1)
		fatal("clock_gettime");
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* Milliseconds of a clock that never jumps, for timers and TTLs. */
int64_t
now_mono_ms(void)
{
	return (clock_ms(CLOCK_MONOTONIC));
}

/* Milliseconds since the epoch, for timestamps people read. */
int64_t
now_wall_ms(void)
{
	return (clock_ms(CLOCK_REALTIME));
}

/* ISO 8601 UTC form of a wall time; empty when the time cannot be shown. */
void
iso8601(int64_t secs, char out[32])
{
	struct tm	tm;
	time_t		t = (time_t)secs;

	out[0] = '\0';
	if (gmtime_r(&t, &tm) == NULL)
		return;
	if (strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		out[0] = '\0';
}

/*
 * ISO 8601 UTC with milliseconds ("2026-12-01T22:41:05.123Z") of a wall
 * time in ms, as the audit log writes its times; the epoch when it cannot
 * be shown.
 */
void
iso8601_ms(int64_t ms, char out[32])
{
	struct tm	tm;
	time_t		t = (time_t)(ms / 1000);

	if (ms < 0 || gmtime_r(&t, &tm) == NULL) {
		snprintf(out, 32, "1970-01-01T00:00:00.000Z");
		return;
	}
	snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

/* A malloc'ed "dir/name"; a path longer than PATH_MAX is a bug, so fatal. */
char *
path_join(const char *dir, const char *name)
{
	char	*p, buf[LOG_ESCAPE_MAX];
	size_t	 dlen, nlen, sep;

	dlen = strlen(dir);
	nlen = strlen(name);
	sep = dlen > 0 && dir[dlen - 1] == '/' ? 0 : 1;
	if (dlen + sep + nlen >= PATH_MAX)
		fatalx("path too long: %s/%s",
		    log_escape(dir, dlen, buf, sizeof buf), name);
	if ((p = malloc(dlen + sep + nlen + 1)) == NULL)
		fatal("%s", __func__);
	memcpy(p, dir, dlen);
	if (sep)
		p[dlen] = '/';
	memcpy(p + dlen + sep, name, nlen + 1);
	return (p);
}

/*
 * Read a private state file (users, sessions): absent is not an error
 * (NULL, *absent set); not a regular file, or with a NUL inside, is. A
 * mode other than 0600 is set back to 0600, with a warning. Returns the
 * NUL-terminated text, or NULL with err "PATH: why".
 */
char *
file_read_private(const char *path, size_t max, int *absent, char *err,
    size_t errsz)
{
	struct stat	 st;
	char		*text;
	size_t		 len;

	*absent = 0;
	if (stat(path, &st) == -1) {
		if (errno == ENOENT) {
			*absent = 1;
			return (NULL);
		}
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		return (NULL);
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errsz, "%s: not a regular file", path);
		return (NULL);
	}
	if ((st.st_mode & 07777) != 0600) {
		log_warnx("%s: mode %04o, setting it to 0600", path,
		    (unsigned)(st.st_mode & 07777));
		if (chmod(path, 0600) == -1) {
			snprintf(err, errsz, "%s: cannot set mode 0600: %s",
			    path, strerror(errno));
			return (NULL);
		}
	}
	if ((text = file_read(path, max, &len)) == NULL) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		return (NULL);
	}
	if (strlen(text) != len) {
		snprintf(err, errsz, "%s: contains a NUL byte", path);
		free(text);
		return (NULL);
	}
	return (text);
}
