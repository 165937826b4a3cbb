// The whole per-service KPA with its metric windows on an injected clock: stats every second, a decision
// every 2 s, ready pods following the decisions (as if instances started at once). Expected counts are
// worked out in the comments from ceil(observed / (target × utilization)) and Knative's rules.
#include "autoscaler/kpa.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <map>

namespace sluice::autoscaler {
namespace {

using namespace std::chrono_literals;

TimePoint at(int second) { return TimePoint(std::chrono::seconds(second)); }

Stat concurrency(double c) {
  Stat s;
  s.average_concurrent_requests = c;
  return s;
}

// Drives a Kpa from second `from` to `to` with load(t), deciding on even seconds; returns each decision
// by second. `ready` follows the scale target (as if instances started and stopped at once).
class Drive {
 public:
  Drive(const AutoscalerConfig& config, std::int32_t ready, int start = 0)
      : kpa_(config, ready, at(start)), ready_(ready) {}

  std::map<int, Decision> run(int from, int to, const std::function<Stat(int)>& load) {
    std::map<int, Decision> out;
    for (int t = from; t <= to; ++t) {
      kpa_.record(at(t), load(t));
      if (t % 2 != 0) continue;
      const Decision d = kpa_.decide(at(t), ready_);
      ready_ = d.desired_pods;
      out[t] = d;
    }
    return out;
  }

  Kpa& kpa() { return kpa_; }

 private:
  Kpa kpa_;
  std::int32_t ready_;
};

TEST(Kpa, SteadyLoadSettlesOnCeilOfLoadOverTargetTimesUtilization) {
  Drive drive(AutoscalerConfig{}, 1);
  // 400 / (100 × 0.7) = 5.71 → 6 pods. From 1 pod that is a panic (6 ≥ 2 × 1), which ends 60 s later.
  const auto d = drive.run(0, 120, [](int) { return concurrency(400); });
  EXPECT_EQ(d.at(0).desired_pods, 6);
  EXPECT_TRUE(d.at(0).panicking);
  EXPECT_TRUE(d.at(60).panicking);
  EXPECT_FALSE(d.at(62).panicking);
  EXPECT_EQ(d.at(120).desired_pods, 6);
  EXPECT_DOUBLE_EQ(d.at(120).observed_stable, 400);
}

TEST(Kpa, StepUpPanicsAndScaleUpIsBoundedByTheRate) {
  AutoscalerConfig config;
  config.max_scale_up_rate = 10;
  Drive drive(config, 1);
  // 70 = one pod's target until t=59, then 7000 (100 pods' worth). Panic window 6 s.
  const auto d = drive.run(0, 66, [](int t) { return concurrency(t < 60 ? 70 : 7000); });
  EXPECT_EQ(d.at(58).desired_pods, 1);
  EXPECT_FALSE(d.at(58).panicking);
  // t=60: panic = (5 × 70 + 7000) / 6 = 1225 → 18 pods ≥ 2 × 1: panic; 10 × 1 ready caps it at 10.
  EXPECT_DOUBLE_EQ(d.at(60).observed_panic, 1225);
  EXPECT_TRUE(d.at(60).panicking);
  EXPECT_EQ(d.at(60).desired_pods, 10);
  // t=62: (3 × 70 + 3 × 7000) / 6 = 3535 → 50.5 → 51 (cap 100).
  EXPECT_EQ(d.at(62).desired_pods, 51);
  // t=64: (70 + 5 × 7000) / 6 = 5845 → 83.5 → 84; t=66: 7000 → 100.
  EXPECT_EQ(d.at(64).desired_pods, 84);
  EXPECT_EQ(d.at(66).desired_pods, 100);
}

TEST(Kpa, StepDownNeverScalesDownInPanicThenAtMostHalvesPerDecision) {
  Drive drive(AutoscalerConfig{}, 1);
  // 7000 for 20 s, then nothing. t=0: 7000 → 100 pods, panic (last over-threshold tick: t=0).
  const auto d = drive.run(0, 66, [](int t) { return concurrency(t < 20 ? 7000 : 0); });
  EXPECT_EQ(d.at(0).desired_pods, 100);
  // t=30: the panic window reads 0, the stable one 20 × 7000 / 31 → 65 pods; panic holds 100.
  EXPECT_DOUBLE_EQ(d.at(30).observed_panic, 0);
  EXPECT_EQ(d.at(30).desired_pods, 100);
  EXPECT_EQ(d.at(60).desired_pods, 100);
  // t=62: stable mode. 17 × 7000 / 60 = 1983.3 → 29 pods, but 100 / 2 = 50 is the floor.
  EXPECT_FALSE(d.at(62).panicking);
  EXPECT_EQ(d.at(62).desired_pods, 50);
  // t=64: 15 × 7000 / 60 = 1750 → 25 = 50 / 2. t=66: 13 × 7000 / 60 = 1516.7 → 21.7 → 22 (floor 12).
  EXPECT_EQ(d.at(64).desired_pods, 25);
  EXPECT_EQ(d.at(66).desired_pods, 22);
}

TEST(Kpa, RestartWithSeveralReadyPodsHoldsThemForAStableWindow) {
  Drive drive(AutoscalerConfig{}, 100);
  // 70 = one pod's worth, but the KPA just started with 100 ready: panic, hold 100 until t=62,
  // then halve per decision down to 1.
  const auto d = drive.run(0, 74, [](int) { return concurrency(70); });
  EXPECT_TRUE(d.at(0).panicking);
  EXPECT_EQ(d.at(60).desired_pods, 100);
  const int want[] = {50, 25, 12, 6, 3, 1, 1};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(d.at(62 + 2 * i).desired_pods, want[i]) << "t=" << 62 + 2 * i;
}

TEST(Kpa, IdleGoesToZeroAtDeactivationWhenTheBufferWasAlreadyInThePath) {
  // Knative's timing (scaler.go): the revision became active at t=0; the decider wants 0 from t=70 (a
  // stable window after the last traffic at t=9) and the revision has been active ≥ 60 s, so it is
  // deactivated. With the default target-burst-capacity (211 > one pod's 100) the cold-start buffer
  // has been in the path all along — for more than the 30 s grace period — so zero follows at once.
  Drive drive(AutoscalerConfig{}, 1);
  const auto d = drive.run(0, 72, [](int t) { return concurrency(t < 10 ? 70 : 0); });
  EXPECT_EQ(d.at(0).activity, Activity::active);
  EXPECT_TRUE(d.at(68).buffer_in_path);
  EXPECT_EQ(d.at(68).decider_pods, 1);  // the stable window still holds t=9's 70
  EXPECT_EQ(d.at(68).desired_pods, 1);
  EXPECT_EQ(d.at(70).decider_pods, 0);
  EXPECT_EQ(d.at(70).activity, Activity::inactive);
  EXPECT_EQ(d.at(70).desired_pods, 0);
}

TEST(Kpa, GracePeriodKeepsTheReplicasWhileTheBufferEntersThePath) {
  // target-burst-capacity 0: the buffer leaves the path while pods are wanted. At deactivation (t=70) it
  // goes back in; the replicas stay as they are (no drop to one first) until it has been in the path for
  // the grace period: zero at t=100.
  AutoscalerConfig config;
  config.target_burst_capacity = 0;
  Drive drive(config, 2);
  const auto d = drive.run(0, 102, [](int t) { return concurrency(t < 10 ? 140 : 0); });
  EXPECT_FALSE(d.at(68).buffer_in_path);
  EXPECT_EQ(d.at(70).decider_pods, 0);
  EXPECT_EQ(d.at(70).want, 0);
  EXPECT_TRUE(d.at(70).buffer_in_path);
  EXPECT_EQ(d.at(70).activity, Activity::inactive);
  // The decider halved 2 → 1 on the way down (rate 2); the reconciler holds what the target has.
  const std::int32_t held = d.at(68).desired_pods;
  for (int t = 70; t <= 98; t += 2) EXPECT_EQ(d.at(t).desired_pods, held) << "t=" << t;
  EXPECT_EQ(d.at(100).desired_pods, 0);
}

TEST(Kpa, PodRetentionIsAHardDeadlineAfterDeactivation) {
  AutoscalerConfig config;
  config.scale_to_zero_pod_retention_period = 90s;
  Drive drive(config, 1);
  const auto d = drive.run(0, 162, [](int t) { return concurrency(t < 10 ? 70 : 0); });
  EXPECT_EQ(d.at(70).activity, Activity::inactive);
  EXPECT_EQ(d.at(158).desired_pods, 1);  // inactive 88 s < 90 s, whatever the buffer
  EXPECT_EQ(d.at(160).desired_pods, 0);  // max(grace 30 s, retention 90 s) inactive
}

TEST(Kpa, ANewIdleRevisionKeepsItsFirstInstanceForAStableWindow) {
  // Initial scale 1, never any traffic: the decider wants 0 at once, but the revision must have been
  // active a whole stable window (from t=0, its first ready pod) before it is deactivated.
  Drive drive(AutoscalerConfig{}, 1);
  const auto d = drive.run(0, 62, [](int) { return concurrency(0); });
  EXPECT_EQ(d.at(0).decider_pods, 0);
  EXPECT_EQ(d.at(0).desired_pods, 1);
  EXPECT_EQ(d.at(58).desired_pods, 1);
  EXPECT_EQ(d.at(58).activity, Activity::active);
  EXPECT_EQ(d.at(60).activity, Activity::inactive);
  EXPECT_EQ(d.at(60).desired_pods, 0);  // the buffer was in the path since t=0: ≥ grace
}

TEST(Kpa, TrafficDuringTheGracePeriodCancelsScaleToZero) {
  AutoscalerConfig config;
  config.stable_window = 6s;  // short windows to keep the arithmetic small; panic window 1 s
  config.scale_to_zero_grace_period = 10s;
  Drive drive(config, 1);
  const auto d = drive.run(0, 40, [](int t) { return concurrency(t == 20 ? 7 : 0); });
  // Active from t=0, deactivated at t=6 (a stable window); the buffer has been in the path since t=0
  // (EBC < 0), so zero once that is the 10 s grace period: t=10.
  EXPECT_EQ(d.at(6).activity, Activity::inactive);
  EXPECT_EQ(d.at(8).desired_pods, 1);
  EXPECT_EQ(d.at(10).desired_pods, 0);
  // t=20: 7 concurrent → 1 pod (7 / 6 buckets → 1.17 → 1); activating, active at t=22 (ready).
  EXPECT_EQ(d.at(20).desired_pods, 1);
  EXPECT_EQ(d.at(22).activity, Activity::active);
  EXPECT_EQ(d.at(26).decider_pods, 0);  // buckets 21..26 are all 0
  // Active since t=22: a stable window later (t=28) deactivated, and the buffer never left: zero.
  EXPECT_EQ(d.at(26).desired_pods, 1);
  EXPECT_EQ(d.at(28).desired_pods, 0);
}

TEST(Kpa, ScaleDownDelayHoldsTheHighestCountOfTheDelayWindow) {
  AutoscalerConfig config;
  config.stable_window = 6s;                  // small windows: the arithmetic stays short
  config.panic_threshold_percentage = 1000;   // keep panic out of the way
  const auto load = [](int t) { return concurrency(t < 12 ? 280 : 0); };  // 4 pods' worth, then idle
  Drive plain(config, 1);
  const auto p = plain.run(0, 22, load);
  EXPECT_EQ(p.at(12).desired_pods, 4);  // (5 × 280 + 0) / 6 = 233.3 → 4
  EXPECT_EQ(p.at(14).desired_pods, 2);  // 3 × 280 / 6 = 140 → 2, and 4 / 2 allows it
  config.scale_down_delay = 10s;        // 5 ticks of 2 s
  Drive delayed(config, 1);
  const auto d = delayed.run(0, 22, load);
  // The 4 wanted at t=12 holds until it is 5 ticks old; by then 2 is the largest count in the window.
  EXPECT_EQ(d.at(14).desired_pods, 4);
  EXPECT_EQ(d.at(20).desired_pods, 4);
  EXPECT_EQ(d.at(22).desired_pods, 2);
}

TEST(Kpa, ScaleToZeroDisabledKeepsOnePod) {
  AutoscalerConfig config;
  config.enable_scale_to_zero = false;
  Drive drive(config, 1);
  const auto d = drive.run(0, 200, [](int) { return concurrency(0); });
  EXPECT_EQ(d.at(200).decider_pods, 0);
  EXPECT_EQ(d.at(200).desired_pods, 1);
}

TEST(Kpa, MinScaleIsAFloorAndMaxScaleACap) {
  AutoscalerConfig config;
  config.min_scale = 2;
  config.max_scale = 3;
  Drive idle(config, 1);
  EXPECT_EQ(idle.run(0, 100, [](int) { return concurrency(0); }).at(100).desired_pods, 2);
  Drive busy(config, 1);
  EXPECT_EQ(busy.run(0, 10, [](int) { return concurrency(7000); }).at(10).desired_pods, 3);
}

TEST(Kpa, InitialScaleHoldsUntilReachedOnce) {
  AutoscalerConfig config;
  config.initial_scale = 3;
  Kpa kpa(config, 0, at(0));
  kpa.record(at(0), concurrency(0));
  EXPECT_EQ(kpa.decide(at(0), 0).desired_pods, 3);  // nothing ready yet: start 3
  kpa.record(at(1), concurrency(0));
  EXPECT_EQ(kpa.decide(at(1), 2).desired_pods, 3);
  kpa.record(at(2), concurrency(0));
  // 3 ready once: initial scale is done; no load, 3 / 2 = 1 allowed.
  EXPECT_EQ(kpa.decide(at(2), 3).desired_pods, 1);
}

TEST(Kpa, WithoutDataANewServiceStillGetsItsInitialAndMinScale) {
  AutoscalerConfig initial;
  initial.initial_scale = 3;
  Kpa a(initial, 0, at(0));
  Decision d = a.decide(at(0), 0);  // no stat yet
  EXPECT_FALSE(d.valid);
  EXPECT_EQ(d.decider_pods, kScaleUnknown);
  EXPECT_EQ(d.desired_pods, 3);
  AutoscalerConfig bounded;
  bounded.min_scale = 2;
  bounded.max_scale = 4;
  Kpa b(bounded, 0, at(0));
  EXPECT_EQ(b.decide(at(0), 0).desired_pods, 2);
  // Knative keeps the last decision without data, never the ready count: 3 or 6 ready change nothing.
  EXPECT_EQ(b.decide(at(2), 3).desired_pods, 2);
  EXPECT_EQ(b.decide(at(4), 6).desired_pods, 2);
}

TEST(Kpa, KnativeNoDataNoAutoscale) {
  // Knative's TestAutoscalerNoDataNoAutoscale: no metrics → an invalid result, nothing decided.
  Kpa kpa(AutoscalerConfig{}, 1, at(0));
  const Decision d = kpa.decide(at(0), 1);
  EXPECT_FALSE(d.valid);
  EXPECT_EQ(d.decider_pods, kScaleUnknown);
  EXPECT_FALSE(d.scaled);
  EXPECT_EQ(d.desired_pods, 1);
}

TEST(Kpa, NoDataKeepsTheLastDecision) {
  Kpa kpa(AutoscalerConfig{}, 1, at(0));
  kpa.record(at(0), concurrency(280));  // 4 pods' worth
  EXPECT_EQ(kpa.decide(at(0), 1).desired_pods, 4);
  // More than a stable window without any stat: the decider's 4 stands (not the 2 ready).
  const Decision d = kpa.decide(at(70), 2);
  EXPECT_FALSE(d.valid);
  EXPECT_EQ(d.decider_pods, 4);
  EXPECT_EQ(d.desired_pods, 4);
}

TEST(Kpa, KnativeMultiscalerInitialExcessBurstCapacity) {
  // TestMultiscalerCreateTBC42: initial scale 2 × total 25 − TBC 42 = 8, before any decision.
  AutoscalerConfig c;
  c.initial_scale = 2;
  c.target_burst_capacity = 42;
  c.container_concurrency = 25;
  Kpa kpa(c, 0, at(0));
  EXPECT_EQ(kpa.decide(at(0), 0).excess_burst_capacity, 50 - 42);
  // TestMultiscalerCreateTBCMinus1: −1 stays −1.
  AutoscalerConfig minus1;
  minus1.target_burst_capacity = -1;
  EXPECT_EQ(Kpa(minus1, 0, at(0)).decide(at(0), 0).excess_burst_capacity, -1);
  // The default: 1 × 100 − 211: a new revision starts behind the buffer.
  Kpa fresh(AutoscalerConfig{}, 0, at(0));
  const Decision d = fresh.decide(at(0), 0);
  EXPECT_EQ(d.excess_burst_capacity, -111);
  EXPECT_TRUE(d.buffer_in_path);
}

TEST(Kpa, InitialScaleIsMarkedReachedOnceReady) {
  // kpa.go marks the scale target initialized when the ready pods reach the initial scale; from then on
  // the initial scale is no floor and the active threshold is 1.
  AutoscalerConfig config;
  config.initial_scale = 3;
  Kpa kpa(config, 0, at(0));
  EXPECT_EQ(kpa.decide(at(0), 0).desired_pods, 3);
  EXPECT_FALSE(kpa.pod_autoscaler().scale_target_initialized());
  EXPECT_EQ(kpa.decide(at(2), 2).activity, Activity::activating);
  const Decision d = kpa.decide(at(4), 3);
  EXPECT_TRUE(kpa.pod_autoscaler().scale_target_initialized());
  EXPECT_EQ(d.activity, Activity::active);
}

TEST(Kpa, ActivationScaleStartsSeveralPodsForAnyRequest) {
  AutoscalerConfig config;
  config.activation_scale = 3;
  Kpa kpa(config, 0, at(0));
  kpa.record(at(0), concurrency(0.5));  // ceil(0.5 / 70) = 1 pod → activation scale 3
  EXPECT_EQ(kpa.decide(at(0), 0).desired_pods, 3);
}

TEST(Kpa, RpsModeScalesOnRequestsPerSecond) {
  AutoscalerConfig config;
  config.metric = ScalingMetric::rps;
  Kpa kpa(config, 1, at(0));
  Stat s;
  s.average_concurrent_requests = 1;  // ignored in RPS mode
  s.request_count = 400;
  kpa.record(at(0), s);
  const Decision d = kpa.decide(at(0), 1);
  EXPECT_DOUBLE_EQ(d.observed_stable, 400);
  EXPECT_EQ(d.desired_pods, 3);  // 400 / (200 × 0.7) = 2.86
}

TEST(Kpa, RpsModePanicsOnARequestRateStep) {
  AutoscalerConfig config;
  config.metric = ScalingMetric::rps;  // 200 × 0.7 = 140 requests/s per pod
  Kpa kpa(config, 1, at(0));
  const auto rps = [](double r) {
    Stat s;
    s.request_count = r;
    s.average_concurrent_requests = 0.5;  // would never panic on concurrency
    return s;
  };
  for (int t = 0; t < 10; ++t) kpa.record(at(t), rps(140));
  Decision d = kpa.decide(at(9), 1);
  EXPECT_EQ(d.desired_pods, 1);
  EXPECT_FALSE(d.panicking);
  kpa.record(at(10), rps(1400));
  d = kpa.decide(at(10), 1);
  // Panic window (6 s): (5 × 140 + 1400) / 6 = 350 → 3 pods ≥ 2 × 1: panic. Stable: (10 × 140 + 1400) / 11
  // = 254.5 → 2 pods; in panic the larger count wins.
  EXPECT_DOUBLE_EQ(d.observed_panic, 350);
  EXPECT_DOUBLE_EQ(d.observed_stable, 254.545455);
  EXPECT_TRUE(d.panicking);
  EXPECT_EQ(d.desired_pods, 3);
}

TEST(Kpa, LoadThroughTheActivatorIsCountedOnce) {
  Kpa kpa(AutoscalerConfig{}, 1, at(0));
  Stat s;
  s.average_concurrent_requests = 140;
  s.average_proxied_concurrent_requests = 70;  // the activator reports these 70 itself
  kpa.record(at(0), s);
  EXPECT_DOUBLE_EQ(kpa.decide(at(0), 1).observed_stable, 70);
}

TEST(Kpa, BufferLeavesThePathOnlyWithSpareBurstCapacity) {
  // Default TBC 211, 100 per pod: 3 pods at 70 have 300 − 211 − 70 = 19 spare.
  Kpa three(AutoscalerConfig{}, 3, at(0));
  three.record(at(0), concurrency(70));
  Decision d = three.decide(at(0), 3);
  EXPECT_EQ(d.excess_burst_capacity, 19);
  EXPECT_FALSE(d.buffer_in_path);
  // One pod: 100 − 211 − 70 = −181: bursts must be buffered.
  Kpa one(AutoscalerConfig{}, 1, at(0));
  one.record(at(0), concurrency(70));
  d = one.decide(at(0), 1);
  EXPECT_EQ(d.excess_burst_capacity, -181);
  EXPECT_TRUE(d.buffer_in_path);
  // TBC −1: always buffered; TBC 0: never, while pods are wanted.
  AutoscalerConfig always;
  always.target_burst_capacity = -1;
  Kpa a(always, 3, at(0));
  a.record(at(0), concurrency(70));
  EXPECT_TRUE(a.decide(at(0), 3).buffer_in_path);
  AutoscalerConfig never;
  never.target_burst_capacity = 0;
  Kpa n(never, 1, at(0));
  n.record(at(0), concurrency(70));
  EXPECT_FALSE(n.decide(at(0), 1).buffer_in_path);
}

TEST(Kpa, RequestsAtZeroPodsAskForADecisionAtOnce) {
  // Knative's TestMultiScalerScaleFromZero: a poke when the decider's last count is 0 and a stat shows
  // requests; never before a first decision (−1).
  Kpa undecided(AutoscalerConfig{}, 0, at(0));
  EXPECT_FALSE(undecided.record(at(0), concurrency(1)));
  Kpa kpa(AutoscalerConfig{}, 0, at(0));
  kpa.record(at(0), concurrency(0));
  EXPECT_EQ(kpa.decide(at(0), 0).decider_pods, 0);
  EXPECT_TRUE(kpa.record(at(1), concurrency(1)));
  EXPECT_EQ(kpa.decide(at(1), 0).desired_pods, 1);
  EXPECT_FALSE(kpa.record(at(2), concurrency(1)));  // not at zero any more
}

TEST(Kpa, PokeFollowsTheDecidersRawCountNotTheBoundedOne) {
  // min-scale 1 keeps a pod, and disabled scale-to-zero too; the decider still wants 0 for no traffic,
  // so requests poke a decision at once, as in Knative.
  for (const bool disable : {false, true}) {
    AutoscalerConfig config;
    if (disable) {
      config.enable_scale_to_zero = false;
    } else {
      config.min_scale = 1;
    }
    Kpa kpa(config, 1, at(0));
    kpa.record(at(0), concurrency(0));
    const Decision d = kpa.decide(at(0), 1);
    EXPECT_EQ(d.decider_pods, 0);
    EXPECT_EQ(d.desired_pods, 1);
    EXPECT_TRUE(kpa.record(at(1), concurrency(3)));
  }
}

TEST(Kpa, NoStatInAStableWindowMeansNoDecision) {
  Kpa kpa(AutoscalerConfig{}, 2, at(0));
  Decision d = kpa.decide(at(0), 2);
  EXPECT_FALSE(d.valid);
  EXPECT_EQ(d.desired_pods, 2);
  kpa.record(at(1), concurrency(70));
  EXPECT_TRUE(kpa.decide(at(2), 2).valid);
  EXPECT_FALSE(kpa.decide(at(62), 2).valid);  // the last stat is more than 60 s old
}

TEST(Kpa, WeightedAveragingReactsFasterToRecentLoad) {
  AutoscalerConfig linear;
  AutoscalerConfig weighted;
  weighted.aggregation = Averaging::weighted_exponential;
  Kpa a(linear, 1, at(0));
  Kpa b(weighted, 1, at(0));
  for (int t = 0; t < 60; ++t) {
    a.record(at(t), concurrency(t < 50 ? 0 : 700));
    b.record(at(t), concurrency(t < 50 ? 0 : 700));
  }
  // Linear: 10 × 700 / 60 = 116.7. Weighted (coefficient 0.2 for 60 buckets): 700 × (1 − 0.8^10) = 624.8.
  EXPECT_DOUBLE_EQ(a.decide(at(59), 1).observed_stable, 116.666667);
  EXPECT_NEAR(b.decide(at(59), 1).observed_stable, 700 * (1 - std::pow(0.8, 10)), 1e-9);
}

TEST(Kpa, AChangedWindowResizesInPlaceKeepingHistoryAndPanic) {
  // Knative's decider Update and metric ResizeWindow: the windows keep their buckets, the panic state
  // and the reconciler's timing carry on; only the lengths change.
  Kpa kpa(AutoscalerConfig{}, 1, at(0));
  for (int t = 0; t <= 20; ++t) kpa.record(at(t), concurrency(t < 10 ? 70 : 700));
  Decision d = kpa.decide(at(20), 1);
  ASSERT_TRUE(d.panicking);  // 700 / 70 = 10 pods ≥ 2 × 1
  EXPECT_DOUBLE_EQ(d.observed_stable, 400);  // (10 × 70 + 11 × 700) / 21
  const TimePoint active_since = kpa.pod_autoscaler().activity_since();

  AutoscalerConfig longer;
  longer.stable_window = 120s;  // panic window 12 s
  kpa.update(longer, at(20));
  d = kpa.decide(at(20), 10);
  EXPECT_TRUE(d.valid);
  EXPECT_TRUE(d.panicking);
  // The same 21 buckets of history; as Knative's resize does, the data may now date from a whole old
  // window back (its first write moves to t=20 − 59 s), so the average is over 60 buckets: 8400 / 60.
  EXPECT_DOUBLE_EQ(d.observed_stable, (10 * 70 + 11 * 700) / 60.0);
  EXPECT_DOUBLE_EQ(d.observed_panic, 700);  // the 6 panic buckets (t=15..20) kept
  EXPECT_EQ(kpa.pod_autoscaler().activity_since(), active_since);
  EXPECT_EQ(kpa.spec().stable_window, 120s);

  AutoscalerConfig shorter;
  shorter.stable_window = 10s;  // panic window 1 s: only the newest buckets stay
  kpa.update(shorter, at(20));
  d = kpa.decide(at(20), 10);
  EXPECT_DOUBLE_EQ(d.observed_stable, 700);  // t=11..20
  EXPECT_DOUBLE_EQ(d.observed_panic, 700);
}

}  // namespace
}  // namespace sluice::autoscaler
