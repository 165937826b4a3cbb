"""Every port queue-proxy opens, on IPv4 and IPv6 (Go's ":port" listens dual-stack), what each serves, and
which are closed in which configuration."""
import clients
from harness import (ADMIN, BASE, HELLO, KUBELET, MAIN, PROFILING, PROM, STATS, TLS, USER_METRICS, Profile, case, check,
                     deliberate, observability, port_open)

PROFILE_ON = Profile("profiling", {"OBSERVABILITY_CONFIG": observability(runtime={"profiling": "enabled"})})


def both_families(port, path, headers=None, expect=200):
    for host in ("127.0.0.1", "::1"):
        r = clients.request(path, headers, port=port, host=host, timeout=10)
        check(r.status == expect, f"[{host}]:{port}{path} answered {r.status} {r.body[:100]!r}")
    return r


@case(BASE)
def port_serving_8012_on_ipv4_and_ipv6(t):
    r = both_families(MAIN, "/")
    check(r.body == HELLO, f"body {r.body!r}")


@case(BASE)
def port_admin_8022_on_ipv4_and_ipv6(t):
    both_families(ADMIN, "/", expect=404)


@case(BASE)
def port_stats_9090_on_ipv4_and_ipv6(t):
    r = both_families(STATS, "/metrics", {"Accept": "application/protobuf"})
    check(r.header("content-type") == "application/protobuf", f"content type {r.header('content-type')!r}")


@case(PROM)
def port_user_metrics_9091_on_ipv4_and_ipv6(t):
    r = both_families(USER_METRICS, "/metrics")
    check(b"# TYPE" in r.body, f"not Prometheus text: {r.body[:200]!r}")


@case(PROFILE_ON)
@deliberate("Go's pprof profiles do not exist for a C++ binary: with runtime.profiling enabled sluice says it "
            "does not act on it and opens no :8008 (profile it with perf); queue-proxy serves Go's pprof there")
def profiling_enabled_opens_no_port_and_says_so(t):
    r = t.get("/")  # the proxy is up, so every port it opens is open by now
    check(r.status == 200 and r.body == HELLO, f"{r}")
    check(not port_open(PROFILING), ":8008 is open")
    check("runtime.profiling" in t.proxy.output(), "no line saying runtime.profiling is not acted on")


@case()
def port_8013_when_the_revision_is_h2c(t):
    """h2c revisions get QUEUE_SERVING_PORT=8013: the proxy moves there (IPv4 and IPv6) and 8012 stays closed.
    (The app behind an h2c revision speaks h2c: see cases_protocols' gRPC cases for traffic.)"""
    p = t.start({"QUEUE_SERVING_PORT": "8013"}, wait=(), label="port-8013")
    from harness import wait_for
    wait_for(lambda: port_open(8013) or not p.alive(), 20, "listening on 8013")
    check(p.alive(), f"exited: {p.tail()}")
    both_families(8013, "/", KUBELET)
    check(not port_open(8012), "8012 is open too")


@case(BASE)
def closed_ports_without_tls_metrics_or_profiling(t):
    """No certificate: nothing on 8112. requestMetrics none: nothing on 9091. Profiling off: nothing on 8008."""
    for port in (TLS, USER_METRICS, PROFILING):
        for host in ("127.0.0.1", "::1"):
            check(not port_open(port, host), f"[{host}]:{port} accepts connections")


@case(BASE)
def stats_port_answers_only_metrics(t):
    r = clients.request("/", port=STATS)
    check(r.status == 404, f"GET / on 9090: {r.status}")
    r = clients.request("/metrics/extra", port=STATS)
    check(r.status == 404, f"GET /metrics/extra on 9090: {r.status}")


@case(PROM)
def user_metrics_port_answers_only_get_metrics(t):
    r = clients.request("/", port=USER_METRICS)
    check(r.status == 404, f"GET / on 9091: {r.status}")
    r = clients.request("/metrics", port=USER_METRICS, method="POST", body=b"")
    check(r.status == 405, f"POST /metrics on 9091: {r.status}")


@case(Profile("user-metrics-endpoint", {"OBSERVABILITY_CONFIG": observability(
    requestMetrics={"protocol": "prometheus", "endpoint": ":9095"})}, wait=(9095,)))
def user_metrics_endpoint_moves_the_port(t):
    """requestMetrics.endpoint (config-observability request-metrics-endpoint) is where Prometheus is served."""
    r = both_families(9095, "/metrics")
    check(b"# TYPE" in r.body, f"not Prometheus text: {r.body[:200]!r}")
    check(not port_open(USER_METRICS), "9091 open as well")
