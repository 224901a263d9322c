"""The kernel's other system call entry points. A host may run a kernel
without ia32 emulation (Debian 13 booted with ia32_emulation=0 here):
`int $0x80` then faults before seccomp sees it. The seccomp unit test,
built on the host and given in HGVM_UNIT (make vm gives it), must pass on such a kernel as
on one with it, and say which it saw."""
import os
import subprocess

import pytest

UNIT = "/mnt/hgvm/unit"
PROFILES = "/usr/share/hostgate/profiles"


def no_ia32():
    with open("/proc/cmdline") as f:
        return "ia32_emulation=0" in f.read().split()


def test_unit_policy_on_this_kernel():
    path = os.path.join(UNIT, "test_policy")
    if not os.path.exists(path):
        pytest.skip("no unit tests given (HGVM_UNIT)")
    r = subprocess.run([path], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, HG_PROFILES=PROFILES))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "PASSED" in out, out
    if no_ia32():
        assert "this kernel has no ia32 emulation" in out, out
    else:
        assert "this kernel has ia32 emulation" in out, out
    assert "x32 getpid: killed by the filter (SIGSYS)" in out, out
