/*
 * libFuzzer target for sandboxd's side of the broker socket
 * (sandboxd/broker.c): the input is one message from brokerd, after a
 * valid hello, through sandboxd's real IPC code and handler table; above
 * all "spawn", parsed into its spawn_spec (kind, mode, permission, user,
 * argv, env, ids, the grant's deadline) and its cwd resolved in a real
 * workspace (spawn.c). What would touch the host is replaced (linked with
 * --wrap): the workspace is a fixture directory, and backend_build checks
 * the spec it is given instead of building a command line, so that nothing
 * is ever spawned. It checks what a handler may rely on: a known kind,
 * mode and permission, a valid user, an argv of at least one string, ids
 * that are not root, and a cwd inside the workspace. A "file" operation
 * stops where files.c would hand it to a spawner: it must name a known
 * operation and a path the API can name; reads and lists are done on the
 * fixture workspace (its links out must stay shut), nothing else is.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../sandboxd/sandboxd.h"

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

int	__wrap_workspace_ensure(const char *, uid_t, gid_t, char *, size_t,
	    char *, size_t);
int	__wrap_backend_build(struct spawn_spec *, struct strv *, struct strv *,
	    char *, size_t);
struct proc *__wrap_spawn_start(const struct spawn_spec *, const char *,
	    const struct strv *, char *const *, int, int, size_t, int, int,
	    struct ipc_peer *, int64_t, char *, size_t);
void	__wrap_backend_probe(int64_t);
struct json_object *__wrap_backend_json(void);
struct json_object *__wrap_cgroup_json(void);
struct json_object *__wrap_cgroup_usage(const char *);
struct json_object *__wrap_workspace_usage(const char *);
int	__wrap_cgroup_session_kill(const char *);
int	__wrap_cgroup_user_kill(const char *);
int	__wrap_ids_per_user(void);
int	__wrap_files_start(struct ipc_peer *, int64_t, const char *, int, uid_t,
	    gid_t, const char *, const char *, const char *, int, int64_t,
	    char *, size_t);

static struct event_base	*fuzz_base;
static struct config		 fuzz_conf;
static struct sockaddr_un	 fuzz_addr;
static socklen_t		 fuzz_addrlen;
static char			 fuzz_dir[] = "/tmp/fuzz_spawn.XXXXXX";
static char			 fuzz_ws[256];

/* A user name as sandboxd must have checked it. */
static int
fuzz_user_ok(const char *name)
{
	size_t	n;

	if (name == NULL || (n = strlen(name)) == 0 || n > 32 ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_.-") != n ||
	    strchr("0123456789.-", name[0]) != NULL)
		return 0;
	return 1;
}

/* The user's workspace: one fixture directory for everyone. */
int
__wrap_workspace_ensure(const char *user, uid_t uid, gid_t gid, char *path,
    size_t pathsz, char *err, size_t errsz)
{
	if (!fuzz_user_ok(user))
		abort();
	snprintf(path, pathsz, "%s", fuzz_ws);
	return 0;
}

/* Where a spawn would get its command line: check what it was given. */
int
__wrap_backend_build(struct spawn_spec *s, struct strv *argv,
    struct strv *envp, char *err, size_t errsz)
{
	size_t	i, wl = strlen(fuzz_ws);

	if ((s->kind != SPAWN_COMMAND && s->kind != SPAWN_TERMINAL) ||
	    (s->mode != MODE_SANDBOX && s->mode != MODE_DIRECT) ||
	    (s->perm != PERM_READ_ONLY && s->perm != PERM_WORKSPACE_WRITE &&
	    s->perm != PERM_WORKSPACE_WRITE_NET) || !fuzz_user_ok(s->user) ||
	    s->argv == NULL || s->argv[0] == NULL || s->uid == 0 ||
	    s->gid == 0 || strcmp(s->workspace, fuzz_ws) != 0 ||
	    strncmp(s->cwd, fuzz_ws, wl) != 0 ||
	    (s->cwd[wl] != '\0' && s->cwd[wl] != '/') ||
	    strstr(s->cwd, "/../") != NULL || s->deadline_ms < 0)
		abort();
	for (i = 0; s->env != NULL && s->env[i] != NULL; i++)
		if (i >= 64)
			abort();
	snprintf(err, errsz, "not built in the fuzzer");
	return -1;
}

/* Never reached: backend_build refuses every spawn first. */
struct proc *
__wrap_spawn_start(const struct spawn_spec *s, const char *backend,
    const struct strv *cmd, char *const *envp, int stdin_fd, int timeout,
    size_t cap, int cols, int rows, struct ipc_peer *p, int64_t id, char *err,
    size_t errsz)
{
	abort();	/* backend_build refused first */
}

/* No probe of the backend (it would run bwrap). */
void
__wrap_backend_probe(int64_t max_age_ms)
{
}

/* The backend's health, without a probe. */
struct json_object *
__wrap_backend_json(void)
{
	return json_object_new_object();
}

/* The cgroup set-up, without one. */
struct json_object *
__wrap_cgroup_json(void)
{
	return json_object_new_object();
}

/* A user's usage, without a cgroup: the user checked. */
struct json_object *
__wrap_cgroup_usage(const char *user)
{
	if (!fuzz_user_ok(user))
		abort();
	return json_object_new_object();
}

/* A user's disk usage, without a workspace: the user checked. */
struct json_object *
__wrap_workspace_usage(const char *user)
{
	if (!fuzz_user_ok(user))
		abort();
	return json_object_new_object();
}

/* Nothing to kill: the session checked. */
int
__wrap_cgroup_session_kill(const char *session)
{
	if (session == NULL)
		abort();
	return 0;
}

/* Nothing to kill: the user checked. */
int
__wrap_cgroup_user_kill(const char *user)
{
	if (!fuzz_user_ok(user))
		abort();
	return 0;
}

/*
 * Where a file operation would go to the user's spawner: check what it
 * was given; a read or a list runs here, beneath the fixture workspace.
 */
int
__wrap_files_start(struct ipc_peer *p, int64_t id, const char *user,
    int setid, uid_t uid, gid_t gid, const char *workspace, const char *op,
    const char *path, int content, int64_t size, char *err, size_t errsz)
{
	struct fileop_result	r;
	int			wsfd, writing = strcmp(op, "write") == 0;

	if (!fuzz_user_ok(user) || strcmp(workspace, fuzz_ws) != 0 ||
	    !fileop_path_ok(path) || (setid && (uid == 0 || gid == 0)) ||
	    writing != (content != -1) || (writing && size < 0) ||
	    (!writing && strcmp(op, "read") != 0 && strcmp(op, "list") != 0 &&
	    strcmp(op, "mkdir") != 0 && strcmp(op, "delete") != 0))
		abort();
	if (strcmp(op, "read") == 0 || strcmp(op, "list") == 0) {
		if ((wsfd = fileop_workspace(workspace)) == -1)
			abort();
		if (fileop_run(wsfd, op, path, -1, 0, &r) == 0)
			close(r.fd);
		else if (r.fd != -1 || r.code == NULL)
			abort();
		close(wsfd);
	}
	snprintf(err, errsz, "not built in the fuzzer");
	return -1;
}

/* Spawns run as their user's own ids, as under root. */
int
__wrap_ids_per_user(void)
{
	return 1;
}

/* Remove the fixture. */
static void
fuzz_cleanup(void)
{
	char	cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", fuzz_dir);
	(void)!system(cmd);
}

/* Make the fixture once, before the first input. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char	path[512];
	int	fd;

	signal(SIGPIPE, SIG_IGN);
	log_init("fuzz_spawn", 1);
	log_setlevel(LOG_LVL_ERROR);
	if (mkdtemp(fuzz_dir) == NULL)
		abort();
	atexit(fuzz_cleanup);
	/* A workspace with a few directories, a file and a way out. */
	snprintf(fuzz_ws, sizeof(fuzz_ws), "%s/ws", fuzz_dir);
	mkdir(fuzz_ws, 0700);
	snprintf(path, sizeof(path), "%s/src", fuzz_ws);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/src/lib", fuzz_ws);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/file", fuzz_ws);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	snprintf(path, sizeof(path), "%s/out", fuzz_ws);
	(void)!symlink("/etc", path);
	snprintf(path, sizeof(path), "%s/up", fuzz_ws);
	(void)!symlink("..", path);

	fuzz_conf.runtime = RUNTIME_HOST;
	fuzz_conf.uid_range[0] = 1879048192;
	fuzz_conf.uid_range[1] = 1879113727;
	fuzz_conf.state_dir = fuzz_dir;
	ids_setup(&fuzz_conf);
	if ((fuzz_base = event_base_new()) == NULL)
		abort();
	memset(&fuzz_addr, 0, sizeof(fuzz_addr));
	fuzz_addr.sun_family = AF_UNIX;
	snprintf(fuzz_addr.sun_path + 1, sizeof(fuzz_addr.sun_path) - 1,
	    "hostgate-fuzz-spawn-%ld", (long)getpid());
	fuzz_addrlen = offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(fuzz_addr.sun_path + 1);
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&fuzz_addr, fuzz_addrlen) == -1 ||
	    listen(fd, 16) == -1)
		abort();
	grant_init(fuzz_base);
	broker_init(fuzz_base, &fuzz_conf, geteuid(), fd);
	return 0;
}

/* End the grants an input set, so that no timer outlives it. */
static void
fuzz_drop_grants(void)
{
	struct json_object	*arr, *g;
	char			 err[256];
	size_t			 i;

	arr = grant_json();
	for (i = 0; i < json_object_array_length(arr); i++) {
		g = json_object_array_get_idx(arr, i);
		if (grant_set(json_str(g, "session"), json_str(g, "user"), 0,
		    err, sizeof(err)) == -1)
			abort();
	}
	json_object_put(arr);
}

/* Run sandboxd's loop until nothing more happens now. */
static void
fuzz_run(void)
{
	int	i;

	for (i = 0; i < 8; i++)
		event_base_loop(fuzz_base, EVLOOP_NONBLOCK);
}

/* One message from brokerd, after a hello, to sandboxd's table. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char	hello[] =
	    "{\"type\":\"hello\",\"version\":1,\"role\":\"brokerd\"}";
	char			sink[IPC_MAX_MSG];
	int			fd;

	fuzz_det_reset();
	if (size > IPC_MAX_MSG)
		return 0;
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) == -1 || connect(fd,
	    (struct sockaddr *)&fuzz_addr, fuzz_addrlen) == -1)
		abort();
	fuzz_run();
	(void)!send(fd, hello, sizeof(hello) - 1, 0);
	fuzz_run();
	(void)!send(fd, data, size, 0);
	fuzz_run();
	while (recv(fd, sink, sizeof(sink), 0) > 0)
		;
	close(fd);
	fuzz_run();
	fuzz_drop_grants();
	return 0;
}
