/*
 * The uids and gids spawns run as. Started as root, each hostgate user
 * has their own: from HOSTGATE_UID_RANGE (gid == uid), which must be
 * unknown to NSS and clear of every range in /etc/subuid and /etc/subgid,
 * so that no account, group or user namespace of the host shares one; or
 * an existing Unix account mapped to the user (uid >= 1000). Never 0, and
 * never the uid or gid of one of hostgate's daemons.
 */
#include <sys/types.h>
#include <sys/capability.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandboxd.h"

#define IDS_MAPPED_MIN	1000	/* Debian Policy: below are the system's */
#define IDS_NOBODY	65534	/* the overflow id, shared by design */

static long	ids_range[2] = { -1, -1 };
static uid_t	ids_daemon_uid[3];
static gid_t	ids_daemon_gid[3];
static int	ids_ndaemons;

/* Whether [a, b] and [c, d] overlap. */
static int
ids_overlap(long a, long b, long c, long d)
{
	return a <= d && c <= b;
}

int
ids_check_subid(const char *path, long lo, long hi, char *err, size_t errsz)
{
	FILE		*f;
	char		 line[512], *name, *start, *count, *end;
	long long	 s, n;
	int		 lineno = 0;

	if ((f = fopen(path, "re")) == NULL)
		return errno == ENOENT ? 0 : (snprintf(err, errsz, "%s: %s",
		    path, strerror(errno)), -1);
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		/* "NAME:START:COUNT" */
		name = line;
		if ((start = strchr(name, ':')) == NULL ||
		    (count = strchr(start + 1, ':')) == NULL)
			continue;
		*start++ = '\0';
		*count++ = '\0';
		errno = 0;
		s = strtoll(start, &end, 10);
		if (errno != 0 || *end != '\0' || s < 0)
			continue;
		n = strtoll(count, &end, 10);
		if (errno != 0 || *end != '\0' || n <= 0)
			continue;
		if (ids_overlap(lo, hi, (long)s, (long)(s + n - 1))) {
			snprintf(err, errsz, "%s line %d (%s:%lld:%lld, ids "
			    "%lld-%lld) overlaps HOSTGATE_UID_RANGE=%ld-%ld: "
			    "choose a range that no subordinate id range uses",
			    path, lineno, name, s, n, s, s + n - 1, lo, hi);
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	return 0;
}

int
ids_check_nss(long lo, long hi, char *err, size_t errsz)
{
	struct passwd	*pw;
	struct group	*gr;
	int		 rc = 0;

	setpwent();
	while (rc == 0 && (pw = getpwent()) != NULL)
		if ((long)pw->pw_uid >= lo && (long)pw->pw_uid <= hi) {
			snprintf(err, errsz, "uid %ld is the account %s (NSS), "
			    "inside HOSTGATE_UID_RANGE=%ld-%ld: choose a range "
			    "no account uses", (long)pw->pw_uid, pw->pw_name,
			    lo, hi);
			rc = -1;
		}
	endpwent();
	setgrent();
	while (rc == 0 && (gr = getgrent()) != NULL)
		if ((long)gr->gr_gid >= lo && (long)gr->gr_gid <= hi) {
			snprintf(err, errsz, "gid %ld is the group %s (NSS), "
			    "inside HOSTGATE_UID_RANGE=%ld-%ld: choose a range "
			    "no group uses", (long)gr->gr_gid, gr->gr_name,
			    lo, hi);
			rc = -1;
		}
	endgrent();
	return rc;
}

/* Remember a daemon's service user, whose ids no spawn may take. */
static void
ids_daemon(const char *user)
{
	struct passwd	*pw;

	if (user == NULL || ids_ndaemons >= 3 ||
	    (pw = getpwnam(user)) == NULL)
		return;
	ids_daemon_uid[ids_ndaemons] = pw->pw_uid;
	ids_daemon_gid[ids_ndaemons++] = pw->pw_gid;
}

void
ids_setup(const struct config *conf)
{
	ids_range[0] = conf->uid_range[0];
	ids_range[1] = conf->uid_range[1];
	ids_ndaemons = 0;
	ids_daemon(conf->front_user);
	ids_daemon(conf->broker_user);
	ids_daemon(conf->sandbox_user);
}

void
ids_init(const struct config *conf)
{
	char	err[512];

	ids_setup(conf);
	if (ids_check_nss(ids_range[0], ids_range[1], err, sizeof(err)) == -1 ||
	    ids_check_subid("/etc/subuid", ids_range[0], ids_range[1], err,
	    sizeof(err)) == -1 ||
	    ids_check_subid("/etc/subgid", ids_range[0], ids_range[1], err,
	    sizeof(err)) == -1)
		fatalx("%s", err);
	log_info("per-user uids and gids from HOSTGATE_UID_RANGE=%ld-%ld",
	    ids_range[0], ids_range[1]);
}

/* Whether an id is one of a daemon's. */
static int
ids_is_daemon(int64_t uid, int64_t gid)
{
	int	i;

	for (i = 0; i < ids_ndaemons; i++)
		if ((uid >= 0 && uid == (int64_t)ids_daemon_uid[i]) ||
		    (gid >= 0 && gid == (int64_t)ids_daemon_gid[i]))
			return 1;
	return 0;
}

int
ids_check(int64_t uid, int64_t gid, char *err, size_t errsz)
{
	struct passwd	*pw;

	if (uid <= 0 || gid <= 0 || uid > 4294967294LL || gid > 4294967294LL ||
	    uid == IDS_NOBODY || gid == IDS_NOBODY) {
		snprintf(err, errsz, "uid %lld, gid %lld: never root, nobody or "
		    "out of range", (long long)uid, (long long)gid);
		return -1;
	}
	if (ids_is_daemon(uid, gid)) {
		snprintf(err, errsz, "uid %lld, gid %lld: the ids of a "
		    "hostgate daemon", (long long)uid, (long long)gid);
		return -1;
	}
	if (uid >= ids_range[0] && uid <= ids_range[1]) {
		if (gid < ids_range[0] || gid > ids_range[1]) {
			snprintf(err, errsz, "gid %lld is outside "
			    "HOSTGATE_UID_RANGE=%ld-%ld", (long long)gid,
			    ids_range[0], ids_range[1]);
			return -1;
		}
		return 0;
	}
	/* A mapped Unix account: its own uid and primary gid. */
	if (uid < IDS_MAPPED_MIN || (pw = getpwuid((uid_t)uid)) == NULL) {
		snprintf(err, errsz, "uid %lld is neither in "
		    "HOSTGATE_UID_RANGE=%ld-%ld nor an account with a uid of "
		    "%d or more", (long long)uid, ids_range[0], ids_range[1],
		    IDS_MAPPED_MIN);
		return -1;
	}
	if ((int64_t)pw->pw_gid != gid) {
		snprintf(err, errsz, "gid %lld is not the primary group of the "
		    "account %s (uid %lld)", (long long)gid, pw->pw_name,
		    (long long)uid);
		return -1;
	}
	return 0;
}

int
ids_per_user(void)
{
	cap_t		 caps;
	cap_flag_value_t v = CAP_CLEAR;

	if ((caps = cap_get_proc()) == NULL)
		return 0;
	if (cap_get_flag(caps, CAP_SETUID, CAP_EFFECTIVE, &v) == -1)
		v = CAP_CLEAR;
	cap_free(caps);
	return v == CAP_SET;
}
