// The decider on Knative's own test vectors (pkg/autoscaler/scaling/autoscaler_test.go), written anew.
// Those tests use rates of 10 and a total value of target / 0.75; EBC there is
// floor(target / 0.75 × ready − TBC − panic value), computed by hand in the comments below.
#include "autoscaler/decider.h"

#include <gtest/gtest.h>

#include <chrono>

namespace sluice::autoscaler {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = TimePoint(10'000s);

DeciderSpec knative_test_spec(double target, double tbc) {
  DeciderSpec s;
  s.target_value = target;
  s.total_value = target / 0.75;
  s.target_burst_capacity = tbc;
  s.panic_threshold = 2;
  s.max_scale_up_rate = 10;
  s.max_scale_down_rate = 10;
  s.stable_window = 60s;
  s.reachable = true;
  return s;
}

TEST(Decider, RateLimitedScaleUpNeeds100Gets10Then100) {
  Decider d(knative_test_spec(10, 61), 1, kT0);
  // 1000 / 10 = 100 pods wanted, but 10× one pod is 10.
  ScaleResult r = d.decide(kT0, 1000, 1001, 1);
  EXPECT_EQ(r.desired_pod_count, 10);
  EXPECT_EQ(r.excess_burst_capacity, -1049);  // floor(13.33 − 61 − 1001)
  r = d.decide(kT0, 1000, 1001, 10);
  EXPECT_EQ(r.desired_pod_count, 100);
  EXPECT_EQ(r.excess_burst_capacity, -929);  // floor(133.3 − 61 − 1001)
}

TEST(Decider, RateLimitedScaleDownDividesByTheRate) {
  Decider d(knative_test_spec(10, 61), 1, kT0);
  EXPECT_EQ(d.decide(kT0, 1, 1, 100).desired_pod_count, 10);  // 1 wanted, 100 / 10 allowed
  EXPECT_EQ(d.decide(kT0, 1, 1, 10).desired_pod_count, 1);
}

TEST(Decider, PanicModeTracksExponentialGrowth6To36To216To1296) {
  Decider d(knative_test_spec(1, 101), 1, kT0);
  EXPECT_EQ(d.decide(kT0, 6, 6, 1).desired_pod_count, 6);
  EXPECT_TRUE(d.panicking());
  EXPECT_EQ(d.decide(kT0, 36, 36, 6).desired_pod_count, 36);
  EXPECT_EQ(d.decide(kT0 + 1s, 216, 216, 36).desired_pod_count, 216);
  EXPECT_EQ(d.decide(kT0 + 1s, 1296, 1296, 216).desired_pod_count, 1296);
  // Traffic stabilised: 1296 / 1296 ready is under the threshold, and panic holds the count.
  const ScaleResult r = d.decide(kT0 + 2s, 1296, 1296, 1296);
  EXPECT_EQ(r.desired_pod_count, 1296);
  EXPECT_TRUE(r.panicking);
}

TEST(Decider, UnpanicsOneStableWindowAfterTheLastOverThresholdTick) {
  Decider d(knative_test_spec(1, 98), 1, kT0);
  // 25 / 10 ready = 2.5 ≥ 2: panic from kT0.
  EXPECT_EQ(d.decide(kT0, 11, 25, 10).desired_pod_count, 25);
  // Half a window later, 41 / 40 is under the threshold: still panicking, growing to 41.
  ScaleResult r = d.decide(kT0 + 30s, 30, 41, 40);
  EXPECT_EQ(r.desired_pod_count, 41);
  EXPECT_TRUE(r.panicking);
  // Exactly one stable window after the last over-threshold tick is not yet past it.
  r = d.decide(kT0 + 60s, 50, 56, 55);
  EXPECT_TRUE(r.panicking);
  // One tick later the surge is in the stable value: stable mode, 50 pods.
  r = d.decide(kT0 + 62s, 50, 56, 55);
  EXPECT_FALSE(r.panicking);
  EXPECT_EQ(r.desired_pod_count, 50);
}

TEST(Decider, StayingOverTheThresholdExtendsPanic) {
  Decider d(knative_test_spec(1, 98), 1, kT0);
  EXPECT_EQ(d.decide(kT0, 11, 25, 10).desired_pod_count, 25);
  EXPECT_EQ(d.decide(kT0 + 30s, 30, 80, 40).desired_pod_count, 80);  // 80 / 40 = 2: extends to +30 s
  EXPECT_TRUE(d.decide(kT0 + 62s, 1, 1, 80).panicking);              // +62 s is within +30 s + 60 s
  EXPECT_FALSE(d.decide(kT0 + 92s, 1, 1, 80).panicking);
}

TEST(Decider, PanicNeverScalesDownThenStableModeDoes) {
  Decider d(knative_test_spec(10, 93), 1, kT0);
  EXPECT_EQ(d.decide(kT0, 100, 100, 1).desired_pod_count, 10);
  EXPECT_EQ(d.decide(kT0, 100, 1000, 10).desired_pod_count, 100);
  // Traffic fell away: still 100 while panicking.
  EXPECT_EQ(d.decide(kT0 + 30s, 1, 1, 10).desired_pod_count, 100);
  // After the stable window: ceil(1 / 10) = 1, and 10 / 10 allows it.
  EXPECT_EQ(d.decide(kT0 + 61s, 1, 1, 10).desired_pod_count, 1);
}

TEST(Decider, ScaleDownDelayHoldsTheMaxOverTheDelayWindow) {
  DeciderSpec spec = knative_test_spec(10, 0);
  spec.panic_threshold = 100;  // never panic
  spec.scale_down_delay = 5min;
  Decider d(spec, 0, TimePoint(0s));
  const TimePoint t = TimePoint(0s);
  EXPECT_EQ(d.decide(t + 2s, 40, 40, 0).desired_pod_count, 4);
  EXPECT_EQ(d.decide(t + 5min, 0, 0, 0).desired_pod_count, 4);       // less than the delay at 0
  EXPECT_EQ(d.decide(t + 5min + 2s, 0, 0, 0).desired_pod_count, 0);  // the 4 scrolled out
  // Gradual: each value is held for the delay after it was last wanted.
  EXPECT_EQ(d.decide(t + 9min, 40, 40, 0).desired_pod_count, 4);
  EXPECT_EQ(d.decide(t + 10min, 30, 30, 0).desired_pod_count, 4);
  EXPECT_EQ(d.decide(t + 11min, 0, 0, 0).desired_pod_count, 4);
  EXPECT_EQ(d.decide(t + 14min, 0, 0, 0).desired_pod_count, 3);
  EXPECT_EQ(d.decide(t + 15min, 0, 0, 0).desired_pod_count, 0);
}

TEST(Decider, ScaleDownDelayDoesNotApplyToUnreachableRevisions) {
  DeciderSpec spec = knative_test_spec(10, 0);
  spec.panic_threshold = 100;
  spec.scale_down_delay = 5min;
  Decider d(spec, 0, TimePoint(0s));
  EXPECT_EQ(d.decide(TimePoint(2s), 40, 40, 0).desired_pod_count, 4);
  EXPECT_EQ(d.decide(TimePoint(60s), 0, 0, 0).desired_pod_count, 4);
  spec.reachable = false;
  d.update(spec);
  EXPECT_EQ(d.decide(TimePoint(62s), 0, 0, 0).desired_pod_count, 0);
}

TEST(Decider, ZeroScaleDownDelayScalesDownAtOnce) {
  DeciderSpec spec = knative_test_spec(10, 0);
  spec.panic_threshold = 100;
  Decider d(spec, 0, kT0);
  EXPECT_EQ(d.decide(kT0, 40, 40, 0).desired_pod_count, 4);
  EXPECT_EQ(d.decide(kT0 + 500ms, 20, 20, 0).desired_pod_count, 2);
}

TEST(Decider, StableModeFollowsTheStableValue) {
  Decider d(knative_test_spec(10, 98), 1, kT0);
  EXPECT_EQ(d.decide(kT0, 100, 100, 8).desired_pod_count, 10);
  EXPECT_EQ(d.decide(kT0, 50, 50, 8).desired_pod_count, 5);
  EXPECT_FALSE(d.panicking());
}

TEST(Decider, StableModeIncreaseIsNotHeldBackByAQuietPanicWindow) {
  // Knative's StableModeIncreaseWithConcurrencyDefault: the panic value (10) is below the stable one.
  Decider d(knative_test_spec(10, 101), 1, kT0);
  ScaleResult r = d.decide(kT0, 50, 10, 1);
  EXPECT_EQ(r.desired_pod_count, 5);
  EXPECT_EQ(r.excess_burst_capacity, -98);  // floor(13.33 − 101 − 10)
  EXPECT_FALSE(r.panicking);                // ceil(10 / 10) = 1 pod < 2 × 1
  r = d.decide(kT0, 100, 10, 1);
  EXPECT_EQ(r.desired_pod_count, 10);
  EXPECT_EQ(r.excess_burst_capacity, -98);
}

TEST(Decider, StableModeIncreaseWithRpsValues) {
  // Knative's StableModeIncreaseWithRPS: 50 → 5 pods, then stable 100 / panic 99 → 10 pods.
  Decider d(knative_test_spec(10, 101), 1, kT0);
  ScaleResult r = d.decide(kT0, 50, 50, 1);
  EXPECT_EQ(r.desired_pod_count, 5);
  EXPECT_EQ(r.excess_burst_capacity, -138);  // floor(13.33 − 101 − 50)
  r = d.decide(kT0, 100, 99, 1);
  EXPECT_EQ(r.desired_pod_count, 10);
  EXPECT_EQ(r.excess_burst_capacity, -187);  // floor(13.33 − 101 − 99)
}

TEST(Decider, NoReadyPodsCountAsOneForTheRatesAndZeroForCapacity) {
  // Knative's UseOnePodAsMinimumIfEndpointsNotFound: 100 pods wanted, 10 × max(0, 1) allowed; the
  // burst capacity uses the real count, 0: floor(0 − 81 − 888).
  Decider d(knative_test_spec(10, 81), 0, kT0);
  const ScaleResult r = d.decide(kT0, 1000, 888, 0);
  EXPECT_EQ(r.desired_pod_count, 10);
  EXPECT_EQ(r.excess_burst_capacity, -969);
}

TEST(Decider, NoLoadAtOnePodWantsZero) {
  // Knative's AutoscalerNoDataAtZeroNoAutoscale: zero values, one pod: 0 wanted (floor(1 / 10) allows it).
  Decider d(knative_test_spec(10, 100), 1, kT0);
  const ScaleResult r = d.decide(kT0, 0, 0, 1);
  EXPECT_EQ(r.desired_pod_count, 0);
  EXPECT_EQ(r.excess_burst_capacity, -87);  // floor(13.33 − 100 − 0)
}

TEST(Decider, NoTrafficWantsZero) {
  Decider d(knative_test_spec(10, 75), 1, kT0);
  EXPECT_EQ(d.decide(kT0, 1, 0, 1).desired_pod_count, 1);
  EXPECT_EQ(d.decide(kT0, 0, 0, 1).desired_pod_count, 0);
}

TEST(Decider, ActivationScaleIsTheFloorForAnyDemand) {
  DeciderSpec spec = knative_test_spec(10, 75);
  spec.activation_scale = 2;
  Decider d(spec, 1, kT0);
  EXPECT_EQ(d.decide(kT0, 0, 0, 1).desired_pod_count, 0);
  EXPECT_EQ(d.decide(kT0, 1, 0, 1).desired_pod_count, 2);
}

TEST(Decider, StartsInPanicWithMoreThanOneReadyPod) {
  EXPECT_FALSE(Decider(knative_test_spec(100, 11), 0, kT0).panicking());
  EXPECT_FALSE(Decider(knative_test_spec(100, 11), 1, kT0).panicking());
  Decider d(knative_test_spec(100, 11), 2, kT0);
  EXPECT_TRUE(d.panicking());
  // Lost metric history must not scale it down: the 2 pods stay for a stable window.
  EXPECT_EQ(d.decide(kT0 + 2s, 0, 0, 2).desired_pod_count, 2);
  EXPECT_EQ(d.decide(kT0 + 60s, 0, 0, 2).desired_pod_count, 2);
  EXPECT_EQ(d.decide(kT0 + 62s, 0, 0, 2).desired_pod_count, 0);  // floor(2 / 10) allows 0
}

TEST(Decider, InPanicTheLargerOfStableAndPanicCounts) {
  Decider a(knative_test_spec(1, 100), 5, kT0 - 5s);  // panicking, holding 5
  ScaleResult r = a.decide(kT0, 50, 30, 5);
  EXPECT_EQ(r.desired_pod_count, 50);
  EXPECT_EQ(r.excess_burst_capacity, -124);  // floor(5 × 1.33 − 100 − 30)
  Decider b(knative_test_spec(1, 100), 5, kT0 - 5s);
  EXPECT_EQ(b.decide(kT0, 20, 30, 5).desired_pod_count, 30);
}

TEST(Decider, KnativeScaleTable) {
  struct Case {
    const char* label;
    double target, tbc, stable, panic;
    int ready;
    double up_rate, down_rate;
    bool reachable;
    int want_pods, want_ebc;
  };
  const Case cases[] = {
      // EBC −1 means "unlimited TBC": the buffer always stays.
      {"unlimited TBC", 181, -1, 21, 26, 1, 10, 10, true, 1, -1},
      {"zero TBC", 10, 0, 50, 49, 1, 10, 10, true, 5, 0},
      {"no change", 10, 100, 50, 50, 1, 10, 10, true, 5, -137},           // floor(13.33 − 100 − 50)
      {"no change, already scaled", 10, 100, 50, 50, 5, 10, 10, true, 5, -84},  // floor(66.67 − 150)
      // ceil(1.1 × 2) = 3: a small rate still allows one more pod.
      {"small scale-up rate", 1, 1982, 3, 3.1, 2, 1.1, 10, true, 3, -1983},  // floor(2.67 − 1982 − 3.1)
      // floor(100 / 1.1) = 90.
      {"small scale-down rate", 10, 1982, 1, 1, 100, 10, 1.1, true, 90, -650},  // floor(1333.3 − 1983)
      {"unreachable ignores the scale-down rate", 10, 1982, 1, 1, 100, 10, 1.1, false, 1, -650},
      {"panic doubles", 10, 84, 50, 100, 1, 10, 10, true, 10, -171},  // floor(13.33 − 84 − 100)
  };
  for (const Case& c : cases) {
    DeciderSpec spec = knative_test_spec(c.target, c.tbc);
    spec.max_scale_up_rate = c.up_rate;
    spec.max_scale_down_rate = c.down_rate;
    spec.reachable = c.reachable;
    Decider d(spec, 1, kT0);
    const ScaleResult r = d.decide(kT0, c.stable, c.panic, c.ready);
    EXPECT_EQ(r.desired_pod_count, c.want_pods) << c.label;
    EXPECT_EQ(r.excess_burst_capacity, c.want_ebc) << c.label;
  }
}

TEST(Decider, UpdatedTargetAppliesToTheNextDecision) {
  Decider d(knative_test_spec(10, 77), 1, kT0);
  EXPECT_EQ(d.decide(kT0, 100, 101, 1).desired_pod_count, 10);
  d.update(knative_test_spec(1, 71));
  EXPECT_EQ(d.decide(kT0, 100, 101, 10).desired_pod_count, 100);
}

TEST(DeciderSpec, ConcurrencyTargetIsContainerConcurrencyOrTheDefaultTimesUtilization) {
  AutoscalerConfig c;
  DeciderSpec s = decider_spec(c);
  EXPECT_DOUBLE_EQ(s.total_value, 100);
  EXPECT_DOUBLE_EQ(s.target_value, 70);
  EXPECT_DOUBLE_EQ(s.panic_threshold, 2);
  c.container_concurrency = 10;
  s = decider_spec(c);
  EXPECT_DOUBLE_EQ(s.total_value, 10);
  EXPECT_DOUBLE_EQ(s.target_value, 7);
  c.target = 25;  // never above container concurrency
  EXPECT_DOUBLE_EQ(decider_spec(c).total_value, 10);
  c.target = 5;
  EXPECT_DOUBLE_EQ(decider_spec(c).target_value, 3.5);
}

TEST(DeciderSpec, RpsModeTargetsRequestsPerSecond) {
  AutoscalerConfig c;
  c.metric = ScalingMetric::rps;
  DeciderSpec s = decider_spec(c);
  EXPECT_DOUBLE_EQ(s.total_value, 200);
  EXPECT_DOUBLE_EQ(s.target_value, 140);
  c.target = 10;
  c.container_concurrency = 5;  // a concurrency limit does not cap an RPS target
  EXPECT_DOUBLE_EQ(decider_spec(c).total_value, 10);
}

}  // namespace
}  // namespace sluice::autoscaler
