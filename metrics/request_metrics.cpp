// User request metrics; see request_metrics.h.
#include "metrics/request_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace sluice::metrics {
namespace {

// OpenCensus' Buckets125(1, 100000), the milliseconds queue-proxy <= 1.18 reports latencies in.
const prometheus::Histogram::BucketBoundaries kLatencyMs = {
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};
// OpenTelemetry's HTTP server duration buckets, which 1.19's kn_serving_invocation_duration_seconds uses.
const prometheus::Histogram::BucketBoundaries kDurationS = {
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10};

std::string code_class(int status) { return std::to_string(status / 100) + "xx"; }

}  // namespace

struct RequestMetrics::Series {
  prometheus::Counter* count = nullptr;
  prometheus::Histogram* latency_ms = nullptr;
  prometheus::Histogram* duration_s = nullptr;
};

struct RequestMetrics::Impl {
  prometheus::Registry registry;
  prometheus::Labels legacy_labels;
  prometheus::Labels otel_labels;
  prometheus::Gauge* queue_depth_legacy = nullptr;
  prometheus::Gauge* queue_depth_otel = nullptr;
};

RequestMetrics::RequestMetrics(const RequestMetricsConfig& c) : impl_(std::make_unique<Impl>()) {
  auto& r = impl_->registry;
  bool legacy = c.names != MetricNames::knative_otel;
  bool otel = c.names != MetricNames::knative_legacy;
  impl_->legacy_labels = {{"namespace_name", c.pod.namespace_name},
                          {"configuration_name", c.pod.configuration},
                          {"revision_name", c.pod.revision},
                          {"service_name", c.service},
                          {"pod_name", c.pod.pod},
                          {"container_name", "queue-proxy"}};
  impl_->otel_labels = {{"k8s_namespace_name", c.pod.namespace_name},
                        {"kn_configuration_name", c.pod.configuration},
                        {"kn_revision_name", c.pod.revision},
                        {"kn_service_name", c.service},
                        {"k8s_pod_name", c.pod.pod},
                        {"k8s_container_name", "queue-proxy"}};
  if (legacy) {
    proxy_.count = &prometheus::BuildCounter()
                        .Name("revision_request_count")
                        .Help("The number of requests that are routed to queue-proxy")
                        .Register(r);
    proxy_.latency_ms = &prometheus::BuildHistogram()
                             .Name("revision_request_latencies")
                             .Help("The response time in millisecond")
                             .Register(r);
    app_.count = &prometheus::BuildCounter()
                      .Name("revision_app_request_count")
                      .Help("The number of requests that are routed to user-container")
                      .Register(r);
    app_.latency_ms = &prometheus::BuildHistogram()
                           .Name("revision_app_request_latencies")
                           .Help("The response time in millisecond")
                           .Register(r);
    impl_->queue_depth_legacy = &prometheus::BuildGauge()
                                     .Name("revision_queue_depth")
                                     .Help("The current number of items in the serving and waiting queue")
                                     .Register(r)
                                     .Add(impl_->legacy_labels);
  }
  if (otel) {
    // As queue-proxy >= 1.19: the app's exchange alone, after the breaker (no queueing).
    app_.duration_s = &prometheus::BuildHistogram()
                           .Name("kn_serving_invocation_duration_seconds")
                           .Help("The duration of task execution")
                           .Register(r);
    impl_->queue_depth_otel = &prometheus::BuildGauge()
                                   .Name("kn_serving_queue_depth")
                                   .Help("The current number of items in the serving and waiting queue")
                                   .Register(r)
                                   .Add(impl_->otel_labels);
  }
}

RequestMetrics::~RequestMetrics() = default;

RequestMetrics::Series& RequestMetrics::series(Table& t, int status) {
  if (status < 100 || status > 599) status = 599;
  auto& slot = t.by_status[static_cast<std::size_t>(status)];
  if (auto* s = slot.load(std::memory_order_acquire)) return *s;
  std::lock_guard lock(create_mutex_);
  if (auto* s = slot.load(std::memory_order_relaxed)) return *s;
  auto s = std::make_unique<Series>();
  if (t.count) {
    auto labels = impl_->legacy_labels;
    labels["response_code"] = std::to_string(status);
    labels["response_code_class"] = code_class(status);
    s->count = &t.count->Add(labels);
    s->latency_ms = &t.latency_ms->Add(labels, kLatencyMs);
  }
  if (t.duration_s) {
    auto labels = impl_->otel_labels;
    labels["http_response_status_code"] = std::to_string(status);
    s->duration_s = &t.duration_s->Add(labels, kDurationS);
  }
  slot.store(s.get(), std::memory_order_release);
  owned_.push_back(std::move(s));
  return *owned_.back();
}

void RequestMetrics::record(Table& t, int status, double latency_seconds) {
  auto& s = series(t, status);
  if (s.count) s.count->Increment();
  if (s.latency_ms) s.latency_ms->Observe(latency_seconds * 1000.0);
  if (s.duration_s) s.duration_s->Observe(latency_seconds);
}

void RequestMetrics::record_proxy(int status, double latency_seconds) {
  record(proxy_, status, latency_seconds);
}

void RequestMetrics::record_app(int status, double latency_seconds) {
  record(app_, status, latency_seconds);
}

std::vector<DurationPoint> RequestMetrics::durations() const {
  std::vector<DurationPoint> out;
  for (std::size_t status = 0; status < app_.by_status.size(); ++status) {
    const auto* s = app_.by_status[status].load(std::memory_order_acquire);
    if (!s || !s->duration_s) continue;
    const auto m = s->duration_s->Collect().histogram;
    DurationPoint p{.status = static_cast<int>(status), .count = m.sample_count, .sum = m.sample_sum};
    std::uint64_t below = 0;
    for (const auto& b : m.bucket) {  // cumulative, the last one +Inf
      if (p.bucket_counts.size() < kDurationS.size()) p.bounds.push_back(b.upper_bound);
      p.bucket_counts.push_back(b.cumulative_count - below);
      below = b.cumulative_count;
    }
    out.push_back(std::move(p));
  }
  return out;
}

double RequestMetrics::queue_depth() const {
  auto* g = impl_->queue_depth_otel ? impl_->queue_depth_otel : impl_->queue_depth_legacy;
  return g ? g->Value() : 0;
}

void RequestMetrics::set_queue_depth(double depth) {
  if (impl_->queue_depth_legacy) impl_->queue_depth_legacy->Set(depth);
  if (impl_->queue_depth_otel) impl_->queue_depth_otel->Set(depth);
}

std::string RequestMetrics::text() const {
  return prometheus::TextSerializer().Serialize(impl_->registry.Collect());
}

}  // namespace sluice::metrics
