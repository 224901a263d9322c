/*
 * libFuzzer target for the protocol table's validator (common/proto.c):
 * proto_validate, the pure check that common/ipc.c runs on every message
 * before any handler, against the real table of every message type, and
 * proto_check_reply on replies. The input is: one byte choosing the
 * sender (bits 0-1), the receiver (bits 2-3) and a number of fds (bits
 * 4-5); one byte choosing the table row whose reply schema a reply is
 * checked against; then the message, JSON text. Besides the sanitizers it
 * checks: an error is one printable line; a message that passes is of a
 * row from that sender to that receiver, carries fds only where the row
 * allows them and an id unless it is one-way, and every field of the row
 * holds what its kind promises the handlers (checked here again, apart
 * from proto.c); and it still passes once re-serialized, as when relayed.
 */
#include <arpa/inet.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
void	fuzz_det_reset(void);

/* Abort unless msg is a non-empty line of printable text. */
static void
fuzz_check_message(const char *msg)
{
	const unsigned char	*p;

	if (*msg == '\0')
		abort();
	for (p = (const unsigned char *)msg; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f)
			abort();
}

/* Whether a string value holds what kind k promises (apart from proto.c). */
static int
fuzz_string_ok(const struct proto_field *f, const char *s, size_t len)
{
	unsigned char	a[16];
	size_t		i;

	if (memchr(s, '\0', len) != NULL)
		return 0;
	switch (f->kind) {
	case PK_STRING:
		return (long long)len >= f->min && (long long)len <= f->max;
	case PK_PATH:
		for (i = 0; i < len; i++)
			if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
				return 0;
		return (long long)len <= f->max;
	case PK_ADDRESS:
		return inet_pton(AF_INET, s, a) == 1 ||
		    inet_pton(AF_INET6, s, a) == 1;
	case PK_USER:
		if (len < 1 || len > 32 || strchr("abcdefghijklmnopqrstuvwxyz_",
		    s[0]) == NULL)
			return 0;
		return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_.-") ==
		    len;
	case PK_HEX:
		return (long long)len == f->max &&
		    strspn(s, "0123456789abcdef") == len;
	case PK_ENUM:
		for (i = 0; f->choices[i] != NULL; i++)
			if (strcmp(s, f->choices[i]) == 0)
				return 1;
		return 0;
	default:
		return 1;
	}
}

/* Whether obj holds every field as promised; recursive for objects. */
static int
fuzz_fields_ok(const struct proto_field *fields, struct json_object *obj)
{
	const struct proto_field	*f;
	struct json_object		*v, *e;
	size_t				 i, n;

	for (f = fields; f != NULL && f->name != NULL; f++) {
		if (!json_object_object_get_ex(obj, f->name, &v) || v == NULL) {
			if (f->flags & PF_REQ)
				return 0;
			continue;
		}
		switch (f->kind) {
		case PK_ANY:
			break;
		case PK_INT:
			if (!json_object_is_type(v, json_type_int) ||
			    json_object_get_int64(v) < f->min ||
			    json_object_get_int64(v) > f->max)
				return 0;
			break;
		case PK_BOOL:
			if (!json_object_is_type(v, json_type_boolean))
				return 0;
			break;
		case PK_OBJECT:
			if (!json_object_is_type(v, json_type_object) ||
			    !fuzz_fields_ok(f->sub, v))
				return 0;
			break;
		case PK_ARRAY:
		case PK_STRINGS:
			if (!json_object_is_type(v, json_type_array))
				return 0;
			n = json_object_array_length(v);
			if ((long long)n > (f->kind == PK_ARRAY ? f->max :
			    f->min))
				return 0;
			for (i = 0; f->kind == PK_STRINGS && i < n; i++) {
				e = json_object_array_get_idx(v, i);
				if (!json_object_is_type(e, json_type_string) ||
				    memchr(json_object_get_string(e), '\0',
				    json_object_get_string_len(e)) != NULL ||
				    json_object_get_string_len(e) > f->max)
					return 0;
			}
			break;
		default:
			if (!json_object_is_type(v, json_type_string) ||
			    !fuzz_string_ok(f, json_object_get_string(v),
			    json_object_get_string_len(v)))
				return 0;
		}
	}
	return 1;
}

/* Parse len bytes of JSON text: an object, or NULL. */
static struct json_object *
fuzz_parse(const char *text, size_t len)
{
	struct json_tokener	*tok;
	struct json_object	*o;

	if ((tok = json_tokener_new()) == NULL)
		abort();
	o = json_tokener_parse_ex(tok, text, len);
	json_tokener_free(tok);
	return o;
}

/* One message checked by the validator, and the checks of its verdict. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct proto_msg	*pm, *row;
	struct json_object	*obj, *again, *v;
	const char		*text;
	char			 err[512];
	unsigned		 from, to;
	size_t			 nrows;
	int			 nfds, rc, rc2;

	fuzz_det_reset();
	if (size < 2)
		return 0;
	from = 1U << (data[0] & 3);
	to = 1U << ((data[0] >> 2) & 3);
	nfds = (data[0] >> 4) & 3;
	for (nrows = 0; proto_msgs[nrows].type != NULL; nrows++)
		;
	row = &proto_msgs[data[1] % nrows];
	if ((obj = fuzz_parse((const char *)data + 2, size - 2)) == NULL)
		return 0;

	err[0] = '\0';
	rc = proto_check(proto_msgs, obj, from, to, nfds, &pm, err,
	    sizeof(err));
	if (rc == -1)
		fuzz_check_message(err);
	else if (rc != 0)
		abort();
	else if (pm != NULL) {
		if (proto_find(proto_msgs, pm->type, from, to) != pm ||
		    (pm->from & from) == 0 || pm->to != to ||
		    strcmp(pm->type, json_str(obj, "type")) != 0 ||
		    (nfds > 0 && (pm->flags & PM_FDS) == 0) ||
		    !fuzz_fields_ok(pm->fields, obj))
			abort();
		if ((pm->flags & PM_EVENT) == 0 &&
		    (!json_object_object_get_ex(obj, "id", &v) ||
		    !json_object_is_type(v, json_type_int) ||
		    json_object_get_int64(v) < 0))
			abort();
	}
	if (rc == 0 && proto_validate(obj, from, to, nfds, err,
	    sizeof(err)) != 0)
		abort();

	/*
	 * What passed still passes as ipc.c would send it on (the other way
	 * round need not hold: json-c reads "2e" as a double, writes it 2).
	 */
	text = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
	if ((again = json_tokener_parse(text)) == NULL)
		abort();
	rc2 = proto_validate(again, from, to, nfds, err, sizeof(err));
	if (rc == 0 && rc2 != 0) {
		fprintf(stderr, "verdict %d on the input, %d on %s\n", rc, rc2,
		    text);
		abort();
	}
	json_object_put(again);

	/* As a reply to a request of row. */
	err[0] = '\0';
	if (json_object_is_type(obj, json_type_object) &&
	    proto_check_reply(row, obj, err, sizeof(err)) == -1)
		fuzz_check_message(err);
	json_object_put(obj);
	return 0;
}
