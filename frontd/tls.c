/*
 * TLS for frontd: the server SSL_CTX, built once at start-up while the key
 * file can still be read.
 */
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "frontd.h"

/* TLS 1.2 suites: forward secrecy and AEAD only (TLS 1.3 keeps its own). */
#define TLS_CIPHERS	"ECDHE+AESGCM:ECDHE+CHACHA20"

/* Write "what: the OpenSSL error" into err and clear OpenSSL's queue. */
static void
tls_error(char *err, size_t errsz, const char *what)
{
	unsigned long	e;
	char		buf[256];

	/* The first error queued is the cause; the later ones are context. */
	if ((e = ERR_get_error()) != 0)
		ERR_error_string_n(e, buf, sizeof buf);
	else
		snprintf(buf, sizeof buf, "unknown error");
	snprintf(err, errsz, "%s: %s", what, buf);
	ERR_clear_error();
}

/*
 * A server SSL_CTX for TLS 1.2 and later with the certificate chain cert
 * and the private key key (both PEM). On failure returns NULL with a
 * message naming the file in err.
 */
SSL_CTX *
tls_ctx_new(const char *cert, const char *key, char *err, size_t errsz)
{
	SSL_CTX	*ctx;
	char	 what[1024];

	ERR_clear_error();
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		tls_error(err, errsz, "SSL_CTX_new");
		return (NULL);
	}
	if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		tls_error(err, errsz, "cannot require TLS 1.2");
		goto fail;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
	/* Idle connections do not keep their 2 x 16 KiB of TLS buffers. */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (SSL_CTX_set_cipher_list(ctx, TLS_CIPHERS) != 1) {
		tls_error(err, errsz, "cannot set the TLS 1.2 ciphers");
		goto fail;
	}
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		snprintf(what, sizeof what, "cannot load certificate chain %s",
		    cert);
		tls_error(err, errsz, what);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_error()) == X509_R_KEY_VALUES_MISMATCH)
			goto mismatch;
		snprintf(what, sizeof what, "cannot load private key %s", key);
		tls_error(err, errsz, what);
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
mismatch:
		snprintf(what, sizeof what, "private key %s does not match "
		    "certificate %s", key, cert);
		tls_error(err, errsz, what);
		goto fail;
	}
	return (ctx);

fail:
	SSL_CTX_free(ctx);
	return (NULL);
}
