// Bad and oversized input gets a clear 4xx and never reaches the app, and limits are configurable.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <chrono>
#include <optional>

#include "harness.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

class Limits : public ::testing::Test {
 protected:
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .flags = {"--max-header-bytes=4096", "--max-header-count=20", "--max-body-bytes=100000",
                "--max-connections=3"}}};

  // The app's own count of requests, not counting the /stats request asking for it.
  std::string app_stats() { return curl({"http://127.0.0.1:" + std::to_string(backend.port) + "/stats"}).out; }
  static constexpr const char* kNoRequestReachedTheApp = "requests=1 ";
};

TEST_F(Limits, OversizedHeaderIs431) {
  auto out = raw_exchange(sidecar.port, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(5000, 'a') + "\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 431 ", 0), 0u) << out;
  EXPECT_NE(out.find("431 Request Header Fields Too Large"), std::string::npos) << out;
}

TEST_F(Limits, TooManyHeaderFieldsIs431) {
  std::string req = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 25; ++i) req += "X-H" + std::to_string(i) + ": v\r\n";
  auto out = raw_exchange(sidecar.port, req + "\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 431 ", 0), 0u) << out;
  EXPECT_NE(out.find("too many header fields"), std::string::npos) << out;
}

// queue-proxy (Go's net/http) takes any number of fields and any target length within a 1 MiB head (plus
// 4 KiB): so does sluice by default. One field's value is held to 65533 bytes (Beast's heads).
TEST(DefaultLimits, AcceptWhatQueueProxyAccepts) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port}};
  std::string req = "GET /?q=" + std::string(20000, 'u') + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  for (int i = 0; i < 150; ++i) req += "X-H" + std::to_string(i) + ": v\r\n";
  for (int i = 0; i < 14; ++i) req += "X-Big" + std::to_string(i) + ": " + std::string(60000, 'b') + "\r\n";
  auto out = raw_exchange(sidecar.port, req + "\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 200 ", 0), 0u) << out.substr(0, 200);

  std::string over = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 18; ++i) over += "X-Big" + std::to_string(i) + ": " + std::string(60000, 'b') + "\r\n";
  out = raw_exchange(sidecar.port, over + "\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 431 ", 0), 0u) << out.substr(0, 200);

  out = raw_exchange(sidecar.port, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(70000, 'b') + "\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 431 ", 0), 0u) << out.substr(0, 200);
  EXPECT_NE(out.find("a header field longer than 65533 bytes"), std::string::npos) << out.substr(0, 200);
}

TEST_F(Limits, DeclaredBodyOverTheLimitIs413WithoutReachingTheApp) {
  auto out = raw_exchange(sidecar.port, "POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 413 ", 0), 0u) << out;
  EXPECT_NE(app_stats().find(kNoRequestReachedTheApp), std::string::npos);
}

TEST_F(Limits, ChunkedBodyOverTheLimitIs413) {
  auto r = run_command({"sh", "-c", "head -c 300000 /dev/zero | curl -sS --max-time 10 -w ' %{http_code}' -T - -X POST " +
                                        sidecar.url("/sink")});
  EXPECT_NE(r.out.find("413"), std::string::npos) << r.out << r.err;
}

TEST_F(Limits, BodyWithinTheLimitPasses) {
  auto r = run_command({"sh", "-c", "head -c 99000 /dev/zero | curl -sS --max-time 10 --data-binary @- " +
                                        sidecar.url("/sink")});
  EXPECT_EQ(r.out, "99000");
}

TEST_F(Limits, MalformedRequestsAre400) {
  for (std::string bad : {std::string("GET / HTTP/1.1x\r\nHost: x\r\n\r\n"),
                          std::string("GET / HTTP/1.1\r\nHost: x\r\nBad Header: v\r\n\r\n"),
                          std::string("GET / HTTP/1.1\r\n\r\n"),  // HTTP/1.1 without Host
                          std::string("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello"),
                          std::string("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")}) {
    auto out = raw_exchange(sidecar.port, bad);
    EXPECT_EQ(out.rfind("HTTP/1.1 400 ", 0), 0u) << "request: " << bad << "\nanswer: " << out;
  }
  EXPECT_NE(app_stats().find(kNoRequestReachedTheApp), std::string::npos);
}

// A first line that names no HTTP/1.x version cannot be HTTP/1.x: on the port that speaks both, it is a
// failed HTTP/2 preface, as is "PRI * HTTP/2.0" followed by anything but the rest of the preface. Both
// get the server preface (an empty SETTINGS frame) and GOAWAY PROTOCOL_ERROR (RFC 9113 §3.4).
TEST_F(Limits, NotHttp1AndNotThePrefaceIsGoawayProtocolError) {
  const std::string settings("\0\0\0\x04\0\0\0\0\0", 9);
  for (std::string bad : {std::string("INVALID CONNECTION PREFACE\r\n\r\n"), std::string("THIS IS NOT HTTP\r\n\r\n"),
                          std::string("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")}) {
    auto out = raw_exchange(sidecar.port, bad);
    ASSERT_EQ(out.size(), 9u + 17u) << "request: " << bad << "\nanswer: " << out;
    EXPECT_EQ(out.substr(0, 9), settings) << bad;
    EXPECT_EQ(out[12], 0x07) << bad << ": the second frame is not a GOAWAY";
    EXPECT_EQ(out.substr(22, 4), std::string("\0\0\0\x01", 4)) << bad << ": not PROTOCOL_ERROR";
  }
  EXPECT_NE(app_stats().find(kNoRequestReachedTheApp), std::string::npos);
}

TEST_F(Limits, ContentLengthWithChunkedIsRejectedOrReframed) {
  // Request smuggling guard: the app must never see both framings.
  auto out = raw_exchange(sidecar.port,
                          "POST /headers HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n"
                          "Connection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  bool rejected = out.rfind("HTTP/1.1 400 ", 0) == 0;
  bool single_framing = out.find("Content-Length: 4") == std::string::npos;
  EXPECT_TRUE(rejected || single_framing) << out;
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// True when the peer closed the connection within the timeout.
bool closed_by_peer(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, 0) == 0;
}

TEST_F(Limits, ConnectionsBeyondTheLimitAreClosed) {
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(connect_to(sidecar.port));
  // Let sluice accept the three before the fourth arrives.
  for (int fd : held) {
    std::string req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    char buf[512];
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 5000), 1);
    ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);
  }
  int extra = connect_to(sidecar.port);
  EXPECT_TRUE(closed_by_peer(extra, 5000));
  ::close(extra);
  // Once one of the three leaves, a new connection is served again.
  ::close(held.back());
  held.pop_back();
  bool served = false;
  for (int attempt = 0; attempt < 50 && !served; ++attempt) {
    auto out = raw_exchange(sidecar.port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                            std::chrono::seconds(2));
    served = out.find("Hello from sluice-demo-app") != std::string::npos;
  }
  EXPECT_TRUE(served);
  for (int fd : held) ::close(fd);
}

// Between requests a keep-alive connection rests (h1::Link: no coroutine, no buffer): the next request is
// served, and when none comes the header timeout closes the connection, as it does for a waiting one.
TEST(KeepAlive, AnIdleConnectionServesItsNextRequestsAndClosesAtTheHeaderTimeout) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_CLIENT_HEADER_TIMEOUT_SECONDS", "1"}}}};
  RawClient client(sidecar.port);
  const std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string hello = "Hello from sluice-demo-app";
  for (std::size_t i = 1; i <= 3; ++i) {
    client.send(get);
    const auto got = client.read_until(hello, 10s, i);
    ASSERT_EQ(count_of(got, hello), i) << got;
  }
  const auto idle_since = std::chrono::steady_clock::now();
  client.read_until("no such bytes", 10s);  // returns when sluice closes the connection
  const auto idle = std::chrono::steady_clock::now() - idle_since;
  EXPECT_GE(idle, 900ms) << "closed before the header timeout";
  EXPECT_LT(idle, 9s) << "not closed at the header timeout";
}

TEST(KeepAlive, AnIdleConnectionIsClosedAtShutdownAndTheProcessExitsZero) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port}};
  RawClient client(sidecar.port);
  client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_NE(client.read_until("Hello from sluice-demo-app").find("Hello from sluice-demo-app"), std::string::npos);
  const auto start = std::chrono::steady_clock::now();
  sidecar.process->signal(SIGTERM);
  client.read_until("no such bytes", 20s);  // returns when sluice closes the connection
  EXPECT_LT(std::chrono::steady_clock::now() - start, 19s) << "the idle connection was not closed";
  EXPECT_EQ(exit_status(*sidecar.process, 20s), "exited 0");
}

// A client that is still sending when sluice answers early (413 here) must get to read the answer: sluice
// closes lingering, reading and dropping what still comes, as nginx does, since a close on unread bytes
// sends a RST that can destroy the answer in the client's kernel. The linger ends after SLUICE_LINGER_MS
// or SLUICE_LINGER_BYTES, whichever comes first: the client's writes then fail.
struct LingerOutcome {
  std::string answer;                          // what the client read
  std::chrono::milliseconds writes_failed_after{-1};  // since the answer arrived; -1: they never failed
};

LingerOutcome send_past_a_413(int port) {
  using namespace std::chrono;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  LingerOutcome out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return out;
  const std::string head = "POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n";
  ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  // Send and read at once, without blocking on either, for 20 s at most.
  const std::string chunk(64 * 1024, 'x');
  std::optional<steady_clock::time_point> answered;
  const auto deadline = steady_clock::now() + 20s;
  while (steady_clock::now() < deadline) {
    pollfd p{.fd = fd, .events = POLLIN | POLLOUT, .revents = 0};
    ::poll(&p, 1, 100);
    if (p.revents & POLLIN) {
      char buf[4096];
      const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) out.answer.append(buf, static_cast<std::size_t>(n));
      if (!answered && out.answer.find("\r\n\r\n") != std::string::npos) answered = steady_clock::now();
    }
    if (p.revents & (POLLOUT | POLLERR | POLLHUP)) {
      if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN &&
          errno != EWOULDBLOCK) {
        if (answered) out.writes_failed_after = duration_cast<milliseconds>(steady_clock::now() - *answered);
        break;
      }
    }
  }
  ::close(fd);
  return out;
}

TEST(LingeringClose, AClientStillSendingReadsTheWholeAnswerAndTheLingerEndsAtItsTime) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"SLUICE_MAX_BODY_BYTES", "1000"},
                                         {"SLUICE_LINGER_MS", "500"},
                                         {"SLUICE_LINGER_BYTES", "100000000000"}}}};
  const auto out = send_past_a_413(sidecar.port);
  EXPECT_EQ(out.answer.rfind("HTTP/1.1 413 ", 0), 0u) << out.answer.substr(0, 200);
  EXPECT_NE(out.answer.find("request body too large"), std::string::npos) << out.answer.substr(0, 300);
  ASSERT_GE(out.writes_failed_after.count(), 0) << "the client's writes never failed: sluice never closed";
  // Lingering for 500 ms after it answered, so not before (the answer went out just before the linger).
  EXPECT_GE(out.writes_failed_after.count(), 400);
}

TEST(LingeringClose, TheLingerEndsAfterItsBytes) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"SLUICE_MAX_BODY_BYTES", "1000"},
                                         {"SLUICE_LINGER_MS", "600000"},
                                         {"SLUICE_LINGER_BYTES", "1048576"}}}};
  const auto out = send_past_a_413(sidecar.port);
  EXPECT_EQ(out.answer.rfind("HTTP/1.1 413 ", 0), 0u) << out.answer.substr(0, 200);
  // A 10-minute linger would outlast the client's 20 s: its writes failing shows the 1 MiB ended it.
  EXPECT_GE(out.writes_failed_after.count(), 0) << "sluice was still reading after 20 s";
}

}  // namespace
}  // namespace sluice::test
