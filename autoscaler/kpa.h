// One service's (revision's) autoscaler: stats in, a decision per tick out. Knative's pieces in one
// object: the metric collector's windows, the decider and the multiscaler's record of its last
// valid result (pkg/autoscaler/scaling), and the KPA reconciler's bounds and scale-to-zero timing
// (PodAutoscaler). The caller owns the clock, the 2 s ticker and applying the scale.
#pragma once

#include <cstdint>

#include "autoscaler/config.h"
#include "autoscaler/decider.h"
#include "autoscaler/pod_autoscaler.h"
#include "autoscaler/revision_metrics.h"
#include "autoscaler/stat.h"

namespace sluice::autoscaler {

struct Decision {
  bool valid = false;  // false: no stat in the last stable window; the decider's last result stands
  double observed_stable = 0;  // the scaling metric over the stable window
  double observed_panic = 0;   // ... and over the panic window
  std::int32_t ready_pods = 0;
  // The decider's last valid count (Knative's DeciderStatus.DesiredScale), before min/max/initial
  // scale and the scale-to-zero timing; kScaleUnknown (-1) until its first valid decision.
  std::int32_t decider_pods = kScaleUnknown;
  // The reconciler's `want` (kScaleUnknown possible): 0 while the revision is deactivated but its
  // replicas are kept (grace period, pod retention).
  std::int32_t want = kScaleUnknown;
  bool scaled = false;            // this decision applied a new scale to the target
  std::int32_t desired_pods = 0;  // the scale target's scale after this decision: apply this
  std::int32_t excess_burst_capacity = 0;
  bool panicking = false;
  // The cold-start buffer (Knative's activator) stays in front of the instances unless some are
  // wanted and a burst of target-burst-capacity fits in the spare capacity.
  bool buffer_in_path = true;
  Activity activity = Activity::activating;
};

class Kpa {
 public:
  // `ready_pods` at creation decides whether the decider starts in panic mode (see Decider) and is
  // the scale target's scale until the KPA applies one.
  Kpa(const AutoscalerConfig& config, std::int32_t ready_pods, TimePoint now);

  // Records a merged stat. Returns true when the caller should decide at once instead of waiting
  // for the next tick: the decider's last count was zero and this stat shows requests (the
  // multiscaler's "poke"; on the decider's raw count, so min-scale and disabled scale-to-zero do
  // not hide it).
  bool record(TimePoint now, const Stat& stat);

  Decision decide(TimePoint now, std::int32_t ready_pods);

  // A changed configuration, in place as Knative updates a running decider and metric: the windows
  // are resized keeping their history, the panic state and the scale-to-zero timing carry on.
  void update(const AutoscalerConfig& config, TimePoint now);

  // The caller changed the scale target itself (e.g. started the initial instances).
  void set_scale(std::int32_t replicas) { replicas_ = replicas; }

  const AutoscalerConfig& config() const { return config_; }
  const DeciderSpec& spec() const { return spec_; }
  const PodAutoscaler& pod_autoscaler() const { return pa_; }

 private:
  AutoscalerConfig config_;
  DeciderSpec spec_;
  RevisionMetrics metrics_;
  Decider decider_;
  PodAutoscaler pa_;
  std::int32_t decider_pods_ = kScaleUnknown;
  std::int32_t excess_burst_capacity_;
  std::int32_t replicas_;
};

// The multiscaler's excess burst capacity before the first decision: initial scale × capacity per
// pod − target burst capacity (−1 and 0 stay as they are).
std::int32_t initial_excess_burst_capacity(const AutoscalerConfig& config, const DeciderSpec& spec);

}  // namespace sluice::autoscaler
