#!/bin/sh
# The installed .deb under systemd (PID 1) on cgroup v2, in qemu:
#   tests/vm/run.sh PATH/TO/hostgate_VER_ARCH.deb
# For each release (HGVM_RELEASES, default "bookworm trixie"): a base
# image (image.sh, cached under /var/cache/hostgate-tests/vm and rebuilt
# when its package list changes), a copy-on-write overlay of it booted
# under software emulation with the image's own kernel and initrd, and
# the guest suite (guest/) run inside by a unit of the image, which
# powers the VM off. The .debs go in, and the results come out, through
# a 9p share; the VM has no network device. The VMs run at the same time,
# one vCPU each.
set -eu
[ $# = 1 ] || { echo "usage: $0 hostgate_VER_ARCH.deb" >&2; exit 2; }
# HGVM_UNIT: unit test binaries the guest runs too (test_policy: the
# seccomp filter's other ABIs on a kernel without ia32 emulation).
# HGVM_NO_IA32: the releases booted with ia32_emulation=0 (Linux 6.7 on:
# Debian 13's kernel has it, Debian 12's has not).
no_ia32=${HGVM_NO_IA32-trixie}
[ "$(id -u)" = 0 ] || { echo "hgvm: run as root (debootstrap, chroot)" >&2; exit 2; }
for t in qemu-system-x86_64 qemu-img debootstrap mkfs.ext4 dpkg-deb; do
	command -v "$t" >/dev/null 2>&1 || {
		echo "hgvm: $t is missing: apt-get install --no-install-recommends" \
		    "qemu-system-x86 qemu-utils debootstrap e2fsprogs" >&2
		exit 2
	}
done
deb=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
cache=${HGVM_CACHE:-/var/cache/hostgate-tests}/vm
releases=${HGVM_RELEASES:-bookworm trixie}
# The hard bound on one VM, boot to power-off (a run takes a few minutes).
limit=${HGVM_TIMEOUT:-1500}
mem=${HGVM_MEMORY:-2048}
mkdir -p "$cache"
work=$(mktemp -d /tmp/hgvm.XXXXXX)
trap 'rm -rf "$work"' EXIT

now() { date +%s; }

# The key of a release's image: what image.sh installs and how.
image_key() {
	{ echo "$1"; dpkg-deb -f "$deb" Depends; cat "$here/packages" \
	    "$here/image.sh" "$here/hgvm-suite.service"; } | sha256sum |
	    cut -d' ' -f1
}

# Base images: the stale ones rebuilt, at the same time (the downloads
# overlap the other's initramfs). One run at a time builds (a lock on the
# cache); a VM of another run keeps the image it opened, which a rebuild
# replaces by a rename.
t0=$(now)
exec 9>"$cache/lock"
flock 9
pids=""
for r in $releases; do
	key=$(image_key "$r")
	if [ -e "$cache/$r.qcow2" ] && [ "$(cat "$cache/$r.key" 2>/dev/null)" = "$key" ]; then
		echo "hgvm: $r: cached image $cache/$r.qcow2"
		continue
	fi
	echo "hgvm: $r: building the base image"
	rm -f "$cache/$r.key"
	( t=$(now); "$here/image.sh" "$r" "$deb" "$cache" >"$work/image-$r.log" 2>&1 &&
	    echo "$key" >"$cache/$r.key" &&
	    echo "hgvm: $r: image built in $(($(now) - t)) s" ||
	    { echo "hgvm: $r: image build failed:"; tail -n 40 "$work/image-$r.log"; exit 1; } ) &
	pids="$pids $!"
done
fail=0
for p in $pids; do wait "$p" || fail=1; done
for r in $releases; do
	[ -e "$work/image-$r.log" ] && grep '^image.sh: .*: ' "$work/image-$r.log" || true
done
[ $fail = 0 ] || exit 1
echo "hgvm: images ready in $(($(now) - t0)) s"

# The previous release's .deb, for the upgrade test.
t=$(now)
prev=$("$here/previous.sh" "$cache")
echo "hgvm: previous .deb $(basename "$prev") ready in $(($(now) - t)) s"
# A copy: the cache may change under a later run.
cp "$prev" "$work/"
prev=$work/$(basename "$prev")
flock -u 9

# One VM: an overlay, a share holding the suite and the .debs, qemu
# under a hard timeout. The console goes to a file.
vm_run() {
	r=$1 d=$work/$r
	mkdir -p "$d/share/debs/new" "$d/share/debs/previous" "$d/share/out"
	cp -R "$here/guest" "$d/share/guest"
	cp "$deb" "$d/share/debs/new/"
	cp "$prev" "$d/share/debs/previous/"
	mkdir -p "$d/share/unit"
	for u in ${HGVM_UNIT:-}; do cp "$u" "$d/share/unit/"; done
	append="root=/dev/vda rw console=ttyS0 panic=1"
	case " $no_ia32 " in *" $r "*) append="$append ia32_emulation=0" ;; esac
	# HGVM_PYTEST_ARGS: more arguments for the guest's pytest (-x, -k).
	printf '%s\n' "${HGVM_PYTEST_ARGS:-}" >"$d/share/pytest-args"
	qemu-img create -q -f qcow2 -b "$cache/$r.qcow2" -F qcow2 "$d/disk.qcow2"
	date +%s >"$d/t0"
	timeout -s KILL "$limit" qemu-system-x86_64 -accel tcg -cpu max \
	    -smp 1 -m "$mem" -no-reboot -display none -monitor none \
	    -serial "file:$d/console.log" -nic none \
	    -device virtio-rng-pci \
	    -kernel "$cache/$r.vmlinuz" -initrd "$cache/$r.initrd" \
	    -append "$append" \
	    -drive "file=$d/disk.qcow2,if=virtio,format=qcow2" \
	    -virtfs "local,path=$d/share,mount_tag=hgvm,security_model=none,id=hgvm" \
	    >"$d/qemu.log" 2>&1
	echo $? >"$d/qemu.rc"
}

for r in $releases; do vm_run "$r" & done
wait

# The results: the suite's output, its closing line, the timings.
status=0
for r in $releases; do
	d=$work/$r o=$d/share/out
	echo "=== hgvm: $r"
	[ -e "$o/guest-info" ] && sed 's/^/hgvm: guest: /' "$o/guest-info"
	if [ -e "$o/pytest.log" ]; then
		cat "$o/pytest.log"
	fi
	t0=$(cat "$d/t0")
	if [ -e "$o/started" ]; then
		ts=$(stat -c %Y "$o/started")
		echo "hgvm: $r: boot $((ts - t0)) s"
		[ -e "$o/rc" ] && echo "hgvm: $r: suite $(($(stat -c %Y "$o/rc") - ts)) s"
	fi
	rc=$(cat "$o/rc" 2>/dev/null || echo none)
	if [ "$rc" != 0 ]; then
		echo "hgvm: $r: FAILED (suite exit $rc, qemu exit $(cat "$d/qemu.rc"))"
		echo "hgvm: $r: the console's last lines:"
		tail -n 60 "$d/console.log"
		status=1
	fi
	# HGVM_KEEP=DIR keeps the console, the journal and the suite's output.
	if [ -n "${HGVM_KEEP:-}" ]; then
		mkdir -p "$HGVM_KEEP/$r" && cp -R "$o/." "$d/console.log" "$HGVM_KEEP/$r/"
	fi
	[ -e "$o/pytest.log" ] && echo "hgvm: $r: $(tail -n 1 "$o/pytest.log")"
done
exit $status
