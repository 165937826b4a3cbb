// A load trace for the simulator: CSV rows `time,value[,ready]`, a step function of time.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace sluice::autoscaler {

struct TracePoint {
  std::int64_t time_s = 0;           // seconds from the trace's start; non-decreasing
  double value = 0;                  // total concurrency (or requests/s) over all instances from here on
  std::optional<std::int32_t> ready; // ready instances from here on; absent: the simulator assumes
                                     // instances become ready as soon as they are wanted
};

// Parses the CSV text. A first line whose first field is not a number is a header (e.g.
// `time,concurrency,ready`). Blank lines and lines starting with '#' are skipped. Throws ConfigError naming
// `source`, the line and the field for a malformed row.
std::vector<TracePoint> parse_trace(std::string_view csv, std::string_view source = "trace");

}  // namespace sluice::autoscaler
