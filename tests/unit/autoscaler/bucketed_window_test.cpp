// Metric windows: Knative's bucketing test vectors (aggregation/bucketing_test.go), reproduced.
#include "autoscaler/bucketed_window.h"

#include <gtest/gtest.h>

#include <chrono>

namespace sluice::autoscaler {
namespace {

using namespace std::chrono_literals;

const TimePoint kStart = TimePoint(1000s);

TEST(BucketedWindow, RecordsInOneBucketAddUp) {
  BucketedWindow w(5s, 1s);
  w.record(kStart, 1);
  w.record(kStart + 100ms, 10);  // the activator's stat and the scraper's in the same second
  EXPECT_DOUBLE_EQ(w.average(kStart), 11);
}

TEST(BucketedWindow, AveragesOverTheBucketsSinceTheFirstWrite) {
  BucketedWindow w(5s, 1s);
  w.record(kStart, 1);
  // One bucket written: 1, not 1/5 — a fresh window must not read low.
  EXPECT_DOUBLE_EQ(w.average(kStart), 1);
  for (int i = 1; i < 5; ++i) w.record(kStart + std::chrono::seconds(i), i + 1);
  EXPECT_DOUBLE_EQ(w.average(kStart + 4s), 15.0 / 5);
  // Reading within the last written bucket sees the same.
  EXPECT_DOUBLE_EQ(w.average(kStart + 3600ms), 15.0 / 5);
}

TEST(BucketedWindow, ShortHoleDropsTheBucketsThatFellOut) {
  BucketedWindow w(5s, 1s);
  for (int i = 0; i < 5; ++i) w.record(kStart + std::chrono::seconds(i), i + 1);
  // Two seconds without data: buckets of t=0 and t=1 (values 1, 2) left the window.
  EXPECT_DOUBLE_EQ(w.average(kStart + 6s), (15.0 - 1 - 2) / 3);
  // A write after the hole clears the skipped buckets and counts the hole as zeros.
  w.record(kStart + 6s, 91);
  EXPECT_DOUBLE_EQ(w.average(kStart + 6s), (15.0 - 1 - 2 + 91) / 5);
}

TEST(BucketedWindow, AWriteAfterALongerHoleClearsEverySkippedBucket) {
  BucketedWindow w(5s, 1s);
  for (int i = 0; i < 5; ++i) w.record(kStart + std::chrono::seconds(i), i + 1);
  // Knative's TestTimedFloat64BucketsHoles: a write at +8 s clears the slots of +5..+8, which held the
  // values of +0..+3; 5 (at +4) and the new 2 remain, averaged over the whole window.
  w.record(kStart + 8s, 2);
  EXPECT_DOUBLE_EQ(w.average(kStart + 8s), (5.0 + 2) / 5);
}

TEST(BucketedWindow, AWholeWindowWithoutDataReadsZeroAndRestarts) {
  BucketedWindow w(5s, 1s);
  for (int i = 0; i < 5; ++i) w.record(kStart + std::chrono::seconds(i), i + 1);
  EXPECT_DOUBLE_EQ(w.average(kStart + 10s), 0);
  EXPECT_TRUE(w.is_empty(kStart + 10s));
  const TimePoint later = kStart + 60s;
  w.record(later, 1984);
  EXPECT_DOUBLE_EQ(w.average(later), 1984);
}

TEST(BucketedWindow, LateValuesWithinTheWindowCountAndOlderOnesAreDropped) {
  BucketedWindow w(5s, 1s);
  const TimePoint now = kStart + 60s;
  w.record(now, 1984);
  w.record(now - 3s, 4);  // moves the first write back: 4 buckets now
  EXPECT_DOUBLE_EQ(w.average(now), (4.0 + 1984) / 4);
  const TimePoint next = now + 1s;
  w.record(next, 5);
  EXPECT_DOUBLE_EQ(w.average(next), (4.0 + 1984 + 5) / 5);
  w.record(next - 3s, 10);
  EXPECT_DOUBLE_EQ(w.average(next), (4.0 + 10 + 1984 + 5) / 5);
  w.record(next - 6s, 10);  // older than the window
  w.record(next - 5s, 10);  // exactly a window old
  EXPECT_DOUBLE_EQ(w.average(next), (4.0 + 10 + 1984 + 5) / 5);
  // Exactly a window without data resets the window.
  w.record(next + 5s, 10);
  EXPECT_DOUBLE_EQ(w.average(next + 5s), 10);
}

TEST(BucketedWindow, DescendingRecordsStillAveragePerBucket) {
  BucketedWindow w(5s, 1s);
  for (int i = 8; i >= 0; --i) w.record(kStart + std::chrono::seconds(i), 5);
  EXPECT_DOUBLE_EQ(w.average(kStart + 5s), 5);
}

TEST(BucketedWindow, CoarserBucketsSumTheirSeconds) {
  BucketedWindow w(10s, 5s);
  const TimePoint t = TimePoint(1000s);  // a multiple of 5 s
  w.record(t, 1);
  w.record(t + 3s, 11);
  EXPECT_DOUBLE_EQ(w.average(t + 4s), 12);
  w.record(t + 6s, 1);
  EXPECT_DOUBLE_EQ(w.average(t + 6s), (12.0 + 1) / 2);
}

TEST(BucketedWindow, SmoothingCoefficientMatchesKnatives) {
  EXPECT_DOUBLE_EQ(smoothing_coefficient(100), 0.2);
  EXPECT_DOUBLE_EQ(smoothing_coefficient(60), 0.2);
  EXPECT_NEAR(smoothing_coefficient(40), 0.20567, 1e-5);
  EXPECT_NEAR(smoothing_coefficient(6), 0.78456, 1e-5);
}

TEST(BucketedWindow, WeightedAverageFavoursRecentBuckets) {
  BucketedWindow w(5s, 1s, Averaging::weighted_exponential);
  const double m = w.smoothing_coefficient();
  w.record(kStart, 2);
  EXPECT_DOUBLE_EQ(w.average(kStart), 2 * m);
  // One second later without a write: the bucket's weight decays one step.
  EXPECT_DOUBLE_EQ(w.average(kStart + 1s), 2 * m * (1 - m));
  for (int i = 0; i < 5; ++i) w.record(kStart + std::chrono::seconds(2 + i), i + 2);
  const double want = 6 * m + 5 * m * (1 - m) + 4 * m * (1 - m) * (1 - m) +
                      3 * m * (1 - m) * (1 - m) * (1 - m) + 2 * m * (1 - m) * (1 - m) * (1 - m) * (1 - m);
  EXPECT_NEAR(w.average(kStart + 6s), want, 1e-12);
  EXPECT_DOUBLE_EQ(w.average(kStart + 16s), 0);
}

TEST(BucketedWindow, LinearAverageIsRoundedToSixDigits) {
  BucketedWindow w(3s, 1s);
  w.record(kStart, 1);
  w.record(kStart + 1s, 0);
  w.record(kStart + 2s, 0);
  EXPECT_DOUBLE_EQ(w.average(kStart + 2s), 0.333333);
}

}  // namespace
}  // namespace sluice::autoscaler
