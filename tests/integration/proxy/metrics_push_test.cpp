// requestMetrics pushed by OTLP (gRPC and HTTP protobuf) to a real collector process that decodes them:
// kn.serving.invocation.duration by status code (probes never counted), kn.serving.queue.depth, Knative's
// resource attributes, every exportInterval.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "harness.h"
#include "tests/integration/proxy/otlp_receiver.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

std::string push_config(const std::string& protocol, const std::string& endpoint) {
  return R"({"requestMetrics":{"protocol":")" + protocol + R"(","endpoint":")" + endpoint +
         R"(","exportInterval":300000000}})";  // 300 ms, as Go's time.Duration marshals it (ns)
}

// The latest pushed metric named `name` ("" when none yet).
boost::json::object latest(const OtlpReceiver& r, const std::string& name) {
  boost::json::object found;
  for (const auto& req : r.received("metrics"))
    for (const auto& b : req.at("batches").as_array())
      for (const auto& m : b.at("metrics").as_array())
        if (m.as_object().at("name").as_string() == name) {
          found = m.as_object();
          found["resource"] = b.at("resource");
        }
  return found;
}

std::int64_t count_for(const boost::json::object& histogram, int status) {
  if (histogram.empty()) return -1;
  for (const auto& p : histogram.at("points").as_array())
    if (p.at("attributes").at("http.response.status_code").as_int64() == status) return p.at("count").as_int64();
  return 0;
}

void exercise(const Sidecar& s) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(curl({s.url("/")}).exit_code, 0);
  ASSERT_EQ(curl({s.url("/status/404")}).exit_code, 0);
  for (int i = 0; i < 5; ++i)  // health checks: never counted
    ASSERT_NE(http_get(s.port, "/", "User-Agent: kube-probe/1.30\r\nK-Network-Probe: queue\r\n").find("200 OK"), std::string::npos);
}

TEST(MetricsPush, OtlpGrpcPushesInvocationDurationByStatusAndQueueDepth) {
  OtlpReceiver receiver;
  Backend backend;
  auto env = std::map<std::string, std::string>{
      {"OBSERVABILITY_CONFIG", push_config("grpc", "http://127.0.0.1:" + std::to_string(receiver.grpc_port))},
      {"CONTAINER_CONCURRENCY", "2"}};
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = env}};
  exercise(sidecar);
  boost::json::object duration;
  ASSERT_TRUE(eventually([&] {
    duration = latest(receiver, "kn.serving.invocation.duration");
    return count_for(duration, 200) == 3 && count_for(duration, 404) == 1;
  }, 10s)) << receiver.process->stdout_text();
  EXPECT_EQ(duration.at("unit").as_string(), "s");
  EXPECT_EQ(duration.at("type").as_string(), "histogram");
  EXPECT_EQ(duration.at("temporality").as_int64(), 2);  // cumulative
  EXPECT_EQ(duration.at("points").as_array().size(), 2u);  // 200 and 404; no probe's
  const auto& p = duration.at("points").as_array()[0].as_object();
  EXPECT_EQ(p.at("bounds").as_array().size(), 14u);  // 0.005 … 10 s, as queue-proxy's
  EXPECT_EQ(p.at("buckets").as_array().size(), 15u);
  const auto& res = duration.at("resource").as_object();
  EXPECT_EQ(res.at("kn.revision.name").as_string(), "demo-00001");
  EXPECT_EQ(res.at("container.name").as_string(), "queue-proxy");  // Knative writes semconv's container.name
  EXPECT_EQ(res.at("service.instance.id").as_string(), res.at("k8s.pod.name").as_string());
  auto depth = latest(receiver, "kn.serving.queue.depth");
  ASSERT_FALSE(depth.empty());
  EXPECT_EQ(depth.at("type").as_string(), "gauge");
  // Pushed every period, not once.
  auto pushes = receiver.received("metrics").size();
  EXPECT_TRUE(eventually([&] { return receiver.received("metrics").size() >= pushes + 2; }, 5s));
  EXPECT_EQ(sidecar.user_metrics_port, 0);  // not Prometheus: nothing on :9091
}

TEST(MetricsPush, OtlpHttpProtobufPushesTheSame) {
  OtlpReceiver receiver;
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG",
               push_config("http/protobuf", "http://127.0.0.1:" + std::to_string(receiver.http_port) + "/v1/metrics")}}}};
  exercise(sidecar);
  ASSERT_TRUE(eventually([&] {
    auto d = latest(receiver, "kn.serving.invocation.duration");
    return count_for(d, 200) == 3 && count_for(d, 404) == 1;
  }, 10s)) << receiver.process->stdout_text();
  EXPECT_TRUE(latest(receiver, "kn.serving.queue.depth").empty());  // no breaker, no gauge (as queue-proxy)
  EXPECT_EQ(receiver.received("metrics")[0].at("content_type").as_string(), "application/x-protobuf");
}

TEST(MetricsPush, BadRequestMetricsSettingsStopStartUpNamingThem) {
  for (const auto& [json, key] : std::vector<std::pair<std::string, std::string>>{
           {R"({"requestMetrics":{"protocol":"opencensus"}})", "requestMetrics.protocol"},
           {R"({"requestMetrics":{"protocol":"grpc"}})", "requestMetrics.endpoint"},
           {R"({"requestMetrics":{"protocol":"grpc","endpoint":"ftp://x:1"}})", "requestMetrics.endpoint"},
           {R"({"requestMetrics":{"protocol":"grpc","endpoint":"http://x:1","exportInterval":-5}})",
            "requestMetrics.exportInterval"}}) {
    auto env = knative_env(8080);
    env["OBSERVABILITY_CONFIG"] = json;
    std::vector<std::string> argv = {"env"};
    for (const auto& [k, v] : env) argv.push_back(k + "=" + v);
    argv.insert(argv.end(), {SLUICE_BIN, "sidecar"});
    auto r = run_command(argv, 10s);
    EXPECT_EQ(r.exit_code, 2) << json;
    EXPECT_NE(r.err.find(key), std::string::npos) << json << ": " << r.err;
  }
}

}  // namespace
}  // namespace sluice::test
