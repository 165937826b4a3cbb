// One h2c connection to the app (nghttp2 through Wire) and the state of each stream on it, shared by
// the connection (until nghttp2 closes the stream) and the ClientStream the forwarder holds.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "proxy/codec/h2/wire.h"
#include "proxy/exchange/exchange.h"
#include "proxy/io/notifier.h"
#include "proxy/upstream/app_sockets.h"

namespace sluice::proxy::h2 {

// Request body bytes queued per stream before write() waits.
inline constexpr std::size_t kSendBuffer = 64 * 1024;
// Streams per connection before another connection is opened (the app's own limit when lower).
inline constexpr std::uint32_t kStreamsPerConnection = 100;

struct ClientStreamState {
  explicit ClientStreamState(const asio::any_io_executor& executor)
      : ex(executor), out(std::make_unique<SendQueue>(executor, kSendBuffer)), received(executor) {}
  // Request bytes still being written keep the send queue alive.
  ~ClientStreamState() {
    if (wire) wire->retire(std::move(out));
  }

  asio::any_io_executor ex;
  std::int32_t id = -1;
  Wire* wire = nullptr;  // once submitted
  // Request side: the body queued for DATA frames, then its trailers.
  std::unique_ptr<SendQueue> out;

  // Response side.
  // Complete heads not yet read, oldest first: mostly one (a vector: an empty std::deque takes 576 bytes).
  std::vector<http::response_header<>> heads;
  http::response_header<> building;           // the head being received
  bool final_head = false;                    // the final (non-1xx) head arrived
  bool head_has_end = false;                  // ... with END_STREAM
  std::size_t header_bytes = 0;
  std::size_t trailer_bytes = 0;
  beast::flat_buffer body;  // DATA received, not yet read (acknowledged only once read)
  bool body_done = false;   // END_STREAM
  FieldList trailers;
  Notifier received;

  bool closed = false;     // nghttp2 closed the stream
  bool cancelled = false;  // by the exchange
  bool refused = false;
  error_code failure;      // why the stream ended early
};

// Owned by its pool, its streams and its own reader and writer coroutines (shared_ptr): the last of
// them to go frees it.
class ClientConnection {
 public:
  ClientConnection(const asio::any_io_executor& ex, std::size_t max_header_bytes)
      : socket_(ex), wire_(ex), ready_(ex, Clock::time_point::max()), max_header_bytes_(max_header_bytes) {}

  // Connects and starts the session; waiters on wait_ready() learn the outcome.
  // The socket is made in `netns` (common/netns.h).
  static asio::awaitable<void> connect(std::shared_ptr<ClientConnection> self, tcp::endpoint endpoint,
                                       Clock::duration timeout, net::Netns netns);
  asio::awaitable<error_code> wait_ready() {
    while (!connected_ && !broken_) co_await ready_.async_wait(use_nothrow);
    co_return broken_ ? (connect_error_ ? connect_error_ : error_code(asio::error::connection_reset)) : error_code{};
  }

  // A new stream may go here.
  bool has_room() const {
    if (broken_ || going_away_) return false;
    std::uint32_t limit = kStreamsPerConnection;
    if (auto* ng = wire_.session())
      limit = std::min(limit, nghttp2_session_get_remote_settings(ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS));
    return streams_.size() + opening_ < limit;
  }
  bool idle() const { return streams_.empty() && opening_ == 0; }
  // When it last became idle (or was made): what the pool's idle timeout counts from.
  Clock::time_point idle_since() const { return idle_since_; }
  bool broken() const { return broken_; }
  void reserve() { ++opening_; }
  void unreserve() {
    if (--opening_ == 0 && streams_.empty()) idle_since_ = Clock::now();
  }

  error_code submit(const FieldList& fields, bool end_stream, const std::shared_ptr<ClientStreamState>& st);
  void resume(ClientStreamState& st) {
    if (!st.closed && wire_.session()) wire_.resume(st.id, *st.out);
    else wire_.want_write();
  }
  void consume(ClientStreamState& st, std::size_t n) {
    if (n == 0 || !wire_.session() || broken_) return;
    nghttp2_session_consume(wire_.session(), st.id, n);
    wire_.want_write();
  }
  void reset(ClientStreamState& st) {
    st.cancelled = true;
    if (!st.closed && wire_.session() && !broken_) {
      nghttp2_submit_rst_stream(wire_.session(), NGHTTP2_FLAG_NONE, st.id, NGHTTP2_CANCEL);
      wire_.want_write();
    }
    // Bytes nobody will read still hold the connection window.
    consume(st, st.body.size());
    st.body.clear();
    st.out->discard();
    st.out->space.notify();
    st.received.notify();
  }
  // No new streams; the connection closes once its streams end.
  void retire() {
    going_away_ = true;
    if (streams_.empty() && opening_ == 0) close();
    wire_.want_write();
  }

 private:
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* self);
  static int on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t flags, void* self);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* self);
  static int on_data_chunk(nghttp2_session*, uint8_t flags, int32_t id, const uint8_t* data, size_t len,
                           void* self);
  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error, void* self);
  // A malformed response (RFC 9113 §8): nghttp2 resets the stream, the exchange fails (502 before the head).
  static int on_invalid_frame(nghttp2_session*, const nghttp2_frame* f, int error, void* self);

  ClientStreamState* find(std::int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }
  bool start();
  asio::awaitable<void> reader();
  asio::awaitable<void> writer();
  void fail_all(error_code ec);
  void close() {
    error_code ignore;
    socket_.close(ignore);
    wire_.want_write();
  }

  AppSocketCount counted_;
  tcp::socket socket_;
  Wire wire_;  // before the streams: their send queues retire into it
  std::unordered_map<std::int32_t, std::shared_ptr<ClientStreamState>> streams_;
  asio::steady_timer ready_;
  std::size_t max_header_bytes_;
  std::size_t opening_ = 0;  // open() calls waiting for this connection
  bool connected_ = false;
  bool broken_ = false;
  bool going_away_ = false;
  error_code connect_error_;
  Clock::time_point idle_since_ = Clock::now();
};

}  // namespace sluice::proxy::h2
