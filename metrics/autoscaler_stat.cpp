// Stat encodings; see autoscaler_stat.h.
#include "metrics/autoscaler_stat.h"

#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "metrics/stat.pb.h"

namespace sluice::metrics {

double StatSample::requests_per_second() const {
  return period.seconds > 0 ? static_cast<double>(period.requests) / period.seconds : 0;
}

double StatSample::proxied_requests_per_second() const {
  return period.seconds > 0 ? static_cast<double>(period.proxied_requests) / period.seconds : 0;
}

std::string encode_stat_protobuf(const PodIdentity& pod, const StatSample& s) {
  wire::Stat stat;
  stat.set_pod_name(pod.pod);
  stat.set_average_concurrent_requests(s.period.average_concurrency);
  stat.set_average_proxied_concurrent_requests(s.period.average_proxied_concurrency);
  stat.set_request_count(s.requests_per_second());
  stat.set_proxied_request_count(s.proxied_requests_per_second());
  stat.set_process_uptime(s.uptime_seconds);
  return stat.SerializeAsString();
}

StatExposition::StatExposition(const PodIdentity& pod)
    : registry_(std::make_unique<prometheus::Registry>()) {
  const prometheus::Labels labels{{"destination_namespace", pod.namespace_name},
                                  {"destination_configuration", pod.configuration},
                                  {"destination_revision", pod.revision},
                                  {"destination_pod", pod.pod}};
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_).Add(labels);
  };
  rps_ = gauge("queue_requests_per_second", "Number of requests received since last Stat");
  proxied_rps_ = gauge("queue_proxied_operations_per_second",
                       "Number of proxied requests received since last Stat");
  concurrency_ = gauge("queue_average_concurrent_requests",
                       "Number of requests currently being handled by this pod");
  proxied_concurrency_ = gauge("queue_average_proxied_concurrent_requests",
                               "Number of proxied requests currently being handled by this pod");
  uptime_ = gauge("process_uptime", "The number of seconds that the process has been up");
}

StatExposition::~StatExposition() = default;

void StatExposition::update(const StatSample& s) {
  rps_->Set(s.requests_per_second());
  proxied_rps_->Set(s.proxied_requests_per_second());
  concurrency_->Set(s.period.average_concurrency);
  proxied_concurrency_->Set(s.period.average_proxied_concurrency);
  uptime_->Set(s.uptime_seconds);
}

std::string StatExposition::text() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace sluice::metrics
