"""Metrics: the autoscaler's Stat on :9090 (what each field measures), the Prometheus request metrics on :9091
(families, labels, what each measures, what is left out) and the OTLP push of the same over HTTP (http and
https endpoints) and gRPC."""
import threading
import time

import clients
from harness import (KUBELET, POD, PROM, RECORDER, RECORDER_TLS, STATS, USER_METRICS, Profile, case, check,
                     observability, wait_for)

STATS_P = Profile("stats")


def stat(accept="application/protobuf"):
    r = clients.request("/metrics", {"Accept": accept} if accept else {}, port=STATS)
    check(r.status == 200, f"GET :9090/metrics answered {r.status}")
    check(r.header("content-type") == "application/protobuf",
          f"Accept {accept!r}: Content-Type {r.header('content-type')!r} {r.body[:80]!r}")
    return r, clients.decode_stat(r.body)


def reports(seconds, every=0.2):
    """The distinct Stats seen over the next seconds (a new one every reporting second; process_uptime
    aside, since a binary may compute it at each scrape)."""
    out = []
    deadline = time.time() + seconds
    key = lambda s: {k: v for k, v in s.items() if k != "process_uptime"}  # noqa: E731
    while time.time() < deadline:
        _, s = stat()
        if not out or key(s) != key(out[-1]):
            out.append(s)
        time.sleep(every)
    return out


@case(STATS_P)
def stat_is_protobuf_for_the_autoscaler(t):
    r, s = wait_for(lambda: (lambda rs: rs if "process_uptime" in rs[1] else None)(stat()), 5, "a first report")
    check(r.header("content-type") == "application/protobuf", f"Content-Type {r.header('content-type')!r}")
    check(len(r.body) <= 336, f"{len(r.body)} bytes: the autoscaler reads at most 336")
    check(s.get("pod_name") == POD, f"pod_name {s.get('pod_name')!r}")
    check("timestamp" not in s, "timestamp set (queue-proxy never sets it)")


@case(STATS_P)
def stat_is_protobuf_whatever_the_accept_header(t):
    for accept in (None, "text/plain", "*/*"):
        stat(accept)


@case(STATS_P)
def stat_ignores_health_checks(t):
    wait_for(lambda: stat()[1].get("request_count", 0) == 0, 5, "a report without requests")
    stop = time.time() + 2.2
    while time.time() < stop:
        clients.request("/", KUBELET)
        clients.request("/", {"User-Agent": "Knative-Activator-Probe", "K-Network-Probe": "queue"})
        clients.request("/", {"User-Agent": "Go", "K-Network-Probe": "probe", "K-Network-Hash": "x"})
    seen = reports(1.2)
    check(all(s.get("request_count", 0) == 0 and s.get("average_concurrent_requests", 0) == 0 for s in seen),
          f"health checks counted: {seen}")


@case(STATS_P)
def stat_counts_requests_per_second(t):
    for _ in range(10):
        clients.request("/")
    seen = reports(2.5)
    total = sum(s.get("request_count", 0) for s in seen)
    check(9.5 <= total <= 10.5, f"request_count over the reports {[s.get('request_count', 0) for s in seen]}")
    check(all(s.get("proxied_request_count", 0) == 0 for s in seen), f"proxied counted: {seen}")


@case(STATS_P)
def stat_counts_activator_proxied_requests(t):
    for _ in range(4):
        clients.request("/", {"K-Proxy-Request": "activator"})
    seen = reports(2.5)
    proxied = sum(s.get("proxied_request_count", 0) for s in seen)
    total = sum(s.get("request_count", 0) for s in seen)
    check(3.5 <= proxied <= 4.5 and 3.5 <= total <= 4.5, f"proxied {proxied}, all {total}: {seen}")


@case(STATS_P)
def stat_average_concurrency(t):
    threads = [threading.Thread(target=clients.request, args=("/delay/3000",)) for _ in range(2)]
    for th in threads:
        th.start()
    try:
        seen = reports(2.6)
        peak = max(s.get("average_concurrent_requests", 0) for s in seen)
        check(1.7 <= peak <= 2.3, f"average_concurrent_requests with two 3 s requests: {seen}")
    finally:
        for th in threads:
            th.join(10)


@case(STATS_P)
def stat_uptime_grows(t):
    _, a = stat()
    b = wait_for(lambda: (lambda s: s if s.get("process_uptime", 0) > a.get("process_uptime", 0) + 0.5 else None)(
        stat()[1]), 5, "a later report")
    check(b["process_uptime"] > 0, f"{a} then {b}")


# --- Prometheus request metrics (:9091) ---

def scrape(port=USER_METRICS):
    r = clients.request("/metrics", port=port)
    check(r.status == 200, f":{port}/metrics answered {r.status}")
    return clients.parse_prometheus(r.body.decode()), r.body.decode()


def count(samples, name, **labels):
    return sum(v for lab, v in samples.get(name, []) if all(lab.get(k) == v2 for k, v2 in labels.items()))


INVOCATIONS = "kn_serving_invocation_duration_seconds_count"


@case(PROM)
def user_metrics_count_invocations_by_status(t):
    before, _ = scrape()
    for _ in range(3):
        clients.request("/")
    clients.request("/status/500")
    def counted(s):  # all four: the 500's count may land a moment after its answer did
        return (count(s, INVOCATIONS, http_response_status_code="200")
                >= count(before, INVOCATIONS, http_response_status_code="200") + 3 and
                count(s, INVOCATIONS, http_response_status_code="500")
                >= count(before, INVOCATIONS, http_response_status_code="500") + 1)
    after = wait_for(lambda: (lambda s: s if counted(s) else None)(scrape()[0]), 5, "the requests counted")
    check(count(after, INVOCATIONS, http_response_status_code="200")
          - count(before, INVOCATIONS, http_response_status_code="200") == 3, "200s counted")
    check(count(after, INVOCATIONS, http_response_status_code="500")
          - count(before, INVOCATIONS, http_response_status_code="500") == 1, "500 counted")


@case(PROM)
def user_metrics_duration_buckets(t):
    clients.request("/")
    samples, _ = scrape()
    les = {lab.get("le") for lab, _ in samples.get("kn_serving_invocation_duration_seconds_bucket", [])}
    want = {"0.005", "0.01", "0.025", "0.05", "0.075", "0.1", "0.25", "0.5", "0.75", "1", "2.5", "5", "7.5", "10", "+Inf"}
    check(les == want, f"bucket bounds {sorted(les - {None})}")


@case(PROM)
def user_metrics_measure_latency_in_seconds(t):
    before, _ = scrape()
    clients.request("/delay/300")
    def added(samples):
        return sum(v for _, v in samples.get("kn_serving_invocation_duration_seconds_sum", [])) - \
            sum(v for _, v in before.get("kn_serving_invocation_duration_seconds_sum", []))
    # The request's duration may land a moment after its answer did.
    after = wait_for(lambda: (lambda s: s if added(s) > 0 else None)(scrape()[0]), 5, "the request measured")
    ds = added(after)
    check(0.28 <= ds <= 1.5, f"a 300 ms request added {ds:.3f} s")


@case(PROM)
def user_metrics_queue_depth(t):
    """kn_serving_queue_depth (CONTAINER_CONCURRENCY > 0): requests in the breaker when one arrived."""
    threads = [threading.Thread(target=clients.request, args=("/delay/800",)) for _ in range(3)]
    for th in threads:
        th.start()
        time.sleep(0.05)
    for th in threads:
        th.join(10)
    samples, _ = scrape()
    check("kn_serving_queue_depth" in samples, f"no kn_serving_queue_depth: {sorted(samples)[:30]}")
    check(max(v for _, v in samples["kn_serving_queue_depth"]) >= 1, f"{samples['kn_serving_queue_depth']}")


@case(PROM)
def user_metrics_leave_out_probes(t):
    before, _ = scrape()
    for headers in (KUBELET, {"User-Agent": "curl", "K-Network-Probe": "queue"},
                    {"User-Agent": "curl", "K-Kubelet-Probe": "1"}):
        clients.request("/", headers)
    after, _ = scrape()
    check(count(after, INVOCATIONS) == count(before, INVOCATIONS), "probes counted")


@case(PROM)
def user_metrics_resource_labels(t):
    _, text = scrape()
    for want in ('service_name="hello"', 'k8s_namespace_name="conformance"', f'k8s_pod_name="{POD}"',
                 'container_name="queue-proxy"', 'kn_revision_name="hello-00001"',
                 'kn_configuration_name="hello"', 'kn_service_name="hello"'):
        check(want in text, f"{want} missing from :9091 (target_info)")


@case(PROM)
def user_metrics_http_server_and_client_families(t):
    """otelhttp's server metrics (requests to the proxy) and client metrics (requests to the app) beside
    Knative's own, by method and status."""
    families = ("http_server_request_duration_seconds", "http_server_request_body_size_bytes",
                "http_server_response_body_size_bytes", "http_client_request_duration_seconds",
                "http_client_request_body_size_bytes")
    def get_200(samples, family):
        return count(samples, family + "_count", http_request_method="GET", http_response_status_code="200")
    before, _ = scrape()
    clients.request("/")
    # The exchange is measured as it ends, which may be a moment after its answer arrived.
    def measured(samples):
        return all(get_200(samples, f) > get_200(before, f) for f in families)
    samples = wait_for(lambda: (lambda s: s if measured(s) else None)(scrape()[0]), 5, "the request measured")
    for family in families:
        n = get_200(samples, family)
        check(n == get_200(before, family) + 1,
              f"{family}_count for GET 200 went {get_200(before, family)} -> {n} ({sorted(samples)[:40]})")


@case(PROM)
def user_metrics_route_tag_label(t):
    """otelhttp's server metrics carry kn_route_tag: the Knative-Serving-Tag value, kn:default (default route,
    no tag), kn:undefined (a tag and the default route), kn:disabled (neither)."""
    before, _ = scrape()
    for headers in ({"Knative-Serving-Tag": "canary"}, {"Knative-Serving-Default-Route": "true"},
                    {"Knative-Serving-Tag": "x", "Knative-Serving-Default-Route": "true"}, {}):
        clients.request("/", headers)
    name = "http_server_request_duration_seconds_count"
    tags = ("canary", "kn:default", "kn:undefined", "kn:disabled")
    def measured(samples):  # each exchange is measured as it ends, a moment after its answer maybe
        return all(count(samples, name, kn_route_tag=tag) > count(before, name, kn_route_tag=tag) for tag in tags)
    after = wait_for(lambda: (lambda s: s if measured(s) else None)(scrape()[0]), 5, "the requests measured")
    for tag in tags:
        check(count(after, name, kn_route_tag=tag) == count(before, name, kn_route_tag=tag) + 1,
              f"kn_route_tag={tag}: {count(before, name, kn_route_tag=tag)} -> {count(after, name, kn_route_tag=tag)}")


@case(PROM)
def user_metrics_process_and_runtime_families(t):
    """The Prometheus exporter's process collector and the runtime's own families are served too."""
    samples, _ = scrape()
    for name in ("process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds",
                 "process_start_time_seconds"):
        check(name in samples, f"{name} missing")


# Every family queue-proxy v1.23 serves on :9091 after requests like these, with its label names: the
# operator's dashboards and alerts see the same series. Go's runtime families (go_*) are queue-proxy's alone:
# a C++ binary has no goroutines or Go heap (docs/sidecar.md's list of differences says what to chart instead).
_SCOPE = ["otel_scope_name", "otel_scope_schema_url", "otel_scope_version"]
_HTTP = sorted(["http_request_method", "http_response_status_code", "kn_route_tag", "network_protocol_name",
                "network_protocol_version", "server_address", "url_scheme"] + _SCOPE)
_HISTOGRAM = {"_bucket": ["le"], "_count": [], "_sum": []}
USER_METRIC_FAMILIES = {
    **{f"http_server_{m}{suffix}": sorted(_HTTP + extra) for m in ("request_duration_seconds",
       "request_body_size_bytes", "response_body_size_bytes") for suffix, extra in _HISTOGRAM.items()},
    **{f"http_client_{m}{suffix}": sorted(_HTTP + ["server_port"] + extra)
       for m in ("request_duration_seconds", "request_body_size_bytes") for suffix, extra in _HISTOGRAM.items()},
    **{f"kn_serving_invocation_duration_seconds{suffix}": sorted(["http_response_status_code"] + _SCOPE + extra)
       for suffix, extra in _HISTOGRAM.items()},
    "kn_serving_queue_depth": _SCOPE,
    **{f"process_{m}": [] for m in ("cpu_seconds_total", "max_fds", "network_receive_bytes_total",
                                    "network_transmit_bytes_total", "open_fds", "resident_memory_bytes",
                                    "start_time_seconds", "virtual_memory_bytes", "virtual_memory_max_bytes")},
    "promhttp_metric_handler_requests_in_flight": [],
    "promhttp_metric_handler_requests_total": ["code"],
    "target_info": ["container_name", "k8s_namespace_name", "k8s_pod_name", "kn_configuration_name",
                    "kn_revision_name", "kn_service_name", "service_instance_id", "service_name", "service_version",
                    "telemetry_sdk_language", "telemetry_sdk_name", "telemetry_sdk_version"],
}


@case(PROM, since="1.20")
def user_metrics_families_and_labels_are_queue_proxys(t):
    for headers in ({}, {"Knative-Serving-Tag": "canary"}):
        clients.request("/", headers)
    clients.request("/status/500")

    def families():
        seen = {}
        for name, samples in scrape()[0].items():
            if not name.startswith("go_"):
                seen[name] = sorted(set().union(*(set(labels) for labels, _ in samples)))
        return seen
    got = wait_for(lambda: (lambda f: f if set(f) >= set(USER_METRIC_FAMILIES) else None)(families()), 5,
                   "every family served")
    check(set(got) == set(USER_METRIC_FAMILIES), f"families only sluice's: {sorted(set(got) - set(USER_METRIC_FAMILIES))}")
    differ = {n: (got[n], want) for n, want in USER_METRIC_FAMILIES.items() if got[n] != want}
    check(not differ, f"label names differ (got, queue-proxy's): {differ}")


# --- OTLP push ---

def otlp_http(endpoint, extra=None):
    env = {"OBSERVABILITY_CONFIG": observability(requestMetrics={"protocol": "http/protobuf", "endpoint": endpoint,
                                                                 "exportInterval": 1000000000})}
    env.update(extra or {})
    return env


def pushed(recorder, path, needle, since, timeout=15):
    got = recorder.wait_for(lambda x: x["method"] == "POST" and x["target"] == path and x["time"] >= since
                            and needle in x["body"], timeout=timeout)
    check(got, f"no POST {path} with {needle!r} within {timeout}s "
               f"(saw {[(x['method'], x['target']) for x in recorder.matching(lambda x: x['time'] >= since)][:5]})")
    return got[-1]


@case(Profile("otlp-metrics-http", otlp_http(f"http://127.0.0.1:{RECORDER}")))
def otlp_metrics_pushed_over_http(t):
    since = time.time()
    clients.request("/")
    req = pushed(t.world.recorder, "/v1/metrics", b"kn.serving.invocation.duration", since)
    check(req["h"].get("content-type") == "application/x-protobuf", f"Content-Type {req['h'].get('content-type')!r}")
    for needle in (b"hello-00001", POD.encode(), b"queue-proxy", b"conformance", b"k8s.pod.name",
                   b"http.response.status_code", b"kn.revision.name"):
        check(needle in req["body"], f"{needle!r} not in the pushed metrics")


@case(Profile("otlp-metrics-http-path", otlp_http(f"http://127.0.0.1:{RECORDER}/custom/metrics")))
def otlp_metrics_endpoint_path_is_used_as_is(t):
    since = time.time()
    clients.request("/")
    pushed(t.world.recorder, "/custom/metrics", b"kn.serving.invocation.duration", since)


def https_env(endpoint):
    return lambda world: otlp_http(endpoint, {"SSL_CERT_FILE": world.certs()[0]})


@case(Profile("otlp-metrics-https", https_env(f"https://localhost:{RECORDER_TLS}"), needs=("openssl",)))
def otlp_metrics_pushed_over_https(t):
    since = time.time()
    clients.request("/")
    pushed(t.world.recorder_tls, "/v1/metrics", b"kn.serving.invocation.duration", since)


@case(Profile("otlp-metrics-host-port", https_env(f"localhost:{RECORDER_TLS}"), needs=("openssl",)))
def otlp_metrics_host_port_endpoint_means_https(t):
    """An endpoint without a scheme (`host:port`, as config-observability examples write it) is https."""
    since = time.time()
    clients.request("/")
    pushed(t.world.recorder_tls, "/v1/metrics", b"kn.serving.invocation.duration", since)


@case(Profile("otlp-metrics-grpc", lambda w: {"OBSERVABILITY_CONFIG": observability(requestMetrics={
    "protocol": "grpc", "endpoint": f"http://127.0.0.1:{w.otlp()[2]['grpc_port']}", "exportInterval": 1000000000})},
    needs=("python-otlp",)), since="1.20")
def otlp_metrics_pushed_over_grpc(t):
    _, lines, _ = t.world.otlp()
    start = len(lines)
    clients.request("/")

    def found():
        for msg in lines[start:]:
            if msg.get("signal") == "metrics" and msg.get("transport") == "grpc":
                for batch in msg["batches"]:
                    for m in batch["metrics"]:
                        if m["name"] == "kn.serving.invocation.duration" and m["points"]:
                            return batch
        return None
    batch = wait_for(found, 15, "kn.serving.invocation.duration over OTLP gRPC")
    res = batch["resource"]
    check(res.get("service.name") == "hello" and res.get("k8s.pod.name") == POD
          and res.get("container.name") == "queue-proxy" and res.get("kn.revision.name") == "hello-00001"
          and res.get("k8s.namespace.name") == "conformance" and res.get("service.instance.id") == POD
          and res.get("kn.configuration.name") == "hello" and res.get("kn.service.name") == "hello",
          f"resource {res}")
    m = [m for m in batch["metrics"] if m["name"] == "kn.serving.invocation.duration"][0]
    check(m["unit"] == "s" and m["type"] == "histogram", f"{m['unit']} {m['type']}")
    check(any(p["attributes"].get("http.response.status_code") == 200 for p in m["points"]), f"points {m['points']}")


@case(STATS_P)
def stat_bytes_are_proto3_in_field_order(t):
    """The Stat as gogo/protobuf marshals it: fields in ascending order, pod_name length-delimited, the rest
    64-bit (doubles), zero values left out, nothing else."""
    clients.request("/")
    r, s = wait_for(lambda: (lambda rs: rs if rs[1].get("request_count", 0) > 0 else None)(stat()), 5,
                    "a report with a request")
    data, i, fields = r.body, 0, []
    while i < len(data):
        key = data[i]
        i += 1
        field, wire = key >> 3, key & 7
        fields.append(field)
        if field == 1:
            check(wire == 2, f"pod_name with wire type {wire}")
            i += 1 + data[i]
        else:
            check(wire == 1 and 2 <= field <= 6, f"field {field} with wire type {wire}")
            i += 8
    check(fields == sorted(fields) and len(set(fields)) == len(fields), f"field order {fields}")
    check(fields[0] == 1 and 4 in fields and 6 in fields, f"fields {fields}")
