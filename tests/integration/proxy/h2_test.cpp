// HTTP/2 on the plain port with real clients: curl (prior knowledge and Upgrade: h2c), nghttp, h2load.
// The app behind speaks HTTP/1.1: every exchange is translated.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <future>

#include "harness.h"
#include "raw_app.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

class H2 : public ::testing::Test {
 protected:
  Backend backend;
  // Every forwarding field (SLUICE_FORWARDING_FIELDS=full), to see each cross from HTTP/2 to HTTP/1.1.
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_FORWARDING_FIELDS", "full"}}}};
};

TEST_F(H2, PriorKnowledgeRequestReachesTheAppAsHttp11WithForwardingHeaders) {
  auto r = curl({"--http2-prior-knowledge", "-i", "-H", "X-B3-TraceId: 80f198ee56343ba864fe8b2a57d3eff7",
                 sidecar.url("/headers?x=1")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("HTTP/2 200", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("GET /headers?x=1 HTTP/1.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Host: 127.0.0.1:" + std::to_string(sidecar.port)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Forwarded-For: 127.0.0.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Forwarded: for=127.0.0.1;proto=http"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("X-Request-Id: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x-b3-traceid: 80f198ee56343ba864fe8b2a57d3eff7"), std::string::npos) << r.out;
}

TEST_F(H2, UpgradeOnGetPostWithABodyAndOptions) {
  auto get = curl({"--http2", "-sv", sidecar.url("/")});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_NE(get.err.find("HTTP/1.1 101 Switching Protocols"), std::string::npos) << get.err;
  EXPECT_NE(get.err.find("< HTTP/2 200"), std::string::npos) << get.err;
  EXPECT_EQ(get.out, "Hello from sluice-demo-app\n");

  auto post = curl({"--http2", "-sv", "--data-binary", "upgrade with a body", sidecar.url("/echo")});
  ASSERT_EQ(post.exit_code, 0) << post.err;
  EXPECT_NE(post.err.find("HTTP/1.1 101 Switching Protocols"), std::string::npos) << post.err;
  EXPECT_EQ(post.out, "upgrade with a body");

  auto options = curl({"--http2", "-sv", "-X", "OPTIONS", sidecar.url("/")});
  ASSERT_EQ(options.exit_code, 0) << options.err;
  EXPECT_NE(options.err.find("HTTP/1.1 101 Switching Protocols"), std::string::npos) << options.err;
  EXPECT_NE(options.err.find("< HTTP/2 200"), std::string::npos) << options.err;
}

TEST_F(H2, NghttpSeesTrailersOfAChunkedResponse) {
  auto r = run_command({"nghttp", "-v", sidecar.url("/trailers")}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto body = r.out.find("hello");
  auto trailer = r.out.find("x-checksum: abc123");
  ASSERT_NE(body, std::string::npos) << r.out;
  ASSERT_NE(trailer, std::string::npos) << r.out;
  EXPECT_GT(trailer, body) << "the checksum came as a trailer, after the body";
}

// nghttp2 sends no header block above 64 KiB unless told: a larger head from the app went nowhere and the
// client's stream hung. 100 fields of 1000 bytes: within the 8 CONTINUATION frames curl's nghttp2 accepts.
// (nghttp itself resets such a stream now and then, after about 64 KiB of fields: curl, not nghttp.)
TEST(H2Heads, AnAppsHeadOver64KiBReachesAnH2Client) {
  std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n";
  for (int i = 0; i < 100; ++i) head += "X-Big-" + std::to_string(i) + ": " + std::string(1000, 'v') + "\r\n";
  RawApp app(head + "\r\nok");
  Sidecar sidecar(SidecarOptions{.user_port = app.port()});
  auto r = run_command({"curl", "-sS", "--max-time", "10", "--http2-prior-knowledge", "-D", "-", "-o", "/dev/null",
                        sidecar.url("/")}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.out.substr(0, 2000) << r.err;
  EXPECT_EQ(r.out.substr(0, 11), "HTTP/2 200 ") << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("x-big-99: " + std::string(1000, 'v')), std::string::npos) << r.out.substr(0, 2000);
}

TEST_F(H2, H2loadManyConcurrentStreamsAllSucceed) {
  auto r = run_command({"h2load", "-c4", "-m50", "-n8000", sidecar.url("/")}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("8000 succeeded, 0 failed, 0 errored"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status codes: 8000 2xx"), std::string::npos) << r.out;
}

TEST_F(H2, UploadsOnManyStreamsArriveWhole) {
  auto file = std::string(::testing::TempDir()) + "/h2-upload.bin";
  ASSERT_EQ(run_command({"sh", "-c", "head -c 300000 /dev/urandom > " + file}).exit_code, 0);
  auto r = run_command({"h2load", "-c2", "-m20", "-n400", "-d", file, sidecar.url("/sink")}, 60s);
  EXPECT_NE(r.out.find("400 succeeded, 0 failed, 0 errored"), std::string::npos) << r.out;
  // Every one of them was 300000 bytes long at the app.
  auto one = curl({"--http2-prior-knowledge", "--data-binary", "@" + file, sidecar.url("/sink")});
  EXPECT_EQ(one.out, "300000");
}

TEST_F(H2, LargeBodiesStreamBothWaysByteForByte) {
  auto file = std::string(::testing::TempDir()) + "/h2-echo.bin";
  ASSERT_EQ(run_command({"sh", "-c", "head -c 20000000 /dev/urandom > " + file}).exit_code, 0);
  // The app echoes while it reads: both directions are in flight at once on one stream.
  auto r = run_command({"sh", "-c", "curl -sS --max-time 60 --http2-prior-knowledge --data-binary @" + file + " " +
                                        sidecar.url("/echo") + " | cmp - " + file + " && echo same"},
                       90s);
  EXPECT_EQ(r.out, "same\n") << r.err;
  auto down = curl({"--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{size_download}",
                    sidecar.url("/bytes/200000000")}, 120);
  EXPECT_EQ(down.out, "200000000") << down.err;
}

TEST_F(H2, HealthChecksAreAnsweredOverH2Too) {
  auto r = curl({"--http2-prior-knowledge", "-H", "User-Agent: kube-probe/1.29", "-H", "K-Network-Probe: queue",
                 sidecar.url("/")});
  EXPECT_EQ(r.out, "queue");
}

TEST(H2Timeouts, RequestTimeoutBeforeTheResponseIs504) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"REVISION_TIMEOUT_SECONDS", "1"}}}};
  auto r = curl({"--http2-prior-knowledge", "-w", " %{http_code}", sidecar.url("/delay/5000")});
  EXPECT_EQ(r.out, "request timeout 504");
}

TEST(H2Timeouts, ResponseStartTimeoutDoesNotCutAResponseThatStarted) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"REVISION_RESPONSE_START_TIMEOUT_SECONDS", "1"}}}};
  // 8 pieces, 300 ms apart: the response starts at once and lasts ~2.4 s, past the 1 s limit.
  auto r = curl({"--http2-prior-knowledge", "-w", " %{http_code}", sidecar.url("/slow-body/8/300")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.ends_with(" 200")) << r.out;
  auto late = curl({"--http2-prior-knowledge", "-w", " %{http_code}", sidecar.url("/delay/3000")});
  EXPECT_EQ(late.out, "request timeout 504");
}

TEST(H2Timeouts, IdleTimeoutCutsAStalledStreamAndAnswers504BeforeAnyResponse) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"REVISION_IDLE_TIMEOUT_SECONDS", "1"}}}};
  // 300 ms between pieces keeps the stream alive past the 1 s limit; a 2500 ms stall does not.
  auto ok = curl({"--http2-prior-knowledge", sidecar.url("/slow-body/5/300")});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("chunk 4\n"), std::string::npos) << ok.out;
  auto cut = curl({"--http2-prior-knowledge", sidecar.url("/slow-body/3/2500")});
  EXPECT_NE(cut.exit_code, 0) << cut.out;  // the stream was reset: the body never completed
  EXPECT_EQ(cut.out.find("chunk 1\n"), std::string::npos) << cut.out;
  auto silent = curl({"--http2-prior-knowledge", "-w", " %{http_code}", sidecar.url("/delay/5000")});
  EXPECT_EQ(silent.out, "request timeout 504");
}

TEST(H2Limits, PlainPortWithoutH2cSpeaksOnlyHttp11) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_PLAIN_PROTOCOLS", "http1"}}}};
  auto up = curl({"--http2", "-sv", sidecar.url("/")});
  EXPECT_EQ(up.err.find("101 Switching Protocols"), std::string::npos) << up.err;
  EXPECT_NE(up.err.find("< HTTP/1.1 200"), std::string::npos) << up.err;
  auto pk = curl({"--http2-prior-knowledge", sidecar.url("/")});
  EXPECT_NE(pk.exit_code, 0);
}

TEST(H2Limits, PlainPortDeclaredH2cAnswersHttp11With505) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_PLAIN_PROTOCOLS", "h2c"}}}};
  auto h1 = curl({"-w", " %{http_code}", sidecar.url("/")});
  EXPECT_EQ(h1.out, "this port speaks HTTP/2 (h2c) only, not 1.x\n 505");
  auto up = curl({"--http2", "-sv", sidecar.url("/")});
  EXPECT_EQ(up.err.find("101 Switching Protocols"), std::string::npos) << up.err;
  auto pk = curl({"--http2-prior-knowledge", "-w", " %{http_code}", sidecar.url("/")});
  EXPECT_EQ(pk.out, "Hello from sluice-demo-app\n 200");
}

TEST(H2Limits, BodiesOverTheLimitAreRefused) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_MAX_BODY_BYTES", "100000"}}}};
  auto file = std::string(::testing::TempDir()) + "/h2-limit.bin";
  ASSERT_EQ(run_command({"sh", "-c", "head -c 200000 /dev/zero > " + file}).exit_code, 0);
  auto declared = curl({"--http2-prior-knowledge", "-w", " %{http_code}", "--data-binary", "@" + file,
                        sidecar.url("/sink")});
  EXPECT_EQ(declared.out, "request body too large\n 413");
  // Without a declared length the stream is reset once the body passes the limit.
  auto streamed = run_command({"sh", "-c", "curl -sS --max-time 10 --http2-prior-knowledge -T - -X POST " +
                                               sidecar.url("/sink") + " < " + file});
  EXPECT_NE(streamed.exit_code, 0) << streamed.out;
  EXPECT_EQ(streamed.out.find("200000"), std::string::npos) << streamed.out;
}

TEST(H2Drain, SigtermUnderH2LoadLosesNothingAndExitsZero) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_DRAIN_QUIET_PERIOD_MS", "500"}}}};
  constexpr int kRequests = 30000;
  auto [r, under_load] = load_then_sigterm(backend, sidecar, {"h2load", "-c8", "-m10", "-n" + std::to_string(kRequests), sidecar.url("/")}, kRequests / 10);
  ASSERT_TRUE(under_load) << "the load ended before SIGTERM: " << r.out;
  EXPECT_NE(r.out.find(std::to_string(kRequests) + " succeeded, 0 failed, 0 errored"), std::string::npos) << r.out;
  EXPECT_EQ(exit_status(*sidecar.process), "exited 0");
}

// The header timeout applies to an HTTP/2 connection with no stream as to an idle HTTP/1.1 one: GOAWAY
// NO_ERROR once it has passed, not before.
TEST(H2Timeouts, AnIdleConnectionGetsGoawayAfterTheHeaderTimeout) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_CLIENT_HEADER_TIMEOUT_SECONDS", "1"}}}};
  RawClient client(sidecar.port);
  const auto start = std::chrono::steady_clock::now();
  client.send(std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string("\0\0\0\4\0\0\0\0\0", 9));
  client.read_until(std::string("\0\0\0\4\1\0\0\0\0", 9));  // the server's SETTINGS ack of ours
  // A GOAWAY frame: length 8, type 7, flags 0, stream 0, then the last stream (0) and NO_ERROR.
  const std::string goaway("\0\0\x08\x07\0\0\0\0\0\0\0\0\0\0\0\0\0", 17);
  auto got = client.read_until(goaway, 10s);
  EXPECT_NE(got.find(goaway), std::string::npos);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1s) << "GOAWAY came before the header timeout";
}

TEST(H2Drain, AnIdleH2ConnectionGetsGoawayAtShutdown) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port}};
  RawClient client(sidecar.port);
  client.send(std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string("\0\0\0\4\0\0\0\0\0", 9));
  client.read_until(std::string("\0\0\0\4\1\0\0\0\0", 9));  // the server's SETTINGS ack of ours
  sidecar.process->signal(SIGTERM);
  auto got = client.read_until(std::string("\x07\0\0\0\0\0", 6), 10s);  // a GOAWAY frame's type, flags, stream 0
  EXPECT_NE(got.find(std::string("\x07\0\0\0\0\0", 6)), std::string::npos);
  EXPECT_EQ(exit_status(*sidecar.process), "exited 0");
}

}  // namespace
}  // namespace sluice::test
