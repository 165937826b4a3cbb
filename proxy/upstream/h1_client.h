// The HTTP/1.1 client codec: a worker's keep-alive connections to one app address, each carrying one
// exchange at a time. Owned by one worker thread: no locks.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "common/netns.h"
#include "common/watchdog.h"
#include "proxy/codec/h1/message.h"
#include "proxy/exchange/exchange.h"
#include "proxy/upstream/app_sockets.h"

namespace sluice::proxy::h1 {

class ClientPool;

// One connection to the app, and the exchange it carries now.
class ClientConnection final : public ClientExchange {
 public:
  ClientConnection(const asio::any_io_executor& ex, ClientPool& pool);

  asio::awaitable<error_code> send_head(const UpstreamRequest& request,
                                        std::optional<asio::const_buffer> body) override;
  asio::awaitable<error_code> write_body(asio::const_buffer data) override;
  asio::awaitable<error_code> end_body(const FieldList& trailers) override;
  tcp::socket* raw_body_out() override;
  asio::awaitable<std::tuple<error_code, http::response_header<>*>> read_head() override;
  BodyInfo response_body() const override;
  bool body_at_hand() const override { return buffer_.size() > 0; }
  asio::awaitable<BodyRead> read_body() override;
  bool read_body_now(BodyRead& out) override;
  void consume_body(std::size_t n) override;
  bool body_ended() const override;
  const FieldList& trailers() override;
  RawBody raw_body_in() override;
  void raw_body_taken(std::size_t n) override { remaining_ -= n; }
  void cancel() override;
  Staleness stale() const override;
  asio::awaitable<bool> taken(Clock::duration within) override;
  void release(std::unique_ptr<ClientExchange> self) override;
  tcp::socket* tunnel_socket(beast::flat_buffer*& already_read) override;

  tcp::socket& socket() { return socket_; }

 private:
  friend class ClientPool;
  bool reusable() const;
  // Idle in the pool for a while: gives back the read buffer, the request head's and the trailers' memory.
  void rest();

  ClientPool& pool_;
  AppSocketCount counted_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;  // bytes read from the app not yet parsed or relayed
  std::string head_;           // the request head being written, reused across exchanges
  std::optional<ResponseParser> response_;
  std::unique_ptr<char[]> scratch_;  // decoded body of a chunked / close-delimited response
  FieldList trailers_;
  Framing framing_ = Framing::none;  // of the final response
  std::uint64_t remaining_ = 0;      // Framing::length: body bytes still to come
  std::size_t pending_ = 0;          // bytes of the last read_body view not consumed yet
  std::optional<std::size_t> header_fields_;  // of the final head, as sent on: fields after these are trailers
  error_code failure_;               // why the last operation failed
  bool reused_ = false;              // came from the pool
  bool head_request_ = false;
  bool chunked_request_ = false;
  bool request_done_ = false;
  bool got_response_bytes_ = false;
  bool cancelled_ = false;
  Clock::time_point idle_since_;
};

// Idle connections are kept up to a count and, when `idle_timeout` is not zero, closed once idle that
// long; idle for kRestAfter, a connection rests (ClientConnection::rest). One entry in the worker's
// Watchdogs serves the whole pool, due when its oldest connection expires or its oldest unrested one rests.
class ClientPool final : private net::Watchdog::Target {
 public:
  ClientPool(const asio::any_io_executor& ex, net::Watchdogs& watchdogs, tcp::endpoint endpoint,
             std::size_t max_idle, Clock::duration idle_timeout, Clock::duration connect_timeout,
             std::size_t max_response_header_bytes, std::size_t io_buffer_bytes, net::Netns netns = {});
  ClientPool(const ClientPool&) = delete;
  ClientPool& operator=(const ClientPool&) = delete;

  // An idle connection, or a new one. Error: connection refused, timeout, ... A pooled connection is
  // checked for a close by the app when `verify` is set or it has been idle long enough for the app to
  // have timed it out; otherwise the caller retries a failed first attempt instead (cheaper under load).
  asio::awaitable<std::tuple<error_code, std::unique_ptr<ClientConnection>>> acquire(bool verify);
  // The idle connection acquire() would take, or null when a new one must be connected.
  std::unique_ptr<ClientConnection> take_idle(bool verify);
  // Takes back a connection whose exchange completed cleanly and left no unread bytes.
  void release(std::unique_ptr<ClientConnection> conn);
  // At shutdown: closes the idle connections, and those released from now on.
  void close_idle();

  std::size_t idle_count() const { return idle_.size(); }
  const tcp::endpoint& endpoint() const { return endpoint_; }
  std::size_t max_response_header_bytes() const { return max_response_header_bytes_; }
  std::size_t io_buffer_bytes() const { return io_buffer_bytes_; }
  const std::string& host() const { return host_; }  // the app's address, for requests without a Host

 private:
  Clock::time_point next_deadline() const override;  // the oldest idle connection's expiry
  void on_deadline() override;                         // closes the expired ones

  asio::any_io_executor ex_;
  tcp::endpoint endpoint_;
  std::size_t max_idle_;
  Clock::duration idle_timeout_;  // zero: kept until used
  bool closed_ = false;           // shutting down: nothing is kept
  Clock::duration connect_timeout_;
  std::size_t max_response_header_bytes_;
  std::size_t io_buffer_bytes_;
  net::Netns netns_;  // where connections to the app are made
  std::string host_;
  // LIFO: the warmest connection last, so the oldest idle ones are at the front.
  std::vector<std::unique_ptr<ClientConnection>> idle_;
  // The first rested_ of idle_ have rested. A connection idle this long is not the next to be used under
  // load (the pool takes the warmest), so its buffers wait in malloc instead; idle h2 sessions rest after
  // the same time.
  static constexpr Clock::duration kRestAfter = std::chrono::seconds(1);
  std::size_t rested_ = 0;
  net::Watchdog watchdog_;
};

}  // namespace sluice::proxy::h1
