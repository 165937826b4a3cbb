// The scale-down delay window: a maximum over the last window of ticks.
#include "autoscaler/sliding_max.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <vector>

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

// Knative's TestWindowMax (aggregation/max/window_test.go): a window of 5 buckets, one record per index
// (index i = second i here), the maximum after each record.
TEST(SlidingMax, KnativeWindowMaxTable) {
  struct Case {
    const char* name;
    std::vector<std::int32_t> values;
    std::function<int(int)> index;
    std::vector<std::int32_t> expect;
  };
  const auto same = [](int i) { return i; };
  const Case cases[] = {
      {"single value", {1}, same, {1}},
      {"ascending values", {1, 2}, same, {1, 2}},
      {"descending values", {2, 1}, same, {2, 2}},
      {"up, down, up", {1, 2, 1}, same, {1, 2, 2}},
      {"windowing out", {5, 6, 5, 5, 5, 5, 5}, same, {5, 6, 6, 6, 6, 6, 5}},
      {"windowing out with gaps", {6, 5, 2, 1}, [](int i) { return i >= 3 ? i + 3 : i; }, {6, 6, 6, 2}},
      {"windowing out 2", {5, 6, 5, 7, 5, 5, 1}, same, {5, 6, 6, 7, 7, 7, 7}},
      {"windowing out 3", {5, 8, 5, 7, 5, 5}, same, {5, 8, 8, 8, 8, 8}},
      {"windowing out 4", {5, 8, 5, 7, 5, 5, 1}, same, {5, 8, 8, 8, 8, 8, 7}},
      {"windowing out 5", {5, 8, 5, 7, 5, 5, 1, 4, 4, 4}, same, {5, 8, 8, 8, 8, 8, 7, 7, 5, 5}},
      {"windowing out 6", {5, 8, 5, 7, 5, 5, 1, 4, 4, 4, 4}, same, {5, 8, 8, 8, 8, 8, 7, 7, 5, 5, 4}},
      {"windowing out 7", {5, 8, 5, 7, 5, 5, 1, 4, 4, 4, 4, 9}, same, {5, 8, 8, 8, 8, 8, 7, 7, 5, 5, 4, 9}},
      {"windowing out 8", {5, 8, 5, 7, 5, 5, 1, 4, 4, 4, 4, 9, 3, 4, 2, 1, 0}, same,
       {5, 8, 8, 8, 8, 8, 7, 7, 5, 5, 4, 9, 9, 9, 9, 9, 4}},
      {"multiple with same index, ascending", {1, 2, 3, 4, 5, 6, 7}, [](int) { return 1; }, {1, 2, 3, 4, 5, 6, 7}},
      {"multiple with same index, descending", {7, 6, 5, 4, 3, 2, 1}, [](int) { return 1; },
       {7, 7, 7, 7, 7, 7, 7}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SlidingMax m(5s, 1s);
    std::vector<std::int32_t> got;
    for (std::size_t i = 0; i < c.values.size(); ++i) {
      m.record(TimePoint(std::chrono::seconds(c.index(static_cast<int>(i)))), c.values[i]);
      got.push_back(m.current());
    }
    EXPECT_EQ(got, c.expect);
  }
}

// Knative's TestTimedWindowMax (aggregation/max/timewindow_test.go): 5 s window, 1 s granularity.
TEST(SlidingMax, KnativeTimedWindowMaxTable) {
  const TimePoint now = TimePoint(1000s) + 200ms;
  struct Entry {
    TimePoint time;
    std::int32_t value;
  };
  struct Case {
    const char* name;
    std::int32_t expect;
    std::vector<Entry> values;
  };
  const Case cases[] = {
      {"single value", 5, {{now, 5}}},
      {"two values in same second", 6, {{now, 6}, {now + 500ms, 5}}},
      {"two values", 8, {{now, 5}, {now + 1s, 8}}},
      {"time gap", 4, {{now, 5}, {now + 6s, 4}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SlidingMax m(5s, 1s);
    for (const Entry& e : c.values) m.record(e.time, e.value);
    EXPECT_EQ(m.current(), c.expect);
  }
}

}  // namespace
}  // namespace sluice::autoscaler
