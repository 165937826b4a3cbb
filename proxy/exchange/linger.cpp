// The lingering close; see linger.h.
#include "proxy/exchange/linger.h"

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace sluice::proxy {

asio::awaitable<void> linger(Downstream& socket, std::span<char> buffer, const Limits& limits) {
  using namespace asio::experimental::awaitable_operators;
  if (limits.linger.count() == 0) co_return;
  auto discard = [&]() -> asio::awaitable<void> {
    for (std::size_t total = 0; total < limits.linger_bytes;) {
      auto [ec, n] = co_await socket.async_read_some(asio::buffer(buffer.data(), buffer.size()), use_nothrow);
      if (ec) co_return;
      total += n;
    }
  };
  asio::steady_timer limit(socket.get_executor(), limits.linger);
  co_await (discard() || limit.async_wait(use_nothrow));
}

}  // namespace sluice::proxy
