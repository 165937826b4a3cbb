// One request/response on a demo connection: the parsed head, the connection's buffers, and the I/O
// helpers every route uses (stream the request body in pieces, write heads, bodies and chunks).
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace sluice::demo {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

// Errors are expected here (peers reset, tests close mid-stream): they come back as values.
inline constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

using RequestParser = http::request_parser<http::buffer_body>;

// Totals since start, for GET /stats. Relaxed: they are counters, not synchronisation.
struct Stats {
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> connections{0};
};
Stats& stats();

// Body bytes moved in one read or write: bounded memory for any body size.
inline constexpr std::size_t kPieceBytes = 64 * 1024;

struct Exchange {
  tcp::socket& socket;
  beast::flat_buffer& buffer;  // bytes read past the current request head (pipelining)
  RequestParser& parser;
  std::string& head;  // reused per connection to build response heads without reallocating
  std::unique_ptr<char[]>& piece;  // kPieceBytes scratch, allocated on first use per connection
  bool head_only;                  // HEAD request: send the head only
  bool keep_alive;                 // the connection may carry another request after this one

  char* piece_buffer() {
    if (!piece) piece = std::make_unique<char[]>(kPieceBytes);
    return piece.get();
  }
};

struct Piece {
  error_code ec;
  std::size_t bytes = 0;  // 0 with no error only once the body is complete
};

// Reads the next piece of the request body into `dst` (at most `capacity` bytes).
asio::awaitable<Piece> read_body_piece(Exchange& ex, char* dst, std::size_t capacity);
// Reads and discards the rest of the request body.
asio::awaitable<error_code> drain_body(Exchange& ex);

asio::awaitable<error_code> write_all(Exchange& ex, std::string_view bytes);
// Writes `ex.head` followed by `body` with one gather write.
asio::awaitable<error_code> write_head_and_body(Exchange& ex, std::string_view body);
// Writes one chunk of a chunked body (size line, data, CRLF) with one gather write. Empty data is
// skipped: a zero-size chunk would end the body.
asio::awaitable<error_code> write_chunk(Exchange& ex, std::string_view data);
// Writes the last chunk and optional trailer fields (each "Name: value\r\n").
asio::awaitable<error_code> write_last_chunk(Exchange& ex, std::string_view trailer_lines = {});

}  // namespace sluice::demo
