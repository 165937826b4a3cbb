// Reads that tell the reactor when they emptied the socket (proxy/recv_drained.h), on real loopback TCP
// sockets. This executable counts its own recv(2) calls per descriptor (it defines recv, which the
// operations below and Asio's own reads call), so the tests can say when a read tried the socket:
// after a short read the next read waits for epoll instead; bytes that arrive in between are still
// read; a read that filled its buffer keeps Asio's try-at-once; EOF, a socket's cancel and a
// coroutine's cancellation end a read as Asio's do.
#include "proxy/recv_drained.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <atomic>
#include <optional>
#include <string>

namespace {
std::atomic<int> g_counted_fd{-1};
std::atomic<int> g_recv_calls{0};
}  // namespace

extern "C" ssize_t recv(int fd, void* buf, size_t n, int flags) {
  if (fd == g_counted_fd.load()) ++g_recv_calls;
  return syscall(SYS_recvfrom, fd, buf, n, flags, nullptr, nullptr);
}

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;

class RecvDrainedTest : public ::testing::Test {
 protected:
  RecvDrainedTest() : writer(io), reader(io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    writer.connect(acceptor.local_endpoint());
    acceptor.accept(reader);
    g_counted_fd = reader.native_handle();
    g_recv_calls = 0;
  }
  ~RecvDrainedTest() override { g_counted_fd = -1; }

  struct Read {
    std::optional<error_code> ec;
    std::string bytes;
    std::array<char, 64> buf{};
  };

  // Starts a read of at most `size` bytes into `r` (recv_drained, or Asio's own async_read_some).
  void start(Read& r, std::size_t size, bool drained = true) {
    auto done = [&r](error_code ec, std::size_t n) {
      r.ec = ec;
      r.bytes.assign(r.buf.data(), n);
    };
    if (drained) recv_drained(reader, asio::buffer(r.buf.data(), size), done);
    else reader.async_read_some(asio::buffer(r.buf.data(), size), done);
  }

  // Runs the io_context until `r` completed, for at most two seconds.
  bool finish(Read& r) {
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (!r.ec && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      io.run_one_for(50ms);
    }
    return r.ec.has_value();
  }

  // Runs what is ready now, polling epoll once without waiting.
  void poll() {
    io.restart();
    io.poll();
  }

  void send(std::string_view bytes) { asio::write(writer, asio::buffer(bytes.data(), bytes.size())); }

  asio::io_context io;
  tcp::socket writer, reader;
};

TEST_F(RecvDrainedTest, AfterAShortReadTheNextReadWaitsForEpollInsteadOfTryingTheSocket) {
  // A read that waits (its first try finds nothing), then gets fewer bytes than it had room for.
  Read first;
  start(first, 64);
  EXPECT_EQ(g_recv_calls, 1);
  send("abc");
  ASSERT_TRUE(finish(first));
  EXPECT_FALSE(*first.ec);
  EXPECT_EQ(first.bytes, "abc");
  EXPECT_EQ(g_recv_calls, 2);

  // Nothing sent since: the next read, Asio's own, makes no recv that could only fail with EAGAIN.
  Read second;
  start(second, 64, /*drained=*/false);
  poll();
  EXPECT_FALSE(second.ec);
  EXPECT_EQ(g_recv_calls, 2);

  send("def");
  ASSERT_TRUE(finish(second));
  EXPECT_FALSE(*second.ec);
  EXPECT_EQ(second.bytes, "def");
  EXPECT_EQ(g_recv_calls, 3);
}

TEST_F(RecvDrainedTest, BytesThatArriveBetweenAShortReadAndTheNextReadAreRead) {
  send("one");
  Read first;
  start(first, 64);
  ASSERT_TRUE(finish(first));
  EXPECT_EQ(first.bytes, "one");

  // Sent while no read is pending, and its readiness seen by epoll before the next read starts.
  send("two");
  poll();
  Read second;
  start(second, 64);
  ASSERT_TRUE(finish(second)) << "the bytes that came in between were never read";
  EXPECT_FALSE(*second.ec);
  EXPECT_EQ(second.bytes, "two");

  // Sent while no read is pending, and the next read started before epoll looked: that read does not
  // try the socket (the last one emptied it), and the bytes' readiness, still to be reported, wakes it.
  send("three");
  Read third;
  const int before = g_recv_calls;
  start(third, 64);
  EXPECT_EQ(g_recv_calls, before);
  ASSERT_TRUE(finish(third)) << "the bytes that came in between were never read";
  EXPECT_EQ(third.bytes, "three");
}

TEST_F(RecvDrainedTest, AReadThatFilledItsBufferLeavesTheNextReadToTryTheSocketAtOnce) {
  send("12345678abcd");
  Read first;
  start(first, 8);
  ASSERT_TRUE(finish(first));
  EXPECT_EQ(first.bytes, "12345678");
  const int after_first = g_recv_calls;

  Read second;
  start(second, 64);
  EXPECT_EQ(g_recv_calls, after_first + 1);  // tried at once, as Asio's reads are
  ASSERT_TRUE(finish(second));
  EXPECT_EQ(second.bytes, "abcd");
}

TEST_F(RecvDrainedTest, ThePeersCloseEndsAReadWithEof) {
  Read r;
  start(r, 64);
  poll();
  EXPECT_FALSE(r.ec);
  writer.close();
  ASSERT_TRUE(finish(r));
  EXPECT_EQ(*r.ec, asio::error::eof);
}

TEST_F(RecvDrainedTest, TheSocketsCancelEndsAPendingReadWithOperationAborted) {
  Read r;
  start(r, 64);
  poll();
  EXPECT_FALSE(r.ec);
  reader.cancel();
  ASSERT_TRUE(finish(r));
  EXPECT_EQ(*r.ec, asio::error::operation_aborted);
}

TEST_F(RecvDrainedTest, ACoroutinesCancellationEndsAPendingReadAndTheSocketStillReads) {
  using namespace asio::experimental::awaitable_operators;
  std::optional<std::size_t> winner;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        std::array<char, 16> buf{};
        asio::steady_timer timer(io, 20ms);
        auto r = co_await (recv_drained(reader, asio::buffer(buf), use_nothrow) || timer.async_wait(use_nothrow));
        winner = r.index();
      },
      asio::detached);
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (!winner && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_one_for(50ms);
  }
  ASSERT_TRUE(winner);
  EXPECT_EQ(*winner, 1u);  // the timer; the read was taken off the reactor

  send("later");
  Read r;
  start(r, 64);
  ASSERT_TRUE(finish(r));
  EXPECT_FALSE(*r.ec);
  EXPECT_EQ(r.bytes, "later");
}

}  // namespace
}  // namespace sluice::proxy
