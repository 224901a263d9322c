/*
 * The account files a sandbox sees: /etc/passwd and /etc/group that name
 * the spawn's uid and gid after its hostgate user, and /etc/mailname.
 * Without them a uid of HOSTGATE_UID_RANGE has no name inside ("I have no
 * name!" in the prompt, whoami fails, git has no identity).
 *
 * The files hold a minimal set, not the host's: inside the sandbox's user
 * namespace only the user's own uid and gid are mapped and every other id
 * reads as the overflow id 65534, so root and nobody (and their groups)
 * are the only other names a process there can meet; the host's account
 * list stays out of the sandbox.
 *
 * sandboxd writes them per user in WORKSPACE_ROOT/.etc (its own, 0711; no
 * user name starts with a dot, so no workspace can be called that), files
 * of its own, 0644, replaced whole by rename, so that a spawn starting
 * while one is replaced sees the old file or the new one. In root mode a
 * user's uid can neither write them nor put anything in their place.
 * Rootless they share the users' one uid, and no spawn's tree holds the
 * directory: a sandbox does not mount it, a direct spawn's hider covers
 * the workspace root. Both bind the files read-only.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

#define PASSWD_DIR	".etc"
#define PASSWD_MAX	2048	/* the largest file: three short lines */
#define PASSWD_ID_ROOT	0
#define PASSWD_ID_NOBODY 65534	/* the overflow uid and gid */

static char	passwd_dir[4096];

/* The directory of the files under a workspace root, into buf. */
void
passwd_dir_of(const char *workspace_root, char *buf, size_t bufsz)
{
	snprintf(buf, bufsz, "%s/%s", workspace_root, PASSWD_DIR);
}

/*
 * Whether a field may go into a line of passwd(5) or group(5): no colon
 * (the separator), comma (the gecos and member lists'), newline or other
 * control character.
 */
static int
passwd_field_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if (*s == ':' || *s == ',' || (unsigned char)*s < 0x20 ||
		    *s == 0x7f)
			return 0;
	return 1;
}

/*
 * The passwd and group text for user (uid, gid, home): root, the user,
 * nobody; root, the user's group (named after the user), nogroup. A
 * fixed entry with the user's name or id is left out, so that a name or
 * an id means one account. 0, or -1 and err (a name that is no user name,
 * a home that would break the format).
 */
int
passwd_format(const char *user, uid_t uid, gid_t gid, const char *home,
    char *pw, size_t pwsz, char *gr, size_t grsz, char *err, size_t errsz)
{
	int	n, m;

	/* Checked by brokerd already; the file's format depends on it. */
	if (!str_is_user_name(user)) {
		snprintf(err, errsz, "not a user name for /etc/passwd");
		return -1;
	}
	if (home[0] != '/' || !passwd_field_ok(home)) {
		snprintf(err, errsz, "the workspace path %s cannot be a home "
		    "in /etc/passwd (a colon, comma or control character)",
		    home);
		return -1;
	}
	n = m = 0;
	if (uid != PASSWD_ID_ROOT && strcmp(user, "root") != 0)
		n = snprintf(pw, pwsz, "root:x:0:0:root:/root:/bin/bash\n");
	if (gid != PASSWD_ID_ROOT && strcmp(user, "root") != 0)
		m = snprintf(gr, grsz, "root:x:0:\n");
	/* The gecos is git's default user.name: it must not be empty. */
	n += snprintf(pw + n, pwsz - n, "%s:x:%u:%u:%s:%s:/bin/bash\n", user,
	    (unsigned)uid, (unsigned)gid, user, home);
	m += snprintf(gr + m, grsz - m, "%s:x:%u:\n", user, (unsigned)gid);
	if (uid != PASSWD_ID_NOBODY && strcmp(user, "nobody") != 0)
		n += snprintf(pw + n, pwsz - n, "nobody:x:65534:65534:nobody:"
		    "/nonexistent:/usr/sbin/nologin\n");
	if (gid != PASSWD_ID_NOBODY && strcmp(user, "nogroup") != 0)
		m += snprintf(gr + m, grsz - m, "nogroup:x:65534:\n");
	if (n < 0 || (size_t)n >= pwsz || m < 0 || (size_t)m >= grsz) {
		snprintf(err, errsz, "/etc/passwd for %s is too long", user);
		return -1;
	}
	return 0;
}

/* Write path with text unless it holds text already; 0, or -1 and err. */
static int
passwd_put(const char *path, const char *text, char *err, size_t errsz)
{
	char	*old;
	size_t	 len;
	int	 same;

	if ((old = file_read(path, PASSWD_MAX, &len)) != NULL) {
		same = len == strlen(text) && memcmp(old, text, len) == 0;
		free(old);
		if (same)
			return 0;
	}
	if (file_write_atomic(path, text, strlen(text), 0644) == -1) {
		snprintf(err, errsz, "cannot write %s: %s", path,
		    strerror(errno));
		return -1;
	}
	return 0;
}

/* At start: the directory of the files (sandboxd_dirs made it). */
void
passwd_init(const struct config *conf)
{
	passwd_dir_of(conf->workspace_root, passwd_dir, sizeof(passwd_dir));
}

/*
 * Make sure user's files hold uid, gid and home, and the mailname (git
 * reads it for the host part of its default e-mail address); their paths
 * into f. 0, or -1 and err.
 */
int
passwd_ensure(const char *user, uid_t uid, gid_t gid, const char *home,
    struct passwd_files *f, char *err, size_t errsz)
{
	char	pw[PASSWD_MAX], gr[PASSWD_MAX];

	if (passwd_dir[0] == '\0') {
		snprintf(err, errsz, "no directory for /etc/passwd");
		return -1;
	}
	if (passwd_format(user, uid, gid, home, pw, sizeof(pw), gr,
	    sizeof(gr), err, errsz) == -1)
		return -1;
	snprintf(f->passwd, sizeof(f->passwd), "%s/%s.passwd", passwd_dir,
	    user);
	snprintf(f->group, sizeof(f->group), "%s/%s.group", passwd_dir, user);
	snprintf(f->mailname, sizeof(f->mailname), "%s/mailname", passwd_dir);
	if (passwd_put(f->passwd, pw, err, errsz) == -1 ||
	    passwd_put(f->group, gr, err, errsz) == -1 ||
	    passwd_put(f->mailname, SANDBOX_HOSTNAME "\n", err, errsz) == -1)
		return -1;
	return 0;
}
