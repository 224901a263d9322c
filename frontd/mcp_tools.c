/*
 * The tools of /mcp: each is one brokerd request of the HTTP API ("run",
 * "status", "file_read", "file_list", "file_write"), its reply turned into
 * a tool result: a text block and structuredContent that always says the
 * session's current mode and permission. A refusal is a tool error whose
 * text is brokerd's message.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "frontd.h"

#define TOOL_FILE_GRACE_MS	10000	/* beyond the file API's own wait */
#define TOOL_MAX_READ		(8 * 1024 * 1024)	/* read_file's cap */
#define TOOL_MAX_LIST		(16 * 1024 * 1024)

/* An argument of a tool, checked before anything is sent. */
struct tool_arg {
	const char	*name;
	enum json_type	 type;
	int		 required;
};

struct mcp_tool {
	const char		*name;
	const char		*title;
	const char		*description;
	const struct tool_arg	*args;
	const char		*input;		/* JSON Schema text */
	const char		*output;	/* JSON Schema text */
	int			 read_only;	/* annotations.readOnlyHint */
	void			(*run)(struct mcp_call *, struct json_object *);
};

/* A tool call waiting for one or two brokerd replies. */
struct tool_wait {
	struct mcp_call		*c;
	const char		*tool;
	struct json_object	*res;		/* the structured result */
	struct json_object	*env;		/* a refused run's reply */
	char			*error;		/* brokerd's refusal */
	char			 permission[32];
	char			 path[4097];
};

static void	tool_run_command(struct mcp_call *, struct json_object *);
static void	tool_run_python(struct mcp_call *, struct json_object *);
static void	tool_read_file(struct mcp_call *, struct json_object *);
static void	tool_write_file(struct mcp_call *, struct json_object *);
static void	tool_list_files(struct mcp_call *, struct json_object *);
static void	tool_status(struct mcp_call *, struct json_object *);

#define MODE_PERM_PROPS \
	"\"mode\":{\"type\":\"string\",\"enum\":[\"sandbox\",\"direct\"]," \
	"\"description\":\"the session's execution mode now\"}," \
	"\"permission\":{\"type\":\"string\",\"description\":" \
	"\"the session's permission profile now\"}," \
	"\"error\":{\"type\":\"object\",\"description\":\"a refusal: " \
	"code and message\",\"properties\":{\"code\":{\"type\":\"string\"}," \
	"\"message\":{\"type\":\"string\"}}}"
#define MODE_PERM_REQ	"\"required\":[\"mode\",\"permission\"]"

#define RUN_OUTPUT \
	"{\"type\":\"object\",\"properties\":{" \
	"\"exit_code\":{\"type\":[\"integer\",\"null\"]}," \
	"\"signal\":{\"type\":[\"integer\",\"null\"]}," \
	"\"stdout\":{\"type\":\"string\"}," \
	"\"stderr\":{\"type\":\"string\"}," \
	"\"truncated\":{\"type\":[\"boolean\",\"null\"]}," \
	"\"timed_out\":{\"type\":[\"boolean\",\"null\"]}," \
	"\"oom\":{\"type\":[\"boolean\",\"null\"]}," \
	"\"duration_ms\":{\"type\":[\"integer\",\"null\"]}," \
	"\"backend\":{\"type\":[\"string\",\"null\"]}," \
	MODE_PERM_PROPS "}," MODE_PERM_REQ "}"

static const struct tool_arg tool_command_args[] = {
	{ "command", json_type_string, 1 },
	{ "cwd", json_type_string, 0 },
	{ "timeout", json_type_int, 0 },
	{ "env", json_type_object, 0 },
	{ "stdin", json_type_string, 0 },
	{ NULL, 0, 0 }
};
static const struct tool_arg tool_python_args[] = {
	{ "code", json_type_string, 1 },
	{ "cwd", json_type_string, 0 },
	{ "timeout", json_type_int, 0 },
	{ "stdin", json_type_string, 0 },
	{ NULL, 0, 0 }
};
static const struct tool_arg tool_path_args[] = {
	{ "path", json_type_string, 1 },
	{ NULL, 0, 0 }
};
static const struct tool_arg tool_write_args[] = {
	{ "path", json_type_string, 1 },
	{ "content", json_type_string, 1 },
	{ "encoding", json_type_string, 0 },
	{ NULL, 0, 0 }
};
static const struct tool_arg tool_list_args[] = {
	{ "path", json_type_string, 0 },
	{ NULL, 0, 0 }
};
static const struct tool_arg tool_no_args[] = {
	{ NULL, 0, 0 }
};

/* In the order tools/list gives them (deterministic). */
static const struct mcp_tool mcp_tools[] = {
	{ "run_command", "Run a shell command",
	    "Run a shell command (bash -c) in this session's sandbox (or on "
	    "the host in direct mode), in the user's workspace unless cwd "
	    "says otherwise. The result has the exit code, stdout, stderr "
	    "and the mode it ran in; a non-zero exit is a tool error. The "
	    "limits are those of POST /api/run_command.",
	    tool_command_args,
	    "{\"type\":\"object\",\"properties\":{"
	    "\"command\":{\"type\":\"string\",\"description\":"
	    "\"the command line, run by bash -c (at most 32 KiB)\"},"
	    "\"cwd\":{\"type\":\"string\",\"description\":"
	    "\"the working directory (default: the workspace)\"},"
	    "\"timeout\":{\"type\":\"integer\",\"minimum\":1,\"description\":"
	    "\"seconds before the command is killed\"},"
	    "\"env\":{\"type\":\"object\",\"additionalProperties\":"
	    "{\"type\":\"string\"},\"description\":\"more environment\"},"
	    "\"stdin\":{\"type\":\"string\",\"description\":"
	    "\"the command's standard input\"}},"
	    "\"required\":[\"command\"],\"additionalProperties\":false}",
	    RUN_OUTPUT, 0, tool_run_command },
	{ "run_python", "Run Python code",
	    "Run Python 3 code (given to python3 on its standard input) in "
	    "this session's sandbox (or on the host in direct mode). The "
	    "result is that of run_command.",
	    tool_python_args,
	    "{\"type\":\"object\",\"properties\":{"
	    "\"code\":{\"type\":\"string\",\"description\":"
	    "\"the Python source\"},"
	    "\"cwd\":{\"type\":\"string\",\"description\":"
	    "\"the working directory (default: the workspace)\"},"
	    "\"timeout\":{\"type\":\"integer\",\"minimum\":1,\"description\":"
	    "\"seconds before it is killed\"},"
	    "\"stdin\":{\"type\":\"string\",\"description\":"
	    "\"ignored: the code is python3's standard input\"}},"
	    "\"required\":[\"code\"],\"additionalProperties\":false}",
	    RUN_OUTPUT, 0, tool_run_python },
	{ "read_file", "Read a workspace file",
	    "Read a file of the user's workspace (path relative to it). "
	    "UTF-8 text comes as it is, anything else as base64 (see "
	    "\"encoding\"). At most 8 MiB; larger files through GET "
	    "/api/files/{path}.",
	    tool_path_args,
	    "{\"type\":\"object\",\"properties\":{"
	    "\"path\":{\"type\":\"string\",\"description\":"
	    "\"relative to the workspace, '/'-separated, no '..'\"}},"
	    "\"required\":[\"path\"],\"additionalProperties\":false}",
	    "{\"type\":\"object\",\"properties\":{"
	    "\"path\":{\"type\":\"string\"},"
	    "\"size\":{\"type\":\"integer\"},"
	    "\"mtime\":{\"type\":\"integer\"},"
	    "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\","
	    "\"base64\"]},"
	    "\"content\":{\"type\":\"string\"}," MODE_PERM_PROPS "},"
	    MODE_PERM_REQ "}", 1, tool_read_file },
	{ "write_file", "Write a workspace file",
	    "Create or replace a file of the user's workspace (path relative "
	    "to it; missing directories are made). The file is replaced "
	    "atomically. content is UTF-8 text, or base64 with encoding "
	    "\"base64\". Refused under the read-only permission.",
	    tool_write_args,
	    "{\"type\":\"object\",\"properties\":{"
	    "\"path\":{\"type\":\"string\",\"description\":"
	    "\"relative to the workspace, '/'-separated, no '..'\"},"
	    "\"content\":{\"type\":\"string\",\"description\":"
	    "\"the new content\"},"
	    "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\","
	    "\"base64\"],\"default\":\"utf-8\"}},"
	    "\"required\":[\"path\",\"content\"],"
	    "\"additionalProperties\":false}",
	    "{\"type\":\"object\",\"properties\":{"
	    "\"path\":{\"type\":\"string\"},"
	    "\"size\":{\"type\":\"integer\"},"
	    "\"mtime\":{\"type\":\"integer\"},"
	    "\"created\":{\"type\":\"boolean\"}," MODE_PERM_PROPS "},"
	    MODE_PERM_REQ "}", 0, tool_write_file },
	{ "list_files", "List a workspace directory",
	    "List a directory of the user's workspace (path relative to it, "
	    "\"\" for the workspace itself): name, type, size and mtime of "
	    "each entry, sorted by name, at most 10000.",
	    tool_list_args,
	    "{\"type\":\"object\",\"properties\":{"
	    "\"path\":{\"type\":\"string\",\"default\":\"\",\"description\":"
	    "\"a directory relative to the workspace\"}},"
	    "\"additionalProperties\":false}",
	    "{\"type\":\"object\",\"properties\":{"
	    "\"path\":{\"type\":\"string\"},"
	    "\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
	    "\"properties\":{\"name\":{\"type\":\"string\"},"
	    "\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"dir\","
	    "\"symlink\",\"other\"]},\"size\":{\"type\":\"integer\"},"
	    "\"mtime\":{\"type\":\"integer\"}}}},"
	    "\"truncated\":{\"type\":\"boolean\"}," MODE_PERM_PROPS "},"
	    MODE_PERM_REQ "}", 1, tool_list_files },
	{ "status", "Session status",
	    "This session's constraints now: execution mode and its expiry, "
	    "permission profile, backend, limits and usage, and the domains "
	    "an allowlist profile may reach (egress).",
	    tool_no_args,
	    "{\"type\":\"object\",\"properties\":{},"
	    "\"additionalProperties\":false}",
	    "{\"type\":\"object\",\"properties\":{"
	    "\"user\":{\"type\":\"string\"},"
	    "\"expires_at\":{\"type\":[\"string\",\"null\"]},"
	    "\"remaining_seconds\":{\"type\":[\"integer\",\"null\"]},"
	    "\"execution_mode\":{\"type\":\"object\"},"
	    "\"limits\":{\"type\":\"object\"},"
	    "\"backend\":{},"
	    "\"egress\":{\"type\":\"object\",\"properties\":{"
	    "\"allow\":{\"type\":\"array\"},\"user\":{\"type\":\"array\"},"
	    "\"session\":{\"type\":\"array\"},\"deny\":{\"type\":\"array\"},"
	    "\"ports\":{\"type\":\"array\"},\"proxy\":{\"type\":\"object\"}}},"
	    MODE_PERM_PROPS "}," MODE_PERM_REQ "}", 1, tool_status },
	{ NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL }
};

/* The tools/list array. */
struct json_object *
mcp_tools_list(void)
{
	static struct json_object	*list;
	const struct mcp_tool		*t;
	struct json_object		*o, *ann;

	if (list != NULL)
		return json_object_get(list);
	list = json_object_new_array();
	for (t = mcp_tools; t->name != NULL; t++) {
		o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(t->name));
		json_object_object_add(o, "title",
		    json_object_new_string(t->title));
		json_object_object_add(o, "description",
		    json_object_new_string(t->description));
		json_object_object_add(o, "inputSchema",
		    json_tokener_parse(t->input));
		json_object_object_add(o, "outputSchema",
		    json_tokener_parse(t->output));
		ann = json_object_new_object();
		json_object_object_add(ann, "readOnlyHint",
		    json_object_new_boolean(t->read_only));
		json_object_object_add(ann, "openWorldHint",
		    json_object_new_boolean(0));
		json_object_object_add(o, "annotations", ann);
		json_object_array_add(list, o);
	}
	return json_object_get(list);
}

/* A tool result: text (copied), the structured content (taken). */
static struct json_object *
tool_result(const char *text, struct json_object *structured, int is_error)
{
	struct json_object	*res, *content, *block;

	res = json_object_new_object();
	content = json_object_new_array();
	block = json_object_new_object();
	json_object_object_add(block, "type", json_object_new_string("text"));
	json_object_object_add(block, "text", json_object_new_string(text));
	json_object_array_add(content, block);
	json_object_object_add(res, "content", content);
	if (structured != NULL)
		json_object_object_add(res, "structuredContent", structured);
	json_object_object_add(res, "isError",
	    json_object_new_boolean(is_error));
	return res;
}

/* Answer a call with structured content, its JSON as the text too. */
static void
tool_answer(struct mcp_call *c, struct json_object *structured, int is_error)
{
	mcp_call_result(c, tool_result(json_object_to_json_string_ext(
	    structured, JSON_C_TO_STRING_PLAIN), structured, is_error));
}

/*
 * Bad arguments: a tool error the model can correct (2025-11-25 on), or
 * the protocol error of 2025-06-18.
 */
static void
tool_bad_args(struct mcp_call *c, const char *msg)
{
	if (mcp_call_lenient(c))
		mcp_call_result(c, tool_result(msg, NULL, 1));
	else
		mcp_call_error(c, MCP_INVALID_PARAMS, msg, NULL);
}

/* Check arguments against a tool's list: 0, or -1 after answering. */
static int
tool_check_args(struct mcp_call *c, const struct mcp_tool *t,
    struct json_object *args)
{
	const struct tool_arg	*a;
	struct json_object	*v;
	char			 msg[200];

	if (args != NULL) {
		json_object_object_foreach(args, key, val) {
			(void)val;
			for (a = t->args; a->name != NULL; a++)
				if (strcmp(a->name, key) == 0)
					break;
			if (a->name == NULL) {
				snprintf(msg, sizeof(msg), "Invalid arguments "
				    "for %s: unknown argument \"%.64s\"",
				    t->name, key);
				tool_bad_args(c, msg);
				return -1;
			}
		}
	}
	for (a = t->args; a->name != NULL; a++) {
		if (args == NULL || !json_object_object_get_ex(args, a->name,
		    &v) || v == NULL) {
			if (!a->required)
				continue;
			snprintf(msg, sizeof(msg), "Invalid arguments for %s: "
			    "\"%s\" is required", t->name, a->name);
			tool_bad_args(c, msg);
			return -1;
		}
		if (!json_object_is_type(v, a->type)) {
			snprintf(msg, sizeof(msg), "Invalid arguments for %s: "
			    "\"%s\" must be a%s %s", t->name, a->name,
			    a->type == json_type_int ||
			    a->type == json_type_object ? "n" : "",
			    a->type == json_type_int ? "integer" :
			    json_type_to_name(a->type));
			tool_bad_args(c, msg);
			return -1;
		}
	}
	return 0;
}

/* Run a tool by name: -1 when there is none. */
int
mcp_tools_call(struct mcp_call *c, const char *name, struct json_object *args)
{
	const struct mcp_tool	*t;

	for (t = mcp_tools; t->name != NULL; t++)
		if (strcmp(t->name, name) == 0)
			break;
	if (t->name == NULL)
		return -1;
	if (tool_check_args(c, t, args) == 0)
		t->run(c, args);
	return 0;
}

/* The state of a tool call waiting for brokerd. */
static struct tool_wait *
tool_wait_new(struct mcp_call *c, const char *tool)
{
	struct tool_wait	*w;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		fatal("%s", __func__);
	w->c = c;
	w->tool = tool;
	return w;
}

/* Forget a tool call's state (its call has been answered). */
static void
tool_wait_free(struct tool_wait *w)
{
	json_object_put(w->res);
	json_object_put(w->env);
	free(w->error);
	free(w);
}

/* The status of a refused call came: answer with the refusal. */
static void
tool_refusal_status(struct mcp_call *c, struct ipc_msg *m, void *arg)
{
	struct tool_wait	*w = arg;
	struct json_object	*st, *sc, *em, *e;
	char			*text;

	sc = json_object_new_object();
	e = json_object_new_object();
	json_object_object_add(e, "code", json_object_new_string(
	    json_str(w->res, "code") ? json_str(w->res, "code") : "error"));
	json_object_object_add(e, "message", json_object_new_string(w->error));
	json_object_object_add(sc, "error", e);
	if (m != NULL && (st = mcp_result(m)) != NULL) {
		if (json_object_object_get_ex(st, "execution_mode", &em) &&
		    json_str(em, "mode") != NULL)
			json_object_object_add(sc, "mode",
			    json_object_new_string(json_str(em, "mode")));
		if (json_str(st, "permission") != NULL)
			json_object_object_add(sc, "permission",
			    json_object_new_string(json_str(st, "permission")));
		json_object_put(st);
	}
	if (!json_object_object_get_ex(sc, "mode", NULL) ||
	    !json_object_object_get_ex(sc, "permission", NULL)) {
		/* Without both, the output schema would not hold. */
		json_object_put(sc);
		sc = NULL;
	}
	if (asprintf(&text, "%s refused: %s (see the server instructions, "
	    "or the status tool, for what this session may do)", w->tool,
	    w->error) == -1)
		fatal("%s", __func__);
	mcp_call_result(c, tool_result(text, sc, 1));
	free(text);
	tool_wait_free(w);
}

/*
 * A brokerd refusal of a tool call: a tool error with brokerd's words,
 * once a status request has said the session's mode and permission.
 */
static void
tool_refused(struct tool_wait *w, struct json_object *err)
{
	struct json_object	*obj;
	const char		*msg = json_str(err, "message");

	if ((w->error = strdup(msg ? msg : "refused")) == NULL)
		fatal("%s", __func__);
	json_object_put(w->res);
	w->res = json_object_new_object();
	json_object_object_add(w->res, "code", json_object_new_string(
	    json_str(err, "code") ? json_str(err, "code") : "error"));
	obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(MSG_STATUS));
	mcp_broker(w->c, obj, -1, 0, tool_refusal_status, w);
}

/* The text block of a command's result. */
static char *
tool_run_text(struct json_object *r)
{
	struct json_object	*v;
	char			*text, what[64];
	int			 timed_out = 0;

	json_flag(r, "timed_out", &timed_out);
	if (timed_out)
		snprintf(what, sizeof(what), "timed out");
	else if (json_object_object_get_ex(r, "exit_code", &v) && v != NULL)
		snprintf(what, sizeof(what), "exit code %lld",
		    (long long)json_object_get_int64(v));
	else if (json_object_object_get_ex(r, "signal", &v) && v != NULL)
		snprintf(what, sizeof(what), "killed by signal %lld",
		    (long long)json_object_get_int64(v));
	else
		snprintf(what, sizeof(what), "ended");
	if (asprintf(&text, "%s, %s mode, %s permission\n--- stdout ---\n%s"
	    "--- stderr ---\n%s", what,
	    json_str(r, "mode") ? json_str(r, "mode") : "?",
	    json_str(r, "permission") ? json_str(r, "permission") : "?",
	    json_str(r, "stdout") ? json_str(r, "stdout") : "",
	    json_str(r, "stderr") ? json_str(r, "stderr") : "") == -1)
		fatal("%s", __func__);
	return text;
}

/* Both replies of a run tool are in: answer. */
static void
tool_run_finish(struct tool_wait *w)
{
	struct json_object	*v, *err;
	char			*text;
	int64_t			 code = -1;
	int			 timed_out = 0;

	if (w->env != NULL && !json_object_object_get_ex(w->env, "error",
	    NULL)) {
		mcp_call_error(w->c, MCP_INTERNAL_ERROR, "malformed reply from "
		    "brokerd", NULL);
		tool_wait_free(w);
		return;
	}
	if (w->env == NULL && w->res == NULL) {
		mcp_call_error(w->c, MCP_INTERNAL_ERROR, "brokerd did not "
		    "answer", NULL);
		tool_wait_free(w);
		return;
	}
	if (w->env != NULL) {
		if (mcp_call_failed(w->c, w->env)) {
			tool_wait_free(w);
			return;
		}
		json_object_object_get_ex(w->env, "error", &err);
		tool_refused(w, err);
		return;
	}
	json_object_object_add(w->res, "permission",
	    json_object_new_string(w->permission[0] ? w->permission : "?"));
	if (json_object_object_get_ex(w->res, "exit_code", &v) && v != NULL)
		code = json_object_get_int64(v);
	json_flag(w->res, "timed_out", &timed_out);
	text = tool_run_text(w->res);
	mcp_call_result(w->c, tool_result(text, json_object_get(w->res),
	    code != 0 || timed_out));
	free(text);
	tool_wait_free(w);
}

/* The permission of a run's session, asked once the run is done. */
static void
tool_run_permission(struct mcp_call *c, struct ipc_msg *m, void *arg)
{
	struct tool_wait	*w = arg;
	struct json_object	*res;

	if (m != NULL && (res = mcp_result(m)) != NULL) {
		snprintf(w->permission, sizeof(w->permission), "%s",
		    json_str(res, "permission") ? json_str(res, "permission") :
		    "");
		json_object_put(res);
	}
	tool_run_finish(w);
}

/*
 * The run's reply: its result with the output read now (the fds are
 * the reply's), then the session's permission; or the refusal.
 */
static void
tool_run_done(struct mcp_call *c, struct ipc_msg *m, void *arg)
{
	struct tool_wait	*w = arg;
	struct json_object	*res, *obj;
	int			 fds[2];

	if (m == NULL || json_object_object_get_ex(m->obj, "error", NULL) ||
	    (res = mcp_result(m)) == NULL) {
		w->env = m != NULL ? json_object_get(m->obj) : NULL;
		tool_run_finish(w);
		return;
	}
	if (json_str(m->obj, "user") != NULL)
		snprintf(c->req->user, sizeof(c->req->user), "%s",
		    json_str(m->obj, "user"));
	fds[0] = m->nfds > 0 ? m->fds[0] : -1;
	fds[1] = m->nfds > 1 ? m->fds[1] : -1;
	w->res = api_run_result(res, fds);
	json_object_put(res);
	/*
	 * The run reply has the mode, not the permission: one more small
	 * request (PM_RAW, no sandboxd), after the run so that the answer
	 * says the permission as it is once the command is done.
	 */
	obj = json_object_new_object();
	json_object_object_add(obj, "type",
	    json_object_new_string(MSG_PERMISSION_GET));
	mcp_broker(c, obj, -1, 0, tool_run_permission, w);
}

/* run_command and run_python: "run" as the HTTP API sends it. */
static void
tool_run(struct mcp_call *c, struct json_object *args, int python)
{
	struct json_object	*obj;
	struct tool_wait	*w;
	char			 msg[200];
	int			 fd = -1, status;

	status = api_run_request(python, args, &obj, &fd, msg, sizeof(msg));
	if (status == 400 || status == 413) {
		tool_bad_args(c, msg);
		return;
	}
	if (status != 0) {
		mcp_call_error(c, MCP_INTERNAL_ERROR, msg, NULL);
		return;
	}
	w = tool_wait_new(c, python ? "run_python" : "run_command");
	mcp_broker(c, obj, fd, api_run_timeout_ms(), tool_run_done, w);
}

/* run_command: a shell command line. */
static void
tool_run_command(struct mcp_call *c, struct json_object *args)
{
	tool_run(c, args, 0);
}

/* run_python: Python code on python3's stdin. */
static void
tool_run_python(struct mcp_call *c, struct json_object *args)
{
	tool_run(c, args, 1);
}

/* Read an fd's first len bytes (up to max) into a new buffer. */
static char *
tool_read_fd(int fd, size_t len, size_t *got)
{
	char	*buf;
	ssize_t	 n;

	*got = 0;
	if ((buf = malloc(len + 1)) == NULL)
		fatal("%s", __func__);
	while (*got < len && (n = pread(fd, buf + *got, len - *got,
	    *got)) > 0)
		*got += n;
	buf[*got] = '\0';
	return buf;
}

/* A file tool's reply: the common part (refusal, mode, permission). */
static struct json_object *
tool_file_result(struct tool_wait *w, struct ipc_msg *m)
{
	struct json_object	*res, *err, *sc;
	static const char *const keep[] = { "path", "size", "mtime",
	    "created", "truncated", "mode", "permission", NULL };
	struct json_object	*v;
	size_t			 i;

	if (mcp_call_refused(w->c, m)) {
		tool_wait_free(w);
		return NULL;
	}
	if (json_object_object_get_ex(m->obj, "error", &err)) {
		tool_refused(w, err);
		return NULL;
	}
	if ((res = mcp_result(m)) == NULL) {
		mcp_call_error(w->c, MCP_INTERNAL_ERROR, "malformed reply from "
		    "brokerd", NULL);
		tool_wait_free(w);
		return NULL;
	}
	sc = json_object_new_object();
	for (i = 0; keep[i] != NULL; i++)
		if (json_object_object_get_ex(res, keep[i], &v))
			json_object_object_add(sc, keep[i], json_object_get(v));
	json_object_put(res);
	return sc;
}

/* file_read's reply: the file's bytes as UTF-8 text or base64. */
static void
tool_read_done(struct mcp_call *c, struct ipc_msg *m, void *arg)
{
	struct tool_wait	*w = arg;
	struct json_object	*sc;
	int64_t			 size = 0;
	char			*buf, *clean, *b64, msg[256];
	size_t			 got, clen;

	if ((sc = tool_file_result(w, m)) == NULL)
		return;
	json_int(sc, "size", &size);
	if (m->nfds < 1 || size < 0) {
		json_object_put(sc);
		mcp_call_error(c, MCP_INTERNAL_ERROR, "brokerd sent no file",
		    NULL);
		tool_wait_free(w);
		return;
	}
	if (size > TOOL_MAX_READ) {
		snprintf(msg, sizeof(msg), "read_file refused: %s is %lld "
		    "bytes, over read_file's 8 MiB; download it with GET "
		    "/api/files/%s", w->path, (long long)size, w->path);
		mcp_call_result(c, tool_result(msg, sc, 1));
		tool_wait_free(w);
		return;
	}
	buf = tool_read_fd(m->fds[0], size, &got);
	clean = utf8_clean(buf, got, &clen);
	if (clen == got && memcmp(clean, buf, got) == 0 &&
	    memchr(buf, '\0', got) == NULL) {
		json_object_object_add(sc, "encoding",
		    json_object_new_string("utf-8"));
		json_object_object_add(sc, "content",
		    json_object_new_string_len(buf, got));
	} else {
		if ((b64 = malloc(4 * ((got + 2) / 3) + 1)) == NULL)
			fatal("%s", __func__);
		EVP_EncodeBlock((unsigned char *)b64, (unsigned char *)buf,
		    got);
		json_object_object_add(sc, "encoding",
		    json_object_new_string("base64"));
		json_object_object_add(sc, "content",
		    json_object_new_string(b64));
		free(b64);
	}
	json_object_object_add(sc, "size", json_object_new_int64(got));
	free(clean);
	free(buf);
	/* The text block is the content itself (base64 says so). */
	mcp_call_result(c, tool_result(json_str(sc, "content"),
	    json_object_get(sc), 0));
	json_object_put(sc);
	tool_wait_free(w);
}

/* Send a file_* request (type) of a tool for a path, size bytes written. */
static void
tool_file_send(struct mcp_call *c, const char *tool, const char *type,
    const char *path, struct json_object *obj, int fd, long long size,
    mcp_broker_cb cb)
{
	struct tool_wait	*w;

	w = tool_wait_new(c, tool);
	snprintf(w->path, sizeof(w->path), "%s", path);
	if (obj == NULL)
		obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(type));
	json_object_object_add(obj, "path", json_object_new_string(path));
	mcp_broker(c, obj, fd, (int)(files_wait_ms(size) + TOOL_FILE_GRACE_MS),
	    cb, w);
}

/* read_file: file_read of a path. */
static void
tool_read_file(struct mcp_call *c, struct json_object *args)
{
	tool_file_send(c, "read_file", MSG_FILE_READ, json_str(args, "path"), NULL, -1,
	    0, tool_read_done);
}

/* file_write's reply. */
static void
tool_write_done(struct mcp_call *c, struct ipc_msg *m, void *arg)
{
	struct tool_wait	*w = arg;
	struct json_object	*sc;

	if ((sc = tool_file_result(w, m)) == NULL)
		return;
	tool_answer(c, sc, 0);
	tool_wait_free(w);
}

/* write_file: the content, decoded, in a memfd sent with file_write. */
static void
tool_write_file(struct mcp_call *c, struct json_object *args)
{
	struct json_object	*obj;
	const char		*enc = json_str(args, "encoding");
	const char		*content = json_str(args, "content");
	size_t			 len = strlen(content), n;
	unsigned char		*raw = NULL;
	int			 fd, dec;

	if (enc != NULL && strcmp(enc, "utf-8") != 0 &&
	    strcmp(enc, "base64") != 0) {
		tool_bad_args(c, "Invalid arguments for write_file: "
		    "\"encoding\" is \"utf-8\" or \"base64\"");
		return;
	}
	n = json_object_get_string_len(json_object_object_get(args,
	    "content"));
	if (enc != NULL && strcmp(enc, "base64") == 0) {
		if (n % 4 != 0 || strspn(content, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "abcdefghijklmnopqrstuvwxyz0123456789+/=") != n ||
		    (raw = malloc(n / 4 * 3 + 1)) == NULL ||
		    (dec = EVP_DecodeBlock(raw, (const unsigned char *)content,
		    n)) < 0) {
			free(raw);
			tool_bad_args(c, "Invalid arguments for write_file: "
			    "\"content\" is not valid base64");
			return;
		}
		if (n >= 1 && content[n - 1] == '=')
			dec--;
		if (n >= 2 && content[n - 2] == '=')
			dec--;
		if (dec < 0) {
			free(raw);
			tool_bad_args(c, "Invalid arguments for write_file: "
			    "\"content\" is not valid base64");
			return;
		}
		fd = api_memfd((char *)raw, dec);
		len = dec;
		free(raw);
	} else
		fd = api_memfd(content, n), len = n;
	if (fd == -1) {
		mcp_call_error(c, MCP_INTERNAL_ERROR, "cannot hold the content",
		    NULL);
		return;
	}
	obj = json_object_new_object();
	json_object_object_add(obj, "size", json_object_new_int64(len));
	json_object_object_add(obj, "dir", json_object_new_boolean(0));
	tool_file_send(c, "write_file", MSG_FILE_WRITE, json_str(args, "path"), obj, fd,
	    len, tool_write_done);
}

/* file_list's reply: the listing JSON in a memfd. */
static void
tool_list_done(struct mcp_call *c, struct ipc_msg *m, void *arg)
{
	struct tool_wait	*w = arg;
	struct json_object	*sc, *listing, *v;
	char			*buf;
	size_t			 got;
	off_t			 end;

	if ((sc = tool_file_result(w, m)) == NULL)
		return;
	if (m->nfds < 1 || (end = lseek(m->fds[0], 0, SEEK_END)) < 0 ||
	    end > TOOL_MAX_LIST) {
		json_object_put(sc);
		mcp_call_error(c, MCP_INTERNAL_ERROR, "brokerd sent no listing",
		    NULL);
		tool_wait_free(w);
		return;
	}
	buf = tool_read_fd(m->fds[0], end, &got);
	listing = json_tokener_parse(buf);
	free(buf);
	if (listing != NULL && json_object_object_get_ex(listing, "entries",
	    &v))
		json_object_object_add(sc, "entries", json_object_get(v));
	else
		json_object_object_add(sc, "entries", json_object_new_array());
	if (listing != NULL && json_object_object_get_ex(listing, "truncated",
	    &v))
		json_object_object_add(sc, "truncated", json_object_get(v));
	json_object_put(listing);
	tool_answer(c, sc, 0);
	tool_wait_free(w);
}

/* list_files: file_list of a directory ("" for the workspace). */
static void
tool_list_files(struct mcp_call *c, struct json_object *args)
{
	const char	*path = args != NULL ? json_str(args, "path") : NULL;

	tool_file_send(c, "list_files", MSG_FILE_LIST, path ? path : "", NULL, -1,
	    0, tool_list_done);
}

/*
 * status's reply: mode, permission, expiry and limits, and the egress
 * allowlist (brokerd's "egress", passed on as it is).
 */
static void
tool_status_done(struct mcp_call *c, struct ipc_msg *m, void *arg)
{
	struct tool_wait	*w = arg;
	struct json_object	*res, *em, *v, *err;

	if (mcp_call_refused(c, m)) {
		tool_wait_free(w);
		return;
	}
	if (json_object_object_get_ex(m->obj, "error", &err) ||
	    (res = mcp_result(m)) == NULL) {
		mcp_call_error(c, MCP_INTERNAL_ERROR, "brokerd refused the "
		    "status request", NULL);
		tool_wait_free(w);
		return;
	}
	if (json_object_object_get_ex(res, "execution_mode", &em) &&
	    json_object_is_type(em, json_type_object)) {
		json_object_object_add(res, "mode", json_object_new_string(
		    json_str(em, "mode") ? json_str(em, "mode") : "sandbox"));
		json_object_object_get_ex(em, "expires_at", &v);
		json_object_object_add(res, "expires_at", json_object_get(v));
		json_object_object_get_ex(em, "remaining_seconds", &v);
		json_object_object_add(res, "remaining_seconds",
		    json_object_get(v));
	}
	if (!json_object_object_get_ex(res, "permission", NULL))
		json_object_object_add(res, "permission",
		    json_object_new_string("?"));
	if (!json_object_object_get_ex(res, "mode", NULL))
		json_object_object_add(res, "mode",
		    json_object_new_string("sandbox"));
	tool_answer(c, res, 0);
	tool_wait_free(w);
}

/* status: brokerd's status of the caller. */
static void
tool_status(struct mcp_call *c, struct json_object *args)
{
	struct json_object	*obj;

	obj = json_object_new_object();
	json_object_object_add(obj, "type", json_object_new_string(MSG_STATUS));
	mcp_broker(c, obj, -1, 0, tool_status_done, tool_wait_new(c,
	    "status"));
}
