// Which requests sluice answers itself instead of forwarding: kubelet and Knative health checks
// (by User-Agent or K-Kubelet-Probe) and the ingress prober's `K-Network-Probe: probe`.
#pragma once

#include <string_view>

namespace sluice::proxy {

enum class ProbeKind {
  none,          // an ordinary request, `K-Network-Probe: queue` from an ordinary client included
  health_check,  // kube-probe/*, K-Kubelet-Probe, Knative-Activator-Probe, Knative-Autoscaling-Probe
  network_hash,  // K-Network-Probe: probe, answered with the K-Network-Hash echoed
};

ProbeKind classify_probe(std::string_view user_agent, std::string_view k_network_probe,
                         std::string_view k_kubelet_probe);

inline constexpr std::string_view kNetworkProbeHeader = "K-Network-Probe";
inline constexpr std::string_view kNetworkHashHeader = "K-Network-Hash";
inline constexpr std::string_view kKubeletProbeHeader = "K-Kubelet-Probe";
inline constexpr std::string_view kProxyRequestHeader = "K-Proxy-Request";

}  // namespace sluice::proxy
