// Feeding and reading the four windows (stable/panic × concurrency/RPS) of a revision.
#include "autoscaler/revision_metrics.h"

namespace sluice::autoscaler {

RevisionMetrics::RevisionMetrics(Duration stable_window, Duration panic_window, Duration bucket_size,
                                 Averaging averaging)
    : concurrency_stable_(stable_window, bucket_size, averaging),
      concurrency_panic_(panic_window, bucket_size, averaging),
      rps_stable_(stable_window, bucket_size, averaging),
      rps_panic_(panic_window, bucket_size, averaging) {}

RevisionMetrics::RevisionMetrics(const AutoscalerConfig& config)
    : RevisionMetrics(config.stable_window, panic_window(config), config.bucket_size, config.aggregation) {}

void RevisionMetrics::record(TimePoint now, const Stat& stat) {
  const double concurrency = stat.average_concurrent_requests - stat.average_proxied_concurrent_requests;
  const double rps = stat.request_count - stat.proxied_request_count;
  concurrency_stable_.record(now, concurrency);
  concurrency_panic_.record(now, concurrency);
  rps_stable_.record(now, rps);
  rps_panic_.record(now, rps);
}

void RevisionMetrics::resize(Duration stable_window, Duration panic_window, TimePoint now) {
  concurrency_stable_.resize(stable_window, now);
  concurrency_panic_.resize(panic_window, now);
  rps_stable_.resize(stable_window, now);
  rps_panic_.resize(panic_window, now);
}

std::optional<ObservedValues> RevisionMetrics::concurrency(TimePoint now) const {
  if (concurrency_stable_.is_empty(now)) return std::nullopt;
  return ObservedValues{concurrency_stable_.average(now), concurrency_panic_.average(now)};
}

std::optional<ObservedValues> RevisionMetrics::rps(TimePoint now) const {
  if (rps_stable_.is_empty(now)) return std::nullopt;
  return ObservedValues{rps_stable_.average(now), rps_panic_.average(now)};
}

std::optional<ObservedValues> RevisionMetrics::observed(ScalingMetric metric, TimePoint now) const {
  return metric == ScalingMetric::rps ? rps(now) : concurrency(now);
}

}  // namespace sluice::autoscaler
