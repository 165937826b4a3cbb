// Bounds and scale-to-zero timing. Knative's reconciler gates zero on the PA having been active for a
// stable window and then backed by the activator for the grace period; here the decider's own zero
// (which already needs a stable window without traffic) must persist for the grace period.
#include "autoscaler/scale_bounds.h"

#include <algorithm>

namespace sluice::autoscaler {

ScaleBounds::ScaleBounds(const AutoscalerConfig& config)
    : min_scale_(config.min_scale),
      max_scale_(config.max_scale),
      initial_scale_(config.initial_scale),
      enable_scale_to_zero_(config.enable_scale_to_zero),
      reachable_(config.reachable),
      zero_after_(config.reachable ? std::max(config.scale_to_zero_grace_period,
                                              config.scale_to_zero_pod_retention_period)
                                   : config.scale_to_zero_grace_period) {}

std::int32_t ScaleBounds::bounded(std::int32_t desired, std::int32_t ready_pods) {
  if (!initialized_ && ready_pods >= initial_scale_) initialized_ = true;
  std::int32_t floor = min_scale_;
  // Until the initial scale was reached once, it acts as a minimum (unless the revision is unreachable).
  if (initial_scale_ > 1 && !initialized_ && reachable_) floor = std::max(floor, initial_scale_);
  if (desired < floor) desired = floor;
  if (max_scale_ != 0 && desired > max_scale_) desired = max_scale_;
  return desired;
}

std::int32_t ScaleBounds::hold(std::int32_t ready_pods) { return bounded(ready_pods, ready_pods); }

std::int32_t ScaleBounds::apply(TimePoint now, std::int32_t desired, std::int32_t ready_pods) {
  desired = bounded(desired, ready_pods);
  if (desired != 0) {
    zero_wanted_since_.reset();
    return desired;
  }
  if (!enable_scale_to_zero_) return 1;
  if (!zero_wanted_since_) zero_wanted_since_ = now;
  if (now - *zero_wanted_since_ >= zero_after_) return 0;
  // Within the grace period: down to at most one pod, none if there are none.
  return std::min(ready_pods, 1);
}

}  // namespace sluice::autoscaler
