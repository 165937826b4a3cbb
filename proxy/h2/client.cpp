// h2c to the app; see client.h.
#include "proxy/h2/client.h"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <array>
#include <charconv>
#include <cstring>
#include <deque>
#include <unordered_map>

#include "common/log.h"
#include "proxy/h2/frames.h"
#include "proxy/headers.h"
#include "proxy/notifier.h"

namespace sluice::proxy::h2 {
namespace {

// Per-stream receive window: how much of a response may wait in sluice for a slow client.
constexpr std::int32_t kStreamWindow = 256 * 1024;
// The connection's: room for many streams' windows, so one slow client does not stall the others.
constexpr std::int32_t kConnectionWindow = 64 * 1024 * 1024;
// Request body bytes queued per stream before write() waits.
constexpr std::size_t kSendBuffer = 64 * 1024;
// Streams per connection before another connection is opened (the app's own limit when lower).
constexpr std::uint32_t kStreamsPerConnection = 100;
constexpr std::size_t kWriteBatch = 64 * 1024;
constexpr std::size_t kReadChunk = 16 * 1024;

std::string_view as_view(const uint8_t* p, std::size_t n) { return {reinterpret_cast<const char*>(p), n}; }

nghttp2_nv nv(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

std::vector<nghttp2_nv> to_nva(const FieldList& fields) {
  std::vector<nghttp2_nv> out;
  out.reserve(fields.size());
  for (const auto& [n, v] : fields) out.push_back(nv(n, v));
  return out;
}

}  // namespace

struct ClientStreamState {
  explicit ClientStreamState(const asio::any_io_executor& executor)
      : ex(executor), send_space(executor), received(executor) {}

  asio::any_io_executor ex;
  std::int32_t id = -1;
  // Request side.
  beast::flat_buffer send;  // body bytes queued for nghttp2's data callback
  bool send_done = false;   // end_request() was called
  bool deferred = false;    // nghttp2 waits for resume_data
  FieldList send_trailers;
  Notifier send_space;

  // Response side.
  std::deque<http::response_header<>> heads;  // complete heads not yet read
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

class ClientConnection : public std::enable_shared_from_this<ClientConnection> {
 public:
  ClientConnection(const asio::any_io_executor& ex, std::size_t max_header_bytes)
      : socket_(ex), write_wanted_(ex), ready_(ex, Clock::time_point::max()), max_header_bytes_(max_header_bytes) {}
  ~ClientConnection() {
    if (ng_) nghttp2_session_del(ng_);
  }

  // Connects and starts the session; waiters on wait_ready() learn the outcome.
  asio::awaitable<void> connect(tcp::endpoint endpoint, Clock::duration timeout);
  asio::awaitable<error_code> wait_ready() {
    while (!connected_ && !broken_) co_await ready_.async_wait(use_nothrow);
    co_return broken_ ? (connect_error_ ? connect_error_ : error_code(asio::error::connection_reset)) : error_code{};
  }

  // A new stream may go here.
  bool has_room() const {
    if (broken_ || going_away_) return false;
    std::uint32_t limit = kStreamsPerConnection;
    if (ng_) limit = std::min(limit, nghttp2_session_get_remote_settings(ng_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS));
    return streams_.size() + opening_ < limit;
  }
  bool idle() const { return streams_.empty() && opening_ == 0; }
  bool broken() const { return broken_; }
  void reserve() { ++opening_; }
  void unreserve() { --opening_; }

  error_code submit(const FieldList& fields, bool end_stream, const std::shared_ptr<ClientStreamState>& st);
  void resume(ClientStreamState& st) {
    if (st.deferred && !st.closed && ng_) {
      st.deferred = false;
      nghttp2_session_resume_data(ng_, st.id);
    }
    write_wanted_.notify();
  }
  void consume(ClientStreamState& st, std::size_t n) {
    if (n == 0 || !ng_ || broken_) return;
    nghttp2_session_consume(ng_, st.id, n);
    write_wanted_.notify();
  }
  void reset(ClientStreamState& st) {
    st.cancelled = true;
    if (!st.closed && ng_ && !broken_) {
      nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_CANCEL);
      write_wanted_.notify();
    }
    // Bytes nobody will read still hold the connection window.
    consume(st, st.body.size());
    st.body.clear();
    st.send_space.notify();
    st.received.notify();
  }
  // No new streams; the connection closes once its streams end.
  void retire() {
    going_away_ = true;
    if (streams_.empty() && opening_ == 0) close();
    write_wanted_.notify();
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
  static int on_invalid_header(nghttp2_session*, const nghttp2_frame*, const uint8_t*, size_t, const uint8_t*,
                               size_t, uint8_t, void*) {
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // an invalid field name or value makes it malformed
  }
  static ssize_t read_request(nghttp2_session*, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                              nghttp2_data_source* src, void* self);

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
    write_wanted_.notify();
  }

  tcp::socket socket_;
  nghttp2_session* ng_ = nullptr;
  std::unordered_map<std::int32_t, std::shared_ptr<ClientStreamState>> streams_;
  Notifier write_wanted_;
  asio::steady_timer ready_;
  std::size_t max_header_bytes_;
  std::size_t opening_ = 0;  // open() calls waiting for this connection
  bool connected_ = false;
  bool broken_ = false;
  bool going_away_ = false;
  error_code connect_error_;
};

ClientConnection& conn_of(void* p) { return *static_cast<ClientConnection*>(p); }

int ClientConnection::on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* p) {
  auto* st = conn_of(p).find(f->hd.stream_id);
  if (st && f->hd.type == NGHTTP2_HEADERS) {
    st->building = {};
    st->header_bytes = 0;
  }
  return 0;
}

int ClientConnection::on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                                const uint8_t* value, size_t valuelen, uint8_t, void* p) {
  auto& self = conn_of(p);
  auto* st = self.find(f->hd.stream_id);
  if (!st || f->hd.type != NGHTTP2_HEADERS) return 0;
  auto n = as_view(name, namelen);
  auto v = as_view(value, valuelen);
  if (st->final_head) {  // trailers
    st->trailer_bytes += namelen + valuelen + 32;
    if (st->trailer_bytes > self.max_header_bytes_) {
      st->failure = http::error::header_limit;
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets this stream only
    }
    st->trailers.emplace_back(n, v);
    return 0;
  }
  st->header_bytes += namelen + valuelen + 32;
  if (st->header_bytes > self.max_header_bytes_) {
    st->failure = http::error::header_limit;
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets this stream only
  }
  if (n == ":status") {
    unsigned status = 0;
    std::from_chars(v.data(), v.data() + v.size(), status);  // nghttp2 checked it is three digits
    st->building.result(status);
  } else {
    st->building.insert(n, v);
  }
  return 0;
}

int ClientConnection::on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* p) {
  auto& self = conn_of(p);
  if (f->hd.type == NGHTTP2_GOAWAY) {
    // Streams above the last one the app will process are closed as refused by nghttp2.
    self.going_away_ = true;
    return 0;
  }
  auto* st = self.find(f->hd.stream_id);
  if (!st) return 0;
  const bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (f->hd.type == NGHTTP2_HEADERS && !st->final_head) {
    st->building.version(11);
    const auto status = st->building.result_int();
    if (status >= 200) {
      st->final_head = true;
      st->head_has_end = end;
    }
    st->heads.push_back(std::move(st->building));
    st->building = {};
  }
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) && end) st->body_done = true;
  st->received.notify();
  return 0;
}

int ClientConnection::on_data_chunk(nghttp2_session* ng, uint8_t, int32_t id, const uint8_t* data, size_t len,
                                    void* p) {
  auto* st = conn_of(p).find(id);
  if (!st || st->cancelled) {
    nghttp2_session_consume(ng, id, len);  // nobody will read it: keep the connection window open
    return 0;
  }
  st->body.commit(asio::buffer_copy(st->body.prepare(len), asio::buffer(data, len)));
  st->received.notify();
  return 0;
}

int ClientConnection::on_stream_close(nghttp2_session*, int32_t id, uint32_t error, void* p) {
  auto& self = conn_of(p);
  auto it = self.streams_.find(id);
  if (it == self.streams_.end()) return 0;
  auto st = std::move(it->second);
  self.streams_.erase(it);
  st->closed = true;
  if (!st->body_done && !st->failure) {
    st->refused = error == NGHTTP2_REFUSED_STREAM && st->heads.empty();
    st->failure = error == NGHTTP2_NO_ERROR ? error_code(http::error::partial_message)
                                            : error_code(asio::error::connection_reset);
  }
  st->send_space.notify();
  st->received.notify();
  if (self.going_away_ && self.streams_.empty() && self.opening_ == 0) self.write_wanted_.notify();
  return 0;
}

int ClientConnection::on_invalid_frame(nghttp2_session*, const nghttp2_frame* f, int error, void* p) {
  auto* st = conn_of(p).find(f->hd.stream_id);
  if (st && !st->failure) {
    st->failure = http::error::bad_field;
    log::warn("h2c upstream: malformed response from the app")
        .kv("stream", f->hd.stream_id)
        .kv("error", nghttp2_strerror(error));
  }
  return 0;
}

ssize_t ClientConnection::read_request(nghttp2_session* ng, int32_t id, uint8_t* buf, size_t length,
                                       uint32_t* flags, nghttp2_data_source* src, void*) {
  auto* st = static_cast<ClientStreamState*>(src->ptr);
  auto n = take_body(ng, id, buf, length, flags, st->send, st->send_done, st->send_trailers, st->deferred);
  if (n > 0) st->send_space.notify();
  return n;
}

bool ClientConnection::start() {
  nghttp2_session_callbacks* cb;
  if (nghttp2_session_callbacks_new(&cb) != 0) return false;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, &on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, &on_stream_close);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, &on_invalid_frame);
  nghttp2_session_callbacks_set_on_invalid_header_callback(cb, &on_invalid_header);
  nghttp2_option* opt;
  nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  int rv = nghttp2_session_client_new2(&ng_, cb, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (rv != 0) return false;
  nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kStreamWindow)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(max_header_bytes_)},
  };
  nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(ng_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
  return true;
}

asio::awaitable<void> ClientConnection::connect(tcp::endpoint endpoint, Clock::duration timeout) {
  auto self = shared_from_this();
  asio::steady_timer timer(socket_.get_executor(), timeout);
  using namespace asio::experimental::awaitable_operators;
  auto result = co_await (socket_.async_connect(endpoint, use_nothrow) || timer.async_wait(use_nothrow));
  error_code ec = result.index() == 1 ? error_code(asio::error::timed_out) : std::get<0>(std::get<0>(result));
  if (!ec) socket_.set_option(tcp::no_delay(true), ec);
  if (!ec && !start()) ec = asio::error::no_memory;
  if (ec) {
    connect_error_ = ec;
    broken_ = true;
    ready_.cancel();
    co_return;
  }
  connected_ = true;
  ready_.cancel();
  asio::co_spawn(socket_.get_executor(), [self]() { return self->writer(); }, asio::detached);
  asio::co_spawn(socket_.get_executor(), [self]() { return self->reader(); }, asio::detached);
}

error_code ClientConnection::submit(const FieldList& fields, bool end_stream,
                                    const std::shared_ptr<ClientStreamState>& st) {
  if (broken_) return asio::error::connection_reset;
  auto nva = to_nva(fields);
  nghttp2_data_provider prd{.source = {.ptr = st.get()}, .read_callback = &read_request};
  std::int32_t id = nghttp2_submit_request(ng_, nullptr, nva.data(), nva.size(), end_stream ? nullptr : &prd, nullptr);
  if (id < 0) {
    if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) retire();  // the next stream goes to a new connection
    return asio::error::connection_refused;
  }
  st->id = id;
  st->send_done = end_stream;
  streams_.emplace(id, st);
  write_wanted_.notify();
  return {};
}

void ClientConnection::fail_all(error_code ec) {
  broken_ = true;
  for (auto& [id, st] : streams_) {
    st->closed = true;
    if (!st->body_done && !st->failure) st->failure = ec;
    st->send_space.notify();
    st->received.notify();
  }
  streams_.clear();
}

asio::awaitable<void> ClientConnection::reader() {
  std::vector<char> buf(kReadChunk);
  while (!broken_) {
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buf), use_nothrow);
    if (ec) break;
    auto rv = nghttp2_session_mem_recv(ng_, reinterpret_cast<const uint8_t*>(buf.data()), n);
    write_wanted_.notify();
    if (rv < 0) {
      log::warn("h2c upstream: protocol error from the app").kv("error", nghttp2_strerror(static_cast<int>(rv)));
      break;
    }
  }
  fail_all(asio::error::connection_reset);
  close();
}

asio::awaitable<void> ClientConnection::writer() {
  std::string out;
  while (!broken_) {
    out.clear();
    while (out.size() < kWriteBatch) {
      const uint8_t* data = nullptr;
      auto n = nghttp2_session_mem_send(ng_, &data);
      if (n <= 0) {
        if (n < 0) broken_ = true;
        break;
      }
      out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    }
    if (!out.empty()) {
      auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(out), use_nothrow);
      (void)n;
      if (ec) broken_ = true;
      continue;
    }
    if (broken_) break;
    if (going_away_ && streams_.empty() && opening_ == 0) break;
    co_await write_wanted_.wait();
  }
  broken_ = true;
  error_code ignore;
  socket_.close(ignore);  // ends the reader
}

ClientStream::ClientStream(std::shared_ptr<ClientConnection> connection, std::shared_ptr<ClientStreamState> state)
    : connection_(std::move(connection)), state_(std::move(state)) {}

ClientStream::~ClientStream() {
  if (!submitted_) {
    connection_->unreserve();
    return;
  }
  if (!state_->closed || state_->body.size() > 0 || reading_.size() > 0) {
    connection_->consume(*state_, reading_.size());  // bytes nobody will read still hold the window
    connection_->reset(*state_);
  }
}

asio::awaitable<error_code> ClientStream::send_head(const UpstreamRequest& request,
                                                    std::optional<asio::const_buffer> body) {
  head_request_ = request.method == "HEAD";
  auto& st = *state_;
  const bool end_stream = request.body.kind == BodyKind::none;
  if (body) {
    st.send.commit(asio::buffer_copy(st.send.prepare(body->size()), *body));
    st.send_done = true;
  }
  submitted_ = true;
  connection_->unreserve();
  co_return connection_->submit(upstream_request_fields(request), end_stream, state_);
}

asio::awaitable<error_code> ClientStream::write_body(asio::const_buffer data) {
  auto& st = *state_;
  while (st.send.size() >= kSendBuffer && !st.closed && !st.cancelled) co_await st.send_space.wait();
  if (st.cancelled) co_return asio::error::operation_aborted;
  if (st.closed) co_return st.failure ? st.failure : error_code(asio::error::broken_pipe);
  st.send.commit(asio::buffer_copy(st.send.prepare(data.size()), data));
  connection_->resume(st);
  co_return error_code{};
}

asio::awaitable<error_code> ClientStream::end_body(const FieldList& trailers) {
  auto& st = *state_;
  if (st.cancelled) co_return asio::error::operation_aborted;
  if (!st.send_done) {
    st.send_done = true;
    st.send_trailers = trailers;
    connection_->resume(st);
  }
  co_return error_code{};
}

asio::awaitable<std::tuple<error_code, const http::response_header<>*>> ClientStream::read_head() {
  auto& st = *state_;
  while (st.heads.empty() && !st.closed && !st.cancelled) co_await st.received.wait();
  if (st.cancelled) co_return std::tuple{error_code(asio::error::operation_aborted), nullptr};
  if (st.heads.empty())
    co_return std::tuple{st.failure ? st.failure : error_code(http::error::partial_message), nullptr};
  head_ = std::move(st.heads.front());
  st.heads.pop_front();
  co_return std::tuple{error_code{}, &head_};
}

BodyInfo ClientStream::response_body() const {
  std::optional<std::uint64_t> length;
  if (auto cl = head_[http::field::content_length]; !cl.empty()) {
    std::uint64_t v = 0;
    auto [ptr, err] = std::from_chars(cl.data(), cl.data() + cl.size(), v);
    if (err == std::errc() && ptr == cl.data() + cl.size()) length = v;  // nghttp2 checked it against the body
  }
  const unsigned status = head_.result_int();
  const bool bodiless = state_->head_has_end || head_request_ || status == 204 || status == 304;
  if (bodiless) {
    // A response that ended with its head has no body: say so to an HTTP/1.1 client (Content-Length: 0).
    if (!length && !head_request_ && status != 204 && status != 304) length = 0;
    return {.kind = BodyKind::none, .content_length = length};
  }
  if (length) return {.kind = *length == 0 ? BodyKind::none : BodyKind::length, .content_length = length};
  return {.kind = BodyKind::unknown};
}

bool ClientStream::body_at_hand() const { return state_->body.size() > 0; }

asio::awaitable<BodyRead> ClientStream::read_body() {
  auto& st = *state_;
  if (reading_.size() == 0) {
    while (st.body.size() == 0 && !st.body_done && !st.closed && !st.cancelled) co_await st.received.wait();
    if (st.cancelled) co_return BodyRead{asio::error::operation_aborted, {}};
    if (st.body.size() == 0) {
      if (st.body_done) co_return BodyRead{};
      co_return BodyRead{st.failure ? st.failure : error_code(http::error::partial_message), {}};
    }
    // The forwarder reads from a buffer the callbacks do not touch: DATA keeps arriving meanwhile.
    std::swap(st.body, reading_);
  }
  co_return BodyRead{error_code{}, reading_.data()};
}

void ClientStream::consume_body(std::size_t n) {
  reading_.consume(n);
  connection_->consume(*state_, n);  // only now may the app send more
}

const FieldList& ClientStream::trailers() { return state_->trailers; }

void ClientStream::cancel() {
  if (submitted_) connection_->reset(*state_);
  else state_->cancelled = true;
}

Staleness ClientStream::stale() const { return state_->refused ? Staleness::unprocessed : Staleness::fresh; }

ClientPool::ClientPool(const asio::any_io_executor& ex, tcp::endpoint endpoint, Clock::duration connect_timeout,
                       std::size_t max_response_header_bytes)
    : ex_(ex), endpoint_(endpoint), connect_timeout_(connect_timeout),
      max_response_header_bytes_(max_response_header_bytes) {}

ClientPool::~ClientPool() {
  for (auto& c : connections_) c->retire();
}

asio::awaitable<std::tuple<error_code, std::unique_ptr<ClientStream>>> ClientPool::open() {
  std::erase_if(connections_, [](const auto& c) { return c->broken(); });
  std::shared_ptr<ClientConnection> conn;
  for (auto& c : connections_)
    if (c->has_room()) {
      conn = c;
      break;
    }
  if (!conn) {
    conn = std::make_shared<ClientConnection>(ex_, max_response_header_bytes_);
    connections_.push_back(conn);
    asio::co_spawn(ex_, conn->connect(endpoint_, connect_timeout_), asio::detached);
  }
  conn->reserve();  // until the stream's send_head submits it (or the stream goes)
  error_code ec = co_await conn->wait_ready();
  if (ec) {
    conn->unreserve();
    co_return std::tuple{ec, nullptr};
  }
  co_return std::tuple{error_code{}, std::make_unique<ClientStream>(conn, std::make_shared<ClientStreamState>(ex_))};
}

void ClientPool::close_idle() {
  std::erase_if(connections_, [](const auto& c) {
    if (!c->idle()) return false;
    c->retire();
    return true;
  });
}

asio::awaitable<std::optional<bool>> speaks_h2c(const asio::any_io_executor& ex, tcp::endpoint endpoint,
                                                Clock::duration timeout) {
  using namespace asio::experimental::awaitable_operators;
  tcp::socket socket(ex);
  asio::steady_timer timer(ex, timeout);
  auto ask = [&]() -> asio::awaitable<std::optional<bool>> {
    auto [cec] = co_await socket.async_connect(endpoint, use_nothrow);
    if (cec) co_return std::nullopt;
    // The client preface, then an empty SETTINGS frame.
    static constexpr char kHello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
    auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(kHello, sizeof kHello - 1), use_nothrow);
    (void)wn;
    if (wec) co_return false;
    // An HTTP/2 server's first frame is SETTINGS (type 4 at offset 3); an HTTP/1.1 one answers with
    // "HTTP/1.1 400" or closes.
    std::array<char, 9> frame{};
    auto [rec, rn] = co_await asio::async_read(socket, asio::buffer(frame), use_nothrow);
    (void)rn;
    co_return !rec && frame[3] == 0x04 && frame[4] == 0 && frame[5] == 0 && frame[6] == 0 && frame[7] == 0 && frame[8] == 0;
  };
  auto result = co_await (ask() || timer.async_wait(use_nothrow));
  if (result.index() == 1) co_return std::nullopt;
  co_return std::get<0>(result);
}

FieldList upstream_request_fields(const UpstreamRequest& request) {
  struct Fields final : FieldSink {
    FieldList list;
    std::string authority;
    void field(std::string_view name, std::string_view value) override {
      std::string lower = lowercase(name);
      if (lower == "host") {
        authority.assign(value);
        return;
      }
      list.emplace_back(std::move(lower), value);
    }
  } fields;
  fields.list.reserve(16);
  fields.list.emplace_back(":method", request.method);
  fields.list.emplace_back(":scheme", "http");
  fields.list.emplace_back(":authority", "");
  fields.list.emplace_back(":path", request.target);
  request.fields(fields);
  if (fields.authority.empty()) fields.list.erase(fields.list.begin() + 2);  // no Host: none to give
  else fields.list[2].second = std::move(fields.authority);
  if (request.body.kind == BodyKind::length && request.body.content_length)
    fields.list.emplace_back("content-length", std::to_string(*request.body.content_length));
  return std::move(fields.list);
}

}  // namespace sluice::proxy::h2
