// The autoscaler's view of one pod, once a period: Knative's `Stat` protobuf (what the autoscaler
// scrapes from :9090 with `Accept: application/protobuf`) and the same numbers as Prometheus text.
#pragma once

#include <memory>
#include <string>

#include "metrics/request_stats.h"

namespace prometheus {
class Registry;
class Gauge;
}  // namespace prometheus

namespace sluice::metrics {

struct PodIdentity {
  std::string namespace_name;
  std::string configuration;
  std::string revision;
  std::string pod;
};

struct StatSample {
  PeriodReport period;
  double uptime_seconds = 0;

  double requests_per_second() const;
  double proxied_requests_per_second() const;
};

// Serialized `Stat` message (see stat.proto).
std::string encode_stat_protobuf(const PodIdentity& pod, const StatSample& s);

// queue_* gauges labelled with the pod's destination; not thread-safe (the control thread owns it).
class StatExposition {
 public:
  explicit StatExposition(const PodIdentity& pod);
  ~StatExposition();
  void update(const StatSample& s);
  std::string text() const;

 private:
  std::unique_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* rps_;
  prometheus::Gauge* proxied_rps_;
  prometheus::Gauge* concurrency_;
  prometheus::Gauge* proxied_concurrency_;
  prometheus::Gauge* uptime_;
};

}  // namespace sluice::metrics
