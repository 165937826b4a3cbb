"""Drain: /wait-for-drain (the user container's preStop), SIGTERM, health checks and probes while draining,
the quiet period (queue-proxy's fixed 30 s, restarted by every request), listeners closing, in-flight
requests past 60 s, upgraded connections (kept, then cut 60 s after the listeners close), a second signal,
and /wait-for-drain without a SIGTERM (reset after 1 s). The long ones run in their own namespaces, in
parallel."""
import signal
import threading
import time

import clients
from harness import ADMIN, APP, HELLO, KUBELET, MAIN, Profile, case, check, port_open, wait_for

QUIET = 30  # queue-proxy's drainSleepDuration

DRAIN = Profile("drain", shard="drain-basic", restart=False)
STATE = {}


def background(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except Exception as e:  # noqa: BLE001 - looked at by the case
            box["error"] = e
        box["done"] = time.time()
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, box


def shutting_down(r):
    return r.status == 503 and r.body.strip() == b"shutting down"


@case(DRAIN)
def drain_begins_with_wait_for_drain_then_sigterm(t):
    STATE["wait"] = background(lambda: clients.request("/wait-for-drain", port=ADMIN, timeout=QUIET + 60))
    wait_for(lambda: clients.request("/", KUBELET).status == 503, 5, "health checks failing after /wait-for-drain")
    t.proxy.signal(signal.SIGTERM)
    STATE["sigterm"] = time.time()
    r = clients.request("/", KUBELET)
    check(shutting_down(r), f"health check after SIGTERM: {r}")


@case(DRAIN)
def health_checks_while_draining_are_503(t):
    for ua in ("kube-probe/1.31", "Knative-Activator-Probe", "Knative-Autoscaling-Probe"):
        r = clients.request("/", {"User-Agent": ua, "K-Network-Probe": "queue"})
        check(shutting_down(r), f"{ua}: {r}")
    r = clients.request("/", {"User-Agent": "kube-probe/1.31"})
    check(shutting_down(r), f"kube-probe without K-Network-Probe: {r}")


@case(DRAIN)
def network_probes_while_draining_are_503(t):
    for headers in ({"K-Network-Probe": "probe", "K-Network-Hash": "h"}, {"K-Network-Probe": "probe"}):
        r = clients.request("/", dict(headers, **{"User-Agent": "Knative-Ingress-Probe"}))
        check(shutting_down(r), f"{headers}: {r}")


@case(DRAIN)
def kubelet_probe_header_while_draining_is_proxied(t):
    r = clients.request("/", {"User-Agent": "curl/8", "K-Kubelet-Probe": "1"})
    check(r.status == 200 and r.body == HELLO, f"{r}")


@case(DRAIN)
def requests_are_served_while_draining(t):
    r = clients.request("/")
    check(r.status == 200 and r.body == HELLO, f"{r}")
    r = clients.request("/", {"User-Agent": "curl/8", "K-Network-Probe": "queue"})
    check(r.status == 200 and r.body == HELLO, f"K-Network-Probe: queue from an ordinary client: {r}")
    STATE["last"] = time.time()


@case(DRAIN)
def quiet_period_restarts_with_each_request(t):
    last = STATE.get("last") or STATE["sigterm"]
    wait_for(lambda: time.time() >= last + QUIET - 5, QUIET, "")
    check(port_open(MAIN), f"listener closed {time.time() - last:.1f}s after the last request (quiet period {QUIET}s)")
    closed = wait_for(lambda: (not port_open(MAIN)) and time.time(), 25, "the listener closing")
    check(closed - last >= QUIET - 1, f"closed {closed - last:.1f}s after the last request")
    STATE["closed"] = closed


@case(DRAIN)
def wait_for_drain_answers_200_once_drained(t):
    th, box = STATE["wait"]
    th.join(30)
    r = box.get("value")
    check(r is not None and r.status == 200, f"/wait-for-drain: {box}")
    check(box["done"] >= STATE.get("last", STATE["sigterm"]) + QUIET - 1, "answered before the quiet period passed")


@case(DRAIN)
def exits_0_after_draining(t):
    code = t.proxy.wait_exit(15)
    check(code == 0, f"exit status {code}")


@case(Profile("drain-inflight", shard="drain-inflight"))
def in_flight_request_past_60s_completes(t):
    """A request in flight when SIGTERM comes is answered even after 65 s; then the process exits 0."""
    def app_requests():
        return int(clients.request("/stats", port=APP).body.split(b"requests=")[1].split(b" ")[0])
    base = app_requests()
    th, box = background(lambda: clients.request("/delay/65000", timeout=120))
    polls = [0]

    def arrived():
        polls[0] += 1
        return app_requests() - base - polls[0] >= 1
    wait_for(arrived, 10, "the long request reaching the app")
    sigterm = time.time()
    t.proxy.signal(signal.SIGTERM)
    wait_for(lambda: not port_open(MAIN), QUIET + 15, "the listener closing")
    check(th.is_alive(), f"the long request ended with the listeners: {box}")
    th.join(sigterm + 90 - time.time())
    r = box.get("value")
    check(r is not None and r.status == 200 and r.body == b"delayed 65000\n", f"the long request: {box}")
    code = t.proxy.wait_exit(15)
    check(code == 0, f"exit status {code}")


@case(Profile("drain-upgraded", shard="drain-upgraded"), since="1.22")
def upgraded_connection_survives_the_quiet_period(t):
    ws = clients.WebSocket(timeout=30)
    try:
        check(ws.echo("before") == "before", "echo before SIGTERM")
        t.proxy.signal(signal.SIGTERM)
        wait_for(lambda: not port_open(MAIN), QUIET + 15, "the listener closing")
        check(ws.echo("after the listeners closed") == "after the listeners closed", "echo after the quiet period")
    finally:
        ws.close()
    code = t.proxy.wait_exit(10)
    check(code == 0, f"exit status {code} (10 s after the last upgraded connection closed)")


@case(Profile("drain-upgraded-60s", shard="drain-upgraded-60s"), since="1.22")
def upgraded_connection_is_cut_60s_after_the_listeners_close(t):
    ws = clients.WebSocket(timeout=30)
    try:
        check(ws.echo("before") == "before", "echo before SIGTERM")
        t.proxy.signal(signal.SIGTERM)
        closed = wait_for(lambda: (not port_open(MAIN)) and time.time(), QUIET + 15, "the listener closing")
        code = t.proxy.wait_exit(80)
        ended = time.time()
        check(code is not None, "still running 80 s after the listeners closed, with an upgraded connection open")
        check(50 <= ended - closed <= 72, f"exited {ended - closed:.0f}s after the listeners closed (60 s expected)")
        check(code == 0, f"exit status {code}")
    finally:
        ws.close()


# --- short ones, in the main namespace ---

@case()
def second_sigterm_ends_at_once(t):
    p = t.start(label="second-sigterm")
    p.signal(signal.SIGTERM)
    wait_for(lambda: shutting_down(clients.request("/", KUBELET)), 5, "draining")
    p.signal(signal.SIGTERM)
    code = p.wait_exit(5)
    check(code is not None, "still running 5 s after a second SIGTERM")


@case()
def sigint_drains_like_sigterm(t):
    p = t.start(label="sigint")
    p.signal(signal.SIGINT)
    wait_for(lambda: shutting_down(clients.request("/", KUBELET)), 5, "health checks 503 after SIGINT")
    r = clients.request("/")
    check(r.status == 200 and r.body == HELLO, f"request while draining: {r}")
    check(p.alive(), "exited at once")


@case()
def wait_for_drain_without_sigterm_resets(t):
    """The user container's preStop hook ran but no SIGTERM followed (a liveness restart): after 1 s the
    drain is called off, /wait-for-drain answers 200 and health checks pass again."""
    t.start(label="drain-reset")
    th, box = background(lambda: clients.request("/wait-for-drain", port=ADMIN, timeout=30))
    started = time.time()
    wait_for(lambda: shutting_down(clients.request("/", KUBELET)), 0.9, "health checks 503 right after "
                                                                          "/wait-for-drain")
    th.join(10)
    r = box.get("value")
    check(r is not None and r.status == 200, f"/wait-for-drain: {box}")
    check(0.8 <= box["done"] - started <= 5, f"answered after {box['done'] - started:.1f}s")
    r = clients.request("/", KUBELET)
    check(r.status == 200 and r.body == b"queue", f"health check after the reset: {r}")
