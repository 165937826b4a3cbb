// `sluice gateway` end to end: real demo-app instances started on demand by the real binary, real
// clients (curl, h2load, raw sockets) on loopback. Instances that start slowly are the demo app behind
// `sleep` in a shell, so a cold start has a known minimum length.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>

#include "tests/integration/gateway/gateway_harness.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

TEST(Gateway, FirstRequestAfterIdleWaitsForTheColdStartThenWarmRequestsReuseTheInstance) {
  Gateway gw({"--", "/bin/sh", "-c", slow_app(0.3)});
  ASSERT_TRUE(gw.validated()) << gw.process->stdout_text();
  EXPECT_EQ(gw.number("cold_starts"), 0);

  auto t0 = std::chrono::steady_clock::now();
  auto r = curl({gw.url("/")});
  auto cold_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello from sluice-demo-app\n");
  EXPECT_GE(cold_ms, 300) << "the request cannot finish before the app listens";
  auto ready = gw.process->wait_for_line("\"event\":\"cold_start\"");
  ASSERT_TRUE(ready);
  RecordProperty("cold_request_ms", std::to_string(cold_ms));

  for (int i = 0; i < 5; ++i) EXPECT_EQ(curl({gw.url("/")}).out, "Hello from sluice-demo-app\n");
  EXPECT_EQ(gw.number("cold_starts"), 1);
  EXPECT_EQ(gw.instances(""), 1u);
  EXPECT_EQ(gw.number("requests_total"), 6);
}

TEST(Gateway, HundredConcurrentRequestsDuringAColdStartAllSucceed) {
  Gateway gw({"--", "/bin/sh", "-c", slow_app(0.5)});
  ASSERT_TRUE(gw.validated());
  auto r = run_command({"h2load", "--h1", "-n100", "-c100", gw.url("/")}, 60s);
  EXPECT_NE(r.out.find("100 succeeded, 0 failed, 0 errored"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status codes: 100 2xx"), std::string::npos) << r.out;
  EXPECT_EQ(gw.number("cold_starts"), 1);
  EXPECT_EQ(gw.number("refused_total"), 0);
}

// 400 requests on 200 connections at a cold service, as h2load --h1 -n400 -c200 sends them: the buffer
// (10,000 a revision by default, Knative activator's queue depth) takes them all; none is refused.
TEST(Gateway, AColdBurstOfTwoHundredConnectionsIsAbsorbedByTheBuffer) {
  Gateway gw({"--", "/bin/sh", "-c", slow_app(0.5)});
  ASSERT_TRUE(gw.validated());
  auto r = run_command({"h2load", "--h1", "-n400", "-c200", gw.url("/")}, 60s);
  EXPECT_EQ(h2load_count(r.out, "2xx"), 400) << r.out;
  EXPECT_EQ(gw.number("refused_total"), 0);
}

// An app that runs but never listens on PORT (here: it never listens at all): after 5 s the log says
// what the start waits for, and the request that times out in the buffer is told the same.
TEST(Gateway, AnAppNotListeningOnPortIsNamedInTheLogAndInThe504) {
  TempFile cfg("sluice-gw.yaml", "services:\n  app:\n    command: exec sleep 30\n    validate: false\n"
                                 "    buffer-timeout: 7s\n");
  Gateway gw({"--config", cfg.path()});
  auto r = curl({"-sS", "-w", "\n%{http_code}", gw.url("/")}, 30);
  EXPECT_TRUE(r.out.ends_with("\n504")) << r.out;
  EXPECT_NE(r.out.find("service app: no instance became ready within "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("app-1 runs, but nothing listens on PORT "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does the app listen on $PORT?"), std::string::npos) << r.out;
  auto said = gw.process->wait_for_line("\"event\":\"instance.not_listening\"", 1s);
  ASSERT_TRUE(said) << gw.process->stdout_text();
  EXPECT_NE(said->find("\"instance\":\"app-1\""), std::string::npos) << *said;
}

TEST(Gateway, AFullColdStartBufferAnswers503WithTheReason) {
  TempFile cfg("sluice-gw.yaml", "services:\n  app:\n    command: " + slow_app(1.5) + "\n    buffer-size: 5\n");
  Gateway gw({"--config", cfg.path()});
  ASSERT_TRUE(gw.validated());
  CommandResult load;
  std::thread t([&] { load = run_command({"h2load", "--h1", "-n20", "-c20", gw.url("/")}, 60s); });
  // Once five wait, the next request is refused at once, with the reason in the body.
  ASSERT_TRUE(eventually([&] { return gw.number("queued") == 5; }, 10s));
  auto r = curl({"-w", "\n%{http_code}", gw.url("/")});
  t.join();
  EXPECT_NE(r.out.find("service app: cold-start buffer full (5 requests waiting)\n"), std::string::npos) << r.out;
  EXPECT_TRUE(r.out.ends_with("\n503")) << r.out;
  EXPECT_EQ(h2load_count(load.out, "2xx"), 5) << load.out;
  EXPECT_EQ(h2load_count(load.out, "5xx"), 15) << load.out;
  // A refused request's line names the service it was for.
  auto line = gw.process->wait_for_line("\"status\":503", 1s);
  ASSERT_TRUE(line) << gw.process->stdout_text();
  EXPECT_NE(line->find("\"service\":\"app\""), std::string::npos) << *line;
}

// A client that gives up while its request waits in the cold-start buffer: the request leaves the buffer
// then (not at the buffer's timeout), logged as a 499 and counted apart from refusals. The instance start
// it caused is called off before it serves unless the autoscaler had already counted the wait (then the
// autoscaler wants the instance, as Knative's would: it starts).
TEST(Gateway, AClientGoneWhileBufferedLeavesTheBufferAt499AndItsStartIsCalledOff) {
  TempFile cfg("sluice-gw.yaml", "services:\n  app:\n    command: " + slow_app(4) + "\n    validate: false\n");
  Gateway gw({"--config", cfg.path()});
  auto r = run_command({"curl", "-sS", "--max-time", "0.5", gw.url("/")}, 10s);
  EXPECT_EQ(r.exit_code, 28) << r.err;  // curl's own timeout: the client left
  auto left = gw.process->wait_for_line("\"event\":\"request.abandoned\"", 10s);
  ASSERT_TRUE(left) << gw.process->stdout_text();
  EXPECT_NE(left->find("\"status\":499"), std::string::npos) << *left;
  EXPECT_LT(json_int_field(*left, "waited_ms"), 4000) << *left;  // before the app could have been ready
  EXPECT_EQ(gw.number("queued"), 0);
  EXPECT_EQ(gw.number("client_gone_total"), 1);
  EXPECT_EQ(gw.number("refused_total"), 0);
  auto metrics = body_of(http_get(gw.admin_port, "/metrics"));
  EXPECT_NE(metrics.find("sluice_client_gone_requests_total{revision=\"app-00001\",service=\"app\"} 1"),
            std::string::npos) << metrics;
  if (left->find("\"autoscaler_saw_it\":false") != std::string::npos) {
    // Called off: drained while starting and stopped; once stopped it can never have served.
    EXPECT_TRUE(gw.process->wait_for_line("\"event\":\"instance.called_off\"", 10s)) << gw.process->stdout_text();
    ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"instance.stopped\"", 20s)) << gw.process->stdout_text();
    EXPECT_EQ(gw.process->stdout_text().find("\"event\":\"instance.ready\""), std::string::npos);
    EXPECT_EQ(gw.number("cold_starts"), 0);
  } else {
    EXPECT_TRUE(gw.process->wait_for_line("\"event\":\"instance.ready\"", 20s)) << gw.process->stdout_text();
  }
}

// A single-threaded app whose listen backlog is 2 (Python's socketserver takes 5 by default) gets a
// cold burst of 100 connections: the instance's kernel drops most handshakes' last ACK (or their SYN),
// and the kernel's own retries back off to a minute. Each such request goes again on a new connection
// (proxy Timeouts::instance_accept), the gateway says once why requests wait, and every request is served.
TEST(Gateway, AColdBurstAtAnAppWithASmallListenBacklogIsServedWithoutWaitingOnTheKernelsBackOff) {
  TempFile app("sluice-backlog.py",
               "import http.server, os\n"
               "class H(http.server.BaseHTTPRequestHandler):\n"
               "    def do_GET(self):\n"
               "        self.send_response(200)\n"
               "        self.send_header('Content-Length', '3')\n"
               "        self.end_headers()\n"
               "        self.wfile.write(b'ok\\n')\n"
               "    def log_message(self, *args):\n"
               "        pass\n"
               "class S(http.server.HTTPServer):\n"
               "    request_queue_size = 2\n"
               "S(('127.0.0.1', int(os.environ['PORT'])), H).serve_forever()\n");
  Gateway gw({"--", "/usr/bin/python3", app.path()});
  ASSERT_TRUE(gw.validated());
  auto r = run_command({"h2load", "--h1", "-n100", "-c100", gw.url("/")}, 60s);
  EXPECT_EQ(h2load_count(r.out, "2xx"), 100) << r.out << gw.process->stdout_text();
  EXPECT_TRUE(gw.process->wait_for_line("\"event\":\"instance.backlog_full\"", 1s)) << gw.process->stdout_text();
  EXPECT_EQ(gw.number("requests_total"), 100);
}

// A client that leaves while its request is at the instance (not in the buffer) is counted as gone
// too: status and /metrics agree with the 499 in requests_total.
TEST(Gateway, AClientGoneWhileAtTheInstanceIsCountedAsGone) {
  Gateway gw({"--", DEMO_APP_BIN});
  ASSERT_TRUE(gw.validated());
  ASSERT_EQ(curl({gw.url("/")}).out, "Hello from sluice-demo-app\n");  // warm
  auto r = run_command({"curl", "-sS", "--max-time", "0.5", gw.url("/delay/3000")}, 10s);
  EXPECT_EQ(r.exit_code, 28) << r.err;
  ASSERT_TRUE(eventually([&] { return gw.number("client_gone_total") == 1; }, 5s)) << json::serialize(gw.status());
  auto metrics = body_of(http_get(gw.admin_port, "/metrics"));
  EXPECT_NE(metrics.find("sluice_client_gone_requests_total{revision=\"app-00001\",service=\"app\"} 1"),
            std::string::npos) << metrics;
  EXPECT_NE(metrics.find("sluice_requests_total{code=\"499\",revision=\"app-00001\",service=\"app\"} 1"),
            std::string::npos) << metrics;
}

// A service that opts in to h2c-upstream: its instances (a real gRPC server, python3-grpcio) get
// HTTP/2 by prior knowledge, and a gRPC client's calls through the gateway work from a cold start.
TEST(Gateway, GrpcServiceWithH2cUpstreamColdStarts) {
  TempFile cfg("sluice-gw.yaml", std::string("services:\n  grpc:\n    command: [/usr/bin/python3, ") + GRPC_TEST_DIR +
                                     "/server.py]\n    features: {h2c-upstream: true}\n");
  Gateway gw({"--config", cfg.path()});
  ASSERT_TRUE(gw.validated()) << gw.process->stdout_text();
  auto r = run_command({"/usr/bin/python3", std::string(GRPC_TEST_DIR) + "/client.py", "127.0.0.1:" + std::to_string(gw.port)},
                       60s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("unary OK echo:hello x-trailer=unary\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stream OK 50 message_0..message_49 x-count=50\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fail NOT_FOUND no_such_thing x-reason=test\n"), std::string::npos) << r.out;
  EXPECT_EQ(gw.number("cold_starts"), 1);
}

TEST(Gateway, ScalesOutToSeveralInstancesUnderLoadWithConcurrencyOne) {
  TempFile cfg("sluice-gw.yaml", std::string("services:\n  app:\n    command: ") + DEMO_APP_BIN +
                                     "\n    container-concurrency: 1\n    max-scale: 4\n    validate: false\n");
  Gateway gw({"--config", cfg.path()});
  std::size_t most_ready = 0;
  CommandResult load;
  std::thread t([&] { load = run_command({"h2load", "--h1", "-n300", "-c4", gw.url("/delay/40")}, 60s); });
  eventually([&] {
    most_ready = std::max(most_ready, gw.instances("ready") + gw.instances("frozen"));
    return most_ready >= 2;
  }, 30s);
  t.join();
  EXPECT_GE(most_ready, 2u);
  EXPECT_NE(load.out.find("300 succeeded, 0 failed, 0 errored"), std::string::npos) << load.out;
  EXPECT_NE(gw.process->stdout_text().find("\"event\":\"scale\""), std::string::npos);
}

TEST(Gateway, ScalesToZeroAStableWindowAfterTheLastRequest) {
  // Knative's timing (kpa/scaler.go): deactivated once active a stable window (6 s) and the decider wants
  // 0 (a stable window without traffic); the cold-start buffer was in the path all along (default
  // target-burst-capacity 211 > one instance's 100), longer than the 1 s grace period: zero at once.
  TempFile cfg("sluice-gw.yaml", std::string("services:\n  app:\n    command: ") + DEMO_APP_BIN +
                                     "\n    validate: false\n    stable-window: 6s\n"
                                     "    scale-to-zero-grace-period: 1s\n");
  Gateway gw({"--config", cfg.path()});
  ASSERT_EQ(curl({gw.url("/")}).out, "Hello from sluice-demo-app\n");
  EXPECT_EQ(gw.instances(""), 1u);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return gw.instances("") == 0; }, 40s)) << gw.process->stdout_text();
  auto waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Not before the stable window has seen no traffic (slack: the 1 s stat bucket of the request).
  EXPECT_GE(waited, 4.5);
  // The count can be read before the log line saying so is.
  EXPECT_TRUE(eventually([&] { return gw.process->stdout_text().find("\"to\":0") != std::string::npos; }, 5s));
  // And back from zero on the next request.
  EXPECT_EQ(curl({gw.url("/")}).out, "Hello from sluice-demo-app\n");
  EXPECT_EQ(gw.number("cold_starts"), 2);
}

TEST(Gateway, WithTheBufferOutOfThePathTheInstanceStaysForTheGracePeriodAfterDeactivation) {
  // target-burst-capacity 0: the buffer leaves the path while instances are wanted and goes back in at
  // deactivation; Knative then keeps the replicas as they are (no drop first) until the buffer has been
  // in the path for the grace period: zero a stable window (6 s) + the grace period (4 s) after the load.
  TempFile cfg("sluice-gw.yaml", std::string("services:\n  app:\n    command: ") + DEMO_APP_BIN +
                                     "\n    validate: false\n    stable-window: 6s\n"
                                     "    scale-to-zero-grace-period: 4s\n    target-burst-capacity: 0\n");
  Gateway gw({"--config", cfg.path()});
  ASSERT_EQ(curl({gw.url("/")}).out, "Hello from sluice-demo-app\n");
  auto t0 = std::chrono::steady_clock::now();
  // Deactivation: an "inactive" activity line after the "active" one of the request's instance.
  const auto deactivation_logged = [&] {
    bool active = false;
    for (const auto& l : gw.process->lines()) {
      if (l.find("\"activity\":\"active\"") != std::string::npos) active = true;
      if (active && l.find("\"activity\":\"inactive\"") != std::string::npos) return true;
    }
    return false;
  };
  ASSERT_TRUE(eventually(deactivation_logged, 20s)) << gw.process->stdout_text();
  const auto deactivated = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(gw.instances(""), 1u) << "deactivated, but the instance is kept through the grace period";
  ASSERT_TRUE(eventually([&] { return gw.instances("") == 0; }, 30s)) << gw.process->stdout_text();
  auto waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 4.5 + 4.0);
  EXPECT_GE(waited - deactivated, 3.0);  // the grace period, less a 2 s decision tick of slack
}

// CPU ticks (user + system) of a process, from /proc/PID/stat.
long cpu_ticks(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  auto close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  long utime = 0, stime = 0;
  for (int i = 3; fields >> f; ++i) {
    if (i == 14) utime = std::stol(f);
    if (i == 15) {
      stime = std::stol(f);
      break;
    }
  }
  return utime + stime;
}

TEST(Gateway, AnIdleInstanceIsFrozenUsesNoCpuAndTheNextRequestThawsIt) {
  SLUICE_NEED("cgroup2-freeze");  // then the gateway's throttle is the freezer (Runtime's first choice)
  // The app keeps a busy loop in the background, as an app with background work would.
  std::string busy = std::string("(while :; do :; done) & exec ") + DEMO_APP_BIN;
  Gateway gw({"--", "/bin/sh", "-c", busy});
  auto throttle = std::string(gw.status()["throttle"].as_string());
  ASSERT_EQ(throttle, "cgroup2-freeze");
  ASSERT_TRUE(gw.validated());
  ASSERT_EQ(curl({gw.url("/")}).out, "Hello from sluice-demo-app\n");
  ASSERT_TRUE(eventually([&] { return gw.instances("frozen") == 1; }, 5s)) << json::serialize(gw.status());
  int pid = static_cast<int>(gw.service()["instances"].as_array()[0].as_object()["pid"].to_number<std::int64_t>());
  // The busy loop is the app's child (forked by the shell before it exec'd the app).
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  int loop_pid = 0;
  children >> loop_pid;
  ASSERT_GT(loop_pid, 0);
  long before = cpu_ticks(loop_pid);
  std::this_thread::sleep_for(300ms);  // the measured interval itself, not a wait for something to happen
  EXPECT_EQ(cpu_ticks(loop_pid), before) << "a frozen instance must not run";

  EXPECT_EQ(curl({gw.url("/")}).out, "Hello from sluice-demo-app\n");
  EXPECT_TRUE(eventually([&] { return gw.instances("frozen") == 1; }, 5s));
  EXPECT_EQ(gw.number("cold_starts"), 1);
}

// A Python app that prints a line 50 ms after its response (as an app does that logs once it has
// answered): the line reaches the gateway's log without another request to thaw the instance (it stays
// unfrozen for the freeze delay, and Python's stdout is unbuffered), and the instance is frozen after.
TEST(Gateway, WhatAnAppPrintsJustAfterItsResponseIsLoggedWithoutAnotherRequest) {
  TempFile app("sluice-after.py",
               "import http.server, os, time\n"
               "class H(http.server.BaseHTTPRequestHandler):\n"
               "    protocol_version = 'HTTP/1.1'\n"
               "    def do_GET(self):\n"
               "        self.send_response(200)\n"
               "        self.send_header('Content-Length', '3')\n"
               "        self.end_headers()\n"
               "        self.wfile.write(b'ok\\n')\n"
               "        self.wfile.flush()\n"
               "        time.sleep(0.05)\n"
               "        print('after ' + self.path)\n"
               "    def log_message(self, *args):\n"
               "        pass\n"
               "http.server.HTTPServer(('127.0.0.1', int(os.environ['PORT'])), H).serve_forever()\n");
  Gateway gw({"--", "/usr/bin/python3", app.path()});
  ASSERT_NE(std::string(gw.status()["throttle"].as_string()), "none");  // the one-liner throttles
  ASSERT_TRUE(gw.validated());
  ASSERT_EQ(curl({gw.url("/first")}).out, "ok\n");
  EXPECT_TRUE(gw.process->wait_for_line("after /first", 5s)) << gw.process->stdout_text();
  EXPECT_TRUE(eventually([&] { return gw.instances("frozen") == 1; }, 5s)) << json::serialize(gw.status());
}

// A WebSocket through the gateway (a real Beast client, the demo app's echo): the upgraded connection is
// an exchange in flight for as long as it is open, so its instance is neither frozen nor scaled to zero
// meanwhile. A second service given one plain request at the same time shows both would have happened:
// it is frozen, then scaled to zero, while the WebSocket's instance stays awake and echoes.
TEST(Gateway, AnOpenWebSocketKeepsItsInstanceAwakeAndUpUntilItCloses) {
  SLUICE_NEED("cgroup2-freeze");
  namespace beast = boost::beast;
  namespace websocket = beast::websocket;
  namespace asio = boost::asio;
  const std::string service = std::string("\n    command: ") + DEMO_APP_BIN +
                              "\n    validate: false\n    stable-window: 6s\n    scale-to-zero-grace-period: 1s\n";
  TempFile cfg("sluice-gw.yaml", "features: {throttling: enabled}\nservices:\n  ws:" + service +
                                     "    hosts: [ws.test]\n  plain:" + service + "    hosts: [plain.test]\n");
  Gateway gw({"--config", cfg.path()});
  ASSERT_EQ(std::string(gw.status()["throttle"].as_string()), "cgroup2-freeze");

  asio::io_context io;
  websocket::stream<beast::tcp_stream> ws(io);
  beast::get_lowest_layer(ws).expires_after(120s);  // bounds every operation below
  beast::get_lowest_layer(ws).connect(
      asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(gw.port)));
  ws.handshake("ws.test", "/ws");
  auto echo = [&](const std::string& text) {
    ws.text(true);
    ws.write(asio::buffer(text));
    beast::flat_buffer buf;
    ws.read(buf);
    return beast::buffers_to_string(buf.data());
  };
  ASSERT_EQ(echo("first"), "first");
  ASSERT_EQ(curl({"-H", "Host: plain.test", gw.url("/")}).out, "Hello from sluice-demo-app\n");

  // Until the plain service has been frozen and then scaled to zero, the WebSocket's instance is checked
  // at every poll: one instance, ready (not frozen), the tunnel in flight on it.
  bool plain_frozen = false;
  std::vector<std::string> wrong;
  bool plain_gone = eventually([&] {
    auto ws_instances = gw.service("ws")["instances"].as_array();
    if (ws_instances.size() != 1 || ws_instances[0].as_object()["state"].as_string() != "ready" ||
        ws_instances[0].as_object()["in_flight"].to_number<int>() != 1)
      wrong.push_back(json::serialize(ws_instances));
    plain_frozen = plain_frozen || gw.instances("frozen", "plain") == 1;
    return plain_frozen && gw.instances("", "plain") == 0;
  }, 60s);
  ASSERT_TRUE(plain_gone) << "the plain service was not frozen and scaled to zero: " << gw.process->stdout_text();
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " polls, e.g. " << wrong.front();
  EXPECT_EQ(echo("second"), "second");

  // Closed, it is an instance like any other: frozen, then gone.
  ws.close(websocket::close_code::normal);
  EXPECT_TRUE(eventually([&] { return gw.instances("frozen", "ws") == 1; }, 10s)) << json::serialize(gw.status());
  EXPECT_TRUE(eventually([&] { return gw.instances("", "ws") == 0; }, 60s)) << gw.process->stdout_text();
}

TEST(Gateway, SigtermFinishesBufferedRequestsThenStopsTheInstances) {
  Gateway gw({"--", "/bin/sh", "-c", slow_app(1.0)});
  ASSERT_TRUE(gw.validated());
  CommandResult load;
  std::thread t([&] { load = run_command({"h2load", "--h1", "-n10", "-c10", gw.url("/")}, 60s); });
  ASSERT_TRUE(eventually([&] { return gw.number("queued") == 10; }, 10s));
  gw.process->signal(SIGTERM);
  t.join();
  EXPECT_NE(load.out.find("10 succeeded, 0 failed, 0 errored"), std::string::npos) << load.out;
  EXPECT_EQ(exit_status(*gw.process, 20s), "exited 0");
  EXPECT_NE(gw.process->stdout_text().find("\"event\":\"instance.stopped\""), std::string::npos);
}

TEST(Gateway, SigtermUnderLoadAnswersEveryAcceptedRequest) {
  Gateway gw({"--no-throttle", "--", DEMO_APP_BIN});
  ASSERT_TRUE(gw.validated());
  CommandResult load;
  std::thread t([&] { load = run_command({"h2load", "--h1", "-n20000", "-c20", gw.url("/")}, 60s); });
  bool under_load = eventually([&] { return gw.number("requests_total") > 2000; }, 30s);
  gw.process->signal(SIGTERM);
  t.join();
  ASSERT_TRUE(under_load);
  EXPECT_EQ(exit_status(*gw.process, 20s), "exited 0");
  // Requests after the listener closed are refused at connect, never sent ("errored", not "started").
  // Every request that was sent got a successful answer, the ones on keep-alive connections included.
  EXPECT_EQ(h2load_count(load.out, "started"), h2load_count(load.out, "succeeded")) << load.out;
  EXPECT_EQ(h2load_count(load.out, "2xx"), h2load_count(load.out, "succeeded")) << load.out;
  EXPECT_GT(h2load_count(load.out, "succeeded"), 2000) << load.out;
}

TEST(Gateway, ACrashedInstanceIsReportedAndReplaced) {
  Gateway gw({"--no-throttle", "--", DEMO_APP_BIN});
  ASSERT_TRUE(gw.validated());
  EXPECT_EQ(curl({gw.url("/exit/3")}).out, "exiting 3\n");
  auto crashed = gw.process->wait_for_line("\"event\":\"instance.crashed\"");
  ASSERT_TRUE(crashed);
  EXPECT_NE(crashed->find("exited with code 3"), std::string::npos) << *crashed;
  EXPECT_EQ(gw.number("crashes"), 1);
  EXPECT_EQ(curl({gw.url("/")}).out, "Hello from sluice-demo-app\n");
  EXPECT_EQ(gw.instances("ready"), 1u);
}

TEST(Gateway, AnAppThatCannotStartGets503WithTheReason) {
  Gateway gw({"--", "/bin/sh", "-c", "echo 'cannot open database' >&2; exit 4"});
  ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"instance.failed\"", 10s));
  auto r = curl({"-w", "\n%{http_code}", gw.url("/")});
  EXPECT_NE(r.out.find("service app failed to start: exited with code 4; last output: cannot open database"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n503"), std::string::npos) << r.out;
}

TEST(Gateway, RoutesByHostAndSendsUnknownHostsToTheDefault) {
  TempFile cfg("sluice-gw.yaml", std::string("services:\n") +
                                     "  front:\n    command: " + DEMO_APP_BIN + "\n    default: true\n" +
                                     "  api:\n    command: [\"" + DEMO_APP_BIN + "\"]\n    hosts: [api.test]\n");
  Gateway gw({"--config", cfg.path()});
  auto get = [&](const std::string& host) {
    return curl({"-H", "Host: " + host, gw.url("/env/K_SERVICE")}).out;
  };
  EXPECT_EQ(get("api.test"), "api\n");
  EXPECT_EQ(get("API.test:8080"), "api\n");
  EXPECT_EQ(get("front.localhost"), "front\n");
  EXPECT_EQ(get("elsewhere.example"), "front\n");
  EXPECT_EQ(gw.number("requests_total", "api"), 2);
  EXPECT_EQ(gw.number("requests_total", "front"), 2);
}

TEST(Gateway, AKilledGatewayTakesItsInstancesAlong) {
  Gateway gw({"--no-throttle", "--", DEMO_APP_BIN});
  ASSERT_EQ(curl({gw.url("/")}).out, "Hello from sluice-demo-app\n");
  int pid = static_cast<int>(gw.service()["instances"].as_array()[0].as_object()["pid"].to_number<std::int64_t>());
  ASSERT_EQ(::kill(pid, 0), 0);
  gw.process->signal(SIGKILL);
  ASSERT_TRUE(gw.process->wait_exit(10s));
  // The instance was the gateway's child: once reaped by init it is gone from /proc.
  EXPECT_TRUE(eventually([&] { return ::kill(pid, 0) != 0; }, 10s)) << "instance " << pid << " outlived the gateway";
}

TEST(Gateway, CheckValidatesAConfigAndNamesTheFileLineAndKey) {
  TempFile good("sluice-gw.yaml", "services:\n  web:\n    command: ./server\n    max-scale: 3\n");
  auto ok = run_command({SLUICE_BIN, "gateway", "--check", good.path()});
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_NE(ok.out.find("ok, 1 service: web (default)"), std::string::npos) << ok.out;

  TempFile bad("sluice-gw.yaml", "services:\n  web:\n    command: ./server\n    max-scale: lots\n");
  auto r = run_command({SLUICE_BIN, "gateway", "--check", bad.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(bad.path() + ":4: services.web: max-scale"), std::string::npos) << r.err;

  TempFile typo("sluice-gw.yaml", "services:\n  web:\n    command: ./server\n    buffer-size: -1\n");
  r = run_command({SLUICE_BIN, "gateway", "--check", typo.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(typo.path() + ":4: services.web.buffer-size"), std::string::npos) << r.err;
}

// As nginx: a port another process listens on is a start-up error, not a port shared through SO_REUSEPORT
// (which would split the first gateway's connections with the second).
TEST(Gateway, ASecondGatewayOnABusyPortExits1NamingTheAddressAndTheFirstServesEveryRequest) {
  Gateway first({"--", DEMO_APP_BIN});
  ASSERT_TRUE(first.validated());
  for (const auto& [flag, port] : {std::pair{"--listen", first.port}, std::pair{"--admin", first.admin_port}}) {
    SCOPED_TRACE(flag);
    std::string listen = flag == std::string("--listen") ? "127.0.0.1:" + std::to_string(port) : "127.0.0.1:0";
    std::string admin = flag == std::string("--admin") ? "127.0.0.1:" + std::to_string(port) : "127.0.0.1:0";
    auto r = run_command({SLUICE_BIN, "gateway", "--listen", listen, "--admin", admin, "--status", "none",
                          "--workers", "2", "--", DEMO_APP_BIN},
                         30s);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("address already in use: 127.0.0.1:" + std::to_string(port)), std::string::npos) << r.err;
  }
  int ok = 0;
  for (int i = 0; i < 40; ++i) ok += curl({first.url("/")}).out == "Hello from sluice-demo-app\n";
  EXPECT_EQ(ok, 40);
}

}  // namespace
}  // namespace sluice::test
