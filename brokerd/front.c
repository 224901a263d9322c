/*
 * brokerd's side of frontd. frontd forwards the raw credentials of each HTTP
 * request ("auth": cookie, bearer, csrf); brokerd alone decides who that is
 * and what they may do (the OpenSSH monitor model). A frontd that lies can
 * claim nothing it holds no secret for.
 */
#include <sys/types.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

/* What a request needs before its handler runs. */
#define NEED_NONE	0x0
#define NEED_IDENT	0x1	/* a session or a token */
#define NEED_SESSION	0x2	/* a login session, not an agent token */
#define NEED_CSRF	0x4	/* the session's CSRF token (state changes) */
#define NEED_ANY_CSRF	(NEED_IDENT | NEED_CSRF)	/* CSRF for cookies */
#define NEED_ADMIN	(0x8 | NEED_SESSION)	/* an admin's login session */
/* The user's workspace: in a fleet, served by their home host alone. */
#define NEED_HOME	(0x10 | NEED_IDENT)

struct front_op {
	const char	*type;
	unsigned	 need;
	void		(*fn)(struct ipc_peer *, struct ipc_msg *,
			    struct ident *);
};

static void	front_dispatch(struct ipc_peer *, struct ipc_msg *);
static void	front_info(struct ipc_peer *, struct ipc_msg *);
static void	front_resized(struct ipc_peer *, struct ipc_msg *);
static void	front_health(struct ipc_peer *, struct ipc_msg *,
		    struct ident *);
static void	front_login(struct ipc_peer *, struct ipc_msg *,
		    struct ident *);
static void	front_logout(struct ipc_peer *, struct ipc_msg *,
		    struct ident *);
static void	front_status(struct ipc_peer *, struct ipc_msg *,
		    struct ident *);
static void	front_token_mint(struct ipc_peer *, struct ipc_msg *,
		    struct ident *);
static void	front_tokens(struct ipc_peer *, struct ipc_msg *,
		    struct ident *);
static void	front_token_revoke(struct ipc_peer *, struct ipc_msg *,
		    struct ident *);
static void	front_permission_get(struct ipc_peer *, struct ipc_msg *,
		    struct ident *);
static void	front_permission_set(struct ipc_peer *, struct ipc_msg *,
		    struct ident *);
static void	front_events(struct ipc_peer *, struct ipc_msg *,
		    struct ident *);

/*
 * The requests frontd may make, with what each needs (NEED_IDENT where
 * the protocol table says PM_IDENT; front_init checks).
 */
static const struct front_op front_ops[] = {
	{ MSG_HEALTH,	NEED_NONE,			front_health },
	{ MSG_LOGIN,	NEED_NONE,			front_login },
	{ MSG_LOGOUT,	NEED_SESSION | NEED_CSRF,	front_logout },
	{ MSG_STATUS,	NEED_IDENT,			front_status },
	{ MSG_TOKEN_MINT,	NEED_SESSION | NEED_CSRF,	front_token_mint },
	{ MSG_SESSION_TOKENS, NEED_SESSION,		front_tokens },
	{ MSG_SESSION_TOKEN_REVOKE, NEED_SESSION | NEED_CSRF,
	    front_token_revoke },
	{ MSG_MODE_GET,	NEED_IDENT,			mode_get },
	{ MSG_MODE_SET,	NEED_ANY_CSRF,			mode_set },
	{ MSG_EVENTS_SUBSCRIBE, NEED_IDENT,		front_events },
	{ MSG_PROMPT,	NEED_IDENT,			prompt_get },
	{ MSG_ADMIN_SESSIONS, NEED_ADMIN,			admin_sessions },
	{ MSG_ADMIN_REVERT, NEED_ADMIN | NEED_CSRF,	admin_revert },
	{ MSG_ADMIN_KILL,	NEED_ADMIN | NEED_CSRF,		admin_kill },
	{ MSG_ADMIN_AUDIT, NEED_ADMIN,			admin_audit },
	{ MSG_ADMIN_DEBUG, NEED_ADMIN,			admin_debug },
	{ MSG_ADMIN_RECORDING, NEED_ADMIN,		admin_recording },
	{ MSG_EGRESS_GET,	NEED_ADMIN,			egress_front_get },
	{ MSG_EGRESS_SET,	NEED_ADMIN | NEED_CSRF,		egress_front_set },
	{ MSG_PERMISSION_GET, NEED_IDENT,			front_permission_get },
	{ MSG_PERMISSION_SET, NEED_SESSION | NEED_CSRF,	front_permission_set },
	{ MSG_RUN,	NEED_ANY_CSRF | NEED_HOME,	spawn_run },
	{ MSG_FILE_READ,	NEED_HOME,			files_read },
	{ MSG_FILE_LIST,	NEED_HOME,			files_list },
	{ MSG_FILE_WRITE,	NEED_ANY_CSRF | NEED_HOME,	files_write },
	{ MSG_FILE_DELETE, NEED_ANY_CSRF | NEED_HOME,	files_delete },
	{ MSG_TERMINAL_CREATE, NEED_ANY_CSRF | NEED_HOME,
	    spawn_terminal_create },
	{ MSG_TERMINAL_LIST, NEED_IDENT,			spawn_terminal_list },
	{ MSG_TERMINAL_ATTACH, NEED_IDENT,		spawn_terminal_attach },
	{ MSG_TERMINAL_DELETE, NEED_ANY_CSRF,		spawn_terminal_delete },
	{ NULL, 0, NULL }
};

/* frontd's one-way messages; front_init adds every op of front_ops. */
static const struct ipc_handler front_events_map[] = {
	/* after the hello: frontd's version, for hgctl status */
	{ MSG_FRONT_INFO,	front_info },
	/* frontd resized a terminal's pty (counted for the audit) */
	{ MSG_TERMINAL_RESIZED, front_resized },
	{ NULL, NULL }
};

static void	front_closed(struct ipc_peer *);
static const struct ipc_peer_cbs front_cbs = { NULL, front_closed };

static struct config	*front_conf;
/*
 * What the frontd links told of themselves (front_info), newest last told
 * first shown. More than one: a link of frontd's uid that says hello and
 * goes (a probe, a frontd restarted while the old one lingers) must not
 * hide the frontd still linked.
 */
#define FRONT_SEEN_MAX	8
static struct front_seen {
	struct ipc_peer	*peer;		/* NULL: a free slot */
	char		 version[32];
	int64_t		 started;	/* wall seconds, 0 when not told */
	uint64_t	 order;		/* when it was told, the newest highest */
} front_seen[FRONT_SEEN_MAX];
static uint64_t		 front_seen_order;
static struct rl_table	*front_rl_user;
static struct rl_table	*front_rl_addr;
static char		 front_rid[LOG_REQUEST_ID_LEN + 1]; /* of this request */

static TAILQ_HEAD(, front_pending) front_pendings =
    TAILQ_HEAD_INITIALIZER(front_pendings);


/* {"client": addr} for an audit record. */
static struct json_object *
front_client(const char *client)
{
	struct json_object	*d;

	d = json_object_new_object();
	json_object_object_add(d, "client", json_object_new_string(client));
	return d;
}

/*
 * The request id of a request from frontd, which brokerd does not trust:
 * one of the right shape is kept; none, or a malformed one, is replaced by
 * a fresh id (and the malformed one logged, escaped).
 */
static void
front_request_id(struct ipc_msg *m)
{
	const char	*rid;
	char		 esc[64];

	rid = json_str(m->obj, "request_id");
	if (rid != NULL && log_reqid_valid(rid)) {
		memcpy(front_rid, rid, sizeof(front_rid));
		return;
	}
	log_reqid_new(front_rid);
	if (json_object_object_get_ex(m->obj, "request_id", NULL))
		log_warnx("frontd sent a malformed request_id \"%s\" with a "
		    "%s request; it is %s here", rid != NULL ? log_escape(rid,
		    (size_t)-1, esc, sizeof(esc)) : "(not a string)", m->type,
		    front_rid);
}

/* Lines and audit records from here on are about id's request. */
static void
front_ctx(struct ident *id)
{
	log_ctx_set(front_rid, id->user != NULL ? id->user->name : NULL,
	    id->session != NULL ? id->session->id : NULL);
}

/*
 * Establish the identity of a request from its "auth" object. Returns 0, or
 * -1 after replying with the refusal.
 */
static int
front_ident(struct ipc_peer *p, struct ipc_msg *m, unsigned need,
    struct ident *id)
{
	struct json_object	*auth = NULL;
	const char		*cookie = NULL, *bearer = NULL, *csrf = NULL;
	const char		*client;

	memset(id, 0, sizeof(*id));
	if (need == NEED_NONE)
		return 0;
	if (json_object_object_get_ex(m->obj, "auth", &auth) &&
	    json_object_is_type(auth, json_type_object)) {
		cookie = json_str(auth, "cookie");
		bearer = json_str(auth, "bearer");
		csrf = json_str(auth, "csrf");
	}
	client = json_str(m->obj, "client");
	if (bearer != NULL) {
		if ((id->token = token_lookup(bearer)) == NULL) {
			audit_refused("auth_refused", NULL, NULL,
			    "invalid or revoked token", client);
			ipc_reply_error(p, m, ERR_UNAUTHORIZED,
			    "invalid or revoked token");
			return -1;
		}
		if (id->token->session_id[0] != '\0')
			id->session = session_by_id(id->token->session_id);
		id->user = auth_find(id->token->user);
	} else if (cookie != NULL) {
		if ((id->session = session_lookup(cookie)) == NULL) {
			audit_refused("auth_refused", NULL, NULL,
			    "unknown or expired session cookie", client);
			ipc_reply_error(p, m, ERR_UNAUTHORIZED,
			    "session expired or invalid; log in again");
			return -1;
		}
		id->user = auth_find(id->session->user);
	} else {
		ipc_reply_error(p, m, ERR_UNAUTHORIZED,
		    "authentication required");
		return -1;
	}
	if (id->user == NULL) {
		audit_refused("auth_refused", NULL, NULL,
		    "user no longer exists", client);
		ipc_reply_error(p, m, ERR_UNAUTHORIZED, "user no longer exists");
		return -1;
	}
	front_ctx(id);
	if ((need & NEED_SESSION) && id->token != NULL) {
		ipc_reply_error(p, m, ERR_FORBIDDEN,
		    "agent tokens cannot do this; it needs a login session");
		return -1;
	}
	if ((need & NEED_ADMIN) == NEED_ADMIN && !id->user->admin) {
		audit_append("admin_refused", id->user->name, id->session->id,
		    0, "not an admin", NULL, 0);
		ipc_reply_error(p, m, ERR_FORBIDDEN,
		    "this needs an admin session");
		return -1;
	}
	if ((need & NEED_CSRF) && id->token == NULL &&
	    !session_csrf_ok(id->session, csrf)) {
		audit_refused("csrf_refused", id->user->name, id->session->id,
		    csrf == NULL ? "missing CSRF token" : "invalid CSRF token",
		    client);
		ipc_reply_error(p, m, ERR_FORBIDDEN,
		    "missing or invalid CSRF token (X-CSRF-Token)");
		return -1;
	}
	/* Never served from this host's copy of another host's workspace. */
	if ((need & NEED_HOME) == NEED_HOME &&
	    hosts_home_check(p, m, id->user) == -1)
		return -1;
	return 0;
}

/* Find the op, establish the identity, run the handler. */
static void
front_dispatch(struct ipc_peer *p, struct ipc_msg *m)
{
	const struct front_op	*op;
	struct ident		 id;

	for (op = front_ops; op->type != NULL; op++)
		if (strcmp(op->type, m->type) == 0)
			break;
	if (op->type == NULL) {
		ipc_reply_error(p, m, ERR_BAD_REQUEST, "unknown request");
		return;
	}
	front_request_id(m);
	log_ctx_set(front_rid, NULL, NULL);
	if (front_ident(p, m, op->need, &id) == 0)
		op->fn(p, m, &id);
	log_ctx_clear();
}

/* Health of brokerd and, through it, of sandboxd and its backend. */
static void
front_health(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	sandbox_health(p, m);
}

/*
 * No record, no action: -1 after a 503 with the reason when the audit
 * log cannot take the record of the change about to be made.
 */
static int
front_record_ok(struct ipc_peer *p, struct ipc_msg *m)
{
	char	why[300];

	if (audit_ready(why, sizeof why) == 0)
		return 0;
	log_warnx("refused: %s", why);
	ipc_reply_error(p, m, ERR_UNAVAILABLE, "%s", why);
	return -1;
}

/* Verify a password, rate limited per user and per client address. */
static void
front_login(struct ipc_peer *p, struct ipc_msg *m, struct ident *unused)
{
	struct json_object	*res;
	struct session		*s;
	struct user		*u;
	const char		*name, *password, *client, *home;
	char			 cookie[64], csrf[64];
	char			 esc[LOG_ESCAPE_MAX];
	int			 wait;
	int64_t			 now = now_mono_ms();

	/* The table made them required strings, client a numeric address. */
	name = json_str(m->obj, "username");
	password = json_str(m->obj, "password");
	client = json_str(m->obj, "client");
	log_escape(name, (size_t)-1, esc, sizeof(esc));

	/*
	 * No record, no attempt: with the audit (or the store that holds it
	 * and the fleet's buckets) unusable, 503 with the reason, before a
	 * bucket that could not be read turns it into a 429.
	 */
	if (front_record_ok(p, m) == -1)
		return;
	/* Every attempt counts, right or wrong, from the address first. */
	if ((wait = rl_take(front_rl_addr, client, now)) > 0 ||
	    (wait = rl_take(front_rl_user, name, now)) > 0) {
		log_warnx("login rate limited: user \"%s\" from %s", esc,
		    client);
		audit_refused("login_failed", auth_name_valid(name) ? name :
		    NULL, NULL, "rate limited", client);
		ipc_reply_retry(p, m, wait,
		    "too many login attempts; try again later");
		return;
	}
	u = auth_verify(name, password);
	/* argon2's 19 MiB work area would otherwise stay in the heap. */
	malloc_trim(0);
	if (u == NULL) {
		log_warnx("login failed: user \"%s\" from %s", esc, client);
		counters.logins_failed++;
		audit_append("login_failed", auth_name_valid(name) ? name : NULL,
		    NULL, 0, "invalid username or password",
		    front_client(client), 0);
		ipc_reply_error(p, m, ERR_UNAUTHORIZED,
		    "invalid username or password");
		return;
	}
	if (front_record_ok(p, m) == -1)
		return;
	if ((s = session_create(u->name, cookie, sizeof(cookie), csrf,
	    sizeof(csrf))) == NULL) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE,
		    "cannot store the session");
		return;
	}
	log_ctx_set(front_rid, u->name, s->id);
	log_info("login: user %s from %s, session %.8s", u->name, client,
	    s->id);
	counters.logins++;
	audit_append("login", u->name, s->id, 1, NULL, front_client(client), 0);
	mode_login(s, u);
	home = hosts_home(u);
	res = json_object_new_object();
	/* In a fleet: frontd's HGHOST cookie, for the balancer to go home. */
	if (home != NULL)
		json_object_object_add(res, "home",
		    json_object_new_string(home));
	json_object_object_add(res, "user", json_object_new_string(u->name));
	json_object_object_add(res, "role",
	    json_object_new_string(u->admin ? "admin" : "user"));
	json_object_object_add(res, "csrf_token", json_object_new_string(csrf));
	json_object_object_add(res, "cookie", json_object_new_string(cookie));
	json_object_object_add(res, "max_age",
	    json_object_new_int64(s->expires - now_wall_ms() / 1000));
	ipc_reply(p, m, res, NULL, 0);
}

/* End the login session and the tokens bound to it. */
static void
front_logout(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	log_info("logout: user %s, session %.8s", id->user->name,
	    id->session->id);
	audit_append("logout", id->user->name, id->session->id, 1, NULL, NULL,
	    0);
	/* Its grant ends with it: direct spawns die (or stay, with keep). */
	mode_revert(id->session, "logout", id->user->name);
	events_emit(id->session->id, id->user->name, "session_ended", NULL);
	session_destroy(id->session);
	ipc_reply(p, m, NULL, NULL, 0);
}

/* Remember a request of frontd to answer later. */
struct front_pending *
front_pending_new(struct ipc_peer *p, struct ipc_msg *m)
{
	struct front_pending	*fp;

	if ((fp = calloc(1, sizeof(*fp))) == NULL)
		fatal("%s", __func__);
	fp->peer = p;
	fp->id = m->id;
	fp->pm = m->pm;
	/* The reply says who asked (frontd's access line), as now would. */
	snprintf(fp->rid, sizeof(fp->rid), "%s", log_ctx_request_id() ?
	    log_ctx_request_id() : "");
	snprintf(fp->user, sizeof(fp->user), "%s", log_ctx_user() ?
	    log_ctx_user() : "");
	TAILQ_INSERT_TAIL(&front_pendings, fp, entry);
	return fp;
}

/* Answer a request kept by front_pending_new (res is taken); free it. */
void
front_pending_reply(struct front_pending *fp, struct json_object *res)
{
	struct ipc_msg	m;
	char		rid[LOG_REQUEST_ID_LEN + 1];
	char		user[USER_NAME_MAX + 1];

	/* Maybe called while another request is served: keep its context. */
	snprintf(rid, sizeof(rid), "%s", log_ctx_request_id() ?
	    log_ctx_request_id() : "");
	snprintf(user, sizeof(user), "%s", log_ctx_user() ? log_ctx_user() :
	    "");
	TAILQ_REMOVE(&front_pendings, fp, entry);
	memset(&m, 0, sizeof(m));
	m.id = fp->id;
	m.pm = fp->pm;
	log_ctx_set(fp->rid[0] ? fp->rid : NULL, fp->user[0] ? fp->user : NULL,
	    NULL);
	if (fp->peer != NULL)
		ipc_reply(fp->peer, &m, res, NULL, 0);
	else
		json_object_put(res);
	if (rid[0] != '\0' || user[0] != '\0')
		log_ctx_set(rid, user[0] ? user : NULL, NULL);
	else
		log_ctx_clear();
	free(fp);
}

/*
 * The limits a user's spawns run under, as configured: bytes, counts,
 * weights; null for none.
 */
struct json_object *
front_limits_json(void)
{
	struct json_object	*o;
	struct config		*c = front_conf;

#define FRONT_LIMIT(v, none) ((v) == (none) ? NULL : json_object_new_int64(v))
	o = json_object_new_object();
	json_object_object_add(o, "memory_max",
	    FRONT_LIMIT(c->user_memory_max, -1));
	json_object_object_add(o, "swap_max",
	    FRONT_LIMIT(c->user_swap_max, -1));
	json_object_object_add(o, "pids_max",
	    FRONT_LIMIT(c->user_pids_max, -1));
	json_object_object_add(o, "cpu_weight",
	    json_object_new_int64(c->user_cpu_weight));
	json_object_object_add(o, "cpu_max_percent",
	    FRONT_LIMIT(c->user_cpu_max, 0));
	json_object_object_add(o, "io_weight",
	    json_object_new_int64(c->user_io_weight));
	json_object_object_add(o, "disk_max",
	    FRONT_LIMIT(c->user_disk_max, 0));
	json_object_object_add(o, "spawn_memory_max",
	    FRONT_LIMIT(c->spawn_memory_max, -1));
	json_object_object_add(o, "spawn_pids_max",
	    FRONT_LIMIT(c->spawn_pids_max, -1));
#undef FRONT_LIMIT
	return o;
}

/* json-c prints a front_json_raw object as the text it holds. */
static int
front_raw_print(struct json_object *o, struct printbuf *pb, int level,
    int flags)
{
	return printbuf_memappend(pb, json_object_get_string(o),
	    json_object_get_string_len(o));
}

/*
 * A value that prints as obj prints now, without walking obj again: for
 * the parts of a reply that change rarely. Only for sending: it reads as
 * a string.
 */
struct json_object *
front_json_raw(struct json_object *obj)
{
	struct json_object	*o;
	const char		*s;
	size_t			 len;

	s = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN,
	    &len);
	if ((o = json_object_new_string_len(s, (int)len)) == NULL)
		fatalx("%s: json_object_new_string_len", __func__);
	json_object_set_serializer(o, front_raw_print, NULL, NULL);
	return o;
}

/* The configured limits, printed once (the configuration stays). */
static struct json_object *
front_limits_raw(void)
{
	static struct json_object	*raw;
	struct json_object		*o;

	if (raw == NULL) {
		o = front_limits_json();
		raw = front_json_raw(o);
		json_object_put(o);
	}
	return json_object_get(raw);
}

/* The usage of a status reply, its age in ms and why it is null. */
static void
front_status_add_usage(struct json_object *res, struct json_object *usage,
    int64_t age_ms, const char *why)
{
	json_object_object_add(res, "usage", json_object_get(usage));
	json_object_object_add(res, "usage_age_ms", usage != NULL ?
	    json_object_new_int64(age_ms) : NULL);
	json_object_object_add(res, "usage_reason",
	    usage == NULL ? json_object_new_string(why) : NULL);
}

/* sandboxd's usage for a status request came (or not): answer it. */
static void
front_status_usage(struct json_object *usage, int64_t age_ms, const char *why,
    void *arg)
{
	struct front_pending	*fp = arg;
	struct json_object	*res = fp->res;

	front_status_add_usage(res, usage, age_ms, why);
	fp->res = NULL;
	front_pending_reply(fp, res);
}

/* A growing text buffer for the replies printed by hand. */
struct front_text {
	char	*buf;
	size_t	 len, size;
};

/* Append n bytes to t. */
static void
front_text_add(struct front_text *t, const char *s, size_t n)
{
	if (t->len + n > t->size) {
		t->size = (t->len + n) * 2;
		if ((t->buf = realloc(t->buf, t->size)) == NULL)
			fatal("%s", __func__);
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
}

/* Append a JSON string, escaped as json-c escapes it. */
static void
front_text_str(struct front_text *t, const char *s)
{
	static const char	hex[] = "0123456789abcdef";
	char			esc[6];
	const char		*run;

	front_text_add(t, "\"", 1);
	for (run = s; *s != '\0'; s++) {
		unsigned char	c = *s;

		if (c >= 0x20 && c != '"' && c != '\\' && c != '/')
			continue;
		front_text_add(t, run, s - run);
		run = s + 1;
		esc[0] = '\\';
		switch (c) {
		case '\b': esc[1] = 'b'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		case '\f': esc[1] = 'f'; break;
		case '"': case '\\': case '/': esc[1] = c; break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 0xf];
			front_text_add(t, esc, 6);
			continue;
		}
		front_text_add(t, esc, 2);
	}
	front_text_add(t, run, s - run);
	front_text_add(t, "\"", 1);
}

/* Append ,"key": (no comma first when first) and a value printed. */
static void
front_text_member(struct front_text *t, const char *key, int first,
    struct json_object *v)
{
	const char	*s;
	size_t		 len;

	if (!first)
		front_text_add(t, ",", 1);
	front_text_str(t, key);
	front_text_add(t, ":", 1);
	s = json_object_to_json_string_length(v, JSON_C_TO_STRING_PLAIN, &len);
	front_text_add(t, s, len);
}

/* Append ,"key":"value". */
static void
front_text_strmember(struct front_text *t, const char *key, const char *v)
{
	front_text_add(t, ",", 1);
	front_text_str(t, key);
	front_text_add(t, ":", 1);
	front_text_str(t, v);
}

/*
 * The status of front_status with usage kept, printed straight into one
 * buffer (the members and their order of the object front_status builds):
 * no tree of 13 members to build, print and free per request. 0 when
 * answered, -1 when it cannot go as a raw body.
 */
static int
front_status_text(struct ipc_peer *p, struct ipc_msg *m, struct ident *id,
    struct json_object *usage, int64_t age)
{
	static struct front_text	 t;
	struct json_object		*v;
	char				 num[32];
	int				 n;

	if (m->pm == NULL || (m->pm->flags & PM_RAW) == 0)
		return -1;
	t.len = 0;
	front_text_add(&t, "{\"user\":", 8);
	front_text_str(&t, id->user->name);
	front_text_strmember(&t, "role", id->user->admin ? "admin" : "user");
	front_text_strmember(&t, "auth", id->token ? "token" : "session");
	front_text_strmember(&t, "runtime",
	    front_conf->runtime == RUNTIME_HOST ? "host" : "docker");
	v = sandbox_backend_raw();
	front_text_member(&t, "backend", 0, v);
	json_object_put(v);
	v = mode_json(id);
	front_text_member(&t, "execution_mode", 0, v);
	json_object_put(v);
	front_text_strmember(&t, "permission",
	    session_permission(id->session));
	n = snprintf(num, sizeof(num), ",\"uid\":%lld",
	    (long long)id->user->uid);
	front_text_add(&t, num, n);
	v = sandbox_containment_raw();
	front_text_member(&t, "containment", 0, v);
	json_object_put(v);
	v = front_limits_raw();
	front_text_member(&t, "limits", 0, v);
	json_object_put(v);
	v = egress_status_json(id);
	front_text_member(&t, "egress", 0, v);
	json_object_put(v);
	v = hosts_status_json();
	front_text_member(&t, "host", 0, v);
	json_object_put(v);
	if (id->user->admin && (v = hosts_list_json()) != NULL) {
		front_text_member(&t, "hosts", 0, v);
		json_object_put(v);
	}
	front_text_member(&t, "usage", 0, usage);
	n = snprintf(num, sizeof(num), ",\"usage_age_ms\":%lld",
	    (long long)age);
	front_text_add(&t, num, n);
	front_text_add(&t, ",\"usage_reason\":null}", 21);
	/* A failure here (peer gone, queue full) is logged by ipc.c. */
	ipc_reply_body(p, m, t.buf, t.len, NULL, 0);
	return 0;
}

/*
 * Who the caller is and what state their session is in, with their limits
 * and usage (as sandboxd reported it at most a second ago; else it is
 * asked, and the reply waits for it, briefly) and what enforces them.
 */
static void
front_status(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct front_pending	*fp;
	struct json_object	*res, *usage, *v;
	int64_t			 age;

	if ((usage = sandbox_usage_kept(id->user->name, &age)) != NULL &&
	    front_status_text(p, m, id, usage, age) == 0)
		return;
	res = json_object_new_object();
	json_object_object_add(res, "user",
	    json_object_new_string(id->user->name));
	json_object_object_add(res, "role",
	    json_object_new_string(id->user->admin ? "admin" : "user"));
	json_object_object_add(res, "auth",
	    json_object_new_string(id->token ? "token" : "session"));
	json_object_object_add(res, "runtime", json_object_new_string(
	    front_conf->runtime == RUNTIME_HOST ? "host" : "docker"));
	json_object_object_add(res, "backend", sandbox_backend_raw());
	json_object_object_add(res, "execution_mode", mode_json(id));
	json_object_object_add(res, "permission",
	    json_object_new_string(session_permission(id->session)));
	json_object_object_add(res, "uid",
	    json_object_new_int64(id->user->uid));
	json_object_object_add(res, "containment", sandbox_containment_raw());
	json_object_object_add(res, "limits", front_limits_raw());
	json_object_object_add(res, "egress", egress_status_json(id));
	json_object_object_add(res, "host", hosts_status_json());
	/* An admin of a fleet: every host, up, stopped or lost. */
	if (id->user->admin && (v = hosts_list_json()) != NULL)
		json_object_object_add(res, "hosts", v);
	if (usage != NULL) {
		front_status_add_usage(res, usage, age, NULL);
		ipc_reply(p, m, res, NULL, 0);
		return;
	}
	fp = front_pending_new(p, m);
	fp->res = res;
	sandbox_usage_get(id->user->name, front_status_usage, fp);
}

/* {"permission": "..."} of the caller's session. */
static void
front_permission_get(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*res;

	res = json_object_new_object();
	json_object_object_add(res, "permission",
	    json_object_new_string(session_permission(id->session)));
	ipc_reply(p, m, res, NULL, 0);
}

/*
 * Set the permission profile of the caller's login session (tokens may
 * not: an agent does not widen its own sandbox).
 */
static void
front_permission_set(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	const char	*want;

	/* Required, a profile's name: the protocol table checked. */
	want = json_str(m->obj, "permission");
	/* The allowlist profiles are narrower: not restricted by this. */
	if (strcmp(want, "workspace-write+network") == 0 &&
	    front_conf->network_admin_only && !id->user->admin) {
		audit_append("permission_refused", id->user->name,
		    id->session->id, 0, "network is for admins only", NULL, 0);
		ipc_reply_error(p, m, ERR_FORBIDDEN, "the network profile is "
		    "reserved to admins on this host");
		return;
	}
	if (front_record_ok(p, m) == -1)
		return;
	if (session_set_permission(id->session, want) == -1) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE,
		    "cannot store the session");
		return;
	}
	log_info("session %.8s of %s: permission %s", id->session->id,
	    id->user->name, want);
	audit_append("permission_changed", id->user->name, id->session->id, 1,
	    want, NULL, 0);
	{
		struct json_object *d = json_object_new_object();

		json_object_object_add(d, "permission",
		    json_object_new_string(want));
		events_emit(id->session->id, id->user->name,
		    "permission_changed", d);
	}
	front_permission_get(p, m, id);
}

/*
 * GET /api/events: who the stream is for, and what it missed since
 * Last-Event-ID. frontd then delivers brokerd's events to the stream.
 */
static void
front_events(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*res;
	int64_t			 last = 0;
	int			 complete;

	json_int(m->obj, "last_event_id", &last);
	res = json_object_new_object();
	json_object_object_add(res, "user",
	    json_object_new_string(id->user->name));
	json_object_object_add(res, "session", id->session ?
	    json_object_new_string(id->session->id) : NULL);
	json_object_object_add(res, "missed", events_since(last,
	    id->session ? id->session->id : NULL, id->user->name, &complete));
	json_object_object_add(res, "complete",
	    json_object_new_boolean(complete));
	json_object_object_add(res, "last",
	    json_object_new_int64(events_last()));
	ipc_reply(p, m, res, NULL, 0);
}

/* Mint an agent token bound to the caller's login session. */
static void
front_token_mint(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*res, *d;
	struct token		*t;
	char			 bearer[TOKEN_BEARER_MAX];

	if (front_record_ok(p, m) == -1)
		return;
	/* In a fleet it names the user's home, for the balancer. */
	if ((t = token_create_home(id->user->name, id->session->id,
	    hosts_home(id->user), bearer, sizeof(bearer))) == NULL) {
		ipc_reply_error(p, m, ERR_UNAVAILABLE, "cannot store the token");
		return;
	}
	log_info("token %s minted for %s (session %.8s)", t->id, t->user,
	    id->session->id);
	d = json_object_new_object();
	json_object_object_add(d, "token", json_object_new_string(t->id));
	audit_append("token_minted", t->user, id->session->id, 1, NULL, d, 0);
	res = json_object_new_object();
	json_object_object_add(res, "token", json_object_new_string(bearer));
	json_object_object_add(res, "id", json_object_new_string(t->id));
	ipc_reply(p, m, res, NULL, 0);
}

/* The agent tokens bound to the caller's login session: ids, never secrets. */
static void
front_tokens(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*res, *arr, *o;
	struct token		*t;
	char			 when[32];

	arr = json_object_new_array();
	TAILQ_FOREACH(t, &id->session->tokens, session_entry) {
		o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_string(t->id));
		iso8601(t->created, when);
		json_object_object_add(o, "created",
		    json_object_new_string(when));
		json_object_array_add(arr, o);
	}
	res = json_object_new_object();
	json_object_object_add(res, "tokens", arr);
	ipc_reply(p, m, res, NULL, 0);
}

/*
 * Revoke one agent token of the caller's login session; an id that is not
 * one of this session's tokens is not_found, whoever holds it.
 */
static void
front_token_revoke(struct ipc_peer *p, struct ipc_msg *m, struct ident *id)
{
	struct json_object	*res, *d;
	struct token		*t;
	const char		*tid;

	tid = json_str(m->obj, "token");
	TAILQ_FOREACH(t, &id->session->tokens, session_entry)
		if (strcmp(t->id, tid) == 0)
			break;
	if (t == NULL) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such token");
		return;
	}
	if (front_record_ok(p, m) == -1)
		return;
	if (token_revoke(tid) == -1) {
		ipc_reply_error(p, m, ERR_NOT_FOUND, "no such token");
		return;
	}
	log_info("token %s revoked by %s (session %.8s)", tid, id->user->name,
	    id->session->id);
	d = json_object_new_object();
	json_object_object_add(d, "token", json_object_new_string(tid));
	audit_append("token_revoked", id->user->name, id->session->id, 1, NULL,
	    d, 0);
	res = json_object_new_object();
	json_object_object_add(res, "id", json_object_new_string(tid));
	json_object_object_add(res, "revoked", json_object_new_boolean(1));
	ipc_reply(p, m, res, NULL, 0);
}

/* A frontd connection closed: no answer may reach it any more. */
static void
front_closed(struct ipc_peer *p)
{
	struct front_pending	*fp;
	size_t			 i;

	for (i = 0; i < FRONT_SEEN_MAX; i++)
		if (front_seen[i].peer == p)
			front_seen[i].peer = NULL;
	TAILQ_FOREACH(fp, &front_pendings, entry)
		if (fp->peer == p)
			fp->peer = NULL;
	sandbox_front_gone(p);
	spawn_front_gone(p);
	files_front_gone(p);
	recording_peer_closed(p);
}

/* frontd's version and start time; shown, never trusted for anything. */
static void
front_info(struct ipc_peer *p, struct ipc_msg *m)
{
	struct front_seen	*f = &front_seen[0];
	const char		*v;
	int64_t			 started = 0;
	size_t			 i;

	v = json_str(m->obj, "version");
	json_int(m->obj, "started", &started);
	/* Its own slot, else a free one, else the one told longest ago. */
	for (i = 0; i < FRONT_SEEN_MAX; i++) {
		if (front_seen[i].peer == p) {
			f = &front_seen[i];
			break;
		}
		if (f->peer != NULL && (front_seen[i].peer == NULL ||
		    front_seen[i].order < f->order))
			f = &front_seen[i];
	}
	f->peer = p;
	log_escape(v != NULL ? v : "?", (size_t)-1, f->version,
	    sizeof(f->version));
	f->started = started;
	f->order = ++front_seen_order;
}

/*
 * frontd resized a terminal: one more for its terminal_exited record. A
 * count as frontd reports it; it decides nothing.
 */
static void
front_resized(struct ipc_peer *p, struct ipc_msg *m)
{
	spawn_term_resized(json_str(m->obj, "terminal"));
}

/* frontd as hgctl status shows it. */
struct json_object *
front_info_json(void)
{
	struct json_object	*o;
	struct front_seen	*f = NULL;
	size_t			 i;

	for (i = 0; i < FRONT_SEEN_MAX; i++)
		if (front_seen[i].peer != NULL && (f == NULL ||
		    front_seen[i].order > f->order))
			f = &front_seen[i];
	o = json_object_new_object();
	json_object_object_add(o, "up", json_object_new_boolean(f != NULL));
	if (f == NULL) {
		json_object_object_add(o, "reason",
		    json_object_new_string("frontd is not connected"));
		return o;
	}
	json_object_object_add(o, "version",
	    json_object_new_string(f->version));
	json_object_object_add(o, "started", f->started > 0 ?
	    json_object_new_int64(f->started) : NULL);
	return o;
}

/*
 * The handler map of frontd's socket: every op through front_dispatch,
 * then the one-way messages. An op whose need of an identity is not the
 * protocol table's is a fatal bug.
 */
const struct ipc_handler *
front_handler_map(void)
{
	const struct front_op	*op;
	const struct proto_msg	*pm;
	struct ipc_handler	*map;
	size_t			 n = 0, i;

	for (op = front_ops; op->type != NULL; op++)
		n++;
	if ((map = calloc(n + sizeof(front_events_map) /
	    sizeof(front_events_map[0]), sizeof(*map))) == NULL)
		fatal("%s", __func__);
	for (i = 0, op = front_ops; op->type != NULL; op++, i++) {
		pm = proto_find(proto_msgs, op->type, ROLE_FRONTD,
		    ROLE_BROKERD);
		if (pm == NULL || ((pm->flags & PM_IDENT) != 0) !=
		    (op->need != NEED_NONE))
			fatalx("protocol: \"%s\" needs an identity in one of "
			    "the protocol table and front_ops only", op->type);
		map[i].type = op->type;
		map[i].fn = front_dispatch;
	}
	memcpy(map + n, front_events_map, sizeof(front_events_map));
	return map;
}

/* Serve frontd's socket. */
void
front_init(struct event_base *base, struct config *conf, uid_t front_uid,
    int fd)
{
	front_conf = conf;
	spawn_init(conf);
	files_init(conf);
	admin_init(conf);
	front_rl_user = rl_new("login_user", conf->login_rate,
	    conf->login_burst, 10000);
	front_rl_addr = rl_new("login_addr", conf->login_rate,
	    conf->login_burst, 10000);
	events_init(ipc_server_new(base, fd, ROLE_BROKERD, ROLE_FRONTD,
	    &front_uid, 1, front_handler_map(), &front_cbs, NULL));
}
