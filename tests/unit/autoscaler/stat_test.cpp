// Merging per-pod stats and scrape sample sizes, as Knative's scraper does.
#include "autoscaler/stat.h"

#include <gtest/gtest.h>

#include <vector>

namespace sluice::autoscaler {
namespace {

TEST(MergePodStats, SumsTheSampleAndScalesItToAllReadyPods) {
  std::vector<Stat> sampled(2);
  sampled[0] = {1.0, 0.5, 10.0, 2.0};
  sampled[1] = {3.0, 0.5, 20.0, 0.0};
  const Stat merged = merge_pod_stats(sampled, 4);  // 2 of 4 pods sampled: the sum doubles
  EXPECT_DOUBLE_EQ(merged.average_concurrent_requests, 8.0);
  EXPECT_DOUBLE_EQ(merged.average_proxied_concurrent_requests, 2.0);
  EXPECT_DOUBLE_EQ(merged.request_count, 60.0);
  EXPECT_DOUBLE_EQ(merged.proxied_request_count, 4.0);
}

TEST(MergePodStats, AnEmptySampleIsAnEmptyStat) {
  const Stat merged = merge_pod_stats({}, 5);
  EXPECT_EQ(merged.average_concurrent_requests, 0.0);
  EXPECT_EQ(merged.request_count, 0.0);
}

TEST(ScrapeSampleSize, ScrapesEveryPodUpToThreeThenASample) {
  EXPECT_EQ(scrape_sample_size(0), 0u);
  EXPECT_EQ(scrape_sample_size(1), 1u);
  EXPECT_EQ(scrape_sample_size(3), 3u);
  // X = 1.96² × 100 / 5² = 15.3664; n = ceil(N·X / (N + X − 1)).
  EXPECT_EQ(scrape_sample_size(4), 4u);     // 61.47 / 18.37 = 3.35
  EXPECT_EQ(scrape_sample_size(5), 4u);     // 76.83 / 19.37 = 3.97 (Knative's vector)
  EXPECT_EQ(scrape_sample_size(10), 7u);    // 153.66 / 24.37 = 6.31
  EXPECT_EQ(scrape_sample_size(100), 14u);  // 1536.6 / 114.37 = 13.44
  EXPECT_EQ(scrape_sample_size(1000), 16u);  // 15366.4 / 1014.37 = 15.15
}

}  // namespace
}  // namespace sluice::autoscaler
