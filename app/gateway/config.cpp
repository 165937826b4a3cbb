// Gateway configuration; see config.h.
#include "app/gateway/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "app/gateway/env_file.h"
#include "app/gateway/yaml_fields.h"
#include "common/ascii.h"
#include "common/config_error.h"
#include "common/spelling.h"
#include "runtime/sandbox_net.h"

namespace sluice::app::gateway {
namespace {

FeatureState feature_state(const std::string& source, const YAML::Node& n, const std::string& path) {
  auto v = scalar(source, n, path);
  if (v == "enabled" || v == "Enabled") return FeatureState::enabled;
  if (v == "allowed" || v == "Allowed") return FeatureState::allowed;
  if (v == "disabled" || v == "Disabled") return FeatureState::disabled;
  fail(source, n, path, "'" + v + "' is not enabled, allowed or disabled");
}

std::pair<std::string, std::uint16_t> host_port(const std::string& source, const YAML::Node& n,
                                                const std::string& path, const std::string& default_host) {
  auto v = scalar(source, n, path);
  if (auto hp = parse_host_port(v, default_host)) return *hp;
  fail(source, n, path, "'" + v + "' is not [ADDRESS:]PORT");
}

std::string list_of(const std::set<std::string, std::less<>>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

const std::set<std::string, std::less<>>& service_keys() {
  static const std::set<std::string, std::less<>> keys = {
      "command", "env", "working-dir", "handler", "rootfs", "image", "port", "hosts", "default", "readiness-path",
      "start-deadline", "grace-period", "buffer-size", "buffer-timeout", "validate", "features",
      "memory", "cpu", "run-as-user", "run-as-group", "run-as-non-root", "pre-stop", "post-start",
      "request-timeout", "watch", "build", "build-timeout", "throttle-delay", "env-file"};
  return keys;
}

// What an unknown key is told: the known key it is a slip for, or the keys there are.
std::string unknown_key(const std::string& key, const std::vector<std::string_view>& known, const std::string& listing) {
  if (const auto near = nearest_name(key, known); !near.empty()) return "unknown key (did you mean '" + near + "'?)";
  return "unknown key (" + listing + ")";
}

std::vector<std::string_view> names_of(const std::set<std::string, std::less<>>& keys) {
  return std::vector<std::string_view>(keys.begin(), keys.end());
}

// A list of strings, or one string.
std::vector<std::string> strings(const std::string& source, const YAML::Node& v, const std::string& path) {
  std::vector<std::string> out;
  if (v.IsScalar()) out.push_back(v.Scalar());
  else if (v.IsSequence())
    for (std::size_t i = 0; i < v.size(); ++i) out.push_back(scalar(source, v[i], path + "[" + std::to_string(i) + "]"));
  else fail(source, v, path, "must be a string or a list of them");
  return out;
}

void service_key(const std::string& source, ServiceConfig& s, const std::string& key, const YAML::Node& v,
                 const std::string& path) {
  if (key == "command") s.command = command_of(source, v, path);
  else if (key == "working-dir") s.working_dir = scalar(source, v, path);
  else if (key == "handler") s.handler = scalar(source, v, path);
  else if (key == "rootfs") s.rootfs = scalar(source, v, path);
  else if (key == "image") s.image = scalar(source, v, path);
  else if (key == "port") s.port = static_cast<std::uint16_t>(integer(source, v, path, 0, 65535));
  else if (key == "default") s.is_default = boolean(source, v, path);
  else if (key == "readiness-path") s.readiness_path = scalar(source, v, path);
  else if (key == "start-deadline") s.start_deadline = duration(source, v, path);
  else if (key == "grace-period") s.grace = duration(source, v, path);
  else if (key == "buffer-size") s.buffer_size = static_cast<std::size_t>(integer(source, v, path, 0, 1000000));
  else if (key == "buffer-timeout") s.buffer_timeout = duration(source, v, path);
  else if (key == "throttle-delay") {
    s.throttle_delay = duration(source, v, path);
    if (s.throttle_delay > std::chrono::minutes(1)) fail(source, v, path, "must be at most 1m");
  }
  else if (key == "request-timeout") {
    s.request_timeout = duration(source, v, path);
    if (s.request_timeout->count() <= 0) fail(source, v, path, "must be longer than 0s");
  } else if (key == "validate") s.validate = boolean(source, v, path);
  else if (key == "run-as-user") s.run_as_user = static_cast<int>(integer(source, v, path, 0, 2147483646));
  else if (key == "run-as-group") s.run_as_group = static_cast<int>(integer(source, v, path, 0, 2147483646));
  else if (key == "run-as-non-root") s.run_as_non_root = boolean(source, v, path);
  else if (key == "pre-stop") s.pre_stop = command_of(source, v, path);
  else if (key == "post-start") s.post_start = command_of(source, v, path);
  else if (key == "build") s.build = command_of(source, v, path);
  else if (key == "build-timeout") {
    s.build_timeout = duration(source, v, path);
    if (s.build_timeout.count() <= 0) fail(source, v, path, "must be longer than 0s");
  }
  else if (key == "watch") {
    s.watch = strings(source, v, path);
    for (const auto& g : s.watch)
      if (g.empty()) fail(source, v, path, "an empty pattern");
  } else if (key == "memory") {
    auto text = scalar(source, v, path);
    s.memory_bytes = parse_memory_quantity(text);
    if (!s.memory_bytes || *s.memory_bytes < (4U << 20))
      fail(source, v, path, "'" + text + "' is not a memory size of at least 4Mi such as 256Mi, 1Gi or 500M");
  } else if (key == "cpu") {
    auto text = scalar(source, v, path);
    s.cpu_millis = parse_cpu_quantity(text);
    if (!s.cpu_millis || *s.cpu_millis < 10)
      fail(source, v, path, "'" + text + "' is not a CPU amount of at least 10m such as 500m, 0.5 or 2");
  } else if (key == "env") {
    if (!v.IsMap()) fail(source, v, path, "must be a mapping of NAME: value");
    for (const auto& e : v) s.env[e.first.Scalar()] = scalar(source, e.second, path + "." + e.first.Scalar());
  } else if (key == "env-file") {
    s.env_files = strings(source, v, path);
    s.env_files_where = where(source, v);
  } else if (key == "hosts") {
    s.hosts = strings(source, v, path);
  } else if (key == "features") {
    if (!v.IsMap()) fail(source, v, path, "must be a mapping such as {throttling: true}");
    for (const auto& f : v) {
      const std::string fk = f.first.Scalar(), fpath = path + "." + fk;
      if (fk == "throttling") s.throttling = boolean(source, f.second, fpath);
      else if (fk == "scale-to-zero") s.scale_to_zero = boolean(source, f.second, fpath);
      else if (fk == "h2c-upstream") s.h2c_upstream = boolean(source, f.second, fpath);
      else fail(source, f.first, fpath, "unknown feature (allowed: throttling, scale-to-zero, h2c-upstream)");
    }
  }
}

ServiceConfig parse_service(const std::string& source, const std::string& name, const YAML::Node& n,
                            const autoscaler::ConfigData& gateway_scaling, const YAML::Node& root_settings,
                            Errors& errors) {
  const std::string base = "services." + name;
  ServiceConfig s;
  s.name = name;
  s.where = where(source, n);
  s.fingerprint = YAML::Dump(n) + "\n--\n" + YAML::Dump(root_settings);
  if (!n.IsMap()) {
    errors.attempt([&] { fail(source, n, base, "must be a mapping of settings (command, hosts, ...)"); });
    return s;
  }
  std::vector<std::pair<std::string, YAML::Node>> scaling;
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (!service_keys().contains(key)) {
      const auto autoscaling = autoscaler::config_keys();
      if (key.starts_with('_') || std::find(autoscaling.begin(), autoscaling.end(), key) != autoscaling.end()) {
        scaling.emplace_back(key, v);  // an autoscaling key (Knative's names)
        continue;
      }
      auto known = names_of(service_keys());
      known.insert(known.end(), autoscaling.begin(), autoscaling.end());
      errors.attempt([&] {
        fail(source, kv.first, base + "." + key,
             unknown_key(key, known, "a service's keys are " + list_of(service_keys()) +
                                     ", and Knative's autoscaling keys such as min-scale, max-scale, target"));
      });
      continue;
    }
    errors.attempt([&] { service_key(source, s, key, v, base + "." + key); });
  }
  if (s.command.empty() && !n["command"].IsDefined() && s.image.empty())
    errors.attempt([&] { fail(source, n, base + ".command", "is required"); });
  if (s.hosts.empty()) s.hosts.push_back(name + ".localhost");
  s.scaling = autoscaler::config_from_data(gateway_scaling);
  autoscaling_keys(source, gateway_scaling, scaling, base, n, errors, s.scaling);
  return s;
}

bool feature_on(FeatureState state, const std::optional<bool>& opt_in) {
  switch (state) {
    case FeatureState::enabled: return opt_in.value_or(true);
    case FeatureState::allowed: return opt_in.value_or(false);
    case FeatureState::disabled: return false;
  }
  return false;
}

}  // namespace

// Autoscaling keys sluice adds over Knative's defaults for a gateway: nothing starts before it is asked for.
autoscaler::ConfigData gateway_scaling_defaults() {
  return {{"allow-zero-initial-scale", "true"}, {"initial-scale", "0"}};
}

void autoscaling_keys(const std::string& source, const autoscaler::ConfigData& cluster,
                      const std::vector<std::pair<std::string, YAML::Node>>& keys, const std::string& base,
                      const YAML::Node& owner, Errors& errors, autoscaler::AutoscalerConfig& out) {
  // Each key alone first, so that its error carries its own line; then all together (min-scale over
  // max-scale and the like), at the owner's line.
  autoscaler::ConfigData all;
  bool each_ok = true;
  for (const auto& [key, node] : keys) {
    errors.attempt([&, &key = key, &node = node] {  // clang before 16 cannot capture structured bindings
      auto value = scalar(source, node, base + "." + key);
      try {
        (void)autoscaler::config_from_data(cluster, {{key, value}});
      } catch (const ConfigError& e) {
        fail(source, node, base, e.what());
      }
      all[key] = value;
    });
    each_ok = each_ok && all.contains(key);
  }
  if (!each_ok) return;
  errors.attempt([&] {
    try {
      out = autoscaler::config_from_data(cluster, all);
    } catch (const ConfigError& e) {
      fail(source, owner, base, e.what());
    }
  });
}

std::optional<std::uint16_t> parse_https_port(const std::string& text, bool& ok) {
  ok = true;
  if (text == "off" || text == "false" || text == "no") return std::nullopt;
  try {
    std::size_t used = 0;
    const int port = std::stoi(text, &used);
    if (used == text.size() && port >= 0 && port <= 65535) return static_cast<std::uint16_t>(port);
  } catch (const std::exception&) {
  }
  ok = false;
  return std::nullopt;
}

std::optional<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text,
                                                                     const std::string& default_host) {
  std::string host = default_host, port = text;
  if (auto colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  }
  try {
    size_t used = 0;
    int x = std::stoi(port, &used);
    if (!host.empty() && used == port.size() && x >= 0 && x <= 65535) return std::pair{host, static_cast<std::uint16_t>(x)};
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::string_view to_string(FeatureState s) {
  switch (s) {
    case FeatureState::enabled: return "enabled";
    case FeatureState::allowed: return "allowed";
    case FeatureState::disabled: return "disabled";
  }
  return "?";
}

bool throttling_on(const GatewayConfig& g, const ServiceConfig& s) {
  return feature_on(g.features.throttling, s.throttling);
}
bool h2c_upstream_on(const GatewayConfig& g, const ServiceConfig& s) {
  return feature_on(g.features.h2c_upstream, s.h2c_upstream);
}
bool scale_to_zero_on(const GatewayConfig& g, const ServiceConfig& s) {
  return feature_on(g.features.scale_to_zero, s.scale_to_zero) && s.scaling.enable_scale_to_zero;
}

GatewayConfig one_liner(std::vector<std::string> command) {
  GatewayConfig g;
  g.features.throttling = FeatureState::enabled;
  ServiceConfig s;
  s.name = "app";
  s.command = std::move(command);
  s.is_default = true;
  s.hosts = {"app.localhost"};
  s.scaling = autoscaler::config_from_data(gateway_scaling_defaults());
  g.services.push_back(std::move(s));
  validate(g);
  return g;
}

GatewayConfig parse_yaml(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) throw ConfigError(source + ": must be a YAML mapping with a 'services' key");
  GatewayConfig g;
  g.source = source;
  Errors errors;
  autoscaler::ConfigData scaling = gateway_scaling_defaults();
  YAML::Node services;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (key == "services") {
      services = v;
      continue;
    }
    if (key == "autoscaler") {
      if (!v.IsMap()) {
        errors.attempt([&] { fail(source, v, key, "must be a mapping of config-autoscaler keys"); });
        continue;
      }
      std::vector<std::pair<std::string, YAML::Node>> keys;
      for (const auto& a : v) keys.emplace_back(a.first.Scalar(), a.second);
      // The block is the ConfigMap: each key checked as ConfigMap data (no revision keys).
      autoscaler::ConfigData block = scaling;
      for (const auto& [k, node] : keys)
        errors.attempt([&, &k = k, &node = node] {
          auto value = scalar(source, node, key + "." + k);
          autoscaler::ConfigData one = gateway_scaling_defaults();
          one[k] = value;
          try {
            (void)autoscaler::config_from_data(one);
          } catch (const ConfigError& e) {
            fail(source, node, key, e.what());
          }
          block[k] = value;
        });
      errors.attempt([&] {
        try {
          (void)autoscaler::config_from_data(block);
        } catch (const ConfigError& e) {
          fail(source, v, key, e.what());
        }
        scaling = block;
      });
      continue;
    }
    errors.attempt([&] {
      if (key == "listen") std::tie(g.listen_address, g.port) = host_port(source, v, key, g.listen_address);
      else if (key == "admin") std::tie(g.admin_address, g.admin_port) = host_port(source, v, key, g.admin_address);
      else if (key == "request-timeout") g.request_timeout = duration(source, v, key);
      else if (key == "drain-timeout") g.drain_timeout = duration(source, v, key);
      else if (key == "accept-timeout") {
        g.accept_timeout = duration(source, v, key);
        if (g.accept_timeout < std::chrono::milliseconds(10) || g.accept_timeout > std::chrono::minutes(1))
          fail(source, v, key, "must be from 10ms to 1m");
      }
      else if (key == "workers") g.workers = static_cast<unsigned>(integer(source, v, key, 0, 256));
      else if (key == "throttle-mechanism") g.throttle_mechanism = scalar(source, v, key);
      else if (key == "debounce") g.debounce = duration(source, v, key);
      else if (key == "metadata-server") g.metadata_server = boolean(source, v, key);
      else if (key == "request-lines") g.request_lines = boolean(source, v, key);
      else if (key == "image-cache") g.image_cache = scalar(source, v, key);
      else if (key == "https") {
        const auto value = scalar(source, v, key);
        bool ok = false;
        g.https_port = parse_https_port(value, ok);
        if (!ok) fail(source, v, key, "'" + value + "' is not a port or off");
      }
      else if (key == "env-file") {
        g.env_files = strings(source, v, key);
        g.env_files_named = true;
        g.env_files_where = where(source, v);
      }
      else if (key == "sandbox") {
        auto value = scalar(source, v, key);
        auto mode = parse_sandbox_mode(value);
        if (!mode) fail(source, v, key, "'" + value + "' is not auto, on or off");
        g.sandbox = *mode;
      } else if (key == "sandbox-network") {
        g.sandbox_network = scalar(source, v, key);
        if (!runtime::parse_cidr(g.sandbox_network))
          fail(source, v, key, "'" + g.sandbox_network + "' is not an IPv4 range such as 169.254.64.0/18 (prefix 8 to 30)");
      } else if (key == "status") {
        g.status_output = scalar(source, v, key);
        if (g.status_output != "auto" && g.status_output != "tty" && g.status_output != "json" && g.status_output != "none")
          fail(source, v, key, "'" + g.status_output + "' is not auto, tty, json or none");
      } else if (key == "features") {
        if (!v.IsMap()) fail(source, v, key, "must be a mapping such as {throttling: allowed}");
        for (const auto& f : v) {
          const std::string fk = f.first.Scalar(), path = "features." + fk;
          errors.attempt([&] {
            if (fk == "throttling") g.features.throttling = feature_state(source, f.second, path);
            else if (fk == "scale-to-zero") g.features.scale_to_zero = feature_state(source, f.second, path);
            else if (fk == "h2c-upstream") g.features.h2c_upstream = feature_state(source, f.second, path);
            else if (fk == "tag-header-based-routing") g.features.tag_header_routing = feature_state(source, f.second, path);
            else fail(source, f.first, path, "unknown feature (allowed: throttling, scale-to-zero, h2c-upstream, tag-header-based-routing)");
          });
        }
      } else {
        static const std::set<std::string, std::less<>> top = {
            "listen", "admin", "request-timeout", "drain-timeout", "accept-timeout", "workers", "throttle-mechanism", "status",
            "request-lines", "debounce", "metadata-server", "sandbox", "sandbox-network", "image-cache", "features",
            "autoscaler", "services", "env-file", "https"};
        fail(source, kv.first, key, unknown_key(key, names_of(top), "allowed: " + list_of(top)));
      }
    });
  }
  if (!services.IsDefined() || !services.IsMap() || services.size() == 0) {
    errors.attempt([&] {
      fail(source, services.IsDefined() ? services : root, "services", "must map service names to their settings");
    });
  } else {
    // What every service inherits (the autoscaler block, features): a change there changes them all.
    YAML::Node inherited(YAML::NodeType::Map);
    if (root["autoscaler"]) inherited["autoscaler"] = root["autoscaler"];
    if (root["features"]) inherited["features"] = root["features"];
    for (const auto& kv : services)
      g.services.push_back(parse_service(source, kv.first.Scalar(), kv.second, scaling, inherited, errors));
  }
  errors.attempt([&] { validate(g); });
  errors.throw_if_any(source);
  return g;
}

GatewayConfig parse_procfile(const std::string& text, const std::string& source) {
  GatewayConfig g;
  g.source = source;
  Errors errors;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    auto colon = line.find(':');
    auto at = source + ":" + std::to_string(number);
    std::string name = colon == std::string::npos ? "" : line.substr(first, colon - first);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    std::string command = colon == std::string::npos ? "" : line.substr(colon + 1);
    command.erase(0, command.find_first_not_of(" \t"));
    if (name.empty() || command.empty()) {
      errors.add(at + ": expected 'name: command'");
      continue;
    }
    ServiceConfig s;
    s.name = name;
    s.where = at;
    s.fingerprint = command;
    s.command = shell_command(command);
    s.hosts = {name + ".localhost"};
    s.is_default = g.services.empty();
    s.scaling = autoscaler::config_from_data(gateway_scaling_defaults());
    g.services.push_back(std::move(s));
  }
  if (g.services.empty() && errors.empty()) errors.add(source + ": no 'name: command' line");
  errors.attempt([&] { validate(g); });
  errors.throw_if_any(source);
  return g;
}

namespace {

// The environment files under each service's own `env:`: the gateway's (default `.env`, when it is there)
// first, then the service's, in order; a later file wins. Each file is read once. A change of any of
// them is a change of the services' definitions (their fingerprints), never spelled out.
void read_env_files(GatewayConfig& g, const std::filesystem::path& dir) {
  Errors errors;
  std::map<std::string, std::optional<EnvFileResult>> read;  // path → what it holds (nullopt: unreadable)
  auto load = [&](const std::string& name, const std::string& key, bool must_exist) -> const EnvFileResult* {
    const auto path = (dir / name).lexically_normal().string();
    auto [it, fresh] = read.try_emplace(path);
    if (!fresh) return it->second ? &*it->second : nullptr;
    if (std::find(g.inputs.begin(), g.inputs.end(), path) == g.inputs.end()) g.inputs.push_back(path);
    std::ifstream in(path);
    std::error_code ec;
    if (!in || std::filesystem::is_directory(path, ec)) {
      const int why = errno;
      if (must_exist || why != ENOENT)
        errors.add(key + ": '" + name + "' cannot be read: " + (in ? "it is a directory" : std::strerror(why)));
      return nullptr;
    }
    std::stringstream text;
    text << in.rdbuf();
    it->second = parse_env_file(text.str(), path);
    for (const auto& e : it->second->errors) errors.add(e);
    return &*it->second;
  };
  std::map<std::string, std::string> shared;
  for (const auto& name : g.env_files)
    if (const auto* f = load(name, (g.env_files_where.empty() ? g.source : g.env_files_where) + ": env-file", g.env_files_named))
      for (const auto& [k, v] : f->vars) shared[k] = v;
  auto apply = [&](ServiceConfig& s, auto& self) -> void {
    auto env = shared;
    for (const auto& name : s.env_files)
      if (const auto* f = load(name, s.env_files_where + ": services." + s.name + ".env-file", true))
        for (const auto& [k, v] : f->vars) env[k] = v;
    for (auto& [k, v] : s.env) env[k] = std::move(v);
    s.env = std::move(env);
    std::string all;
    for (const auto& [k, v] : s.env) all += k + "=" + v + '\0';
    s.fingerprint += "\n--env " + std::to_string(std::hash<std::string>{}(all));
    for (auto& earlier : s.earlier) self(earlier, self);
  };
  for (auto& s : g.services) apply(s, apply);
  errors.throw_if_any(g.source);
}

}  // namespace

GatewayConfig load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot be read: " + std::strerror(errno));
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ConfigError(path + ": cannot be read: it is a directory");
  std::stringstream text;
  text << in.rdbuf();
  std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  const bool knative = is_knative(text.str());
  GatewayConfig g = base == "Procfile" || base.ends_with(".procfile") ? parse_procfile(text.str(), path)
                    : knative                                          ? parse_knative(text.str(), path)
                                                                       : parse_yaml(text.str(), path);
  const auto dir = std::filesystem::absolute(path).parent_path();
  read_env_files(g, dir);
  // A process runs where its file is, as compose and foreman run them: `working-dir` is relative to the
  // file's directory, which is the default. (A Knative container's workingDir is a path in its image.)
  if (!knative)
    for (auto& s : g.services)
      if (s.image.empty() && s.rootfs.empty()) s.working_dir = (dir / s.working_dir).lexically_normal().string();
  return g;
}

void validate(GatewayConfig& g) {
  Errors errors;
  std::set<std::string> names, hosts;
  int defaults = 0;
  for (auto& s : g.services) {
    const std::string base = (s.where.empty() ? g.source : s.where) + ": services." + s.name;
    if (s.name.empty() || !std::all_of(s.name.begin(), s.name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
        }))
      errors.add(base + ": the name may use only letters, digits, '-', '_' and '.'");
    if (!names.insert(s.name).second) errors.add(base + ": the name is used twice");
    for (auto& h : s.hosts) {
      h = ascii_lower(h);
      if (!hosts.insert(h).second) errors.add(base + ".hosts: '" + h + "' is routed to another service too");
    }
    if (s.is_default) ++defaults;
    if (s.handler != "process" && s.handler != "runc" && s.handler != "crun")
      errors.add(base + ".handler: '" + s.handler + "' is not process, runc or crun");
    if (!s.image.empty() && !s.rootfs.empty()) errors.add(base + ".image: give image or rootfs, not both");
    if (s.handler != "process" && s.rootfs.empty() && s.image.empty())
      errors.add(base + ".rootfs: is required with handler " + s.handler + " (or image:)");
    // In pods every instance has an address of its own, so they may all listen on the same port.
    if (s.port != 0 && s.scaling.max_scale != 1 && g.sandbox == SandboxMode::off)
      errors.add(base + ".port: a fixed port allows one instance only: set max-scale: 1 (or port: 0 for a free port per instance)");
    for (auto [key, state, opt_in] : {std::tuple{"throttling", g.features.throttling, s.throttling},
                                      std::tuple{"scale-to-zero", g.features.scale_to_zero, s.scale_to_zero},
                                      std::tuple{"h2c-upstream", g.features.h2c_upstream, s.h2c_upstream}})
      if (state == FeatureState::disabled && opt_in.value_or(false))
        errors.add(base + ".features." + key + ": the feature is disabled for this gateway (features." + key + ": disabled)");
    if (!scale_to_zero_on(g, s) && s.scaling.min_scale < 1) s.scaling.min_scale = 1;
  }
  if (defaults > 1) errors.add(g.source + ": more than one service has default: true");
  if (defaults == 0 && g.services.size() == 1) g.services.front().is_default = true;
  errors.throw_if_any(g.source);
}

}  // namespace sluice::app::gateway
