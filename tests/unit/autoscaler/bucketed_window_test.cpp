// Metric windows: Knative's bucketing test vectors (aggregation/bucketing_test.go), reproduced.
#include "autoscaler/bucketed_window.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

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

// Knative's TestTimedFloat64BucketsManyReps: five records per bucket over five buckets sum to 100.
TEST(BucketedWindow, KnativeManyReps) {
  BucketedWindow w(60s, 1s);
  TimePoint t = kStart;
  for (int p = 0; p < 5; ++p) {
    t += 1s;
    for (int r = 0; r < 5; ++r) w.record(t, p + r);
  }
  EXPECT_EQ(w.bucket_sum(t), 100);
  EXPECT_EQ(w.bucket_sum(t), 100);  // reading does not change anything
}

// Knative's TestTimedFloat64BucketsManyRepsWithNonMonotonicalOrder: buckets written out of order.
TEST(BucketedWindow, KnativeManyRepsWithNonMonotonicalOrder) {
  BucketedWindow w(60s, 1s);
  const int offsets[] = {0, 3, 2, 1, 4};
  TimePoint end = kStart;
  for (int p = 0; p < 5; ++p) {
    end = kStart + std::chrono::seconds(offsets[p]);
    for (int r = 0; r < 5; ++r) w.record(end, p + r);
  }
  EXPECT_EQ(w.bucket_sum(end), 100);
  EXPECT_EQ(w.bucket_sum(end), 100);
}

// Knative's TestTimedFloat64BucketsResizeWindow.
TEST(BucketedWindow, KnativeResizeWindowKeepsHistory) {
  const TimePoint start = kStart + 400ms;  // Knative starts at time.Now(): not on a bucket boundary
  BucketedWindow w(5s, 1s);
  for (int i = 0; i < 6; ++i) w.record(start + std::chrono::seconds(i), i + 1);  // with rollover
  TimePoint now = start + 5s;
  constexpr double kInitial = 2. + 3 + 4 + 5 + 6;
  ASSERT_EQ(w.bucket_sum(now), kInitial);
  ASSERT_EQ(w.average(now), kInitial / 5);

  w.resize(10s, now);  // grow
  EXPECT_EQ(w.bucket_count(), 10u);
  EXPECT_EQ(w.window(), 10s);
  EXPECT_EQ(w.bucket_sum(now), kInitial);
  EXPECT_EQ(w.average(now), kInitial / 5);  // still 5 buckets of data

  now += 1s;
  w.record(now, 7);
  constexpr double kWithUpdate = kInitial + 7;
  EXPECT_EQ(w.bucket_sum(now), kWithUpdate);
  EXPECT_EQ(w.average(now), std::round(kWithUpdate / 6 * 1e6) / 1e6);  // 6 buckets of data

  w.resize(4s, now);  // shrink: the 2 oldest buckets go
  EXPECT_EQ(w.bucket_count(), 4u);
  constexpr double kWithShrink = kWithUpdate - 2 - 3;
  EXPECT_EQ(w.bucket_sum(now), kWithShrink);
  EXPECT_EQ(w.average(now), kWithShrink / 4);

  w.resize(4s, now);  // idempotent
  EXPECT_EQ(w.bucket_count(), 4u);
  EXPECT_EQ(w.bucket_sum(now), kWithShrink);
}

// Knative's TestWeightedFloat64BucketsResizeWindow.
TEST(BucketedWindow, KnativeWeightedResizeWindow) {
  const TimePoint start = kStart + 400ms;
  BucketedWindow w(5s, 1s, Averaging::weighted_exponential);
  EXPECT_DOUBLE_EQ(w.smoothing_coefficient(), smoothing_coefficient(5));
  for (int i = 0; i < 6; ++i) w.record(start + std::chrono::seconds(i), i + 1);
  const TimePoint now = start + 5s;
  EXPECT_EQ(w.bucket_sum(now), 2. + 3 + 4 + 5 + 6);
  EXPECT_EQ(std::round(w.average(now) * 1000) / 1000, 5.812);  // Knative: "computed a mano"
  w.resize(10s, now);
  EXPECT_EQ(w.bucket_count(), 10u);
  EXPECT_EQ(w.window(), 10s);
  EXPECT_DOUBLE_EQ(w.smoothing_coefficient(), smoothing_coefficient(10));
}

// Knative's TestTimedFloat64BucketsWindowUpdate3sGranularity.
TEST(BucketedWindow, KnativeWindowUpdate3sGranularity) {
  const TimePoint t1 = TimePoint(999s);  // a multiple of 3 s
  BucketedWindow w(5s, 3s);
  ASSERT_EQ(w.bucket_count(), 2u);  // ceil(5 / 3)
  w.record(t1, 10);
  w.record(t1 + 1s, 2);
  w.record(t1 + 2s, 3);
  w.record(t1 + 3s, 4);
  w.record(t1 + 4s, 5);
  w.record(t1 + 5s, 6);
  w.record(t1 + 6s, 7);  // overrides the first bucket's 15 (10 + 2 + 3)
  double want = (4. + 5 + 6) + 7;
  EXPECT_EQ(w.bucket_sum(t1 + 6s), want);

  w.resize(10s, t1 + 6s);
  EXPECT_EQ(w.bucket_count(), 4u);
  EXPECT_EQ(w.window(), 10s);
  EXPECT_EQ(w.bucket_sum(t1 + 6s), want);

  w.record(t1 + 9s + 300ms, 42);
  want += 42;
  EXPECT_EQ(w.bucket_sum(t1 + 9s), want);

  w.resize(4s, t1 + 9s);
  EXPECT_EQ(w.bucket_count(), 2u);
  // The oldest bucket is dropped, and so is the one not yet used.
  EXPECT_EQ(w.bucket_sum(t1 + 9s), 42 + 7);
  w.resize(4s, t1 + 9s);
  EXPECT_EQ(w.bucket_count(), 2u);
}

// Knative's TestTimedFloat64BucketsWindowUpdateNoOp: nothing within the old window as of the resize, so
// the new window starts without a known first write.
TEST(BucketedWindow, KnativeWindowUpdateNoOp) {
  const TimePoint start = kStart;
  BucketedWindow w(5s, 1s);
  w.record(start, 19.82);
  EXPECT_EQ(w.first_write(), w.last_write());
  w.resize(10s, start + 60s);
  EXPECT_FALSE(w.first_write().has_value());
}

}  // namespace
}  // namespace sluice::autoscaler
