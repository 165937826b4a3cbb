// I/O helpers shared by the routes: request body pieces, whole writes, chunk framing.
#include "demo/exchange.h"

#include <array>
#include <charconv>

namespace sluice::demo {

Stats& stats() {
  static Stats s;
  return s;
}

asio::awaitable<Piece> read_body_piece(Exchange& ex, char* dst, std::size_t capacity) {
  auto& body = ex.parser.get().body();
  // read_some, not read: a piece is handed on as soon as it arrives instead of waiting for a full
  // buffer, which is what makes /echo stream. A parse step may yield no body bytes (a chunk
  // header).
  while (!ex.parser.is_done()) {
    body.data = dst;
    body.size = capacity;
    auto [ec, n] = co_await http::async_read_some(ex.socket, ex.buffer, ex.parser, use_nothrow);
    (void)n;
    std::size_t got = capacity - body.size;
    body.data = nullptr;
    body.size = 0;
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return Piece{ec, got};
    if (got > 0) co_return Piece{{}, got};
  }
  co_return Piece{};
}

asio::awaitable<error_code> drain_body(Exchange& ex) {
  char* scratch = ex.piece_buffer();
  for (;;) {
    Piece p = co_await read_body_piece(ex, scratch, kPieceBytes);
    if (p.ec || p.bytes == 0) co_return p.ec;
  }
}

asio::awaitable<error_code> write_all(Exchange& ex, std::string_view bytes) {
  auto [ec, n] = co_await asio::async_write(ex.socket, asio::buffer(bytes), use_nothrow);
  (void)n;
  co_return ec;
}

asio::awaitable<error_code> write_head_and_body(Exchange& ex, std::string_view body) {
  std::array<asio::const_buffer, 2> bufs{asio::buffer(ex.head), asio::buffer(body)};
  auto [ec, n] = co_await asio::async_write(ex.socket, bufs, use_nothrow);
  (void)n;
  co_return ec;
}

asio::awaitable<error_code> write_chunk(Exchange& ex, std::string_view data) {
  if (data.empty()) co_return error_code{};
  char size_line[24];
  auto [end, tc] = std::to_chars(size_line, size_line + 20, data.size(), 16);
  (void)tc;
  *end++ = '\r';
  *end++ = '\n';
  std::array<asio::const_buffer, 3> bufs{
      asio::buffer(size_line, static_cast<std::size_t>(end - size_line)), asio::buffer(data),
      asio::buffer("\r\n", 2)};
  auto [ec, n] = co_await asio::async_write(ex.socket, bufs, use_nothrow);
  (void)n;
  co_return ec;
}

asio::awaitable<error_code> write_last_chunk(Exchange& ex, std::string_view trailer_lines) {
  std::array<asio::const_buffer, 3> bufs{asio::buffer("0\r\n", 3), asio::buffer(trailer_lines),
                                         asio::buffer("\r\n", 2)};
  auto [ec, n] = co_await asio::async_write(ex.socket, bufs, use_nothrow);
  (void)n;
  co_return ec;
}

}  // namespace sluice::demo
