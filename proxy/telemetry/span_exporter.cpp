// SpanExporter; see span_exporter.h.
#include "proxy/telemetry/span_exporter.h"

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "proxy/telemetry/span_encoding.h"
#include "proxy/telemetry/stdout_trace.h"

namespace sluice::proxy::telemetry {

SpanExporter::SpanExporter(TracingConfig config)
    : config_(std::move(config)),
      transport_(config_.protocol == ExportProtocol::stdout_json
                     ? nullptr
                     : make_transport(config_.protocol, config_.endpoint,
                                      "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                      config_.protocol == ExportProtocol::zipkin ? "application/json"
                                                                                 : "application/x-protobuf")),
      thread_([this](std::stop_token stop) { run(stop); }) {}

SpanExporter::~SpanExporter() {
  thread_.request_stop();
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool SpanExporter::enqueue(FinishedSpan span) {
  if (backing_off_.load(std::memory_order_relaxed)) {  // the collector failed just now: not queued
    failed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= config_.queue_spans) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    queue_.push_back(std::move(span));
    if (queue_.size() < config_.batch_spans) return true;
  }
  wake_.notify_one();  // a full batch goes at once
  return true;
}

void SpanExporter::run(std::stop_token stop) {
  std::vector<FinishedSpan> batch;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, stop, config_.batch_delay, [&] { return queue_.size() >= config_.batch_spans; });
      const auto n = std::min(queue_.size(), config_.batch_spans);
      batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.begin() + static_cast<long>(n)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<long>(n));
    }
    if (backing_off_.load(std::memory_order_relaxed) && ExportClock::now() >= retry_at_)
      backing_off_.store(false, std::memory_order_relaxed);  // the next batch is tried
    if (!batch.empty()) export_batch(batch);
    batch.clear();
    if (stop.stop_requested()) {
      // Shutdown waits for one export at most (a stuck collector must not hold the drain): the batch
      // taken above was it; what is left is dropped and counted.
      std::lock_guard lock(mutex_);
      dropped_.fetch_add(queue_.size(), std::memory_order_relaxed);
      queue_.clear();
      return;
    }
  }
}

void SpanExporter::export_batch(std::vector<FinishedSpan>& batch) {
  if (!transport_) {  // stdout: a line per span, each one write(2) so it never interleaves with a log line
    for (const auto& span : batch) {
      auto line = encode_stdout_span(span, config_.resource);
      log::write_line(line);
    }
    exported_.fetch_add(batch.size(), std::memory_order_relaxed);
    return;
  }
  if (ExportClock::now() < retry_at_) {  // backing off after a failure: dropped as failed, not encoded
    failed_.fetch_add(batch.size(), std::memory_order_relaxed);
    return;
  }
  auto body = config_.protocol == ExportProtocol::zipkin ? encode_zipkin(batch, config_.service_name)
                                                         : encode_otlp_traces(batch, config_.resource);
  std::string error;
  if (transport_->send(body, ExportClock::now() + config_.export_timeout, error)) {
    exported_.fetch_add(batch.size(), std::memory_order_relaxed);
    backoff_ = {};
    return;
  }
  constexpr ExportClock::duration kFirstBackoff = std::chrono::seconds(1), kLongestBackoff = std::chrono::seconds(30);
  backoff_ = backoff_ == ExportClock::duration{} ? kFirstBackoff : std::min(2 * backoff_, kLongestBackoff);
  retry_at_ = ExportClock::now() + backoff_;
  backing_off_.store(true, std::memory_order_relaxed);
  // Once per failure streak, so a collector that is down does not flood the log.
  if (failed_.fetch_add(batch.size(), std::memory_order_relaxed) == 0 || error != last_error_) {
    log::warn("span export failed; spans dropped").kv("endpoint", config_.endpoint.text()).kv("error", error)
        .kv("spans", static_cast<std::uint64_t>(batch.size()));
    last_error_ = error;
  }
}

}  // namespace sluice::proxy::telemetry
