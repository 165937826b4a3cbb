// One service's autoscaler: stats in, a decision per tick out. Combines the metric windows, the decider
// and the scale bounds; the caller owns the clock, the 2 s ticker and applying the scale.
#pragma once

#include <cstdint>

#include "autoscaler/config.h"
#include "autoscaler/decider.h"
#include "autoscaler/revision_metrics.h"
#include "autoscaler/scale_bounds.h"
#include "autoscaler/stat.h"

namespace sluice::autoscaler {

struct Decision {
  bool valid = false;            // false: no stat in the last stable window, so keep the current scale
                                 // (within min/max scale, and initial scale until first reached)
  double observed_stable = 0;    // the scaling metric over the stable window
  double observed_panic = 0;     // ... and over the panic window
  std::int32_t ready_pods = 0;
  std::int32_t decider_pods = 0; // the decider's count, before min/max/initial scale and the zero grace
  std::int32_t desired_pods = 0; // the scale to apply
  std::int32_t excess_burst_capacity = 0;
  bool panicking = false;
  // The cold-start buffer (Knative's activator) stays in front of the instances unless some are wanted
  // and a burst of target-burst-capacity fits in the spare capacity.
  bool buffer_in_path = true;
};

class Kpa {
 public:
  // `ready_pods` at creation decides whether the KPA starts in panic mode (see Decider).
  Kpa(const AutoscalerConfig& config, std::int32_t ready_pods, TimePoint now);

  // Records a merged stat. Returns true when the caller should decide at once instead of waiting for the
  // next tick: the last decision was zero pods and this stat shows requests (Knative's "poke").
  bool record(TimePoint now, const Stat& stat);

  Decision decide(TimePoint now, std::int32_t ready_pods);

  const AutoscalerConfig& config() const { return config_; }
  const DeciderSpec& spec() const { return spec_; }

 private:
  AutoscalerConfig config_;
  DeciderSpec spec_;
  RevisionMetrics metrics_;
  Decider decider_;
  ScaleBounds bounds_;
  std::int32_t last_desired_;
};

}  // namespace sluice::autoscaler
