// What one ScaledObject asks of the scaler, from its trigger metadata: where its sidecars are and the
// KPA settings (Knative's autoscaling annotation names). Pure parsing, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autoscaler/config.h"

namespace sluice::scaler {

// One entry of the `sidecars` list: an IP literal or a DNS name (resolved every scrape round to all of
// its A/AAAA records, e.g. a headless Service), and the sidecars' Stat port.
struct SidecarAddress {
  std::string host;
  std::uint16_t port = 9090;
  bool operator==(const SidecarAddress&) const = default;
};

// "host[:port],host[:port],..." with IPv6 literals in brackets ([fd00::1]:9090); port 9090 by default.
// Throws ConfigError naming the `sidecars` key.
std::vector<SidecarAddress> parse_sidecars(const std::string& value);

using Metadata = std::map<std::string, std::string, std::less<>>;

struct ScaledObjectSettings {
  std::vector<SidecarAddress> sidecars;
  autoscaler::AutoscalerConfig config;
  // The autoscaling keys as given (prefix removed): a change of these updates the KPA in place.
  autoscaler::ConfigData autoscaling;
};

// Keys: `sidecars` (required); KEDA's own (scalerAddress and its TLS keys) are skipped; any other key is
// a Knative autoscaling key, with or without the `autoscaling.knative.dev/` prefix (min-scale, target,
// stable-window, ...; the config-autoscaler ConfigMap keys too). Throws ConfigError naming the first key
// whose value is malformed or that is not known.
ScaledObjectSettings parse_settings(const Metadata& metadata);

}  // namespace sluice::scaler
