/*
 * The docker runtime: one container per user and permission profile,
 * created on demand with the workspace mounted, and every spawn through
 * `docker exec`. When the CLI or the engine fails, the spawn fails with
 * the reason; nothing runs on the host instead.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd.h"

/*
 * The allowlist profiles need the in-sandbox bridge and a per-spawn
 * socket bound into the sandbox, which a shared container per user does
 * not have: refused, never run with the container's network instead.
 */
int
docker_refuse(const struct spawn_spec *s, char *err, size_t errsz)
{
	if (!perm_allowlist(s->perm))
		return 0;
	snprintf(err, errsz, "the %s profile is not available with the docker "
	    "runtime", perm_name(s->perm));
	return -1;
}

/* The container of a user and profile: hostgate-USER-{ro,rw,net}. */
void
docker_name(const char *user, enum permission perm, char *out, size_t outsz)
{
	snprintf(out, outsz, "hostgate-%s-%s", user,
	    perm == PERM_READ_ONLY ? "ro" :
	    perm == PERM_WORKSPACE_WRITE_NET ? "net" : "rw");
}

/*
 * `docker run` for a user's container: no capabilities, no new privileges,
 * a pid limit, the workspace at its host path, a network only for the
 * network profile, and an init that reaps what exec leaves behind.
 */
int
docker_create_argv(const char *docker, const char *image,
    const struct spawn_spec *s, struct strv *a, char *err, size_t errsz)
{
	char	name[128];

	if (docker_refuse(s, err, errsz) == -1 ||
	    path_check("workspace", s->workspace, err, errsz) == -1)
		return -1;
	docker_name(s->user, s->perm, name, sizeof(name));
	strv_add(a, docker);
	strv_add(a, "run");
	strv_add(a, "--detach");
	strv_add(a, "--name");
	strv_add(a, name);
	strv_addf(a, "--label=hostgate.user=%s", s->user);
	strv_add(a, "--init");
	strv_add(a, "--cap-drop=ALL");
	strv_add(a, "--security-opt=no-new-privileges");
	strv_add(a, "--pids-limit=512");
	strv_add(a, "--read-only");
	strv_add(a, "--tmpfs=/tmp:size=256m");
	strv_addf(a, "--network=%s",
	    s->perm == PERM_WORKSPACE_WRITE_NET ? "bridge" : "none");
	strv_addf(a, "--volume=%s:%s:%s", s->workspace, s->workspace,
	    perm_read_only(s->perm) ? "ro" : "rw");
	strv_addf(a, "--workdir=%s", s->workspace);
	strv_add(a, image);
	strv_add(a, "sleep");
	strv_add(a, "infinity");
	return 0;
}

/* `docker exec` of a spawn in its user's container. */
int
docker_exec_argv(const char *docker, const struct spawn_spec *s,
    struct strv *a, char *err, size_t errsz)
{
	char *const	*p;
	char		 name[128];

	if (docker_refuse(s, err, errsz) == -1 ||
	    path_check("cwd", s->cwd, err, errsz) == -1)
		return -1;
	docker_name(s->user, s->perm, name, sizeof(name));
	strv_add(a, docker);
	strv_add(a, "exec");
	strv_add(a, "--interactive");
	if (s->kind == SPAWN_TERMINAL)
		strv_add(a, "--tty");
	strv_addf(a, "--workdir=%s", s->cwd);
	strv_add(a, "--env=PATH=/usr/local/bin:/usr/bin:/bin");
	strv_addf(a, "--env=HOME=%s", s->workspace);
	strv_addf(a, "--env=TERM=%s", s->term != NULL ? s->term : "dumb");
	strv_add(a, "--env=LANG=C.UTF-8");
	strv_add(a, "--env=HOSTGATE_MODE=sandbox");
	for (p = s->env; p != NULL && *p != NULL; p++)
		strv_addf(a, "--env=%s", *p);
	strv_add(a, name);
	for (p = s->argv; *p != NULL; p++)
		strv_add(a, *p);
	return 0;
}
