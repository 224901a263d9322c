#!/bin/sh
# Build the base image of one Debian release for tests/vm/run.sh:
#   image.sh RELEASE DEB OUTDIR
# debootstraps RELEASE from this machine's own apt source, adds the
# packages of tests/vm/packages and DEB's runtime Depends, then writes
# OUTDIR/RELEASE.qcow2 (one ext4 filesystem, no partition table) and the
# image's own kernel and initrd beside it. No mount: mkfs.ext4 -d fills
# the filesystem from the tree.
set -eu
release=$1 deb=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)

# This machine's apt source: the first deb822 URIs: line, else the first
# "deb" line of sources.list. Never a mirror of our own choosing.
mirror_uri() {
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -e "$f" ] || continue
		awk '/^URIs:/ { print $2; exit }' "$f"
	done | head -n 1 | grep . ||
	    awk '$1 == "deb" { for (i = 2; i <= NF; i++)
		if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
		/etc/apt/sources.list
}

# The package names of tests/vm/packages for this release.
image_packages() {
	sed -e 's/#.*//' "$here/packages" | while read -r a b; do
		[ -n "$a" ] || continue
		case $a in
		*:) [ "$a" = "$release:" ] && echo "$b" ;;
		*) echo "$a" ;;
		esac
	done
}

uri=$(mirror_uri)
[ -n "$uri" ] || { echo "image.sh: no apt source on this machine" >&2; exit 1; }
depends=$(dpkg-deb -f "$deb" Depends)
root=$out/$release.root
rm -rf "$root"
mkdir -p "$out/debs/$release"
echo "image.sh: debootstrap $release from $uri"
# Only the base: a --include= of names that differ between releases
# (the t64 libraries) would fail here; apt below resolves them.
debootstrap --variant=minbase --cache-dir="$out/debs/$release" \
    --include="$(image_packages | paste -sd, -)" \
    "$release" "$root" "$uri" >"$out/$release.debootstrap.log" 2>&1 || {
	tail -n 30 "$out/$release.debootstrap.log" >&2; exit 1; }

# apt in the chroot for the .deb's Depends: with /proc and /dev there,
# and no daemon started by a postinst.
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
trap 'umount "$root/proc" "$root/dev" 2>/dev/null || true' EXIT
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
# "apt-get satisfy" takes the Depends field as it is, versions and
# alternatives included. Where it does not resolve (a bookworm .deb on
# a later release), say why and install what does, so that the guest's
# own "apt-get install ./hostgate_*.deb" shows the rest.
if ! chroot "$root" env DEBIAN_FRONTEND=noninteractive \
    apt-get satisfy -y --no-install-recommends "$depends" \
    >"$out/$release.depends.log" 2>&1; then
	echo "image.sh: $release: the .deb's Depends do not all resolve:" >&2
	grep -E '^ |^E:' "$out/$release.depends.log" >&2 || true
	for d in $(echo "$depends" | tr ',' '\n' | sed 's/[(|].*//'); do
		chroot "$root" env DEBIAN_FRONTEND=noninteractive \
		    apt-get install -y --no-install-recommends "$d" \
		    >>"$out/$release.depends.log" 2>&1 ||
			echo "image.sh: $release: no package $d" >&2
	done
fi
chroot "$root" apt-get clean
rm -f "$root/usr/sbin/policy-rc.d"
umount "$root/proc" "$root/dev"
trap - EXIT

# The guest side: root on /dev/vda, the share at /mnt/hgvm, the unit
# that runs what the share holds and powers off, whatever happens.
echo "hgvm-$release" >"$root/etc/hostname"
echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" >"$root/etc/fstab"
mkdir -p "$root/mnt/hgvm"
cp "$here/hgvm-suite.service" "$root/etc/systemd/system/"
ln -sf ../hgvm-suite.service \
    "$root/etc/systemd/system/multi-user.target.wants/hgvm-suite.service"
# Nothing the suite does not need: no timers waking apt or fstrim
# during a run, no login prompt on the serial console.
for u in apt-daily.timer apt-daily-upgrade.timer fstrim.timer \
    e2scrub_all.timer e2scrub_reap.service serial-getty@ttyS0.service \
    getty@tty1.service; do
	ln -sf /dev/null "$root/etc/systemd/system/$u"
done
passwd -R "$root" -d root >/dev/null

kver=$(ls "$root/lib/modules" | sort -V | tail -n 1)
cp "$root/boot/vmlinuz-$kver" "$out/$release.vmlinuz"
cp "$root/boot/initrd.img-$kver" "$out/$release.initrd"
size=$(du -sm "$root" | cut -f1)
rm -f "$out/$release.raw"
# Room for the suite: the packages, the users' workspace images.
mkfs.ext4 -q -L hgvm -d "$root" "$out/$release.raw" $((size + 6144))M
qemu-img convert -O qcow2 "$out/$release.raw" "$out/$release.qcow2.new"
mv "$out/$release.qcow2.new" "$out/$release.qcow2"
rm -rf "$root" "$out/$release.raw"
