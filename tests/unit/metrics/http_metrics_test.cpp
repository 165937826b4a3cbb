// otelhttp's families as queue-proxy serves them: attributes, buckets, the route tag, the cardinality limit.
#include "metrics/http_metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tests/unit/metrics/exposition.h"

namespace sluice::metrics {
namespace {

using test::line_with;

std::string text_of(const HttpMetrics& m) {
  std::string out;
  m.write(out);
  return out;
}

const std::string kScope =
    "otel_scope_name=\"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp\",otel_scope_schema_url=\"\","
    "otel_scope_version=\"0.69.0\"";

TEST(HttpMetrics, RouteTagsAsKnativesHandlerNamesThem) {
  EXPECT_EQ(knative_route_tag("canary", ""), "canary");
  EXPECT_EQ(knative_route_tag("", "true"), "kn:default");
  EXPECT_EQ(knative_route_tag("x", "true"), "kn:undefined");
  EXPECT_EQ(knative_route_tag("", ""), "kn:disabled");
  EXPECT_EQ(knative_route_tag("x", "false"), "x");
}

TEST(HttpMetrics, NothingIsWrittenBeforeARequest) { EXPECT_EQ(text_of(HttpMetrics(8080)), ""); }

TEST(HttpMetrics, ServerSeriesCarryOtelhttpsAttributes) {
  HttpMetrics m(8080);
  m.record_server({.method = "get", .status = 200, .route_tag = "kn:disabled", .host = "hello.example.com:8443",
                   .request_body_bytes = 0, .response_body_bytes = 26, .seconds = 0.003});
  m.record_server({.method = "BREW", .status = 418, .route_tag = "canary", .version = HttpVersion::v2,
                   .host = "localhost:443", .tls = true, .seconds = 0.2});
  auto text = text_of(m);
  EXPECT_EQ(line_with(text, "http_server_request_duration_seconds_count{", "GET"),
            "http_server_request_duration_seconds_count{http_request_method=\"GET\",http_response_status_code=\"200\","
            "kn_route_tag=\"kn:disabled\",network_protocol_name=\"http\",network_protocol_version=\"1.1\"," + kScope +
            ",server_address=\"hello.example.com\",server_port=\"8443\",url_scheme=\"http\"} 1");
  // The default port of the scheme is left out; an unknown method is _OTHER.
  EXPECT_EQ(line_with(text, "http_server_request_duration_seconds_count{", "_OTHER"),
            "http_server_request_duration_seconds_count{http_request_method=\"_OTHER\",http_response_status_code=\"418\","
            "kn_route_tag=\"canary\",network_protocol_name=\"http\",network_protocol_version=\"2\"," + kScope +
            ",server_address=\"localhost\",url_scheme=\"https\"} 1");
  // Durations in otelhttp's buckets, body sizes in OpenTelemetry's default ones (0 is a bucket of its own).
  EXPECT_TRUE(line_with(text, "http_server_request_duration_seconds_bucket{", "GET").ends_with("le=\"0.005\"} 1"));
  EXPECT_TRUE(line_with(text, "http_server_request_body_size_bytes_bucket{", "GET").ends_with("le=\"0\"} 1"));
  EXPECT_TRUE(line_with(text, "http_server_response_body_size_bytes_bucket{", "le=\"50\"").ends_with(" 1"));
  EXPECT_TRUE(line_with(text, "http_server_response_body_size_bytes_bucket{", "le=\"25\"").ends_with(" 0"));
  EXPECT_TRUE(line_with(text, "http_server_response_body_size_bytes_sum{", "GET").ends_with(" 26"));
  EXPECT_EQ(text.find("http_client_"), std::string::npos);
}

TEST(HttpMetrics, ClientSeriesNameTheAppAndTheErrorWhenNoHeadCame) {
  HttpMetrics m(8080);
  m.record_client({.method = "POST", .status = 201, .route_tag = "kn:default", .request_body_bytes = 11,
                   .seconds = 0.01});
  m.record_client({.method = "GET", .error = AppError::dial, .route_tag = "kn:disabled", .seconds = 0.001});
  auto text = text_of(m);
  EXPECT_EQ(line_with(text, "http_client_request_body_size_bytes_count{", "POST"),
            "http_client_request_body_size_bytes_count{http_request_method=\"POST\",http_response_status_code=\"201\","
            "kn_route_tag=\"kn:default\",network_protocol_name=\"http\",network_protocol_version=\"1.1\"," + kScope +
            ",server_address=\"127.0.0.1\",server_port=\"8080\",url_scheme=\"http\"} 1");
  EXPECT_EQ(line_with(text, "http_client_request_duration_seconds_count{", "error_type"),
            "http_client_request_duration_seconds_count{error_type=\"net.OpError\",http_request_method=\"GET\","
            "kn_route_tag=\"kn:disabled\",network_protocol_name=\"http\",network_protocol_version=\"1.1\"," + kScope +
            ",server_address=\"127.0.0.1\",server_port=\"8080\",url_scheme=\"http\"} 1");
  EXPECT_EQ(text.find("http_server_"), std::string::npos);
}

// The OpenTelemetry SDK keeps 2000 attribute sets per instrument; measurements of new ones beyond that fold
// into one set marked otel_metric_overflow, so the totals stay right.
TEST(HttpMetrics, AttributeSetsBeyondTheLimitFoldIntoTheOverflowSeries) {
  HttpMetrics m(8080);
  std::vector<std::string> tags;
  for (int i = 0; i < 2100; ++i) tags.push_back("tag-" + std::to_string(i));
  for (const auto& t : tags) m.record_server({.method = "GET", .status = 200, .route_tag = t, .host = "h"});
  m.record_server({.method = "GET", .status = 200, .route_tag = "tag-7", .host = "h"});  // an existing set
  auto text = text_of(m);
  std::size_t series = 0, pos = 0;
  while ((pos = text.find("http_server_request_duration_seconds_count{", pos)) != std::string::npos) {
    ++series;
    ++pos;
  }
  EXPECT_EQ(series, 2000u);
  EXPECT_EQ(line_with(text, "http_server_request_duration_seconds_count{otel_metric_overflow=\"true\"", ""),
            "http_server_request_duration_seconds_count{otel_metric_overflow=\"true\"," + kScope + "} 101");
  EXPECT_TRUE(line_with(text, "http_server_request_duration_seconds_count{", "\"tag-7\"").ends_with(" 2"));
}

TEST(HttpMetrics, RecordingFromManyThreadsLosesNothing) {
  HttpMetrics m(8080);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 5000; ++i)
        m.record_server({.method = "GET", .status = 200 + (i + t) % 3, .route_tag = "kn:disabled", .host = "h"});
    });
  for (auto& th : threads) th.join();
  auto text = text_of(m);
  double total = 0;
  for (int code : {200, 201, 202}) {
    auto line = line_with(text, "http_server_request_duration_seconds_count{",
                          "status_code=\"" + std::to_string(code) + "\"");
    total += std::stod(line.substr(line.rfind(' ') + 1));
  }
  EXPECT_EQ(total, 20000);
}

}  // namespace
}  // namespace sluice::metrics
