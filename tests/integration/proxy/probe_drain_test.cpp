// Health checks and drain as Knative's kubelet, activator and preStop hook see them (SPEC §3.1, §6).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>

#include "harness.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

const std::string kKubelet = "User-Agent: kube-probe/1.29\r\nK-Network-Probe: queue\r\n";

std::string status_line(const std::string& response) { return response.substr(0, response.find("\r\n")); }

TEST(Probes, ReadyAppAnswers200WithExactlyQueue) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port}};
  auto r = http_get(sidecar.port, "/", kKubelet);
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK");
  EXPECT_EQ(body_of(r), "queue");
  auto activator = http_get(sidecar.port, "/", "User-Agent: Knative-Activator-Probe\r\nK-Network-Probe: queue\r\n");
  EXPECT_EQ(body_of(activator), "queue");
  // Health checks are not traffic: the app never saw them.
  EXPECT_NE(body_of(http_get(backend.port, "/stats")).find("requests=1 "), std::string::npos);
}

TEST(Probes, UnexpectedProbeHeaderValueIs400) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port}};
  auto r = http_get(sidecar.port, "/", "User-Agent: kube-probe/1.29\r\nK-Network-Probe: activator\r\n");
  EXPECT_EQ(status_line(r), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(body_of(r), "unexpected probe header value: activator\n");
}

TEST(Probes, QueueProbeHeaderFromAnOrdinaryClientIsForwarded) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port}};
  auto r = http_get(sidecar.port, "/headers", "User-Agent: curl/8\r\nK-Network-Probe: queue\r\n");
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK");
  EXPECT_NE(body_of(r).find("K-Network-Probe: queue"), std::string::npos) << r;
}

TEST(Probes, IngressProbeEchoesTheHashOrIs400WithoutIt) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port}};
  auto ok = http_get(sidecar.port, "/", "K-Network-Probe: probe\r\nK-Network-Hash: 5a3b\r\n");
  EXPECT_EQ(status_line(ok), "HTTP/1.1 200 OK");
  EXPECT_NE(ok.find("\r\nK-Network-Hash: 5a3b\r\n"), std::string::npos) << ok;
  auto bad = http_get(sidecar.port, "/", "K-Network-Probe: probe\r\n");
  EXPECT_EQ(status_line(bad), "HTTP/1.1 400 Bad Request");
}

TEST(Probes, AppNotListeningIs503WithAPeriodicProbe) {
  ReservedPort app;
  Sidecar sidecar{SidecarOptions{
      .user_port = app.port,
      .env = {{"SERVING_READINESS_PROBE", R"({"tcpSocket":{"port":)" + std::to_string(app.port) +
                                              R"(},"periodSeconds":10,"timeoutSeconds":1})"}}}};
  EXPECT_EQ(status_line(http_get(sidecar.port, "/", kKubelet)), "HTTP/1.1 503 Service Unavailable");
  app.listen();
  EXPECT_EQ(status_line(http_get(sidecar.port, "/", kKubelet)), "HTTP/1.1 200 OK");
}

TEST(Probes, AggressiveProbeWaitsForTheAppToStartListening) {
  ReservedPort app;
  Sidecar sidecar{SidecarOptions{.user_port = app.port}};  // Knative's default: TCP, periodSeconds 0
  auto probe = std::async(std::launch::async, [&] { return http_get(sidecar.port, "/", kKubelet, 15s); });
  // Several polls fail before this.
  EXPECT_EQ(probe.wait_for(300ms), std::future_status::timeout);
  app.listen();
  auto r = probe.get();
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK");
}

TEST(Probes, HttpProbeSendsKubeletsAgentAndTheConfiguredHeaders) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"SERVING_READINESS_PROBE", R"({"httpGet":{"path":"/status/204","port":)" +
                                              std::to_string(backend.port) +
                                              R"(,"httpHeaders":[{"name":"X-Probe","value":"yes"}]}})"}}}};
  EXPECT_EQ(status_line(http_get(sidecar.port, "/", kKubelet)), "HTTP/1.1 200 OK");
  Sidecar failing{SidecarOptions{
      .user_port = backend.port,
      .env = {{"SERVING_READINESS_PROBE", R"({"httpGet":{"path":"/status/500","port":)" +
                                              std::to_string(backend.port) + R"(},"periodSeconds":1})"}}}};
  EXPECT_EQ(status_line(http_get(failing.port, "/", kKubelet)), "HTTP/1.1 503 Service Unavailable");
}

TEST(Probes, MultiContainerProbesAllMustPassEachOnItsOwnPortAndPath) {
  Backend backend;
  ReservedPort other;  // a second container, not listening yet
  auto probes = R"([{"httpGet":{"path":"/status/204","port":)" + std::to_string(backend.port) +
                R"(},"periodSeconds":1},{"tcpSocket":{"port":)" + std::to_string(other.port) +
                R"(},"periodSeconds":1}])";
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"ENABLE_MULTI_CONTAINER_PROBES", "true"}, {"SERVING_READINESS_PROBE", probes}}}};
  EXPECT_EQ(status_line(http_get(sidecar.port, "/", kKubelet)), "HTTP/1.1 503 Service Unavailable");
  other.listen();
  EXPECT_EQ(status_line(http_get(sidecar.port, "/", kKubelet)), "HTTP/1.1 200 OK");

  // The app's own path failing is enough to fail, whatever the others say.
  auto failing_app = R"([{"httpGet":{"path":"/status/500","port":)" + std::to_string(backend.port) +
                     R"(},"periodSeconds":1},{"tcpSocket":{"port":)" + std::to_string(other.port) + R"(}}])";
  Sidecar second{SidecarOptions{
      .user_port = backend.port,
      .env = {{"ENABLE_MULTI_CONTAINER_PROBES", "true"}, {"SERVING_READINESS_PROBE", failing_app}}}};
  EXPECT_EQ(status_line(http_get(second.port, "/", kKubelet)), "HTTP/1.1 503 Service Unavailable");
}

// Every ordinary request restarts the quiet period (queue-proxy's drainer): requests sent while the health
// checks are polled keep the sidecar serving for as long as the test needs, however slow the machine.
TEST(Drain, SigtermFailsHealthChecksAtOnceButKeepsServing) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_DRAIN_QUIET_PERIOD_MS", "3000"}}}};
  sidecar.process->signal(SIGTERM);
  int served = 0;
  ASSERT_TRUE(eventually([&] {
    auto r = curl({"-w", " %{http_code}", sidecar.url("/")});
    EXPECT_TRUE(r.out.ends_with(" 200")) << r.out;
    ++served;
    return status_line(http_get(sidecar.port, "/", kKubelet)) == "HTTP/1.1 503 Service Unavailable";
  }, 30s));
  EXPECT_EQ(body_of(http_get(sidecar.port, "/", kKubelet)), "shutting down\n");
  auto r = curl({"-w", " %{http_code}", sidecar.url("/")});
  EXPECT_TRUE(r.out.ends_with(" 200")) << "after " << served << " requests while draining: " << r.out;
  EXPECT_EQ(exit_status(*sidecar.process), "exited 0");
}

TEST(Drain, UnderKeepAliveLoadNoRequestFailsAndTheProcessExitsZero) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_DRAIN_QUIET_PERIOD_MS", "500"}}}};
  constexpr int kRequests = 30000;
  auto [r, under_load] = load_then_sigterm(backend, sidecar, {"h2load", "--h1", "-c50", "-n" + std::to_string(kRequests), sidecar.url("/")}, kRequests / 10);
  ASSERT_TRUE(under_load) << "the load ended before SIGTERM: " << r.out;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(std::to_string(kRequests) + " succeeded, 0 failed, 0 errored"), std::string::npos) << r.out;
  EXPECT_EQ(exit_status(*sidecar.process), "exited 0");
}

TEST(Drain, WaitForDrainWithoutSigtermResetsAfterASecond) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_DRAIN_QUIET_PERIOD_MS", "5000"}}}};
  auto started = std::chrono::steady_clock::now();
  auto wait = std::async(std::launch::async, [&] { return http_get(sidecar.admin_port, "/wait-for-drain", "", 10s); });
  ASSERT_TRUE(eventually([&] {
    return status_line(http_get(sidecar.port, "/", kKubelet)) == "HTTP/1.1 503 Service Unavailable";
  }));
  auto r = wait.get();
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK");
  EXPECT_GE(took, 1s);
  EXPECT_LT(took, 5s);  // the reset ended it, not the quiet period
  EXPECT_EQ(status_line(http_get(sidecar.port, "/", kKubelet)), "HTTP/1.1 200 OK");  // serving again
  EXPECT_TRUE(sidecar.process->running());
}

// A native sidecar gets SIGTERM only after the app has exited: /wait-for-drain (the app's preStop) holds
// for the quiet period however long no SIGTERM comes, and is undone only by the app's restart.
TEST(Drain, NativeSidecarWaitForDrainHoldsWithoutSigtermUntilTheAppRestarts) {
  auto backend = std::make_unique<Backend>();
  const int app_port = backend->port;
  Sidecar sidecar{SidecarOptions{.user_port = app_port,
                                 .env = {{"SLUICE_DRAIN_QUIET_PERIOD_MS", "60000"},
                                         {"SLUICE_WAIT_FOR_DRAIN_RESET", "app-restart"}}}};
  auto wait = std::async(std::launch::async, [&] { return http_get(sidecar.admin_port, "/wait-for-drain", "", 30s); });
  ASSERT_TRUE(eventually([&] {
    return status_line(http_get(sidecar.port, "/", kKubelet)) == "HTTP/1.1 503 Service Unavailable";
  }));
  EXPECT_EQ(wait.wait_for(1500ms), std::future_status::timeout) << "still draining past queue-proxy's 1 s reset";
  EXPECT_EQ(status_line(http_get(sidecar.port, "/", kKubelet)), "HTTP/1.1 503 Service Unavailable");
  EXPECT_EQ(body_of(http_get(sidecar.port, "/")), "Hello from sluice-demo-app\n") << "requests are still served";

  backend.reset();  // the app exits (a liveness restart, here) ...
  ASSERT_TRUE(sidecar.process->wait_for_line("the app went away after /wait-for-drain"));
  Process restarted(ProcessOptions{.argv = {DEMO_APP_BIN, "--port", std::to_string(app_port)}});
  ASSERT_TRUE(restarted.wait_for_line("\"listening\""));
  // ... and comes back: the drain is undone.
  ASSERT_TRUE(sidecar.process->wait_for_line("the app restarted after /wait-for-drain"));
  EXPECT_EQ(status_line(wait.get()), "HTTP/1.1 200 OK");
  EXPECT_EQ(status_line(http_get(sidecar.port, "/", kKubelet)), "HTTP/1.1 200 OK");
}

TEST(Drain, WaitForDrainFollowedBySigtermAnswersWhenDrainedAndExits) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_DRAIN_QUIET_PERIOD_MS", "300"}}}};
  auto wait = std::async(std::launch::async, [&] { return http_get(sidecar.admin_port, "/wait-for-drain", "", 10s); });
  ASSERT_TRUE(eventually([&] {
    return status_line(http_get(sidecar.port, "/", kKubelet)) == "HTTP/1.1 503 Service Unavailable";
  }));
  sidecar.process->signal(SIGTERM);
  EXPECT_EQ(status_line(wait.get()), "HTTP/1.1 200 OK");
  EXPECT_EQ(exit_status(*sidecar.process), "exited 0");
}

// As queue-proxy (knative.dev/pkg/signals): a second signal ends the process at once with status 1, even
// with a request in flight and the quiet period still running.
TEST(Drain, ASecondSignalExitsAtOnceWithOne) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_DRAIN_QUIET_PERIOD_MS", "60000"}}}};
  auto slow = std::async(std::launch::async, [&] { return http_get(sidecar.port, "/delay/30000", "", 40s); });
  // The app's own count includes each /stats request asking for it.
  int asked = 0;
  ASSERT_TRUE(eventually([&] {
    auto body = body_of(http_get(backend.port, "/stats"));
    ++asked;
    return body.rfind("requests=", 0) == 0 && std::stoi(body.substr(9)) > asked;
  }));
  sidecar.process->signal(SIGTERM);
  ASSERT_TRUE(eventually([&] { return sidecar.process->wait_for_line("\"draining\"", 0ms).has_value(); }));
  sidecar.process->signal(SIGTERM);
  EXPECT_EQ(exit_status(*sidecar.process), "exited 1");
  EXPECT_TRUE(sidecar.process->wait_for_line("second signal: exiting at once", 0ms).has_value());
}

}  // namespace
}  // namespace sluice::test
