// Wiring of the per-service autoscaler: a multiscaler tick (decider on valid metrics only), then
// the reconciler (bounds, scale-to-zero timing, buffer, Active condition), once more when the
// Active condition changed, as Knative's reconciler runs again on its own status change.
#include "autoscaler/kpa.h"

#include <cmath>

namespace sluice::autoscaler {

std::int32_t initial_excess_burst_capacity(const AutoscalerConfig& config,
                                           const DeciderSpec& spec) {
  const double tbc = spec.target_burst_capacity;
  if (tbc == -1 || tbc == 0) return static_cast<std::int32_t>(tbc);
  // Go's int32(float) conversion truncates.
  return static_cast<std::int32_t>(std::trunc(config.initial_scale * spec.total_value - tbc));
}

Kpa::Kpa(const AutoscalerConfig& config, std::int32_t ready_pods, TimePoint now)
    : config_(config),
      spec_(decider_spec(config)),
      metrics_(config),
      decider_(spec_, ready_pods, now),
      pa_(config, now),
      excess_burst_capacity_(initial_excess_burst_capacity(config, spec_)),
      replicas_(ready_pods) {}

bool Kpa::record(TimePoint now, const Stat& stat) {
  metrics_.record(now, stat);
  return decider_pods_ == 0 && stat.average_concurrent_requests != 0;
}

void Kpa::update(const AutoscalerConfig& config, TimePoint now) {
  if (config.aggregation != config_.aggregation) {
    // Knative keeps a metric's averaging from its creation; here a changed algorithm takes effect
    // with fresh windows (the decider and the reconciler keep their state).
    metrics_ = RevisionMetrics(config);
  } else {
    metrics_.resize(config.stable_window, panic_window(config), now);
  }
  config_ = config;
  spec_ = decider_spec(config);
  decider_.update(spec_);
  pa_.update(config);
}

Decision Kpa::decide(TimePoint now, std::int32_t ready_pods) {
  Decision d;
  d.ready_pods = ready_pods;
  if (const auto observed = metrics_.observed(config_.metric, now)) {
    const ScaleResult r = decider_.decide(now, observed->stable, observed->panic, ready_pods);
    d.valid = true;
    d.observed_stable = observed->stable;
    d.observed_panic = observed->panic;
    decider_pods_ = r.desired_pod_count;
    excess_burst_capacity_ = r.excess_burst_capacity;
  }
  for (int pass = 0; pass < 2; ++pass) {
    const ScaleOutcome out = pa_.scale(now, decider_pods_);
    if (out.apply && out.want != replicas_) {
      replicas_ = out.want;
      d.scaled = true;
    }
    d.want = out.want;
    if (!pa_.observe(now, out.want, excess_burst_capacity_, ready_pods)) break;
  }
  d.decider_pods = decider_pods_;
  d.desired_pods = replicas_;
  d.excess_burst_capacity = excess_burst_capacity_;
  d.panicking = decider_.panicking();
  d.buffer_in_path = pa_.buffer_in_path();
  d.activity = pa_.activity();
  return d;
}

}  // namespace sluice::autoscaler
