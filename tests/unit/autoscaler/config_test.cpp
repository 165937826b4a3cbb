// Configuration: Knative's key names and defaults, and errors that name the key, the value and the range.
#include "autoscaler/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>

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

std::string revision_error_of(const ConfigData& revision) {
  try {
    config_from_data({}, revision);
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
  EXPECT_THAT(revision_error_of({{"panic-threshold-percentage", "100"}}), HasSubstr("[110, 1000]"));
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

// Knative's TestNewConfig (pkg/autoscaler/config/config_test.go), row by row. Not reproduced as given:
// "actual" and "example" (Knative's ConfigMap file), and the keys sluice does not take — tick-interval
// and panic-window (gone from Knative's parser, which ignores unknown keys; sluice names them as errors)
// and pod-autoscaler-class "some.class" (sluice implements the KPA only) — so "overridden" and "minimum"
// run without them.
TEST(AutoscalerConfig, KnativeTestNewConfigRows) {
  struct Row {
    const char* name;
    ConfigData input;
    bool want_error;
    std::function<void(AutoscalerConfig&)> want = {};  // applied to the defaults
  };
  const Row rows[] = {
      {"default", {}, false},
      {"overridden",
       {{"enable-scale-to-zero", "true"},
        {"max-scale-down-rate", "3.0"},
        {"max-scale-up-rate", "1.01"},
        {"container-concurrency-target-percentage", "0.71"},
        {"container-concurrency-target-default", "10.5"},
        {"requests-per-second-target-default", "10.11"},
        {"target-burst-capacity", "12345"},
        {"scale-down-delay", "15m"},
        {"stable-window", "5m"},
        {"panic-window-percentage", "10"},
        {"panic-threshold-percentage", "200"},
        {"activator-capacity", "905"},
        {"scale-to-zero-pod-retention-period", "2m3s"}},
       false,
       [](AutoscalerConfig& c) {
         c.target_burst_capacity = 12345;
         c.container_concurrency_target_default = 10.5;
         c.container_concurrency_target_fraction = 0.71;
         c.rps_target_default = 10.11;
         c.max_scale_down_rate = 3;
         c.max_scale_up_rate = 1.01;
         c.scale_down_delay = 15min;
         c.stable_window = 5min;
         c.activator_capacity = 905;
         c.scale_to_zero_pod_retention_period = 2min + 3s;
       }},
      {"minimum",
       {{"max-scale-up-rate", "1.001"},
        {"container-concurrency-target-percentage", "0.5"},
        {"container-concurrency-target-default", "10.0"},
        {"target-burst-capacity", "0"},
        {"stable-window", "5m"},
        {"panic-window-percentage", "10"},
        {"panic-threshold-percentage", "200"},
        {"activator-capacity", "1"}},
       false,
       [](AutoscalerConfig& c) {
         c.container_concurrency_target_fraction = 0.5;
         c.container_concurrency_target_default = 10;
         c.max_scale_up_rate = 1.001;
         c.target_burst_capacity = 0;
         c.stable_window = 5min;
         c.activator_capacity = 1;
       }},
      {"concurrency target percentage as percent", {{"container-concurrency-target-percentage", "55"}}, false,
       [](AutoscalerConfig& c) { c.container_concurrency_target_fraction = 0.55; }},
      {"with -1 tbc", {{"target-burst-capacity", "-1"}}, false,
       [](AutoscalerConfig& c) { c.target_burst_capacity = -1; }},
      {"with toggles on strange casing", {{"enable-scale-to-zero", "TRUE"}}, false},
      {"with toggles explicitly flipped", {{"enable-scale-to-zero", "false"}, {"min-scale", "1"}, {"max-scale", "2"}},
       false,
       [](AutoscalerConfig& c) {
         c.enable_scale_to_zero = false;
         c.min_scale = 1;
         c.max_scale = 2;
       }},
      {"with explicit grace period",
       {{"enable-scale-to-zero", "false"}, {"scale-to-zero-grace-period", "33s"}, {"min-scale", "1"}, {"max-scale", "2"}},
       false,
       [](AutoscalerConfig& c) {
         c.enable_scale_to_zero = false;
         c.scale_to_zero_grace_period = 33s;
         c.min_scale = 1;
         c.max_scale = 2;
       }},
      {"malformed float", {{"max-scale-up-rate", "not a float"}}, true},
      {"invalid scale-down-delay", {{"scale-down-delay", "-1m23s"}}, true},
      {"invalid pod retention period", {{"scale-to-zero-pod-retention-period", "-4m11s"}}, true},
      {"malformed duration", {{"stable-window", "not a duration"}}, true},
      {"invalid target burst capacity", {{"target-burst-capacity", "-11"}}, true},
      {"invalid target %, too small", {{"container-concurrency-target-percentage", "-42"}}, true},
      {"invalid target %, too big", {{"container-concurrency-target-percentage", "142.4"}}, true},
      {"invalid RPS target, too small", {{"requests-per-second-target-default", "-5.25"}}, true},
      {"max scale up rate 1.0", {{"max-scale-up-rate", "1"}}, true},
      {"max down down rate negative", {{"max-scale-down-rate", "-55"}}, true},
      {"max down down rate 1.0", {{"max-scale-down-rate", "1"}}, true},
      {"stable window too big", {{"stable-window", "1h1s"}}, true},
      {"stable window too small", {{"stable-window", "1s"}}, true},
      {"stable not seconds", {{"stable-window", "61984ms"}}, true},
      {"scale-down-delay not seconds", {{"scale-down-delay", "61984ms"}}, true},
      {"activator-capacity invalid", {{"activator-capacity", "0.95"}}, true},
      {"panic window percentage too small", {{"panic-window-percentage", "0.1"}}, true},
      {"panic window percentage too big", {{"stable-window", "12s"}, {"panic-window-percentage", "110"}}, true},
      {"TU*CC < 0.01",
       {{"container-concurrency-target-percentage", "1"}, {"container-concurrency-target-default", "0.001"}}, true},
      {"grace window too small", {{"stable-window", "12s"}, {"scale-to-zero-grace-period", "0s"}}, true},
      {"with prohibited default initial scale", {{"allow-zero-initial-scale", "false"}, {"initial-scale", "0"}}, true},
      {"with negative default initial scale", {{"allow-zero-initial-scale", "false"}, {"initial-scale", "-1"}}, true},
      {"with non-parseable default initial scale", {{"allow-zero-initial-scale", "false"}, {"initial-scale", "invalid"}},
       true},
      {"with valid default initial scale", {{"allow-zero-initial-scale", "true"}, {"initial-scale", "0"}}, false,
       [](AutoscalerConfig& c) {
         c.allow_zero_initial_scale = true;
         c.initial_scale = 0;
       }},
      {"with non-parseable allow-zero-initial-scale", {{"allow-zero-initial-scale", "invalid"}}, true},
      {"with negative default max scale", {{"max-scale", "-1"}}, true},
      {"with valid default max scale", {{"max-scale", "10"}}, false, [](AutoscalerConfig& c) { c.max_scale = 10; }},
      {"max scale exceeding max scale limit", {{"max-scale", "10"}, {"max-scale-limit", "9"}}, true},
      {"with negative max scale limit", {{"max-scale-limit", "-9"}}, true},
      {"with max scale limit and zero default max scale", {{"max-scale", "0"}, {"max-scale-limit", "11"}}, true},
      {"with max scale less than min-scale", {{"min-scale", "4"}, {"max-scale", "3"}}, true},
      {"with min scale set but max-scale not set", {{"min-scale", "4"}}, false,
       [](AutoscalerConfig& c) { c.min_scale = 4; }},
      {"with valid default max scale and max scale limit", {{"max-scale", "10"}, {"max-scale-limit", "11"}}, false,
       [](AutoscalerConfig& c) {
         c.max_scale = 10;
         c.max_scale_limit = 11;
       }},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    if (row.want_error) {
      EXPECT_THROW(config_from_data(row.input), ConfigError);
      continue;
    }
    AutoscalerConfig want;
    if (row.want) row.want(want);
    const AutoscalerConfig got = config_from_data(row.input);
    EXPECT_EQ(got.enable_scale_to_zero, want.enable_scale_to_zero);
    EXPECT_DOUBLE_EQ(got.container_concurrency_target_fraction, want.container_concurrency_target_fraction);
    EXPECT_DOUBLE_EQ(got.container_concurrency_target_default, want.container_concurrency_target_default);
    EXPECT_DOUBLE_EQ(got.rps_target_default, want.rps_target_default);
    EXPECT_DOUBLE_EQ(got.max_scale_up_rate, want.max_scale_up_rate);
    EXPECT_DOUBLE_EQ(got.max_scale_down_rate, want.max_scale_down_rate);
    EXPECT_DOUBLE_EQ(got.target_burst_capacity, want.target_burst_capacity);
    EXPECT_DOUBLE_EQ(got.panic_window_percentage, want.panic_window_percentage);
    EXPECT_DOUBLE_EQ(got.panic_threshold_percentage, want.panic_threshold_percentage);
    EXPECT_DOUBLE_EQ(got.activator_capacity, want.activator_capacity);
    EXPECT_EQ(got.stable_window, want.stable_window);
    EXPECT_EQ(got.scale_down_delay, want.scale_down_delay);
    EXPECT_EQ(got.scale_to_zero_grace_period, want.scale_to_zero_grace_period);
    EXPECT_EQ(got.scale_to_zero_pod_retention_period, want.scale_to_zero_pod_retention_period);
    EXPECT_EQ(got.allow_zero_initial_scale, want.allow_zero_initial_scale);
    EXPECT_EQ(got.initial_scale, want.initial_scale);
    EXPECT_EQ(got.min_scale, want.min_scale);
    EXPECT_EQ(got.max_scale, want.max_scale);
    EXPECT_EQ(got.max_scale_limit, want.max_scale_limit);
  }
}

// Where Knative's annotation validation (annotation_validation.go) is stricter than its ConfigMap's, for
// a revision's own keys.
TEST(AutoscalerConfig, RevisionKeysFollowKnativesAnnotationRanges) {
  // scale-down-delay and pod retention: no cap in the ConfigMap, at most 1 h as annotations.
  EXPECT_EQ(config_from_data({{"scale-down-delay", "2h"}}).scale_down_delay, 2h);
  EXPECT_THAT(revision_error_of({{"scale-down-delay", "1h1s"}}),
              AllOf(HasSubstr("scale-down-delay"), HasSubstr("[0s, 1h]")));
  EXPECT_EQ(config_from_data({}, {{"scale-down-delay", "1h"}}).scale_down_delay, 1h);
  EXPECT_EQ(config_from_data({{"scale-to-zero-pod-retention-period", "90m"}}).scale_to_zero_pod_retention_period,
            90min);
  EXPECT_THAT(revision_error_of({{"scale-to-zero-pod-retention-period", "61m"}}),
              AllOf(HasSubstr("scale-to-zero-pod-retention-period"), HasSubstr("[0s, 1h]")));
  // panic-threshold-percentage: unchecked in the ConfigMap, [110, 1000] as an annotation.
  EXPECT_EQ(config_from_data({{"panic-threshold-percentage", "100"}}).panic_threshold_percentage, 100);
  EXPECT_THAT(revision_error_of({{"panic-threshold-percentage", "1001"}}), HasSubstr("[110, 1000]"));
  EXPECT_EQ(config_from_data({}, {{"panic-threshold-percentage", "110"}}).panic_threshold_percentage, 110);
  // target: at least 0.01; 0 is an error, not "unset".
  EXPECT_THAT(revision_error_of({{"target", "0"}}), AllOf(HasSubstr("target"), HasSubstr("at least 0.01")));
  EXPECT_THAT(error_of({{"target", "0.001"}}), HasSubstr("at least 0.01"));
  EXPECT_EQ(config_from_data({}, {{"target", "0.01"}}).target, 0.01);
  // container-concurrency: [0, container-concurrency-max-limit = 1000].
  EXPECT_EQ(config_from_data({}, {{"container-concurrency", "1000"}}).container_concurrency, 1000);
  EXPECT_THAT(revision_error_of({{"container-concurrency", "1001"}}),
              AllOf(HasSubstr("container-concurrency"), HasSubstr("[0, 1000]")));
  // The revision's keys override the ConfigMap's.
  const auto c = config_from_data({{"stable-window", "90s"}, {"min-scale", "1"}}, {{"min-scale", "3"}});
  EXPECT_EQ(c.stable_window, 90s);
  EXPECT_EQ(c.min_scale, 3);
}

}  // namespace
}  // namespace sluice::autoscaler
