// Control listeners; see control_listener.h.
#include "common/control_listener.h"

#include <ctime>
#include <tuple>

#include "common/listen.h"
#include "common/log.h"

namespace sluice::net {
namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(30);
constexpr std::size_t kMaxHeaderBytes = 16 * 1024;
constexpr std::size_t kMaxBodyBytes = 64 * 1024;

// The Date field Go's server puts on every response (RFC 7231's IMF-fixdate).
std::string http_date() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[40];
  auto n = std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

}  // namespace

ControlListener::ControlListener(asio::io_context& io, const std::string& name,
                                 const std::string& address, std::uint16_t port,
                                 ControlHandler handler, const Netns& netns)
    : name_(name), acceptor_(io), handler_(std::move(handler)) {
  port_ = open_listener(acceptor_, tcp::endpoint(asio::ip::make_address(address), port), name, false, netns);
}

void ControlListener::start() { asio::co_spawn(acceptor_.get_executor(), accept_loop(), asio::detached); }

void ControlListener::close() {
  error_code ec;
  acceptor_.close(ec);
}

asio::awaitable<void> ControlListener::accept_loop() {
  while (acceptor_.is_open()) {
    auto [ec, socket] = co_await acceptor_.async_accept(use_nothrow);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      asio::steady_timer pause(acceptor_.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(use_nothrow);
      continue;
    }
    asio::co_spawn(acceptor_.get_executor(), serve(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> ControlListener::serve(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  while (true) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(kMaxHeaderBytes));
    parser.body_limit(kMaxBodyBytes);
    stream.expires_after(kIdleTimeout);
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_nothrow);
    (void)n;
    if (ec) break;
    auto& req = parser.get();
    error_code peer_ec;
    auto peer = stream.socket().remote_endpoint(peer_ec);
    req.set(kPeerField, peer_ec ? std::string() : peer.address().to_string() + ":" + std::to_string(peer.port()));
    ControlResponse r = co_await handler_(req);
    http::response<http::string_body> res{static_cast<http::status>(r.status), req.version()};
    if (!r.content_type.empty()) res.set(http::field::content_type, r.content_type);
    res.set(http::field::date, http_date());
    for (const auto& [name, value] : r.headers) res.set(name, value);
    res.keep_alive(req.keep_alive());
    res.body() = std::move(r.body);
    res.prepare_payload();
    stream.expires_after(kIdleTimeout);
    error_code wec;
    if (req.method() == http::verb::head) {
      http::response_serializer<http::string_body> head(res);
      std::tie(wec, std::ignore) = co_await http::async_write_header(stream, head, use_nothrow);
    } else {
      std::tie(wec, std::ignore) = co_await http::async_write(stream, res, use_nothrow);
    }
    if (wec || !res.keep_alive()) break;
  }
  error_code ignore;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignore);
}

}  // namespace sluice::net
