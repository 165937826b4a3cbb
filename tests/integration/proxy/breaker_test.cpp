// containerConcurrency end to end: the real sidecar with c = 1, the demo app, curl as clients.
#include <gtest/gtest.h>

#include <future>

#include "harness.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

class Breaker : public ::testing::Test {
 protected:
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"CONTAINER_CONCURRENCY", "1"},
                                         {"SERVING_REQUEST_METRICS_BACKEND", "prometheus"}}}};

  // In flight plus waiting, as the user metrics report it.
  double queue_depth() {
    auto text = body_of(http_get(sidecar.user_metrics_port, "/metrics"));
    return prometheus_value(text, "revision_queue_depth").value_or(-1);
  }

  // Holds the one slot with a request whose chunked body has not ended.
  std::unique_ptr<RawClient> hold_the_slot() {
    auto c = std::make_unique<RawClient>(sidecar.port);
    c->send("POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
    EXPECT_TRUE(eventually([&] { return queue_depth() == 1; }));
    return c;
  }
};

struct Outcome {
  std::string out;
  std::chrono::steady_clock::time_point finished;
};

TEST_F(Breaker, FifteenConcurrentRequestsGiveOneInFlightTenQueuedAndFourRefused) {
  auto holder = hold_the_slot();
  std::vector<std::future<Outcome>> clients;
  auto launch = [&] {
    clients.push_back(std::async(std::launch::async, [url = sidecar.url("/delay/50")] {
      auto r = curl({"-w", " %{http_code}", url});
      return Outcome{r.out, std::chrono::steady_clock::now()};
    }));
  };
  // One at a time, each seen waiting before the next, so the arrival order is known.
  for (int i = 1; i <= 10; ++i) {
    launch();
    ASSERT_TRUE(eventually([&] { return queue_depth() == 1 + i; })) << "request " << i << " not queued";
  }
  for (int i = 11; i <= 14; ++i) launch();
  for (int i = 10; i < 14; ++i) {
    auto o = clients[static_cast<std::size_t>(i)].get();
    EXPECT_EQ(o.out, "pending request queue full\n 503") << "request " << i + 1;
  }
  holder->send("0\r\n\r\n");
  auto held = holder->read_until("\r\n\r\n5");
  EXPECT_EQ(held.rfind("HTTP/1.1 200 ", 0), 0u) << held;
  std::vector<Outcome> served;
  for (int i = 0; i < 10; ++i) served.push_back(clients[static_cast<std::size_t>(i)].get());
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(served[i].out.ends_with(" 200")) << "request " << i + 1 << ": " << served[i].out;
    // One at a time, 50 ms each: a later arrival always finishes later.
    if (i > 0) {
      EXPECT_GT(served[i].finished, served[i - 1].finished) << "request " << i + 1 << " overtook";
    }
  }
  EXPECT_TRUE(eventually([&] { return queue_depth() == 0; }));
}

TEST_F(Breaker, HealthChecksBypassAFullBreaker) {
  auto holder = hold_the_slot();
  auto r = http_get(sidecar.port, "/", "User-Agent: kube-probe/1.29\r\nK-Network-Probe: queue\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 ", 0), 0u) << r;
  EXPECT_EQ(body_of(r), "queue");
  EXPECT_EQ(queue_depth(), 1);
  holder->send("0\r\n\r\n");
}

TEST(BreakerTimeout, AWaiterWhoseTimeoutPassesGets503) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"CONTAINER_CONCURRENCY", "1"}, {"REVISION_TIMEOUT_SECONDS", "1"}}}};
  // An upgraded connection keeps its slot for as long as it lasts; request timeouts do not cut it.
  RawClient ws(sidecar.port);
  ws.send("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
  auto head = ws.read_until("\r\n\r\n");
  ASSERT_EQ(head.rfind("HTTP/1.1 101 ", 0), 0u) << head;
  auto started = std::chrono::steady_clock::now();
  auto waiting = curl({"-w", " %{http_code}", sidecar.url("/")});
  auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(waiting.out, "request timeout while waiting for the container\n 503");
  EXPECT_GE(waited, 1s);
}

}  // namespace
}  // namespace sluice::test
