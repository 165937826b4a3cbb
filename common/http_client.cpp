// The non-template parts of the HTTP/1.1 client; see http_client.h.
#include "common/http_client.h"

namespace sluice::net {

asio::awaitable<error_code> connect_by(tcp::socket& socket, tcp::endpoint endpoint, Clock::time_point deadline) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(socket.get_executor(), deadline);
  auto raced = co_await (socket.async_connect(endpoint, use_nothrow) || timer.async_wait(use_nothrow));
  if (raced.index() == 1) co_return error_code(beast::error::timeout);
  co_return std::get<0>(std::get<0>(raced));
}

asio::awaitable<HttpReply> http_fetch(tcp::endpoint endpoint, std::string_view head, std::string_view body,
                                      HttpLimits limits, Clock::time_point deadline) {
  tcp::socket socket(co_await asio::this_coro::executor);
  HttpReply reply;
  reply.error = co_await connect_by(socket, endpoint, deadline);
  if (reply.error) co_return reply;
  if (head.empty()) {
    reply.stage = HttpStage::done;
  } else {
    reply = co_await http_exchange(socket, head, body, limits, deadline);
  }
  error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  co_return reply;
}

HttpReply http_fetch_blocking(tcp::endpoint endpoint, std::string_view head, std::string_view body,
                              HttpLimits limits, Clock::time_point deadline) {
  asio::io_context io{1};
  HttpReply reply;
  // Bounded: every step of http_fetch races a timer to `deadline`.
  asio::co_spawn(io, http_fetch(endpoint, head, body, limits, deadline),
                 [&reply](const std::exception_ptr& failed, HttpReply done) {
                   if (failed) std::rethrow_exception(failed);
                   reply = std::move(done);
                 });
  io.run();
  return reply;
}

std::string host_field(std::string_view host, unsigned port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

}  // namespace sluice::net
