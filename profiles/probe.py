# hostgate's enforcement probe. sandboxd runs it inside the real sandbox
# (the same bwrap command line and seccomp filter as every spawn) before it
# serves sandboxed spawns, and again every 30 s with /healthz. Each check is
# an attack that must fail; any that gets through disables sandboxed
# spawns, with this script's output as the reason.
#
# argv[1]: sandboxd's pid on the host (its /proc entry must be invisible);
# argv[2]: sandboxd's pid namespace ("pid:[N]"), which must not be ours.
# Prints one line per check and "PROBE OK" when every attack failed.
import ctypes
import errno
import fcntl
import os
import socket
import sys
import termios

libc = ctypes.CDLL(None, use_errno=True)
failures = []


def check(name, attack):
    """Run attack(); it must raise OSError or return False."""
    try:
        result = attack()
    except OSError as e:
        print(f"{name}: refused ({errno.errorcode.get(e.errno, e.errno)})")
        return
    if result is False:
        print(f"{name}: refused")
        return
    print(f"{name}: GOT THROUGH")
    failures.append(name)


def syscall(nr, *args):
    r = libc.syscall(nr, *args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def write_outside():
    for path in ("/etc/hostgate-probe", "/usr/hostgate-probe",
                 "/hostgate-probe"):
        try:
            with open(path, "w") as f:
                f.write("x")
        except OSError:
            continue
        return True
    raise OSError(errno.EROFS, "read-only")


def tiocsti():
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSTI, b"x")


def unshare_user():
    CLONE_NEWUSER = 0x10000000
    if libc.unshare(CLONE_NEWUSER) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def vsock():
    AF_VSOCK = 40
    socket.socket(AF_VSOCK, socket.SOCK_STREAM).close()


def io_uring():
    params = ctypes.create_string_buffer(120)
    fd = syscall(425, 1, params)        # io_uring_setup(1, &params)
    os.close(fd)


def host_environ():
    pid = sys.argv[1]
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmdline = f.read()
    with open(f"/proc/{pid}/environ", "rb") as f:
        f.read()
    # A pid of the sandbox's own namespace may have the same number.
    return b"sandboxd" in cmdline


def host_pid_namespace():
    return os.readlink("/proc/self/ns/pid") == sys.argv[2]


check("write outside the workspace", write_outside)
check("TIOCSTI", tiocsti)
check("unshare a user namespace", unshare_user)
check("AF_VSOCK socket", vsock)
check("io_uring_setup", io_uring)
check("read sandboxd's environment", host_environ)
check("share the host's pid namespace", host_pid_namespace)
if failures:
    print("attacks got through: " + ", ".join(failures))
    sys.exit(1)
print("PROBE OK")
