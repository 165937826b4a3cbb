// The scaler's own Prometheus metrics: scrape outcomes per sidecar and each ScaledObject's latest KPA
// decision under Knative's autoscaler metric names (autoscaler_desired_pods, ...), so dashboards built
// for Knative's autoscaler read it too. Series of dropped pods and forgotten ScaledObjects are removed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "autoscaler/config.h"
#include "autoscaler/kpa.h"

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

  mutable std::mutex mu_;
  std::map<Pod, std::uint64_t> scrapes_;
  std::map<PodReason, std::uint64_t> errors_;
  std::map<RevisionLabels, std::map<std::string, double>> gauges_;  // by revision: family → value
};

}  // namespace sluice::scaler
