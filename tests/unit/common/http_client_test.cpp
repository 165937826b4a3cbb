// The HTTP/1.1 client against real peers on 127.0.0.1: an acceptor in the test answers well, slowly,
// malformed, too much, or closes early, and each test checks what the client makes of it.
#include "common/http_client.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace sluice::net {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kGet = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: test\r\n\r\n";

// A loopback peer that takes one connection, reads the request's head (and `body_bytes` more), hands
// what it read to the test and answers with `answer(socket)`.
class Peer {
 public:
  using Answer = std::function<asio::awaitable<void>(tcp::socket&)>;

  Peer(asio::io_context& io, Answer answer) : acceptor_(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {
    asio::co_spawn(io, serve(std::move(answer)), asio::detached);
  }
  tcp::endpoint endpoint() const { return acceptor_.local_endpoint(); }
  const std::string& received() const { return received_; }
  std::size_t body_bytes = 0;

 private:
  asio::awaitable<void> serve(Answer answer) {
    auto [ec, socket] = co_await acceptor_.async_accept(use_nothrow);
    if (ec) co_return;
    std::string in;  // grown while a read waits: received() shows only what a finished read got
    auto [rec, n] = co_await asio::async_read_until(socket, asio::dynamic_buffer(in), "\r\n\r\n", use_nothrow);
    received_ = in;
    if (rec) co_return;
    if (const auto want = n + body_bytes; received_.size() < want) {
      std::string rest(want - received_.size(), '\0');
      auto [bec, m] = co_await asio::async_read(socket, asio::buffer(rest), use_nothrow);
      received_ += rest.substr(0, m);
    }
    co_await answer(socket);
  }

  tcp::acceptor acceptor_;
  std::string received_;
};

Peer::Answer reply_with(std::string bytes) {
  return [bytes](tcp::socket& socket) -> asio::awaitable<void> {
    co_await asio::async_write(socket, asio::buffer(bytes), use_nothrow);
  };
}

// Holds the connection open, answering nothing, until the test's io_context stops.
asio::awaitable<void> say_nothing(tcp::socket& socket) {
  char byte;
  co_await socket.async_read_some(asio::buffer(&byte, 1), use_nothrow);
}

// Writes `bytes`, then holds the connection open as say_nothing does.
Peer::Answer reply_then_hold(std::string bytes) {
  return [bytes](tcp::socket& socket) -> asio::awaitable<void> {
    co_await asio::async_write(socket, asio::buffer(bytes), use_nothrow);
    co_await say_nothing(socket);
  };
}

// Runs `fetch` (the client) to its end against the peers on `io`, for at most 5 s.
HttpReply run(asio::io_context& io, asio::awaitable<HttpReply> fetch) {
  std::optional<HttpReply> reply;
  asio::co_spawn(io, std::move(fetch), [&](const std::exception_ptr&, HttpReply r) {
    reply = std::move(r);
    io.stop();
  });
  io.run_for(5s);
  EXPECT_TRUE(reply) << "the exchange did not end within 5 s";
  return reply.value_or(HttpReply{});
}

TEST(HttpClient, WritesTheRequestBytesAsGivenAndReadsTheAnswer) {
  asio::io_context io;
  Peer peer(io, reply_with("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"));
  peer.body_bytes = 4;
  const std::string head = "POST /v1/traces HTTP/1.1\r\nhost: x\r\nContent-Length: 4\r\nX-Odd-Case: 1\r\n\r\n";
  auto reply = run(io, http_fetch(peer.endpoint(), head, "body", {}, Clock::now() + 5s));
  ASSERT_TRUE(reply.ok()) << reply.error.message();
  EXPECT_EQ(peer.received(), head + "body");  // byte for byte: field order and case untouched
  EXPECT_EQ(reply.response.result_int(), 200U);
  EXPECT_EQ(reply.response[http::field::content_type], "text/plain");
  EXPECT_EQ(reply.response.body(), "hello");
  EXPECT_TRUE(reply.reusable);
}

TEST(HttpClient, AnAnswerThatClosesTheConnectionIsNotReusable) {
  asio::io_context io;
  Peer peer(io, reply_with("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"));
  auto reply = run(io, http_fetch(peer.endpoint(), kGet, {}, {}, Clock::now() + 5s));
  ASSERT_TRUE(reply.ok()) << reply.error.message();
  EXPECT_EQ(reply.response.result_int(), 503U);
  EXPECT_FALSE(reply.reusable);
}

TEST(HttpClient, TheHeadAloneIsEnoughWhenTheBodyIsNotWanted) {
  asio::io_context io;
  // Announces a body it never sends: reading it would wait for the deadline.
  Peer peer(io, reply_then_hold("HTTP/1.1 202 Accepted\r\nContent-Length: 100\r\n\r\n"));
  const auto began = Clock::now();
  auto reply = run(io, http_fetch(peer.endpoint(), kGet, {}, {.read_body = false}, Clock::now() + 3s));
  ASSERT_TRUE(reply.ok()) << reply.error.message();
  EXPECT_EQ(reply.response.result_int(), 202U);
  EXPECT_FALSE(reply.reusable);  // the body is still on the connection
  EXPECT_LT(Clock::now() - began, 2s);
}

TEST(HttpClient, APeerThatNeverAnswersEndsAtTheDeadlineAsATimeoutWhileReading) {
  asio::io_context io;
  Peer peer(io, say_nothing);
  const auto began = Clock::now();
  auto reply = run(io, http_fetch(peer.endpoint(), kGet, {}, {}, began + 200ms));
  EXPECT_EQ(reply.stage, HttpStage::read);
  EXPECT_TRUE(reply.timed_out()) << reply.error.message();
  EXPECT_GE(Clock::now() - began, 200ms);
  EXPECT_LT(Clock::now() - began, 3s);
}

TEST(HttpClient, ABodyThatTricklesPastTheDeadlineTimesOut) {
  asio::io_context io;
  Peer peer(io, reply_then_hold("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab"));
  auto reply = run(io, http_fetch(peer.endpoint(), kGet, {}, {}, Clock::now() + 200ms));
  EXPECT_EQ(reply.stage, HttpStage::read);
  EXPECT_TRUE(reply.timed_out()) << reply.error.message();
}

TEST(HttpClient, AConnectionClosedBeforeTheAnswerIsClosedEarly) {
  asio::io_context io;
  Peer peer(io, [](tcp::socket& socket) -> asio::awaitable<void> {
    socket.close();
    co_return;
  });
  auto reply = run(io, http_fetch(peer.endpoint(), kGet, {}, {}, Clock::now() + 5s));
  EXPECT_FALSE(reply.ok());
  EXPECT_TRUE(reply.closed_early()) << reply.error.message();
  EXPECT_FALSE(reply.malformed());
}

TEST(HttpClient, AConnectionClosedInsideTheBodyIsClosedEarly) {
  asio::io_context io;
  Peer peer(io, reply_with("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"));  // then the peer closes
  auto reply = run(io, http_fetch(peer.endpoint(), kGet, {}, {}, Clock::now() + 5s));
  EXPECT_TRUE(reply.closed_early()) << reply.error.message();
}

TEST(HttpClient, BytesThatAreNotAnHttpResponseAreMalformed) {
  asio::io_context io;
  Peer peer(io, reply_with("SSH-2.0-OpenSSH_9.6\r\n\r\n"));
  auto reply = run(io, http_fetch(peer.endpoint(), kGet, {}, {}, Clock::now() + 5s));
  EXPECT_EQ(reply.stage, HttpStage::read);
  EXPECT_TRUE(reply.malformed()) << reply.error.message();
  EXPECT_FALSE(reply.closed_early());
}

TEST(HttpClient, AHeadOverTheLimitIsRefused) {
  asio::io_context io;
  Peer peer(io, reply_with("HTTP/1.1 200 OK\r\nX-Filler: " + std::string(2000, 'a') + "\r\nContent-Length: 0\r\n\r\n"));
  auto reply = run(io, http_fetch(peer.endpoint(), kGet, {}, {.head_bytes = 1024}, Clock::now() + 5s));
  EXPECT_EQ(reply.error, http::error::header_limit) << reply.error.message();
  EXPECT_TRUE(reply.malformed());
}

TEST(HttpClient, ABodyOverTheLimitIsRefused) {
  asio::io_context io;
  Peer peer(io, reply_with("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'b')));
  auto reply = run(io, http_fetch(peer.endpoint(), kGet, {}, {.body_bytes = 64}, Clock::now() + 5s));
  EXPECT_EQ(reply.stage, HttpStage::read);
  EXPECT_EQ(reply.error, http::error::body_limit) << reply.error.message();
}

TEST(HttpClient, ARefusedConnectionFailsAtConnect) {
  asio::io_context io;
  tcp::endpoint closed;
  {
    tcp::acceptor bound(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    closed = bound.local_endpoint();
  }  // nothing listens there any more
  auto reply = run(io, http_fetch(closed, kGet, {}, {}, Clock::now() + 5s));
  EXPECT_EQ(reply.stage, HttpStage::connect);
  EXPECT_EQ(reply.error, asio::error::connection_refused) << reply.error.message();
}

TEST(HttpClient, AnEmptyHeadAsksForTheConnectionOnly) {
  asio::io_context io;
  Peer peer(io, say_nothing);
  auto reply = run(io, http_fetch(peer.endpoint(), {}, {}, {}, Clock::now() + 5s));
  EXPECT_TRUE(reply.ok()) << reply.error.message();
  io.restart();
  io.run_for(5s);  // the peer's read ends at the client's close
  EXPECT_EQ(peer.received(), "");  // no request was written
}

TEST(HttpClient, TheBlockingFormAnswersOnTheCallingThread) {
  asio::io_context peers;
  Peer peer(peers, reply_with("HTTP/1.1 302 Found\r\nLocation: /\r\nContent-Length: 0\r\n\r\n"));
  std::thread serving([&] { peers.run_for(5s); });
  auto reply = http_fetch_blocking(peer.endpoint(), kGet, {}, {}, Clock::now() + 5s);
  serving.join();  // the peer's one connection is served: its coroutine, and so run_for, ended
  ASSERT_TRUE(reply.ok()) << reply.error.message();
  EXPECT_EQ(reply.response.result_int(), 302U);
  EXPECT_EQ(peer.received(), kGet);
}

TEST(HttpClient, TheBlockingFormEndsAtTheDeadline) {
  asio::io_context peers;
  Peer peer(peers, say_nothing);
  std::thread serving([&] { peers.run_for(5s); });
  const auto began = Clock::now();
  auto reply = http_fetch_blocking(peer.endpoint(), kGet, {}, {}, began + 200ms);
  const auto took = Clock::now() - began;
  peers.stop();
  serving.join();
  EXPECT_TRUE(reply.timed_out()) << reply.error.message();
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 3s);
}

TEST(HttpClient, HostFieldBracketsAnIpv6Literal) {
  EXPECT_EQ(host_field("127.0.0.1", 8080), "127.0.0.1:8080");
  EXPECT_EQ(host_field("::1", 9090), "[::1]:9090");
  EXPECT_EQ(host_field("collector.example", 4318), "collector.example:4318");
}

}  // namespace
}  // namespace sluice::net
