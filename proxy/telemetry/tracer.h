// Spans of the exchanges the sampler picks, the tree queue-proxy v1.23 makes of a request: the server span
// of its otelhttp handler ("GET", a child of the caller), its kn.queueproxy.proxy span, with a breaker the
// kn.queueproxy.wait span for the queue, and the client span of its otelhttp transport ("HTTP GET") for the
// hop to the app, whose id the app gets as its parent in traceparent. The forwarder calls begin() where
// the exchange is counted and end() where its request log is written.
//
// As queue-proxy's (which creates a span, recording or not, for every request once tracing is set up),
// every request but a probe has its traceparent made a child's: a sampled one with a new span id and
// flag 01, one the sampler drops with a new span id and flag 00. Only sampled ones cost more.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "proxy/exchange/exchange.h"
#include "proxy/telemetry/config.h"
#include "proxy/telemetry/span_exporter.h"
#include "proxy/telemetry/trace_context.h"

namespace sluice::proxy::telemetry {

struct ExchangeSpan {
  TraceId trace_id{};
  SpanId server_span{}, proxy_span{}, client_span{};
  std::optional<SpanId> parent;  // the caller's span
  std::uint8_t parent_flags = 0;  // the caller's trace flags
  std::uint8_t flags = 1;         // ours: sampled, and the caller's random bit
  std::string trace_state;
  bool tls = false;                                  // the client's connection (url.scheme)
  std::chrono::system_clock::time_point wall_start;  // record.start on the wall clock
};

class Tracer {
 public:
  Tracer(TracingConfig config, std::uint16_t app_port);

  // Decides, and points the request's traceparent at the client span (the app's parent). When sampled,
  // sets record.span_trace_id (the request log's trace id) and returns the span to end. Not called for a
  // probe (record.probe.any), as queue-proxy's otelhttp filter leaves those out.
  std::optional<ExchangeSpan> begin(http::request_header<>& req, ExchangeRecord& record, bool tls);
  // Enqueues the spans; `forwarded` is when the forwarder was done with the app (the proxy and client
  // spans end there), `end` when the client had the whole response (the server span ends). Never waits.
  void end(const ExchangeSpan& span, const http::request_header<>& req, const ExchangeRecord& record,
           Clock::time_point forwarded, Clock::time_point end);

  const SpanExporter& exporter() const { return exporter_; }

 private:
  const double rate_;
  const bool b3_parents_;
  const std::string app_address_;
  const std::uint16_t app_port_;
  SpanExporter exporter_;
};

}  // namespace sluice::proxy::telemetry
