// A finished span as the export thread encodes it: ids, name, kind, times, attributes, status, and the
// instrumentation scope queue-proxy's span of that kind comes from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proxy/telemetry/trace_context.h"

namespace sluice::proxy::telemetry {

struct SpanAttribute {
  std::string key;
  std::string text;
  std::int64_t number = 0;
  bool is_number = false;
};

// Which instrumentation writes a span in queue-proxy: otelhttp (the server span of its handler, the
// client span of its transport) or queue-proxy's own tracer (kn.queueproxy.proxy and .wait).
enum class SpanScope { otelhttp, queue };
struct ScopeName {
  const char* name;
  const char* version;
};
ScopeName scope_name(SpanScope scope);

struct FinishedSpan {
  enum class Kind { internal = 1, server = 2, client = 3 };  // OTLP's (and Go's trace.SpanKind) numbers
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};
  bool has_parent = false;
  bool remote_parent = false;     // the parent is the caller's (came in traceparent), not one of ours
  std::uint8_t trace_flags = 1;   // its own: sampled, and the caller's random bit (02) when it set one
  std::uint8_t parent_flags = 1;  // the parent's (the caller's, for a remote parent)
  std::string trace_state;
  std::string name;
  Kind kind = Kind::server;
  SpanScope scope = SpanScope::otelhttp;
  std::uint64_t start_unix_nano = 0;
  std::uint64_t end_unix_nano = 0;
  std::vector<SpanAttribute> attributes;
  bool error = false;
  std::string status_description;  // with `error`
  std::uint32_t child_spans = 0;   // spans started as its children (stdouttrace prints the count)
};

}  // namespace sluice::proxy::telemetry
