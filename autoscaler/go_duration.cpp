// Go duration parsing and formatting for configuration values and error messages.
#include "autoscaler/go_duration.h"

#include <array>
#include <chrono>
#include <cmath>
#include <utility>

namespace sluice::autoscaler {
namespace {

using namespace std::chrono_literals;

std::optional<std::chrono::nanoseconds> unit_of(std::string_view unit) {
  static const std::array<std::pair<std::string_view, std::chrono::nanoseconds>, 8> units{{
      {"ns", 1ns}, {"us", 1us}, {"\xC2\xB5s", 1us}, {"\xCE\xBCs", 1us}, {"ms", 1ms},
      {"s", 1s}, {"m", 1min}, {"h", 1h}}};
  for (const auto& [name, value] : units) {
    if (name == unit) return value;
  }
  return std::nullopt;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::optional<Duration> parse_go_duration(std::string_view text) {
  bool negative = false;
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text == "0") return Duration::zero();
  if (text.empty()) return std::nullopt;
  long double total_ns = 0;
  while (!text.empty()) {
    std::size_t i = 0;
    long double number = 0;
    bool any_digit = false;
    while (i < text.size() && is_digit(text[i])) {
      number = number * 10 + (text[i++] - '0');
      any_digit = true;
    }
    if (i < text.size() && text[i] == '.') {
      ++i;
      long double scale = 0.1L;
      while (i < text.size() && is_digit(text[i])) {
        number += (text[i++] - '0') * scale;
        scale /= 10;
        any_digit = true;
      }
    }
    if (!any_digit) return std::nullopt;
    std::size_t j = i;
    while (j < text.size() && !is_digit(text[j]) && text[j] != '.') ++j;
    const auto unit = unit_of(text.substr(i, j - i));
    if (!unit) return std::nullopt;
    total_ns += number * static_cast<long double>(unit->count());
    text.remove_prefix(j);
  }
  // Go rejects durations beyond ~292 years; so do we, rather than overflow.
  if (total_ns > 9.2e18L) return std::nullopt;
  const auto ns = std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(total_ns)));
  return std::chrono::duration_cast<Duration>(negative ? -ns : ns);
}

std::string format_duration(Duration d) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  if (ns == 0) return "0s";
  if (ns % 3'600'000'000'000 == 0) return std::to_string(ns / 3'600'000'000'000) + "h";
  if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
  if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
  return std::to_string(ns) + "ns";
}

}  // namespace sluice::autoscaler
