"""Configuration: `-n` checks, invalid variables stop a daemon at start-up,
the .env file and the environment's precedence over it."""

import os
import subprocess

import pytest

import hglib


@pytest.fixture(scope="module")
def cfg(mode):
    """A prepared hostgate directory; nothing running."""
    hg = hglib.Hostgate(mode, name="config")
    yield hg
    hg.cleanup()


def run(hg, daemon, env=None, flag="-n", timeout=20, unset=()):
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
