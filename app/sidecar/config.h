// `sluice sidecar` configuration: queue-proxy's environment variables (SPEC §1) plus sluice's limits.
#pragma once

#include <string>

#include "app/options.h"
#include "app/sidecar/readiness_config.h"
#include "metrics/request_metrics.h"
#include "proxy/exchange/config.h"
#include "proxy/server/control_plane.h"
#include "proxy/server/server.h"
#include "proxy/telemetry/config.h"

namespace sluice::app {

struct SidecarConfig {
  proxy::ProxyConfig proxy;
  int container_concurrency = 0;
  std::uint16_t tls_port = 8112;
  std::string namespace_name, configuration, revision, pod, pod_ip, service;
  std::string logging_level = "info";
  bool revision_timeout_disabled = false;  // REVISION_TIMEOUT_SECONDS=0 (QP: every request 504s)
  proxy::Server::ShutdownLimits drain;  // waits for in-flight exchanges once the quiet period passed
  proxy::ControlConfig control;
  bool user_metrics = false;  // SERVING_REQUEST_METRICS_BACKEND / OBSERVABILITY_CONFIG: prometheus
  metrics::MetricNames metric_names = metrics::MetricNames::knative_legacy;
  proxy::telemetry::TracingConfig tracing;
  proxy::telemetry::MetricsPushConfig metrics_push;
  std::vector<std::string> not_acted_on;  // queue-proxy settings accepted but not honoured (one warning)
  std::string request_log_error;  // the template Go's Parse refuses (variable: error); request logs are off
  // Per-node mode (app/node/mode.cpp): the listeners a predecessor handed over, and where to hand this
  // process's on once it listens (-1: nowhere).
  std::vector<int> listen_fds;
  int node_channel = -1;
  bool help = false;
  std::string help_text;
};

// Throws ConfigError naming the variable (or flag) and what is allowed.
SidecarConfig parse_sidecar_config(const EnvLookup& env, Args flags);

}  // namespace sluice::app
