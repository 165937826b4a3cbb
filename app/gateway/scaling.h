// One revision's autoscaling, the revision set's scaling loop for it, as Knative's autoscaler runs one KPA
// per revision: each second the revision's stats (a StatsSource: the gate's RequestStats period, in flight
// plus waiting, and arrivals) go into its KPA; each decision (every 2 s, and at once when a stat changes
// the KPA's mind) goes to its ScaleTarget (the instance supervisor). It knows neither the gate nor any
// instance: its unit tests give it a fake of each. Control thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "autoscaler/kpa.h"
#include "metrics/request_stats.h"

namespace sluice::app::gateway {

using ScaleClock = autoscaler::Clock;

// Where the stats come from.
class StatsSource {
 public:
  virtual ~StatsSource() = default;
  // The period since the last call (nothing when it is shorter than the clock's resolution).
  virtual metrics::PeriodReport report(ScaleClock::time_point now) = 0;
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
  RevisionScaler(std::string name, const autoscaler::AutoscalerConfig& config, std::int32_t scale,
                 ScaleClock::time_point now, StatsSource& stats, ScaleTarget& target);

  // Each second: the period's stat into the KPA; a decision at once when the KPA asks for one.
  void stat_tick(ScaleClock::time_point now);
  // Each 2 s: the KPA's decision, applied to the target (logged when the count or the activity changes).
  void decide(ScaleClock::time_point now);

  // The count last decided (0 before the first decision, unless the supervisor said otherwise).
  std::int32_t desired() const { return desired_; }
  // The supervisor brought the revision to `n` itself (its initial scale, at start-up).
  void set_desired(std::int32_t n) { desired_ = n; }
  double rps() const { return rps_; }                  // the last period's arrivals per second
  double concurrency() const { return concurrency_; }  // ... and its average concurrency
  autoscaler::Activity activity() const { return activity_; }

 private:
  std::string name_;
  autoscaler::Kpa kpa_;
  StatsSource& stats_;
  ScaleTarget& target_;
  std::int32_t desired_ = 0;
  double rps_ = 0, concurrency_ = 0;
  autoscaler::Activity activity_ = autoscaler::Activity::activating;  // as last logged
};

}  // namespace sluice::app::gateway
