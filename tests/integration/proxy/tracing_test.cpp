// Tracing export through the real sidecar to a real collector process that decodes what it gets
// (OTLP protobuf over HTTP and over gRPC, Zipkin v2 JSON): one server span per sampled exchange and a
// client span for the hop, parented on the caller's traceparent or B3, the app given the client span as
// its parent, Knative's resource attributes; and a collector that is down or slow costing nothing but
// counted drops.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <csignal>

#include "harness.h"
#include "tests/integration/proxy/otlp_receiver.h"
#include "tests/integration/proxy/raw_app.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kParentTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr const char* kParentSpan = "00f067aa0ba902b7";

std::string observability(const std::string& protocol, const std::string& endpoint, double rate) {
  return R"({"tracing":{"protocol":")" + protocol + R"(","endpoint":")" + endpoint +
         R"(","samplingRate":)" + std::to_string(rate) + R"(},"enableRequestLog":true,)" +
         R"("requestLogTemplate":"trace={{.TraceID}} path={{.Request.URL}}"})";
}

std::string str(const boost::json::value& v) { return std::string(v.as_string()); }

const boost::json::object* find_span(const std::vector<boost::json::object>& spans, int kind) {
  for (const auto& s : spans)
    if (s.at("kind").as_int64() == kind) return &s;
  return nullptr;
}

// The value the demo app's /headers echoes for `name` (its first line is the request line).
std::string echoed(const std::string& headers, const std::string& name) {
  auto p = headers.find("\n" + name + ": ");
  if (p == std::string::npos) return "";
  auto start = p + 1 + name.size() + 2;
  return headers.substr(start, headers.find('\n', start) - start);
}

std::string status_line_of(const std::string& response) { return response.substr(0, response.find("\r\n")); }

void expect_exchange_spans(const OtlpReceiver& receiver, const std::string& app_headers) {
  std::vector<boost::json::object> spans;
  ASSERT_TRUE(eventually([&] {
    spans = receiver.spans();
    return spans.size() >= 2;
  }, 10s)) << receiver.process->stdout_text();
  ASSERT_EQ(spans.size(), 2u);
  const auto* server = find_span(spans, 2);  // SPAN_KIND_SERVER
  const auto* client = find_span(spans, 3);  // SPAN_KIND_CLIENT
  ASSERT_TRUE(server && client);
  EXPECT_EQ(str(server->at("trace_id")), kParentTrace);
  EXPECT_EQ(str(server->at("parent_span_id")), kParentSpan);
  EXPECT_EQ(str(server->at("name")), "queue");
  EXPECT_EQ(str(client->at("trace_id")), kParentTrace);
  EXPECT_EQ(str(client->at("parent_span_id")), str(server->at("span_id")));
  EXPECT_LE(server->at("start").as_int64(), client->at("start").as_int64());
  EXPECT_GE(server->at("end").as_int64(), client->at("end").as_int64());
  const auto& attrs = server->at("attributes").as_object();
  EXPECT_EQ(str(attrs.at("http.request.method")), "GET");
  EXPECT_EQ(str(attrs.at("url.path")), "/headers");
  EXPECT_EQ(attrs.at("http.response.status_code").as_int64(), 200);
  EXPECT_EQ(str(client->at("attributes").as_object().at("url.full")).rfind("http://127.0.0.1:", 0), 0u);
  const auto& res = server->at("resource").as_object();
  EXPECT_EQ(str(res.at("kn.revision.name")), "demo-00001");
  EXPECT_EQ(str(res.at("kn.configuration.name")), "demo");
  EXPECT_EQ(str(res.at("k8s.namespace.name")), "default");
  EXPECT_EQ(str(res.at("k8s.container.name")), "queue-proxy");
  EXPECT_EQ(str(res.at("k8s.pod.name")), "demo-00001-pod");
  // The app's parent is the client span: same trace, the hop's span id.
  EXPECT_EQ(echoed(app_headers, "traceparent"),
            std::string("00-") + kParentTrace + "-" + str(client->at("span_id")) + "-01")
      << app_headers;
}

TEST(Tracing, OtlpHttpExportsAServerAndAClientSpanParentedOnTraceparent) {
  OtlpReceiver receiver;
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG",
               observability("http/protobuf", "http://127.0.0.1:" + std::to_string(receiver.http_port) + "/v1/traces", 1)},
              {"OTEL_SERVICE_NAME", "from-otel-env"}}}};
  auto r = curl({"-H", std::string("traceparent: 00-") + kParentTrace + "-" + kParentSpan + "-01", sidecar.url("/headers")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_exchange_spans(receiver, r.out);
  auto spans = receiver.spans();
  EXPECT_EQ(str(spans[0].at("resource").as_object().at("service.name")), "from-otel-env");
  EXPECT_EQ(str(receiver.received("traces")[0].at("content_type")), "application/x-protobuf");
  // The request log's trace id is the exported span's.
  EXPECT_TRUE(sidecar.process->wait_for_line(std::string("trace=") + kParentTrace + " path=/headers"));
}

TEST(Tracing, OtlpGrpcExportsTheSameSpans) {
  OtlpReceiver receiver;
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG", observability("grpc", "http://127.0.0.1:" + std::to_string(receiver.grpc_port), 1)}}}};
  auto r = curl({"-H", std::string("traceparent: 00-") + kParentTrace + "-" + kParentSpan + "-01", sidecar.url("/headers")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_exchange_spans(receiver, r.out);
  EXPECT_EQ(str(receiver.spans()[0].at("transport")), "grpc");
  // Without OTEL_SERVICE_NAME, Knative's fallback: the configuration (no SERVING_SERVICE in the test env).
  EXPECT_EQ(str(receiver.spans()[0].at("resource").as_object().at("service.name")), "demo");
}

TEST(Tracing, ARootRequestStartsATraceTheAppContinuesAndProbesAreNotTraced) {
  OtlpReceiver receiver;
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG", observability("grpc", "http://127.0.0.1:" + std::to_string(receiver.grpc_port), 1)}}}};
  ASSERT_EQ(status_line_of(http_get(sidecar.port, "/", "User-Agent: kube-probe/1.30\r\nK-Network-Probe: queue\r\n")),
            "HTTP/1.1 200 OK");
  auto r = curl({"--http2-prior-knowledge", sidecar.url("/headers")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<boost::json::object> spans;
  ASSERT_TRUE(eventually([&] { return (spans = receiver.spans()).size() >= 2; }, 10s));
  std::this_thread::sleep_for(1500ms);  // one more batch period: a probe span would have come by now
  spans = receiver.spans();
  ASSERT_EQ(spans.size(), 2u) << receiver.process->stdout_text();
  const auto* server = find_span(spans, 2);
  const auto* client = find_span(spans, 3);
  ASSERT_TRUE(server && client);
  EXPECT_EQ(str(server->at("parent_span_id")), "");  // a root
  EXPECT_EQ(str(server->at("attributes").as_object().at("network.protocol.version")), "2");
  EXPECT_EQ(echoed(r.out, "traceparent"),
            "00-" + str(server->at("trace_id")) + "-" + str(client->at("span_id")) + "-01");
}

TEST(Tracing, ParentBasedSamplingFollowsTheCallersDecision) {
  OtlpReceiver receiver;
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG",
               observability("http/protobuf", "http://127.0.0.1:" + std::to_string(receiver.http_port), 0.5)}}}};
  // Not sampled by the caller: no span, and the app gets the caller's traceparent untouched.
  auto unsampled = std::string("00-") + kParentTrace + "-" + kParentSpan + "-00";
  auto r = curl({"-H", "traceparent: " + unsampled, sidecar.url("/headers")});
  EXPECT_EQ(echoed(r.out, "traceparent"), unsampled) << r.out;
  // Sampled by the caller (B3 this time): exported.
  r = curl({"-H", std::string("X-B3-TraceId: ") + kParentTrace, "-H", std::string("X-B3-SpanId: ") + kParentSpan,
            "-H", "X-B3-Sampled: 1", sidecar.url("/headers")});
  std::vector<boost::json::object> spans;
  ASSERT_TRUE(eventually([&] { return (spans = receiver.spans()).size() >= 2; }, 10s));
  std::this_thread::sleep_for(1500ms);
  spans = receiver.spans();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(str(find_span(spans, 2)->at("parent_span_id")), kParentSpan);
}

TEST(Tracing, ZipkinFromTheOldVariables) {
  OtlpReceiver receiver;
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"TRACING_CONFIG_BACKEND", "zipkin"},
              {"TRACING_CONFIG_ZIPKIN_ENDPOINT", "http://127.0.0.1:" + std::to_string(receiver.http_port) + "/api/v2/spans"},
              {"TRACING_CONFIG_SAMPLE_RATE", "1.0"}}}};
  auto r = curl({"-H", std::string("b3: ") + kParentTrace + "-" + kParentSpan + "-1", sidecar.url("/headers")});
  ASSERT_EQ(r.exit_code, 0);
  std::vector<boost::json::object> got;
  ASSERT_TRUE(eventually([&] {
    got = receiver.received("zipkin");
    std::size_t n = 0;
    for (const auto& g : got) n += g.at("spans").as_array().size();
    return n >= 2;
  }, 10s));
  EXPECT_EQ(str(got[0].at("content_type")), "application/json");
  const auto& spans = got[0].at("spans").as_array();
  const boost::json::object* server = nullptr;
  for (const auto& s : spans)
    if (s.as_object().at("kind").as_string() == "SERVER") server = &s.as_object();
  ASSERT_TRUE(server);
  EXPECT_EQ(str(server->at("traceId")), kParentTrace);
  EXPECT_EQ(str(server->at("parentId")), kParentSpan);
  EXPECT_EQ(str(server->at("localEndpoint").as_object().at("serviceName")), "demo");
  EXPECT_EQ(str(server->at("tags").as_object().at("http.response.status_code")), "200");
}

// With the collector slow (or gone), requests are served as fast as ever and the spans that do not fit
// the queue are dropped and counted.
TEST(Tracing, ASlowOrDownCollectorCostsOnlyCountedDrops) {
  OtlpReceiver slow({"--delay", "10"});  // beyond the 5 s export timeout: every export fails too
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG", observability("grpc", "http://127.0.0.1:" + std::to_string(slow.grpc_port), 1)},
              {"SLUICE_TRACING_QUEUE_SPANS", "8"}, {"SLUICE_DRAIN_QUIET_PERIOD_MS", "100"}}}};
  auto started = std::chrono::steady_clock::now();
  auto r = run_command({"h2load", "-n", "200", "-c", "4", "--h1", sidecar.url("/")}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("200 succeeded"), std::string::npos) << r.out;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 8s);  // the collector's 10 s never showed
  auto metrics = http_get(sidecar.metrics_port, "/metrics");
  auto dropped = prometheus_value(metrics, "sluice_tracing_spans_dropped_total", "queue_full");
  ASSERT_TRUE(dropped) << metrics;
  EXPECT_GT(*dropped, 300);  // 400 spans, at most 8 queued and one batch in flight
  // Shutdown waits for one export at most (5 s), not for every queued batch.
  auto signalled = std::chrono::steady_clock::now();
  sidecar.process->signal(SIGTERM);
  EXPECT_EQ(exit_status(*sidecar.process, 15s), "exited 0");
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, 12s);

  // Nobody listening: the export fails, is logged once, and the requests do not notice.
  ReservedPort gone;
  Sidecar orphan{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG", observability("http/protobuf", "http://127.0.0.1:" + std::to_string(gone.port), 1)}}}};
  for (int i = 0; i < 20; ++i) ASSERT_EQ(curl({orphan.url("/")}).exit_code, 0);
  EXPECT_TRUE(eventually([&] {
    auto v = prometheus_value(http_get(orphan.metrics_port, "/metrics"), "sluice_tracing_spans_dropped_total",
                              "export_failed");
    return v && *v >= 40;
  }, 10s));
  // The log line may reach the captured output a moment after the counter moved: wait for it, then
  // check there is only the one.
  EXPECT_TRUE(orphan.process->wait_for_line("span export failed", 5s));
  EXPECT_EQ(count_of(orphan.process->stdout_text(), "span export failed"), 1u);
}

// A collector that answers every export with an error is not tried again for every batch: after a
// failure the batches of the next second (then 2 s, 4 s, … up to 30 s) are dropped and counted without
// being encoded or sent, so a broken collector costs the sidecar no CPU beyond the spans themselves.
TEST(Tracing, AFailingCollectorIsBackedOffNotRetriedPerBatch) {
  RawApp collector("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", true);
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG",
               observability("http/protobuf", "http://127.0.0.1:" + std::to_string(collector.port()), 1)},
              {"SLUICE_TRACING_QUEUE_SPANS", "100000"}}}};
  // 3,000 requests make 6,000 spans: a dozen full batches of 512 within a fraction of a second.
  auto r = run_command({"h2load", "-n", "3000", "-c", "10", "--h1", sidecar.url("/")}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto failed = [&] {
    auto v = prometheus_value(http_get(sidecar.metrics_port, "/metrics"), "sluice_tracing_spans_dropped_total",
                              "export_failed");
    return v ? *v : 0.0;
  };
  ASSERT_TRUE(eventually([&] { return failed() >= 5632; }, 10s)) << failed();  // the eleven full batches at least
  EXPECT_LE(collector.requests(), 2U);  // without the back-off: one export per batch
}

TEST(Tracing, BadTracingSettingsStopStartUpNamingThem) {
  auto refused = [](std::map<std::string, std::string> extra) {
    auto env = knative_env(8080);
    for (auto& [k, v] : extra) env[k] = v;
    std::vector<std::string> argv = {"env"};
    for (const auto& [k, v] : env) argv.push_back(k + "=" + v);
    argv.insert(argv.end(), {SLUICE_BIN, "sidecar"});
    return run_command(argv, 10s);
  };
  auto r = refused({{"OBSERVABILITY_CONFIG", R"({"tracing":{"protocol":"jaeger"}})"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("OBSERVABILITY_CONFIG: tracing.protocol"), std::string::npos) << r.err;
  r = refused({{"OBSERVABILITY_CONFIG", R"({"tracing":{"protocol":"grpc","endpoint":"http://c:4317","samplingRate":2}})"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tracing.samplingRate"), std::string::npos) << r.err;
  r = refused({{"OBSERVABILITY_CONFIG", R"({"tracing":{"protocol":"grpc"}})"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tracing.endpoint"), std::string::npos) << r.err;
  r = refused({{"TRACING_CONFIG_BACKEND", "zipkin"}, {"TRACING_CONFIG_ZIPKIN_ENDPOINT", "http://z:9411"},
               {"TRACING_CONFIG_SAMPLE_RATE", "often"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("TRACING_CONFIG_SAMPLE_RATE"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sluice::test
