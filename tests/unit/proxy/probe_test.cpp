// Which requests sluice answers itself (SPEC §3.1).
#include "proxy/probe.h"

#include <gtest/gtest.h>

namespace sluice::proxy {
namespace {

TEST(ProbeClassification, KubeletAndKnativeProbeAgentsAreHealthChecks) {
  EXPECT_EQ(classify_probe("kube-probe/1.29", "queue", ""), ProbeKind::health_check);
  EXPECT_EQ(classify_probe("kube-probe/1.29", "", ""), ProbeKind::health_check);
  EXPECT_EQ(classify_probe("Knative-Activator-Probe", "queue", ""), ProbeKind::health_check);
  EXPECT_EQ(classify_probe("Knative-Autoscaling-Probe", "", ""), ProbeKind::health_check);
  EXPECT_EQ(classify_probe("curl/8.0", "", "queue"), ProbeKind::health_check);  // K-Kubelet-Probe
}

TEST(ProbeClassification, NetworkProbeQueueFromAnOrdinaryClientIsForwarded) {
  EXPECT_EQ(classify_probe("curl/8.0", "queue", ""), ProbeKind::none);
  EXPECT_EQ(classify_probe("", "", ""), ProbeKind::none);
  EXPECT_EQ(classify_probe("my-kube-probe/1", "", ""), ProbeKind::none);  // a prefix, not a substring
}

TEST(ProbeClassification, IngressProbeIsAnsweredWhateverTheAgent) {
  EXPECT_EQ(classify_probe("Go-http-client/1.1", "probe", ""), ProbeKind::network_hash);
  EXPECT_EQ(classify_probe("kube-probe/1.29", "probe", ""), ProbeKind::network_hash);
}

}  // namespace
}  // namespace sluice::proxy
