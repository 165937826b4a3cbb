// Reading one YAML value of a gateway file with an error that names the file, the line and the key path
// (`sluice.yaml:7: services.web.max-scale: ...`), and collecting every such error of a file so that
// `--check` (and a reload) reports them all at once instead of the first.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "app/gateway/config.h"
#include "autoscaler/config.h"
#include "common/config_error.h"

namespace sluice::app::gateway {

// "file:line" for a node (just "file" when the node has no position).
std::string where(const std::string& source, const YAML::Node& node);
[[noreturn]] void fail(const std::string& source, const YAML::Node& node, const std::string& path,
                       const std::string& what);

std::string scalar(const std::string& source, const YAML::Node& n, const std::string& path);
bool boolean(const std::string& source, const YAML::Node& n, const std::string& path);
long long integer(const std::string& source, const YAML::Node& n, const std::string& path, long long lo, long long hi);
// A Go duration ("90s", "1m30s", "500ms") or a plain number of seconds.
Millis duration(const std::string& source, const YAML::Node& n, const std::string& path);
// A list is argv as is; a string runs in /bin/sh (a simple command exec'd by it).
std::vector<std::string> command_of(const std::string& source, const YAML::Node& n, const std::string& path);
std::vector<std::string> shell_command(const std::string& text);

class Errors;

// Autoscaling keys sluice adds over Knative's defaults for a gateway: nothing starts before it is asked for.
autoscaler::ConfigData gateway_scaling_defaults();
// A service's autoscaling keys (Knative's annotation names, without the prefix) over `cluster`: each key's
// error at its own line, cross-key errors at `owner`'s; the result in `out` when all are valid.
void autoscaling_keys(const std::string& source, const autoscaler::ConfigData& cluster,
                      const std::vector<std::pair<std::string, YAML::Node>>& keys, const std::string& base,
                      const YAML::Node& owner, Errors& errors, autoscaler::AutoscalerConfig& out);

// Every error of one file, in the order found.
class Errors {
 public:
  // Runs `fn`; a ConfigError it throws is recorded and parsing goes on.
  template <class Fn>
  void attempt(Fn&& fn) {
    try {
      fn();
    } catch (const ConfigError& e) {
      list_.emplace_back(e.what());
    }
  }
  void add(std::string message) { list_.push_back(std::move(message)); }
  bool empty() const { return list_.empty(); }
  // Throws one ConfigError with every message, one a line, when there is any.
  void throw_if_any(const std::string& source) const;

 private:
  std::vector<std::string> list_;
};

}  // namespace sluice::app::gateway
