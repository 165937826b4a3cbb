// Writes that finish without a trip through the event loop. A small write to a TCP socket almost always
// fits its send buffer, yet an asynchronous write still queues its completion and resumes the writing
// coroutine from the scheduler later: an operation allocated, a handler posted, the frame resumed cold.
// send_now() makes the same one sendmsg(2) at once; write_rest() is the asynchronous write of what the
// socket did not take. A caller writes:
//   error_code ec;
//   if (std::size_t sent = send_now(s, b, ec); !ec && sent < asio::buffer_size(b)) ec = co_await write_rest(s, b, sent);
// read_now() is the same for reading: what the socket has, never waiting; after its EAGAIN the caller
// waits with wait_after_eagain() (edge_wait.h), holding no buffer meanwhile.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <cstddef>

#include <boost/beast/core/buffers_suffix.hpp>

#include "proxy/io/asio.h"

namespace sluice::proxy {

// Sends as much of `buffers` as `socket` takes now, never waiting: the count of bytes sent, 0 when its
// send buffer is full (or the call was interrupted), or 0 with `ec` set when the connection failed.
template <class ConstBuffers>
std::size_t send_now(tcp::socket& socket, const ConstBuffers& buffers, error_code& ec) {
  constexpr std::size_t kMaxPieces = 64;  // the rest goes with write_rest()
  std::array<iovec, kMaxPieces> iov;
  std::size_t pieces = 0;
  for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it) {
    const asio::const_buffer b(*it);
    if (b.size() == 0) continue;
    if (pieces == kMaxPieces) break;
    iov[pieces++] = iovec{const_cast<void*>(b.data()), b.size()};
  }
  ec = {};
  if (pieces == 0) return 0;
  msghdr msg{};
  msg.msg_iov = iov.data();
  msg.msg_iovlen = pieces;
  const ssize_t n = ::sendmsg(socket.native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n >= 0) return static_cast<std::size_t>(n);
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ec.assign(errno, asio::error::get_system_category());
  return 0;
}

// Reads what `socket` has now, never waiting: the count of bytes (more than 0), or 0 with `ec` set:
// asio::error::would_block when it had nothing (then wait_after_eagain() may wait for more), asio::error::eof
// when the peer closed, or the failure.
inline std::size_t read_now(tcp::socket& socket, asio::mutable_buffer b, error_code& ec) {
  ec = {};
  while (true) {
    const ssize_t n = ::recv(socket.native_handle(), b.data(), b.size(), MSG_DONTWAIT);
    if (n > 0) return static_cast<std::size_t>(n);
    if (n == 0) ec = asio::error::eof;
    else if (errno == EINTR) continue;
    else if (errno == EAGAIN || errno == EWOULDBLOCK) ec = asio::error::would_block;
    else ec.assign(errno, asio::error::get_system_category());
    return 0;
  }
}

// A reader that finds bytes read after read after read (read_now()) lets the worker's other connections
// run after this many in a row (co_await asio::post), as a wait would have.
inline constexpr unsigned kReadsBeforeYield = 4;

// The rest of a write send_now() began: `buffers` past the first `sent` bytes (they stay valid until it
// returns), once the stream has room.
template <class Stream, class ConstBuffers>
asio::awaitable<error_code> write_rest(Stream& stream, const ConstBuffers& buffers, std::size_t sent) {
  beast::buffers_suffix<ConstBuffers> rest(buffers);
  rest.consume(sent);
  auto [ec, n] = co_await asio::async_write(stream, rest, use_nothrow);
  (void)n;
  co_return ec;
}

}  // namespace sluice::proxy
