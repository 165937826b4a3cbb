// Spans on the wire, read back: OTLP with protobuf's own parser (classes protoc made from the same
// .proto files), Zipkin v2 JSON and stdouttrace's lines with Boost.JSON.
#include "proxy/telemetry/span_encoding.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "proxy/telemetry/stdout_trace.h"

namespace sluice::proxy::telemetry {
namespace {

FinishedSpan server_span() {
  FinishedSpan s;
  s.trace_id = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")->trace_id;
  s.span_id = {1, 2, 3, 4, 5, 6, 7, 8};
  s.parent_span_id = {0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
  s.has_parent = true;
  s.name = "GET";
  s.start_unix_nano = 1'700'000'000'000'000'000ULL;
  s.end_unix_nano = s.start_unix_nano + 2'500'000;
  s.attributes = {{.key = "http.request.method", .text = "GET"},
                  {.key = "http.response.status_code", .number = 503, .is_number = true}};
  s.error = true;
  return s;
}

TEST(SpanEncoding, OtlpRequestParsesBackWithResourceScopeAndSpan) {
  auto bytes = encode_otlp_traces({server_span()}, {{"kn.revision.name", "r-1"}, {"k8s.container.name", "queue-proxy"}});
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest req;
  ASSERT_TRUE(req.ParseFromString(bytes));
  ASSERT_EQ(req.resource_spans_size(), 1);
  const auto& rs = req.resource_spans(0);
  ASSERT_EQ(rs.resource().attributes_size(), 2);
  EXPECT_EQ(rs.resource().attributes(0).key(), "kn.revision.name");
  EXPECT_EQ(rs.resource().attributes(0).value().string_value(), "r-1");
  const auto& span = rs.scope_spans(0).spans(0);
  EXPECT_EQ(span.trace_id().size(), 16u);
  EXPECT_EQ(static_cast<unsigned char>(span.trace_id()[0]), 0x4b);
  EXPECT_EQ(span.span_id(), std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_EQ(span.parent_span_id().size(), 8u);
  EXPECT_EQ(span.kind(), opentelemetry::proto::trace::v1::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(span.end_time_unix_nano() - span.start_time_unix_nano(), 2'500'000u);
  EXPECT_EQ(span.attributes(1).value().int_value(), 503);
  EXPECT_EQ(span.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(span.flags() & 0xff, 1u);  // sampled
}

// queue-proxy's exporter sends otelhttp's spans and its own under two instrumentation scopes, and sets
// the span flags' "is the parent remote" bits.
TEST(SpanEncoding, OtlpGroupsSpansByScopeAndMarksTheRemoteParent) {
  auto server = server_span();
  server.remote_parent = true;
  server.trace_flags = 3;  // the caller's random bit
  auto proxy = server_span();
  proxy.name = "kn.queueproxy.proxy";
  proxy.kind = FinishedSpan::Kind::internal;
  proxy.scope = SpanScope::queue;
  proxy.error = false;
  auto client = server_span();
  client.kind = FinishedSpan::Kind::client;
  client.status_description = "connection refused";
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest req;
  ASSERT_TRUE(req.ParseFromString(encode_otlp_traces({proxy, server, client}, {})));
  const auto& rs = req.resource_spans(0);
  ASSERT_EQ(rs.scope_spans_size(), 2);
  EXPECT_EQ(rs.scope_spans(0).scope().name(), "knative.dev/serving/pkg/queue");
  EXPECT_EQ(rs.scope_spans(0).scope().version(), "");
  EXPECT_EQ(rs.scope_spans(1).scope().name(), "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp");
  EXPECT_EQ(rs.scope_spans(1).scope().version(), "0.69.0");
  ASSERT_EQ(rs.scope_spans(1).spans_size(), 2);
  EXPECT_EQ(rs.scope_spans(0).spans(0).kind(), opentelemetry::proto::trace::v1::Span::SPAN_KIND_INTERNAL);
  EXPECT_EQ(rs.scope_spans(0).spans(0).flags(), 0x101u);
  EXPECT_EQ(rs.scope_spans(1).spans(0).flags(), 0x303u);
  EXPECT_EQ(rs.scope_spans(1).spans(1).kind(), opentelemetry::proto::trace::v1::Span::SPAN_KIND_CLIENT);
  EXPECT_EQ(rs.scope_spans(1).spans(1).status().message(), "connection refused");
}

TEST(StdoutTrace, ALineIsGosSpanStub) {
  auto span = server_span();
  span.remote_parent = true;
  span.parent_flags = 1;
  span.trace_state = "k=v";
  span.child_spans = 1;
  span.name = "GET";
  span.start_unix_nano = 1'700'000'000'123'456'700ULL;
  auto line = encode_stdout_span(span, {{"service.name", "hello"}, {"k8s.pod.name", "p<1>"}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.rfind("{\"Name\":\"GET\",\"SpanContext\":{\"TraceID\":\"4bf92f3577b34da6a3ce929d0e0e4736\",", 0), 0u)
      << line;
  EXPECT_NE(line.find("\\u003c1\\u003e"), std::string::npos) << line;  // Go escapes < and > in strings
  auto v = boost::json::parse(line).as_object();
  EXPECT_EQ(v.at("SpanContext").at("SpanID").as_string(), "0102030405060708");
  EXPECT_EQ(v.at("SpanContext").at("TraceFlags").as_string(), "01");
  EXPECT_EQ(v.at("SpanContext").at("TraceState").as_string(), "k=v");
  EXPECT_EQ(v.at("Parent").at("SpanID").as_string(), "00f067aa0ba902b7");
  EXPECT_TRUE(v.at("Parent").at("Remote").as_bool());
  EXPECT_EQ(v.at("SpanKind").as_int64(), 2);
  EXPECT_EQ(v.at("Attributes").at(1).at("Value").at("Type").as_string(), "INT64");
  EXPECT_EQ(v.at("Attributes").at(1).at("Value").at("Value").as_int64(), 503);
  EXPECT_TRUE(v.at("Events").is_null());
  EXPECT_EQ(v.at("Status").at("Code").as_string(), "Error");
  EXPECT_EQ(v.at("ChildSpanCount").as_int64(), 1);
  EXPECT_EQ(v.at("Resource").at(0).at("Key").as_string(), "service.name");
  EXPECT_EQ(v.at("Resource").at(1).at("Value").at("Value").as_string(), "p<1>");
  EXPECT_EQ(v.at("InstrumentationScope").at("Version").as_string(), "0.69.0");
  EXPECT_EQ(v.at("InstrumentationLibrary"), v.at("InstrumentationScope"));

  auto root = server_span();
  root.has_parent = false;
  auto parent = boost::json::parse(encode_stdout_span(root, {})).at("Parent");
  EXPECT_EQ(parent.at("TraceID").as_string(), std::string(32, '0'));  // Go's zero SpanContext
  EXPECT_EQ(parent.at("TraceFlags").as_string(), "00");
}

TEST(StdoutTrace, TimesAndStringsAsGosEncodingJson) {
  std::string t;
  append_go_time(t, 1'700'000'000'123'456'700ULL, 0);
  EXPECT_EQ(t, "\"2023-11-14T22:13:20.1234567Z\"");  // RFC 3339, the fraction's trailing zeros dropped
  t.clear();
  append_go_time(t, 1'700'000'000'000'000'000ULL, 3600 + 1800);
  EXPECT_EQ(t, "\"2023-11-14T23:43:20+01:30\"");  // no fraction at all, the zone's offset
  t.clear();
  append_go_time(t, 1'700'000'000'500'000'000ULL, -7 * 3600);
  EXPECT_EQ(t, "\"2023-11-14T15:13:20.5-07:00\"");
  std::string j;
  append_go_json_string(j, std::string("a&\b\f\x01\"\\\xff\xe2\x80\xa8\xc3\xa9", 13));
  EXPECT_EQ(j, "\"a\\u0026\\b\\f\\u0001\\\"\\\\\\ufffd\\u2028\xc3\xa9\"");
}

TEST(SpanEncoding, ZipkinIsV2JsonInMicroseconds) {
  auto root = server_span();
  root.has_parent = false;
  auto json = boost::json::parse(encode_zipkin({root}, "svc")).as_array();
  ASSERT_EQ(json.size(), 1u);
  const auto& s = json[0].as_object();
  EXPECT_EQ(s.at("traceId").as_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(s.at("id").as_string(), "0102030405060708");
  EXPECT_FALSE(s.contains("parentId"));
  EXPECT_EQ(s.at("kind").as_string(), "SERVER");
  EXPECT_EQ(s.at("timestamp").as_int64(), 1'700'000'000'000'000LL);
  EXPECT_EQ(s.at("duration").as_int64(), 2500);
  EXPECT_EQ(s.at("localEndpoint").at("serviceName").as_string(), "svc");
  EXPECT_EQ(s.at("tags").at("http.response.status_code").as_string(), "503");
  EXPECT_EQ(s.at("tags").at("error").as_string(), "true");
}

}  // namespace
}  // namespace sluice::proxy::telemetry
