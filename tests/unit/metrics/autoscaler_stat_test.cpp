// The Stat sample as the autoscaler reads it, decoded with protobuf's own parser.
#include "metrics/autoscaler_stat.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "metrics/stat.pb.h"

namespace sluice::metrics {
namespace {

const PodIdentity kPod{.namespace_name = "ns", .configuration = "cfg", .revision = "rev-1", .pod = "pod-a"};

StatSample sample() {
  return {.period = {.average_concurrency = 2.5, .average_proxied_concurrency = 0.5, .requests = 30,
                     .proxied_requests = 6, .seconds = 0.4},
          .uptime_seconds = 42.0,
          .report_period_seconds = 2.0};
}

// The rates are per second of the configured period, as queue-proxy divides them, not of the period's
// length: a period that an arrival after idle closed early still adds its requests once.
TEST(AutoscalerStat, ProtobufDecodesToTheSampleWithRatesPerSecond) {
  wire::Stat stat;
  ASSERT_TRUE(stat.ParseFromString(encode_stat_protobuf(kPod, sample())));
  EXPECT_EQ(stat.pod_name(), "pod-a");
  EXPECT_DOUBLE_EQ(stat.average_concurrent_requests(), 2.5);
  EXPECT_DOUBLE_EQ(stat.average_proxied_concurrent_requests(), 0.5);
  EXPECT_DOUBLE_EQ(stat.request_count(), 15.0);  // 30 requests in a 2 s period (that lasted 0.4 s)
  EXPECT_DOUBLE_EQ(stat.proxied_request_count(), 3.0);
  EXPECT_DOUBLE_EQ(stat.process_uptime(), 42.0);
  EXPECT_EQ(stat.timestamp(), 0);  // queue-proxy never sets it
}

TEST(AutoscalerStat, HandWrittenBytesAreWhatProtocsCodeWrites) {
  PodIdentity long_name = kPod;
  long_name.pod = std::string(200, 'x');  // a length that needs a two-byte varint
  std::vector<std::pair<PodIdentity, StatSample>> cases = {
      {kPod, sample()},
      {kPod, StatSample{}},  // every double at its default: left out
      {PodIdentity{}, StatSample{.period = {.average_concurrency = 1e-300, .seconds = 1}, .uptime_seconds = 3.5}},
      {long_name, StatSample{.period = {.requests = 7, .seconds = 0.5}, .uptime_seconds = 1e9}},
  };
  for (const auto& [pod, s] : cases) {
    wire::Stat generated;
    generated.set_pod_name(pod.pod);
    generated.set_average_concurrent_requests(s.period.average_concurrency);
    generated.set_average_proxied_concurrent_requests(s.period.average_proxied_concurrency);
    generated.set_request_count(s.requests_per_second());
    generated.set_proxied_request_count(s.proxied_requests_per_second());
    generated.set_process_uptime(s.uptime_seconds);
    EXPECT_EQ(encode_stat_protobuf(pod, s), generated.SerializeAsString()) << pod.pod.size();
  }
}

TEST(AutoscalerStat, ProtobufFitsTheAutoscalersReadLimit) {
  // Knative's scraper reads at most 336 bytes of the body.
  PodIdentity pod = kPod;
  pod.pod = std::string(253, 'p');  // the longest Kubernetes name
  EXPECT_LE(encode_stat_protobuf(pod, sample()).size(), 336u);
}

}  // namespace
}  // namespace sluice::metrics
