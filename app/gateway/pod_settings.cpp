// The pod settings' values: `sandbox:` modes and the Kubernetes resource quantities a service's `memory:`
// and `cpu:` take; see config.h.
#include "app/gateway/config.h"

namespace sluice::app::gateway {

std::string_view to_string(SandboxMode m) {
  switch (m) {
    case SandboxMode::auto_: return "auto";
    case SandboxMode::on: return "on";
    case SandboxMode::off: return "off";
  }
  return "?";
}

std::optional<SandboxMode> parse_sandbox_mode(std::string_view text) {
  if (text == "auto") return SandboxMode::auto_;
  if (text == "on" || text == "true") return SandboxMode::on;
  if (text == "off" || text == "false") return SandboxMode::off;
  return std::nullopt;
}

std::optional<std::uint64_t> parse_memory_quantity(std::string_view text) {
  static const std::pair<std::string_view, std::uint64_t> kUnits[] = {
      {"Ki", 1ULL << 10}, {"Mi", 1ULL << 20}, {"Gi", 1ULL << 30}, {"Ti", 1ULL << 40},
      {"k", 1000ULL},     {"M", 1000000ULL},  {"G", 1000000000ULL}, {"T", 1000000000000ULL}};
  std::uint64_t unit = 1;
  for (const auto& [suffix, factor] : kUnits)
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      unit = factor;
      text.remove_suffix(suffix.size());
      break;
    }
  if (text.empty() || text.size() > 15 || text.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  std::uint64_t n = std::stoull(std::string(text));
  if (n > (~0ULL) / unit) return std::nullopt;
  return n * unit;
}

std::optional<std::uint32_t> parse_cpu_quantity(std::string_view text) {
  if (text.ends_with("m")) {
    text.remove_suffix(1);
    if (text.empty() || text.size() > 7 || text.find_first_not_of("0123456789") != std::string_view::npos)
      return std::nullopt;
    return static_cast<std::uint32_t>(std::stoul(std::string(text)));
  }
  // Whole or decimal CPUs, to a thousandth.
  auto dot = text.find('.');
  auto whole = text.substr(0, dot);
  auto frac = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if ((whole.empty() && frac.empty()) || whole.size() > 4 || frac.size() > 3 ||
      whole.find_first_not_of("0123456789") != std::string_view::npos ||
      frac.find_first_not_of("0123456789") != std::string_view::npos || (dot != std::string_view::npos && frac.empty()))
    return std::nullopt;
  std::uint32_t millis = whole.empty() ? 0 : static_cast<std::uint32_t>(std::stoul(std::string(whole))) * 1000;
  std::string f(frac);
  f.resize(3, '0');
  return millis + static_cast<std::uint32_t>(std::stoul(f));
}

}  // namespace sluice::app::gateway
