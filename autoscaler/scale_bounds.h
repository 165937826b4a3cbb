// What turns the decider's pod count into the scale to apply: min/max scale, initial scale until first
// reached, and scale to zero only after the grace period (Knative's KPA scaler, pkg/reconciler/autoscaling/kpa).
#pragma once

#include <cstdint>
#include <optional>

#include "autoscaler/config.h"

namespace sluice::autoscaler {

class ScaleBounds {
 public:
  explicit ScaleBounds(const AutoscalerConfig& config);

  // The scale to apply for the decider's `desired` at `now`, with `ready_pods` ready.
  std::int32_t apply(TimePoint now, std::int32_t desired, std::int32_t ready_pods);

  // The scale to keep while there is no metric data: `ready_pods`, but within min/max scale and not below
  // an initial scale not yet reached (Knative applies those bounds while a revision is activating).
  std::int32_t hold(std::int32_t ready_pods);

  // True once the scale target reached the initial scale (from then on initial-scale no longer applies).
  bool initialized() const { return initialized_; }

 private:
  std::int32_t min_scale_, max_scale_, initial_scale_;
  bool enable_scale_to_zero_;
  bool reachable_;
  Duration zero_after_;                     // max(grace period, pod retention period)
  std::int32_t bounded(std::int32_t desired, std::int32_t ready_pods);

  bool initialized_ = false;
  std::optional<TimePoint> zero_wanted_since_;
};

}  // namespace sluice::autoscaler
