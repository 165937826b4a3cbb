// Observability settings; see observability_config.h. Validation follows knative.dev/pkg/observability
// (tracing and metrics Config.Validate); the request-log template is parsed where queue-proxy parses it,
// when the request log is set up (app/sidecar/config.cpp).
#include "app/sidecar/observability_config.h"

#include <cctype>
#include <map>

#include <boost/json.hpp>

#include "common/config_error.h"

namespace sluice::app {
namespace {

using proxy::telemetry::ExportProtocol;

[[noreturn]] void bad(const std::string& what) { throw ConfigError("OBSERVABILITY_CONFIG: " + what); }

const boost::json::object* object_at(const boost::json::object& o, const char* key) {
  auto* p = o.if_contains(key);
  if (!p || p->is_null()) return nullptr;
  if (!p->is_object()) bad(std::string(key) + " must be an object");
  return &p->as_object();
}

std::string string_at(const boost::json::object& o, const char* key, const std::string& where) {
  auto* p = o.if_contains(key);
  if (!p || p->is_null()) return {};
  if (!p->is_string()) bad(where + key + " must be a string");
  return std::string(p->as_string());
}

double number_at(const boost::json::object& o, const char* key, const std::string& where, double fallback) {
  auto* p = o.if_contains(key);
  if (!p || p->is_null()) return fallback;
  if (p->is_double()) return p->as_double();
  if (p->is_int64()) return static_cast<double>(p->as_int64());
  if (p->is_uint64()) return static_cast<double>(p->as_uint64());
  bad(where + key + " must be a number");
}

void flag_at(const boost::json::object& o, const char* key, bool& out) {
  if (auto* p = o.if_contains(key); p && !p->is_null()) {
    if (!p->is_bool()) bad(std::string(key) + " must be true or false");
    out = p->as_bool();
  }
}

void parse_tracing(const boost::json::object& t, ObservabilitySettings& s) {
  auto protocol = string_at(t, "protocol", "tracing.");
  auto endpoint = string_at(t, "endpoint", "tracing.");
  auto& c = s.tracing;
  c.sampling_rate = number_at(t, "samplingRate", "tracing.", 0);
  if (protocol == "grpc" || protocol == "http/protobuf") {
    if (endpoint.empty()) bad("tracing.endpoint should be set for protocol \"" + protocol + "\"");
    c.protocol = protocol == "grpc" ? ExportProtocol::otlp_grpc : ExportProtocol::otlp_http;
    c.endpoint = parse_endpoint("OBSERVABILITY_CONFIG: tracing.endpoint", endpoint, "/v1/traces");
  } else if (protocol.empty() || protocol == "none" || protocol == "stdout") {
    if (!endpoint.empty()) bad("tracing.endpoint should not be set when protocol is \"" + protocol + "\"");
    if (protocol == "stdout") c.protocol = ExportProtocol::stdout_json;
  } else {
    bad("tracing.protocol: unsupported protocol \"" + protocol + "\" (expected grpc, http/protobuf, stdout or none)");
  }
  if (c.sampling_rate < 0 || c.sampling_rate > 1)
    bad("tracing.samplingRate " + std::to_string(c.sampling_rate) + " should be from 0 to 1");
  // knative.dev/pkg samples every request for stdout, whatever samplingRate says.
  if (c.protocol == ExportProtocol::stdout_json) c.sampling_rate = 1;
}

// knative.dev/pkg's Prometheus server: the endpoint as net.SplitHostPort reads it, a port from 1024 up.
void parse_prometheus_endpoint(const std::string& endpoint, ObservabilitySettings& s) {
  auto refuse = [&](const std::string& why) {
    bad("requestMetrics.endpoint \"" + endpoint + "\" for prometheus: " + why);
  };
  std::string_view e = endpoint, host, port;
  if (e.starts_with('[')) {
    auto close = e.find(']');
    if (close == std::string_view::npos) refuse("missing ']' in address");
    if (close + 1 >= e.size() || e[close + 1] != ':') refuse("should be \"host:port\" or \"[host]:port\"");
    host = e.substr(1, close - 1);
    port = e.substr(close + 2);
  } else {
    auto colon = e.rfind(':');
    if (colon == std::string_view::npos) refuse("should be \"host:port\" or \"[host]:port\" (missing port)");
    host = e.substr(0, colon);
    if (host.find(':') != std::string_view::npos) refuse("too many colons in address");
    port = e.substr(colon + 1);
  }
  int p = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || p > 65535) refuse("the port could not be parsed as a port number");
    p = p * 10 + (c - '0');
  }
  if (port.empty() || p > 65535) refuse("the port could not be parsed as a port number");
  if (p < 1024) refuse("port " + std::to_string(p) + ", should be between 1024 and 65535");
  s.prometheus_host = std::string(host);
  s.prometheus_port = static_cast<std::uint16_t>(p);
}

void parse_request_metrics(const boost::json::object& m, ObservabilitySettings& s) {
  auto protocol = string_at(m, "protocol", "requestMetrics.");
  auto endpoint = string_at(m, "endpoint", "requestMetrics.");
  auto& c = s.metrics_push;
  // time.Duration marshals as nanoseconds.
  double ns = number_at(m, "exportInterval", "requestMetrics.", 0);
  if (ns < 0) bad("requestMetrics.exportInterval should be greater than zero");
  if (ns > 0) c.interval = std::chrono::milliseconds(std::max<std::int64_t>(1, static_cast<std::int64_t>(ns / 1e6)));
  s.prometheus_metrics = protocol == "prometheus";
  if (protocol == "grpc" || protocol == "http/protobuf") {
    if (endpoint.empty()) bad("requestMetrics.endpoint should be set when protocol is \"" + protocol + "\"");
    c.protocol = protocol == "grpc" ? ExportProtocol::otlp_grpc : ExportProtocol::otlp_http;
    c.endpoint = parse_endpoint("OBSERVABILITY_CONFIG: requestMetrics.endpoint", endpoint, "/v1/metrics");
  } else if (protocol == "prometheus") {
    if (!endpoint.empty()) parse_prometheus_endpoint(endpoint, s);
  } else if (protocol.empty() || protocol == "none") {
    if (!endpoint.empty()) bad("requestMetrics.endpoint should not be set when protocol is \"none\"");
  } else {
    bad("requestMetrics.protocol: unsupported protocol \"" + protocol +
        "\" (expected grpc, http/protobuf, prometheus or none)");
  }
}

void parse_new_style(const std::string& json, ObservabilitySettings& s) {
  boost::system::error_code ec;
  auto v = boost::json::parse(json, ec);
  if (ec || !v.is_object()) bad("not a JSON object (" + ec.message() + ")");
  const auto& o = v.as_object();
  flag_at(o, "enableRequestLog", s.request_log);
  flag_at(o, "enableProbeRequestLog", s.probe_request_log);
  if (auto t = string_at(o, "requestLogTemplate", ""); !t.empty()) {
    s.request_log_template = t;
    s.template_source = "OBSERVABILITY_CONFIG requestLogTemplate";
  } else if (auto* p = o.if_contains("requestLogTemplate"); p && p->is_string()) {
    // Written out empty, it replaces Knative's default template, and an empty template logs nothing.
    s.request_log = false;
  }
  if (auto* t = object_at(o, "tracing")) parse_tracing(*t, s);
  if (auto* m = object_at(o, "requestMetrics")) parse_request_metrics(*m, s);
  if (auto* m = object_at(o, "metrics")) {  // queue-proxy's own Go runtime and HTTP metrics
    auto p = string_at(*m, "protocol", "metrics.");
    if (!p.empty() && p != "none") s.not_acted_on.push_back("OBSERVABILITY_CONFIG metrics.protocol=" + p);
  }
  if (auto* r = object_at(o, "runtime")) {
    auto p = string_at(*r, "profiling", "runtime.");
    if (p == "enabled") s.not_acted_on.push_back("OBSERVABILITY_CONFIG runtime.profiling=enabled");
  }
}

void parse_old_style(const Options& o, ObservabilitySettings& s) {
  s.request_log = o.get_bool("SERVING_ENABLE_REQUEST_LOG", false);
  s.probe_request_log = o.get_bool("SERVING_ENABLE_PROBE_REQUEST_LOG", false);
  if (auto t = o.get_string("SERVING_REQUEST_LOG_TEMPLATE"); !t.empty()) {
    s.request_log_template = t;
    s.template_source = "SERVING_REQUEST_LOG_TEMPLATE";
  }
  auto backend = o.get_string("SERVING_REQUEST_METRICS_BACKEND");
  s.prometheus_metrics = backend == "prometheus";
  if (!backend.empty() && backend != "prometheus" && backend != "none")
    s.not_acted_on.push_back("SERVING_REQUEST_METRICS_BACKEND=" + backend);
  for (const char* v : {"SERVING_REQUEST_METRICS_REPORTING_PERIOD_SECONDS", "METRICS_COLLECTOR_ADDRESS"})
    if (!o.get_string(v).empty()) s.not_acted_on.push_back(v);
  if (o.get_bool("ENABLE_PROFILING", false)) s.not_acted_on.push_back("ENABLE_PROFILING");

  auto& c = s.tracing;
  auto tracing = o.get_string("TRACING_CONFIG_BACKEND", "none");
  if (tracing == "zipkin") {
    auto endpoint = o.get_string("TRACING_CONFIG_ZIPKIN_ENDPOINT");
    if (endpoint.empty()) throw ConfigError("TRACING_CONFIG_ZIPKIN_ENDPOINT: required with TRACING_CONFIG_BACKEND=zipkin");
    c.protocol = ExportProtocol::zipkin;
    c.b3_parents = true;  // queue-proxy <= 1.18 (OpenCensus with Zipkin) took B3 parents too
    c.endpoint = parse_endpoint("TRACING_CONFIG_ZIPKIN_ENDPOINT", endpoint, "/api/v2/spans");
  } else if (tracing != "none" && !tracing.empty()) {
    s.not_acted_on.push_back("TRACING_CONFIG_BACKEND=" + tracing);
  }
  auto rate = o.get_string("TRACING_CONFIG_SAMPLE_RATE", "0.1");  // knative.dev/pkg's default
  try {
    std::size_t used = 0;
    c.sampling_rate = rate.empty() ? 0.1 : std::stod(rate, &used);
    if (!rate.empty() && used != rate.size()) throw std::invalid_argument(rate);
  } catch (const std::exception&) {
    throw ConfigError("TRACING_CONFIG_SAMPLE_RATE=\"" + rate + "\": expected a number from 0 to 1");
  }
  if (c.sampling_rate < 0 || c.sampling_rate > 1)
    throw ConfigError("TRACING_CONFIG_SAMPLE_RATE=\"" + rate + "\": expected a number from 0 to 1");
  if (o.get_bool("TRACING_CONFIG_DEBUG", false)) c.sampling_rate = 1;  // debug: sample everything
}

// OTEL_RESOURCE_ATTRIBUTES as OpenTelemetry Go's resource detector reads it: "k=v,k2=v2", keys and values
// trimmed, values percent-decoded (kept as written when that fails); a pair without "=" is skipped.
void add_env_resource(std::string_view text, std::map<std::string, std::string>& out) {
  auto trim = [](std::string_view v) {
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
    return v;
  };
  auto hex = [](char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
  };
  text = trim(text);
  while (!text.empty()) {
    auto comma = text.find(',');
    auto pair = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    auto eq = pair.find('=');
    if (eq == std::string_view::npos) continue;
    auto raw = pair.substr(eq + 1);
    auto value = trim(raw);
    std::string decoded;
    bool ok = true;
    for (std::size_t i = 0; i < value.size() && ok; ++i) {
      if (value[i] != '%') {
        decoded.push_back(value[i]);
      } else if (i + 2 < value.size() && hex(value[i + 1]) >= 0 && hex(value[i + 2]) >= 0) {
        decoded.push_back(static_cast<char>(hex(value[i + 1]) << 4 | hex(value[i + 2])));
        i += 2;
      } else {
        ok = false;
      }
    }
    out[std::string(trim(pair.substr(0, eq)))] = ok ? decoded : std::string(raw);
  }
}

}  // namespace

std::vector<OptionSpec> observability_options() {
  return {
      {"OBSERVABILITY_CONFIG", "observability-config", false,
       "Knative >= 1.19 JSON: tracing, requestMetrics, enableRequestLog, requestLogTemplate, enableProbeRequestLog"},
      {"SERVING_ENABLE_REQUEST_LOG", "serving-enable-request-log", false, "request log on stdout"},
      {"SERVING_REQUEST_LOG_TEMPLATE", "serving-request-log-template", false,
       "Go text/template of a request-log line (default: Knative's default template's JSON)"},
      {"SERVING_ENABLE_PROBE_REQUEST_LOG", "serving-enable-probe-request-log", false, "log health checks too"},
      {"SERVING_REQUEST_METRICS_BACKEND", "serving-request-metrics-backend", false,
       "prometheus: serve request metrics on the user-metrics port"},
      {"SERVING_REQUEST_METRICS_REPORTING_PERIOD_SECONDS", "serving-request-metrics-reporting-period-seconds", false,
       "accepted, not used (Prometheus is scraped)"},
      {"METRICS_COLLECTOR_ADDRESS", "metrics-collector-address", false, "accepted, not used (OpenCensus)"},
      {"ENABLE_PROFILING", "enable-profiling", false, "accepted, not used (Go's pprof)"},
      {"TRACING_CONFIG_BACKEND", "tracing-config-backend", false, "zipkin: export spans as Zipkin v2 JSON; none"},
      {"TRACING_CONFIG_ZIPKIN_ENDPOINT", "tracing-config-zipkin-endpoint", false,
       "Zipkin's span endpoint, e.g. http://zipkin:9411/api/v2/spans"},
      {"TRACING_CONFIG_SAMPLE_RATE", "tracing-config-sample-rate", false, "0 to 1 (default 0.1)"},
      {"TRACING_CONFIG_DEBUG", "tracing-config-debug", false, "true: sample every request"},
      {"OTEL_SERVICE_NAME", "otel-service-name", false,
       "service.name of spans and metrics (default SERVING_SERVICE, else configuration, revision, pod)"},
      {"OTEL_RESOURCE_ATTRIBUTES", "otel-resource-attributes", false,
       "k=v,… added to the resource of spans and metrics (Knative's own attributes win)"},
      {"SLUICE_TRACING_QUEUE_SPANS", "tracing-queue-spans", false,
       "spans waiting for export (default 2048); beyond, dropped and counted"},
  };
}

proxy::telemetry::Endpoint parse_endpoint(const std::string& what, const std::string& text,
                                          const std::string& default_path) {
  proxy::telemetry::Endpoint e;
  std::string_view rest = text;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    e.tls = true;
  } else if (rest.find("://") != std::string_view::npos) {
    throw ConfigError(what + "=\"" + text + "\": expected an http:// or https:// URL, or host:port");
  } else {
    // Go's url.Parse reads "collector:4317" as scheme "collector" (Knative then dials it over TLS) but
    // refuses "127.0.0.1:4317" or "[::1]:4317": a first path segment with a colon. So does sluice.
    if (rest.empty() || !std::isalpha(static_cast<unsigned char>(rest.front())))
      throw ConfigError(what + "=\"" + text + "\": not a URL (no scheme, and a first path segment with a colon)");
    e.tls = true;  // as Knative (knative.dev/pkg tracing.endpointFor): no scheme means https
  }
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  e.path = slash == std::string_view::npos ? default_path : std::string(rest.substr(slash));
  if (e.path == "/") e.path = default_path;
  std::string_view host = authority, port;
  if (authority.starts_with("[")) {
    auto close = authority.find(']');
    if (close == std::string_view::npos) throw ConfigError(what + "=\"" + text + "\": unclosed [ in the host");
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') port = authority.substr(close + 2);
  } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) throw ConfigError(what + "=\"" + text + "\": no host");
  e.host = std::string(host);
  e.port = e.tls ? 443 : 80;
  if (!port.empty()) {
    int p = 0;
    for (char ch : port) {
      if (ch < '0' || ch > '9' || p > 65535) throw ConfigError(what + "=\"" + text + "\": bad port");
      p = p * 10 + (ch - '0');
    }
    if (p < 1 || p > 65535) throw ConfigError(what + "=\"" + text + "\": bad port");
    e.port = static_cast<std::uint16_t>(p);
  }
  return e;
}

void set_telemetry_resource(const Options& o, const TelemetryIdentity& c, proxy::telemetry::TracingConfig& tracing,
                            proxy::telemetry::MetricsPushConfig& metrics_push) {
  std::string name = o.get_string("OTEL_SERVICE_NAME");
  for (const std::string* fallback : {&c.service, &c.configuration, &c.revision, &c.pod})
    if (name.empty()) name = *fallback;
  std::map<std::string, std::string> a;
  add_env_resource(o.get_string("OTEL_RESOURCE_ATTRIBUTES"), a);
  // What the SDK says of itself. sluice's are its own: it is no Go SDK (a deliberate difference).
  a["telemetry.sdk.language"] = "cpp";
  a["telemetry.sdk.name"] = "sluice";
  a["telemetry.sdk.version"] = SLUICE_VERSION;
  a["container.name"] = "queue-proxy";  // Knative's K8SContainerName writes semconv's container.name
  a["k8s.namespace.name"] = c.namespace_name;
  a["k8s.pod.name"] = c.pod;
  a["service.version"] = SLUICE_VERSION;  // queue-proxy's is its build's commit ("unknown" without one)
  a["service.name"] = name;
  a["service.instance.id"] = c.pod;
  if (!c.service.empty()) a["kn.service.name"] = c.service;
  if (!c.configuration.empty()) a["kn.configuration.name"] = c.configuration;
  if (!c.revision.empty()) a["kn.revision.name"] = c.revision;
  tracing.service_name = name;
  tracing.resource.assign(a.begin(), a.end());
  metrics_push.resource = tracing.resource;
}

ObservabilitySettings parse_observability(const Options& o) {
  ObservabilitySettings s;
  if (auto json = o.get("OBSERVABILITY_CONFIG"); json && !json->empty()) {
    s.new_style = true;
    parse_new_style(*json, s);
    // Knative >= 1.19 injects none of these; set beside OBSERVABILITY_CONFIG, they are superseded by it.
    for (const char* v : {"SERVING_ENABLE_REQUEST_LOG", "SERVING_REQUEST_LOG_TEMPLATE", "SERVING_ENABLE_PROBE_REQUEST_LOG",
                          "SERVING_REQUEST_METRICS_BACKEND", "SERVING_REQUEST_METRICS_REPORTING_PERIOD_SECONDS",
                          "METRICS_COLLECTOR_ADDRESS", "ENABLE_PROFILING", "TRACING_CONFIG_BACKEND",
                          "TRACING_CONFIG_ZIPKIN_ENDPOINT", "TRACING_CONFIG_SAMPLE_RATE", "TRACING_CONFIG_DEBUG"})
      if (!o.get_string(v).empty()) s.not_acted_on.push_back(std::string(v) + " (superseded by OBSERVABILITY_CONFIG)");
  } else {
    parse_old_style(o, s);
  }
  s.tracing.queue_spans =
      static_cast<std::size_t>(o.get_int("SLUICE_TRACING_QUEUE_SPANS", 2048, 1, 1'000'000));
  return s;
}

}  // namespace sluice::app
