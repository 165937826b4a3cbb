// Trace context of an incoming request (W3C traceparent/tracestate, B3 single and multi header), new
// span ids, and the sampling decision Knative's queue-proxy makes (knative.dev/pkg tracing.sampleFor:
// rate >= 1 always, <= 0 never, else parent-based with a trace-id ratio for roots).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "proxy/io/asio.h"

namespace sluice::proxy::telemetry {

using TraceId = std::array<std::uint8_t, 16>;
using SpanId = std::array<std::uint8_t, 8>;

struct TraceContext {
  TraceId trace_id{};
  SpanId parent_span_id{};  // the caller's span
  bool sampled = false;     // the caller's decision
  std::uint8_t flags = 0;   // the caller's trace flags OTel keeps: sampled (01) and random (02)
  std::string trace_state;
};

// traceparent (as OTel's TraceContext propagator reads it); with `b3`, else B3 (b3, or
// X-B3-TraceId/-SpanId/-Sampled). nullopt: no valid parent.
std::optional<TraceContext> extract_parent(const http::request_header<>& req, bool b3);
// As OpenTelemetry Go reads it: lower-case hex only, version ff refused, version 00 exactly 55 characters
// with flags up to 03, a later version's extra fields allowed.
std::optional<TraceContext> parse_traceparent(std::string_view value);
std::optional<TraceContext> parse_b3(std::string_view single);

TraceId new_trace_id();
SpanId new_span_id();

// OTel's TraceIDRatioBased: the low 8 bytes of the id (big endian, shifted right by one) below
// rate * 2^63.
bool ratio_samples(const TraceId& id, double rate);
// The whole decision for a request with this parent (or none).
bool should_sample(double rate, const std::optional<TraceContext>& parent, const TraceId& trace_id);

// Lower-case hex, as traceparent and Zipkin write ids.
template <std::size_t N>
std::string hex(const std::array<std::uint8_t, N>& bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(2 * N, '0');
  for (std::size_t i = 0; i < N; ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  return out;
}

// "00-<trace>-<span>-<flags>": what the app gets, `span` being the client span (01: sampled; 02, the
// caller's random bit, is kept as OTel keeps it).
std::string format_traceparent(const TraceId& trace, const SpanId& span, std::uint8_t flags);

}  // namespace sluice::proxy::telemetry
