// /bytes, /slow-body and /close-mid: routes that generate a response body in bounded pieces.
#include <algorithm>
#include <chrono>
#include <string>

#include "demo/response_head.h"
#include "demo/routes.h"

namespace sluice::demo {
namespace {

constexpr std::string_view kAlphabetLine = "abcdefghijklmnopqrstuvwxyz\n";
// A whole number of alphabet lines, so consecutive pieces continue the pattern seamlessly.
constexpr std::size_t kPatternBytes = (kPieceBytes / kAlphabetLine.size()) * kAlphabetLine.size();

std::string_view pattern() {
  static const std::string bytes = [] {
    std::string s;
    s.reserve(kPatternBytes);
    while (s.size() < kPatternBytes) s.append(kAlphabetLine);
    return s;
  }();
  return bytes;
}

}  // namespace

asio::awaitable<bool> route_bytes(Exchange& ex, std::uint64_t bytes, bool chunked) {
  ResponseHead head(ex.head, 200);
  head.field("Content-Type", "application/octet-stream");
  if (chunked) {
    head.chunked();
  } else {
    head.content_length(bytes);
  }
  head.finish(ex.keep_alive, ex.parser.get().version());
  if (ex.head_only) co_return !(co_await write_all(ex, ex.head));

  std::string_view source = pattern();
  std::uint64_t left = bytes;
  bool head_sent = false;
  while (left > 0) {
    std::string_view piece =
        source.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(left, source.size())));
    error_code ec;
    if (chunked) {
      if (!head_sent && (ec = co_await write_all(ex, ex.head))) co_return false;
      ec = co_await write_chunk(ex, piece);
    } else if (!head_sent) {
      ec = co_await write_head_and_body(ex, piece);  // the first piece rides with the head
    } else {
      ec = co_await write_all(ex, piece);
    }
    if (ec) co_return false;
    head_sent = true;
    left -= piece.size();
  }
  if (!head_sent && co_await write_all(ex, ex.head)) co_return false;
  if (chunked && co_await write_last_chunk(ex)) co_return false;
  co_return true;
}

asio::awaitable<bool> route_slow_body(Exchange& ex, std::uint64_t chunks, std::uint64_t gap_ms) {
  ResponseHead(ex.head, 200)
      .field("Content-Type", "text/plain")
      .chunked()
      .finish(ex.keep_alive, ex.parser.get().version());
  if (co_await write_all(ex, ex.head)) co_return false;
  if (ex.head_only) co_return true;
  asio::steady_timer timer(ex.socket.get_executor());
  std::string line;
  for (std::uint64_t i = 0; i < chunks; ++i) {
    // Every chunk, the first included, waits: the head arrives `gap_ms` before any body byte.
    timer.expires_after(std::chrono::milliseconds(gap_ms));
    if (auto [ec] = co_await timer.async_wait(use_nothrow); ec) co_return false;
    line = "chunk " + std::to_string(i) + "\n";
    if (co_await write_chunk(ex, line)) co_return false;
  }
  co_return !(co_await write_last_chunk(ex));
}

asio::awaitable<bool> route_close_mid(Exchange& ex) {
  ResponseHead(ex.head, 200)
      .field("Content-Type", "application/octet-stream")
      .content_length(1'000'000)
      .finish(ex.keep_alive, ex.parser.get().version());
  if (ex.head_only) co_return !(co_await write_all(ex, ex.head));
  co_await write_head_and_body(ex, pattern().substr(0, 1000));
  co_return false;  // the connection closes with 999000 bytes owed
}

}  // namespace sluice::demo
