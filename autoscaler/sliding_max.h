// The largest value recorded over a sliding time window: how the KPA delays scale-down decisions
// (Knative's scale-down-delay, pkg/autoscaler/aggregation/max).
#pragma once

#include <cstdint>
#include <deque>

#include "autoscaler/time.h"

namespace sluice::autoscaler {

class SlidingMax {
 public:
  // Remembers values for ceil(window / granularity) buckets of `granularity` (the decision tick).
  SlidingMax(Duration window, Duration granularity);

  // Records `value` at `now`; times must not go backwards. Two values in one bucket keep the larger.
  void record(TimePoint now, std::int32_t value);

  // The maximum over the last window of buckets, or 0 before anything was recorded.
  std::int32_t current() const;

 private:
  struct Entry {
    std::int64_t index;
    std::int32_t value;
  };
  // Descending values, ascending indexes: a value that is both older and smaller than a newer one can
  // never be the maximum again, so it is dropped at once and the front is always the answer.
  std::deque<Entry> maxima_;
  std::int64_t buckets_;
  Duration granularity_;
};

}  // namespace sluice::autoscaler
