// User-container readiness checks; see readiness_probe.h.
#include "proxy/control/readiness_probe.h"

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/ascii.h"
#include "common/http_client.h"
#include "proxy/control/grpc_health_probe.h"
#include "proxy/io/tls_client.h"

namespace sluice::proxy {
namespace {

constexpr Millis kAggressiveInterval{50};
constexpr Millis kAggressiveTryTimeout{100};
constexpr Millis kAggressiveBudget{10'000};

// The request Go's http.Client writes for queue-proxy: Host from the URL (a Host entry of httpHeaders is
// ignored: Go takes Request.Host, never Header["Host"]), User-Agent kube-probe// (the prober never sets the
// Kubernetes version; a User-Agent of httpHeaders comes second and Go writes the first), the other headers,
// then the transport's Connection: close (keep-alives off) and Accept-Encoding: gzip.
std::string probe_request(const ReadinessProbeConfig& c) {
  std::string req = "GET " + c.path + " HTTP/1.1\r\nHost: " + net::host_field(c.host, c.port) +
                    "\r\nUser-Agent: kube-probe//\r\n";
  bool close_asked = false, encoding_asked = false;
  for (const auto& [name, value] : c.headers) {
    if (iequals(name, "Host") || iequals(name, "User-Agent") || iequals(name, "Content-Length") ||
        iequals(name, "Transfer-Encoding") || iequals(name, "Trailer"))
      continue;  // Go's Request.Write leaves these out of the header map
    if (iequals(name, "Connection") && iequals(value, "close")) close_asked = true;
    if (iequals(name, "Accept-Encoding") || iequals(name, "Range")) encoding_asked = true;
    req += name + ": " + value + "\r\n";
  }
  if (!close_asked) req += "Connection: close\r\n";
  if (!encoding_asked) req += "Accept-Encoding: gzip\r\n";
  return req + "\r\n";
}

// The status is all that counts (200-399, as Go's prober), so the body is never read.
template <class Stream>
asio::awaitable<bool> http_get(Stream& stream, const ReadinessProbeConfig& c, Clock::time_point deadline) {
  auto reply = co_await net::http_exchange(stream, probe_request(c), {}, {.read_body = false}, deadline);
  const unsigned status = reply.response.result_int();
  co_return reply.ok() && status >= 200 && status < 400;
}

// queue-proxy's HTTPS probe goes through a clone of Go's http.DefaultTransport with no TLS config of its
// own (knative.dev/pkg/network NewProberTransport): the app's certificate must chain to the system's
// roots (SSL_CERT_FILE / SSL_CERT_DIR honoured) and name the probe's host (an IP address: no SNI), TLS 1.2
// at least, HTTP/1.1 without ALPN. A self-signed certificate fails the probe there, and so it does here.
asio::awaitable<bool> https_get(tcp::socket& socket, const ReadinessProbeConfig& c, Clock::time_point deadline) {
  auto tls = co_await tls_client_handshake(std::move(socket), c.host, "", deadline);
  if (!tls.stream) co_return false;
  co_return co_await http_get(*tls.stream, c, deadline);
}

asio::awaitable<bool> probe_app(const ReadinessProbeConfig& c, Millis timeout) {
  auto ex = co_await asio::this_coro::executor;
  error_code ec;
  auto address = asio::ip::make_address(c.host, ec);
  if (ec) co_return false;
  tcp::socket socket(ex);
  if (!c.netns.own()) {
    c.netns.open(socket, address.is_v6() ? tcp::v6() : tcp::v4(), ec);
    if (ec) co_return false;
  }
  const auto deadline = Clock::now() + timeout;
  if (co_await net::connect_by(socket, tcp::endpoint(address, c.port), deadline)) co_return false;
  switch (c.kind) {
    case ReadinessProbeConfig::Kind::tcp_connect:
      co_return true;
    case ReadinessProbeConfig::Kind::http_get:
      // Not `c.https ? co_await ... : co_await ...`: GCC 12 evaluates both arms of a conditional whose
      // arms await (it sent a TLS hello to a plain HTTP app first).
      if (c.https) co_return co_await https_get(socket, c, deadline);
      co_return co_await http_get(socket, c, deadline);
    case ReadinessProbeConfig::Kind::grpc_health:
      co_return co_await grpc_health_check(socket, c, timeout);
    case ReadinessProbeConfig::Kind::never_passes:
      break;
  }
  co_return false;
}

asio::awaitable<bool> try_probe(const ReadinessProbeConfig& probe, Millis timeout) {
  using namespace asio::experimental::awaitable_operators;
  if (probe.kind == ReadinessProbeConfig::Kind::never_passes) co_return false;
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex, timeout);
  auto result = co_await (probe_app(probe, timeout) || timer.async_wait(use_nothrow));
  co_return result.index() == 0 && std::get<0>(result);
}

}  // namespace

asio::awaitable<bool> UserReadiness::try_once(Millis timeout) const {
  co_return co_await try_probe(config_, timeout);
}

// Aggressive probes share one 10 s budget (`give_up`), so several containers' probes take no longer than one.
asio::awaitable<bool> UserReadiness::check_one(const ReadinessProbeConfig& probe, std::int32_t& successes,
                                               Clock::time_point give_up) {
  // queue-proxy fails an exec probe, or one with no action, at once: no polling.
  if (probe.kind == ReadinessProbeConfig::Kind::never_passes) co_return false;
  if (probe.period.count() > 0) co_return co_await try_probe(probe, probe.timeout);
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer pause(ex);
  while (true) {
    auto started = Clock::now();
    if (co_await try_probe(probe, kAggressiveTryTimeout)) {
      if (successes < probe.success_threshold) ++successes;
      if (successes >= probe.success_threshold) co_return true;
    } else {
      successes = 0;
    }
    if (Clock::now() + kAggressiveInterval >= give_up) co_return false;
    pause.expires_at(started + kAggressiveInterval);
    co_await pause.async_wait(use_nothrow);
  }
}

asio::awaitable<bool> UserReadiness::run_check() {
  const auto give_up = Clock::now() + kAggressiveBudget;
  if (!co_await check_one(config_, successes_[0], give_up)) co_return false;
  for (std::size_t i = 0; i < sidecars_.size(); ++i)
    if (!co_await check_one(sidecars_[i], successes_[i + 1], give_up)) co_return false;
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
