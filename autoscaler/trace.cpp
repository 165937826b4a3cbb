// Trace CSV parsing.
#include "autoscaler/trace.h"

#include <charconv>
#include <cmath>
#include <string>

#include "common/ascii.h"
#include "common/config_error.h"

namespace sluice::autoscaler {
namespace {

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> fields;
  while (true) {
    const auto comma = line.find(',');
    fields.push_back(trim(line.substr(0, comma), kLineSpace));
    if (comma == std::string_view::npos) break;
    line.remove_prefix(comma + 1);
  }
  return fields;
}

template <typename T>
bool parse(std::string_view text, T& out) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

}  // namespace

std::vector<TracePoint> parse_trace(std::string_view csv, std::string_view source) {
  std::vector<TracePoint> points;
  int line_no = 0;
  bool first_row = true;
  while (!csv.empty()) {
    const auto eol = csv.find('\n');
    const std::string_view line = trim(csv.substr(0, eol), kLineSpace);
    csv = eol == std::string_view::npos ? std::string_view{} : csv.substr(eol + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const auto fields = split(line);
    const auto where = std::string(source) + " line " + std::to_string(line_no);
    std::int64_t time = 0;
    if (first_row && !parse(fields[0], time)) {
      first_row = false;  // a header
      continue;
    }
    first_row = false;
    if (fields.size() < 2 || fields.size() > 3) {
      throw ConfigError(where + ": '" + std::string(line) + "' is not allowed: expected time,value[,ready]");
    }
    TracePoint p;
    if (!parse(fields[0], p.time_s) || p.time_s < 0) {
      throw ConfigError(where + ": time '" + std::string(fields[0]) +
                        "' is not allowed: must be whole seconds, at least 0");
    }
    if (!points.empty() && p.time_s < points.back().time_s) {
      throw ConfigError(where + ": time '" + std::string(fields[0]) +
                        "' is not allowed: times must not decrease");
    }
    if (!parse(fields[1], p.value) || !std::isfinite(p.value) || p.value < 0) {
      throw ConfigError(where + ": value '" + std::string(fields[1]) +
                        "' is not allowed: must be a number, at least 0");
    }
    if (fields.size() == 3 && !fields[2].empty()) {
      std::int32_t ready = 0;
      if (!parse(fields[2], ready) || ready < 0) {
        throw ConfigError(where + ": ready '" + std::string(fields[2]) +
                          "' is not allowed: must be a whole number, at least 0");
      }
      p.ready = ready;
    }
    points.push_back(p);
  }
  if (points.empty()) throw ConfigError(std::string(source) + ": no rows (expected time,value[,ready])");
  return points;
}

}  // namespace sluice::autoscaler
