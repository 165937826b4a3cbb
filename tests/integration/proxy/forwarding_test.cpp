// Requests through the real sidecar to the real demo app: what the app sees, and what the client gets.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <regex>

#include "harness.h"
#include "raw_app.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

class Forwarding : public ::testing::Test {
 protected:
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"SERVING_ENABLE_REQUEST_LOG", "true"}}}};
};

TEST_F(Forwarding, ProxiesARequestToTheApp) {
  auto r = curl({sidecar.url("/")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello from sluice-demo-app\n");
}

// queue-proxy's forwarding fields (the default): the peer appended to X-Forwarded-For, Forwarded only
// synthesized from what the client sent, nothing else added.
TEST_F(Forwarding, KeepsHostAndForwardsAsQueueProxy) {
  auto r = curl({"-H", "Host: shop.example.com", "-H", "X-Forwarded-For: 203.0.113.9",
                 "-H", "X-Forwarded-Proto: https", sidecar.url("/headers")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Host: shop.example.com\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Forwarded-For: 203.0.113.9, 127.0.0.1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Forwarded: for=203.0.113.9;proto=https\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Forwarded-Proto: https\n"), std::string::npos) << r.out;
  r = curl({sidecar.url("/headers")});
  EXPECT_NE(r.out.find("X-Forwarded-For: 127.0.0.1\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Forwarded:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("X-Forwarded-Proto"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("X-Request-Id"), std::string::npos) << r.out;
}

class FullForwarding : public ::testing::Test {
 protected:
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_FORWARDING_FIELDS", "full"}}}};
};

TEST_F(FullForwarding, AddsThisHopToForwardingHeaders) {
  auto r = curl({"-H", "Host: shop.example.com", "-H", "X-Forwarded-For: 203.0.113.9",
                 "-H", "X-Forwarded-Proto: https", sidecar.url("/headers")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Host: shop.example.com\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Forwarded-For: 203.0.113.9, 127.0.0.1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Forwarded: for=203.0.113.9;proto=https, for=127.0.0.1;proto=http\n"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Forwarded-Proto: https\n"), std::string::npos) << r.out;
}

TEST_F(FullForwarding, SetsXForwardedProtoWhenAbsent) {
  auto r = curl({sidecar.url("/headers")});
  EXPECT_NE(r.out.find("X-Forwarded-Proto: http\n"), std::string::npos) << r.out;
}

TEST_F(FullForwarding, AddsARequestIdOnlyWhenAbsent) {
  auto r = curl({sidecar.url("/headers")});
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.out, m, std::regex("X-Request-Id: [0-9a-f]{8}-[0-9a-f]{4}-4")))
      << r.out;
  r = curl({"-H", "X-Request-Id: client-chosen", sidecar.url("/headers")});
  EXPECT_NE(r.out.find("X-Request-Id: client-chosen\n"), std::string::npos) << r.out;
  EXPECT_EQ(count_of(r.out, "X-Request-Id"), 1u) << r.out;
}

TEST_F(Forwarding, PropagatesTraceContext) {
  auto r = curl({"-H", "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                 "-H", "tracestate: congo=t61rcWkgMzE", "-H", "b3: 4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
                 "-H", "X-B3-TraceId: 4bf92f3577b34da6a3ce929d0e0e4736", "-H", "X-B3-Sampled: 1",
                 sidecar.url("/headers")});
  EXPECT_NE(r.out.find("traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n"), std::string::npos);
  EXPECT_NE(r.out.find("tracestate: congo=t61rcWkgMzE\n"), std::string::npos);
  EXPECT_NE(r.out.find("b3: 4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1\n"), std::string::npos);
  EXPECT_NE(r.out.find("X-B3-TraceId: 4bf92f3577b34da6a3ce929d0e0e4736\n"), std::string::npos);
  EXPECT_NE(r.out.find("X-B3-Sampled: 1\n"), std::string::npos);
}

TEST_F(Forwarding, RemovesHopByHopHeaders) {
  auto r = curl({"-H", "Connection: keep-alive, X-Private", "-H", "X-Private: secret", "-H",
                 "Keep-Alive: timeout=5", "-H", "Proxy-Connection: keep-alive", "-H", "X-Public: yes",
                 sidecar.url("/headers")});
  EXPECT_EQ(r.out.find("X-Private"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Keep-Alive"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Proxy-Connection"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Public: yes"), std::string::npos) << r.out;
}

TEST_F(Forwarding, ReusesClientAndAppConnections) {
  // One curl, five requests: curl reuses its connection, and sluice reuses its pooled one to the app.
  std::vector<std::string> args = {"-v"};
  for (int i = 0; i < 5; ++i) args.push_back(sidecar.url("/"));
  auto r = curl(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "Hello from sluice-demo-app"), 5u);
  EXPECT_EQ(count_of(r.err, "Re-using existing connection"), 4u) << r.err;
  auto stats = curl({"http://127.0.0.1:" + std::to_string(backend.port) + "/stats"});
  // The app saw the 5 proxied requests over a single connection (plus this direct one).
  EXPECT_NE(stats.out.find("connections=2"), std::string::npos) << stats.out;
}

// A pooled app connection idle for more than a second rests (its read buffer, request head and trailers
// given back); the next requests take it again and read, write and relay as before.
TEST_F(Forwarding, AnAppConnectionThatRestedInThePoolCarriesTheNextRequests) {
  // One curl (so one worker and its pool), three requests 1.5 s apart: past the pool's 1 s rest each time.
  auto r = curl({"-v", "--rate", "40/m", "-w", "%{http_code} %{size_download}\n", sidecar.url("/"),
                 sidecar.url("/bytes/200000"), sidecar.url("/")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "Hello from sluice-demo-app"), 2u) << r.out.substr(0, 300);
  EXPECT_NE(r.out.find("200 200000\n"), std::string::npos);
  EXPECT_EQ(count_of(r.err, "Re-using existing connection"), 2u) << r.err;
  auto stats = curl({"http://127.0.0.1:" + std::to_string(backend.port) + "/stats"});
  // The app saw the three over the one connection sluice pooled (plus this direct one).
  EXPECT_NE(stats.out.find("connections=2"), std::string::npos) << stats.out;
}

// An app connection left idle in the pool is closed after SLUICE_UPSTREAM_IDLE_TIMEOUT_SECONDS (queue-proxy's
// Go transport closes them after 90 s), and the next request opens a fresh one.
TEST(ForwardingPool, AnIdleAppConnectionIsClosedAfterTheIdleTimeout) {
  using namespace std::chrono_literals;
  RawApp app("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  Sidecar sidecar{SidecarOptions{.user_port = app.port(), .env = {{"SLUICE_UPSTREAM_IDLE_TIMEOUT_SECONDS", "1"}}}};
  const auto connections = app.connections();
  const auto closed = app.closed_by_peer();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(curl({sidecar.url("/")}).out, "ok");
  EXPECT_EQ(app.connections(), connections + 1);
  EXPECT_TRUE(eventually([&] { return app.closed_by_peer() == closed + 1; }, 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1s) << "closed before it had been idle for the timeout";
  EXPECT_EQ(curl({sidecar.url("/")}).out, "ok");
  EXPECT_EQ(app.connections(), connections + 2);
}

TEST_F(Forwarding, AnswersPipelinedRequestsInOrder) {
  std::string reqs;
  for (int ms : {300, 0, 100})
    reqs += "GET /delay/" + std::to_string(ms) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  reqs += "GET /bytes/5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  auto out = raw_exchange(sidecar.port, reqs);
  auto a = out.find("delayed 300"), b = out.find("delayed 0"), c = out.find("delayed 100"),
       d = out.find("abcde");
  ASSERT_NE(a, std::string::npos) << out;
  ASSERT_NE(b, std::string::npos) << out;
  ASSERT_NE(c, std::string::npos) << out;
  ASSERT_NE(d, std::string::npos) << out;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
  EXPECT_EQ(count_of(out, "HTTP/1.1 200 OK"), 4u);
}

TEST_F(Forwarding, HeadGetsHeadersOnlyAndTheConnectionStaysUsable) {
  auto out = raw_exchange(sidecar.port,
                          "HEAD /bytes/1000 HTTP/1.1\r\nHost: x\r\n\r\n"
                          "GET /bytes/3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(out.find("Content-Length: 1000\r\n"), std::string::npos) << out;
  EXPECT_EQ(count_of(out, "HTTP/1.1 200 OK"), 2u) << out;
  EXPECT_EQ(out.substr(out.size() - 3), "abc") << out;
}

TEST_F(Forwarding, HttpOneZeroClientsGetAClosedDelimitedResponse) {
  auto out = raw_exchange(sidecar.port, "GET /bytes/4 HTTP/1.0\r\nHost: x\r\n\r\n");
  EXPECT_NE(out.find("HTTP/1.1 200 OK"), std::string::npos) << out;
  EXPECT_EQ(out.substr(out.size() - 4), "abcd") << out;
}

TEST_F(Forwarding, PassesTrailersOfChunkedResponses) {
  auto out = raw_exchange(sidecar.port, "GET /trailers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(out.find("Transfer-Encoding: chunked"), std::string::npos) << out;
  EXPECT_NE(out.find("0\r\nX-Checksum: abc123\r\n\r\n"), std::string::npos) << out;
}

TEST_F(Forwarding, WritesOneRequestLogLinePerRequest) {
  auto r = curl({"-H", "X-Request-Id: log-me", "-A", "probe-agent/1", sidecar.url("/bytes/42")});
  ASSERT_EQ(r.exit_code, 0);
  auto line = sidecar.process->wait_for_line("\"requestId\":\"log-me\"");
  ASSERT_TRUE(line) << "no request log line";
  EXPECT_NE(line->find("\"requestMethod\":\"GET\""), std::string::npos) << *line;
  EXPECT_NE(line->find("\"requestUrl\":\"/bytes/42\""), std::string::npos) << *line;
  EXPECT_NE(line->find("\"status\":200"), std::string::npos) << *line;
  EXPECT_NE(line->find("\"responseSize\":\"42\""), std::string::npos) << *line;
  EXPECT_NE(line->find("\"userAgent\":\"probe-agent/1\""), std::string::npos) << *line;
  EXPECT_TRUE(std::regex_search(*line, std::regex("\"latency\":\"0\\.[0-9]+s\""))) << *line;
}

TEST_F(Forwarding, ExitsZeroOnSigterm) {
  ASSERT_EQ(curl({sidecar.url("/")}).exit_code, 0);
  sidecar.process->signal(SIGTERM);
  auto st = sidecar.process->wait_exit(std::chrono::seconds(10));
  ASSERT_TRUE(st);
  EXPECT_TRUE(WIFEXITED(*st));
  EXPECT_EQ(WEXITSTATUS(*st), 0);
}

TEST(ForwardingIPv6, ServesIPv6ClientsAndQuotesThemInForwarded) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_FORWARDING_FIELDS", "full"}},
                                 .listen_address = "::"});
  auto r = curl({"-g", sidecar.url("/headers", "[::1]")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Forwarded: for=\"[::1]\";proto=http\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Forwarded-For: ::1\n"), std::string::npos) << r.out;
  // The dual-stack listener still serves IPv4, and names the client as IPv4, not v4-mapped.
  r = curl({sidecar.url("/headers")});
  EXPECT_NE(r.out.find("X-Forwarded-For: 127.0.0.1\n"), std::string::npos) << r.out;
}

// As queue-proxy (":port"): without SLUICE_LISTEN_ADDRESS every port listens on IPv6 and IPv4 alike, so an
// IPv6 or IPv6-first cluster's kubelet, activator and autoscaler reach the pod.
TEST(ForwardingIPv6, EveryPortIsDualStackByDefault) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port, .listen_address = ""});
  EXPECT_NE(sidecar.process->stdout_text().find("\"address\":\"::\""), std::string::npos) << sidecar.process->stdout_text();
  for (const char* host : {"127.0.0.1", "[::1]"}) {
    SCOPED_TRACE(host);
    auto r = curl({"-g", sidecar.url("/", host)});
    EXPECT_EQ(r.out, "Hello from sluice-demo-app\n") << r.err;
    r = curl({"-g", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Accept: application/protobuf",
              "http://" + std::string(host) + ":" + std::to_string(sidecar.metrics_port) + "/metrics"});
    EXPECT_EQ(r.out, "200") << r.err;
    r = curl({"-g", "-o", "/dev/null", "-w", "%{http_code}",
              "http://" + std::string(host) + ":" + std::to_string(sidecar.admin_port) + "/nope"});
    EXPECT_EQ(r.out, "404") << r.err;
  }
}

TEST(SidecarStartup, MissingVariableExitsTwoNamingIt) {
  auto env = knative_env(8080);
  env.erase("SERVING_REVISION");
  std::vector<std::string> unset = {"SERVING_REVISION"};
  Process p(ProcessOptions{.argv = {SLUICE_BIN, "sidecar"}, .env = env, .unset_env = unset});
  auto st = p.wait_exit();
  ASSERT_TRUE(st);
  EXPECT_EQ(WEXITSTATUS(*st), 2);
  p.join_output();
  EXPECT_NE(p.stderr_text().find("SERVING_REVISION"), std::string::npos) << p.stderr_text();
}

}  // namespace
}  // namespace sluice::test
