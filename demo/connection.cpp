// The per-connection coroutine: keep-alive and pipelining (requests are read one at a time from the
// same buffer, so answers leave in order), Expect: 100-continue, body draining, 400 on bad input.
#include "demo/connection.h"

#include <limits>
#include <optional>

#include "demo/routes.h"

namespace sluice::demo {
namespace {

bool expects_continue(const RequestParser& parser) {
  const auto& req = parser.get();
  auto it = req.find(http::field::expect);
  return it != req.end() && beast::iequals(it->value(), "100-continue");
}

bool is_malformed_input(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace

asio::awaitable<void> serve_connection(tcp::socket socket) {
  stats().connections.fetch_add(1, std::memory_order_relaxed);
  beast::flat_buffer buffer;
  std::string head;
  head.reserve(256);
  std::unique_ptr<char[]> piece;
  // The parser is re-created per request (Beast parsers are single-use); it lives in this frame.
  std::optional<RequestParser> parser;

  for (;;) {
    parser.emplace();
    parser->header_limit((1 << 20) + 4096);  // as Go's net/http, which most Knative apps use
    parser->body_limit(std::numeric_limits<std::uint64_t>::max());
    auto [ec, n] = co_await http::async_read_header(socket, buffer, *parser, use_nothrow);
    (void)n;
    if (ec) {
      if (is_malformed_input(ec)) {
        constexpr std::string_view kBad =
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n"
            "Connection: close\r\n\r\nbad request\n";
        co_await asio::async_write(socket, asio::buffer(kBad), use_nothrow);
      }
      break;
    }
    stats().requests.fetch_add(1, std::memory_order_relaxed);

    Exchange ex{socket,
                buffer,
                *parser,
                head,
                piece,
                parser->get().method() == http::verb::head,
                parser->keep_alive()};
    if (!parser->is_done() && expects_continue(*parser)) {
      constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      if (co_await write_all(ex, kContinue)) break;
    }
    if (!co_await dispatch(ex)) break;
    if (!ex.keep_alive) break;
    // A route that ignored the body leaves it unread; it must be consumed before the next head.
    if (!parser->is_done() && co_await drain_body(ex)) break;
  }

  if (socket.is_open()) {
    error_code ignored;
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    socket.close(ignored);
  }
}

}  // namespace sluice::demo
