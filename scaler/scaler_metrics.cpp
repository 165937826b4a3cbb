// Scaler metrics over prometheus-cpp's core types; the names follow Knative's autoscaler
// (pkg/autoscaler/metrics) where one exists, sluice_autoscaler_* otherwise.
#include "scaler/scaler_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <utility>
#include <vector>

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

prometheus::Labels labels_of(const RevisionLabels& rev) {
  return {{"namespace_name", rev.namespace_name}, {"revision_name", rev.name}};
}

}  // namespace

ScalerMetrics::ScalerMetrics() : registry_(std::make_unique<prometheus::Registry>()) {
  scrapes_ = &prometheus::BuildCounter()
                  .Name("sluice_autoscaler_scrapes_total")
                  .Help("Successful Stat scrapes, per sidecar address")
                  .Register(*registry_);
  errors_ = &prometheus::BuildCounter()
                 .Name("sluice_autoscaler_scrape_errors_total")
                 .Help("Failed Stat scrapes, per sidecar address and reason "
                       "(connect, timeout, write, read, status, content-type, decode, resolve)")
                 .Register(*registry_);
  for (const auto& g : kGauges) {
    gauge_families_[g.name] = &prometheus::BuildGauge().Name(g.name).Help(g.help).Register(*registry_);
  }
}

ScalerMetrics::~ScalerMetrics() = default;

void ScalerMetrics::scraped(const RevisionLabels& rev, const std::string& pod) {
  auto& c = scrape_counters_[{rev, pod}];
  if (c == nullptr) {
    auto labels = labels_of(rev);
    labels.emplace("pod", pod);
    c = &scrapes_->Add(labels);
  }
  c->Increment();
}

void ScalerMetrics::scrape_failed(const RevisionLabels& rev, const std::string& pod, const std::string& reason) {
  auto& c = error_counters_[{rev, pod, reason}];
  if (c == nullptr) {
    auto labels = labels_of(rev);
    labels.emplace("pod", pod);
    labels.emplace("reason", reason);
    c = &errors_->Add(labels);
  }
  c->Increment();
}

void ScalerMetrics::drop_pod(const RevisionLabels& rev, const std::string& pod) {
  if (auto it = scrape_counters_.find({rev, pod}); it != scrape_counters_.end()) {
    scrapes_->Remove(it->second);
    scrape_counters_.erase(it);
  }
  for (auto it = error_counters_.begin(); it != error_counters_.end();) {
    if (std::get<0>(it->first) == rev && std::get<1>(it->first) == pod) {
      errors_->Remove(it->second);
      it = error_counters_.erase(it);
    } else {
      ++it;
    }
  }
}

void ScalerMetrics::decided(const RevisionLabels& rev, autoscaler::ScalingMetric metric,
                            const autoscaler::Decision& d, bool active) {
  auto& gauges = revision_gauges_[rev];
  if (gauges.empty()) {
    for (const auto& [name, family] : gauge_families_) gauges[name] = &family->Add(labels_of(rev));
  }
  const bool rps = metric == autoscaler::ScalingMetric::rps;
  gauges["autoscaler_desired_pods"]->Set(d.desired_pods);
  gauges["autoscaler_actual_pods"]->Set(d.ready_pods);
  gauges[rps ? "autoscaler_stable_requests_per_second" : "autoscaler_stable_request_concurrency"]->Set(
      d.observed_stable);
  gauges[rps ? "autoscaler_panic_requests_per_second" : "autoscaler_panic_request_concurrency"]->Set(
      d.observed_panic);
  gauges["autoscaler_panic_mode"]->Set(d.panicking ? 1 : 0);
  gauges["autoscaler_excess_burst_capacity"]->Set(d.excess_burst_capacity);
  gauges["sluice_autoscaler_active"]->Set(active ? 1 : 0);
}

void ScalerMetrics::drop_revision(const RevisionLabels& rev) {
  if (auto it = revision_gauges_.find(rev); it != revision_gauges_.end()) {
    for (const auto& [name, gauge] : it->second) gauge_families_[name]->Remove(gauge);
    revision_gauges_.erase(it);
  }
  std::vector<std::string> pods;
  for (const auto& [key, c] : scrape_counters_) {
    if (std::get<0>(key) == rev) pods.push_back(std::get<1>(key));
  }
  for (const auto& [key, c] : error_counters_) {
    if (std::get<0>(key) == rev) pods.push_back(std::get<1>(key));
  }
  for (const auto& pod : pods) drop_pod(rev, pod);
}

std::string ScalerMetrics::text() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace sluice::scaler
