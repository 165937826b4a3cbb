// /echo and /sink: routes that consume the request body piece by piece through one fixed buffer.
#include <string>

#include "demo/response_head.h"
#include "demo/routes.h"

namespace sluice::demo {

asio::awaitable<bool> route_echo(Exchange& ex) {
  const auto& req = ex.parser.get();
  // Framing mirrors the request's: chunked in, chunked out; otherwise the same Content-Length, so
  // the head can go out before the body has been read.
  const bool chunked = ex.parser.chunked();
  ResponseHead head(ex.head, 200);
  if (auto ct = req.find(http::field::content_type); ct != req.end()) {
    head.field("Content-Type", ct->value());
  }
  if (chunked) {
    head.chunked();
  } else {
    head.content_length(ex.parser.content_length().value_or(0));
  }
  head.finish(ex.keep_alive, req.version());
  if (co_await write_all(ex, ex.head)) co_return false;
  if (ex.head_only) co_return true;  // the connection drains the request body

  char* buf = ex.piece_buffer();
  for (;;) {
    Piece p = co_await read_body_piece(ex, buf, kPieceBytes);
    if (p.ec) co_return false;
    if (p.bytes == 0) break;
    std::string_view data(buf, p.bytes);
    // Not `chunked ? co_await ... : co_await ...`: GCC 12 can evaluate both arms of such a conditional.
    error_code ec;
    if (chunked) ec = co_await write_chunk(ex, data);
    else ec = co_await write_all(ex, data);
    if (ec) co_return false;
  }
  if (chunked && co_await write_last_chunk(ex)) co_return false;
  co_return true;
}

asio::awaitable<bool> route_sink(Exchange& ex) {
  char* buf = ex.piece_buffer();
  std::uint64_t total = 0;
  for (;;) {
    Piece p = co_await read_body_piece(ex, buf, kPieceBytes);
    if (p.ec) co_return false;
    if (p.bytes == 0) break;
    total += p.bytes;
  }
  std::string body = std::to_string(total);
  ResponseHead(ex.head, 200)
      .field("Content-Type", "text/plain")
      .field("X-Received-Bytes", total)
      .content_length(body.size())
      .finish(ex.keep_alive, ex.parser.get().version());
  if (!ex.head_only) ex.head.append(body);
  co_return !(co_await write_all(ex, ex.head));
}

}  // namespace sluice::demo
