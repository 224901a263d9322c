"""GET /api/sandbox/prompt: the text an agent's system prompt should carry,
filled from the caller's real policy (mode, workspace, network, expiry);
and the permission profile it reflects, with network reserved to admins
when HOSTGATE_NETWORK_ADMIN_ONLY=1."""

import os

import pytest

import policylib as pl

KEYS = {"prompt", "mode", "permission", "workspace", "network", "expires_at",
        "remaining_seconds"}


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config(HOST_EXECUTION_DIRECT_TTL_SECONDS=90)


def prompt(session=None, hg=None, bearer=None):
    r = session.get("/api/sandbox/prompt") if session else \
        hg.get("/api/sandbox/prompt", bearer=bearer)
    assert r.status == 200, r
    doc = r.json()
    assert set(doc) >= KEYS, doc
    assert isinstance(doc["prompt"], str) and doc["prompt"].strip(), doc
    return doc


def assert_guidance(text):
    """What to do on a permission error: no sudo, no workaround, ask."""
    low = text.lower()
    assert "sudo" in low, text
    assert "ask the user" in low, text
    assert "work around" in low or "ways around" in low, text
    assert "{{" not in text, "unfilled template: %s" % text


def test_sandbox_prompt(hg):
    bob = hg.login(*pl.USER)
    doc = prompt(bob)
    ws = os.path.join(pl.workspace_root(hg), "bob")
    assert doc["mode"] == "sandbox", doc
    assert doc["workspace"] == ws, doc
    assert doc["permission"] == "workspace-write", doc
    assert doc["network"] is False, doc
    assert doc["expires_at"] is None and doc["remaining_seconds"] is None
    text = doc["prompt"]
    assert ws in text, text
    assert "Network: none" in text, text
    assert "bwrap" in text, text
    assert_guidance(text)
    # Direct mode is mentioned as what an admin may grant, not as on.
    assert "Execution mode: sandboxed" in text, text


def test_prompt_follows_the_permission(hg):
    bob = hg.login(*pl.USER)
    r = bob.post("/api/permission", {"permission": "workspace-write+network"})
    assert r.status == 200 and r.json()["permission"] == \
        "workspace-write+network", r
    doc = prompt(bob)
    assert doc["network"] is True and \
        doc["permission"] == "workspace-write+network", doc
    assert "Network: available" in doc["prompt"], doc["prompt"]
    r = bob.post("/api/permission", {"permission": "read-only"})
    assert r.status == 200, r
    doc = prompt(bob)
    assert doc["network"] is False and doc["permission"] == "read-only", doc
    assert "read-only" in doc["prompt"], doc["prompt"]
    assert "Network: none" in doc["prompt"], doc["prompt"]


def test_direct_prompt_states_the_expiry(hg):
    alice = hg.login(*pl.ADMIN)
    g = pl.grant(alice)
    try:
        doc = prompt(alice)
        assert doc["mode"] == "direct", doc
        assert doc["expires_at"] == g["expires_at"], (doc, g)
        assert 1 <= doc["remaining_seconds"] <= 90, doc
        text = doc["prompt"]
        assert g["expires_at"] in text, text
        assert "DIRECT" in text or "direct" in text, text
        assert os.path.join(pl.workspace_root(hg), "alice") in text, text
        assert "min" in text, text          # the time left, for a reader
        assert_guidance(text)
        # A token bound to that session reads the same.
        tok = pl.mint_token(alice)
        assert prompt(hg=hg, bearer=tok)["mode"] == "direct"
    finally:
        pl.set_mode(alice, "sandbox")
    doc = prompt(alice)
    assert doc["mode"] == "sandbox" and doc["expires_at"] is None, doc
    assert g["expires_at"] not in doc["prompt"]


def test_tokens_read_the_prompt(hg):
    tok = hg.hgctl_ok("token", "create", pl.USER[0]).stdout.strip()
    doc = prompt(hg=hg, bearer=tok)
    assert doc["workspace"] == os.path.join(pl.workspace_root(hg), "bob")
    assert doc["mode"] == "sandbox", doc


def test_prompt_needs_credentials(hg):
    pl.assert_error(hg.get("/api/sandbox/prompt"), 401, "unauthorized")


def test_permission_api(hg):
    bob = hg.login(*pl.USER)
    r = bob.get("/api/permission")
    assert r.status == 200 and r.json() == {"permission":
                                            "workspace-write"}, r
    for bad in ("everything", "", "READ-ONLY"):
        pl.assert_error(bob.post("/api/permission", {"permission": bad}),
                        400, "bad_request")
    # Changing it needs the session and its CSRF token; a token may read
    # it but not widen its own sandbox.
    pl.assert_error(bob.post("/api/permission", {"permission": "read-only"},
                             csrf=False), 403, "forbidden")
    tok = pl.mint_token(bob)
    assert hg.get("/api/permission", bearer=tok).json()["permission"] == \
        "workspace-write"
    pl.assert_error(hg.post("/api/permission",
                            {"permission": "workspace-write+network"},
                            bearer=tok), 403, "forbidden")
    assert bob.get("/api/permission").json()["permission"] == \
        "workspace-write"


def test_network_for_admins_only(hostgate_factory):
    hg = pl.own(hostgate_factory, "netadmin", HOSTGATE_NETWORK_ADMIN_ONLY=1)
    bob = hg.login(*pl.USER)
    r = bob.post("/api/permission", {"permission": "workspace-write+network"})
    pl.assert_error(r, 403, "forbidden")
    assert bob.get("/api/permission").json()["permission"] == \
        "workspace-write"
    rec = pl.wait_audit(hg, action="permission_refused", user="bob")
    assert rec[-1]["allowed"] is False, rec
    # The other profiles stay bob's to choose; admins may have network.
    r = bob.post("/api/permission", {"permission": "read-only"})
    assert r.status == 200, r
    alice = hg.login(*pl.ADMIN)
    r = alice.post("/api/permission",
                   {"permission": "workspace-write+network"})
    assert r.status == 200, r
    assert prompt(alice)["network"] is True
