// Parsing of a ScaledObject's trigger metadata; the KPA keys go through autoscaler::config_from_data, so
// they are validated, and their errors worded, exactly as for the gateway and the simulator.
#include "scaler/settings.h"

#include <array>
#include <charconv>
#include <string_view>

#include "common/ascii.h"
#include "common/config_error.h"

namespace sluice::scaler {
namespace {

constexpr std::string_view kSidecarsKey = "sidecars";
constexpr std::string_view kAnnotationPrefix = "autoscaling.knative.dev/";
// The external trigger's own keys, which KEDA passes along with the rest of the metadata.
constexpr std::array<std::string_view, 6> kKedaKeys = {"scalerAddress", "tlsCertFile", "caCert",
                                                       "tlsClientCert", "tlsClientKey", "unsafeSsl"};

[[noreturn]] void bad_sidecars(const std::string& value, std::string_view why) {
  throw ConfigError(std::string(kSidecarsKey) + ": '" + value + "' is not allowed: " + std::string(why));
}

SidecarAddress parse_entry(std::string_view entry, const std::string& value) {
  SidecarAddress a;
  std::string_view port;
  if (entry.front() == '[') {
    const auto close = entry.find(']');
    if (close == std::string_view::npos) bad_sidecars(value, "an IPv6 address misses its ']'");
    a.host = std::string(entry.substr(1, close - 1));
    const auto rest = entry.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') bad_sidecars(value, "expected ':PORT' after ']'");
      port = rest.substr(1);
      if (port.empty()) bad_sidecars(value, "a port is empty");
    }
  } else if (const auto colon = entry.rfind(':'); colon != std::string_view::npos) {
    if (entry.find(':') != colon) bad_sidecars(value, "write IPv6 addresses in brackets: [fd00::1]:9090");
    a.host = std::string(entry.substr(0, colon));
    port = entry.substr(colon + 1);
    if (port.empty()) bad_sidecars(value, "a port is empty");
  } else {
    a.host = std::string(entry);
  }
  if (a.host.empty()) bad_sidecars(value, "a host is empty");
  if (!port.empty()) {
    unsigned p = 0;
    const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || ptr != port.data() + port.size() || p == 0 || p > 65535) {
      bad_sidecars(value, "a port must be a number in [1, 65535]");
    }
    a.port = static_cast<std::uint16_t>(p);
  }
  return a;
}

}  // namespace

std::vector<SidecarAddress> parse_sidecars(const std::string& value) {
  std::vector<SidecarAddress> out;
  std::string_view rest = value;
  while (true) {
    const auto comma = rest.find(',');
    const auto entry = trim(rest.substr(0, comma), kLineSpace);
    if (entry.empty()) {
      bad_sidecars(value, "expected host[:port] entries separated by commas (a headless Service's DNS name, "
                          "or pod addresses), port 9090 by default");
    }
    out.push_back(parse_entry(entry, value));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

ScaledObjectSettings parse_settings(const Metadata& metadata) {
  ScaledObjectSettings s;
  bool have_sidecars = false;
  for (const auto& [raw_key, value] : metadata) {
    std::string_view key = raw_key;
    if (key.starts_with(kAnnotationPrefix)) key.remove_prefix(kAnnotationPrefix.size());
    if (key == kSidecarsKey) {
      s.sidecars = parse_sidecars(value);
      have_sidecars = true;
      continue;
    }
    bool keda_key = false;
    for (const auto k : kKedaKeys) keda_key = keda_key || k == key;
    if (keda_key) continue;
    if (!s.autoscaling.emplace(std::string(key), value).second) {
      throw ConfigError(std::string(key) + ": given twice (with and without " + std::string(kAnnotationPrefix) +
                        ")");
    }
  }
  if (!have_sidecars) {
    throw ConfigError(std::string(kSidecarsKey) +
                      ": missing: the sidecars' Stat addresses, a headless Service's DNS name or host[:port] list");
  }
  // The metadata carries a revision's autoscaling annotations: Knative's annotation ranges apply.
  s.config = autoscaler::config_from_data({}, s.autoscaling);
  return s;
}

}  // namespace sluice::scaler
