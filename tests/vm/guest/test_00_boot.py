"""The machine the rest runs on: systemd as PID 1 on a pure cgroup v2
hierarchy, as in production."""
import os
import subprocess


def test_pid1_is_systemd():
    assert os.readlink("/proc/1/exe").endswith("/systemd")
    with open("/proc/1/comm") as f:
        assert f.read().strip() == "systemd"


def test_cgroup2():
    r = subprocess.run(["stat", "-f", "-c", "%T", "/sys/fs/cgroup"],
                       capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "cgroup2fs"
    assert not os.path.exists("/sys/fs/cgroup/unified")
