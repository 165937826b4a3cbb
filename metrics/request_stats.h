// Time-weighted request concurrency and request counts, read once a period by the stat reporter.
// Knative's autoscaler is fed averages, not samples: a request in flight for half of a 1 s period
// counts 0.5.
//
// Each worker writes its own shard, so the request path takes no lock and shares no cache line with
// other workers: the shard keeps running totals (never reset) that the reporter reads consistently
// through a sequence counter and differences period by period.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

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

// A one-shot "tell me about the next request": the stat reporter arms it while the pod is idle and sleeps,
// with no timer, until it fires, instead of polling for the first request. Armed, it costs every
// arrival one relaxed load of a line that is written only when armed or fired.
class ArrivalWake {
 public:
  // `wake` runs once, on the thread of the next arrival (post from it; do not block).
  void arm(std::function<void()> wake);
  void disarm();
  void arrived() {
    if (armed_.load(std::memory_order_seq_cst)) fire();
  }

 private:
  void fire();
  alignas(64) std::atomic<bool> armed_{false};
  std::mutex mutex_;  // guards wake_ between arm/disarm and the one arrival that fires
  std::function<void()> wake_;
};

// One writer thread (its worker), any number of readers.
class alignas(64) RequestStatsShard {
 public:
  explicit RequestStatsShard(Clock::time_point start, ArrivalWake* wake = nullptr);

  void request_in(Clock::time_point now, bool proxied);
  void request_out(Clock::time_point now, bool proxied);
  // A request counted in at `arrived` taken back whole at `now`: neither its arrival nor its time in
  // flight ever happened. Only for a request no report has read yet (see RequestStats::withdraw).
  void withdraw(Clock::time_point arrived, Clock::time_point now, bool proxied);

  // seq_cst, as the arrival's store: a reporter that arms an ArrivalWake and then reads this either sees
  // the arrival or is woken by it (the store-load pair ArrivalWake relies on).
  std::uint64_t requests_total() const { return requests_.load(std::memory_order_seq_cst); }

  struct Totals {
    double concurrency_seconds = 0;  // integral of the in-flight count since the start
    double proxied_concurrency_seconds = 0;
    std::uint64_t requests = 0;
    std::uint64_t proxied_requests = 0;
    std::int64_t in_flight = 0;
  };
  // A consistent snapshot, with the integrals carried forward to `now`.
  Totals totals_at(Clock::time_point now) const;

 private:
  void advance(Clock::time_point now, int delta, bool proxied, bool arrival);

  ArrivalWake* wake_;
  std::atomic<std::uint64_t> sequence_{0};  // odd while the writer is mid-update
  std::atomic<Clock::rep> last_change_;
  std::atomic<std::int64_t> concurrency_{0};
  std::atomic<std::int64_t> proxied_concurrency_{0};
  std::atomic<double> concurrency_seconds_{0};
  std::atomic<double> proxied_concurrency_seconds_{0};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> proxied_requests_{0};
};

class RequestStats {
 public:
  RequestStats(Clock::time_point start, std::size_t shards = 1);

  // Shard i belongs to worker i; 0 <= i < shards.
  RequestStatsShard& shard(std::size_t i) { return *shards_[i]; }

  // Shard 0, for single-threaded users and tests.
  void request_in(Clock::time_point now, bool proxied) { shards_[0]->request_in(now, proxied); }
  void request_out(Clock::time_point now, bool proxied) { shards_[0]->request_out(now, proxied); }
  // Shard 0: a request counted in at `arrived` leaves at `now` for nothing (its client went away while
  // it waited). When no period has closed since it arrived, it is taken back whole, as if it never came,
  // and true is returned; else it is counted out as any request (what was reported stays reported).
  // Arrivals then are not monotonic: not for a sidecar, whose reporter sleeps on requests_total().
  bool withdraw(Clock::time_point arrived, Clock::time_point now, bool proxied);

  // Closes the current period at `now` and starts the next one.
  PeriodReport report(Clock::time_point now);

  // Runs `wake` once at the next arrival on any shard (see ArrivalWake). An arrival racing with this
  // call may be missed: read requests_total() after arming to close that gap.
  void wake_on_next_arrival(std::function<void()> wake) { wake_.arm(std::move(wake)); }
  void cancel_arrival_wake() { wake_.disarm(); }

  // Requests in flight right now, over all shards.
  std::int64_t in_flight() const;
  // Requests counted in since the start, over all shards.
  std::uint64_t requests_total() const;

 private:
  ArrivalWake wake_;  // before the shards, which point at it
  std::vector<std::unique_ptr<RequestStatsShard>> shards_;
  std::mutex report_mutex_;  // reporters only, never the request path
  RequestStatsShard::Totals previous_;
  Clock::time_point period_start_;
};

}  // namespace sluice::metrics
