#!/usr/bin/python3
"""A black-box conformance suite for Knative queue-proxy implementations (knative/serving#7361).

It talks to a running queue-proxy (Knative's, or sluice's `sluice sidecar`) and the app behind it, which
must be sluice's demo app (sluice-demo-app: /, /headers, /delay/MS, /status/N, /ws) or an app with the
same routes. It checks the contract other Knative components rely on: probes and their answers, header
handling, the breaker and its queue, timeouts and their statuses, the Stat protobuf and Prometheus names,
h2c and WebSocket passthrough, and (with --pid, last, because it ends the process) drain and
/wait-for-drain. Cases whose inputs are not given are skipped. Exit status 0 when nothing failed.

See README.md in this directory for running it against sluice and against Knative's queue-proxy."""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

from qp_client import WebSocket, decode_stat, echoed_headers, request

CASES = []
# Cases where Knative's queue-proxy is known to answer otherwise (see README.md): expected to fail
# with --known-differences queue-proxy.
QP_DIFFERS = {"h2c_to_an_http1_app", "websocket_outlives_the_response_start_timeout"}


def case(fn):
    CASES.append(fn)
    return fn


class Skip(Exception):
    pass


def need(value, what):
    if not value:
        raise Skip(f"needs {what}")


def check(cond, message):
    if not cond:
        raise AssertionError(message)


HELLO = b"Hello from sluice-demo-app\n"
KUBELET = {"User-Agent": "kube-probe/1.30", "K-Network-Probe": "queue"}
ACTIVATOR = {"User-Agent": "Knative-Activator-Probe", "K-Network-Probe": "queue"}


@case
def proxies_a_request(a):
    status, _, body = request(a.queue, "/")
    check(status == 200 and body == HELLO, f"got {status} {body!r}")
    if a.app:  # the same app, directly
        status, _, body = request(a.app, "/")
        check(status == 200 and body == HELLO, f"the app itself answered {status} {body!r}")


@case
def kubelet_probe_is_answered_by_the_queue_proxy(a):
    status, _, body = request(a.queue, "/", KUBELET)
    check(status == 200 and body == b"queue", f"got {status} {body!r}")


@case
def activator_probe_gets_exactly_queue(a):
    status, _, body = request(a.queue, "/", ACTIVATOR)
    check(status == 200 and body == b"queue", f"got {status} {body!r} (the activator compares the body byte for byte)")


@case
def unexpected_probe_header_value_is_400(a):
    status, _, body = request(a.queue, "/", {"User-Agent": "Knative-Activator-Probe", "K-Network-Probe": "nonsense"})
    check(status == 400 and body.startswith(b"unexpected probe header value"), f"got {status} {body!r}")


@case
def host_and_forwarding_headers(a):
    status, _, body = request(a.queue, "/headers", {"Host": "shop.example.com", "X-Forwarded-For": "203.0.113.9",
                                                    "X-Forwarded-Proto": "https"})
    check(status == 200, f"got {status}")
    h = echoed_headers(body)
    check(h.get("host") == "shop.example.com", f"Host became {h.get('host')!r}")
    check(h.get("x-forwarded-for", "").startswith("203.0.113.9"), f"X-Forwarded-For {h.get('x-forwarded-for')!r}")
    fwd = h.get("forwarded", "")
    check(fwd.startswith("for=203.0.113.9") and "proto=https" in fwd, f"Forwarded {fwd!r} not synthesized")


@case
def original_host_is_restored_and_knative_headers_stripped(a):
    status, _, body = request(a.queue, "/headers", {"Host": "activator.internal", "K-Original-Host": "app.example.com",
                                                    "Knative-Serving-Revision": "r", "Knative-Serving-Namespace": "n"})
    h = echoed_headers(body)
    check(status == 200 and h.get("host") == "app.example.com", f"Host {h.get('host')!r}")
    check("knative-serving-revision" not in h and "knative-serving-namespace" not in h, f"revision headers reached the app: {h}")


@case
def hop_by_hop_headers_stop_at_the_proxy(a):
    status, _, body = request(a.queue, "/headers", {"Connection": "close, X-Hop", "X-Hop": "1", "X-End": "2"})
    h = echoed_headers(body)
    check(status == 200 and "x-hop" not in h and h.get("x-end") == "2", f"app saw {h}")


@case
def breaker_queues_ten_times_the_concurrency_then_503(a):
    need(a.container_concurrency, "--container-concurrency > 0")
    need(not a.response_start_timeout and (not a.revision_timeout or a.revision_timeout > 11 * 0.5 + 5),
         "no short timeouts (waiting in the queue counts toward them)")
    cc = a.container_concurrency
    total, extra = 11 * cc + 3, 3
    results = []
    lock = threading.Lock()

    def one():
        try:
            status, _, body = request(a.queue, "/delay/500", timeout=60)
        except Exception as e:  # noqa: BLE001 - recorded as a failure below
            status, body = 0, str(e).encode()
        with lock:
            results.append((status, body))

    threads = [threading.Thread(target=one) for _ in range(total)]
    for t in threads:  # all in before the first is served (500 ms): cc in flight, 10·cc waiting, the rest refused
        t.start()
    for t in threads:
        t.join()
    ok = sum(1 for s, _ in results if s == 200)
    full = [b for s, b in results if s == 503]
    check(ok == total - extra and len(full) == extra, f"{ok} served, {len(full)} refused of {total}: {results[:3]}")
    check(all(b"pending request queue full" in b for b in full), f"503 bodies {full[:1]!r}")


@case
def request_timeout_is_504_before_the_response(a):
    need(a.revision_timeout, "--revision-timeout")
    status, _, body = request(a.queue, f"/delay/{int(a.revision_timeout * 1000) + 1500}", timeout=a.revision_timeout + 30)
    check(status == 504 and body.strip() == b"request timeout", f"got {status} {body!r}")


@case
def response_start_timeout_is_504(a):
    need(a.response_start_timeout, "--response-start-timeout")
    status, _, body = request(a.queue, f"/delay/{int(a.response_start_timeout * 1000) + 1500}",
                              timeout=a.response_start_timeout + 30)
    check(status == 504, f"got {status} {body!r}")


@case
def stat_protobuf_for_the_autoscaler(a):
    need(a.metrics, "--metrics")
    for _ in range(5):
        request(a.queue, "/")
    deadline = time.time() + 5
    while True:
        status, headers, body = request(a.metrics, "/metrics", {"Accept": "application/protobuf"})
        check(status == 200 and headers.get("content-type") == "application/protobuf", f"got {status} {headers}")
        check(len(body) <= 336, f"{len(body)} bytes: the autoscaler reads at most 336")
        stat = decode_stat(body)
        if stat.get("request_count", 0) > 0 or time.time() > deadline:
            break
        time.sleep(0.2)
    check(stat.get("request_count", 0) > 0, f"no requests counted: {stat}")
    check(stat.get("process_uptime", 0) > 0, f"no uptime: {stat}")
    check("timestamp" not in stat, "timestamp set (queue-proxy never sets it)")
    if a.pod:
        check(stat.get("pod_name") == a.pod, f"pod_name {stat.get('pod_name')!r}")


@case
def prometheus_request_metrics(a):
    need(a.user_metrics, "--user-metrics")
    request(a.queue, "/")
    status, _, body = request(a.user_metrics, "/metrics")
    names = {"otel": ["kn_serving_invocation_duration_seconds_bucket", "kn_serving_queue_depth"],
             "legacy": ["revision_request_count", "revision_request_latencies_bucket"]}[a.metric_family]
    text = body.decode()
    for n in names:
        check(n in text, f"{n} missing from :{a.user_metrics}/metrics")
    check("kube-probe" not in text, "probes in the metrics")


@case
def h2c_to_an_http1_app(a):
    need(shutil.which("curl"), "curl")
    host, port = a.queue.rsplit(":", 1)
    r = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "10", f"http://{host}:{port}/"],
                       capture_output=True, timeout=20)
    check(r.returncode == 0 and r.stdout == HELLO, f"curl {r.returncode} {r.stdout!r} {r.stderr!r}")


@case
def websocket_passthrough(a):
    ws = WebSocket(a.queue)
    try:
        check(ws.status == 101, f"handshake answered {ws.status}")
        ws.send_text("hello through the queue")
        check(ws.read_text() == "hello through the queue", "echo differs")
    finally:
        ws.close()


@case
def websocket_outlives_the_response_start_timeout(a):
    need(a.response_start_timeout, "--response-start-timeout")
    ws = WebSocket(a.queue, timeout=a.response_start_timeout + 20)
    try:
        check(ws.status == 101, f"handshake answered {ws.status}")
        time.sleep(a.response_start_timeout + 1)
        ws.send_text("still here")
        check(ws.read_text() == "still here", "echo differs")
    except (ConnectionError, OSError) as e:
        raise AssertionError(f"the upgraded connection was cut: {e}") from e
    finally:
        ws.close()


# Last: ends the process under test.
@case
def drain_on_sigterm_and_wait_for_drain(a):
    need(a.pid, "--pid (the queue-proxy's process id; this case ends it)")
    waited = {}
    if a.admin:
        def wait_for_drain():
            waited["result"] = request(a.admin, "/wait-for-drain", timeout=a.quiet_period + 60)
        t = threading.Thread(target=wait_for_drain)
        t.start()
        time.sleep(0.3)
    os.kill(a.pid, signal.SIGTERM)
    time.sleep(0.3)
    status, _, body = request(a.queue, "/", KUBELET)
    check(status == 503 and b"shutting down" in body, f"health check during drain got {status} {body!r}")
    status, _, body = request(a.queue, "/")
    check(status == 200 and body == HELLO, f"ordinary request during drain got {status} {body!r}")
    if a.admin:
        t.join(a.quiet_period + 60)
        check(waited.get("result", (0,))[0] == 200, f"/wait-for-drain answered {waited.get('result')}")
    deadline = time.time() + a.quiet_period + 30
    while time.time() < deadline:
        try:
            socket.create_connection(tuple(a.queue.rsplit(":", 1)), timeout=1).close()
        except OSError:
            return  # listeners closed: drained
        time.sleep(0.2)
    raise AssertionError("still accepting connections after the quiet period")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queue", required=True, help="HOST:PORT of the serving port (8012)")
    p.add_argument("--app", help="HOST:PORT of the app directly (sluice-demo-app)")
    p.add_argument("--admin", help="HOST:PORT of the admin port (8022)")
    p.add_argument("--metrics", help="HOST:PORT of the autoscaler metrics port (9090)")
    p.add_argument("--user-metrics", help="HOST:PORT of the Prometheus request metrics (9091)")
    p.add_argument("--metric-family", choices=["otel", "legacy"], default="otel")
    p.add_argument("--container-concurrency", type=int, default=0)
    p.add_argument("--revision-timeout", type=float, help="REVISION_TIMEOUT_SECONDS it runs with")
    p.add_argument("--response-start-timeout", type=float, help="REVISION_RESPONSE_START_TIMEOUT_SECONDS")
    p.add_argument("--pod", help="SERVING_POD it runs with")
    p.add_argument("--pid", type=int, help="its process id: enables the drain case, which ends it")
    p.add_argument("--quiet-period", type=float, default=30, help="its drain quiet period in seconds")
    p.add_argument("--known-differences", choices=["none", "queue-proxy"], default="none",
                   help="queue-proxy: the cases README.md lists as answered otherwise by Knative's are expected to fail")
    p.add_argument("--only", help="run the cases whose names contain this")
    a = p.parse_args()
    failed = 0
    for fn in CASES:
        name = fn.__name__
        if a.only and a.only not in name:
            continue
        expect_fail = a.known_differences == "queue-proxy" and name in QP_DIFFERS
        started = time.time()
        try:
            fn(a)
            outcome = "XPASS" if expect_fail else "PASS"
        except Skip as s:
            outcome = f"SKIP ({s})"
        except Exception as e:  # noqa: BLE001 - every failure is reported, the run goes on
            outcome = "XFAIL" if expect_fail else "FAIL"
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            print(f"    {detail}")
            failed += outcome == "FAIL"
        print(f"{outcome:5} {name} ({time.time() - started:.1f}s)", flush=True)
    print(f"{failed} failed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
