// User-facing request metrics (queue-proxy's :9091): request counts and latency histograms by response
// code, for the proxy (what the client saw, queueing included) and for the app (the upstream exchange
// alone), and the breaker's queue depth. Knative renamed these in 1.19 and kept only the app's side
// (kn_serving_invocation_duration_seconds); either family, or both, is served.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "metrics/autoscaler_stat.h"

namespace prometheus {
class Counter;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace sluice::metrics {

enum class MetricNames {
  knative_legacy,  // QP <= 1.18: revision_request_count, revision_request_latencies (ms), ...
  knative_otel,    // QP >= 1.19: kn_serving_invocation_duration_seconds, kn_serving_queue_depth
  both,
};

struct RequestMetricsConfig {
  PodIdentity pod;
  std::string service;
  MetricNames names = MetricNames::knative_legacy;
};

// Thread-safe. The series for a status code is created on its first use and cached, so recording
// is a lock-free lookup plus prometheus-cpp's own increments.
// kn.serving.invocation.duration for one status code, cumulative since start (what an OTLP push sends).
struct DurationPoint {
  int status = 0;
  std::uint64_t count = 0;
  double sum = 0;
  std::vector<double> bounds;                 // upper bounds, seconds
  std::vector<std::uint64_t> bucket_counts;  // one more than bounds (the last is +Inf); not cumulative
};

class RequestMetrics {
 public:
  explicit RequestMetrics(const RequestMetricsConfig& config);
  ~RequestMetrics();

  void record_proxy(int status, double latency_seconds);
  void record_app(int status, double latency_seconds);
  void set_queue_depth(double depth);
  std::string text() const;
  // The 1.19 family's histograms (empty with legacy names only) and the queue depth gauge, now.
  std::vector<DurationPoint> durations() const;
  double queue_depth() const;

 private:
  struct Series;
  struct Table {
    prometheus::Family<prometheus::Counter>* count = nullptr;           // legacy names
    prometheus::Family<prometheus::Histogram>* latency_ms = nullptr;    // legacy names
    prometheus::Family<prometheus::Histogram>* duration_s = nullptr;    // 1.19 names
    std::array<std::atomic<Series*>, 600> by_status{};
  };
  Series& series(Table& t, int status);
  void record(Table& t, int status, double latency_seconds);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  Table proxy_, app_;
  std::mutex create_mutex_;
  std::vector<std::unique_ptr<Series>> owned_;
};

}  // namespace sluice::metrics
