// TimedSocket; see timed_socket.h. The socket lives on an io_context of its own, which the export thread
// runs while it waits for one operation: until the operation completes, or to the deadline, when the
// operation is cancelled and its completion still run, so nothing is pending between calls. TLS is the
// proxy's own TlsSocket in client mode (tls_client.h), not a second implementation.
#include "proxy/telemetry/timed_socket.h"

#include <optional>
#include <utility>

#include "proxy/io/asio.h"
#include "proxy/io/tls_client.h"

namespace sluice::proxy::telemetry {

struct TimedSocket::Connection {
  asio::io_context io{1};
  tcp::socket plain{io};          // the connection, or what a TLS handshake took it from
  std::unique_ptr<TlsSocket> tls;  // set once a TLS handshake completed

  tcp::socket& lowest() { return tls ? tls->next_layer() : plain; }

  // Starts an operation with `start(handler)`, the handler taking (error_code, std::size_t), and runs
  // the io_context on this thread until it completes. At the deadline the socket's operations are
  // cancelled (asio::error::timed_out); a result that was there by then still counts.
  template <class Start>
  std::pair<error_code, std::size_t> run(Start start, ExportClock::time_point deadline) {
    std::optional<std::pair<error_code, std::size_t>> result;
    io.restart();
    start([&result](error_code ec, std::size_t n) { result.emplace(ec, n); });
    while (!result && io.run_one_until(deadline) > 0) {
    }
    if (!result) {
      error_code ignored;
      lowest().cancel(ignored);
      io.restart();
      while (!result && io.run_one() > 0) {
      }
    }
    if (!result || result->first == asio::error::operation_aborted) return {asio::error::timed_out, 0};
    return *result;
  }
};

namespace {

std::string reason(const error_code& ec) { return ec == asio::error::timed_out ? "timed out" : ec.message(); }

}  // namespace

TimedSocket::TimedSocket() : conn_(std::make_unique<Connection>()) {}

TimedSocket::~TimedSocket() = default;

bool TimedSocket::is_open() const { return conn_->tls || conn_->plain.is_open(); }

void TimedSocket::close() {
  // No close_notify: the connection is dropped after a failure or when the collector closed it, and a
  // collector reads the end of the TCP stream as the end either way.
  conn_->tls.reset();
  error_code ignored;
  conn_->plain.close(ignored);
}

bool TimedSocket::connect(const Endpoint& endpoint, std::string_view alpn, ExportClock::time_point deadline,
                          std::string& error) {
  close();
  auto& c = *conn_;
  error_code ec;
  // Resolution takes no deadline (getaddrinfo); it runs on the export thread only.
  tcp::resolver resolver(c.io);
  auto found = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
  if (ec) {
    error = "resolve " + endpoint.host + ": " + ec.message();
    return false;
  }
  ec = asio::error::host_not_found;
  for (const auto& entry : found) {
    auto [connected, n] = c.run(
        [&](auto done) { c.plain.async_connect(entry.endpoint(), [done](error_code e) mutable { done(e, 0); }); },
        deadline);
    ec = connected;
    if (!ec || ec == asio::error::timed_out) break;
    error_code ignored;
    c.plain.close(ignored);
  }
  if (ec) {
    close();
    error = reason(ec);
    return false;
  }
  error_code ignored;
  c.plain.set_option(tcp::no_delay(true), ignored);
  if (!endpoint.tls) return true;
  // The handshake races a timer of its own to the deadline, so running the io_context until it ends is bounded.
  std::optional<TlsClientConnection> shaken;
  c.io.restart();
  asio::co_spawn(c.io, tls_client_handshake(std::move(c.plain), endpoint.host, alpn, deadline),
                 [&shaken](const std::exception_ptr& failed, TlsClientConnection result) {
                   if (failed) result.error = "TLS handshake failed";
                   shaken = std::move(result);
                 });
  c.io.run();
  c.plain = tcp::socket(c.io);
  if (!shaken || !shaken->stream) {
    error = shaken ? shaken->error : "TLS handshake did not finish";
    return false;
  }
  c.tls = std::move(shaken->stream);
  return true;
}

bool TimedSocket::write_all(std::string_view data, ExportClock::time_point deadline, std::string& error) {
  auto& c = *conn_;
  auto [ec, n] = c.run(
      [&](auto done) {
        if (c.tls)
          asio::async_write(*c.tls, asio::buffer(data), std::move(done));
        else
          asio::async_write(c.plain, asio::buffer(data), std::move(done));
      },
      deadline);
  if (ec) error = reason(ec);
  return !ec;
}

net::HttpReply TimedSocket::http_exchange(std::string_view head, std::string_view body, const net::HttpLimits& limits,
                                          ExportClock::time_point deadline) {
  auto& c = *conn_;
  net::HttpReply reply;
  // Bounded like the handshake: the exchange races a timer of its own to the deadline.
  c.io.restart();
  asio::co_spawn(
      c.io,
      [&]() -> asio::awaitable<void> {
        if (c.tls)
          reply = co_await net::http_exchange(*c.tls, head, body, limits, deadline);
        else
          reply = co_await net::http_exchange(c.plain, head, body, limits, deadline);
      },
      asio::detached);
  c.io.run();
  return reply;
}

long TimedSocket::read_some(char* buf, std::size_t size, ExportClock::time_point deadline, std::string& error) {
  auto& c = *conn_;
  auto [ec, n] = c.run(
      [&](auto done) {
        if (c.tls)
          c.tls->async_read_some(asio::buffer(buf, size), std::move(done));
        else
          c.plain.async_read_some(asio::buffer(buf, size), std::move(done));
      },
      deadline);
  if (!ec) return static_cast<long>(n);
  if (ec == asio::error::eof) return 0;
  error = reason(ec);
  return -1;
}

}  // namespace sluice::proxy::telemetry
