// Upgraded-connection tunnel; see tunnel.h.
#include "proxy/downstream/tunnel.h"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <tuple>
#include <vector>

#include "proxy/io/edge_wait.h"

namespace sluice::proxy::h1 {
namespace {

std::size_t read_from(Downstream& from, std::span<char> b, error_code& ec, tcp::socket::wait_type& want) {
  return read_now(from, asio::buffer(b.data(), b.size()), ec, want);
}
std::size_t read_from(tcp::socket& from, std::span<char> b, error_code& ec, tcp::socket::wait_type& want) {
  want = tcp::socket::wait_read;
  return read_now(from, asio::buffer(b.data(), b.size()), ec);
}
tcp::socket& socket_of(Downstream& s) { return s.socket(); }
tcp::socket& socket_of(tcp::socket& s) { return s; }

// One direction. What `from` has is read into the worker's buffer (`shared`; none is held while waiting)
// and passed on at once; only what `to` cannot take now is copied, into a buffer of this direction's own
// that goes once written. So an idle tunnel holds no buffer.
// `ended`: set by the direction that failed, so that the other stops even where no operation of its was
// pending for the cancel to reach (between reads, or yielding).
template <class From, class To>
asio::awaitable<void> copy(From& from, To& to, std::span<char> shared, Clock::time_point& last_activity, bool& ended) {
  error_code ignore;
  unsigned reads_in_a_row = 0;
  while (!ended) {
    error_code ec;
    auto want = tcp::socket::wait_read;
    const std::size_t n = read_from(from, shared, ec, want);
    if (ec == asio::error::would_block) {
      reads_in_a_row = 0;
      std::tie(ec) = co_await wait_after_eagain(socket_of(from), want, use_nothrow);
      if (!ec) continue;
    }
    if (ec == asio::error::eof) {
      to.shutdown(tcp::socket::shutdown_send, ignore);  // pass the half-close on
      co_return;
    }
    if (ec) break;
    last_activity = Clock::now();
    const std::size_t sent = send_now(to, asio::buffer(shared.data(), n), ec);
    if (!ec && sent < n) {
      std::vector<char> rest(shared.data() + sent, shared.data() + n);
      std::tie(ec, std::ignore) = co_await asio::async_write(to, asio::buffer(rest), use_nothrow);
    }
    if (ec) break;
    if (++reads_in_a_row == kReadsBeforeYield) {
      reads_in_a_row = 0;
      co_await asio::post(socket_of(from).get_executor(), use_nothrow);
    }
  }
  ended = true;  // one side failed: end both directions
  from.cancel(ignore);
  to.cancel(ignore);
}

template <class To>
asio::awaitable<error_code> flush(beast::flat_buffer& buffer, To& to) {
  if (buffer.size() == 0) co_return error_code{};
  auto [ec, n] = co_await asio::async_write(to, buffer.data(), use_nothrow);
  buffer.consume(n);
  buffer.shrink_to_fit();  // the tunnel reads into the worker's buffer from here on
  co_return ec;
}

}  // namespace

asio::awaitable<void> relay_tunnel(Downstream& client, beast::flat_buffer& client_buffer, tcp::socket& app,
                                   beast::flat_buffer& app_buffer, std::span<char> shared,
                                   Clock::time_point& last_activity) {
  // Bytes that arrived behind the heads already belong to the new protocol.
  if (co_await flush(client_buffer, app)) co_return;
  if (co_await flush(app_buffer, client)) co_return;
  // Both directions at once, joined: the tunnel ends when both have (a failure in one ends the other).
  using namespace asio::experimental::awaitable_operators;
  bool ended = false;
  co_await (copy(client, app, shared, last_activity, ended) && copy(app, client, shared, last_activity, ended));
}

}  // namespace sluice::proxy::h1
