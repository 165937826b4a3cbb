// Upgraded-connection tunnel; see tunnel.h.
#include "proxy/h1/tunnel.h"

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace sluice::proxy::h1 {
namespace {

template <class From, class To>
asio::awaitable<void> copy(From& from, To& to, ScratchBuffer& scratch,
                           Clock::time_point& last_activity) {
  std::span<char> buf = scratch.get();
  error_code ignore;
  while (true) {
    auto [ec, n] = co_await from.async_read_some(asio::buffer(buf.data(), buf.size()), use_nothrow);
    if (ec == asio::error::eof) {
      to.shutdown(tcp::socket::shutdown_send, ignore);  // pass the half-close on
      co_return;
    }
    if (ec) break;
    last_activity = Clock::now();
    auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf.data(), n), use_nothrow);
    (void)wn;
    if (wec) break;
  }
  from.cancel(ignore);  // one side failed: end both directions
  to.cancel(ignore);
}

template <class To>
asio::awaitable<error_code> flush(beast::flat_buffer& buffer, To& to) {
  if (buffer.size() == 0) co_return error_code{};
  auto [ec, n] = co_await asio::async_write(to, buffer.data(), use_nothrow);
  buffer.consume(n);
  co_return ec;
}

}  // namespace

asio::awaitable<void> relay_tunnel(Downstream& client, beast::flat_buffer& client_buffer,
                                   ScratchBuffer& client_scratch, tcp::socket& app,
                                   beast::flat_buffer& app_buffer, ScratchBuffer& app_scratch,
                                   Clock::time_point& last_activity) {
  // Bytes that arrived behind the heads already belong to the new protocol.
  if (co_await flush(client_buffer, app)) co_return;
  if (co_await flush(app_buffer, client)) co_return;
  // Both directions at once, joined: the tunnel ends when both have (a failure in one ends the other).
  using namespace asio::experimental::awaitable_operators;
  co_await (copy(client, app, client_scratch, last_activity) && copy(app, client, app_scratch, last_activity));
}

}  // namespace sluice::proxy::h1
