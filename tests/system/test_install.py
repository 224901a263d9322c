"""make install: the installed layout, its systemd units (verify and the
security figures of docs/operations.md), its man pages, its sysusers.d
and tmpfiles.d files, and the installed binaries started the way the
units start them, with the installed environment file, serving a login
and a command.

The install reuses the build under test (`make -o all`: nothing is
rebuilt), so the binaries keep that build's compiled-in paths; the
environment file points them at the installed profiles and panel."""

import grp
import http.client
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile

import pytest

import hglib

PREFIX = "/usr"
UNITDIR = PREFIX + "/lib/systemd/system"
UNITS = ("hostgate-frontd.service", "hostgate-brokerd.service",
         "hostgate-sandboxd.service", "hostgate-egressd.service")
MANPAGES = ("man5/hostgate.env.5", "man7/hostgate.7", "man8/frontd.8",
            "man8/brokerd.8", "man8/sandboxd.8", "man8/egressd.8",
            "man8/hgctl.8", "man8/hg-egress-bridge.8")
# The figures docs/operations.md gives; a unit that scores worse fails.
EXPOSURE_MAX = {
    "hostgate-frontd.service": 2.0,
    "hostgate-brokerd.service": 2.5,
    "hostgate-sandboxd.service": 5.3,
    "hostgate-egressd.service": 1.5,
}


def make_install(destdir):
    """make install into destdir, without building anything."""
    # Not the settings of a `make check` this may run under.
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    # The build's paths.h stays as it is (another PREFIX would rewrite it,
    # and the next make of the suite would rebuild the daemons).
    r = subprocess.run(["make", "-C", hglib.REPO, "-o", "all", "install",
                        "B=" + hglib.BUILD, "DESTDIR=" + destdir,
                        "PREFIX=" + PREFIX,
                        "PATHS_H=" + destdir + ".paths.h"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.fixture(scope="module")
def dest():
    """A directory the service users can traverse, with an install in it."""
    top = tempfile.mkdtemp(prefix="hg-install-")
    os.chmod(top, 0o755)
    d = os.path.join(top, "dest")
    make_install(d)
    yield top, d
    shutil.rmtree(top, ignore_errors=True)


def installed(d, path):
    return os.path.join(d, path.lstrip("/"))


def unit_settings(path):
    """The [Service] settings of a unit: name -> list of values."""
    out = {}
    section = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]":
                k, _, v = line.partition("=")
                out.setdefault(k, []).append(v)
    return out


def test_layout(dest):
    _, d = dest
    # The bridge next to sandboxd: sandboxd looks for it there.
    for f in ("sbin/frontd", "sbin/brokerd", "sbin/sandboxd", "sbin/egressd",
              "sbin/hg-egress-bridge", "bin/hgctl"):
        p = installed(d, PREFIX + "/" + f)
        assert os.access(p, os.X_OK), p
    share = installed(d, PREFIX + "/share/hostgate")
    assert os.path.isfile(os.path.join(share, "profiles", "seccomp.policy"))
    assert os.path.isfile(os.path.join(share, "web", "index.html"))
    for u in UNITS + ("hostgate.target",):
        assert os.path.isfile(installed(d, UNITDIR + "/" + u)), u
    assert os.path.isfile(installed(d, PREFIX + "/lib/sysusers.d/hostgate.conf"))
    assert os.path.isfile(installed(d, PREFIX + "/lib/tmpfiles.d/hostgate.conf"))
    with open(installed(d, PREFIX + "/lib/modules-load.d/hostgate.conf")) as f:
        assert set(f.read().split()) >= {"btrfs", "loop"}
    for m in MANPAGES:
        assert os.path.isfile(installed(d, PREFIX + "/share/man/" + m)), m
    env = installed(d, "/etc/hostgate/hostgate.env")
    assert os.path.isfile(env)
    # Every placeholder was replaced by an installed path.
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            if "/sbin/" in p or "/bin/" in p or "/web/" in p:
                continue
            with open(p, "rb") as fh:
                assert not re.search(rb"@[A-Z]+@", fh.read()), p


def test_units_order_and_restart(dest):
    _, d = dest
    for u in UNITS:
        s = unit_settings(installed(d, UNITDIR + "/" + u))
        assert s["Restart"] == ["on-failure"], u
        assert s["ExecStart"][0].startswith(PREFIX + "/sbin/"), u
    with open(installed(d, UNITDIR + "/hostgate.target")) as f:
        target = f.read()
    for u in UNITS:
        assert u in target
    with open(installed(d, UNITDIR + "/hostgate-frontd.service")) as f:
        assert "After=network.target hostgate-brokerd.service" in f.read()


def test_env_file(dest):
    """Generated from .env.example: every variable, commented out, with the
    installed paths as defaults; never overwritten by another install."""
    top, d = dest
    env = installed(d, "/etc/hostgate/hostgate.env")
    with open(env) as f:
        text = f.read()
    with open(os.path.join(hglib.REPO, ".env.example")) as f:
        example = f.read()
    names = re.findall(r"^# ([A-Z_]+)=", example, re.M)
    assert len(names) > 20
    for n in names:
        assert re.search(r"^# %s=" % n, text, re.M), n
    assert "# HOSTGATE_STATE_DIR=/var/lib/hostgate\n" in text
    assert "# HOSTGATE_RUN_DIR=/run/hostgate\n" in text
    assert "# HOSTGATE_PROFILES_DIR=%s/share/hostgate/profiles\n" % PREFIX \
        in text
    # systemd's EnvironmentFile= syntax: no "export", only comments and
    # blank lines (the parser of both then agrees on everything).
    for line in text.splitlines():
        assert line == "" or line.startswith("#"), line
    # The operator's edit survives a second install.
    with open(env, "a") as f:
        f.write("HOSTGATE_LOG_LEVEL=debug\n")
    r = make_install(d)
    assert "keeping" in r.stdout
    with open(env) as f:
        assert f.read() == text + "HOSTGATE_LOG_LEVEL=debug\n"
    with open(installed(d, PREFIX + "/share/hostgate/hostgate.env")) as f:
        assert f.read() == text


def test_units_verify(dest):
    """systemd-analyze verify is clean. It checks that ExecStart exists and
    that the man pages of Documentation= open, so the units are read with
    their binaries at the DESTDIR paths and MANPATH at the installed ones."""
    top, d = dest
    v = os.path.join(top, "verify")
    os.makedirs(v, exist_ok=True)
    for u in UNITS + ("hostgate.target",):
        with open(installed(d, UNITDIR + "/" + u)) as f:
            text = f.read()
        text = text.replace("ExecStart=" + PREFIX + "/sbin/",
                            "ExecStart=" + installed(d, PREFIX + "/sbin/"))
        with open(os.path.join(v, u), "w") as f:
            f.write(text)
    env = dict(os.environ, MANPATH=installed(d, PREFIX + "/share/man"))
    r = subprocess.run(["systemd-analyze", "verify"] +
                       [os.path.join(v, u) for u in UNITS + ("hostgate.target",)],
                       capture_output=True, text=True, env=env,
                       timeout=hglib.SLOW)
    assert r.returncode == 0 and r.stdout + r.stderr == "", \
        r.stdout + r.stderr


@pytest.mark.parametrize("unit", UNITS)
def test_units_security(dest, unit):
    _, d = dest
    r = subprocess.run(["systemd-analyze", "security", "--offline=true",
                        installed(d, UNITDIR + "/" + unit)],
                       capture_output=True, text=True, timeout=hglib.SLOW)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= EXPOSURE_MAX[unit], r.stdout


def test_store_tcp_drop_in(dest):
    """The drop-in for a PostgreSQL store over TCP, applied to brokerd's
    unit (a drop-in's lines come after the unit's, as here): it verifies,
    opens IPv4 and IPv6 sockets and the host's network, keeps every other
    setting, and stays within one point of exposure of the unit alone."""
    top, d = dest
    with open(installed(d, UNITDIR + "/hostgate-brokerd.service")) as f:
        unit = f.read()
    with open(installed(d, PREFIX + "/share/hostgate/systemd/"
                        "brokerd-store-tcp.conf")) as f:
        drop_in = f.read()
    v = os.path.join(top, "verify-tcp")
    os.makedirs(v, exist_ok=True)
    path = os.path.join(v, "hostgate-brokerd.service")
    text = unit.replace("ExecStart=" + PREFIX + "/sbin/",
                        "ExecStart=" + installed(d, PREFIX + "/sbin/"))
    text = text.replace("[Install]", drop_in.split("[Service]", 1)[1] +
                        "\n[Install]")
    with open(path, "w") as f:
        f.write(text)
    env = dict(os.environ, MANPATH=installed(d, PREFIX + "/share/man"))
    r = subprocess.run(["systemd-analyze", "verify", path],
                       capture_output=True, text=True, env=env,
                       timeout=hglib.SLOW)
    assert r.returncode == 0 and r.stdout + r.stderr == "", \
        r.stdout + r.stderr
    r = subprocess.run(["systemd-analyze", "security", "--offline=true",
                        path], capture_output=True, text=True,
                        timeout=hglib.SLOW)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= \
        EXPOSURE_MAX["hostgate-brokerd.service"] + 1.0, r.stdout
    assert "✗ RestrictAddressFamilies=~AF_(INET|INET6)" in r.stdout
    assert "✓ RestrictAddressFamilies=~AF_PACKET" in r.stdout
    assert "IP address allow list with only localhost entries" in r.stdout


@pytest.mark.parametrize("page", MANPAGES)
def test_man_lint(dest, page):
    _, d = dest
    r = subprocess.run(["groff", "-man", "-ww", "-z",
                        installed(d, PREFIX + "/share/man/" + page)],
                       capture_output=True, text=True, timeout=hglib.SLOW)
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stderr


def test_sysusers(dest):
    top, d = dest
    root = os.path.join(top, "sysroot")
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    r = subprocess.run(["systemd-sysusers", "--root=" + root,
                        installed(d, PREFIX + "/lib/sysusers.d/hostgate.conf")],
                       capture_output=True, text=True, timeout=hglib.SLOW)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(root, "etc", "passwd")) as f:
        users = {l.split(":")[0]: l.split(":") for l in f.read().splitlines()}
    for u in hglib.SERVICE_USERS.values():
        assert u in users, users
        assert users[u][6].endswith("nologin"), users[u]


def tmpfiles_create(top, d):
    """Run the installed tmpfiles.d file with its paths moved under top."""
    root = os.path.join(top, "root")
    with open(installed(d, PREFIX + "/lib/tmpfiles.d/hostgate.conf")) as f:
        text = f.read()
    text = text.replace(" /var/", " " + root + "/var/").replace(
        " /run/", " " + root + "/run/")
    assert text.count(root) == 4, text
    conf = os.path.join(top, "tmpfiles.conf")
    with open(conf, "w") as f:
        f.write(text)
    for sub in ("var/lib", "run"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    os.chmod(root, 0o755)
    for sub in ("var", "var/lib", "run"):
        os.chmod(os.path.join(root, sub), 0o755)
    r = subprocess.run(["systemd-tmpfiles", "--create", conf],
                       capture_output=True, text=True, timeout=hglib.SLOW)
    assert r.returncode == 0, r.stderr
    return root


def owner_mode(path):
    st = os.stat(path)
    return (pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name,
            stat.S_IMODE(st.st_mode))


@pytest.mark.skipif(not hglib.IS_ROOT, reason="the service users: root only")
def test_tmpfiles(dest):
    top, d = dest
    root = tmpfiles_create(top, d)
    assert owner_mode(root + "/var/lib/hostgate") == \
        ("hostgate-broker", "hostgate-broker", 0o711)
    assert owner_mode(root + "/var/lib/hostgate/workspaces") == \
        ("hostgate-sandbox", "hostgate-sandbox", 0o711)
    assert owner_mode(root + "/run/hostgate") == \
        ("hostgate-broker", "hostgate-front", 0o1771)
    # What sandboxd makes too, so that egressd's unit has it to bind.
    assert owner_mode(root + "/run/hostgate/egress") == \
        ("hostgate-sandbox", "hostgate-sandbox", 0o711)


def unit_wrap(settings):
    """setpriv's arguments for a unit's User=, Group=,
    SupplementaryGroups= and NoNewPrivileges=, as systemd applies them;
    [] for a unit that starts as root."""
    if "User" not in settings:
        return []
    pw = pwd.getpwnam(settings["User"][0])
    gid = grp.getgrnam(settings.get("Group", settings["User"])[0]).gr_gid
    groups = [str(grp.getgrnam(g).gr_gid)
              for v in settings.get("SupplementaryGroups", [])
              for g in v.split()]
    wrap = ["setpriv", "--reuid=%d" % pw.pw_uid, "--regid=%d" % gid]
    wrap.append("--groups=" + ",".join(groups) if groups else "--clear-groups")
    if settings.get("NoNewPrivileges") == ["yes"]:
        wrap.append("--no-new-privs")
    return wrap + ["--"]


def unit_argv(d, unit):
    """The command line an installed unit starts, as setpriv runs it."""
    s = unit_settings(installed(d, UNITDIR + "/" + unit))
    argv = shlex.split(s["ExecStart"][0])
    argv[0] = installed(d, argv[0])
    return unit_wrap(s) + argv


def make_dirs_as_tmpfiles(state, run):
    """The state, workspace and run directories with the owners and modes
    systemd/hostgate.tmpfiles.in gives them."""
    broker = pwd.getpwnam("hostgate-broker")
    sandbox = pwd.getpwnam("hostgate-sandbox")
    front = grp.getgrnam("hostgate-front")
    for path, mode, uid, gid in (
            (state, 0o711, broker.pw_uid, broker.pw_gid),
            (os.path.join(state, "workspaces"), 0o711, sandbox.pw_uid,
             sandbox.pw_gid),
            (run, 0o1771, broker.pw_uid, front.gr_gid),
            (os.path.join(run, "egress"), 0o711, sandbox.pw_uid,
             sandbox.pw_gid)):
        if not os.path.isdir(path):
            os.mkdir(path)
        os.chown(path, uid, gid)
        os.chmod(path, mode)


def unit_view(settings, paths, stage):
    """A start prefix that gives a daemon its unit's view of the run and
    state directories, as systemd would set it up: TemporaryFileSystem=
    (read-only, mode 0755), BindReadOnlyPaths= inside it and
    InaccessiblePaths=, with paths mapping the installed paths
    (@RUNDIR@...) to this test's; settings on other paths are not
    emulated. [] when the unit has none. stage: an empty directory."""
    def mine(key):
        out = []
        for v in settings.get(key, []):
            for item in v.split():
                item = item.lstrip("-").split(":")[0]
                for k, here in paths.items():
                    if item.startswith(k):
                        out.append(here + item[len(k):])
        return out
    tmpfs, binds, hidden = (mine("TemporaryFileSystem"),
                            mine("BindReadOnlyPaths"),
                            mine("InaccessiblePaths"))
    if not tmpfs and not binds and not hidden:
        return []
    script = ["set -e"]
    for i, b in enumerate(binds):
        script.append('mkdir "%s/%d" && mount --bind "%s" "%s/%d"'
                      % (stage, i, b, stage, i))
    for t in tmpfs:
        script.append('mount -t tmpfs -o mode=0755 tmpfs "%s"' % t)
    for i, b in enumerate(binds):
        script.append('mkdir -p "%s" && mount --move "%s/%d" "%s" && '
                      'mount -o remount,bind,ro "%s"' % (b, stage, i, b, b))
    for t in tmpfs:
        script.append('mount -o remount,ro "%s"' % t)
    for h in hidden:
        script.append('mount -t tmpfs -o ro,mode=0000 tmpfs "%s"' % h)
    script.append('exec "$@"')
    return hglib.private_mounts("\n".join(script), "unit-view")


def source_unit(name):
    return unit_settings(os.path.join(hglib.REPO, "systemd",
                                      "hostgate-%s.service.in" % name))


def as_units(hg, extra=None):
    """Make hg start each daemon the way its unit does (User=, Group=,
    SupplementaryGroups=), with extra[name] in front of the command."""
    make_dirs_as_tmpfiles(hg.state, hg.run)
    wraps = {}
    for name in hglib.DAEMONS:
        stage = os.path.join(hg.dir, "unit-view-" + name)
        os.mkdir(stage, 0o700)
        wraps[name] = (extra or {}).get(name, []) + unit_view(
            source_unit(name), {"@RUNDIR@": hg.run, "@STATEDIR@": hg.state},
            stage) + unit_wrap(source_unit(name))
    plain = hg.wrap

    def wrap(argv, as_user=None):
        name = os.path.basename(argv[0])
        if as_user is None and name in wraps:
            return wraps[name] + list(argv)
        return plain(argv, as_user)

    hg.wrap = wrap


def test_started_as_service_users(hostgate_factory, mode):
    """frontd, brokerd and egressd started directly as their service users
    (the units' User=; egressd with its unit's view of the run directory:
    egress/ alone) and sandboxd as root: each accepts the others over
    SO_PEERCRED, and a login and a command go through."""
    if mode != "root":
        pytest.skip("root mode only: the service users")
    assert unit_wrap(source_unit("sandboxd")) == []
    hg = hostgate_factory(start=False)
    as_units(hg)
    hg.start_all()
    # egressd sees no other socket and no state, yet links to sandboxd.
    hglib.wait_for(lambda: hg.egress_linked() and hg.alive("egressd"),
                   what="egressd linked to sandboxd")
    for name in hglib.DAEMONS:
        uid = pwd.getpwnam(hglib.SERVICE_USERS[name]).pw_uid
        st = hglib.proc_status(hg.pid(name))
        assert st["Uid"].split() == [str(uid)] * 4, (name, st["Uid"])
    assert owner_mode(os.path.join(hg.run, hglib.SOCK_FRONT)) == \
        ("hostgate-broker", "hostgate-front", 0o660)
    with open("/proc/%d/mountinfo" % hg.pid("egressd")) as f:
        mounts = [l.split()[4] for l in f.read().splitlines()]
    assert hg.run in mounts and os.path.join(hg.run, "egress") in mounts \
        and hg.state in mounts, mounts
    hg.add_user(*hglib.ADMIN, admin=True)
    s = hg.login(*hglib.ADMIN)
    r = s.post("/api/run_command", {"command": "echo ok"})
    assert r.status == 200, r
    assert r.json()["exit_code"] == 0 and r.json()["stdout"] == "ok\n", r


def syscall_sets():
    """systemd-analyze's syscall groups, each expanded to its calls."""
    r = subprocess.run(["systemd-analyze", "syscall-filter"],
                       capture_output=True, text=True, timeout=hglib.SLOW)
    groups, cur = {}, None
    for line in r.stdout.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if line.startswith("@"):
            cur = groups.setdefault(s, [])
        elif cur is not None:
            cur.append(s)

    def expand(name):
        if not name.startswith("@"):
            return {name}
        out = set()
        for x in groups.get(name, []):
            out |= expand(x)
        return out
    return expand


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_syscalls_within_unit_filter(hostgate_factory, mode):
    """Every system call frontd, brokerd and egressd make, from exec
    through a login, a command, a terminal, a token and a logout (egressd:
    through its link to sandboxd), is one their unit's SystemCallFilter=
    allows: under systemd anything else fails."""
    if mode != "root":
        pytest.skip("root mode only: the service users")
    hg = hostgate_factory(start=False)
    traces = {n: os.path.join(hg.dir, "strace." + n)
              for n in ("frontd", "brokerd", "egressd") if n in hglib.DAEMONS}
    as_units(hg, {n: ["strace", "-f", "-qq", "-o", t]
                  for n, t in traces.items()})
    hg.start_all()
    hg.add_user(*hglib.ADMIN, admin=True)
    s = hg.login(*hglib.ADMIN)
    assert s.post("/api/run_command", {"command": "echo ok"}).status == 200
    assert s.post("/api/terminals", {"cols": 80, "rows": 24}).status == 201
    assert s.post("/api/session/tokens").status == 201
    assert s.get("/api/status").status == 200
    assert s.post("/api/logout").status == 200
    if "egressd" in traces:
        hglib.wait_for(lambda: hg.egress_linked(),
                       what="egressd linked to sandboxd")
    # strace does not pass SIGTERM on: stop the daemons it traces.
    for n in traces:
        tracer = hg.procs[n].pid
        with open("/proc/%d/task/%d/children" % (tracer, tracer)) as f:
            for child in f.read().split():
                os.kill(int(child), signal.SIGTERM)
        hg.procs[n].wait(hglib.SLOW)
    expand = syscall_sets()
    for n, path in traces.items():
        allowed = set()
        for v in source_unit(n)["SystemCallFilter"]:
            for item in v.split():
                allowed |= expand(item)
        with open(path) as f:
            lines = f.read().splitlines()
        start = max(i for i, l in enumerate(lines)
                    if re.search(r'execve\("[^"]*/%s"' % n, l))
        calls = set()
        for l in lines[start:]:
            m = re.match(r"\d+\s+([a-z0-9_]+)\(", l)
            if m:
                calls.add(m.group(1))
        assert len(calls) > 20, (n, calls)
        assert calls <= allowed, (n, sorted(calls - allowed))
        # ProtectSystem=strict: it writes under ReadWritePaths= only (here
        # the state and run directories stand for the installed ones); a
        # mkdir of what is there already writes nothing.
        here = {"@STATEDIR@": hg.state + "/", "@RUNDIR@": hg.run + "/"}
        rw = [here[p] for v in source_unit(n).get("ReadWritePaths", [])
              for p in v.split()]
        for l in lines[start:]:
            if l.endswith("= -1 EEXIST (File exists)"):
                continue
            paths = re.findall(
                r'(?:openat\(AT_FDCWD, "([^"]+)", [^)]*O_(?:WRONLY|RDWR|CREAT)'
                r'|(?:mkdir|unlink|rename)\("([^"]+)"(?:, "([^"]+)")?'
                r'|bind\(\d+, \{sa_family=AF_UNIX, sun_path="([^"]+)")', l)
            for p in (x for t in paths for x in t if x):
                assert any(p.startswith(d) or p + "/" == d for d in rw), \
                    (n, l)


@pytest.mark.skipif(not hglib.IS_ROOT, reason="the service users: root only")
def test_installed_service_runs(dest):
    """The installed binaries, started as their units start them, with the
    installed environment file: a login and a sandboxed command."""
    top, d = dest
    root = tmpfiles_create(top, d)
    state = root + "/var/lib/hostgate"
    run = root + "/run/hostgate"
    envfile = os.path.join(top, "hostgate.env")
    shutil.copy(installed(d, "/etc/hostgate/hostgate.env"), envfile)
    os.chmod(envfile, 0o644)
    with open(envfile, "a") as f:
        f.write("HOSTGATE_STATE_DIR=%s\nHOSTGATE_RUN_DIR=%s\n"
                "HOSTGATE_LISTEN=127.0.0.1:0\nHOSTGATE_PROFILES_DIR=%s\n"
                "HOSTGATE_WEB_DIR=%s\n"
                % (state, run, installed(d, PREFIX + "/share/hostgate/profiles"),
                   installed(d, PREFIX + "/share/hostgate/web")))
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "HOSTGATE_ENV_FILE": envfile}
    logs = os.path.join(top, "logs")
    os.makedirs(logs, exist_ok=True)
    procs = {}

    def logtext():
        out = []
        for n in sorted(os.listdir(logs)):
            with open(os.path.join(logs, n), errors="replace") as f:
                out.append("==== %s\n%s" % (n, f.read()))
        return "\n".join(out)

    def alive():
        for n, p in procs.items():
            assert p.poll() is None, "%s exited %s\n%s" % (n, p.returncode,
                                                          logtext())
        return True

    try:
        for unit in ("hostgate-sandboxd.service", "hostgate-brokerd.service",
                     "hostgate-frontd.service", "hostgate-egressd.service"):
            stage = os.path.join(top, "unit-view-" + unit)
            os.mkdir(stage, 0o700)
            view = unit_view(unit_settings(installed(d, UNITDIR + "/" + unit)),
                             {"/run/hostgate": run,
                              "/var/lib/hostgate": state}, stage)
            log = open(os.path.join(logs, unit + ".log"), "wb")
            procs[unit] = subprocess.Popen(
                view + unit_argv(d, unit), env=env, cwd="/",
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                preexec_fn=lambda: os.umask(0o077))
            log.close()
        listen = os.path.join(run, "frontd.listen")
        hglib.wait_for(lambda: alive() and os.path.exists(listen) and
                       open(listen).read().endswith("\n"),
                       what="frontd.listen")
        host, _, port = open(listen).read().strip().rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0, (host, port)

        hgctl = [installed(d, PREFIX + "/bin/hgctl")]
        hglib.wait_for(lambda: alive() and subprocess.run(
            hgctl + ["user", "list"], env=env, capture_output=True,
            timeout=hglib.SLOW).returncode == 0,
            what="brokerd to answer hgctl")
        r = subprocess.run(hgctl + ["user", "add", "alice", "--admin",
                                    "--password-stdin"],
                           input="alice-password-1\n", env=env,
                           capture_output=True, text=True, timeout=hglib.SLOW)
        assert r.returncode == 0, r.stderr

        def post(path, body, headers=None):
            c = http.client.HTTPConnection(host, int(port), timeout=hglib.SLOW)
            try:
                c.request("POST", path, body=json.dumps(body),
                          headers=dict({"Content-Type": "application/json"},
                                       **(headers or {})))
                resp = c.getresponse()
                return resp, resp.read()
            finally:
                c.close()

        def healthy():
            c = http.client.HTTPConnection(host, int(port), timeout=hglib.SLOW)
            try:
                c.request("GET", "/healthz")
                resp = c.getresponse()
                resp.read()
                return alive() and resp.status == 200
            finally:
                c.close()

        hglib.wait_for(healthy, what="/healthz 200")
        hglib.wait_for(lambda: alive() and hglib.egress_linked(run),
                       what="egressd linked to sandboxd")
        # All up: frontd and brokerd run as their users from the start,
        # sandboxd has dropped to its own; the sockets let the right peers in.
        for unit, user in (("hostgate-frontd.service", "hostgate-front"),
                           ("hostgate-brokerd.service", "hostgate-broker"),
                           ("hostgate-sandboxd.service", "hostgate-sandbox"),
                           ("hostgate-egressd.service", "hostgate-egress")):
            st = hglib.proc_status(procs[unit].pid)
            uid = pwd.getpwnam(user).pw_uid
            assert st["Uid"].split()[:3] == [str(uid)] * 3, (unit, st)
        assert owner_mode(run + "/front/broker.sock") == \
            ("hostgate-broker", "hostgate-front", 0o660)
        assert owner_mode(run + "/front")[0::2] == ("hostgate-broker", 0o711)
        assert owner_mode(run + "/broker-control.sock")[0::2] == \
            ("hostgate-broker", 0o600)
        assert owner_mode(run + "/sandbox.sock") == \
            ("hostgate-sandbox", "hostgate-broker", 0o660)

        resp, body = post("/api/login", {"username": "alice",
                                         "password": "alice-password-1"})
        assert resp.status == 200, body
        cookie = resp.getheader("Set-Cookie").split(";")[0]
        csrf = json.loads(body)["csrf_token"]
        resp, body = post("/api/run_command",
                          {"command": "echo hello from $(id -un)"},
                          {"Cookie": cookie, "X-CSRF-Token": csrf})
        assert resp.status == 200, body
        out = json.loads(body)
        assert out["exit_code"] == 0 and out["mode"] == "sandbox", out
        assert out["stdout"].startswith("hello from "), out
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for n, p in procs.items():
            try:
                p.wait(hglib.SLOW)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
