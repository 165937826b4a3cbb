// The KPA reconciler's state machine. Knative re-enqueues the PodAutoscaler for the moment a timer
// runs out; sluice re-evaluates on every decision tick instead, which reaches the same outcome at
// the tick.
#include "autoscaler/pod_autoscaler.h"

#include <algorithm>

namespace sluice::autoscaler {

const char* activity_name(Activity a) {
  switch (a) {
    case Activity::activating:
      return "activating";
    case Activity::active:
      return "active";
    case Activity::inactive:
      return "inactive";
  }
  return "?";
}

PodAutoscaler::PodAutoscaler(const AutoscalerConfig& config, TimePoint now)
    : config_(config), activity_since_(now), buffer_since_(now) {}

Duration PodAutoscaler::buffer_in_path_for(TimePoint now) const {
  return buffer_since_ ? now - *buffer_since_ : Duration::zero();
}

void PodAutoscaler::set_activity(Activity a, TimePoint since) {
  activity_ = a;
  activity_since_ = since;
}

void PodAutoscaler::mark(Activity a, TimePoint now) {
  // A condition's transition time moves only when its status changes.
  if (activity_ != a) set_activity(a, now);
}

// pa.ScaleBounds: an unreachable revision (no route sends it traffic) has no minimum.
std::int32_t PodAutoscaler::min_scale() const {
  return config_.reachable ? config_.min_scale : 0;
}

// kpa.go activeThreshold: the ready pods that make the revision active.
std::int32_t PodAutoscaler::active_threshold() const {
  if (!initialized_) return std::max(min_scale(), config_.initial_scale);
  return std::max(min_scale(), 1);
}

ScaleOutcome PodAutoscaler::scale(TimePoint now, std::int32_t desired) const {
  if (desired < 0 && activity_ != Activity::activating) return {desired, false};  // no metrics yet
  std::int32_t lo = min_scale();
  // Until the initial scale was reached once it is a minimum, unless nothing routes to the
  // revision.
  if (config_.initial_scale > 1 && !initialized_ && config_.reachable)
    lo = std::max(lo, config_.initial_scale);
  if (desired < lo) desired = lo;
  if (config_.max_scale != 0 && desired > config_.max_scale) desired = config_.max_scale;
  return handle_scale_to_zero(now, desired);
}

ScaleOutcome PodAutoscaler::handle_scale_to_zero(TimePoint now, std::int32_t desired) const {
  if (desired != 0) return {desired, true};
  if (!config_.enable_scale_to_zero) return {1, true};
  const Duration in_state = now - activity_since_;
  switch (activity_) {
    case Activity::activating:
      // Stuck activating past the deadline: presume it cannot succeed and scale to zero.
      if (in_state > config_.activation_timeout) return {0, true};
      return {kScaleUnknown, false};
    case Activity::active:
      // Deactivate (zero, not applied: the replicas stay) only after a whole stable window active;
      // until then at most one pod.
      if (in_state >= config_.stable_window) return {0, false};
      return {1, true};
    case Activity::inactive: {
      const Duration retention =
          config_.reachable ? config_.scale_to_zero_pod_retention_period : Duration::zero();
      if (in_state >= std::max(config_.scale_to_zero_grace_period, retention)) return {0, true};
      // The retention period is a hard deadline, whatever the buffer does.
      if (retention > Duration::zero() && in_state < retention) return {0, false};
      // The buffer has been in the path for the grace period already: requests no longer reach the
      // pods.
      if (config_.scale_to_zero_grace_period - buffer_in_path_for(now) <= Duration::zero())
        return {0, true};
      return {0, false};
    }
  }
  return {0, false};
}

bool PodAutoscaler::observe(TimePoint now, std::int32_t want, std::int32_t excess_burst_capacity,
                            std::int32_t ready_pods) {
  // kpa.go: the buffer leaves the path only when pods are wanted and a burst fits in the spare
  // capacity.
  const bool serve = want > 0 && excess_burst_capacity >= 0;
  if (serve) {
    buffer_since_.reset();
  } else if (!buffer_since_) {
    buffer_since_ = now;
  }

  // kpa.go computeActiveCondition.
  const Activity before = activity_;
  const std::int32_t min_ready = active_threshold();
  if (ready_pods >= min_ready) initialized_ = true;
  if (want == 0 || min_ready == 0) {
    mark(Activity::inactive, now);
  } else if (ready_pods < min_ready) {
    if (want > 0 || activity_ != Activity::inactive) mark(Activity::activating, now);
  } else if (want > 0 || activity_ != Activity::inactive) {
    mark(Activity::active, now);
  }
  return activity_ != before;
}

}  // namespace sluice::autoscaler
