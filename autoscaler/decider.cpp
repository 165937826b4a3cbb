// The KPA decider. Same arithmetic as Knative's so the same inputs give the same pod counts.
#include "autoscaler/decider.h"

#include <algorithm>
#include <cmath>

namespace sluice::autoscaler {

DeciderSpec decider_spec(const AutoscalerConfig& c) {
  DeciderSpec s;
  double total = 0;
  double utilization = 0;
  if (c.metric == ScalingMetric::rps) {
    total = c.rps_target_default;
    utilization = c.rps_target_utilization;
  } else {
    total = c.container_concurrency > 0 ? c.container_concurrency : c.container_concurrency_target_default;
    utilization = c.container_concurrency_target_fraction;
  }
  if (c.target > 0) {
    // An explicit target never exceeds what one pod admits (container concurrency).
    total = c.metric == ScalingMetric::concurrency && c.container_concurrency > 0
                ? std::min(c.target, static_cast<double>(c.container_concurrency))
                : c.target;
  }
  if (c.target_utilization_percentage) utilization = *c.target_utilization_percentage / 100;
  s.total_value = total;
  s.target_value = std::max(kTargetMin, total * utilization);
  s.target_burst_capacity = c.target_burst_capacity;
  s.panic_threshold = c.panic_threshold_percentage / 100.0;
  s.max_scale_up_rate = c.max_scale_up_rate;
  s.max_scale_down_rate = c.max_scale_down_rate;
  s.stable_window = c.stable_window;
  s.scale_down_delay = c.scale_down_delay;
  s.tick_interval = c.tick_interval;
  s.activation_scale = c.activation_scale;
  s.reachable = c.reachable;
  return s;
}

Decider::Decider(DeciderSpec spec, std::int32_t ready_pods, TimePoint now) : spec_(spec) {
  if (ready_pods > 1) panic_since_ = now;
  max_panic_pods_ = std::max(ready_pods, 0);
  if (spec_.scale_down_delay > Duration::zero()) {
    delay_window_.emplace(spec_.scale_down_delay, spec_.tick_interval);
  }
}

void Decider::update(const DeciderSpec& spec) {
  // Knative keeps the delay window built at creation; a changed delay takes effect on a new decider.
  spec_ = spec;
}

ScaleResult Decider::decide(TimePoint now, double observed_stable, double observed_panic,
                            std::int32_t ready_pods) {
  // With no ready pods, rates apply to one pod, so 0 → N is possible in one step.
  const double ready = std::max(1.0, static_cast<double>(ready_pods));
  // ceil() lets even a tiny rate grow (or shrink) by at least one pod.
  const double max_up = std::ceil(spec_.max_scale_up_rate * ready);
  const double max_down = spec_.reachable ? std::floor(ready / spec_.max_scale_down_rate) : 0.0;

  const double stable_pods = std::ceil(observed_stable / spec_.target_value);
  const double panic_pods = std::ceil(observed_panic / spec_.target_value);
  auto desired_stable = static_cast<std::int32_t>(std::min(std::max(stable_pods, max_down), max_up));
  auto desired_panic = static_cast<std::int32_t>(std::min(std::max(panic_pods, max_down), max_up));

  // Activation scale: any demand at all means at least this many pods (a scale-from-zero floor).
  if (spec_.activation_scale > 1) {
    if (stable_pods > 0) desired_stable = std::max(desired_stable, spec_.activation_scale);
    if (panic_pods > 0) desired_panic = std::max(desired_panic, spec_.activation_scale);
  }

  const bool over_threshold = panic_pods / ready >= spec_.panic_threshold;
  if (over_threshold) {
    panic_since_ = now;  // enter panic, or extend it
  } else if (panic_since_ && *panic_since_ + spec_.stable_window < now) {
    // A whole stable window since the last over-threshold tick: the surge is in the stable metric now.
    panic_since_.reset();
    max_panic_pods_ = 0;
  }

  std::int32_t desired = desired_stable;
  if (panic_since_) {
    // The stable value can exceed the panic one (load just fell): provision for the larger.
    desired = std::max(desired, desired_panic);
    max_panic_pods_ = std::max(max_panic_pods_, desired);
    desired = max_panic_pods_;  // never scale down in panic
  }

  if (spec_.reachable && delay_window_) {
    delay_window_->record(now, desired);
    desired = delay_window_->current();
  }

  ScaleResult result;
  result.desired_pod_count = desired;
  result.panicking = panic_since_.has_value();
  if (spec_.target_burst_capacity == 0) {
    result.excess_burst_capacity = 0;
  } else if (spec_.target_burst_capacity < 0) {
    result.excess_burst_capacity = -1;
  } else {
    // Based on the panic value, so the buffer does not flap in and out of the path on short dips.
    const double capacity = std::max(ready_pods, 0) * spec_.total_value;
    result.excess_burst_capacity = static_cast<std::int32_t>(
        std::floor(capacity - spec_.target_burst_capacity - observed_panic));
  }
  return result;
}

}  // namespace sluice::autoscaler
