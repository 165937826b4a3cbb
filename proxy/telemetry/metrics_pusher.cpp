// MetricsPusher; see metrics_pusher.h.
#include "proxy/telemetry/metrics_pusher.h"

#include "common/log.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"

namespace sluice::proxy::telemetry {
namespace {

namespace otlp = opentelemetry::proto;

std::uint64_t now_unix_nano() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

std::string encode_otlp_metrics(const std::vector<metrics::DurationPoint>& durations,
                                std::optional<double> queue_depth, const Attributes& resource,
                                std::uint64_t start_unix_nano, std::uint64_t now) {
  otlp::collector::metrics::v1::ExportMetricsServiceRequest req;
  auto* rm = req.add_resource_metrics();
  for (const auto& [k, v] : resource) {
    auto* kv = rm->mutable_resource()->add_attributes();
    kv->set_key(k);
    kv->mutable_value()->set_string_value(v);
  }
  auto* sm = rm->add_scope_metrics();
  sm->mutable_scope()->set_name("knative.dev/serving/pkg/queue");
  if (!durations.empty()) {
    auto* m = sm->add_metrics();
    m->set_name("kn.serving.invocation.duration");
    m->set_description("The duration of task execution");
    m->set_unit("s");
    auto* h = m->mutable_histogram();
    h->set_aggregation_temporality(otlp::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
    for (const auto& d : durations) {
      auto* p = h->add_data_points();
      auto* kv = p->add_attributes();
      kv->set_key("http.response.status_code");
      kv->mutable_value()->set_int_value(d.status);
      p->set_start_time_unix_nano(start_unix_nano);
      p->set_time_unix_nano(now);
      p->set_count(d.count);
      p->set_sum(d.sum);
      for (auto b : d.bounds) p->add_explicit_bounds(b);
      for (auto c : d.bucket_counts) p->add_bucket_counts(c);
    }
  }
  if (queue_depth) {
    auto* m = sm->add_metrics();
    m->set_name("kn.serving.queue.depth");
    m->set_description("Number of current requests in the queue");
    m->set_unit("{request}");
    auto* p = m->mutable_gauge()->add_data_points();
    p->set_time_unix_nano(now);
    p->set_as_int(static_cast<std::int64_t>(*queue_depth));
  }
  return req.SerializeAsString();
}

MetricsPusher::MetricsPusher(MetricsPushConfig config, const metrics::RequestMetrics& source,
                             std::function<std::optional<double>()> queue_depth)
    : config_(std::move(config)),
      source_(source),
      queue_depth_(std::move(queue_depth)),
      transport_(make_transport(config_.protocol, config_.endpoint,
                                "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
                                "application/x-protobuf")),
      start_unix_nano_(now_unix_nano()),
      thread_([this](std::stop_token stop) { run(stop); }) {}

MetricsPusher::~MetricsPusher() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void MetricsPusher::run(std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  while (!cv.wait_for(lock, stop, config_.interval, [] { return false; })) {
    if (stop.stop_requested()) break;
    push();
  }
  push();  // the last period, at shutdown
}

void MetricsPusher::push() {
  auto body = encode_otlp_metrics(source_.durations(), queue_depth_ ? queue_depth_() : std::nullopt,
                                  config_.resource, start_unix_nano_, now_unix_nano());
  std::string error;
  if (transport_->send(body, ExportClock::now() + config_.export_timeout, error)) {
    pushed_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (failed_.fetch_add(1, std::memory_order_relaxed) == 0 || error != last_error_)
    log::warn("metrics push failed").kv("endpoint", config_.endpoint.text()).kv("error", error);
  last_error_ = error;
}

}  // namespace sluice::proxy::telemetry
