// One revision's autoscaling loop, as Knative's autoscaler runs one KPA per revision: each second the
// revision's stats (a StatsSource; in the gateway, its cold-start buffer's RequestStats period: in flight
// plus waiting, and arrivals) go into its KPA; each decision (every 2 s, and at once when a stat changes the
// KPA's mind) goes to its ScaleTarget (in the gateway, the supervision of its instances). The two
// interfaces are where app/ meets this library; the unit tests give it a fake of each. One thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "autoscaler/kpa.h"
#include "autoscaler/time.h"
#include "metrics/request_stats.h"

namespace sluice::autoscaler {

// Where the stats come from.
class StatsSource {
 public:
  virtual ~StatsSource() = default;
  // The period since the last call (nothing when it is shorter than the clock's resolution).
  virtual metrics::PeriodReport report(TimePoint now) = 0;
};

// Where the decisions go.
class ScaleTarget {
 public:
  virtual ~ScaleTarget() = default;
  virtual std::int32_t ready() const = 0;            // instances ready now
  virtual void scale_to(std::int32_t desired) = 0;  // start or drain instances until `desired` are up
};

class RevisionScaler {
 public:
  // `scale`: the scale the supervisor starts the revision at (the KPA's scale until it applies one).
  RevisionScaler(std::string name, const AutoscalerConfig& config, std::int32_t scale,
                 TimePoint now, StatsSource& stats, ScaleTarget& target);

  // Each second: the period's stat into the KPA; a decision at once when the KPA asks for one.
  void stat_tick(TimePoint now);
  // Each 2 s: the KPA's decision, applied to the target (logged when the count or the activity changes).
  void decide(TimePoint now);

  // The count last decided (0 before the first decision, unless the supervisor said otherwise).
  std::int32_t desired() const { return desired_; }
  // The supervisor brought the revision to `n` itself (its initial scale, at start-up).
  void set_desired(std::int32_t n) { desired_ = n; }
  double rps() const { return rps_; }                  // the last period's arrivals per second
  double concurrency() const { return concurrency_; }  // ... and its average concurrency
  Activity activity() const { return activity_; }

 private:
  std::string name_;
  Kpa kpa_;
  StatsSource& stats_;
  ScaleTarget& target_;
  std::int32_t desired_ = 0;
  double rps_ = 0, concurrency_ = 0;
  Activity activity_ = Activity::activating;  // as last logged
};

}  // namespace sluice::autoscaler
