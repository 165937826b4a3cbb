// Knative's observability settings for the sidecar, from either generation of variables: v1.19's single
// OBSERVABILITY_CONFIG JSON, or the older SERVING_*_REQUEST_LOG*, SERVING_REQUEST_METRICS_*,
// TRACING_CONFIG_* variables. Both are validated as Knative validates them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/options.h"
#include "proxy/telemetry/config.h"

namespace sluice::app {

struct ObservabilitySettings {
  bool new_style = false;  // OBSERVABILITY_CONFIG was set
  bool request_log = false;
  bool probe_request_log = false;
  std::string request_log_template;
  std::string template_source;  // the variable (or JSON key) that gave the template, for errors
  bool prometheus_metrics = false;
  // requestMetrics.endpoint with protocol prometheus, "host:port": where the Prometheus exporter listens
  // (an empty host: every address). Unset: queue-proxy's :9091.
  std::optional<std::string> prometheus_host;
  std::optional<std::uint16_t> prometheus_port;
  proxy::telemetry::TracingConfig tracing;
  proxy::telemetry::MetricsPushConfig metrics_push;
  std::vector<std::string> not_acted_on;  // known settings sluice accepts but does not honour
};

// The option specs this module reads (for the sidecar's --help and flags).
std::vector<OptionSpec> observability_options();

// Throws ConfigError naming the variable (and the JSON key) for a bad value.
ObservabilitySettings parse_observability(const Options& o);

// Who the sidecar serves, from SERVING_* and the pod's variables.
struct TelemetryIdentity {
  std::string service, configuration, revision, pod, namespace_name;
};
// The resource of spans and pushed metrics (and Zipkin's service name), as Knative's queue-proxy
// (sharedmain/otel.go) sets it over OpenTelemetry Go's default resource: OTEL_RESOURCE_ATTRIBUTES, the SDK's
// own attributes, then Knative's (service.name from OTEL_SERVICE_NAME, else the service, configuration,
// revision, pod), sorted by key as the SDK keeps them.
void set_telemetry_resource(const Options& o, const TelemetryIdentity& who, proxy::telemetry::TracingConfig& tracing,
                            proxy::telemetry::MetricsPushConfig& metrics_push);

// "http://host:4318/v1/traces", "host:4317" (Knative reads a scheme-less endpoint as https), …; throws
// ConfigError naming `what`.
proxy::telemetry::Endpoint parse_endpoint(const std::string& what, const std::string& text,
                                          const std::string& default_path);

}  // namespace sluice::app
