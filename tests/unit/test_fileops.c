/*
 * Unit tests for sandboxd/fileops.c: the resolver and each workspace file
 * operation on real temporary directories, with hostile entries planted
 * in the workspace (links out of it, up, to /proc/self/root, a fifo, a
 * device, names that are not UTF-8). Every escape must fail with
 * forbidden or not_found and leave the real file outside untouched.
 */
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../sandboxd/sandboxd.h"
#include "child.h"

#define SECRET	"the secret outside\n"

/* One test's tree: TOP/outside/secret, TOP/ws (the workspace). */
struct tree {
	char	top[64];
	char	ws[96];
	char	outside[96];
	char	secret[128];
	int	wsfd;
};

/* Write text to a file at path (made). */
static void
put(const char *path, const char *text)
{
	int	fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd != -1);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* Whether path (outside the workspace) holds text exactly. */
static int
holds(const char *path, const char *text)
{
	char	buf[4096];
	ssize_t	n;
	int	fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return 0;
	buf[n] = '\0';
	return strcmp(buf, text) == 0;
}

/* Whether a path exists (without following a last link). */
static int
exists(const char *path)
{
	struct stat	st;

	return lstat(path, &st) == 0;
}

/* A path inside the workspace, for the test's own checks. */
static const char *
in(struct tree *t, const char *rel)
{
	static char	buf[4][512];
	static int	k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", t->ws, rel);
	return buf[k];
}

/* A memfd holding text, at offset 0. */
static int
content(const char *text)
{
	int	fd;

	fd = memfd_create("test", MFD_CLOEXEC);
	assert_true(fd != -1);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The text of an fd from offset 0, into a static buffer. */
static const char *
slurp(int fd)
{
	static char	buf[1 << 20];
	ssize_t		n;
	size_t		len = 0;

	while ((n = pread(fd, buf + len, sizeof(buf) - 1 - len, len)) > 0)
		len += n;
	buf[len] = '\0';
	return buf;
}

/* The tree with its hostile entries. */
static int
setup(void **state)
{
	struct tree	*t;
	char		 buf[256];

	t = calloc(1, sizeof(*t));
	snprintf(t->top, sizeof(t->top), "/tmp/hg-unit-fileops-XXXXXX");
	if (mkdtemp(t->top) == NULL)
		return -1;
	snprintf(t->ws, sizeof(t->ws), "%s/ws", t->top);
	snprintf(t->outside, sizeof(t->outside), "%s/outside", t->top);
	snprintf(t->secret, sizeof(t->secret), "%s/secret", t->outside);
	if (mkdir(t->ws, 0700) == -1 || mkdir(t->outside, 0700) == -1)
		return -1;
	put(t->secret, SECRET);
	put(in(t, "a.txt"), "hello\n");
	mkdir(in(t, "d"), 0700);
	put(in(t, "d/inner.txt"), "inner\n");
	/* The hostile links. */
	if (symlink("/etc/passwd", in(t, "x")) == -1 ||
	    symlink("..", in(t, "up")) == -1 ||
	    symlink("/proc/self/root", in(t, "root")) == -1 ||
	    symlink(t->outside, in(t, "abs")) == -1 ||
	    symlink(t->secret, in(t, "abs_secret")) == -1 ||
	    symlink("../../../../../../../etc/passwd", in(t, "climb")) == -1 ||
	    symlink("../outside/secret", in(t, "rel_secret")) == -1 ||
	    symlink("d/../../outside", in(t, "sneak")) == -1 ||
	    symlink("a.txt", in(t, "in_link")) == -1 ||
	    symlink("d", in(t, "in_dir")) == -1 ||
	    symlink("nowhere", in(t, "dangling")) == -1 ||
	    mkfifo(in(t, "fifo"), 0600) == -1)
		return -1;
	snprintf(buf, sizeof(buf), "%s/ws", t->top);
	if ((t->wsfd = fileop_workspace(buf)) == -1)
		return -1;
	*state = t;
	return 0;
}

/* rm -rf of the tree. */
static int
teardown(void **state)
{
	struct tree	*t = *state;
	char		 cmd[128];

	close(t->wsfd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->top);
	if (system(cmd) != 0)
		return -1;
	free(t);
	return 0;
}

/* The outside is as it was: the secret intact, nothing new beside it. */
static void
outside_untouched(struct tree *t)
{
	char	path[256];

	assert_true(holds(t->secret, SECRET));
	snprintf(path, sizeof(path), "%s/new", t->outside);
	assert_false(exists(path));
	snprintf(path, sizeof(path), "%s/newdir", t->outside);
	assert_false(exists(path));
	assert_false(exists("/etc/new-from-hostgate-test"));
}

/* The paths the API may name, and what it must never pass on. */
static void
test_path_ok(void **state)
{
	char	long_name[300], long_path[5000];

	assert_true(fileop_path_ok(""));
	assert_true(fileop_path_ok("a"));
	assert_true(fileop_path_ok("a/b.txt"));
	assert_true(fileop_path_ok("dir/"));
	assert_true(fileop_path_ok(".hidden"));
	assert_true(fileop_path_ok("a..b"));
	assert_false(fileop_path_ok("/etc/passwd"));
	assert_false(fileop_path_ok("/"));
	assert_false(fileop_path_ok(".."));
	assert_false(fileop_path_ok("../x"));
	assert_false(fileop_path_ok("a/../../x"));
	assert_false(fileop_path_ok("a/.."));
	assert_false(fileop_path_ok("."));
	assert_false(fileop_path_ok("./a"));
	assert_false(fileop_path_ok("a//b"));
	assert_false(fileop_path_ok("a//"));
	memset(long_name, 'n', 256);
	long_name[256] = '\0';
	assert_false(fileop_path_ok(long_name));
	long_name[255] = '\0';
	assert_true(fileop_path_ok(long_name));
	memset(long_path, 'a', sizeof(long_path));
	for (size_t i = 100; i < sizeof(long_path); i += 100)
		long_path[i] = '/';
	long_path[4097] = '\0';
	assert_false(fileop_path_ok(long_path));
}

/* Invalid UTF-8 becomes U+FFFD, byte by byte; valid text stays. */
static void
test_utf8(void **state)
{
	char	out[64];

	fileop_utf8("plain", 5, out);
	assert_string_equal(out, "plain");
	fileop_utf8("caf\xc3\xa9 \xf0\x9f\x98\x80", 10, out);
	assert_string_equal(out, "caf\xc3\xa9 \xf0\x9f\x98\x80");
	fileop_utf8("a\xff" "b", 3, out);
	assert_string_equal(out, "a\xef\xbf\xbd" "b");
	/* overlong "/", a surrogate, past U+10FFFF, a cut sequence */
	fileop_utf8("\xc0\xaf", 2, out);
	assert_string_equal(out, "\xef\xbf\xbd\xef\xbf\xbd");
	fileop_utf8("\xed\xa0\x80", 3, out);
	assert_string_equal(out, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	fileop_utf8("\xf4\x90\x80\x80", 4, out);
	assert_int_equal(strlen(out), 12);
	fileop_utf8("x\xe2\x82", 3, out);
	assert_string_equal(out, "x\xef\xbf\xbd\xef\xbf\xbd");
}

/* The resolver: the kernel refuses every way out, and magic links. */
static void
test_resolve(void **state)
{
	struct tree	*t = *state;
	const char	*out[] = { "x", "up/outside/secret", "root/etc/passwd",
	    "abs/secret", "abs_secret", "climb", "rel_secret",
	    "sneak/secret", "d/../../outside/secret", "up", "root", NULL };
	int		 fd, i, proc;

	for (i = 0; out[i] != NULL; i++) {
		errno = 0;
		fd = fileop_openat2(t->wsfd, out[i], O_PATH, 0);
		if (fd != -1)
			fail_msg("%s resolved", out[i]);
		assert_true(errno == EXDEV || errno == ELOOP);
	}
	fd = fileop_openat2(t->wsfd, "in_link", O_RDONLY, 0);
	assert_true(fd != -1);
	close(fd);
	fd = fileop_openat2(t->wsfd, "", O_PATH | O_DIRECTORY, 0);
	assert_true(fd != -1);
	close(fd);
	/* A magic link, even where it is beneath the directory fd. */
	proc = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(proc != -1);
	errno = 0;
	assert_int_equal(fileop_openat2(proc, "root", O_PATH, 0), -1);
	assert_true(errno == ELOOP || errno == EXDEV);
	errno = 0;
	assert_int_equal(fileop_openat2(proc, "cwd", O_PATH, 0), -1);
	assert_true(errno == ELOOP || errno == EXDEV);
	close(proc);
	/* The workspace itself must not be a link. */
	assert_int_equal(fileop_workspace(in(t, "in_dir")), -1);
}

/* A read: regular files inside, links that stay inside; nothing else. */
static void
test_read(void **state)
{
	struct tree		*t = *state;
	struct fileop_result	 r;
	const char		*out[] = { "x", "up/outside/secret",
	    "root/etc/passwd", "abs/secret", "abs_secret", "climb",
	    "rel_secret", "sneak/secret", NULL };
	int			 i, fl;

	assert_int_equal(fileop_read(t->wsfd, "a.txt", &r), 0);
	assert_null(r.code);
	assert_int_equal(r.size, 6);
	assert_true(r.mtime > 0);
	assert_string_equal(slurp(r.fd), "hello\n");
	fl = fcntl(r.fd, F_GETFL);
	assert_int_equal(fl & O_ACCMODE, O_RDONLY);
	assert_false(fl & O_NONBLOCK);
	close(r.fd);
	assert_int_equal(fileop_read(t->wsfd, "in_link", &r), 0);
	assert_string_equal(slurp(r.fd), "hello\n");
	close(r.fd);
	assert_int_equal(fileop_read(t->wsfd, "in_dir/inner.txt", &r), 0);
	assert_string_equal(slurp(r.fd), "inner\n");
	close(r.fd);

	for (i = 0; out[i] != NULL; i++) {
		assert_int_equal(fileop_read(t->wsfd, out[i], &r), -1);
		assert_string_equal(r.code, ERR_FORBIDDEN);
		assert_non_null(strstr(r.msg, "leaves the workspace"));
		assert_int_equal(r.fd, -1);
	}
	assert_int_equal(fileop_read(t->wsfd, "nope", &r), -1);
	assert_string_equal(r.code, ERR_NOT_FOUND);
	assert_int_equal(fileop_read(t->wsfd, "dangling", &r), -1);
	assert_string_equal(r.code, ERR_NOT_FOUND);
	assert_int_equal(fileop_read(t->wsfd, "d", &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	assert_non_null(strstr(r.msg, "add \"/\""));
	assert_int_equal(fileop_read(t->wsfd, "a.txt/x", &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	/* A fifo: refused at once (the test would hang otherwise). */
	assert_int_equal(fileop_read(t->wsfd, "fifo", &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	assert_int_equal(fileop_read(t->wsfd, "../outside/secret", &r), -1);
	assert_string_equal(r.code, ERR_BAD_REQUEST);
	assert_int_equal(fileop_read(t->wsfd, "/etc/passwd", &r), -1);
	assert_string_equal(r.code, ERR_BAD_REQUEST);
	outside_untouched(t);
}

/* A device node (root only: mknod): refused, never opened. */
static void
test_read_device(void **state)
{
	struct tree		*t = *state;
	struct fileop_result	 r;

	if (geteuid() != 0)
		skip();
	assert_int_equal(mknod(in(t, "null"), S_IFCHR | 0666, makedev(1, 3)),
	    0);
	assert_int_equal(fileop_read(t->wsfd, "null", &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	assert_int_equal(r.fd, -1);
}

/* A listing: sorted, links as links, names as UTF-8, the outside shut. */
static void
test_list(void **state)
{
	struct tree		*t = *state;
	struct fileop_result	 r;
	struct json_object	*o, *arr, *e;
	const char		*text, *prev = "";
	size_t			 i;
	int			 sawbad = 0, sawx = 0;

	put(in(t, "bad\xff\xfename"), "?");
	assert_int_equal(fileop_list(t->wsfd, "", &r), 0);
	assert_false(r.truncated);
	text = slurp(r.fd);
	close(r.fd);
	assert_int_equal(r.size, (int64_t)strlen(text));
	assert_non_null(o = json_tokener_parse(text));
	assert_string_equal(json_str(o, "path"), "");
	assert_true(json_object_object_get_ex(o, "entries", &arr));
	assert_int_equal(json_object_array_length(arr), r.count);
	for (i = 0; i < json_object_array_length(arr); i++) {
		e = json_object_array_get_idx(arr, i);
		assert_true(strcmp(prev, json_str(e, "name")) < 0);
		prev = json_str(e, "name");
		if (strcmp(prev, "bad\xef\xbf\xbd\xef\xbf\xbdname") == 0) {
			sawbad = 1;
			assert_string_equal(json_str(e, "type"), "file");
		}
		if (strcmp(prev, "x") == 0) {
			/* the link itself, never /etc/passwd's size */
			sawx = 1;
			assert_string_equal(json_str(e, "type"), "symlink");
		}
		if (strcmp(prev, "d") == 0)
			assert_string_equal(json_str(e, "type"), "dir");
		if (strcmp(prev, "fifo") == 0)
			assert_string_equal(json_str(e, "type"), "other");
		if (strcmp(prev, "a.txt") == 0) {
			int64_t	size = -1, mtime = -1;

			json_int(e, "size", &size);
			json_int(e, "mtime", &mtime);
			assert_int_equal(size, 6);
			assert_true(mtime > 0);
		}
	}
	assert_true(sawbad && sawx);
	json_object_put(o);

	assert_int_equal(fileop_list(t->wsfd, "in_dir/", &r), 0);
	o = json_tokener_parse(slurp(r.fd));
	close(r.fd);
	assert_string_equal(json_str(o, "path"), "in_dir/");
	assert_int_equal(r.count, 1);
	json_object_put(o);

	assert_int_equal(fileop_list(t->wsfd, "up/", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_list(t->wsfd, "abs", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_list(t->wsfd, "root/", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_list(t->wsfd, "sneak/", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_list(t->wsfd, "a.txt", &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	assert_int_equal(fileop_list(t->wsfd, "nope/", &r), -1);
	assert_string_equal(r.code, ERR_NOT_FOUND);
	assert_int_equal(fileop_list(t->wsfd, "fifo/", &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
}

/* 10001 entries: the first 10000 by name, then truncated. */
static void
test_list_truncated(void **state)
{
	struct tree		*t = *state;
	struct fileop_result	 r;
	struct json_object	*o, *arr;
	char			 name[64];
	int			 i, fd;

	mkdir(in(t, "many"), 0700);
	for (i = 0; i < 10001; i++) {
		snprintf(name, sizeof(name), "many/f%05d", i);
		fd = open(in(t, name), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		assert_true(fd != -1);
		close(fd);
	}
	assert_int_equal(fileop_list(t->wsfd, "many/", &r), 0);
	assert_int_equal(r.count, 10000);
	assert_true(r.truncated);
	o = json_tokener_parse(slurp(r.fd));
	close(r.fd);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "entries", &arr));
	assert_int_equal(json_object_array_length(arr), 10000);
	assert_string_equal(json_str(json_object_array_get_idx(arr, 9999),
	    "name"), "f09999");
	assert_true(json_object_get_boolean(json_object_object_get(o,
	    "truncated")));
	json_object_put(o);
	/* 10000 exactly is whole */
	unlink(in(t, "many/f10000"));
	assert_int_equal(fileop_list(t->wsfd, "many", &r), 0);
	assert_int_equal(r.count, 10000);
	assert_false(r.truncated);
	close(r.fd);
}

/* A write: made with its parents, replaced atomically, never out. */
static void
test_write(void **state)
{
	struct tree		*t = *state;
	struct fileop_result	 r;
	const char		*out[] = { "x", "up/outside/new", "abs/new",
	    "abs_secret", "rel_secret", "climb", "root/tmp/new",
	    "sneak/new", "up/outside/newdir/f", NULL };
	struct stat		 st;
	int			 c, old, i;

	c = content("one");
	assert_int_equal(fileop_write(t->wsfd, "new.txt", c, 3, &r), 0);
	assert_true(r.created);
	assert_int_equal(r.size, 3);
	assert_true(holds(in(t, "new.txt"), "one"));
	close(c);

	/* Parents made, one component at a time. */
	c = content("deep");
	assert_int_equal(fileop_write(t->wsfd, "p/q/r/s.txt", c, 4, &r), 0);
	assert_true(r.created);
	assert_true(holds(in(t, "p/q/r/s.txt"), "deep"));
	close(c);

	/* Replaced: a reader holding the old file still sees the old. */
	old = open(in(t, "new.txt"), O_RDONLY | O_CLOEXEC);
	c = content("two, longer");
	assert_int_equal(fileop_write(t->wsfd, "new.txt", c, 11, &r), 0);
	assert_false(r.created);
	assert_int_equal(r.size, 11);
	assert_string_equal(slurp(old), "one");
	assert_true(holds(in(t, "new.txt"), "two, longer"));
	close(old);
	close(c);

	/* A file replaced keeps its permissions, never set-id bits. */
	assert_int_equal(chmod(in(t, "new.txt"), 04755), 0);
	c = content("three");
	assert_int_equal(fileop_write(t->wsfd, "new.txt", c, 5, &r), 0);
	assert_true(stat(in(t, "new.txt"), &st) == 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	close(c);

	/* Only size bytes of the content, from offset 0. */
	c = content("0123456789");
	lseek(c, 5, SEEK_SET);
	assert_int_equal(fileop_write(t->wsfd, "part.txt", c, 4, &r), 0);
	assert_true(holds(in(t, "part.txt"), "0123"));
	/* Content shorter than size: refused, the old file left. */
	assert_int_equal(fileop_write(t->wsfd, "part.txt", c, 100, &r), -1);
	assert_string_equal(r.code, ERR_BAD_REQUEST);
	assert_true(holds(in(t, "part.txt"), "0123"));

	/* Into a link that stays inside: the parent is followed. */
	assert_int_equal(fileop_write(t->wsfd, "in_dir/via.txt", c, 2, &r), 0);
	assert_true(holds(in(t, "d/via.txt"), "01"));
	/* Over a link that stays inside: the link is replaced, not its
	 * target. */
	assert_int_equal(fileop_write(t->wsfd, "in_link", c, 3, &r), 0);
	assert_false(r.created);
	assert_true(lstat(in(t, "in_link"), &st) == 0 && S_ISREG(st.st_mode));
	assert_true(holds(in(t, "a.txt"), "hello\n"));

	for (i = 0; out[i] != NULL; i++) {
		assert_int_equal(fileop_write(t->wsfd, out[i], c, 3, &r), -1);
		if (strcmp(r.code, ERR_FORBIDDEN) != 0)
			fail_msg("%s: %s %s", out[i], r.code, r.msg);
	}
	/* The links themselves are still there. */
	assert_true(lstat(in(t, "abs_secret"), &st) == 0 &&
	    S_ISLNK(st.st_mode));
	assert_true(lstat(in(t, "x"), &st) == 0 && S_ISLNK(st.st_mode));

	assert_int_equal(fileop_write(t->wsfd, "d", c, 3, &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	assert_int_equal(fileop_write(t->wsfd, "a.txt/under", c, 3, &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	assert_int_equal(fileop_write(t->wsfd, "", c, 3, &r), -1);
	assert_string_equal(r.code, ERR_BAD_REQUEST);
	assert_int_equal(fileop_write(t->wsfd, "dir/", c, 3, &r), -1);
	assert_string_equal(r.code, ERR_BAD_REQUEST);
	assert_int_equal(fileop_write(t->wsfd, "../new", c, 3, &r), -1);
	assert_string_equal(r.code, ERR_BAD_REQUEST);
	close(c);
	outside_untouched(t);
	assert_false(exists("/tmp/new"));
}

/*
 * A link swapped in between two operations: the directory written into
 * first becomes a link out of the workspace; the next write is refused.
 */
static void
test_write_swapped(void **state)
{
	struct tree		*t = *state;
	struct fileop_result	 r;
	char			 cmd[512];
	int			 c;

	c = content("abc");
	assert_int_equal(fileop_write(t->wsfd, "s/first", c, 3, &r), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", in(t, "s"));
	assert_int_equal(system(cmd), 0);
	assert_int_equal(symlink(t->outside, in(t, "s")), 0);
	assert_int_equal(fileop_write(t->wsfd, "s/new", c, 3, &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_mkdir(t->wsfd, "s/newdir", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_read(t->wsfd, "s/secret", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_delete(t->wsfd, "s/secret", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	/* A parent component that is a link out, made on the way down. */
	assert_int_equal(symlink(t->outside, in(t, "p2")), 0);
	assert_int_equal(fileop_write(t->wsfd, "p2/newdir/f", c, 3, &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	close(c);
	outside_untouched(t);
}

/*
 * A link swapped in while the operations run: a child flips "race"
 * between a directory of the workspace and a link out of it (rename is
 * atomic) as fast as it can, while writes, reads, mkdirs and deletes go
 * through "race/". Whatever each one met, none reached the outside.
 */
static void
test_race_swap(void **state)
{
	struct tree		*t = *state;
	struct fileop_result	 r;
	char			 real[512], link[512], race[512], path[256];
	pid_t			 pid;
	int			 c, i, status;

	snprintf(real, sizeof(real), "%s", in(t, "race_dir"));
	snprintf(link, sizeof(link), "%s", in(t, "race_link"));
	snprintf(race, sizeof(race), "%s", in(t, "race"));
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(symlink(t->outside, link), 0);
	assert_int_equal(rename(real, race), 0);
	if ((pid = test_fork()) == 0) {
		/* race is the directory; swap the link in and out, forever */
		for (;;) {
			if (renameat2(AT_FDCWD, link, AT_FDCWD, race,
			    RENAME_EXCHANGE) == -1)
				_exit(1);
		}
	}
	assert_true(pid > 0);
	c = content("raced");
	for (i = 0; i < 2000; i++) {
		if (fileop_write(t->wsfd, "race/f", c, 5, &r) == -1)
			assert_true(strcmp(r.code, ERR_FORBIDDEN) == 0 ||
			    strcmp(r.code, ERR_NOT_FOUND) == 0 ||
			    strcmp(r.code, ERR_CONFLICT) == 0);
		fileop_mkdir(t->wsfd, "race/newdir", &r);
		if (fileop_read(t->wsfd, "race/secret", &r) == 0)
			fail_msg("read the outside through a swapped link");
		fileop_delete(t->wsfd, "race/secret", &r);
		fileop_delete(t->wsfd, "race/newdir", &r);
		if (fileop_list(t->wsfd, "race/", &r) == 0) {
			if (strstr(slurp(r.fd), "secret") != NULL)
				fail_msg("listed the outside through a link");
			close(r.fd);
		}
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	assert_true(WIFSIGNALED(status));	/* it swapped all along */
	close(c);
	outside_untouched(t);
	snprintf(path, sizeof(path), "%s/f", t->outside);
	assert_false(exists(path));
}

/*
 * A full file system (root only: a 64 KiB tmpfs in a mount namespace of
 * a child): no_space, the old file untouched, no temporary left.
 */
static void
test_write_full(void **state)
{
	struct tree	*t = *state;
	pid_t		 pid;
	int		 status;

	if (geteuid() != 0)
		skip();
	if ((pid = test_fork()) == 0) {
		struct fileop_result	 r;
		char			*big;
		int			 c, ws, n;
		size_t			 sz = 1 << 20;

		if (unshare(CLONE_NEWNS) == -1 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1 ||
		    mount("tmpfs", t->ws, "tmpfs", 0, "size=64k") == -1)
			_exit(2);
		if ((ws = fileop_workspace(t->ws)) == -1)
			_exit(3);
		c = content("old");
		if (fileop_write(ws, "f", c, 3, &r) == -1)
			_exit(4);
		big = calloc(1, sz + 1);
		memset(big, 'b', sz);
		close(c);
		c = content(big);
		n = fileop_write(ws, "f", c, (int64_t)sz, &r);
		if (n != -1 || strcmp(r.code, ERR_NO_SPACE) != 0)
			_exit(5);
		if (!holds(in(t, "f"), "old"))
			_exit(6);
		if (fileop_list(ws, "", &r) == -1 || r.count != 1)
			_exit(7);	/* no temporary file left */
		_exit(0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* mkdir: with its parents, created said, a file in the way a conflict. */
static void
test_mkdir(void **state)
{
	struct tree		*t = *state;
	struct fileop_result	 r;
	struct stat		 st;

	assert_int_equal(fileop_mkdir(t->wsfd, "m/n/o/", &r), 0);
	assert_true(r.created);
	assert_true(stat(in(t, "m/n/o"), &st) == 0 && S_ISDIR(st.st_mode));
	assert_int_equal(fileop_mkdir(t->wsfd, "m/n/o", &r), 0);
	assert_false(r.created);
	assert_int_equal(fileop_mkdir(t->wsfd, "m/n/p", &r), 0);
	assert_true(r.created);
	assert_int_equal(fileop_mkdir(t->wsfd, "", &r), 0);
	assert_false(r.created);
	assert_int_equal(fileop_mkdir(t->wsfd, "in_dir", &r), 0);
	assert_false(r.created);
	assert_int_equal(fileop_mkdir(t->wsfd, "a.txt", &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	assert_int_equal(fileop_mkdir(t->wsfd, "a.txt/sub", &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	assert_int_equal(fileop_mkdir(t->wsfd, "up/outside/newdir", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_mkdir(t->wsfd, "abs/newdir", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_mkdir(t->wsfd, "root/tmp/newdir", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_mkdir(t->wsfd, "dangling", &r), -1);
	assert_true(strcmp(r.code, ERR_NOT_FOUND) == 0);
	assert_false(exists(in(t, "nowhere")));
	outside_untouched(t);
}

/* delete: a file, a link (never its target), an empty dir; no more. */
static void
test_delete(void **state)
{
	struct tree		*t = *state;
	struct fileop_result	 r;

	assert_int_equal(fileop_delete(t->wsfd, "a.txt", &r), 0);
	assert_true(r.deleted);
	assert_false(exists(in(t, "a.txt")));
	assert_int_equal(fileop_delete(t->wsfd, "a.txt", &r), -1);
	assert_string_equal(r.code, ERR_NOT_FOUND);
	/* The links go, what they point to stays. */
	assert_int_equal(fileop_delete(t->wsfd, "abs_secret", &r), 0);
	assert_false(exists(in(t, "abs_secret")));
	assert_int_equal(fileop_delete(t->wsfd, "abs", &r), 0);
	assert_int_equal(fileop_delete(t->wsfd, "x", &r), 0);
	assert_true(exists("/etc/passwd"));
	assert_int_equal(fileop_delete(t->wsfd, "in_dir", &r), 0);
	assert_true(exists(in(t, "d/inner.txt")));
	/* Through links out: refused, the target stays. */
	assert_int_equal(fileop_delete(t->wsfd, "up/outside/secret", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_delete(t->wsfd, "sneak/secret", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	assert_int_equal(fileop_delete(t->wsfd, "root/tmp", &r), -1);
	assert_string_equal(r.code, ERR_FORBIDDEN);
	/* A directory: only when empty. */
	assert_int_equal(fileop_delete(t->wsfd, "d", &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	assert_true(exists(in(t, "d/inner.txt")));
	assert_int_equal(fileop_delete(t->wsfd, "d/inner.txt", &r), 0);
	assert_int_equal(fileop_delete(t->wsfd, "d/", &r), 0);
	assert_false(exists(in(t, "d")));
	assert_int_equal(fileop_delete(t->wsfd, "fifo/", &r), -1);
	assert_string_equal(r.code, ERR_CONFLICT);
	assert_int_equal(fileop_delete(t->wsfd, "fifo", &r), 0);
	assert_int_equal(fileop_delete(t->wsfd, "", &r), -1);
	assert_string_equal(r.code, ERR_BAD_REQUEST);
	assert_int_equal(fileop_delete(t->wsfd, "..", &r), -1);
	assert_string_equal(r.code, ERR_BAD_REQUEST);
	outside_untouched(t);
	assert_true(exists(t->ws));
}

/* fileop_run: the operations by name, a write without content refused. */
static void
test_run(void **state)
{
	struct tree		*t = *state;
	struct fileop_result	 r;

	assert_int_equal(fileop_run(t->wsfd, "chmod", "a.txt", -1, 0, &r), -1);
	assert_string_equal(r.code, ERR_BAD_REQUEST);
	assert_int_equal(fileop_run(t->wsfd, "write", "a.txt", -1, 0, &r), -1);
	assert_string_equal(r.code, ERR_BAD_REQUEST);
	assert_true(holds(in(t, "a.txt"), "hello\n"));
	assert_int_equal(fileop_run(t->wsfd, "read", "a.txt", -1, 0, &r), 0);
	close(r.fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_ok),
		cmocka_unit_test(test_utf8),
		cmocka_unit_test_setup_teardown(test_resolve, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_device, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_truncated, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_swapped, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_race_swap, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_write_full, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_mkdir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
