"""A hostgate fleet for a browser test: the system tests' harness
(tests/system/fleetlib.py: a PostgreSQL of its own, N hostgates, HAProxy
in front on a port bound at 0, every host's HOSTGATE_PUBLIC_URL HAProxy's
URL), started in the mode test_fleet.py runs (root as root), with the
usual alice and bob and the built panel.

    /usr/bin/python3 tests/browser/fleet.py [N]

Writes one JSON line to stdout once the fleet is up,
{"url": HAProxy's URL, "hosts": [ids]} (or {"error": why}), then waits
for stdin's end and stops it all. A line "failed" on stdin first keeps
its directories and prints its logs (to stderr, like everything else)."""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "system"))

import fleetlib  # noqa: E402
import hglib  # noqa: E402


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    out = sys.stdout
    sys.stdout = sys.stderr     # the harness prints: keep stdout for us
    why = fleetlib.missing()
    if why is not None:
        print(json.dumps({"error": why}), file=out, flush=True)
        return 1
    fleet = fleetlib.Fleet(hglib.MODES[0], n=n, name="browser-fleet")
    # The built panel, in a copy every daemon user can read (as
    # tests/browser/lib.mjs does).
    web = os.path.join(fleet.dir, "web")
    shutil.copytree(os.path.join(hglib.REPO, "frontd", "web", "dist"), web)
    for d, _, files in os.walk(web):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    fleet.env["HOSTGATE_WEB_DIR"] = web
    try:
        fleet.start()
    except BaseException as e:
        print(json.dumps({"error": "the fleet did not start: %s" % e}),
              file=out, flush=True)
        return 1
    try:
        print(json.dumps({"url": fleet.lb.url, "hosts": fleet.ids}),
              file=out, flush=True)
        for line in sys.stdin:
            if line.strip() == "failed":
                fleet.failed = True
                print(fleet.logs())
    finally:
        fleet.cleanup(check=not fleet.failed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
