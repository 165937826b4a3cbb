// Which requests sluice answers itself instead of forwarding, in queue-proxy's order: health checks by
// User-Agent (kubelet, activator, autoscaler), then the ingress prober's `K-Network-Probe: probe`; and which
// requests are probes for the logs, metrics and stats (Knative's IsProbe / IsKubeletProbe) even when forwarded.
#pragma once

#include <string_view>

namespace sluice::proxy {

enum class ProbeKind {
  none,          // forwarded: an ordinary request, `K-Network-Probe: queue` or `K-Kubelet-Probe` alone included
  health_check,  // User-Agent kube-probe/*, Knative-Activator-Probe* or Knative-Autoscaling-Probe*
  network_hash,  // K-Network-Probe: probe (any other User-Agent), answered with the K-Network-Hash echoed
};

ProbeKind classify_probe(std::string_view user_agent, std::string_view k_network_probe);

// A forwarded request that is a probe all the same. `kubelet`: a kube-probe/ User-Agent or K-Kubelet-Probe
// (queue-proxy forwards it uncounted, past the breaker); `any`: that, or any K-Network-Probe value (left
// out of request logs, traces and request metrics).
struct ProbeMarks {
  bool kubelet = false;
  bool any = false;
};
ProbeMarks probe_marks(std::string_view user_agent, std::string_view k_network_probe,
                       std::string_view k_kubelet_probe);

inline constexpr std::string_view kNetworkProbeHeader = "K-Network-Probe";
inline constexpr std::string_view kNetworkHashHeader = "K-Network-Hash";
inline constexpr std::string_view kKubeletProbeHeader = "K-Kubelet-Probe";
inline constexpr std::string_view kProxyRequestHeader = "K-Proxy-Request";

}  // namespace sluice::proxy
