"""frontd on port 0: the address it got, in RUN_DIR/frontd.listen and in
its log, and what a restart or a failed bind does to that file."""

import os
import socket
import stat
import subprocess

import pytest

import hglib


def listen_text(hg):
    with open(hg.listen_path()) as f:
        return f.read()


def test_listen_file_names_the_port_frontd_got(hostgate_factory):
    hg = hostgate_factory()
    assert hg.env["HOSTGATE_LISTEN"] == "127.0.0.1:0"
    text = listen_text(hg)
    assert text == "127.0.0.1:%d\n" % hg.port, text
    st = os.stat(hg.listen_path())
    assert stat.S_IMODE(st.st_mode) == 0o644, oct(st.st_mode)
    assert "listening on 127.0.0.1:%d" % hg.port in hg.log_text("frontd")
    assert hg.health().status == 200
    # No temporary file is left next to it.
    assert [n for n in os.listdir(hg.run) if "frontd.listen" in n] == \
        ["frontd.listen"]


def test_restarted_frontd_writes_its_new_port(hostgate_factory):
    hg = hostgate_factory()
    assert hg.stop("frontd") == 0
    hg.start("frontd")
    assert listen_text(hg) == "127.0.0.1:%d\n" % hg.port
    hg.wait_healthy()
    lines = [line for line in hg.log_text("frontd").splitlines()
             if "listening on 127.0.0.1:" in line]
    assert len(lines) == 2 and lines[-1].endswith(
        "listening on 127.0.0.1:%d (http)" % hg.port), lines


def test_failed_bind_leaves_no_address_file(hostgate_factory):
    """A port held elsewhere: frontd exits naming it, and the file of an
    earlier frontd is gone rather than naming a port nobody serves."""
    hg = hostgate_factory(start=False)
    with open(hg.listen_path(), "w") as f:
        f.write("127.0.0.1:1\n")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        # Not hg.start(), which removes the file itself.
        env = dict(hg.env, HOSTGATE_LISTEN="127.0.0.1:%d" % port)
        r = subprocess.run(hg.wrap([hg.binary("frontd"), "-d"]), env=env,
                           capture_output=True, text=True, timeout=hglib.SLOW,
                           cwd=hg.dir)
    assert r.returncode == 1, r
    assert not os.path.exists(hg.listen_path())
    assert "bind 127.0.0.1:%d: Address already in use" % port in r.stderr, \
        r.stderr


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here")
def test_listen_file_ipv6(hostgate_factory):
    hg = hostgate_factory(start=False, env={"HOSTGATE_LISTEN": "[::1]:0"})
    hg.start("frontd")
    host, port = hglib.read_listen(hg.run)
    assert host == "[::1]" and port == hg.port, (host, port)
    with socket.create_connection(("::1", port), timeout=hglib.SLOW):
        pass
    # The line comes just after the file (the file is written before the
    # privilege drop, the line once frontd serves).
    hglib.wait_for(lambda: "listening on [::1]:%d" % port in
                   hg.log_text("frontd"), what="frontd's listening line")
