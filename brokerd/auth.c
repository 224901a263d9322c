/*
 * The users, argon2id password hashes, and the password check. Users are
 * rows of the store's users table (store.c: store.db, or a fleet's
 * PostgreSQL) and, all of them, in memory; each change writes its one row.
 * Each user has a uid and gid of their own: the lowest uid of
 * HOSTGATE_UID_RANGE that no other user holds (gid == uid), or those of an
 * existing Unix account (hgctl user add --unix-user). A uid that another
 * host's concurrent add took fails on the UNIQUE constraint, and the add
 * reloads and picks again.
 *
 * Earlier releases kept the users in STATE_DIR/users.json:
 *   {"version": 1, "users": [{"name": "...", "role": "admin" | "user",
 *    "hash": "$argon2id$...", "created": <unix seconds>, "uid": N,
 *    "gid": N, "unix_user": "..." (only when mapped),
 *    "egress_allow": ["name", "*.suffix"] (only when an admin added some)}]}
 * The embedded store takes it in once (auth_import): its users (given
 * uids if the file has none) and a mark are committed in one transaction,
 * then the file is renamed users.json.migrated; a file found again after
 * the mark without users.json.migrated (a crash before the rename) is
 * renamed unread. One written later is left alone, unread, with a
 * warning at each start.
 *
 * In a fleet, another host's change is applied when its notification
 * comes (a user gone: its sessions end and its spawns are killed here),
 * a name unknown here is asked of the store (a user added elsewhere a
 * moment ago), and everything is reconciled after a lost link.
 */

#include <sys/random.h>
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <argon2.h>

#include "brokerd.h"

#define AUTH_FILE	"users.json"	/* earlier releases' */
#define AUTH_FILE_DONE	"users.json.migrated"
#define AUTH_IMPORTED	"users_json_migrated"	/* its mark in meta */
#define AUTH_FILE_MAX	(4 * 1024 * 1024)
#define AUTH_VERSION	1

/* argon2id parameters (OWASP's first choice). */
#define AUTH_T_COST	2
#define AUTH_M_COST	19456		/* KiB */
#define AUTH_LANES	1
#define AUTH_SALT_LEN	16
#define AUTH_HASH_LEN	32
#define AUTH_HASH_PREFIX "$argon2id$"
#define AUTH_ENCODED_MAX 256
#define AUTH_ADD_TRIES	16	/* uids another host took meanwhile */

TAILQ_HEAD(user_list, user);
static struct user_list	 auth_users = TAILQ_HEAD_INITIALIZER(auth_users);
static char		*auth_path;
/* Verified against when the user is unknown, so timing hides who exists. */
static char		 auth_dummy[AUTH_ENCODED_MAX];
/* Where uids come from (HOSTGATE_UID_RANGE) and which a mapping may not be. */
#define AUTH_RESERVED_MAX	8
static int64_t		 auth_uid_lo = 1879048192;
static int64_t		 auth_uid_hi = 1879113727;
static struct {
	uid_t		 uid;
	char		 why[80];
} auth_reserved[AUTH_RESERVED_MAX];
static size_t		 auth_nreserved;

static void		(*auth_egress_cb)(struct user *);
static int		(*auth_place_cb)(char *, size_t);
static struct user *auth_fetch(const char *);

/* Free one user. */
static void
auth_user_free(struct user *u)
{
	free(u->name);
	free(u->hash);
	free(u->unix_user);
	json_object_put(u->egress_allow);
	free(u);
}

/* Forget every user in memory. */
static void
auth_clear(void)
{
	struct user	*u;

	while ((u = TAILQ_FIRST(&auth_users)) != NULL) {
		TAILQ_REMOVE(&auth_users, u, entry);
		auth_user_free(u);
	}
}

/* Allocate a user; fatal on out of memory. */
static struct user *
auth_user_new(const char *name, int admin, const char *hash, int64_t created)
{
	struct user	*u;

	if ((u = calloc(1, sizeof *u)) == NULL ||
	    (u->name = strdup(name)) == NULL ||
	    (u->hash = strdup(hash)) == NULL)
		fatal("%s", __func__);
	u->admin = admin;
	u->created = created;
	u->uid = u->gid = -1;
	return u;
}

/* The user holding uid (other than except), or NULL. */
static struct user *
auth_uid_holder(int64_t uid, const struct user *except)
{
	struct user	*u;

	TAILQ_FOREACH(u, &auth_users, entry)
		if (u != except && u->uid == uid)
			return u;
	return NULL;
}

/* Why uid is a daemon's or root's, or NULL. */
static const char *
auth_uid_reserved(int64_t uid)
{
	size_t	i;

	if (uid == 0)
		return "root's";
	for (i = 0; i < auth_nreserved; i++)
		if ((int64_t)auth_reserved[i].uid == uid)
			return auth_reserved[i].why;
	return NULL;
}

/* Whether an allocated uid (not a mapped one) is fit to keep. */
static int
auth_uid_fits(const struct user *u)
{
	return u->uid >= auth_uid_lo && u->uid <= auth_uid_hi &&
	    u->gid == u->uid && auth_uid_reserved(u->uid) == NULL &&
	    auth_uid_holder(u->uid, u) == NULL;
}

/*
 * The lowest uid of the range, from from on, that no user holds, or -1
 * when none is left.
 */
static int64_t
auth_uid_alloc_from(int64_t from)
{
	int64_t	uid;

	for (uid = from > auth_uid_lo ? from : auth_uid_lo; uid <= auth_uid_hi;
	    uid++)
		if (auth_uid_holder(uid, NULL) == NULL &&
		    auth_uid_reserved(uid) == NULL)
			return uid;
	return -1;
}

/* The lowest uid of the range no user holds, or -1 when none is left. */
static int64_t
auth_uid_alloc(void)
{
	return auth_uid_alloc_from(auth_uid_lo);
}

/* Where allocated uids come from: HOSTGATE_UID_RANGE, inclusive. */
void
auth_uid_range(int64_t lo, int64_t hi)
{
	auth_uid_lo = lo;
	auth_uid_hi = hi;
}

/* A uid no user may have (a daemon's), with what it is for the error. */
void
auth_uid_reserve(uid_t uid, const char *why)
{
	size_t	i;

	for (i = 0; i < auth_nreserved; i++)
		if (auth_reserved[i].uid == uid)
			return;
	if (auth_nreserved == AUTH_RESERVED_MAX)
		fatalx("%s: too many", __func__);
	auth_reserved[auth_nreserved].uid = uid;
	snprintf(auth_reserved[auth_nreserved].why,
	    sizeof(auth_reserved[auth_nreserved].why), "%s", why);
	auth_nreserved++;
}

/*
 * Whether a Unix account's ids may be a user's (except: the user itself);
 * fills err with the reason if not.
 */
static int
auth_ids_ok(int64_t uid, int64_t gid, const struct user *except, char *err,
    size_t errsz)
{
	struct user	*h;
	const char	*why;

	if (uid < 0 || uid >= UINT_MAX || gid < 0 || gid >= UINT_MAX) {
		snprintf(err, errsz, "uid and gid must be from 0 to %u",
		    UINT_MAX - 1);
		return 0;
	}
	if ((why = auth_uid_reserved(uid)) != NULL) {
		snprintf(err, errsz, "uid %lld is %s", (long long)uid, why);
		return 0;
	}
	if (gid == 0) {
		snprintf(err, errsz, "its primary group is root's (gid 0)");
		return 0;
	}
	if ((h = auth_uid_holder(uid, except)) != NULL) {
		snprintf(err, errsz, "uid %lld is already user %s's",
		    (long long)uid, h->name);
		return 0;
	}
	return 1;
}

/* Whether a password has an acceptable length; fills err if not. */
static int
auth_password_valid(const char *password, char *err, size_t errsz)
{
	size_t	len;

	len = password == NULL ? 0 : strlen(password);
	if (len < PASSWORD_MIN || len > PASSWORD_MAX) {
		snprintf(err, errsz, "password must be %d to %d bytes, "
		    "with no NUL byte", PASSWORD_MIN, PASSWORD_MAX);
		return 0;
	}
	return 1;
}

/* Whether name matches ^[a-z_][a-z0-9_.-]{0,31}$. */
int
auth_name_valid(const char *name)
{
	return str_is_user_name(name);
}

/* Whether s is n > 0 characters of unpadded base64 decoding to min bytes
 * or more (argon2's encoding of salts and hashes). */
static int
auth_b64_valid(const char *s, size_t n, size_t min)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '+' && s[i] != '/')
			return 0;
	return n % 4 != 1 && n * 3 / 4 >= min;
}

/*
 * The decimal number of at most 10 digits at *s, followed by end (which *s
 * is left past); -1 if there is none.
 */
static long long
auth_hash_num(const char **s, char end)
{
	long long	v = 0;
	int		n;

	for (n = 0; isdigit((unsigned char)**s); n++, (*s)++)
		v = v * 10 + (**s - '0');
	if (n == 0 || n > 10 || **s != end)
		return -1;
	(*s)++;
	return v;
}

/*
 * Whether hash is an argon2id encoded string that argon2id_verify can use:
 * $argon2id$v=19$m=M,t=T,p=P$SALT$HASH (libargon2 exports no decoder, and
 * verifying against a password would cost a hash, which is what a caller
 * that brings its own hash saves). Fills err if not.
 */
int
auth_hash_valid(const char *hash, char *err, size_t errsz)
{
	static const char	 head[] = "$argon2id$v=19$m=";
	const char		*s = hash, *sum;
	long long		 m = -1, t = -1, p = -1;

	if (hash != NULL && strlen(hash) < AUTH_ENCODED_MAX &&
	    strncmp(hash, head, strlen(head)) == 0) {
		s += strlen(head);
		if ((m = auth_hash_num(&s, ',')) != -1 &&
		    strncmp(s, "t=", 2) == 0 && (s += 2) &&
		    (t = auth_hash_num(&s, ',')) != -1 &&
		    strncmp(s, "p=", 2) == 0 && (s += 2))
			p = auth_hash_num(&s, '$');
	}
	if (p == -1) {
		snprintf(err, errsz, "not an argon2id encoded hash "
		    "($argon2id$v=19$m=M,t=T,p=P$SALT$HASH, %d bytes at most)",
		    AUTH_ENCODED_MAX - 1);
		return 0;
	}
	if (p < 1 || p > 0xffffff || t < 1 || t > UINT32_MAX ||
	    m < 8 * p || m > UINT32_MAX) {
		snprintf(err, errsz, "argon2id parameters out of range "
		    "(t at least 1, p from 1 to 16777215, m at least 8 * p "
		    "KiB)");
		return 0;
	}
	if ((sum = strchr(s, '$')) == NULL ||
	    !auth_b64_valid(s, sum - s, ARGON2_MIN_SALT_LENGTH) ||
	    !auth_b64_valid(sum + 1, strlen(sum + 1), ARGON2_MIN_OUTLEN)) {
		snprintf(err, errsz, "argon2id hash: the salt (8 bytes or more) "
		    "and the hash (4 bytes or more) must be unpadded base64");
		return 0;
	}
	return 1;
}

/* Hash a password into an argon2id encoded string; -1 on failure. */
int
auth_hash_password(const char *password, char *out, size_t outsz)
{
	unsigned char	 salt[AUTH_SALT_LEN];
	int		 rc;

	if (password == NULL)
		return -1;
	if (getrandom(salt, sizeof salt, 0) != (ssize_t)sizeof salt) {
		log_warn("%s: getrandom", __func__);
		return -1;
	}
	rc = argon2id_hash_encoded(AUTH_T_COST, AUTH_M_COST, AUTH_LANES,
	    password, strlen(password), salt, sizeof salt, AUTH_HASH_LEN,
	    out, outsz);
	if (rc != ARGON2_OK) {
		log_warnx("%s: %s", __func__, argon2_error_message(rc));
		return -1;
	}
	return 0;
}

/*
 * Put u among the users in the order both stores load them (created, then
 * name), so that the list reads the same before and after a restart.
 */
static void
auth_insert(struct user *u)
{
	struct user	*v;

	/* From the back: a store loads in this order, a new user is last. */
	TAILQ_FOREACH_REVERSE(v, &auth_users, user_list, entry)
		if (v->created < u->created || (v->created == u->created &&
		    strcmp(v->name, u->name) < 0)) {
			TAILQ_INSERT_AFTER(&auth_users, v, u, entry);
			return;
		}
	TAILQ_INSERT_HEAD(&auth_users, u, entry);
}

/* The user called name in memory, or NULL. */
static struct user *
auth_mem_find(const char *name)
{
	struct user	*u;

	if (name == NULL)
		return NULL;
	TAILQ_FOREACH(u, &auth_users, entry) {
		if (strcmp(u->name, name) == 0)
			return u;
	}
	return NULL;
}

/*
 * The user called name, or NULL. In a fleet a name unknown here is asked
 * of the store (added on another host a moment ago); one host's memory is
 * its store's.
 */
struct user *
auth_find(const char *name)
{
	struct user	*u;

	if ((u = auth_mem_find(name)) == NULL && !store->one_host &&
	    auth_name_valid(name))
		u = auth_fetch(name);
	return u;
}

/*
 * Whether a user's "egress_allow" is an array of domain patterns; fills
 * err. The file is the operator's: a bad entry stops brokerd, as any.
 */
static int
auth_egress_check(const char *name, struct json_object *allow, char *err,
    size_t errsz)
{
	struct json_object	*v;
	size_t			 i;

	if (!json_object_is_type(allow, json_type_array)) {
		snprintf(err, errsz, "user %s: egress_allow must be an array "
		    "of domain patterns", name);
		return -1;
	}
	for (i = 0; i < json_object_array_length(allow); i++) {
		v = json_object_array_get_idx(allow, i);
		if (!json_object_is_type(v, json_type_string) ||
		    !egress_pattern_valid(json_object_get_string(v))) {
			snprintf(err, errsz, "user %s: egress_allow item %zu "
			    "is not a domain pattern (name or *.suffix)",
			    name, i);
			return -1;
		}
	}
	return 0;
}

/* Parse one entry of "users"; fills err (without the file name) if bad. */
static struct user *
auth_parse_user(struct json_object *o, size_t i, char *err, size_t errsz)
{
	struct user	*u;
	struct json_object	*allow = NULL;
	const char	*name, *role, *hash, *unix_user;
	int64_t		 created, uid = -1, gid = -1;

	if (!json_object_is_type(o, json_type_object)) {
		snprintf(err, errsz, "user %zu: not an object", i);
		return NULL;
	}
	name = json_str(o, "name");
	role = json_str(o, "role");
	hash = json_str(o, "hash");
	if (!auth_name_valid(name)) {
		snprintf(err, errsz, "user %zu: missing or invalid name", i);
		return NULL;
	}
	if (role == NULL ||
	    (strcmp(role, "admin") != 0 && strcmp(role, "user") != 0)) {
		snprintf(err, errsz, "user %s: role must be admin or user",
		    name);
		return NULL;
	}
	if (hash == NULL ||
	    strncmp(hash, AUTH_HASH_PREFIX, strlen(AUTH_HASH_PREFIX)) != 0 ||
	    strlen(hash) >= AUTH_ENCODED_MAX) {
		snprintf(err, errsz, "user %s: hash is not an argon2id "
		    "encoded string", name);
		return NULL;
	}
	if (json_int(o, "created", &created) == -1) {
		snprintf(err, errsz, "user %s: missing or invalid created",
		    name);
		return NULL;
	}
	if (auth_mem_find(name) != NULL) {
		snprintf(err, errsz, "user %s: listed twice", name);
		return NULL;
	}
	/* Without ids (an older file): auth_init gives them. */
	if (json_object_object_get_ex(o, "uid", NULL) &&
	    (json_int(o, "uid", &uid) == -1 || json_int(o, "gid", &gid) == -1 ||
	    uid < 1 || uid >= UINT_MAX || gid < 0 || gid >= UINT_MAX)) {
		snprintf(err, errsz, "user %s: uid and gid must be integers "
		    "from 1 to %u", name, UINT_MAX - 1);
		return NULL;
	}
	unix_user = json_str(o, "unix_user");
	if (json_object_object_get_ex(o, "unix_user", NULL) &&
	    (unix_user == NULL || *unix_user == '\0' || uid == -1)) {
		snprintf(err, errsz, "user %s: unix_user must be a name, with "
		    "its uid and gid", name);
		return NULL;
	}
	if (json_object_object_get_ex(o, "egress_allow", &allow) &&
	    auth_egress_check(name, allow, err, errsz) == -1)
		return NULL;
	u = auth_user_new(name, strcmp(role, "admin") == 0, hash, created);
	u->uid = uid;
	u->gid = gid;
	if (unix_user != NULL && (u->unix_user = strdup(unix_user)) == NULL)
		fatal("%s", __func__);
	if (allow != NULL && json_object_array_length(allow) > 0)
		u->egress_allow = json_object_get(allow);
	return u;
}

/*
 * Give every user without a fit uid one of the range (a file written before
 * uids, or a changed range); a uid two users share is an error. 1 when a
 * user got one (the file needs writing), 0 when none did, -1 with err.
 */
static int
auth_assign_ids(char *err, size_t errsz)
{
	struct user	*u, *h;
	int		 changed = 0;

	TAILQ_FOREACH(u, &auth_users, entry) {
		if (u->uid != -1 && (h = auth_uid_holder(u->uid, u)) != NULL &&
		    (u->unix_user != NULL || h->unix_user != NULL)) {
			snprintf(err, errsz, "users %s and %s have one uid, "
			    "%lld", h->name, u->name, (long long)u->uid);
			return -1;
		}
		if (u->unix_user != NULL) {
			if (auth_uid_reserved(u->uid) != NULL)
				log_warnx("user %s: uid %lld is %s; sandboxd "
				    "will refuse their spawns", u->name,
				    (long long)u->uid,
				    auth_uid_reserved(u->uid));
			continue;
		}
		if (u->uid != -1 && auth_uid_fits(u))
			continue;
		if (u->uid != -1)
			log_warnx("user %s: uid %lld is outside "
			    "HOSTGATE_UID_RANGE or not theirs alone; a new one",
			    u->name, (long long)u->uid);
		u->uid = -1;
		if ((u->uid = auth_uid_alloc()) == -1) {
			snprintf(err, errsz, "no uid left in "
			    "HOSTGATE_UID_RANGE for user %s", u->name);
			return -1;
		}
		u->gid = u->uid;
		log_info("user %s: uid and gid %lld", u->name,
		    (long long)u->uid);
		changed = 1;
	}
	return changed;
}

/* Load the users from text; fills err (without the file name) if bad. */
static int
auth_parse(const char *text, char *err, size_t errsz)
{
	struct json_object	*root, *arr;
	struct user		*u;
	enum json_tokener_error	 jerr;
	int64_t			 version;
	size_t			 i, n;
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
	    version != AUTH_VERSION) {
		snprintf(err, errsz, "version is not %d", AUTH_VERSION);
		goto out;
	}
	if (!json_object_object_get_ex(root, "users", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		snprintf(err, errsz, "users is not an array");
		goto out;
	}
	n = json_object_array_length(arr);
	for (i = 0; i < n; i++) {
		u = auth_parse_user(json_object_array_get_idx(arr, i), i, err,
		    errsz);
		if (u == NULL)
			goto out;
		auth_insert(u);
	}
	rc = 0;
out:
	json_object_put(root);
	if (rc == -1)
		auth_clear();
	return rc;
}

/* Read the users file if present, fixing a loose mode; fills err. */
static int
auth_load(char *err, size_t errsz)
{
	char	*text, why[256];
	int	 absent, rc;

	if ((text = file_read_private(auth_path, AUTH_FILE_MAX, &absent, err,
	    errsz)) == NULL)
		return absent ? 0 : -1;
	rc = auth_parse(text, why, sizeof why);
	free(text);
	if (rc == -1)
		snprintf(err, errsz, "%s: %s", auth_path, why);
	return rc;
}

/*
 * Whether a users row of the PostgreSQL store is fit to use (as
 * auth_parse_user checks a file's entry); fills why if not. Empty egress
 * additions become none.
 */
static int
auth_row_check(struct user *u, char *why, size_t whysz)
{
	if (!auth_name_valid(u->name)) {
		snprintf(why, whysz, "a user with an invalid name");
		return -1;
	}
	if (strncmp(u->hash, AUTH_HASH_PREFIX, strlen(AUTH_HASH_PREFIX)) !=
	    0 || strlen(u->hash) >= AUTH_ENCODED_MAX) {
		snprintf(why, whysz, "user %s: hash is not an argon2id encoded "
		    "string", u->name);
		return -1;
	}
	if (u->uid < 1 || u->uid >= UINT_MAX || u->gid < 0 ||
	    u->gid >= UINT_MAX) {
		snprintf(why, whysz, "user %s: uid and gid must be from 1 to "
		    "%u", u->name, UINT_MAX - 1);
		return -1;
	}
	if (u->unix_user != NULL && *u->unix_user == '\0') {
		snprintf(why, whysz, "user %s: unix_user must be a name or "
		    "NULL", u->name);
		return -1;
	}
	if (u->egress_allow == NULL)
		return 0;
	if (auth_egress_check(u->name, u->egress_allow, why, whysz) == -1)
		return -1;
	if (json_object_array_length(u->egress_allow) == 0) {
		json_object_put(u->egress_allow);
		u->egress_allow = NULL;
	}
	return 0;
}

/* Take a users row read at start-up (freed when refused, with why). */
static int
auth_add_stored(struct user *u, char *why, size_t whysz)
{
	if (auth_row_check(u, why, whysz) == -1 ||
	    auth_mem_find(u->name) != NULL) {
		if (auth_mem_find(u->name) != NULL)
			snprintf(why, whysz, "user %s: listed twice", u->name);
		auth_user_free(u);
		return -1;
	}
	if (u->unix_user == NULL && (u->uid < auth_uid_lo ||
	    u->uid > auth_uid_hi || u->gid != u->uid))
		log_warnx("user %s: uid %lld is outside this host's "
		    "HOSTGATE_UID_RANGE", u->name, (long long)u->uid);
	if (auth_uid_reserved(u->uid) != NULL)
		log_warnx("user %s: uid %lld is %s; sandboxd will refuse "
		    "their spawns", u->name, (long long)u->uid,
		    auth_uid_reserved(u->uid));
	auth_insert(u);
	return 0;
}

/* Called after another host changed a user's egress additions. */
void
auth_on_egress(void (*cb)(struct user *))
{
	auth_egress_cb = cb;
}

/* In a fleet (hosts.c): where a new user's home is; none on one host. */
void
auth_on_place(int (*place)(char *, size_t))
{
	auth_place_cb = place;
}

/* Give u what another host stored in its row (row is freed). */
static void
auth_apply(struct user *u, struct user *row)
{
	char			*tmp;
	struct json_object	*allow;

	u->admin = row->admin;
	u->created = row->created;
	u->uid = row->uid;
	u->gid = row->gid;
	memcpy(u->home, row->home, sizeof(u->home));
	tmp = u->hash;
	u->hash = row->hash;
	row->hash = tmp;
	tmp = u->unix_user;
	u->unix_user = row->unix_user;
	row->unix_user = tmp;
	allow = u->egress_allow;
	u->egress_allow = row->egress_allow;
	row->egress_allow = allow;
	if (strcmp(allow != NULL ? json_object_to_json_string(allow) : "[]",
	    u->egress_allow != NULL ?
	    json_object_to_json_string(u->egress_allow) : "[]") != 0)
		if (auth_egress_cb != NULL)
			auth_egress_cb(u);
	auth_user_free(row);
}

/*
 * A user another host deleted: gone here too, with their sessions and
 * tokens (here only: the store has it) and every spawn of theirs here.
 */
static void
auth_forget(struct user *u)
{
	log_info("user %s deleted on another host", u->name);
	TAILQ_REMOVE(&auth_users, u, entry);
	session_forget_user(u->name);
	sandbox_kill_user(u->name);
	auth_user_free(u);
}

/* A user of the store this host has not seen yet, taken in; or NULL. */
static struct user *
auth_fetch(const char *name)
{
	struct user	*u;
	char		 why[256];

	if (store->user_get(name, &u) != 1)
		return NULL;
	if (auth_row_check(u, why, sizeof(why)) == -1) {
		log_warnx("%s: %s; ignored", store->where, why);
		auth_user_free(u);
		return NULL;
	}
	auth_insert(u);
	log_info("user %s: read from the store", u->name);
	return u;
}

/* A notification of a users row (KEY: the name): read it again, apply. */
static void
auth_notified(const char *name, int own)
{
	struct user	*u, *row;
	char		 why[256];

	if (own || !auth_name_valid(name))
		return;
	u = auth_mem_find(name);
	switch (store->user_get(name, &row)) {
	case -1:
		return;		/* the link: reconciled when it is back */
	case 0:
		if (u != NULL)
			auth_forget(u);
		return;
	}
	if (auth_row_check(row, why, sizeof(why)) == -1) {
		log_warnx("%s: %s; ignored", store->where, why);
		auth_user_free(row);
		return;
	}
	if (u == NULL) {
		auth_insert(row);
		log_info("user %s added on another host", row->name);
	} else {
		auth_apply(u, row);
		log_info("user %s changed on another host", name);
	}
}

/* The users rows of a reconciliation. */
static struct user_list	auth_rows = TAILQ_HEAD_INITIALIZER(auth_rows);

/* Keep a row for the reconciliation (an unfit one is left out, logged). */
static int
auth_collect(struct user *row, char *why, size_t whysz)
{
	if (auth_row_check(row, why, whysz) == -1) {
		log_warnx("%s: %s; ignored", store->where, why);
		auth_user_free(row);
		return 0;
	}
	TAILQ_INSERT_TAIL(&auth_rows, row, entry);
	return 0;
}

/*
 * Make the users in memory the store's again (after a lost link, or when
 * an add found its uid taken): gone ones are forgotten as if notified,
 * changed ones updated, new ones added. -1 when the store cannot be read.
 */
int
auth_reconcile(void)
{
	struct user	*u, *next, *row;
	char		 err[512];

	if (store->user_load(auth_collect, err, sizeof(err)) == -1) {
		log_warnx("reconciling users: %s", err);
		while ((row = TAILQ_FIRST(&auth_rows)) != NULL) {
			TAILQ_REMOVE(&auth_rows, row, entry);
			auth_user_free(row);
		}
		return -1;
	}
	for (u = TAILQ_FIRST(&auth_users); u != NULL; u = next) {
		next = TAILQ_NEXT(u, entry);
		TAILQ_FOREACH(row, &auth_rows, entry)
			if (strcmp(row->name, u->name) == 0)
				break;
		if (row == NULL)
			auth_forget(u);
	}
	while ((row = TAILQ_FIRST(&auth_rows)) != NULL) {
		TAILQ_REMOVE(&auth_rows, row, entry);
		if ((u = auth_mem_find(row->name)) != NULL)
			auth_apply(u, row);
		else
			auth_insert(row);
	}
	return 0;
}

/* After the link to the store is back: reconcile (the result is logged). */
static void
auth_reconnected(void)
{
	(void)auth_reconcile();
}

/* Store one user's changed row; fills err on failure. */
static int
auth_store_user(struct user *u, char *err, size_t errsz)
{
	int	rc;

	if ((rc = store->user_update(u)) == 1)
		return 0;
	if (rc == 0)
		snprintf(err, errsz, "user %s was deleted on another host",
		    u->name);
	else
		snprintf(err, errsz, "%s: %s", store->where, store->error());
	return -1;
}

/* Store every user's row again (their uids moved); fills err. */
static int
auth_store_all(char *err, size_t errsz)
{
	struct user	*u;

	if (store->begin() == -1)
		goto fail;
	TAILQ_FOREACH(u, &auth_users, entry)
		store->user_update(u);
	if (store->commit() == 0)
		return 0;
fail:
	snprintf(err, errsz, "%s: the users' new uids cannot be stored: %s",
	    store->where, store->error());
	return -1;
}

/*
 * Take in users.json of an earlier release, once (see the top of the
 * file): its users, given uids if it has none, and the mark in one
 * transaction, then the file renamed aside. -1 with err: brokerd refuses
 * to start, the store unchanged.
 */
static int
auth_import(const char *state_dir, char *err, size_t errsz)
{
	struct user	*u, *last = TAILQ_LAST(&auth_users, user_list);
	char		*done, why[256];
	int		 fd, n = 0, rc = -1;

	done = path_join(state_dir, AUTH_FILE_DONE);
	if (access(auth_path, F_OK) == -1 && errno == ENOENT) {
		rc = 0;
		goto out;
	}
	/* Taken in, and a crash came before the rename: finish it. */
	if (store->meta_get(AUTH_IMPORTED) != 0 &&
	    access(done, F_OK) == -1 && errno == ENOENT) {
		log_warnx("%s: already in the store, renaming it %s unread",
		    auth_path, AUTH_FILE_DONE);
		goto rename;
	}
	/* Written since (a script of the earlier release's?): not read. */
	if (store->meta_get(AUTH_IMPORTED) != 0 || last != NULL) {
		log_warnx("%s is not read: the users are in %s (hgctl user "
		    "add|del|passwd|list)", auth_path, store->where);
		rc = 0;
		goto out;
	}
	if (auth_load(err, errsz) == -1)
		goto out;
	if (auth_assign_ids(why, sizeof(why)) == -1) {
		snprintf(err, errsz, "%s: %s", auth_path, why);
		goto out;
	}
	if (store->begin() == -1)
		goto unwritten;
	TAILQ_FOREACH(u, &auth_users, entry) {
		if (store->user_insert(u) != 1) {
			store->rollback();
			goto unwritten;
		}
		n++;
	}
	if (store->meta_set(AUTH_IMPORTED, now_wall_ms() / 1000) == -1 ||
	    store->commit() == -1)
		goto unwritten;
	log_info("%s: %d users moved to %s", auth_path, n, store->where);
rename:
	if (rename(auth_path, done) == -1)
		log_warn("rename %s to %s", auth_path, done);
	else if ((fd = open(state_dir, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) != -1) {
		(void)fsync(fd);	/* the rename, durable */
		close(fd);
	}
	rc = 0;
	goto out;
unwritten:
	snprintf(err, errsz, "%s: cannot be written to %s: %s", auth_path,
	    store->where, store->error());
out:
	free(done);
	return rc;
}

/*
 * Load the users of the store; the embedded one takes in users.json of an
 * earlier release the first time.
 */
int
auth_init(const char *state_dir, char *err, size_t errsz)
{
	char	seed[64], why[256];

	auth_clear();
	free(auth_path);
	auth_path = path_join(state_dir, AUTH_FILE);

	if (auth_dummy[0] == '\0') {
		if (rand_token(seed, sizeof seed, 32) == -1 ||
		    auth_hash_password(seed, auth_dummy,
		    sizeof auth_dummy) == -1) {
			auth_dummy[0] = '\0';
			snprintf(err, errsz, "cannot compute the dummy hash");
			return -1;
		}
	}
	if (store->user_load(auth_add_stored, err, errsz) == -1) {
		auth_clear();
		return -1;
	}
	if (!store->one_host) {
		if (TAILQ_EMPTY(&auth_users) && access(auth_path, F_OK) == 0)
			log_warnx("%s is not read with a PostgreSQL store "
			    "(hgctl store copy moves it there)", auth_path);
		store->on_notify("users", auth_notified);
		store->on_reconnect(auth_reconnected);
		return 0;
	}
	if (auth_import(state_dir, err, errsz) == -1) {
		auth_clear();
		return -1;
	}
	/* One host's users: uids HOSTGATE_UID_RANGE no longer holds move. */
	switch (auth_assign_ids(why, sizeof(why))) {
	case -1:
		snprintf(err, errsz, "%s: %s", store->where, why);
		auth_clear();
		return -1;
	case 1:
		if (auth_store_all(err, errsz) == -1) {
			auth_clear();
			return -1;
		}
	}
	return 0;
}

/* Add a user with a uid of the range; fills err when refused. */
int
auth_user_add(const char *name, int admin, const char *password, char *err,
    size_t errsz)
{
	return auth_user_add_unix(name, admin, password, NULL, NULL, -1, -1,
	    err, errsz);
}

/*
 * Add a user; with unix_user, mapped to that Unix account's uid and gid
 * (never root's, a daemon's or another user's), else with the lowest free
 * uid of the range. The password is hashed here, or, with password NULL,
 * the encoded hash (argon2id, checked) is stored as it is. Fills err when the
 * name, password, hash, ids or write are refused.
 */
int
auth_user_add_unix(const char *name, int admin, const char *password,
    const char *encoded, const char *unix_user, int64_t uid, int64_t gid,
    char *err, size_t errsz)
{
	struct user	*u;
	char		 hash[AUTH_ENCODED_MAX], why[200];
	int		 tries = 0, rc;

	if (!auth_name_valid(name)) {
		snprintf(err, errsz, "invalid user name (allowed: "
		    "[a-z_][a-z0-9_.-]{0,31})");
		return -1;
	}
	if (auth_find(name) != NULL) {
		snprintf(err, errsz, "user %s exists", name);
		return -1;
	}
	if (unix_user != NULL && !auth_ids_ok(uid, gid, NULL, why,
	    sizeof(why))) {
		snprintf(err, errsz, "cannot map %s to Unix user %s: %s", name,
		    unix_user, why);
		return -1;
	}
	if (unix_user == NULL && (uid = auth_uid_alloc()) == -1) {
		snprintf(err, errsz, "no uid left in HOSTGATE_UID_RANGE");
		return -1;
	}
	if (password == NULL) {
		if (encoded == NULL) {
			snprintf(err, errsz, "a password or a hash is required");
			return -1;
		}
		if (!auth_hash_valid(encoded, err, errsz))
			return -1;
		snprintf(hash, sizeof hash, "%s", encoded);
	} else if (!auth_password_valid(password, err, errsz))
		return -1;
	else if (auth_hash_password(password, hash, sizeof hash) == -1) {
		snprintf(err, errsz, "cannot hash the password");
		return -1;
	}
again:
	u = auth_user_new(name, admin != 0, hash, now_wall_ms() / 1000);
	u->uid = uid;
	u->gid = unix_user != NULL ? gid : uid;
	if (unix_user != NULL && (u->unix_user = strdup(unix_user)) == NULL)
		fatal("%s", __func__);
	/* A fleet's user gets a home now (none found: claimed at first use). */
	if (auth_place_cb != NULL)
		(void)auth_place_cb(u->home, sizeof(u->home));
	if ((rc = store->user_insert(u)) != 1)
		auth_user_free(u);
	if (rc == -1) {
		snprintf(err, errsz, "%s: %s", store->where, store->error());
		return -1;
	}
	if (rc == 0) {
		/* Another host's add took the name or the uid. */
		if (auth_find(name) != NULL) {
			snprintf(err, errsz, "user %s exists", name);
			return -1;
		}
		if (++tries == AUTH_ADD_TRIES || auth_reconcile() == -1) {
			snprintf(err, errsz, "%s: no free uid found for %s",
			    store->where, name);
			return -1;
		}
		log_info("user %s: uid %lld was taken on another host; "
		    "picking again", name, (long long)uid);
		if (unix_user != NULL) {
			if (!auth_ids_ok(uid, gid, NULL, why, sizeof(why)))
				snprintf(err, errsz, "cannot map %s to Unix "
				    "user %s: %s", name, unix_user, why);
			else
				snprintf(err, errsz, "cannot map %s to Unix "
				    "user %s: uid %lld is another user's in "
				    "%s", name, unix_user, (long long)uid,
				    store->where);
			return -1;
		}
		/* Past it, even if the reload did not show its user. */
		if ((uid = auth_uid_alloc_from(uid + 1)) == -1) {
			snprintf(err, errsz, "no uid left in "
			    "HOSTGATE_UID_RANGE");
			return -1;
		}
		goto again;
	}
	auth_insert(u);
	log_info("user %s added (%s, uid %lld%s%s%s%s)", name, admin ?
	    "admin" : "user", (long long)u->uid, unix_user ? ", Unix user " :
	    "", unix_user ? unix_user : "", u->home[0] ? ", home " : "",
	    u->home);
	return 0;
}

/* Delete a user; the caller drops its sessions and tokens. */
int
auth_user_del(const char *name, char *err, size_t errsz)
{
	struct user	*u;

	if ((u = auth_find(name)) == NULL) {
		snprintf(err, errsz, "no such user %s",
		    auth_name_valid(name) ? name : "(invalid name)");
		return -1;
	}
	switch (store->user_delete(name)) {
	case -1:
		snprintf(err, errsz, "%s: %s", store->where, store->error());
		return -1;
	case 0:
		/* Deleted on another host first: gone here too. */
		auth_forget(u);
		snprintf(err, errsz, "no such user %s", name);
		return -1;
	}
	TAILQ_REMOVE(&auth_users, u, entry);
	log_info("user %s deleted", u->name);
	auth_user_free(u);
	return 0;
}

/* Set a user's password. */
int
auth_user_passwd(const char *name, const char *password, char *err,
    size_t errsz)
{
	struct user	*u;
	char		 hash[AUTH_ENCODED_MAX], *old;

	if ((u = auth_find(name)) == NULL) {
		snprintf(err, errsz, "no such user %s",
		    auth_name_valid(name) ? name : "(invalid name)");
		return -1;
	}
	if (!auth_password_valid(password, err, errsz))
		return -1;
	if (auth_hash_password(password, hash, sizeof hash) == -1) {
		snprintf(err, errsz, "cannot hash the password");
		return -1;
	}
	old = u->hash;
	if ((u->hash = strdup(hash)) == NULL)
		fatal("%s", __func__);
	if (auth_store_user(u, err, errsz) == -1) {
		free(u->hash);
		u->hash = old;
		return -1;
	}
	free(old);
	log_info("user %s: password changed", name);
	return 0;
}

/* The first user, in the file's order, or NULL. */
struct user *
auth_user_first(void)
{
	return TAILQ_FIRST(&auth_users);
}

/* The user after u, or NULL. */
struct user *
auth_user_next(struct user *u)
{
	return TAILQ_NEXT(u, entry);
}

/*
 * Replace a user's egress additions (allow, an array of checked patterns,
 * is taken; NULL or empty: none) and write the file: 0, or -1 with err
 * and the user unchanged.
 */
int
auth_user_egress(struct user *u, struct json_object *allow, char *err,
    size_t errsz)
{
	struct json_object	*old = u->egress_allow;

	if (allow != NULL && json_object_array_length(allow) == 0) {
		json_object_put(allow);
		allow = NULL;
	}
	u->egress_allow = allow;
	if (auth_store_user(u, err, errsz) == -1) {
		u->egress_allow = old;
		json_object_put(allow);
		return -1;
	}
	json_object_put(old);
	return 0;
}

/*
 * The users as [{"name", "role", "created" (ISO 8601), "uid", "gid",
 * "unix_user" (null unless mapped), and in a fleet "home" (null until
 * placed)}], without hashes.
 */
struct json_object *
auth_user_list(void)
{
	struct json_object	*arr, *o;
	struct user		*u;
	char			 when[32];

	arr = json_object_new_array();
	TAILQ_FOREACH(u, &auth_users, entry) {
		iso8601(u->created, when);
		o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(u->name));
		json_object_object_add(o, "role",
		    json_object_new_string(u->admin ? "admin" : "user"));
		json_object_object_add(o, "created",
		    json_object_new_string(when));
		json_object_object_add(o, "uid", json_object_new_int64(u->uid));
		json_object_object_add(o, "gid", json_object_new_int64(u->gid));
		json_object_object_add(o, "unix_user", u->unix_user != NULL ?
		    json_object_new_string(u->unix_user) : NULL);
		/* a fleet's users: the home host, null until placed */
		if (store->home_claim != NULL)
			json_object_object_add(o, "home", u->home[0] != '\0' ?
			    json_object_new_string(u->home) : NULL);
		json_object_array_add(arr, o);
	}
	return arr;
}

/*
 * The user when name and password match, else NULL. Exactly one argon2id
 * verification runs whatever the outcome, against a dummy hash when the
 * user is unknown, so the time taken does not tell who exists.
 */
struct user *
auth_verify(const char *name, const char *password)
{
	struct user	*u;
	const char	*hash;
	size_t		 len;
	int		 ok;

	u = auth_find(name);
	hash = u != NULL ? u->hash : auth_dummy;
	if (password == NULL)
		password = "";
	len = strnlen(password, PASSWORD_MAX + 1);
	if (len > PASSWORD_MAX)
		len = PASSWORD_MAX;	/* still pay for one verification */
	if (hash[0] == '\0')
		return NULL;	/* auth_init never ran */
	ok = argon2id_verify(hash, password, len) == ARGON2_OK;
	if (!ok || u == NULL || len < PASSWORD_MIN ||
	    password[len] != '\0')
		return NULL;
	return u;
}
