"""Start-up per variable: every variable the reconciler injects (pkg/reconciler/revision/resources/queue.go,
v1.19-v1.23, and the ones older versions injected) with valid, edge and invalid values. Where queue-proxy
starts, the binary must start and serve; where queue-proxy stops (envconfig, OBSERVABILITY_CONFIG, readiness
probe and exporter errors), it must exit non-zero, and sluice must name the variable in its output
(queue-proxy's messages do not always)."""
import json
import time

import clients
from harness import ADMIN, MAIN, RECORDER, STATS, case, check, observability


def starts(t, overrides, port=MAIN, status=None, label="start"):
    """Starts the binary; it must answer an HTTP request on the serving port (any status unless given), on
    the admin and stats ports, and still be running after that."""
    p = t.start(overrides, wait=(), label=label)
    deadline = time.time() + 20
    while True:
        if not p.alive():
            raise AssertionError(f"exited with {p.p.returncode}: {p.tail()}")
        try:
            r = clients.request("/", port=port, timeout=5)
            break
        except OSError:
            pass
        if time.time() > deadline:
            raise AssertionError(f"no answer on :{port} 20s after start: {p.tail()}")
        time.sleep(0.05)
    clients.request("/", port=ADMIN, timeout=5)
    clients.request("/metrics", port=STATS, timeout=5, headers={"Accept": "application/protobuf"})
    check(p.alive(), f"exited with {p.p.returncode} after answering: {p.tail()}")
    if status is not None:
        check(r.status == status, f"GET / answered {r.status} {r.body[:200]!r}, expected {status}")
    return p, r


def exits(t, overrides, variable, label="exit"):
    """Starts the binary; it must exit non-zero within 20 s (sluice: naming the variable)."""
    p = t.start(overrides, wait=(), label=label)
    code = p.wait_exit(20)
    shown = {k: (v if v is None or len(v) < 80 else v[:80] + "...") for k, v in overrides.items()}
    check(code is not None, f"still running 20s after starting with {shown}")
    check(code != 0, f"exited 0 with {shown}")
    if t.flavor in ("sluice", "sluice-node"):
        check(variable in p.output(), f"exited {code} without naming {variable}: {p.tail()}")
    return p


def start_case(name, overrides, status=200, doc=""):
    def fn(t):
        starts(t, overrides, status=status)
    fn.__name__, fn.__doc__ = name, doc
    case()(fn)


def exit_case(name, overrides, variable, doc=""):
    def fn(t):
        exits(t, overrides, variable)
    fn.__name__, fn.__doc__ = name, doc
    case()(fn)


# --- required variables (envconfig `required:"true"`): unset stops start-up ---
for var in ["CONTAINER_CONCURRENCY", "QUEUE_SERVING_PORT", "QUEUE_SERVING_TLS_PORT", "USER_PORT",
            "REVISION_TIMEOUT_SECONDS", "SERVING_NAMESPACE", "SERVING_CONFIGURATION", "SERVING_REVISION",
            "SERVING_POD", "SERVING_POD_IP", "SERVING_LOGGING_CONFIG", "SERVING_LOGGING_LEVEL"]:
    exit_case(f"env_{var.lower()}_unset_stops", {var: None}, var)

# --- integers (Go strconv.ParseInt): present but not a number stops; an empty value is not a number ---
exit_case("env_container_concurrency_not_a_number_stops", {"CONTAINER_CONCURRENCY": "ten"}, "CONTAINER_CONCURRENCY")
exit_case("env_container_concurrency_empty_stops", {"CONTAINER_CONCURRENCY": ""}, "CONTAINER_CONCURRENCY")
exit_case("env_container_concurrency_fraction_stops", {"CONTAINER_CONCURRENCY": "1.5"}, "CONTAINER_CONCURRENCY")
exit_case("env_revision_timeout_with_unit_stops", {"REVISION_TIMEOUT_SECONDS": "300s"}, "REVISION_TIMEOUT_SECONDS")
exit_case("env_response_start_timeout_not_a_number_stops", {"REVISION_RESPONSE_START_TIMEOUT_SECONDS": "soon"},
          "REVISION_RESPONSE_START_TIMEOUT_SECONDS")
exit_case("env_idle_timeout_empty_stops", {"REVISION_IDLE_TIMEOUT_SECONDS": ""}, "REVISION_IDLE_TIMEOUT_SECONDS")
start_case("env_optional_timeouts_unset_start", {"REVISION_RESPONSE_START_TIMEOUT_SECONDS": None,
                                                 "REVISION_IDLE_TIMEOUT_SECONDS": None})
start_case("env_container_concurrency_negative_starts", {"CONTAINER_CONCURRENCY": "-1"},
           doc="queue-proxy builds no breaker for a concurrency below 1")
start_case("env_revision_timeout_negative_starts", {"REVISION_TIMEOUT_SECONDS": "-1"}, status=None)

# --- booleans (Go strconv.ParseBool: 1 t T TRUE true True 0 f F FALSE false False) ---
exit_case("env_http2_auto_detection_not_a_bool_stops", {"ENABLE_HTTP2_AUTO_DETECTION": "yes"},
          "ENABLE_HTTP2_AUTO_DETECTION")
exit_case("env_http_full_duplex_empty_stops", {"ENABLE_HTTP_FULL_DUPLEX": ""}, "ENABLE_HTTP_FULL_DUPLEX")
exit_case("env_multi_container_probes_not_a_bool_stops", {"ENABLE_MULTI_CONTAINER_PROBES": "enabled"},
          "ENABLE_MULTI_CONTAINER_PROBES")
start_case("env_bool_spellings_start", {"ENABLE_HTTP2_AUTO_DETECTION": "1", "ENABLE_HTTP_FULL_DUPLEX": "T",
                                        "ENABLE_MULTI_CONTAINER_PROBES": "FALSE"})
start_case("env_optional_bools_unset_start", {"ENABLE_HTTP2_AUTO_DETECTION": None, "ENABLE_HTTP_FULL_DUPLEX": None,
                                              "ENABLE_MULTI_CONTAINER_PROBES": None})

# --- strings: present (even empty) is enough ---
start_case("env_names_empty_start", {"SERVING_NAMESPACE": "", "SERVING_CONFIGURATION": "", "SERVING_REVISION": "",
                                     "SERVING_POD": "", "SERVING_POD_IP": "", "SERVING_SERVICE": ""})
start_case("env_serving_service_unset_starts", {"SERVING_SERVICE": None})
start_case("env_logging_config_empty_starts", {"SERVING_LOGGING_CONFIG": ""})
start_case("env_logging_config_not_json_starts", {"SERVING_LOGGING_CONFIG": "{not json"},
           doc="knative.dev/pkg/logging falls back to its default config")
start_case("env_logging_level_empty_or_unknown_starts", {"SERVING_LOGGING_LEVEL": "chatty"})
start_case("env_unused_injected_variables_start", {"SYSTEM_NAMESPACE": "", "HOST_IP": "not-an-ip",
                                                   "ROOT_CA": "-----BEGIN GARBAGE-----"})
start_case("env_user_port_not_a_number_starts", {"USER_PORT": "http-port"}, status=502,
           doc="queue-proxy only joins it into the upstream address: every request is a 502")
exit_case("env_serving_port_not_a_port_stops", {"QUEUE_SERVING_PORT": "eighty-twelve"}, "QUEUE_SERVING_PORT")
start_case("env_tls_port_not_a_port_starts_without_certificates", {"QUEUE_SERVING_TLS_PORT": "none"},
           doc="the TLS port is only opened when /var/lib/knative/certs holds a certificate")
start_case("env_tls_knobs_ignored_without_certificates", {
    "QUEUE_PROXY_TLS_MIN_VERSION": "1.0", "QUEUE_PROXY_TLS_MAX_VERSION": "9", "QUEUE_PROXY_TLS_CIPHER_SUITES": "NOPE",
    "QUEUE_PROXY_TLS_CURVE_PREFERENCES": "nope"})

# --- SERVING_READINESS_PROBE / ENABLE_MULTI_CONTAINER_PROBES ---
start_case("env_readiness_probe_empty_starts", {"SERVING_READINESS_PROBE": ""})
start_case("env_readiness_probe_unset_starts", {"SERVING_READINESS_PROBE": None})
exit_case("env_readiness_probe_not_json_stops", {"SERVING_READINESS_PROBE": "{tcpSocket"}, "SERVING_READINESS_PROBE")
exit_case("env_readiness_probe_array_without_multi_container_stops", {
    "SERVING_READINESS_PROBE": json.dumps([{"tcpSocket": {"port": 8080, "host": "127.0.0.1"}}])},
    "SERVING_READINESS_PROBE")
exit_case("env_readiness_probe_object_with_multi_container_stops", {
    "ENABLE_MULTI_CONTAINER_PROBES": "true",
    "SERVING_READINESS_PROBE": json.dumps({"tcpSocket": {"port": 8080, "host": "127.0.0.1"}})},
    "SERVING_READINESS_PROBE")

# --- OBSERVABILITY_CONFIG (v1.19+) ---
start_case("env_observability_config_unset_starts", {"OBSERVABILITY_CONFIG": None})
start_case("env_observability_config_empty_starts", {"OBSERVABILITY_CONFIG": ""})
start_case("env_observability_config_as_in_knative_tests_starts", {
    "OBSERVABILITY_CONFIG": '{"tracing":{},"metrics":{},"runtime":{},"requestMetrics":{}}'})
start_case("env_observability_config_unknown_keys_start", {
    "OBSERVABILITY_CONFIG": '{"tracing":{"protocol":"none","future":1},"newSection":{"x":true},'
                            '"EnableVarLogCollection":true,"LoggingURLTemplate":"http://logs/${REVISION_UID}"}'})
start_case("env_observability_profiling_unknown_value_starts", {
    "OBSERVABILITY_CONFIG": observability(runtime={"profiling": "sometimes"})})
start_case("env_observability_metrics_section_ignored", {
    "OBSERVABILITY_CONFIG": observability(metrics={"protocol": "grpc"})},
    doc="`metrics` configures Knative's control plane; queue-proxy reads requestMetrics")
exit_case("env_observability_config_not_json_stops", {"OBSERVABILITY_CONFIG": '{"tracing":'}, "OBSERVABILITY_CONFIG")
exit_case("env_observability_config_array_stops", {"OBSERVABILITY_CONFIG": "[]"}, "OBSERVABILITY_CONFIG")
exit_case("env_observability_config_wrong_type_stops", {"OBSERVABILITY_CONFIG": '{"enableRequestLog":"true"}'},
          "OBSERVABILITY_CONFIG")
exit_case("env_observability_export_interval_as_string_stops", {
    "OBSERVABILITY_CONFIG": observability(requestMetrics={"protocol": "prometheus", "exportInterval": "5s"})},
    "OBSERVABILITY_CONFIG")
exit_case("env_observability_unknown_request_metrics_protocol_stops", {
    "OBSERVABILITY_CONFIG": observability(requestMetrics={"protocol": "statsd"})}, "OBSERVABILITY_CONFIG")
exit_case("env_observability_unknown_tracing_protocol_stops", {
    "OBSERVABILITY_CONFIG": observability(tracing={"protocol": "jaeger", "endpoint": "http://127.0.0.1:1"})},
    "OBSERVABILITY_CONFIG")
exit_case("env_observability_zipkin_tracing_protocol_stops", {
    "OBSERVABILITY_CONFIG": observability(tracing={"protocol": "zipkin",
                                                   "endpoint": "http://127.0.0.1:9411/api/v2/spans"})},
    "OBSERVABILITY_CONFIG", doc="v1.19+ know grpc, http/protobuf, stdout and none for tracing")
exit_case("env_observability_otlp_endpoint_unparsable_stops", {
    "OBSERVABILITY_CONFIG": observability(requestMetrics={"protocol": "http/protobuf", "endpoint": "127.0.0.1:4318"})},
    "OBSERVABILITY_CONFIG", doc="Go's url.Parse refuses a first path segment with a colon")
start_case("env_observability_bad_request_log_template_starts", {
    "OBSERVABILITY_CONFIG": observability(enableRequestLog=True, requestLogTemplate="{{.Request.Method")})

# --- what v1.17/v1.18 injected (a rollback or a mixed fleet): ignored by v1.19+, never fatal ---
start_case("env_legacy_variables_with_junk_start", {
    "SERVING_ENABLE_REQUEST_LOG": "maybe", "SERVING_REQUEST_LOG_TEMPLATE": "{{.Request.Method",
    "SERVING_ENABLE_PROBE_REQUEST_LOG": "sometimes", "SERVING_REQUEST_METRICS_BACKEND": "statsd",
    "SERVING_REQUEST_METRICS_REPORTING_PERIOD_SECONDS": "often", "TRACING_CONFIG_BACKEND": "smoke-signals",
    "TRACING_CONFIG_ZIPKIN_ENDPOINT": "::", "TRACING_CONFIG_DEBUG": "loud", "TRACING_CONFIG_SAMPLE_RATE": "half",
    "ENABLE_PROFILING": "perhaps", "METRICS_COLLECTOR_ADDRESS": "nowhere:0"})
start_case("env_v1_17_environment_starts", {
    "OBSERVABILITY_CONFIG": None, "QUEUE_PROXY_TLS_MIN_VERSION": None, "QUEUE_PROXY_TLS_MAX_VERSION": None,
    "QUEUE_PROXY_TLS_CIPHER_SUITES": None, "QUEUE_PROXY_TLS_CURVE_PREFERENCES": None,
    "SERVING_ENABLE_REQUEST_LOG": "false", "SERVING_REQUEST_LOG_TEMPLATE": "", "SERVING_ENABLE_PROBE_REQUEST_LOG":
    "false", "SERVING_REQUEST_METRICS_BACKEND": "prometheus", "SERVING_REQUEST_METRICS_REPORTING_PERIOD_SECONDS": "5",
    "TRACING_CONFIG_BACKEND": "none", "TRACING_CONFIG_ZIPKIN_ENDPOINT": "", "TRACING_CONFIG_DEBUG": "false",
    "TRACING_CONFIG_SAMPLE_RATE": "0.1", "ENABLE_PROFILING": "false", "METRICS_COLLECTOR_ADDRESS": ""},
    doc="the environment a v1.17 reconciler injected")
start_case("env_unknown_variables_ignored", {"KUBERNETES_SERVICE_HOST": "127.0.0.9", "K_SINK": "http://x",
                                             "QUEUE_PROXY_FUTURE_KNOB": "on", "HTTP_PROXY": "http://127.0.0.1:9"})


@case()
def env_readiness_probe_port_as_string_starts(t):
    """intstr: the reconciler writes numbers, a string holding a number is accepted too."""
    starts(t, {"SERVING_READINESS_PROBE": json.dumps({"tcpSocket": {"port": str(RECORDER), "host": "127.0.0.1"},
                                                      "periodSeconds": 1, "timeoutSeconds": 1})})
    r = clients.request("/", {"User-Agent": "kube-probe/1.31", "K-Network-Probe": "queue"})
    check(r.status == 200 and r.body == b"queue", f"health check: {r}")
