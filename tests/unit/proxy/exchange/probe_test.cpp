// Which requests sluice answers itself, and which forwarded ones are probes all the same: queue-proxy's
// rules (knative.dev/pkg's Drainer, knative.dev/networking's IsProbe / IsKubeletProbe).
#include "proxy/exchange/probe.h"

#include <gtest/gtest.h>

namespace sluice::proxy {
namespace {

TEST(ProbeClassification, KubeletAndKnativeProbeAgentsAreHealthChecks) {
  EXPECT_EQ(classify_probe("kube-probe/1.29", "queue"), ProbeKind::health_check);
  EXPECT_EQ(classify_probe("kube-probe/1.29", ""), ProbeKind::health_check);  // answered 400: no value
  EXPECT_EQ(classify_probe("Knative-Activator-Probe", "queue"), ProbeKind::health_check);
  EXPECT_EQ(classify_probe("Knative-Autoscaling-Probe", ""), ProbeKind::health_check);
}

TEST(ProbeClassification, OnlyTheUserAgentMakesAHealthCheck) {
  EXPECT_EQ(classify_probe("curl/8.0", "queue"), ProbeKind::none);
  EXPECT_EQ(classify_probe("", ""), ProbeKind::none);
  EXPECT_EQ(classify_probe("my-kube-probe/1", ""), ProbeKind::none);  // a prefix, not a substring
  EXPECT_EQ(classify_probe("Kube-Probe/1.31", ""), ProbeKind::none);  // case counts
  EXPECT_EQ(classify_probe("Knative-Ingress-Probe", ""), ProbeKind::none);
}

TEST(ProbeClassification, IngressProbeIsAnsweredForAnyOtherAgent) {
  EXPECT_EQ(classify_probe("Go-http-client/1.1", "probe"), ProbeKind::network_hash);
  // A health-check agent wins: its value "probe" is then unexpected (400).
  EXPECT_EQ(classify_probe("kube-probe/1.29", "probe"), ProbeKind::health_check);
}

TEST(ProbeMarks, KubeletByAgentOrHeaderAndAnyByNetworkProbeToo) {
  auto m = probe_marks("curl/8", "", "1");
  EXPECT_TRUE(m.kubelet && m.any);
  m = probe_marks("curl/8", "queue", "");
  EXPECT_TRUE(!m.kubelet && m.any);
  m = probe_marks("curl/8", "", "");
  EXPECT_TRUE(!m.kubelet && !m.any);
}

}  // namespace
}  // namespace sluice::proxy
