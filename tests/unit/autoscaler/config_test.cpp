// Configuration: Knative's key names and defaults, and errors that name the key, the value and the range.
#include "autoscaler/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "autoscaler/config_text.h"
#include "autoscaler/decider.h"
#include "autoscaler/go_duration.h"
#include "common/config_error.h"

namespace sluice::autoscaler {
namespace {

using namespace std::chrono_literals;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string error_of(const ConfigData& data) {
  try {
    config_from_data(data);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(AutoscalerConfig, DefaultsAreKnatives) {
  const AutoscalerConfig c = config_from_data({});
  EXPECT_TRUE(c.enable_scale_to_zero);
  EXPECT_EQ(c.container_concurrency_target_default, 100);
  EXPECT_DOUBLE_EQ(c.container_concurrency_target_fraction, 0.7);
  EXPECT_DOUBLE_EQ(c.rps_target_utilization, 0.7);
  EXPECT_FALSE(c.target_utilization_percentage.has_value());
  EXPECT_EQ(c.rps_target_default, 200);
  EXPECT_EQ(c.max_scale_up_rate, 1000);
  EXPECT_EQ(c.max_scale_down_rate, 2);
  EXPECT_EQ(c.target_burst_capacity, 211);
  EXPECT_EQ(c.panic_window_percentage, 10);
  EXPECT_EQ(c.panic_threshold_percentage, 200);
  EXPECT_EQ(c.stable_window, 60s);
  EXPECT_EQ(c.scale_to_zero_grace_period, 30s);
  EXPECT_EQ(c.scale_down_delay, 0s);
  EXPECT_EQ(c.initial_scale, 1);
  EXPECT_EQ(c.min_scale, 0);
  EXPECT_EQ(c.max_scale, 0);
  EXPECT_EQ(panic_window(c), 6s);
}

TEST(AutoscalerConfig, ReadsKnativeKeyNames) {
  const AutoscalerConfig c = config_from_data({
      {"enable-scale-to-zero", "false"},
      {"container-concurrency-target-default", "50"},
      {"target-utilization-percentage", "80"},
      {"requests-per-second-target-default", "300"},
      {"max-scale-up-rate", "10"},
      {"max-scale-down-rate", "4"},
      {"target-burst-capacity", "-1"},
      {"panic-window-percentage", "20"},
      {"panic-threshold-percentage", "300"},
      {"stable-window", "2m"},
      {"scale-down-delay", "30s"},
      {"scale-to-zero-grace-period", "45s"},
      {"initial-scale", "2"},
      {"min-scale", "1"},
      {"max-scale", "10"},
      {"activation-scale", "3"},
      {"metric", "rps"},
      {"target", "25"},
      {"container-concurrency", "8"},
      {"metric-aggregation-algorithm", "weighted-exponential"},
      {"_example", "ignored, as Knative does"},
  });
  EXPECT_FALSE(c.enable_scale_to_zero);
  EXPECT_EQ(c.container_concurrency_target_default, 50);
  EXPECT_EQ(c.target_utilization_percentage, 80);
  EXPECT_EQ(c.rps_target_default, 300);
  EXPECT_EQ(c.max_scale_up_rate, 10);
  EXPECT_EQ(c.max_scale_down_rate, 4);
  EXPECT_EQ(c.target_burst_capacity, -1);
  EXPECT_EQ(c.panic_threshold_percentage, 300);
  EXPECT_EQ(c.stable_window, 120s);
  EXPECT_EQ(panic_window(c), 24s);
  EXPECT_EQ(c.scale_down_delay, 30s);
  EXPECT_EQ(c.scale_to_zero_grace_period, 45s);
  EXPECT_EQ(c.initial_scale, 2);
  EXPECT_EQ(c.min_scale, 1);
  EXPECT_EQ(c.max_scale, 10);
  EXPECT_EQ(c.activation_scale, 3);
  EXPECT_EQ(c.metric, ScalingMetric::rps);
  EXPECT_EQ(c.target, 25);
  EXPECT_EQ(c.container_concurrency, 8);
  EXPECT_EQ(c.aggregation, Averaging::weighted_exponential);
}

TEST(AutoscalerConfig, ConfigMapPercentageAcceptsLegacyFractions) {
  const auto fraction = [](const char* text) {
    return config_from_data({{"container-concurrency-target-percentage", text}})
        .container_concurrency_target_fraction;
  };
  EXPECT_DOUBLE_EQ(fraction("0.5"), 0.5);
  EXPECT_DOUBLE_EQ(fraction("85"), 0.85);
}

TEST(AutoscalerConfig, ConfigMapPercentageIsForConcurrencyAndTheAnnotationKeyForBoth) {
  // Knative: container-concurrency-target-percentage sets the concurrency utilization only; RPS keeps its
  // fixed 0.7 unless the revision's target-utilization-percentage says otherwise, for either metric.
  ConfigData data = {{"container-concurrency-target-percentage", "50"}};
  EXPECT_DOUBLE_EQ(decider_spec(config_from_data(data)).target_value, 50);  // 100 × 0.5
  data["metric"] = "rps";
  EXPECT_DOUBLE_EQ(decider_spec(config_from_data(data)).target_value, 140);  // 200 × 0.7
  data["target-utilization-percentage"] = "90";
  EXPECT_DOUBLE_EQ(decider_spec(config_from_data(data)).target_value, 180);  // 200 × 0.9
  data.erase("metric");
  EXPECT_DOUBLE_EQ(decider_spec(config_from_data(data)).target_value, 90);  // 100 × 0.9
}

TEST(AutoscalerConfig, ErrorsNameTheKeyTheValueAndTheRange) {
  EXPECT_THAT(error_of({{"stable-window", "5s"}}), AllOf(HasSubstr("stable-window"), HasSubstr("5s"),
                                                          HasSubstr("[6s, 1h]")));
  EXPECT_THAT(error_of({{"stable-window", "90500ms"}}), HasSubstr("whole seconds"));
  EXPECT_THAT(error_of({{"max-scale-up-rate", "1"}}),
              AllOf(HasSubstr("max-scale-up-rate"), HasSubstr("'1'"), HasSubstr("greater than 1")));
  EXPECT_THAT(error_of({{"max-scale-down-rate", "abc"}}),
              AllOf(HasSubstr("max-scale-down-rate"), HasSubstr("abc"), HasSubstr("number")));
  EXPECT_THAT(error_of({{"target-burst-capacity", "-2"}}),
              AllOf(HasSubstr("target-burst-capacity"), HasSubstr("-2"), HasSubstr("-1")));
  EXPECT_THAT(error_of({{"scale-to-zero-grace-period", "0s"}}),
              AllOf(HasSubstr("scale-to-zero-grace-period"), HasSubstr("positive")));
  EXPECT_THAT(error_of({{"scale-to-zero-grace-period", "30"}}), HasSubstr("duration"));
  EXPECT_THAT(error_of({{"panic-window-percentage", "0.5"}}), HasSubstr("[1, 100]"));
  EXPECT_THAT(error_of({{"panic-threshold-percentage", "100"}}), HasSubstr("[110, 1000]"));
  EXPECT_THAT(error_of({{"target-utilization-percentage", "0.5"}}),
              AllOf(HasSubstr("target-utilization-percentage"), HasSubstr("'0.5'"), HasSubstr("[1, 100]")));
  EXPECT_THAT(error_of({{"target-utilization-percentage", "0"}}), HasSubstr("[1, 100]"));
  EXPECT_THAT(error_of({{"container-concurrency-target-percentage", "120"}}), HasSubstr("(0, 100]"));
  EXPECT_THAT(error_of({{"enable-scale-to-zero", "yes"}}), HasSubstr("true or false"));
  EXPECT_THAT(error_of({{"metric", "cpu"}}), AllOf(HasSubstr("metric"), HasSubstr("concurrency or rps")));
}

TEST(AutoscalerConfig, ScaleBoundsMustBeConsistent) {
  EXPECT_THAT(error_of({{"min-scale", "5"}, {"max-scale", "3"}}),
              AllOf(HasSubstr("min-scale"), HasSubstr("'5'"), HasSubstr("max-scale (3)")));
  EXPECT_THAT(error_of({{"initial-scale", "0"}}), HasSubstr("allow-zero-initial-scale"));
  EXPECT_EQ(config_from_data({{"initial-scale", "0"}, {"allow-zero-initial-scale", "true"}}).initial_scale, 0);
  EXPECT_THAT(error_of({{"activation-scale", "1"}}), AllOf(HasSubstr("activation-scale"), HasSubstr("at least 2")));
  EXPECT_THAT(error_of({{"activation-scale", "5"}, {"max-scale", "4"}}), HasSubstr("must not exceed max-scale"));
  EXPECT_THAT(error_of({{"max-scale", "20"}, {"max-scale-limit", "10"}}), HasSubstr("max-scale-limit"));
}

TEST(AutoscalerConfig, UnknownKeysAreRejectedWithTheAllowedList) {
  EXPECT_THAT(error_of({{"stable-windw", "60s"}}),
              AllOf(HasSubstr("stable-windw"), HasSubstr("stable-window"), HasSubstr("allowed")));
}

TEST(AutoscalerConfig, PanicWindowRoundsToSecondsAndIsAtLeastOneBucket) {
  AutoscalerConfig c;
  c.stable_window = 10s;
  c.panic_window_percentage = 15;  // 1.5 s rounds (half away from zero, as Go) to 2 s
  EXPECT_EQ(panic_window(c), 2s);
  c.stable_window = 6s;
  c.panic_window_percentage = 1;  // 60 ms
  EXPECT_EQ(panic_window(c), 1s);
}

TEST(GoDuration, ParsesGoSyntax) {
  EXPECT_EQ(parse_go_duration("60s"), Duration(60s));
  EXPECT_EQ(parse_go_duration("1m30s"), Duration(90s));
  EXPECT_EQ(parse_go_duration("1.5h"), Duration(90min));
  EXPECT_EQ(parse_go_duration("300ms"), Duration(300ms));
  EXPECT_EQ(parse_go_duration("0"), Duration(0s));
  EXPECT_EQ(parse_go_duration("-5s"), Duration(-5s));
  EXPECT_EQ(parse_go_duration("2us"), Duration(2us));
  EXPECT_EQ(parse_go_duration("5"), std::nullopt);
  EXPECT_EQ(parse_go_duration(""), std::nullopt);
  EXPECT_EQ(parse_go_duration("5x"), std::nullopt);
  EXPECT_EQ(parse_go_duration("s"), std::nullopt);
}

TEST(GoDuration, FormatsTheShortestExactUnit) {
  EXPECT_EQ(format_duration(2h), "2h");
  EXPECT_EQ(format_duration(90s), "90s");
  EXPECT_EQ(format_duration(1500ms), "1500ms");
  EXPECT_EQ(format_duration(0s), "0s");
}

TEST(ConfigText, ReadsKeyValueLinesLikeAConfigMapDataBlock) {
  const ConfigData data = parse_config_text(
      "# tuned for the demo\n"
      "data:\n"
      "  stable-window: \"30s\"\n"
      "  container-concurrency-target-default: '10'\r\n"
      "\n"
      "  enable-scale-to-zero: true\n");
  ASSERT_EQ(data.size(), 3u);
  EXPECT_EQ(data.at("stable-window"), "30s");
  EXPECT_EQ(data.at("container-concurrency-target-default"), "10");
  EXPECT_EQ(config_from_data(data).stable_window, 30s);
}

TEST(ConfigText, MalformedOrRepeatedLinesNameTheLine) {
  try {
    parse_config_text("stable-window: 60s\nnonsense\n", "as.conf");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("as.conf line 2"), HasSubstr("nonsense")));
  }
  EXPECT_THROW(parse_config_text("min-scale: 1\nmin-scale: 2\n"), ConfigError);
}

}  // namespace
}  // namespace sluice::autoscaler
