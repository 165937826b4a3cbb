// One revision's autoscaling loop; see revision_scaler.h.
#include "autoscaler/revision_scaler.h"

#include "common/log.h"

namespace sluice::autoscaler {

RevisionScaler::RevisionScaler(std::string name, const AutoscalerConfig& config, std::int32_t scale,
                               TimePoint now, StatsSource& stats, ScaleTarget& target)
    : name_(std::move(name)), kpa_(config, 0, now), stats_(stats), target_(target) {
  kpa_.set_scale(scale);
}

void RevisionScaler::stat_tick(TimePoint now) {
  const auto period = stats_.report(now);
  if (period.seconds <= 0) return;
  Stat stat;
  stat.average_concurrent_requests = period.average_concurrency;
  stat.request_count = static_cast<double>(period.requests) / period.seconds;
  concurrency_ = stat.average_concurrent_requests;
  rps_ = stat.request_count;
  if (kpa_.record(now, stat)) decide(now);
}

void RevisionScaler::decide(TimePoint now) {
  const std::int32_t ready = target_.ready();
  const auto d = kpa_.decide(now, ready);
  if (d.desired_pods != desired_)
    log::info("scale").kv("event", "scale").kv("service", name_).kv("from", desired_).kv("to", d.desired_pods)
        .kv("ready", ready).kv("observed_stable", d.observed_stable).kv("observed_panic", d.observed_panic)
        .kv("panicking", d.panicking).kv("decider", d.decider_pods)
        .kv("activity", activity_name(d.activity));
  if (d.activity != activity_)
    log::info("revision " + std::string(activity_name(d.activity)))
        .kv("event", "activity").kv("service", name_).kv("activity", activity_name(d.activity))
        .kv("desired", d.desired_pods).kv("ready", ready).kv("buffer_in_path", d.buffer_in_path);
  activity_ = d.activity;
  desired_ = d.desired_pods;
  target_.scale_to(d.desired_pods);
}

}  // namespace sluice::autoscaler
