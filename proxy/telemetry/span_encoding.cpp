// Span encodings; see span_encoding.h. OTLP through the classes protoc made from proto/ (lite runtime).
#include "proxy/telemetry/span_encoding.h"

#include "common/log.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace sluice::proxy::telemetry {
namespace {

namespace otlp = opentelemetry::proto;

void set_attribute(otlp::common::v1::KeyValue* kv, const std::string& key, const std::string& value) {
  kv->set_key(key);
  kv->mutable_value()->set_string_value(value);
}

template <std::size_t N>
std::string bytes(const std::array<std::uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), N);
}

}  // namespace

ScopeName scope_name(SpanScope scope) {
  // The otelhttp version is the one queue-proxy v1.23 vendors, whose attribute conventions these spans follow.
  if (scope == SpanScope::otelhttp) return {"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", "0.69.0"};
  return {"knative.dev/serving/pkg/queue", ""};
}

std::string encode_otlp_traces(const std::vector<FinishedSpan>& spans, const Attributes& resource) {
  otlp::collector::trace::v1::ExportTraceServiceRequest req;
  auto* rs = req.add_resource_spans();
  for (const auto& [k, v] : resource) set_attribute(rs->mutable_resource()->add_attributes(), k, v);
  // One ScopeSpans per instrumentation scope, in the order the batch first names them.
  otlp::trace::v1::ScopeSpans* scopes[2] = {nullptr, nullptr};
  for (const auto& s : spans) {
    auto*& ss = scopes[static_cast<int>(s.scope)];
    if (!ss) {
      ss = rs->add_scope_spans();
      auto name = scope_name(s.scope);
      ss->mutable_scope()->set_name(name.name);
      ss->mutable_scope()->set_version(name.version);
    }
    auto* o = ss->add_spans();
    o->set_trace_id(bytes(s.trace_id));
    o->set_span_id(bytes(s.span_id));
    if (s.has_parent) o->set_parent_span_id(bytes(s.parent_span_id));
    o->set_trace_state(s.trace_state);
    // The trace flags, and that whether the parent is remote is known (0x100) and whether it is (0x200),
    // as Go's exporter sets them.
    o->set_flags(s.trace_flags | 0x100u | (s.remote_parent ? 0x200u : 0u));
    o->set_name(s.name);
    o->set_kind(static_cast<otlp::trace::v1::Span::SpanKind>(s.kind));
    o->set_start_time_unix_nano(s.start_unix_nano);
    o->set_end_time_unix_nano(s.end_unix_nano);
    for (const auto& a : s.attributes) {
      auto* kv = o->add_attributes();
      kv->set_key(a.key);
      if (a.is_number) kv->mutable_value()->set_int_value(a.number);
      else kv->mutable_value()->set_string_value(a.text);
    }
    if (s.error) {
      o->mutable_status()->set_code(otlp::trace::v1::Status::STATUS_CODE_ERROR);
      o->mutable_status()->set_message(s.status_description);
    }
  }
  return req.SerializeAsString();
}

std::string encode_zipkin(const std::vector<FinishedSpan>& spans, const std::string& service_name) {
  using log::append_json_string;
  std::string out = "[";
  for (const auto& s : spans) {
    if (out.size() > 1) out += ',';
    out += "{\"traceId\":\"" + hex(s.trace_id) + "\",\"id\":\"" + hex(s.span_id) + "\"";
    if (s.has_parent) out += ",\"parentId\":\"" + hex(s.parent_span_id) + "\"";
    if (s.kind != FinishedSpan::Kind::internal)
      out += s.kind == FinishedSpan::Kind::server ? ",\"kind\":\"SERVER\"" : ",\"kind\":\"CLIENT\"";
    out += ",\"name\":";
    append_json_string(out, s.name);
    // Zipkin counts microseconds.
    out += ",\"timestamp\":" + std::to_string(s.start_unix_nano / 1000) +
           ",\"duration\":" + std::to_string(std::max<std::uint64_t>(1, (s.end_unix_nano - s.start_unix_nano) / 1000));
    out += ",\"localEndpoint\":{\"serviceName\":";
    append_json_string(out, service_name);
    out += "},\"tags\":{";
    bool first = true;
    for (const auto& a : s.attributes) {
      if (!first) out += ',';
      first = false;
      append_json_string(out, a.key);
      out += ':';
      append_json_string(out, a.is_number ? std::to_string(a.number) : a.text);
    }
    if (s.error) out += std::string(first ? "" : ",") + "\"error\":\"true\"";
    out += "}}";
  }
  out += ']';
  return out;
}

}  // namespace sluice::proxy::telemetry
