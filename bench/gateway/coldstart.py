#!/usr/bin/env python3
"""What the gateway adds to a cold start and to a request to a frozen instance, measured against the
direct path in the same run.

Cold start: the app is `sh -c 'sleep S; exec sluice-demo-app'`. Direct: spawn it with PORT set and poll its
port every 0.1 ms until a GET / answers. Through the gateway: start `sluice gateway`, wait until it has
validated the app and scaled it to zero, then time one GET / (a new connection). The overhead is the
difference of the medians.

Thaw: 300 sequential GET / on new connections through the gateway with the instance frozen between
requests, against the same with --no-throttle; the overhead is the difference of the medians (and p99s).
Loopback only; every loop is bounded."""
import json, os, socket, statistics, subprocess, sys, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLUICE = os.environ.get("SLUICE", f"{ROOT}/build/release/app/sluice")
APP = os.environ.get("DEMO_APP", f"{ROOT}/build/release/demo/sluice-demo-app")
ROUNDS = int(os.environ.get("ROUNDS", "10"))
SLEEP = os.environ.get("APP_SLEEP", "0.2")
REQUESTS = int(os.environ.get("REQUESTS", "300"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def get(port, deadline):
    """One GET / on a new connection; retries connect until `deadline` (for the direct path)."""
    while True:
        s = socket.socket()
        try:
            s.connect(("127.0.0.1", port))
            break
        except ConnectionRefusedError:
            s.close()
            if time.monotonic() > deadline:
                raise TimeoutError("nothing listens on %d" % port)
            time.sleep(0.0001)
    s.sendall(b"GET / HTTP/1.1\r\nHost: app.localhost\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    if not data.startswith(b"HTTP/1.1 200"):
        raise RuntimeError("bad answer: %r" % data[:200])


def direct_cold():
    port = free_port()
    t0 = time.monotonic()
    p = subprocess.Popen(["/bin/sh", "-c", f"sleep {SLEEP}; exec {APP}"], env=dict(os.environ, PORT=str(port)),
                         stdout=subprocess.DEVNULL)
    try:
        get(port, t0 + 30)
        return time.monotonic() - t0
    finally:
        p.terminate()
        p.wait(10)


class Gateway:
    def __init__(self, *args):
        self.port, self.admin = free_port(), free_port()
        self.p = subprocess.Popen([SLUICE, "gateway", "--listen", f"127.0.0.1:{self.port}", "--admin",
                                   f"127.0.0.1:{self.admin}", "--status", "none", *args],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def status(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/.sluice/status", timeout=5) as r:
            return json.load(r)["services"][0]

    def wait(self, pred, seconds=30):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if pred(self.status()):
                    return
            except OSError:
                pass
            time.sleep(0.01)
        raise TimeoutError("gateway state not reached")

    def stop(self):
        self.p.terminate()
        self.p.wait(30)


def gateway_cold():
    gw = Gateway("--", "/bin/sh", "-c", f"sleep {SLEEP}; exec {APP}")
    try:
        gw.wait(lambda s: s["validated"] and not s["instances"])
        t0 = time.monotonic()
        get(gw.port, t0 + 30)
        return time.monotonic() - t0
    finally:
        gw.stop()


def warm_latencies(*flags):
    gw = Gateway(*flags, "--", APP)
    try:
        gw.wait(lambda s: s["validated"] and not s["instances"])
        get(gw.port, time.monotonic() + 30)  # the cold start, not measured
        out = []
        for _ in range(REQUESTS):
            if "--no-throttle" not in flags:
                gw.wait(lambda s: s["instances"] and s["instances"][0]["state"] == "frozen", 5)
            t0 = time.monotonic()
            get(gw.port, t0 + 5)
            out.append(time.monotonic() - t0)
        return out
    finally:
        gw.stop()


def ms(x):
    return "%.2f" % (x * 1000)


def p99(xs):
    return sorted(xs)[int(len(xs) * 0.99) - 1]


def main():
    direct = [direct_cold() for _ in range(ROUNDS)]
    via = [gateway_cold() for _ in range(ROUNDS)]
    d, g = statistics.median(direct), statistics.median(via)
    print(f"cold start, app sleeps {SLEEP} s then listens; median of {ROUNDS}:")
    print(f"  direct (spawn + poll every 0.1 ms + GET): {ms(d)} ms")
    print(f"  through sluice gateway (GET from zero):    {ms(g)} ms")
    print(f"  gateway overhead: {ms(g - d)} ms (goal < 5 ms); ratio {g / d:.3f}")
    thawed = warm_latencies()
    plain = warm_latencies("--no-throttle")
    print(f"warm request on a new connection, {REQUESTS} sequential, median / p99:")
    print(f"  unthrottled instance:          {ms(statistics.median(plain))} / {ms(p99(plain))} ms")
    print(f"  frozen instance (thaw first):  {ms(statistics.median(thawed))} / {ms(p99(thawed))} ms")
    print(f"  thaw overhead: {ms(statistics.median(thawed) - statistics.median(plain))} ms median, "
          f"{ms(p99(thawed) - p99(plain))} ms p99 (goal < 1 ms)")


if __name__ == "__main__":
    sys.exit(main())
