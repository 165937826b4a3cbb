// Go's duration syntax ("60s", "1m30s", "1.5h", "300ms"), which Knative's ConfigMap keys use.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "autoscaler/time.h"

namespace sluice::autoscaler {

// Parses like Go's time.ParseDuration: an optional sign, then one or more number+unit pairs
// (ns, us, µs, ms, s, m, h); "0" alone is allowed. nullopt when malformed.
std::optional<Duration> parse_go_duration(std::string_view text);

// Shortest exact form for messages: "1h", "90s", "1500ms", "7ns".
std::string format_duration(Duration d);

}  // namespace sluice::autoscaler
