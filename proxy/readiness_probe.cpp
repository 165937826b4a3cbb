// User-container readiness checks; see readiness_probe.h.
#include "proxy/readiness_probe.h"

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace sluice::proxy {
namespace {

constexpr Millis kAggressiveInterval{50};
constexpr Millis kAggressiveTryTimeout{100};
constexpr Millis kAggressiveBudget{10'000};

asio::awaitable<bool> probe_app(const ReadinessProbeConfig& c) {
  auto ex = co_await asio::this_coro::executor;
  error_code ec;
  auto address = asio::ip::make_address(c.host, ec);
  if (ec) co_return false;
  tcp::socket socket(ex);
  auto [cec] = co_await socket.async_connect(tcp::endpoint(address, c.port), use_nothrow);
  if (cec) co_return false;
  if (c.kind == ReadinessProbeConfig::Kind::tcp_connect) co_return true;

  // As kubelet sends it, plus queue-proxy's Connection: close.
  std::string req = "GET " + c.path + " HTTP/1.1\r\nHost: " + c.host + ":" + std::to_string(c.port) +
                    "\r\nUser-Agent: kube-probe//\r\nAccept: */*\r\n";
  for (const auto& [name, value] : c.headers) req += name + ": " + value + "\r\n";
  req += "Connection: close\r\n\r\n";
  auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(req), use_nothrow);
  (void)wn;
  if (wec) co_return false;
  beast::flat_buffer buffer;
  http::response_parser<http::empty_body> parser;
  parser.skip(true);  // the status is all that counts
  auto [rec, rn] = co_await http::async_read_header(socket, buffer, parser, use_nothrow);
  (void)rn;
  if (rec) co_return false;
  unsigned status = parser.get().result_int();
  co_return status >= 200 && status < 400;
}

asio::awaitable<bool> try_probe(const ReadinessProbeConfig& probe, Millis timeout) {
  using namespace asio::experimental::awaitable_operators;
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex, timeout);
  auto result = co_await (probe_app(probe) || timer.async_wait(use_nothrow));
  co_return result.index() == 0 && std::get<0>(result);
}

}  // namespace

asio::awaitable<bool> UserReadiness::try_once(Millis timeout) const {
  co_return co_await try_probe(config_, timeout);
}

// Aggressive probes share one 10 s budget (`give_up`), so several containers' probes take no longer than one.
asio::awaitable<bool> UserReadiness::check_one(const ReadinessProbeConfig& probe, Clock::time_point give_up) {
  if (probe.period.count() > 0) co_return co_await try_probe(probe, probe.timeout);
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer pause(ex);
  while (true) {
    auto started = Clock::now();
    bool ready = co_await try_probe(probe, kAggressiveTryTimeout);
    if (ready) co_return true;
    if (Clock::now() + kAggressiveInterval >= give_up) co_return false;
    pause.expires_at(started + kAggressiveInterval);
    co_await pause.async_wait(use_nothrow);
  }
}

asio::awaitable<bool> UserReadiness::run_check() const {
  const auto give_up = Clock::now() + kAggressiveBudget;
  if (!co_await check_one(config_, give_up)) co_return false;
  for (const auto& probe : sidecars_)
    if (!co_await check_one(probe, give_up)) co_return false;
  co_return true;
}

void UserReadiness::finish(bool ready) {
  std::lock_guard lock(mutex_);
  waiters_.hand_all(ready);
  running_ = false;
}

void UserReadiness::drop_waiters() {
  std::lock_guard lock(mutex_);
  waiters_.clear();
}

asio::awaitable<bool> UserReadiness::check() {
  auto ex = co_await asio::this_coro::executor;
  net::WaitQueue<bool>::Ticket ticket;
  bool start = false;
  {
    std::lock_guard lock(mutex_);
    ticket = waiters_.join(ex);
    start = !running_;
    running_ = true;
  }
  if (start) {
    asio::co_spawn(ex, [this]() -> asio::awaitable<void> { finish(co_await run_check()); },
                   asio::detached);
  }
  co_await ticket.wait();
  std::lock_guard lock(mutex_);
  co_return ticket.outcome().value_or(false);
}

}  // namespace sluice::proxy
