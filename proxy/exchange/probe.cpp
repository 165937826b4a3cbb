// Probe classification; see probe.h.
#include "proxy/exchange/probe.h"

namespace sluice::proxy {

ProbeKind classify_probe(std::string_view user_agent, std::string_view k_network_probe) {
  // knative.dev/pkg's Drainer: a health-check User-Agent first, whatever K-Network-Probe says.
  if (user_agent.starts_with("kube-probe/") || user_agent.starts_with("Knative-Activator-Probe") ||
      user_agent.starts_with("Knative-Autoscaling-Probe"))
    return ProbeKind::health_check;
  if (k_network_probe == "probe") return ProbeKind::network_hash;
  return ProbeKind::none;
}

ProbeMarks probe_marks(std::string_view user_agent, std::string_view k_network_probe,
                       std::string_view k_kubelet_probe) {
  ProbeMarks m;
  m.kubelet = user_agent.starts_with("kube-probe/") || !k_kubelet_probe.empty();
  m.any = m.kubelet || !k_network_probe.empty();
  return m;
}

}  // namespace sluice::proxy
