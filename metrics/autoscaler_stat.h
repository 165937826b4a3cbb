// The autoscaler's view of one pod, once a period: Knative's `Stat` protobuf, what queue-proxy serves on
// :9090 to every request for /metrics.
#pragma once

#include <string>

#include "metrics/request_stats.h"

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
  // The reporting period configured, which queue-proxy divides the period's arrivals by whatever its
  // length (a tick a loaded machine stretches; for sluice, a period an arrival after idle closed early):
  // so the rates of all reports add up to the arrivals.
  double report_period_seconds = 1;

  double requests_per_second() const;
  double proxied_requests_per_second() const;
};

// Serialized `Stat` message (see stat.proto).
std::string encode_stat_protobuf(const PodIdentity& pod, const StatSample& s);

}  // namespace sluice::metrics
