// User request metrics; see request_metrics.h.
#include "metrics/request_metrics.h"

#include <map>

#include "metrics/exposition.h"
#include "metrics/histogram.h"
#include "metrics/process_metrics.h"

namespace sluice::metrics {
namespace {

// OpenCensus' Buckets125(1, 100000), the milliseconds queue-proxy <= 1.18 reports latencies in.
constexpr std::array<double, 16> kLatencyMs = {1,    2,    5,    10,    20,    50,    100,   200,
                                               500,  1000, 2000, 5000, 10000, 20000, 50000, 100000};
// queue-proxy >= 1.19's bounds of kn.serving.invocation.duration (OpenTelemetry's HTTP duration buckets).
constexpr std::array<double, 14> kDurationS = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
                                               0.5,   0.75, 1,     2.5,  5,     7.5, 10};
constexpr std::string_view kQueueScopeName = "knative.dev/serving/pkg/queue";

std::string code_class(int status) { return std::to_string(status / 100) + "xx"; }

std::size_t status_slot(int status) { return static_cast<std::size_t>(status < 100 || status > 599 ? 599 : status); }

}  // namespace

struct RequestMetrics::LegacySeries {
  std::atomic<std::uint64_t> count{0};
  AtomicHistogram latency_ms{kLatencyMs, 1e-6};
};

struct RequestMetrics::Impl {
  std::vector<std::pair<std::string, std::string>> legacy_labels;  // sorted by name, response_code* aside
  std::atomic<double> queue_depth_legacy{0};
  std::vector<std::pair<std::string, std::string>> target_info;  // sorted by name
};

RequestMetrics::RequestMetrics(const RequestMetricsConfig& c)
    : impl_(std::make_unique<Impl>()),
      legacy_(c.names != MetricNames::knative_otel),
      otel_(c.names != MetricNames::knative_legacy) {
  impl_->legacy_labels = {{"configuration_name", c.pod.configuration}, {"container_name", "queue-proxy"},
                          {"namespace_name", c.pod.namespace_name},    {"pod_name", c.pod.pod},
                          {"revision_name", c.pod.revision},           {"service_name", c.service}};
  if (otel_) {
    http_ = std::make_unique<HttpMetrics>(c.app_port);
    // The resource, as OpenTelemetry's Prometheus exporter writes it: target_info, each key a label whose
    // characters other than [A-Za-z0-9_] are underscores (values of keys that then collide joined by ';').
    std::map<std::string, std::string> labels;
    for (const auto& [key, value] : c.resource) {
      std::string name = key;
      for (char& ch : name)
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_')) ch = '_';
      if (!name.empty() && name[0] >= '0' && name[0] <= '9') name = "key_" + name;
      auto [it, fresh] = labels.emplace(name, value);
      if (!fresh) it->second += ";" + value;
    }
    impl_->target_info.assign(labels.begin(), labels.end());
  }
}

RequestMetrics::~RequestMetrics() = default;

RequestMetrics::LegacySeries& RequestMetrics::legacy_series(LegacyTable& t, int status) {
  if (status < 100 || status > 599) status = 599;
  auto& slot = t.by_status[static_cast<std::size_t>(status)];
  if (auto* s = slot.load(std::memory_order_acquire)) return *s;
  std::lock_guard lock(create_mutex_);
  if (auto* s = slot.load(std::memory_order_relaxed)) return *s;
  auto s = std::make_unique<LegacySeries>();
  slot.store(s.get(), std::memory_order_release);
  owned_.push_back(std::move(s));
  return *owned_.back();
}

void RequestMetrics::record_legacy(LegacyTable& t, int status, double latency_seconds) {
  auto& s = legacy_series(t, status);
  s.count.fetch_add(1, std::memory_order_relaxed);
  s.latency_ms.observe(latency_seconds * 1000.0);
}

AtomicHistogram& RequestMetrics::duration_series(int status) {
  auto& slot = durations_[status_slot(status)];
  if (auto* h = slot.load(std::memory_order_acquire)) return *h;
  std::lock_guard lock(create_mutex_);
  if (auto* h = slot.load(std::memory_order_relaxed)) return *h;
  owned_durations_.push_back(std::make_unique<AtomicHistogram>(kDurationS, 1e-9));
  slot.store(owned_durations_.back().get(), std::memory_order_release);
  return *owned_durations_.back();
}

void RequestMetrics::record_proxy(int status, double latency_seconds) {
  if (legacy_) record_legacy(proxy_, status, latency_seconds);
}

void RequestMetrics::record_app(int status, double latency_seconds) {
  if (legacy_) record_legacy(app_, status, latency_seconds);
  // As queue-proxy >= 1.19: the app's exchange alone, after the breaker (no queueing).
  if (otel_) duration_series(status).observe(latency_seconds);
}

void RequestMetrics::record_queue_depth(std::int64_t depth) {
  if (!otel_) return;
  queue_depth_.store(depth, std::memory_order_relaxed);
  if (!queue_depth_recorded_.load(std::memory_order_relaxed))
    queue_depth_recorded_.store(true, std::memory_order_release);
}

void RequestMetrics::set_legacy_queue_depth(double depth) {
  if (legacy_) impl_->queue_depth_legacy.store(depth, std::memory_order_relaxed);
}

std::optional<std::int64_t> RequestMetrics::queue_depth() const {
  if (!queue_depth_recorded_.load(std::memory_order_acquire)) return std::nullopt;
  return queue_depth_.load(std::memory_order_relaxed);
}

std::vector<DurationPoint> RequestMetrics::durations() const {
  std::vector<DurationPoint> out;
  for (std::size_t status = 0; status < durations_.size(); ++status) {
    const auto* h = durations_[status].load(std::memory_order_acquire);
    if (!h) continue;
    auto snap = h->snapshot();
    out.push_back({.status = static_cast<int>(status),
                   .count = snap.count(),
                   .sum = snap.sum,
                   .bounds = {kDurationS.begin(), kDurationS.end()},
                   .bucket_counts = std::move(snap.counts)});
  }
  return out;
}

// The families queue-proxy's OpenTelemetry exporter and Prometheus' Go client write, by name (go_* aside:
// a C++ process has no Go runtime to describe).
void RequestMetrics::write_otel(std::string& out) const {
  http_->write(out);
  const std::array<Label, 3> scope = {Label{"otel_scope_name", kQueueScopeName}, Label{"otel_scope_schema_url", ""},
                                      Label{"otel_scope_version", ""}};
  bool any = false;
  for (std::size_t status = 0; status < durations_.size(); ++status) {
    const auto* h = durations_[status].load(std::memory_order_acquire);
    if (!h) continue;
    if (!any) write_family(out, "kn_serving_invocation_duration_seconds", "The duration of task execution", "histogram");
    any = true;
    const std::string code = std::to_string(status);
    const std::array<Label, 4> labels = {Label{"http_response_status_code", code}, scope[0], scope[1], scope[2]};
    auto snap = h->snapshot();
    write_histogram(out, "kn_serving_invocation_duration_seconds", labels, kDurationS, snap.counts, snap.sum);
  }
  if (auto depth = queue_depth()) {
    write_family(out, "kn_serving_queue_depth", "Number of current requests in the queue", "gauge");
    write_sample(out, "kn_serving_queue_depth", scope, static_cast<double>(*depth));
  }
  write_process_families(out);
  write_family(out, "promhttp_metric_handler_requests_in_flight", "Current number of scrapes being served.", "gauge");
  write_sample(out, "promhttp_metric_handler_requests_in_flight", {}, 1);
  write_family(out, "promhttp_metric_handler_requests_total", "Total number of scrapes by HTTP status code.",
               "counter");
  const auto scrapes = static_cast<double>(scrapes_.load(std::memory_order_relaxed));
  for (auto [code, n] : {std::pair{"200", scrapes}, {"500", 0.0}, {"503", 0.0}}) {
    const std::array<Label, 1> l = {Label{"code", code}};
    write_sample(out, "promhttp_metric_handler_requests_total", l, n);
  }
  std::vector<Label> info;
  for (const auto& [k, v] : impl_->target_info) info.emplace_back(k, v);
  write_family(out, "target_info", "Target metadata", "gauge");
  write_sample(out, "target_info", info, 1);
}

// As OpenCensus' Prometheus exporter registered them: families by name, series by status code.
void RequestMetrics::write_legacy(std::string& out) const {
  std::vector<Label> labels;
  auto with_code = [&](const std::string& code, const std::string& its_class) {
    labels.clear();
    for (const auto& [k, v] : impl_->legacy_labels) {
      if (k == "revision_name") {  // response_code and response_code_class sort before it
        labels.emplace_back("response_code", code);
        labels.emplace_back("response_code_class", its_class);
      }
      labels.emplace_back(k, v);
    }
  };
  auto table = [&](const LegacyTable& t, std::string_view count_name, std::string_view count_help,
                   std::string_view latency_name) {
    bool any = false;
    for (int status = 100; status < 600; ++status)
      any = any || t.by_status[static_cast<std::size_t>(status)].load(std::memory_order_acquire) != nullptr;
    if (!any) return std::pair{std::string(), std::string()};
    std::string counts, latencies;
    write_family(counts, count_name, count_help, "counter");
    write_family(latencies, latency_name, "The response time in millisecond", "histogram");
    for (int status = 100; status < 600; ++status) {
      const auto* series = t.by_status[static_cast<std::size_t>(status)].load(std::memory_order_acquire);
      if (!series) continue;
      const auto code = std::to_string(status), its_class = code_class(status);
      with_code(code, its_class);
      auto snap = series->latency_ms.snapshot();
      write_sample(counts, count_name, labels, static_cast<double>(series->count.load(std::memory_order_relaxed)));
      write_histogram(latencies, latency_name, labels, kLatencyMs, snap.counts, snap.sum);
    }
    return std::pair{std::move(counts), std::move(latencies)};
  };
  auto app = table(app_, "revision_app_request_count", "The number of requests that are routed to user-container",
                   "revision_app_request_latencies");
  auto proxy = table(proxy_, "revision_request_count", "The number of requests that are routed to queue-proxy",
                     "revision_request_latencies");
  out += app.first;
  out += app.second;
  write_family(out, "revision_queue_depth", "The current number of items in the serving and waiting queue", "gauge");
  labels.assign(impl_->legacy_labels.begin(), impl_->legacy_labels.end());
  write_sample(out, "revision_queue_depth", labels, impl_->queue_depth_legacy.load(std::memory_order_relaxed));
  out += proxy.first;
  out += proxy.second;
}

std::string RequestMetrics::text() {
  std::string out;
  if (legacy_) write_legacy(out);
  if (otel_) write_otel(out);
  scrapes_.fetch_add(1, std::memory_order_relaxed);
  return out;
}

}  // namespace sluice::metrics
