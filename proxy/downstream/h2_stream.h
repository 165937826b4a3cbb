// One stream of an HTTP/2 server connection: the client's request and the response going back, as the
// forwarder sees it (a ServerExchange). Owned by its Session, found through nghttp2's stream user data.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "proxy/codec/h2/wire.h"
#include "proxy/exchange/exchange.h"
#include "proxy/io/notifier.h"

namespace sluice::proxy::h2 {

class Session;

// How much of a response body is read from the app ahead of the client's window.
inline constexpr std::size_t kResponseBuffer = 64 * 1024;

class Stream final : public ServerExchange {
 public:
  Stream(Session& session, const asio::any_io_executor& ex, std::int32_t stream_id);
  ~Stream();

  http::request_header<>& request() override { return req; }
  BodyInfo request_body() const override { return body_info; }
  std::string_view peer_address() const override;
  bool is_tls() const override;
  asio::awaitable<BodyRead> read_body() override;
  void consume_body(std::size_t n) override;
  std::optional<asio::const_buffer> body_in_hand() override;
  FieldList request_trailers() override { return request_trailers_; }
  asio::awaitable<error_code> send_interim(const http::response_header<>& head) override;
  asio::awaitable<error_code> send_head(const http::response_header<>& head, BodyInfo body, bool more_soon) override;
  asio::awaitable<error_code> write_body(asio::const_buffer data) override;
  asio::awaitable<error_code> end_body(const FieldList& trailers) override;
  bool send_head_now(const http::response_header<>& head, BodyInfo body, bool more_soon, error_code& ec) override;
  bool write_body_now(asio::const_buffer data, error_code& ec) override;
  bool end_body_now(const FieldList& trailers, error_code& ec) override;
  asio::awaitable<void> send_local(const LocalAnswer& answer) override;
  void abort() override;
  asio::awaitable<void> tunnel(tcp::socket&, beast::flat_buffer&, Clock::time_point&) override { co_return; }
  // Once the whole response is queued for the stream, as Go's HTTP/2 server (queue-proxy's) buffers it:
  // the exchange then ends for the forwarder, and the writer sends the rest as the client's window allows.
  bool is_flushed() const override { return state != State::open; }
  asio::awaitable<void> flushed() override {
    while (state != State::closed) co_await wake.wait();
  }
  void cancel_io() override {
    cancelled = true;
    wake.notify();
    out->space.notify();
  }
  bool answers_mid_body() const override { return false; }
  void stop_reading() override {
    request_state = RequestBody::unwanted;
    wake.notify();
  }

  // nghttp2 closed the stream (completed, reset by either side, or the connection ended): wakes every
  // wait on it.
  void close(bool early);

  // Where the stream is: receiving the request (headers, then body), both directions open, the
  // response complete on our side, or closed by nghttp2. `reset` and `cancelled` below are the two ways
  // it ends before the exchange does.
  enum class State { open, responded, closed };
  // The request body: still arriving, all here (END_STREAM), or no longer wanted by the forwarder
  // (what still arrives is dropped, its window given back).
  enum class RequestBody { receiving, received, unwanted };

  Session& session;
  std::int32_t id;
  State state = State::open;
  bool running = false;  // its serve() coroutine has not finished
  std::list<Stream>::iterator place;  // in the session's list

  http::request_header<> req;
  BodyInfo body_info;
  std::string authority;
  bool has_method = false, has_path = false;
  std::size_t header_bytes = 0;
  std::size_t trailer_bytes = 0;
  bool too_large = false;     // the header list passed max_header_bytes: the rest is ignored, 431
  RequestBody request_state = RequestBody::receiving;  // the request body
  bool reset = false;         // closed before the exchange ended (RST_STREAM, GOAWAY, connection gone)
  bool cancelled = false;     // a deadline passed: waits end with an error

  beast::flat_buffer request_body_;     // received from the client, not yet read by the forwarder
  beast::flat_buffer request_sending_;  // read by the forwarder (request_body_ keeps filling meanwhile)
  FieldList request_trailers_;
  // More request body, its end, a reset, or the stream's close. One Notifier serves the request body's
  // reader and flushed(): the forwarder waits for the close only once it has stopped reading.
  Notifier wake;

  std::unique_ptr<SendQueue> out;  // the response body, then its trailers
};

}  // namespace sluice::proxy::h2
