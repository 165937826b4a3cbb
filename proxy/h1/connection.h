// One downstream HTTP/1.1 connection: reads requests in order (keep-alive, pipelining), forwards each
// to the app, relays the response, and enforces the connection's and the exchange's deadlines.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "proxy/exchange.h"
#include "proxy/h1/body_relay.h"
#include "proxy/h1/message.h"
#include "proxy/h2/handover.h"
#include "proxy/admission.h"
#include "proxy/watchdog.h"
#include "proxy/worker_context.h"

namespace sluice::proxy::h1 {

class Connection final : private Watchdog::Target, public ConnectionHandle {
 public:
  Connection(WorkerContext& worker, Downstream socket, std::string_view initial_bytes = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Ends with the connection closed, or handed over when the client upgraded to h2c.
  asio::awaitable<std::optional<h2::Handover>> run();
  void close_when_idle() override;

 private:
  enum class Phase { awaiting_request, exchanging, tunnelling, closed };
  enum class Expired { nothing, client_header, exchange, tunnel_idle };

  // Serves one parsed request; returns whether the connection may carry another.
  asio::awaitable<bool> exchange(RequestParser& parser);
  void begin_record(const http::request_header<>& req);
  asio::awaitable<bool> respond_locally(unsigned status, std::string_view body, bool keep_alive,
                                        LocalResponseExtras extras = {});
  asio::awaitable<bool> respond(const LocalAnswer& answer, bool keep_alive, bool log);
  asio::awaitable<bool> fail_exchange(error_code ec, std::string_view what, bool keep_alive);
  asio::awaitable<void> pump_request_body(RequestParser& parser, UpstreamConnection& up, Framing in,
                                          Framing out, std::size_t header_fields, error_code& result);
  asio::awaitable<bool> exchange_h2c(RequestParser& parser, Framing body, bool keep_alive, bool expect_continue,
                                     std::size_t header_fields, h2::ClientPool& pool);
  asio::awaitable<void> tunnel(UpstreamConnection& up);
  asio::awaitable<void> linger();
  asio::awaitable<bool> upgrade_to_h2c(RequestParser& parser, Framing body);
  friend asio::awaitable<void> serve(WorkerContext&, Downstream&, const std::string&);

  Clock::time_point next_deadline() const override;
  void on_deadline() override;
  void set_phase(Phase p);

  WorkerContext& worker_;
  Downstream down_;
  beast::flat_buffer down_buffer_;
  std::string peer_address_;   // client IP
  std::string peer_;           // client ip:port
  Watchdog watchdog_;
  ScratchBuffer scratch_down_, scratch_up_;  // one body buffer per direction, allocated on first use
  std::string head_;           // the response head being written, reused across exchanges
  std::string request_head_;   // the request head for the app, reused across exchanges

  Phase phase_ = Phase::awaiting_request;
  Clock::time_point phase_start_;
  Clock::time_point last_write_;  // last byte written to the client (idle timeout)
  bool response_started_ = false;
  bool linger_ = false;  // the connection ends after a local answer: drain what the client still sends
  Expired expired_ = Expired::nothing;
  Clock::time_point close_idle_at_ = Clock::time_point::max();  // set at shutdown
  UpstreamConnection* upstream_ = nullptr;  // in use by the current exchange, for cancellation
  h2::ClientStream* h2_upstream_ = nullptr;  // ... when the app speaks h2c
  ExchangeRecord record_;
  std::optional<h2::UpgradeRequest> upgrade_;  // set once 101 went out for h2c
};

// Accepted-socket entry point: owns the Connection for its whole life.
// `initial_bytes` were read from the socket already (while sniffing for the HTTP/2 preface).
// (By reference: GCC 12 destroys by-value temporaries of a co_await expression twice.)
asio::awaitable<void> serve(WorkerContext& worker, Downstream& socket, const std::string& initial_bytes);

}  // namespace sluice::proxy::h1
