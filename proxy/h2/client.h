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

#include "proxy/asio.h"
#include "proxy/h1/message.h"
#include "proxy/h2/fields.h"

namespace sluice::proxy::h2 {

class ClientConnection;
struct ClientStreamState;

// One exchange with the app. Destroying it before the response ended resets the stream (CANCEL).
class ClientStream {
 public:
  ClientStream(std::shared_ptr<ClientConnection> connection, std::shared_ptr<ClientStreamState> state);
  ~ClientStream();
  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;

  // Queues request body bytes; waits while a window's worth is queued already. An error means the
  // stream is gone (reset, the connection broke, or the app answered and stopped reading).
  asio::awaitable<error_code> write(asio::const_buffer data);
  // Ends the request body, with trailers when there are any.
  void end_request(FieldList trailers = {});

  // The next response head: interim (1xx) heads come first, one per call, then the final one.
  asio::awaitable<error_code> read_head(http::response_header<>& head);
  // True once the final head arrived with END_STREAM: the response has no body.
  bool ended_with_head() const;
  // Response body bytes; 0 bytes without an error when the body is complete.
  asio::awaitable<std::tuple<error_code, std::size_t>> read(asio::mutable_buffer into);
  // The same into `into`, at most `max` bytes.
  asio::awaitable<std::tuple<error_code, std::size_t>> read(beast::flat_buffer& into, std::size_t max);
  // The response's trailers, once read() returned 0.
  const FieldList& trailers() const;

  // Resets the stream (CANCEL) and wakes any wait on it with operation_aborted.
  void cancel();
  // The app refused the stream before processing it (REFUSED_STREAM, or after its GOAWAY): a request
  // without a body may be sent again on another connection.
  bool refused() const;

  // AsyncWriteStream, so that the HTTP/1.1 body relay can write a request body into the stream.
  using executor_type = asio::any_io_executor;
  executor_type get_executor() const { return executor_; }
  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::size_t)>(
        [this](auto handler, const ConstBufferSequence& bufs) {
          asio::co_spawn(executor_, write_some(bufs),
                         [h = std::move(handler)](std::exception_ptr, std::tuple<error_code, std::size_t> r) mutable {
                           std::apply(std::move(h), r);
                         });
        },
        token, buffers);
  }

 private:
  // Waits for response body bytes: how many there are, 0 when the body is complete.
  asio::awaitable<std::tuple<error_code, std::size_t>> await_body();
  void take(std::size_t n);

  template <class ConstBufferSequence>
  asio::awaitable<std::tuple<error_code, std::size_t>> write_some(ConstBufferSequence bufs) {
    std::size_t total = 0;
    for (auto it = asio::buffer_sequence_begin(bufs); it != asio::buffer_sequence_end(bufs); ++it) {
      asio::const_buffer b(*it);
      if (b.size() == 0) continue;
      if (auto ec = co_await write(b)) co_return std::tuple{ec, total};
      total += b.size();
    }
    co_return std::tuple{error_code{}, total};
  }

  std::shared_ptr<ClientConnection> connection_;
  std::shared_ptr<ClientStreamState> state_;
  asio::any_io_executor executor_;
};

// A worker's h2c connections to one app address.
class ClientPool {
 public:
  ClientPool(const asio::any_io_executor& ex, tcp::endpoint endpoint, Clock::duration connect_timeout,
             std::size_t max_response_header_bytes);
  ~ClientPool();
  ClientPool(const ClientPool&) = delete;
  ClientPool& operator=(const ClientPool&) = delete;

  // Opens a stream carrying `fields` (pseudo-header fields first, names in lower case); the request
  // body follows through the stream unless `end_stream`. Connects when no connection has room.
  asio::awaitable<std::tuple<error_code, std::unique_ptr<ClientStream>>> open(const FieldList& fields,
                                                                             bool end_stream);
  // Closes connections without streams; the others close once their streams end.
  void close_idle();

  const tcp::endpoint& endpoint() const { return endpoint_; }
  std::size_t connection_count() const { return connections_.size(); }

 private:
  asio::any_io_executor ex_;
  tcp::endpoint endpoint_;
  Clock::duration connect_timeout_;
  std::size_t max_response_header_bytes_;
  std::vector<std::shared_ptr<ClientConnection>> connections_;
};

// ENABLE_HTTP2_AUTO_DETECTION: does the app at `endpoint` answer the HTTP/2 connection preface with
// SETTINGS? nullopt when it could not be asked (not listening yet, timeout): ask again later.
asio::awaitable<std::optional<bool>> speaks_h2c(const asio::any_io_executor& ex, tcp::endpoint endpoint,
                                                Clock::duration timeout);

// A request head as HTTP/2 fields for the app: pseudo-header fields from the request line and Host
// (which becomes :authority), then what h1::rewrite_request_fields gives, in lower case, and
// content-length when known.
FieldList upstream_request_fields(const http::request_header<>& req, const h1::RequestRewrite& rw,
                                  std::optional<std::uint64_t> content_length, std::string& request_id,
                                  std::string& trace_id);

}  // namespace sluice::proxy::h2
