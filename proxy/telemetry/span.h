// A finished span as the export thread encodes it: ids, name, kind, times, attributes, status.
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

struct FinishedSpan {
  enum class Kind { server, client };
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};
  bool has_parent = false;
  std::string trace_state;
  std::string name;
  Kind kind = Kind::server;
  std::uint64_t start_unix_nano = 0;
  std::uint64_t end_unix_nano = 0;
  std::vector<SpanAttribute> attributes;
  bool error = false;
};

}  // namespace sluice::proxy::telemetry
