"""systemd-analyze security on the running units, by the systemd that runs
them: within the figures tests/system/test_install.py holds the units to
offline (docs/operations.md gives each unit's figure and what stays
open)."""

import re

import pytest

import hgvm as h

EXPOSURE_MAX = {
    "hostgate-frontd.service": 2.0,
    "hostgate-brokerd.service": 2.5,
    "hostgate-sandboxd.service": 5.3,
    "hostgate-egressd.service": 1.5,
}


@pytest.mark.parametrize("unit", sorted(EXPOSURE_MAX))
def test_exposure(unit):
    out = h.sh("systemd-analyze", "security", "--no-pager", unit).stdout
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out)
    assert m, out
    print("%s: %s" % (unit, m.group(1)))
    assert float(m.group(1)) <= EXPOSURE_MAX[unit], out
