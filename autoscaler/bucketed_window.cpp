// Bucketed metric windows; the arithmetic follows Knative's pkg/autoscaler/aggregation/bucketing.go so the
// averages (and therefore the decisions) match Knative's to the sixth decimal.
#include "autoscaler/bucketed_window.h"

#include <algorithm>
#include <cmath>

namespace sluice::autoscaler {
namespace {

constexpr double kMinExponent = 0.2;
constexpr double kWeightPrecision = 0.9999;

// Knative rounds linear averages to 6 digits so float noise never tips a ceil() over an integer.
double round6(double v) { return std::round(v * 1e6) / 1e6; }

}  // namespace

double smoothing_coefficient(double buckets) {
  return std::max(1 - std::pow(1 - kWeightPrecision, 1 / buckets), kMinExponent);
}

BucketedWindow::BucketedWindow(Duration window, Duration granularity, Averaging averaging)
    : window_(window), granularity_(granularity), averaging_(averaging) {
  const auto n = (window.count() + granularity.count() - 1) / granularity.count();
  buckets_.assign(static_cast<std::size_t>(std::max<Duration::rep>(n, 1)), 0.0);
  smoothing_ = autoscaler::smoothing_coefficient(static_cast<double>(buckets_.size()));
}

std::size_t BucketedWindow::slot(std::int64_t index) const {
  const auto n = static_cast<std::int64_t>(buckets_.size());
  return static_cast<std::size_t>(((index % n) + n) % n);
}

void BucketedWindow::record(TimePoint now, double value) {
  const TimePoint bucket_time = truncate(now, granularity_);
  if (!written_ || last_write_ != bucket_time) {
    // A value a whole window older than the newest bucket cannot affect any average: drop it.
    if (written_ && !(bucket_time + window_ > last_write_)) return;
    if (!first_write_ || *first_write_ > bucket_time) first_write_ = bucket_time;
    if (!written_ || bucket_time > last_write_) {
      if (!written_ || bucket_time - last_write_ >= window_) {
        // A window passed without data: start over, so the average is over the new data only.
        first_write_ = bucket_time;
        std::fill(buckets_.begin(), buckets_.end(), 0.0);
        window_total_ = 0;
      } else {
        // Buckets skipped since the last write (missed scrapes) held data a window ago: clear them.
        const auto from = bucket_index(last_write_, granularity_) + 1;
        const auto to = bucket_index(bucket_time, granularity_);
        for (auto i = from; i <= to; ++i) {
          window_total_ -= buckets_[slot(i)];
          buckets_[slot(i)] = 0;
        }
      }
      last_write_ = bucket_time;
      written_ = true;
    }
  }
  buckets_[slot(bucket_index(now, granularity_))] += value;
  window_total_ += value;
}

void BucketedWindow::resize(Duration window, TimePoint now) {
  if (window == window_) return;
  const auto n = static_cast<std::size_t>(
      std::max<Duration::rep>((window.count() + granularity_.count() - 1) / granularity_.count(), 1));
  std::vector<double> resized(n, 0.0);
  double total = 0;
  if (written_ && truncate(now, granularity_) - last_write_ <= window_) {
    // Copy the newest buckets, as many as both windows hold, to their slots in the new ring.
    const std::size_t old_n = buckets_.size();
    auto index = bucket_index(last_write_, granularity_);
    for (std::size_t k = 0; k < std::min(n, old_n); ++k, --index) {
      const double v = buckets_[slot(index)];
      resized[static_cast<std::size_t>(((index % static_cast<std::int64_t>(n)) + static_cast<std::int64_t>(n)) %
                                        static_cast<std::int64_t>(n))] = v;
      total += v;
    }
    // The earliest time data may have been written: a whole old window back from the newest bucket.
    first_write_ = last_write_ - static_cast<Duration::rep>(old_n - 1) * granularity_;
  } else {
    first_write_.reset();
  }
  window_ = window;
  buckets_ = std::move(resized);
  window_total_ = total;
  smoothing_ = autoscaler::smoothing_coefficient(static_cast<double>(buckets_.size()));
}

double BucketedWindow::bucket_sum(TimePoint now) const {
  if (!written_) return 0;
  now = truncate(now, granularity_);
  const auto n = static_cast<std::int64_t>(buckets_.size());
  const std::int64_t count = std::min<std::int64_t>(n, n - (now - last_write_) / granularity_);
  double sum = 0;
  auto index = bucket_index(last_write_, granularity_);
  for (std::int64_t k = 0; k < count; ++k, --index) sum += buckets_[slot(index)];
  return sum;
}

bool BucketedWindow::is_empty(TimePoint now) const {
  return !written_ || truncate(now, granularity_) - last_write_ > window_;
}

double BucketedWindow::average(TimePoint now) const {
  return averaging_ == Averaging::linear ? linear_average(now) : weighted_average(now);
}

double BucketedWindow::linear_average(TimePoint now) const {
  if (!written_) return 0;
  now = truncate(now, granularity_);
  const auto n = static_cast<double>(buckets_.size());
  // +1: first and last write are both inclusive.
  // Unknown start (a resize found no data): every bucket counts, as Knative's zero first write does.
  const auto written_buckets =
      first_write_ ? static_cast<double>((last_write_ - *first_write_) / granularity_ + 1) : n;
  const Duration since_write = now - last_write_;
  if (since_write <= Duration::zero()) {
    return round6(window_total_ / std::min(written_buckets, n));
  }
  if (since_write < window_) {
    // No data for a while (less than a window): the buckets between the last write and now are stale
    // leftovers of the previous lap; leave them out of both the sum and the count.
    const auto last = bucket_index(last_write_, granularity_);
    const auto end = bucket_index(now, granularity_);
    double total = window_total_;
    for (auto i = last + 1; i <= end; ++i) total -= buckets_[slot(i)];
    const double count = std::min(written_buckets, n - static_cast<double>(end - last));
    return round6(total / count);
  }
  return 0;
}

double BucketedWindow::weighted_average(TimePoint now) const {
  if (is_empty(now)) return 0;
  now = truncate(now, granularity_);
  auto count = static_cast<std::int64_t>(buckets_.size());
  double multiplier = smoothing_;
  if (now > last_write_) {
    // The buckets after the last write count as zeros: skip straight to their weight.
    const auto zeros = static_cast<std::int64_t>((now - last_write_) / granularity_);
    multiplier *= std::pow(1 - smoothing_, static_cast<double>(zeros));
    count -= zeros;
  }
  const auto newest = bucket_index(last_write_, granularity_);
  double sum = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    sum += buckets_[slot(newest - i)] * multiplier;
    multiplier *= 1 - smoothing_;
  }
  return sum;
}

}  // namespace sluice::autoscaler
