/*
 * The workspace file operations themselves: read, list, write, mkdir and
 * delete of a path relative to a workspace directory fd. Every path is
 * resolved by the kernel with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS) from that fd, so that no symlink, ".." or
 * /proc magic link leads out of the workspace; an operation on a name
 * resolves its parent so and acts on the last component with the *at
 * calls, never with a path that has a slash. Nothing here knows about
 * uids, sockets or the event loop: files.c runs these in a process of
 * the user's uid, and the unit tests call them on temporary directories.
 */
#include <sys/types.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/openat2.h>

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxd.h"

#define FILEOP_RESOLVE	(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
#define FILEOP_RETRIES	8	/* openat2's EAGAIN: a rename raced a ".." */
#define FILEOP_LEAVES	"the path leaves the workspace"

/* Start a result: success so far, no fd. */
static void
fileop_clear(struct fileop_result *r)
{
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

/* Fail a result with a code and a message; returns -1. */
static int
fileop_fail(struct fileop_result *r, const char *code, const char *fmt, ...)
{
	va_list	ap;

	r->code = code;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	if (r->fd != -1) {
		close(r->fd);
		r->fd = -1;
	}
	return -1;
}

/* Fail a result with the API error code of an errno (docs/api.md). */
static int
fileop_errno(struct fileop_result *r, int e, const char *what)
{
	switch (e) {
	case ENOENT:
		return fileop_fail(r, ERR_NOT_FOUND, "%s: no such file or "
		    "directory", what);
	case EXDEV:
	case ELOOP:
		/* RESOLVE_BENEATH (EXDEV) or RESOLVE_NO_MAGICLINKS (ELOOP) */
		return fileop_fail(r, ERR_FORBIDDEN, "%s: " FILEOP_LEAVES, what);
	case EISDIR:
		return fileop_fail(r, ERR_CONFLICT, "%s: is a directory", what);
	case ENOTDIR:
		return fileop_fail(r, ERR_CONFLICT, "%s: a component is not a "
		    "directory", what);
	case ENOTEMPTY:
	case EEXIST:
		return fileop_fail(r, ERR_CONFLICT, "%s: the directory is not "
		    "empty", what);
	case EDQUOT:
	case ENOSPC:
	case EFBIG:
		return fileop_fail(r, ERR_NO_SPACE, "%s: the workspace is full "
		    "(%s)", what, strerror(e));
	case EACCES:
	case EPERM:
		return fileop_fail(r, ERR_FORBIDDEN, "%s: permission denied",
		    what);
	case ENAMETOOLONG:
	case EINVAL:
	case EILSEQ:
		return fileop_fail(r, ERR_BAD_REQUEST, "%s: %s", what,
		    strerror(e));
	default:
		return fileop_fail(r, ERR_INTERNAL, "%s: %s", what,
		    strerror(e));
	}
}

/*
 * Whether path is one the API can name: relative, "/"-separated, no
 * empty, "." or ".." component, components of at most 255 bytes (one
 * trailing "/" is allowed, and "" is the workspace itself).
 */
int
fileop_path_ok(const char *path)
{
	const char	*p = path, *slash;
	size_t		 len = strlen(path), n;

	if (len > FILEOP_PATH_MAX || path[0] == '/')
		return 0;
	if (len > 0 && path[len - 1] == '/')
		len--;
	if (len > 0 && path[len - 1] == '/')
		return 0;	/* "a//" */
	while (p < path + len) {
		slash = memchr(p, '/', path + len - p);
		n = (slash != NULL ? slash : path + len) - p;
		if (n == 0 || n > 255 || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		p += n + 1;
	}
	return 1;
}

/*
 * openat2 of path beneath dirfd (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS),
 * "" standing for dirfd itself: the fd, or -1 and errno.
 */
int
fileop_openat2(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how	how;
	int		fd, i;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
	how.resolve = FILEOP_RESOLVE;
	for (i = 0; i < FILEOP_RETRIES; i++) {
		fd = (int)syscall(SYS_openat2, dirfd, path[0] ? path : ".",
		    &how, sizeof(how));
		if (fd != -1 || errno != EAGAIN)
			return fd;
	}
	return -1;
}

/*
 * Split path (checked, "" excluded) into its parent and last component:
 * parent into dir ("" for the workspace), the name into name. A trailing
 * "/" is dropped. -1 when the path has no last component.
 */
static int
fileop_split(const char *path, char *dir, size_t dirsz, char *name,
    size_t namesz)
{
	char		 buf[FILEOP_PATH_MAX + 1];
	const char	*slash;
	size_t		 len;

	len = strlen(path);
	if (len == 0 || len > FILEOP_PATH_MAX)
		return -1;
	memcpy(buf, path, len + 1);
	if (buf[len - 1] == '/')
		buf[--len] = '\0';
	if (len == 0)
		return -1;
	if ((slash = strrchr(buf, '/')) == NULL) {
		snprintf(dir, dirsz, "%s", "");
		snprintf(name, namesz, "%s", buf);
	} else {
		snprintf(dir, dirsz, "%.*s", (int)(slash - buf), buf);
		snprintf(name, namesz, "%s", slash + 1);
	}
	/* fileop_path_ok refused these already; *at calls never see them */
	if (name[0] == '\0' || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || strchr(name, '/') != NULL)
		return -1;
	return 0;
}

/*
 * One directory of a path being made: prefix resolved beneath wsfd, made
 * with mkdirat(parent, name) when missing (parent was itself resolved so)
 * and resolved again. *made is set when this call made it. The O_PATH fd,
 * or -1 and errno.
 */
static int
fileop_dir_step(int wsfd, int parent, const char *prefix, const char *name,
    int *made)
{
	int	fd, tries;

	for (tries = 0; tries < 2; tries++) {
		fd = fileop_openat2(wsfd, prefix, O_PATH | O_DIRECTORY, 0);
		if (fd != -1 || errno != ENOENT)
			return fd;
		if (mkdirat(parent, name, 0777) == 0)
			*made = 1;
		else if (errno != EEXIST)
			return -1;
	}
	errno = ENOENT;		/* a dangling link stays one */
	return -1;
}

/*
 * The directory dir (relative, "" for the workspace), opened O_PATH
 * beneath wsfd; with mk, each missing directory on the way is made, one
 * component at a time. *made (when not NULL) says whether the last one
 * was made. The fd, or -1 and errno.
 */
static int
fileop_dirs(int wsfd, const char *dir, int mk, int *made)
{
	char	 prefix[FILEOP_PATH_MAX + 1];
	size_t	 i, start = 0, len = strlen(dir);
	int	 fd, parent, last = 0;

	if (made != NULL)
		*made = 0;
	if ((fd = fileop_openat2(wsfd, dir, O_PATH | O_DIRECTORY, 0)) != -1 ||
	    errno != ENOENT || !mk)
		return fd;
	if (len > FILEOP_PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (len > 0 && dir[len - 1] == '/')
		len--;
	if ((parent = fileop_openat2(wsfd, "", O_PATH | O_DIRECTORY, 0)) == -1)
		return -1;
	for (i = 0; i <= len; i++) {
		if (i < len && dir[i] != '/')
			continue;
		memcpy(prefix, dir, i);
		prefix[i] = '\0';
		last = 0;
		fd = fileop_dir_step(wsfd, parent, prefix, prefix + start,
		    &last);
		close(parent);
		if (fd == -1)
			return -1;
		parent = fd;
		start = i + 1;
	}
	if (made != NULL)
		*made = last;
	return parent;
}

/* A listing entry's "type" for a mode: file, dir, symlink or other. */
static const char *
fileop_type(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

/*
 * Copy s (len bytes) into out as valid UTF-8, each invalid byte replaced
 * by U+FFFD (overlong forms, surrogates and code points past U+10FFFF
 * are invalid). out holds at least 3 * len + 1 bytes; returns its length.
 */
size_t
fileop_utf8(const char *s, size_t len, char *out)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i = 0, o = 0, n, k;
	uint32_t		 c, min;

	while (i < len) {
		c = u[i];
		if (c < 0x80) {
			out[o++] = (char)c;
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			c &= 0x1f;
			min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			c &= 0x0f;
			min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			c &= 0x07;
			min = 0x10000;
		} else
			goto bad;
		for (k = 1; k <= n; k++) {
			if (i + k >= len || (u[i + k] & 0xc0) != 0x80)
				goto bad;
			c = (c << 6) | (u[i + k] & 0x3f);
		}
		if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			goto bad;
		memcpy(out + o, s + i, n + 1);
		o += n + 1;
		i += n + 1;
		continue;
bad:
		memcpy(out + o, "\xef\xbf\xbd", 3);
		o += 3;
		i++;
	}
	out[o] = '\0';
	return o;
}

/* A JSON string of a name as valid UTF-8. */
static struct json_object *
fileop_name_json(const char *name)
{
	struct json_object	*o;
	size_t			 len = strlen(name);
	char			*buf;

	if ((buf = malloc(3 * len + 1)) == NULL)
		return NULL;
	o = json_object_new_string_len(buf, (int)fileop_utf8(name, len, buf));
	free(buf);
	return o;
}

/* qsort: names bytewise. */
static int
fileop_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Open a regular file beneath the workspace for reading (r->fd). */
int
fileop_read(int wsfd, const char *path, struct fileop_result *r)
{
	struct stat	st, st2;
	int		fd, fl;

	fileop_clear(r);
	if (!fileop_path_ok(path))
		return fileop_fail(r, ERR_BAD_REQUEST, "malformed path");
	/*
	 * O_PATH first: a fifo, socket or device is refused without being
	 * opened at all (an open may block, or mean something to a device).
	 */
	if ((fd = fileop_openat2(wsfd, path, O_PATH, 0)) == -1)
		return fileop_errno(r, errno, "read");
	if (fstat(fd, &st) == -1) {
		close(fd);
		return fileop_errno(r, errno, "read");
	}
	close(fd);
	if (S_ISDIR(st.st_mode))
		return fileop_fail(r, ERR_CONFLICT, "a directory: add \"/\" to "
		    "the path to list it");
	if (!S_ISREG(st.st_mode))
		return fileop_fail(r, ERR_CONFLICT, "not a regular file");
	/* O_NONBLOCK: what was swapped in meanwhile cannot hang the open. */
	if ((r->fd = fileop_openat2(wsfd, path, O_RDONLY | O_NONBLOCK |
	    O_NOCTTY, 0)) == -1)
		return fileop_errno(r, errno, "read");
	if (fstat(r->fd, &st2) == -1)
		return fileop_errno(r, errno, "read");
	if (!S_ISREG(st2.st_mode) || st2.st_ino != st.st_ino ||
	    st2.st_dev != st.st_dev)
		return fileop_fail(r, ERR_CONFLICT, "the file changed while it "
		    "was opened");
	if ((fl = fcntl(r->fd, F_GETFL)) == -1 ||
	    fcntl(r->fd, F_SETFL, fl & ~O_NONBLOCK) == -1)
		return fileop_errno(r, errno, "read");
	r->size = st2.st_size;
	r->mtime = st2.st_mtim.tv_sec;
	return 0;
}

/* A directory's listing as the API's JSON object, in a sealed memfd. */
int
fileop_list(int wsfd, const char *path, struct fileop_result *r)
{
	struct json_object	*o, *arr, *e, *name;
	struct dirent		*de;
	struct stat		 st;
	DIR			*d = NULL;
	char			**names = NULL, **nn, rel[FILEOP_PATH_MAX + 2];
	const char		*text;
	size_t			 n = 0, cap = 0, i, len;
	int			 fd, rc = -1;

	fileop_clear(r);
	if (!fileop_path_ok(path))
		return fileop_fail(r, ERR_BAD_REQUEST, "malformed path");
	len = strlen(path);
	if (len > 0 && path[len - 1] == '/')
		len--;
	snprintf(rel, sizeof(rel), "%.*s%s", (int)len, path, len ? "/" : "");
	if ((fd = fileop_openat2(wsfd, path, O_RDONLY | O_DIRECTORY |
	    O_NONBLOCK, 0)) == -1)
		return errno == ENOTDIR ? fileop_fail(r, ERR_CONFLICT,
		    "not a directory") : fileop_errno(r, errno, "list");
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return fileop_errno(r, errno, "list");
	}
	/* Every name first, so that the first 10000 are the first by name. */
	errno = 0;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			if ((nn = reallocarray(names, cap,
			    sizeof(*names))) == NULL)
				goto nomem;
			names = nn;
		}
		if ((names[n] = strdup(de->d_name)) == NULL)
			goto nomem;
		n++;
		errno = 0;
	}
	if (errno != 0) {
		fileop_errno(r, errno, "list");
		goto out;
	}
	qsort(names, n, sizeof(*names), fileop_cmp);
	arr = json_object_new_array();
	for (i = 0; i < n && r->count < FILEOP_LIST_MAX; i++) {
		/* Never followed: a link is listed as what it is. */
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) == -1)
			continue;	/* gone since readdir */
		if ((name = fileop_name_json(names[i])) == NULL) {
			json_object_put(arr);
			goto nomem;
		}
		e = json_object_new_object();
		json_object_object_add(e, "name", name);
		json_object_object_add(e, "type",
		    json_object_new_string(fileop_type(st.st_mode)));
		json_object_object_add(e, "size",
		    json_object_new_int64(st.st_size));
		json_object_object_add(e, "mtime",
		    json_object_new_int64(st.st_mtim.tv_sec));
		json_object_array_add(arr, e);
		r->count++;
	}
	r->truncated = i < n;
	o = json_object_new_object();
	json_object_object_add(o, "path", fileop_name_json(rel));
	json_object_object_add(o, "entries", arr);
	json_object_object_add(o, "truncated",
	    json_object_new_boolean(r->truncated));
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	len = strlen(text);
	if ((r->fd = memfd_create("hostgate-listing", MFD_CLOEXEC |
	    MFD_ALLOW_SEALING)) == -1 ||
	    write(r->fd, text, len) != (ssize_t)len ||
	    lseek(r->fd, 0, SEEK_SET) == -1 ||
	    fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_WRITE | F_SEAL_SEAL) == -1) {
		fileop_errno(r, errno, "list");
		json_object_put(o);
		goto out;
	}
	r->size = (int64_t)len;
	json_object_put(o);
	rc = 0;
	goto out;
nomem:
	fileop_fail(r, ERR_INTERNAL, "list: out of memory");
out:
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (d != NULL)
		closedir(d);
	return rc;
}

/* Copy size bytes of src from offset 0 into dst: 0, or -1 and errno. */
static int
fileop_copy(int src, int dst, int64_t size)
{
	char	 buf[65536];
	off_t	 off = 0;
	ssize_t	 n, w, k;
	size_t	 chunk;

	while (off < size) {
		chunk = size - off > (1 << 30) ? (1 << 30) : (size_t)(size - off);
		n = sendfile(dst, src, &off, chunk);
		if (n > 0)
			continue;
		if (n == 0) {
			errno = ENODATA;	/* the content is shorter than size */
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EINVAL && errno != ENOSYS)
			return -1;
		/* No sendfile between these two: read and write. */
		chunk = size - off > (off_t)sizeof(buf) ? sizeof(buf) :
		    (size_t)(size - off);
		if ((n = pread(src, buf, chunk, off)) <= 0) {
			if (n == -1 && errno == EINTR)
				continue;
			if (n == 0)
				errno = ENODATA;
			return -1;
		}
		for (w = 0; w < n; w += k)
			if ((k = write(dst, buf + w, n - w)) == -1) {
				if (errno == EINTR) {
					k = 0;
					continue;
				}
				return -1;
			}
		off += n;
	}
	return 0;
}

/*
 * A new unnamed file in dir, or one with a random name (into tmp, "" for
 * an unnamed one) where the file system has no O_TMPFILE: the fd or -1.
 */
static int
fileop_tmpfile(int dir, char *tmp, size_t tmpsz)
{
	uint64_t	rnd;
	int		fd, i;

	tmp[0] = '\0';
	if ((fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC,
	    0666)) != -1 || (errno != EOPNOTSUPP && errno != EISDIR &&
	    errno != EINVAL))
		return fd;
	for (i = 0; i < 16; i++) {
		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			return -1;
		snprintf(tmp, tmpsz, ".hostgate-upload-%016llx",
		    (unsigned long long)rnd);
		if ((fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0666)) != -1 || errno != EEXIST)
			return fd;
	}
	return -1;
}

/* Give an unnamed file a random name in dir (into tmp): 0, or -1. */
static int
fileop_link(int fd, int dir, char *tmp, size_t tmpsz)
{
	char		proc[64];
	uint64_t	rnd;
	int		i;

	/* Our own fd through /proc: no user path is resolved here. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	for (i = 0; i < 16; i++) {
		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			return -1;
		snprintf(tmp, tmpsz, ".hostgate-upload-%016llx",
		    (unsigned long long)rnd);
		if (linkat(AT_FDCWD, proc, dir, tmp, AT_SYMLINK_FOLLOW) == 0)
			return 0;
		if (errno != EEXIST)
			return -1;
	}
	return -1;
}

/* Write size bytes of content to path, atomically, its parents made. */
int
fileop_write(int wsfd, const char *path, int content, int64_t size,
    struct fileop_result *r)
{
	struct stat	 st, old;
	char		 dir[FILEOP_PATH_MAX + 1], name[256], tmp[64];
	int		 dfd, fd = -1, e, existed;
	const char	*what = "write";

	fileop_clear(r);
	tmp[0] = '\0';
	if (!fileop_path_ok(path) || fileop_split(path, dir, sizeof(dir), name,
	    sizeof(name)) == -1 || path[strlen(path) - 1] == '/')
		return fileop_fail(r, ERR_BAD_REQUEST, "malformed path");
	if (size < 0)
		return fileop_fail(r, ERR_BAD_REQUEST, "no size");
	if ((dfd = fileop_dirs(wsfd, dir, 1, NULL)) == -1)
		return fileop_errno(r, errno, what);
	existed = fstatat(dfd, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
	if (!existed && errno != ENOENT) {
		e = errno;
		goto fail;
	}
	if (existed && S_ISDIR(old.st_mode)) {
		close(dfd);
		return fileop_fail(r, ERR_CONFLICT, "a directory has that name");
	}
	if (existed && S_ISLNK(old.st_mode)) {
		/*
		 * The link itself is replaced, never written through; one that
		 * leads out of the workspace is refused all the same, as a
		 * read of it would be.
		 */
		if ((fd = fileop_openat2(wsfd, path, O_PATH, 0)) == -1 &&
		    (errno == EXDEV || errno == ELOOP)) {
			e = errno;
			goto fail;
		}
		if (fd != -1)
			close(fd);
		fd = -1;
	}
	/* A file replaced keeps its permissions (never set-id bits). */
	if ((fd = fileop_tmpfile(dfd, tmp, sizeof(tmp))) == -1 ||
	    (existed && S_ISREG(old.st_mode) &&
	    fchmod(fd, old.st_mode & 0777) == -1) ||
	    fileop_copy(content, fd, size) == -1 || fsync(fd) == -1 ||
	    fstat(fd, &st) == -1) {
		e = errno;
		goto fail;
	}
	if (tmp[0] == '\0' && fileop_link(fd, dfd, tmp, sizeof(tmp)) == -1) {
		e = errno;
		goto fail;
	}
	/* Atomic: a reader has the old file or the new, never a part. */
	if (renameat(dfd, tmp, dfd, name) == -1) {
		e = errno;
		goto fail;
	}
	close(fd);
	close(dfd);
	r->size = st.st_size;
	r->mtime = st.st_mtim.tv_sec;
	r->created = !existed;
	return 0;
fail:
	if (tmp[0] != '\0')
		unlinkat(dfd, tmp, 0);
	if (fd != -1)
		close(fd);
	close(dfd);
	if (e == ENODATA)
		return fileop_fail(r, ERR_BAD_REQUEST, "write: the content is "
		    "shorter than its size");
	return fileop_errno(r, e, what);
}

/* Make a directory and its parents. */
int
fileop_mkdir(int wsfd, const char *path, struct fileop_result *r)
{
	struct stat	st;
	int		fd, made;

	fileop_clear(r);
	if (!fileop_path_ok(path))
		return fileop_fail(r, ERR_BAD_REQUEST, "malformed path");
	if ((fd = fileop_dirs(wsfd, path, 1, &made)) == -1)
		return errno == ENOTDIR ? fileop_fail(r, ERR_CONFLICT,
		    "mkdir: a file has that name") :
		    fileop_errno(r, errno, "mkdir");
	if (fstat(fd, &st) == -1) {
		close(fd);
		return fileop_errno(r, errno, "mkdir");
	}
	close(fd);
	r->size = st.st_size;
	r->mtime = st.st_mtim.tv_sec;
	r->created = made;
	return 0;
}

/* Remove a file, a link itself or an empty directory. */
int
fileop_delete(int wsfd, const char *path, struct fileop_result *r)
{
	struct stat	st;
	char		dir[FILEOP_PATH_MAX + 1], name[256];
	int		dfd, rc;

	fileop_clear(r);
	if (!fileop_path_ok(path))
		return fileop_fail(r, ERR_BAD_REQUEST, "malformed path");
	if (fileop_split(path, dir, sizeof(dir), name, sizeof(name)) == -1)
		return fileop_fail(r, ERR_BAD_REQUEST, "the workspace itself "
		    "cannot be deleted");
	if ((dfd = fileop_dirs(wsfd, dir, 0, NULL)) == -1)
		return fileop_errno(r, errno, "delete");
	/* The name itself: a symlink goes, never what it points to. */
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1) {
		rc = errno;
		close(dfd);
		return fileop_errno(r, rc, "delete");
	}
	if (path[strlen(path) - 1] == '/' && !S_ISDIR(st.st_mode)) {
		close(dfd);
		return fileop_fail(r, ERR_CONFLICT, "delete: not a directory");
	}
	rc = unlinkat(dfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
	if (rc == -1) {
		rc = errno;
		close(dfd);
		return fileop_errno(r, rc, "delete");
	}
	close(dfd);
	r->deleted = 1;
	return 0;
}

/* The workspace directory fd every operation resolves beneath. */
int
fileop_workspace(const char *workspace)
{
	return open(workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The operation named op. */
int
fileop_run(int wsfd, const char *op, const char *path, int content,
    int64_t size, struct fileop_result *r)
{
	if (strcmp(op, "read") == 0)
		return fileop_read(wsfd, path, r);
	if (strcmp(op, "list") == 0)
		return fileop_list(wsfd, path, r);
	if (strcmp(op, "write") == 0) {
		if (content == -1) {
			fileop_clear(r);
			return fileop_fail(r, ERR_BAD_REQUEST, "a write needs "
			    "its content as an fd");
		}
		return fileop_write(wsfd, path, content, size, r);
	}
	if (strcmp(op, "mkdir") == 0)
		return fileop_mkdir(wsfd, path, r);
	if (strcmp(op, "delete") == 0)
		return fileop_delete(wsfd, path, r);
	fileop_clear(r);
	return fileop_fail(r, ERR_BAD_REQUEST, "unknown file operation");
}
