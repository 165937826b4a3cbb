// Probe classification; see probe.h.
#include "proxy/probe.h"

namespace sluice::proxy {

ProbeKind classify_probe(std::string_view user_agent, std::string_view k_network_probe,
                         std::string_view k_kubelet_probe) {
  if (k_network_probe == "probe") return ProbeKind::network_hash;
  if (user_agent.starts_with("kube-probe/") || !k_kubelet_probe.empty() ||
      user_agent.starts_with("Knative-Activator-Probe") ||
      user_agent.starts_with("Knative-Autoscaling-Probe"))
    return ProbeKind::health_check;
  return ProbeKind::none;
}

}  // namespace sluice::proxy
