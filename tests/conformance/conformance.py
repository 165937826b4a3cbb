#!/usr/bin/python3
"""A black-box conformance suite for replacements of Knative Serving's queue-proxy (knative/serving#7361).

  conformance.py --binary PATH --flavor sluice|queue-proxy --app-binary PATH [--only SUBSTRING] [--list]

It starts the binary under test (`PATH sidecar` for sluice, `PATH` for queue-proxy) with the environment
Knative's reconciler injects (v1.23) plus a few overrides per profile, in front of sluice's demo app, and
checks what the rest of Knative and the user can observe: start-up and exit per variable, every port on IPv4
and IPv6, readiness probes, probe agents, headers, limits, timeouts, the breaker, drain, request logs,
metrics and tracing. Each shard of cases runs in a private network namespace the suite makes itself (as root:
unshare --net --mount), so the binary listens on the real, fixed ports (8012, 8112, 8022, 9090, 9091, 8008)
with no test-only overrides, exactly as in a pod; the long drain cases run in parallel shards.

Output: one line per case `PASS|FAIL|XFAIL|XPASS|SKIP name (time)` (details indented below), then the
xfail count, then `N passed, N failed, N skipped`. Exit status 1 when a case failed, 2 when the machine cannot
run the suite. See README.md here."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # nothing written into the source tree


def machine_problem():
    """Why this machine cannot make the private network namespaces the suite needs (None when it can)."""
    if os.geteuid() != 0:
        return "the suite must run as root (it makes network and mount namespaces with unshare)"
    for tool in ("unshare", "ip", "mount"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    r = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private", "sh", "-c",
                        "ip link set lo up && ip -6 addr show dev lo | grep -q ::1 && echo ok"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or "ok" not in r.stdout:
        return f"cannot make a network namespace with IPv4 and IPv6 loopback: {(r.stderr or r.stdout).strip()}"
    return None


def selected(a, c):
    """--only: a comma-separated list of substrings of case names, profile names or areas."""
    if not a.only:
        return True
    keys = (c.name, c.profile.name if c.profile else "", c.area)
    return any(part and any(part in k for k in keys) for part in a.only.split(","))


def shard_main(a):
    """Inside a fresh network namespace: bring lo up, run this shard's cases, print one JSON line each."""
    import harness
    harness._die_with_parent()()  # the shard ends with the driver (a CI timeout kills the driver)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for port in (harness.MAIN, harness.ADMIN, harness.STATS, harness.APP):
        if harness.port_open(port):
            print("@@" + json.dumps({"fatal": f"port {port} is already in use in the new namespace"}), flush=True)
            sys.exit(2)
    cases = [c for c in harness.load_cases() if c.shard == a.shard and selected(a, c)]
    tmp = tempfile.mkdtemp(prefix=f"conformance-{a.shard}-")
    try:
        etc_overlay = harness.ensure_localhost(tmp)
    except (OSError, subprocess.CalledProcessError) as e:
        print("@@" + json.dumps({"fatal": f"cannot make localhost resolve in the new namespace: {e}"}), flush=True)
        sys.exit(2)
    world = harness.World(a.flavor, a.binary, a.app_binary, tmp, a.release or harness.LATEST)
    try:
        harness.run_shard(world, cases, lambda r: print("@@" + json.dumps(r), flush=True))
    finally:
        world.close()
        if etc_overlay:
            subprocess.run(["umount", "-l", "/etc"], capture_output=True)
            subprocess.run(["umount", "-l", etc_overlay], capture_output=True)
        if not a.keep:
            subprocess.run(["umount", "-l", os.path.join(tmp, "overlay")], capture_output=True)
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default="", help="the queue-proxy (or sluice) executable")
    p.add_argument("--flavor", default="sluice", choices=["sluice", "sluice-node", "queue-proxy"],
                   help="sluice: started as `BINARY sidecar`; sluice-node: each pod served by `BINARY node` through "
                        "its `BINARY node-stub`; queue-proxy: `BINARY`, deliberate differences XFAIL")
    p.add_argument("--app-binary", default="", help="sluice-demo-app, the user container")
    p.add_argument("--only", help="run only the cases whose name, profile or area contains one of these "
                                  "comma-separated strings")
    p.add_argument("--list", action="store_true", help="list the cases by area and exit")
    p.add_argument("--keep", action="store_true", help="keep the scratch directories (binary output per profile)")
    p.add_argument("--release", default=None,
                   help="with --flavor queue-proxy: the Knative release it is (e.g. 1.20); cases describing a later "
                        "release's behaviour that fail are LATER, not FAIL (default: the latest, 1.23)")
    p.add_argument("--shard", help=argparse.SUPPRESS)
    a = p.parse_args()
    a.binary, a.app_binary = os.path.abspath(a.binary), os.path.abspath(a.app_binary)

    if a.shard:
        return shard_main(a)

    import harness
    cases = harness.load_cases()
    if a.list:
        for c in cases:
            mark = f"  [deliberate: {harness.DELIBERATE[c.name]}]" if c.name in harness.DELIBERATE else ""
            mark += f"  [queue-proxy v{c.since} and later]" if c.since else ""
            print(f"{c.area:10} {c.name}{mark}")
        print(f"{len(cases)} cases")
        return 0
    for path in (a.binary, a.app_binary):
        if not path or not os.access(path, os.X_OK):
            print(f"error: {path} is not an executable file", flush=True)
            return 2
    problem = machine_problem()
    if problem:
        print(f"error: this machine cannot run the conformance suite: {problem}", flush=True)
        return 2

    # Private copies: a binary rebuilt while the suite runs must not change under it.
    original = a.binary
    bindir = tempfile.mkdtemp(prefix="conformance-bin-")
    for attr in ("binary", "app_binary"):
        copy = os.path.join(bindir, os.path.basename(getattr(a, attr)) + ("-app" if attr == "app_binary" else ""))
        shutil.copy2(getattr(a, attr), copy)
        setattr(a, attr, copy)

    shards = []
    for c in cases:
        if c.shard not in shards and selected(a, c):
            shards.append(c.shard)
    counts = {"PASS": 0, "FAIL": 0, "XFAIL": 0, "XPASS": 0, "SKIP": 0, "LATER": 0}
    seen = set()
    lock = threading.Lock()
    started = time.time()
    print(f"conformance: {a.flavor} {original}, {len(shards)} namespaces", flush=True)

    def run(shard):
        cmd = ["unshare", "--net", "--mount", "--propagation", "private", "/usr/bin/python3", os.path.abspath(__file__),
               "--shard", shard, "--binary", a.binary, "--flavor", a.flavor, "--app-binary", a.app_binary]
        if a.only:
            cmd += ["--only", a.only]
        if a.keep:
            cmd += ["--keep"]
        if a.release:
            cmd += ["--release", a.release]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE)
        stderr = []
        threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True).start()
        for line in proc.stdout:
            if not line.startswith("@@"):
                continue
            r = json.loads(line[2:])
            with lock:
                if "fatal" in r:
                    print(f"FAIL shard {shard}: {r['fatal']}", flush=True)
                    counts["FAIL"] += 1
                    continue
                seen.add(r["name"])
                counts[r["outcome"]] += 1
                out = f"{r['outcome']:5} {r['name']} ({r['time']:.1f}s)"
                if r["outcome"] in ("FAIL", "XFAIL", "SKIP", "XPASS", "LATER") and r.get("detail"):
                    out += "\n    " + str(r["detail"]).replace("\n", "\n    ")[:1500]
                print(out, flush=True)
        code = proc.wait()
        if code != 0:
            with lock:
                print(f"FAIL shard {shard} exited with {code}: {''.join(stderr)[-3000:]}", flush=True)
                counts["FAIL"] += 1

    threads = [threading.Thread(target=run, args=(s,)) for s in shards]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shutil.rmtree(bindir, ignore_errors=True)
    expected = {c.name for c in cases if selected(a, c)}
    missing = expected - seen
    for name in sorted(missing):
        print(f"FAIL  {name} (no result: its shard ended early)", flush=True)
        counts["FAIL"] += 1
    print(f"{counts['XFAIL']} xfailed (deliberate differences), {counts['XPASS']} xpassed, "
          f"{counts['LATER']} later (behaviour of a release after v{a.release or harness.LATEST}); "
          f"{time.time() - started:.0f}s", flush=True)
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped", flush=True)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
