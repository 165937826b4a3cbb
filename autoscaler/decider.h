// The KPA decision for one tick: from observed stable/panic values and the ready pod count to a desired
// pod count, with panic mode, rate clamps, activation scale, scale-down delay and excess burst capacity
// (Knative's pkg/autoscaler/scaling/autoscaler.go).
#pragma once

#include <cstdint>
#include <optional>

#include "autoscaler/config.h"
#include "autoscaler/sliding_max.h"

namespace sluice::autoscaler {

// What the decider needs, resolved from the configuration (Knative's DeciderSpec).
struct DeciderSpec {
  double target_value = 70;          // per-pod value to aim for: total_value × utilization
  double total_value = 100;          // per-pod capacity: container concurrency, the target, or the default
  double target_burst_capacity = 211;
  double panic_threshold = 2;        // a fraction: panic-threshold-percentage / 100
  double max_scale_up_rate = 1000;
  double max_scale_down_rate = 2;
  Duration stable_window = std::chrono::seconds(60);
  Duration scale_down_delay = Duration::zero();
  Duration tick_interval = std::chrono::seconds(2);  // granularity of the scale-down delay window
  std::int32_t activation_scale = 0;
  bool reachable = true;             // unreachable revisions may drop to zero at once
};

DeciderSpec decider_spec(const AutoscalerConfig& config);

struct ScaleResult {
  std::int32_t desired_pod_count = 0;
  // Spare capacity beyond the target burst: ready × total − TBC − panic value, floored; −1 when TBC is −1,
  // 0 when TBC is 0. Negative means a burst of TBC would not fit: keep the cold-start buffer in the path.
  std::int32_t excess_burst_capacity = 0;
  bool panicking = false;
};

class Decider {
 public:
  // `ready_pods` at creation: with more than one, the decider starts in panic mode holding that count,
  // because a restarted autoscaler has lost its metric history and must not scale down on it.
  Decider(DeciderSpec spec, std::int32_t ready_pods, TimePoint now);

  ScaleResult decide(TimePoint now, double observed_stable, double observed_panic, std::int32_t ready_pods);

  void update(const DeciderSpec& spec);
  bool panicking() const { return panic_since_.has_value(); }

 private:
  DeciderSpec spec_;
  std::optional<TimePoint> panic_since_;  // last tick over the panic threshold, while in panic mode
  std::int32_t max_panic_pods_ = 0;       // the most pods wanted since panic began: never less in panic
  std::optional<SlidingMax> delay_window_;
};

}  // namespace sluice::autoscaler
