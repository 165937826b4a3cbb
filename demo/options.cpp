// Parses `sluice-demo-app [--port N] [--host ADDR] [--threads N]`, with env PORT as the fallback.
#include "demo/options.h"

#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

namespace sluice::demo {
namespace {

template <class T>
T parse_number(std::string_view flag, std::string_view text, T min, T max) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || value < min ||
      value > max) {
    throw std::invalid_argument(std::string(flag) + ": '" + std::string(text) +
                                "' is not a number in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "]");
  }
  return static_cast<T>(value);
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options opts;
  bool port_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string_view value;
    bool has_inline_value = false;
    if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline_value = true;
    }
    if (arg == "--help" || arg == "-h") {
      throw std::invalid_argument("usage: sluice-demo-app [--port N] [--host ADDR] [--threads N]");
    }
    if (arg != "--port" && arg != "--host" && arg != "--threads") {
      throw std::invalid_argument(
          "unknown argument '" + std::string(arg) +
          "' (usage: sluice-demo-app [--port N] [--host ADDR] [--threads N])");
    }
    if (!has_inline_value) {
      if (i + 1 >= argc) throw std::invalid_argument(std::string(arg) + ": missing value");
      value = argv[++i];
    }
    if (arg == "--port") {
      opts.port = parse_number<std::uint16_t>(arg, value, 0, 65535);
      port_given = true;
    } else if (arg == "--host") {
      opts.host = std::string(value);
    } else {
      opts.threads = parse_number<unsigned>(arg, value, 1, 256);
    }
  }
  if (!port_given) {
    if (const char* env = std::getenv("PORT"); env != nullptr && *env != '\0') {
      opts.port = parse_number<std::uint16_t>("PORT", env, 0, 65535);
    }
  }
  return opts;
}

}  // namespace sluice::demo
