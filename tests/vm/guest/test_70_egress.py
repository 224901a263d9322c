"""The +allowlist profile through egressd under its unit: a command under
workspace-write+allowlist reaches a test server inside the VM (on a dummy
interface's address, taken out of the deny networks) by an allowed name,
and is refused another name and the address itself."""

import os
import socket
import subprocess

import hgvm as h

ADDR = "10.213.9.1"
HOSTS = "/etc/hostgate/egress-hosts"
TEXT = "hello through egressd\n"


def test_allowlist_reaches_server():
    h.sh("ip", "link", "add", "hgvm0", "type", "dummy")
    h.sh("ip", "addr", "add", ADDR + "/24", "dev", "hgvm0")
    h.sh("ip", "link", "set", "hgvm0", "up")
    os.makedirs("/root/www", exist_ok=True)
    with open("/root/www/hello.txt", "w") as f:
        f.write(TEXT)
    srv = subprocess.Popen(["python3", "-m", "http.server", "--bind", ADDR,
                            "--directory", "/root/www", "80"],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        h.wait_for(lambda: socket.create_connection((ADDR, 80), 5), 120,
                   "the test server")
        with open(HOSTS, "w") as f:
            f.write("%s files.test other.test\n" % ADDR)
        h.configure(HOSTGATE_EGRESS_HOSTS=HOSTS,
                    HOSTGATE_EGRESS_ALLOW="files.test",
                    HOSTGATE_EGRESS_ALLOW_NETS="10.213.9.0/24")
        s = h.SHARED["sessions"]["bob"]
        h.wait_for(lambda: s.status()["egress"]["proxy"]["ok"], 120,
                   "egressd linked to sandboxd")
        s.permission("workspace-write+allowlist")
        try:
            doc = s.run("curl -sS -m 60 http://files.test/hello.txt")
            assert doc["stdout"] == TEXT, doc
            doc = s.run("curl -sS -m 60 -o /dev/null -w '%{http_code}' "
                        "http://other.test/hello.txt", ok=False)
            assert doc["stdout"] == "403", doc
            doc = s.run("curl -sS -m 20 --noproxy '*' http://%s/hello.txt"
                        % ADDR, ok=False)
            assert doc["exit_code"] != 0 and TEXT not in doc["stdout"], doc
        finally:
            s.permission("workspace-write")
    finally:
        srv.kill()
        srv.wait()
