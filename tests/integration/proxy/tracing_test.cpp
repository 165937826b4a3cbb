// Tracing export through the real sidecar to a real collector process that decodes what it gets
// (OTLP protobuf over HTTP and over gRPC, Zipkin v2 JSON, stdouttrace's lines): queue-proxy v1.23's span
// tree per sampled exchange (the server span, kn.queueproxy.proxy, with a breaker kn.queueproxy.wait, and
// the client span for the hop), parented on the caller's traceparent, the app given the client span as its
// parent, Knative's resource attributes; and a collector that is down or slow costing nothing but counted
// drops.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <csignal>
#include <sstream>

#include "harness.h"
#include "tests/integration/proxy/otlp_receiver.h"
#include "tests/integration/proxy/raw_app.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kParentTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr const char* kParentSpan = "00f067aa0ba902b7";

// `prometheus`: the request metrics on the user-metrics port too, where the span export counters are.
std::string observability(const std::string& protocol, const std::string& endpoint, double rate,
                          bool prometheus = false) {
  return R"({"tracing":{"protocol":")" + protocol + R"(","endpoint":")" + endpoint +
         R"(","samplingRate":)" + std::to_string(rate) + R"(},"enableRequestLog":true,)" +
         (prometheus ? R"("requestMetrics":{"protocol":"prometheus"},)" : "") +
         R"("requestLogTemplate":"trace={{.TraceID}} path={{.Request.URL}}"})";
}

std::string str(const boost::json::value& v) { return std::string(v.as_string()); }

const boost::json::object* find_span(const std::vector<boost::json::object>& spans, const std::string& name) {
  for (const auto& s : spans)
    if (s.at("name").as_string() == name) return &s;
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

// Without a breaker (CONTAINER_CONCURRENCY 0): server "GET" > kn.queueproxy.proxy > client "HTTP GET".
void expect_exchange_spans(const OtlpReceiver& receiver, const std::string& app_headers) {
  std::vector<boost::json::object> spans;
  ASSERT_TRUE(eventually([&] {
    spans = receiver.spans();
    return spans.size() >= 3;
  }, 10s)) << receiver.process->stdout_text();
  ASSERT_EQ(spans.size(), 3u);
  const auto* server = find_span(spans, "GET");
  const auto* proxy = find_span(spans, "kn.queueproxy.proxy");
  const auto* client = find_span(spans, "HTTP GET");
  ASSERT_TRUE(server && proxy && client);
  EXPECT_EQ(server->at("kind").as_int64(), 2);  // SPAN_KIND_SERVER
  EXPECT_EQ(proxy->at("kind").as_int64(), 1);   // SPAN_KIND_INTERNAL
  EXPECT_EQ(client->at("kind").as_int64(), 3);  // SPAN_KIND_CLIENT
  EXPECT_EQ(str(server->at("trace_id")), kParentTrace);
  EXPECT_EQ(str(server->at("parent_span_id")), kParentSpan);
  EXPECT_EQ(server->at("flags").as_int64(), 0x301);  // sampled, the parent known to be remote
  EXPECT_EQ(str(proxy->at("parent_span_id")), str(server->at("span_id")));
  EXPECT_EQ(proxy->at("flags").as_int64(), 0x101);
  EXPECT_EQ(str(proxy->at("scope")), "knative.dev/serving/pkg/queue");
  EXPECT_EQ(str(client->at("trace_id")), kParentTrace);
  EXPECT_EQ(str(client->at("parent_span_id")), str(proxy->at("span_id")));
  EXPECT_EQ(str(client->at("scope")), "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp");
  EXPECT_LE(server->at("start").as_int64(), client->at("start").as_int64());
  EXPECT_GE(server->at("end").as_int64(), client->at("end").as_int64());
  const auto& attrs = server->at("attributes").as_object();
  EXPECT_EQ(str(attrs.at("http.request.method")), "GET");
  EXPECT_EQ(str(attrs.at("url.path")), "/headers");
  EXPECT_EQ(str(attrs.at("url.scheme")), "http");
  EXPECT_EQ(str(attrs.at("server.address")), "127.0.0.1");
  EXPECT_EQ(str(attrs.at("kn.route.tag")), "kn:disabled");
  EXPECT_EQ(str(attrs.at("network.protocol.version")), "1.1");
  EXPECT_GT(attrs.at("network.peer.port").as_int64(), 0);
  EXPECT_GT(attrs.at("http.response.body.size").as_int64(), 0);
  EXPECT_EQ(attrs.at("http.response.status_code").as_int64(), 200);
  const auto& client_attrs = client->at("attributes").as_object();
  EXPECT_EQ(str(client_attrs.at("url.full")).rfind("http://127.0.0.1:", 0), 0u);
  EXPECT_EQ(client_attrs.at("http.response.status_code").as_int64(), 200);
  const auto& res = server->at("resource").as_object();
  EXPECT_EQ(str(res.at("kn.revision.name")), "demo-00001");
  EXPECT_EQ(str(res.at("kn.configuration.name")), "demo");
  EXPECT_EQ(str(res.at("k8s.namespace.name")), "default");
  EXPECT_EQ(str(res.at("container.name")), "queue-proxy");
  EXPECT_EQ(str(res.at("k8s.pod.name")), "demo-00001-pod");
  EXPECT_EQ(str(res.at("service.instance.id")), "demo-00001-pod");
  // The app's parent is the client span: same trace, the hop's span id.
  EXPECT_EQ(echoed(app_headers, "traceparent"),
            std::string("00-") + kParentTrace + "-" + str(client->at("span_id")) + "-01")
      << app_headers;
}

TEST(Tracing, OtlpHttpExportsQueueProxysSpanTreeParentedOnTraceparent) {
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
  // A last request: spans are exported in the order they end, so once its server span is in, a span of the
  // probe (which ended before the traced request began) would be in too.
  ASSERT_EQ(curl({sidecar.url("/marker")}).exit_code, 0);
  auto is_marker = [](const boost::json::object& s) {
    const auto& a = s.at("attributes").as_object();
    return a.contains("url.path") && a.at("url.path").as_string() == "/marker";
  };
  std::vector<boost::json::object> all;
  ASSERT_TRUE(eventually([&] {
    all = receiver.spans();
    return std::any_of(all.begin(), all.end(), is_marker);
  }, 10s));
  const auto marker_trace = str(std::find_if(all.begin(), all.end(), is_marker)->at("trace_id"));
  std::vector<boost::json::object> spans;  // the probe's (none) and the traced request's
  for (const auto& s : all)
    if (str(s.at("trace_id")) != marker_trace) spans.push_back(s);
  ASSERT_EQ(spans.size(), 3u) << receiver.process->stdout_text();
  const auto* server = find_span(spans, "GET");
  const auto* client = find_span(spans, "HTTP GET");
  ASSERT_TRUE(server && client);
  EXPECT_EQ(str(server->at("parent_span_id")), "");  // a root
  EXPECT_EQ(server->at("flags").as_int64(), 0x101);   // whose parent (none) is not remote
  EXPECT_EQ(str(server->at("attributes").as_object().at("network.protocol.version")), "2.0");  // Go's r.Proto
  EXPECT_EQ(str(client->at("attributes").as_object().at("network.protocol.version")), "2.0");
  EXPECT_EQ(echoed(r.out, "traceparent"),
            "00-" + str(server->at("trace_id")) + "-" + str(client->at("span_id")) + "-01");
}

// With a breaker (CONTAINER_CONCURRENCY > 0) the queue has a span of its own between the proxy span and
// the hop, as queue-proxy's kn.queueproxy.wait; an app that answers 404 makes the client span an error
// (otelhttp's client rule: >= 400) but not the server span (>= 500).
TEST(Tracing, TheBreakersQueueIsASpanBetweenProxyAndClient) {
  OtlpReceiver receiver;
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG", observability("grpc", "http://127.0.0.1:" + std::to_string(receiver.grpc_port), 1)},
              {"CONTAINER_CONCURRENCY", "1"}}}};
  auto r = curl({"-H", std::string("traceparent: 00-") + kParentTrace + "-" + kParentSpan + "-03", "-H",
                 "Knative-Serving-Tag: blue", sidecar.url("/status/404?x=1")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<boost::json::object> spans;
  ASSERT_TRUE(eventually([&] { return (spans = receiver.spans()).size() >= 4; }, 10s)) << receiver.process->stdout_text();
  const auto* server = find_span(spans, "GET");
  const auto* proxy = find_span(spans, "kn.queueproxy.proxy");
  const auto* wait = find_span(spans, "kn.queueproxy.wait");
  const auto* client = find_span(spans, "HTTP GET");
  ASSERT_TRUE(server && proxy && wait && client) << receiver.process->stdout_text();
  EXPECT_EQ(str(wait->at("parent_span_id")), str(proxy->at("span_id")));
  EXPECT_EQ(str(client->at("parent_span_id")), str(wait->at("span_id")));
  EXPECT_LE(wait->at("end").as_int64(), client->at("start").as_int64());
  EXPECT_EQ(server->at("flags").as_int64(), 0x303);  // the caller's random bit is kept
  EXPECT_EQ(client->at("status").as_int64(), 2);     // STATUS_CODE_ERROR
  const auto& client_attrs = client->at("attributes").as_object();
  EXPECT_EQ(str(client_attrs.at("error.type")), "404");
  EXPECT_TRUE(str(client_attrs.at("url.full")).ends_with("/status/404?x=1")) << str(client_attrs.at("url.full"));
  EXPECT_EQ(server->at("status").as_int64(), 0);
  EXPECT_EQ(str(server->at("attributes").as_object().at("kn.route.tag")), "blue");
  EXPECT_FALSE(server->at("attributes").as_object().contains("url.query"));  // otelhttp v0.69 sets none
}

TEST(Tracing, ParentBasedSamplingFollowsTheCallersDecision) {
  OtlpReceiver receiver;
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG",
               observability("http/protobuf", "http://127.0.0.1:" + std::to_string(receiver.http_port), 0.5)}}}};
  // Not sampled by the caller: no span, and the app gets a child (a new span id) marked not sampled, as
  // queue-proxy's non-recording spans give it.
  auto unsampled = std::string("00-") + kParentTrace + "-" + kParentSpan + "-00";
  auto r = curl({"-H", "traceparent: " + unsampled, sidecar.url("/headers")});
  auto got = echoed(r.out, "traceparent");
  EXPECT_EQ(got.rfind(std::string("00-") + kParentTrace + "-", 0), 0u) << r.out;
  EXPECT_NE(got, unsampled);
  EXPECT_TRUE(got.ends_with("-00")) << got;
  // B3 is not read (queue-proxy >= 1.19 propagates W3C trace context only): the request starts a trace.
  r = curl({"-H", std::string("X-B3-TraceId: ") + kParentTrace, "-H", std::string("X-B3-SpanId: ") + kParentSpan,
            "-H", "X-B3-Sampled: 1", sidecar.url("/headers")});
  got = echoed(r.out, "traceparent");
  EXPECT_EQ(got.size(), 55u) << r.out;
  EXPECT_EQ(got.find(kParentTrace), std::string::npos);
  // Sampled by the caller: exported.
  r = curl({"-H", std::string("traceparent: 00-") + kParentTrace + "-" + kParentSpan + "-01", sidecar.url("/headers")});
  std::vector<boost::json::object> spans;
  auto of_parent = [&] {
    spans = receiver.spans();
    std::erase_if(spans, [](const auto& s) { return s.at("trace_id").as_string() != kParentTrace; });
    return spans.size() >= 3;
  };
  ASSERT_TRUE(eventually(of_parent, 10s)) << receiver.process->stdout_text();
  EXPECT_EQ(str(find_span(spans, "GET")->at("parent_span_id")), kParentSpan);
}

// tracing.protocol "stdout": every request sampled, its spans printed as OpenTelemetry Go's stdouttrace
// exporter prints them, one JSON object a line among the log lines.
TEST(Tracing, StdoutPrintsEachSpanAsAJsonLine) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"OBSERVABILITY_CONFIG", R"({"tracing":{"protocol":"stdout","samplingRate":0.01}})"}}}};
  auto r = curl({"-H", std::string("traceparent: 00-") + kParentTrace + "-" + kParentSpan + "-01", sidecar.url("/headers")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<boost::json::object> spans;
  ASSERT_TRUE(eventually([&] {
    spans.clear();
    std::istringstream lines(sidecar.process->stdout_text());
    for (std::string line; std::getline(lines, line);) {
      if (lines.eof()) break;  // no newline yet: a line still being written (seen under TSan)
      if (line.starts_with("{\"Name\":")) spans.push_back(boost::json::parse(line).as_object());
    }
    return spans.size() >= 3;
  }, 10s)) << sidecar.process->stdout_text();
  const boost::json::object* server = nullptr;
  for (const auto& s : spans)
    if (s.at("SpanKind").as_int64() == 2) server = &s;
  ASSERT_TRUE(server);
  EXPECT_EQ(str(server->at("SpanContext").at("TraceID")), kParentTrace);
  EXPECT_EQ(str(server->at("Parent").at("SpanID")), kParentSpan);
  EXPECT_TRUE(server->at("Parent").at("Remote").as_bool());
  EXPECT_EQ(server->at("ChildSpanCount").as_int64(), 1);
  EXPECT_EQ(str(server->at("InstrumentationScope").at("Name")),
            "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp");
  EXPECT_TRUE(server->at("Resource").is_array());
  EXPECT_EQ(str(server->at("StartTime")).find('T'), 10u);  // RFC 3339, as Go writes a time.Time
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
    return n >= 3;  // server, kn.queueproxy.proxy (internal: no kind), client
  }, 10s));
  EXPECT_EQ(str(got[0].at("content_type")), "application/json");
  const boost::json::object* server = nullptr;
  for (const auto& g : got)
    for (const auto& s : g.at("spans").as_array())
      if (auto* kind = s.as_object().if_contains("kind"); kind && *kind == "SERVER") server = &s.as_object();
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
      .env = {{"OBSERVABILITY_CONFIG", observability("grpc", "http://127.0.0.1:" + std::to_string(slow.grpc_port), 1, true)},
              {"SLUICE_TRACING_QUEUE_SPANS", "8"}, {"SLUICE_DRAIN_QUIET_PERIOD_MS", "100"}}}};
  auto started = std::chrono::steady_clock::now();
  auto r = run_command({"h2load", "-n", "200", "-c", "4", "--h1", sidecar.url("/")}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("200 succeeded"), std::string::npos) << r.out;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 8s);  // the collector's 10 s never showed
  auto metrics = http_get(sidecar.user_metrics_port, "/metrics");
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
      .env = {{"OBSERVABILITY_CONFIG", observability("http/protobuf", "http://127.0.0.1:" + std::to_string(gone.port), 1, true)}}}};
  for (int i = 0; i < 20; ++i) ASSERT_EQ(curl({orphan.url("/")}).exit_code, 0);
  EXPECT_TRUE(eventually([&] {
    auto v = prometheus_value(http_get(orphan.user_metrics_port, "/metrics"), "sluice_tracing_spans_dropped_total",
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
               observability("http/protobuf", "http://127.0.0.1:" + std::to_string(collector.port()), 1, true)},
              {"SLUICE_TRACING_QUEUE_SPANS", "100000"}}}};
  // 3,000 requests make 6,000 spans: a dozen full batches of 512 within a fraction of a second.
  auto r = run_command({"h2load", "-n", "3000", "-c", "10", "--h1", sidecar.url("/")}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto failed = [&] {
    auto v = prometheus_value(http_get(sidecar.user_metrics_port, "/metrics"), "sluice_tracing_spans_dropped_total",
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
