// Scaler metrics, kept as numbers and written at each scrape; the names follow Knative's autoscaler
// (pkg/autoscaler/metrics) where one exists, sluice_autoscaler_* otherwise.
#include "scaler/scaler_metrics.h"

#include <utility>
#include <vector>

#include "metrics/exposition.h"

namespace sluice::scaler {
namespace {

struct GaugeSpec {
  const char* name;
  const char* help;
};

constexpr GaugeSpec kGauges[] = {
    {"autoscaler_desired_pods", "Pods the KPA wants (the value GetMetrics answers)"},
    {"autoscaler_actual_pods", "Sidecars that answered the last scrape"},
    {"autoscaler_stable_request_concurrency", "Average concurrency over the stable window"},
    {"autoscaler_panic_request_concurrency", "Average concurrency over the panic window"},
    {"autoscaler_stable_requests_per_second", "Average requests per second over the stable window"},
    {"autoscaler_panic_requests_per_second", "Average requests per second over the panic window"},
    {"autoscaler_panic_mode", "1 while the KPA is in panic mode"},
    {"autoscaler_excess_burst_capacity", "Spare capacity beyond the target burst capacity"},
    {"sluice_autoscaler_active", "1 while IsActive answers true"},
};

metrics::TextFamilies::Labels labels_of(const RevisionLabels& rev) {
  return {{"namespace_name", rev.namespace_name}, {"revision_name", rev.name}};
}

}  // namespace

ScalerMetrics::ScalerMetrics() = default;
ScalerMetrics::~ScalerMetrics() = default;

void ScalerMetrics::scraped(const RevisionLabels& rev, const std::string& pod) {
  std::lock_guard lock(mu_);
  ++scrapes_[{rev, pod}];
}

void ScalerMetrics::scrape_failed(const RevisionLabels& rev, const std::string& pod, const std::string& reason) {
  std::lock_guard lock(mu_);
  ++errors_[{rev, pod, reason}];
}

void ScalerMetrics::drop_pod(const RevisionLabels& rev, const std::string& pod) {
  std::lock_guard lock(mu_);
  scrapes_.erase({rev, pod});
  std::erase_if(errors_, [&](const auto& e) { return std::get<0>(e.first) == rev && std::get<1>(e.first) == pod; });
}

void ScalerMetrics::decided(const RevisionLabels& rev, autoscaler::ScalingMetric metric,
                            const autoscaler::Decision& d, bool active) {
  std::lock_guard lock(mu_);
  auto& gauges = gauges_[rev];
  if (gauges.empty())
    for (const auto& g : kGauges) gauges[g.name] = 0;
  const bool rps = metric == autoscaler::ScalingMetric::rps;
  gauges["autoscaler_desired_pods"] = d.desired_pods;
  gauges["autoscaler_actual_pods"] = d.ready_pods;
  gauges[rps ? "autoscaler_stable_requests_per_second" : "autoscaler_stable_request_concurrency"] = d.observed_stable;
  gauges[rps ? "autoscaler_panic_requests_per_second" : "autoscaler_panic_request_concurrency"] = d.observed_panic;
  gauges["autoscaler_panic_mode"] = d.panicking ? 1 : 0;
  gauges["autoscaler_excess_burst_capacity"] = d.excess_burst_capacity;
  gauges["sluice_autoscaler_active"] = active ? 1 : 0;
}

void ScalerMetrics::drop_revision(const RevisionLabels& rev) {
  std::lock_guard lock(mu_);
  gauges_.erase(rev);
  std::erase_if(scrapes_, [&](const auto& e) { return std::get<0>(e.first) == rev; });
  std::erase_if(errors_, [&](const auto& e) { return std::get<0>(e.first) == rev; });
}

std::string ScalerMetrics::text() const {
  metrics::TextFamilies out;
  std::lock_guard lock(mu_);
  for (const auto& [key, n] : scrapes_) {
    auto labels = labels_of(std::get<0>(key));
    labels.emplace("pod", std::get<1>(key));
    out.counter("sluice_autoscaler_scrapes_total", "Successful Stat scrapes, per sidecar address", labels,
                static_cast<double>(n));
  }
  for (const auto& [key, n] : errors_) {
    auto labels = labels_of(std::get<0>(key));
    labels.emplace("pod", std::get<1>(key));
    labels.emplace("reason", std::get<2>(key));
    out.counter("sluice_autoscaler_scrape_errors_total",
                "Failed Stat scrapes, per sidecar address and reason "
                "(connect, timeout, write, read, status, content-type, decode, resolve)",
                labels, static_cast<double>(n));
  }
  for (const auto& [rev, gauges] : gauges_)
    for (const auto& g : kGauges) out.gauge(g.name, g.help, labels_of(rev), gauges.at(g.name));
  return out.text();
}

}  // namespace sluice::scaler
