// The ConfigError that parsing a gateway YAML raises, as text ("" when it parses).
#pragma once

#include <string>

#include "app/gateway/config.h"
#include "common/config_error.h"

namespace sluice::app::gateway {

inline std::string yaml_error(const std::string& yaml) {
  try {
    parse_yaml(yaml, "sluice.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace sluice::app::gateway
