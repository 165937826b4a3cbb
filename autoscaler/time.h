// Time for the KPA: an injected steady-clock time point on every call, never a clock read inside.
#pragma once

#include <chrono>
#include <cstdint>

namespace sluice::autoscaler {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = Clock::duration;

// Index of the `granularity`-wide bucket holding `t` (floor division, so times before the epoch work too).
inline std::int64_t bucket_index(TimePoint t, Duration granularity) {
  const auto ticks = t.time_since_epoch().count();
  const auto g = granularity.count();
  auto q = ticks / g;
  if (ticks % g != 0 && ticks < 0) --q;
  return q;
}

// `t` rounded down to a multiple of `granularity`, like Go's time.Truncate.
inline TimePoint truncate(TimePoint t, Duration granularity) {
  return TimePoint(Duration(bucket_index(t, granularity) * granularity.count()));
}

}  // namespace sluice::autoscaler
