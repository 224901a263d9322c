/*
 * Login sessions and bearer tokens. They are kept in the store (store.c:
 * STATE_DIR/store.db, or a fleet's PostgreSQL) and, all of them, in
 * memory, where hash tables find a session by its cookie's hash or its id
 * and a token by its bearer's hash or its id in constant time. On one host
 * the copy in memory is always the store's: brokerd is the only process
 * that can open store.db (store_sqlite.c holds an exclusive lock) and each
 * change is written, in one transaction of its own rows, before it is made
 * in memory or right after
 * (a removal). Only SHA-256 hashes of the cookie, CSRF and bearer values
 * are stored. A token bound to a session dies with it; a standalone one
 * has session_id "".
 *
 * The former store, STATE_DIR/sessions.json ({"version": 1, "sessions":
 * [...], "tokens": [...]}), is read once: at the first start with it
 * present, its content goes into store.db in one transaction and the file
 * is renamed sessions.json.migrated.
 *
 * With a PostgreSQL store (store_pg.c) the rows are the fleet's: other
 * brokerds add and remove them too. A cookie, bearer or id that misses
 * here is looked up in the store before it is called unknown (a login on
 * another host a moment ago); a notification of a row another host changed
 * is applied by reading the row again (gone: removed here through the same
 * hook as a logout, without writing the store again); and after the link
 * to the store was lost, everything is reconciled with the store, since
 * notifications may have been missed. last_seen writes stay batched and
 * notify nobody.
 */

#include <sys/random.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brokerd.h"

#define SESSION_JSON		"sessions.json"
#define SESSION_JSON_DONE	"sessions.json.migrated"
#define SESSION_FILE_MAX	(16 * 1024 * 1024)
#define SESSION_VERSION		1
#define SESSION_SECRET_BYTES	32	/* cookie, CSRF and bearer entropy */
#define SESSION_ID_BYTES	16
#define TOKEN_ID_BYTES		8
#define SESSION_BATCH		256	/* rows per sweep transaction */

/*
 * A hash table of items that carry their key (a NUL-terminated array) and
 * their chain link at fixed offsets. The keys are SHA-256 hashes or random
 * ids, so a plain FNV-1a spreads them.
 */
struct hindex {
	void		**slots;
	size_t		  nslots;	/* 0 or a power of two */
	size_t		  count;
	size_t		  key_off;
	size_t		  link_off;
};

#define HINDEX(type, key, link) \
	{ NULL, 0, 0, offsetof(type, key), offsetof(type, link) }

TAILQ_HEAD(session_list, session);
static struct session_list	 sessions = TAILQ_HEAD_INITIALIZER(sessions);
static struct session_list	 dirty = TAILQ_HEAD_INITIALIZER(dirty);
static struct token_list	 tokens = TAILQ_HEAD_INITIALIZER(tokens);
static struct hindex		 by_cookie = HINDEX(struct session, token_hash,
				    by_cookie);
static struct hindex		 by_sid = HINDEX(struct session, id, by_id);
static struct hindex		 by_hash = HINDEX(struct token, hash, by_hash);
static struct hindex		 by_tid = HINDEX(struct token, id, by_id);
static int			 session_lifetime;
static int			 session_open;	/* session_init succeeded */

static void	(*session_gone_cb)(struct session *);
static void	(*session_change_cb)(struct session *, int64_t);
static void	(*session_egress_cb)(struct session *);
static int	  session_remote_depth;	/* applying another host's change */

static struct session *session_fetch(const char *key, int hashed);
static struct token *token_fetch(const char *key, int hashed);

/* The key of an item. */
static const char *
hindex_key(const struct hindex *h, const void *item)
{
	return (const char *)item + h->key_off;
}

/* Where an item's chain link is. */
static void **
hindex_link(const struct hindex *h, void *item)
{
	return (void **)((char *)item + h->link_off);
}

/* The slot of a key. */
static size_t
hindex_slot(const struct hindex *h, const char *key)
{
	uint64_t	v = 14695981039346656037ULL;

	for (; *key != '\0'; key++)
		v = (v ^ (unsigned char)*key) * 1099511628211ULL;
	return (size_t)(v & (h->nslots - 1));
}

/* Double the table (or make its first slots) and rehash. */
static void
hindex_grow(struct hindex *h)
{
	void	**old = h->slots, *it, *next;
	size_t	  i, n = h->nslots, slot;

	h->nslots = n == 0 ? 64 : 2 * n;
	if ((h->slots = calloc(h->nslots, sizeof(*h->slots))) == NULL)
		fatal("%s", __func__);
	for (i = 0; i < n; i++) {
		for (it = old[i]; it != NULL; it = next) {
			next = *hindex_link(h, it);
			slot = hindex_slot(h, hindex_key(h, it));
			*hindex_link(h, it) = h->slots[slot];
			h->slots[slot] = it;
		}
	}
	free(old);
}

/* Add an item (its key not yet in the table). */
static void
hindex_add(struct hindex *h, void *item)
{
	size_t	slot;

	if (h->count >= h->nslots)
		hindex_grow(h);
	slot = hindex_slot(h, hindex_key(h, item));
	*hindex_link(h, item) = h->slots[slot];
	h->slots[slot] = item;
	h->count++;
}

/*
 * The item with this key, or NULL. The final compare is in constant time:
 * which slot a key falls in tells nothing of a secret behind a hash.
 */
static void *
hindex_find(const struct hindex *h, const char *key)
{
	void	*it;

	if (h->nslots == 0 || key == NULL)
		return NULL;
	for (it = h->slots[hindex_slot(h, key)]; it != NULL;
	    it = *hindex_link(h, it)) {
		if (str_ct_equal(hindex_key(h, it), key))
			return it;
	}
	return NULL;
}

/* Take an item out of the table. */
static void
hindex_del(struct hindex *h, void *item)
{
	void	**pp;

	if (h->nslots == 0)
		return;
	for (pp = &h->slots[hindex_slot(h, hindex_key(h, item))]; *pp != NULL;
	    pp = hindex_link(h, *pp)) {
		if (*pp == item) {
			*pp = *hindex_link(h, item);
			h->count--;
			return;
		}
	}
}

/* Empty the table. */
static void
hindex_clear(struct hindex *h)
{
	free(h->slots);
	h->slots = NULL;
	h->nslots = h->count = 0;
}

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

/*
 * Whether a session or token may be for this user: a name a user may have
 * could hold (auth_name_valid), and nothing else, such as "../x".
 */
static int
session_user_ok(const char *user)
{
	return str_is_user_name(user);
}

/* Put a session in the lists and indexes. */
static void
session_link(struct session *s)
{
	TAILQ_INIT(&s->tokens);
	TAILQ_INSERT_TAIL(&sessions, s, entry);
	hindex_add(&by_cookie, s);
	hindex_add(&by_sid, s);
}

/* Put a token in the lists and indexes (s: its session, or NULL). */
static void
token_link(struct token *t, struct session *s)
{
	t->session = s;
	if (s != NULL)
		TAILQ_INSERT_TAIL(&s->tokens, t, session_entry);
	TAILQ_INSERT_TAIL(&tokens, t, entry);
	hindex_add(&by_hash, t);
	hindex_add(&by_tid, t);
}

/* Take a token out of memory and free it (not the store). */
static void
token_free(struct token *t)
{
	if (t->session != NULL)
		TAILQ_REMOVE(&t->session->tokens, t, session_entry);
	TAILQ_REMOVE(&tokens, t, entry);
	hindex_del(&by_hash, t);
	hindex_del(&by_tid, t);
	free(t->user);
	free(t);
}

/* Take a session and its tokens out of memory and free them. */
static void
session_free(struct session *s)
{
	while (!TAILQ_EMPTY(&s->tokens))
		token_free(TAILQ_FIRST(&s->tokens));
	if (s->dirty)
		TAILQ_REMOVE(&dirty, s, dirty_entry);
	TAILQ_REMOVE(&sessions, s, entry);
	hindex_del(&by_cookie, s);
	hindex_del(&by_sid, s);
	/* A direct grant's timers (mode.c) go with the session they hold. */
	if (s->ev_expiring != NULL)
		event_free(s->ev_expiring);
	if (s->ev_expire != NULL)
		event_free(s->ev_expire);
	json_object_put(s->egress_allow);
	free(s->user);
	free(s);
}

/*
 * End a session and its tokens: the hook, their rows (in the caller's
 * transaction, if any), then memory.
 */
static void
session_remove(struct session *s)
{
	struct token	*t;

	if (session_gone_cb != NULL)
		session_gone_cb(s);
	TAILQ_FOREACH(t, &s->tokens, session_entry)
		store->token_delete(t->id);
	store->session_delete(s->id);
	session_free(s);
}

/* Forget every session and token in memory. */
static void
session_clear(void)
{
	while (!TAILQ_EMPTY(&sessions))
		session_free(TAILQ_FIRST(&sessions));
	while (!TAILQ_EMPTY(&tokens))
		token_free(TAILQ_FIRST(&tokens));
	hindex_clear(&by_cookie);
	hindex_clear(&by_sid);
	hindex_clear(&by_hash);
	hindex_clear(&by_tid);
	session_open = 0;
}

/* The session with this id, expired or not, or NULL. */
static struct session *
session_find(const char *id)
{
	return hindex_find(&by_sid, id);
}

/*
 * A session's stored egress additions with what is not a valid pattern
 * left out (logged); NULL for none. Takes arr.
 */
static struct json_object *
session_egress_clean(const char *id, struct json_object *arr)
{
	struct json_object	*out, *v;
	size_t			 i;

	if (arr == NULL)
		return NULL;
	out = json_object_new_array();
	if (!json_object_is_type(arr, json_type_array))
		log_warnx("session %.8s: egress_allow is not an array; "
		    "ignored", id);
	else
		for (i = 0; i < json_object_array_length(arr); i++) {
			v = json_object_array_get_idx(arr, i);
			if (json_object_is_type(v, json_type_string) &&
			    egress_pattern_valid(json_object_get_string(v)))
				json_object_array_add(out,
				    json_object_get(v));
			else
				log_warnx("session %.8s: egress_allow item "
				    "%zu is not a domain pattern; left out",
				    id, i);
		}
	json_object_put(arr);
	if (json_object_array_length(out) == 0) {
		json_object_put(out);
		return NULL;
	}
	return out;
}

/*
 * Check a session read from a store (JSON or SQLite) and link it; on
 * refusal free it and fill err (without the file name).
 */
static int
session_add_loaded(struct session *s, char *err, size_t errsz)
{
	if (!str_is_hex(s->id, 2 * SESSION_ID_BYTES) ||
	    !str_is_hex(s->token_hash, 64) || !str_is_hex(s->csrf_hash, 64) ||
	    !session_user_ok(s->user)) {
		snprintf(err, errsz, "session %.32s: missing or invalid field",
		    str_is_hex(s->id, 2 * SESSION_ID_BYTES) ? s->id : "?");
		goto refused;
	}
	if (session_find(s->id) != NULL ||
	    hindex_find(&by_cookie, s->token_hash) != NULL) {
		snprintf(err, errsz, "session %s: listed twice", s->id);
		goto refused;
	}
	if (s->direct_until < 0)
		s->direct_until = 0;
	/* An unknown profile falls back to the default, never to more. */
	if (s->permission[0] != '\0' &&
	    !session_permission_valid(s->permission))
		s->permission[0] = '\0';
	/* So do egress additions that are not valid patterns: dropped. */
	s->egress_allow = session_egress_clean(s->id, s->egress_allow);
	session_link(s);
	return 0;
refused:
	json_object_put(s->egress_allow);
	free(s->user);
	free(s);
	return -1;
}

/* The same for a token: its session, if any, must be loaded already. */
static int
token_add_loaded(struct token *t, char *err, size_t errsz)
{
	struct session	*s = NULL;

	if (!str_is_hex(t->id, 2 * TOKEN_ID_BYTES) ||
	    !str_is_hex(t->hash, 64) || !session_user_ok(t->user) ||
	    (t->session_id[0] != '\0' &&
	    !str_is_hex(t->session_id, 2 * SESSION_ID_BYTES))) {
		snprintf(err, errsz, "token %.16s: missing or invalid field",
		    str_is_hex(t->id, 2 * TOKEN_ID_BYTES) ? t->id : "?");
		goto refused;
	}
	if (hindex_find(&by_tid, t->id) != NULL ||
	    hindex_find(&by_hash, t->hash) != NULL) {
		snprintf(err, errsz, "token %s: listed twice", t->id);
		goto refused;
	}
	if (t->session_id[0] != '\0' &&
	    (s = session_find(t->session_id)) == NULL) {
		snprintf(err, errsz, "token %s: no session %s", t->id,
		    t->session_id);
		goto refused;
	}
	token_link(t, s);
	return 0;
refused:
	free(t->user);
	free(t);
	return -1;
}

/* Parse one entry of "sessions" and add it; fills err. */
static int
session_parse_one(struct json_object *o, size_t i, char *err, size_t errsz)
{
	struct session	*s;
	const char	*id, *token_hash, *csrf_hash, *user, *perm;
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
		return -1;
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
	if (json_int(o, "direct_until", &s->direct_until) == -1)
		s->direct_until = 0;
	if ((perm = json_str(o, "permission")) != NULL &&
	    strlen(perm) < sizeof s->permission)
		snprintf(s->permission, sizeof s->permission, "%s", perm);
	return session_add_loaded(s, err, errsz);
}

/* Parse one entry of "tokens" and add it; fills err. */
static int
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
		return -1;
	}
	if ((t = calloc(1, sizeof *t)) == NULL ||
	    (t->user = strdup(user)) == NULL)
		fatal("%s", __func__);
	snprintf(t->id, sizeof t->id, "%s", id);
	snprintf(t->hash, sizeof t->hash, "%s", hash);
	snprintf(t->session_id, sizeof t->session_id, "%s", sid);
	t->created = created;
	return token_add_loaded(t, err, errsz);
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

/*
 * Add the sessions and tokens of a sessions.json text to memory; fills err
 * (without the file name). On failure memory may hold part of it: the
 * caller clears it.
 */
static int
session_parse(const char *text, char *err, size_t errsz)
{
	struct json_object	*root, *sarr, *tarr;
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
		if (session_parse_one(json_object_array_get_idx(sarr, i), i,
		    err, errsz) == -1)
			goto out;
	}
	for (i = 0; i < json_object_array_length(tarr); i++) {
		if (token_parse_one(json_object_array_get_idx(tarr, i), i,
		    err, errsz) == -1)
			goto out;
	}
	rc = 0;
out:
	json_object_put(root);
	return rc;
}

/*
 * Write the sessions and tokens after s0 and t0 (the last ones before the
 * JSON file was read; NULL: from the first) to the store, with the mark,
 * in one transaction.
 */
static int
session_store_new(struct session *s0, struct token *t0)
{
	struct session	*s;
	struct token	*t;

	if (store->begin() == -1)
		return -1;
	for (s = s0 != NULL ? TAILQ_NEXT(s0, entry) : TAILQ_FIRST(&sessions);
	    s != NULL; s = TAILQ_NEXT(s, entry))
		store->session_insert(s);
	for (t = t0 != NULL ? TAILQ_NEXT(t0, entry) : TAILQ_FIRST(&tokens);
	    t != NULL; t = TAILQ_NEXT(t, entry))
		store->token_insert(t);
	store->meta_set("json_migrated", session_now());
	return store->commit();
}

/*
 * Move STATE_DIR/sessions.json into the store, once: its content is
 * committed with a mark, then the file is renamed aside. A file found
 * again after the mark (a crash before the rename) is renamed unread.
 */
static int
session_migrate(const char *state_dir, char *err, size_t errsz)
{
	struct session	*s0;
	struct token	*t0;
	char		*json, *done, *text = NULL, why[256];
	size_t		 n, m;
	int		 absent, fd, rc = -1;

	json = path_join(state_dir, SESSION_JSON);
	done = path_join(state_dir, SESSION_JSON_DONE);
	if (store->meta_get("json_migrated") != 0) {
		if (access(json, F_OK) == 0) {
			log_warnx("%s: already in the store, renaming it %s "
			    "unread", json, SESSION_JSON_DONE);
			goto rename;
		}
		rc = 0;
		goto out;
	}
	if ((text = file_read_private(json, SESSION_FILE_MAX, &absent, err,
	    errsz)) == NULL) {
		rc = absent ? 0 : -1;
		goto out;
	}
	s0 = TAILQ_LAST(&sessions, session_list);
	t0 = TAILQ_LAST(&tokens, token_list);
	n = by_sid.count;
	m = by_tid.count;
	if (session_parse(text, why, sizeof why) == -1) {
		snprintf(err, errsz, "%s: %s (not migrated to %s)", json, why,
		    STORE_FILE);
		goto out;
	}
	if (session_store_new(s0, t0) == -1) {
		snprintf(err, errsz, "%s: cannot be written to the store",
		    json);
		goto out;
	}
	log_info("%s: %zu sessions and %zu tokens moved to %s", json,
	    by_sid.count - n, by_tid.count - m, STORE_FILE);
rename:
	if (rename(json, done) == -1)
		log_warn("rename %s to %s", json, done);
	else if ((fd = open(state_dir, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) != -1) {
		(void)fsync(fd);	/* the rename, durable */
		close(fd);
	}
	rc = 0;
out:
	free(text);
	free(json);
	free(done);
	return rc;
}

/* Remove every expired session (at start-up); the number removed. */
static int
session_expire_all(int64_t now)
{
	struct session	*s, *next;
	int		 n = 0;

	store->begin();
	for (s = TAILQ_FIRST(&sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (s->expires <= now) {
			log_debug("session %.8s of %s expired", s->id, s->user);
			session_remove(s);
			n++;
		}
	}
	if (store->commit() == -1)
		return -1;
	return n;
}

/*
 * token_add_loaded for a token read at start-up: one whose session is gone
 * (in a fleet, a token minted on one host as its session ended on another
 * may outlive it) is deleted, logged, not a reason to refuse to start.
 */
static int
token_add_stored(struct token *t, char *err, size_t errsz)
{
	if (t->session_id[0] != '\0' &&
	    str_is_hex(t->session_id, 2 * SESSION_ID_BYTES) &&
	    session_find(t->session_id) == NULL) {
		log_warnx("token %.16s: its session %.8s is gone; deleted",
		    t->id, t->session_id);
		store->token_delete(t->id);
		free(t->user);
		free(t);
		return 0;
	}
	return token_add_loaded(t, err, errsz);
}

/* Free a session row read from the store and never linked. */
static void
session_row_free(struct session *row)
{
	json_object_put(row->egress_allow);
	free(row->user);
	free(row);
}

/* Free a token row read from the store and never linked. */
static void
token_row_free(struct token *row)
{
	free(row->user);
	free(row);
}

/* The monotonic deadline of a stored grant (0: none or passed). */
static void
session_grant_mono(struct session *s)
{
	if (s->direct_until <= 0 || ttl_resume(s->direct_until,
	    now_wall_ms(), now_mono_ms(), &s->direct_mono) == -1)
		s->direct_mono = 0;
}

/*
 * Take in a session row another host wrote: checked and linked (it is
 * the caller's no more), its grant resumed; the session, or NULL.
 */
static struct session *
session_adopt(struct session *row)
{
	char	err[256];

	if (session_add_loaded(row, err, sizeof(err)) == -1) {
		log_warnx("the store: %s", err);
		return NULL;
	}
	session_grant_mono(row);
	if (row->direct_until > 0 && session_change_cb != NULL) {
		session_remote_depth++;
		session_change_cb(row, 0);
		session_remote_depth--;
	}
	return row;
}

/*
 * The session whose token_hash (hashed) or id is key, from the store when
 * this host has not seen it yet; NULL when the store has none either. A
 * store of one host has nothing memory lacks (and a session ended here
 * whose row could not be deleted must not come back): not asked.
 */
static struct session *
session_fetch(const char *key, int hashed)
{
	struct session	*row;

	if (store->one_host || !session_open || key == NULL ||
	    !str_is_hex(key, hashed ? 64 : 2 * SESSION_ID_BYTES))
		return NULL;
	if (store->session_get(key, hashed, &row) != 1)
		return NULL;
	log_debug("session %.8s of %s: read from the store", row->id,
	    row->user);
	return session_adopt(row);
}

/* Take in a token row another host wrote (its session fetched first). */
static struct token *
token_adopt(struct token *row)
{
	char	err[256];

	if (row->session_id[0] != '\0' &&
	    session_find(row->session_id) == NULL &&
	    session_fetch(row->session_id, 0) == NULL) {
		/* Its session is gone already: so is it. */
		token_row_free(row);
		return NULL;
	}
	if (token_add_loaded(row, err, sizeof(err)) == -1) {
		log_warnx("the store: %s", err);
		return NULL;
	}
	return row;
}

/*
 * The token whose hash (hashed) or id is key, from a fleet's store on a
 * miss (as session_fetch: a revoked token never comes back).
 */
static struct token *
token_fetch(const char *key, int hashed)
{
	struct token	*row;

	if (store->one_host || !session_open || key == NULL ||
	    !str_is_hex(key, hashed ? 64 : 2 * TOKEN_ID_BYTES))
		return NULL;
	if (store->token_get(key, hashed, &row) != 1)
		return NULL;
	log_debug("token %s of %s: read from the store", row->id, row->user);
	return token_adopt(row);
}

/*
 * A session another host ended: gone here too, through the same hook as
 * a logout (mode.c ends its grant and kills its direct spawns here), its
 * streams told, and nothing written to the store.
 */
static void
session_forget(struct session *s)
{
	session_remote_depth++;
	log_info("session %.8s of %s ended on another host", s->id, s->user);
	events_emit(s->id, s->user, "session_ended", NULL);
	if (session_gone_cb != NULL)
		session_gone_cb(s);
	session_free(s);
	session_remote_depth--;
}

/* A token another host revoked: gone here too, its streams ended. */
static void
token_forget(struct token *t)
{
	struct json_object	*d;

	log_info("token %s of %s revoked on another host", t->id, t->user);
	d = json_object_new_object();
	json_object_object_add(d, "id", json_object_new_string(t->id));
	events_emit_token(t->session_id[0] != '\0' ? t->session_id : NULL,
	    t->user, t->hash, "token_revoked", d);
	token_free(t);
}

/* The text of egress additions, for comparing them ("[]" for none). */
static const char *
session_egress_str(struct json_object *arr)
{
	return arr == NULL ? "[]" : json_object_to_json_string_ext(arr,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/*
 * Apply to s what another host changed in its row (row is freed): the
 * profile, the grant, the egress additions, the expiry; then the change
 * hook (mode.c arms or ends the grant here).
 */
static void
session_apply(struct session *s, struct session *row)
{
	int64_t	old = s->direct_until;
	int	changed = 0;

	if (row->permission[0] != '\0' &&
	    !session_permission_valid(row->permission))
		row->permission[0] = '\0';
	if (strcmp(s->permission, row->permission) != 0) {
		memcpy(s->permission, row->permission, sizeof(s->permission));
		changed = 1;
	}
	if (row->expires != s->expires) {
		s->expires = row->expires;
		changed = 1;
	}
	if (row->direct_until < 0)
		row->direct_until = 0;
	if (row->direct_until != s->direct_until) {
		s->direct_until = row->direct_until;
		session_grant_mono(s);
		changed = 1;
	}
	row->egress_allow = session_egress_clean(row->id, row->egress_allow);
	if (strcmp(session_egress_str(s->egress_allow),
	    session_egress_str(row->egress_allow)) != 0) {
		json_object_put(s->egress_allow);
		s->egress_allow = row->egress_allow;
		row->egress_allow = NULL;
		if (session_egress_cb != NULL)
			session_egress_cb(s);
		changed = 1;
	}
	session_row_free(row);
	if (!changed)
		return;
	log_info("session %.8s of %s: changed on another host", s->id,
	    s->user);
	if (session_change_cb != NULL) {
		session_remote_depth++;
		session_change_cb(s, old);
		session_remote_depth--;
	}
}

/* A notification of a sessions row (KEY: its id): read it again, apply. */
static void
session_notified(const char *id, int own)
{
	struct session	*s, *row;

	if (own || !session_open || !str_is_hex(id, 2 * SESSION_ID_BYTES))
		return;
	s = session_find(id);
	switch (store->session_get(id, 0, &row)) {
	case -1:
		return;		/* the link: reconciled when it is back */
	case 0:
		if (s != NULL)
			session_forget(s);
		return;
	}
	if (s == NULL)
		session_adopt(row);
	else
		session_apply(s, row);
}

/* A notification of a tokens row (KEY: its id). */
static void
token_notified(const char *id, int own)
{
	struct token	*t, *row;

	if (own || !session_open || !str_is_hex(id, 2 * TOKEN_ID_BYTES))
		return;
	t = hindex_find(&by_tid, id);
	switch (store->token_get(id, 0, &row)) {
	case -1:
		return;
	case 0:
		if (t != NULL)
			token_forget(t);
		return;
	}
	if (t == NULL)
		token_adopt(row);
	else
		token_row_free(row);	/* tokens do not change */
}

/* The rows of a reconciliation, as the store has them. */
static struct {
	struct session	**s;
	size_t		  ns, maxs;
	struct token	**t;
	size_t		  nt, maxt;
} session_rows;

/* Keep a session row for the reconciliation. */
static int
session_collect(struct session *row, char *err, size_t errsz)
{
	if (session_rows.ns == session_rows.maxs) {
		session_rows.maxs = session_rows.maxs ? 2 * session_rows.maxs :
		    256;
		if ((session_rows.s = reallocarray(session_rows.s,
		    session_rows.maxs, sizeof(*session_rows.s))) == NULL)
			fatal("%s", __func__);
	}
	session_rows.s[session_rows.ns++] = row;
	return 0;
}

/* Keep a token row for the reconciliation. */
static int
token_collect(struct token *row, char *err, size_t errsz)
{
	if (session_rows.nt == session_rows.maxt) {
		session_rows.maxt = session_rows.maxt ? 2 * session_rows.maxt :
		    256;
		if ((session_rows.t = reallocarray(session_rows.t,
		    session_rows.maxt, sizeof(*session_rows.t))) == NULL)
			fatal("%s", __func__);
	}
	session_rows.t[session_rows.nt++] = row;
	return 0;
}

/* Free the rows of a reconciliation not taken. */
static void
session_rows_free(void)
{
	size_t	i;

	for (i = 0; i < session_rows.ns; i++)
		if (session_rows.s[i] != NULL)
			session_row_free(session_rows.s[i]);
	for (i = 0; i < session_rows.nt; i++)
		if (session_rows.t[i] != NULL)
			token_row_free(session_rows.t[i]);
	free(session_rows.s);
	free(session_rows.t);
	memset(&session_rows, 0, sizeof(session_rows));
}

/*
 * After the link to the store is back: make memory the store's again.
 * What is gone there is removed here (as if notified), what is new is
 * added, what changed is applied. Notifications sent meanwhile are lost.
 */
void
session_reconcile(void)
{
	struct hindex	 sids = HINDEX(struct session, id, by_id);
	struct hindex	 tids = HINDEX(struct token, id, by_id);
	struct session	*s, *snext;
	struct token	*t, *tnext;
	char		 err[512];
	size_t		 i, before = by_sid.count, tbefore = by_tid.count;

	if (!session_open)
		return;
	if (store->load(session_collect, token_collect, err,
	    sizeof(err)) == -1) {
		log_warnx("reconciling sessions: %s", err);
		session_rows_free();
		return;
	}
	/* The rows' own by_id links index them until they are taken. */
	for (i = 0; i < session_rows.ns; i++)
		if (hindex_find(&sids, session_rows.s[i]->id) == NULL)
			hindex_add(&sids, session_rows.s[i]);
	for (i = 0; i < session_rows.nt; i++)
		if (hindex_find(&tids, session_rows.t[i]->id) == NULL)
			hindex_add(&tids, session_rows.t[i]);
	for (t = TAILQ_FIRST(&tokens); t != NULL; t = tnext) {
		tnext = TAILQ_NEXT(t, entry);
		if (hindex_find(&tids, t->id) == NULL)
			token_forget(t);
	}
	for (s = TAILQ_FIRST(&sessions); s != NULL; s = snext) {
		snext = TAILQ_NEXT(s, entry);
		if (hindex_find(&sids, s->id) == NULL) {
			/* Its tokens went above; tnext may not be reused. */
			session_forget(s);
		}
	}
	hindex_clear(&sids);
	hindex_clear(&tids);
	for (i = 0; i < session_rows.ns; i++) {
		s = session_rows.s[i];
		session_rows.s[i] = NULL;
		if ((snext = session_find(s->id)) != NULL)
			session_apply(snext, s);
		else
			session_adopt(s);
	}
	for (i = 0; i < session_rows.nt; i++) {
		t = session_rows.t[i];
		session_rows.t[i] = NULL;
		if (hindex_find(&by_tid, t->id) != NULL)
			token_row_free(t);
		else
			token_adopt(t);
	}
	session_rows_free();
	log_info("sessions reconciled with the store: %zu sessions and %zu "
	    "tokens (were %zu and %zu)", by_sid.count, by_tid.count, before,
	    tbefore);
}

/*
 * Forget every session and token of a user another host deleted: here
 * only (the store has it), through the hooks, as for session_forget.
 */
void
session_forget_user(const char *user)
{
	struct session	*s, *snext;
	struct token	*t, *tnext;

	if (user == NULL)
		return;
	for (s = TAILQ_FIRST(&sessions); s != NULL; s = snext) {
		snext = TAILQ_NEXT(s, entry);
		if (strcmp(s->user, user) == 0)
			session_forget(s);
	}
	for (t = TAILQ_FIRST(&tokens); t != NULL; t = tnext) {
		tnext = TAILQ_NEXT(t, entry);
		if (strcmp(t->user, user) == 0)
			token_forget(t);
	}
}

/*
 * Load the sessions and tokens of the open store (migrating sessions.json
 * into the embedded one the first time); drop the sessions that expired.
 * -1 with err when the store cannot be used: brokerd refuses to start.
 */
int
session_init(const char *state_dir, int lifetime, char *err, size_t errsz)
{
	session_clear();
	if (lifetime <= 0) {
		snprintf(err, errsz, "session lifetime must be positive");
		return -1;
	}
	session_lifetime = lifetime;
	if (store->load(session_add_loaded, token_add_stored, err,
	    errsz) == -1) {
		store->unusable(err, errsz);
		goto fail;
	}
	/* sessions.json predates store.db; hgctl store copy moves that. */
	if (store->one_host && session_migrate(state_dir, err,
	    errsz) == -1)
		goto fail;
	if (session_expire_all(session_now()) == -1) {
		snprintf(err, errsz, "%s: cannot remove expired sessions",
		    STORE_FILE);
		goto fail;
	}
	session_open = 1;
	if (store->on_notify != NULL) {
		store->on_notify("sessions", session_notified);
		store->on_notify("tokens", token_notified);
		store->on_reconnect(session_reconcile);
	}
	return 0;
fail:
	session_clear();
	return -1;
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

	if (!session_open || !session_user_ok(user))
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
	if (session_find(s->id) != NULL || store->session_insert(s) == -1) {
		free(s->user);
		free(s);
		return NULL;
	}
	session_link(s);
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
	if ((s = hindex_find(&by_cookie, hash)) == NULL &&
	    (s = session_fetch(hash, 1)) == NULL)
		return NULL;
	now = session_now();
	if (s->expires <= now) {
		session_destroy(s);
		return NULL;
	}
	if (s->last_seen != now) {
		s->last_seen = now;
		/* Written by session_sweep, in batches: not per request. */
		if (!s->dirty) {
			s->dirty = 1;
			TAILQ_INSERT_TAIL(&dirty, s, dirty_entry);
		}
	}
	return s;
}

/* The live session with this public id, or NULL. */
struct session *
session_by_id(const char *id)
{
	struct session	*s;

	if ((s = session_find(id)) == NULL &&
	    (s = session_fetch(id, 0)) == NULL)
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

/* End a session and its tokens, in memory and in the store. */
void
session_destroy(struct session *s)
{
	char	id[sizeof s->id];

	log_info("session %.8s of %s ended", s->id, s->user);
	snprintf(id, sizeof id, "%s", s->id);
	store->begin();
	session_remove(s);
	if (store->commit() == -1)
		log_warnx("session %.8s: its end could not be stored", id);
}

/* End every session and token of user, in one transaction. */
void
session_drop_user(const char *user)
{
	struct session	*s, *snext;
	struct token	*t, *tnext;
	int		 n = 0;

	if (user == NULL)
		return;
	store->begin();
	for (s = TAILQ_FIRST(&sessions); s != NULL; s = snext) {
		snext = TAILQ_NEXT(s, entry);
		if (strcmp(s->user, user) == 0) {
			session_remove(s);
			n++;
		}
	}
	/* Fetched again: session_remove freed the bound tokens. */
	for (t = TAILQ_FIRST(&tokens); t != NULL; t = tnext) {
		tnext = TAILQ_NEXT(t, entry);
		if (strcmp(t->user, user) == 0) {
			store->token_delete(t->id);
			token_free(t);
			n++;
		}
	}
	/* Rows of it this host has not seen yet (another's login). */
	store->drop_user(user);
	if (store->commit() == -1)
		log_warnx("sessions and tokens of %s: their end could not be "
		    "stored", user);
	if (n > 0)
		log_info("dropped %d sessions and tokens of %s", n, user);
}

/* Add an ISO 8601 time to o under key. */
static void
session_add_time(struct json_object *o, const char *key, int64_t secs)
{
	char	when[32];

	iso8601(secs, when);
	json_object_object_add(o, key, json_object_new_string(when));
}

/*
 * A page being chosen: a max-heap of at most max items by their key (an
 * id at key_off), holding the smallest keys offered so far.
 */
struct hpage {
	void		**items;
	size_t		  n, max;
	size_t		  key_off;
};

/* Compare the keys of two items of a page. */
static int
hpage_cmp(const struct hpage *pg, const void *a, const void *b)
{
	return strcmp((const char *)a + pg->key_off,
	    (const char *)b + pg->key_off);
}

/* Move the item at i down the heap of n items to its place. */
static void
hpage_down(struct hpage *pg, size_t i, size_t n)
{
	void	*tmp;
	size_t	 c;

	while ((c = 2 * i + 1) < n) {
		if (c + 1 < n && hpage_cmp(pg, pg->items[c + 1],
		    pg->items[c]) > 0)
			c++;
		if (hpage_cmp(pg, pg->items[c], pg->items[i]) <= 0)
			break;
		tmp = pg->items[i];
		pg->items[i] = pg->items[c];
		pg->items[c] = tmp;
		i = c;
	}
}

/* Offer an item: kept while it is among the max smallest keys so far. */
static void
hpage_offer(struct hpage *pg, void *item)
{
	void	*tmp;
	size_t	 i, parent;

	if (pg->max == 0)
		return;
	if (pg->n == pg->max) {
		if (hpage_cmp(pg, item, pg->items[0]) >= 0)
			return;
		pg->items[0] = item;
		hpage_down(pg, 0, pg->n);
		return;
	}
	i = pg->n++;
	pg->items[i] = item;
	while (i > 0) {
		parent = (i - 1) / 2;
		if (hpage_cmp(pg, pg->items[i], pg->items[parent]) <= 0)
			break;
		tmp = pg->items[i];
		pg->items[i] = pg->items[parent];
		pg->items[parent] = tmp;
		i = parent;
	}
}

/* Sort the heap's items by key, smallest first (heapsort); their number. */
static size_t
hpage_finish(struct hpage *pg)
{
	void	*tmp;
	size_t	 end;

	for (end = pg->n; end > 1; end--) {
		tmp = pg->items[0];
		pg->items[0] = pg->items[end - 1];
		pg->items[end - 1] = tmp;
		hpage_down(pg, 0, end - 1);
	}
	return pg->n;
}

/*
 * The live sessions whose id sorts after `after` (NULL or "": from the
 * first), the max smallest ids of them in id order, into out: their number.
 * Paging by the last id seen never skips or repeats a session that lives
 * through the whole listing, whatever is added or removed in between. One
 * pass over every session per page: O(n log max), no index to keep.
 */
size_t
session_page(const char *after, struct session **out, size_t max)
{
	struct hpage	 pg = { (void **)out, 0, max,
			    offsetof(struct session, id) };
	struct session	*s;
	int64_t		 now = session_now();

	TAILQ_FOREACH(s, &sessions, entry) {
		if (s->expires <= now ||
		    (after != NULL && strcmp(s->id, after) <= 0))
			continue;
		hpage_offer(&pg, s);
	}
	return hpage_finish(&pg);
}

/* The same for the live tokens (those of a live session, or standalone). */
size_t
token_page(const char *after, struct token **out, size_t max)
{
	struct hpage	 pg = { (void **)out, 0, max,
			    offsetof(struct token, id) };
	struct token	*t;
	int64_t		 now = session_now();

	TAILQ_FOREACH(t, &tokens, entry) {
		if ((t->session != NULL && t->session->expires <= now) ||
		    (after != NULL && strcmp(t->id, after) <= 0))
			continue;
		hpage_offer(&pg, t);
	}
	return hpage_finish(&pg);
}

/* A session as {"id", "user", "created", "last_seen", "expires"}. */
struct json_object *
session_json(const struct session *s)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(s->id));
	json_object_object_add(o, "user", json_object_new_string(s->user));
	session_add_time(o, "created", s->created);
	session_add_time(o, "last_seen", s->last_seen);
	session_add_time(o, "expires", s->expires);
	return o;
}

/* The live sessions as [{"id", "user", "created", "last_seen", "expires"}]. */
struct json_object *
session_list(void)
{
	struct json_object	*arr;
	struct session		*s;
	int64_t			 now = session_now();

	arr = json_object_new_array();
	TAILQ_FOREACH(s, &sessions, entry) {
		if (s->expires <= now)
			continue;
		json_object_array_add(arr, session_json(s));
	}
	return arr;
}

/* A token of one host: "hgt_SECRET" (see token_create_home). */
struct token *
token_create(const char *user, const char *session_id, char *bearer,
    size_t bearersz)
{
	return token_create_home(user, session_id, NULL, bearer, bearersz);
}

/*
 * Mint a bearer token for user, bound to session_id (which must be a live
 * session of that user) or standalone when session_id is NULL or "".
 * Writes "hgt_SECRET" into bearer (at least 49 bytes), or in a fleet
 * "hgt_HOST.SECRET" with host, the user's home, for the balancer to route
 * by (at least 82 bytes); stores only its hash, so the host it names is
 * as much the token's as its secret.
 */
struct token *
token_create_home(const char *user, const char *session_id, const char *host,
    char *bearer, size_t bearersz)
{
	struct session	*s = NULL;
	struct token	*t;
	size_t		 plen = strlen(TOKEN_PREFIX);

	if (host != NULL && *host != '\0') {
		if (!home_host_valid(host, strlen(host)))
			return NULL;
		plen += strlen(host) + 1;
	}
	if (!session_open || !session_user_ok(user) || bearer == NULL ||
	    bearersz <= plen)
		return NULL;
	if (session_id != NULL && session_id[0] != '\0') {
		if ((s = session_by_id(session_id)) == NULL ||
		    strcmp(s->user, user) != 0)
			return NULL;
	}
	if ((t = calloc(1, sizeof *t)) == NULL)
		fatal("%s", __func__);
	snprintf(bearer, bearersz, "%s%s%s", TOKEN_PREFIX, host != NULL &&
	    *host != '\0' ? host : "", host != NULL && *host != '\0' ? "." :
	    "");
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
	if (hindex_find(&by_tid, t->id) != NULL ||
	    store->token_insert(t) == -1) {
		bearer[0] = '\0';
		free(t->user);
		free(t);
		return NULL;
	}
	token_link(t, s);
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
	if ((t = hindex_find(&by_hash, hash)) == NULL &&
	    (t = token_fetch(hash, 1)) == NULL)
		return NULL;
	/* An expired session is destroyed here, and t with it. */
	if (t->session != NULL && t->session->expires <= session_now()) {
		session_destroy(t->session);
		return NULL;
	}
	return t;
}

/*
 * Revoke the token with this public id, telling frontd (token_revoked)
 * so that its streams end: 0, or -1 when there is none.
 */
int
token_revoke(const char *id)
{
	struct json_object	*d;
	struct token		*t;

	if ((t = hindex_find(&by_tid, id)) == NULL &&
	    (t = token_fetch(id, 0)) == NULL)
		return -1;
	log_info("token %s of %s revoked", t->id, t->user);
	/* Its streams end now, not at its session's logout (hgctl, panel). */
	d = json_object_new_object();
	json_object_object_add(d, "id", json_object_new_string(t->id));
	events_emit_token(t->session_id[0] != '\0' ? t->session_id : NULL,
	    t->user, t->hash, "token_revoked", d);
	/* Dead now in any case; a failed write is logged (and retried never). */
	if (store->token_delete(t->id) == -1)
		log_warnx("token %s: its revocation could not be stored",
		    t->id);
	token_free(t);
	return 0;
}

/* A token as {"id", "user", "session_id" (or null), "created"}. */
struct json_object *
token_json(const struct token *t)
{
	struct json_object	*o;

	o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(t->id));
	json_object_object_add(o, "user", json_object_new_string(t->user));
	json_object_object_add(o, "session_id", t->session == NULL ?
	    NULL : json_object_new_string(t->session->id));
	session_add_time(o, "created", t->created);
	return o;
}

/* The live tokens as [{"id", "user", "session_id" (or null), "created"}]. */
struct json_object *
token_list(void)
{
	struct json_object	*arr;
	struct token		*t;
	int64_t			 now = session_now();

	arr = json_object_new_array();
	TAILQ_FOREACH(t, &tokens, entry) {
		if (t->session != NULL && t->session->expires <= now)
			continue;
		json_object_array_add(arr, token_json(t));
	}
	return arr;
}

/* Store the last_seen times of at most max dirty sessions, in one go. */
static int
session_store_dirty(size_t max)
{
	struct session	*s;
	size_t		 n;

	if (TAILQ_EMPTY(&dirty))
		return 0;
	if (store->begin() == -1)
		return -1;
	for (n = 0; n < max && (s = TAILQ_FIRST(&dirty)) != NULL; n++) {
		store->session_touch(s);
		TAILQ_REMOVE(&dirty, s, dirty_entry);
		s->dirty = 0;
	}
	if (store->commit() == -1) {
		log_warnx("%zu last-seen times could not be stored", n);
		return -1;
	}
	return 0;
}

/*
 * Every 30 s (and again at once while a batch was full): expire at most
 * SESSION_BATCH sessions, found by the store's index on expires, and store
 * at most SESSION_BATCH last_seen times, each batch one transaction.
 * Returns 1 when a batch was full.
 */
int
session_sweep(void)
{
	char		 ids[SESSION_BATCH][33];
	struct session	*s;
	size_t		 i, n;
	int		 failed = 0;

	if (!session_open)
		return 0;
	n = store->expired(session_now(), ids, SESSION_BATCH);
	if (n > 0 && store->begin() == 0) {
		for (i = 0; i < n; i++) {
			if ((s = session_find(ids[i])) == NULL) {
				store->session_delete(ids[i]);
				continue;
			}
			log_debug("session %.8s of %s expired", s->id, s->user);
			session_remove(s);
		}
		if (store->commit() == -1) {
			log_warnx("%zu expired sessions could not be removed "
			    "from the store", n);
			failed = 1;
		}
	}
	if (session_store_dirty(SESSION_BATCH) == -1)
		failed = 1;
	/* A failing store waits for the next tick, not a busy loop. */
	return !failed && (n == SESSION_BATCH || !TAILQ_EMPTY(&dirty));
}

/* Store every pending last_seen time (at exit); 0 or -1. */
int
session_flush(void)
{
	if (!session_open)
		return -1;
	while (!TAILQ_EMPTY(&dirty))
		if (session_store_dirty(SESSION_BATCH) == -1)
			return -1;
	return 0;
}

/* Store the pending last_seen times and forget everything (at exit). */
void
session_close(void)
{
	if (session_open)
		session_flush();
	session_clear();
}

/* Store what changed in a session (grant, profile, last_seen): 0 or -1. */
int
session_save(struct session *s)
{
	/* Another host's change, being applied here: the store has it. */
	if (session_remote())
		return 0;
	if (!session_open || store->session_update(s) == -1)
		return -1;
	if (s->dirty) {
		TAILQ_REMOVE(&dirty, s, dirty_entry);
		s->dirty = 0;
	}
	return 0;
}

/* Whether name is a permission profile. */
int
session_permission_valid(const char *name)
{
	return name != NULL && (strcmp(name, "read-only") == 0 ||
	    strcmp(name, "workspace-write") == 0 ||
	    strcmp(name, "workspace-write+network") == 0 ||
	    session_permission_allowlist(name));
}

/* Whether a profile reaches the network only through the egress proxy. */
int
session_permission_allowlist(const char *name)
{
	return name != NULL && (strcmp(name, "workspace-write+allowlist") == 0 ||
	    strcmp(name, "read-only+allowlist") == 0);
}

/* Whether a profile keeps the workspace read-only. */
int
session_permission_read_only(const char *name)
{
	return name != NULL && (strcmp(name, "read-only") == 0 ||
	    strcmp(name, "read-only+allowlist") == 0);
}

/*
 * Replace a session's egress additions (allow, an array of checked
 * patterns, is taken; NULL or empty: none) and store them: 0, or -1 with
 * the session unchanged.
 */
int
session_set_egress(struct session *s, struct json_object *allow)
{
	struct json_object	*old = s->egress_allow;

	if (allow != NULL && json_object_array_length(allow) == 0) {
		json_object_put(allow);
		allow = NULL;
	}
	s->egress_allow = allow;
	if (session_save(s) == -1) {
		s->egress_allow = old;
		json_object_put(allow);
		return -1;
	}
	json_object_put(old);
	return 0;
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
	if (session_save(s) == -1) {
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

/* Called after another host changed a session's egress additions. */
void
session_on_egress(void (*cb)(struct session *))
{
	session_egress_cb = cb;
}

/*
 * Register the hook called after another host's change to a session was
 * applied here (its profile, grant, egress additions or expiry; or a
 * session new here with a grant), with the grant's deadline before it.
 */
void
session_on_change(void (*cb)(struct session *, int64_t old_direct_until))
{
	session_change_cb = cb;
}

/*
 * Whether the change being applied came from another host (a notification
 * or a reconciliation): the store has it already, and its record was
 * written where it was made. session_save stores nothing meanwhile.
 */
int
session_remote(void)
{
	return session_remote_depth > 0;
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
