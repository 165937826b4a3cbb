// SERVING_READINESS_PROBE (with ENABLE_MULTI_CONTAINER_PROBES, one probe per container): what the sidecar
// checks before it answers a health check with 200.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "proxy/exchange/config.h"

namespace sluice::app {

// A Kubernetes probe as JSON (httpGet over HTTP or HTTPS, tcpSocket, grpc; an array takes its first
// element). Empty: TCP connect to the user port, polled aggressively. An exec probe or one with no action
// starts the sidecar, as queue-proxy, and never passes (said once at start). Throws ConfigError naming the
// variable for JSON that is not a probe (queue-proxy exits on what Go cannot decode) and for values the
// sidecar cannot act on (a named port, a host that is not an IP address).
proxy::ReadinessProbeConfig parse_readiness_probe(std::string_view json, std::uint16_t user_port);

// `multi` (ENABLE_MULTI_CONTAINER_PROBES=true): a JSON array, the app's probe first and then one per
// sidecar container that declares one; all must pass, each run as above. Without `multi`, one probe as
// above. Never empty: with nothing to check, the default probe.
std::vector<proxy::ReadinessProbeConfig> parse_readiness_probes(std::string_view json, std::uint16_t user_port,
                                                                bool multi);

}  // namespace sluice::app
