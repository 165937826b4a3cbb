// The stable and panic windows of one revision (service), fed with merged stats once per scrape; the
// KPA reads its observed values from here (Knative's metric collector).
#pragma once

#include <optional>

#include "autoscaler/bucketed_window.h"
#include "autoscaler/config.h"
#include "autoscaler/stat.h"

namespace sluice::autoscaler {

struct ObservedValues {
  double stable = 0;  // average over the stable window
  double panic = 0;   // average over the panic window
};

class RevisionMetrics {
 public:
  RevisionMetrics(Duration stable_window, Duration panic_window, Duration bucket_size, Averaging averaging);
  explicit RevisionMetrics(const AutoscalerConfig& config);

  // Records one merged stat (all pods, or the activator's own report) at `now`. Load that went through the
  // activator is subtracted, because the activator reports it too.
  void record(TimePoint now, const Stat& stat);

  // New window lengths, keeping the history that fits (Knative's metric update resizes its buckets).
  void resize(Duration stable_window, Duration panic_window, TimePoint now);

  // Observed concurrency / requests per second as of `now`; nullopt when no stat arrived in the last
  // stable window (no data: the KPA makes no decision then).
  std::optional<ObservedValues> concurrency(TimePoint now) const;
  std::optional<ObservedValues> rps(TimePoint now) const;
  std::optional<ObservedValues> observed(ScalingMetric metric, TimePoint now) const;

 private:
  BucketedWindow concurrency_stable_, concurrency_panic_;
  BucketedWindow rps_stable_, rps_panic_;
};

}  // namespace sluice::autoscaler
