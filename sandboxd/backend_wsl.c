/*
 * WSL2: detection, the extra bwrap arguments that cut a sandbox off from
 * Windows, and the wsl.exe command line a Windows-side launcher runs.
 *
 * Inside WSL2 the Linux backend (backend_bwrap.c) does the sandboxing; what
 * WSL adds is a way out to Windows, "interop": running a Windows .exe from
 * Linux starts it on the Windows side, as the Windows user, outside any
 * Linux sandbox. It works like this: the kernel's binfmt_misc entry
 * WSLInterop hands every PE file to /init, which asks the distro's interop
 * server, found through the socket that $WSL_INTEROP names under /run/WSL,
 * to start the program on Windows over a Hyper-V socket (AF_VSOCK). Windows'
 * drives are mounted under /mnt (drvfs) and writable by the Windows user.
 *
 * What blocks that here:
 *  - /run/WSL is masked with an empty tmpfs, so there is no interop socket;
 *  - the interop variables are dropped (bwrap also runs with --clearenv);
 *  - AF_VSOCK sockets are refused by the seccomp policy
 *    (profiles/seccomp.policy allows socket() for AF_UNIX, AF_INET,
 *    AF_INET6 and AF_NETLINK only), so /init cannot reach Windows'
 *    listeners by itself;
 *  - /mnt and every other drvfs mount are masked; an allowlisted /mnt path
 *    is bound back.
 * The binfmt_misc entry itself cannot be masked from inside: the kernel
 * consults its registration (kernel-wide, interpreter opened when it was
 * registered), not a file under /proc; and in bwrap's fresh /proc,
 * /proc/sys/fs/binfmt_misc is an empty directory anyway, so binding
 * /dev/null over WSLInterop would fail. Without a socket and without vsock,
 * the interpreter it starts has nothing to talk to.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

#define WSL_MAX_MNT	32
#define WSL_DISTRO_MAX	64

/*
 * Variables that carry a way to Windows or to its GUI and audio servers;
 * dropped even though bwrap clears the environment, and refused in a
 * spawn's own environment.
 */
static const char *const wsl_vars[] = {
	"WSL_INTEROP",		/* the interop server's socket: runs .exe */
	"WSLENV",		/* variables forwarded to Windows processes */
	"WSL_DISTRO_NAME",	/* names the distro to Windows-side tools */
	"DISPLAY",		/* WSLg's X server (/tmp/.X11-unix, /mnt/wslg) */
	"WAYLAND_DISPLAY",	/* WSLg's Wayland compositor */
	"PULSE_SERVER",		/* WSLg's audio server, unix:/mnt/wslg/... */
	NULL
};

/* WSL's own mounts under /mnt, never to be bound into a sandbox. */
static const char *const wsl_mnt_reserved[] = { "/mnt/wsl", "/mnt/wslg",
	NULL };

/* The first line of root/path into buf; 0, or -1 and errno. */
static int
wsl_read_line(const char *root, const char *path, char *buf, size_t size)
{
	char	 full[4096];
	FILE	*f;

	snprintf(full, sizeof(full), "%s%s", root, path);
	if ((f = fopen(full, "re")) == NULL)
		return -1;
	if (fgets(buf, size, f) == NULL) {
		fclose(f);
		errno = EIO;
		return -1;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Whether root/path exists. */
static int
wsl_exists(const char *root, const char *path)
{
	char		full[4096];
	struct stat	st;

	snprintf(full, sizeof(full), "%s%s", root, path);
	return stat(full, &st) == 0;
}

/*
 * Whether this is WSL2. WSL2 runs a real Linux kernel whose release says
 * "microsoft" in lower case ("5.15.153.1-microsoft-standard-WSL2", older
 * ones "4.19.128-microsoft-standard"); WSL1 translates system calls, has no
 * namespaces for bwrap, and says "Microsoft" ("4.4.0-19041-Microsoft"). A
 * custom WSL2 kernel may say neither: then the interop entry or /run/WSL
 * tell.
 */
int
wsl_detect(const char *root, char *why, size_t whysz)
{
	char		 rel[256], esc[LOG_ESCAPE_MAX];
	const char	*from = "/proc/sys/kernel/osrelease";
	int		 interop, runwsl;

	if (root == NULL)
		root = "";
	interop = wsl_exists(root, "/proc/sys/fs/binfmt_misc/WSLInterop");
	runwsl = wsl_exists(root, "/run/WSL");
	if (wsl_read_line(root, from, rel, sizeof(rel)) == -1) {
		from = "/proc/version";
		if (wsl_read_line(root, from, rel, sizeof(rel)) == -1) {
			snprintf(why, whysz, "cannot read "
			    "/proc/sys/kernel/osrelease nor /proc/version: %s",
			    strerror(errno));
			return 0;
		}
	}
	log_escape(rel, (size_t)-1, esc, sizeof(esc));
	if (strstr(rel, "Microsoft") != NULL &&
	    strstr(rel, "microsoft") == NULL) {
		snprintf(why, whysz, "WSL1 (kernel \"%s\"): it has no Linux "
		    "kernel, hence no namespaces for bwrap; convert the "
		    "distro with wsl --set-version DISTRO 2", esc);
		return 0;
	}
	if (strstr(rel, "microsoft") != NULL || strstr(rel, "WSL2") != NULL) {
		snprintf(why, whysz, "WSL2 (kernel \"%s\"); interop: %s", esc,
		    interop || runwsl ? "enabled, will be blocked" :
		    "appears disabled");
		return 1;
	}
	if (interop || runwsl) {
		snprintf(why, whysz, "WSL2 with a custom kernel (\"%s\"): %s "
		    "present", esc, interop ?
		    "/proc/sys/fs/binfmt_misc/WSLInterop" : "/run/WSL");
		return 1;
	}
	snprintf(why, whysz, "not WSL (kernel \"%s\")", esc);
	return 0;
}

/*
 * Whether a mount is a Windows drive: drvfs (WSL1 style, or mount -t
 * drvfs), 9p or virtiofs with drvfs options, or a "C:\"-like source.
 */
static int
wsl_is_drvfs(const char *fstype, const char *source, const char *opts)
{
	if (strcmp(fstype, "drvfs") == 0 || strstr(opts, "aname=drvfs") != NULL)
		return 1;
	if (strcmp(fstype, "9p") != 0 && strcmp(fstype, "virtiofs") != 0)
		return 0;
	return strncmp(source, "drvfs", 5) == 0 ||
	    (isalpha((unsigned char)source[0]) && source[1] == ':');
}

/* Whether path is dir or below it. */
static int
wsl_under(const char *path, const char *dir)
{
	size_t	len = strlen(dir);

	return strncmp(path, dir, len) == 0 &&
	    (path[len] == '\0' || path[len] == '/');
}

/*
 * Add a --tmpfs for each Windows drive mounted outside /mnt (wsl.conf's
 * automount root may be elsewhere). Fails closed: a mount point that
 * cannot be masked safely stops the spawn.
 */
static int
wsl_mask_drives(const char *root, struct strv *masks, char *err,
    size_t errsz)
{
	char		 path[4096], *line = NULL, *f[64], *p;
	const char	*fstype, *source, *opts;
	size_t		 cap = 0, n, i;
	FILE		*fp;
	int		 rc = 0;

	snprintf(path, sizeof(path), "%s/proc/self/mountinfo", root);
	if ((fp = fopen(path, "re")) == NULL) {
		snprintf(err, errsz, "WSL2: cannot read /proc/self/mountinfo "
		    "to find Windows drives: %s", strerror(errno));
		return -1;
	}
	while (rc == 0 && getline(&line, &cap, fp) != -1) {
		line[strcspn(line, "\n")] = '\0';
		/*
		 * id parent dev root MOUNTPOINT opts [optional fields...] -
		 * FSTYPE SOURCE SUPEROPTS
		 */
		n = 0;
		for (p = line; n < 64 && (f[n] = strsep(&p, " ")) != NULL; n++)
			;
		for (i = 6; i < n && strcmp(f[i], "-") != 0; i++)
			;
		if (i + 2 >= n)
			continue;
		fstype = f[i + 1];
		source = f[i + 2];
		opts = i + 3 < n ? f[i + 3] : "";
		if (!wsl_is_drvfs(fstype, source, opts))
			continue;
		mountinfo_unescape(f[4]);
		if (wsl_under(f[4], "/mnt"))
			continue;	/* under the /mnt mask already */
		if (path_check("Windows drive mount point", f[4], err,
		    errsz) == -1)
			rc = -1;
		else {
			strv_add(masks, "--tmpfs");
			strv_add(masks, f[4]);
		}
	}
	free(line);
	fclose(fp);
	return rc;
}

/* Whether path lies under /run/WSL, /mnt or one of the drive masks. */
static int
wsl_masked(const char *path, const struct strv *masks)
{
	size_t	i;

	if (wsl_under(path, "/run/WSL") || wsl_under(path, "/mnt"))
		return 1;
	for (i = 1; i < masks->n; i += 2)
		if (wsl_under(path, masks->v[i]))
			return 1;
	return 0;
}

/* An allowlisted /mnt path: below /mnt, not WSL's own mounts. */
static int
wsl_mnt_check(const char *p, char *err, size_t errsz)
{
	const char *const	*r;

	if (path_check("WSL2 /mnt path", p, err, errsz) == -1)
		return -1;
	if (strncmp(p, "/mnt/", 5) != 0) {
		snprintf(err, errsz, "WSL2 /mnt path \"%s\": not below /mnt",
		    p);
		return -1;
	}
	for (r = wsl_mnt_reserved; *r != NULL; r++) {
		if (wsl_under(p, *r)) {
			snprintf(err, errsz, "WSL2 /mnt path \"%s\": %s is "
			    "WSL's own (interop, GUI), never shared", p, *r);
			return -1;
		}
	}
	return 0;
}

/*
 * The bwrap arguments that WSL2 adds, appended to extra (bwrap_build puts
 * them after its own mounts, before the environment and "--"). root is ""
 * or a test tree holding proc/self/mountinfo. mnt_allow: colon-separated
 * /mnt paths to bind back (read-only under read-only), or NULL.
 */
int
wsl_harden(const struct spawn_spec *s, const char *root,
    const char *mnt_allow, struct strv *extra, char *err, size_t errsz)
{
	const char *const	*v;
	struct strv		 a, masks;
	char			*list = NULL, *p, *next;
	char *const		*e;
	size_t			 i, len, nmnt = 0;
	int			 rc = -1;

	if (root == NULL)
		root = "";
	if (s->workspace == NULL) {
		snprintf(err, errsz, "WSL2: no workspace");
		return -1;
	}
	strv_init(&a);
	strv_init(&masks);
	for (e = s->env; e != NULL && *e != NULL; e++) {
		for (v = wsl_vars; *v != NULL; v++) {
			len = strlen(*v);
			if (strncmp(*e, *v, len) == 0 && (*e)[len] == '=') {
				snprintf(err, errsz, "WSL2: %s may not be set: "
				    "it leads out of the sandbox", *v);
				goto out;
			}
		}
	}
	if (wsl_mask_drives(root, &masks, err, errsz) == -1)
		goto out;

	/* No interop socket: an empty /run/WSL. */
	strv_add(&a, "--tmpfs");
	strv_add(&a, "/run/WSL");
	/* No Windows drive, nor WSL's shared /mnt/wsl and WSLg's /mnt/wslg. */
	strv_add(&a, "--tmpfs");
	strv_add(&a, "/mnt");
	for (i = 0; i < masks.n; i++)
		strv_add(&a, masks.v[i]);
	/* The masks above may cover the workspace: bind it again. */
	if (wsl_masked(s->workspace, &masks)) {
		if (path_check("workspace", s->workspace, err, errsz) == -1)
			goto out;
		strv_add(&a, perm_read_only(s->perm) ? "--ro-bind" :
		    "--bind");
		strv_add(&a, s->workspace);
		strv_add(&a, s->workspace);
	}
	/* Allowlisted drive paths; absent ones stay absent (-try). */
	if (mnt_allow != NULL && (list = strdup(mnt_allow)) == NULL)
		fatal("%s", __func__);
	for (p = list; p != NULL; p = next) {
		if ((next = strchr(p, ':')) != NULL)
			*next++ = '\0';
		if (*p == '\0')
			continue;
		if (++nmnt > WSL_MAX_MNT) {
			snprintf(err, errsz, "WSL2 /mnt paths: more than %d",
			    WSL_MAX_MNT);
			goto out;
		}
		if (wsl_mnt_check(p, err, errsz) == -1)
			goto out;
		strv_add(&a, perm_read_only(s->perm) ? "--ro-bind-try" :
		    "--bind-try");
		strv_add(&a, p);
		strv_add(&a, p);
	}
	for (v = wsl_vars; *v != NULL; v++) {
		strv_add(&a, "--unsetenv");
		strv_add(&a, *v);
	}
	for (i = 0; i < a.n; i++)
		strv_add(extra, a.v[i]);
	rc = 0;
out:
	free(list);
	strv_free(&masks);
	strv_free(&a);
	return rc;
}

/* A WSL distribution name: letters, digits, ".", "_" and "-". */
static int
wsl_distro_ok(const char *d)
{
	size_t	len = strlen(d);

	return len > 0 && len <= WSL_DISTRO_MAX && isalnum((unsigned char)d[0])
	    && strspn(d, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789._-") == len;
}

/*
 * wsl.exe -d DISTRO --cd DIR --exec BWRAP_ARGV...: --exec runs bwrap
 * directly, with no Linux shell to parse the arguments. The Windows-side
 * launcher must still quote each element for CreateProcess (the
 * CommandLineToArgvW rules), or better pass them as a list.
 */
int
wsl_launcher_argv(const char *distro, const char *dir,
    const struct strv *bwrap_argv, struct strv *out, char *err, size_t errsz)
{
	char	esc[LOG_ESCAPE_MAX];
	size_t	i;

	if (distro == NULL || !wsl_distro_ok(distro)) {
		log_escape(distro != NULL ? distro : "", (size_t)-1, esc,
		    sizeof(esc));
		snprintf(err, errsz, "WSL distro \"%s\": 1 to %d letters, "
		    "digits, \".\", \"_\" or \"-\", starting with a letter or "
		    "digit", esc, WSL_DISTRO_MAX);
		return -1;
	}
	if (path_check("WSL directory", dir, err, errsz) == -1)
		return -1;
	if (bwrap_argv == NULL || bwrap_argv->n == 0) {
		snprintf(err, errsz, "WSL launcher: no bwrap command line");
		return -1;
	}
	if (path_check("bwrap", bwrap_argv->v[0], err, errsz) == -1)
		return -1;
	strv_add(out, "wsl.exe");
	strv_add(out, "-d");
	strv_add(out, distro);
	strv_add(out, "--cd");
	strv_add(out, dir);
	strv_add(out, "--exec");
	for (i = 0; i < bwrap_argv->n; i++)
		strv_add(out, bwrap_argv->v[i]);
	return 0;
}
