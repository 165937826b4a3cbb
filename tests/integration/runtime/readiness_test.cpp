// Readiness polling against real sockets: ready when listening, deadline when not, cancellable, HTTP status.
#include "runtime/readiness.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace sluice::runtime {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

// A loopback listener on an ephemeral port; optionally answers each connection with `reply`.
class Listener {
 public:
  explicit Listener(bool listen_now = true) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    if (listen_now) listen();
  }
  ~Listener() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (server_.joinable()) server_.join();
    ::close(fd_);
  }
  void listen() { ::listen(fd_, 16); }
  void serve(std::string reply) {
    server_ = std::thread([this, reply] {
      while (!stop_) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[1024];
        ::recv(c, buf, sizeof buf, 0);
        ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  int port() const { return port_; }

 private:
  int fd_;
  int port_;
  std::atomic<bool> stop_{false};
  std::thread server_;
};

TEST(Readiness, ReadyOnceSomethingListens) {
  Listener l;
  ReadinessProbe p;
  p.port = l.port();
  auto r = wait_ready(p, Steady::now() + 2s);
  EXPECT_EQ(r.outcome, Readiness::ready);
  EXPECT_EQ(r.attempts, 1);
}

TEST(Readiness, PollsUntilTheListenerAppears) {
  Listener l(false);  // bound, not listening: connects are refused
  ReadinessProbe p;
  p.port = l.port();
  std::thread later([&] {
    std::this_thread::sleep_for(500ms);
    l.listen();
  });
  const auto began = Steady::now();
  auto r = wait_ready(p, began + 30s);
  const auto waited = Steady::now() - began;
  later.join();
  EXPECT_EQ(r.outcome, Readiness::ready);
  // Every 25 ms: about 20 tries in 500 ms. Fewer than 3 would mean a slow period; more than one per period
  // of the time it really waited (a busy machine stretches it) would mean no pause.
  EXPECT_GE(r.attempts, 3);
  EXPECT_LE(r.attempts, waited / p.period + 2) << "waited " << waited / 1ms << " ms";
}

TEST(Readiness, DeadlinePassesWithTheLastError) {
  Listener l(false);
  ReadinessProbe p;
  p.port = l.port();
  auto began = Steady::now();
  auto r = wait_ready(p, began + 150ms);
  EXPECT_EQ(r.outcome, Readiness::deadline);
  EXPECT_GE(Steady::now() - began, 150ms);
  EXPECT_LT(Steady::now() - began, 10s);  // the deadline ended it (nothing else would: nothing ever listens)
  EXPECT_NE(r.last_error.find("refused"), std::string::npos) << r.last_error;
}

TEST(Readiness, CancellationStopsPollingPromptly) {
  Listener l(false);
  ReadinessProbe p;
  p.port = l.port();
  p.period = 60s;  // a long period shows the wait itself is cut short
  std::stop_source stop;
  std::thread canceller([&] {
    std::this_thread::sleep_for(100ms);
    stop.request_stop();
  });
  auto began = Steady::now();
  auto r = wait_ready(p, began + 120s, stop.get_token());
  canceller.join();
  EXPECT_EQ(r.outcome, Readiness::cancelled);
  EXPECT_LT(Steady::now() - began, 30s);  // not the 60 s period
}

TEST(Readiness, GiveUpPredicateEndsTheWait) {
  Listener l(false);
  ReadinessProbe p;
  p.port = l.port();
  int calls = 0;
  auto r = wait_ready(p, Steady::now() + 10s, {}, [&] { return ++calls > 2; });
  EXPECT_EQ(r.outcome, Readiness::gave_up);
}

TEST(Readiness, HttpGetJudgesTheStatusCode) {
  Listener ok;
  ok.serve("HTTP/1.1 204 No Content\r\n\r\n");
  ReadinessProbe p;
  p.port = ok.port();
  p.http_path = "/healthz";
  std::string error;
  EXPECT_TRUE(probe_once(p, error)) << error;
  Listener bad;
  bad.serve("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
  p.port = bad.port();
  EXPECT_FALSE(probe_once(p, error));
  EXPECT_NE(error.find("503"), std::string::npos) << error;
}

}  // namespace
}  // namespace sluice::runtime
