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

}  // namespace
}  // namespace sluice::autoscaler
