"""A real PostgreSQL server for the tests: Debian's postgresql package,
its own cluster in a temporary directory, listening on a Unix socket in
that directory only (no TCP port, so nothing to race for).

    with pglib.Postgres() as pg:
        url = pg.database()          # a fresh, empty database
        pg.migrate(url)              # hgctl store migrate against it
        pg.psql(url, "SELECT 1")
        pg.stop(); pg.start()        # the store lost and back

The server runs as the `postgres` user when the tests run as root
(initdb refuses root), else as the current user. Every role connects
with trust over the socket, which is reachable by the daemons' users:
the directory is 0755 and the socket 0777, as PostgreSQL makes it.
"""

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile

import hglib

BINDIR_GLOB = "/usr/lib/postgresql/*/bin"
ROLE = "hostgate"


def bindir():
    """The newest installed server's bin directory, or None."""
    dirs = sorted(glob.glob(BINDIR_GLOB),
                  key=lambda d: int(d.split("/")[-2]) if
                  d.split("/")[-2].isdigit() else 0)
    for d in reversed(dirs):
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    return None


def available():
    """Why PostgreSQL cannot be started here, or None when it can."""
    if bindir() is None:
        return "PostgreSQL's server is not installed (make check " \
            "installs it: scripts/deps.sh --install fleet)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "no postgres user to run the server as"
    return None


class Postgres:
    """One cluster; databases are made per test with database()."""

    _names = itertools.count(1)

    def __init__(self, top=None):
        why = available()
        assert why is None, why
        self.bin = bindir()
        self.top = tempfile.mkdtemp(prefix="hg-pg-", dir=top)
        os.chmod(self.top, 0o755)
        self.data = os.path.join(self.top, "data")
        self.sock = os.path.join(self.top, "sock")
        self.log = os.path.join(self.top, "server.log")
        os.mkdir(self.sock, 0o755)
        self.user = None
        if os.geteuid() == 0:
            self.user = pwd.getpwnam("postgres")
            os.chown(self.top, self.user.pw_uid, self.user.pw_gid)
            os.chown(self.sock, self.user.pw_uid, self.user.pw_gid)
        self.running = False
        self._run([os.path.join(self.bin, "initdb"), "-D", self.data,
                   "-A", "trust", "-U", "postgres", "-E", "UTF8",
                   "--no-locale", "--no-sync"])
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("listen_addresses = ''\n"
                    "unix_socket_directories = '%s'\n"
                    "unix_socket_permissions = 0777\n"
                    "fsync = off\n"
                    "full_page_writes = off\n"
                    "max_connections = 200\n"
                    "log_min_messages = warning\n" % self.sock)
        self.start()
        self.psql("postgres", "CREATE ROLE %s LOGIN" % ROLE)

    def _run(self, argv, check=True, **kw):
        """Run argv as the server's user."""
        def drop():
            if self.user is not None:
                os.setgid(self.user.pw_gid)
                os.setgroups([])
                os.setuid(self.user.pw_uid)
        return subprocess.run(argv, preexec_fn=drop, check=check,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              cwd=self.top, **kw)

    def start(self):
        """Start the server and wait until it accepts connections
        (pg_ctl -w polls for that)."""
        r = self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data,
                       "-l", self.log, "-w", "-t", "60", "start"],
                      check=False)
        assert r.returncode == 0, "pg_ctl start: %s\n%s" % (
            r.stdout, self.log_text())
        self.running = True

    def stop(self, mode="fast"):
        """Stop the server (clients see their connections end)."""
        if not self.running:
            return
        self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data,
                   "-m", mode, "-w", "-t", "60", "stop"])
        self.running = False

    def log_text(self):
        try:
            with open(self.log) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def url(self, dbname, user=ROLE):
        """The libpq URI of dbname over the socket."""
        return "postgresql:///%s?host=%s&user=%s" % (dbname, self.sock,
                                                     user)

    def database(self, name=None):
        """Create a fresh empty database owned by the hostgate role and
        return its URI."""
        if name is None:
            name = "hg%d_%d" % (os.getpid(), next(self._names))
        self.psql("postgres", "CREATE DATABASE %s OWNER %s" % (name, ROLE))
        return self.url(name)

    def psql(self, db, sql, user="postgres"):
        """Run sql in db (a name or one of our URIs) and return its rows
        as lists of strings (unaligned, tab-separated)."""
        target = db if db.startswith("postgresql:") else self.url(db, user)
        if db.startswith("postgresql:") and user != ROLE:
            target = target.replace("user=%s" % ROLE, "user=%s" % user)
        r = self._run([os.path.join(self.bin, "psql"), "-X", "-q", "-A",
                       "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-d",
                       target, "-c", sql], check=False)
        assert r.returncode == 0, "psql %r: %s" % (sql, r.stdout)
        return [line.split("\t") for line in r.stdout.splitlines() if line]

    def migrate(self, url, build=None):
        """hgctl store migrate against url; its output."""
        env = dict(os.environ, HOSTGATE_STORE=url,
                   HOSTGATE_ENV_FILE="/dev/null")
        hgctl = os.path.join(build or hglib.BUILD, "hgctl")
        r = subprocess.run([hgctl, "store", "migrate"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        assert r.returncode == 0, "hgctl store migrate: %s" % r.stdout
        return r.stdout

    def close(self):
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.top, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
