// Spans on the wire, read back: OTLP with protobuf's own parser (classes protoc made from the same
// .proto files), Zipkin v2 JSON with Boost.JSON.
#include "proxy/telemetry/span_encoding.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace sluice::proxy::telemetry {
namespace {

FinishedSpan server_span() {
  FinishedSpan s;
  s.trace_id = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")->trace_id;
  s.span_id = {1, 2, 3, 4, 5, 6, 7, 8};
  s.parent_span_id = {0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
  s.has_parent = true;
  s.name = "queue";
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
