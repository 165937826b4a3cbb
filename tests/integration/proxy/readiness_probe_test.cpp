// SERVING_READINESS_PROBE as queue-proxy runs it, against real peers on loopback: a gRPC health server
// (python3-grpcio), an HTTP(S) app in Python, and `sluice sidecar` in front answering the kubelet.
#include <gtest/gtest.h>

#include <unistd.h>

#include <boost/json.hpp>
#include <csignal>
#include <filesystem>
#include <future>

#include "harness.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kKubelet = "User-Agent: kube-probe/1.30\r\nK-Network-Probe: queue\r\n";

std::string kubelet_probe(const Sidecar& s, std::chrono::milliseconds timeout = 5s) {
  auto r = http_get(s.port, "/", kKubelet, timeout);
  return r.substr(0, r.find("\r\n"));
}
const std::string k200 = "HTTP/1.1 200 OK";
const std::string k503 = "HTTP/1.1 503 Service Unavailable";

// A Python peer from tests/support that prints "listening PORT" first, then one JSON line per request.
struct PythonPeer {
  explicit PythonPeer(std::vector<std::string> argv) : process(ProcessOptions{.argv = std::move(argv)}) {
    auto line = process.wait_for_line("listening ", 30s);
    if (!line) throw std::runtime_error("peer did not start: " + process.stderr_text());
    port = std::stoi(line->substr(line->find(' ') + 1));
  }
  // The JSON lines so far (requests, health checks), in order.
  std::vector<boost::json::object> requests() const {
    std::vector<boost::json::object> out;
    for (const auto& l : process.lines())
      if (l.starts_with("{")) out.push_back(boost::json::parse(l).as_object());
    return out;
  }
  // The same once at least `n` have come: the peer prints a line before it answers, but the line reaches
  // the test through a reader thread, maybe after the answer did.
  std::vector<boost::json::object> requests(std::size_t n) const {
    eventually([&] { return requests().size() >= n; });
    return requests();
  }
  Process process;
  int port = 0;
};

PythonPeer health_server(std::vector<std::string> args = {}) {
  std::vector<std::string> argv = {"/usr/bin/python3", GRPC_HEALTH_SERVER};
  argv.insert(argv.end(), args.begin(), args.end());
  return PythonPeer(argv);
}

void switch_status(PythonPeer& server, int signal, const std::string& status) {
  server.process.signal(signal);
  ASSERT_TRUE(server.process.wait_for_line("status " + status, 10s)) << "the health server did not switch";
}

std::string grpc_probe(int port, const std::string& rest = R"(,"periodSeconds":1)") {
  return R"({"grpc":{"port":)" + std::to_string(port) + "}" + rest + "}";
}

Sidecar sidecar_with_probe(const std::string& probe, std::map<std::string, std::string> env = {}) {
  ReservedPort unused;  // the user port itself is not probed in these tests
  env["SERVING_READINESS_PROBE"] = probe;
  return Sidecar{SidecarOptions{.user_port = unused.port, .env = env}};
}

// Consecutive SERVING answers at the end of what the health server answered.
std::size_t trailing_serving(const PythonPeer& server) {
  std::size_t run = 0;
  for (const auto& r : server.requests()) run = r.at("answer").as_string() == "SERVING" ? run + 1 : 0;
  return run;
}

#define REQUIRE_PYTHON_GRPC() SLUICE_NEED("python-grpc")

TEST(GrpcReadinessProbe, ReadyOnlyWhileTheHealthServiceSaysServing) {
  REQUIRE_PYTHON_GRPC();
  auto server = health_server();
  auto sidecar = sidecar_with_probe(grpc_probe(server.port));
  EXPECT_EQ(kubelet_probe(sidecar), k200);
  switch_status(server, SIGUSR1, "NOT_SERVING");
  EXPECT_EQ(kubelet_probe(sidecar), k503);
  switch_status(server, SIGUSR2, "SERVING");
  EXPECT_EQ(kubelet_probe(sidecar), k200);

  // What queue-proxy's grpc-go client sends: no service name, its user agent, a deadline.
  auto checks = server.requests(3);
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_EQ(checks[0].at("check").as_string(), "");
  EXPECT_EQ(checks[0].at("user_agent").as_string(), "kube-probe// grpc-go/1.82.1");
  EXPECT_TRUE(checks[0].at("grpc_timeout").as_bool());
}

TEST(GrpcReadinessProbe, AsksForTheNamedServiceAndAnUnknownServiceIsNotReady) {
  REQUIRE_PYTHON_GRPC();
  auto server = health_server({"--service", "app"});
  auto known = sidecar_with_probe(R"({"grpc":{"port":)" + std::to_string(server.port) +
                                  R"(,"service":"app"},"periodSeconds":1})");
  EXPECT_EQ(kubelet_probe(known), k200);
  auto checks = server.requests(1);
  ASSERT_FALSE(checks.empty());
  EXPECT_EQ(checks.back().at("check").as_string(), "app");

  auto unknown = sidecar_with_probe(R"({"grpc":{"port":)" + std::to_string(server.port) +
                                    R"(,"service":"other"},"periodSeconds":1})");
  EXPECT_EQ(kubelet_probe(unknown), k503);
  EXPECT_EQ(server.requests(2).back().at("answer").as_string(), "NOT_FOUND");
}

TEST(GrpcReadinessProbe, UnknownStatusNoHealthServiceOrNoServerIsNotReady) {
  REQUIRE_PYTHON_GRPC();
  auto unknown = health_server({"--status", "UNKNOWN"});
  EXPECT_EQ(kubelet_probe(sidecar_with_probe(grpc_probe(unknown.port))), k503);
  auto service_unknown = health_server({"--status", "SERVICE_UNKNOWN"});
  EXPECT_EQ(kubelet_probe(sidecar_with_probe(grpc_probe(service_unknown.port))), k503);
  // A gRPC server without grpc.health.v1 answers UNIMPLEMENTED.
  PythonPeer echo({"/usr/bin/python3", GRPC_TEST_DIR "/server.py"});
  EXPECT_EQ(kubelet_probe(sidecar_with_probe(grpc_probe(echo.port))), k503);
  ReservedPort nobody;
  EXPECT_EQ(kubelet_probe(sidecar_with_probe(grpc_probe(nobody.port))), k503);
}

// periodSeconds 0 (Knative's default): polled until successThreshold consecutive successes. The count
// stays with the probe between health checks and a failure starts it again, as queue-proxy's doProbe.
// (Each try has 100 ms; a loopback health check takes a few.)
TEST(GrpcReadinessProbe, AggressiveProbeCountsSuccessThresholdAcrossHealthChecks) {
  REQUIRE_PYTHON_GRPC();
  auto server = health_server();
  auto sidecar = sidecar_with_probe(grpc_probe(server.port, R"(,"successThreshold":3)"));
  EXPECT_EQ(kubelet_probe(sidecar), k200);
  EXPECT_EQ(server.requests(3).size(), 3u) << "three successes in a row before the first 200";
  EXPECT_EQ(kubelet_probe(sidecar), k200);
  EXPECT_EQ(server.requests(4).size(), 4u) << "the count carried over: one more success is enough";

  switch_status(server, SIGUSR1, "NOT_SERVING");
  auto probe = std::async(std::launch::async, [&] { return kubelet_probe(sidecar, 15s); });
  auto not_serving = [&] {
    std::size_t n = 0;
    for (const auto& r : server.requests()) n += r.at("answer").as_string() == "NOT_SERVING";
    return n;
  };
  ASSERT_TRUE(eventually([&] { return not_serving() >= 2; }, 5s));  // polled, failing
  switch_status(server, SIGUSR2, "SERVING");
  EXPECT_EQ(probe.get(), k200);
  eventually([&] { return trailing_serving(server) >= 3; });
  EXPECT_EQ(trailing_serving(server), 3u) << "after a failure, three successes in a row again";
}

TEST(GrpcReadinessProbe, SidecarContainersGrpcProbeIsAHealthCheckToo) {
  REQUIRE_PYTHON_GRPC();
  Backend backend;
  auto server = health_server({"--status", "NOT_SERVING"});
  auto probes = R"([{"httpGet":{"path":"/status/204","port":)" + std::to_string(backend.port) +
                R"(},"periodSeconds":1},)" + grpc_probe(server.port) + "]";
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"ENABLE_MULTI_CONTAINER_PROBES", "true"}, {"SERVING_READINESS_PROBE", probes}}}};
  EXPECT_EQ(kubelet_probe(sidecar), k503);  // the port is open; only a health check sees NOT_SERVING
  switch_status(server, SIGUSR2, "SERVING");
  EXPECT_EQ(kubelet_probe(sidecar), k200);
  EXPECT_EQ(server.requests(2).size(), 2u);
}

// queue-proxy starts with these and answers every health check 503 at once ("exec probe not supported",
// "no probe found"), without polling for 10 s.
TEST(ReadinessProbe, ExecOrEmptyProbeStartsTheSidecarAndNeverPasses) {
  Backend backend;
  for (const std::string probe : {R"({"exec":{"command":["true"]}})", "{}", R"({"initialDelaySeconds":3})"}) {
    Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SERVING_READINESS_PROBE", probe}}}};
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(kubelet_probe(sidecar), k503) << probe;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 2s) << probe;
  }
  // In multi-container mode the app's exec probe fails the whole check, as every failing probe does.
  auto probes = R"([{"tcpSocket":{"port":)" + std::to_string(backend.port) + R"(}},{"exec":{"command":["true"]}}])";
  Sidecar multi{SidecarOptions{
      .user_port = backend.port,
      .env = {{"ENABLE_MULTI_CONTAINER_PROBES", "true"}, {"SERVING_READINESS_PROBE", probes}}}};
  EXPECT_EQ(kubelet_probe(multi), k503);
}

TEST(ReadinessProbe, FieldsTheSidecarDoesNotUseDoNotStopIt) {
  Backend backend;
  auto probe = R"({"tcpSocket":{"port":)" + std::to_string(backend.port) +
               R"(},"initialDelaySeconds":5,"terminationGracePeriodSeconds":30,"failureThreshold":3,)"
               R"("aFieldFromANewerKubernetes":{"x":[1,2]}})";
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SERVING_READINESS_PROBE", probe}}}};
  EXPECT_EQ(kubelet_probe(sidecar), k200);
}

// Go's http.Client as queue-proxy uses it: Host from the URL (an httpHeaders Host is dropped, since Go
// reads Request.Host, not Header["Host"]), User-Agent kube-probe//, the configured headers, keep-alive off.
TEST(ReadinessProbe, HttpProbeSendsTheHeadersQueueProxySends) {
  PythonPeer app({"/usr/bin/python3", HTTP_PROBE_TARGET});
  auto sidecar = sidecar_with_probe(R"({"httpGet":{"path":"ready","port":)" + std::to_string(app.port) +
                                    R"(,"scheme":"HTTP","httpHeaders":[{"name":"Host","value":"example.com"},)"
                                    R"({"name":"X-Custom","value":"a"},{"name":"User-Agent","value":"mine"}]},)"
                                    R"("periodSeconds":1})");
  EXPECT_EQ(kubelet_probe(sidecar), k200);
  auto requests = app.requests(1);
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].at("path").as_string(), "/ready");
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& h : requests[0].at("headers").as_array())
    headers.emplace_back(h.as_array()[0].as_string(), h.as_array()[1].as_string());
  auto values = [&](const std::string& name) {
    std::vector<std::string> out;
    for (const auto& [n, v] : headers)
      if (n == name) out.push_back(v);
    return out;
  };
  EXPECT_EQ(values("Host"), std::vector<std::string>{"127.0.0.1:" + std::to_string(app.port)});
  EXPECT_EQ(values("User-Agent"), std::vector<std::string>{"kube-probe//"});
  EXPECT_EQ(values("X-Custom"), std::vector<std::string>{"a"});
  EXPECT_EQ(values("Connection"), std::vector<std::string>{"close"});
}

// A self-signed certificate for 127.0.0.1 (or another address), its own trust anchor.
struct SelfSigned {
  explicit SelfSigned(const std::string& ip) {
    dir = fs::temp_directory_path() / ("sluice-probe-tls-" + std::to_string(::getpid()) + "-" + ip);
    fs::create_directories(dir);
    auto r = run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key(), "-out", cert(),
                          "-days", "2", "-subj", "/CN=app", "-addext", "subjectAltName=IP:" + ip});
    if (r.exit_code != 0) throw std::runtime_error("openssl req failed: " + r.err);
  }
  ~SelfSigned() { fs::remove_all(dir); }
  std::string cert() const { return (dir / "tls.crt").string(); }
  std::string key() const { return (dir / "tls.key").string(); }
  fs::path dir;
};

// queue-proxy's prober transport is Go's default one: the app's certificate is verified against the
// system's roots (SSL_CERT_FILE honoured) and must name the probe's host.
TEST(ReadinessProbe, HttpsProbeVerifiesTheAppsCertificateAsQueueProxy) {
  SLUICE_NEED("openssl");
  SelfSigned loopback("127.0.0.1"), elsewhere("127.0.0.2");  // served on 127.0.0.1: the name does not match
  for (const auto* pair : {&loopback, &elsewhere}) {
    PythonPeer app({"/usr/bin/python3", HTTP_PROBE_TARGET, "--cert", pair->cert(), "--key", pair->key()});
    auto probe = R"({"httpGet":{"path":"/","port":)" + std::to_string(app.port) +
                 R"(,"scheme":"HTTPS"},"periodSeconds":1})";
    auto untrusted = sidecar_with_probe(probe);
    EXPECT_EQ(kubelet_probe(untrusted), k503) << "a self-signed certificate is not trusted";
    auto trusted = sidecar_with_probe(probe, {{"SSL_CERT_FILE", pair->cert()}});
    if (pair == &loopback) {
      EXPECT_EQ(kubelet_probe(trusted), k200);
      auto requests = app.requests(1);
      ASSERT_EQ(requests.size(), 1u) << "only the trusted sidecar got as far as a request";
      EXPECT_EQ(requests[0].at("path").as_string(), "/");
    } else {
      EXPECT_EQ(kubelet_probe(trusted), k503) << "trusted, but for another address";
      EXPECT_TRUE(app.requests().empty());
    }
  }
}

}  // namespace
}  // namespace sluice::test
