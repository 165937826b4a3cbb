// Spans of the exchanges the sampler picks: a server span for the exchange (queue-proxy's otelhttp
// handler, "queue") and a client span for the hop to the app, whose id the app gets as its parent in
// traceparent. The forwarder calls begin() where the exchange is counted and end() where its request
// log is written; both cost nothing for an exchange that is not sampled beyond the decision.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "proxy/exchange.h"
#include "proxy/telemetry/config.h"
#include "proxy/telemetry/span_exporter.h"
#include "proxy/telemetry/trace_context.h"

namespace sluice::proxy::telemetry {

struct ExchangeSpan {
  TraceId trace_id{};
  SpanId server_span{}, client_span{};
  std::optional<SpanId> parent;
  std::string trace_state;
  std::chrono::system_clock::time_point wall_start;  // record.start on the wall clock
};

class Tracer {
 public:
  Tracer(TracingConfig config, std::uint16_t app_port);

  // Decides; when sampled, points the request's traceparent at the client span (the app's parent), sets
  // record.span_trace_id (the request log's trace id) and returns the span to end.
  std::optional<ExchangeSpan> begin(http::request_header<>& req, ExchangeRecord& record);
  // Enqueues the server span and, when the app was asked, the client span. Never waits.
  void end(const ExchangeSpan& span, const http::request_header<>& req, const ExchangeRecord& record,
           Clock::time_point end);

  const SpanExporter& exporter() const { return exporter_; }

 private:
  const double rate_;
  const std::string app_address_;
  const std::uint16_t app_port_;
  SpanExporter exporter_;
};

}  // namespace sluice::proxy::telemetry
