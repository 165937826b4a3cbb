// Who a pod is, by the node's word, and what its join may ask of the agent. The kubelet names the pod when
// it publishes the pod's volume (its namespace, name and UID: app/node/publications.h); a join arriving on
// that pod's socket must name the same pod, come from a process the kernel places in that pod's cgroup, and
// run as a user other than root. The pod's settings then become its proxy's environment, with what the
// agent decides (workers, descriptors) put in and what would reach beyond the pod (paths in the agent's file
// system, another network namespace) refused.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sluice::app::node {

// A pod as the kubelet names it when it publishes the pod's volume.
struct PodIdentity {
  std::string namespace_name, name, uid;
};

// The value of `key` in KEY=VALUE lines ("" when absent).
std::string env_value(const std::vector<std::string>& env, std::string_view key);

// "" unless the join's settings (SERVING_NAMESPACE, SERVING_POD) name another pod than `pod`; else why.
std::string join_names_other_pod(const PodIdentity& pod, const std::vector<std::string>& env);

// Whether a process whose /proc/PID/cgroup reads `proc_cgroup` is in the pod with `uid`: the kubelet puts
// each pod's containers under a cgroup named for the pod's UID ("pod<UID>" with the cgroupfs driver,
// "...-pod<UID with _ for ->.slice" with systemd's).
bool cgroup_is_pods(std::string_view proc_cgroup, std::string_view uid);

struct ProxyEnvLimits {
  unsigned default_workers = 1;  // a pod that asks for none
  unsigned max_workers = 4;      // what any pod may ask for (SLUICE_WORKERS, else GOMAXPROCS)
};

// The pod's proxy's environment from the pod's settings: its worker count bounded, path-valued settings
// (the TLS pair, OpenSSL's SSL_CERT_FILE and SSL_CERT_DIR) resolved under the pod's root (/proc/self/fd/3
// in the proxy), what only the agent sets removed. A string
// (the reason) when a setting cannot be honoured without reaching beyond the pod.
std::variant<std::vector<std::string>, std::string> proxy_environment(std::vector<std::string> env,
                                                                      const ProxyEnvLimits& limits);

// Where the pod's root is in its proxy: the descriptor the agent hands on as 3.
inline constexpr std::string_view kPodRootInProxy = "/proc/self/fd/3";

}  // namespace sluice::app::node
