#!/usr/bin/env python3
"""The gateway's request path with many services configured: 1, 10 and 100 services in one sluice.yaml,
load on the last one (its Host is looked up among all of them), against the same load sent straight to
one demo-app instance in the same run. The per-request overhead should not grow with the number of
services (routing goes through indexes rebuilt when revisions change, not a scan per request).

For each N: start `sluice gateway --config` with N services (validate: false, so only the loaded one
starts, on the first request), warm it with 200 requests, then h2load --h1 -n REQUESTS -c CONNS; report
req/s and the mean and p99-ish (max of h2load's per-connection means is not kept: mean and sd) request
time. Loopback only; every loop is bounded (REQUESTS per run, a 120 s timeout per h2load)."""
import os, re, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLUICE = os.environ.get("SLUICE", f"{ROOT}/build/release/app/sluice")
APP = os.environ.get("DEMO_APP", f"{ROOT}/build/release/demo/sluice-demo-app")
REQUESTS = int(os.environ.get("REQUESTS", "20000"))
CONNS = int(os.environ.get("CONNS", "8"))
COUNTS = [int(n) for n in os.environ.get("SERVICES", "1,10,100").split(",")]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, deadline=20):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    sys.exit(f"nothing listens on {port}")


def h2load(url, host=None, n=REQUESTS):
    cmd = ["h2load", "--h1", f"-n{n}", f"-c{CONNS}", url]
    if host:
        cmd[1:1] = ["-H", f":authority: {host}"]  # h2load sends Host from :authority
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
    m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out)
    ok = int(re.search(r"(\d+) succeeded", out).group(1))
    if ok != n:
        sys.exit(f"{n - ok} requests failed:\n{out}")

    def us(text):
        v = float(re.match(r"[\d.]+", text).group(0))
        return v * 1000 if text.endswith("ms") else v * 1e6 if text.endswith("s") and not text.endswith("us") else v
    return rps, us(m.group(3)), us(m.group(4))


def direct():
    port = free_port()
    app = subprocess.Popen([APP, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        h2load(f"http://127.0.0.1:{port}/", n=200)
        return h2load(f"http://127.0.0.1:{port}/")
    finally:
        app.terminate()
        app.wait(10)


def through_gateway(n):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sluice.yaml")
        with open(path, "w") as f:
            f.write("services:\n")
            for i in range(n):
                f.write(f"  s{i}:\n    command: {APP}\n    validate: false\n")
        port, admin = free_port(), free_port()
        gw = subprocess.Popen([SLUICE, "gateway", "--config", path, "--listen", f"127.0.0.1:{port}",
                               "--admin", f"127.0.0.1:{admin}", "--status", "none"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            host = f"s{n - 1}.localhost"
            h2load(f"http://127.0.0.1:{port}/", host, n=200)  # the cold start, then warm
            return h2load(f"http://127.0.0.1:{port}/", host)
        finally:
            gw.terminate()
            gw.wait(30)


def main():
    rps, mean, sd = direct()
    print(f"direct to the app:            {rps:10.0f} req/s  mean {mean:7.1f} us  sd {sd:7.1f} us")
    for n in COUNTS:
        g_rps, g_mean, g_sd = through_gateway(n)
        print(f"gateway, {n:3d} services:        {g_rps:10.0f} req/s  mean {g_mean:7.1f} us  sd {g_sd:7.1f} us"
              f"  overhead {g_mean - mean:6.1f} us/request")


if __name__ == "__main__":
    main()
