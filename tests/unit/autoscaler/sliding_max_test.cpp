// The scale-down delay window: a maximum over the last window of ticks.
#include "autoscaler/sliding_max.h"

#include <gtest/gtest.h>

#include <chrono>

namespace sluice::autoscaler {
namespace {

using namespace std::chrono_literals;

TEST(SlidingMax, IsZeroBeforeAnyRecord) { EXPECT_EQ(SlidingMax(10s, 2s).current(), 0); }

TEST(SlidingMax, KeepsTheLargestUntilItLeavesTheWindow) {
  SlidingMax m(10s, 2s);  // 5 buckets of 2 s
  const TimePoint t0 = TimePoint(100s);
  m.record(t0, 4);
  m.record(t0 + 2s, 3);
  m.record(t0 + 4s, 1);
  EXPECT_EQ(m.current(), 4);
  m.record(t0 + 8s, 0);  // 4 buckets after t0: still inside
  EXPECT_EQ(m.current(), 4);
  m.record(t0 + 10s, 0);  // 5 buckets after t0: 4 drops out, 3 is next
  EXPECT_EQ(m.current(), 3);
  m.record(t0 + 14s, 0);  // the 1 at t0+4s is 5 buckets old too
  EXPECT_EQ(m.current(), 0);
}

TEST(SlidingMax, ALargerValueReplacesOlderSmallerOnes) {
  SlidingMax m(10s, 2s);
  const TimePoint t0 = TimePoint(100s);
  m.record(t0, 2);
  m.record(t0 + 2s, 7);
  EXPECT_EQ(m.current(), 7);
  m.record(t0 + 4s, 5);
  m.record(t0 + 12s, 1);  // 7 (at +2s) is 5 buckets old: 5 remains
  EXPECT_EQ(m.current(), 5);
}

TEST(SlidingMax, TwoRecordsInOneBucketKeepTheLarger) {
  SlidingMax m(4s, 2s);
  const TimePoint t0 = TimePoint(100s);
  m.record(t0, 6);
  m.record(t0 + 1s, 2);
  EXPECT_EQ(m.current(), 6);
  m.record(t0 + 4s, 1);  // 2 buckets later: the bucket of t0 (6 and 2) has left
  EXPECT_EQ(m.current(), 1);
}

}  // namespace
}  // namespace sluice::autoscaler
