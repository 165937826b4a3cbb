// The HTTP/2 server codec; see server.h and server_session.h.
#include "proxy/downstream/h2_session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <charconv>
#include <span>
#include <tuple>
#include <vector>

#include "common/log.h"
#include "proxy/codec/h1/message.h"
#include "proxy/codec/h2/validate.h"
#include "proxy/downstream/h2_server.h"
#include "proxy/exchange/headers.h"
#include "proxy/exchange/linger.h"
#include "proxy/io/completion.h"
#include "proxy/io/edge_wait.h"
#include "proxy/io/field_value.h"

namespace sluice::proxy::h2 {
Session::Session(ServerContext& worker, Downstream socket, PeerName peer)
    : worker_(worker),
      socket_(std::move(socket)),
      peer_(std::move(peer)),
      wire_(socket_.get_executor()),
      streams_finished_(socket_.get_executor()),
      guard_(worker_.config.limits.h2),
      watchdog_(worker.watchdogs, *this) {
  wire_.on_progress = [this] { guard_.progress(); };
  worker_.connections.insert(this);
}

Session::~Session() { worker_.connections.erase(this); }

bool Session::start(std::string_view upgrade_settings, bool head_upgrade, Stream* upgraded) {
  const auto& limits = worker_.config.limits;
  const std::vector<nghttp2_settings_entry> settings = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits.h2.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kServerWindows.stream)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(limits.max_header_bytes)},
  };
  const WireCallbacks callbacks{.on_begin_headers = &Session::on_begin_headers,
                                .on_header = &Session::on_header,
                                .on_frame_recv = &Session::on_frame_recv,
                                .on_data_chunk = &Session::on_data_chunk,
                                .on_stream_close = &Session::on_stream_close,
                                .on_begin_frame = &Session::on_begin_frame,
                                .on_invalid_frame = &Session::on_invalid_frame,
                                .on_frame_not_send = &Session::on_frame_not_send};
  // Any head the app may send (max_response_header_bytes, plus nghttp2's estimate of a dozen bytes per
  // field; twice the limit leaves room for fields of a few bytes each) goes on to the client; nghttp2 alone
  // would send none above 64 KiB. One beyond even that resets its stream (on_frame_not_send).
  const std::size_t send_head_limit = 2 * std::max(limits.max_response_header_bytes, limits.max_header_bytes) + 65536;
  if (!wire_.start(Wire::Role::server, callbacks, this, settings, kServerWindows.connection,
                   [this, send_head_limit](nghttp2_option* opt) {
                     guard_.configure(opt);
                     nghttp2_option_set_max_send_header_block_length(opt, send_head_limit);
                   }))
    return false;
  if (upgraded) {
    int rv = nghttp2_session_upgrade2(wire_.session(), reinterpret_cast<const uint8_t*>(upgrade_settings.data()),
                                      upgrade_settings.size(), head_upgrade ? 1 : 0, upgraded);
    if (rv != 0) return false;
  }
  return true;
}

void Session::consume(Stream& s, std::size_t n) {
  if (n == 0) return;
  nghttp2_session_consume(wire_.session(), s.id, n);
  wire_.want_write();
}

void Session::reset_stream(Stream& s, std::uint32_t error) {
  if (s.state == Stream::State::closed) return;
  s.reset = true;
  nghttp2_submit_rst_stream(wire_.session(), NGHTTP2_FLAG_NONE, s.id, error);
  wire_.want_write();
}

void Session::submit_local(Stream& s, const LocalAnswer& a) {
  std::string status = std::to_string(a.status);
  std::string body = a.body;
  if (!a.exact_body) body += '\n';
  std::string length = std::to_string(body.size());
  std::vector<nghttp2_nv> nva;
  auto add = [&nva](std::string_view n, std::string_view v) { nva.push_back(nv(n, v)); };
  add(":status", status);
  if (!body.empty()) add("content-type", "text/plain; charset=utf-8");
  if (a.nosniff) add("x-content-type-options", "nosniff");
  add("content-length", length);
  add("date", http_date_now());
  if (!a.network_hash.empty()) add("k-network-hash", a.network_hash);
  const std::string retry_after = std::to_string(a.retry_after_seconds);
  if (a.retry_after_seconds != 0) add("retry-after", retry_after);
  s.out->discard();
  s.out->append(asio::buffer(body));  // a few hundred bytes at most: always fits
  s.out->done = true;
  s.state = Stream::State::responded;
  auto prd = wire_.provider(*s.out);
  nghttp2_submit_response(wire_.session(), s.id, nva.data(), nva.size(), body.empty() ? nullptr : &prd);
  wire_.want_write();
}

void Session::submit_head(Stream& s, const http::response_header<>& res, bool with_body, bool interim,
                          std::optional<std::uint64_t> declared_length) {
  // The lowercased names and the nv array live in the session and are reused: a response head allocates
  // nothing here (nghttp2 copies the list when it is submitted). The names are sized first, so the views
  // into them stay valid while they are filled.
  std::size_t name_bytes = 0;
  for (const auto& f : res) name_bytes += f.name_string().size();
  head_names_.resize(name_bytes);
  char* lowered = head_names_.data();
  head_nva_.clear();
  const auto status = std::to_string(res.result_int());
  head_nva_.push_back(nv(":status", status));
  // HTTP/2 forbids connection-specific fields (RFC 9113 §8.2.2): the forwarder removed them with every
  // other hop-by-hop field (remove_hop_fields); Content-Length goes on, HTTP/2 carries it.
  bool dated = false;
  for (const auto& f : res) {
    dated = dated || f.name() == http::field::date;
    const auto name = f.name_string();
    for (std::size_t i = 0; i < name.size(); ++i) {
      const char c = name[i];
      lowered[i] = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    }
    head_nva_.push_back(nv(std::string_view(lowered, name.size()), f.value()));
    lowered += name.size();
  }
  if (!dated && !interim) head_nva_.push_back(nv("date", http_date_now()));
  std::string length;
  if (declared_length && res.find(http::field::content_length) == res.end()) {
    length = std::to_string(*declared_length);
    head_nva_.push_back(nv("content-length", length));
  }
  if (interim) {
    nghttp2_submit_headers(wire_.session(), NGHTTP2_FLAG_NONE, s.id, nullptr, head_nva_.data(), head_nva_.size(),
                           nullptr);
  } else {
    auto prd = wire_.provider(*s.out);
    nghttp2_submit_response(wire_.session(), s.id, head_nva_.data(), head_nva_.size(), with_body ? &prd : nullptr);
  }
  wire_.want_write();
}

// A request's head is complete: its exchange starts, as a coroutine of its own, unless the head is
// refused (answered here, or the stream reset). The checks run before the coroutine so that the
// exchange's coroutine is the forwarder's own (a frame less per request).
void Session::launch(Stream& s) {
  s.record.start = Clock::now();
  s.record.peer = peer_.peer;
  s.record.protocol = "HTTP/2.0";
  if (s.state == Stream::State::closed) return;  // reset in the same read as its HEADERS: nothing to forward
  if (!s.has_method || !s.has_path) {  // nghttp2 checks the rest of the pseudo-header rules
    reset_stream(s, NGHTTP2_PROTOCOL_ERROR);
    return;
  }
  auto& req = s.req;
  std::optional<LocalAnswer> refusal = request_refusal(req, s.authority, s.too_large);
  if (refusal && !reject_stream(s.id, refusal->body)) return;
  if (!refusal) {
    if (!has_field(req, http::field::host) && !s.authority.empty()) req.set(http::field::host, s.authority);
    if (const auto max = worker_.config.limits.max_header_count; max != 0 && h1::field_count(req) > max)
      refusal = LocalAnswer{.status = 431, .body = "too many header fields"};
  }
  if (!refusal) {
    std::optional<std::uint64_t> content_length;
    if (auto cl = field_value(req, http::field::content_length); !cl.empty()) {
      std::uint64_t v = 0;
      auto [ptr, err] = std::from_chars(cl.data(), cl.data() + cl.size(), v);
      if (err == std::errc() && ptr == cl.data() + cl.size()) content_length = v;  // nghttp2 validated it
    }
    const bool no_body = s.request_state == Stream::RequestBody::received && s.request_body_.size() == 0;
    s.body_info = {.kind = no_body ? BodyKind::none : content_length ? BodyKind::length : BodyKind::unknown,
                   .content_length = content_length};
  }
  ++running_;
  s.running = true;
  auto exchange = refusal ? refuse(s, std::move(*refusal)) : worker_.handler.handle(s);
  asio::co_spawn(socket_.get_executor(), std::move(exchange), [this, &s](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        log::error("h2 stream failed").kv("error", ex.what());
      }
    }
    s.running = false;
    forget_if_done(s);
    if (--running_ == 0) streams_finished_.notify();
  });
}

asio::awaitable<void> Session::refuse(Stream& s, LocalAnswer answer) {
  s.record.status = static_cast<int>(answer.status);
  submit_local(s, answer);
  if (!s.is_flushed()) co_await s.flushed();
  worker_.handler.unhandled(s.record);
}

Clock::time_point Session::next_deadline() const {
  if (!watched_ || broken_) return Clock::time_point::max();
  auto d = next_stall_check_;
  if (const auto idle = worker_.config.timeouts.client_header; idle.count() > 0 && !idle_over_)
    d = std::min(d, last_activity_ + idle);
  if (!rested_) d = std::min(d, std::max(rest_not_before_, last_activity_ + kRestAfter));
  return d;
}

void Session::on_deadline() {
  const auto now = Clock::now();
  if (!rested_ && now >= std::max(rest_not_before_, last_activity_ + kRestAfter)) {
    if (open_streams_ == 0 && running_ == 0 && !wire_.writing()) {
      wire_.rest();
      rested_ = true;
    } else {
      rest_not_before_ = now + kRestAfter;
    }
  }
  if (now >= next_stall_check_) {
    next_stall_check_ = now + guard_.stall_check_period();
    const bool waiting = response_waiting();
    if (guard_.stalled(waiting, now)) {
      watched_ = false;
      end_abusive(NGHTTP2_ENHANCE_YOUR_CALM, "stalled: response waits on a client that does not read", true);
      return;
    }
    if (!waiting) guard_.progress();  // nothing waits: the clock starts when something does
  }
  // The idle close ends the idle check only: a GOAWAY queued behind bytes the client does not read must
  // still meet the stall check.
  const auto idle = worker_.config.timeouts.client_header;
  if (idle.count() > 0 && !idle_over_ && now >= last_activity_ + idle) {
    if (done()) {
      idle_over_ = true;
      return;
    }
    if (open_streams_ == 0 && running_ == 0) {
      idle_over_ = true;
      close_when_idle();
      return;
    }
    last_activity_ = now;  // busy, not idle
  }
}

void Session::close_when_idle() {
  if (going_away_ || !wire_.session()) return;
  going_away_ = true;
  nghttp2_submit_goaway(wire_.session(), NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(wire_.session()),
                        NGHTTP2_NO_ERROR, nullptr, 0);
  wire_.want_write();
}

asio::awaitable<void> Session::run(const std::string& initial, std::unique_ptr<UpgradeRequest>& upgrade) {
  error_code ignore;
  socket_.set_option(tcp::no_delay(true), ignore);
  bool head_upgrade = upgrade && upgrade->request.method() == http::verb::head;
  Stream* upgraded = nullptr;
  if (upgrade) {
    // The upgrading request is stream 1, already half-closed by the client.
    upgraded = &add_stream(1);
    upgraded->req = std::move(upgrade->request);
    upgraded->req.version(11);
    upgraded->has_method = upgraded->has_path = true;
    upgraded->request_state = Stream::RequestBody::received;
    if (!upgrade->body.empty())
      upgraded->request_body_.commit(asio::buffer_copy(upgraded->request_body_.prepare(upgrade->body.size()),
                                                       asio::buffer(upgrade->body)));
  }
  if (!start(upgrade ? std::string_view(upgrade->settings) : std::string_view(), head_upgrade, upgraded)) {
    socket_.close(ignore);
    co_return;
  }
  if (upgraded) launch(*upgraded);
  Completion writer_done(socket_.get_executor());
  asio::co_spawn(socket_.get_executor(), [this, &writer_done]() -> asio::awaitable<void> {
    co_await wire_.write_loop(socket_, socket_.is_tls(), [this] { return broken_ || finished(); });
    broken_ = true;
    error_code cancel_error;
    socket_.cancel(cancel_error);  // ends the reader
    writer_done.signal();
  }, asio::detached);
  if (guard_.stall_timeout().count() > 0) next_stall_check_ = Clock::now() + guard_.stall_check_period();
  watched_ = true;
  watchdog_.rearm();

  auto feed = [this](const char* data, std::size_t n) {
    int rv = wire_.feed(data, n);
    if (rv < 0) end_abusive(guard_.goaway_code(rv), nghttp2_strerror(rv));
    return rv == 0;
  };
  bool ok = initial.empty() || feed(initial.data(), initial.size());
  bool client_closed = false;
  // The session holds no read buffer: each read goes into the worker's, and is fed to nghttp2 (which
  // copies what it keeps) before the next. It reads what is there, waits after EAGAIN, and lets the
  // worker's other connections run after every few reads in a row.
  unsigned reads_in_a_row = 0;
  while (ok && !broken_) {
    if (finished()) break;
    error_code ec;
    auto want = tcp::socket::wait_read;
    const std::size_t n = read_now(socket_, asio::buffer(worker_.read_buffer), ec, want);
    if (ec == asio::error::would_block) {
      reads_in_a_row = 0;
      std::tie(ec) = co_await wait_after_eagain(socket_.socket(), want, use_nothrow);
      if (!ec) continue;
    }
    if (ec) {
      client_closed = ec != asio::error::operation_aborted;
      break;
    }
    last_activity_ = Clock::now();
    if (rested_) {
      rested_ = false;
      watchdog_.rearm();  // the rest deadline is back, and earlier than any other
    }
    ok = feed(worker_.read_buffer.data(), n);
    if (ok && ++reads_in_a_row == kReadsBeforeYield) {
      reads_in_a_row = 0;
      co_await asio::post(socket_.get_executor(), use_nothrow);
    }
  }
  // Reading is over: streams still open end with it; then the writer flushes what is left.
  for (auto& s : streams_) {
    if (s.state == Stream::State::closed) continue;
    nghttp2_session_set_stream_user_data(wire_.session(), s.id, nullptr);
    s.close(true);
  }
  open_streams_ = 0;
  while (running_ > 0) co_await streams_finished_.wait();
  // Let the writer flush (GOAWAY, last frames) for a moment, not for as long as a stuck client likes.
  broken_ = true;
  wire_.want_write();
  {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer flush_limit(socket_.get_executor(), std::chrono::seconds(1));
    co_await (writer_done.wait() || flush_limit.async_wait(use_nothrow));
  }
  socket_.cancel(ignore);
  co_await writer_done.wait();
  watched_ = false;
  watchdog_.disarm();
  socket_.shutdown(tcp::socket::shutdown_send, ignore);
  // What lingering reads is dropped: the worker's buffer serves as well as any.
  if (!client_closed) co_await linger(socket_, std::span<char>(worker_.read_buffer), worker_.config.limits);
  socket_.close(ignore);
}

namespace {
// By value: co_spawned, never co_awaited (GCC 12 destroys by-value temporaries of a co_await expression twice).
asio::awaitable<void> serve(ServerContext& worker, Handover handover, PeerName peer) {
  Session session(worker, std::move(handover.socket), std::move(peer));
  co_await session.run(handover.initial_bytes, handover.upgrade);
}
}  // namespace

void start(ServerContext& worker, Handover handover, PeerName peer) {
  auto executor = handover.socket.get_executor();
  asio::co_spawn(executor, serve(worker, std::move(handover), std::move(peer)),
                 [&worker](std::exception_ptr e) { worker.served(e, false); });
}

}  // namespace sluice::proxy::h2
