/*
 * A frontd for libFuzzer targets: the real HTTP server (frontd/http.c) and
 * request handling (api.c, ws.c, sse.c, static.c) on a listening unix
 * socket, with brokerd replaced by the harness. Each request frontd would
 * send to brokerd is held until the target answers it.
 */
#ifndef HG_FRONT_HARNESS_H
#define HG_FRONT_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "../../frontd/frontd.h"

/* The brokerd request frontd sent last, until fh_answer. */
struct fh_call {
	int			 pending;	/* 1 while not answered */
	struct json_object	*obj;		/* what frontd sent */
	int			 nfds;
	ipc_reply_cb		 cb;
	void			*arg;
};

/* The largest request body frontd takes (conf.max_body); over it, a 413. */
#define FH_MAX_BODY	(1024 * 1024)
#define FH_MAX_UPLOAD	(256 * 1024)	/* HOSTGATE_MAX_UPLOAD_BYTES */

extern struct fh_call	 fh_call;
extern int		 fh_sent;	/* ipc_send calls (events) */

/* Set up once: event base, logging, the HTTP server; web_dir may be NULL. */
void	 fh_init(const char *web_dir);
/* A new client connection to frontd; its fd. */
int	 fh_connect(void);
/* Write all of data on the client fd, running frontd meanwhile. */
void	 fh_write(int fd, const void *data, size_t len);
/* Run frontd's event loop until nothing more happens now. */
void	 fh_run(void);
/* Read what frontd sent the client so far into buf; the length. */
size_t	 fh_read(int fd, char *buf, size_t bufsz);
/*
 * Answer the held brokerd request with reply (a JSON text, or NULL for no
 * answer) and the given fds (closed here unless frontd took them).
 */
void	 fh_answer(const char *reply, size_t len, int *fds, int nfds);
/* Close the client and let frontd free the connection. */
void	 fh_close(int fd);
/* A memfd holding data, as brokerd's fds are (output, a file, a listing). */
int	 fh_memfd(const void *data, size_t len);

/*
 * Split data at 0xff bytes: the n-th part (from 0) into *part, its length;
 * *part is NULL when there are fewer parts.
 */
size_t	 fh_part(const uint8_t *data, size_t size, int n, const uint8_t **part);

#endif
