// Spans leave the data path here: a worker enqueues a finished span (a short lock, never a wait; a full
// queue drops it and counts the drop), and a thread of its own batches them and sends each batch to the
// collector (OTLP gRPC or HTTP, Zipkin) or prints it on stdout (tracing.protocol "stdout"). A collector
// that is down or slow only fills the queue.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "proxy/telemetry/config.h"
#include "proxy/telemetry/span.h"
#include "proxy/telemetry/transport.h"

namespace sluice::proxy::telemetry {

class SpanExporter {
 public:
  explicit SpanExporter(TracingConfig config);
  // Sends one more batch of what is queued (one try, bounded by the export timeout), drops the rest, and
  // stops the thread.
  ~SpanExporter();
  SpanExporter(const SpanExporter&) = delete;
  SpanExporter& operator=(const SpanExporter&) = delete;

  // Any thread. False when the queue was full (the span is dropped and counted).
  bool enqueue(FinishedSpan span);

  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  std::uint64_t exported() const { return exported_.load(std::memory_order_relaxed); }
  std::uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }  // spans in failed batches

 private:
  void run(std::stop_token stop);
  void export_batch(std::vector<FinishedSpan>& batch);

  const TracingConfig config_;
  std::unique_ptr<ExportTransport> transport_;  // null: stdout
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::deque<FinishedSpan> queue_;
  std::atomic<std::uint64_t> dropped_{0}, exported_{0}, failed_{0};
  std::string last_error_;  // export thread only
  // After a failed export, batches are dropped unencoded until `retry_at_`: a collector that is down
  // costs no encoding and no connection attempt per batch. The wait doubles from 1 s to 30 s while
  // exports keep failing. Export thread only.
  ExportClock::time_point retry_at_{};
  ExportClock::duration backoff_{};
  // Set while backing off: workers then drop spans at once instead of queueing them (read per span).
  std::atomic<bool> backing_off_{false};
  std::jthread thread_;  // last: starts after everything it reads
};

}  // namespace sluice::proxy::telemetry
