// HTTP/2 to the app in cleartext (h2c by prior knowledge), for apps that declare it or are found to
// speak it. A worker keeps a few multiplexed connections per app address; each exchange is one stream.
// Flow control is tied to the client on both sides: a response's DATA is acknowledged (WINDOW_UPDATE)
// only as the exchange reads it, and a request body is queued only up to a window's worth.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/netns.h"
#include "common/watchdog.h"
#include "proxy/codec/h2/fields.h"
#include "proxy/exchange/exchange.h"
#include "proxy/io/asio.h"

namespace sluice::proxy::h2 {

class ClientConnection;
struct ClientStreamState;

// One exchange with the app, one stream. Destroying it before the response ended resets the stream (CANCEL).
class ClientStream final : public ClientExchange {
 public:
  ClientStream(std::shared_ptr<ClientConnection> connection, std::shared_ptr<ClientStreamState> state);
  ~ClientStream() override;
  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;

  // Submits the request's HEADERS (the stream begins here); `body`, when given, is the whole body.
  asio::awaitable<error_code> send_head(const UpstreamRequest& request,
                                        std::optional<asio::const_buffer> body) override;
  // Queues request body bytes; waits while a window's worth is queued already. An error means the
  // stream is gone (reset, the connection broke, or the app answered and stopped reading).
  asio::awaitable<error_code> write_body(asio::const_buffer data) override;
  // Ends the request body, with trailers when there are any.
  asio::awaitable<error_code> end_body(const FieldList& trailers) override;
  asio::awaitable<std::tuple<error_code, http::response_header<>*>> read_head() override;
  BodyInfo response_body() const override;
  bool body_at_hand() const override;
  asio::awaitable<BodyRead> read_body() override;
  bool read_body_now(BodyRead& out) override;
  void consume_body(std::size_t n) override;
  bool body_ended() const override;
  const FieldList& trailers() override;
  // Resets the stream (CANCEL) and wakes any wait on it with operation_aborted.
  void cancel() override;
  // REFUSED_STREAM, or past the app's GOAWAY: the app did not process it.
  Staleness stale() const override;
  void release(std::unique_ptr<ClientExchange> self) override { self.reset(); }
  tcp::socket* tunnel_socket(beast::flat_buffer*&) override { return nullptr; }

 private:
  std::shared_ptr<ClientConnection> connection_;
  std::shared_ptr<ClientStreamState> state_;
  http::response_header<> head_;       // the head read_head gave last
  beast::flat_buffer reading_;         // response body handed to the forwarder, not yet consumed
  bool head_request_ = false;
  bool submitted_ = false;
};

// A worker's h2c connections to one app address. With an `idle_timeout`, a connection without streams
// for that long is closed (the pool's entry in the worker's Watchdogs is due at the earliest expiry, and
// at least once per timeout while it has connections).
class ClientPool final : private net::Watchdog::Target {
 public:
  ClientPool(const asio::any_io_executor& ex, net::Watchdogs& watchdogs, tcp::endpoint endpoint,
             Clock::duration idle_timeout, Clock::duration connect_timeout, std::size_t max_response_header_bytes,
             net::Netns netns = {});
  ~ClientPool();
  ClientPool(const ClientPool&) = delete;
  ClientPool& operator=(const ClientPool&) = delete;

  // A stream on a connection with room, to be begun by its send_head. Connects when no connection has room.
  asio::awaitable<std::tuple<error_code, std::unique_ptr<ClientStream>>> open();
  // At shutdown: closes connections without streams; the others close once their streams end.
  void close_idle();

  const tcp::endpoint& endpoint() const { return endpoint_; }
  std::size_t connection_count() const { return connections_.size(); }

 private:
  Clock::time_point next_deadline() const override {
    return connections_.empty() ? Clock::time_point::max() : next_check_;
  }
  void on_deadline() override;  // closes the connections idle for the timeout

  asio::any_io_executor ex_;
  tcp::endpoint endpoint_;
  Clock::duration idle_timeout_;  // zero: kept until the pool goes
  bool closed_ = false;           // shutting down: no idle timeout holds the worker
  Clock::duration connect_timeout_;
  net::Netns netns_;  // where connections to the app are made
  std::size_t max_response_header_bytes_;
  std::vector<std::shared_ptr<ClientConnection>> connections_;
  Clock::time_point next_check_ = Clock::time_point::max();
  net::Watchdog watchdog_;
};

// ENABLE_HTTP2_AUTO_DETECTION: does the app at `endpoint` answer the HTTP/2 connection preface with
// SETTINGS? nullopt when it could not be asked (not listening yet, timeout): ask again later.
asio::awaitable<std::optional<bool>> speaks_h2c(const asio::any_io_executor& ex, tcp::endpoint endpoint,
                                                Clock::duration timeout, const net::Netns& netns = {});

// A request as HTTP/2 fields for the app: pseudo-header fields from the request line and Host (which
// becomes :authority), then the forwarder's fields in lower case, and content-length when known.
FieldList upstream_request_fields(const UpstreamRequest& request);

}  // namespace sluice::proxy::h2
