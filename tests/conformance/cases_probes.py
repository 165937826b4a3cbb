"""Health checks and readiness probes.

Who asks: the kubelet (User-Agent kube-probe/…, and queue-proxy's own readinessProbe sends
K-Network-Probe: queue), the activator (Knative-Activator-Probe), the autoscaler (Knative-Autoscaling-Probe),
the ingress prober (K-Network-Probe: probe with K-Network-Hash). What is asked: SERVING_READINESS_PROBE, a
tcpSocket, httpGet (http/https, headers, thresholds), grpc action, or an array of them
(ENABLE_MULTI_CONTAINER_PROBES)."""
import json
import time

import clients
from harness import APP, BASE, GRPC_APP, HELLO, KUBELET, RECORDER, RECORDER_TLS, Profile, case, check, deliberate

ACTIVATOR = {"User-Agent": "Knative-Activator-Probe", "K-Network-Probe": "queue"}
AUTOSCALER = {"User-Agent": "Knative-Autoscaling-Probe", "K-Network-Probe": "queue"}


def probe_env(probe, **extra):
    env = {"SERVING_READINESS_PROBE": json.dumps(probe)}
    env.update(extra)
    return env


def health(t, headers=KUBELET, path="/", timeout=30):
    return clients.request(path, headers, timeout=timeout)


def expect_ready(t, headers=KUBELET):
    r = health(t, headers)
    check(r.status == 200 and r.body == b"queue", f"health check answered {r.status} {r.body!r}, not 200 queue")


def expect_not_ready(t, headers=KUBELET):
    r = health(t, headers)
    check(r.status == 503, f"health check answered {r.status} {r.body!r}, not 503")


# --- the probe agents, against the default TCP probe of a ready app ---

@case(BASE)
def kubelet_probe_answered_queue(t):
    expect_ready(t)


@case(BASE)
def activator_probe_answered_queue(t):
    """The activator compares the body with "queue" byte for byte."""
    expect_ready(t, ACTIVATOR)


@case(BASE)
def autoscaler_probe_answered_queue(t):
    expect_ready(t, AUTOSCALER)


@case(BASE)
def health_check_on_any_path_and_method(t):
    r = clients.request("/some/path?x=1", KUBELET, method="POST", body=b"x")
    check(r.status == 200 and r.body == b"queue", f"POST /some/path: {r.status} {r.body!r}")


@case(BASE)
def kubelet_probe_without_network_probe_header_is_400(t):
    r = health(t, {"User-Agent": "kube-probe/1.31"})
    check(r.status == 400 and r.body.startswith(b"unexpected probe header value: "), f"{r.status} {r.body!r}")


@case(BASE)
def activator_probe_with_other_value_is_400(t):
    r = health(t, {"User-Agent": "Knative-Activator-Probe", "K-Network-Probe": "nonsense"})
    check(r.status == 400 and r.body.startswith(b"unexpected probe header value: nonsense"), f"{r.status} {r.body!r}")


@case(BASE)
def kubelet_probe_with_value_probe_is_400(t):
    """A health-check User-Agent wins over K-Network-Probe: probe (the value is then unexpected)."""
    r = health(t, {"User-Agent": "kube-probe/1.31", "K-Network-Probe": "probe", "K-Network-Hash": "h"})
    check(r.status == 400 and b"unexpected probe header value: probe" in r.body, f"{r.status} {r.body!r}")


@case(BASE)
def network_probe_with_hash_is_200_echoing_it(t):
    r = health(t, {"User-Agent": "Knative-Ingress-Probe", "K-Network-Probe": "probe", "K-Network-Hash": "abc123"})
    check(r.status == 200 and r.header("k-network-hash") == "abc123", f"{r.status} {r.headers} {r.body!r}")


@case(BASE)
def network_probe_without_hash_is_400(t):
    r = health(t, {"User-Agent": "Go-http-client/1.1", "K-Network-Probe": "probe"})
    check(r.status == 400 and b"K-Network-Hash" in r.body, f"{r.status} {r.body!r}")


@case(BASE)
def network_probe_queue_with_ordinary_user_agent_is_proxied(t):
    r = health(t, {"User-Agent": "curl/8", "K-Network-Probe": "queue"})
    check(r.status == 200 and r.body == HELLO, f"{r.status} {r.body!r}: not the app's answer")


@case(BASE)
def kubelet_probe_header_without_user_agent_is_proxied(t):
    """K-Kubelet-Probe marks a request as a kubelet probe for stats and metrics, but only a kube-probe/
    User-Agent makes it a health check: it goes to the app."""
    r = health(t, {"User-Agent": "curl/8", "K-Kubelet-Probe": "queue"})
    check(r.status == 200 and r.body == HELLO, f"{r.status} {r.body!r}: not the app's answer")


@case(BASE)
def other_knative_user_agents_are_proxied(t):
    for ua in ("Knative-Queue-Proxy-Probe", "Knative-Ingress-Probe", "kube-probe", "Kube-Probe/1.31"):
        r = health(t, {"User-Agent": ua})
        check(r.status == 200 and r.body == HELLO, f"User-Agent {ua}: {r.status} {r.body!r}")


# --- TCP ---

TCP_CLOSED = Profile("probe-tcp-closed", probe_env({"tcpSocket": {"port": 8089, "host": "127.0.0.1"},
                                                    "periodSeconds": 1, "timeoutSeconds": 1}))


@case(TCP_CLOSED)
def tcp_probe_to_a_closed_port_is_503(t):
    expect_not_ready(t)
    expect_not_ready(t, ACTIVATOR)


@case(TCP_CLOSED)
def requests_are_proxied_while_not_ready(t):
    """Readiness gates the probes' answers, not the traffic."""
    r = t.get("/")
    check(r.status == 200 and r.body == HELLO, f"{r.status} {r.body!r}")


@case(Profile("no-probe-no-app", {"SERVING_READINESS_PROBE": "", "USER_PORT": "8089"}))
@deliberate("without SERVING_READINESS_PROBE (Knative always injects one) sluice TCP-connects to USER_PORT "
            "rather than calling an app that does not listen ready; queue-proxy answers 200 unchecked")
def no_readiness_probe_checks_the_user_port(t):
    expect_not_ready(t)


@case(Profile("probe-empty", probe_env({}, )))
def probe_without_an_action_is_never_ready(t):
    expect_not_ready(t)


@case(Profile("probe-exec", probe_env({"exec": {"command": ["true"]}, "periodSeconds": 1})))
def exec_probe_is_never_ready(t):
    """The reconciler turns exec probes into tcpSocket ones; queue-proxy itself cannot run them."""
    expect_not_ready(t)


# --- HTTP ---

HTTP = Profile("probe-http", probe_env({
    "httpGet": {"path": "healthz", "port": RECORDER, "host": "127.0.0.1", "scheme": "HTTP",
                "httpHeaders": [{"name": "X-Probe", "value": "yes"}, {"name": "Host", "value": "probe.example"}]},
    "periodSeconds": 1, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}))


def set_health(t, status=200, delay=0.0, fail_until=0.0, fail_status=503):
    t.world.recorder.health.update(status=status, delay=delay, fail_until=fail_until, fail_status=fail_status)


def probes_seen(t, since):
    return t.world.recorder.matching(lambda r: r["target"].startswith("/healthz") and r["time"] >= since)


@case(HTTP)
def http_probe_2xx_is_ready(t):
    try:
        for status in (200, 204):
            set_health(t, status)
            expect_ready(t)
    finally:
        set_health(t)


@case(HTTP)
def http_probe_3xx_is_ready(t):
    try:
        set_health(t, 302)
        expect_ready(t)
    finally:
        set_health(t)


@case(HTTP)
def http_probe_4xx_and_5xx_are_not_ready(t):
    try:
        for status in (404, 500, 503):
            set_health(t, status)
            r = health(t)
            check(r.status == 503, f"app {status}: health check answered {r.status} {r.body!r}")
    finally:
        set_health(t)


@case(HTTP)
def http_probe_request_shape(t):
    """GET /healthz (a path without its slash gets one), User-Agent kube-probe//, the probe's headers."""
    since = time.time()
    expect_ready(t)
    seen = probes_seen(t, since)
    check(seen, "the app saw no probe request")
    r = seen[-1]
    check(r["method"] == "GET" and r["target"] == "/healthz", f"{r['method']} {r['target']}")
    check(r["h"].get("user-agent") == "kube-probe//", f"User-Agent {r['h'].get('user-agent')!r}")
    check(r["h"].get("x-probe") == "yes", f"X-Probe {r['h'].get('x-probe')!r}")


@case(HTTP)
def http_probe_host_header(t):
    """queue-proxy's prober (Go's http.Client) takes Host from the URL: a Host in httpHeaders is not sent."""
    since = time.time()
    expect_ready(t)
    r = probes_seen(t, since)[-1]
    check(r["h"].get("host") == f"127.0.0.1:{RECORDER}", f"Host {r['h'].get('host')!r}")


@case(HTTP)
def http_probe_timeout_is_not_ready(t):
    try:
        set_health(t, 200, delay=2.5)
        started = time.time()
        expect_not_ready(t)
        check(time.time() - started < 2.4, f"answered after {time.time() - started:.1f}s: timeoutSeconds is 1")
    finally:
        set_health(t)


@case(HTTP)
def http_probe_one_failure_is_not_ready(t):
    """failureThreshold 3 is the kubelet's business: one failed check is a 503 at once."""
    try:
        set_health(t, 500)
        expect_not_ready(t)
        set_health(t, 200)
        expect_ready(t)
    finally:
        set_health(t)


AGGRESSIVE = Profile("probe-http-aggressive", probe_env({
    "httpGet": {"path": "/healthz", "port": RECORDER, "host": "127.0.0.1", "scheme": "HTTP"},
    "successThreshold": 3}))


@case(AGGRESSIVE)
def aggressive_probe_waits_for_the_app(t):
    """periodSeconds 0: the check retries every 50 ms for up to 10 s, so a check made while the app is still
    failing answers 200 as soon as it passes, and successThreshold 3 means three passing tries first."""
    since = time.time()
    set_health(t, 200, fail_until=time.time() + 1.0)
    try:
        r = health(t)
        took = time.time() - since
        check(r.status == 200 and r.body == b"queue", f"{r.status} {r.body!r}")
        check(took >= 0.9, f"answered 200 after {took:.2f}s although the app failed for 1 s")
        passing = [x for x in probes_seen(t, since) if x["time"] >= since + 1.0]
        check(len(passing) >= 3, f"{len(passing)} passing tries before ready (successThreshold 3)")
    finally:
        set_health(t)


HTTPS_PROBE = {"httpGet": {"path": "/healthz", "port": RECORDER_TLS, "host": "127.0.0.1", "scheme": "HTTPS"},
               "periodSeconds": 1, "timeoutSeconds": 1}


@case(Profile("probe-https-untrusted", probe_env(HTTPS_PROBE), needs=("openssl",)))
def https_probe_verifies_the_app_certificate(t):
    """scheme HTTPS: queue-proxy's prober verifies the app's certificate (unlike the kubelet): an app whose
    certificate no CA the process trusts signed is not ready."""
    _ = t.world.recorder_tls
    since = time.time()
    expect_not_ready(t)
    check(not t.world.recorder_tls.matching(lambda x: x["time"] >= since), "the probe request was sent anyway")


@case(Profile("probe-https-trusted", lambda w: probe_env(HTTPS_PROBE, SSL_CERT_FILE=w.certs()[0]),
              needs=("openssl",)))
def https_probe_to_an_app_with_a_trusted_certificate(t):
    """The system trust store (here SSL_CERT_FILE, as a pod's image or ROOT_CA-provisioned bundle would)
    signs the app's certificate: ready."""
    _ = t.world.recorder_tls
    since = time.time()
    expect_ready(t)
    check(t.world.recorder_tls.matching(lambda x: x["time"] >= since and x["target"] == "/healthz"),
          "no probe request reached the app over TLS")


@case(Profile("probe-http2-autodetect", probe_env({
    "httpGet": {"path": "/healthz", "port": RECORDER, "host": "127.0.0.1", "scheme": "HTTP"},
    "periodSeconds": 1, "timeoutSeconds": 1}, ENABLE_HTTP2_AUTO_DETECTION="true")))
def http_probe_with_http2_auto_detection_falls_back_to_http1(t):
    expect_ready(t)


# --- gRPC ---

def grpc_profile(name, service=None):
    action = {"port": GRPC_APP}
    if service is not None:
        action["service"] = service
    return Profile(name, probe_env({"grpc": action, "periodSeconds": 1, "timeoutSeconds": 1}), needs=("python-grpc",),
                   app="grpc")


@case(grpc_profile("probe-grpc-serving", "svc-serving"))
def grpc_probe_serving_is_ready(t):
    since = time.time()
    expect_ready(t)
    checks = [c for c in t.world.grpc.checks if c["time"] >= since]
    check(checks and checks[-1]["service"] == "svc-serving", f"checks {checks}")
    check(checks[-1]["user-agent"].startswith("kube-probe/"), f"User-Agent {checks[-1]['user-agent']!r}")


@case(grpc_profile("probe-grpc-not-serving", "svc-not-serving"))
def grpc_probe_not_serving_is_not_ready(t):
    expect_not_ready(t)


@case(grpc_profile("probe-grpc-default-service"))
def grpc_probe_without_service_asks_for_the_server(t):
    since = time.time()
    expect_ready(t)
    checks = [c for c in t.world.grpc.checks if c["time"] >= since]
    check(checks and checks[-1]["service"] == "", f"checks {checks}")


@case(grpc_profile("probe-grpc-unknown-service", "svc-unknown"))
def grpc_probe_unknown_service_is_not_ready(t):
    expect_not_ready(t)


@case(Profile("probe-grpc-no-server", probe_env({"grpc": {"port": 8089}, "periodSeconds": 1,
                                                 "timeoutSeconds": 1})))
def grpc_probe_without_a_server_is_not_ready(t):
    expect_not_ready(t)


# --- several containers ---

MULTI = Profile("probe-multi", probe_env([
    {"tcpSocket": {"port": APP, "host": "127.0.0.1"}, "successThreshold": 1},
    {"httpGet": {"path": "/healthz", "port": RECORDER, "host": "127.0.0.1", "scheme": "HTTP"},
     "periodSeconds": 1, "timeoutSeconds": 1}], ENABLE_MULTI_CONTAINER_PROBES="true"))


@case(MULTI)
def multi_container_probes_all_must_pass(t):
    try:
        set_health(t, 200)
        expect_ready(t)
        set_health(t, 500)
        expect_not_ready(t)
    finally:
        set_health(t)


@case(Profile("probe-multi-one", probe_env([{"tcpSocket": {"port": APP, "host": "127.0.0.1"}}],
                                           ENABLE_MULTI_CONTAINER_PROBES="true")))
def multi_container_probes_with_one_entry(t):
    expect_ready(t)


@case(BASE)
def concurrent_health_checks_are_all_answered(t):
    import threading
    results = []

    def one():
        try:
            results.append(health(t).status)
        except OSError as e:
            results.append(str(e))
    threads = [threading.Thread(target=one) for _ in range(20)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    check(results.count(200) == 20, f"answers {results}")


@case()
def health_checks_while_the_app_starts(t):
    """A revision starting: the app not yet listening, then listening (aggressive TCP probe). Its own binary
    alone (no profile's beside it on the same ports)."""
    p = t.start({"USER_PORT": "8088", "SERVING_READINESS_PROBE": json.dumps(
        {"tcpSocket": {"port": 8088, "host": "127.0.0.1"}, "successThreshold": 1})}, label="late-app")
    check(p.alive(), "exited")
    import socket
    import threading
    result = {}

    def ask():
        result["r"] = health(t, timeout=30)
    th = threading.Thread(target=ask)
    since = time.time()
    th.start()
    time.sleep(0.5)  # the app appears half a second into the check (the check polls for up to 10 s)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 8088))
    s.listen(8)
    try:
        th.join(20)
        r = result.get("r")
        check(r is not None and r.status == 200 and r.body == b"queue", f"answered {r}")
        check(time.time() - since >= 0.45, "answered before the app listened")
    finally:
        s.close()
