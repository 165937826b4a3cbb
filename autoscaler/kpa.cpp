// Wiring of the per-service autoscaler.
#include "autoscaler/kpa.h"

namespace sluice::autoscaler {

Kpa::Kpa(const AutoscalerConfig& config, std::int32_t ready_pods, TimePoint now)
    : config_(config),
      spec_(decider_spec(config)),
      metrics_(config),
      decider_(spec_, ready_pods, now),
      bounds_(config),
      last_desired_(ready_pods) {}

bool Kpa::record(TimePoint now, const Stat& stat) {
  metrics_.record(now, stat);
  return last_desired_ == 0 && stat.average_concurrent_requests != 0;
}

Decision Kpa::decide(TimePoint now, std::int32_t ready_pods) {
  Decision d;
  d.ready_pods = ready_pods;
  const auto observed = metrics_.observed(config_.metric, now);
  if (!observed) {
    d.decider_pods = ready_pods;
    d.desired_pods = bounds_.hold(ready_pods);
    d.panicking = decider_.panicking();
    return d;
  }
  const ScaleResult r = decider_.decide(now, observed->stable, observed->panic, ready_pods);
  d.valid = true;
  d.observed_stable = observed->stable;
  d.observed_panic = observed->panic;
  d.decider_pods = r.desired_pod_count;
  d.desired_pods = bounds_.apply(now, r.desired_pod_count, ready_pods);
  d.excess_burst_capacity = r.excess_burst_capacity;
  d.panicking = r.panicking;
  d.buffer_in_path = !(d.desired_pods > 0 && r.excess_burst_capacity >= 0);
  last_desired_ = d.desired_pods;
  return d;
}

}  // namespace sluice::autoscaler
