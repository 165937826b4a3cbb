// A histogram of fixed upper bounds (OpenTelemetry's explicit buckets: a value lands in the first bucket
// whose bound is >= it) that any thread records into with two relaxed atomic adds: its bucket's count, and
// the sum kept as an integer of `1 / resolution` units (nanoseconds for seconds, bytes for bytes), which an
// add takes without the compare-and-swap loop a double would need.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace sluice::metrics {

class AtomicHistogram {
 public:
  // `bounds` must outlive the histogram (the callers' are static); values are >= 0.
  AtomicHistogram(std::span<const double> bounds, double resolution)
      : bounds_(bounds),
        units_per_value_(1 / resolution),
        counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds.size() + 1)) {}

  void observe(double v) {
    std::size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(static_cast<std::uint64_t>(v * units_per_value_ + 0.5), std::memory_order_relaxed);
  }

  struct Snapshot {
    std::vector<std::uint64_t> counts;  // per bucket, not cumulative; the last is +Inf
    double sum = 0;
    std::uint64_t count() const {
      std::uint64_t n = 0;
      for (auto c : counts) n += c;
      return n;
    }
  };
  // The count is the buckets' total, so a scrape racing a recording is never inconsistent in itself.
  Snapshot snapshot() const {
    Snapshot s;
    s.counts.reserve(bounds_.size() + 1);
    for (std::size_t i = 0; i <= bounds_.size(); ++i) s.counts.push_back(counts_[i].load(std::memory_order_relaxed));
    s.sum = static_cast<double>(sum_.load(std::memory_order_relaxed)) / units_per_value_;
    return s;
  }
  std::span<const double> bounds() const { return bounds_; }

 private:
  std::span<const double> bounds_;
  double units_per_value_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
  std::atomic<std::uint64_t> sum_{0};
};

}  // namespace sluice::metrics
