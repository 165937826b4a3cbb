// Keep-alive pool to the app; see upstream_pool.h.
#include "proxy/upstream_pool.h"

#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace sluice::proxy {
namespace {

// An idle connection the app has closed reads as EOF (or an error) without blocking; a live one has
// nothing to read. One recv(MSG_PEEK) per reuse is far cheaper than a failed request.
bool looks_alive(tcp::socket& s) {
  char c;
  ssize_t n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

UpstreamPool::UpstreamPool(const asio::any_io_executor& ex, tcp::endpoint endpoint,
                           std::size_t max_idle, Clock::duration connect_timeout)
    : ex_(ex), endpoint_(endpoint), max_idle_(max_idle), connect_timeout_(connect_timeout) {
  idle_.reserve(std::min<std::size_t>(max_idle_, 1024));
}

asio::awaitable<std::tuple<error_code, std::unique_ptr<UpstreamConnection>>> UpstreamPool::acquire(
    bool verify) {
  constexpr auto kFresh = std::chrono::milliseconds(100);
  auto now = Clock::now();
  while (!idle_.empty()) {
    auto c = std::move(idle_.back());
    idle_.pop_back();
    if ((!verify && now - c->idle_since < kFresh) || looks_alive(c->socket)) {
      c->reused = true;
      co_return std::tuple{error_code{}, std::move(c)};
    }
  }
  auto c = std::make_unique<UpstreamConnection>(ex_);
  asio::steady_timer timer(ex_, connect_timeout_);
  using namespace asio::experimental::awaitable_operators;
  auto result = co_await (c->socket.async_connect(endpoint_, use_nothrow) ||
                          timer.async_wait(use_nothrow));
  if (result.index() == 1) co_return std::tuple{error_code(asio::error::timed_out), nullptr};
  auto [ec] = std::get<0>(result);
  if (ec) co_return std::tuple{ec, nullptr};
  c->socket.set_option(tcp::no_delay(true), ec);
  co_return std::tuple{error_code{}, std::move(c)};
}

void UpstreamPool::release(std::unique_ptr<UpstreamConnection> conn) {
  if (idle_.size() >= max_idle_ || conn->buffer.size() != 0) return;  // closes it
  conn->idle_since = Clock::now();
  idle_.push_back(std::move(conn));
}

void UpstreamPool::close_idle() { idle_.clear(); }

}  // namespace sluice::proxy
