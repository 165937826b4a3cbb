// A time series of fixed-width buckets averaged over a window: Knative's TimedFloat64Buckets and
// WeightedFloat64Buckets, the stable and panic windows of the KPA.
#pragma once

#include <optional>
#include <vector>

#include "autoscaler/time.h"

namespace sluice::autoscaler {

// How a window's buckets are averaged (Knative's metric-aggregation-algorithm).
enum class Averaging {
  linear,                // plain mean of the buckets seen in the window
  weighted_exponential,  // recent buckets weigh more; the weights decay geometrically
};

class BucketedWindow {
 public:
  // `window` should be a multiple of `granularity` (both > 0); the bucket count is rounded up.
  BucketedWindow(Duration window, Duration granularity, Averaging averaging = Averaging::linear);

  // Adds `value` to the bucket of `now`. Several records in one bucket are summed (the scraper's stat and
  // the activator's stat for the same second add up). Values older than a window are dropped.
  void record(TimePoint now, double value);

  // True when nothing was recorded in the window that ends at `now`.
  bool is_empty(TimePoint now) const;

  // The window's average as of `now`. Linear: the mean over the buckets since the first write (so a fresh
  // window does not read low), skipping buckets not yet reached; 0 once a whole window passed without data.
  double average(TimePoint now) const;

  // Changes the window length in place, keeping the newest buckets that fit (Knative's ResizeWindow): a
  // longer window keeps all history, a shorter one the most recent part. With no data in the old window
  // as of `now`, the new one starts empty. The same length is a no-op.
  void resize(Duration window, TimePoint now);

  // Sum of the buckets still inside the window as of `now`, newest first back one window (Knative's
  // forEachBucket, which its tests sum).
  double bucket_sum(TimePoint now) const;

  // Start of the data the linear average counts from; nullopt when unknown (nothing written, or a
  // resize found no data in the window).
  std::optional<TimePoint> first_write() const { return first_write_; }
  std::optional<TimePoint> last_write() const {
    return written_ ? std::optional<TimePoint>(last_write_) : std::nullopt;
  }
  std::size_t bucket_count() const { return buckets_.size(); }

  Duration window() const { return window_; }
  Duration granularity() const { return granularity_; }
  double smoothing_coefficient() const { return smoothing_; }

 private:
  double linear_average(TimePoint now) const;
  double weighted_average(TimePoint now) const;
  std::size_t slot(std::int64_t index) const;

  Duration window_;
  Duration granularity_;
  Averaging averaging_;
  double smoothing_ = 0;
  std::vector<double> buckets_;
  double window_total_ = 0;  // sum of every bucket, including ones past last_write_ not yet cleared
  bool written_ = false;     // last_write_ is set
  std::optional<TimePoint> first_write_;  // start of the data in the window (reset after a window without data)
  TimePoint last_write_{};   // newest bucket written
};

// Knative's decay for weighted averaging: the weights of `buckets` buckets sum to at least 0.9999, and the
// coefficient is never below 0.2 (so very long windows still favour recent data).
double smoothing_coefficient(double buckets);

}  // namespace sluice::autoscaler
