// HTTP/2 downstream session; see session.h.
#include "proxy/h2/session.h"

#include <nghttp2/nghttp2.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <charconv>
#include <cstring>

#include <memory>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "proxy/admission.h"
#include "proxy/completion.h"
#include "proxy/h1/body_relay.h"
#include "proxy/h1/message.h"
#include "proxy/h2/frames.h"
#include "proxy/headers.h"
#include "proxy/notifier.h"
#include "proxy/request_log.h"

namespace sluice::proxy::h2 {
namespace {

using h1::Framing;

constexpr std::uint32_t kMaxConcurrentStreams = 100;
// Per-stream receive window: how much of a request body may wait in sluice for the app.
constexpr std::int32_t kStreamWindow = 256 * 1024;
constexpr std::int32_t kConnectionWindow = 4 * 1024 * 1024;
// How much of a response body is read from the app ahead of the client's window.
constexpr std::size_t kResponseBuffer = 64 * 1024;
constexpr std::size_t kWriteBatch = 64 * 1024;
constexpr std::size_t kReadChunk = 16 * 1024;  // one read from the app

// HTTP/2 forbids connection-specific fields (RFC 9113 §8.2.2).
bool is_connection_specific(std::string_view lower_name) {
  return lower_name == "connection" || lower_name == "keep-alive" || lower_name == "proxy-connection" ||
         lower_name == "transfer-encoding" || lower_name == "upgrade" || lower_name == "te";
}

class Session;

struct Stream {
  Stream(const asio::any_io_executor& ex, std::int32_t stream_id)
      : id(stream_id), request_data(ex), response_space(ex), closed_signal(ex) {}

  std::int32_t id;
  http::request_header<> request;
  std::string authority;
  bool has_method = false, has_path = false;
  std::size_t header_bytes = 0;
  bool request_done = false;  // END_STREAM received
  bool closed = false;        // nghttp2 closed the stream
  bool reset = false;         // closed before the exchange ended (RST_STREAM, GOAWAY, timeout)
  bool timed_out = false;
  bool response_started = false;  // the head went to nghttp2: only the whole-request timeout applies now
  Clock::time_point request_deadline = Clock::time_point::max();
  Clock::time_point start;       // the exchange's
  Clock::time_point last_write;  // nghttp2 last took response bytes (REVISION_IDLE_TIMEOUT counts from it)

  beast::flat_buffer request_body;  // received from the client, not yet written to the app
  beast::flat_buffer request_sending;  // being written to the app (request_body keeps filling meanwhile)
  std::vector<std::pair<std::string, std::string>> request_trailers;
  Notifier request_data;            // more request body, its end, or a reset

  beast::flat_buffer response_body;  // read from the app, not yet taken by nghttp2
  std::unique_ptr<char[]> response_scratch;  // reads from the app land here first: the data
                                             // callback may consume response_body meanwhile
  bool response_done = false;
  bool deferred = false;             // nghttp2 waits for resume_data
  std::vector<std::pair<std::string, std::string>> response_trailers;
  Notifier response_space;           // nghttp2 took bytes, or the stream went away

  Notifier closed_signal;
  UpstreamConnection* upstream = nullptr;  // for cancellation
  ClientStream* h2_upstream = nullptr;     // ... when the app speaks h2c
  void cancel_upstream() {
    error_code ignore;
    if (upstream) upstream->socket.cancel(ignore);
    if (h2_upstream) h2_upstream->cancel();
  }
  std::optional<asio::steady_timer> deadline;  // request / response-start timeout, while forwarding
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
        idle_timer_(socket_.get_executor()) {
    worker_.connections.insert(this);
  }
  ~Session() {
    worker_.connections.erase(this);
    if (ng_) nghttp2_session_del(ng_);
  }

  asio::awaitable<void> run(const std::string& initial, std::optional<UpgradeRequest>& upgrade);
  void close_when_idle() override;

 private:
  // nghttp2 callbacks.
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* self);
  static int on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t flags, void* self);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* self);
  static int on_data_chunk(nghttp2_session*, uint8_t flags, int32_t id, const uint8_t* data, size_t len,
                           void* self);
  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error, void* self);
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
  asio::awaitable<void> forward(std::shared_ptr<Stream> s);
  template <class Sink>
  asio::awaitable<void> pump_request(Stream& s, Sink& sink, error_code& result);
  asio::awaitable<void> forward_h2c(std::shared_ptr<Stream> s, ExchangeRecord& record, h2::ClientPool& pool,
                                    std::optional<std::uint64_t> content_length, bool head_request);
  asio::awaitable<void> stream_deadline(std::shared_ptr<Stream> s);
  Clock::time_point stream_due(const Stream& s) const;
  void submit_local(Stream& s, const LocalAnswer& a);
  // An exchange that failed before its response started: 504 when it timed out, else `status`.
  void fail_exchange(Stream& s, ExchangeRecord& record, unsigned status, std::string_view what) {
    record.status = static_cast<int>(s.timed_out ? 504 : status);
    if (s.closed) return;
    if (s.timed_out) submit_local(s, {.status = 504, .body = "request timeout"});
    else submit_local(s, {.status = status, .body = std::string(what)});
  }
  // What this hop adds to requests for the app.
  h1::RequestRewrite rewrite() {
    return {.peer_address = peer_address_, .scheme = socket_.is_tls() ? kHttps : worker_.scheme,
            .request_ids = &worker_.request_ids};
  }
  // The app's response head; an interim (1xx) one goes out as a HEADERS frame of its own.
  void submit_head(Stream& s, const http::response_header<>& res, bool with_body, bool interim = false);
  void reset_stream(Stream& s, std::uint32_t error);
  // The app's response is over: the stream ends when it came whole, else it is reset.
  void end_response(Stream& s, bool complete, int status, Clock::time_point upstream_start);
  void consume(Stream& s, std::size_t n);
  bool done() const { return !nghttp2_session_want_read(ng_) && !nghttp2_session_want_write(ng_); }

  WorkerContext& worker_;
  Downstream socket_;
  std::string peer_address_, peer_;
  nghttp2_session* ng_ = nullptr;
  std::unordered_map<std::int32_t, std::shared_ptr<Stream>> streams_;
  std::size_t running_ = 0;  // forward() coroutines not yet finished
  Notifier write_wanted_;
  Notifier streams_finished_;
  asio::steady_timer idle_timer_;
  bool going_away_ = false;
  bool broken_ = false;
  Clock::time_point last_activity_ = Clock::now();
};

Session& self_of(void* p) { return *static_cast<Session*>(p); }

int Session::on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* p) {
  auto& self = self_of(p);
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto s = std::make_shared<Stream>(self.socket_.get_executor(), f->hd.stream_id);
  s->request.version(11);
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
  if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_HEADERS) {  // trailers
    s->request_trailers.emplace_back(n, v);
    return 0;
  }
  s->header_bytes += namelen + valuelen + 32;
  if (s->header_bytes > self.worker_.config.limits.max_header_bytes) {
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // RST_STREAM for this stream only
  }
  if (n == ":method") {
    s->request.method_string(v);
    s->has_method = true;
  } else if (n == ":path") {
    s->request.target(v);
    s->has_path = true;
  } else if (n == ":authority") {
    s->authority.assign(v);
  } else if (n == ":scheme" || n == ":protocol") {
    // The app sees X-Forwarded-Proto / Forwarded; the scheme of the hop is the listener's.
  } else if (n == "cookie" && s->request.find(http::field::cookie) != s->request.end()) {
    // HTTP/2 splits cookies into several fields; HTTP/1.1 needs them joined (RFC 9113 §8.2.3).
    std::string joined(s->request[http::field::cookie]);
    joined += "; ";
    joined += v;
    s->request.set(http::field::cookie, joined);
  } else {
    s->request.insert(n, v);
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
  if (!s || s->reset) {
    nghttp2_session_consume(ng, id, len);  // nobody will take it: keep the connection window open
    return 0;
  }
  auto buf = s->request_body.prepare(len);
  std::memcpy(buf.data(), data, len);
  s->request_body.commit(len);
  s->request_data.notify();
  return 0;
}

int Session::on_stream_close(nghttp2_session*, int32_t id, uint32_t error, void* p) {
  auto& self = self_of(p);
  auto it = self.streams_.find(id);
  if (it == self.streams_.end()) return 0;
  auto s = it->second;
  self.streams_.erase(it);
  s->closed = true;
  if (error != NGHTTP2_NO_ERROR || !s->response_done) s->reset = true;
  if (s->reset) s->cancel_upstream();
  s->request_data.notify();
  s->response_space.notify();
  s->closed_signal.notify();
  return 0;
}

ssize_t Session::read_response(nghttp2_session* ng, int32_t id, uint8_t* buf, size_t length,
                               uint32_t* flags, nghttp2_data_source* src, void*) {
  auto* s = static_cast<Stream*>(src->ptr);
  auto n = take_body(ng, id, buf, length, flags, s->response_body, s->response_done, s->response_trailers, s->deferred);
  if (n > 0) {
    s->last_write = Clock::now();
    s->response_space.notify();
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
  nghttp2_option* opt;
  nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_settings(opt, 32);
  int rv = nghttp2_session_server_new2(&ng_, cb, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (rv != 0) return false;
  const auto& limits = worker_.config.limits;
  nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
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
  if (s.closed) return;
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
  asio::co_spawn(socket_.get_executor(), forward(std::move(s)), [this](std::exception_ptr e) {
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

// The stream's earliest pending deadline: the whole request; the response start until it started; the
// idle limit since the last response bytes (or the start).
Clock::time_point Session::stream_due(const Stream& s) const {
  const auto& t = worker_.config.timeouts;
  auto d = s.request_deadline;
  if (!s.response_started && t.response_start.count() > 0) d = std::min(d, s.start + t.response_start);
  if (t.idle.count() > 0) d = std::min(d, s.last_write + t.idle);
  return d;
}

asio::awaitable<void> Session::stream_deadline(std::shared_ptr<Stream> s) {
  while (true) {
    auto [ec] = co_await s->deadline->async_wait(use_nothrow);
    if (ec || s->closed || s->response_done) co_return;  // cancelled: the exchange ended in time
    // Deadlines move (the response started, bytes went out): wait again for a later one.
    auto due = stream_due(*s);
    if (Clock::now() < due) {
      s->deadline->expires_at(due);
      continue;
    }
    break;
  }
  s->timed_out = true;
  s->cancel_upstream();
  s->request_data.notify();
  s->response_space.notify();
}

// Where a request body goes: the app's HTTP/1.1 connection (chunked when the length is unknown) ...
struct H1BodySink {
  tcp::socket& socket;
  Framing framing;

  asio::awaitable<error_code> write(asio::const_buffer data) {
    char chunk_head[24];
    std::array<asio::const_buffer, 3> bufs;
    std::size_t count = 0;
    if (framing == Framing::chunked) {
      int len = std::snprintf(chunk_head, sizeof chunk_head, "%zx\r\n", data.size());
      bufs[count++] = asio::buffer(chunk_head, static_cast<std::size_t>(len));
    }
    bufs[count++] = data;
    if (framing == Framing::chunked) bufs[count++] = asio::buffer("\r\n", 2);
    auto [ec, written] = co_await asio::async_write(socket, std::span(bufs.data(), count), use_nothrow);
    (void)written;
    co_return ec;
  }
  asio::awaitable<error_code> finish(const FieldList& trailers) {
    if (framing != Framing::chunked) co_return error_code{};
    std::string tail = "0\r\n";
    for (const auto& [name, value] : trailers) tail += name + ": " + value + "\r\n";
    tail += "\r\n";
    co_return co_await h1::write_all(socket, tail);
  }
};

// ... or an h2c stream to the app.
struct H2BodySink {
  ClientStream& stream;

  asio::awaitable<error_code> write(asio::const_buffer data) { return stream.write(data); }
  asio::awaitable<error_code> finish(const FieldList& trailers) {
    stream.end_request(trailers);
    co_return error_code{};
  }
};

template <class Sink>
asio::awaitable<void> Session::pump_request(Stream& stream, Sink& sink, error_code& result) {
  auto* s = &stream;
  const auto max_body = worker_.config.limits.max_body_bytes;
  std::uint64_t total = 0;
  while (true) {
    while (s->request_body.size() == 0 && !s->request_done && !s->reset && !s->timed_out)
      co_await s->request_data.wait();
    if (s->reset || s->timed_out) {
      result = asio::error::operation_aborted;
      co_return;
    }
    std::size_t n = s->request_body.size();
    total += n;
    if (max_body && total > max_body) {  // a body without a length that grew past the limit
      result = http::error::body_limit;
      reset_stream(*s, NGHTTP2_CANCEL);
      co_return;
    }
    if (n > 0) {
      // Write from a buffer the callbacks do not touch: DATA frames keep arriving meanwhile.
      std::swap(s->request_body, s->request_sending);
      if (auto ec = co_await sink.write(s->request_sending.data())) {
        result = ec;
        co_return;
      }
      s->request_sending.clear();
      consume(*s, n);  // only now may the client send more
    }
    if (s->request_done && s->request_body.size() == 0) break;
  }
  result = co_await sink.finish(s->request_trailers);
}

asio::awaitable<void> Session::forward(std::shared_ptr<Stream> s) {
  auto& req = s->request;
  ExchangeRecord record{.start = Clock::now(), .peer = peer_, .protocol = "HTTP/2.0"};
  const auto& config = worker_.config;
  auto finish = [&]() -> asio::awaitable<void> {
    // The exchange counts until the client has the whole response (or the stream is gone).
    while (!s->closed) co_await s->closed_signal.wait();
    if (config.request_log) {
      record.method = std::string(req.method_string());
      record.target = std::string(req.target());
      write_request_log(record, config.pod_ip);
    }
  };
  if (!s->has_method || !s->has_path) {  // nghttp2 checks the rest of the pseudo-header rules
    reset_stream(*s, NGHTTP2_PROTOCOL_ERROR);
    co_return;
  }
  if (req.find(http::field::host) == req.end() && !s->authority.empty())
    req.set(http::field::host, s->authority);
  if (h1::field_count(req) > config.limits.max_header_count) {
    record.status = 431;
    submit_local(*s, {.status = 431, .body = "too many header fields"});
    co_await finish();
    co_return;
  }
  if (auto probe = probe_kind_of(req); probe != ProbeKind::none) {
    auto answer = co_await answer_health_check(worker_, probe, req);
    record.status = static_cast<int>(answer.status);
    if (!s->closed) submit_local(*s, answer);
    co_await finish();
    co_return;
  }
  CountedExchange counted(worker_, req, record);
  auto deadline = exchange_deadline(config.timeouts, record.start);
  std::optional<BreakerSlot> slot;
  if (auto refused = co_await pass_breaker(worker_, deadline, slot)) {
    record.status = static_cast<int>(refused->status);
    if (!s->closed) submit_local(*s, *refused);
    co_await finish();
    co_return;
  }
  if (s->closed) co_return;
  std::optional<BackendLease> lease;
  if (auto refused = co_await pass_backends(worker_, req, deadline, lease)) {
    record.status = static_cast<int>(refused->status);
    if (!s->closed) submit_local(*s, *refused);
    co_await finish();
    co_return;
  }
  if (s->closed) co_return;
  UpstreamPool& pool = upstream_pool(worker_, lease);
  struct StopDeadline {
    Stream& s;
    ~StopDeadline() {
      if (s.deadline) s.deadline->cancel();
    }
  } stop_deadline{*s};
  if (config.timeouts.request.count() > 0) s->request_deadline = record.start + config.timeouts.request;
  s->start = s->last_write = record.start;
  if (auto due = stream_due(*s); due != Clock::time_point::max()) {
    s->deadline.emplace(socket_.get_executor(), due);
    asio::co_spawn(socket_.get_executor(), stream_deadline(s), asio::detached);
  }

  std::optional<std::uint64_t> content_length;
  if (auto cl = req[http::field::content_length]; !cl.empty()) {
    std::uint64_t v = 0;
    auto [ptr, err] = std::from_chars(cl.data(), cl.data() + cl.size(), v);
    if (err == std::errc() && ptr == cl.data() + cl.size()) content_length = v;  // nghttp2 validated it
  }
  Framing framing = s->request_done && s->request_body.size() == 0 ? Framing::none
                    : content_length                                ? Framing::length
                                                                    : Framing::chunked;
  const auto max_body = config.limits.max_body_bytes;
  if (max_body && content_length && *content_length > max_body) {
    record.status = 413;
    submit_local(*s, {.status = 413, .body = "request body too large"});
    co_await finish();
    co_return;
  }
  auto to_h2c = upstream_h2c_known(worker_, lease);
  if (!to_h2c) to_h2c = co_await detect_upstream_h2c(worker_);
  if (*to_h2c) {
    co_await forward_h2c(s, record, upstream_h2_pool(worker_, lease), content_length,
                         req.method() == http::verb::head);
    co_await finish();
    co_return;
  }
  std::string head;
  auto rw = rewrite();
  h1::format_upstream_request(head, req, framing, framing == Framing::none ? std::nullopt : content_length, rw,
                              record.request_id, record.trace_id);
  const bool head_request = req.method() == http::verb::head;

  auto fail = [&](unsigned status, std::string_view what) { fail_exchange(*s, record, status, what); };

  const auto upstream_start = Clock::now();
  auto [cec, up] = co_await pool.acquire(true);
  if (cec || s->timed_out) {
    fail(502, "bad gateway: upstream connect error: " + cec.message());
    co_await finish();
    co_return;
  }
  s->upstream = up.get();
  error_code pump_ec;
  std::optional<Completion> pumped;
  if (auto [wec, wn] = co_await asio::async_write(up->socket, asio::buffer(head), use_nothrow); wec) {
    s->upstream = nullptr;
    fail(502, "bad gateway: upstream: " + wec.message());
    co_await finish();
    co_return;
  }
  if (framing != Framing::none) {
    pumped.emplace(socket_.get_executor());
    asio::co_spawn(socket_.get_executor(), [&, s]() -> asio::awaitable<void> {
      H1BodySink sink{up->socket, framing};
      co_await pump_request(*s, sink, pump_ec);
      if (pump_ec) {
        error_code ignore;
        up->socket.cancel(ignore);
      }
      pumped->signal();
    }, asio::detached);
  }

  std::optional<h1::ResponseParser> response;
  error_code ec;
  while (true) {  // interim responses (1xx) other than 100 (answered by sluice) are passed on
    response.emplace();
    response->header_limit(static_cast<std::uint32_t>(config.limits.max_response_header_bytes));
    response->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (head_request) response->skip(true);
    auto [rec, rn] = co_await http::async_read_header(up->socket, up->buffer, *response, use_nothrow);
    (void)rn;
    ec = rec;
    if (ec || !h1::is_interim(response->get().result_int())) break;
    if (response->get().result_int() != 100 && !s->closed) submit_head(*s, response->get().base(), false, true);
  }
  auto& parser = *response;
  auto end_pump = [&]() -> asio::awaitable<void> {
    if (!pumped) co_return;
    if (!pumped->done()) {
      error_code ignore;
      up->socket.cancel(ignore);
      s->request_data.notify();
    }
    co_await pumped->wait();
  };
  if (ec) {
    co_await end_pump();
    s->upstream = nullptr;
    fail(502, "bad gateway: upstream: " + ec.message());
    co_await finish();
    co_return;
  }

  auto& res = parser.get();
  record.status = static_cast<int>(res.result_int());
  Framing up_framing = h1::response_framing(parser, head_request);
  std::size_t header_fields = h1::field_count(res.base());
  if (s->closed) {
    co_await end_pump();
    co_return;
  }
  submit_head(*s, res.base(), up_framing != Framing::none);
  s->response_started = true;
  s->last_write = Clock::now();

  // Response body: read from the app only while the buffer toward the client has room.
  std::uint64_t remaining = up_framing == Framing::length ? parser.content_length().value_or(0) : 0;
  if (up_framing == Framing::length && up->buffer.size() > 0) {
    auto n = static_cast<std::size_t>(std::min<std::uint64_t>(up->buffer.size(), remaining));
    s->response_body.commit(asio::buffer_copy(s->response_body.prepare(n), up->buffer.data(), n));
    up->buffer.consume(n);
    remaining -= n;
  }
  error_code body_ec;
  bool body_complete = up_framing == Framing::none || (up_framing == Framing::length && remaining == 0);
  if (up_framing == Framing::chunked || up_framing == Framing::until_close) {
    if (up->buffer.capacity() < kResponseBuffer) up->buffer.reserve(kResponseBuffer);
  }
  while (!body_complete && !s->closed) {
    while (s->response_body.size() >= kResponseBuffer && !s->closed && !s->timed_out)
      co_await s->response_space.wait();
    if (s->closed || s->timed_out) break;
    std::size_t room = std::min(kResponseBuffer - s->response_body.size(), kReadChunk);
    if (!s->response_scratch) s->response_scratch = std::make_unique_for_overwrite<char[]>(kReadChunk);
    char* space = s->response_scratch.get();
    std::size_t got = 0;
    if (up_framing == Framing::length) {
      auto want = static_cast<std::size_t>(std::min<std::uint64_t>(room, remaining));
      auto [rec, n] = co_await up->socket.async_read_some(asio::buffer(space, want), use_nothrow);
      if (rec) {
        body_ec = rec;
        break;
      }
      got = n;
      remaining -= n;
      body_complete = remaining == 0;
    } else {
      parser.get().body().data = space;
      parser.get().body().size = room;
      auto [rec, n] = co_await http::async_read_some(up->socket, up->buffer, parser, use_nothrow);
      (void)n;
      if (rec == http::error::need_buffer) rec = {};
      got = room - parser.get().body().size;
      if (rec) {
        body_ec = rec;
        break;
      }
      body_complete = parser.is_done();
    }
    if (s->closed) break;
    s->response_body.commit(asio::buffer_copy(s->response_body.prepare(got), asio::buffer(space, got)));
    if (got > 0 && s->deferred) {
      s->deferred = false;
      nghttp2_session_resume_data(ng_, s->id);
      write_wanted_.notify();
    }
  }
  if (body_complete && up_framing == Framing::chunked) {
    std::size_t i = 0;
    for (const auto& f : res) {
      if (i++ < header_fields) continue;
      s->response_trailers.emplace_back(f.name_string(), f.value());
    }
  }
  co_await end_pump();
  s->upstream = nullptr;
  end_response(*s, body_complete, record.status, upstream_start);
  bool clean = body_complete && !pump_ec && (!pumped || pumped->done()) && parser.keep_alive() &&
               up_framing != Framing::until_close;
  if (clean) pool.release(std::move(up));
  co_await finish();
}

// The exchange over h2c: the app's head, body and trailers pass through as HTTP/2 frames, with the
// same back-pressure as from an HTTP/1.1 app (a response is read only as fast as the client takes it).
asio::awaitable<void> Session::forward_h2c(std::shared_ptr<Stream> s, ExchangeRecord& record, h2::ClientPool& pool,
                                           std::optional<std::uint64_t> content_length, bool head_request) {
  auto rw = rewrite();
  FieldList fields = upstream_request_fields(s->request, rw, content_length, record.request_id, record.trace_id);
  const bool no_body = s->request_done && s->request_body.size() == 0;
  auto fail = [&](unsigned status, std::string_view what) { fail_exchange(*s, record, status, what); };
  const auto upstream_start = Clock::now();
  std::unique_ptr<ClientStream> up;
  struct Unlink {  // before `up` goes, whatever the way out
    Stream& s;
    ~Unlink() { s.h2_upstream = nullptr; }
  } unlink{*s};
  std::optional<Completion> pumped;
  error_code pump_ec;
  http::response_header<> head;
  for (int attempt = 0;; ++attempt) {
    auto [oec, opened] = co_await pool.open(fields, no_body);
    if (oec || s->timed_out || s->closed) {
      fail(502, "bad gateway: upstream connect error: " + oec.message());
      co_return;
    }
    up = std::move(opened);
    s->h2_upstream = up.get();
    if (!no_body) {
      pumped.emplace(socket_.get_executor());
      asio::co_spawn(socket_.get_executor(), [&, s]() -> asio::awaitable<void> {
        H2BodySink sink{*up};
        co_await pump_request(*s, sink, pump_ec);
        if (pump_ec && !s->closed) up->cancel();
        pumped->signal();
      }, asio::detached);
    }
    error_code ec;
    while (!(ec = co_await up->read_head(head)) && h1::is_interim(head.result_int())) {
      if (head.result_int() != 100 && !s->closed) submit_head(*s, head, false, true);
    }
    if (!ec) break;
    if (pumped) {
      up->cancel();
      co_await pumped->wait();
    }
    // Refused before the app looked at it (it is going away): a request without a body goes again.
    if (up->refused() && no_body && attempt == 0 && !s->closed && !s->timed_out) continue;
    s->h2_upstream = nullptr;
    fail(502, "bad gateway: upstream: " + ec.message());
    co_return;
  }
  record.status = static_cast<int>(head.result_int());
  const bool with_body = !up->ended_with_head() && !head_request;
  if (!s->closed) {
    if (!with_body) s->response_done = true;
    submit_head(*s, head, with_body, false);
  }
  s->response_started = true;
  s->last_write = Clock::now();

  error_code body_ec;
  bool body_complete = !with_body;
  while (!body_complete && !s->closed) {
    while (s->response_body.size() >= kResponseBuffer && !s->closed && !s->timed_out)
      co_await s->response_space.wait();
    if (s->closed || s->timed_out) break;
    auto [rec, n] = co_await up->read(s->response_body, kResponseBuffer - s->response_body.size());
    if (rec) {
      body_ec = rec;
      break;
    }
    if (n == 0) {
      body_complete = true;
      s->response_trailers = up->trailers();
      s->response_done = true;
    }
    if (s->deferred && !s->closed) {
      s->deferred = false;
      nghttp2_session_resume_data(ng_, s->id);
      write_wanted_.notify();
    }
  }
  if (pumped) {
    if (!pumped->done()) {  // the app answered without reading the whole request body
      up->cancel();
      s->request_data.notify();
    }
    co_await pumped->wait();
  }
  s->h2_upstream = nullptr;
  end_response(*s, body_complete, record.status, upstream_start);
}

void Session::end_response(Stream& s, bool complete, int status, Clock::time_point upstream_start) {
  if (complete && !s.closed) {
    s.response_done = true;
    if (s.deferred) {
      s.deferred = false;
      nghttp2_session_resume_data(ng_, s.id);
    }
    write_wanted_.notify();
  } else if (!s.closed) {
    // The app's response broke off, or the request timed out after the response started.
    reset_stream(s, s.timed_out ? NGHTTP2_CANCEL : NGHTTP2_INTERNAL_ERROR);
  }
  if (worker_.shared.request_metrics)
    worker_.shared.request_metrics->record_app(status, seconds_between(upstream_start, Clock::now()));
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
      auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(out), use_nothrow);
      (void)n;
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
    auto s = std::make_shared<Stream>(socket_.get_executor(), 1);
    s->request = std::move(upgrade->request);
    s->request.version(11);
    s->has_method = s->has_path = true;
    s->request_done = true;
    if (!upgrade->body.empty()) s->request_body.commit(asio::buffer_copy(s->request_body.prepare(upgrade->body.size()), asio::buffer(upgrade->body)));
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

  std::vector<char> buf(16 * 1024);
  auto feed = [this](const char* data, std::size_t n) {
    auto rv = nghttp2_session_mem_recv(ng_, reinterpret_cast<const uint8_t*>(data), n);
    write_wanted_.notify();
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
    s->closed = true;
    s->cancel_upstream();
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
