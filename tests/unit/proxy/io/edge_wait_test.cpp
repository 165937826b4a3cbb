// Waits after EAGAIN (proxy/io/edge_wait.h), on real loopback TCP sockets: a wait begun after a read found
// the socket empty ends when bytes arrive, or when the peer closes, and not before; one begun after a
// write found the socket full ends when the peer reads; a cancel (the socket's, or the operation's own
// through its cancellation slot) ends it with operation_aborted, and the socket works afterwards.
#include "proxy/io/edge_wait.h"

#include <sys/socket.h>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;

class EdgeWaitTest : public ::testing::Test {
 protected:
  EdgeWaitTest() : near(io), far(io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    far.connect(acceptor.local_endpoint());
    acceptor.accept(near);
    near.non_blocking(true);
  }

  // A read on the near end that finds it empty, as OpenSSL's or a splice's would.
  void read_until_eagain() {
    std::vector<char> chunk(64 * 1024);
    while (true) {
      const ssize_t n = ::recv(near.native_handle(), chunk.data(), chunk.size(), MSG_DONTWAIT);
      if (n <= 0) break;
    }
    ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
  }

  void start_wait(tcp::socket::wait_type what) {
    result.reset();
    asio::co_spawn(io, [this, what]() -> asio::awaitable<void> {
      auto [ec] = co_await wait_after_eagain(near, what, use_nothrow);
      result = ec;
    }, asio::detached);
  }

  // Runs the loop until the wait ended, or for a while; whether it ended.
  bool ended_within(std::chrono::milliseconds limit) {
    const auto until = Clock::now() + limit;
    while (!result && Clock::now() < until) {
      io.run_for(5ms);
      io.restart();
    }
    return result.has_value();
  }

  asio::io_context io;
  tcp::socket near, far;
  std::optional<error_code> result;
};

TEST_F(EdgeWaitTest, AReadWaitEndsWhenBytesArriveAndNotBefore) {
  asio::write(far, asio::buffer(std::string("early")));  // read and gone before the wait
  read_until_eagain();
  start_wait(tcp::socket::wait_read);
  EXPECT_FALSE(ended_within(100ms)) << "it ended with nothing to read";
  asio::write(far, asio::buffer(std::string("late")));
  ASSERT_TRUE(ended_within(5s));
  EXPECT_FALSE(*result) << result->message();
  EXPECT_EQ(near.available(), 4u);
}

TEST_F(EdgeWaitTest, AReadWaitEndsWhenThePeerCloses) {
  read_until_eagain();
  start_wait(tcp::socket::wait_read);
  EXPECT_FALSE(ended_within(50ms));
  far.shutdown(tcp::socket::shutdown_send);
  ASSERT_TRUE(ended_within(5s));
  char c;
  EXPECT_EQ(::recv(near.native_handle(), &c, 1, MSG_DONTWAIT), 0);  // the end of the stream is there
}

TEST_F(EdgeWaitTest, AWriteWaitEndsWhenThePeerMakesRoom) {
  near.set_option(asio::socket_base::send_buffer_size(16 * 1024));
  far.set_option(asio::socket_base::receive_buffer_size(16 * 1024));
  const std::string chunk(64 * 1024, 'w');
  while (::send(near.native_handle(), chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
  }
  ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
  start_wait(tcp::socket::wait_write);
  EXPECT_FALSE(ended_within(100ms)) << "it ended while the socket was full";
  std::vector<char> sink(1 << 20);
  far.non_blocking(true);
  const auto limit = Clock::now() + 5s;
  while (!result && Clock::now() < limit) {
    error_code ec;
    far.read_some(asio::buffer(sink), ec);
    ended_within(5ms);
  }
  ASSERT_TRUE(result);
  EXPECT_FALSE(*result);
  EXPECT_GT(::send(near.native_handle(), "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL), 0);
}

TEST_F(EdgeWaitTest, TheSocketsCancelEndsAWaitWithOperationAborted) {
  read_until_eagain();
  start_wait(tcp::socket::wait_read);
  EXPECT_FALSE(ended_within(20ms));
  near.cancel();
  ASSERT_TRUE(ended_within(5s));
  EXPECT_EQ(*result, asio::error::operation_aborted);
}

TEST_F(EdgeWaitTest, TheOperationsOwnCancellationEndsItAndTheSocketStillWorks) {
  using namespace asio::experimental::awaitable_operators;
  read_until_eagain();
  bool timer_won = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    asio::steady_timer timer(io, 30ms);
    auto r = co_await (wait_after_eagain(near, tcp::socket::wait_read, use_nothrow) || timer.async_wait(use_nothrow));
    timer_won = r.index() == 1;
    result = error_code{};
  }, asio::detached);
  ASSERT_TRUE(ended_within(5s));
  EXPECT_TRUE(timer_won);
  // The cancelled wait left the reactor's queue: a new one works.
  start_wait(tcp::socket::wait_read);
  asio::write(far, asio::buffer(std::string("again")));
  ASSERT_TRUE(ended_within(5s));
  EXPECT_FALSE(*result);
}

}  // namespace
}  // namespace sluice::proxy
