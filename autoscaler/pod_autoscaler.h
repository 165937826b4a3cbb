// What Knative's KPA reconciler does around the decider (pkg/reconciler/autoscaling/kpa/kpa.go and
// scaler.go, with the PodAutoscaler status of pa_lifecycle.go): min/max/initial scale,
// reachability, and the scale-to-zero timing — active for a stable window first, then zero once
// inactive for max(grace period, pod retention), or sooner once the cold-start buffer (Knative's
// activator) has been in the path for the grace period.
#pragma once

#include <cstdint>
#include <optional>

#include "autoscaler/config.h"

namespace sluice::autoscaler {

// The PodAutoscaler's Active condition: Unknown (activating), True (active), False (inactive).
enum class Activity { activating, active, inactive };

const char* activity_name(Activity a);

// Knative's "desired scale unknown": no metric-based decision yet.
inline constexpr std::int32_t kScaleUnknown = -1;

// What scaler.go's scale() returns: the scale it wants (kScaleUnknown possible) and whether that
// scale is to be applied to the scale target now. Not applied means the replicas are left as they
// are.
struct ScaleOutcome {
  std::int32_t want = kScaleUnknown;
  bool apply = false;
};

class PodAutoscaler {
 public:
  // A new revision: activating since `now`, scale target not yet initialized, buffer in the path.
  PodAutoscaler(const AutoscalerConfig& config, TimePoint now);

  // scaler.go scale(): the decider's `desired` (kScaleUnknown before its first valid decision)
  // bounded by min/max scale and the initial scale, then the scale-to-zero timing. Does not change
  // the state.
  ScaleOutcome scale(TimePoint now, std::int32_t desired) const;

  // kpa.go after scale(): whether the buffer stays in the path (unless pods are wanted and a burst
  // of target-burst-capacity fits) and the Active condition from `want` and the ready pods. Returns
  // true when the Active condition changed (Knative then reconciles again at once).
  bool observe(TimePoint now, std::int32_t want, std::int32_t excess_burst_capacity,
               std::int32_t ready_pods);

  // A changed configuration (bounds, windows, grace, retention, reachability); the state is kept.
  void update(const AutoscalerConfig& config) { config_ = config; }

  Activity activity() const { return activity_; }
  TimePoint activity_since() const { return activity_since_; }
  bool scale_target_initialized() const { return initialized_; }
  bool buffer_in_path() const { return buffer_since_.has_value(); }
  // How long the buffer has been in the path (Knative's SKS ProxyFor), zero when it is not.
  Duration buffer_in_path_for(TimePoint now) const;

  // The state a reconciler would have read back; for tests reproducing Knative's tables.
  void set_activity(Activity a, TimePoint since);
  void set_buffer_in_path_since(std::optional<TimePoint> since) { buffer_since_ = since; }
  void set_scale_target_initialized() { initialized_ = true; }

 private:
  std::int32_t min_scale() const;
  std::int32_t active_threshold() const;
  ScaleOutcome handle_scale_to_zero(TimePoint now, std::int32_t desired) const;
  void mark(Activity a, TimePoint now);

  AutoscalerConfig config_;
  Activity activity_ = Activity::activating;
  TimePoint activity_since_;
  bool initialized_ = false;
  std::optional<TimePoint> buffer_since_;
};

}  // namespace sluice::autoscaler
