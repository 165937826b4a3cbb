// The scaler's own Prometheus metrics: scrape outcomes per sidecar and each ScaledObject's latest KPA
// decision under Knative's autoscaler metric names (autoscaler_desired_pods, ...), so dashboards built
// for Knative's autoscaler read it too. Series of dropped pods and forgotten ScaledObjects are removed.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "autoscaler/config.h"
#include "autoscaler/kpa.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
template <typename T>
class Family;
}  // namespace prometheus

namespace sluice::scaler {

// A ScaledObject as metric labels: namespace_name and revision_name (the ScaledObject's name).
struct RevisionLabels {
  std::string namespace_name;
  std::string name;
  auto operator<=>(const RevisionLabels&) const = default;
};

class ScalerMetrics {
 public:
  ScalerMetrics();
  ~ScalerMetrics();

  void scraped(const RevisionLabels& rev, const std::string& pod);
  void scrape_failed(const RevisionLabels& rev, const std::string& pod, const std::string& reason);
  void drop_pod(const RevisionLabels& rev, const std::string& pod);
  void decided(const RevisionLabels& rev, autoscaler::ScalingMetric metric, const autoscaler::Decision& d,
               bool active);
  void drop_revision(const RevisionLabels& rev);

  // Prometheus text exposition of everything above.
  std::string text() const;

 private:
  using Pod = std::tuple<RevisionLabels, std::string>;
  using PodReason = std::tuple<RevisionLabels, std::string, std::string>;

  std::unique_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* scrapes_;
  prometheus::Family<prometheus::Counter>* errors_;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauge_families_;
  std::map<Pod, prometheus::Counter*> scrape_counters_;
  std::map<PodReason, prometheus::Counter*> error_counters_;
  std::map<RevisionLabels, std::map<std::string, prometheus::Gauge*>> revision_gauges_;
};

}  // namespace sluice::scaler
