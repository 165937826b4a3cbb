// The simulator: trace parsing, and the shipped step trace against the hand-computed decisions.
#include "autoscaler/simulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "autoscaler/config_text.h"
#include "common/config_error.h"
#include "tests/e2e/autoscaler/step_trace_expected.h"

namespace sluice::autoscaler {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Trace, ReadsRowsWithAnOptionalHeaderAndReadyColumn) {
  const auto trace = parse_trace("time,concurrency,ready\n# comment\n0,1.5\n\n10,20,3\n");
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace[0].time_s, 0);
  EXPECT_DOUBLE_EQ(trace[0].value, 1.5);
  EXPECT_FALSE(trace[0].ready.has_value());
  EXPECT_EQ(trace[1].time_s, 10);
  EXPECT_EQ(trace[1].ready, 3);
}

TEST(Trace, MalformedRowsNameTheLineAndTheField) {
  const auto error_of = [](std::string_view csv) {
    try {
      parse_trace(csv, "t.csv");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_of("0,1\n5,-1\n"), AllOf(HasSubstr("t.csv line 2"), HasSubstr("value '-1'")));
  EXPECT_THAT(error_of("5,1\n4,1\n"), AllOf(HasSubstr("line 2"), HasSubstr("must not decrease")));
  EXPECT_THAT(error_of("0,1\n1.5,1\n"), HasSubstr("whole seconds"));
  EXPECT_THAT(error_of("0,1,x\n"), HasSubstr("ready 'x'"));
  EXPECT_THAT(error_of("0\n"), HasSubstr("time,value[,ready]"));
  EXPECT_THAT(error_of("time,value\n"), HasSubstr("no rows"));
}

TEST(Simulator, ReadyColumnOverridesTheModelledInstances) {
  AutoscalerConfig config;
  const auto trace = parse_trace("0,140,1\n4,140\n");
  const auto rows = simulate(trace, config);
  ASSERT_EQ(rows.size(), 3u);  // t = 0, 2, 4
  // The trace pins ready to 1 for t < 4: 140 / 70 = 2 pods wanted, 2 ≥ 2 × 1: panic.
  EXPECT_EQ(rows[1].decision.ready_pods, 1);
  EXPECT_EQ(rows[1].decision.desired_pods, 2);
  // From t=4 the ready count follows the last decision.
  EXPECT_EQ(rows[2].decision.ready_pods, 2);
}

TEST(Simulator, StepTraceGivesTheHandComputedDecisions) {
  const auto config = config_from_data(
      parse_config_text(read(STEP_TRACE_DIR "/step_config.txt"), "step_config.txt"));
  const auto trace = parse_trace(read(STEP_TRACE_DIR "/step_trace.csv"), "step_trace.csv");
  const auto rows = simulate(trace, config);
  const auto& want = test::kStepTraceDecisions;
  ASSERT_EQ(rows.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& got = rows[i];
    const auto& w = want[i];
    SCOPED_TRACE("t=" + std::to_string(w.time));
    EXPECT_EQ(got.time_s, w.time);
    EXPECT_DOUBLE_EQ(got.observed, w.observed);
    EXPECT_DOUBLE_EQ(got.decision.observed_stable, w.stable);
    EXPECT_DOUBLE_EQ(got.decision.observed_panic, w.panic);
    EXPECT_EQ(got.decision.ready_pods, w.ready);
    EXPECT_EQ(got.decision.desired_pods, w.desired);
    EXPECT_EQ(got.decision.excess_burst_capacity, w.excess_burst_capacity);
    EXPECT_EQ(got.decision.buffer_in_path ? 1 : 0, w.buffer);
    EXPECT_EQ(got.decision.panicking ? "panic" : "stable", w.mode);
  }
}

TEST(Simulator, CsvHasTheDocumentedColumns) {
  AutoscalerConfig config;
  const auto rows = simulate(parse_trace("0,35\n"), config);
  EXPECT_EQ(simulation_csv(rows),
            "time,observed,stable,panic,ready,desired,excess_burst_capacity,buffer,mode\n"
            "0,35,35,35,1,1,-146,1,stable\n");  // ceil(35 / 70) = 1; floor(100 − 211 − 35) = −146
}

TEST(Simulator, TimelineSaysWhenEachInstanceCountIsReached) {
  const auto config = config_from_data(
      parse_config_text(read(STEP_TRACE_DIR "/step_config.txt"), "step_config.txt"));
  const auto trace = parse_trace(read(STEP_TRACE_DIR "/step_trace.csv"), "step_trace.csv");
  const auto rows = simulate(trace, config);
  // From step_trace_expected.h's desired column: 1 at t=0, 3 at 10, 5 at 12, down 4, 3, 2, 1 from 22,
  // 0 at 30 (Knative's deactivation with the buffer long in the path), 1 at the poke (43), 2 at 44.
  EXPECT_EQ(timeline_text(scale_timeline(rows, false)),
            "t=0s 1 -> 1 instance (decider 1, active, buffer in path)\n"
            "t=10s 1 -> 3 instances (decider 3, active, buffer in path, panic)\n"
            "t=12s 3 -> 5 instances (decider 5, active, buffer in path, panic)\n"
            "t=22s 5 -> 4 instances (decider 4, active, buffer in path)\n"
            "t=24s 4 -> 3 instances (decider 3, active, buffer in path)\n"
            "t=26s 3 -> 2 instances (decider 2, active, buffer in path)\n"
            "t=28s 2 -> 1 instance (decider 1, active, buffer in path)\n"
            "t=30s 1 -> 0 instances (decider 0, inactive, buffer in path)\n"
            "t=43s 0 -> 1 instance (decider 1, activating, buffer in path)\n"
            "t=44s 1 -> 2 instances (decider 2, active, buffer in path, panic)\n");
}

TEST(Simulator, KnativeDefaultsIdleRevisionReachesZeroAStableWindowAfterItsLastRequest) {
  // docs/run-and-autoscaler.md's trace: Knative's defaults, one pod's worth of load (70) for 20 s, then nothing.
  // Knative: active since t=0; the decider wants 0 once the stable window (60 s) holds no load: t=80
  // (the last load at t=19, the window 21..80 empty); active ≥ 60 s, so deactivated; the activator has
  // been in the path all along (1 × 100 − 211 < 0), ≥ the 30 s grace period: zero at t=80.
  const auto rows = simulate(parse_trace("0,70\n20,0\n90,0\n"), AutoscalerConfig{});
  const auto steps = scale_timeline(rows, false);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[1].time_s, 80);
  EXPECT_EQ(steps[1].to, 0);
  // With target-burst-capacity 0 the activator leaves the path while pods are wanted, enters it at the
  // deactivation (t=80), and zero follows the grace period later: t=110; the instance is kept until then.
  AutoscalerConfig tbc0;
  tbc0.target_burst_capacity = 0;
  const auto rows0 = simulate(parse_trace("0,70\n20,0\n120,0\n"), tbc0);
  const auto steps0 = scale_timeline(rows0, false);
  ASSERT_EQ(steps0.size(), 2u);
  EXPECT_EQ(steps0[1].time_s, 110);
  EXPECT_EQ(steps0[1].from, 1);
  EXPECT_EQ(steps0[1].to, 0);
}

}  // namespace
}  // namespace sluice::autoscaler
