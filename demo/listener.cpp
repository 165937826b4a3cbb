// Accept loop of the demo app: one coroutine per accepted connection, TCP_NODELAY on each.
#include "demo/listener.h"

#include <chrono>
#include <cstdio>

#include "demo/connection.h"

namespace sluice::demo {

tcp::acceptor open_listener(asio::io_context& ioc, const std::string& host, std::uint16_t port) {
  tcp::endpoint endpoint(asio::ip::make_address(host), port);
  tcp::acceptor acceptor(ioc);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(asio::socket_base::max_listen_connections);
  return acceptor;
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer backoff(executor);
  while (acceptor.is_open()) {
    auto [ec, socket] = co_await acceptor.async_accept(use_nothrow);
    if (ec == asio::error::operation_aborted) break;
    if (ec) {
      // Out of descriptors or a transient error: say so once per failure and retry shortly.
      std::fprintf(stderr, "{\"level\":\"warn\",\"message\":\"accept failed\",\"error\":\"%s\"}\n",
                   ec.message().c_str());
      backoff.expires_after(std::chrono::milliseconds(50));
      co_await backoff.async_wait(use_nothrow);
      continue;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    asio::co_spawn(executor, serve_connection(std::move(socket)), asio::detached);
  }
}

}  // namespace sluice::demo
