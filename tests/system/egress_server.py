"""The test servers of the egress tests (egresslib.py starts this in a
network namespace of its own): static files from a directory over HTTP and
over HTTPS, and a UDP echo. Prints one line, "egress_server listening ...",
once every socket listens; logs one line per request to stderr. Standard
library only.

    python3 egress_server.py --root DIR --cert PEM --key PEM
        [--bind ADDR] [--http PORT] [--https PORT] [--udp PORT]
"""

import argparse
import http.server
import os
import shutil
import signal
import socket
import ssl
import sys
import threading
import urllib.parse


class Handler(http.server.SimpleHTTPRequestHandler):
    """Static files, HTTP/1.1 keep-alive; an absolute-form target
    (http://host/path, RFC 9112 3.2.2) is served as its path."""

    protocol_version = "HTTP/1.1"
    server_version = "hg-egress-test"
    sys_version = ""

    def parse_request(self):
        if not super().parse_request():
            return False
        if "://" in self.path.split("?", 1)[0]:
            u = urllib.parse.urlsplit(self.path)
            self.path = (u.path or "/") + ("?" + u.query if u.query else "")
        return True

    def do_GET(self):
        if self.path.split("?", 1)[0] == "/whoami":
            body = ("%s %s %s\n" % (self.server.scheme, self.client_address[0],
                                    self.headers.get("Host", "-"))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def copyfile(self, source, outputfile):
        """sendfile(2) on plain sockets (the benchmark's 64 MiB file), a
        1 MiB buffer under TLS."""
        if isinstance(self.connection, ssl.SSLSocket):
            shutil.copyfileobj(source, outputfile, 1 << 20)
        else:
            self.wfile.flush()
            self.connection.sendfile(source)

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s %s %s\n" % (
            self.server.scheme, self.client_address[0],
            self.headers.get("Host", "-") if getattr(self, "headers", None)
            else "-", fmt % args))
        sys.stderr.flush()


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr, root, scheme, ctx=None):
        self.root = root
        self.scheme = scheme
        self.ctx = ctx
        super().__init__(addr, lambda *a: Handler(*a, directory=root))

    def get_request(self):
        """The TLS handshake happens in the request's thread, at its first
        read: a client that stalls never holds up accept()."""
        sock, addr = self.socket.accept()
        if self.ctx is not None:
            sock = self.ctx.wrap_socket(sock, server_side=True,
                                        do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        sys.stderr.write("%s %s error: %s\n" % (self.scheme, client_address[0],
                                                sys.exc_info()[1]))
        sys.stderr.flush()


def udp_echo(sock):
    """Answer every datagram with "echo:" and its bytes."""
    while True:
        data, peer = sock.recvfrom(65536)
        sock.sendto(b"echo:" + data, peer)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--bind", default="0.0.0.0")
    ap.add_argument("--http", type=int, default=80)
    ap.add_argument("--https", type=int, default=443)
    ap.add_argument("--udp", type=int, default=53)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    plain = Server((args.bind, args.http), args.root, "http")
    tls = Server((args.bind, args.https), args.root, "https", ctx)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((args.bind, args.udp))
    for target, arg in ((plain.serve_forever, ()), (tls.serve_forever, ()),
                        (udp_echo, (udp,))):
        threading.Thread(target=target, args=arg, daemon=True).start()
    print("egress_server listening http %s:%d https %s:%d udp %s:%d"
          % (args.bind, plain.server_address[1], args.bind,
             tls.server_address[1], args.bind, udp.getsockname()[1]),
          flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
