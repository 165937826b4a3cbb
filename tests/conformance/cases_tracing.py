"""Tracing (OBSERVABILITY_CONFIG.tracing): OTLP over HTTP and gRPC, stdout, sampling (0, a ratio with the
parent's decision, 1), propagation to the app, probes left out. Zipkin is gone from v1.19 on: the legacy
TRACING_CONFIG_* variables are ignored and `"protocol":"zipkin"` stops start-up (see cases_env)."""
import os
import time

import clients
from harness import KUBELET, POD, RECORDER, Profile, case, check, observability, wait_for


def traced(protocol, endpoint, rate, extra=None):
    env = {"OBSERVABILITY_CONFIG": observability(tracing={"protocol": protocol, "endpoint": endpoint,
                                                          "samplingRate": rate})}
    env.update(extra or {})
    return env


def new_trace(flags="01"):
    trace, span = os.urandom(16).hex(), os.urandom(8).hex()
    return trace, f"00-{trace}-{span}-{flags}"


def exported(t, trace, since, timeout=15):
    tid = bytes.fromhex(trace)
    return t.world.recorder.wait_for(lambda x: x["target"] == "/v1/traces" and x["time"] >= since
                                     and tid in x["body"], timeout=timeout)


HTTP = Profile("tracing-http", traced("http/protobuf", f"http://127.0.0.1:{RECORDER}", 1))


@case(HTTP)
def traces_exported_over_http(t):
    since = time.time()
    trace, tp = new_trace()
    r = clients.request("/headers", {"traceparent": tp})
    check(r.status == 200, f"{r}")
    got = exported(t, trace, since)
    check(got, f"no span of trace {trace} posted to /v1/traces")
    req = got[-1]
    check(req["h"].get("content-type") == "application/x-protobuf", f"Content-Type {req['h'].get('content-type')!r}")
    for needle in (b"hello", b"k8s.pod.name", b"queue-proxy"):
        check(needle in req["body"], f"{needle!r} not in the exported resource")


@case(HTTP)
def trace_context_continues_to_the_app(t):
    trace, tp = new_trace()
    h = clients.echoed_headers(clients.request("/headers", {"traceparent": tp}).body)
    sent = h.get("traceparent", "")
    check(sent.startswith(f"00-{trace}-") and sent != tp and sent.endswith("-01"),
          f"the app got traceparent {sent!r} for {tp!r}: not a child in the same trace")


@case(HTTP)
def traces_start_without_a_parent(t):
    since = time.time()
    h = clients.echoed_headers(clients.request("/headers").body)
    tp = h.get("traceparent", "")
    check(tp.startswith("00-") and len(tp) == 55, f"the app got traceparent {tp!r}")
    check(exported(t, tp[3:35], since), "the new trace was not exported")


@case(HTTP)
def sampling_rate_1_samples_everything(t):
    """samplingRate 1 is AlwaysSample: a parent that was not sampled does not matter."""
    since = time.time()
    trace, tp = new_trace("00")
    clients.request("/", {"traceparent": tp})
    check(exported(t, trace, since), f"trace {trace} (parent not sampled) was not exported")


@case(HTTP)
def probes_are_not_traced(t):
    since = time.time()
    probe_trace, probe_tp = new_trace()
    clients.request("/", dict(KUBELET, traceparent=probe_tp))
    trace, tp = new_trace()
    clients.request("/", {"traceparent": tp})
    check(exported(t, trace, since), "the ordinary request was not exported")
    check(not exported(t, probe_trace, since, timeout=0.5), "the health check was traced")


HALF = Profile("tracing-ratio", traced("http/protobuf", f"http://127.0.0.1:{RECORDER}", 0.5))


@case(HALF)
def sampling_ratio_follows_the_parent(t):
    """0 < samplingRate < 1: parent-based; the remote parent's sampled flag decides."""
    since = time.time()
    unsampled, tp0 = new_trace("00")
    sampled, tp1 = new_trace("01")
    clients.request("/", {"traceparent": tp0})
    clients.request("/", {"traceparent": tp1})
    check(exported(t, sampled, since), "the sampled parent's trace was not exported")
    check(not exported(t, unsampled, since, timeout=0.5), "the unsampled parent's trace was exported")


ZERO = Profile("tracing-zero", traced("http/protobuf", f"http://127.0.0.1:{RECORDER}", 0), shard="slow")


@case(ZERO)
def sampling_rate_0_exports_nothing(t):
    """samplingRate 0 (or absent) is NeverSample, even for a sampled parent; the batch exporter would have
    sent within its 5 s delay."""
    since = time.time()
    trace, tp = new_trace()
    clients.request("/", {"traceparent": tp})
    time.sleep(7)  # waiting for something not to happen: the exporter's batch delay is 5 s
    check(not t.world.recorder.matching(lambda x: x["target"] == "/v1/traces" and x["time"] >= since),
          "spans were exported")


@case(Profile("tracing-grpc", lambda w: dict(traced("grpc", f"http://127.0.0.1:{w.otlp()[2]['grpc_port']}", 1),
                                            CONTAINER_CONCURRENCY="1"), needs=("python-otlp",)), since="1.23")
def traces_exported_over_grpc(t):
    """The span tree of one request (a breaker on): the server span `GET` (child of the caller), its
    `kn.queueproxy.proxy`, that one's `kn.queueproxy.wait`, and the client span `HTTP GET` whose id the app
    gets in traceparent; the resource names the revision."""
    _, lines, _ = t.world.otlp()
    start = len(lines)
    trace, tp = new_trace()
    r = clients.request("/headers", {"traceparent": tp})
    app_tp = clients.echoed_headers(r.body).get("traceparent", "")

    def spans():
        out = []
        for msg in lines[start:]:
            if msg.get("signal") == "traces" and msg.get("transport") == "grpc":
                for b in msg["batches"]:
                    out += [(b["resource"], s) for s in b["spans"] if s["trace_id"] == trace]
        return out
    got = wait_for(lambda: (lambda s: s if len(s) >= 4 else None)(spans()), 15, f"four spans of {trace} over gRPC")
    resource = got[0][0]
    check(resource.get("service.name") == "hello" and resource.get("container.name") == "queue-proxy"
          and resource.get("kn.revision.name") == "hello-00001" and resource.get("k8s.pod.name") == POD,
          f"resource {resource}")
    by_name = {s["name"]: s for _, s in got}
    check({"GET", "kn.queueproxy.proxy", "kn.queueproxy.wait", "HTTP GET"} <= set(by_name), f"spans {sorted(by_name)}")
    server, proxy, wait, client = (by_name[n] for n in ("GET", "kn.queueproxy.proxy", "kn.queueproxy.wait", "HTTP GET"))
    check(server["kind"] == 2 and client["kind"] == 3, f"kinds: server {server['kind']}, client {client['kind']}")
    check(server["parent_span_id"] == tp.split("-")[2], "the server span's parent is not the caller")
    check(proxy["parent_span_id"] == server["span_id"] and wait["parent_span_id"] == proxy["span_id"]
          and client["parent_span_id"] == wait["span_id"], "the spans do not nest server > proxy > wait > client")
    check(app_tp == f"00-{trace}-{client['span_id']}-01", f"the app got {app_tp!r}, not the client span")
    check(server["attributes"].get("http.response.status_code") == 200, f"server span {server['attributes']}")


@case(Profile("tracing-stdout", {"OBSERVABILITY_CONFIG": observability(tracing={"protocol": "stdout"})}))
def traces_printed_with_the_stdout_protocol(t):
    trace, tp = new_trace()
    clients.request("/", {"traceparent": tp})
    t.wait_log(lambda line: trace in line, timeout=15, what=f"trace {trace} on stdout", stream="all")
