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

std::string encode_otlp_traces(const std::vector<FinishedSpan>& spans, const Attributes& resource) {
  otlp::collector::trace::v1::ExportTraceServiceRequest req;
  auto* rs = req.add_resource_spans();
  for (const auto& [k, v] : resource) set_attribute(rs->mutable_resource()->add_attributes(), k, v);
  auto* ss = rs->add_scope_spans();
  ss->mutable_scope()->set_name("knative.dev/serving/pkg/queue");
  for (const auto& s : spans) {
    auto* o = ss->add_spans();
    o->set_trace_id(bytes(s.trace_id));
    o->set_span_id(bytes(s.span_id));
    if (s.has_parent) o->set_parent_span_id(bytes(s.parent_span_id));
    o->set_trace_state(s.trace_state);
    o->set_flags(1);  // sampled: only sampled spans are exported
    o->set_name(s.name);
    o->set_kind(s.kind == FinishedSpan::Kind::server ? otlp::trace::v1::Span::SPAN_KIND_SERVER
                                                     : otlp::trace::v1::Span::SPAN_KIND_CLIENT);
    o->set_start_time_unix_nano(s.start_unix_nano);
    o->set_end_time_unix_nano(s.end_unix_nano);
    for (const auto& a : s.attributes) {
      auto* kv = o->add_attributes();
      kv->set_key(a.key);
      if (a.is_number) kv->mutable_value()->set_int_value(a.number);
      else kv->mutable_value()->set_string_value(a.text);
    }
    if (s.error) o->mutable_status()->set_code(otlp::trace::v1::Status::STATUS_CODE_ERROR);
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
    out += ",\"kind\":\"";
    out += s.kind == FinishedSpan::Kind::server ? "SERVER" : "CLIENT";
    out += "\",\"name\":";
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
