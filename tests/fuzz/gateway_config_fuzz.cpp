// libFuzzer: `sluice gateway`'s configuration files, YAML and Procfile. Any text must give a config or a
// ConfigError naming the file (main prints it and exits 2), never a crash or another exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include "app/gateway/config.h"
#include "common/config_error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] & 1) (void)sluice::app::gateway::parse_procfile(text, "Procfile");
    else (void)sluice::app::gateway::parse_yaml(text, "sluice.yaml");
  } catch (const sluice::ConfigError&) {
  }
  return 0;
}
