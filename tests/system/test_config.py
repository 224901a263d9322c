"""Configuration: `-n` checks, invalid variables stop a daemon at start-up,
the .env file and the environment's precedence over it, the variables
hostgate sets itself, unknown names and the compiled-in defaults.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because the configuration parser is the same in every daemon whoever
runs it; root mode also checks the service-user variables."""

import json
import os
import subprocess

import pytest

import hglib

MODE_INDEPENDENT = True


@pytest.fixture(scope="module")
def cfg(mode):
    """A prepared hostgate directory; nothing running."""
    hg = hglib.Hostgate(mode, name="config")
    yield hg
    hg.cleanup()


def run(hg, daemon, env=None, flag="-n", timeout=hglib.SLOW, unset=()):
    e = dict(hg.env)
    e.update(env or {})
    for name in unset:
        e.pop(name, None)
    return subprocess.run(hg.wrap([hg.binary(daemon), flag]), env=e,
                          capture_output=True, text=True, timeout=timeout,
                          cwd=hg.dir)


@pytest.mark.parametrize("daemon", hglib.DAEMONS)
def test_check_valid_config(cfg, daemon):
    r = run(cfg, daemon)
    assert r.returncode == 0, r


INVALID = [
    ("HOSTGATE_LOG_LEVEL", "loud"),
    ("HOSTGATE_MAX_BODY_BYTES", "lots"),
    ("HOSTGATE_MAX_BODY_BYTES", "-5"),
    ("HOSTGATE_LOGIN_BURST", "-3"),
    ("HOSTGATE_LOGIN_RATE_PER_MINUTE", "1e999"),
    ("HOSTGATE_SESSION_LIFETIME_SECONDS", "forever"),
    ("HOSTGATE_LISTEN", "nonsense"),
    ("HOSTGATE_LISTEN", "127.0.0.1:99999"),
    ("HOSTGATE_RUNTIME", "vm"),
    ("HOST_EXECUTION_MODE_DEFAULT", "yolo"),
    ("HOST_EXECUTION_DIRECT_TTL_SECONDS", "abc"),
    ("HOSTGATE_DIRECT_ON_EXPIRY", "explode"),
    ("HOSTGATE_INSECURE_HTTP", "maybe"),
]


@pytest.mark.parametrize("daemon", hglib.DAEMONS)
@pytest.mark.parametrize("var,value", INVALID)
def test_invalid_variable_check(cfg, daemon, var, value):
    r = run(cfg, daemon, {var: value})
    assert r.returncode == 1, r
    assert var in r.stderr and value in r.stderr, r.stderr


@pytest.mark.parametrize("daemon", hglib.DAEMONS)
def test_invalid_variable_stops_start(cfg, daemon):
    r = run(cfg, daemon, {"HOSTGATE_LOG_LEVEL": "loud"}, flag="-d")
    assert r.returncode == 1, r
    assert "HOSTGATE_LOG_LEVEL" in r.stderr and "loud" in r.stderr, r.stderr


def write_env(hg, text):
    path = os.path.join(hg.dir, "test.env")
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    return path


@pytest.mark.parametrize("daemon", hglib.DAEMONS)
def test_env_file_is_read(cfg, daemon):
    path = write_env(cfg, "# a comment\nHOSTGATE_LOG_LEVEL=shouty\n")
    r = run(cfg, daemon, {"HOSTGATE_ENV_FILE": path},
            unset=["HOSTGATE_LOG_LEVEL"])
    assert r.returncode == 1, r
    assert "HOSTGATE_LOG_LEVEL" in r.stderr and "shouty" in r.stderr, r.stderr


@pytest.mark.parametrize("daemon", hglib.DAEMONS)
def test_environment_wins_over_env_file(cfg, daemon):
    path = write_env(cfg, "HOSTGATE_LOG_LEVEL=shouty\n")
    r = run(cfg, daemon, {"HOSTGATE_ENV_FILE": path,
                          "HOSTGATE_LOG_LEVEL": "info"})
    assert r.returncode == 0, r


def test_missing_tls_key_refused(cfg):
    missing = os.path.join(cfg.dir, "no-such-cert.pem")
    r = run(cfg, "frontd", {"HOSTGATE_TLS_CERT": missing,
                            "HOSTGATE_TLS_KEY": missing})
    assert r.returncode == 1, r
    assert "no-such-cert.pem" in r.stderr, r.stderr


def test_tls_cert_without_key_refused(cfg):
    cert, _ = hglib.make_cert(cfg.dir, cfg.run_as)
    r = run(cfg, "frontd", {"HOSTGATE_TLS_CERT": cert})
    assert r.returncode == 1, r
    assert "HOSTGATE_TLS_KEY" in r.stderr, r.stderr


def test_unknown_option_is_usage_error(cfg):
    for daemon in hglib.DAEMONS:
        r = run(cfg, daemon, flag="-Z")
        assert r.returncode != 0, (daemon, r)
        assert r.stderr.strip(), daemon


# -- variables hostgate sets, unknown names, the default file -----------------

@pytest.mark.parametrize("daemon", hglib.DAEMONS)
@pytest.mark.parametrize("value", ["sandbox", "direct"])
def test_hostgate_mode_is_accepted(cfg, daemon, value):
    # sandboxd sets it in every spawn: a daemon started in a hostgate
    # terminal inherits it.
    r = run(cfg, daemon, {"HOSTGATE_MODE": value})
    assert r.returncode == 0, r
    assert "HOSTGATE_MODE" not in r.stderr, r.stderr


@pytest.mark.parametrize("daemon", hglib.DAEMONS)
def test_unknown_in_environment_warns(cfg, daemon):
    r = run(cfg, daemon, {"HOSTGATE_LOG_LEVLE": "debug"})
    assert r.returncode == 0, r
    assert "WARN %s: unknown variable HOSTGATE_LOG_LEVLE" % daemon + \
        " in the environment, " \
        "ignored (did you mean HOSTGATE_LOG_LEVEL?)" in r.stderr, r.stderr


def test_daemons_start_with_hostgate_mode_and_unknown_names(hostgate_factory):
    hg = hostgate_factory(name="foreign", users=False,
                          env={"HOSTGATE_MODE": "direct",
                               "HOSTGATE_FOO": "1",
                               "HOSTGATE_SPAWN_BRUST": "3"})
    assert hg.health().status == 200
    for daemon in hglib.DAEMONS:
        log = hg.log_text(daemon)
        assert "unknown variable HOSTGATE_FOO in the environment, ignored " \
            "(did you mean HOSTGATE_" in log, (daemon, log)
        assert "unknown variable HOSTGATE_SPAWN_BRUST in the environment, " \
            "ignored (did you mean HOSTGATE_SPAWN_BURST?)" in log, log
        assert "HOSTGATE_MODE" not in log.replace(
            "HOSTGATE_MODE_RATE", ""), (daemon, log)
    # The mode given to the daemons configures nothing.
    hg.add_user(*hglib.ADMIN, admin=True)
    assert hg.login(*hglib.ADMIN).get(
        "/api/execution-mode").json()["mode"] == "sandbox"


@pytest.mark.parametrize("daemon", list(hglib.DAEMONS) + ["hgctl"])
def test_unknown_in_env_file_is_an_error(cfg, daemon):
    path = write_env(cfg, "# x\nHOSTGATE_LOG_LEVEL=info\nHOSTGATE_LSTEN=x\n")
    if daemon == "hgctl":
        e = dict(cfg.env, HOSTGATE_ENV_FILE=path)
        r = subprocess.run(cfg.wrap([cfg.binary("hgctl"), "user", "list"]),
                           env=e, capture_output=True, text=True,
                           timeout=hglib.SLOW, cwd=cfg.dir)
    else:
        r = run(cfg, daemon, {"HOSTGATE_ENV_FILE": path})
    assert r.returncode == 1, r
    assert "%s:3: unknown variable HOSTGATE_LSTEN (did you mean " \
        "HOSTGATE_LISTEN?)" % path in r.stderr, r.stderr


DEFAULT_ENV_FILE = "/etc/hostgate/hostgate.env"


@pytest.mark.parametrize("daemon", hglib.DAEMONS)
def test_dot_env_is_not_read_by_itself(cfg, daemon):
    if os.path.exists(DEFAULT_ENV_FILE):
        pytest.skip("%s exists on this machine" % DEFAULT_ENV_FILE)
    with open(os.path.join(cfg.dir, ".env"), "w") as f:
        f.write("HOSTGATE_LOG_LEVEL=shouty\n")
    try:
        r = run(cfg, daemon, unset=["HOSTGATE_ENV_FILE"])
    finally:
        os.unlink(os.path.join(cfg.dir, ".env"))
    assert r.returncode == 0, r


def test_compiled_in_defaults(cfg):
    if os.path.exists(DEFAULT_ENV_FILE):
        pytest.skip("%s exists on this machine" % DEFAULT_ENV_FILE)
    nowhere = os.path.join(cfg.dir, "no-run")
    r = subprocess.run([cfg.binary("hgctl"), "config", "--json"],
                       env={"PATH": cfg.env["PATH"],
                            "HOSTGATE_RUN_DIR": nowhere},
                       capture_output=True, text=True, timeout=hglib.SLOW)
    assert r.returncode == 0, r
    doc = json.loads(r.stdout)
    assert doc["source"] == "hgctl", doc
    c = doc["config"]
    assert c["HOSTGATE_STATE_DIR"] == "/var/lib/hostgate", c
    assert c["HOSTGATE_WORKSPACE_ROOT"] == "/var/lib/hostgate/workspaces", c
    assert c["HOSTGATE_RUN_DIR"] == nowhere, c
    assert c["HOSTGATE_ENV_FILE"] is None, c
    # Without HOSTGATE_RUN_DIR, hgctl looks in /run/hostgate and says why.
    r = subprocess.run([cfg.binary("hgctl"), "user", "list"],
                       env={"PATH": cfg.env["PATH"]},
                       capture_output=True, text=True, timeout=hglib.SLOW)
    assert r.returncode == 1, r
    assert "/run/hostgate/broker-control.sock" in r.stderr, r.stderr
    assert "the default HOSTGATE_RUN_DIR" in r.stderr, r.stderr
