// Per-node mode's checks of a pod's join; see pod_identity.h.
#include "app/node/pod_identity.h"

#include <algorithm>
#include <charconv>
#include <optional>

namespace sluice::app::node {
namespace {

bool has_key(const std::string& kv, std::string_view key) {
  return kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=';
}

void erase_key(std::vector<std::string>& env, std::string_view key) {
  std::erase_if(env, [&](const std::string& kv) { return has_key(kv, key); });
}

// A whole decimal number, or nullopt.
std::optional<unsigned> number(std::string_view text) {
  unsigned n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return n;
}

}  // namespace

std::string env_value(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& kv : env)
    if (has_key(kv, key)) return kv.substr(key.size() + 1);
  return {};
}

std::string join_names_other_pod(const PodIdentity& pod, const std::vector<std::string>& env) {
  // An empty or missing value names no pod, and so claims no other pod's name (the proxy then stops on a
  // missing one, as queue-proxy does); Knative sets both from the pod's own metadata.
  const std::string ns = env_value(env, "SERVING_NAMESPACE"), name = env_value(env, "SERVING_POD");
  if ((ns.empty() || ns == pod.namespace_name) && (name.empty() || name == pod.name)) return {};
  return "the join names pod " + ns + "/" + name + " (SERVING_NAMESPACE, SERVING_POD), but this socket is pod " +
         pod.namespace_name + "/" + pod.name + "'s";
}

bool cgroup_is_pods(std::string_view proc_cgroup, std::string_view uid) {
  if (uid.empty()) return false;
  std::string underscored(uid);
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  // "pod<UID>" must be a whole name: followed by the end of a path element or systemd's ".slice".
  const auto names_pod = [&](std::string_view line, std::string_view id) {
    const std::string word = "pod" + std::string(id);
    for (auto at = line.find(word); at != std::string_view::npos; at = line.find(word, at + 1)) {
      const auto before = at == 0 ? '/' : line[at - 1], after = at + word.size() < line.size() ? line[at + word.size()] : '/';
      if ((before == '/' || before == '-') && (after == '/' || after == '.')) return true;
    }
    return false;
  };
  while (!proc_cgroup.empty()) {
    const auto end = proc_cgroup.find('\n');
    const auto line = proc_cgroup.substr(0, end);
    const auto path = line.substr(std::min(line.size(), line.find(':', line.find(':') + 1)));
    if (names_pod(path, uid) || names_pod(path, underscored)) return true;
    if (end == std::string_view::npos) break;
    proc_cgroup.remove_prefix(end + 1);
  }
  return false;
}

std::variant<std::vector<std::string>, std::string> proxy_environment(std::vector<std::string> env,
                                                                      const ProxyEnvLimits& limits) {
  // The pod's network namespace is the one its stub is in, handed over with the join.
  if (!env_value(env, "SLUICE_NETNS").empty())
    return std::string("SLUICE_NETNS is set: a pod's proxy serves the network namespace its stub is in");
  // Files are the pod's: resolved under its root, never in the agent's file system. SSL_CERT_DIR (OpenSSL's
  // trust store for the probes and exports over HTTPS) is a list, each entry a path.
  for (const std::string_view key : {"SLUICE_TLS_CERT_FILE", "SLUICE_TLS_KEY_FILE", "SSL_CERT_FILE", "SSL_CERT_DIR"}) {
    const std::string value = env_value(env, key);
    if (value.empty()) continue;
    std::string resolved;
    for (std::size_t at = 0; at <= value.size();) {
      const auto end = key == "SSL_CERT_DIR" ? std::min(value.find(':', at), value.size()) : value.size();
      const std::string path = value.substr(at, end - at);
      if (path.empty() || path.front() != '/' || path.find("/../") != std::string::npos || path.ends_with("/.."))
        return std::string(key) + "=\"" + value + "\": a pod's file must be an absolute path without \"..\"";
      resolved += (resolved.empty() ? "" : ":") + std::string(kPodRootInProxy) + path;
      at = end + 1;
    }
    erase_key(env, key);
    env.push_back(std::string(key) + "=" + resolved);
  }
  // What only the agent sets.
  for (const std::string_view key : {"SLUICE_POD_ROOT", "SLUICE_NODE_CHANNEL", "SLUICE_LISTEN_FDS"}) erase_key(env, key);
  // One worker unless the pod asks for more (as it would size queue-proxy's Go runtime), up to the cap. A
  // value that is no number goes on as it is: the proxy reports it as the configuration error it is.
  std::string asked = env_value(env, "SLUICE_WORKERS");
  if (asked.empty()) asked = env_value(env, "GOMAXPROCS");
  const auto n = number(asked);
  if (asked.empty() || n) {
    const unsigned workers = n && *n > 0 ? std::min(*n, limits.max_workers) : limits.default_workers;
    erase_key(env, "SLUICE_WORKERS");
    env.push_back("SLUICE_WORKERS=" + std::to_string(std::max(1u, workers)));
  }
  return env;
}

}  // namespace sluice::app::node
