// sluice's one HTTP/1.1 client, for the requests it makes itself: readiness probes (proxy/control, runtime/),
// the autoscaler's Stat scrapes (scaler/) and telemetry exports (proxy/telemetry). The caller shapes the
// request's bytes (a probe must match Go's net/http byte for byte, so no serializer reorders them); the
// client writes them, reads the answer with Beast under limits on its head and body, and ends by one
// deadline. The exchange runs over any Asio stream: a TCP socket, or the proxy's TLS client
// (proxy/io/tls_client.h), which the TLS-using callers put over the socket before the exchange.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/net.h"

namespace sluice::net {

struct HttpLimits {
  std::uint32_t head_bytes = 8 * 1024;  // Beast's default for a response head
  bool read_body = true;                // false: the status and fields only; the body stays unread
  std::optional<std::uint64_t> body_bytes = 1024 * 1024;  // nullopt: no limit
};

// Where an exchange ended: `done`, or the step that failed.
enum class HttpStage { connect, write, read, done };

struct HttpReply {
  HttpStage stage = HttpStage::connect;
  error_code error;  // why the step failed; beast::error::timeout when the deadline passed
  http::response<http::string_body> response;  // the head, and the body when read
  bool reusable = false;                       // the body was read to its end and the peer keeps the connection
  bool ok() const { return stage == HttpStage::done; }
  bool timed_out() const { return error == beast::error::timeout; }
  // The peer closed (or reset) the connection before the response was complete.
  bool closed_early() const {
    return stage == HttpStage::read &&
           (error == http::error::end_of_stream || error == http::error::partial_message ||
            error == asio::error::eof || error == asio::error::connection_reset);
  }
  // The peer's bytes are not an HTTP/1.1 response within the limits (a bad status line, a head too large...).
  bool malformed() const {
    return stage == HttpStage::read && !closed_early() &&
           error.category() == http::make_error_code(http::error::bad_version).category();
  }
};

namespace detail {

template <class Stream>
asio::awaitable<HttpReply> write_then_read(Stream& stream, std::string_view head, std::string_view body,
                                           HttpLimits limits, HttpStage& stage) {
  HttpReply reply;
  stage = HttpStage::write;
  const std::array<asio::const_buffer, 2> request{asio::buffer(head), asio::buffer(body)};
  if (auto [ec, n] = co_await asio::async_write(stream, request, use_nothrow); ec) {
    reply.stage = stage;
    reply.error = ec;
    co_return reply;
  }
  stage = HttpStage::read;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.header_limit(limits.head_bytes);
  if (limits.body_bytes)
    parser.body_limit(*limits.body_bytes);
  else
    parser.body_limit(boost::none);
  // Not `read_body ? co_await a : co_await b`: GCC 12 evaluates both arms of a conditional whose arms await.
  error_code ec;
  if (limits.read_body) {
    auto [rec, n] = co_await http::async_read(stream, buffer, parser, use_nothrow);
    ec = rec;
  } else {
    auto [rec, n] = co_await http::async_read_header(stream, buffer, parser, use_nothrow);
    ec = rec;
  }
  reply.stage = ec ? stage : HttpStage::done;
  reply.error = ec;
  reply.reusable = !ec && parser.is_done() && parser.keep_alive();
  reply.response = parser.release();
  co_return reply;
}

}  // namespace detail

// Writes `head` (the request line and fields, ending in the blank line) and `body` to `stream`, a connected
// Asio stream on the caller's executor, and reads the response, all by `deadline`: past it the stream's
// operations are cancelled and the reply says beast::error::timeout at the step it reached.
template <class Stream>
asio::awaitable<HttpReply> http_exchange(Stream& stream, std::string_view head, std::string_view body,
                                         HttpLimits limits, Clock::time_point deadline) {
  using namespace asio::experimental::awaitable_operators;
  HttpStage stage = HttpStage::write;
  asio::steady_timer timer(stream.get_executor(), deadline);
  auto raced =
      co_await (detail::write_then_read(stream, head, body, limits, stage) || timer.async_wait(use_nothrow));
  if (raced.index() == 0) co_return std::get<0>(std::move(raced));
  HttpReply late;
  late.stage = stage;
  late.error = beast::error::timeout;
  co_return late;
}

// Connects `socket` (open already, e.g. in another network namespace, or not) to `endpoint` by `deadline`;
// beast::error::timeout past it.
asio::awaitable<error_code> connect_by(tcp::socket& socket, tcp::endpoint endpoint, Clock::time_point deadline);

// A fresh connection to `endpoint` and one exchange on it, both by `deadline`; then the connection is shut.
// An empty `head` asks for the connection only (a TCP probe): `done` once connected.
asio::awaitable<HttpReply> http_fetch(tcp::endpoint endpoint, std::string_view head, std::string_view body,
                                      HttpLimits limits, Clock::time_point deadline);

// http_fetch for a thread with no event loop: it runs on an io_context of its own, on the calling thread.
HttpReply http_fetch_blocking(tcp::endpoint endpoint, std::string_view head, std::string_view body,
                              HttpLimits limits, Clock::time_point deadline);

// The "Host" field's value for `host` (a name or an address literal) and `port`: "127.0.0.1:8080",
// "[::1]:8080", as Go writes it from a URL.
std::string host_field(std::string_view host, unsigned port);

}  // namespace sluice::net
