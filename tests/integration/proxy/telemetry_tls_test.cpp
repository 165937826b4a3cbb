// Export to a collector behind TLS (an https:// endpoint, or a scheme-less one, which Knative reads as
// https), as queue-proxy's OpenTelemetry exporters do it: the sidecar trusts only a CA made for the test
// (SSL_CERT_FILE, and an empty SSL_CERT_DIR), the test collector serves a certificate that CA signed for
// 127.0.0.1 and localhost, and spans (OTLP/HTTP, OTLP/gRPC, Zipkin) and pushed metrics arrive. A
// collector whose certificate comes from another CA, or names another host, gets nothing; the sidecar
// logs why and goes on serving.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <filesystem>

#include "harness.h"
#include "tests/integration/proxy/otlp_receiver.h"
#include "tests/integration/proxy/raw_app.h"
#include "tests/integration/proxy/test_ca.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr const char* kParent = "00f067aa0ba902b7";

std::string tracing(const std::string& protocol, const std::string& endpoint) {
  return R"({"tracing":{"protocol":")" + protocol + R"(","endpoint":")" + endpoint + R"(","samplingRate":1}})";
}

std::string pushed_metrics(const std::string& protocol, const std::string& endpoint) {
  return R"({"requestMetrics":{"protocol":")" + protocol + R"(","endpoint":")" + endpoint +
         R"(","exportInterval":300000000}})";  // 300 ms, in Go's time.Duration nanoseconds
}

std::vector<std::string> traced_request(const Sidecar& s) {
  return {"-H", std::string("traceparent: 00-") + kTrace + "-" + kParent + "-01", s.url("/")};
}

// The server span (SPAN_KIND_SERVER) of the test's trace, once it has arrived.
bool got_server_span(const OtlpReceiver& r, const std::string& transport) {
  for (const auto& span : r.spans())
    if (span.at("kind").as_int64() == 2 && span.at("trace_id").as_string() == kTrace &&
        span.at("parent_span_id").as_string() == kParent && span.at("transport").as_string() == transport)
      return true;
  return false;
}

// A metrics push over `transport` that counted `n` answered requests with status 200.
bool got_invocations(const OtlpReceiver& r, const std::string& transport, std::int64_t n) {
  for (const auto& req : r.received("metrics")) {
    if (req.at("transport").as_string() != transport) continue;
    for (const auto& b : req.at("batches").as_array())
      for (const auto& m : b.at("metrics").as_array())
        if (m.at("name").as_string() == "kn.serving.invocation.duration")
          for (const auto& p : m.at("points").as_array())
            if (p.at("attributes").at("http.response.status_code").as_int64() == 200 && p.at("count").as_int64() == n)
              return true;
  }
  return false;
}

class TelemetryTls : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_NEED("openssl");
    // Collectors are reached by name: a machine without a `localhost` entry (a bare chroot has no
    // /etc/hosts) cannot run these, whatever sluice does.
    SLUICE_NEED("localhost");
    ca_ = std::make_unique<TestCa>();
    no_roots_ = std::filesystem::path(ca_->cert()).parent_path() / "no-roots";
    std::filesystem::create_directories(no_roots_);
  }

  // The test collector behind TLS, serving `server`.
  static std::unique_ptr<OtlpReceiver> collector(const TestCa::Issued& server) {
    return std::make_unique<OtlpReceiver>(std::vector<std::string>{"--tls-cert", server.cert, "--tls-key", server.key});
  }

  // A sidecar whose only trusted CA is the test's.
  std::unique_ptr<Sidecar> sidecar(std::map<std::string, std::string> env) {
    env["SSL_CERT_FILE"] = ca_->cert();
    env["SSL_CERT_DIR"] = no_roots_.string();
    return std::make_unique<Sidecar>(SidecarOptions{.user_port = backend_.port, .env = env});
  }

  Backend backend_;
  std::unique_ptr<TestCa> ca_;
  std::filesystem::path no_roots_;
};

TEST_F(TelemetryTls, OtlpHttpSpansReachACollectorAtAnAddress) {
  auto receiver = collector(ca_->issue("IP:127.0.0.1,DNS:localhost"));
  const auto endpoint = "https://127.0.0.1:" + std::to_string(receiver->http_port) + "/v1/traces";
  auto s = sidecar({{"OBSERVABILITY_CONFIG", tracing("http/protobuf", endpoint)}});
  ASSERT_EQ(curl(traced_request(*s)).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return got_server_span(*receiver, "http"); }, 10s))
      << receiver->process->stdout_text() << s->process->stdout_text();
  // Not among the settings sluice does not act on (as it was before TLS export).
  EXPECT_EQ(s->process->stdout_text().find("not acted on"), std::string::npos) << s->process->stdout_text();
}

TEST_F(TelemetryTls, OtlpGrpcSpansReachACollectorByNameOverH2) {
  auto receiver = collector(ca_->issue("DNS:localhost"));
  const auto endpoint = "https://localhost:" + std::to_string(receiver->grpc_port);
  auto s = sidecar({{"OBSERVABILITY_CONFIG", tracing("grpc", endpoint)}});
  ASSERT_EQ(curl(traced_request(*s)).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return got_server_span(*receiver, "grpc"); }, 10s))
      << receiver->process->stdout_text() << s->process->stdout_text();
  // The connection is kept: a second request's spans go the same way.
  ASSERT_EQ(curl({s->url("/")}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return receiver->spans().size() >= 4; }, 10s)) << s->process->stdout_text();
}

TEST_F(TelemetryTls, ZipkinSpansReachACollectorFromTheOldVariables) {
  auto receiver = collector(ca_->issue("IP:127.0.0.1,DNS:localhost"));
  auto s = sidecar({{"TRACING_CONFIG_BACKEND", "zipkin"},
                    {"TRACING_CONFIG_ZIPKIN_ENDPOINT",
                     "https://localhost:" + std::to_string(receiver->http_port) + "/api/v2/spans"},
                    {"TRACING_CONFIG_SAMPLE_RATE", "1.0"}});
  ASSERT_EQ(curl(traced_request(*s)).exit_code, 0);
  EXPECT_TRUE(eventually([&] {
    for (const auto& got : receiver->received("zipkin"))
      for (const auto& span : got.at("spans").as_array())
        if (span.at("traceId").as_string() == kTrace && span.as_object().if_contains("kind") &&
            span.at("kind") == "SERVER")
          return true;
    return false;
  }, 10s)) << receiver->process->stdout_text() << s->process->stdout_text();
}

TEST_F(TelemetryTls, PushedMetricsReachACollectorOverGrpcAndHttp) {
  auto receiver = collector(ca_->issue("IP:127.0.0.1,DNS:localhost"));
  // Scheme-less: https, as Knative reads it.
  const auto schemeless = "localhost:" + std::to_string(receiver->grpc_port);
  auto by_grpc = sidecar({{"OBSERVABILITY_CONFIG", pushed_metrics("grpc", schemeless)}});
  for (int i = 0; i < 3; ++i) ASSERT_EQ(curl({by_grpc->url("/")}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return got_invocations(*receiver, "grpc", 3); }, 10s))
      << receiver->process->stdout_text() << by_grpc->process->stdout_text();
  by_grpc.reset();
  const auto https = "https://127.0.0.1:" + std::to_string(receiver->http_port);
  auto by_http = sidecar({{"OBSERVABILITY_CONFIG", pushed_metrics("http/protobuf", https)}});
  for (int i = 0; i < 2; ++i) ASSERT_EQ(curl({by_http->url("/")}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return got_invocations(*receiver, "http", 2); }, 10s))
      << receiver->process->stdout_text() << by_http->process->stdout_text();
}

// Verification is not a formality: a certificate from a CA the sidecar does not trust, or one that names
// another host, fails the handshake. The sidecar says so in its log (the event waited for: the collector
// cannot report a connection it refused to decode), the collector receives nothing, and every request is
// served meanwhile.
TEST_F(TelemetryTls, AnUntrustedOrMisnamedCollectorGetsNothingAndRequestsAreServed) {
  TestCa stranger_ca("a CA nobody trusts");
  auto stranger = collector(stranger_ca.issue("IP:127.0.0.1,DNS:localhost"));
  auto misnamed = collector(ca_->issue("DNS:collector.example"));
  auto s = sidecar({{"OBSERVABILITY_CONFIG",
                     R"({"tracing":{"protocol":"grpc","endpoint":"https://127.0.0.1:)" +
                         std::to_string(stranger->grpc_port) + R"(","samplingRate":1},)" +
                         R"("requestMetrics":{"protocol":"http/protobuf","endpoint":"https://127.0.0.1:)" +
                         std::to_string(misnamed->http_port) + R"(","exportInterval":300000000}})"}});
  for (int i = 0; i < 20; ++i) ASSERT_EQ(curl(traced_request(*s)).exit_code, 0);
  auto spans_failed = s->process->wait_for_line("span export failed", 15s);
  ASSERT_TRUE(spans_failed) << s->process->stdout_text();
  EXPECT_NE(spans_failed->find("certificate verify failed: unable to get local issuer certificate"), std::string::npos)
      << *spans_failed;
  auto push_failed = s->process->wait_for_line("metrics push failed", 15s);
  ASSERT_TRUE(push_failed) << s->process->stdout_text();
  EXPECT_NE(push_failed->find("certificate verify failed: IP address mismatch"), std::string::npos) << *push_failed;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(curl({s->url("/")}).exit_code, 0);
  EXPECT_TRUE(s->process->running());
  EXPECT_TRUE(stranger->received("traces").empty()) << stranger->process->stdout_text();
  EXPECT_TRUE(misnamed->received("metrics").empty()) << misnamed->process->stdout_text();
}

// A collector that takes the connection and never answers the ClientHello: the handshake ends at the
// export's deadline (5 s), logged as such, and requests never wait for it. The ClientHello it got names
// the host (SNI) and offers http/1.1 (ALPN).
TEST_F(TelemetryTls, AHandshakeThatStallsEndsAtTheExportDeadline) {
  RawApp silent("");  // answers request heads only, and a ClientHello is none
  auto s = sidecar({{"OBSERVABILITY_CONFIG",
                     tracing("http/protobuf", "https://localhost:" + std::to_string(silent.port()) + "/v1/traces")}});
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(curl(traced_request(*s)).exit_code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);  // the export thread waits, requests do not
  auto failed = s->process->wait_for_line("span export failed", 15s);
  ASSERT_TRUE(failed) << s->process->stdout_text();
  EXPECT_NE(failed->find("TLS handshake with localhost timed out"), std::string::npos) << *failed;
  auto hello = silent.received();
  ASSERT_FALSE(hello.empty());
  EXPECT_EQ(hello[0], '\x16');  // a TLS handshake record
  EXPECT_NE(hello.find("localhost"), std::string::npos);
  EXPECT_NE(hello.find("http/1.1"), std::string::npos);
}

}  // namespace
}  // namespace sluice::test
