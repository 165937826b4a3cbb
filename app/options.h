// Options from flags and environment variables, with validation errors that name the variable.
// Precedence: --flag > the variable's own name (Knative's, or SLUICE_*) > default.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/modes.h"

namespace sluice::app {

struct OptionSpec {
  std::string_view env;   // CONTAINER_CONCURRENCY, SLUICE_WORKERS, ...
  std::string_view flag;  // container-concurrency, workers, ...
  bool required;
  std::string_view help;
};

using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;
EnvLookup process_env();

class Options {
 public:
  // Throws ConfigError for an unknown flag or a flag without a value.
  Options(std::vector<OptionSpec> specs, const EnvLookup& env, Args flags);

  // Raw value, or nullopt when unset. Throws ConfigError when a required option is missing.
  std::optional<std::string> get(std::string_view env) const;
  std::string get_string(std::string_view env, std::string_view fallback = {}) const;
  std::int64_t get_int(std::string_view env, std::int64_t fallback, std::int64_t min,
                       std::int64_t max) const;
  std::uint16_t get_port(std::string_view env, std::uint16_t fallback) const;
  bool get_bool(std::string_view env, bool fallback) const;

  // Every required option that is missing, named in one error (so the operator fixes all at once).
  void check_required() const;
  bool help_requested() const { return help_; }
  std::string help_text(std::string_view mode) const;

 private:
  [[noreturn]] void invalid(std::string_view env, const std::string& value, std::string_view allowed) const;
  const OptionSpec& spec(std::string_view env) const;
  std::string source(std::string_view env) const;

  std::vector<OptionSpec> specs_;
  std::map<std::string, std::string, std::less<>> values_;   // by env name
  std::map<std::string, bool, std::less<>> from_flag_;
  bool help_ = false;
};

}  // namespace sluice::app
