// Sidecar configuration; see config.h. Names and meanings follow Knative's queue-proxy.
#include "app/sidecar/config.h"

#include <fcntl.h>

#include <charconv>
#include <filesystem>
#include <system_error>

#include <boost/asio/ip/address.hpp>
#include <boost/json.hpp>

#include "app/sidecar/observability_config.h"
#include "app/sidecar/tls_knobs.h"
#include "common/config_error.h"
#include "common/listen.h"
#include "common/log.h"
#include "proxy/request_log/template.h"

namespace sluice::app {
namespace {

std::vector<OptionSpec> sidecar_options() {
  auto specs = observability_options();
  std::vector<OptionSpec> own = {
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
      {"SERVING_READINESS_PROBE", "serving-readiness-probe", false,
       "the user container's probe as JSON (httpGet/tcpSocket/grpc); default: TCP connect to USER_PORT"},
      {"ENABLE_MULTI_CONTAINER_PROBES", "enable-multi-container-probes", false,
       "true: SERVING_READINESS_PROBE is an array, one probe per container, and all must pass"},
      {"SLUICE_WORKERS", "workers", false,
       "worker threads (default: GOMAXPROCS when set, else the CPUs this process may use: its affinity, "
       "capped by the cgroup's CPU quota rounded down, at least 1, as queue-proxy's automaxprocs)"},
      {"GOMAXPROCS", "gomaxprocs", false, "honoured as queue-proxy's Go runtime does: worker threads, when no SLUICE_WORKERS"},
      {"SLUICE_LISTEN_ADDRESS", "listen-address", false,
       "address every port listens on (default: :: dual-stack, as queue-proxy; 0.0.0.0 where the host has no IPv6)"},
      {"SLUICE_FORWARDING_FIELDS", "forwarding-fields", false,
       "queue-proxy (default: X-Forwarded-For gets the peer; Forwarded only from the client's X-Forwarded-*) "
       "or full (also this hop in Forwarded, X-Forwarded-Proto, X-Request-Id)"},
      {"SLUICE_PLAIN_PROTOCOLS", "plain-protocols", false,
       "what the plain port speaks: auto (HTTP/1.1 and h2c, by prior knowledge or Upgrade), http1 or h2c (default auto)"},
      {"ENABLE_HTTP2_AUTO_DETECTION", "enable-http2-auto-detection", false,
       "true: find out whether the app speaks h2c (it answers the HTTP/2 preface) at the first request"},
      {"SLUICE_UPSTREAM_PROTOCOL", "upstream-protocol", false,
       "what the app speaks: http1, h2c (prior knowledge) or detect (default: detect with "
       "ENABLE_HTTP2_AUTO_DETECTION=true, h2c when QUEUE_SERVING_PORT is 8013 (Knative's h2c revisions), else http1)"},
      {"SLUICE_MAX_HEADER_BYTES", "max-header-bytes", false,
       "request line + headers (default 1052672, queue-proxy's 1 MiB + 4 KiB; 431 beyond)"},
      {"SLUICE_MAX_HEADER_COUNT", "max-header-count", false,
       "header fields per request (default 0: none beyond the bytes, as queue-proxy; 431 beyond)"},
      {"SLUICE_MAX_TARGET_BYTES", "max-target-bytes", false, "request target (URI) length (default: max-header-bytes; 414 beyond)"},
      {"SLUICE_MAX_RESPONSE_HEADER_BYTES", "max-response-header-bytes", false,
       "the app's status line + headers (default 10485760, as Go's http.Transport; 502 beyond)"},
      {"SLUICE_MAX_BODY_BYTES", "max-body-bytes", false, "request body, 0 = unlimited (default 0; 413 beyond)"},
      {"SLUICE_MAX_CONNECTIONS", "max-connections", false, "open client connections (default 10000)"},
      {"SLUICE_LINGER_MS", "linger-ms", false,
       "a connection closed with the client's bytes unread reads and drops them this long first (default 2000; 0: none)"},
      {"SLUICE_LINGER_BYTES", "linger-bytes", false, "... and this many bytes at most (default 8388608)"},
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
      {"SLUICE_UPSTREAM_IDLE_TIMEOUT_SECONDS", "upstream-idle-timeout-seconds", false,
       "an idle keep-alive connection to the app is closed after this long (default 90, as queue-proxy; 0 = never)"},
      {"SLUICE_IO_BUFFER_BYTES", "io-buffer-bytes", false, "body buffer per direction per exchange (default 65536)"},
      {"SLUICE_SPLICE_MIN_BYTES", "splice-min-bytes", false,
       "request bodies passing through unchanged with at least this many bytes left move by splice(2); 0 = never (default 16384)"},
      {"SLUICE_NETNS", "netns", false,
       "serve a pod from outside it: the network namespace file (/proc/PID/ns/net, /run/netns/NAME) that every "
       "port listens in and the app is reached in (needs CAP_SYS_ADMIN; default: sluice's own)"},
      {"SLUICE_SPLICE_RESPONSES", "splice-responses", false,
       "response bodies move by splice(2) too: less CPU in sluice, slower for a client on the same host (default false)"},
      {"SLUICE_DRAIN_TIMEOUT_SECONDS", "drain-timeout-seconds", false,
       "longest wait for anything in flight once draining ends, 0 = until it ends, as queue-proxy: the pod's "
       "grace period bounds it (default 0)"},
      {"SLUICE_DRAIN_UPGRADED_TIMEOUT_SECONDS", "drain-upgraded-timeout-seconds", false,
       "then, once only upgraded (WebSocket) connections remain, how long they may go on (default 60, as queue-proxy)"},
      {"SLUICE_DRAIN_QUIET_PERIOD_MS", "drain-quiet-period-ms", false,
       "after SIGTERM, drain ends this long after the last ordinary request (default 30000, as queue-proxy)"},
      {"SLUICE_TLS_CERT_FILE", "tls-cert-file", false,
       "PEM certificate chain for the TLS port (default /var/lib/knative/certs/tls.crt; the TLS port is off when "
       "neither file is set and the defaults do not exist)"},
      {"SLUICE_TLS_KEY_FILE", "tls-key-file", false, "PEM private key (default /var/lib/knative/certs/tls.key)"},
      {"SLUICE_LISTEN_FDS", "listen-fds", false,
       "listening sockets a predecessor handed over, as descriptor numbers (comma separated): each port takes "
       "the one bound to its address instead of binding anew (set by the per-node agent when it restarts)"},
      {"SLUICE_NODE_CHANNEL", "node-channel", false,
       "a unix socket's descriptor on which, once listening, sluice hands its listening sockets to the per-node "
       "agent that started it (set by that agent)"},
      {"SLUICE_POD_ROOT", "pod-root", false,
       "the pod's file system, under which the default TLS pair is looked for (default /; per-node mode: the "
       "agent hands each pod's proxy its pod's)"},
      {"QUEUE_PROXY_TLS_MIN_VERSION", "queue-proxy-tls-min-version", false, "TLS port: 1.3 (default) or 1.2"},
      {"QUEUE_PROXY_TLS_MAX_VERSION", "queue-proxy-tls-max-version", false, "TLS port: 1.3 (default) or 1.2"},
      {"QUEUE_PROXY_TLS_CIPHER_SUITES", "queue-proxy-tls-cipher-suites", false,
       "TLS 1.2 suites by Go's names, comma separated (default: ECDHE with AES-GCM or ChaCha20)"},
      {"QUEUE_PROXY_TLS_CURVE_PREFERENCES", "queue-proxy-tls-curve-preferences", false,
       "key exchange curves by Go's names, e.g. X25519,CurveP256 (default: X25519, P-256, P-384, P-521, as Go)"},
      {"SLUICE_TLS_MIN_VERSION", "tls-min-version", false,
       "older name of QUEUE_PROXY_TLS_MIN_VERSION (used when that is empty)"},
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
       "request metrics port when enabled (default: requestMetrics.endpoint's, else 9091; 0 = any)"},
      {"SLUICE_METRIC_NAMES", "metric-names", false,
       "request metric family: legacy (QP <= 1.18), otel (QP >= 1.19) or both (default: by the variables set)"},
      {"ENABLE_HTTP_FULL_DUPLEX", "enable-http-full-duplex", false,
       "accepted; HTTP/1.1 bodies always stream both ways at once (see docs/sidecar.md)"},
      // Known to queue-proxy, not needed by sluice: named in the start-up warning when set.
      {"HOST_IP", "host-ip", false, "accepted, not used"},
      {"SYSTEM_NAMESPACE", "system-namespace", false, "accepted, not used"},
      {"ROOT_CA", "root-ca", false, "accepted, not used"},
  };
  specs.insert(specs.begin(), own.begin(), own.end());
  return specs;
}

proxy::Millis seconds(std::int64_t s) { return proxy::Millis(s * 1000); }

// Knative passes every QUEUE_PROXY_TLS_* variable, empty when config-deployment leaves it unset.
void apply_tls_knobs(const Options& o, proxy::TlsConfig& tls) {
  const char* min_var = "QUEUE_PROXY_TLS_MIN_VERSION";
  auto min = o.get_string(min_var);
  if (min.empty()) {
    min_var = "SLUICE_TLS_MIN_VERSION";
    min = o.get_string(min_var);
  }
  if (!min.empty()) tls.min_version = parse_tls_version(min_var, min);
  if (auto max = o.get_string("QUEUE_PROXY_TLS_MAX_VERSION"); !max.empty())
    tls.max_version = parse_tls_version("QUEUE_PROXY_TLS_MAX_VERSION", max);
  if (tls.max_version < tls.min_version)
    throw ConfigError("QUEUE_PROXY_TLS_MAX_VERSION=\"1.2\": below the minimum version 1.3 (" +
                      std::string(min_var) + ")");
  tls.tls12_ciphers = openssl_cipher_list("QUEUE_PROXY_TLS_CIPHER_SUITES",
                                          o.get_string("QUEUE_PROXY_TLS_CIPHER_SUITES"));
  std::vector<std::string> dropped;
  tls.groups = openssl_groups("QUEUE_PROXY_TLS_CURVE_PREFERENCES",
                              o.get_string("QUEUE_PROXY_TLS_CURVE_PREFERENCES"), dropped);
  for (const auto& d : dropped)
    log::warn("QUEUE_PROXY_TLS_CURVE_PREFERENCES: curve not available in this OpenSSL; left out").kv("curve", d);
}

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

  // queue-proxy reads its booleans with Go's strconv.ParseBool, to which an empty value is no boolean.
  for (const char* v : {"ENABLE_HTTP_FULL_DUPLEX", "ENABLE_HTTP2_AUTO_DETECTION", "ENABLE_MULTI_CONTAINER_PROBES"})
    if (auto value = o.get(v); value && value->empty())
      throw ConfigError(std::string(v) + "=\"\": expected true or false (an empty value is not a boolean)");
  // Below 1, queue-proxy builds no breaker: no limit.
  c.container_concurrency = static_cast<int>(
      std::max<std::int64_t>(0, o.get_int("CONTAINER_CONCURRENCY", 0, INT32_MIN, 1'000'000)));
  c.proxy.port = o.get_port("QUEUE_SERVING_PORT", 8012);
  {
    // Knative mounts the pair here when system-internal-tls is on; queue-proxy serves TLS only then.
    auto root = o.get_string("SLUICE_POD_ROOT");
    while (!root.empty() && root.back() == '/') root.pop_back();
    const std::string kCert = root + "/var/lib/knative/certs/tls.crt";
    const std::string kKey = root + "/var/lib/knative/certs/tls.key";
    auto cert = o.get_string("SLUICE_TLS_CERT_FILE"), key = o.get_string("SLUICE_TLS_KEY_FILE");
    const bool explicit_pair = !cert.empty() || !key.empty();
    if (cert.empty()) cert = kCert;
    if (key.empty()) key = kKey;
    // The QUEUE_PROXY_TLS_* knobs are read only while the TLS port is on, as queue-proxy reads them:
    // a value it would ignore never stops the pod.
    proxy::TlsConfig tls{.cert_file = cert, .key_file = key};
    if (explicit_pair || (std::filesystem::exists(cert) && std::filesystem::exists(key))) {
      apply_tls_knobs(o, tls);
      c.tls_port = o.get_port("QUEUE_SERVING_TLS_PORT", 8112);  // read only with TLS on, as queue-proxy
      c.proxy.tls_port = c.tls_port;
      tls.reload_interval = proxy::Millis(o.get_int("SLUICE_TLS_RELOAD_MS", 10000, 0, 86'400'000));
      c.proxy.tls = tls;
    }
  }
  {
    // queue-proxy only joins USER_PORT into the app's address: anything else is a 502 for every request.
    auto user = o.get_string("USER_PORT", "8080");
    unsigned port = 0;
    auto [p, ec] = std::from_chars(user.data(), user.data() + user.size(), port);
    if (ec != std::errc() || p != user.data() + user.size() || port < 1 || port > 65535) {
      c.not_acted_on.push_back("USER_PORT=" + user + " (not a port: every request is a 502, as queue-proxy's)");
      port = 0;
    }
    c.proxy.upstream_port = static_cast<std::uint16_t>(port);
  }
  // A negative timeout, as 0: queue-proxy's timer fires at once (sluice: no timeout, see docs/sidecar.md).
  auto timeout = std::max<std::int64_t>(0, o.get_int("REVISION_TIMEOUT_SECONDS", 300, INT32_MIN, kMaxSeconds));
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
  if (!log::parse_level(c.logging_level, level)) {
    // queue-proxy's logger ignores a level it cannot read and logs at its default, info.
    c.not_acted_on.push_back("SERVING_LOGGING_LEVEL=" + c.logging_level + " (not a level: info is used)");
    c.logging_level = "info";
  }

  auto obs = parse_observability(o);
  c.proxy.request_log = obs.request_log;
  c.proxy.probe_request_log = obs.probe_request_log;
  c.user_metrics = obs.prometheus_metrics;
  c.not_acted_on.insert(c.not_acted_on.end(), obs.not_acted_on.begin(), obs.not_acted_on.end());
  // queue-proxy parses the template only to write request logs; when Go's Parse refuses it, queue-proxy logs
  // "Error setting up request logger. Request logs will be unavailable." and serves without them.
  if (c.proxy.request_log && !obs.request_log_template.empty()) {
    try {
      c.proxy.request_log_template = std::make_shared<const proxy::RequestLogTemplate>(obs.request_log_template);
    } catch (const std::invalid_argument& e) {
      c.proxy.request_log = false;
      c.request_log_error = obs.template_source + ": " + e.what();
    }
  }
  c.proxy.revision = {.name = c.revision, .namespace_name = c.namespace_name, .service = c.service,
                      .configuration = c.configuration, .pod_name = c.pod, .pod_ip = c.pod_ip};
  const bool new_style = obs.new_style;
  c.tracing = obs.tracing;
  c.metrics_push = obs.metrics_push;
  set_telemetry_resource(o, {.service = c.service, .configuration = c.configuration, .revision = c.revision,
                             .pod = c.pod, .namespace_name = c.namespace_name},
                         c.tracing, c.metrics_push);
  if (!o.get_string("SERVING_LOGGING_CONFIG").empty())
    c.not_acted_on.push_back("SERVING_LOGGING_CONFIG (the log shape is zap's production JSON; the level is SERVING_LOGGING_LEVEL)");
  for (const char* v : {"HOST_IP", "SYSTEM_NAMESPACE", "ROOT_CA"})
    if (!o.get_string(v).empty()) c.not_acted_on.push_back(v);
  auto names = o.get_string("SLUICE_METRIC_NAMES", new_style ? "otel" : "legacy");
  if (names == "legacy") c.metric_names = metrics::MetricNames::knative_legacy;
  else if (names == "otel") c.metric_names = metrics::MetricNames::knative_otel;
  else if (names == "both") c.metric_names = metrics::MetricNames::both;
  else throw ConfigError("SLUICE_METRIC_NAMES=\"" + names + "\": expected legacy, otel or both");
  // An OTLP push sends the 1.19 names, so they are recorded whatever the Prometheus family is.
  if (c.metrics_push.protocol != proxy::telemetry::ExportProtocol::none &&
      c.metric_names == metrics::MetricNames::knative_legacy)
    c.metric_names = metrics::MetricNames::both;
  auto probes = parse_readiness_probes(o.get_string("SERVING_READINESS_PROBE"), c.proxy.upstream_port,
                                       o.get_bool("ENABLE_MULTI_CONTAINER_PROBES", false));
  c.proxy.readiness = probes.front();
  c.proxy.sidecar_readiness.assign(probes.begin() + 1, probes.end());

  // queue-proxy's Go runtime honours GOMAXPROCS when the pod sets it; so does the sidecar.
  c.proxy.workers = static_cast<unsigned>(o.get_int("SLUICE_WORKERS", 0, 0, 1024));
  if (c.proxy.workers == 0) {
    // As Go's runtime: a positive integer counts, anything else is ignored.
    auto go = o.get_string("GOMAXPROCS");
    unsigned n = 0;
    auto [p, ec] = std::from_chars(go.data(), go.data() + go.size(), n);
    if (ec == std::errc() && p == go.data() + go.size() && n > 0) c.proxy.workers = std::min(n, 1024u);
  }
  if (const auto netns = o.get_string("SLUICE_NETNS"); !netns.empty()) {
    try {
      c.proxy.netns = net::Netns::open(netns);
    } catch (const std::system_error& e) {
      throw ConfigError("SLUICE_NETNS=\"" + netns + "\": " + e.code().message());
    }
    c.proxy.readiness.netns = c.proxy.netns;
    for (auto& p : c.proxy.sidecar_readiness) p.netns = c.proxy.netns;
    c.control.netns = c.proxy.netns;
  }
  // Descriptors this process was started with (per-node mode): each one must be open.
  auto descriptor = [](std::string_view text) {
    int fd = -1;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), fd);
    return ec == std::errc() && p == text.data() + text.size() && fd >= 3 && ::fcntl(fd, F_GETFD) >= 0 ? fd : -1;
  };
  if (const auto list = o.get_string("SLUICE_LISTEN_FDS"); !list.empty())
    for (std::size_t at = 0;;) {
      const auto comma = list.find(',', at);
      const int fd = descriptor(std::string_view(list).substr(at, comma - at));
      if (fd < 0)
        throw ConfigError("SLUICE_LISTEN_FDS=\"" + list + "\": expected numbers of open descriptors (3 or more), comma separated");
      c.listen_fds.push_back(fd);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  if (const auto channel = o.get_string("SLUICE_NODE_CHANNEL"); !channel.empty()) {
    c.node_channel = descriptor(channel);
    if (c.node_channel < 0)
      throw ConfigError("SLUICE_NODE_CHANNEL=\"" + channel + "\": expected the number of an open descriptor (3 or more)");
  }
  c.proxy.listen_address = o.get_string("SLUICE_LISTEN_ADDRESS");
  if (c.proxy.listen_address.empty()) c.proxy.listen_address = net::any_address(c.proxy.netns);
  {
    boost::system::error_code ec;
    boost::asio::ip::make_address(c.proxy.listen_address, ec);
    if (ec)
      throw ConfigError("SLUICE_LISTEN_ADDRESS=\"" + c.proxy.listen_address +
                        "\": expected an IPv4 or IPv6 address");
  }
  auto forwarding = o.get_string("SLUICE_FORWARDING_FIELDS", "queue-proxy");
  using Fields = proxy::ProxyConfig::ForwardingFields;
  if (forwarding == "queue-proxy") c.proxy.forwarding_fields = Fields::queue_proxy;
  else if (forwarding == "full") c.proxy.forwarding_fields = Fields::full;
  else throw ConfigError("SLUICE_FORWARDING_FIELDS=\"" + forwarding + "\": expected queue-proxy or full");
  auto plain = o.get_string("SLUICE_PLAIN_PROTOCOLS", "auto");
  if (plain == "auto") c.proxy.plain_protocols = proxy::ProxyConfig::PlainProtocols::http1_and_h2c;
  else if (plain == "http1") c.proxy.plain_protocols = proxy::ProxyConfig::PlainProtocols::http1;
  else if (plain == "h2c") c.proxy.plain_protocols = proxy::ProxyConfig::PlainProtocols::h2c;
  else throw ConfigError("SLUICE_PLAIN_PROTOCOLS=\"" + plain + "\": expected auto, http1 or h2c");
  // Knative gives h2c revisions (a container port named h2c) the serving port 8013 instead of 8012.
  const bool auto_detect = o.get_bool("ENABLE_HTTP2_AUTO_DETECTION", false);
  // Knative sets it per revision (features.knative.dev/http-full-duplex); sluice's HTTP/1.1 bodies stream
  // both ways at once either way, so only the value is checked.
  (void)o.get_bool("ENABLE_HTTP_FULL_DUPLEX", false);
  auto upstream = o.get_string("SLUICE_UPSTREAM_PROTOCOL", auto_detect ? "detect" : c.proxy.port == 8013 ? "h2c" : "http1");
  using Upstream = proxy::ProxyConfig::UpstreamProtocol;
  if (upstream == "http1") c.proxy.upstream_protocol = Upstream::http1;
  else if (upstream == "h2c") c.proxy.upstream_protocol = Upstream::h2c;
  else if (upstream == "detect") c.proxy.upstream_protocol = Upstream::detect;
  else throw ConfigError("SLUICE_UPSTREAM_PROTOCOL=\"" + upstream + "\": expected http1, h2c or detect");
  auto& l = c.proxy.limits;
  // queue-proxy (Go's net/http) reads a request head of up to 1 MiB plus 4 KiB of buffer slack, with no
  // limit of its own on the field count or the target's length: by default sluice accepts the same.
  l.max_header_bytes = static_cast<std::size_t>(o.get_int("SLUICE_MAX_HEADER_BYTES", (1 << 20) + 4096, 1024, 16 << 20));
  l.max_header_count = static_cast<std::size_t>(o.get_int("SLUICE_MAX_HEADER_COUNT", 0, 0, 1'000'000));
  l.max_target_bytes = static_cast<std::size_t>(
      o.get_int("SLUICE_MAX_TARGET_BYTES", static_cast<std::int64_t>(l.max_header_bytes), 16, 16 << 20));
  l.max_body_bytes = static_cast<std::uint64_t>(o.get_int("SLUICE_MAX_BODY_BYTES", 0, 0, INT64_MAX));
  // Go's http.Transport, queue-proxy's client, reads an app's response head of up to 10 MiB.
  l.max_response_header_bytes = static_cast<std::size_t>(
      o.get_int("SLUICE_MAX_RESPONSE_HEADER_BYTES", 10 << 20, 1024, 64 << 20));
  l.max_connections = static_cast<std::size_t>(o.get_int("SLUICE_MAX_CONNECTIONS", 10000, 1, 10'000'000));
  l.linger = std::chrono::milliseconds(o.get_int("SLUICE_LINGER_MS", 2000, 0, 600'000));
  l.linger_bytes = static_cast<std::size_t>(o.get_int("SLUICE_LINGER_BYTES", 8 << 20, 0, INT64_MAX));
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
  t.upstream_idle = seconds(o.get_int("SLUICE_UPSTREAM_IDLE_TIMEOUT_SECONDS", 90, 0, kMaxSeconds));
  c.drain.in_flight = seconds(o.get_int("SLUICE_DRAIN_TIMEOUT_SECONDS", 0, 0, kMaxSeconds));
  c.drain.upgraded = seconds(o.get_int("SLUICE_DRAIN_UPGRADED_TIMEOUT_SECONDS", 60, 0, kMaxSeconds));
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
  // Where queue-proxy's Prometheus exporter listens: requestMetrics.endpoint, else :9091.
  c.control.user_metrics_port = o.get_port("SLUICE_USER_METRICS_PORT", obs.prometheus_port.value_or(9091));
  if (obs.prometheus_host && !obs.prometheus_host->empty()) {
    const std::string& host = *obs.prometheus_host;
    boost::system::error_code ec;
    boost::asio::ip::make_address(host, ec);
    if (!ec) c.control.user_metrics_address = host;
    else if (host == "localhost") c.control.user_metrics_address = "127.0.0.1";  // as Go listens for it
    else c.not_acted_on.push_back("OBSERVABILITY_CONFIG requestMetrics.endpoint's host " + host +
                                  " (not an IP address: the request metrics listen on every address)");
  }
  c.control.user_metrics = c.user_metrics;
  c.control.pod = {.namespace_name = c.namespace_name, .configuration = c.configuration,
                   .revision = c.revision, .pod = c.pod};
  // queue-proxy keeps as many idle connections as the container takes concurrent requests.
  std::int64_t idle_default = c.container_concurrency > 0 ? c.container_concurrency : 1000;
  c.proxy.upstream_max_idle =
      static_cast<std::size_t>(o.get_int("SLUICE_UPSTREAM_MAX_IDLE", idle_default, 0, 1'000'000));
  c.proxy.io_buffer_bytes =
      static_cast<std::size_t>(o.get_int("SLUICE_IO_BUFFER_BYTES", 65536, 1024, 16 << 20));
  c.proxy.splice_min_bytes =
      static_cast<std::size_t>(o.get_int("SLUICE_SPLICE_MIN_BYTES", 16384, 0, std::int64_t{1} << 40));
  c.proxy.splice_responses = o.get_bool("SLUICE_SPLICE_RESPONSES", false);
  return c;
}

}  // namespace sluice::app
