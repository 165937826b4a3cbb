// Apps that speak h2c: sluice forwards to them over HTTP/2 whatever the client speaks. The h2c apps are
// real HTTP/2 servers: a gRPC server (Debian's python3-grpcio), and a second sluice whose plain port
// serves HTTP/2 only (SLUICE_PLAIN_PROTOCOLS=h2c) in front of the demo app, so that what reaches the
// demo app shows what the first sluice sent over h2c.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <fstream>
#include <random>

#include "harness.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

// Both hops add their own forwarding fields (SLUICE_FORWARDING_FIELDS=full), so the app's view shows that
// every field crossed the translation.
SidecarOptions h2c_only(int user_port) {
  return SidecarOptions{.user_port = user_port,
                        .env = {{"SLUICE_PLAIN_PROTOCOLS", "h2c"}, {"SLUICE_FORWARDING_FIELDS", "full"}}};
}

SidecarOptions to_h2c_app(int user_port, std::map<std::string, std::string> env = {}) {
  env.emplace("SLUICE_UPSTREAM_PROTOCOL", "h2c");
  env.emplace("SLUICE_FORWARDING_FIELDS", "full");
  return SidecarOptions{.user_port = user_port, .env = std::move(env)};
}

class H2cUpstream : public ::testing::Test {
 protected:
  Backend backend;
  Sidecar app{h2c_only(backend.port)};  // the h2c app
  Sidecar sidecar{to_h2c_app(app.port)};
};

std::string random_file(const std::string& name, std::size_t bytes) {
  std::string path = ::testing::TempDir() + "/" + name + "-" + std::to_string(::getpid());
  std::mt19937_64 rng(bytes);
  std::string data(bytes, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary) << data;
  return path;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(H2cUpstream, TheH2cAppReallyRefusesHttp11) {
  // Otherwise the tests below would prove nothing about the protocol sluice speaks to it.
  auto r = curl({"--http1.1", "-o", "/dev/null", "-w", "%{http_code}", app.url("/")}, 5);
  EXPECT_NE(r.out, "200") << r.out << r.err;
}

TEST_F(H2cUpstream, Http11ClientIsTranslatedWithHostAndForwardingFieldsKept) {
  auto r = curl({"--http1.1", "-H", "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                 sidecar.url("/headers?q=1")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The demo app sees what the h2c app (a second sluice) made of sluice's HTTP/2 request.
  EXPECT_NE(r.out.find("GET /headers?q=1 HTTP/1.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Host: 127.0.0.1:" + std::to_string(sidecar.port)), std::string::npos)
      << "the client's Host travels as :authority and back: " << r.out;
  EXPECT_NE(r.out.find("X-Forwarded-For: 127.0.0.1, 127.0.0.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Forwarded: for=127.0.0.1;proto=http, for=127.0.0.1;proto=http"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("X-Request-Id"), r.out.rfind("X-Request-Id")) << "one request id, made by the first hop";
}

TEST_F(H2cUpstream, LargeBodiesStreamBothWaysFromHttp11AndHttp2Clients) {
  auto upload = random_file("h2c-up", 20 << 20);
  for (std::string version : {"--http1.1", "--http2-prior-knowledge"}) {
    std::string out = upload + ".echo";
    auto r = curl({version, "--data-binary", "@" + upload, "-H", "Content-Type: application/octet-stream", "-o", out,
                   "-w", "%{http_code}", sidecar.url("/echo")},
                  240);
    ASSERT_EQ(r.exit_code, 0) << version << r.err;
    EXPECT_EQ(r.out, "200") << version;
    EXPECT_TRUE(read_all(out) == read_all(upload)) << version << ": the echoed 20 MB differ";
    std::remove(out.c_str());
  }
  // A body without a length: chunked from an HTTP/1.1 client, DATA frames without content-length upstream.
  std::string out = upload + ".echo";
  auto chunked = curl({"--http1.1", "-H", "Transfer-Encoding: chunked", "--data-binary", "@" + upload, "-o", out,
                       sidecar.url("/echo")},
                      240);
  ASSERT_EQ(chunked.exit_code, 0) << chunked.err;
  EXPECT_TRUE(read_all(out) == read_all(upload)) << "the chunked upload was echoed whole";
  std::remove(out.c_str());
  auto down = curl({"--http1.1", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", sidecar.url("/bytes/50000000")},
                   240);
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(down.out, "200 50000000");
  std::remove(upload.c_str());
}

TEST_F(H2cUpstream, TrailersReachHttp11AndHttp2Clients) {
  auto raw = http_get(sidecar.port, "/trailers");
  auto body = raw.find("\r\n\r\n5\r\nhello\r\n0\r\n");
  ASSERT_NE(body, std::string::npos) << "an HTTP/1.1 client gets a chunked body: " << raw;
  EXPECT_NE(raw.find("x-checksum: abc123\r\n\r\n", body), std::string::npos) << "... with the trailer: " << raw;

  auto r = run_command({"nghttp", "-v", sidecar.url("/trailers")}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto hello = r.out.find("hello");
  auto trailer = r.out.find("x-checksum: abc123");
  ASSERT_NE(hello, std::string::npos) << r.out;
  ASSERT_NE(trailer, std::string::npos) << r.out;
  EXPECT_GT(trailer, hello) << "the checksum came as a trailer, after the body";
}

TEST_F(H2cUpstream, EarlyHintsArePassedOnToBothProtocols) {
  // demo (HTTP/1.1 103) → h2c app (HTTP/2 interim HEADERS) → sluice → the client.
  auto h1 = curl({"--http1.1", "-v", sidecar.url("/early-hints")});
  ASSERT_EQ(h1.exit_code, 0) << h1.err;
  EXPECT_NE(h1.err.find("< HTTP/1.1 103"), std::string::npos) << h1.err;
  EXPECT_NE(h1.err.find("< link: </style.css>; rel=preload"), std::string::npos) << h1.err;
  EXPECT_NE(h1.err.find("< HTTP/1.1 200"), std::string::npos) << h1.err;
  EXPECT_EQ(h1.out, "hinted\n");

  auto h2 = run_command({"nghttp", "-v", sidecar.url("/early-hints")}, 30s);
  ASSERT_EQ(h2.exit_code, 0) << h2.out << h2.err;
  auto hint = h2.out.find(":status: 103");
  auto final_head = h2.out.find(":status: 200");
  ASSERT_NE(hint, std::string::npos) << h2.out;
  ASSERT_NE(final_head, std::string::npos) << h2.out;
  EXPECT_LT(hint, final_head);
}

TEST_F(H2cUpstream, ManyConcurrentStreamsFromHttp2AndHttp11ClientsAllSucceed) {
  auto h2 = run_command({"h2load", "-c4", "-m25", "-n4000", sidecar.url("/")}, 60s);
  ASSERT_EQ(h2.exit_code, 0) << h2.out << h2.err;
  EXPECT_NE(h2.out.find("4000 succeeded, 0 failed, 0 errored"), std::string::npos) << h2.out;
  EXPECT_NE(h2.out.find("status codes: 4000 2xx"), std::string::npos) << h2.out;
  auto h1 = run_command({"h2load", "--h1", "-c40", "-n4000", sidecar.url("/")}, 60s);
  ASSERT_EQ(h1.exit_code, 0) << h1.out << h1.err;
  EXPECT_NE(h1.out.find("4000 succeeded, 0 failed, 0 errored"), std::string::npos) << h1.out;
}

TEST_F(H2cUpstream, AResetFromTheClientDoesNotDisturbOtherStreams) {
  // A client that gives up on a slow response (curl's timeout) resets its stream; sluice resets the
  // upstream stream, and the shared connection to the app keeps serving.
  auto slow = curl({"--http2-prior-knowledge", sidecar.url("/slow-body/20/200")}, 1);
  EXPECT_NE(slow.exit_code, 0) << "curl gave up";
  auto r = run_command({"h2load", "-c1", "-m10", "-n200", sidecar.url("/")}, 30s);
  EXPECT_NE(r.out.find("200 succeeded, 0 failed, 0 errored"), std::string::npos) << r.out;
}

TEST(H2cUpstreamTimeouts, ResponseStartTimeoutAnswers504OnBothProtocols) {
  Backend backend;
  Sidecar app{h2c_only(backend.port)};
  Sidecar sidecar{to_h2c_app(app.port, {{"REVISION_RESPONSE_START_TIMEOUT_SECONDS", "1"}})};
  for (std::string version : {"--http1.1", "--http2-prior-knowledge"}) {
    auto r = curl({version, "-w", " %{http_code}", sidecar.url("/delay/4000")}, 10);
    ASSERT_EQ(r.exit_code, 0) << version << r.err;
    EXPECT_EQ(r.out, "request timeout 504") << version;
  }
  auto ok = curl({"--http1.1", sidecar.url("/delay/10")});
  EXPECT_EQ(ok.out, "delayed 10\n") << "the connection to the app survived the reset stream";
}

TEST(H2cUpstreamFailures, AnAppThatGoesAwayCutsTheResponseThenGives502) {
  Backend backend;
  auto app = std::make_unique<Sidecar>(h2c_only(backend.port));
  Sidecar sidecar{to_h2c_app(app->port)};
  RawClient client(sidecar.port);
  client.send("GET /slow-body/50/100 HTTP/1.1\r\nHost: x\r\n\r\n");
  auto started = client.read_until("chunk 0\n");
  ASSERT_NE(started.find("chunk 0\n"), std::string::npos) << started;
  app.reset();  // SIGKILL, mid-response
  auto rest = client.read_until("\r\n0\r\n\r\n", 5s);
  EXPECT_EQ(rest.find("\r\n0\r\n\r\n"), std::string::npos) << "the body is cut, never completed: " << rest;
  EXPECT_EQ(rest.find("chunk 49"), std::string::npos) << rest;
  auto after = curl({"--http1.1", "-w", " %{http_code}", sidecar.url("/")});
  EXPECT_NE(after.out.find("502"), std::string::npos) << after.out;
  EXPECT_NE(after.out.find("upstream connect error"), std::string::npos) << after.out;
}

TEST(H2cUpstreamDetection, FindsOutWhatTheAppSpeaks) {
  Backend backend;
  Sidecar h2c_app{h2c_only(backend.port)};
  Sidecar to_h2c{SidecarOptions{.user_port = h2c_app.port, .env = {{"ENABLE_HTTP2_AUTO_DETECTION", "true"}}}};
  Sidecar to_h1{SidecarOptions{.user_port = backend.port, .env = {{"ENABLE_HTTP2_AUTO_DETECTION", "true"}}}};
  for (Sidecar* s : {&to_h2c, &to_h1}) {
    auto h1 = curl({"--http1.1", s->url("/")});
    EXPECT_EQ(h1.out, "Hello from sluice-demo-app\n") << h1.err;
    auto h2 = curl({"--http2-prior-knowledge", s->url("/")});
    EXPECT_EQ(h2.out, "Hello from sluice-demo-app\n") << h2.err;
  }
  EXPECT_TRUE(to_h2c.process->wait_for_line("\"protocol\":\"h2c\"", 1s)) << "detected as h2c";
  EXPECT_TRUE(to_h1.process->wait_for_line("\"protocol\":\"http1\"", 1s)) << "detected as HTTP/1.1";
}

// A real gRPC server and client (python3-grpcio) through sluice: unary, server streaming and an error
// status, with trailing metadata checked.
TEST(Grpc, UnaryServerStreamingAndErrorStatusPassThrough) {
  Process server(ProcessOptions{.argv = {"/usr/bin/python3", GRPC_TEST_DIR "/server.py"}, .merge_stderr = true});
  auto listening = server.wait_for_line("listening ", 20s);
  ASSERT_TRUE(listening) << server.stderr_text();
  int port = std::stoi(listening->substr(listening->find(' ') + 1));
  Sidecar sidecar{to_h2c_app(port)};
  auto r = run_command({"/usr/bin/python3", GRPC_TEST_DIR "/client.py", "127.0.0.1:" + std::to_string(sidecar.port)},
                       60s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("unary OK echo:hello x-trailer=unary\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stream OK 50 message_0..message_49 x-count=50\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fail NOT_FOUND no_such_thing x-reason=test\n"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace sluice::test
