// Body relay; see body_relay.h.
#include "proxy/h1/body_relay.h"

#include <array>
#include <cstdio>

#include "proxy/h2/client.h"

namespace sluice::proxy::h1 {

template <class Dst>
asio::awaitable<error_code> write_body_piece(Dst& dst, std::string& head, Framing out,
                                             asio::const_buffer data, RelayProgress& progress) {
  char chunk_size[24];
  std::array<asio::const_buffer, 4> bufs;
  std::size_t n = 0;
  if (!head.empty()) bufs[n++] = asio::buffer(head);
  if (out == Framing::chunked) {
    int len = std::snprintf(chunk_size, sizeof chunk_size, "%zx\r\n", data.size());
    bufs[n++] = asio::buffer(chunk_size, static_cast<std::size_t>(len));
    bufs[n++] = data;
    bufs[n++] = asio::buffer("\r\n", 2);
  } else {
    bufs[n++] = data;
  }
  auto [ec, written] =
      co_await asio::async_write(dst, std::span(bufs.data(), n), use_nothrow);
  (void)written;
  head.clear();
  if (!ec) {
    progress.bytes += data.size();
    if (progress.last_write) *progress.last_write = Clock::now();
  }
  co_return ec;
}

template <class Dst>
asio::awaitable<error_code> end_body(Dst& dst, std::string& head, Framing out, const TrailerList& trailers) {
  if (out != Framing::chunked) co_return head.empty() ? error_code{} : co_await write_all(dst, head);
  std::string tail = std::move(head);
  tail += "0\r\n";
  for (const auto& [name, value] : trailers) {
    tail += name;
    tail += ": ";
    tail += value;
    tail += "\r\n";
  }
  tail += "\r\n";
  co_return co_await write_all(dst, tail);
}

template asio::awaitable<error_code> write_body_piece(Downstream&, std::string&, Framing, asio::const_buffer,
                                                     RelayProgress&);
template asio::awaitable<error_code> end_body(Downstream&, std::string&, Framing, const TrailerList&);

namespace {

template <bool isRequest, class Dst>
asio::awaitable<error_code> finish_chunked(Dst& dst, std::string& head,
                                           const http::header<isRequest>& fields,
                                           std::size_t header_fields) {
  std::string tail = std::move(head);
  tail += "0\r\n";
  std::size_t i = 0;
  for (const auto& f : fields) {
    if (i++ < header_fields) continue;  // trailers follow the head's fields in the parser's list
    tail += f.name_string();
    tail += ": ";
    tail += f.value();
    tail += "\r\n";
  }
  tail += "\r\n";
  co_return co_await write_all(dst, tail);
}

}  // namespace

template <class Dst>
asio::awaitable<error_code> write_all(Dst& dst, std::string_view bytes) {
  auto [ec, n] = co_await asio::async_write(dst, asio::buffer(bytes), use_nothrow);
  (void)n;
  co_return ec;
}

template asio::awaitable<error_code> write_all(tcp::socket&, std::string_view);
template asio::awaitable<error_code> write_all(Downstream&, std::string_view);

template <bool isRequest, class Src, class Dst>
asio::awaitable<error_code> relay_body(Src& src, beast::flat_buffer& src_buffer,
                                       http::parser<isRequest, http::buffer_body>& parser,
                                       Framing in, Dst& dst, Framing out,
                                       ScratchBuffer& scratch_buffer, std::string& head,
                                       std::size_t header_fields, RelayProgress& progress) {
  if (in == Framing::none) {
    if (head.empty()) co_return error_code{};
    auto ec = co_await write_all(dst, head);
    head.clear();
    co_return ec;
  }
  if (in == Framing::length) {
    // Known length: copy raw bytes, no parsing. Bytes already buffered go first; anything past the
    // body in the buffer (a pipelined request) stays there.
    std::uint64_t remaining = parser.content_length().value_or(0);
    if (src_buffer.size() > 0 && remaining > 0) {
      auto n = static_cast<std::size_t>(std::min<std::uint64_t>(src_buffer.size(), remaining));
      auto ec = co_await write_body_piece(dst, head, out, asio::buffer(src_buffer.data().data(), n), progress);
      if (ec) co_return ec;
      src_buffer.consume(n);
      remaining -= n;
    }
    if (!head.empty()) {
      if (auto ec = co_await write_all(dst, head)) co_return ec;
      head.clear();
    }
    std::span<char> scratch = remaining > 0 ? scratch_buffer.get() : std::span<char>{};
    while (remaining > 0) {
      auto want = static_cast<std::size_t>(std::min<std::uint64_t>(scratch.size(), remaining));
      auto [ec, n] = co_await src.async_read_some(asio::buffer(scratch.data(), want), use_nothrow);
      if (ec) co_return ec == asio::error::eof ? error_code(http::error::partial_message) : ec;
      if (auto wec = co_await write_body_piece(dst, head, out, asio::buffer(scratch.data(), n), progress))
        co_return wec;
      remaining -= n;
    }
    co_return error_code{};
  }

  // Chunked or until-close: the parser finds the end (and the trailers). Beast sizes each socket read
  // by the buffer's free capacity, which the head left small: give it room for full-sized reads.
  std::span<char> scratch = scratch_buffer.get();
  if (src_buffer.capacity() < scratch.size()) src_buffer.reserve(scratch.size());
  if (!head.empty() && src_buffer.size() == 0) {
    if (auto ec = co_await write_all(dst, head)) co_return ec;
    head.clear();
  }
  while (!parser.is_done()) {
    parser.get().body().data = scratch.data();
    parser.get().body().size = scratch.size();
    auto [ec, n] = co_await http::async_read_some(src, src_buffer, parser, use_nothrow);
    (void)n;
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return ec;
    std::size_t got = scratch.size() - parser.get().body().size;
    if (got == 0) continue;
    if (out == Framing::chunked || out == Framing::length || out == Framing::until_close) {
      if (auto wec = co_await write_body_piece(dst, head, out, asio::buffer(scratch.data(), got), progress))
        co_return wec;
    }
  }
  if (out == Framing::chunked) co_return co_await finish_chunked(dst, head, parser.get().base(), header_fields);
  if (!head.empty()) co_return co_await write_all(dst, head);
  co_return error_code{};
}

template asio::awaitable<error_code> relay_body<true>(Downstream&, beast::flat_buffer&,
                                                      RequestParser&, Framing, tcp::socket&, Framing,
                                                      ScratchBuffer&, std::string&, std::size_t,
                                                      RelayProgress&);
template asio::awaitable<error_code> relay_body<true>(Downstream&, beast::flat_buffer&,
                                                      RequestParser&, Framing, h2::ClientStream&, Framing,
                                                      ScratchBuffer&, std::string&, std::size_t,
                                                      RelayProgress&);
template asio::awaitable<error_code> relay_body<false>(tcp::socket&, beast::flat_buffer&,
                                                       ResponseParser&, Framing, Downstream&,
                                                       Framing, ScratchBuffer&, std::string&,
                                                       std::size_t, RelayProgress&);

}  // namespace sluice::proxy::h1
