// requestMetrics.protocol grpc / http/protobuf: the request metrics queue-proxy >= 1.19 exports
// (kn.serving.invocation.duration by http.response.status_code, kn.serving.queue.depth) pushed by OTLP
// every reporting period from a thread of its own, cumulative since start as OTel's default reader.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "metrics/request_metrics.h"
#include "proxy/telemetry/config.h"
#include "proxy/telemetry/transport.h"

namespace sluice::proxy::telemetry {

// The OTLP ExportMetricsServiceRequest for one push.
std::string encode_otlp_metrics(const std::vector<metrics::DurationPoint>& durations,
                                std::optional<double> queue_depth, const Attributes& resource,
                                std::uint64_t start_unix_nano, std::uint64_t now_unix_nano);

class MetricsPusher {
 public:
  // `queue_depth`: the breaker's occupancy as the last request passed it, or nullopt before any did or
  // without a breaker (then no gauge: queue-proxy's has no value to export until it records one).
  MetricsPusher(MetricsPushConfig config, const metrics::RequestMetrics& source,
                std::function<std::optional<double>()> queue_depth);
  // Pushes once more (what the last period saw), then stops.
  ~MetricsPusher();
  MetricsPusher(const MetricsPusher&) = delete;
  MetricsPusher& operator=(const MetricsPusher&) = delete;

  std::uint64_t pushed() const { return pushed_.load(std::memory_order_relaxed); }
  std::uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }

 private:
  void run(std::stop_token stop);
  void push();

  const MetricsPushConfig config_;
  const metrics::RequestMetrics& source_;
  std::function<std::optional<double>()> queue_depth_;
  std::unique_ptr<ExportTransport> transport_;
  const std::uint64_t start_unix_nano_;
  std::atomic<std::uint64_t> pushed_{0}, failed_{0};
  std::string last_error_;
  std::jthread thread_;
};

}  // namespace sluice::proxy::telemetry
