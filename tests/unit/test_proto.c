/*
 * Unit tests of common/proto.c: the one message table and its validator,
 * proto_validate, a pure function (message in, error or ok out), with a
 * case for each field kind.
 */
#include <sys/types.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"

static char	 err[300];

/* Validate a JSON text as sent from one role to another, with nfds fds. */
static int
check(const char *json, unsigned from, unsigned to, int nfds)
{
	struct json_object	*o;
	int			 rc;

	err[0] = '\0';
	o = json_tokener_parse(json);
	assert_non_null(o);
	rc = proto_validate(o, from, to, nfds, err, sizeof(err));
	json_object_put(o);
	return rc;
}

/* Refused, and the error names what. */
#define REFUSED(json, link, what) do {					\
	assert_int_equal(check(json, link, 0), -1);			\
	if (strstr(err, what) == NULL)					\
		fail_msg("%s: error \"%s\" does not name %s", json, err, \
		    what);						\
} while (0)
#define OK(json, link) do {						\
	if (check(json, link, 0) != 0)					\
		fail_msg("%s refused: %s", json, err);			\
} while (0)

#define FB	ROLE_FRONTD, ROLE_BROKERD
#define HB	ROLE_HGCTL, ROLE_BROKERD
#define BS	ROLE_BROKERD, ROLE_SANDBOXD

static void
test_type_sender_id_fds(void **state)
{
	REFUSED("{\"type\": \"nope\", \"id\": 1}", FB, "unknown");
	REFUSED("{\"type\": 7, \"id\": 1}", FB, "type");
	REFUSED("{\"id\": 1}", FB, "no type");
	/* hgctl's request from frontd; sandboxd's from frontd. */
	REFUSED("{\"type\": \"user_add\", \"id\": 1, \"name\": \"x\", "
	    "\"password\": \"p\"}", FB, "may not be sent by frontd");
	REFUSED("{\"type\": \"spawn\", \"id\": 1}", FB, "unknown");
	REFUSED("{\"type\": \"mode_get\"}", FB, "no id");
	OK("{\"type\": \"front_info\", \"version\": \"1\"}", FB);
	assert_int_equal(check("{\"type\": \"status\", \"id\": 1}",
	    FB, 1), -1);
	assert_non_null(strstr(err, "fds"));
	assert_int_equal(check("{\"type\": \"run\", \"id\": 1, \"command\": "
	    "\"id\"}", FB, 1), 0);
	/* The same name, two rows: hgctl's status and frontd's. */
	OK("{\"type\": \"status\", \"id\": 1}", HB);
	OK("{\"type\": \"status\", \"id\": 1, \"auth\": {}}", FB);
	/* A reply passes here; proto_check_reply checks it. */
	OK("{\"id\": 1, \"result\": {}}", BS);
}

static void
test_kind_address(void **state)
{
	static const char *const bad[] = { "not-an-address\\r\\n", "",
	    "localhost", "1.2.3", "127.0.0.1 ", " 127.0.0.1", "127.0.0.1\\n",
	    "0x7f.0.0.1", "::1%lo", "[::1]", "1.2.3.4:80", NULL };
	char	 buf[128];
	size_t	 i;

	for (i = 0; bad[i] != NULL; i++) {
		snprintf(buf, sizeof(buf), "{\"type\": \"login\", \"id\": 1, "
		    "\"username\": \"a\", \"password\": \"b\", \"client\": "
		    "\"%s\"}", bad[i]);
		REFUSED(buf, FB, "\"client\" must be a numeric IPv4 or IPv6");
	}
	REFUSED("{\"type\": \"login\", \"id\": 1, \"username\": \"a\", "
	    "\"password\": \"b\", \"client\": 2130706433}", FB, "client");
	REFUSED("{\"type\": \"login\", \"id\": 1, \"username\": \"a\", "
	    "\"password\": \"b\"}", FB, "\"client\" is required");
	OK("{\"type\": \"login\", \"id\": 1, \"username\": \"a\", "
	    "\"password\": \"b\", \"client\": \"127.0.0.1\"}", FB);
	OK("{\"type\": \"login\", \"id\": 1, \"username\": \"a\", "
	    "\"password\": \"b\", \"client\": \"::ffff:10.0.0.1\"}", FB);
	/* Every request of frontd that names a client. */
	REFUSED("{\"type\": \"status\", \"id\": 1, \"client\": \"x\"}", FB,
	    "client");
	REFUSED("{\"type\": \"run\", \"id\": 1, \"client\": \"x\"}", FB,
	    "client");
}

static void
test_kind_user_hex_int(void **state)
{
	static const char *const users[] = { "Root", "../x", "", "9lives",
	    "a b", "abcdefghijabcdefghijabcdefghijabc", NULL };
	char	 buf[256];
	size_t	 i;

	for (i = 0; users[i] != NULL; i++) {
		snprintf(buf, sizeof(buf), "{\"type\": \"usage\", \"id\": 1, "
		    "\"user\": \"%s\"}", users[i]);
		REFUSED(buf, BS, "\"user\" must be a user name");
	}
	OK("{\"type\": \"usage\", \"id\": 1, \"user\": \"al_ice.2-x\"}", BS);
	REFUSED("{\"type\": \"grant\", \"id\": 1, \"user\": \"a\", "
	    "\"session\": \"0123456789abcdef0123456789abcde\", "
	    "\"deadline_ms\": 0}", BS, "\"session\" must be 32");
	REFUSED("{\"type\": \"grant\", \"id\": 1, \"user\": \"a\", "
	    "\"session\": \"0123456789ABCDEF0123456789abcdef\", "
	    "\"deadline_ms\": 0}", BS, "session");
	REFUSED("{\"type\": \"grant\", \"id\": 1, \"user\": \"a\", "
	    "\"session\": \"0123456789abcdef0123456789abcdef\", "
	    "\"deadline_ms\": -1}", BS, "\"deadline_ms\" must be from 0");
	REFUSED("{\"type\": \"grant\", \"id\": 1, \"user\": \"a\", "
	    "\"session\": \"0123456789abcdef0123456789abcdef\", "
	    "\"deadline_ms\": \"5\"}", BS, "\"deadline_ms\" must be an integer");
	REFUSED("{\"type\": \"grant\", \"id\": 1, \"user\": \"a\", "
	    "\"session\": \"0123456789abcdef0123456789abcdef\", "
	    "\"deadline_ms\": 1.5}", BS, "deadline_ms");
	OK("{\"type\": \"grant\", \"id\": 1, \"user\": \"a\", "
	    "\"session\": \"0123456789abcdef0123456789abcdef\", "
	    "\"deadline_ms\": 0}", BS);
	REFUSED("{\"type\": \"grant\", \"id\": 1, \"user\": \"a\", "
	    "\"session\": \"0123456789abcdef0123456789abcdef\", "
	    "\"deadline_ms\": 9223372036854775808}", BS, "deadline_ms");
	REFUSED("{\"type\": \"terminal_create\", \"id\": 1, \"cols\": 1001}",
	    FB, "\"cols\" must be from 2 to 1000");
}

static void
test_kind_string_bool_path_object_array(void **state)
{
	char	buf[512];

#define KILL "{\"type\": \"admin_kill\", \"id\": 1, \"terminal\": " \
	    "\"0123456789abcdef\", "
	REFUSED(KILL "\"host\": \"\"}", FB, "\"host\" must be 1 to 32 bytes");
	REFUSED(KILL "\"host\": \"abcdefghijabcdefghijabcdefghijabc\"}", FB,
	    "host");
	REFUSED(KILL "\"host\": \"a\\u0000b\"}", FB, "NUL");
	OK(KILL "\"host\": \"h1\"}", FB);
#undef KILL
	REFUSED("{\"type\": \"mode_set\", \"id\": 1, \"mode\": \"a\\u0000b\"}",
	    FB, "NUL");
	REFUSED("{\"type\": \"mode_set\", \"id\": 1}", FB,
	    "\"mode\" is required");
	/* null counts as absent: required, it is missing. */
	REFUSED("{\"type\": \"mode_set\", \"id\": 1, \"mode\": null}", FB,
	    "\"mode\" is required");
	REFUSED("{\"type\": \"user_add\", \"id\": 1, \"name\": \"m\", "
	    "\"password\": \"p\", \"admin\": \"yes\"}", HB,
	    "\"admin\" must be true or false");
	REFUSED("{\"type\": \"run\", \"id\": 1, \"cwd\": \"a\\nb\"}", FB,
	    "\"cwd\" must be a path");
	OK("{\"type\": \"run\", \"id\": 1, \"cwd\": null}", FB);
	REFUSED("{\"type\": \"status\", \"id\": 1, \"auth\": \"alice\"}", FB,
	    "\"auth\" must be an object");
	REFUSED("{\"type\": \"status\", \"id\": 1, \"auth\": {\"cookie\": 1}}",
	    FB, "in \"auth\": \"cookie\" must be a string");
	REFUSED("{\"type\": \"run\", \"id\": 1, \"env\": [1]}", FB,
	    "\"env\" must be an object");
	REFUSED("{\"type\": \"spawn\", \"id\": 1, \"kind\": \"command\", "
	    "\"mode\": \"sandbox\", \"permission\": \"read-only\", \"user\": "
	    "\"a\", \"argv\": [\"/bin/id\", 3]}", BS, "\"argv\" must hold "
	    "strings");
	REFUSED("{\"type\": \"spawn\", \"id\": 1, \"kind\": \"command\", "
	    "\"mode\": \"sandbox\", \"permission\": \"read-only\", \"user\": "
	    "\"a\", \"argv\": \"/bin/id\"}", BS, "\"argv\" must be an array");
	snprintf(buf, sizeof(buf), "{\"type\": \"spawn\", \"id\": 1, \"kind\": "
	    "\"command\", \"mode\": \"sandbox\", \"permission\": \"read-only\", "
	    "\"user\": \"a\", \"argv\": [\"/bin/id\"], \"env\": [%s\"x\"]}",
	    "\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", "
	    "\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", "
	    "\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", "
	    "\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", "
	    "\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", "
	    "\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", "
	    "\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", "
	    "\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", ");
	REFUSED(buf, BS, "\"env\" has more than 64 items");
	OK("{\"type\": \"spawn\", \"id\": 1, \"kind\": \"command\", "
	    "\"mode\": \"sandbox\", \"permission\": \"read-only\", \"user\": "
	    "\"a\", \"argv\": [\"/bin/id\"], \"session\": null}", BS);
}

/* Parse a reply and check it as the answer to type from brokerd to to. */
static int
check_reply(const char *type, unsigned to, const char *json)
{
	struct json_object	*o;
	int			 rc;

	o = json_tokener_parse(json);
	assert_non_null(o);
	rc = proto_check_reply(proto_find(proto_msgs, type, ROLE_BROKERD, to),
	    o, err, sizeof(err));
	json_object_put(o);
	return rc;
}

static void
test_sandboxd_replies(void **state)
{
	assert_int_equal(check_reply("spawn", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"result\": {\"id\": \"0123456789abcdef\", \"mode\": \"sandbox\", "
	    "\"exit_code\": 0, \"signal\": null, \"stdout_len\": 3, "
	    "\"where\": {}}}"), 0);
	assert_int_equal(check_reply("spawn", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"result\": {\"mode\": \"sandbox\"}}"), -1);
	assert_non_null(strstr(err, "\"id\""));
	assert_int_equal(check_reply("spawn", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"result\": {\"id\": \"0123456789abcdef\", \"mode\": \"sandbox\", "
	    "\"stdout_len\": -5}}"), -1);
	assert_int_equal(check_reply("spawn", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"result\": \"done\"}"), -1);
	assert_int_equal(check_reply("usage", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"result\": {\"memory\": \"lots\"}}"), -1);
	assert_int_equal(check_reply("usage", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"result\": {\"memory\": {\"current\": 1}, \"disk\": null}}"), 0);
	assert_int_equal(check_reply("health", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"error\": {\"code\": \"internal\", \"message\": \"x\"}}"), 0);
	assert_int_equal(check_reply("health", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"error\": {\"message\": \"x\"}}"), -1);
	assert_int_equal(check_reply("health", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"result\": {}}"), -1);
}

/* Every row is on one of the seven links, and its fields are well-formed. */
static void
test_table_well_formed(void **state)
{
	const struct proto_msg		*pm, *q;
	const struct proto_field	*f;
	int				 n = 0;

	for (pm = proto_msgs; pm->type != NULL; pm++, n++) {
		assert_true((pm->from == ROLE_FRONTD && pm->to ==
		    ROLE_BROKERD) || (pm->from == ROLE_HGCTL && pm->to ==
		    ROLE_BROKERD) || (pm->from == ROLE_BROKERD && pm->to ==
		    ROLE_SANDBOXD) || (pm->from == ROLE_SANDBOXD && pm->to ==
		    ROLE_BROKERD) || (pm->from == ROLE_BROKERD && pm->to ==
		    ROLE_FRONTD) || (pm->from == ROLE_SANDBOXD && pm->to ==
		    ROLE_EGRESSD) || (pm->from == ROLE_EGRESSD && pm->to ==
		    ROLE_SANDBOXD));
		assert_non_null(pm->fields);
		assert_non_null(pm->doc);
		for (q = proto_msgs; q != pm; q++)
			assert_false(strcmp(q->type, pm->type) == 0 &&
			    (q->from & pm->from) && (q->to & pm->to));
		for (f = pm->fields; f->name != NULL; f++) {
			assert_true(strcmp(f->name, "id") != 0 &&
			    strcmp(f->name, "type") != 0);
			assert_true(f->min <= f->max || f->kind == PK_STRINGS);
		}
		/*
		 * A one-way message carries fds only to egressd (a spawn's
		 * listener in egress_listen): nothing answers for them.
		 */
		if ((pm->flags & PM_EVENT) && pm->to != ROLE_EGRESSD)
			assert_int_equal(pm->flags & PM_FDS, 0);
	}
	assert_true(n >= 50);
}

/* A map with a type the table lacks, or lacking one, does not match. */
static void
h_nop(struct ipc_peer *p, struct ipc_msg *m)
{
}

static void
test_maps_must_match(void **state)
{
	static const struct ipc_handler extra[] = {
		{ "event", h_nop }, { "made_up", h_nop }, { NULL, NULL }
	};
	static const struct ipc_handler missing[] = { { NULL, NULL } };
	static const struct ipc_handler twice[] = {
		{ "event", h_nop }, { "event", h_nop }, { NULL, NULL }
	};
	static const struct ipc_handler good[] = {
		{ "event", h_nop }, { NULL, NULL }
	};

	assert_int_equal(ipc_handlers_match(proto_msgs, extra, ROLE_FRONTD,
	    ROLE_BROKERD, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "made_up"));
	assert_int_equal(ipc_handlers_match(proto_msgs, missing, ROLE_FRONTD,
	    ROLE_BROKERD, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no handler for \"event\""));
	assert_int_equal(ipc_handlers_match(proto_msgs, twice, ROLE_FRONTD,
	    ROLE_BROKERD, err, sizeof(err)), -1);
	assert_int_equal(ipc_handlers_match(proto_msgs, good, ROLE_FRONTD,
	    ROLE_BROKERD, err, sizeof(err)), 0);
	/* brokerd's front map handles no hgctl type. */
	assert_int_equal(ipc_handlers_match(proto_msgs, good, ROLE_BROKERD,
	    ROLE_HGCTL, err, sizeof(err)), -1);
}

/* Send a message through proto_check as it arrives, and its error. */
#define SPAWN(more) "{\"type\": \"spawn\", \"id\": 1, \"kind\": " \
	"\"command\", \"mode\": \"sandbox\", \"permission\": " \
	"\"read-only\", \"user\": \"a\", \"argv\": [\"/bin/id\"]" more "}"

/*
 * An enumerated field takes its choices only, and the refusal lists
 * them: handlers (sandboxd's spawn and file, brokerd's mode_set and
 * permission_set...) no longer look at other values.
 */
static void
test_kind_enum(void **state)
{
	static const struct {
		const char	*json;
		unsigned	 from, to;
		const char	*what;
	} bad[] = {
		{ "{\"type\": \"mode_set\", \"id\": 1, \"mode\": \"root\"}",
		    FB, "\"mode\" must be one of \"sandbox\", \"direct\", "
		    "not \"root\"" },
		{ "{\"type\": \"mode_set\", \"id\": 1, \"mode\": \"\"}", FB,
		    "\"mode\" must be one of" },
		/* case and prefixes are not a choice */
		{ "{\"type\": \"mode_set\", \"id\": 1, \"mode\": \"Direct\"}",
		    FB, "\"mode\" must be one of" },
		{ "{\"type\": \"mode_set\", \"id\": 1, \"mode\": "
		    "\"directx\"}", FB, "\"mode\" must be one of" },
		{ "{\"type\": \"mode_set\", \"id\": 1, \"mode\": 1}", FB,
		    "\"mode\" must be a string" },
		{ "{\"type\": \"permission_set\", \"id\": 1, \"permission\": "
		    "\"workspace-write+root\"}", FB, "\"read-only+allowlist\"" },
		{ "{\"type\": \"run\", \"id\": 1, \"lang\": \"perl\"}", FB,
		    "\"lang\" must be one of \"python\"" },
		{ "{\"type\": \"admin_audit\", \"id\": 1, \"decision\": "
		    "\"maybe\"}", FB, "\"decision\" must be one of" },
		{ "{\"type\": \"egress_set\", \"id\": 1, \"scope\": \"all\", "
		    "\"target\": \"a\", \"allow\": []}", HB,
		    "\"scope\" must be one of \"user\", \"session\"" },
		{ "{\"type\": \"file\", \"id\": 1, \"op\": \"chmod\", "
		    "\"user\": \"a\", \"path\": \"x\"}", BS,
		    "\"op\" must be one of \"read\", \"list\", \"write\", "
		    "\"mkdir\", \"delete\"" },
		{ "{\"type\": \"kill_session\", \"id\": 1, \"session\": "
		    "\"0123456789abcdef0123456789abcdef\", \"mode\": \"all\"}",
		    BS, "\"mode\" must be one of" },
		{ "{\"type\": \"egress_log\", \"kind\": \"connect\", "
		    "\"spawn\": \"0123456789abcdef\", \"user\": \"a\", "
		    "\"host\": \"h\", \"port\": 1, \"verdict\": \"ok\", "
		    "\"bytes_up\": 0, \"bytes_down\": 0, \"duration_ms\": 0, "
		    "\"count\": 1}", ROLE_EGRESSD, ROLE_SANDBOXD,
		    "\"verdict\" must be one of \"allowed\", \"refused\"" },
		{ "{\"type\": \"event\", \"seq\": 1, \"event\": \"boom\"}",
		    ROLE_BROKERD, ROLE_FRONTD, "\"event\" must be one of" },
		{ SPAWN(", \"kind\": \"daemon\""), BS, "\"kind\" must be one of "
		    "\"command\", \"terminal\"" },
		/* a member given twice: json-c keeps the last one */
		{ SPAWN(", \"mode\": \"host\""), BS, "\"mode\" must be one of" },
		{ SPAWN(", \"permission\": \"full\""), BS,
		    "\"permission\" must be one of" },
	};
	char	 buf[300], json[512];
	size_t	 i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(check(bad[i].json, bad[i].from, bad[i].to, 0),
		    -1);
		if (strstr(err, bad[i].what) == NULL)
			fail_msg("%s: error \"%s\" does not name %s",
			    bad[i].json, err, bad[i].what);
	}
	/* Garbage is cut short and escaped in the error, never copied. */
	memset(buf, 'x', sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';
	buf[0] = '\\';
	buf[1] = 'n';
	snprintf(json, sizeof(json), "{\"type\": \"mode_set\", \"id\": 1, "
	    "\"mode\": \"%.200s\"}", buf);
	REFUSED(json, FB, "\"mode\" must be one of");
	assert_non_null(strstr(err, "\\n"));
	assert_null(strchr(err, '\n'));
	assert_true(strlen(err) < 150);
	OK("{\"type\": \"mode_set\", \"id\": 1, \"mode\": \"direct\"}", FB);
	OK("{\"type\": \"permission_set\", \"id\": 1, \"permission\": "
	    "\"read-only+allowlist\"}", FB);
	OK("{\"type\": \"admin_audit\", \"id\": 1, \"decision\": "
	    "\"denied\"}", FB);
	OK(SPAWN(", \"kind\": \"terminal\", \"mode\": \"direct\""), BS);
	/* an error reply's code is one of proto.h's */
	assert_int_equal(check_reply("health", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"error\": {\"code\": \"oops\", \"message\": \"x\"}}"), -1);
	assert_non_null(strstr(err, "\"code\" must be one of"));
	assert_int_equal(check_reply("health", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"error\": {\"code\": \"no_space\", \"message\": \"x\"}}"),
	    0);
}

/*
 * Every integer has a bound that the receiver takes: no INT64_MAX left
 * to be cast to an int, and each bound refused one past it.
 */
static void
test_int_bounds(void **state)
{
	const struct proto_msg		*pm;
	const struct proto_field	*f;

	for (pm = proto_msgs; pm->type != NULL; pm++)
		for (f = pm->fields; f->name != NULL; f++)
			if (f->kind == PK_INT && (f->max >= INT64_MAX / 2 ||
			    f->min <= INT64_MIN / 2))
				fail_msg("%s: \"%s\" has no real bound",
				    pm->type, f->name);
	REFUSED(SPAWN(", \"timeout_ms\": 86400001"), BS,
	    "\"timeout_ms\" must be from 1 to 86400000");
	OK(SPAWN(", \"timeout_ms\": 86400000"), BS);
	/* once cast to an int, this was 1 ms */
	REFUSED(SPAWN(", \"timeout_ms\": 4294967297"), BS, "timeout_ms");
	REFUSED(SPAWN(", \"output_cap\": 16777217"), BS, "output_cap");
	REFUSED(SPAWN(", \"output_cap\": 0"), BS, "output_cap");
	REFUSED(SPAWN(", \"deadline_ms\": 253402300800000"), BS,
	    "deadline_ms");
	REFUSED("{\"type\": \"run\", \"id\": 1, \"timeout\": 86401}", FB,
	    "\"timeout\" must be from 1 to 86400");
	REFUSED("{\"type\": \"file_write\", \"id\": 1, \"path\": \"a\", "
	    "\"size\": 1099511627777}", FB, "\"size\"");
	REFUSED("{\"type\": \"audit_show\", \"id\": 1, \"limit\": 501}", HB,
	    "\"limit\" must be from 1 to 500");
	REFUSED("{\"type\": \"audit_replay\", \"id\": 1, \"recording\": "
	    "\"0123456789abcdef\", \"offset\": 4294967297}", HB, "offset");
	REFUSED("{\"type\": \"events_subscribe\", \"id\": 1, "
	    "\"last_event_id\": 9007199254740992}", FB, "last_event_id");
	OK("{\"type\": \"events_subscribe\", \"id\": 1, "
	    "\"last_event_id\": 9007199254740991}", FB);
	/* in a reply too: a stream longer than its cap is a broken sandboxd */
	assert_int_equal(check_reply("spawn", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"result\": {\"id\": \"0123456789abcdef\", \"mode\": "
	    "\"sandbox\", \"stdout_len\": 16777217}}"), -1);
	assert_non_null(strstr(err, "stdout_len"));
}

/* A spawn's reply names what ran it: a backend, or direct. */
static void
test_reply_backend(void **state)
{
	assert_int_equal(check_reply("spawn", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"result\": {\"id\": \"0123456789abcdef\", \"mode\": "
	    "\"direct\", \"backend\": \"direct\"}}"), 0);
	assert_int_equal(check_reply("spawn", ROLE_SANDBOXD, "{\"id\": 1, "
	    "\"result\": {\"id\": \"0123456789abcdef\", \"mode\": "
	    "\"sandbox\", \"backend\": \"chroot\"}}"), -1);
	assert_non_null(strstr(err, "\"backend\" must be one of \"bwrap\""));
}

/*
 * The error codes, roles and flags the documentation is generated from:
 * every ERR_* has its row and HTTP status, every role its name.
 */
static void
test_errors_roles_flags(void **state)
{
	static const struct {
		const char	*code;
		int		 status;
	} want[] = {
		{ ERR_BAD_REQUEST, 400 }, { ERR_UNAUTHORIZED, 401 },
		{ ERR_FORBIDDEN, 403 }, { ERR_NOT_FOUND, 404 },
		{ ERR_CONFLICT, 409 }, { ERR_GONE, 410 },
		{ ERR_MISDIRECTED, 421 }, { ERR_TOO_LARGE, 413 },
		{ ERR_NO_SPACE, 507 }, { ERR_RATE_LIMITED, 429 },
		{ ERR_INTERNAL, 500 }, { ERR_UNAVAILABLE, 503 },
		{ ERR_HOST_DOWN, 503 },
	};
	const struct proto_error	*e;
	const struct proto_role		*r;
	const struct proto_flag		*f;
	size_t				 i, n = 0;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_int_equal(proto_error_status(want[i].code),
		    want[i].status);
	for (e = proto_errors; e->code != NULL; e++, n++)
		assert_true(e->doc != NULL && e->doc[0] != '\0');
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	assert_int_equal(proto_error_status("teapot"), 500);
	assert_int_equal(proto_error_status(NULL), 500);
	for (n = 0, r = proto_roles; r->role != 0; r++, n++) {
		assert_string_equal(ipc_role_name(r->role), r->name);
		assert_non_null(r->doc);
	}
	assert_int_equal(n, 5);
	for (n = 0, f = proto_flags; f->flag != 0; f++, n++)
		assert_true(strncmp(f->macro, "PM_", 3) == 0 && f->doc != NULL);
	assert_int_equal(n, 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_type_sender_id_fds),
		cmocka_unit_test(test_kind_address),
		cmocka_unit_test(test_kind_user_hex_int),
		cmocka_unit_test(test_kind_string_bool_path_object_array),
		cmocka_unit_test(test_sandboxd_replies),
		cmocka_unit_test(test_table_well_formed),
		cmocka_unit_test(test_maps_must_match),
		cmocka_unit_test(test_kind_enum),
		cmocka_unit_test(test_int_bounds),
		cmocka_unit_test(test_errors_roles_flags),
		cmocka_unit_test(test_reply_backend),
	};

	log_init("test_proto", 1);
	log_setlevel(LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
