// The `key: value` text form of the autoscaler configuration, as in a ConfigMap's data section.
#pragma once

#include <string_view>

#include "autoscaler/config.h"

namespace sluice::autoscaler {

// One `key: value` per line; blank lines and lines starting with '#' are skipped; a value may be quoted
// ("60s" or '60s'); a top-level `data:` line is allowed, so a ConfigMap's data block pastes unchanged.
// Throws ConfigError naming `source` and the line for a malformed or repeated key.
ConfigData parse_config_text(std::string_view text, std::string_view source = "config");

}  // namespace sluice::autoscaler
