// Sidecar configuration; see sidecar_config.h. Names and meanings follow Knative's queue-proxy.
#include "app/sidecar_config.h"

#include <filesystem>

#include <boost/asio/ip/address.hpp>
#include <boost/json.hpp>

#include "common/config_error.h"
#include "common/log.h"

namespace sluice::app {
namespace {

std::vector<OptionSpec> sidecar_options() {
  return {
      {"CONTAINER_CONCURRENCY", "container-concurrency", true, "max in-flight requests, 0 = unlimited"},
      {"QUEUE_SERVING_PORT", "queue-serving-port", true, "proxy port, HTTP/1.1 and h2c (0 = any)"},
      {"QUEUE_SERVING_TLS_PORT", "queue-serving-tls-port", true, "TLS proxy port"},
      {"USER_PORT", "user-port", true, "the app's port on 127.0.0.1"},
      {"REVISION_TIMEOUT_SECONDS", "revision-timeout-seconds", true, "whole-request timeout, 0 = none"},
      {"SERVING_NAMESPACE", "serving-namespace", true, "namespace (log and metric labels)"},
      {"SERVING_CONFIGURATION", "serving-configuration", true, "configuration name"},
      {"SERVING_REVISION", "serving-revision", true, "revision name"},
      {"SERVING_POD", "serving-pod", true, "pod name"},
      {"SERVING_POD_IP", "serving-pod-ip", true, "pod IP"},
      {"SERVING_LOGGING_CONFIG", "serving-logging-config", true, "zap logging config (JSON, may be empty)"},
      {"SERVING_LOGGING_LEVEL", "serving-logging-level", true, "debug, info, warn or error"},
      {"SERVING_SERVICE", "serving-service", false, "service name"},
      {"REVISION_RESPONSE_START_TIMEOUT_SECONDS", "revision-response-start-timeout-seconds", false,
       "time to the first response byte, 0 = none"},
      {"REVISION_IDLE_TIMEOUT_SECONDS", "revision-idle-timeout-seconds", false,
       "time since the last byte written to the client, 0 = none"},
      {"SERVING_ENABLE_REQUEST_LOG", "serving-enable-request-log", false, "JSON request log on stdout"},
      {"SERVING_REQUEST_LOG_TEMPLATE", "serving-request-log-template", false, "accepted; the JSON shape is Knative's default template"},
      {"SERVING_ENABLE_PROBE_REQUEST_LOG", "serving-enable-probe-request-log", false, "log health checks too"},
      {"SERVING_READINESS_PROBE", "serving-readiness-probe", false,
       "the user container's probe as JSON (tcpSocket/httpGet); default: TCP connect to USER_PORT"},
      {"SERVING_REQUEST_METRICS_BACKEND", "serving-request-metrics-backend", false,
       "prometheus: serve request metrics on the user-metrics port"},
      {"OBSERVABILITY_CONFIG", "observability-config", false, "Knative >= 1.19 JSON (enableRequestLog, ...)"},
      {"SLUICE_WORKERS", "workers", false, "worker threads, 0 = one per CPU (default 0)"},
      {"SLUICE_LISTEN_ADDRESS", "listen-address", false, "address to listen on (default 0.0.0.0; :: for dual stack)"},
      {"SLUICE_PLAIN_PROTOCOLS", "plain-protocols", false,
       "what the plain port speaks: auto (HTTP/1.1 and h2c, by prior knowledge or Upgrade), http1 or h2c (default auto)"},
      {"ENABLE_HTTP2_AUTO_DETECTION", "enable-http2-auto-detection", false,
       "true: find out whether the app speaks h2c (it answers the HTTP/2 preface) at the first request"},
      {"SLUICE_UPSTREAM_PROTOCOL", "upstream-protocol", false,
       "what the app speaks: http1, h2c (prior knowledge) or detect (default: detect with "
       "ENABLE_HTTP2_AUTO_DETECTION=true, h2c when QUEUE_SERVING_PORT is 8013 (Knative's h2c revisions), else http1)"},
      {"SLUICE_MAX_HEADER_BYTES", "max-header-bytes", false, "request line + headers (default 65536; 431 beyond)"},
      {"SLUICE_MAX_HEADER_COUNT", "max-header-count", false, "header fields per request (default 100; 431 beyond)"},
      {"SLUICE_MAX_TARGET_BYTES", "max-target-bytes", false, "request target (URI) length (default 8192; 414 beyond)"},
      {"SLUICE_MAX_BODY_BYTES", "max-body-bytes", false, "request body, 0 = unlimited (default 0; 413 beyond)"},
      {"SLUICE_MAX_CONNECTIONS", "max-connections", false, "open client connections (default 10000)"},
      {"SLUICE_H2_MAX_CONCURRENT_STREAMS", "h2-max-concurrent-streams", false,
       "HTTP/2 streams open at once per client connection (default 100; beyond: RST_STREAM REFUSED_STREAM)"},
      {"SLUICE_H2_RESET_BURST", "h2-reset-burst", false,
       "HTTP/2 streams a client connection may reset or get refused at once (default 1000; beyond: GOAWAY)"},
      {"SLUICE_H2_RESET_RATE", "h2-reset-rate", false, "... and per second after that (default 33)"},
      {"SLUICE_H2_CONTROL_FRAME_BURST", "h2-control-frame-burst", false,
       "HTTP/2 SETTINGS, PING, PRIORITY and empty frames a client connection may send at once (default 1000; "
       "beyond: GOAWAY)"},
      {"SLUICE_H2_CONTROL_FRAME_RATE", "h2-control-frame-rate", false, "... and per second after that (default 100)"},
      {"SLUICE_H2_MAX_CONTINUATIONS", "h2-max-continuations", false,
       "CONTINUATION frames after one HEADERS frame (default 8; beyond: GOAWAY)"},
      {"SLUICE_H2_MAX_QUEUED_ACKS", "h2-max-queued-acks", false,
       "SETTINGS/PING acknowledgements queued for a client that does not read (default 1000; beyond: GOAWAY)"},
      {"SLUICE_H2_MAX_SETTINGS", "h2-max-settings", false, "entries in one SETTINGS frame (default 32; beyond: GOAWAY)"},
      {"SLUICE_H2_STALL_TIMEOUT_MS", "h2-stall-timeout-ms", false,
       "response bytes waiting this long for a client that neither reads nor opens its window close its HTTP/2 "
       "connection (default 30000; 0 = never)"},
      {"SLUICE_CLIENT_HEADER_TIMEOUT_SECONDS", "client-header-timeout-seconds", false,
       "wait for a complete request head, keep-alive idle included (default 60)"},
      {"SLUICE_UPSTREAM_CONNECT_TIMEOUT_SECONDS", "upstream-connect-timeout-seconds", false,
       "connect to the app (default 5; 502 beyond)"},
      {"SLUICE_UPSTREAM_MAX_IDLE", "upstream-max-idle", false,
       "idle keep-alive connections to the app per worker (default: concurrency, or 1000 when 0)"},
      {"SLUICE_IO_BUFFER_BYTES", "io-buffer-bytes", false, "body buffer per direction per exchange (default 65536)"},
      {"SLUICE_DRAIN_TIMEOUT_SECONDS", "drain-timeout-seconds", false,
       "longest wait for in-flight exchanges once draining ends (default 60)"},
      {"SLUICE_DRAIN_QUIET_PERIOD_MS", "drain-quiet-period-ms", false,
       "after SIGTERM, drain ends this long after the last ordinary request (default 30000, as queue-proxy)"},
      {"SLUICE_TLS_CERT_FILE", "tls-cert-file", false,
       "PEM certificate chain for the TLS port (default /var/lib/knative/certs/tls.crt; the TLS port is off when "
       "neither file is set and the defaults do not exist)"},
      {"SLUICE_TLS_KEY_FILE", "tls-key-file", false, "PEM private key (default /var/lib/knative/certs/tls.key)"},
      {"SLUICE_TLS_MIN_VERSION", "tls-min-version", false, "1.2 (default) or 1.3"},
      {"SLUICE_TLS_RELOAD_MS", "tls-reload-ms", false,
       "how often the certificate and key files are checked for a change (default 10000; 0 = never)"},
      {"SLUICE_QUEUE_DEPTH", "queue-depth", false,
       "requests waiting for a slot when CONTAINER_CONCURRENCY > 0 (default 10 x concurrency; 503 beyond)"},
      {"SLUICE_WAIT_FOR_DRAIN_RESET", "wait-for-drain-reset", false,
       "what undoes a /wait-for-drain that no SIGTERM follows: timeout (default; after "
       "SLUICE_WAIT_FOR_DRAIN_RESET_MS, as queue-proxy) or app-restart (the app goes away and comes back: for a "
       "native sidecar, which gets SIGTERM only after the app has exited)"},
      {"SLUICE_WAIT_FOR_DRAIN_RESET_MS", "wait-for-drain-reset-ms", false, "see above (default 1000)"},
      {"SLUICE_ADMIN_PORT", "admin-port", false, "admin port: /wait-for-drain (default 8022; 0 = any)"},
      {"SLUICE_METRICS_PORT", "metrics-port", false, "autoscaler stat port: /metrics (default 9090; 0 = any)"},
      {"SLUICE_USER_METRICS_PORT", "user-metrics-port", false,
       "request metrics port when enabled (default 9091; 0 = any)"},
      {"SLUICE_METRIC_NAMES", "metric-names", false,
       "request metric family: legacy (QP <= 1.18), otel (QP >= 1.19) or both (default: by the variables set)"},
  };
}

// Knative >= 1.19 folds the request-log and request-metrics switches into OBSERVABILITY_CONFIG.
struct Observability {
  bool request_log, probe_request_log, prometheus_metrics;
};

Observability parse_observability(const std::string& json, Observability fallback) {
  boost::system::error_code ec;
  auto v = boost::json::parse(json, ec);
  if (ec || !v.is_object())
    throw ConfigError("OBSERVABILITY_CONFIG: not a JSON object (" + ec.message() + ")");
  const auto& o = v.as_object();
  auto flag = [&](const char* key, bool& out) {
    if (auto* p = o.if_contains(key)) {
      if (!p->is_bool()) throw ConfigError(std::string("OBSERVABILITY_CONFIG: ") + key + " must be true or false");
      out = p->as_bool();
    }
  };
  Observability r = fallback;
  flag("enableRequestLog", r.request_log);
  flag("enableProbeRequestLog", r.probe_request_log);
  if (auto* m = o.if_contains("requestMetrics"); m && m->is_object()) {
    if (auto* p = m->as_object().if_contains("protocol"); p && p->is_string())
      r.prometheus_metrics = p->as_string() == "prometheus";
  }
  return r;
}

[[noreturn]] void bad_probe(std::string_view what) {
  throw ConfigError("SERVING_READINESS_PROBE: " + std::string(what));
}

std::int64_t probe_int(const boost::json::object& o, const char* key, std::int64_t fallback) {
  auto* p = o.if_contains(key);
  if (!p) return fallback;
  if (p->is_int64() && p->as_int64() >= 0) return p->as_int64();
  if (p->is_uint64()) return static_cast<std::int64_t>(p->as_uint64());
  bad_probe(std::string(key) + " must be a non-negative integer");
}

std::uint16_t probe_port(const boost::json::object& handler, std::uint16_t user_port) {
  auto* p = handler.if_contains("port");
  if (!p) return user_port;
  std::int64_t port = -1;
  if (p->is_int64()) port = p->as_int64();
  if (p->is_string()) {  // IntOrString: queue-proxy receives numbers, but a numeric string is fine too
    const auto& str = p->as_string();
    if (!str.empty() && str.find_first_not_of("0123456789") == boost::json::string::npos && str.size() < 6)
      port = std::stoll(std::string(str));
    else
      bad_probe("named port \"" + std::string(str) + "\" cannot be resolved by the sidecar; use a number");
  }
  if (port == 0) return user_port;
  if (port < 1 || port > 65535) bad_probe("port must be a number from 1 to 65535");
  return static_cast<std::uint16_t>(port);
}

proxy::Millis seconds(std::int64_t s) { return proxy::Millis(s * 1000); }

}  // namespace

proxy::ReadinessProbeConfig parse_readiness_probe(std::string_view json, std::uint16_t user_port) {
  proxy::ReadinessProbeConfig c;
  c.port = user_port;
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) return c;
  boost::system::error_code ec;
  auto v = boost::json::parse(json, ec);
  if (ec) bad_probe("not JSON (" + ec.message() + ")");
  if (v.is_array()) {  // ENABLE_MULTI_CONTAINER_PROBES: one probe per container; the first is the app's
    if (v.as_array().empty()) return c;
    v = boost::json::value(v.as_array().front());
  }
  if (!v.is_object()) bad_probe("expected a JSON object (a Kubernetes probe)");
  const auto& o = v.as_object();
  c.timeout = proxy::Millis(1000 * probe_int(o, "timeoutSeconds", 1));
  if (c.timeout.count() == 0) c.timeout = proxy::Millis(1000);
  c.period = proxy::Millis(1000 * probe_int(o, "periodSeconds", 0));
  (void)probe_int(o, "successThreshold", 1);  // validated; the kubelet counts successes, not sluice
  (void)probe_int(o, "failureThreshold", 3);
  auto host = [&](const boost::json::object& h) {
    if (auto* p = h.if_contains("host"); p && p->is_string() && !p->as_string().empty()) {
      c.host = std::string(p->as_string());
      boost::system::error_code aec;
      boost::asio::ip::make_address(c.host, aec);
      if (aec) bad_probe("host \"" + c.host + "\" is not an IP address");
    }
  };
  if (auto* t = o.if_contains("tcpSocket")) {
    if (!t->is_object()) bad_probe("tcpSocket must be an object");
    c.kind = proxy::ReadinessProbeConfig::Kind::tcp_connect;
    host(t->as_object());
    c.port = probe_port(t->as_object(), user_port);
    return c;
  }
  if (auto* h = o.if_contains("httpGet")) {
    if (!h->is_object()) bad_probe("httpGet must be an object");
    const auto& g = h->as_object();
    c.kind = proxy::ReadinessProbeConfig::Kind::http_get;
    host(g);
    c.port = probe_port(g, user_port);
    if (auto* p = g.if_contains("path"); p && p->is_string() && !p->as_string().empty())
      c.path = std::string(p->as_string());
    if (c.path.front() != '/') c.path.insert(0, "/");
    if (auto* p = g.if_contains("scheme"); p && p->is_string() && p->as_string() == "HTTPS") {
      log::warn("SERVING_READINESS_PROBE: HTTPS probes are checked by TCP connect for now");
      c.kind = proxy::ReadinessProbeConfig::Kind::tcp_connect;
    }
    if (auto* p = g.if_contains("httpHeaders")) {
      if (!p->is_array()) bad_probe("httpGet.httpHeaders must be an array");
      for (const auto& e : p->as_array()) {
        const auto* name = e.is_object() ? e.as_object().if_contains("name") : nullptr;
        const auto* value = e.is_object() ? e.as_object().if_contains("value") : nullptr;
        if (!name || !name->is_string() || !value || !value->is_string())
          bad_probe("each httpGet.httpHeaders entry needs a string name and value");
        c.headers.emplace_back(std::string(name->as_string()), std::string(value->as_string()));
      }
    }
    return c;
  }
  if (o.contains("grpc") || o.contains("exec"))
    bad_probe("only tcpSocket and httpGet probes can be checked by the sidecar");
  bad_probe("expected tcpSocket or httpGet");
}

SidecarConfig parse_sidecar_config(const EnvLookup& env, Args flags) {
  Options o(sidecar_options(), env, flags);
  SidecarConfig c;
  if (o.help_requested()) {
    c.help = true;
    c.help_text = o.help_text("sidecar");
    return c;
  }
  o.check_required();
  constexpr std::int64_t kMaxSeconds = 365LL * 24 * 3600;

  c.container_concurrency = static_cast<int>(o.get_int("CONTAINER_CONCURRENCY", 0, 0, 1'000'000));
  c.proxy.port = o.get_port("QUEUE_SERVING_PORT", 8012);
  c.tls_port = o.get_port("QUEUE_SERVING_TLS_PORT", 8112);
  c.proxy.tls_port = c.tls_port;
  {
    // Knative mounts the pair here when system-internal-tls is on; queue-proxy serves TLS only then.
    constexpr const char* kCert = "/var/lib/knative/certs/tls.crt";
    constexpr const char* kKey = "/var/lib/knative/certs/tls.key";
    auto cert = o.get_string("SLUICE_TLS_CERT_FILE"), key = o.get_string("SLUICE_TLS_KEY_FILE");
    const bool explicit_pair = !cert.empty() || !key.empty();
    if (cert.empty()) cert = kCert;
    if (key.empty()) key = kKey;
    if (explicit_pair || (std::filesystem::exists(cert) && std::filesystem::exists(key))) {
      proxy::TlsConfig tls{.cert_file = cert, .key_file = key};
      auto version = o.get_string("SLUICE_TLS_MIN_VERSION", "1.2");
      if (version != "1.2" && version != "1.3")
        throw ConfigError("SLUICE_TLS_MIN_VERSION=\"" + version + "\": expected 1.2 or 1.3");
      tls.tls13_only = version == "1.3";
      tls.reload_interval = proxy::Millis(o.get_int("SLUICE_TLS_RELOAD_MS", 10000, 0, 86'400'000));
      c.proxy.tls = tls;
    }
  }
  c.proxy.upstream_port = o.get_port("USER_PORT", 8080);
  if (c.proxy.upstream_port == 0) throw ConfigError("USER_PORT=\"0\": expected a port from 1 to 65535");
  auto timeout = o.get_int("REVISION_TIMEOUT_SECONDS", 300, 0, kMaxSeconds);
  c.revision_timeout_disabled = timeout == 0;
  c.proxy.timeouts.request = seconds(timeout);
  c.proxy.timeouts.response_start =
      seconds(o.get_int("REVISION_RESPONSE_START_TIMEOUT_SECONDS", 0, 0, kMaxSeconds));
  c.proxy.timeouts.idle = seconds(o.get_int("REVISION_IDLE_TIMEOUT_SECONDS", 0, 0, kMaxSeconds));

  c.namespace_name = o.get_string("SERVING_NAMESPACE");
  c.configuration = o.get_string("SERVING_CONFIGURATION");
  c.revision = o.get_string("SERVING_REVISION");
  c.pod = o.get_string("SERVING_POD");
  c.pod_ip = o.get_string("SERVING_POD_IP");
  c.service = o.get_string("SERVING_SERVICE");
  c.proxy.pod_ip = c.pod_ip;
  (void)o.get_string("SERVING_LOGGING_CONFIG");  // zap's config: sluice writes zap-shaped JSON itself
  c.logging_level = o.get_string("SERVING_LOGGING_LEVEL", "info");
  if (c.logging_level.empty()) c.logging_level = "info";
  log::Level level;
  if (!log::parse_level(c.logging_level, level))
    throw ConfigError("SERVING_LOGGING_LEVEL=\"" + c.logging_level +
                      "\": expected debug, info, warn or error");

  Observability obs{.request_log = o.get_bool("SERVING_ENABLE_REQUEST_LOG", false),
                    .probe_request_log = o.get_bool("SERVING_ENABLE_PROBE_REQUEST_LOG", false),
                    .prometheus_metrics = o.get_string("SERVING_REQUEST_METRICS_BACKEND") == "prometheus"};
  bool new_style = false;
  if (auto json = o.get("OBSERVABILITY_CONFIG"); json && !json->empty()) {
    obs = parse_observability(*json, obs);
    new_style = true;
  }
  c.proxy.request_log = obs.request_log;
  c.proxy.probe_request_log = obs.probe_request_log;
  c.user_metrics = obs.prometheus_metrics;
  auto names = o.get_string("SLUICE_METRIC_NAMES", new_style ? "otel" : "legacy");
  if (names == "legacy") c.metric_names = metrics::MetricNames::knative_legacy;
  else if (names == "otel") c.metric_names = metrics::MetricNames::knative_otel;
  else if (names == "both") c.metric_names = metrics::MetricNames::both;
  else throw ConfigError("SLUICE_METRIC_NAMES=\"" + names + "\": expected legacy, otel or both");
  c.proxy.readiness = parse_readiness_probe(o.get_string("SERVING_READINESS_PROBE"), c.proxy.upstream_port);

  c.proxy.workers = static_cast<unsigned>(o.get_int("SLUICE_WORKERS", 0, 0, 1024));
  c.proxy.listen_address = o.get_string("SLUICE_LISTEN_ADDRESS", "0.0.0.0");
  {
    boost::system::error_code ec;
    boost::asio::ip::make_address(c.proxy.listen_address, ec);
    if (ec)
      throw ConfigError("SLUICE_LISTEN_ADDRESS=\"" + c.proxy.listen_address +
                        "\": expected an IPv4 or IPv6 address");
  }
  auto plain = o.get_string("SLUICE_PLAIN_PROTOCOLS", "auto");
  if (plain == "auto") c.proxy.plain_protocols = proxy::ProxyConfig::PlainProtocols::http1_and_h2c;
  else if (plain == "http1") c.proxy.plain_protocols = proxy::ProxyConfig::PlainProtocols::http1;
  else if (plain == "h2c") c.proxy.plain_protocols = proxy::ProxyConfig::PlainProtocols::h2c;
  else throw ConfigError("SLUICE_PLAIN_PROTOCOLS=\"" + plain + "\": expected auto, http1 or h2c");
  // Knative gives h2c revisions (a container port named h2c) the serving port 8013 instead of 8012.
  const bool auto_detect = o.get_bool("ENABLE_HTTP2_AUTO_DETECTION", false);
  auto upstream = o.get_string("SLUICE_UPSTREAM_PROTOCOL", auto_detect ? "detect" : c.proxy.port == 8013 ? "h2c" : "http1");
  using Upstream = proxy::ProxyConfig::UpstreamProtocol;
  if (upstream == "http1") c.proxy.upstream_protocol = Upstream::http1;
  else if (upstream == "h2c") c.proxy.upstream_protocol = Upstream::h2c;
  else if (upstream == "detect") c.proxy.upstream_protocol = Upstream::detect;
  else throw ConfigError("SLUICE_UPSTREAM_PROTOCOL=\"" + upstream + "\": expected http1, h2c or detect");
  auto& l = c.proxy.limits;
  l.max_header_bytes = static_cast<std::size_t>(o.get_int("SLUICE_MAX_HEADER_BYTES", 65536, 1024, 16 << 20));
  l.max_header_count = static_cast<std::size_t>(o.get_int("SLUICE_MAX_HEADER_COUNT", 100, 1, 100000));
  l.max_target_bytes = static_cast<std::size_t>(o.get_int("SLUICE_MAX_TARGET_BYTES", 8192, 16, 16 << 20));
  l.max_body_bytes = static_cast<std::uint64_t>(o.get_int("SLUICE_MAX_BODY_BYTES", 0, 0, INT64_MAX));
  l.max_connections = static_cast<std::size_t>(o.get_int("SLUICE_MAX_CONNECTIONS", 10000, 1, 10'000'000));
  auto& h2 = l.h2;
  h2.max_concurrent_streams =
      static_cast<std::uint32_t>(o.get_int("SLUICE_H2_MAX_CONCURRENT_STREAMS", 100, 1, 1'000'000));
  h2.reset_burst = static_cast<std::uint32_t>(o.get_int("SLUICE_H2_RESET_BURST", 1000, 1, 1'000'000'000));
  h2.reset_rate = static_cast<std::uint32_t>(o.get_int("SLUICE_H2_RESET_RATE", 33, 0, 1'000'000'000));
  h2.control_burst = static_cast<std::uint32_t>(o.get_int("SLUICE_H2_CONTROL_FRAME_BURST", 1000, 1, 1'000'000'000));
  h2.control_rate = static_cast<std::uint32_t>(o.get_int("SLUICE_H2_CONTROL_FRAME_RATE", 100, 0, 1'000'000'000));
  h2.max_continuations = static_cast<std::size_t>(o.get_int("SLUICE_H2_MAX_CONTINUATIONS", 8, 0, 1'000'000));
  h2.max_outbound_ack = static_cast<std::size_t>(o.get_int("SLUICE_H2_MAX_QUEUED_ACKS", 1000, 1, 1'000'000));
  h2.max_settings = static_cast<std::size_t>(o.get_int("SLUICE_H2_MAX_SETTINGS", 32, 7, 1'000'000));
  h2.stall_timeout = proxy::Millis(o.get_int("SLUICE_H2_STALL_TIMEOUT_MS", 30000, 0, kMaxSeconds * 1000));
  auto& t = c.proxy.timeouts;
  t.client_header = seconds(o.get_int("SLUICE_CLIENT_HEADER_TIMEOUT_SECONDS", 60, 1, kMaxSeconds));
  t.upstream_connect = seconds(o.get_int("SLUICE_UPSTREAM_CONNECT_TIMEOUT_SECONDS", 5, 1, 3600));
  c.drain_timeout = seconds(o.get_int("SLUICE_DRAIN_TIMEOUT_SECONDS", 60, 0, kMaxSeconds));
  t.drain_quiet_period = proxy::Millis(o.get_int("SLUICE_DRAIN_QUIET_PERIOD_MS", 30000, 0, kMaxSeconds * 1000));
  c.proxy.container_concurrency = static_cast<std::size_t>(c.container_concurrency);
  c.proxy.queue_depth = static_cast<std::size_t>(
      o.get_int("SLUICE_QUEUE_DEPTH", 10LL * c.container_concurrency, 0, 100'000'000));
  c.control.listen_address = c.proxy.listen_address;
  c.control.admin_port = o.get_port("SLUICE_ADMIN_PORT", 8022);
  auto reset = o.get_string("SLUICE_WAIT_FOR_DRAIN_RESET", "timeout");
  if (reset == "timeout") c.control.drain_reset = proxy::ControlConfig::DrainReset::after_timeout;
  else if (reset == "app-restart") c.control.drain_reset = proxy::ControlConfig::DrainReset::app_restart;
  else throw ConfigError("SLUICE_WAIT_FOR_DRAIN_RESET=\"" + reset + "\": expected timeout or app-restart");
  c.control.drain_reset_after = proxy::Millis(o.get_int("SLUICE_WAIT_FOR_DRAIN_RESET_MS", 1000, 1, kMaxSeconds * 1000));
  c.control.metrics_port = o.get_port("SLUICE_METRICS_PORT", 9090);
  c.control.user_metrics_port = o.get_port("SLUICE_USER_METRICS_PORT", 9091);
  c.control.user_metrics = c.user_metrics;
  c.control.pod = {.namespace_name = c.namespace_name, .configuration = c.configuration,
                   .revision = c.revision, .pod = c.pod};
  // queue-proxy keeps as many idle connections as the container takes concurrent requests.
  std::int64_t idle_default = c.container_concurrency > 0 ? c.container_concurrency : 1000;
  c.proxy.upstream_max_idle =
      static_cast<std::size_t>(o.get_int("SLUICE_UPSTREAM_MAX_IDLE", idle_default, 0, 1'000'000));
  c.proxy.io_buffer_bytes =
      static_cast<std::size_t>(o.get_int("SLUICE_IO_BUFFER_BYTES", 65536, 1024, 16 << 20));
  return c;
}

}  // namespace sluice::app
