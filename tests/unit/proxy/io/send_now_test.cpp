// Writes made at once (proxy/io/send_now.h), on real loopback TCP sockets: pieces leave whole and in order;
// a send buffer too small for the write takes part of it and write_rest() sends the rest once the peer
// reads; a full socket takes nothing and that is not an error; a peer that reset the connection is one.
#include "proxy/io/send_now.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>

#include <array>
#include <string>
#include <vector>

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;

class SendNowTest : public ::testing::Test {
 protected:
  SendNowTest() : writer(io), reader(io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    writer.connect(acceptor.local_endpoint());
    acceptor.accept(reader);
  }

  // Small kernel buffers on both sides, so that a few hundred KiB fill the connection.
  void shrink_buffers() {
    writer.set_option(asio::socket_base::send_buffer_size(16 * 1024));
    reader.set_option(asio::socket_base::receive_buffer_size(16 * 1024));
  }

  // Reads exactly `n` bytes from the reader (blocking, on this thread).
  std::string read_exactly(std::size_t n) {
    std::string got(n, '\0');
    asio::read(reader, asio::buffer(got));
    return got;
  }

  asio::io_context io;
  tcp::socket writer, reader;
};

TEST_F(SendNowTest, PiecesLeaveWholeAndInOrder) {
  const std::string a = "GET / HTTP/1.1\r\n", b = "Host: x\r\n\r\n", c = "body";
  const std::array<asio::const_buffer, 4> pieces{asio::buffer(a), asio::const_buffer{}, asio::buffer(b),
                                                 asio::buffer(c)};
  error_code ec;
  EXPECT_EQ(send_now(writer, pieces, ec), a.size() + b.size() + c.size());
  EXPECT_FALSE(ec);
  EXPECT_EQ(read_exactly(a.size() + b.size() + c.size()), a + b + c);
}

TEST_F(SendNowTest, AWriteLargerThanTheSocketTakesPartAndWriteRestSendsTheRestOnceThePeerReads) {
  shrink_buffers();
  std::string big(4 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  const std::array<asio::const_buffer, 1> pieces{asio::buffer(big)};
  error_code ec;
  const std::size_t sent = send_now(writer, pieces, ec);
  ASSERT_FALSE(ec);
  EXPECT_GT(sent, 0u);
  EXPECT_LT(sent, big.size());

  bool done = false;
  error_code rest_ec;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    rest_ec = co_await write_rest(writer, pieces, sent);
    done = true;
  }, asio::detached);
  // The rest waits for room: the peer has read nothing yet.
  io.poll();
  EXPECT_FALSE(done);

  std::string got;
  std::vector<char> chunk(64 * 1024);
  reader.non_blocking(true);
  const auto limit = Clock::now() + 10s;
  while (got.size() < big.size() && Clock::now() < limit) {
    error_code rec;
    const std::size_t n = reader.read_some(asio::buffer(chunk), rec);
    if (!rec) got.append(chunk.data(), n);
    else io.run_one_for(1ms);  // nothing to read yet: let write_rest go on
  }
  while (!done && Clock::now() < limit) io.run_one_for(10ms);
  EXPECT_TRUE(done);
  EXPECT_FALSE(rest_ec);
  EXPECT_EQ(got.size(), big.size());
  EXPECT_TRUE(got == big);
}

TEST_F(SendNowTest, AFullSocketTakesNothingAndThatIsNotAnError) {
  shrink_buffers();
  const std::string block(64 * 1024, 'x');
  const std::array<asio::const_buffer, 1> pieces{asio::buffer(block)};
  error_code ec;
  std::size_t total = 0;
  // Fill it: each call takes what fits; the kernel's buffers are far below this bound.
  for (int i = 0; i < 1000; ++i) {
    const std::size_t n = send_now(writer, pieces, ec);
    ASSERT_FALSE(ec);
    if (n == 0) break;
    total += n;
  }
  EXPECT_GT(total, 0u);
  EXPECT_EQ(send_now(writer, pieces, ec), 0u);
  EXPECT_FALSE(ec);
}

TEST_F(SendNowTest, APeerThatResetTheConnectionIsAnError) {
  reader.set_option(asio::socket_base::linger(true, 0));  // close with RST
  reader.close();
  const std::string bytes = "after the reset";
  const std::array<asio::const_buffer, 1> pieces{asio::buffer(bytes)};
  error_code ec;
  // The first send may still be taken (the RST is on its way); a later one sees the reset.
  const auto limit = Clock::now() + 5s;
  while (!ec && Clock::now() < limit) send_now(writer, pieces, ec);
  EXPECT_TRUE(ec == asio::error::connection_reset || ec == asio::error::broken_pipe) << ec.message();
}

}  // namespace
}  // namespace sluice::proxy
