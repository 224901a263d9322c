/*
 * libFuzzer target for common/ipc.c's receiving side: the input, split at
 * each 0xff byte, arrives as datagrams on a peer that expects a frontd,
 * after (or without) a valid hello. The peer may drop the connection but
 * must never crash, leak or read out of bounds.
 */
#include <sys/types.h>
#include <sys/socket.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

void	fuzz_det_reset(void);

static struct event_base	*base;

static void
fuzz_handle(struct ipc_peer *p, struct ipc_msg *m)
{
	ipc_reply(p, m, json_object_new_object(), NULL, 0);
}

/* A small protocol of its own: ipc.c's framing is the point here. */
static const struct proto_field fuzz_fields[] = {
	{ "n", PK_INT, 0, 0, 1000, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct proto_msg fuzz_proto[] = {
	{ "ping", ROLE_FRONTD, ROLE_BROKERD, 0, fuzz_fields, NULL, "" },
	{ "withfds", ROLE_FRONTD, ROLE_BROKERD, PM_FDS, fuzz_fields, NULL, "" },
	{ "event", ROLE_FRONTD, ROLE_BROKERD, PM_EVENT, fuzz_fields, NULL, "" },
	{ NULL, 0, 0, 0, NULL, NULL, NULL }
};
static const struct ipc_handler fuzz_table[] = {
	{ "ping", fuzz_handle },
	{ "withfds", fuzz_handle },
	{ "event", fuzz_handle },
	{ NULL, NULL }
};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char	hello[] =
	    "{\"type\":\"hello\",\"version\":1,\"role\":\"frontd\"}";
	struct ipc_peer		*p;
	const uint8_t		*d, *end = data + size, *cut;
	char			 sink[IPC_MAX_MSG];
	int			 sv[2], i;

	fuzz_det_reset();

	if (base == NULL) {
		log_init("fuzz_ipc", 1);
		log_setlevel(LOG_LVL_ERROR);
		base = event_base_new();
		ipc_proto_set(fuzz_proto);
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		return 0;
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	p = ipc_peer_new(base, sv[0], ROLE_BROKERD, ROLE_FRONTD, fuzz_table,
	    NULL, NULL);
	/* An odd first byte skips the hello: the protocol's first rule. */
	if (size == 0 || (data[0] & 1) == 0)
		(void)!send(sv[1], hello, sizeof(hello) - 1, 0);
	for (d = data; d < end; d = cut + 1) {
		if ((cut = memchr(d, 0xff, end - d)) == NULL)
			cut = end;
		(void)!send(sv[1], d, cut - d, 0);
		if (cut == end)
			break;
	}
	for (i = 0; i < 8; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	while (recv(sv[1], sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
	close(sv[1]);
	for (i = 0; i < 4; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	(void)p;	/* freed by ipc.c when it saw the close */
	return 0;
}
