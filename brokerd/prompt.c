/*
 * GET /api/sandbox/prompt: the text an agent's system prompt should carry
 * about its constraints right now, from the templates under profiles/
 * filled in from the real policy of the caller's session.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

#define PROMPT_MAX	(64 * 1024)
/* What an allowlist profile's sandbox adds to the rules (its {{EGRESS}}). */
#define PROMPT_EGRESS "\n\n" \
	"The network goes only through hostgate's egress proxy, and only to " \
	"the\nallowed domains listed above. A refused destination answers " \
	"with HTTP 403\n(502 or 504 when it cannot be reached), the header " \
	"X-Hostgate-Egress: refused\nand a message such as \"Egress refused: " \
	"HOST is not on this sandbox's\nallowlist; an admin can allow it " \
	"(hostgate panel or hgctl egress allow)\".\nDo not try to get around " \
	"the proxy (direct connections, IP addresses, other\nports and DNS " \
	"fail by design). If the task needs a domain that is not\nlisted, " \
	"stop and ask the user: an admin can allow it for your user or this\n" \
	"session."

/* In a fleet, where the workspace is (its {{FLEET}}; %s: the home host). */
#define PROMPT_FLEET "\n\n" \
	"This workspace is on host %s of a fleet of hostgate hosts: your " \
	"files,\nterminals and processes are there and on no other host. A " \
	"request that\nreaches another host is answered 421 naming %s; " \
	"while %s is down,\n503 naming it and since when. Keep using the " \
	"token you were given (it\nnames %s, and the balancer routes it " \
	"there); do not retry elsewhere."

static struct config	*prompt_conf;
static char		*prompt_sandbox;
static char		*prompt_direct;

/* Read the templates; a missing one stops brokerd at start-up. */
void
prompt_init(struct config *conf)
{
	char	path[4096];

	prompt_conf = conf;
	snprintf(path, sizeof(path), "%s/prompt-sandbox.txt",
	    conf->profiles_dir);
	if ((prompt_sandbox = file_read(path, PROMPT_MAX, NULL)) == NULL)
		fatal("%s", path);
	snprintf(path, sizeof(path), "%s/prompt-direct.txt",
	    conf->profiles_dir);
	if ((prompt_direct = file_read(path, PROMPT_MAX, NULL)) == NULL)
		fatal("%s", path);
}

/* Replace every {{NAME}} of tmpl by its value; unknown names stay. */
static char *
prompt_fill(const char *tmpl, const char *const *vars)
{
	const char	*p, *end;
	char		*out;
	size_t		 len = 0, cap = strlen(tmpl) + 1024, i, n;

	if ((out = malloc(cap)) == NULL)
		fatal("%s", __func__);
	for (p = tmpl; *p != '\0';) {
		const char	*val = NULL;

		if (p[0] == '{' && p[1] == '{' &&
		    (end = strstr(p + 2, "}}")) != NULL) {
			for (i = 0; vars[i] != NULL; i += 2)
				if (strlen(vars[i]) == (size_t)(end - p - 2) &&
				    strncmp(p + 2, vars[i], end - p - 2) == 0)
					val = vars[i + 1];
		}
		if (val != NULL) {
			n = strlen(val);
			p = end + 2;
		} else {
			val = p;
			n = 1;
			p++;
		}
		if (len + n + 1 > cap) {
			cap = (len + n + 1) * 2;
			if ((out = realloc(out, cap)) == NULL)
				fatal("%s", __func__);
		}
		memcpy(out + len, val, n);
		len += n;
	}
	out[len] = '\0';
	return out;
}

/*
 * The network line of an allowlist profile: through the proxy, to these
 * domains (the global list, the user's and the session's additions).
 */
static char *
prompt_network(struct ident *id)
{
	struct json_object	*arr;
	char			*out;
	size_t			 i, n, len, cap = 512;

	if ((out = malloc(cap)) == NULL)
		fatal("%s", __func__);
	len = (size_t)snprintf(out, cap, "reachable only through an HTTP "
	    "proxy (HTTP_PROXY and HTTPS_PROXY are set to it), to the allowed "
	    "domains: ");
	arr = egress_domains(id);
	n = json_object_array_length(arr);
	for (i = 0; i < n; i++) {
		const char	*d = json_object_get_string(
		    json_object_array_get_idx(arr, i));

		if (len + strlen(d) + 3 > cap) {
			cap = (len + strlen(d) + 3) * 2;
			if ((out = realloc(out, cap)) == NULL)
				fatal("%s", __func__);
		}
		len += (size_t)snprintf(out + len, cap - len, "%s%s",
		    i > 0 ? ", " : "", d);
	}
	json_object_put(arr);
	if (n == 0) {
		if (len + 64 > cap && (out = realloc(out, cap = len + 64)) ==
		    NULL)
			fatal("%s", __func__);
		snprintf(out + len, cap - len, "none yet (nothing is "
		    "reachable)");
	}
	return out;
}

/* The prompt for the caller's session, with the facts it rests on. */
void
prompt_get(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*res, *mode, *b;
	const char		*perm, *vars[28], *exp, *backend, *home;
	char			 ws[4096], writable[4200], remaining[32];
	char			 fleet[sizeof(PROMPT_FLEET) + 4 * HOME_HOST_MAX];
	char			 timeout[16], *text, *network = NULL;
	int64_t			 left = 0;
	int			 direct, net, allowlist;

	if (prompt_conf->runtime != RUNTIME_HOST) {
		ipc_reply_error(p, m, ERR_CONFLICT, "the agent prompt describes "
		    "the host runtime's sandbox; this host runs docker");
		return;
	}
	mode = mode_json(id);
	direct = strcmp(json_str(mode, "mode"), "direct") == 0;
	perm = session_permission(id->session);
	net = strcmp(perm, "workspace-write+network") == 0;
	allowlist = session_permission_allowlist(perm);
	if (allowlist)
		network = prompt_network(id);
	snprintf(ws, sizeof(ws), "%s/%s", prompt_conf->workspace_root,
	    id->user->name);
	if (session_permission_read_only(perm))
		snprintf(writable, sizeof(writable), "nothing but /tmp (the "
		    "read-only profile: the workspace %s is read-only)", ws);
	else
		snprintf(writable, sizeof(writable), "your workspace %s and "
		    "/tmp", ws);
	json_int(mode, "remaining_seconds", &left);
	snprintf(remaining, sizeof(remaining), "%lld min %02lld s",
	    (long long)left / 60, (long long)left % 60);
	snprintf(timeout, sizeof(timeout), "%d", prompt_conf->command_timeout);
	exp = json_str(mode, "expires_at");
	b = sandbox_backend_json();
	backend = json_str(b, "name");
	vars[0] = "MODE";	vars[1] = direct ? "direct" : "sandbox";
	vars[2] = "WORKSPACE";	vars[3] = ws;
	vars[4] = "WRITABLE";	vars[5] = writable;
	vars[6] = "NETWORK";	vars[7] = allowlist ? network : net ?
	    "available (outward only; the host's own services are out of "
	    "reach)" : "none (loopback inside the sandbox only)";
	vars[8] = "EXPIRES_AT";	vars[9] = exp ? exp : "-";
	vars[10] = "REMAINING";	vars[11] = remaining;
	vars[12] = "TIMEOUT";	vars[13] = timeout;
	vars[14] = "BACKEND";	vars[15] = backend ? backend : "bwrap";
	vars[16] = "RUN_AS";	vars[17] = "hostgate's sandbox service user";
	vars[18] = "ON_EXPIRY";	vars[19] = prompt_conf->on_expiry ==
	    EXPIRY_TERMINATE ? ", and processes started in direct mode are "
	    "terminated" : "";
	vars[20] = "USER";	vars[21] = id->user->name;
	vars[22] = "EGRESS";	vars[23] = allowlist ? PROMPT_EGRESS : "";
	fleet[0] = '\0';
	if ((home = hosts_home(id->user)) != NULL)
		snprintf(fleet, sizeof(fleet), PROMPT_FLEET, home, home, home,
		    home);
	vars[24] = "FLEET";	vars[25] = fleet;
	vars[26] = NULL;
	text = prompt_fill(direct ? prompt_direct : prompt_sandbox, vars);
	res = json_object_new_object();
	json_object_object_add(res, "prompt", json_object_new_string(text));
	json_object_object_add(res, "mode", json_object_new_string(
	    direct ? "direct" : "sandbox"));
	json_object_object_add(res, "permission", json_object_new_string(perm));
	json_object_object_add(res, "workspace", json_object_new_string(ws));
	/* In a fleet: the host that holds it. */
	if (home != NULL)
		json_object_object_add(res, "home",
		    json_object_new_string(home));
	/* true, false, or "allowlist": only through the egress proxy. */
	json_object_object_add(res, "network", allowlist ?
	    json_object_new_string("allowlist") : json_object_new_boolean(net));
	json_object_object_add(res, "expires_at", exp ?
	    json_object_new_string(exp) : NULL);
	json_object_object_add(res, "remaining_seconds", direct ?
	    json_object_new_int64(left) : NULL);
	free(text);
	free(network);
	json_object_put(mode);
	json_object_put(b);
	ipc_reply(p, m, res, NULL, 0);
}
