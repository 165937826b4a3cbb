// User-facing request metrics (queue-proxy's :9091). With Knative <= 1.18's names (OpenCensus): request counts
// and latency histograms by response code, for the proxy (what the client saw, queueing included) and for the
// app (the upstream exchange alone), and the breaker's queue depth, each series labelled with the pod. With
// 1.19's names (OpenTelemetry), what queue-proxy's Prometheus exporter writes: kn_serving_invocation_duration_
// seconds (the app's side only) and kn_serving_queue_depth, otelhttp's http_server_* and http_client_*
// families, the process_* and promhttp_* families, and the pod in target_info. Either generation, or both.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metrics/autoscaler_stat.h"
#include "metrics/http_metrics.h"

namespace sluice::metrics {

class AtomicHistogram;

enum class MetricNames {
  knative_legacy,  // QP <= 1.18: revision_request_count, revision_request_latencies (ms), ...
  knative_otel,    // QP >= 1.19: kn_serving_invocation_duration_seconds, kn_serving_queue_depth, otelhttp's
  both,
};

struct RequestMetricsConfig {
  PodIdentity pod;
  std::string service;
  MetricNames names = MetricNames::knative_legacy;
  // The resource of spans and pushed metrics (dotted OpenTelemetry keys), which target_info carries.
  std::vector<std::pair<std::string, std::string>> resource;
  std::uint16_t app_port = 8080;  // the http_client_* families' server_port
};

// kn.serving.invocation.duration for one status code, cumulative since start (what an OTLP push sends).
struct DurationPoint {
  int status = 0;
  std::uint64_t count = 0;
  double sum = 0;
  std::vector<double> bounds;                 // upper bounds, seconds
  std::vector<std::uint64_t> bucket_counts;  // one more than bounds (the last is +Inf); not cumulative
};

// Thread-safe. The series for a status code (an attribute set) is created on its first use and cached, so
// recording is a lock-free lookup plus atomic adds.
class RequestMetrics {
 public:
  explicit RequestMetrics(const RequestMetricsConfig& config);
  ~RequestMetrics();

  void record_proxy(int status, double latency_seconds);  // legacy names only
  void record_app(int status, double latency_seconds);
  // kn_serving_queue_depth: requests in the breaker (in flight and waiting) as one was let in, the value
  // queue-proxy records at each request's start; served once recorded.
  void record_queue_depth(std::int64_t depth);
  // revision_queue_depth (legacy names): the breaker's occupancy now, set before each scrape.
  void set_legacy_queue_depth(double depth);
  // otelhttp's families; null with the legacy names only.
  HttpMetrics* http() { return http_.get(); }

  // The Prometheus text of a scrape (counted in promhttp_metric_handler_requests_total).
  std::string text();
  // The 1.19 family's histograms (empty with legacy names only), and the queue depth last recorded.
  std::vector<DurationPoint> durations() const;
  std::optional<std::int64_t> queue_depth() const;

 private:
  struct LegacySeries;
  struct LegacyTable {
    std::array<std::atomic<LegacySeries*>, 600> by_status{};
  };
  LegacySeries& legacy_series(LegacyTable& t, int status);
  void record_legacy(LegacyTable& t, int status, double latency_seconds);
  AtomicHistogram& duration_series(int status);
  void write_otel(std::string& out) const;
  void write_legacy(std::string& out) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
  const bool legacy_, otel_;
  LegacyTable proxy_, app_;
  std::array<std::atomic<AtomicHistogram*>, 600> durations_{};  // kn_serving_invocation_duration_seconds
  std::atomic<std::int64_t> queue_depth_{0};
  std::atomic<bool> queue_depth_recorded_{false};
  std::unique_ptr<HttpMetrics> http_;
  std::atomic<std::uint64_t> scrapes_{0};  // text() calls so far
  std::mutex create_mutex_;
  std::vector<std::unique_ptr<LegacySeries>> owned_;
  std::vector<std::unique_ptr<AtomicHistogram>> owned_durations_;
};

}  // namespace sluice::metrics
