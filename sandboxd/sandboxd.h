/*
 * sandboxd: the only process that spawns. It builds the backend command
 * lines, runs them and answers to brokerd alone.
 */
#ifndef HG_SANDBOXD_H
#define HG_SANDBOXD_H

#include "common.h"

/* A growable NULL-terminated vector of malloc'ed strings (argv, envp). */
struct strv {
	char	**v;
	size_t	  n;
	size_t	  cap;
};

enum spawn_kind { SPAWN_COMMAND, SPAWN_TERMINAL };
enum permission {
	PERM_READ_ONLY,			/* "read-only" */
	PERM_WORKSPACE_WRITE,		/* "workspace-write" (default) */
	PERM_WORKSPACE_WRITE_NET,	/* "workspace-write+network" */
	/* egress only through the proxy (egress.c, bridge.c) */
	PERM_WORKSPACE_WRITE_ALLOW,	/* "workspace-write+allowlist" */
	PERM_READ_ONLY_ALLOW,		/* "read-only+allowlist" */
};

/* Where the allowlist profiles put the bridge and its socket, inside. */
#define EGRESS_BRIDGE_IN	"/run/hostgate/hg-egress-bridge"
#define EGRESS_SOCK_IN		"/run/hostgate/egress.sock"
#define EGRESS_PORT		"3128"
#define EGRESS_PROXY_URL	"http://127.0.0.1:" EGRESS_PORT
#define EGRESS_NO_PROXY		"localhost,127.0.0.1,::1"
#define EGRESS_BRIDGE_NAME	"hg-egress-bridge"

/* The sandbox's host name, and the mail name git's default address uses. */
#define SANDBOX_HOSTNAME	"hostgate"

/* What brokerd approved; the backends turn it into a command line. */
struct spawn_spec {
	enum spawn_kind	  kind;
	enum exec_mode	  mode;		/* sandbox or direct */
	enum permission	  perm;
	const char	 *user;		/* hostgate user name */
	const char	 *session;	/* login session id, or NULL */
	const char	 *workspace;	/* absolute, validated, exists */
	const char	 *cwd;		/* absolute, inside the workspace */
	char *const	 *argv;		/* what runs inside, NULL-terminated */
	char *const	 *env;		/* extra NAME=VALUE, allowlisted */
	const char	 *term;		/* TERM for terminals, or NULL */
	int		  seccomp_fd;	/* BPF for bwrap --seccomp, or -1 */
	const char	 *tmpdir;	/* macOS: the per-spawn temp dir */
	char *const	 *extra;	/* more bwrap arguments (WSL2, probe) */
	int		  netgate;	/* bwrap waits for slirp4netns (spawn.c) */
	int		  netcount;	/* bwrap reports its pid: net counters */
	const char	 *id;		/* the spawn's id when chosen before */
	/* allowlist profiles: the bridge and the per-spawn socket, on the host */
	const char	 *egress_bridge;
	const char	 *egress_sock;
	/* the sandbox's /etc/passwd, /etc/group, /etc/mailname (passwd.c) */
	const char	 *passwd;
	const char	 *group;
	const char	 *mailname;
	/* who it runs as: the user's own ids (root mode), else sandboxd's */
	uid_t		  uid;
	gid_t		  gid;
	/* direct mode: the grant's absolute end, wall ms (0: none, "keep") */
	int64_t		  deadline_ms;
};

/* argv.c */
/* The profile's name ("workspace-write+allowlist"...), or NULL. */
const char *perm_name(enum permission);
/* The profile of a name: 0, or -1 when there is none of that name. */
int	 perm_parse(const char *, enum permission *);
/* Whether a profile binds the workspace read-only. */
int	 perm_read_only(enum permission);
/* Whether a profile's only way out is the egress proxy. */
int	 perm_allowlist(enum permission);
void	 strv_init(struct strv *);
void	 strv_add(struct strv *, const char *);
void	 strv_addf(struct strv *, const char *, ...) HG_PRINTF(2, 3);
void	 strv_free(struct strv *);
/* One line, each element shell-quoted: for logs, goldens and hashes. */
char	*strv_join(const struct strv *);
/*
 * A path that may reach a profile or a command line: absolute, canonical
 * (no ".", ".." or empty components, no trailing slash), no quote,
 * parenthesis, backslash or control character. 0, or -1 and err.
 */
int	 path_check(const char *what, const char *path, char *err, size_t);

/* backend_macos.c */
/* What a macOS spawn needs besides its spawn_spec. */
struct macos_opts {
	const char	*tmpl;		/* text of profiles/macos.sb */
	const char	*writable;	/* HOST_SANDBOX_MACOS_WRITABLE_PATHS or NULL */
	const char	*hidden;	/* colon-separated dirs kept unreadable */
	const char	*tty;		/* a terminal's pty slave, /dev/ttysNNN */
};
/* Expand the template in every configuration once: 0, or -1 and err. */
int	 macos_template_check(const char *tmpl, char *err, size_t);
/* Append a spawn's sandbox-exec command line: 0, or -1, err, argv as was. */
int	 macos_build(const struct spawn_spec *, const struct macos_opts *,
	    struct strv *argv, char *err, size_t);

/* backend_wsl.c */
/* 1 inside WSL2, else 0; why says what was found. root: "" or a test dir. */
int	 wsl_detect(const char *root, char *why, size_t);
/* Extra bwrap arguments (before "--") that block interop and hide drives. */
int	 wsl_harden(const struct spawn_spec *, const char *root,
	    const char *mnt_allow, struct strv *extra, char *err, size_t);
/* wsl.exe -d DISTRO --cd DIR --exec BWRAP... for a Windows-side launcher. */
int	 wsl_launcher_argv(const char *distro, const char *dir,
	    const struct strv *bwrap_argv, struct strv *out, char *err, size_t);

/* backend.c */
void	 backend_init(struct config *);
/* The bridge binary, next to sandboxd's own executable. */
const char *backend_bridge(void);
struct policy *backend_load(struct config *);
/* Probe the backend now when the last probe is older than max_age_ms. */
void	 backend_probe(int64_t max_age_ms);
/*
 * Turn an approved spec into the argv and envp to exec, or refuse with
 * err: never a weaker backend than the configured one.
 */
int	 backend_build(struct spawn_spec *, struct strv *argv,
	    struct strv *envp, char *err, size_t errsz);
/* The docker runtime: what sandboxd knows of a user's container, or NULL. */
struct json_object *backend_container_json(const char *user, enum permission);
/* What a spec runs under: the backend's name, or "direct". */
const char *backend_name_of(const struct spawn_spec *);
/* {"name", "ok", "reason"} */
struct json_object *backend_json(void);

/* backend_bwrap.c */
int	 bwrap_build(const struct spawn_spec *, const char *bwrap,
	    const char *root, struct strv *, char *err, size_t errsz);

/* backend_docker.c */
/* 0, or -1 and err for a profile the docker runtime cannot give. */
int	 docker_refuse(const struct spawn_spec *, char *err, size_t errsz);
void	 docker_name(const char *user, enum permission, char *, size_t);
int	 docker_create_argv(const char *docker, const char *image,
	    const struct spawn_spec *, struct strv *, char *err, size_t errsz);
int	 docker_exec_argv(const char *docker, const struct spawn_spec *,
	    struct strv *, char *err, size_t errsz);

/* spawn.c */
/* Limits set on every spawned process (setrlimit before exec). */
#define SPAWN_NOFILE	1024
#define SPAWN_NPROC	512	/* per uid: all sandboxes together */
#define SPAWN_NPROC_CG	16384	/* the same with a pids cgroup per spawn */
#define SPAWN_FSIZE	(1024L * 1024 * 1024)	/* largest file: 1 GiB */
#define SPAWN_MAX_KEEP	4	/* fds passed to bwrap: 3, 4, 5, 6 */
struct proc;
/* A fresh spawn id: 16 hex digits. */
void	 spawn_new_id(char id[17]);
void	 spawn_init(struct event_base *, struct config *,
	    void (*exit_cb)(struct proc *));
struct proc *spawn_start(const struct spawn_spec *, const char *backend,
	    const struct strv *argv, char *const envp[], int stdin_fd,
	    int timeout_ms, size_t cap, int cols, int rows,
	    struct ipc_peer *, int64_t req_id, char *err, size_t errsz);
void	 spawn_reap(void);
struct proc *spawn_find(const char *id);
int	 spawn_hangup(const char *id);
int	 spawn_kill_session(const char *session, enum exec_mode);
int	 spawn_master(struct proc *);
const char *spawn_id(struct proc *);
const char *spawn_backend(struct proc *);
const char *spawn_sha256(struct proc *);
void	 spawn_where_json(struct proc *, struct json_object *);
int	 spawn_status(struct proc *);
/* Whether the kernel's OOM killer ended a process of the spawn. */
int	 spawn_oom(struct proc *);
struct json_object *spawn_list(void);
int	 spawn_cwd(const char *workspace, const char *cwd, char *out,
	    size_t outsz, char *err, size_t errsz);
/* 1 when spawns run as their user's uid (root mode), 0: one uid for all. */
int	 spawn_per_user(void);
/* A spawner's answer (spawner.c): the pid, or why it did not start. */
void	 spawn_started(uint64_t seq, pid_t pid, pid_t slirp, int slirp_exit,
	    const int *snmp, const char *err);
/* An allowlist spawn's egress bypass counts, or NULL when none. */
struct json_object *spawn_bypass_json(struct proc *);

/* spawner.c */
/* One spawn for a user's spawner: what the new process gets. */
struct spawner_job {
	uint64_t	 seq;		/* spawn_started() names it so */
	const char	*user;
	int		 tty;		/* stdio[0] is a pty slave, for all 3 */
	int		 stdio[3];
	int		 keep;		/* the seccomp program for fd 3, or -1 */
	int		 netgate;	/* bwrap waits for slirp4netns (4-6) */
	int		 netcount;	/* bwrap gives its pid, waits (4-5) */
	int		 cgfd;		/* v2 cgroup directory, or -1 */
	const char	*procs;		/* v1 only: cgroup.procs to join */
	int		 setid;		/* switch to uid/gid */
	uid_t		 uid;
	gid_t		 gid;
	const char	*cwd;		/* chdir before exec, or NULL */
	/* directories to hide in a mount namespace (NULL-terminated), and
	 * the workspace to keep; NULL: the host's mounts as they are */
	const char *const *hide;
	const char	*workspace;
	/* with hide: the user's /etc/passwd and /etc/group to bind, or NULL */
	const char	*passwd;
	const char	*group;
	int		 nproc;		/* RLIMIT_NPROC */
	char *const	*argv;
	char *const	*envp;
};
/* One file operation for a user's spawner (files.c). */
struct spawner_file_job {
	uint64_t	 seq;		/* files_started() names it so */
	const char	*user;
	int		 setid;		/* switch to uid/gid */
	uid_t		 uid;
	gid_t		 gid;
	const char	*workspace;
	const char	*op;
	const char	*path;
	int64_t		 size;		/* write: bytes of content */
	int		 sock;		/* where the child answers */
	int		 content;	/* write: the content memfd, or -1 */
};
void	 spawner_init(struct event_base *, struct config *);
int	 spawner_file_submit(const struct spawner_file_job *, char *err,
	    size_t);
/* Returns unless argv[0] is the direct-mode hider's (then never). */
void	 spawner_direct_main(int argc, char *argv[]);
int	 spawner_user(const char *user, char *err, size_t);
int	 spawner_submit(const struct spawner_job *, char *err, size_t);
size_t	 spawner_pending(void);
int	 spawner_reaped(pid_t, int status);
int	 spawner_pids(pid_t *, int max);

struct json_object *spawn_recording(struct proc *);

/* record.c */
void	 record_setup(struct config *, uid_t, gid_t);
void	 record_init(struct event_base *);
int	 record_id_ok(const char *);
int	 record_wanted(const struct spawn_spec *);
int	 record_start(const char *id, const char *user, const char *term,
	    int inner, int cols, int rows, pid_t *relay, char *err, size_t);
int	 record_open(const char *id);
struct json_object *record_finish(const char *id, int relay_status);

/* cgroup.c */
/* Limits of a user's or a spawn's cgroup; -1 (or 0 where noted): none. */
struct cg_limits {
	int64_t	memory_max;	/* bytes */
	int64_t	swap_max;	/* bytes */
	int64_t	pids_max;
	int64_t	cpu_weight;	/* 1..10000; 0: the kernel's default */
	int64_t	cpu_max;	/* percent of one CPU; 0: none */
	int64_t	io_weight;	/* 1..10000; 0: the kernel's default */
};
/*
 * As root, before the privilege drop: find or make sandboxd's subtree in
 * every hierarchy (fsroot "" for the real /sys/fs/cgroup, or a fake tree
 * for tests), move sandboxd into its leaf, hand the tree to uid:gid, and
 * log which mechanism enforces what. instance names the subtree, stable
 * across restarts of one configuration. Never fatal.
 */
void	 cgroup_init(const char *fsroot, const char *instance, uid_t, gid_t);
/* From now on, retry removals of cgroups on a timer of base's loop. */
void	 cgroup_loop(struct event_base *);
/* Kill everything a previous sandboxd left in the tree; the count. */
int	 cgroup_sweep(void);
/* Whether spawns get a cgroup each (membership and kill). */
int	 cgroup_enabled(void);
/*
 * {"base", "membership", "kill", "memory", "swap", "pids", "cpu",
 * "cpu_max", "io", "spawn_memory", "spawn_pids": how, or null;
 * "not_enforced": {the same keys: why}}
 */
struct json_object *cgroup_json(void);
/* The limits of HOSTGATE_USER_* and of HOSTGATE_SPAWN_*. */
void	 cgroup_limits_user(const struct config *, struct cg_limits *);
void	 cgroup_limits_spawn(const struct config *, struct cg_limits *);
/* Make (or update) a user's cgroups with limits: 0, or -1 and err. */
int	 cgroup_user(const char *user, const struct cg_limits *, char *err,
	    size_t);
/* In a spawner child: join the user's cgroups (v1 limits, v2 leaf). */
int	 cgroup_user_join(const char *user);
/* A user's spawner exited: its leaf goes. */
void	 cgroup_spawner_gone(const char *user, pid_t);
/*
 * Make a spawn's cgroup under its user's (in d-SESSION for a direct
 * spawn with a session). *v2fd: an O_PATH fd of the v2 directory for
 * clone3(CLONE_INTO_CGROUP), or -1; procs: a cgroup.procs path the child
 * must join by writing (v1 only hosts), or "". 0, or -1 and err.
 * Disabled (!cgroup_enabled()): 0 with neither.
 */
int	 cgroup_spawn(const char *user, const char *session, const char *id,
	    const struct cg_limits *, int *v2fd, char *procs, size_t procssz,
	    char *err, size_t errsz);
/*
 * Kill every process in a spawn's cgroup, then remove it (later, when
 * processes are still dying). The number of processes it held, or -1.
 */
int	 cgroup_spawn_kill(const char *user, const char *session,
	    const char *id);
/* The same for every direct spawn of a session, or all of a user. */
int	 cgroup_session_kill(const char *session);
int	 cgroup_user_kill(const char *user);
/*
 * OOM kills so far in a spawn's cgroup (memory on v2), else in its user's
 * (id NULL, or memory on v1: the caller compares before and after); -1
 * unknown.
 */
int64_t	 cgroup_oom_kills(const char *user, const char *id);
/*
 * {"memory": {"current", "max"}, "pids": {"current", "max"}, "oom_kills"}
 * of a user; null where unknown or unlimited.
 */
struct json_object *cgroup_usage(const char *user);
/* The cgroup path of a spawn, for audit records, or NULL. */
const char *cgroup_path(const char *user, const char *session,
	    const char *id, char *buf, size_t);
void	 cgroup_fini(void);

/* grant.c */
void	 grant_init(struct event_base *);
/*
 * Hold a session's direct-mode deadline (absolute, wall ms; 0: none, the
 * session's is dropped): at it, every direct spawn of the session is
 * killed, whole cgroups. A later call replaces it. 0, or -1 and err.
 */
int	 grant_set(const char *session, const char *user, int64_t deadline_ms,
	    char *err, size_t);
/* Whether a deadline (0: none) has passed. */
int	 grant_expired(int64_t deadline_ms);
/* The grant of a session ended otherwise (revert, logout): forget it. */
void	 grant_end(const char *session);
/* [{session, user, deadline_ms}] */
struct json_object *grant_json(void);

/* passwd.c */
/* Where the generated files of one spawn's user are, on the host. */
struct passwd_files {
	char	passwd[4096];
	char	group[4096];
	char	mailname[4096];
};
void	 passwd_init(const struct config *);
/* The directory of the files: WORKSPACE_ROOT/.etc, into buf. */
void	 passwd_dir_of(const char *workspace_root, char *buf, size_t);
/*
 * The text of /etc/passwd and /etc/group for a user: root, the user (uid,
 * gid, home), nobody; root, the user's group, nogroup. 0, or -1 and err.
 */
int	 passwd_format(const char *user, uid_t, gid_t, const char *home,
	    char *pw, size_t, char *gr, size_t, char *err, size_t);
/* Write (or keep) a user's files and the mailname: 0, or -1 and err. */
int	 passwd_ensure(const char *user, uid_t, gid_t, const char *home,
	    struct passwd_files *, char *err, size_t);

/* ids.c */
/* Remember the uid range and the daemons' ids (ids_init does too). */
void	 ids_setup(const struct config *);
/*
 * As root, at start: ids_setup, then fatal when an id of
 * HOSTGATE_UID_RANGE is known to NSS or overlaps /etc/subuid or
 * /etc/subgid.
 */
void	 ids_init(const struct config *);
/* The NSS and subordinate-id checks alone: 0, or -1 and err. */
int	 ids_check_nss(long lo, long hi, char *err, size_t);
int	 ids_check_subid(const char *path, long lo, long hi, char *err,
	    size_t);
/* Whether a spawn may run as uid:gid (range, or mapped account). */
int	 ids_check(int64_t uid, int64_t gid, char *err, size_t);
/* Whether spawns get their users' own ids (sandboxd holds CAP_SETUID). */
int	 ids_per_user(void);

/* disk.c: the root helper that mounts per-user quota filesystems */
#define DISK_USER_MAX	32	/* the longest user name */
#define DISK_OP_ENSURE	1	/* mount (or make) a user's workspace */
/* sandboxd -> helper, one datagram: what the helper trusts, no more. */
struct disk_req {
	uint32_t	op;
	uint32_t	uid;
	uint32_t	gid;
	uint32_t	pad;
	int64_t		max;		/* the limit, bytes */
	char		user[DISK_USER_MAX + 1];
};
/* helper -> sandboxd: the hello, and the answer to each request. */
struct disk_rep {
	int32_t		ok;
	char		kind[16];	/* "btrfs" or "project" */
	char		fsid[40];	/* btrfs: /sys/fs/btrfs/FSID */
	char		err[256];
};
int	 disk_start(struct config *, pid_t *, char *kind, size_t,
	    char *why, size_t);
int	 disk_user_ok(const char *);
int64_t	 disk_image_size(int64_t max);
int	 disk_mountinfo_line(char *, char **mnt, char **fstype,
	    char **source);
int	 disk_project_detect(int rootfd);

/* workspace.c */
/* As root before the drop: start the disk helper when quotas apply. */
void	 workspace_init(struct config *);
/*
 * Make or check WORKSPACE_ROOT/USER, owned by uid:gid, 0700, with its
 * quota filesystem mounted when quotas apply; its path into path.
 * 0, or -1 and err.
 */
int	 workspace_ensure(const char *user, uid_t, gid_t, char *path,
	    size_t, char *err, size_t);
/* {"used", "max"} in bytes, or NULL when no quota applies. */
struct json_object *workspace_usage(const char *user);
/* sandboxd stops: the helper unmounts everything and exits. */
void	 workspace_fini(void);
/* Whether workspaces get a quota the kernel enforces; why not. */
int	 workspace_quota_enabled(void);
const char *workspace_quota_why(void);
/* btrfs qgroup 1/1 of fsid under sysroot ("" or a test tree). */
int	 workspace_btrfs_usage(const char *sysroot, const char *fsid,
	    int64_t *used, int64_t *max);

/* fileops.c: workspace file operations beneath a directory fd */
#define FILEOP_PATH_MAX	4096	/* bytes of a relative path */
#define FILEOP_LIST_MAX	10000	/* entries of a listing, then truncated */
/* What an operation did: code NULL, or an ERR_* code and its message. */
struct fileop_result {
	const char	*code;
	char		 msg[256];
	int64_t		 size;		/* read, write: the file's; list: JSON */
	int64_t		 mtime;		/* seconds */
	int64_t		 count;		/* list: entries */
	int		 truncated;	/* list: more than FILEOP_LIST_MAX */
	int		 created;	/* write, mkdir: the name was new */
	int		 deleted;
	int		 fd;		/* read: the file; list: a memfd; or -1 */
};
/* Whether a relative path is one the file API may name. */
int	 fileop_path_ok(const char *path);
/* openat2 beneath dirfd with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS. */
int	 fileop_openat2(int dirfd, const char *path, int flags, mode_t mode);
/* s as valid UTF-8 (invalid bytes: U+FFFD) into out (3 * len + 1). */
size_t	 fileop_utf8(const char *s, size_t len, char *out);
/* Each operation: 0, or -1 with r->code and r->msg set. */
int	 fileop_read(int wsfd, const char *path, struct fileop_result *r);
int	 fileop_list(int wsfd, const char *path, struct fileop_result *r);
int	 fileop_write(int wsfd, const char *path, int content, int64_t size,
	    struct fileop_result *r);
int	 fileop_mkdir(int wsfd, const char *path, struct fileop_result *r);
int	 fileop_delete(int wsfd, const char *path, struct fileop_result *r);
/* The operation named op (read, list, write, mkdir, delete). */
int	 fileop_run(int wsfd, const char *op, const char *path, int content,
	    int64_t size, struct fileop_result *r);
/* The workspace directory itself, O_PATH, its last component no link. */
int	 fileop_workspace(const char *workspace);

/* files.c: the "file" message, done by a child of the user's spawner */
#define FILES_SEQ	(1ULL << 63)	/* spawner requests of files.c */
void	 files_init(struct event_base *, struct config *);
/*
 * Start an operation for brokerd (peer, req_id): it answers later. 0, or
 * -1 and err (nothing was started; the caller answers).
 */
int	 files_start(struct ipc_peer *, int64_t req_id, const char *user,
	    int setid, uid_t, gid_t, const char *workspace, const char *op,
	    const char *path, int content, int64_t size, char *err, size_t);
/* The spawner started the operation's child (pid), or could not (err). */
void	 files_started(uint64_t seq, pid_t pid, const char *err);
/* In the child, as the user: do the operation, answer on sock. */
void	 files_child(const char *workspace, const char *op, const char *path,
	    int content, int64_t size, int sock);
/* For spawn_reap: the children not reaped yet, and a reaped one. */
int	 files_pids(pid_t *, int max);
int	 files_reaped(pid_t, int status);
/* brokerd's connection went away: no answer goes to it. */
void	 files_peer_gone(struct ipc_peer *);

/* egress.c: the link to egressd and each allowlist spawn's socket */
/*
 * As root before the drop: RUN_DIR/proxy (swept) and RUN_DIR/egress, and
 * listen on RUN_DIR/egress/sandbox.sock for egressd's uid alone.
 */
void	 egress_init(struct config *);
/* Serve it on the loop, after the drop. */
void	 egress_start(struct event_base *);
/* {"ok", "reason"}: whether egressd is linked. */
struct json_object *egress_json(void);
/* Whether egressd is linked now. */
int	 egress_up(void);
/*
 * For a spawn id (of user and session, or NULL): make RUN_DIR/proxy/
 * ID.sock, listening, for uid; its path into path. 0, or -1 and err
 * (nothing is left behind); -1 at once when egressd is not linked.
 */
int	 egress_spawn_open(const char *id, const char *user,
	    const char *session, uid_t, char *path, size_t, char *err,
	    size_t);
/*
 * The spawn started: hand its listening socket to egressd (egress_listen)
 * with the admin additions (JSON arrays of strings, or NULL), and close
 * sandboxd's copy. 0, or -1 and err.
 */
int	 egress_spawn_listen(const char *id, struct json_object *allow_user,
	    struct json_object *allow_session, char *err, size_t);
/* The spawn is gone (or never started): its socket goes, egress_close. */
void	 egress_spawn_end(const char *id);
/* brokerd's egress_update, passed on to egressd (not taken). */
void	 egress_update(struct json_object *);
/* Where egressd's egress_log goes on (broker.c). */
void	 egress_log_sink(void (*)(struct json_object *));

/* broker.c */
void	 broker_init(struct event_base *, struct config *, uid_t broker_uid,
	    int fd);
void	 broker_proc_exited(struct proc *);

/* policy.c */
struct policy;
/* Parse a seccomp policy file; NULL and err "PATH:LINE: what is wrong". */
struct policy *policy_load(const char *path, char *err, size_t errsz);
/* The same from memory; name stands for the path in messages. */
struct policy *policy_parse(const char *text, size_t len, const char *name,
	    char *err, size_t errsz);
void	 policy_free(struct policy *);
/* The number of rules (deny lines). */
size_t	 policy_nrules(const struct policy *);
/*
 * A new sealed memfd (close-on-exec) at offset 0 holding the BPF program,
 * for bwrap --seccomp FD; -1 and err.
 */
int	 policy_bpf_fd(const struct policy *, char *err, size_t errsz);

#endif
