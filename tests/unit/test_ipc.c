/*
 * Unit tests of common/ipc.c: two peers on a SOCK_SEQPACKET socketpair in
 * one event loop, and raw datagrams from a test's own end of the pair.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "child.h"

static struct event_base	*base;
static int			 ready_count, closed_count, handled;
static int			 got_fd = -1;
static struct json_object	*last_reply;
static int			 reply_calls;

static void
on_ready(struct ipc_peer *p)
{
	ready_count++;
}

static void
on_closed(struct ipc_peer *p)
{
	closed_count++;
}

static const struct ipc_peer_cbs cbs = { on_ready, on_closed };

/* "echo" answers with what it got; "takefd" keeps the fd it was sent. */
static void
h_echo(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object *res = json_object_new_object();

	handled++;
	json_object_object_add(res, "x", json_object_new_string(
	    json_str(m->obj, "x") ? json_str(m->obj, "x") : ""));
	ipc_reply(p, m, res, NULL, 0);
}

static void
h_takefd(struct ipc_peer *p, struct ipc_msg *m)
{
	handled++;
	if (m->nfds == 1) {
		got_fd = m->fds[0];
		m->fds[0] = -1;
	}
	ipc_reply(p, m, NULL, NULL, 0);
}

/* "badreply" answers with a result its reply schema refuses. */
static void
h_badreply(struct ipc_peer *p, struct ipc_msg *m)
{
	struct json_object *res = json_object_new_object();

	handled++;
	json_object_object_add(res, "x", json_object_new_int(5));
	ipc_reply(p, m, res, NULL, 0);
}

static const struct ipc_handler table[] = {
	{ "echo", h_echo },
	{ "rawecho", h_echo },
	{ "takefd", h_takefd },
	{ "badreply", h_badreply },
	{ NULL, NULL }
};

/* The protocol these tests speak instead of the real table. */
static const char *const colours[] = { "red", "green", NULL };
static const struct proto_field f_echo[] = {
	{ "x", PK_STRING, 0, 0, 8, NULL, NULL },
	{ "colour", PK_ENUM, 0, 0, 0, NULL, colours },
	{ NULL, 0, 0, 0, 0, NULL, NULL }
};
static const struct proto_field f_none[] = { { NULL, 0, 0, 0, 0, NULL, NULL } };
static const struct proto_msg test_proto[] = {
	{ "echo", ROLE_FRONTD, ROLE_BROKERD, 0, f_echo, NULL, "" },
	{ "rawecho", ROLE_FRONTD, ROLE_BROKERD, PM_RAW, f_echo, NULL, "" },
	{ "takefd", ROLE_FRONTD, ROLE_BROKERD, PM_FDS, f_none, NULL, "" },
	{ "brokeronly", ROLE_HGCTL, ROLE_BROKERD, 0, f_none, NULL, "" },
	{ "badreply", ROLE_FRONTD, ROLE_BROKERD, 0, f_none, f_echo, "" },
	{ "tell", ROLE_BROKERD, ROLE_SANDBOXD, PM_EVENT, f_echo, NULL, "" },
	{ NULL, 0, 0, 0, NULL, NULL, NULL }
};
static const struct proto_msg empty_proto[] = {
	{ NULL, 0, 0, 0, NULL, NULL, NULL }
};

static char			 last_body[256];	/* of a raw reply */
static int			 reply_order[8];	/* args, in order */

static void
on_reply(struct ipc_peer *p, struct ipc_msg *m, void *arg)
{
	if (reply_calls < 8)
		reply_order[reply_calls] = (int)(intptr_t)arg;
	reply_calls++;
	json_object_put(last_reply);
	last_reply = m ? json_object_get(m->obj) : NULL;
	last_body[0] = '\0';
	if (m != NULL && m->body != NULL)
		snprintf(last_body, sizeof(last_body), "%.*s",
		    (int)m->bodylen, m->body);
}

/* Run the loop until nothing is left to do right now. */
static void
spin(void)
{
	int i;

	for (i = 0; i < 20; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
}

static int
setup(void **state)
{
	base = event_base_new();
	ipc_proto_set(test_proto);
	/* what every test sends is checked, as in the daemons' tests */
	ipc_out_check_set(1);
	ready_count = closed_count = handled = reply_calls = 0;
	got_fd = -1;
	last_reply = NULL;
	return 0;
}

static int
teardown(void **state)
{
	json_object_put(last_reply);
	event_base_free(base);
	return 0;
}

/* A pair: server side answers table as brokerd, client side is frontd. */
static void
make_pair(struct ipc_peer **srv, struct ipc_peer **cli)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, sv), 0);
	*srv = ipc_peer_new(base, sv[0], ROLE_BROKERD, ROLE_FRONTD, table,
	    &cbs, NULL);
	*cli = ipc_peer_new(base, sv[1], ROLE_FRONTD, ROLE_BROKERD, NULL,
	    &cbs, NULL);
	spin();
}

/* A raw end: the test writes datagrams to a brokerd-side peer. */
static int
make_raw(struct ipc_peer **srv)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC,
	    0, sv), 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	*srv = ipc_peer_new(base, sv[0], ROLE_BROKERD, ROLE_FRONTD, table,
	    &cbs, NULL);
	return sv[1];
}

static void
raw_send(int fd, const char *s)
{
	assert_int_equal(send(fd, s, strlen(s), 0), (ssize_t)strlen(s));
}

/* True when the other end has closed (recv gives 0 after the hello). */
static int
raw_closed(int fd)
{
	char	buf[IPC_MAX_MSG];
	ssize_t	n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		;
	return n == 0;
}

static const char *HELLO =
    "{\"type\":\"hello\",\"version\":1,\"role\":\"frontd\"}";

static void
test_hello_and_request(void **state)
{
	struct ipc_peer		*srv, *cli;
	struct json_object	*req, *res;

	make_pair(&srv, &cli);
	assert_int_equal(ready_count, 2);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("echo"));
	json_object_object_add(req, "x", json_object_new_string("hi"));
	assert_int_equal(ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL),
	    0);
	spin();
	assert_int_equal(handled, 1);
	assert_int_equal(reply_calls, 1);
	assert_non_null(last_reply);
	assert_true(json_object_object_get_ex(last_reply, "result", &res));
	assert_string_equal(json_str(res, "x"), "hi");
	ipc_peer_free(cli);
	ipc_peer_free(srv);
}

static void
test_fd_passing(void **state)
{
	struct ipc_peer		*srv, *cli;
	struct json_object	*req;
	int			 pfd[2];
	char			 c = 0;

	make_pair(&srv, &cli);
	assert_int_equal(pipe(pfd), 0);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("takefd"));
	assert_int_equal(ipc_request(cli, req, &pfd[1], 1, 1000, on_reply,
	    NULL), 0);
	close(pfd[1]);
	spin();
	assert_true(got_fd >= 0);
	/* Received with MSG_CMSG_CLOEXEC. */
	assert_true(fcntl(got_fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(got_fd, "z", 1), 1);
	assert_int_equal(read(pfd[0], &c, 1), 1);
	assert_int_equal(c, 'z');
	close(got_fd);
	close(pfd[0]);
	ipc_peer_free(cli);
	ipc_peer_free(srv);
}

static void
test_unexpected_fd_refused(void **state)
{
	struct ipc_peer		*srv, *cli;
	struct json_object	*req, *err;
	int			 pfd[2];

	/* It sends what the receiver must refuse. */
	ipc_out_check_set(0);
	make_pair(&srv, &cli);
	assert_int_equal(pipe(pfd), 0);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("echo"));
	assert_int_equal(ipc_request(cli, req, &pfd[1], 1, 1000, on_reply,
	    NULL), 0);
	close(pfd[1]);
	spin();
	assert_int_equal(handled, 0);
	assert_true(json_object_object_get_ex(last_reply, "error", &err));
	assert_string_equal(json_str(err, "code"), ERR_BAD_REQUEST);
	/* brokerd closed its copy: the pipe's write end is gone. */
	{
		char c;
		assert_int_equal(read(pfd[0], &c, 1), 0);
	}
	close(pfd[0]);
	ipc_peer_free(cli);
	ipc_peer_free(srv);
}

static void
test_unknown_and_forbidden_types(void **state)
{
	struct ipc_peer		*srv, *cli;
	struct json_object	*req, *err;

	/* It sends what the receiver must refuse. */
	ipc_out_check_set(0);
	make_pair(&srv, &cli);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("nope"));
	ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL);
	spin();
	assert_true(json_object_object_get_ex(last_reply, "error", &err));
	/* Only hgctl may send brokeronly. */
	req = json_object_new_object();
	json_object_object_add(req, "type",
	    json_object_new_string("brokeronly"));
	ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL);
	spin();
	assert_true(json_object_object_get_ex(last_reply, "error", &err));
	assert_int_equal(handled, 0);
	/* The connection lives on. */
	assert_int_equal(closed_count, 0);
	ipc_peer_free(cli);
	ipc_peer_free(srv);
}

static void
test_garbage_drops_peer(void **state)
{
	struct ipc_peer	*srv;
	int		 fd;

	fd = make_raw(&srv);
	raw_send(fd, HELLO);
	spin();
	assert_int_equal(ready_count, 1);
	raw_send(fd, "this is not json");
	spin();
	assert_int_equal(closed_count, 1);
	assert_true(raw_closed(fd));
	close(fd);
}

static void
test_wrong_version_drops_peer(void **state)
{
	struct ipc_peer	*srv;
	int		 fd;

	fd = make_raw(&srv);
	raw_send(fd, "{\"type\":\"hello\",\"version\":999,\"role\":\"frontd\"}");
	spin();
	assert_int_equal(ready_count, 0);
	assert_true(raw_closed(fd));
	close(fd);
}

static void
test_wrong_role_drops_peer(void **state)
{
	struct ipc_peer	*srv;
	int		 fd;

	fd = make_raw(&srv);
	raw_send(fd, "{\"type\":\"hello\",\"version\":1,\"role\":\"hgctl\"}");
	spin();
	assert_int_equal(ready_count, 0);
	assert_true(raw_closed(fd));
	close(fd);
}

static void
test_request_before_hello_drops_peer(void **state)
{
	struct ipc_peer	*srv;
	int		 fd;

	fd = make_raw(&srv);
	raw_send(fd, "{\"type\":\"echo\",\"id\":1}");
	spin();
	assert_int_equal(handled, 0);
	assert_true(raw_closed(fd));
	close(fd);
}

static void
test_oversized_drops_peer(void **state)
{
	struct ipc_peer	*srv;
	char		*big;
	int		 fd, sz = IPC_MAX_MSG + 100;

	fd = make_raw(&srv);
	raw_send(fd, HELLO);
	spin();
	big = malloc(sz);
	memset(big, ' ', sz);
	big[0] = '{';
	big[sz - 1] = '}';
	assert_int_equal(send(fd, big, sz, 0), sz);
	free(big);
	spin();
	assert_int_equal(closed_count, 1);
	assert_true(raw_closed(fd));
	close(fd);
}

static void
test_hello_with_fd_drops_peer(void **state)
{
	struct ipc_peer	*srv;
	struct msghdr	 mh;
	struct iovec	 iov;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct cmsghdr	*c;
	int		 fd, one = 0;

	fd = make_raw(&srv);
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = (void *)HELLO;
	iov.iov_len = strlen(HELLO);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.buf;
	mh.msg_controllen = sizeof(cm.buf);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &one, sizeof(int));
	assert_true(sendmsg(fd, &mh, 0) > 0);
	spin();
	assert_int_equal(ready_count, 0);
	assert_true(raw_closed(fd));
	close(fd);
}

static void
test_pending_fails_on_close(void **state)
{
	struct ipc_peer		*srv, *cli;
	struct json_object	*req;

	make_pair(&srv, &cli);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("echo"));
	ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL);
	/* The server goes away before it reads the request. */
	ipc_peer_free(srv);
	spin();
	assert_int_equal(reply_calls, 1);
	assert_null(last_reply);
}

static void
test_request_timeout(void **state)
{
	struct ipc_peer		*cli;
	struct json_object	*req;
	int			 fd;

	/* A raw peer that says hello and then never answers. */
	{
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET |
		    SOCK_CLOEXEC, 0, sv), 0);
		fcntl(sv[0], F_SETFL, O_NONBLOCK);
		cli = ipc_peer_new(base, sv[0], ROLE_FRONTD, ROLE_BROKERD,
		    NULL, &cbs, NULL);
		fd = sv[1];
	}
	raw_send(fd, "{\"type\":\"hello\",\"version\":1,\"role\":\"brokerd\"}");
	spin();
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("echo"));
	assert_int_equal(ipc_request(cli, req, NULL, 0, 50, on_reply, NULL),
	    0);
	usleep(80 * 1000);
	spin();
	assert_int_equal(reply_calls, 1);
	assert_null(last_reply);
	ipc_peer_free(cli);
	close(fd);
}

/* A test's child: a brokerd-role listener at path, run as uid. */
static void
squatter(const char *path, uid_t uid, uid_t client, int ready)
{
	struct event_base	*b;
	int			 fd;

	if (setresgid(uid, uid, uid) == -1 || setresuid(uid, uid, uid) == -1)
		_exit(1);
	ipc_proto_set(empty_proto);
	b = event_base_new();
	fd = ipc_listen(path, uid, uid, 0666);
	ipc_server_new(b, fd, ROLE_BROKERD, ROLE_FRONTD, &client, 1, NULL,
	    NULL, NULL);
	(void)!write(ready, "", 1);	/* listening: connects will queue */
	close(ready);
	event_base_dispatch(b);
	_exit(0);
}

/*
 * A client checks who listens: a socket path taken by another uid (a
 * squatter) is refused, while the expected uid is served. Needs root to
 * run the listener as another user.
 */
static void
test_link_refuses_squatter(void **state)
{
	struct ipc_link	*bad, *good;
	char		 dir[] = "/tmp/hg-test-ipc-XXXXXX", path[64];
	uid_t		 nobody = 65534;
	pid_t		 pid;
	int64_t		 until;
	int		 p[2];
	char		 c;

	if (geteuid() != 0)
		skip();
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0777), 0);
	snprintf(path, sizeof(path), "%s/broker.sock", dir);
	assert_int_equal(pipe(p), 0);
	if ((pid = test_fork()) == 0) {
		close(p[0]);
		squatter(path, nobody, geteuid(), p[1]);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	ipc_proto_set(empty_proto);
	bad = ipc_link_new(base, path, ROLE_FRONTD, ROLE_BROKERD, 12345, NULL,
	    NULL, NULL);
	good = ipc_link_new(base, path, ROLE_FRONTD, ROLE_BROKERD, nobody,
	    NULL, NULL, NULL);
	/* The hello exchange, however slow the machine: a bound only. */
	until = now_mono_ms() + 60 * 1000;
	while (ipc_link_peer(good) == NULL && now_mono_ms() < until) {
		usleep(1000);
		spin();
	}
	assert_non_null(ipc_link_peer(good));
	assert_null(ipc_link_peer(bad));
	ipc_link_free(good);
	ipc_link_free(bad);
	spin();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);
	rmdir(dir);
}

/* A field of the wrong type or over its limit never reaches a handler. */
static void
test_fields_checked_before_handler(void **state)
{
	struct ipc_peer		*srv, *cli;
	struct json_object	*req, *err;

	/* It sends what the receiver must refuse. */
	ipc_out_check_set(0);
	make_pair(&srv, &cli);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("echo"));
	json_object_object_add(req, "x", json_object_new_int(1));
	ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL);
	spin();
	assert_true(json_object_object_get_ex(last_reply, "error", &err));
	assert_string_equal(json_str(err, "code"), ERR_BAD_REQUEST);
	assert_non_null(strstr(json_str(err, "message"), "\"x\""));
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("echo"));
	json_object_object_add(req, "x", json_object_new_string("123456789"));
	ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL);
	spin();
	assert_true(json_object_object_get_ex(last_reply, "error", &err));
	assert_non_null(strstr(json_str(err, "message"), "\"x\""));
	assert_int_equal(handled, 0);
	/* Within its limit it is served, and the connection lived on. */
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("echo"));
	json_object_object_add(req, "x", json_object_new_string("12345678"));
	ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL);
	spin();
	assert_int_equal(handled, 1);
	assert_int_equal(closed_count, 0);
	ipc_peer_free(cli);
	ipc_peer_free(srv);
}

/*
 * A value outside an enumerated field's choices is answered bad_request,
 * naming the field and its choices, and never reaches the handler.
 */
static void
test_enum_refused(void **state)
{
	struct ipc_peer		*srv, *cli;
	struct json_object	*req, *err;

	/* It sends what the receiver must refuse. */
	ipc_out_check_set(0);
	make_pair(&srv, &cli);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("echo"));
	json_object_object_add(req, "colour", json_object_new_string("blue"));
	ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL);
	spin();
	assert_true(json_object_object_get_ex(last_reply, "error", &err));
	assert_string_equal(json_str(err, "code"), ERR_BAD_REQUEST);
	assert_string_equal(json_str(err, "message"), "\"colour\" must be one "
	    "of \"red\", \"green\", not \"blue\"");
	assert_int_equal(handled, 0);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("echo"));
	json_object_object_add(req, "colour", json_object_new_string("green"));
	ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL);
	spin();
	assert_int_equal(handled, 1);
	assert_int_equal(closed_count, 0);
	ipc_peer_free(cli);
	ipc_peer_free(srv);
}

/* What a child sends that does not match its row: see out_aborts. */
enum out_bad { OUT_BAD_FIELD, OUT_BAD_FDS, OUT_BAD_ERROR_CODE, OUT_RELAYED,
	OUT_GOOD };

/* "echo" answers with an error code that is none of proto.h's. */
static void
h_badcode(struct ipc_peer *p, struct ipc_msg *m)
{
	ipc_reply_error(p, m, "oops", "a code no receiver knows");
}

static const struct ipc_handler badcode_table[] = {
	{ "echo", h_badcode },
	{ "rawecho", h_echo },
	{ "takefd", h_takefd },
	{ "badreply", h_badreply },
	{ NULL, NULL }
};

/*
 * In a child, send one message that does not match its row (with the
 * check on, as in every debug build): 1 when the child aborted with a
 * log line that holds want, 0 when it lived.
 */
static int
out_aborts(enum out_bad bad, const char *want)
{
	struct ipc_peer		*srv, *cli;
	struct json_object	*req;
	char			 buf[1024];
	ssize_t			 n;
	size_t			 len = 0;
	int			 pfd[2], status, sv[2];
	pid_t			 pid;

	assert_int_equal(pipe(pfd), 0);
	if ((pid = test_fork()) == 0) {
		dup2(pfd[1], STDERR_FILENO);
		ipc_out_check_set(1);
		socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0, sv);
		if (bad == OUT_BAD_ERROR_CODE || bad == OUT_RELAYED) {
			/* frontd's request, answered by brokerd */
			srv = ipc_peer_new(base, sv[0], ROLE_BROKERD,
			    ROLE_FRONTD, badcode_table, &cbs, NULL);
			cli = ipc_peer_new(base, sv[1], ROLE_FRONTD,
			    ROLE_BROKERD, NULL, &cbs, NULL);
			spin();
			req = json_object_new_object();
			json_object_object_add(req, "type",
			    json_object_new_string("echo"));
			if (bad == OUT_RELAYED)
				json_object_object_add(req, "colour",
				    json_object_new_string("blue"));
			ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL);
			spin();
			_exit(0);
		}
		/* brokerd's own event to sandboxd */
		srv = ipc_peer_new(base, sv[0], ROLE_BROKERD, ROLE_SANDBOXD,
		    NULL, &cbs, NULL);
		req = json_object_new_object();
		json_object_object_add(req, "type",
		    json_object_new_string("tell"));
		json_object_object_add(req, "colour", json_object_new_string(
		    bad == OUT_BAD_FIELD ? "blue" : "red"));
		ipc_send(srv, req, bad == OUT_BAD_FDS ? &pfd[0] : NULL,
		    bad == OUT_BAD_FDS ? 1 : 0);
		_exit(0);
	}
	close(pfd[1]);
	while (len < sizeof(buf) - 1 && (n = read(pfd[0], buf + len,
	    sizeof(buf) - 1 - len)) > 0)
		len += n;
	buf[len] = '\0';
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status))
		return 0;
	assert_int_equal(WTERMSIG(status), SIGABRT);
	if (strstr(buf, want) == NULL)
		fail_msg("the abort's log line \"%s\" does not say %s", buf,
		    want);
	return 1;
}

/*
 * A message that does not match its row aborts its sender (a debug
 * build's check, ipc_out_check_set), with a log line that says what and
 * why: a field, fds the type does not carry, an error reply's code. A
 * request of frontd passes on a client's values: brokerd checks those.
 */
static void
test_outgoing_checked(void **state)
{
	assert_true(out_aborts(OUT_BAD_FIELD, "FATAL test_ipc: protocol: "
	    "brokerd sent sandboxd a message that does not match the protocol "
	    "table: tell: \"colour\" must be one of \"red\", \"green\", not "
	    "\"blue\""));
	assert_true(out_aborts(OUT_BAD_FDS, "tell: \"tell\" carries no fds"));
	assert_true(out_aborts(OUT_BAD_ERROR_CODE, "brokerd sent frontd a "
	    "message that does not match the protocol table: echo: \"code\" "
	    "must be one of"));
	assert_false(out_aborts(OUT_RELAYED, ""));
	assert_false(out_aborts(OUT_GOOD, ""));
}

/* A reply that fails its schema reaches the caller as an internal error. */
static void
test_reply_checked(void **state)
{
	struct ipc_peer		*srv, *cli;
	struct json_object	*req, *err;

	/* It sends what the receiver must refuse. */
	ipc_out_check_set(0);
	make_pair(&srv, &cli);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("badreply"));
	ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL);
	spin();
	assert_int_equal(handled, 1);
	assert_int_equal(reply_calls, 1);
	assert_false(json_object_object_get_ex(last_reply, "result", NULL));
	assert_true(json_object_object_get_ex(last_reply, "error", &err));
	assert_string_equal(json_str(err, "code"), ERR_INTERNAL);
	ipc_peer_free(cli);
	ipc_peer_free(srv);
}

/* A peer whose other end says hello and then never reads. */
static struct ipc_peer *
make_deaf(int *fdp)
{
	struct ipc_peer	*srv;

	*fdp = make_raw(&srv);
	raw_send(*fdp, HELLO);
	spin();
	assert_int_equal(ready_count, 1);
	return srv;
}

/* A big message: type (NULL: none), and an id when it is a request. */
static struct json_object *
big_msg(const char *type)
{
	struct json_object	*o;
	char			*pad;

	pad = malloc(60000);
	memset(pad, 'p', 59999);
	pad[59999] = '\0';
	o = json_object_new_object();
	if (type != NULL)
		json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "pad", json_object_new_string(pad));
	free(pad);
	return o;
}

/*
 * Requests to a peer that never reads: the queue stops at its bound, the
 * requests past it fail to their caller, the peer stays connected.
 */
static void
test_queue_bounded_for_requests(void **state)
{
	struct ipc_peer	*srv;
	size_t		 n, most = 0;
	int		 fd, i, failed = 0;

	/* It queues types the test table lacks that way: only the bound counts. */
	ipc_out_check_set(0);
	srv = make_deaf(&fd);
	for (i = 0; i < 2000; i++) {
		if (ipc_request(srv, big_msg("echo"), NULL, 0, 100000,
		    on_reply, NULL) == -1)
			failed++;
		spin();
		if (ipc_peer_queued(srv, &n) > most)
			most = ipc_peer_queued(srv, NULL);
		assert_true(n <= IPC_QUEUE_MAX_MSGS);
	}
	assert_true(most <= IPC_QUEUE_MAX_BYTES);
	assert_true(most > IPC_QUEUE_MAX_BYTES - 70000);
	assert_true(failed > 1500);
	assert_int_equal(closed_count, 0);
	/* The failed requests got no callback: their callers knew at once. */
	assert_int_equal(reply_calls, 0);
	ipc_peer_free(srv);
	close(fd);
}

/*
 * Events to a peer that never reads: past the bound it is dropped (a link
 * would reconnect), having held no more than the bound.
 */
static void
test_queue_drops_a_slow_event_peer(void **state)
{
	struct ipc_peer	*srv;
	size_t		 most = 0;
	int		 fd, i;

	/* It queues types the test table lacks that way: only the bound counts. */
	ipc_out_check_set(0);
	srv = make_deaf(&fd);
	for (i = 0; i < 2000 && closed_count == 0; i++) {
		ipc_send(srv, big_msg("event"), NULL, 0);
		if (closed_count == 0 && ipc_peer_queued(srv, NULL) > most)
			most = ipc_peer_queued(srv, NULL);
	}
	assert_int_equal(closed_count, 1);
	assert_true(most <= IPC_QUEUE_MAX_BYTES);
	assert_true(i < 2000);
	close(fd);
}

/* A brokerd-side raw end and a frontd peer: the test plays brokerd. */
static struct ipc_peer *
make_front(int *fdp)
{
	struct ipc_peer	*cli;
	int		 sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC,
	    0, sv), 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	cli = ipc_peer_new(base, sv[0], ROLE_FRONTD, ROLE_BROKERD, NULL, &cbs,
	    NULL);
	*fdp = sv[1];
	raw_send(sv[1],
	    "{\"type\":\"hello\",\"version\":1,\"role\":\"brokerd\"}");
	spin();
	return cli;
}

/* Send n bytes as one datagram. */
static void
raw_sendn(int fd, const char *s, size_t n)
{
	assert_int_equal(send(fd, s, n, 0), (ssize_t)n);
}

/* The next datagram that is not a hello, into buf; its length. */
static ssize_t
raw_recv_reply(int fd, char *buf, size_t bufsz)
{
	ssize_t	n;

	for (;;) {
		n = recv(fd, buf, bufsz, MSG_DONTWAIT);
		assert_true(n > 0);
		if (memmem(buf, n, "\"hello\"", 7) == NULL)
			return n;
	}
}

/* A PM_RAW request's result goes as envelope, NUL, the result's text. */
static void
test_raw_reply_on_the_wire(void **state)
{
	struct ipc_peer	*srv;
	static const char want[] = "{\"id\":7,\"body\":10}\0{\"x\":\"hi\"}";
	char		 buf[512];
	ssize_t		 n;
	int		 fd;

	fd = make_raw(&srv);
	raw_send(fd, HELLO);
	raw_send(fd, "{\"type\":\"rawecho\",\"id\":7,\"x\":\"hi\"}");
	spin();
	assert_int_equal(handled, 1);
	n = raw_recv_reply(fd, buf, sizeof(buf));
	assert_int_equal(n, sizeof(want) - 1);
	assert_memory_equal(buf, want, sizeof(want) - 1);
	/* Its errors stay plain JSON; other types' results too. */
	raw_send(fd, "{\"type\":\"rawecho\",\"id\":8,\"x\":\"far too long\"}");
	spin();
	n = raw_recv_reply(fd, buf, sizeof(buf));
	assert_null(memchr(buf, '\0', n));
	assert_non_null(memmem(buf, n, "\"error\"", 7));
	raw_send(fd, "{\"type\":\"echo\",\"id\":9,\"x\":\"hi\"}");
	spin();
	n = raw_recv_reply(fd, buf, sizeof(buf));
	assert_null(memchr(buf, '\0', n));
	ipc_peer_free(srv);
	close(fd);
}

/* Between two peers: the caller gets the body as it was printed. */
static void
test_raw_reply_reaches_caller(void **state)
{
	struct ipc_peer		*srv, *cli;
	struct json_object	*req;

	make_pair(&srv, &cli);
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("rawecho"));
	json_object_object_add(req, "x", json_object_new_string("hi"));
	assert_int_equal(ipc_request(cli, req, NULL, 0, 1000, on_reply, NULL),
	    0);
	spin();
	assert_int_equal(reply_calls, 1);
	assert_string_equal(last_body, "{\"x\":\"hi\"}");
	assert_false(json_object_object_get_ex(last_reply, "result", NULL));
	ipc_peer_free(cli);
	ipc_peer_free(srv);
}

/*
 * A hostile brokerd's raw replies: a wrong length, a body that is no
 * object, an envelope with more in it, a raw body to a request without
 * PM_RAW each reach the caller as an internal error, and the link lives;
 * a raw body on a message that is not a reply drops the peer.
 */
static void
test_raw_reply_hostile(void **state)
{
	static const struct {
		const char	*type;
		const char	*dgram;
		size_t		 len;
	} cases[] = {
#define C(t, s) { t, s, sizeof(s) - 1 }
		C("rawecho", "{\"id\":1,\"body\":11}\0{\"x\":\"hi\"}"),
		C("rawecho", "{\"id\":2,\"body\":10}\0[\"x\",\"hi\"]"),
		C("rawecho", "{\"id\":3,\"body\":10}\0{\"x\":\0hi\"}"),
		C("rawecho",
		    "{\"id\":4,\"body\":10,\"result\":{}}\0{\"x\":\"hi\"}"),
		C("rawecho", "{\"id\":5}\0{\"x\":\"hi\"}"),
		C("rawecho", "{\"id\":6,\"body\":0}\0"),
		C("rawecho",
		    "{\"id\":7,\"body\":10,\"user\":\"Root\"}\0{\"x\":\"hi\"}"),
		C("echo", "{\"id\":8,\"body\":10}\0{\"x\":\"hi\"}"),
#undef C
	};
	struct ipc_peer		*cli;
	struct json_object	*req, *err;
	size_t			 i;
	int			 fd;

	cli = make_front(&fd);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		req = json_object_new_object();
		json_object_object_add(req, "type",
		    json_object_new_string(cases[i].type));
		assert_int_equal(ipc_request(cli, req, NULL, 0, 10000,
		    on_reply, NULL), 0);
		raw_sendn(fd, cases[i].dgram, cases[i].len);
		spin();
		assert_int_equal(reply_calls, (int)i + 1);
		assert_non_null(last_reply);
		assert_string_equal(last_body, "");
		assert_true(json_object_object_get_ex(last_reply, "error",
		    &err));
		assert_string_equal(json_str(err, "code"), ERR_INTERNAL);
	}
	assert_int_equal(closed_count, 0);
	/* A good one still passes after them. */
	req = json_object_new_object();
	json_object_object_add(req, "type", json_object_new_string("rawecho"));
	ipc_request(cli, req, NULL, 0, 10000, on_reply, NULL);
	raw_sendn(fd, "{\"id\":9,\"body\":10}\0{\"x\":\"hi\"}", 29);
	spin();
	assert_string_equal(last_body, "{\"x\":\"hi\"}");
	/* An event or a request with a raw body: the peer is dropped. */
	raw_sendn(fd, "{\"type\":\"x\",\"id\":3}\0{}", 22);
	spin();
	assert_int_equal(closed_count, 1);
	assert_true(raw_closed(fd));
	close(fd);
}

/*
 * Requests of several timeouts share one timer: each times out in the
 * order of its deadline, not of its sending, and one that has time left
 * still gets its answer.
 */
static void
test_timeouts_in_deadline_order(void **state)
{
	struct ipc_peer		*cli;
	struct json_object	*req;
	static const int	 ms[] = { 60, 20, 600000 };
	size_t			 i;
	int			 fd, tries;

	cli = make_front(&fd);
	for (i = 0; i < 3; i++) {
		req = json_object_new_object();
		json_object_object_add(req, "type",
		    json_object_new_string("echo"));
		assert_int_equal(ipc_request(cli, req, NULL, 0, ms[i],
		    on_reply, (void *)(intptr_t)(i + 1)), 0);
	}
	/* Until both short ones have timed out (never the long one). */
	for (tries = 0; reply_calls < 2 && tries < 10000; tries++) {
		usleep(1000);
		spin();
	}
	assert_int_equal(reply_calls, 2);
	assert_int_equal(reply_order[0], 2);
	assert_int_equal(reply_order[1], 1);
	assert_null(last_reply);
	raw_send(fd, "{\"id\":3,\"result\":{\"x\":\"late\"}}");
	spin();
	assert_int_equal(reply_calls, 3);
	assert_int_equal(reply_order[2], 3);
	assert_non_null(last_reply);
	ipc_peer_free(cli);
	close(fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hello_and_request, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_fd_passing, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_unexpected_fd_refused,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_unknown_and_forbidden_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage_drops_peer, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_wrong_version_drops_peer,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_role_drops_peer,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_request_before_hello_drops_peer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oversized_drops_peer,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_hello_with_fd_drops_peer,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_pending_fails_on_close,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_raw_reply_on_the_wire,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_raw_reply_reaches_caller,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_raw_reply_hostile, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_timeouts_in_deadline_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_request_timeout, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_link_refuses_squatter,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_fields_checked_before_handler, setup, teardown),
		cmocka_unit_test_setup_teardown(test_enum_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_outgoing_checked, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_reply_checked, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_queue_bounded_for_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_queue_drops_a_slow_event_peer, setup, teardown),
	};

	log_init("test_ipc", 1);
	log_setlevel(LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
