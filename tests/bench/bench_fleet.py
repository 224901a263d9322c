"""hostgate's fleet benchmark (issue 14), `BENCH_ONLY=fleet make bench`:
three hosts on one PostgreSQL behind HAProxy beside one host on the
embedded store, all started in the same run and measured in turns.

1. GET /api/status with wrk (the house's -t2 -c32) as a user and as an
   admin (whose answer lists the fleet's hosts), rounds alternating:
   through HAProxy over 3 hosts on PostgreSQL (no HGHOST cookie: HAProxy
   spreads the requests), through HAProxy over 1 host on PostgreSQL, and
   one host on the embedded store, straight to frontd and through HAProxy
   (HAProxy's own share): requests/s, p50, p99;
2. POST /api/run_command `true`: one client, back to back, the four in
   turns: p50, p99 and the requests/s of one client; then 8 clients at
   once for a fixed count: requests/s;
3. login, mint and lookup, in turns on the embedded host, the 1-host fleet
   and the 3-host fleet (each straight to a host, so that HAProxy is not in
   the figure): POST /api/login, POST /api/session/tokens, and the first
   GET /api/status with that token on another host (on one host: the same
   one), medians.

Figures only, never pass/fail. Loopback addresses only; every loop is
bounded in count and time. Writes tests/bench/results/fleet.md."""

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
import shutil
import signal
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "system"))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import fleetlib  # noqa: E402
import hglib  # noqa: E402
import pglib  # noqa: E402

BENCH_USER = bench.BENCH_USER           # a user, not an admin
ADMIN_USER = ("benchadmin", "benchadmin-password-1")
RUNS, WARMUP = 50, 5
CONC, CONC_COUNT = 8, 200      # run_command, clients at once and in all
OPS = 30                        # login, mint, lookup: rounds
DEADLINE_SECONDS = 900
ENV = {
    "HOSTGATE_LOG_LEVEL": "warn",
    "HOSTGATE_MAX_TERMINALS_PER_USER": "200",
    "HOSTGATE_MAX_COMMANDS_PER_USER": "64",
    "HOSTGATE_LOGIN_RATE_PER_MINUTE": "10000",
    "HOSTGATE_LOGIN_BURST": "10000",
    "HOSTGATE_SPAWN_RATE_PER_MINUTE": "100000",
    "HOSTGATE_SPAWN_BURST": "100000",
    "HOSTGATE_MODE_RATE_PER_MINUTE": "10000",
    "HOSTGATE_MAX_CONNECTIONS_PER_ADDRESS": "1024",
}
log = bench.log


class Target:
    """One of the compared setups: where requests go (port) and the
    hosts' ports for the per-host figures."""

    def __init__(self, name, port, host_ports, ops=True):
        self.name = name
        self.port = port
        self.host_ports = host_ports
        self.ops = ops          # in the login, mint and lookup figures

    def api(self, port=None):
        """A logged-in keep-alive connection (bench.Api) to port (the
        front by default)."""
        port = port or self.port
        return bench.Api(port, *login(port))


def login(port, user=BENCH_USER):
    """(cookie, csrf) of a fresh login of user on port."""
    st, doc, cookie = post_login(port, user)
    if st != 200:
        raise bench.BenchError("login on port %d: %d %r" % (port, st, doc))
    return cookie, doc["csrf_token"]


def post_login(port, user=BENCH_USER):
    """(status, answer, cookie) of POST /api/login on a fresh connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("POST", "/api/login", body=json.dumps(
            {"username": user[0], "password": user[1]}),
            headers={"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        cookie = ""
        for k, v in r.getheaders():
            if k.lower() == "set-cookie" and v.startswith("hg_session="):
                cookie = v.split(";", 1)[0].split("=", 1)[1]
        try:
            doc = json.loads(body)
        except ValueError:
            doc = body
        return r.status, doc, cookie
    finally:
        c.close()


def bench_status(targets, res):
    log("1. GET /api/status with wrk %s, %d rounds, the %d setups in turns"
        % (" ".join(bench.WRK_ARGS), bench.WRK_ROUNDS, len(targets)))
    rounds = {t.name: [] for t in targets}
    admin = {t.name: [] for t in targets}
    for i in range(bench.WRK_ROUNDS):
        order = targets[i % len(targets):] + targets[:i % len(targets)]
        for t in order:
            for user, out in ((BENCH_USER, rounds), (ADMIN_USER, admin)):
                cookie, _ = login(t.port, user)
                r, _ = bench.wrk("http://127.0.0.1:%d/api/status" % t.port,
                                 ["Cookie: hg_session=" + cookie])
                out[t.name].append(r)
    res["status"] = {n: bench.median_round(r) for n, r in rounds.items()}
    res["status_admin"] = {n: bench.median_round(r)
                           for n, r in admin.items()}
    for n, r in res["status_admin"].items():
        log("   %-24s %8.0f req/s  p50 %.2f ms  p99 %.2f ms, as an admin"
            % (n, r["rps"], r["p50_ms"], r["p99_ms"]))
    for n, r in res["status"].items():
        log("   %-24s %8.0f req/s  p50 %.2f ms  p99 %.2f ms (%d non-2xx)"
            % (n, r["rps"], r["p50_ms"], r["p99_ms"], r["non2xx"]))


def bench_run_command(targets, res):
    log("2. POST /api/run_command `true`: %d runs after %d warm-up, the "
        "setups in turns; then %d clients at once, %d requests"
        % (RUNS, WARMUP, CONC, CONC_COUNT))
    apis = {t.name: t.api() for t in targets}
    times = {t.name: [] for t in targets}
    for i in range(WARMUP + RUNS):
        order = targets[i % len(targets):] + targets[:i % len(targets)]
        for t in order:
            dt = bench.retrying("run_command " + t.name,
                                lambda: bench.timed_true(apis[t.name],
                                                         t.name))
            if i >= WARMUP:
                times[t.name].append(dt)
    for a in apis.values():
        a.close()
    conc = {}
    for t in targets:
        conc[t.name] = concurrent_true(t)
    res["run_command"] = {}
    for t in targets:
        xs = times[t.name]
        res["run_command"][t.name] = {
            "p50_ms": statistics.median(xs) * 1000,
            "p99_ms": bench.quantile(xs, 0.99) * 1000,
            "rps1": len(xs) / sum(xs),
            "rps": conc[t.name]}
        r = res["run_command"][t.name]
        log("   %-24s p50 %.2f ms  p99 %.2f ms  one client %.1f req/s  "
            "%d clients %.1f req/s" % (t.name, r["p50_ms"], r["p99_ms"],
                                       r["rps1"], CONC, r["rps"]))


def concurrent_true(t):
    """Requests/s of CONC clients running `true` until CONC_COUNT ran."""
    apis = [t.api() for _ in range(CONC)]
    left = [CONC_COUNT]
    lock = threading.Lock()
    errors = []

    def worker(api):
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            try:
                bench.timed_true(api, t.name)
            except bench.BenchError as e:
                errors.append(str(e))
                return
    threads = [threading.Thread(target=worker, args=(a,), daemon=True)
               for a in apis]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    dt = time.perf_counter() - t0
    for a in apis:
        a.close()
    if errors:
        raise bench.BenchError("%s: %d clients: %s" % (t.name, CONC,
                                                        errors[0]))
    return CONC_COUNT / dt


def bench_ops(targets, res):
    targets = [t for t in targets if t.ops]
    log("3. login, mint and first lookup on another host: %d rounds, the "
        "setups in turns" % OPS)
    got = {t.name: {"login": [], "mint": [], "lookup": []} for t in targets}
    for i in range(OPS):
        order = targets[i % len(targets):] + targets[:i % len(targets)]
        for t in order:
            ports = t.host_ports
            here = ports[i % len(ports)]
            there = ports[(i + 1) % len(ports)]
            t0 = time.perf_counter()
            st, doc, cookie = post_login(here)
            t1 = time.perf_counter()
            if st != 200:
                raise bench.BenchError("%s login: %d %r" % (t.name, st, doc))
            api = bench.Api(here, cookie, doc["csrf_token"])
            t2 = time.perf_counter()
            st, tok = api.request("POST", "/api/session/tokens")
            t3 = time.perf_counter()
            api.close()
            if st != 201:
                raise bench.BenchError("%s mint: %d %r" % (t.name, st, tok))
            t4 = time.perf_counter()
            st = bearer_status(there, tok["token"])
            t5 = time.perf_counter()
            if st != 200:
                raise bench.BenchError("%s lookup: %d" % (t.name, st))
            got[t.name]["login"].append(t1 - t0)
            got[t.name]["mint"].append(t3 - t2)
            got[t.name]["lookup"].append(t5 - t4)
    res["ops"] = {n: {k: statistics.median(v) * 1000 for k, v in d.items()}
                  for n, d in got.items()}
    for n, d in res["ops"].items():
        log("   %-24s login %.2f ms  mint %.2f ms  lookup %.2f ms"
            % (n, d["login"], d["mint"], d["lookup"]))


def bearer_status(port, token):
    """The status of GET /api/status with token on a fresh connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", "/api/status",
                  headers={"Authorization": "Bearer " + token})
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def markdown(res, names):
    e, f1, f3, le = names
    st, rc, ops = res["status"], res["run_command"], res["ops"]
    rows = []

    def ratio(a, b):
        return "%.3f" % (a / b) if b else "-"
    for n in (f3, f1, le):
        rows += [
            ("GET /api/status, requests/s (wrk %s), median of %d: %s"
             % (" ".join(bench.WRK_ARGS), bench.WRK_ROUNDS, n),
             "%.0f" % st[n]["rps"], "%.0f (%s)" % (st[e]["rps"], e),
             ratio(st[n]["rps"], st[e]["rps"])),
            ("GET /api/status, p50 / p99: %s" % n,
             "%.2f / %.2f ms" % (st[n]["p50_ms"], st[n]["p99_ms"]),
             "%.2f / %.2f ms" % (st[e]["p50_ms"], st[e]["p99_ms"]),
             "%s / %s" % (ratio(st[n]["p50_ms"], st[e]["p50_ms"]),
                          ratio(st[n]["p99_ms"], st[e]["p99_ms"]))),
        ]
    sa = res["status_admin"]
    for n in (f3, f1):
        rows.append(("GET /api/status as an admin (with the fleet's hosts), "
                     "requests/s: %s" % n, "%.0f" % sa[n]["rps"],
                     "%.0f (%s, as an admin)" % (sa[e]["rps"], e),
                     ratio(sa[n]["rps"], sa[e]["rps"])))
    rows.append(("GET /api/status, requests/s: HAProxy over 1 host, "
                 "PostgreSQL beside the embedded store",
                 "%.0f" % st[f1]["rps"], "%.0f" % st[le]["rps"],
                 ratio(st[f1]["rps"], st[le]["rps"])))
    for n in (f3, f1, le):
        rows += [
            ("run_command `true`, one client, p50 / p99 of %d: %s"
             % (RUNS, n), "%.2f / %.2f ms" % (rc[n]["p50_ms"],
                                              rc[n]["p99_ms"]),
             "%.2f / %.2f ms (%s)" % (rc[e]["p50_ms"], rc[e]["p99_ms"], e),
             "%s / %s" % (ratio(rc[n]["p50_ms"], rc[e]["p50_ms"]),
                          ratio(rc[n]["p99_ms"], rc[e]["p99_ms"]))),
            ("run_command `true`, %d clients, requests/s: %s" % (CONC, n),
             "%.1f" % rc[n]["rps"], "%.1f" % rc[e]["rps"],
             ratio(rc[n]["rps"], rc[e]["rps"])),
        ]
    for k, what in (("login", "POST /api/login"),
                    ("mint", "POST /api/session/tokens"),
                    ("lookup", "first GET /api/status with the new token "
                     "on another host (one host: the same)")):
        rows.append(("%s, median of %d: 3 hosts beside 1 host, both on "
                     "PostgreSQL" % (what, OPS),
                     "%.2f ms" % ops[f3][k], "%.2f ms" % ops[f1][k],
                     ratio(ops[f3][k], ops[f1][k])))
        rows.append(("the same: 1 host on PostgreSQL beside 1 on the "
                     "embedded store", "%.2f ms" % ops[f1][k],
                     "%.2f ms" % ops[e][k], ratio(ops[f1][k], ops[e][k])))
    out = ["# hostgate fleet benchmark results", "",
           "- date: %s" % res["date"],
           "- machine: %s" % res["machine"],
           "- load average (1 min) at the start and at the end: %s and %s"
           % (res["load_start"], res["load_end"]),
           "- daemons: %s mode, build `%s`; PostgreSQL %s on a unix "
           "socket (fsync %s, synchronous_commit on); %s"
           % (res["mode"], os.environ.get("HG_BUILD", "build"),
              res.get("pg_version", "?"), res.get("pg_fsync", "?"),
              res.get("haproxy", "")),
           "", "| benchmark | figure | reference | ratio |",
           "|---|---|---|---|"]
    out += ["| %s | %s | %s | %s |" % r for r in rows]
    out += ["", "- failures retried: %s." % ("; ".join(bench.RETRIED)
                                              if bench.RETRIED else "none")]
    return "\n".join(out)


def start_fleet(mode, n, pg, name):
    f = fleetlib.Fleet(mode, n=n, env=ENV, name=name, pg=pg,
                       check_inter="1s", host_lost=10)
    f.start(users=False)
    f.hosts[0].add_user(*BENCH_USER)
    f.hosts[0].add_user(*ADMIN_USER, admin=True)
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "results",
                                                  "fleet.md"))
    ap.add_argument("--mode", default=os.environ.get("BENCH_MODE", "user"),
                    choices=hglib.MODES)
    args, _ = ap.parse_known_args()
    why = fleetlib.missing()
    if why:
        raise bench.BenchError(why)

    def stop(signum, frame):
        raise bench.BenchError("stopped by signal %d" % signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(DEADLINE_SECONDS)
    res = {"date": time.strftime("%Y-%m-%d %H:%M %Z"),
           "machine": bench.machine(), "mode": args.mode,
           "load_start": bench.loadavg()}
    t0 = time.monotonic()
    pg = hg = f1 = f3 = lb = None
    names = ("1 host, embedded store", "HAProxy, 1 host on PostgreSQL",
             "HAProxy, 3 hosts on PostgreSQL",
             "HAProxy, 1 host, embedded store")
    try:
        pg = pglib.Postgres()
        # pglib turns fsync off for the tests; a store is measured with
        # its writes on disk, as the embedded one's are.
        with open(os.path.join(pg.data, "postgresql.conf"), "a") as f:
            f.write("fsync = on\nfull_page_writes = on\n"
                    "synchronous_commit = on\n")
        pg.stop()
        pg.start()
        res["pg_fsync"] = pg.psql("postgres", "SHOW fsync")[0][0]
        res["pg_version"] = pg.psql("postgres", "SHOW server_version")[0][0]
        r = subprocess.run([fleetlib.HAPROXY, "-v"], capture_output=True,
                           text=True)
        res["haproxy"] = r.stdout.splitlines()[0] if r.stdout else ""
        hg = hglib.Hostgate(args.mode, env=ENV, name="bench-emb")
        hg.start_all()
        hg.add_user(*BENCH_USER)
        hg.add_user(*ADMIN_USER, admin=True)
        f1 = start_fleet(args.mode, 1, pg, "bench-f1")
        f3 = start_fleet(args.mode, 3, pg, "bench-f3")
        lb = fleetlib.Balancer(tempfile.mkdtemp(prefix="hg-bench-lb-"),
                               [("h1", "127.0.0.1:%d" % hg.port)], "1s")
        lb.start()
        targets = [Target(names[0], hg.port, [hg.port]),
                   Target(names[3], lb.port, [hg.port], ops=False),
                   Target(names[1], f1.lb.port, [h.port for h in f1.hosts]),
                   Target(names[2], f3.lb.port, [h.port for h in f3.hosts])]
        bench_status(targets, res)
        bench_run_command(targets, res)
        bench_ops(targets, res)
    finally:
        signal.alarm(0)
        if lb is not None:
            lb.stop()
            shutil.rmtree(lb.dir, ignore_errors=True)
        for f in (f3, f1):
            if f is not None:
                try:
                    f.cleanup()
                except AssertionError as e:
                    log("warning: %s" % str(e)[:300])
        if hg is not None:
            try:
                hg.cleanup()
            except AssertionError as e:
                log("warning: %s" % str(e)[:300])
        if pg is not None:
            pg.close()
    res["load_end"] = bench.loadavg()
    md = markdown(res, names)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(md)
    print()
    print(md)
    log("done in %.0f s; written to %s" % (time.monotonic() - t0, args.out))


if __name__ == "__main__":
    try:
        main()
    except bench.BenchError as e:
        print("bench: FAILED: %s" % e, file=sys.stderr)
        sys.exit(1)
