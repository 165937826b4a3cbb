// Concurrency integration; see request_stats.h.
#include "metrics/request_stats.h"

#include <algorithm>

namespace sluice::metrics {
namespace {

double seconds_between(Clock::rep from, Clock::time_point to) {
  auto dt = to.time_since_epoch().count() - from;
  return dt > 0 ? std::chrono::duration<double>(Clock::duration(dt)).count() : 0.0;
}

}  // namespace

void ArrivalWake::arm(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  wake_ = std::move(wake);
  armed_.store(true, std::memory_order_seq_cst);
}

void ArrivalWake::disarm() {
  std::lock_guard lock(mutex_);
  armed_.store(false, std::memory_order_relaxed);
  wake_ = nullptr;
}

void ArrivalWake::fire() {
  std::function<void()> wake;
  {
    std::lock_guard lock(mutex_);
    if (!armed_.load(std::memory_order_relaxed)) return;  // another arrival fired it first
    armed_.store(false, std::memory_order_relaxed);
    wake.swap(wake_);
  }
  if (wake) wake();
}

RequestStatsShard::RequestStatsShard(Clock::time_point start, ArrivalWake* wake)
    : wake_(wake), last_change_(start.time_since_epoch().count()) {}

// Single writer: plain loads of its own fields, stores bracketed by the sequence counter.
void RequestStatsShard::advance(Clock::time_point now, int delta, bool proxied, bool arrival) {
  auto seq = sequence_.load(std::memory_order_relaxed);
  sequence_.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);

  auto last = last_change_.load(std::memory_order_relaxed);
  double dt = seconds_between(last, now);  // a reading of the clock older than the last one adds 0
  auto c = concurrency_.load(std::memory_order_relaxed);
  auto pc = proxied_concurrency_.load(std::memory_order_relaxed);
  concurrency_seconds_.store(concurrency_seconds_.load(std::memory_order_relaxed) + static_cast<double>(c) * dt,
                             std::memory_order_relaxed);
  proxied_concurrency_seconds_.store(
      proxied_concurrency_seconds_.load(std::memory_order_relaxed) + static_cast<double>(pc) * dt,
      std::memory_order_relaxed);
  last_change_.store(std::max(last, now.time_since_epoch().count()), std::memory_order_relaxed);
  concurrency_.store(c + delta, std::memory_order_relaxed);
  if (proxied) proxied_concurrency_.store(pc + delta, std::memory_order_relaxed);
  if (arrival) {
    // seq_cst: ordered before the ArrivalWake check below (see requests_total()).
    requests_.store(requests_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
    if (proxied)
      proxied_requests_.store(proxied_requests_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  sequence_.store(seq + 2, std::memory_order_release);
  if (arrival && wake_) wake_->arrived();  // after the counts: the woken reporter sees this request
}

void RequestStatsShard::withdraw(Clock::time_point arrived, Clock::time_point now, bool proxied) {
  advance(now, -1, proxied, false);
  auto seq = sequence_.load(std::memory_order_relaxed);
  sequence_.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const double spent = seconds_between(arrived.time_since_epoch().count(), now);
  auto take_back = [spent](std::atomic<double>& integral) {
    integral.store(std::max(0.0, integral.load(std::memory_order_relaxed) - spent), std::memory_order_relaxed);
  };
  auto uncount = [](std::atomic<std::uint64_t>& n) {
    auto v = n.load(std::memory_order_relaxed);
    n.store(v > 0 ? v - 1 : 0, std::memory_order_relaxed);
  };
  take_back(concurrency_seconds_);
  uncount(requests_);
  if (proxied) {
    take_back(proxied_concurrency_seconds_);
    uncount(proxied_requests_);
  }
  sequence_.store(seq + 2, std::memory_order_release);
}

void RequestStatsShard::request_in(Clock::time_point now, bool proxied) { advance(now, +1, proxied, true); }

void RequestStatsShard::request_out(Clock::time_point now, bool proxied) { advance(now, -1, proxied, false); }

RequestStatsShard::Totals RequestStatsShard::totals_at(Clock::time_point now) const {
  while (true) {
    auto before = sequence_.load(std::memory_order_acquire);
    if (before & 1) continue;  // the writer is mid-update: a few instructions
    Totals t;
    auto last = last_change_.load(std::memory_order_relaxed);
    auto c = concurrency_.load(std::memory_order_relaxed);
    auto pc = proxied_concurrency_.load(std::memory_order_relaxed);
    t.concurrency_seconds = concurrency_seconds_.load(std::memory_order_relaxed);
    t.proxied_concurrency_seconds = proxied_concurrency_seconds_.load(std::memory_order_relaxed);
    t.requests = requests_.load(std::memory_order_relaxed);
    t.proxied_requests = proxied_requests_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (sequence_.load(std::memory_order_relaxed) != before) continue;
    double dt = seconds_between(last, now);
    t.concurrency_seconds += static_cast<double>(c) * dt;
    t.proxied_concurrency_seconds += static_cast<double>(pc) * dt;
    t.in_flight = c;
    return t;
  }
}

RequestStats::RequestStats(Clock::time_point start, std::size_t shards) : period_start_(start) {
  for (std::size_t i = 0; i < std::max<std::size_t>(shards, 1); ++i)
    shards_.push_back(std::make_unique<RequestStatsShard>(start, &wake_));
}

PeriodReport RequestStats::report(Clock::time_point now) {
  std::lock_guard lock(report_mutex_);
  now = std::max(now, period_start_);
  RequestStatsShard::Totals total;
  for (const auto& s : shards_) {
    auto t = s->totals_at(now);
    total.concurrency_seconds += t.concurrency_seconds;
    total.proxied_concurrency_seconds += t.proxied_concurrency_seconds;
    total.requests += t.requests;
    total.proxied_requests += t.proxied_requests;
  }
  PeriodReport r;
  r.seconds = std::chrono::duration<double>(now - period_start_).count();
  if (r.seconds > 0) {
    r.average_concurrency = (total.concurrency_seconds - previous_.concurrency_seconds) / r.seconds;
    r.average_proxied_concurrency =
        (total.proxied_concurrency_seconds - previous_.proxied_concurrency_seconds) / r.seconds;
  }
  // Arrivals never below zero: a request withdrawn in the clock tick of a report that closed a period
  // holding it. (Concurrency may dip, as it does for an event stamped before the last report.)
  r.requests = total.requests > previous_.requests ? total.requests - previous_.requests : 0;
  r.proxied_requests =
      total.proxied_requests > previous_.proxied_requests ? total.proxied_requests - previous_.proxied_requests : 0;
  previous_ = total;
  period_start_ = now;
  return r;
}

bool RequestStats::withdraw(Clock::time_point arrived, Clock::time_point now, bool proxied) {
  std::lock_guard lock(report_mutex_);  // no period closes between the check and the taking back
  if (arrived < period_start_) {
    shards_[0]->request_out(now, proxied);
    return false;
  }
  shards_[0]->withdraw(arrived, now, proxied);
  return true;
}

std::int64_t RequestStats::in_flight() const {
  std::int64_t n = 0;
  auto now = Clock::now();
  for (const auto& s : shards_) n += s->totals_at(now).in_flight;
  return n;
}

std::uint64_t RequestStats::requests_total() const {
  std::uint64_t n = 0;
  for (const auto& s : shards_) n += s->requests_total();
  return n;
}

}  // namespace sluice::metrics
