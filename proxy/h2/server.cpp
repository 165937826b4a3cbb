// The HTTP/2 server codec; see server.h.
#include "proxy/h2/server.h"

#include <nghttp2/nghttp2.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <charconv>
#include <cstring>

#include <memory>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "proxy/completion.h"
#include "proxy/forwarder.h"
#include "proxy/h1/message.h"
#include "proxy/h2/frames.h"
#include "proxy/h2/guard.h"
#include "proxy/h2/validate.h"
#include "proxy/headers.h"
#include "proxy/notifier.h"

namespace sluice::proxy::h2 {
namespace {

// Per-stream receive window: how much of a request body may wait in sluice for the app.
constexpr std::int32_t kStreamWindow = 256 * 1024;
constexpr std::int32_t kConnectionWindow = 4 * 1024 * 1024;
// How much of a response body is read from the app ahead of the client's window.
constexpr std::size_t kResponseBuffer = 64 * 1024;
constexpr std::size_t kWriteBatch = 64 * 1024;

// HTTP/2 forbids connection-specific fields (RFC 9113 §8.2.2).
bool is_connection_specific(std::string_view lower_name) {
  return lower_name == "connection" || lower_name == "keep-alive" || lower_name == "proxy-connection" ||
         lower_name == "transfer-encoding" || lower_name == "upgrade" || lower_name == "te";
}

class Session;

// One stream: the client's request and the response going back, as the forwarder sees it.
class Stream final : public ServerExchange {
 public:
  Stream(Session& session, const asio::any_io_executor& ex, std::int32_t stream_id);

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
  asio::awaitable<void> send_local(const LocalAnswer& answer) override;
  void abort() override;
  asio::awaitable<void> tunnel(tcp::socket&, beast::flat_buffer&, Clock::time_point&) override { co_return; }
  asio::awaitable<void> flushed() override {
    while (state != State::closed) co_await closed_signal.wait();
  }
  void cancel_io() override {
    cancelled = true;
    request_data.notify();
    response_space.notify();
  }
  bool answers_mid_body() const override { return false; }
  void stop_reading() override {
    stopped = true;
    request_data.notify();
  }

  // Where the stream is: receiving the request (headers, then body), both directions open, the
  // response complete on our side, or closed by nghttp2 (completed, reset by either side, or the
  // connection ended).
  enum class State { open, responded, closed };

  Session& session;
  std::int32_t id;
  State state = State::open;
  http::request_header<> req;
  BodyInfo body_info;
  std::string authority;
  bool has_method = false, has_path = false;
  std::size_t header_bytes = 0;
  std::size_t trailer_bytes = 0;
  bool too_large = false;     // the header list passed max_header_bytes: the rest is ignored, 431
  bool request_done = false;  // END_STREAM received
  bool reset = false;         // closed before the exchange ended (RST_STREAM, GOAWAY, connection gone)
  bool cancelled = false;     // a deadline passed: waits end with an error
  bool stopped = false;       // the forwarder wants no more request body

  beast::flat_buffer request_body_;     // received from the client, not yet read by the forwarder
  beast::flat_buffer request_sending_;  // read by the forwarder (request_body_ keeps filling meanwhile)
  FieldList request_trailers_;
  Notifier request_data;  // more request body, its end, or a reset

  beast::flat_buffer response_body;  // from the app, not yet taken by nghttp2
  bool response_done = false;
  bool deferred = false;  // nghttp2 waits for resume_data
  FieldList response_trailers;
  Notifier response_space;  // nghttp2 took bytes, or the stream went away
  Notifier closed_signal;
};

class Session final : public ConnectionHandle {
 public:
  Session(WorkerContext& worker, Downstream socket, std::string peer_address, std::string peer)
      : worker_(worker),
        socket_(std::move(socket)),
        peer_address_(std::move(peer_address)),
        peer_(std::move(peer)),
        write_wanted_(socket_.get_executor()),
        streams_finished_(socket_.get_executor()),
        idle_timer_(socket_.get_executor()),
        guard_(worker_.config.limits.h2),
        stall_timer_(socket_.get_executor()) {
    worker_.connections.insert(this);
  }
  ~Session() {
    worker_.connections.erase(this);
    if (ng_) nghttp2_session_del(ng_);
  }

  asio::awaitable<void> run(const std::string& initial, std::optional<UpgradeRequest>& upgrade);
  void close_when_idle() override;

  // For the streams.
  void submit_local(Stream& s, const LocalAnswer& a);
  // The app's response head; an interim (1xx) one goes out as a HEADERS frame of its own.
  void submit_head(Stream& s, const http::response_header<>& res, bool with_body, bool interim);
  void reset_stream(Stream& s, std::uint32_t error);
  void consume(Stream& s, std::size_t n);
  void resume(Stream& s) {
    if (s.deferred && s.state != Stream::State::closed) {
      s.deferred = false;
      nghttp2_session_resume_data(ng_, s.id);
    }
    write_wanted_.notify();
  }
  const std::string& peer_address() const { return peer_address_; }
  bool is_tls() const { return socket_.is_tls(); }

 private:
  // nghttp2 callbacks.
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* self);
  static int on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t flags, void* self);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* self);
  static int on_data_chunk(nghttp2_session*, uint8_t flags, int32_t id, const uint8_t* data, size_t len,
                           void* self);
  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error, void* self);
  // Abuse and RFC 9113 §8 hooks (the accounting is in guard.h).
  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* self);
  static int on_invalid_frame(nghttp2_session*, const nghttp2_frame* f, int error, void* self);
  static int on_invalid_header(nghttp2_session*, const nghttp2_frame*, const uint8_t*, size_t, const uint8_t*,
                               size_t, uint8_t, void*) {
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // malformed (RFC 9113 §8.2.1): RST_STREAM PROTOCOL_ERROR
  }
  bool reject_stream(std::int32_t id, std::string_view why);
  void end_abusive(std::uint32_t code, std::string_view why, bool cut = false);
  bool response_waiting() const;
  static ssize_t read_response(nghttp2_session*, int32_t id, uint8_t* buf, size_t length,
                               uint32_t* flags, nghttp2_data_source* src, void* self);

  bool start(std::string_view upgrade_settings, bool head_upgrade);
  std::shared_ptr<Stream> find(std::int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second;
  }
  void launch(std::shared_ptr<Stream> s);
  asio::awaitable<void> writer();
  asio::awaitable<void> idle_watch();
  asio::awaitable<void> serve_stream(std::shared_ptr<Stream> s);
  bool done() const { return !nghttp2_session_want_read(ng_) && !nghttp2_session_want_write(ng_); }

  WorkerContext& worker_;
  Downstream socket_;
  std::string peer_address_, peer_;
  nghttp2_session* ng_ = nullptr;
  std::unordered_map<std::int32_t, std::shared_ptr<Stream>> streams_;
  std::size_t running_ = 0;  // serve_stream() coroutines not yet finished
  Notifier write_wanted_;
  Notifier streams_finished_;
  asio::steady_timer idle_timer_;
  bool going_away_ = false;
  bool broken_ = false;
  Clock::time_point last_activity_ = Clock::now();
  ConnectionGuard guard_;
  asio::steady_timer stall_timer_;
  bool writing_ = false;        // a socket write is under way
  bool rejection_logged_ = false;
};

Session& self_of(void* p) { return *static_cast<Session*>(p); }

int Session::on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* p) {
  auto& self = self_of(p);
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto s = std::make_shared<Stream>(self, self.socket_.get_executor(), f->hd.stream_id);
  self.streams_.emplace(f->hd.stream_id, std::move(s));
  return 0;
}

int Session::on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* p) {
  auto& self = self_of(p);
  auto s = self.find(f->hd.stream_id);
  if (!s) return 0;
  std::string_view n(reinterpret_cast<const char*>(name), namelen);
  std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  const auto max_bytes = self.worker_.config.limits.max_header_bytes;
  if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_HEADERS) {  // trailers
    s->trailer_bytes += namelen + valuelen + 32;
    if (s->trailer_bytes > max_bytes) {
      self.reject_stream(s->id, "request trailers too large");
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // RST_STREAM for this stream only
    }
    s->request_trailers_.emplace_back(n, v);
    return 0;
  }
  s->header_bytes += namelen + valuelen + 32;
  if (s->header_bytes > max_bytes) {
    s->too_large = true;  // answered 431 once the block has ended; the rest is not kept
    // Far beyond: HPACK amplification (one byte naming a 4 KiB table entry). A reset stops nghttp2
    // from checking every further field of the block.
    if (s->header_bytes > 4 * max_bytes) {
      self.reject_stream(s->id, "request header list amplified beyond the limit");
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
  }
  if (n == ":method") {
    s->req.method_string(v);
    s->has_method = true;
  } else if (n == ":path") {
    s->req.target(v);
    s->has_path = true;
  } else if (n == ":authority") {
    s->authority.assign(v);
  } else if (n == ":scheme" || n == ":protocol") {
    // The app sees X-Forwarded-Proto / Forwarded; the scheme of the hop is the listener's.
  } else if (n == "cookie" && s->req.find(http::field::cookie) != s->req.end()) {
    // HTTP/2 splits cookies into several fields; HTTP/1.1 needs them joined (RFC 9113 §8.2.3).
    std::string joined(s->req[http::field::cookie]);
    joined += "; ";
    joined += v;
    s->req.set(http::field::cookie, joined);
  } else {
    s->req.insert(n, v);
  }
  return 0;
}

int Session::on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* p) {
  auto& self = self_of(p);
  auto s = self.find(f->hd.stream_id);
  if (!s) return 0;
  bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
    s->request_done = end;
    self.launch(s);
    return 0;
  }
  if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) && end) {
    s->request_done = true;
    s->request_data.notify();
  }
  return 0;
}

int Session::on_data_chunk(nghttp2_session* ng, uint8_t, int32_t id, const uint8_t* data, size_t len,
                           void* p) {
  auto& self = self_of(p);
  auto s = self.find(id);
  if (!s || s->reset || s->stopped) {
    nghttp2_session_consume(ng, id, len);  // nobody will take it: keep the connection window open
    return 0;
  }
  auto buf = s->request_body_.prepare(len);
  std::memcpy(buf.data(), data, len);
  s->request_body_.commit(len);
  s->request_data.notify();
  return 0;
}

int Session::on_stream_close(nghttp2_session*, int32_t id, uint32_t error, void* p) {
  auto& self = self_of(p);
  auto it = self.streams_.find(id);
  if (it == self.streams_.end()) return 0;
  auto s = it->second;
  self.streams_.erase(it);
  s->state = Stream::State::closed;
  if (error != NGHTTP2_NO_ERROR || !s->response_done) s->reset = true;
  if (s->reset && s->watcher) s->watcher->client_gone();
  s->request_data.notify();
  s->response_space.notify();
  s->closed_signal.notify();
  return 0;
}

int Session::on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* p) {
  auto& self = self_of(p);
  return self.guard_.frame(*hd) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;  // fatal: end_abusive() follows
}

int Session::on_invalid_frame(nghttp2_session*, const nghttp2_frame* f, int error, void* p) {
  auto& self = self_of(p);
  if (f->hd.stream_id == 0) return 0;  // a connection error: nghttp2 sends GOAWAY itself
  return self.reject_stream(f->hd.stream_id, nghttp2_strerror(error)) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

bool Session::reject_stream(std::int32_t id, std::string_view why) {
  if (!rejection_logged_) {  // once per connection: a flood of them ends in end_abusive()'s line
    rejection_logged_ = true;
    log::info("h2 stream rejected").kv("peer", peer_).kv("stream", id).kv("reason", why);
  }
  if (guard_.stream_rejected()) return true;
  end_abusive(NGHTTP2_ENHANCE_YOUR_CALM, why);
  return false;
}

void Session::end_abusive(std::uint32_t code, std::string_view why, bool cut) {
  if (broken_) return;
  log::warn("h2 connection closed")
      .kv("peer", peer_)
      .kv("limit", guard_.violation().empty() ? std::string_view("-") : guard_.violation())
      .kv("reason", why)
      .kv("goaway", nghttp2_http2_strerror(code));
  going_away_ = true;
  nghttp2_session_terminate_session(ng_, code);  // the writer sends the GOAWAY, then ends the read loop
  write_wanted_.notify();
  if (writing_ && cut) {  // the client does not read: no GOAWAY will get through
    error_code ignore;
    socket_.cancel(ignore);
  }
}

bool Session::response_waiting() const {
  if (writing_) return true;
  for (const auto& [id, s] : streams_)
    if (s->response_body.size() > 0) return true;
  return false;
}

ssize_t Session::read_response(nghttp2_session* ng, int32_t id, uint8_t* buf, size_t length,
                               uint32_t* flags, nghttp2_data_source* src, void*) {
  auto* s = static_cast<Stream*>(src->ptr);
  auto n = take_body(ng, id, buf, length, flags, s->response_body, s->response_done, s->response_trailers, s->deferred);
  if (n > 0) {
    s->response_space.notify();
    s->session.guard_.progress();
  }
  return n;
}

bool Session::start(std::string_view upgrade_settings, bool head_upgrade) {
  nghttp2_session_callbacks* cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &Session::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, &Session::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &Session::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &Session::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, &Session::on_stream_close);
  nghttp2_session_callbacks_set_on_begin_frame_callback(cb, &Session::on_begin_frame);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, &Session::on_invalid_frame);
  nghttp2_session_callbacks_set_on_invalid_header_callback(cb, &Session::on_invalid_header);
  nghttp2_option* opt;
  nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  guard_.configure(opt);
  int rv = nghttp2_session_server_new2(&ng_, cb, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (rv != 0) return false;
  const auto& limits = worker_.config.limits;
  nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits.h2.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kStreamWindow)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(limits.max_header_bytes)},
  };
  nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(ng_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
  if (!upgrade_settings.empty() || head_upgrade) {
    rv = nghttp2_session_upgrade2(ng_, reinterpret_cast<const uint8_t*>(upgrade_settings.data()),
                                  upgrade_settings.size(), head_upgrade ? 1 : 0, nullptr);
    if (rv != 0) return false;
  }
  return true;
}

void Session::consume(Stream& s, std::size_t n) {
  if (n == 0) return;
  nghttp2_session_consume(ng_, s.id, n);
  write_wanted_.notify();
}

void Session::reset_stream(Stream& s, std::uint32_t error) {
  if (s.state == Stream::State::closed) return;
  s.reset = true;
  nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, s.id, error);
  write_wanted_.notify();
}

void Session::submit_local(Stream& s, const LocalAnswer& a) {
  std::string status = std::to_string(a.status);
  std::string body = a.body;
  if (!a.exact_body) body += '\n';
  std::string length = std::to_string(body.size());
  std::vector<nghttp2_nv> nva;
  auto add = [&nva](std::string_view n, std::string_view v) {
    nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                   reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                   NGHTTP2_NV_FLAG_NONE});
  };
  add(":status", status);
  add("content-type", "text/plain; charset=utf-8");
  add("content-length", length);
  if (!a.network_hash.empty()) add("k-network-hash", a.network_hash);
  s.response_body.commit(asio::buffer_copy(s.response_body.prepare(body.size()), asio::buffer(body)));
  s.response_done = true;
  s.state = Stream::State::responded;
  nghttp2_data_provider prd{.source = {.ptr = &s}, .read_callback = &Session::read_response};
  nghttp2_submit_response(ng_, s.id, nva.data(), nva.size(), body.empty() ? nullptr : &prd);
  write_wanted_.notify();
}

void Session::submit_head(Stream& s, const http::response_header<>& res, bool with_body, bool interim) {
  std::vector<std::string> names;
  std::vector<nghttp2_nv> nva;
  std::string status = std::to_string(res.result_int());
  names.reserve(32);
  auto add = [&nva](std::string_view n, std::string_view v) {
    nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                   reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                   NGHTTP2_NV_FLAG_NONE});
  };
  add(":status", status);
  std::vector<std::string> lowered;
  lowered.reserve(static_cast<std::size_t>(std::distance(res.begin(), res.end())));
  for (const auto& f : res) {
    lowered.push_back(lowercase(f.name_string()));
    if (is_connection_specific(lowered.back())) continue;
    add(lowered.back(), f.value());
  }
  if (interim) {
    nghttp2_submit_headers(ng_, NGHTTP2_FLAG_NONE, s.id, nullptr, nva.data(), nva.size(), nullptr);
  } else {
    nghttp2_data_provider prd{.source = {.ptr = &s}, .read_callback = &Session::read_response};
    nghttp2_submit_response(ng_, s.id, nva.data(), nva.size(), with_body ? &prd : nullptr);
  }
  write_wanted_.notify();
}

void Session::launch(std::shared_ptr<Stream> s) {
  ++running_;
  asio::co_spawn(socket_.get_executor(), serve_stream(std::move(s)), [this](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        log::error("h2 stream failed").kv("error", ex.what());
      }
    }
    if (--running_ == 0) streams_finished_.notify();
  });
}

Stream::Stream(Session& s, const asio::any_io_executor& ex, std::int32_t stream_id)
    : session(s), id(stream_id), request_data(ex), response_space(ex), closed_signal(ex) {
  req.version(11);
}

std::string_view Stream::peer_address() const { return session.peer_address(); }
bool Stream::is_tls() const { return session.is_tls(); }

asio::awaitable<BodyRead> Stream::read_body() {
  if (request_sending_.size() == 0) {
    while (request_body_.size() == 0 && !request_done && !reset && !cancelled && !stopped)
      co_await request_data.wait();
    if (reset || cancelled || stopped) co_return BodyRead{asio::error::operation_aborted, {}};
    if (request_body_.size() == 0) co_return BodyRead{};  // END_STREAM: complete
    // The forwarder reads from a buffer the callbacks do not touch: DATA frames keep arriving meanwhile.
    std::swap(request_body_, request_sending_);
  }
  co_return BodyRead{error_code{}, request_sending_.data()};
}

void Stream::consume_body(std::size_t n) {
  request_sending_.consume(n);
  session.consume(*this, n);  // only now may the client send more
}

std::optional<asio::const_buffer> Stream::body_in_hand() {
  if (!request_done || request_sending_.size() != 0) return std::nullopt;
  std::swap(request_body_, request_sending_);
  return request_sending_.data();
}

asio::awaitable<error_code> Stream::send_interim(const http::response_header<>& head) {
  if (state == State::closed) co_return error_code(asio::error::connection_reset);
  session.submit_head(*this, head, false, true);
  co_return error_code{};
}

asio::awaitable<error_code> Stream::send_head(const http::response_header<>& head, BodyInfo body, bool) {
  if (state == State::closed) co_return error_code(asio::error::connection_reset);
  const bool with_body = body.kind != BodyKind::none;
  if (!with_body) {
    response_done = true;
    state = State::responded;
  }
  session.submit_head(*this, head, with_body, false);
  co_return error_code{};
}

asio::awaitable<error_code> Stream::write_body(asio::const_buffer data) {
  // The app's bytes are taken only while the buffer toward the client has room.
  while (response_body.size() >= kResponseBuffer && state != State::closed && !cancelled)
    co_await response_space.wait();
  if (state == State::closed) co_return error_code(asio::error::connection_reset);
  if (cancelled) co_return error_code(asio::error::operation_aborted);
  response_body.commit(asio::buffer_copy(response_body.prepare(data.size()), data));
  session.resume(*this);
  co_return error_code{};
}

asio::awaitable<error_code> Stream::end_body(const FieldList& trailers) {
  if (state == State::closed) co_return error_code(asio::error::connection_reset);
  response_trailers = trailers;
  response_done = true;
  state = State::responded;
  session.resume(*this);
  co_return error_code{};
}

asio::awaitable<void> Stream::send_local(const LocalAnswer& answer) {
  if (state != State::closed) session.submit_local(*this, answer);
  co_return;
}

void Stream::abort() {
  // The app's response broke off, or a deadline passed after the response started.
  session.reset_stream(*this, cancelled ? NGHTTP2_CANCEL : NGHTTP2_INTERNAL_ERROR);
}

asio::awaitable<void> Session::serve_stream(std::shared_ptr<Stream> s) {
  auto& req = s->req;
  s->record.start = Clock::now();
  s->record.peer = peer_;
  s->record.protocol = "HTTP/2.0";
  if (s->state == Stream::State::closed) co_return;  // reset in the same read as its HEADERS: nothing to forward
  if (!s->has_method || !s->has_path) {  // nghttp2 checks the rest of the pseudo-header rules
    reset_stream(*s, NGHTTP2_PROTOCOL_ERROR);
    co_return;
  }
  if (auto refusal = request_refusal(req, s->authority, s->too_large)) {
    s->record.status = refusal->status;
    if (!reject_stream(s->id, refusal->body)) co_return;
    submit_local(*s, *refusal);
    co_await s->flushed();
    log_exchange(worker_, s->record);
    co_return;
  }
  if (req.find(http::field::host) == req.end() && !s->authority.empty()) req.set(http::field::host, s->authority);
  if (h1::field_count(req) > worker_.config.limits.max_header_count) {
    s->record.status = 431;
    submit_local(*s, {.status = 431, .body = "too many header fields"});
    co_await s->flushed();
    log_exchange(worker_, s->record);
    co_return;
  }
  std::optional<std::uint64_t> content_length;
  if (auto cl = req[http::field::content_length]; !cl.empty()) {
    std::uint64_t v = 0;
    auto [ptr, err] = std::from_chars(cl.data(), cl.data() + cl.size(), v);
    if (err == std::errc() && ptr == cl.data() + cl.size()) content_length = v;  // nghttp2 validated it
  }
  const bool no_body = s->request_done && s->request_body_.size() == 0;
  s->body_info = {.kind = no_body ? BodyKind::none : content_length ? BodyKind::length : BodyKind::unknown,
                  .content_length = content_length};
  co_await forward(worker_, *s);
}

asio::awaitable<void> Session::writer() {
  std::string out;
  while (true) {
    out.clear();
    while (out.size() < kWriteBatch) {
      const uint8_t* data = nullptr;
      auto n = nghttp2_session_mem_send(ng_, &data);
      if (n < 0) {
        broken_ = true;
        break;
      }
      if (n == 0) break;
      out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    }
    if (!out.empty()) {
      writing_ = true;
      auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(out), use_nothrow);
      (void)n;
      writing_ = false;
      guard_.progress();
      if (ec) broken_ = true;
    }
    if (broken_) break;
    if (out.empty()) {
      if (done() || (going_away_ && streams_.empty() && running_ == 0)) break;
      co_await write_wanted_.wait();
    }
  }
  error_code ignore;
  socket_.cancel(ignore);  // ends the reader
}

asio::awaitable<void> Session::idle_watch() {
  const auto limit = worker_.config.timeouts.client_header;
  if (limit.count() <= 0) co_return;
  auto& t = idle_timer_;
  while (!broken_) {
    t.expires_at(last_activity_ + limit);
    co_await t.async_wait(use_nothrow);
    if (broken_ || done()) co_return;
    if (streams_.empty() && running_ == 0 && Clock::now() >= last_activity_ + limit) {
      close_when_idle();
      co_return;
    }
    if (Clock::now() >= last_activity_ + limit) last_activity_ = Clock::now();  // busy, not idle
  }
}

void Session::close_when_idle() {
  if (going_away_ || !ng_) return;
  going_away_ = true;
  nghttp2_submit_goaway(ng_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
  write_wanted_.notify();
}

asio::awaitable<void> Session::run(const std::string& initial, std::optional<UpgradeRequest>& upgrade) {
  error_code ignore;
  socket_.set_option(tcp::no_delay(true), ignore);
  bool head_upgrade = upgrade && upgrade->request.method() == http::verb::head;
  if (!start(upgrade ? std::string_view(upgrade->settings) : std::string_view(), head_upgrade)) {
    socket_.close(ignore);
    co_return;
  }
  if (upgrade) {
    // The upgrading request is stream 1, already half-closed by the client.
    auto s = std::make_shared<Stream>(*this, socket_.get_executor(), 1);
    s->req = std::move(upgrade->request);
    s->req.version(11);
    s->has_method = s->has_path = true;
    s->request_done = true;
    if (!upgrade->body.empty())
      s->request_body_.commit(asio::buffer_copy(s->request_body_.prepare(upgrade->body.size()), asio::buffer(upgrade->body)));
    streams_.emplace(1, s);
    launch(s);
  }
  Completion writer_done(socket_.get_executor());
  asio::co_spawn(socket_.get_executor(), [this, &writer_done]() -> asio::awaitable<void> {
    co_await writer();
    writer_done.signal();
  }, asio::detached);
  Completion idle_done(socket_.get_executor());
  asio::co_spawn(socket_.get_executor(), [this, &idle_done]() -> asio::awaitable<void> {
    co_await idle_watch();
    idle_done.signal();
  }, asio::detached);

  Completion stall_done(socket_.get_executor());
  asio::co_spawn(socket_.get_executor(), [this, &stall_done]() -> asio::awaitable<void> {
    co_await watch_stalls(
        guard_, stall_timer_, [this] { return !broken_; }, [this] { return response_waiting(); },
        [this] { end_abusive(NGHTTP2_ENHANCE_YOUR_CALM, "stalled: response waits on a client that does not read", true); });
    stall_done.signal();
  }, asio::detached);

  std::vector<char> buf(16 * 1024);
  auto feed = [this](const char* data, std::size_t n) {
    auto rv = nghttp2_session_mem_recv(ng_, reinterpret_cast<const uint8_t*>(data), n);
    write_wanted_.notify();
    if (rv < 0) end_abusive(guard_.goaway_code(static_cast<int>(rv)), nghttp2_strerror(static_cast<int>(rv)));
    return rv >= 0;
  };
  bool ok = initial.empty() || feed(initial.data(), initial.size());
  while (ok && !broken_) {
    if (done() || (going_away_ && streams_.empty() && running_ == 0)) break;
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buf), use_nothrow);
    if (ec) break;
    last_activity_ = Clock::now();
    ok = feed(buf.data(), n);
  }
  // Reading is over: streams still running end with it; then the writer flushes what is left.
  for (auto& [id, s] : streams_) {
    s->reset = true;
    s->state = Stream::State::closed;
    if (s->watcher) s->watcher->client_gone();
    s->request_data.notify();
    s->response_space.notify();
    s->closed_signal.notify();
  }
  while (running_ > 0) co_await streams_finished_.wait();
  // Let the writer flush (GOAWAY, last frames) for a moment, not for as long as a stuck client likes.
  broken_ = true;
  write_wanted_.notify();
  {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer flush_limit(socket_.get_executor(), std::chrono::seconds(1));
    co_await (writer_done.wait() || flush_limit.async_wait(use_nothrow));
  }
  socket_.cancel(ignore);
  co_await writer_done.wait();
  idle_timer_.cancel();
  co_await idle_done.wait();
  stall_timer_.cancel();
  co_await stall_done.wait();
  socket_.shutdown(tcp::socket::shutdown_send, ignore);
  socket_.close(ignore);
}

}  // namespace

asio::awaitable<void> serve(WorkerContext& worker, Handover& handover, const std::string& peer_address,
                            const std::string& peer) {
  Session session(worker, std::move(handover.socket), peer_address, peer);
  co_await session.run(handover.initial_bytes, handover.upgrade);
}

}  // namespace sluice::proxy::h2
