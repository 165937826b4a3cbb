// Bodies moved by the kernel (proxy/io/splice.h), between real loopback TCP connections: a "client" writes
// into the proxy's downstream socket, BodySplice moves the bytes to the proxy's upstream socket, and an
// "app" reads them. The relay moves exactly the body (what follows stays in the socket), waits for bytes
// and for room, and reports an early end, a vanished peer and a cancel as the side's error; a pipe left
// holding bytes is never reused.
#include "proxy/io/splice.h"

#include <gtest/gtest.h>

#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  return s;
}

// One TCP connection on loopback: `near` is the proxy's end, `far` the peer's.
struct Link {
  explicit Link(asio::io_context& io) : near(io), far(io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    far.connect(acceptor.local_endpoint());
    acceptor.accept(near);
  }
  tcp::socket near, far;
};

class SpliceTest : public ::testing::Test {
 protected:
  SpliceTest() : down(io), up(io), pipes(64 * 1024, 4) {
    std::signal(SIGPIPE, SIG_IGN);
    down.far.non_blocking(true);
    up.far.non_blocking(true);
  }

  // Starts one move_some of at most `max` bytes from the downstream to the upstream socket.
  void start_move(BodySplice& splice, std::uint64_t max) {
    result.reset();
    asio::co_spawn(io, [&, max]() -> asio::awaitable<void> {
      result = co_await splice.move_some(down.near, up.near, max);
    }, asio::detached);
  }

  // One turn of everything: the client writes what its connection takes of `to_send`, the loop runs,
  // and (when `app_reads`) the app reads what reached it.
  void step(bool app_reads = true) {
    error_code ec;
    if (sent < to_send.size())
      sent += down.far.write_some(asio::buffer(to_send.data() + sent, to_send.size() - sent), ec);
    io.poll();
    io.restart();
    if (!app_reads) return;
    std::vector<char> chunk(64 * 1024);
    std::size_t n = up.far.read_some(asio::buffer(chunk), ec);
    if (!ec) app_got.append(chunk.data(), n);
  }

  // Turns until the move in progress has ended; false after 10 s.
  bool finish_move() {
    const auto limit = Clock::now() + 10s;
    while (!result && Clock::now() < limit) step();
    return result.has_value();
  }

  // Moves `total` bytes with as many move_some calls as it takes, while the client sends and the app
  // reads; the bytes moved.
  std::uint64_t move_all(BodySplice& splice, std::uint64_t total) {
    std::uint64_t moved = 0;
    while (moved < total) {
      start_move(splice, total - moved);
      if (!finish_move() || result->read_error || result->write_error) break;
      moved += result->moved;
    }
    return moved;
  }

  // Turns until the app has `n` bytes (the last moved ones may still be on their way); false after 10 s.
  bool app_has(std::size_t n) {
    const auto limit = Clock::now() + 10s;
    while (app_got.size() < n && Clock::now() < limit) step();
    return app_got.size() >= n;
  }

  asio::io_context io;
  Link down, up;
  SplicePipes pipes;
  std::optional<SpliceResult> result;
  std::string to_send;  // what the client writes, as its connection takes it
  std::size_t sent = 0;
  std::string app_got;  // what the app read
};

TEST_F(SpliceTest, MovesExactlyTheBodyAndLeavesWhatFollowsInTheSocket) {
  const std::string body = pattern(3 << 20), next = "GET /next HTTP/1.1\r\n\r\n";
  to_send = body + next;
  BodySplice splice(pipes);
  ASSERT_TRUE(splice.ready());
  EXPECT_EQ(move_all(splice, body.size()), body.size());
  ASSERT_TRUE(app_has(body.size()));
  EXPECT_TRUE(app_got == body) << "the app got " << app_got.size() << " bytes, not the body";
  // The next request stays with the downstream socket, whole.
  const auto limit = Clock::now() + 10s;
  while (sent < to_send.size() && Clock::now() < limit) step();
  down.near.non_blocking(false);
  std::string rest(next.size(), '\0');
  asio::read(down.near, asio::buffer(rest));
  EXPECT_EQ(rest, next);
  EXPECT_EQ(down.near.available(), 0u);
}

TEST_F(SpliceTest, WaitsForBytesThatHaveNotArrivedYet) {
  BodySplice splice(pipes);
  ASSERT_TRUE(splice.ready());
  start_move(splice, 1000);
  step();
  EXPECT_FALSE(result) << "it completed with nothing to move";
  to_send = std::string(600, 'x');
  ASSERT_TRUE(finish_move());
  EXPECT_FALSE(result->read_error);
  EXPECT_EQ(result->moved, 600u);
  ASSERT_TRUE(app_has(600));
  EXPECT_EQ(app_got, to_send);
}

TEST_F(SpliceTest, WaitsForRoomWhileTheAppDoesNotRead) {
  up.near.set_option(asio::socket_base::send_buffer_size(16 * 1024));
  up.far.set_option(asio::socket_base::receive_buffer_size(16 * 1024));
  const std::string body = pattern(4 << 20);
  to_send = body;
  BodySplice splice(pipes);
  ASSERT_TRUE(splice.ready());
  // Nobody reads the app's side: moves complete until the connection is full, then one waits. It waits
  // for room, not for input: the client's bytes were there when the loop last ran.
  std::uint64_t moved = 0;
  bool waiting_for_room = false;
  for (int round = 0; round < 1000 && !waiting_for_room; ++round) {
    start_move(splice, body.size() - moved);
    for (int i = 0; i < 20 && !result; ++i) step(false);
    if (!result) {
      const auto limit = Clock::now() + 10s;
      while (down.near.available() == 0 && Clock::now() < limit) step(false);
      step(false);
      waiting_for_room = !result && down.near.available() > 0;
    }
    if (result) {
      ASSERT_FALSE(result->read_error || result->write_error);
      moved += result->moved;
    }
  }
  ASSERT_TRUE(waiting_for_room);
  EXPECT_LT(moved, body.size());
  // Once the app reads, every byte arrives, in order.
  ASSERT_TRUE(finish_move());
  moved += result->moved;
  moved += move_all(splice, body.size() - moved);
  EXPECT_EQ(moved, body.size());
  ASSERT_TRUE(app_has(body.size()));
  EXPECT_TRUE(app_got == body);
}

TEST_F(SpliceTest, ASenderThatEndsEarlyIsAReadErrorAfterWhatItSent) {
  to_send = std::string(100, 'y');
  step();
  down.far.shutdown(tcp::socket::shutdown_send);
  BodySplice splice(pipes);
  ASSERT_TRUE(splice.ready());
  start_move(splice, 1000);
  ASSERT_TRUE(finish_move());
  EXPECT_EQ(result->moved, 100u);
  EXPECT_FALSE(result->read_error);
  start_move(splice, 900);
  ASSERT_TRUE(finish_move());
  EXPECT_EQ(result->read_error, asio::error::eof);
  EXPECT_EQ(result->moved, 0u);
  ASSERT_TRUE(app_has(100));
  EXPECT_EQ(app_got, to_send);
}

TEST_F(SpliceTest, AnAppThatIsGoneIsAWriteErrorAndItsPipeIsNotKept) {
  up.far.set_option(asio::socket_base::linger(true, 0));
  up.far.close();  // a reset
  to_send = pattern(200 * 1024);
  {
    BodySplice splice(pipes);
    ASSERT_TRUE(splice.ready());
    // The first write may still be taken before the reset is seen; the failure comes within a few.
    for (int i = 0; i < 4 && !(result && result->write_error); ++i) {
      start_move(splice, to_send.size());
      const auto limit = Clock::now() + 10s;
      while (!result && Clock::now() < limit) step(false);
    }
    ASSERT_TRUE(result);
    EXPECT_TRUE(result->write_error == asio::error::connection_reset || result->write_error == asio::error::broken_pipe)
        << result->write_error.message();
    EXPECT_FALSE(result->read_error);
  }
  EXPECT_EQ(pipes.idle_count(), 0u) << "a pipe that may hold bytes of another body was kept";
}

TEST_F(SpliceTest, ACancelWakesAWaitingRelay) {
  BodySplice splice(pipes);
  ASSERT_TRUE(splice.ready());
  start_move(splice, 1000);
  step();
  ASSERT_FALSE(result);
  down.near.cancel();
  ASSERT_TRUE(finish_move());
  EXPECT_EQ(result->read_error, asio::error::operation_aborted);
  EXPECT_EQ(result->moved, 0u);
}

TEST_F(SpliceTest, AnEmptiedPipeGoesBackToThePoolAndIsReused) {
  to_send = std::string(10, 'z');
  {
    BodySplice splice(pipes);
    ASSERT_TRUE(splice.ready());
    EXPECT_EQ(move_all(splice, 10), 10u);
  }
  EXPECT_EQ(pipes.idle_count(), 1u);
  {
    BodySplice splice(pipes);
    ASSERT_TRUE(splice.ready());
    EXPECT_EQ(pipes.idle_count(), 0u);
  }
  EXPECT_EQ(pipes.idle_count(), 1u);
}

}  // namespace
}  // namespace sluice::proxy
