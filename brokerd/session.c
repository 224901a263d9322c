/*
 * Login sessions and bearer tokens, kept in STATE_DIR/sessions.json (mode
 * 0600, rewritten atomically after each change):
 *   {"version": 1,
 *    "sessions": [{"id", "token_hash", "csrf_hash", "user", "created",
 *                  "last_seen", "expires"}],
 *    "tokens": [{"id", "hash", "user", "session_id", "created"}]}
 * Only SHA-256 hashes of the cookie, CSRF and bearer values are stored. A
 * token bound to a session dies with it; a standalone one has session_id "".
 * Lookups scan the lists linearly, which is fine for the few hundred
 * sessions a host sees; a hash table keyed by the secret's hash is the next
 * step if that changes.
 */

#include <sys/random.h>
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd.h"

#define SESSION_FILE		"sessions.json"
#define SESSION_FILE_MAX	(16 * 1024 * 1024)
#define SESSION_VERSION		1
#define SESSION_SECRET_BYTES	32	/* cookie, CSRF and bearer entropy */
#define SESSION_ID_BYTES	16
#define TOKEN_ID_BYTES		8
#define TOKEN_PREFIX		"hgt_"

TAILQ_HEAD(session_list, session);
TAILQ_HEAD(token_list, token);
static struct session_list	 sessions = TAILQ_HEAD_INITIALIZER(sessions);
static struct token_list	 tokens = TAILQ_HEAD_INITIALIZER(tokens);
static char			*session_path;
static int			 session_lifetime;
static int			 session_dirty;	/* last_seen not yet written */

/* The wall clock in seconds. */
static int64_t
session_now(void)
{
	return now_wall_ms() / 1000;
}

/* Fill out with nbytes random bytes as lowercase hex; -1 on failure. */
static int
session_rand_hex(char *out, size_t nbytes)
{
	unsigned char	buf[SESSION_ID_BYTES];
	size_t		i;

	if (nbytes > sizeof buf ||
	    getrandom(buf, nbytes, 0) != (ssize_t)nbytes) {
		log_warn("%s: getrandom", __func__);
		return -1;
	}
	for (i = 0; i < nbytes; i++)
		snprintf(out + 2 * i, 3, "%02x", buf[i]);
	return 0;
}

/* Whether a user name fits the stores' fields. */
static int
session_user_ok(const char *user)
{
	return user != NULL && user[0] != '\0' &&
	    strlen(user) < USER_NAME_MAX;
}

/* Free a token that is in no list. */
static void
token_free(struct token *t)
{
	free(t->user);
	free(t);
}

static void	(*session_gone_cb)(struct session *);

/* Unlink and free a session and its tokens, without writing the store. */
static void
session_remove(struct session *s)
{
	struct token	*t, *next;

	if (session_gone_cb != NULL)
		session_gone_cb(s);
	for (t = TAILQ_FIRST(&tokens); t != NULL; t = next) {
		next = TAILQ_NEXT(t, entry);
		if (strcmp(t->session_id, s->id) == 0) {
			TAILQ_REMOVE(&tokens, t, entry);
			token_free(t);
		}
	}
	TAILQ_REMOVE(&sessions, s, entry);
	free(s->user);
	free(s);
}

/* Forget every session and token in memory. */
static void
session_clear(void)
{
	struct token	*t;

	while (!TAILQ_EMPTY(&sessions))
		session_remove(TAILQ_FIRST(&sessions));
	while ((t = TAILQ_FIRST(&tokens)) != NULL) {
		TAILQ_REMOVE(&tokens, t, entry);
		token_free(t);
	}
}

/* The session with this id, expired or not, or NULL. */
static struct session *
session_find(const char *id)
{
	struct session	*s;

	if (id == NULL)
		return NULL;
	TAILQ_FOREACH(s, &sessions, entry) {
		if (strcmp(s->id, id) == 0)
			return s;
	}
	return NULL;
}

/* Remove expired sessions (and their tokens); the number removed. */
static int
session_expire(int64_t now)
{
	struct session	*s, *next;
	int		 n = 0;

	for (s = TAILQ_FIRST(&sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (s->expires <= now) {
			log_debug("session %.8s of %s expired", s->id, s->user);
			session_remove(s);
			n++;
		}
	}
	return n;
}

/* Write the store now; -1 (logged) when it cannot be written. */
int
session_flush(void)
{
	struct json_object	*root, *arr, *o;
	struct session		*s;
	struct token		*t;
	const char		*text;
	size_t			 len;
	int			 rc;

	if (session_path == NULL)
		return -1;
	root = json_object_new_object();
	json_object_object_add(root, "version",
	    json_object_new_int(SESSION_VERSION));

	arr = json_object_new_array();
	json_object_object_add(root, "sessions", arr);
	TAILQ_FOREACH(s, &sessions, entry) {
		o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_string(s->id));
		json_object_object_add(o, "token_hash",
		    json_object_new_string(s->token_hash));
		json_object_object_add(o, "csrf_hash",
		    json_object_new_string(s->csrf_hash));
		json_object_object_add(o, "user", json_object_new_string(s->user));
		json_object_object_add(o, "created",
		    json_object_new_int64(s->created));
		json_object_object_add(o, "last_seen",
		    json_object_new_int64(s->last_seen));
		json_object_object_add(o, "expires",
		    json_object_new_int64(s->expires));
		if (s->permission[0] != '\0')
			json_object_object_add(o, "permission",
			    json_object_new_string(s->permission));
		/* A grant is stored with its absolute deadline. */
		if (s->direct_until > 0)
			json_object_object_add(o, "direct_until",
			    json_object_new_int64(s->direct_until));
		json_object_array_add(arr, o);
	}

	arr = json_object_new_array();
	json_object_object_add(root, "tokens", arr);
	TAILQ_FOREACH(t, &tokens, entry) {
		o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_string(t->id));
		json_object_object_add(o, "hash", json_object_new_string(t->hash));
		json_object_object_add(o, "user", json_object_new_string(t->user));
		json_object_object_add(o, "session_id",
		    json_object_new_string(t->session_id));
		json_object_object_add(o, "created",
		    json_object_new_int64(t->created));
		json_object_array_add(arr, o);
	}

	text = json_object_to_json_string_length(root,
	    JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	rc = file_write_atomic(session_path, text, len, 0600);
	if (rc == -1)
		log_warn("%s", session_path);
	else
		session_dirty = 0;
	json_object_put(root);
	return rc;
}

/* Parse one entry of "sessions"; fills err (without the file name). */
static struct session *
session_parse_one(struct json_object *o, size_t i, char *err, size_t errsz)
{
	struct session	*s;
	const char	*id, *token_hash, *csrf_hash, *user;
	int64_t		 created, last_seen, expires;

	id = json_str(o, "id");
	token_hash = json_str(o, "token_hash");
	csrf_hash = json_str(o, "csrf_hash");
	user = json_str(o, "user");
	if (!str_is_hex(id, 2 * SESSION_ID_BYTES) ||
	    !str_is_hex(token_hash, 64) || !str_is_hex(csrf_hash, 64) ||
	    !session_user_ok(user) ||
	    json_int(o, "created", &created) == -1 ||
	    json_int(o, "last_seen", &last_seen) == -1 ||
	    json_int(o, "expires", &expires) == -1) {
		snprintf(err, errsz, "session %zu: missing or invalid field", i);
		return NULL;
	}
	if (session_find(id) != NULL) {
		snprintf(err, errsz, "session %s: listed twice", id);
		return NULL;
	}
	if ((s = calloc(1, sizeof *s)) == NULL ||
	    (s->user = strdup(user)) == NULL)
		fatal("%s", __func__);
	snprintf(s->id, sizeof s->id, "%s", id);
	snprintf(s->token_hash, sizeof s->token_hash, "%s", token_hash);
	snprintf(s->csrf_hash, sizeof s->csrf_hash, "%s", csrf_hash);
	s->created = created;
	s->last_seen = last_seen;
	s->expires = expires;
	if (json_int(o, "direct_until", &s->direct_until) == -1 ||
	    s->direct_until < 0)
		s->direct_until = 0;
	/* An unknown profile falls back to the default, never to more. */
	if (json_str(o, "permission") != NULL &&
	    session_permission_valid(json_str(o, "permission")))
		snprintf(s->permission, sizeof s->permission, "%s",
		    json_str(o, "permission"));
	return s;
}

/* Parse one entry of "tokens"; fills err (without the file name). */
static struct token *
token_parse_one(struct json_object *o, size_t i, char *err, size_t errsz)
{
	struct token	*t;
	const char	*id, *hash, *user, *sid;
	int64_t		 created;

	id = json_str(o, "id");
	hash = json_str(o, "hash");
	user = json_str(o, "user");
	sid = json_str(o, "session_id");
	if (!str_is_hex(id, 2 * TOKEN_ID_BYTES) ||
	    !str_is_hex(hash, 64) || !session_user_ok(user) ||
	    sid == NULL ||
	    (sid[0] != '\0' && !str_is_hex(sid, 2 * SESSION_ID_BYTES)) ||
	    json_int(o, "created", &created) == -1) {
		snprintf(err, errsz, "token %zu: missing or invalid field", i);
		return NULL;
	}
	TAILQ_FOREACH(t, &tokens, entry) {
		if (strcmp(t->id, id) == 0) {
			snprintf(err, errsz, "token %s: listed twice", id);
			return NULL;
		}
	}
	if ((t = calloc(1, sizeof *t)) == NULL ||
	    (t->user = strdup(user)) == NULL)
		fatal("%s", __func__);
	snprintf(t->id, sizeof t->id, "%s", id);
	snprintf(t->hash, sizeof t->hash, "%s", hash);
	snprintf(t->session_id, sizeof t->session_id, "%s", sid);
	t->created = created;
	return t;
}

/* The array called key in root, or NULL with err filled. */
static struct json_object *
session_parse_array(struct json_object *root, const char *key, char *err,
    size_t errsz)
{
	struct json_object	*arr;

	if (!json_object_object_get_ex(root, key, &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		snprintf(err, errsz, "%s is not an array", key);
		return NULL;
	}
	return arr;
}

/* Load sessions and tokens from text; fills err (without the file name). */
static int
session_parse(const char *text, char *err, size_t errsz)
{
	struct json_object	*root, *sarr, *tarr;
	struct session		*s;
	struct token		*t;
	enum json_tokener_error	 jerr;
	int64_t			 version;
	size_t			 i;
	int			 rc = -1;

	if ((root = json_tokener_parse_verbose(text, &jerr)) == NULL) {
		snprintf(err, errsz, "invalid JSON: %s",
		    jerr == json_tokener_continue ? "truncated" :
		    json_tokener_error_desc(jerr));
		return -1;
	}
	if (!json_object_is_type(root, json_type_object)) {
		snprintf(err, errsz, "not a JSON object");
		goto out;
	}
	if (json_int(root, "version", &version) == -1 ||
	    version != SESSION_VERSION) {
		snprintf(err, errsz, "version is not %d", SESSION_VERSION);
		goto out;
	}
	if ((sarr = session_parse_array(root, "sessions", err, errsz)) == NULL ||
	    (tarr = session_parse_array(root, "tokens", err, errsz)) == NULL)
		goto out;
	for (i = 0; i < json_object_array_length(sarr); i++) {
		s = session_parse_one(json_object_array_get_idx(sarr, i), i, err,
		    errsz);
		if (s == NULL)
			goto out;
		TAILQ_INSERT_TAIL(&sessions, s, entry);
	}
	for (i = 0; i < json_object_array_length(tarr); i++) {
		t = token_parse_one(json_object_array_get_idx(tarr, i), i, err,
		    errsz);
		if (t == NULL)
			goto out;
		if (t->session_id[0] != '\0' &&
		    session_find(t->session_id) == NULL) {
			snprintf(err, errsz, "token %s: no session %s", t->id,
			    t->session_id);
			token_free(t);
			goto out;
		}
		TAILQ_INSERT_TAIL(&tokens, t, entry);
	}
	rc = 0;
out:
	json_object_put(root);
	if (rc == -1)
		session_clear();
	return rc;
}

/* Read the store if present, fixing a loose mode; fills err. */
static int
session_load(char *err, size_t errsz)
{
	char	*text, why[256];
	int	 absent, rc;

	if ((text = file_read_private(session_path, SESSION_FILE_MAX, &absent,
	    err, errsz)) == NULL)
		return absent ? 0 : -1;
	rc = session_parse(text, why, sizeof why);
	free(text);
	if (rc == -1)
		snprintf(err, errsz, "%s: %s", session_path, why);
	return rc;
}

/* Load STATE_DIR/sessions.json and drop the sessions that expired. */
int
session_init(const char *state_dir, int lifetime, char *err, size_t errsz)
{
	if (lifetime <= 0) {
		snprintf(err, errsz, "session lifetime must be positive");
		return -1;
	}
	session_clear();
	free(session_path);
	session_path = path_join(state_dir, SESSION_FILE);
	session_lifetime = lifetime;
	session_dirty = 0;

	if (session_load(err, errsz) == -1)
		return -1;
	if (session_expire(session_now()) > 0 && session_flush() == -1) {
		snprintf(err, errsz, "%s: cannot write: %s", session_path,
		    strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Start a login session for user: writes the cookie value and the CSRF
 * token (each at least 45 bytes) and stores only their hashes. NULL when
 * randomness or the store fails.
 */
struct session *
session_create(const char *user, char *cookie, size_t cookiesz, char *csrf,
    size_t csrfsz)
{
	struct session	*s;

	if (!session_user_ok(user))
		return NULL;
	if ((s = calloc(1, sizeof *s)) == NULL)
		fatal("%s", __func__);
	if (rand_token(cookie, cookiesz, SESSION_SECRET_BYTES) == -1 ||
	    rand_token(csrf, csrfsz, SESSION_SECRET_BYTES) == -1 ||
	    session_rand_hex(s->id, SESSION_ID_BYTES) == -1) {
		log_warn("%s: random token", __func__);
		free(s);
		return NULL;
	}
	if ((s->user = strdup(user)) == NULL)
		fatal("%s", __func__);
	sha256_hex(cookie, strlen(cookie), s->token_hash);
	sha256_hex(csrf, strlen(csrf), s->csrf_hash);
	s->created = s->last_seen = session_now();
	s->expires = s->created + session_lifetime;
	TAILQ_INSERT_TAIL(&sessions, s, entry);
	if (session_flush() == -1) {
		session_remove(s);
		return NULL;
	}
	log_info("session %.8s of %s created", s->id, s->user);
	return s;
}

/* The live session for a cookie value, or NULL; touches last_seen. */
struct session *
session_lookup(const char *cookie)
{
	struct session	*s;
	char		 hash[65];
	int64_t		 now;

	if (cookie == NULL)
		return NULL;
	sha256_hex(cookie, strlen(cookie), hash);
	TAILQ_FOREACH(s, &sessions, entry) {
		if (str_ct_equal(s->token_hash, hash))
			break;
	}
	if (s == NULL)
		return NULL;
	now = session_now();
	if (s->expires <= now) {
		session_destroy(s);
		return NULL;
	}
	if (s->last_seen != now) {
		s->last_seen = now;
		session_dirty = 1;	/* written by session_sweep or flush */
	}
	return s;
}

/* The live session with this public id, or NULL. */
struct session *
session_by_id(const char *id)
{
	struct session	*s;

	if ((s = session_find(id)) == NULL)
		return NULL;
	if (s->expires <= session_now()) {
		session_destroy(s);
		return NULL;
	}
	return s;
}

/* Whether csrf is the session's CSRF token, compared in constant time. */
int
session_csrf_ok(struct session *s, const char *csrf)
{
	char	hash[65];

	if (s == NULL || csrf == NULL)
		return 0;
	sha256_hex(csrf, strlen(csrf), hash);
	return str_ct_equal(s->csrf_hash, hash);
}

/* End a session and its tokens, and write the store. */
void
session_destroy(struct session *s)
{
	log_info("session %.8s of %s ended", s->id, s->user);
	session_remove(s);
	session_flush();
}

/* End every session and token of user, and write the store. */
void
session_drop_user(const char *user)
{
	struct session	*s, *snext;
	struct token	*t, *tnext;
	int		 n = 0;

	if (user == NULL)
		return;
	for (s = TAILQ_FIRST(&sessions); s != NULL; s = snext) {
		snext = TAILQ_NEXT(s, entry);
		if (strcmp(s->user, user) == 0) {
			session_remove(s);
			n++;
		}
	}
	for (t = TAILQ_FIRST(&tokens); t != NULL; t = tnext) {
		tnext = TAILQ_NEXT(t, entry);
		if (strcmp(t->user, user) == 0) {
			TAILQ_REMOVE(&tokens, t, entry);
			token_free(t);
			n++;
		}
	}
	if (n > 0) {
		log_info("dropped %d sessions and tokens of %s", n, user);
		session_flush();
	}
}

/* Add an ISO 8601 time to o under key. */
static void
session_add_time(struct json_object *o, const char *key, int64_t secs)
{
	char	when[32];

	iso8601(secs, when);
	json_object_object_add(o, key, json_object_new_string(when));
}

/* The live sessions as [{"id", "user", "created", "last_seen", "expires"}]. */
struct json_object *
session_list(void)
{
	struct json_object	*arr, *o;
	struct session		*s;
	int64_t			 now = session_now();

	arr = json_object_new_array();
	TAILQ_FOREACH(s, &sessions, entry) {
		if (s->expires <= now)
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_string(s->id));
		json_object_object_add(o, "user", json_object_new_string(s->user));
		session_add_time(o, "created", s->created);
		session_add_time(o, "last_seen", s->last_seen);
		session_add_time(o, "expires", s->expires);
		json_object_array_add(arr, o);
	}
	return arr;
}

/*
 * Mint a bearer token for user, bound to session_id (which must be a live
 * session of that user) or standalone when session_id is NULL or "".
 * Writes "hgt_..." into bearer (at least 49 bytes); stores only its hash.
 */
struct token *
token_create(const char *user, const char *session_id, char *bearer,
    size_t bearersz)
{
	struct session	*s = NULL;
	struct token	*t;
	size_t		 plen = strlen(TOKEN_PREFIX);

	if (!session_user_ok(user) || bearer == NULL || bearersz <= plen)
		return NULL;
	if (session_id != NULL && session_id[0] != '\0') {
		if ((s = session_by_id(session_id)) == NULL ||
		    strcmp(s->user, user) != 0)
			return NULL;
	}
	if ((t = calloc(1, sizeof *t)) == NULL)
		fatal("%s", __func__);
	memcpy(bearer, TOKEN_PREFIX, plen);
	if (rand_token(bearer + plen, bearersz - plen,
	    SESSION_SECRET_BYTES) == -1 ||
	    session_rand_hex(t->id, TOKEN_ID_BYTES) == -1) {
		log_warn("%s: random token", __func__);
		bearer[0] = '\0';
		free(t);
		return NULL;
	}
	if ((t->user = strdup(user)) == NULL)
		fatal("%s", __func__);
	sha256_hex(bearer, strlen(bearer), t->hash);
	if (s != NULL)
		snprintf(t->session_id, sizeof t->session_id, "%s", s->id);
	t->created = session_now();
	TAILQ_INSERT_TAIL(&tokens, t, entry);
	if (session_flush() == -1) {
		TAILQ_REMOVE(&tokens, t, entry);
		token_free(t);
		return NULL;
	}
	log_info("token %s of %s created%s", t->id, t->user,
	    s != NULL ? " for a session" : "");
	return t;
}

/* The token for a bearer value, or NULL (also when its session is gone). */
struct token *
token_lookup(const char *bearer)
{
	struct token	*t;
	char		 hash[65];

	if (bearer == NULL ||
	    strncmp(bearer, TOKEN_PREFIX, strlen(TOKEN_PREFIX)) != 0)
		return NULL;
	sha256_hex(bearer, strlen(bearer), hash);
	TAILQ_FOREACH(t, &tokens, entry) {
		if (str_ct_equal(t->hash, hash))
			break;
	}
	if (t == NULL)
		return NULL;
	/* An expired session is destroyed here, and t with it. */
	if (t->session_id[0] != '\0' && session_by_id(t->session_id) == NULL)
		return NULL;
	return t;
}

/* Revoke the token with this public id: 0, or -1 when there is none. */
int
token_revoke(const char *id)
{
	struct token	*t;

	if (id == NULL)
		return -1;
	TAILQ_FOREACH(t, &tokens, entry) {
		if (strcmp(t->id, id) == 0)
			break;
	}
	if (t == NULL)
		return -1;
	log_info("token %s of %s revoked", t->id, t->user);
	TAILQ_REMOVE(&tokens, t, entry);
	token_free(t);
	session_flush();
	return 0;
}

/* The live tokens as [{"id", "user", "session_id" (or null), "created"}]. */
struct json_object *
token_list(void)
{
	struct json_object	*arr, *o;
	struct session		*s;
	struct token		*t;
	int64_t			 now = session_now();

	arr = json_object_new_array();
	TAILQ_FOREACH(t, &tokens, entry) {
		s = NULL;
		if (t->session_id[0] != '\0' &&
		    ((s = session_find(t->session_id)) == NULL ||
		    s->expires <= now))
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_string(t->id));
		json_object_object_add(o, "user", json_object_new_string(t->user));
		json_object_object_add(o, "session_id", s == NULL ? NULL :
		    json_object_new_string(s->id));
		session_add_time(o, "created", t->created);
		json_object_array_add(arr, o);
	}
	return arr;
}

/* Expire old sessions; write the store if anything changed. */
void
session_sweep(void)
{
	if (session_expire(session_now()) > 0 || session_dirty)
		session_flush();
}

/* Whether name is a permission profile. */
int
session_permission_valid(const char *name)
{
	return strcmp(name, "read-only") == 0 ||
	    strcmp(name, "workspace-write") == 0 ||
	    strcmp(name, "workspace-write+network") == 0;
}

/* Set a session's permission profile and store it. */
int
session_set_permission(struct session *s, const char *name)
{
	char	old[sizeof s->permission];

	if (!session_permission_valid(name))
		return -1;
	memcpy(old, s->permission, sizeof old);
	snprintf(s->permission, sizeof s->permission, "%s", name);
	if (session_flush() == -1) {
		memcpy(s->permission, old, sizeof old);
		return -1;
	}
	return 0;
}

/* The permission profile of a session (the default without one). */
const char *
session_permission(struct session *s)
{
	if (s == NULL || s->permission[0] == '\0')
		return "workspace-write";
	return s->permission;
}

/* Register the hook called before a session is freed. */
void
session_on_remove(void (*cb)(struct session *))
{
	session_gone_cb = cb;
}

struct session *
session_first(void)
{
	return TAILQ_FIRST(&sessions);
}

struct session *
session_next(struct session *s)
{
	return TAILQ_NEXT(s, entry);
}
