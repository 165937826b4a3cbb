// libFuzzer: the sidecar's configuration from its environment, where the JSON values come from the
// platform (SERVING_READINESS_PROBE, OBSERVABILITY_CONFIG) and the rest from the revision's spec. Any
// input must end in a config or a ConfigError (main prints it and exits 2), never a crash or another
// exception.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "app/sidecar/config.h"
#include "common/config_error.h"

namespace {

// Variables the fuzzer's later pieces set, in order.
const char* const kVariables[] = {
    "USER_PORT", "CONTAINER_CONCURRENCY", "REVISION_TIMEOUT_SECONDS", "QUEUE_SERVING_PORT",
    "SLUICE_MAX_HEADER_BYTES", "SERVING_ENABLE_REQUEST_LOG", "SERVING_REQUEST_METRICS_BACKEND",
    "SLUICE_TLS_CERT_FILE", "REVISION_RESPONSE_START_TIMEOUT_SECONDS", "SLUICE_UPSTREAM_PROTOCOL",
    "SERVING_LOGGING_LEVEL", "SLUICE_LISTEN_ADDRESS"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Pieces separated by NUL: the probe JSON, OBSERVABILITY_CONFIG, then kVariables' values.
  std::vector<std::string> pieces(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) pieces.emplace_back();
    else pieces.back() += static_cast<char>(data[i]);
  }
  std::map<std::string, std::string, std::less<>> env = {
      {"USER_PORT", "8080"}, {"REVISION_TIMEOUT_SECONDS", "300"}, {"SERVING_NAMESPACE", "ns"},
      {"SERVING_CONFIGURATION", "c"}, {"SERVING_REVISION", "r"}, {"SERVING_POD", "p"},
      {"SERVING_POD_IP", "127.0.0.1"}, {"SERVING_LOGGING_CONFIG", ""}, {"SERVING_LOGGING_LEVEL", "info"},
      {"CONTAINER_CONCURRENCY", "0"}, {"QUEUE_SERVING_PORT", "8012"}};
  env["SERVING_READINESS_PROBE"] = pieces[0];
  if (pieces.size() > 1) env["OBSERVABILITY_CONFIG"] = pieces[1];
  for (std::size_t i = 2; i < pieces.size() && i - 2 < std::size(kVariables); ++i) env[kVariables[i - 2]] = pieces[i];
  sluice::app::EnvLookup lookup = [&](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  try {
    (void)sluice::app::parse_sidecar_config(lookup, {});
  } catch (const sluice::ConfigError&) {
  }
  try {
    (void)sluice::app::parse_readiness_probe(pieces[0], 8080);
  } catch (const sluice::ConfigError&) {
  }
  return 0;
}
