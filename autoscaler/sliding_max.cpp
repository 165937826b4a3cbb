// Sliding-window maximum with a monotonic deque, amortised O(1) per record.
#include "autoscaler/sliding_max.h"

#include <algorithm>

namespace sluice::autoscaler {

SlidingMax::SlidingMax(Duration window, Duration granularity)
    : buckets_(std::max<std::int64_t>(
          1, (window.count() + granularity.count() - 1) / granularity.count())),
      granularity_(granularity) {}

void SlidingMax::record(TimePoint now, std::int32_t value) {
  const auto index = bucket_index(now, granularity_);
  while (!maxima_.empty() && maxima_.back().value <= value) maxima_.pop_back();
  while (!maxima_.empty() && index - maxima_.front().index >= buckets_) maxima_.pop_front();
  if (!maxima_.empty() && maxima_.back().index == index) {
    // Same bucket as the last record and that one is larger (smaller ones were popped above): keep it.
    return;
  }
  maxima_.push_back({index, value});
}

std::int32_t SlidingMax::current() const { return maxima_.empty() ? 0 : maxima_.front().value; }

}  // namespace sluice::autoscaler
