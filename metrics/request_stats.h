// Time-weighted request concurrency and request counts, shared by every worker and read once a period
// by the stat reporter. Knative's autoscaler is fed averages, not samples: a request in flight for half
// of a 1 s period counts 0.5.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace sluice::metrics {

using Clock = std::chrono::steady_clock;

// What one reporting period saw.
struct PeriodReport {
  double average_concurrency = 0;          // time-weighted in-flight count
  double average_proxied_concurrency = 0;  // the same for requests the activator proxied
  std::uint64_t requests = 0;              // requests that arrived in the period
  std::uint64_t proxied_requests = 0;
  double seconds = 0;                      // length of the period
};

// Thread-safe; every call takes the time, so tests drive it with their own clock. The lock is held
// for a few arithmetic operations per request start and end.
class RequestStats {
 public:
  explicit RequestStats(Clock::time_point start) : last_change_(start), period_start_(start) {}

  void request_in(Clock::time_point now, bool proxied);
  void request_out(Clock::time_point now, bool proxied);

  // Closes the current period at `now` and starts the next one.
  PeriodReport report(Clock::time_point now);

  // Requests in flight right now.
  std::int64_t in_flight() const;

 private:
  void integrate(Clock::time_point now);  // callers hold mutex_

  mutable std::mutex mutex_;
  Clock::time_point last_change_;
  Clock::time_point period_start_;
  std::int64_t concurrency_ = 0;
  std::int64_t proxied_concurrency_ = 0;
  double concurrency_seconds_ = 0;  // integral of concurrency over the period so far
  double proxied_concurrency_seconds_ = 0;
  std::uint64_t requests_ = 0;
  std::uint64_t proxied_requests_ = 0;
};

}  // namespace sluice::metrics
