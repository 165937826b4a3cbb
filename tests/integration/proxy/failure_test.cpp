// The app misbehaving, or being slow: every failure gets the status the spec names, and sluice keeps serving.
#include <gtest/gtest.h>

#include "harness.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {


TEST(Failures, RefusedUpstreamIs502) {
  int closed_port;
  {
    Backend gone;
    closed_port = gone.port;
  }  // the app exits: nothing listens there any more
  Sidecar sidecar(SidecarOptions{.user_port = closed_port});
  auto r = curl({"-w", "%{http_code}", sidecar.url("/")});
  EXPECT_EQ(r.out.substr(r.out.size() - 3), "502") << r.out;
  EXPECT_NE(r.out.find("bad gateway"), std::string::npos) << r.out;
}

class FailingApp : public ::testing::Test {
 protected:
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port}};
};

TEST_F(FailingApp, AppClosingBeforeAnyResponseIs502) {
  auto r = curl({"-w", "%{http_code}", sidecar.url("/close-immediately")});
  EXPECT_EQ(r.out.substr(r.out.size() - 3), "502") << r.out;
  EXPECT_EQ(curl({sidecar.url("/")}).out, "Hello from sluice-demo-app\n");
}

TEST_F(FailingApp, AppClosingMidResponseCutsTheClientsResponse) {
  auto r = curl({"-o", "/dev/null", "-w", "%{http_code} %{size_download}", sidecar.url("/close-mid")});
  EXPECT_EQ(r.exit_code, 18) << r.err;  // curl: partial file
  EXPECT_EQ(r.out, "200 1000");
  // The next request on a new connection is served normally.
  EXPECT_EQ(curl({sidecar.url("/")}).out, "Hello from sluice-demo-app\n");
}

TEST_F(FailingApp, PooledConnectionClosedByTheAppIsRetriedTransparently) {
  // /close-mid leaves nothing in the pool, but a normal request does; restarting the app closes it.
  ASSERT_EQ(curl({sidecar.url("/")}).exit_code, 0);
  int port = backend.port;
  backend.process.reset();
  Process app(ProcessOptions{.argv = {DEMO_APP_BIN, "--port", std::to_string(port)}});
  ASSERT_TRUE(app.wait_for_line("\"listening\""));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(curl({sidecar.url("/")}).out, "Hello from sluice-demo-app\n");
}

TEST(Timeouts, ResponseStartTimeoutIs504) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port,
                                 .env = {{"REVISION_RESPONSE_START_TIMEOUT_SECONDS", "1"}}});
  // The app would answer after 30 s: an answer well before that is the timeout's, however busy the machine.
  auto r = curl({"-w", " %{http_code} %{time_total}", sidecar.url("/delay/30000")});
  EXPECT_NE(r.out.find("request timeout 504"), std::string::npos) << r.out;
  double t = std::stod(r.out.substr(r.out.rfind(' ') + 1));
  EXPECT_GE(t, 0.9);
  EXPECT_LT(t, 20.0);
  // A response that starts in time is not affected.
  EXPECT_EQ(curl({sidecar.url("/delay/100")}).out, "delayed 100\n");
}

TEST(Timeouts, RequestTimeoutIs504BeforeTheResponseStarts) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port, .env = {{"REVISION_TIMEOUT_SECONDS", "1"}}});
  auto r = curl({"-w", " %{http_code}", sidecar.url("/delay/5000")});
  EXPECT_EQ(r.out, "request timeout 504") << r.out;
}

TEST(Timeouts, RequestTimeoutCutsAResponseThatAlreadyStarted) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port, .env = {{"REVISION_TIMEOUT_SECONDS", "1"}}});
  auto r = curl({"-w", " %{http_code}", sidecar.url("/slow-body/10/300")});
  EXPECT_NE(r.exit_code, 0);  // the body was cut
  EXPECT_NE(r.out.find("chunk 0\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("chunk 9\n"), std::string::npos) << r.out;
}

TEST(Timeouts, IdleTimeoutCutsAStalledResponse) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port, .env = {{"REVISION_IDLE_TIMEOUT_SECONDS", "1"}}});
  // 300 ms between chunks keeps the response alive; 20 s stalls it past the idle timeout.
  auto ok = curl({sidecar.url("/slow-body/5/300")});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("chunk 4\n"), std::string::npos);
  auto r = curl({"-w", " %{http_code} %{time_total}", sidecar.url("/slow-body/3/20000")});
  EXPECT_NE(r.exit_code, 0);  // cut: the response head arrived, the body never completed
  EXPECT_EQ(r.out.find("chunk 1\n"), std::string::npos) << r.out;
  auto code_pos = r.out.rfind(" 200 ");
  ASSERT_NE(code_pos, std::string::npos) << r.out;
  EXPECT_LT(std::stod(r.out.substr(code_pos + 5)), 15.0) << r.out;  // well before the second chunk was due
}

TEST(Timeouts, IdleTimeoutBeforeAnyResponseIs504) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port, .env = {{"REVISION_IDLE_TIMEOUT_SECONDS", "1"}}});
  auto r = curl({"-w", " %{http_code}", sidecar.url("/delay/5000")});
  EXPECT_EQ(r.out, "request timeout 504") << r.out;
}

TEST(Timeouts, SlowClientHeaderIsClosed) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port, .flags = {"--client-header-timeout-seconds=1"}});
  auto start = std::chrono::steady_clock::now();
  auto out = raw_exchange(sidecar.port, "GET / HTTP/1.1\r\nHost: x\r\n", std::chrono::seconds(30));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(out, "");
  EXPECT_LT(took, std::chrono::seconds(20));  // closed by sluice, not by the 30 s read limit here
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// A client that gives up before the response: the exchange ends at once (not when the app answers),
// the app's request is cancelled, and the request log says 499, as nginx's does.
void expect_client_gone_is_499(const std::vector<std::string>& protocol_flags, const std::string& id) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port, .env = {{"SERVING_ENABLE_REQUEST_LOG", "true"}}});
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> args = protocol_flags;
  args.insert(args.end(), {"--max-time", "1", "-H", "X-Request-Id: " + id, sidecar.url("/delay/30000")});
  auto r = curl(args);
  EXPECT_EQ(r.exit_code, 28) << r.err;  // curl: operation timed out
  auto line = sidecar.process->wait_for_line("\"requestId\":\"" + id + "\"", std::chrono::seconds(25));
  ASSERT_TRUE(line) << "no request log line";
  auto logged_after = std::chrono::steady_clock::now() - start;
  EXPECT_NE(line->find("\"status\":499"), std::string::npos) << *line;
  EXPECT_LT(logged_after, std::chrono::seconds(20)) << "the exchange waited for the app (it answers at 30 s)";
  // The sidecar keeps serving.
  std::vector<std::string> again = protocol_flags;
  again.push_back(sidecar.url("/"));
  EXPECT_EQ(curl(again).out, "Hello from sluice-demo-app\n");
}

TEST(ClientGone, Http11ClientLeavingBeforeTheResponseIs499AndEndsAtOnce) {
  expect_client_gone_is_499({}, "gone-h1");
}

TEST(ClientGone, Http2ClientLeavingBeforeTheResponseIs499AndEndsAtOnce) {
  expect_client_gone_is_499({"--http2-prior-knowledge"}, "gone-h2");
}

// The same while the request waits for a slot (containerConcurrency 1, the slot held by an upload whose
// end has not been sent): it leaves the queue then, not when the slot comes, and is logged as 499.
void expect_client_gone_from_the_queue_is_499(const std::vector<std::string>& protocol_flags, const std::string& id) {
  Backend backend;
  Sidecar sidecar(SidecarOptions{.user_port = backend.port,
                                 .env = {{"SERVING_ENABLE_REQUEST_LOG", "true"}, {"CONTAINER_CONCURRENCY", "1"},
                                         {"SERVING_REQUEST_METRICS_BACKEND", "prometheus"}}});
  auto depth = [&] {
    return prometheus_value(body_of(http_get(sidecar.user_metrics_port, "/metrics")), "revision_queue_depth");
  };
  RawClient holder(sidecar.port);
  holder.send("POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n");
  ASSERT_TRUE(eventually([&] { return depth() == 1.0; }, 10s));
  std::vector<std::string> args = protocol_flags;
  args.insert(args.end(), {"--max-time", "1", sidecar.url("/" + id)});
  auto r = curl(args);
  EXPECT_EQ(r.exit_code, 28) << r.err;  // queued behind the holder until curl gave up
  // The one request logged so far (the holder's is not done): the app never saw it.
  auto line = sidecar.process->wait_for_line("\"requestUrl\":\"/" + id + "\"", 25s);
  ASSERT_TRUE(line) << "no request log line while the slot is still held: " << sidecar.process->stdout_text();
  EXPECT_NE(line->find("\"status\":499"), std::string::npos) << *line;
  EXPECT_EQ(depth(), 1.0);  // the holder alone
  holder.send("0\r\n\r\n");
  EXPECT_NE(holder.read_until("\r\n\r\n1").find("HTTP/1.1 200 "), std::string::npos);
  std::vector<std::string> again = protocol_flags;
  again.push_back(sidecar.url("/"));
  EXPECT_EQ(curl(again).out, "Hello from sluice-demo-app\n");
}

TEST(ClientGone, Http11ClientLeavingWhileQueuedForASlotLeavesTheQueueAt499) {
  expect_client_gone_from_the_queue_is_499({}, "gone-queued-h1");
}

TEST(ClientGone, Http2ClientLeavingWhileQueuedForASlotLeavesTheQueueAt499) {
  expect_client_gone_from_the_queue_is_499({"--http2-prior-knowledge"}, "gone-queued-h2");
}

}  // namespace
}  // namespace sluice::test
