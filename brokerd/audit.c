/*
 * The tamper-evident audit log. Every decision brokerd takes is one line of
 * STATE_DIR/audit.log, a JSON object:
 *   {"seq", "time", "host", "action", "user", "session", "allowed",
 *    "reason", "detail", "prev", "hmac"}
 * "prev" is the SHA-256 of the previous line (64 zeros for seq 1), so that
 * the lines form a chain; "hmac" is the HMAC-SHA256, under the key in
 * STATE_DIR/audit.key, of the line as it reads without its hmac member:
 * the record serialized plain, whose final "}" the writer then replaces
 * with ,"hmac":"<hex>"}. The file is rotated by size to audit.log.NNNNNN
 * and the chain goes on in the next file: audit_file, the struct
 * audit_store of the embedded store. With a PostgreSQL store the same
 * lines are rows of the store's audit table instead (audit_pg.c's),
 * shared by the hosts of a fleet. audit.c makes and checks the lines
 * either way. docs/audit.md is the reader's side of this.
 */
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <systemd/sd-journal.h>

#include "brokerd.h"

#define AUDIT_FILE		"audit.log"
#define AUDIT_KEY_FILE		"audit.key"
#define AUDIT_KEY_BYTES		32
#define AUDIT_RECORD_MAX	(16 * 1024)	/* the longest line written */
#define AUDIT_RESERVE		(4 * AUDIT_RECORD_MAX) /* free space needed */
#define AUDIT_FIELD_MAX		512	/* user, session, reason are cut */
#define AUDIT_QUERY_MAX		10000	/* records one query returns */
#define AUDIT_SEQ_MAX		((INT64_C(1) << 53) - 1) /* exact in JSON */
#define AUDIT_SECS_MAX		(INT64_MAX / 1000 - 1)
#define AUDIT_BUF_SIZE		(2 * AUDIT_LINE_MAX + 2)
#define AUDIT_HMAC_PRE		",\"hmac\":\""
#define AUDIT_HMAC_PRE_LEN	(sizeof(AUDIT_HMAC_PRE) - 1)
/* ,"hmac":"<64 hex>"} at the end of every line */
#define AUDIT_SUFFIX_LEN	(AUDIT_HMAC_PRE_LEN + 64 + 2)
#define AUDIT_ZERO_HASH \
	"0000000000000000000000000000000000000000000000000000000000000000"

/* A line that passed audit_check. */
struct audit_rec {
	int64_t			 seq;
	char			 prev[65];
	char			 hash[65];	/* SHA-256 of the line */
};

struct audit_verify_state {
	int64_t		 expect;	/* the seq the next record must have */
	char		 prev[65];	/* hash of the last good line */
	int64_t		 bad_seq;
	int64_t		 head_seq;	/* an anchor to check, 0: none */
	const char	*head_hash;
	int		 head_seen;	/* the anchor's record was found */
	char		*err;
	size_t		 errsz;
	/*
	 * The oldest record here has seq gap_seq > 1 (older files archived):
	 * the gap stands only once a verified audit_archived record vouches
	 * for it (anchor_seq); until then its error (gap_err) is the answer.
	 */
	int64_t		 gap_seq;
	char		 gap_prev[65];	/* that record's prev */
	char		 gap_err[512];
	int64_t		 anchor_seq;
};

struct audit_query_state {
	const char		*user;
	const char		*action;
	const char		*session;
	const char		*request_id;
	int			 decision;	/* -1 any, 0 refused, 1 allowed */
	int64_t			 since;		/* ms */
	int64_t			 until;		/* ms, exclusive */
	int			 has_since;
	int			 has_until;
	int64_t			 before;	/* seq, 0 = open */
	struct json_object	**ring;		/* the newest matches */
	size_t			 cap;
	size_t			 n;		/* matches seen */
};

static char		*audit_dir;
static char		*audit_path;
static int		 audit_fd = -1;
static unsigned char	 audit_key[AUDIT_KEY_BYTES];
static void		 audit_fail(int, const char *);
static EVP_MAC_CTX	*audit_mac_ctx;
static int64_t		 audit_seq;	/* the last seq written */
static char		 audit_prev[65];/* hash of the last line written */
static off_t		 audit_size;	/* bytes of whole records in the file */
static int		 audit_dirty;	/* a failed write left bytes after it */
static long		 audit_rotate_bytes;
static int		 audit_syslog;
static int		 audit_failed;	/* errno of the last failed append, or 0 */
static char		 audit_fail_why[256];
static unsigned long long audit_next_num; /* of the next rotated file */
static char		 audit_host[33];	/* "host" of each record */
static const struct audit_store *audit_store = &audit_file;
static int		 audit_open_store;	/* audit_store opened */
static int		 audit_offline;	/* audit_open_dir: read, never write */

/* Lowercase hex of n bytes into out (2n + 1 bytes). */
static void
audit_hex(const unsigned char *in, size_t n, char *out)
{
	static const char	hex[] = "0123456789abcdef";
	size_t			i;

	for (i = 0; i < n; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 0xf];
	}
	out[2 * n] = '\0';
}

/* Whether s holds exactly 64 lowercase hex digits (not NUL-terminated). */
static int
audit_is_hash(const char *s)
{
	size_t	i;

	for (i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* Hex HMAC-SHA256 under the audit key of a followed by b into out[65]. */
static int
audit_mac(const char *a, size_t alen, const char *b, size_t blen,
    char out[65])
{
	unsigned char	md[EVP_MAX_MD_SIZE];
	size_t		mdlen;

	if (audit_mac_ctx == NULL ||
	    !EVP_MAC_init(audit_mac_ctx, audit_key, sizeof audit_key, NULL) ||
	    !EVP_MAC_update(audit_mac_ctx, (const unsigned char *)a, alen) ||
	    !EVP_MAC_update(audit_mac_ctx, (const unsigned char *)b, blen) ||
	    !EVP_MAC_final(audit_mac_ctx, md, &mdlen, sizeof md) ||
	    mdlen != 32)
		return -1;
	audit_hex(md, 32, out);
	return 0;
}

/* Set up the HMAC-SHA256 context; the key is given at each use. */
static int
audit_mac_setup(void)
{
	OSSL_PARAM	 params[2];
	EVP_MAC		*mac;

	if (audit_mac_ctx != NULL)
		return 0;
	if ((mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL)
		return -1;
	audit_mac_ctx = EVP_MAC_CTX_new(mac);
	EVP_MAC_free(mac);
	if (audit_mac_ctx == NULL)
		return -1;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if (!EVP_MAC_CTX_set_params(audit_mac_ctx, params)) {
		EVP_MAC_CTX_free(audit_mac_ctx);
		audit_mac_ctx = NULL;
		return -1;
	}
	return 0;
}

/*
 * Check one line (without its newline): its HMAC, that it is one JSON
 * object, its seq and prev. 0 with r filled, or -1 with what is wrong.
 */
static int
audit_check(const char *line, size_t len, struct audit_rec *r, char *err,
    size_t errsz)
{
	struct json_tokener	*tok;
	struct json_object	*obj;
	const char		*mac, *prev;
	char			 want[65];
	int			 rv = -1;

	if (len < AUDIT_SUFFIX_LEN + 2 || line[0] != '{' ||
	    memcmp(line + len - AUDIT_SUFFIX_LEN, AUDIT_HMAC_PRE,
	    AUDIT_HMAC_PRE_LEN) != 0 || memcmp(line + len - 2, "\"}", 2) != 0) {
		snprintf(err, errsz, "not a record (no hmac member at the end)");
		return -1;
	}
	mac = line + len - AUDIT_SUFFIX_LEN + AUDIT_HMAC_PRE_LEN;
	if (audit_mac(line, len - AUDIT_SUFFIX_LEN, "}", 1, want) == -1) {
		snprintf(err, errsz, "cannot compute the HMAC");
		return -1;
	}
	if (CRYPTO_memcmp(mac, want, 64) != 0) {
		snprintf(err, errsz, "HMAC does not match (record edited, or "
		    "forged without the key)");
		return -1;
	}

	/* The key's holder wrote it; still, nothing below trusts it. */
	if ((tok = json_tokener_new()) == NULL) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	obj = json_tokener_parse_ex(tok, line, len);
	if (obj == NULL || json_tokener_get_parse_end(tok) != len ||
	    !json_object_is_type(obj, json_type_object))
		snprintf(err, errsz, "not a JSON object");
	else if (json_int(obj, "seq", &r->seq) == -1 || r->seq < 1 ||
	    r->seq > AUDIT_SEQ_MAX)
		snprintf(err, errsz, "no valid seq");
	else if ((prev = json_str(obj, "prev")) == NULL ||
	    strlen(prev) != 64 || !audit_is_hash(prev))
		snprintf(err, errsz, "no valid prev");
	else {
		memcpy(r->prev, prev, 65);
		sha256_hex(line, len, r->hash);
		rv = 0;
	}
	json_object_put(obj);
	json_tokener_free(tok);
	return rv;
}

/* audit_check for audit_pg.c: the line's seq and hash. */
int
audit_line_check(const char *line, size_t len, int64_t *seq, char hash[65],
    char *err, size_t errsz)
{
	struct audit_rec	r;

	if (len > AUDIT_LINE_MAX) {
		snprintf(err, errsz, "line longer than %d bytes",
		    AUDIT_LINE_MAX);
		return -1;
	}
	if (audit_check(line, len, &r, err, errsz) == -1)
		return -1;
	*seq = r.seq;
	memcpy(hash, r.hash, 65);
	return 0;
}

/* Compare two rotated files by number, then by name. */
static int
audit_file_cmp(const void *a, const void *b)
{
	const char		*na = *(const char *const *)a;
	const char		*nb = *(const char *const *)b;
	unsigned long long	 ia, ib;

	ia = strtoull(na + sizeof(AUDIT_FILE), NULL, 10);
	ib = strtoull(nb + sizeof(AUDIT_FILE), NULL, 10);
	if (ia != ib)
		return ia < ib ? -1 : 1;
	return strcmp(na, nb);
}

/* The number of a rotated file's name "audit.log.DIGITS", or -1. */
static int
audit_file_num(const char *name, unsigned long long *num)
{
	const char	*p;
	size_t		 n;

	if (strncmp(name, AUDIT_FILE ".", sizeof(AUDIT_FILE)) != 0)
		return -1;
	p = name + sizeof(AUDIT_FILE);
	n = strspn(p, "0123456789");
	if (n == 0 || n > 18 || p[n] != '\0')
		return -1;
	*num = strtoull(p, NULL, 10);
	return 0;
}

/* Free a file list of audit_files. */
static void
audit_files_free(char **files, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		free(files[i]);
	free(files);
}

/*
 * The paths of the log's files in chain order: the rotated ones by number,
 * then audit.log (listed whether or not it exists). *maxnum gets the
 * highest number in use.
 */
static int
audit_files(char ***filesp, size_t *np, unsigned long long *maxnum)
{
	struct dirent		*de;
	DIR			*dir;
	char			**files = NULL, **nf, *name;
	size_t			 n = 0, cap = 0, i;
	unsigned long long	 num;

	*maxnum = 0;
	if ((dir = opendir(audit_dir)) == NULL)
		return -1;
	while ((de = readdir(dir)) != NULL) {
		if (audit_file_num(de->d_name, &num) == -1)
			continue;
		if (num > *maxnum)
			*maxnum = num;
		if (n + 1 >= cap) {
			cap = cap ? cap * 2 : 16;
			if ((nf = reallocarray(files, cap, sizeof *nf)) == NULL)
				goto fail;
			files = nf;
		}
		if ((files[n] = strdup(de->d_name)) == NULL)
			goto fail;
		n++;
	}
	closedir(dir);
	dir = NULL;
	/* The loop keeps a free slot; audit.log takes it. */
	if (files == NULL && (files = calloc(1, sizeof *files)) == NULL)
		goto fail;
	if (n > 0)
		qsort(files, n, sizeof *files, audit_file_cmp);
	for (i = 0; i < n; i++) {
		name = path_join(audit_dir, files[i]);
		free(files[i]);
		files[i] = name;
	}
	files[n++] = path_join(audit_dir, AUDIT_FILE);
	*filesp = files;
	*np = n;
	return 0;

fail:
	if (dir != NULL)
		closedir(dir);
	audit_files_free(files, n);
	errno = ENOMEM;
	return -1;
}

/* The last path component, for messages. */
static const char *
audit_base(const char *path)
{
	const char	*slash;

	return (slash = strrchr(path, '/')) != NULL ? slash + 1 : path;
}

/*
 * Open a file of the log for reading; -1 with errno, EINVAL for anything
 * but a regular file (opening a FIFO would block brokerd).
 */
static int
audit_open_read(const char *path)
{
	struct stat	st;
	int		fd;

	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/*
 * Hand each line of one file to fn, in a buffer of bounded size: a line
 * longer than AUDIT_LINE_MAX is reported once as AUDIT_LONG and skipped.
 * Returns fn's 1 when it stopped the walk, else 0.
 */
static int
audit_walk_file(const char *path, char *buf, audit_line_fn fn, void *arg)
{
	char	 msg[256], *nl;
	size_t	 len = 0, start, linelen;
	ssize_t	 n;
	int64_t	 lineno = 0;
	int	 fd, rv = 0, skipping = 0;

	if ((fd = audit_open_read(path)) == -1) {
		if (errno == ENOENT)
			return 0;
		snprintf(msg, sizeof msg, "cannot open: %s", errno == EINVAL ?
		    "not a regular file" : strerror(errno));
		return fn(audit_base(path), 0, msg, strlen(msg), AUDIT_IOERR,
		    arg);
	}
	for (;;) {
		n = read(fd, buf + len, AUDIT_BUF_SIZE - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			snprintf(msg, sizeof msg, "cannot read: %s",
			    strerror(errno));
			rv = fn(audit_base(path), lineno + 1, msg, strlen(msg),
			    AUDIT_IOERR, arg);
			goto done;
		}
		if (n == 0)
			break;
		len += n;
		start = 0;
		while ((nl = memchr(buf + start, '\n', len - start)) != NULL) {
			linelen = nl - (buf + start);
			if (skipping)
				skipping = 0;	/* the end of a long line */
			else {
				lineno++;
				rv = fn(audit_base(path), lineno, buf + start,
				    linelen, linelen > AUDIT_LINE_MAX ?
				    AUDIT_LONG : AUDIT_WHOLE, arg);
				if (rv != 0)
					goto done;
			}
			start = nl + 1 - buf;
		}
		memmove(buf, buf + start, len - start);
		len -= start;
		if (len > AUDIT_LINE_MAX) {
			if (!skipping) {
				lineno++;
				rv = fn(audit_base(path), lineno, buf, len,
				    AUDIT_LONG, arg);
				if (rv != 0)
					goto done;
			}
			skipping = 1;
			len = 0;
		}
	}
	if (len > 0 && !skipping)
		rv = fn(audit_base(path), lineno + 1, buf, len, AUDIT_CUT, arg);
done:
	close(fd);
	return rv;
}

/* Hand every line of the chain, in chain order, to fn. */
static int
audit_walk(audit_line_fn fn, void *arg)
{
	return audit_store->walk(fn, arg);
}

/* Hand every line of every file of the log, in chain order, to fn. */
static int
audit_file_walk(audit_line_fn fn, void *arg)
{
	unsigned long long	 maxnum;
	char			**files, *buf;
	size_t			 n, i;
	int			 rv = 0;

	if (audit_files(&files, &n, &maxnum) == -1)
		return -1;
	if ((buf = malloc(AUDIT_BUF_SIZE)) == NULL) {
		audit_files_free(files, n);
		return -1;
	}
	for (i = 0; i < n && rv == 0; i++)
		rv = audit_walk_file(files[i], buf, fn, arg);
	free(buf);
	audit_files_free(files, n);
	return 0;
}

/*
 * The last record of one file into r: *found is 0 when the file is empty
 * or missing; -1 with a message when its end is not a whole, valid record.
 */
static int
audit_tail_file(const char *path, struct audit_rec *r, int *found, char *err,
    size_t errsz)
{
	struct stat	 st;
	char		*buf = NULL, *start, *nl;
	size_t		 want, got = 0, linelen;
	ssize_t		 n;
	int		 fd, rv = -1;

	*found = 0;
	if ((fd = audit_open_read(path)) == -1) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errsz, "cannot open: %s", errno == EINVAL ?
		    "not a regular file" : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1) {
		snprintf(err, errsz, "fstat: %s", strerror(errno));
		goto done;
	}
	if (st.st_size == 0) {
		rv = 0;
		goto done;
	}
	/* Enough for the longest line, its newline and the one before. */
	want = st.st_size < AUDIT_LINE_MAX + 2 ? (size_t)st.st_size :
	    AUDIT_LINE_MAX + 2;
	if ((buf = malloc(want)) == NULL) {
		snprintf(err, errsz, "out of memory");
		goto done;
	}
	if (lseek(fd, st.st_size - want, SEEK_SET) == -1) {
		snprintf(err, errsz, "lseek: %s", strerror(errno));
		goto done;
	}
	while (got < want) {
		n = read(fd, buf + got, want - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errsz, "cannot read: %s",
			    n == 0 ? "file shrank" : strerror(errno));
			goto done;
		}
		got += n;
	}
	if (buf[want - 1] != '\n') {
		snprintf(err, errsz, "the last line has no newline (a record "
		    "cut short)");
		goto done;
	}
	if ((nl = memrchr(buf, '\n', want - 1)) != NULL)
		start = nl + 1;
	else if (want == (size_t)st.st_size)
		start = buf;
	else {
		snprintf(err, errsz, "the last line is longer than %d bytes",
		    AUDIT_LINE_MAX);
		goto done;
	}
	linelen = buf + want - 1 - start;
	if (linelen > AUDIT_LINE_MAX) {
		snprintf(err, errsz, "the last line is longer than %d bytes",
		    AUDIT_LINE_MAX);
		goto done;
	}
	if (audit_check(start, linelen, r, err, errsz) == -1)
		goto done;
	*found = 1;
	rv = 0;
done:
	free(buf);
	close(fd);
	return rv;
}

/* Load the key, or make one when no log exists yet. */
static int
audit_key_load(int have_log, char *err, size_t errsz)
{
	struct stat	 st;
	char		*path, *buf;
	size_t		 len;
	int		 rv = -1;

	path = path_join(audit_dir, AUDIT_KEY_FILE);
	if (stat(path, &st) == -1) {
		if (audit_offline) {
			snprintf(err, errsz, "audit: cannot read the key %s: %s",
			    path, strerror(errno));
			goto done;
		}
		if (errno != ENOENT) {
			snprintf(err, errsz, "audit: %s: %s", path,
			    strerror(errno));
			goto done;
		}
		if (have_log && audit_store->shared) {
			snprintf(err, errsz, "audit: the key %s is missing but "
			    "%s holds an audit chain, which this host could not "
			    "extend: copy audit.key from another host of the "
			    "fleet to %s (mode 0600, owned by brokerd's user)",
			    path, audit_store->where, path);
			goto done;
		}
		if (have_log) {
			snprintf(err, errsz, "audit: the key %s is missing but "
			    "an audit log exists, which could not be verified "
			    "any more; restore the key, or move the audit.log* "
			    "files aside to start a new log", path);
			goto done;
		}
		if (getrandom(audit_key, sizeof audit_key, 0) !=
		    (ssize_t)sizeof audit_key ||
		    file_write_atomic(path, audit_key, sizeof audit_key,
		    0600) == -1) {
			snprintf(err, errsz, "audit: cannot create the key %s: "
			    "%s", path, strerror(errno));
			goto done;
		}
		log_info("audit: new key in %s", path);
		rv = 0;
		goto done;
	}
	/* A copy's mode is its holder's business: it is only read. */
	if ((st.st_mode & 077) && !audit_offline) {
		snprintf(err, errsz, "audit: the key %s is open to others "
		    "(mode %03o); chmod 600 it", path,
		    (unsigned)(st.st_mode & 0777));
		goto done;
	}
	if ((buf = file_read(path, 2 * AUDIT_KEY_BYTES, &len)) == NULL) {
		snprintf(err, errsz, "audit: cannot read the key %s: %s", path,
		    strerror(errno));
		goto done;
	}
	if (len == AUDIT_KEY_BYTES) {
		memcpy(audit_key, buf, sizeof audit_key);
		rv = 0;
	} else
		snprintf(err, errsz, "audit: the key %s has %zu bytes, not %d",
		    path, len, AUDIT_KEY_BYTES);
	explicit_bzero(buf, len);
	free(buf);
done:
	free(path);
	return rv;
}

/* Open audit.log for appending and learn its size. */
static int
audit_open(void)
{
	struct stat	st;
	int		fd;

	fd = open(audit_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd == -1)
		return -1;
	if (fstat(fd, &st) == -1) {
		close(fd);
		return -1;
	}
	if (audit_fd != -1)
		close(audit_fd);
	audit_fd = fd;
	audit_size = st.st_size;
	audit_dirty = 0;
	return 0;
}

/*
 * Open the audit log of state_dir: load or create the key, and find the
 * chain's tail (last seq and hash) from the files. -1 with a message when
 * the key is missing for an existing log or the last record is damaged.
 */
int
audit_init(const char *state_dir, long rotate_bytes, int syslog_mirror,
    char *err, size_t errsz)
{
	int	have_log = 0;

	audit_close();
	if ((audit_dir = strdup(state_dir)) == NULL) {
		snprintf(err, errsz, "audit: out of memory");
		return -1;
	}
	audit_path = path_join(state_dir, AUDIT_FILE);
	audit_rotate_bytes = rotate_bytes;
	audit_syslog = syslog_mirror;

	if (audit_store->exists(&have_log, err, errsz) == -1 ||
	    audit_key_load(have_log, err, errsz) == -1)
		goto fail;
	if (audit_mac_setup() == -1) {
		snprintf(err, errsz, "audit: HMAC-SHA256 is not available");
		goto fail;
	}
	if (audit_store->open(&audit_seq, audit_prev, err, errsz) == -1)
		goto fail;
	audit_open_store = 1;
	log_debug("audit: %s, last seq %lld", audit_store->where,
	    (long long)audit_seq);
	return 0;
fail:
	audit_close();
	return -1;
}

/*
 * Open the audit log of a copy or backup in dir to check it, read-only:
 * the key must be there, and nothing in dir is created, rotated or
 * written (hgctl audit verify --state-dir). The chain's tail is not
 * known, so a verify cannot tell records cut from the end.
 */
int
audit_open_dir(const char *dir, char *err, size_t errsz)
{
	audit_close();
	audit_offline = 1;
	audit_store = &audit_file;
	if ((audit_dir = strdup(dir)) == NULL) {
		snprintf(err, errsz, "audit: out of memory");
		goto fail;
	}
	audit_path = path_join(dir, AUDIT_FILE);
	if (audit_key_load(1, err, errsz) == -1)
		goto fail;
	if (audit_mac_setup() == -1) {
		snprintf(err, errsz, "audit: HMAC-SHA256 is not available");
		goto fail;
	}
	audit_open_store = 1;
	return 0;
fail:
	audit_close();
	return -1;
}

/* Whether the files hold records (and the next rotated file's number). */
static int
audit_file_exists(int *have, char *err, size_t errsz)
{
	struct stat		 st;
	unsigned long long	 maxnum;
	char			**files = NULL;
	size_t			 n = 0, i;

	*have = 0;
	if (audit_files(&files, &n, &maxnum) == -1) {
		snprintf(err, errsz, "audit: cannot list %s: %s", audit_dir,
		    strerror(errno));
		return -1;
	}
	audit_next_num = maxnum + 1;
	for (i = 0; i < n; i++)
		if (stat(files[i], &st) == 0 && st.st_size > 0)
			*have = 1;
	audit_files_free(files, n);
	return 0;
}

/*
 * Find the chain's tail (the last record of audit.log, else of a rotated
 * file) and open audit.log for appending; -1 with err when the last
 * record is damaged.
 */
static int
audit_file_open(int64_t *seq, char hash[65], char *err, size_t errsz)
{
	struct audit_rec	 r;
	unsigned long long	 maxnum;
	char			**files = NULL, msg[256];
	size_t			 n = 0, i;
	int			 found = 0;

	if (audit_files(&files, &n, &maxnum) == -1) {
		snprintf(err, errsz, "audit: cannot list %s: %s", audit_dir,
		    strerror(errno));
		return -1;
	}
	for (i = n; i-- > 0 && !found;) {
		if (audit_tail_file(files[i], &r, &found, msg,
		    sizeof msg) == -1) {
			snprintf(err, errsz, "audit: the end of %s is damaged: "
			    "%s; check it, then remove the damaged end or move "
			    "the file aside", files[i], msg);
			goto fail;
		}
	}
	if (found) {
		*seq = r.seq;
		memcpy(hash, r.hash, 65);
	} else {
		*seq = 0;
		memcpy(hash, AUDIT_ZERO_HASH, 65);
	}
	if (audit_open() == -1) {
		snprintf(err, errsz, "audit: cannot open %s: %s", audit_path,
		    strerror(errno));
		goto fail;
	}
	audit_files_free(files, n);
	return 0;
fail:
	audit_files_free(files, n);
	return -1;
}

/* Close audit.log. */
static void
audit_file_close(void)
{
	if (audit_fd != -1)
		close(audit_fd);
	audit_fd = -1;
}

/* Close the log and forget the key. */
void
audit_close(void)
{
	audit_refusal_flush();
	if (audit_open_store && audit_store->close != NULL)
		audit_store->close();
	audit_file_close();	/* one a failed audit_file_open left */
	audit_open_store = 0;
	free(audit_dir);
	free(audit_path);
	audit_dir = audit_path = NULL;
	explicit_bzero(audit_key, sizeof audit_key);
	audit_seq = 0;
	memcpy(audit_prev, AUDIT_ZERO_HASH, sizeof audit_prev);
	audit_dirty = 0;
	audit_failed = 0;
	audit_offline = 0;
}

/* The seq of the last record written, 0 before the first. */
int64_t
audit_last_seq(void)
{
	return audit_seq;
}

/* The chain hash of the last record written (zeros before the first). */
const char *
audit_last_hash(void)
{
	return audit_prev;
}

/* Keep the chain in chain (before audit_init; NULL: the files). */
void
audit_use_store(const struct audit_store *chain)
{
	audit_store = chain != NULL ? chain : &audit_file;
}

/* The "host" member of the records to come. */
void
audit_set_host(const char *host_id)
{
	snprintf(audit_host, sizeof audit_host, "%s", host_id != NULL ?
	    host_id : "");
}

/* The first 16 hex digits of the SHA-256 of the key, to name it. */
void
audit_key_id(char out[17])
{
	char	hex[65];

	sha256_hex(audit_key, sizeof audit_key, hex);
	memcpy(out, hex, 16);
	out[16] = '\0';
}

/* The key's file, for messages (NULL before audit_init). */
const char *
audit_key_path(void)
{
	static char	path[PATH_MAX];

	if (audit_dir == NULL)
		return NULL;
	snprintf(path, sizeof path, "%s/%s", audit_dir, AUDIT_KEY_FILE);
	return path;
}

/* A JSON string of s cut to AUDIT_FIELD_MAX bytes, or JSON null for NULL. */
static struct json_object *
audit_string(const char *s)
{
	size_t	len;

	if (s == NULL)
		return NULL;
	len = strlen(s);
	if (len > AUDIT_FIELD_MAX) {
		/* Cut before a UTF-8 continuation byte, not inside a char. */
		len = AUDIT_FIELD_MAX;
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	return json_object_new_string_len(s, len);
}

/* Fsync the state directory, so that a rename or a new file is durable. */
static void
audit_sync_dir(void)
{
	int	fd;

	if ((fd = open(audit_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    fsync(fd) == -1)
		log_warn("audit: fsync %s", audit_dir);
	if (fd != -1)
		close(fd);
}

/*
 * Move audit.log to the next free audit.log.NNNNNN and start a new one.
 * On failure the current file stays open and takes the next records.
 */
static int
audit_rotate(void)
{
	struct stat	 st;
	char		 name[64], *target;
	int		 tries, rc;

	if (fdatasync(audit_fd) == -1)
		log_warn("audit: fdatasync %s", audit_path);
	for (tries = 0;; tries++) {
		snprintf(name, sizeof name, "%s.%06llu", AUDIT_FILE,
		    audit_next_num);
		target = path_join(audit_dir, name);
		rc = renameat2(AT_FDCWD, audit_path, AT_FDCWD, target,
		    RENAME_NOREPLACE);
		if (rc == -1 && errno == EINVAL) {
			/* No RENAME_NOREPLACE on this file system. */
			if (stat(target, &st) == 0)
				errno = EEXIST;
			else
				rc = rename(audit_path, target);
		}
		free(target);
		if (rc == 0) {
			audit_next_num++;
			break;
		}
		if (errno == EEXIST && tries < 1000) {
			audit_next_num++;	/* numbers are never reused */
			continue;
		}
		/* A rotation whose open failed moved it already. */
		if (errno == ENOENT)
			break;
		log_warn("audit: rotate %s", audit_path);
		return -1;
	}
	if (audit_open() == -1) {
		log_warn("audit: open %s after rotation", audit_path);
		return -1;
	}
	audit_sync_dir();
	log_info("audit: rotated to %s", name);
	return 0;
}

/* Cut the file back to its last whole record after a failed write. */
static int
audit_heal(void)
{
	if (ftruncate(audit_fd, audit_size) == -1) {
		log_warn("audit: ftruncate %s", audit_path);
		return -1;
	}
	audit_dirty = 0;
	return 0;
}

/* Write all of len bytes, retrying short writes. */
static int
audit_write(const char *p, size_t len)
{
	ssize_t	n;

	while (len > 0) {
		if ((n = write(audit_fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/*
 * The record's text, PLAIN JSON with readable slashes, into *textp; a
 * detail that makes it longer than AUDIT_RECORD_MAX is replaced by a note.
 */
static int
audit_serialize(struct json_object *rec, const char **textp, size_t *lenp)
{
	struct json_object	*note;
	const int		 flags = JSON_C_TO_STRING_PLAIN |
				    JSON_C_TO_STRING_NOSLASHESCAPE;

	*textp = json_object_to_json_string_length(rec, flags, lenp);
	if (*textp == NULL)
		return -1;
	if (*lenp + AUDIT_SUFFIX_LEN > AUDIT_RECORD_MAX) {
		note = json_object_new_object();
		json_object_object_add(note, "omitted",
		    json_object_new_string("detail too large for the record"));
		json_object_object_add(note, "bytes",
		    json_object_new_int64((int64_t)*lenp));
		json_object_object_add(rec, "detail", note);
		*textp = json_object_to_json_string_length(rec, flags, lenp);
		if (*textp == NULL ||
		    *lenp + AUDIT_SUFFIX_LEN > AUDIT_RECORD_MAX)
			return -1;
	}
	/* json-c escapes control characters; a raw newline is a bug. */
	if (memchr(*textp, '\n', *lenp) != NULL || *lenp < 2 ||
	    (*textp)[*lenp - 1] != '}')
		return -1;
	return 0;
}

/*
 * Send the anchor of the record just written off the file: one line
 * "audit seq=N hash=H RECORD" to syslog (LOG_AUTHPRIV), or under systemd
 * a journal entry with SYSLOG_IDENTIFIER=hostgate-audit and the fields
 * HOSTGATE_AUDIT_SEQ and HOSTGATE_AUDIT_HASH. H is the record's chain hash
 * (the next record's prev), so a collector holds the chain's head.
 */
static void
audit_anchor(const char *action, const char *line, size_t len)
{
	if (strcmp(log_destination(), "journal") == 0 &&
	    sd_journal_send("MESSAGE=audit seq=%lld hash=%s action=%s",
	    (long long)audit_seq, audit_prev, action,
	    "PRIORITY=%d", LOG_INFO, "SYSLOG_FACILITY=10",
	    "SYSLOG_IDENTIFIER=hostgate-audit",
	    "HOSTGATE_AUDIT_SEQ=%lld", (long long)audit_seq,
	    "HOSTGATE_AUDIT_HASH=%s", audit_prev, NULL) >= 0)
		return;
	syslog(LOG_AUTHPRIV | LOG_INFO, "audit seq=%lld hash=%s %.*s",
	    (long long)audit_seq, audit_prev, (int)len, line);
}

/*
 * The line of a record: rec's "seq" and "prev" set, serialized, and the
 * final "}" turned into the hmac member. *linep is malloc'd, NUL-ended at
 * *lenp (no newline) with room for one more byte.
 */
int
audit_line_make(struct json_object *rec, int64_t seq, const char *prev,
    char **linep, size_t *lenp)
{
	const char	*text;
	char		 mac[65], *line;
	size_t		 tlen, llen;

	json_object_object_add(rec, "seq", json_object_new_int64(seq));
	json_object_object_add(rec, "prev", json_object_new_string(prev));
	if (audit_serialize(rec, &text, &tlen) == -1 ||
	    audit_mac(text, tlen, "", 0, mac) == -1)
		return -1;
	/* The same bytes, with the final "}" turned into the hmac member. */
	llen = tlen - 1 + AUDIT_SUFFIX_LEN;
	if ((line = malloc(llen + 2)) == NULL)
		return -1;
	memcpy(line, text, tlen - 1);
	memcpy(line + tlen - 1, AUDIT_HMAC_PRE, AUDIT_HMAC_PRE_LEN);
	memcpy(line + tlen - 1 + AUDIT_HMAC_PRE_LEN, mac, 64);
	memcpy(line + llen - 2, "\"}", 2);
	line[llen] = '\0';
	*linep = line;
	*lenp = llen;
	return 0;
}

/*
 * Append the line of rec to the file chain: its seq (and chain hash), -2
 * when written but not confirmed on disk, or -1 (logged).
 */
static int64_t
audit_file_append(struct json_object *rec, int64_t time_ms, int sync,
    char hash[65], char **linep, size_t *lenp)
{
	const char	*action = json_str(rec, "action");
	char		*line;
	size_t		 llen;

	if (audit_line_make(rec, audit_seq + 1, audit_prev, &line,
	    &llen) == -1) {
		log_warnx("audit: cannot make a %s record", action);
		return -1;
	}
	*linep = line;
	*lenp = llen;
	line[llen++] = '\n';
	if (audit_rotate_bytes > 0 && audit_size > 0 &&
	    audit_size + (off_t)llen > audit_rotate_bytes)
		audit_rotate();
	if (audit_dirty && audit_heal() == -1) {
		audit_fail(errno, "ftruncate");
		return -1;
	}
	if (audit_write(line, llen) == -1) {
		audit_fail(errno, "write");
		log_warn("audit: write %s; a %s record is lost", audit_path,
		    action);
		audit_dirty = 1;
		audit_heal();
		return -1;
	}
	line[--llen] = '\0';
	audit_seq++;
	sha256_hex(line, llen, audit_prev);
	memcpy(hash, audit_prev, 65);
	audit_size += llen + 1;
	/* fdatasync covers the size change that makes the record readable. */
	if (sync && fdatasync(audit_fd) == -1) {
		audit_fail(errno, "fdatasync");
		log_warn("audit: fdatasync %s; record %lld not confirmed",
		    audit_path, (long long)audit_seq);
		return -2;
	}
	return audit_seq;
}

/*
 * Append a record of a decision; detail is taken. With sync, returns only
 * once the record is on disk (or committed to the store). The seq, or -1
 * (logged): a caller that asked for sync must then refuse what it was
 * about to grant.
 */
int64_t
audit_append(const char *action, const char *user, const char *session,
    int allowed, const char *reason, struct json_object *detail, int sync)
{
	struct json_object	*rec;
	char			 when[32], hash[65], *line = NULL;
	size_t			 llen = 0;
	int64_t			 seq = -1, ms;

	if (detail == NULL)
		detail = json_object_new_object();
	/* What an HTTP request caused carries its id (log.c's context). */
	if (log_ctx_request_id() != NULL &&
	    json_object_is_type(detail, json_type_object) &&
	    !json_object_object_get_ex(detail, "request_id", NULL))
		json_object_object_add(detail, "request_id",
		    json_object_new_string(log_ctx_request_id()));
	if (!audit_open_store || audit_offline || action == NULL) {
		log_warnx("audit: log not open; a %s record is lost",
		    action != NULL ? action : "(null)");
		json_object_put(detail);
		return -1;
	}
	ms = now_wall_ms();
	iso8601_ms(ms, when);
	rec = json_object_new_object();
	json_object_object_add(rec, "seq", json_object_new_int64(0));
	json_object_object_add(rec, "time", json_object_new_string(when));
	if (audit_host[0] != '\0')
		json_object_object_add(rec, "host",
		    json_object_new_string(audit_host));
	json_object_object_add(rec, "action", audit_string(action));
	json_object_object_add(rec, "user", audit_string(user));
	json_object_object_add(rec, "session", audit_string(session));
	json_object_object_add(rec, "allowed",
	    json_object_new_boolean(allowed != 0));
	json_object_object_add(rec, "reason", audit_string(reason));
	json_object_object_add(rec, "detail", detail);
	json_object_object_add(rec, "prev", NULL);

	seq = audit_store->append(rec, ms, sync, hash, &line, &llen);
	if (seq == -2) {
		seq = -1;
		goto mirror;	/* written, not confirmed */
	}
	if (seq < 0)
		goto done;	/* logged */
	/* A fleet's: another host's records may lie between. */
	if (seq > audit_seq) {
		audit_seq = seq;
		memcpy(audit_prev, hash, sizeof audit_prev);
	}
	audit_failed = 0;
mirror:
	if (audit_syslog && line != NULL)
		audit_anchor(action, line, llen);
done:
	free(line);
	json_object_put(rec);
	return seq;
}

/* Remember why the last append failed, for audit_ready. */
static void
audit_fail(int err, const char *what)
{
	audit_failed = err != 0 ? err : EIO;
	snprintf(audit_fail_why, sizeof audit_fail_why, "%s %s: %s", what,
	    audit_path != NULL ? audit_path : AUDIT_FILE,
	    strerror(audit_failed));
}

/*
 * Whether the next record can be written: the log is open, its file
 * system has room for AUDIT_RESERVE more bytes and is writable, and the
 * last append did not fail for a cause other than space (such a failure
 * holds until an append succeeds). 0, or -1 with the reason in why.
 */
int
audit_ready(char *why, size_t whysz)
{
	if (!audit_open_store) {
		snprintf(why, whysz, "the audit log is not open");
		return -1;
	}
	return audit_store->ready(why, whysz);
}

/* audit_ready of the files: open, room, writable, no failed write. */
static int
audit_file_ready(char *why, size_t whysz)
{
	struct statvfs	sv;
	uint64_t	avail;

	if (audit_fd == -1) {
		snprintf(why, whysz, "the audit log is not open");
		return -1;
	}
	if (fstatvfs(audit_fd, &sv) == -1) {
		snprintf(why, whysz, "the audit log's file system: %s",
		    strerror(errno));
		return -1;
	}
	if (sv.f_flag & ST_RDONLY) {
		snprintf(why, whysz, "the audit log's file system is "
		    "read-only");
		return -1;
	}
	avail = (uint64_t)sv.f_bavail * (sv.f_frsize ? sv.f_frsize :
	    sv.f_bsize);
	if (avail < AUDIT_RESERVE) {
		snprintf(why, whysz, "the audit log's file system is full "
		    "(%llu bytes free, %d needed): records cannot be written",
		    (unsigned long long)avail, AUDIT_RESERVE);
		return -1;
	}
	if (audit_failed != 0 && audit_failed != ENOSPC &&
	    audit_failed != EDQUOT) {
		snprintf(why, whysz, "the last record could not be written "
		    "(%s)", audit_fail_why);
		return -1;
	}
	return 0;
}

/* Whether an anchor's (or a file's) last_seq and last_hash are seq, hash. */
static int
audit_archived_names(struct json_object *o, int64_t seq, const char *hash)
{
	const char	*h;
	int64_t		 last;

	return json_int(o, "last_seq", &last) == 0 && last == seq &&
	    (h = json_str(o, "last_hash")) != NULL && strcmp(h, hash) == 0;
}

/*
 * Whether a verified line is an audit_archived record that vouches for
 * seq 1 to seq: its detail (or one of its files, all of which a move cut
 * short may not have taken) names seq as the last archived, with hash
 * the chain hash of that record (the prev of the oldest record left).
 */
static int
audit_archived_covers(const char *line, size_t len, int64_t seq,
    const char *hash)
{
	struct json_tokener	*tok;
	struct json_object	*obj, *detail, *files;
	const char		*action;
	size_t			 i, n;
	int			 yes = 0;

	/* Cheap first: most records are something else. */
	if (memmem(line, len, "\"audit_archived\"", 16) == NULL)
		return 0;
	if ((tok = json_tokener_new()) == NULL)
		return 0;
	obj = json_tokener_parse_ex(tok, line, len);
	if (obj != NULL && (action = json_str(obj, "action")) != NULL &&
	    strcmp(action, "audit_archived") == 0 &&
	    json_object_object_get_ex(obj, "detail", &detail) &&
	    json_object_is_type(detail, json_type_object)) {
		yes = audit_archived_names(detail, seq, hash);
		if (!yes && json_object_object_get_ex(detail, "files",
		    &files) && json_object_is_type(files, json_type_array)) {
			n = json_object_array_length(files);
			for (i = 0; i < n && !yes; i++)
				yes = audit_archived_names(
				    json_object_array_get_idx(files, i), seq,
				    hash);
		}
	}
	json_object_put(obj);
	json_tokener_free(tok);
	return yes;
}

/* Record what is wrong with the record the verifier expected next. */
static int
audit_verify_bad(struct audit_verify_state *v, const char *file,
    int64_t lineno, const char *what)
{
	if (v->gap_seq > 0 && v->anchor_seq == 0) {
		/* An error past a gap no anchor vouched for yet: the gap. */
		v->bad_seq = 1;
		snprintf(v->err, v->errsz, "%s", v->gap_err);
		return 1;
	}
	v->bad_seq = v->expect;
	if (audit_store->shared)
		snprintf(v->err, v->errsz, "%s (%s, seq %lld)", what, file,
		    (long long)(lineno > 0 ? lineno : v->expect));
	else if (lineno > 0)
		snprintf(v->err, v->errsz, "%s (%s line %lld)", what, file,
		    (long long)lineno);
	else
		snprintf(v->err, v->errsz, "%s (%s)", what, file);
	return 1;
}

/* Check one line against the chain so far. */
static int
audit_verify_line(const char *file, int64_t lineno, const char *line,
    size_t len, enum audit_kind kind, void *arg)
{
	struct audit_verify_state	*v = arg;
	struct audit_rec		 r;
	char				 msg[256];

	switch (kind) {
	case AUDIT_IOERR:
		snprintf(msg, sizeof msg, "%.*s", (int)len, line);
		return audit_verify_bad(v, file, lineno, msg);
	case AUDIT_LONG:
		snprintf(msg, sizeof msg, "line longer than %d bytes",
		    AUDIT_LINE_MAX);
		return audit_verify_bad(v, file, lineno, msg);
	case AUDIT_CUT:
		return audit_verify_bad(v, file, lineno, "record cut short "
		    "(the file ends inside it: truncated)");
	case AUDIT_WHOLE:
		break;
	}
	if (audit_check(line, len, &r, msg, sizeof msg) == -1)
		return audit_verify_bad(v, file, lineno, msg);
	if (v->expect == 1 && r.seq > 1 && v->gap_seq == 0) {
		/* Older files archived, or removed: an anchor must tell. */
		snprintf(msg, sizeof msg, "missing (deleted, or records out of "
		    "order): the next record has seq %lld", (long long)r.seq);
		audit_verify_bad(v, file, lineno, msg);
		snprintf(v->gap_err, sizeof v->gap_err, "%s", v->err);
		v->bad_seq = 0;
		v->err[0] = '\0';
		v->gap_seq = r.seq;
		memcpy(v->gap_prev, r.prev, sizeof v->gap_prev);
		v->expect = r.seq;
		memcpy(v->prev, r.prev, sizeof v->prev);
	}
	if (r.seq > v->expect) {
		snprintf(msg, sizeof msg, "missing (deleted, or records out of "
		    "order): the next record has seq %lld", (long long)r.seq);
		return audit_verify_bad(v, file, lineno, msg);
	}
	if (r.seq < v->expect) {
		snprintf(msg, sizeof msg, "found seq %lld again after seq %lld "
		    "(record duplicated or out of order)", (long long)r.seq,
		    (long long)v->expect - 1);
		return audit_verify_bad(v, file, lineno, msg);
	}
	if (strcmp(r.prev, v->prev) != 0) {
		snprintf(msg, sizeof msg, "prev is not the hash of record %lld "
		    "(record inserted or replaced)", (long long)v->expect - 1);
		return audit_verify_bad(v, file, lineno, msg);
	}
	if (v->head_seq == r.seq) {
		v->head_seen = 1;
		if (strcmp(r.hash, v->head_hash) != 0) {
			snprintf(msg, sizeof msg, "its hash is not the anchor's "
			    "%.16s... (record replaced, or the log rewritten)",
			    v->head_hash);
			return audit_verify_bad(v, file, lineno, msg);
		}
	}
	if (v->gap_seq > 0 && v->anchor_seq == 0 &&
	    audit_archived_covers(line, len, v->gap_seq - 1, v->gap_prev))
		v->anchor_seq = r.seq;
	memcpy(v->prev, r.hash, sizeof v->prev);
	v->expect++;
	return 0;
}

/*
 * Walk the whole chain. 0 when valid; -1 with *bad_seq the first bad
 * sequence number (that of a missing record, or the one after the last
 * when records were cut from the end) and err saying what is wrong, or
 * *bad_seq 0 when the log is not open. *nrecords: the last seq.
 */
int
audit_verify(int64_t *nrecords, int64_t *bad_seq, char *err, size_t errsz)
{
	return audit_verify_head(0, NULL, nrecords, bad_seq, err, errsz);
}

/* audit_verify_chain, in audit_verify's terms. */
int
audit_verify_head(int64_t head_seq, const char *head_hash, int64_t *nrecords,
    int64_t *bad_seq, char *err, size_t errsz)
{
	struct audit_verdict	vd;
	int			rv;

	rv = audit_verify_chain(head_seq, head_hash, &vd, err, errsz);
	*nrecords = vd.last_seq;
	*bad_seq = vd.bad_seq;
	return rv;
}

/*
 * Walk the whole chain, and with head_seq > 0 also check it against an
 * anchor kept off the file: the record with seq head_seq must have the
 * chain hash head_hash, and the log must reach it (records cut from the
 * end and a restart since leave a chain that is whole but shorter than
 * the anchor). The oldest record may be past seq 1 when the files before
 * it were archived and an audit_archived record later in the chain says
 * so. 0 when valid, else -1 (see audit_verify) with vd filled either way.
 */
int
audit_verify_chain(int64_t head_seq, const char *head_hash,
    struct audit_verdict *vd, char *err, size_t errsz)
{
	struct audit_verify_state	v;

	memset(vd, 0, sizeof *vd);
	if (!audit_open_store) {
		snprintf(err, errsz, "the audit log is not open");
		return -1;
	}
	if (audit_dirty)
		audit_heal();
	memset(&v, 0, sizeof v);
	v.expect = 1;
	memcpy(v.prev, AUDIT_ZERO_HASH, sizeof v.prev);
	v.head_seq = head_hash != NULL ? head_seq : 0;
	v.head_hash = head_hash;
	v.err = err;
	v.errsz = errsz;
	if (audit_walk(audit_verify_line, &v) == -1) {
		snprintf(err, errsz, "cannot read %s", audit_store->where);
		vd->bad_seq = 1;
		return -1;
	}
	if (v.bad_seq == 0 && v.gap_seq > 0 && v.anchor_seq == 0) {
		/* No anchor for the gap: files removed, not archived. */
		v.bad_seq = 1;
		snprintf(err, errsz, "%s", v.gap_err);
	}
	vd->first_seq = v.gap_seq > 0 ? v.gap_seq : 1;
	vd->last_seq = v.expect - 1;
	vd->records = v.bad_seq == 1 && v.gap_seq > 0 && v.anchor_seq == 0 ?
	    0 : v.expect - vd->first_seq;
	if (v.bad_seq == 1 && vd->records == 0)
		vd->last_seq = 0;
	vd->anchor_seq = v.anchor_seq;
	if (v.bad_seq == 0 && !audit_offline && v.expect - 1 < audit_seq) {
		/* brokerd knows what it wrote: the end was cut off. */
		v.bad_seq = v.expect;
		snprintf(err, errsz, "the log ends at seq %lld but seq %lld "
		    "was written (records removed from the end: truncated)",
		    (long long)v.expect - 1, (long long)audit_seq);
	} else if (v.bad_seq == 0 && v.head_seq > 0 && v.gap_seq > 0 &&
	    v.head_seq < v.gap_seq) {
		v.bad_seq = v.head_seq;
		snprintf(err, errsz, "the anchor names seq %lld, which is "
		    "archived (seq 1 to %lld): check it against the archive "
		    "(hgctl audit verify --state-dir)", (long long)v.head_seq,
		    (long long)v.gap_seq - 1);
	} else if (v.bad_seq == 0 && v.head_seq > 0 && !v.head_seen) {
		v.bad_seq = v.expect;
		snprintf(err, errsz, "the log ends at seq %lld but the anchor "
		    "names seq %lld: seq %lld to %lld missing (records removed "
		    "from the end: truncated)", (long long)v.expect - 1,
		    (long long)v.head_seq, (long long)v.expect,
		    (long long)v.head_seq);
	} else if (v.bad_seq == 0 && !audit_offline &&
	    v.expect - 1 > audit_seq && !audit_store->shared) {
		/* (The other hosts of a store write too.) */
		v.bad_seq = audit_seq + 1;
		snprintf(err, errsz, "the log goes on past seq %lld, the last "
		    "this brokerd wrote (another writer?)",
		    (long long)audit_seq);
	}
	if (v.bad_seq != 0) {
		vd->bad_seq = v.bad_seq;
		return -1;
	}
	err[0] = '\0';
	return 0;
}

/*
 * A verdict as hgctl prints it: {"ok", "records", "first_seq", "last_seq",
 * "anchor_seq", "bad_seq", "error"}; anchor_seq null when no files were
 * archived, the last two null when ok.
 */
struct json_object *
audit_verdict_json(const struct audit_verdict *vd, int ok, const char *err)
{
	struct json_object	*res;

	res = json_object_new_object();
	json_object_object_add(res, "ok", json_object_new_boolean(ok));
	json_object_object_add(res, "records",
	    json_object_new_int64(vd->records));
	json_object_object_add(res, "first_seq",
	    json_object_new_int64(vd->first_seq));
	json_object_object_add(res, "last_seq",
	    json_object_new_int64(vd->last_seq));
	json_object_object_add(res, "anchor_seq", vd->anchor_seq > 0 ?
	    json_object_new_int64(vd->anchor_seq) : NULL);
	json_object_object_add(res, "bad_seq", ok ? NULL :
	    json_object_new_int64(vd->bad_seq));
	json_object_object_add(res, "error", ok ? NULL :
	    json_object_new_string(err));
	return res;
}

/* Parse two digits at s into *out; -1 when they are not digits. */
static int
audit_2digits(const char *s, int *out)
{
	if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9')
		return -1;
	*out = (s[0] - '0') * 10 + (s[1] - '0');
	return 0;
}

/*
 * Parse an ISO 8601 time into milliseconds since the epoch: YYYY-MM-DD,
 * then optionally T (or a space) HH:MM[:SS[.fff]], then Z or +HH:MM or
 * -HH:MM (UTC when absent).
 */
int
audit_time_ms(const char *s, int64_t *ms)
{
	struct tm	 tm;
	const char	*p;
	int		 y1, y2, mon, day, h = 0, mi = 0, sec = 0, oh, om;
	int64_t		 frac = 0, scale = 100, secs, off = 0;
	time_t		 t;

	if (s == NULL || audit_2digits(s, &y1) == -1 ||
	    audit_2digits(s + 2, &y2) == -1 || s[4] != '-' ||
	    audit_2digits(s + 5, &mon) == -1 || s[7] != '-' ||
	    audit_2digits(s + 8, &day) == -1)
		return -1;
	p = s + 10;
	if (*p == 'T' || *p == ' ') {
		if (audit_2digits(p + 1, &h) == -1 || p[3] != ':' ||
		    audit_2digits(p + 4, &mi) == -1)
			return -1;
		p += 6;
		if (*p == ':') {
			if (audit_2digits(p + 1, &sec) == -1)
				return -1;
			p += 3;
			if (*p == '.') {
				for (p++; *p >= '0' && *p <= '9'; p++) {
					frac += (*p - '0') * scale;
					scale /= 10;
				}
				if (p[-1] == '.')
					return -1;
			}
		}
		if (*p == 'Z')
			p++;
		else if (*p == '+' || *p == '-') {
			if (audit_2digits(p + 1, &oh) == -1 || p[3] != ':' ||
			    audit_2digits(p + 4, &om) == -1 || oh > 23 ||
			    om > 59)
				return -1;
			off = (oh * 3600 + om * 60) * (*p == '+' ? 1 : -1);
			p += 6;
		}
	}
	if (*p != '\0' || mon < 1 || mon > 12 || day < 1 || day > 31 ||
	    h > 23 || mi > 59 || sec > 60)
		return -1;
	memset(&tm, 0, sizeof tm);
	tm.tm_year = y1 * 100 + y2 - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	/* timegm normalizes: 2026-02-31 would become March 3. */
	if (tm.tm_mday != day || tm.tm_mon != mon - 1)
		return -1;
	secs = (int64_t)t - off;
	*ms = secs * 1000 + frac;
	return 0;
}

/* An ISO 8601 time (see audit_time_ms) as Unix seconds; -1 if malformed. */
int
audit_time_parse(const char *s, int64_t *secs)
{
	int64_t	ms;

	if (audit_time_ms(s, &ms) == -1)
		return -1;
	*secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
	return 0;
}

/* Keep a line that matches the query's filters among the newest. */
static int
audit_query_line(const char *file, int64_t lineno, const char *line,
    size_t len, enum audit_kind kind, void *arg)
{
	struct audit_query_state	*q = arg;
	struct json_tokener		*tok;
	struct json_object		*obj, *detail;
	const char			*s;
	int64_t				 seq, ms;
	size_t				 slot;
	int				 allowed;

	if (kind != AUDIT_WHOLE)
		return 0;
	if ((tok = json_tokener_new()) == NULL)
		return 0;
	obj = json_tokener_parse_ex(tok, line, len);
	if (obj == NULL || json_tokener_get_parse_end(tok) != len ||
	    !json_object_is_type(obj, json_type_object) ||
	    json_int(obj, "seq", &seq) == -1)
		goto skip;
	if (q->before > 0 && seq >= q->before)
		goto skip;
	if (q->action != NULL && ((s = json_str(obj, "action")) == NULL ||
	    strcmp(s, q->action) != 0))
		goto skip;
	if (q->user != NULL && ((s = json_str(obj, "user")) == NULL ||
	    strcmp(s, q->user) != 0))
		goto skip;
	if (q->session != NULL && ((s = json_str(obj, "session")) == NULL ||
	    strcmp(s, q->session) != 0))
		goto skip;
	if (q->decision != -1 && (json_flag(obj, "allowed", &allowed) == -1 ||
	    allowed != q->decision))
		goto skip;
	if (q->request_id != NULL && (!json_object_object_get_ex(obj,
	    "detail", &detail) || (s = json_str(detail, "request_id")) ==
	    NULL || strcmp(s, q->request_id) != 0))
		goto skip;
	if (q->has_since || q->has_until) {
		if (audit_time_ms(json_str(obj, "time"), &ms) == -1 ||
		    (q->has_since && ms < q->since) ||
		    (q->has_until && ms >= q->until))
			goto skip;
	}
	slot = q->n % q->cap;
	json_object_put(q->ring[slot]);
	q->ring[slot] = obj;
	q->n++;
	json_tokener_free(tok);
	return 0;
skip:
	json_object_put(obj);
	json_tokener_free(tok);
	return 0;
}

/*
 * Records matching user and action (NULL: any) with a time in [since,
 * until] (Unix seconds, both inclusive, 0: open) and a seq below
 * before_seq (0: any): an array of at most limit (0 or more than
 * AUDIT_QUERY_MAX: AUDIT_QUERY_MAX), the newest ones, newest last.
 * *more, when given, tells whether older matches were left out. Records
 * are read as they are, not verified.
 */
struct json_object *
audit_query_page(const char *user, const char *action, int64_t since,
    int64_t until, int64_t before_seq, size_t limit, int *more)
{
	struct audit_filter	f;

	memset(&f, 0, sizeof f);
	f.user = user;
	f.action = action;
	f.since = since;
	f.until = until;
	f.decision = -1;
	return audit_query_filter(&f, before_seq, limit, more);
}

/*
 * audit_query_page with the filters of f: also "session" (the whole
 * public id), "decision" (-1 any, 0 refused, 1 allowed) and "request_id"
 * (detail.request_id), each NULL or -1 for any.
 */
struct json_object *
audit_query_filter(const struct audit_filter *f, int64_t before_seq,
    size_t limit, int *more)
{
	struct audit_query_state	 q;
	struct json_object		*arr;
	int64_t				 since = f->since, until = f->until;

	arr = json_object_new_array();
	if (more != NULL)
		*more = 0;
	if (audit_dir == NULL)
		return arr;
	memset(&q, 0, sizeof q);
	q.user = f->user;
	q.action = f->action;
	q.session = f->session;
	q.request_id = f->request_id;
	q.decision = f->decision;
	/* Keep the millisecond arithmetic below from overflowing. */
	since = since > AUDIT_SECS_MAX ? AUDIT_SECS_MAX : since < -AUDIT_SECS_MAX ?
	    -AUDIT_SECS_MAX : since;
	until = until > AUDIT_SECS_MAX ? AUDIT_SECS_MAX : until < -AUDIT_SECS_MAX ?
	    -AUDIT_SECS_MAX : until;
	q.has_since = since != 0;
	q.since = since * 1000;
	q.has_until = until != 0;
	q.until = (until + 1) * 1000;
	q.before = before_seq;
	q.cap = limit == 0 || limit > AUDIT_QUERY_MAX ? AUDIT_QUERY_MAX : limit;
	json_object_put(arr);
	return audit_store->query(f, q.has_since ? q.since : INT64_MIN,
	    q.has_until ? q.until : INT64_MAX, before_seq, q.cap, more);
}

/* audit_query_filter of the files: a walk keeping the last cap matches. */
static struct json_object *
audit_file_query(const struct audit_filter *f, int64_t since_ms,
    int64_t until_ms, int64_t before_seq, size_t cap, int *more)
{
	struct audit_query_state	 q;
	struct json_object		*arr;
	size_t				 i, first, count;

	arr = json_object_new_array();
	memset(&q, 0, sizeof q);
	q.user = f->user;
	q.action = f->action;
	q.session = f->session;
	q.request_id = f->request_id;
	q.decision = f->decision;
	q.has_since = since_ms != INT64_MIN;
	q.since = since_ms;
	q.has_until = until_ms != INT64_MAX;
	q.until = until_ms;
	q.before = before_seq;
	q.cap = cap;
	if ((q.ring = calloc(q.cap, sizeof *q.ring)) == NULL) {
		log_warn("audit: query");
		return arr;
	}
	if (audit_walk(audit_query_line, &q) == -1)
		log_warn("audit: cannot list %s", audit_dir);
	count = q.n < q.cap ? q.n : q.cap;
	first = q.n < q.cap ? 0 : q.n % q.cap;
	for (i = 0; i < count; i++)
		json_object_array_add(arr, q.ring[(first + i) % q.cap]);
	if (more != NULL)
		*more = q.n > q.cap;
	free(q.ring);
	return arr;
}

/* audit_query_page without a seq bound. */
struct json_object *
audit_query(const char *user, const char *action, int64_t since,
    int64_t until, size_t limit)
{
	return audit_query_page(user, action, since, until, 0, limit, NULL);
}

/* A short stand-in for a record too large to be sent. */
static struct json_object *
audit_stub(struct json_object *rec)
{
	struct json_object	*o, *v;
	static const char *const keys[] = { "seq", "time", "action", NULL };
	size_t			 i;

	o = json_object_new_object();
	for (i = 0; keys[i] != NULL; i++) {
		if (json_object_object_get_ex(rec, keys[i], &v) &&
		    !json_object_is_type(v, json_type_object) &&
		    !json_object_is_type(v, json_type_array) &&
		    (!json_object_is_type(v, json_type_string) ||
		    json_object_get_string_len(v) <= 64))
			json_object_object_add(o, keys[i], json_object_get(v));
	}
	json_object_object_add(o, "omitted",
	    json_object_new_string("record too large for one reply"));
	return o;
}

/*
 * Drop the oldest records of a query's array until its plain JSON fits in
 * maxbytes (one IPC message); a single record too large for it becomes a
 * stub. Returns how many records were dropped.
 */
size_t
audit_trim(struct json_object *items, size_t maxbytes)
{
	size_t	 i, n, len, total, drop = 0, *sizes;

	n = json_object_array_length(items);
	if (n == 0)
		return 0;
	if ((sizes = calloc(n, sizeof *sizes)) == NULL) {
		json_object_array_del_idx(items, 0, n);
		return n;
	}
	total = 2;
	for (i = 0; i < n; i++) {
		json_object_to_json_string_length(json_object_array_get_idx(
		    items, i), JSON_C_TO_STRING_PLAIN, &len);
		if (len + 2 > maxbytes) {
			json_object_array_put_idx(items, i, audit_stub(
			    json_object_array_get_idx(items, i)));
			json_object_to_json_string_length(
			    json_object_array_get_idx(items, i),
			    JSON_C_TO_STRING_PLAIN, &len);
		}
		sizes[i] = len + (i > 0);
		total += sizes[i];
	}
	while (drop < n && total > maxbytes)
		total -= sizes[drop++];
	if (drop > 0)
		json_object_array_del_idx(items, 0, drop);
	free(sizes);
	return drop;
}

/*
 * Refused requests (a CSRF failure, an unknown cookie or token, a rate
 * limit) are recorded so that a flood cannot fill the disk: the first per
 * (action, reason, client address) in an interval at once, the repeats
 * within it counted and written as one record when the interval ends (the
 * timer), when the table is full (the oldest entry), at audit_close and at
 * audit_refusal_flush (hgctl audit flush).
 */
#define AUDIT_REFUSAL_SLOTS	1024

struct audit_refusal {
	int		 used;
	char		 action[32];
	char		 reason[96];
	char		 client[80];
	char		*user;
	char		*session;
	int64_t		 start;		/* mono ms of the first */
	int64_t		 repeats;	/* counted, not yet written */
	char		 first[32];	/* wall time of the first repeat */
	char		 last[32];	/* and of the last one */
	char		 last_rid[LOG_REQUEST_ID_LEN + 1];
};

static struct audit_refusal	 audit_refusals[AUDIT_REFUSAL_SLOTS];
static struct event		*audit_refusal_ev;
static int64_t			 audit_refusal_ms = 60000;

/* Write the count of an entry's repeats, if any, and free the entry. */
static void
audit_refusal_write(struct audit_refusal *r)
{
	struct json_object	*d;

	if (!r->used)
		return;
	if (r->repeats > 0) {
		d = json_object_new_object();
		json_object_object_add(d, "client",
		    json_object_new_string(r->client));
		json_object_object_add(d, "repeats",
		    json_object_new_int64(r->repeats));
		json_object_object_add(d, "first", json_object_new_string(
		    r->first));
		json_object_object_add(d, "last", json_object_new_string(
		    r->last));
		json_object_object_add(d, "interval_seconds",
		    json_object_new_int64(audit_refusal_ms / 1000));
		/* The last repeat's id; not the request being answered now. */
		json_object_object_add(d, "request_id", r->last_rid[0] != '\0' ?
		    json_object_new_string(r->last_rid) : NULL);
		audit_append(r->action, r->user, r->session, 0, r->reason, d,
		    0);
	}
	free(r->user);
	free(r->session);
	memset(r, 0, sizeof *r);
}

/* Write and free the entries whose interval has ended (all with force). */
static int
audit_refusal_sweep(int force)
{
	int64_t	now = now_mono_ms();
	size_t	i;
	int	n = 0;

	for (i = 0; i < AUDIT_REFUSAL_SLOTS; i++) {
		if (!audit_refusals[i].used || (!force &&
		    now - audit_refusals[i].start < audit_refusal_ms))
			continue;
		if (audit_refusals[i].repeats > 0)
			n++;
		audit_refusal_write(&audit_refusals[i]);
	}
	return n;
}

/* The timer: end the intervals that are over. */
static void
audit_refusal_tick(int fd, short ev, void *arg)
{
	audit_refusal_sweep(0);
}

/* Write every counted refusal now; returns how many records that made. */
int
audit_refusal_flush(void)
{
	return audit_refusal_sweep(1);
}

/* Start the timer of refused requests' intervals (seconds). */
void
audit_refusal_init(struct event_base *base, int interval)
{
	struct timeval	tv;

	audit_refusal_ms = (int64_t)(interval < 1 ? 1 : interval) * 1000;
	tv.tv_sec = interval < 1 ? 1 : interval;
	tv.tv_usec = 0;
	if (audit_refusal_ev == NULL && (audit_refusal_ev = event_new(base, -1,
	    EV_PERSIST, audit_refusal_tick, NULL)) == NULL)
		fatalx("%s: event_new", __func__);
	evtimer_add(audit_refusal_ev, &tv);
}

/* Copy s (NULL: "") into a fixed buffer, cut. */
static void
audit_refusal_copy(char *dst, size_t size, const char *s)
{
	snprintf(dst, size, "%s", s != NULL ? s : "");
}

/*
 * Record a refused request of client (an address) for reason, aggregated
 * as above: returns the record's seq when one was written now, 0 when the
 * refusal was counted, -1 when the record could not be written.
 */
int64_t
audit_refused(const char *action, const char *user, const char *session,
    const char *reason, const char *client)
{
	struct audit_refusal	*r = NULL, *oldest = NULL;
	struct json_object	*d;
	char			 a[32], why[96], cl[80];
	const char		*rid;
	int64_t			 now = now_mono_ms();
	size_t			 i;

	audit_refusal_copy(a, sizeof a, action);
	audit_refusal_copy(why, sizeof why, reason);
	audit_refusal_copy(cl, sizeof cl, client != NULL ? client : "?");
	for (i = 0; i < AUDIT_REFUSAL_SLOTS; i++) {
		if (!audit_refusals[i].used) {
			if (r == NULL)
				r = &audit_refusals[i];
			continue;
		}
		if (strcmp(audit_refusals[i].action, a) == 0 &&
		    strcmp(audit_refusals[i].reason, why) == 0 &&
		    strcmp(audit_refusals[i].client, cl) == 0) {
			r = &audit_refusals[i];
			break;
		}
		if (oldest == NULL || audit_refusals[i].start < oldest->start)
			oldest = &audit_refusals[i];
	}
	if (r != NULL && r->used && now - r->start < audit_refusal_ms) {
		if (r->repeats++ == 0)
			iso8601_ms(now_wall_ms(), r->first);
		iso8601_ms(now_wall_ms(), r->last);
		rid = log_ctx_request_id();
		audit_refusal_copy(r->last_rid, sizeof r->last_rid, rid);
		return 0;
	}
	if (r != NULL && r->used)
		audit_refusal_write(r);		/* its interval is over */
	else if (r == NULL) {
		r = oldest;			/* the table is full */
		audit_refusal_write(r);
	}
	r->used = 1;
	memcpy(r->action, a, sizeof r->action);
	memcpy(r->reason, why, sizeof r->reason);
	memcpy(r->client, cl, sizeof r->client);
	r->user = user != NULL ? strdup(user) : NULL;
	r->session = session != NULL ? strdup(session) : NULL;
	r->start = now;
	d = json_object_new_object();
	json_object_object_add(d, "client", json_object_new_string(cl));
	return audit_append(a, user, session, 0, why, d, 0);
}

/* A time bound of a query, absent, Unix seconds or ISO 8601; -1 if bad. */
static int
audit_filter_time(struct json_object *obj, const char *key, int64_t *secs)
{
	struct json_object	*v;

	*secs = 0;
	if (!json_object_object_get_ex(obj, key, &v) || v == NULL)
		return 0;
	if (json_int(obj, key, secs) == 0)
		return 0;
	return audit_time_parse(json_str(obj, key), secs);
}

/*
 * The filters of a query from a request's members: "user", "action",
 * "session", "record_request_id" (a request's own "request_id" is its
 * id), "decision" ("allowed" or "refused"),
 * "since", "until" (ISO 8601 or Unix seconds). The protocol table checked
 * their types and the decision's value; -1 with err when a time is
 * malformed; f points into obj.
 */
int
audit_filter_parse(struct json_object *obj, struct audit_filter *f,
    char *err, size_t errsz)
{
	const char	*d;

	memset(f, 0, sizeof *f);
	f->decision = -1;
	f->user = json_str(obj, "user");
	f->action = json_str(obj, "action");
	f->session = json_str(obj, "session");
	f->request_id = json_str(obj, "record_request_id");
	/* allowed, refused or denied (an old name of refused) */
	if ((d = json_str(obj, "decision")) != NULL)
		f->decision = strcmp(d, "allowed") == 0;
	if (audit_filter_time(obj, "since", &f->since) == -1 ||
	    audit_filter_time(obj, "until", &f->until) == -1) {
		snprintf(err, errsz, "\"since\" and \"until\" must be ISO 8601 "
		    "times such as 2026-11-29T17:20:13Z or 2026-11-29");
		return -1;
	}
	return 0;
}

/* What audit_file_archive learned of one rotated file. */
struct audit_archive_file {
	int64_t		 first_seq;	/* 0: no record */
	int64_t		 last_seq;
	int64_t		 last_ms;	/* the newest record's time */
	char		 last_hash[65];
	int		 bad;		/* a line that is not a timed record */
};

/* Note one line of a rotated file: its seq, hash and time. */
static int
audit_archive_line(const char *file, int64_t lineno, const char *line,
    size_t len, enum audit_kind kind, void *arg)
{
	struct audit_archive_file	*a = arg;
	struct audit_rec		 r;
	struct json_tokener		*tok;
	struct json_object		*obj;
	char				 msg[256];
	int64_t				 ms = 0;
	int				 timed = 0;

	if (kind != AUDIT_WHOLE || audit_check(line, len, &r, msg,
	    sizeof msg) == -1 || (tok = json_tokener_new()) == NULL) {
		a->bad = 1;
		return 1;
	}
	obj = json_tokener_parse_ex(tok, line, len);
	if (obj != NULL && audit_time_ms(json_str(obj, "time"), &ms) == 0)
		timed = 1;
	json_object_put(obj);
	json_tokener_free(tok);
	if (!timed) {
		a->bad = 1;
		return 1;
	}
	if (a->first_seq == 0) {
		a->first_seq = r.seq;
		a->last_ms = ms;
	}
	a->last_seq = r.seq;
	if (ms > a->last_ms)
		a->last_ms = ms;
	memcpy(a->last_hash, r.hash, sizeof a->last_hash);
	return 0;
}

/* Fsync a directory, so that the renames into or out of it are durable. */
static void
audit_sync_path(const char *dir)
{
	int	fd;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    fsync(fd) == -1)
		log_warn("audit: fsync %s", dir);
	if (fd != -1)
		close(fd);
}

/* {"file", "first_seq", "last_seq", "last_hash"} of an archived file. */
static struct json_object *
audit_archive_json(const char *name, const struct audit_archive_file *a)
{
	struct json_object	*o;

	o = json_object_new_object();
	if (name != NULL)
		json_object_object_add(o, "file",
		    json_object_new_string(name));
	json_object_object_add(o, "first_seq",
	    json_object_new_int64(a->first_seq));
	json_object_object_add(o, "last_seq",
	    json_object_new_int64(a->last_seq));
	json_object_object_add(o, "last_hash",
	    json_object_new_string(a->last_hash));
	return o;
}

/*
 * Whether dir can take the first k of paths: made 0700 when missing, a
 * directory on the state directory's file system (the move is a rename),
 * holding none of their names. -1 with err.
 */
static int
audit_archive_dir_ok(const char *dir, char **paths, size_t k, char *err,
    size_t errsz)
{
	struct stat	 st, dst;
	char		*target;
	size_t		 i;
	int		 rc;

	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		snprintf(err, errsz, "cannot make %s: %s", dir,
		    strerror(errno));
		return -1;
	}
	if (stat(dir, &dst) == -1 || !S_ISDIR(dst.st_mode)) {
		snprintf(err, errsz, "%s is not a directory", dir);
		return -1;
	}
	if (stat(audit_dir, &st) == -1 || st.st_dev != dst.st_dev) {
		snprintf(err, errsz, "%s is not on the file system of %s: "
		    "archive there, then copy the files away", dir, audit_dir);
		return -1;
	}
	for (i = 0; i < k; i++) {
		target = path_join(dir, audit_base(paths[i]));
		rc = lstat(target, &st);
		free(target);
		if (rc == 0) {
			snprintf(err, errsz, "%s already holds a %s: nothing "
			    "archived", dir, audit_base(paths[i]));
			return -1;
		}
	}
	return 0;
}

/*
 * Move the first k of paths into dir, never over a file, each name added
 * to moved; the record at seq names them all. 0, or -1 with err saying
 * how far it got.
 */
static int
audit_archive_move(const char *dir, char **paths, size_t k, int64_t seq,
    struct json_object *moved, char *err, size_t errsz)
{
	struct stat	 st;
	char		*target;
	size_t		 i;
	int		 rc;

	for (i = 0; i < k; i++) {
		target = path_join(dir, audit_base(paths[i]));
		rc = renameat2(AT_FDCWD, paths[i], AT_FDCWD, target,
		    RENAME_NOREPLACE);
		if (rc == -1 && errno == EINVAL) {
			/* No RENAME_NOREPLACE on this file system. */
			if (lstat(target, &st) == 0)
				errno = EEXIST;
			else
				rc = rename(paths[i], target);
		}
		free(target);
		if (rc == -1) {
			snprintf(err, errsz, "moved %zu of %zu files to %s, "
			    "then %s: %s (the audit_archived record at seq "
			    "%lld names every file: move the rest by hand)",
			    i, k, dir, audit_base(paths[i]), strerror(errno),
			    (long long)seq);
			break;
		}
		json_object_array_add(moved,
		    json_object_new_string(audit_base(paths[i])));
		log_info("audit: archived %s to %s", audit_base(paths[i]), dir);
	}
	audit_sync_path(dir);
	audit_sync_path(audit_dir);
	return i == k ? 0 : -1;
}

/*
 * audit_archive of the files: the oldest rotated files whose records are
 * all older than before_ms (never audit.log, never one with a record at
 * or after it) are moved to dir, once the audit_archived record that
 * names them (each file's last seq and chain hash, and the whole set's)
 * is on disk: a move cut short leaves files that record still vouches
 * for. Refused when the chain is not whole, so that an archive never
 * hides a break. *resp: {anchor_seq, to, files, first_seq, last_seq,
 * last_hash}, anchor_seq null when nothing was old enough.
 */
static int
audit_file_archive(int64_t before_ms, const char *to,
    struct json_object **resp, char *err, size_t errsz)
{
	struct audit_verdict		 vd;
	struct audit_archive_file	*a = NULL, all;
	struct json_object		*detail, *files, *moved, *res;
	unsigned long long		 maxnum;
	char				**paths = NULL, *dir = NULL;
	char				*buf = NULL, msg[512];
	size_t				 n = 0, i, k;
	int64_t				 seq;
	int				 rv = -1;

	*resp = NULL;
	if (audit_verify_chain(0, NULL, &vd, msg, sizeof msg) == -1) {
		snprintf(err, errsz, "the audit log is not whole (first bad "
		    "record at seq %lld: %s): nothing archived; see hgctl "
		    "audit verify", (long long)vd.bad_seq, msg);
		return -1;
	}
	dir = to != NULL ? strdup(to) : path_join(audit_dir, "audit-archive");
	if (dir == NULL || dir[0] != '/') {
		snprintf(err, errsz, "the archive directory must be an "
		    "absolute path");
		goto done;
	}
	if (audit_files(&paths, &n, &maxnum) == -1 ||
	    (a = calloc(n, sizeof *a)) == NULL ||
	    (buf = malloc(AUDIT_BUF_SIZE)) == NULL) {
		snprintf(err, errsz, "cannot list %s: %s", audit_dir,
		    strerror(errno));
		goto done;
	}
	/* paths[n - 1] is audit.log: the chain's head stays. */
	for (k = 0; k + 1 < n; k++) {
		audit_walk_file(paths[k], buf, audit_archive_line, &a[k]);
		if (a[k].bad || a[k].first_seq == 0 ||
		    a[k].last_ms >= before_ms)
			break;
	}
	res = json_object_new_object();
	*resp = res;
	json_object_object_add(res, "to", json_object_new_string(dir));
	if (k == 0) {
		json_object_object_add(res, "anchor_seq", NULL);
		json_object_object_add(res, "files", json_object_new_array());
		rv = 0;
		goto done;
	}

	/* Everything that can be checked, before the record is written. */
	if (audit_archive_dir_ok(dir, paths, k, err, errsz) == -1)
		goto done;

	all = a[0];
	all.last_seq = a[k - 1].last_seq;
	memcpy(all.last_hash, a[k - 1].last_hash, sizeof all.last_hash);
	detail = audit_archive_json(NULL, &all);
	files = json_object_new_array();
	for (i = 0; i < k; i++)
		json_object_array_add(files,
		    audit_archive_json(audit_base(paths[i]), &a[i]));
	json_object_object_add(detail, "files", files);
	json_object_object_add(detail, "to", json_object_new_string(dir));
	if ((seq = audit_append("audit_archived", NULL, NULL, 1, "hgctl",
	    detail, 1)) < 0) {
		snprintf(err, errsz, "the audit_archived record could not be "
		    "written: nothing archived");
		goto done;
	}
	json_object_object_add(res, "anchor_seq", json_object_new_int64(seq));
	json_object_object_add(res, "first_seq",
	    json_object_new_int64(all.first_seq));
	json_object_object_add(res, "last_seq",
	    json_object_new_int64(all.last_seq));
	json_object_object_add(res, "last_hash",
	    json_object_new_string(all.last_hash));
	moved = json_object_new_array();
	json_object_object_add(res, "files", moved);
	rv = audit_archive_move(dir, paths, k, seq, moved, err, errsz);
done:
	if (rv == -1 && *resp != NULL) {
		json_object_put(*resp);
		*resp = NULL;
	}
	free(buf);
	free(a);
	if (paths != NULL)
		audit_files_free(paths, n);
	free(dir);
	return rv;
}

/*
 * Move the rotated files of the chain whose records are all older than
 * before_ms out of the state directory, into to (NULL: its
 * audit-archive/), and append an audit_archived record, which lets a
 * verify accept that they are gone. -1 with err, also when the chain is
 * kept elsewhere than in files.
 */
int
audit_archive(int64_t before_ms, const char *to, struct json_object **resp,
    char *err, size_t errsz)
{
	*resp = NULL;
	if (!audit_open_store || audit_offline) {
		snprintf(err, errsz, "the audit log is not open");
		return -1;
	}
	if (audit_store->archive == NULL) {
		snprintf(err, errsz, "the audit chain is kept in %s, not in "
		    "rotated files: there is nothing to archive (see "
		    "docs/audit.md, One chain for a fleet)",
		    audit_store->where);
		return -1;
	}
	return audit_store->archive(before_ms, to, resp, err, errsz);
}

/* The chain in STATE_DIR/audit.log and its rotated files. */
const struct audit_store audit_file = {
	.where = AUDIT_FILE,
	.shared = 0,
	.exists = audit_file_exists,
	.open = audit_file_open,
	.append = audit_file_append,
	.ready = audit_file_ready,
	.walk = audit_file_walk,
	.query = audit_file_query,
	.archive = audit_file_archive,
	.close = audit_file_close,
};
