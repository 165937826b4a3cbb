// `sluice sidecar` configuration: queue-proxy's environment variables (SPEC §1) plus sluice's limits.
#pragma once

#include <string>

#include "app/options.h"
#include "proxy/config.h"

namespace sluice::app {

struct SidecarConfig {
  proxy::ProxyConfig proxy;
  int container_concurrency = 0;
  std::uint16_t tls_port = 8112;
  std::string namespace_name, configuration, revision, pod, pod_ip, service;
  std::string logging_level = "info";
  bool revision_timeout_disabled = false;  // REVISION_TIMEOUT_SECONDS=0 (QP: every request 504s)
  proxy::Millis drain_timeout{proxy::Seconds(30)};
  bool help = false;
  std::string help_text;
};

// Throws ConfigError naming the variable (or flag) and what is allowed.
SidecarConfig parse_sidecar_config(const EnvLookup& env, Args flags);

}  // namespace sluice::app
