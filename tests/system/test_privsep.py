"""Privilege separation that holds whatever uid the daemons share: code
running with frontd's uid inside frontd's namespaces (its jail) reaches
neither sandboxd's socket nor brokerd's control socket, by their paths or
through /proc/PID/root, reads nothing of the state directory, and can
neither signal nor trace brokerd or sandboxd. The same probe run outside
(as the daemons' uid in user mode, as root in root mode) reaches each
target, so that the targets are real."""

import json
import os
import platform
import signal
import subprocess

import pytest

import hglib

# The attacker. Run by root: it enters the namespaces of frontd (pid
# "enter", when given) the way a process of frontd's would be in them,
# becomes uid:gid, enters frontd's user namespace last (when frontd has
# one of its own) and there clears every capability, as frontd has; then
# forks, so that the child is in frontd's PID namespace too, and the child
# tries each target. Everything is imported before the mount namespace
# hides the host's files. Prints RESULT {target: "ok" or errno name}.
PROBE = r'''
import ctypes, errno, json, os, socket, sys

args = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)

def err(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else str(e)

def check(rc):
    if rc == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))

def nsfd(pid, ns):
    return os.open("/proc/%d/ns/%s" % (pid, ns), os.O_RDONLY)

class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32),
                ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]

def drop_caps():
    hdr = CapHeader(0x20080522, 0)
    data = (CapData * 2)()
    check(libc.capset(ctypes.byref(hdr), data))
    got = (CapData * 2)()
    check(libc.capget(ctypes.byref(hdr), got))
    return sum(d.effective | d.permitted for d in got)

def seqpacket(path, hello_role, request):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(3)
    try:
        s.connect(path)
        if hello_role is None:
            return "ok"
        s.send(json.dumps({"type": "hello", "version": 1,
                           "role": hello_role}).encode())
        s.send(json.dumps(request).encode())
        while True:
            d = s.recv(70000)
            if not d:
                return "closed"
            m = json.loads(d)
            if m.get("id") == request["id"]:
                return "ok" if "result" in m else "error"
    except OSError as e:
        return err(e)
    finally:
        s.close()

out = {}
uid, gid = args["uid"], args["gid"]
enter = args.get("enter")
if enter:
    fds = {ns: nsfd(enter, ns) for ns in ("net", "ipc", "uts", "pid", "mnt")}
    own = os.stat("/proc/self/ns/user").st_ino
    userfd = None
    if os.stat("/proc/%d/ns/user" % enter).st_ino != own:
        userfd = nsfd(enter, "user")
    for ns, fd in fds.items():
        check(libc.setns(fd, 0))
        os.close(fd)
    os.chdir("/")
if args.get("newpidns"):
    check(libc.unshare(0x20000000))     # CLONE_NEWPID: for the child
if (uid, gid) != (os.geteuid(), os.getegid()):
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
if enter and userfd is not None:
    check(libc.setns(userfd, 0))
    os.close(userfd)
    out["caps"] = "ok" if drop_caps() == 0 else "caps left"

r, w = os.pipe()
child = os.fork()
if child == 0:
    os.close(r)
    res = {}
    for name, (path, role, req) in args["sockets"].items():
        res["connect " + name] = seqpacket(path, None, None)
        if role is not None:
            res["hello %s as %s" % (name, role)] = seqpacket(path, role, req)
    for path in args["files"]:
        try:
            with open(path, "rb") as f:
                f.read(1)
            res["read " + os.path.basename(path)] = "ok"
        except OSError as e:
            res["read " + os.path.basename(path)] = err(e)
    for name, pid in args["pids"].items():
        try:
            os.kill(pid, 0)
            res["kill -0 " + name] = "ok"
        except OSError as e:
            res["kill -0 " + name] = err(e)
        # PTRACE_SEIZE, no stop: "ok" would be a tracer attached.
        if args.get("ptrace"):
            rc = libc.ptrace(0x4206, pid, None, None)
            res["ptrace " + name] = "ok" if rc == 0 else \
                errno.errorcode.get(ctypes.get_errno(), "?")
    for name, path in args.get("unlink", {}).items():
        try:
            os.rename(path, path + ".moved")
            os.rename(path + ".moved", path)
            res["replace " + name] = "ok"
        except OSError as e:
            res["replace " + name] = err(e)
    os.write(w, json.dumps(res).encode())
    os._exit(0)
os.close(w)
data = b""
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    data += chunk
os.waitpid(child, 0)
out.update(json.loads(data))
print("RESULT " + json.dumps(out))
'''

needs_root = pytest.mark.skipif(not hglib.IS_ROOT,
                                reason="entering frontd's namespaces "
                                "needs root (frontd is not dumpable)")


def probe(args):
    """Run PROBE as root with args; its {target: result}."""
    r = subprocess.run(["/usr/bin/python3", "-c", PROBE, json.dumps(args)],
                       capture_output=True, text=True, timeout=hglib.SLOW,
                       cwd="/")
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, (r.returncode, r.stdout, r.stderr)
    return json.loads(lines[-1][7:])


def jailed_frontd(hg):
    """The pid of frontd proper: the one child of the pid launched (the
    keeper), pid 1 of its own PID namespace."""
    keeper = hg.pid("frontd")
    with open("/proc/%d/task/%d/children" % (keeper, keeper)) as f:
        kids = [int(x) for x in f.read().split()]
    assert len(kids) == 1, kids
    return kids[0]


def targets(hg):
    """What frontd must not reach: sockets (path, hello role, request),
    state files, daemons to signal."""
    state_files = [os.path.join(hg.state, f)
                   for f in ("store.db", "audit.key")]
    assert all(os.path.exists(f) for f in state_files), \
        os.listdir(hg.state)
    sandbox = os.path.join(hg.run, hglib.SOCK_SANDBOX)
    control = os.path.join(hg.run, hglib.SOCK_CONTROL)
    health = {"type": "health", "id": 7}
    users = {"type": "user_list", "id": 8}
    sockets = {
        "sandbox.sock": (sandbox, "brokerd", health),
        "broker-control.sock": (control, "hgctl", users),
    }
    for d in ("brokerd", "sandboxd"):
        pid = hg.pid(d)
        sockets["/proc/%s/root sandbox.sock" % d] = (
            "/proc/%d/root%s" % (pid, sandbox), None, None)
        sockets["/proc/%s/root broker-control.sock" % d] = (
            "/proc/%d/root%s" % (pid, control), None, None)
    pids = {d: hg.pid(d) for d in ("brokerd", "sandboxd")}
    return sockets, state_files, pids


def front_ids(hg):
    if hg.mode == "root":
        return hglib.account(hglib.SERVICE_USERS["frontd"])
    return hg.daemon_uid, (hg.run_as[1] if hg.run_as else os.getegid())


@needs_root
def test_frontd_is_jailed(shared):
    """frontd proper runs in a PID namespace of its own (pid 1 there),
    confined like its keeper, with a network, mount, IPC and UTS
    namespace not the host's, and a user namespace of its own in user
    mode; its root holds nothing but brokerd's socket directory."""
    pid = jailed_frontd(shared)
    st = hglib.proc_status(pid)
    assert st["NSpid"].split()[1:] == ["1"], st["NSpid"]
    assert st["Seccomp"] == "2" and st["NoNewPrivs"] == "1", st
    assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0, st
    uid, gid = front_ids(shared)
    assert st["Uid"].split() == [str(uid)] * 4, st["Uid"]
    for ns in ("mnt", "net", "ipc", "uts", "pid"):
        assert os.readlink("/proc/%d/ns/%s" % (pid, ns)) != \
            os.readlink("/proc/self/ns/" + ns), ns
    user_own = os.readlink("/proc/%d/ns/user" % pid) != \
        os.readlink("/proc/self/ns/user")
    assert user_own == (shared.mode == "user"), shared.mode
    # Its root, through root's eyes: the run directory's path, with only
    # front/ in it, and front/ holding brokerd's socket.
    root = "/proc/%d/root" % pid
    assert os.listdir(root + shared.run) == ["front"]
    assert os.listdir(root + os.path.join(shared.run, "front")) == \
        ["broker.sock"]
    listed = []
    for dirpath, dirs, files in os.walk(root):
        listed += [os.path.join(dirpath, f)[len(root):] for f in files]
    assert listed == [os.path.join(shared.run, hglib.SOCK_FRONT)], listed


# frontd's own seccomp filter, for real. Run by root: it stops frontd
# (pid) for a moment with ptrace to read the BPF program the kernel holds
# for it (PTRACE_SECCOMP_GET_FILTER), lets it go, and then in a fresh child
# for each syscall loads that very program and makes the call as the next
# thing it does. Each call is made once without the filter too (it must
# return, whatever its error), and getpid once with it (the child must
# live): what kills a child is then that call under frontd's filter.
# Prints RESULT {"filters": N, "control": how, name: [bare, filtered]},
# each "how" "exit N" or "signal N".
SECCOMP_PROBE = r"""
import ctypes, json, os, platform, sys

pid, names = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                        ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
libc.syscall.restype = ctypes.c_long
PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH = 0x4206, 0x4207, 17
PTRACE_SECCOMP_GET_FILTER = 0x420c
NR = {"x86_64": {"getpid": 39, "unshare": 272, "setns": 308, "mount": 165,
                 "pivot_root": 155, "seccomp": 317},
      "aarch64": {"getpid": 172, "unshare": 97, "setns": 268, "mount": 40,
                  "pivot_root": 41, "seccomp": 277}}[platform.machine()]

class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

def check(rc, what):
    if rc < 0:
        raise OSError(ctypes.get_errno(), what)
    return rc

# The filters of frontd the test does not have (its launcher's it shares).
def nfilters(p):
    with open("/proc/%d/status" % p) as f:
        for line in f:
            if line.startswith("Seccomp_filters:"):
                return int(line.split()[1])
    return 0

progs = []
check(libc.ptrace(PTRACE_SEIZE, pid, None, None), "seize")
try:
    check(libc.ptrace(PTRACE_INTERRUPT, pid, None, None), "interrupt")
    os.waitpid(pid, 0x40000000)  # __WALL
    for i in range(nfilters(pid) - nfilters(os.getpid())):
        n = check(libc.ptrace(PTRACE_SECCOMP_GET_FILTER, pid, i, None),
                  "count")
        buf = ctypes.create_string_buffer(8 * n)
        check(libc.ptrace(PTRACE_SECCOMP_GET_FILTER, pid, i, buf), "get")
        progs.append(buf)
finally:
    libc.ptrace(PTRACE_DETACH, pid, None, None)

out = {"filters": len(progs)}
if len(progs) != 1:
    print("RESULT " + json.dumps(out))
    sys.exit(0)
prog = Fprog(len(progs[0]) // 8, ctypes.cast(progs[0], ctypes.c_void_p))
ARGS = {"getpid": (), "unshare": (0,), "setns": (-1, 0),
        "mount": (None, None, None, 0, None), "pivot_root": (None, None)}

def how(status):
    if os.WIFSIGNALED(status):
        return "signal %d" % os.WTERMSIG(status)
    return "exit %d" % os.WEXITSTATUS(status)

def call(name, filtered):
    nr = ctypes.c_long(NR[name])
    args = [ctypes.c_long(a) if isinstance(a, int) else ctypes.c_void_p(a)
            for a in ARGS[name]]
    seccomp = ctypes.c_long(NR["seccomp"])
    one, zero = ctypes.c_long(1), ctypes.c_long(0)
    ref = ctypes.byref(prog)
    child = os.fork()
    if child == 0:
        if filtered:
            if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
                os._exit(3)
            if libc.syscall(seccomp, one, zero, ref) != 0:
                os._exit(4)
        libc.syscall(nr, *args)
        os._exit(0)
    return how(os.waitpid(child, 0)[1])

out["control"] = call("getpid", True)
for name in names:
    out[name] = [call(name, False), call(name, True)]
print("RESULT " + json.dumps(out))
"""


@needs_root
@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"),
                    reason="syscall numbers known for x86_64 and aarch64")
def test_frontd_seccomp_kills_namespace_calls(shared):
    """frontd's seccomp allowlist has no unshare, setns, mount or
    pivot_root (docs/architecture.md): the very filter the kernel holds
    for the running frontd, loaded into a child, kills it with SIGSYS at
    each of those calls, which return without it; getpid passes."""
    with open(shared.binary("frontd"), "rb") as f:
        if b"__asan_init" in f.read():
            pytest.skip("a sanitizer build logs refused calls, kills none")
    names = ["unshare", "setns", "mount", "pivot_root"]
    r = subprocess.run(["/usr/bin/python3", "-c", SECCOMP_PROBE,
                        json.dumps([jailed_frontd(shared), names])],
                       capture_output=True, text=True, timeout=hglib.SLOW,
                       cwd="/")
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, (r.returncode, r.stdout, r.stderr)
    res = json.loads(lines[-1][7:])
    assert res["filters"] == 1, res
    assert res["control"] == "exit 0", res
    for name in names:
        assert res[name] == ["exit 0", "signal %d" % signal.SIGSYS], \
            (name, res)


@needs_root
def test_frontd_reaches_no_other_socket_file_or_daemon(shared):
    """The attack of the issue: code with frontd's uid in frontd's
    namespaces tries sandboxd's socket as "brokerd", brokerd's control
    socket as "hgctl", both through the other daemons' /proc/PID/root,
    users.json and the audit key, kill -0 and ptrace of brokerd and
    sandboxd, and replacing brokerd's socket. All fail; its own link to
    brokerd works. The control, outside: everything is reached."""
    hg = shared
    sockets, files, pids = targets(hg)
    uid, gid = front_ids(hg)
    front = os.path.join(hg.run, hglib.SOCK_FRONT)

    # The controls. Direct paths: in user mode as the daemons' uid (what
    # frontd shares), in root mode as root (the sockets' modes and uids
    # keep hostgate-front out already). /proc/PID/root: as root, since the
    # daemons are not dumpable.
    outside_as = (uid, gid) if hg.mode == "user" else (0, 0)
    direct = {k: v for k, v in sockets.items() if not k.startswith("/proc")}
    control = probe({"uid": outside_as[0], "gid": outside_as[1],
                     "sockets": direct, "files": files, "pids": pids})
    if hg.mode == "root":
        # Each socket accepts only its peer's uid: root gets a connection.
        control = {k: v for k, v in control.items()
                   if not k.startswith("hello ")}
    bad = {k: v for k, v in control.items() if v != "ok"}
    assert not bad, "the targets are not reachable outside: %r" % bad
    viaproc = {k: v for k, v in sockets.items() if k.startswith("/proc")}
    control = probe({"uid": 0, "gid": 0, "sockets": viaproc, "files": [],
                     "pids": {}})
    assert set(control.values()) == {"ok"}, control

    # The attack.
    mine = {"front": (front, "frontd", {"type": "front_info", "id": 9,
                                        "version": "probe", "started": 0})}
    got = probe({"enter": jailed_frontd(hg), "uid": uid, "gid": gid,
                 "sockets": dict(sockets, **mine), "files": files,
                 "pids": pids, "ptrace": True,
                 "unlink": {"broker.sock": front}})
    assert got.pop("connect front") == "ok", got
    got.pop("hello front as frontd")
    if hg.mode == "user":
        assert got.pop("caps") == "ok", got
    reached = {k: v for k, v in got.items() if v == "ok"}
    assert not reached, "frontd's jail let through: %r" % reached
    for k, v in got.items():
        if k.startswith(("connect ", "hello ", "read ")):
            assert v == "ENOENT", (k, v)     # not in its root at all
        elif k.startswith(("kill", "ptrace")):
            assert v == "ESRCH", (k, v)      # no such pid where it is
        elif k.startswith("replace "):
            assert v == "EROFS", (k, v)      # a read-only bind
    assert hg.healthy()


@needs_root
def test_frontd_follows_a_restarted_brokerd(hostgate_factory):
    """brokerd's restart removes its socket and binds a new one in
    front/: the jailed frontd, which sees front/ and not the old socket
    file, reconnects to it and answers through it again."""
    hg = hostgate_factory()
    s = hg.login(*hglib.ADMIN)
    hg.kill("brokerd")
    hg.wait_status(503)
    hg.start("brokerd")
    hg.wait_healthy()
    assert s.get("/api/status").status == 200


@needs_root
def test_frontd_goes_with_its_keeper(hostgate_factory):
    """SIGTERM to the pid launched stops frontd cleanly (status 0); a
    SIGKILL of the keeper takes the jailed frontd with it."""
    hg = hostgate_factory(users=False)
    inner = jailed_frontd(hg)
    assert hg.stop("frontd") == 0, hg.log_text("frontd")
    assert not os.path.exists("/proc/%d" % inner)
    hg.start("frontd")
    hg.wait_healthy()
    inner = jailed_frontd(hg)
    hg.kill("frontd")
    hglib.wait_for(lambda: not os.path.exists("/proc/%d" % inner),
                   what="the jailed frontd gone with its keeper")


# Starts the rest (argv) with unshare(2) refused EPERM, as a system
# without unprivileged user namespaces would: a seccomp filter for
# x86-64, set with no_new_privs.
NO_UNSHARE = r'''
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def ins(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)
prog = b"".join([
    ins(0x20, 0, 0, 4),                  # ld arch
    ins(0x15, 1, 0, 0xC000003E),         # jeq AUDIT_ARCH_X86_64
    ins(0x06, 0, 0, 0x7FFF0000),         # other arch: allow
    ins(0x20, 0, 0, 0),                  # ld nr
    ins(0x15, 0, 1, 272),                # jeq __NR_unshare
    ins(0x06, 0, 0, 0x00050000 | 1),     # ret ERRNO(EPERM)
    ins(0x06, 0, 0, 0x7FFF0000),         # ret ALLOW
])
buf = ctypes.create_string_buffer(prog)
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fp = Fprog(len(prog) // 8, ctypes.addressof(buf))
assert libc.prctl(38, 1, 0, 0, 0) == 0          # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.byref(fp), 0, 0) == 0  # SECCOMP_MODE_FILTER
os.execvp(sys.argv[1], sys.argv[1:])
'''


def test_no_user_namespace_no_frontd(hostgate_factory, mode):
    """Rootless, frontd refuses to run without its user namespace, says
    why, and leaves no address file behind; nothing runs unseparated."""
    if mode != "user":
        pytest.skip("user mode: root needs no user namespace")
    if os.uname().machine != "x86_64":
        pytest.skip("the filter here is for x86-64")
    hg = hostgate_factory(start=False)
    hg.start("brokerd")
    p = hg.start("frontd", prefix=["/usr/bin/python3", "-c", NO_UNSHARE])
    assert p.wait(hglib.SLOW) != 0
    text = hg.log_text("frontd")
    assert "refuses it a user namespace" in text, text
    assert not os.path.exists(hg.listen_path())
    assert "listening on" not in text, text


@needs_root
def test_same_uid_elsewhere_is_refused(shared):
    """Rootless, the uid does not tell brokerd from frontd: sandboxd and
    brokerd's control socket also refuse a peer of their own uid that runs
    in another PID namespace (as frontd's jail does), even one that can
    reach the socket file, while the same hello from the daemons' own PID
    namespace is answered."""
    hg = shared
    if hg.mode != "user":
        pytest.skip("user mode: in root mode the uids differ")
    sockets, _, _ = targets(hg)
    direct = {k: v for k, v in sockets.items() if not k.startswith("/proc")}
    uid, gid = front_ids(hg)
    args = {"uid": uid, "gid": gid, "sockets": direct, "files": [],
            "pids": {}}
    assert set(probe(args).values()) == {"ok"}
    got = probe(dict(args, newpidns=True))
    hellos = {k: v for k, v in got.items() if k.startswith("hello ")}
    # Closed at accept: the hello finds no one (closed, EPIPE, ECONNRESET).
    assert len(hellos) == 2 and "ok" not in hellos.values(), got
    assert set(hellos.values()) <= {"closed", "EPIPE", "ECONNRESET"}, got
    for name in ("sandboxd", "brokerd"):
        assert "connection from uid %d" % uid in hg.log_text(name) and \
            "another PID namespace" in hg.log_text(name), name


@needs_root
def test_frontd_logs_to_syslog_from_its_jail(hostgate_factory):
    """Without -d and with a syslog daemon on /dev/log (a datagram socket
    of the test's, over /dev in frontd's private mount namespace), frontd
    logs through it after the jail too: its start line and each access
    line arrive, and /dev/log is in its jail."""
    import tempfile
    hg = hostgate_factory(start=False)
    d = tempfile.mkdtemp(prefix="hg-syslog-")
    sink = None
    try:
        os.chmod(d, 0o755)
        os.mkdir(os.path.join(d, "dev"))
        sink = hglib.DatagramSink(os.path.join(d, "log"))
        # A /dev of two entries, on a tmpfs (the test's directory may be
        # nodev): the host's null and the test's log.
        dev = ('mount -t tmpfs tmpfs "$0/dev" && '
               'touch "$0/dev/null" "$0/dev/log" && '
               'mount --bind /dev/null "$0/dev/null" && '
               'mount --bind "$0/log" "$0/dev/log" && '
               'mount --rbind "$0/dev" /dev && exec "$@"')
        hg.start("sandboxd")
        hg.start("brokerd")
        p = hg.start("frontd", args=(), prefix=hglib.private_mounts(dev, d))
        assert p.wait(hglib.SLOW) == 0          # the parent of daemon(3)
        hg.port = hglib.read_listen(hg.run)[1]
        hg.wait_healthy()
        inner = [pid for pid in hglib.pids_of(hg.binary("frontd"))
                 if hglib.proc_status(pid)["NSpid"].split()[1:] == ["1"]]
        assert len(inner) == 1, inner
        assert os.path.exists("/proc/%d/root/dev/log" % inner[0])

        def arrived():
            got = sink.got
            return (any("frontd[" in m and "listening on" in m for m in got)
                    and any("frontd[" in m and "GET /healthz" in m
                            for m in got))
        hglib.wait_for(arrived, what="frontd's lines on syslog")
    finally:
        hglib.stop_binary(hg.binary("frontd"), "frontd")
        if sink is not None:
            sink.close()
        subprocess.run(["rm", "-rf", d])
