#!/bin/sh
# Inside the VM, as root, started by hgvm-suite.service once the share is
# mounted at /mnt/hgvm: runs the guest suite with Debian's pytest and
# leaves its output, exit status and the boot's journal in out/. The
# unit powers the VM off when this ends.
share=/mnt/hgvm
out=$share/out
: >"$out/started"
{
	. /etc/os-release
	echo "$PRETTY_NAME, kernel $(uname -r), $(systemctl --version | head -n 1)"
	echo "/sys/fs/cgroup: $(stat -f -c %T /sys/fs/cgroup), PID 1: $(cat /proc/1/comm)," \
	    "bubblewrap $(dpkg-query -W -f '${Version}' bubblewrap)"
} >"$out/guest-info"
rm -rf /root/suite
cp -R "$share/guest" /root/suite
cd /root/suite
# On the console too (the unit's output): what the host shows of a VM it
# had to kill.
# shellcheck disable=SC2046
{
	HGVM_DEBS=$share/debs python3 -m pytest -v \
	    -p no:cacheprovider -o console_output_style=classic \
	    $(cat "$share/pytest-args") . 2>&1
	echo $? >/run/hgvm-rc
} | tee "$out/pytest.log"
rc=$(cat /run/hgvm-rc)
journalctl -b --no-pager -o short-precise >"$out/journal.log" 2>&1
echo "$rc" >"$out/rc"
sync
