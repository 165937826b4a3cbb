// Sidecar configuration; see sidecar_config.h. Names and meanings follow Knative's queue-proxy.
#include "app/sidecar_config.h"

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
      {"OBSERVABILITY_CONFIG", "observability-config", false, "Knative >= 1.19 JSON (enableRequestLog, ...)"},
      {"SLUICE_WORKERS", "workers", false, "worker threads, 0 = one per CPU (default 0)"},
      {"SLUICE_LISTEN_ADDRESS", "listen-address", false, "address to listen on (default 0.0.0.0; :: for dual stack)"},
      {"SLUICE_MAX_HEADER_BYTES", "max-header-bytes", false, "request line + headers (default 65536; 431 beyond)"},
      {"SLUICE_MAX_HEADER_COUNT", "max-header-count", false, "header fields per request (default 100; 431 beyond)"},
      {"SLUICE_MAX_BODY_BYTES", "max-body-bytes", false, "request body, 0 = unlimited (default 0; 413 beyond)"},
      {"SLUICE_MAX_CONNECTIONS", "max-connections", false, "open client connections (default 10000)"},
      {"SLUICE_CLIENT_HEADER_TIMEOUT_SECONDS", "client-header-timeout-seconds", false,
       "wait for a complete request head, keep-alive idle included (default 60)"},
      {"SLUICE_UPSTREAM_CONNECT_TIMEOUT_SECONDS", "upstream-connect-timeout-seconds", false,
       "connect to the app (default 5; 502 beyond)"},
      {"SLUICE_UPSTREAM_MAX_IDLE", "upstream-max-idle", false,
       "idle keep-alive connections to the app per worker (default: concurrency, or 1000 when 0)"},
      {"SLUICE_IO_BUFFER_BYTES", "io-buffer-bytes", false, "body buffer per direction per exchange (default 65536)"},
      {"SLUICE_DRAIN_TIMEOUT_SECONDS", "drain-timeout-seconds", false,
       "longest wait for in-flight requests after SIGTERM (default 30)"},
  };
}

// Knative >= 1.19 folds the request-log switch into OBSERVABILITY_CONFIG.
bool observability_request_log(const std::string& json, bool fallback) {
  boost::system::error_code ec;
  auto v = boost::json::parse(json, ec);
  if (ec || !v.is_object())
    throw ConfigError("OBSERVABILITY_CONFIG: not a JSON object (" + ec.message() + ")");
  if (auto* p = v.as_object().if_contains("enableRequestLog")) {
    if (p->is_bool()) return p->as_bool();
    throw ConfigError("OBSERVABILITY_CONFIG: enableRequestLog must be true or false");
  }
  return fallback;
}

proxy::Millis seconds(std::int64_t s) { return proxy::Millis(s * 1000); }

}  // namespace

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

  c.proxy.request_log = o.get_bool("SERVING_ENABLE_REQUEST_LOG", false);
  if (auto obs = o.get("OBSERVABILITY_CONFIG"); obs && !obs->empty())
    c.proxy.request_log = observability_request_log(*obs, c.proxy.request_log);

  c.proxy.workers = static_cast<unsigned>(o.get_int("SLUICE_WORKERS", 0, 0, 1024));
  c.proxy.listen_address = o.get_string("SLUICE_LISTEN_ADDRESS", "0.0.0.0");
  {
    boost::system::error_code ec;
    boost::asio::ip::make_address(c.proxy.listen_address, ec);
    if (ec)
      throw ConfigError("SLUICE_LISTEN_ADDRESS=\"" + c.proxy.listen_address +
                        "\": expected an IPv4 or IPv6 address");
  }
  auto& l = c.proxy.limits;
  l.max_header_bytes = static_cast<std::size_t>(o.get_int("SLUICE_MAX_HEADER_BYTES", 65536, 1024, 16 << 20));
  l.max_header_count = static_cast<std::size_t>(o.get_int("SLUICE_MAX_HEADER_COUNT", 100, 1, 100000));
  l.max_body_bytes = static_cast<std::uint64_t>(o.get_int("SLUICE_MAX_BODY_BYTES", 0, 0, INT64_MAX));
  l.max_connections = static_cast<std::size_t>(o.get_int("SLUICE_MAX_CONNECTIONS", 10000, 1, 10'000'000));
  auto& t = c.proxy.timeouts;
  t.client_header = seconds(o.get_int("SLUICE_CLIENT_HEADER_TIMEOUT_SECONDS", 60, 1, kMaxSeconds));
  t.upstream_connect = seconds(o.get_int("SLUICE_UPSTREAM_CONNECT_TIMEOUT_SECONDS", 5, 1, 3600));
  c.drain_timeout = seconds(o.get_int("SLUICE_DRAIN_TIMEOUT_SECONDS", 30, 0, kMaxSeconds));
  // queue-proxy keeps as many idle connections as the container takes concurrent requests.
  std::int64_t idle_default = c.container_concurrency > 0 ? c.container_concurrency : 1000;
  c.proxy.upstream_max_idle =
      static_cast<std::size_t>(o.get_int("SLUICE_UPSTREAM_MAX_IDLE", idle_default, 0, 1'000'000));
  c.proxy.io_buffer_bytes =
      static_cast<std::size_t>(o.get_int("SLUICE_IO_BUFFER_BYTES", 65536, 1024, 16 << 20));
  return c;
}

}  // namespace sluice::app
