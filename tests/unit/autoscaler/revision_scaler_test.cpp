// One revision's autoscaling loop (autoscaler/revision_scaler.h) alone: a scripted StatsSource feeds it, a
// fake ScaleTarget takes its decisions; the clock is the test's.
#include "autoscaler/revision_scaler.h"

#include <gtest/gtest.h>

#include <deque>
#include <vector>

namespace sluice::autoscaler {
namespace {

using namespace std::chrono_literals;

struct ScriptedStats final : StatsSource {
  std::deque<metrics::PeriodReport> periods;
  metrics::PeriodReport report(TimePoint) override {
    if (periods.empty()) return {};
    auto p = periods.front();
    periods.pop_front();
    return p;
  }
};

struct RecordingTarget final : ScaleTarget {
  std::int32_t ready_now = 0;
  std::vector<std::int32_t> asked;
  std::int32_t ready() const override { return ready_now; }
  void scale_to(std::int32_t desired) override { asked.push_back(desired); }
};

AutoscalerConfig one_request_each() {
  AutoscalerConfig c;
  c.container_concurrency = 1;  // the target: 0.7 requests in flight per instance
  return c;
}

TEST(RevisionScaler, ConcurrencyAboveTheTargetAsksForMoreInstancesAndTheStatShows) {
  ScriptedStats stats;
  RecordingTarget target;
  target.ready_now = 1;
  const auto t0 = Clock::now();
  RevisionScaler scaler("web", one_request_each(), 1, t0, stats, target);
  stats.periods.push_back({.average_concurrency = 4, .requests = 8, .seconds = 1});
  scaler.stat_tick(t0 + 1s);
  EXPECT_DOUBLE_EQ(scaler.concurrency(), 4);
  EXPECT_DOUBLE_EQ(scaler.rps(), 8);
  scaler.decide(t0 + 2s);
  ASSERT_FALSE(target.asked.empty());
  EXPECT_GE(target.asked.back(), 4) << "four requests at once, one an instance";
  EXPECT_EQ(scaler.desired(), target.asked.back());
}

TEST(RevisionScaler, AtZeroTheFirstStatWithRequestsIsDecidedAtOnce) {
  ScriptedStats stats;
  RecordingTarget target;
  const auto t0 = Clock::now();
  RevisionScaler scaler("web", one_request_each(), 0, t0, stats, target);
  stats.periods.push_back({.average_concurrency = 0, .requests = 0, .seconds = 1});
  scaler.stat_tick(t0 + 1s);
  scaler.decide(t0 + 1s);  // idle: the decider says zero
  ASSERT_EQ(target.asked, (std::vector<std::int32_t>{0}));
  EXPECT_EQ(scaler.desired(), 0);
  stats.periods.push_back({.average_concurrency = 1, .requests = 1, .seconds = 1});
  scaler.stat_tick(t0 + 2s);  // no decide(): the KPA asks for one itself, as Knative's activator poke
  ASSERT_EQ(target.asked.size(), 2u);
  EXPECT_GE(target.asked.back(), 1);
  EXPECT_EQ(scaler.activity(), Activity::activating) << "wanted, none ready yet";
}

TEST(RevisionScaler, APeriodTooShortToMeasureIsNoStat) {
  ScriptedStats stats;
  RecordingTarget target;
  const auto t0 = Clock::now();
  RevisionScaler scaler("web", one_request_each(), 0, t0, stats, target);
  stats.periods.push_back({.average_concurrency = 5, .requests = 5, .seconds = 0});
  scaler.stat_tick(t0 + 1s);
  EXPECT_DOUBLE_EQ(scaler.rps(), 0);
  EXPECT_TRUE(target.asked.empty()) << "nothing was decided";
}

TEST(RevisionScaler, TheSupervisorsOwnStartIsTheDesiredCountUntilTheFirstDecision) {
  ScriptedStats stats;
  RecordingTarget target;
  RevisionScaler scaler("web", one_request_each(), 2, Clock::now(), stats, target);
  EXPECT_EQ(scaler.desired(), 0);
  scaler.set_desired(2);
  EXPECT_EQ(scaler.desired(), 2);
  EXPECT_TRUE(target.asked.empty());
}

}  // namespace
}  // namespace sluice::autoscaler
