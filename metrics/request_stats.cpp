// Concurrency integration; see request_stats.h.
#include "metrics/request_stats.h"

namespace sluice::metrics {

void RequestStats::integrate(Clock::time_point now) {
  if (now <= last_change_) return;  // a caller with a slightly older reading of the clock
  double dt = std::chrono::duration<double>(now - last_change_).count();
  concurrency_seconds_ += static_cast<double>(concurrency_) * dt;
  proxied_concurrency_seconds_ += static_cast<double>(proxied_concurrency_) * dt;
  last_change_ = now;
}

void RequestStats::request_in(Clock::time_point now, bool proxied) {
  std::lock_guard lock(mutex_);
  integrate(now);
  ++concurrency_;
  ++requests_;
  if (proxied) {
    ++proxied_concurrency_;
    ++proxied_requests_;
  }
}

void RequestStats::request_out(Clock::time_point now, bool proxied) {
  std::lock_guard lock(mutex_);
  integrate(now);
  --concurrency_;
  if (proxied) --proxied_concurrency_;
}

PeriodReport RequestStats::report(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  integrate(now);
  PeriodReport r;
  r.seconds = std::chrono::duration<double>(last_change_ - period_start_).count();
  if (r.seconds > 0) {
    r.average_concurrency = concurrency_seconds_ / r.seconds;
    r.average_proxied_concurrency = proxied_concurrency_seconds_ / r.seconds;
  }
  r.requests = requests_;
  r.proxied_requests = proxied_requests_;
  period_start_ = last_change_;
  concurrency_seconds_ = proxied_concurrency_seconds_ = 0;
  requests_ = proxied_requests_ = 0;
  return r;
}

std::int64_t RequestStats::in_flight() const {
  std::lock_guard lock(mutex_);
  return concurrency_;
}

}  // namespace sluice::metrics
