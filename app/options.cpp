// Flag and environment parsing; see options.h.
#include "app/options.h"

#include <charconv>
#include <cstdlib>

#include "common/config_error.h"

namespace sluice::app {

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

Options::Options(std::vector<OptionSpec> specs, const EnvLookup& env, Args flags)
    : specs_(std::move(specs)) {
  for (const auto& s : specs_) {
    if (auto v = env(s.env)) values_[std::string(s.env)] = *v;
  }
  for (std::size_t i = 0; i < flags.size(); ++i) {
    std::string_view arg = flags[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.substr(0, 2) != "--") throw ConfigError("unexpected argument '" + std::string(arg) + "'");
    arg.remove_prefix(2);
    std::string_view name = arg, value;
    bool has_value = false;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    const OptionSpec* found = nullptr;
    for (const auto& s : specs_)
      if (s.flag == name) found = &s;
    if (!found) throw ConfigError("unknown flag --" + std::string(name) + " (see --help)");
    if (!has_value) {
      if (i + 1 >= flags.size()) throw ConfigError("flag --" + std::string(name) + " needs a value");
      value = flags[++i];
    }
    values_[std::string(found->env)] = std::string(value);
    from_flag_[std::string(found->env)] = true;
  }
}

const OptionSpec& Options::spec(std::string_view env) const {
  for (const auto& s : specs_)
    if (s.env == env) return s;
  throw std::logic_error("option not declared: " + std::string(env));
}

std::string Options::source(std::string_view env) const {
  const auto& s = spec(env);
  if (from_flag_.count(env)) return "--" + std::string(s.flag);
  return std::string(s.env);
}

void Options::check_required() const {
  std::string missing;
  for (const auto& s : specs_) {
    if (s.required && !values_.count(s.env)) {
      if (!missing.empty()) missing += ", ";
      missing += s.env;
    }
  }
  if (!missing.empty())
    throw ConfigError("missing required environment variable(s): " + missing +
                      " (each may also be given as a --flag; see --help)");
}

std::optional<std::string> Options::get(std::string_view env) const {
  auto it = values_.find(env);
  if (it == values_.end()) {
    if (spec(env).required) throw ConfigError(std::string(env) + " is required but not set");
    return std::nullopt;
  }
  return it->second;
}

void Options::invalid(std::string_view env, const std::string& value, std::string_view allowed) const {
  throw ConfigError(source(env) + "=\"" + value + "\": " + std::string(allowed));
}

std::string Options::get_string(std::string_view env, std::string_view fallback) const {
  auto v = get(env);
  return v ? *v : std::string(fallback);
}

std::int64_t Options::get_int(std::string_view env, std::int64_t fallback, std::int64_t min,
                              std::int64_t max) const {
  auto v = get(env);
  if (!v) return fallback;
  std::int64_t out = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || p != v->data() + v->size() || out < min || out > max)
    invalid(env, *v, "expected an integer from " + std::to_string(min) + " to " + std::to_string(max));
  return out;
}

std::uint16_t Options::get_port(std::string_view env, std::uint16_t fallback) const {
  return static_cast<std::uint16_t>(get_int(env, fallback, 0, 65535));
}

bool Options::get_bool(std::string_view env, bool fallback) const {
  auto v = get(env);
  if (!v || v->empty()) return fallback;
  // Go's strconv.ParseBool, which Knative's envconfig uses.
  if (*v == "1" || *v == "t" || *v == "T" || *v == "true" || *v == "TRUE" || *v == "True") return true;
  if (*v == "0" || *v == "f" || *v == "F" || *v == "false" || *v == "FALSE" || *v == "False") return false;
  invalid(env, *v, "expected true or false");
}

std::string Options::help_text(std::string_view mode) const {
  std::string out = "usage: sluice " + std::string(mode) + " [--flag=value ...]\n\n";
  for (const auto& s : specs_) {
    std::string line = "  --" + std::string(s.flag);
    line.resize(std::max<std::size_t>(line.size() + 1, 40), ' ');
    line += std::string(s.env);
    line.resize(std::max<std::size_t>(line.size() + 1, 82), ' ');
    line += s.required ? "(required) " : "";
    line += s.help;
    out += line + "\n";
  }
  return out;
}

}  // namespace sluice::app
