// The KPA reconciler's scale(): Knative's own tables
// (pkg/reconciler/autoscaling/kpa/scaler_test.go, TestScaler and TestDisableScaleToZero) with the
// same inputs and expected outputs, and the Active condition table of kpa.go
// (computeActiveCondition).
//
// Knative's inputs: config-autoscaler of kpa_test.go (stable window 5 min, grace period 60 s,
// target-burst-capacity 200), progress deadline 121 s (+30 s: activation timeout 151 s), a revision
// window annotation of 45 s where a row says "custom PA window". A row's `scaling` is Knative's
// wantScaling: the scale target is patched, i.e. the scale is applied and differs from
// startReplicas. Not reproduced: the enqueue-callback counts (sluice re-evaluates every tick
// instead of re-enqueueing) and the two activator-prober failure rows (sluice's cold-start buffer
// is in-process, never probed).
#include "autoscaler/pod_autoscaler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sluice::autoscaler {
namespace {

using namespace std::chrono_literals;

constexpr Duration kStableWindow = 5min;
constexpr Duration kPaStableWindow = 45s;
constexpr Duration kGracePeriod = 60s;
constexpr Duration kActivationTimeout = 121s + 30s;
const TimePoint kNow = TimePoint(100'000s);

AutoscalerConfig knative_test_config() {
  AutoscalerConfig c;
  c.max_scale_up_rate = 12;
  c.container_concurrency_target_fraction = 0.5;
  c.container_concurrency_target_default = 10;
  c.stable_window = kStableWindow;
  c.scale_to_zero_grace_period = kGracePeriod;
  c.target_burst_capacity = 200;
  c.activation_timeout = kActivationTimeout;
  return c;
}

struct Row {
  std::string label;
  std::int32_t start_replicas;
  std::int32_t scale_to;
  std::int32_t min_scale = 0;
  std::int32_t max_scale = 0;
  std::int32_t want_replicas;
  bool want_scaling;
  // The PodAutoscaler's state as the row sets it (paMarkActive/Inactive/Activating, SKS proxy for
  // ...).
  std::function<void(PodAutoscaler&)> pa;
  std::function<void(AutoscalerConfig&)> config;
};

void active_since(PodAutoscaler& pa, TimePoint t) {
  pa.set_activity(Activity::active, t);
}
void inactive_since(PodAutoscaler& pa, TimePoint t) {
  pa.set_activity(Activity::inactive, t);
}
void activating_since(PodAutoscaler& pa, TimePoint t) {
  pa.set_activity(Activity::activating, t);
}

void run(const std::vector<Row>& rows, const std::function<void(AutoscalerConfig&)>& base = {}) {
  for (const Row& row : rows) {
    SCOPED_TRACE(row.label);
    AutoscalerConfig config = knative_test_config();
    if (base) base(config);
    config.min_scale = row.min_scale;
    config.max_scale = row.max_scale;
    if (row.config) row.config(config);
    PodAutoscaler pa(config, kNow);
    // Knative's test SKS is in serve mode with no activator endpoints: the buffer is not in the
    // path.
    pa.set_buffer_in_path_since(std::nullopt);
    if (row.pa) row.pa(pa);
    const ScaleOutcome out = pa.scale(kNow, row.scale_to);
    EXPECT_EQ(out.want, row.want_replicas);
    EXPECT_EQ(out.apply && out.want != row.start_replicas, row.want_scaling);
  }
}

TEST(PodAutoscaler, KnativeTestScalerTable) {
  const auto window45 = [](AutoscalerConfig& c) { c.stable_window = kPaStableWindow; };
  run({
      {"waits to scale to zero (just before idle period)", 1, 0, 0, 0, 1, false,
       [](auto& pa) { active_since(pa, kNow - kStableWindow + 1s); }},
      {"waits to scale to zero (just before idle period), custom PA window", 1, 0, 0, 0, 1, false,
       [](auto& pa) { active_since(pa, kNow - kPaStableWindow + 1s); }, window45},
      {"custom PA window, check for standard window, no probe", 1, 0, 0, 0, 0, false,
       [](auto& pa) { active_since(pa, kNow - kStableWindow); }, window45},
      {"scale to 1 waiting for idle expires", 10, 0, 0, 0, 1, true,
       [](auto& pa) { active_since(pa, kNow - kStableWindow + 1s); }},
      {"waits to scale to zero after idle period", 1, 0, 0, 0, 0, false,
       [](auto& pa) { active_since(pa, kNow - kStableWindow); }},
      {"waits to scale to zero after idle period; sks in proxy mode", 1, 0, 0, 0, 0, false,
       [](auto& pa) {
         active_since(pa, kNow - kStableWindow);
         pa.set_buffer_in_path_since(kNow);
       }},
      {"waits to scale to zero after idle period (custom PA window)", 1, 0, 0, 0, 0, false,
       [](auto& pa) { active_since(pa, kNow - kPaStableWindow); }, window45},
      // The revision's retention annotation "0" overrides the ConfigMap's 2 × grace: 0 is what
      // applies.
      {"can scale to zero after grace period, but 0 PA retention", 1, 0, 0, 0, 0, true,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod); },
       [](auto& c) { c.scale_to_zero_pod_retention_period = 0s; }},
      {"can't scale to zero after grace period, but before last pod retention", 1, 0, 0, 0, 0,
       false, [](auto& pa) { inactive_since(pa, kNow - kGracePeriod); },
       [](auto& c) { c.scale_to_zero_pod_retention_period = 2 * kGracePeriod; }},
      {"can't scale to zero after grace period, but before last pod retention, pa defined", 1, 0, 0,
       0, 0, false, [](auto& pa) { inactive_since(pa, kNow - kGracePeriod); },
       [](auto& c) { c.scale_to_zero_pod_retention_period = 2 * kGracePeriod; }},
      {"scale to zero after grace period, and after last pod retention", 1, 0, 0, 0, 0, true,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod); },
       [](auto& c) { c.scale_to_zero_pod_retention_period = kGracePeriod; }},
      {"scale to zero after grace period", 1, 0, 0, 0, 0, true,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod); }},
      {"waits to scale to zero (just before grace period)", 1, 0, 0, 0, 0, false,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod + 1s); }},
      {"waits to scale to zero (just before grace period, sks short)", 1, 0, 0, 0, 0, false,
       [](auto& pa) {
         inactive_since(pa, kNow - kGracePeriod + 1s);
         pa.set_buffer_in_path_since(kNow - (kGracePeriod - 1s));
       }},
      {"waits to scale to zero (just before grace period, sks in proxy long) and last pod timeout "
       "positive",
       1, 0, 0, 0, 0, true,
       [](auto& pa) {
         inactive_since(pa, kNow - kGracePeriod + 1s);
         pa.set_buffer_in_path_since(kNow - kGracePeriod);
       },
       [](auto& c) { c.scale_to_zero_pod_retention_period = 42s; }},
      {"waits to scale to zero (just before grace period, sks in proxy long)", 1, 0, 0, 0, 0, true,
       [](auto& pa) {
         inactive_since(pa, kNow - kGracePeriod + 1s);
         pa.set_buffer_in_path_since(kNow - kGracePeriod);
       }},
      {"scale to zero with TBC=-1", 1, 0, 0, 0, 0, true,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod); },
       [](auto& c) { c.target_burst_capacity = -1; }},
      {"waits to scale to zero while activating until after deadline exceeded", 1, 0, 0, 0, -1,
       false, [](auto& pa) { activating_since(pa, kNow - kActivationTimeout / 2); }},
      {"scale to zero while activating after deadline exceeded", 1, 0, 0, 0, 0, true,
       [](auto& pa) { activating_since(pa, kNow - (kActivationTimeout + 1s)); }},
      // The revision's progress deadline of 5 s: activation timeout 5 s + 30 s.
      {"scale to zero while activating after revision deadline exceeded", 1, 0, 0, 0, 0, true,
       [](auto& pa) { activating_since(pa, kNow - (5s + 30s + 1s)); },
       [](auto& c) { c.activation_timeout = 5s + 30s; }},
      {"scale down to minScale before grace period", 10, 0, 2, 0, 2, true,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod + 1s); }},
      {"scale down to minScale after grace period", 10, 0, 2, 0, 2, true,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod); }},
      {"scale to zero ignore last pod retention if  revision is unreachable", 1, 0, 0, 0, 0, true,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod); },
       [](auto& c) {
         c.scale_to_zero_pod_retention_period = 10 * kGracePeriod;
         c.reachable = false;
       }},
      {"can't scale to zero if revision is unreachable, but before deadline", 1, 0, 0, 0, 0, false,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod + 1s); },
       [](auto& c) {
         c.scale_to_zero_pod_retention_period = 10 * kGracePeriod;
         c.reachable = false;
       }},
      {"ignore minScale if unreachable", 10, 0, 2, 0, 0, true,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod); },
       [](auto& c) { c.reachable = false; }},
      // Reachability unknown counts as reachable (only "unreachable" lifts min-scale).
      {"observe minScale if reachability unknown", 10, 0, 2, 0, 2, true,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod); }},
      // A new PodAutoscaler is activating (its Active condition is Unknown).
      {"scales up", 1, 10, 0, 0, 10, true, {}},
      {"scales up to maxScale", 1, 10, 0, 8, 8, true, {}},
      {"scale up inactive revision", 1, 10, 0, 0, 10, true,
       [](auto& pa) { inactive_since(pa, kNow - kGracePeriod / 2); }},
      {"does not scale up from zero with no metrics", 0, -1, 0, 0, -1, false,
       [](auto& pa) { inactive_since(pa, kNow); }},
      {"scales up from zero to desired one", 0, 1, 0, 0, 1, true, {}},
      {"scales up from zero to desired high scale", 0, 10, 0, 0, 10, true, {}},
      {"negative scale does not scale", 12, -1, 0, 0, -1, false,
       [](auto& pa) { active_since(pa, kNow); }},
      {"initial scale attained, but now time to scale down", 2, 0, 0, 0, 1, true,
       [](auto& pa) {
         active_since(pa, kNow - 2min);
         pa.set_scale_target_initialized();
       },
       [](auto& c) { c.initial_scale = 2; }},
      {"haven't scaled to initial scale, override desired scale with initial scale", 0, 1, 0, 0, 2,
       true, [](auto& pa) { activating_since(pa, kNow); }, [](auto& c) { c.initial_scale = 2; }},
      {"initial scale reached for the first time", 5, 1, 0, 0, 5, false,
       [](auto& pa) { activating_since(pa, kNow); }, [](auto& c) { c.initial_scale = 5; }},
      {"reaching initial scale zero", 0, 0, 0, 0, 0, false,
       [](auto& pa) { inactive_since(pa, kNow); },
       [](auto& c) {
         c.allow_zero_initial_scale = true;
         c.initial_scale = 0;
       }},
      {"unreachable revision with initialScale > 1 can scale to 0", 2, 0, 0, 0, 1, true,
       [](auto& pa) { active_since(pa, kNow - 2min); },
       [](auto& c) {
         c.initial_scale = 2;
         c.reachable = false;
       }},
  });
}

TEST(PodAutoscaler, KnativeTestDisableScaleToZero) {
  const auto disabled = [](AutoscalerConfig& c) { c.enable_scale_to_zero = false; };
  const auto active_now = [](PodAutoscaler& pa) { active_since(pa, kNow); };
  run(
      {
          {"EnableScaleToZero == false and minScale == 0", 10, 0, 0, 0, 1, true, active_now},
          {"EnableScaleToZero == false and minScale == 2", 10, 0, 2, 0, 2, true, active_now},
          {"EnableScaleToZero == false and desire pod is -1(initial value)", 10, -1, 0, 0, -1,
           false, active_now},
      },
      disabled);
}

// kpa.go computeActiveCondition's table (want, ready vs. the active threshold, current status →
// new).
TEST(PodAutoscaler, ActiveConditionFollowsKnativesTable) {
  struct Case {
    std::int32_t want, ready;
    Activity before, after;
  };
  // Initialized, min-scale 0: the threshold is 1 ready pod.
  const Case cases[] = {
      {0, 3, Activity::active, Activity::inactive},
      {2, 0, Activity::inactive, Activity::activating},
      {2, 1, Activity::activating, Activity::active},
      {-1, 0, Activity::inactive, Activity::inactive},
      {-1, 0, Activity::activating, Activity::activating},
      {-1, 0, Activity::active, Activity::activating},
      {-1, 1, Activity::inactive, Activity::inactive},
      {-1, 1, Activity::activating, Activity::active},
      {-1, 1, Activity::active, Activity::active},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("want " + std::to_string(c.want) + " ready " + std::to_string(c.ready) + " from " +
                 activity_name(c.before));
    PodAutoscaler pa(knative_test_config(), kNow);
    pa.set_scale_target_initialized();
    pa.set_activity(c.before, kNow - 1h);
    pa.observe(kNow, c.want, -1, c.ready);
    EXPECT_EQ(pa.activity(), c.after);
    // The transition time moves only on a change.
    EXPECT_EQ(pa.activity_since(), c.before == c.after ? kNow - 1h : kNow);
  }
  // Not yet initialized, initial scale 0: the threshold is 0, so the revision is inactive at once
  // (and initialized); later the threshold is 1.
  AutoscalerConfig zero = knative_test_config();
  zero.allow_zero_initial_scale = true;
  zero.initial_scale = 0;
  PodAutoscaler pa(zero, kNow);
  pa.observe(kNow, kScaleUnknown, -1, 0);
  EXPECT_EQ(pa.activity(), Activity::inactive);
  EXPECT_TRUE(pa.scale_target_initialized());
}

TEST(PodAutoscaler, BufferLeavesThePathOnlyWhenPodsAreWantedAndABurstFits) {
  PodAutoscaler pa(knative_test_config(), kNow);
  EXPECT_TRUE(pa.buffer_in_path());  // a new revision starts behind the buffer (SKS in proxy mode)
  pa.observe(kNow + 1s, 2, 0, 2);
  EXPECT_FALSE(pa.buffer_in_path());
  pa.observe(kNow + 2s, 2, -1, 2);
  EXPECT_TRUE(pa.buffer_in_path());
  EXPECT_EQ(pa.buffer_in_path_for(kNow + 5s), 3s);
  pa.observe(kNow + 6s, 0, 5, 2);  // deactivated: behind the buffer whatever the capacity
  EXPECT_EQ(pa.buffer_in_path_for(kNow + 6s), 4s);
}

}  // namespace
}  // namespace sluice::autoscaler
