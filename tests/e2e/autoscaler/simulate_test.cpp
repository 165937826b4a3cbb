// `sluice autoscaler simulate` as an operator runs it: the step trace's CSV must carry the decisions
// computed by hand in step_trace_expected.h (the same table the library's unit test checks).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/autoscaler/step_trace_expected.h"
#include "tests/support/process.h"

namespace {

using ::testing::HasSubstr;
using sluice::test::run_command;

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

TEST(AutoscalerSimulate, StepTraceDecisionsMatchTheHandComputedOnes) {
  const auto result = run_command({SLUICE_BIN, "autoscaler", "simulate", "--trace",
                                   STEP_TRACE_DIR "/step_trace.csv", "--config",
                                   STEP_TRACE_DIR "/step_config.txt"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto lines = split(result.out, '\n');
  const auto& want = sluice::autoscaler::test::kStepTraceDecisions;
  ASSERT_EQ(lines.size(), want.size() + 1) << result.out;
  EXPECT_EQ(lines[0], "time,observed,stable,panic,ready,desired,excess_burst_capacity,buffer,mode");
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& w = want[i];
    SCOPED_TRACE(lines[i + 1]);
    const auto f = split(lines[i + 1], ',');
    ASSERT_EQ(f.size(), 9u);
    EXPECT_EQ(std::stol(f[0]), w.time);
    EXPECT_DOUBLE_EQ(std::stod(f[1]), w.observed);
    EXPECT_DOUBLE_EQ(std::stod(f[2]), w.stable);
    EXPECT_DOUBLE_EQ(std::stod(f[3]), w.panic);
    EXPECT_EQ(std::stoi(f[4]), w.ready);
    EXPECT_EQ(std::stoi(f[5]), w.desired);
    EXPECT_EQ(std::stoi(f[6]), w.excess_burst_capacity);
    EXPECT_EQ(std::stoi(f[7]), w.buffer);
    EXPECT_EQ(f[8], w.mode);
  }
}

TEST(AutoscalerSimulate, AnInvalidConfigValueStopsWithTheKeyNamed) {
  const std::string conf = ::testing::TempDir() + "/bad_autoscaler.conf";
  {
    std::ofstream out(conf);
    out << "stable-window: 5s\n";
  }
  const auto result = run_command({SLUICE_BIN, "autoscaler", "simulate", "--trace",
                                   STEP_TRACE_DIR "/step_trace.csv", "--config", conf});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("stable-window: '5s' is not allowed"));
}

TEST(AutoscalerSimulate, MissingTraceIsAnErrorAndHelpDocumentsTheColumns) {
  EXPECT_EQ(run_command({SLUICE_BIN, "autoscaler", "simulate"}).exit_code, 2);
  const auto help = run_command({SLUICE_BIN, "autoscaler", "simulate", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("excess_burst_capacity"));
  // serve execs sluice-autoscaler, which refuses an unknown flag with exit 2.
  EXPECT_EQ(run_command({SLUICE_BIN, "autoscaler", "serve", "--no-such-flag", "1"}).exit_code, 2);
}

}  // namespace
