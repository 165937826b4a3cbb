// User request metrics: series per status code, the two name families, the queue depth gauge, and the
// families queue-proxy >= 1.19's exporter writes beside them.
#include "metrics/request_metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tests/unit/metrics/exposition.h"

namespace sluice::metrics {
namespace {

using test::line_with;

RequestMetricsConfig config(MetricNames names) {
  return {.pod = {.namespace_name = "ns", .configuration = "cfg", .revision = "rev", .pod = "pod"},
          .service = "svc",
          .names = names};
}

TEST(RequestMetrics, LegacyNamesCountByCodeAndClassAndObserveMilliseconds) {
  RequestMetrics m(config(MetricNames::knative_legacy));
  m.record_proxy(200, 0.004);
  m.record_proxy(200, 0.004);
  m.record_proxy(503, 0.001);
  m.record_app(200, 0.003);
  auto text = m.text();
  auto ok = line_with(text, "revision_request_count{", "response_code=\"200\"");
  EXPECT_NE(ok.find("response_code_class=\"2xx\""), std::string::npos) << ok;
  EXPECT_NE(ok.find("revision_name=\"rev\""), std::string::npos) << ok;
  EXPECT_TRUE(ok.ends_with(" 2")) << ok;
  EXPECT_TRUE(line_with(text, "revision_request_count{", "response_code=\"503\"").ends_with(" 1"));
  EXPECT_TRUE(line_with(text, "revision_app_request_count{", "response_code=\"200\"").ends_with(" 1"));
  // 4 ms lands in the 5 ms bucket, not the 2 ms one.
  const std::string ok_series = "response_code_class=\"2xx\",revision_name=\"rev\",service_name=\"svc\"";
  EXPECT_TRUE(line_with(text, "revision_request_latencies_bucket{", ok_series + ",le=\"5\"").ends_with(" 2")) << text;
  EXPECT_TRUE(line_with(text, "revision_request_latencies_bucket{", ok_series + ",le=\"2\"").ends_with(" 0")) << text;
  EXPECT_EQ(text.find("kn_serving_"), std::string::npos);
}

// queue-proxy >= 1.19 records the invocation duration after its breaker: the app's exchange, no queueing.
TEST(RequestMetrics, OtelNamesObserveTheAppsSeconds) {
  RequestMetrics m(config(MetricNames::knative_otel));
  m.record_proxy(201, 4.0);  // the client's view, queueing included: not in the 1.19 family
  m.record_app(201, 0.02);
  m.record_queue_depth(3);
  auto text = m.text();
  auto bucket = line_with(text, "kn_serving_invocation_duration_seconds_bucket{", "le=\"0.025\"");
  EXPECT_NE(bucket.find("http_response_status_code=\"201\""), std::string::npos) << text;
  EXPECT_TRUE(bucket.ends_with(" 1")) << bucket;
  EXPECT_TRUE(line_with(text, "kn_serving_invocation_duration_seconds_count{", "").ends_with(" 1")) << text;
  EXPECT_TRUE(line_with(text, "kn_serving_queue_depth{", "").ends_with(" 3")) << text;
  EXPECT_EQ(text.find("revision_request_count"), std::string::npos);
}

// As queue-proxy's OpenTelemetry exporter writes them: each family labelled with its instrumentation scope,
// the resource once, in target_info (dots in its keys as underscores).
TEST(RequestMetrics, OtelFamiliesCarryTheirScopeAndTheResourceIsInTargetInfo) {
  auto c = config(MetricNames::knative_otel);
  c.resource = {{"service.name", "svc"}, {"container.name", "queue-proxy"}, {"k8s.pod.name", "pod"},
                {"telemetry.sdk.language", "cpp"}, {"a-b", "1"}, {"a.b", "2"}};
  RequestMetrics m(c);
  m.record_app(200, 0.1);
  auto text = m.text();
  auto count = line_with(text, "kn_serving_invocation_duration_seconds_count{", "");
  EXPECT_EQ(count,
            "kn_serving_invocation_duration_seconds_count{http_response_status_code=\"200\",otel_scope_name=\"knative.dev/"
            "serving/pkg/queue\",otel_scope_schema_url=\"\",otel_scope_version=\"\"} 1");
  EXPECT_EQ(line_with(text, "target_info{", ""),
            "target_info{a_b=\"1;2\",container_name=\"queue-proxy\",k8s_pod_name=\"pod\",service_name=\"svc\","
            "telemetry_sdk_language=\"cpp\"} 1");
}

// queue-proxy's gauge has no value, and so no line, until a request records one.
TEST(RequestMetrics, QueueDepthIsServedOnceRecorded) {
  RequestMetrics m(config(MetricNames::knative_otel));
  EXPECT_EQ(m.text().find("kn_serving_queue_depth"), std::string::npos);
  EXPECT_FALSE(m.queue_depth());
  m.record_queue_depth(2);
  m.record_queue_depth(1);
  EXPECT_EQ(m.queue_depth(), 1);
  EXPECT_TRUE(line_with(m.text(), "kn_serving_queue_depth{", "").ends_with(" 1"));
}

TEST(RequestMetrics, ProcessAndScrapeFamiliesComeWithTheOtelNames) {
  RequestMetrics m(config(MetricNames::knative_otel));
  m.text();
  auto text = m.text();
  for (const char* family : {"process_cpu_seconds_total ", "process_resident_memory_bytes ", "process_open_fds ",
                             "process_max_fds ", "process_start_time_seconds ", "process_virtual_memory_bytes ",
                             "process_virtual_memory_max_bytes ", "process_network_receive_bytes_total "})
    EXPECT_NE(line_with(text, family, ""), "") << family << "\n" << text;
  EXPECT_GT(std::stod(line_with(text, "process_resident_memory_bytes ", "").substr(30)), 1e5);
  EXPECT_EQ(line_with(text, "promhttp_metric_handler_requests_total{", "\"200\""),
            "promhttp_metric_handler_requests_total{code=\"200\"} 1");  // the scrape before this one
  auto legacy = RequestMetrics(config(MetricNames::knative_legacy)).text();
  EXPECT_EQ(legacy.find("process_"), std::string::npos);
  EXPECT_EQ(legacy.find("target_info"), std::string::npos);
}

TEST(RequestMetrics, BothFamiliesWhenAsked) {
  RequestMetrics m(config(MetricNames::both));
  m.record_proxy(200, 0.1);
  m.record_app(200, 0.1);
  auto text = m.text();
  EXPECT_NE(text.find("revision_request_count{"), std::string::npos);
  EXPECT_NE(text.find("kn_serving_invocation_duration_seconds_count{"), std::string::npos);
}

TEST(RequestMetrics, RecordingFromManyThreadsLosesNothing) {
  RequestMetrics m(config(MetricNames::knative_legacy));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 5000; ++i) m.record_proxy(200 + (i + t) % 3, 0.001);
    });
  for (auto& th : threads) th.join();
  auto text = m.text();
  double total = 0;
  for (int code : {200, 201, 202}) {
    auto line = line_with(text, "revision_request_count{", "response_code=\"" + std::to_string(code) + "\"");
    total += std::stod(line.substr(line.rfind(' ') + 1));
  }
  EXPECT_EQ(total, 20000);
}

}  // namespace
}  // namespace sluice::metrics
