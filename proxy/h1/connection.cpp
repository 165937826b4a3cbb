// The HTTP/1.1 downstream connection; see connection.h.
#include "proxy/h1/connection.h"

#include <charconv>
#include <limits>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/log.h"
#include "proxy/admission.h"
#include "proxy/completion.h"
#include "proxy/h1/body_relay.h"
#include "proxy/h1/tunnel.h"
#include "proxy/h2/session.h"
#include "proxy/headers.h"
#include "proxy/request_log.h"

namespace sluice::proxy::h1 {
namespace {

constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();
constexpr std::size_t kIdleBufferBytes = 16 * 1024;
// After an error answer that leaves request bytes unread, keep reading (and dropping) them for a
// while, as nginx's lingering close does: closing with unread data sends a reset that can destroy
// the answer before the client reads it.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr std::size_t kLingerBytes = 8 * 1024 * 1024;

bool is_timeout_like(error_code ec) {
  return ec == asio::error::operation_aborted || ec == asio::error::timed_out;
}

bool client_went_away(error_code ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == http::error::end_of_stream;
}

// Maps a request parse error to the status sluice answers with.
unsigned status_for_parse_error(error_code ec) {
  if (ec == http::error::header_limit) return 431;
  if (ec == http::error::body_limit) return 413;
  return 400;
}

}  // namespace

Connection::Connection(WorkerContext& worker, Downstream socket, std::string_view initial_bytes)
    : worker_(worker),
      down_(std::move(socket)),
      watchdog_(down_.get_executor(), *this),
      scratch_down_(worker.config.io_buffer_bytes),
      scratch_up_(worker.config.io_buffer_bytes) {
  error_code ec;
  auto ep = down_.remote_endpoint(ec);
  if (!ec) {
    auto addr = ep.address();
    if (addr.is_v6() && addr.to_v6().is_v4_mapped())
      addr = asio::ip::make_address_v4(asio::ip::v4_mapped, addr.to_v6());
    peer_address_ = addr.to_string();
    peer_ = addr.is_v6() ? "[" + peer_address_ + "]:" + std::to_string(ep.port())
                         : peer_address_ + ":" + std::to_string(ep.port());
  }
  down_.set_option(tcp::no_delay(true), ec);
  if (!initial_bytes.empty())
    down_buffer_.commit(asio::buffer_copy(down_buffer_.prepare(initial_bytes.size()), asio::buffer(initial_bytes)));
  worker_.connections.insert(this);
}

Connection::~Connection() { worker_.connections.erase(this); }

void Connection::close_when_idle() {
  if (phase_ != Phase::awaiting_request) return;  // the exchange in progress ends the connection
  auto grace = worker_.config.timeouts.drain_idle_close;
  if (grace.count() <= 0 && down_buffer_.size() == 0) {
    error_code ec;
    down_.cancel(ec);
    return;
  }
  close_idle_at_ = Clock::now() + grace;
  watchdog_.rearm();
}

void Connection::set_phase(Phase p) {
  phase_ = p;
  phase_start_ = Clock::now();
  last_write_ = phase_start_;
  expired_ = Expired::nothing;
  watchdog_.rearm();
}

Clock::time_point Connection::next_deadline() const {
  const auto& t = worker_.config.timeouts;
  constexpr auto never = Clock::time_point::max();
  if (expired_ != Expired::nothing) return never;
  auto d = never;
  auto consider = [&d](Clock::time_point base, Millis limit) {
    if (limit.count() > 0) d = std::min(d, base + limit);
  };
  switch (phase_) {
    case Phase::awaiting_request:
      consider(phase_start_, t.client_header);
      d = std::min(d, close_idle_at_);
      break;
    case Phase::exchanging:
      consider(phase_start_, t.request);
      if (!response_started_) consider(phase_start_, t.response_start);
      consider(last_write_, t.idle);
      break;
    case Phase::tunnelling:
      consider(last_write_, t.idle);
      break;
    case Phase::closed:
      break;
  }
  return d;
}

void Connection::on_deadline() {
  error_code ec;
  switch (phase_) {
    case Phase::awaiting_request: expired_ = Expired::client_header; break;
    case Phase::exchanging: expired_ = Expired::exchange; break;
    case Phase::tunnelling: expired_ = Expired::tunnel_idle; break;
    case Phase::closed: return;
  }
  if (upstream_) upstream_->socket.cancel(ec);
  if (h2_upstream_) h2_upstream_->cancel();
  down_.cancel(ec);
}

asio::awaitable<void> serve(WorkerContext& worker, Downstream& socket, const std::string& initial_bytes) {
  std::optional<h2::Handover> h2c;
  std::string peer_address, peer;
  {
    Connection c(worker, std::move(socket), initial_bytes);
    h2c = co_await c.run();
    peer_address = c.peer_address_;
    peer = c.peer_;
  }
  if (h2c) co_await h2::serve(worker, *h2c, peer_address, peer);
}

asio::awaitable<std::optional<h2::Handover>> Connection::run() {
  const auto& limits = worker_.config.limits;
  while (true) {
    set_phase(Phase::awaiting_request);
    // Shutting down: a keep-alive client may already be sending its next request; wait briefly for it.
    if (worker_.draining) {
      if (worker_.config.timeouts.drain_idle_close.count() <= 0 && down_buffer_.size() == 0) break;
      close_idle_at_ = std::min(close_idle_at_, Clock::now() + worker_.config.timeouts.drain_idle_close);
      watchdog_.rearm();
    }
    // A streamed body may have grown the buffer: idle connections should not keep that memory.
    if (down_buffer_.size() == 0 && down_buffer_.capacity() > kIdleBufferBytes) down_buffer_.shrink_to_fit();
    RequestParser parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(limits.max_body_bytes ? limits.max_body_bytes : kUnlimited);
    auto [ec, n] = co_await http::async_read_header(down_, down_buffer_, parser, use_nothrow);
    (void)n;
    if (ec) {
      // A client that leaves (or idles out) between requests gets no answer; a malformed or
      // oversized head gets one, then the connection closes since its framing cannot be trusted.
      if (client_went_away(ec) || is_timeout_like(ec) || !parser.got_some()) break;
      set_phase(Phase::exchanging);
      record_ = ExchangeRecord{.start = Clock::now(), .peer = peer_};
      // Named, not a temporary in the co_await expression: GCC 12 destroys such temporaries twice.
      unsigned status = status_for_parse_error(ec);
      std::string reason = status == 431   ? "request header fields too large"
                           : status == 413 ? "request body too large"
                                           : "bad request: " + ec.message();
      co_await respond_locally(status, reason, false);
      break;
    }
    set_phase(Phase::exchanging);
    bool keep = co_await exchange(parser);
    if (!keep) break;
  }
  phase_ = Phase::closed;
  if (upgrade_) {
    std::string rest(static_cast<const char*>(down_buffer_.data().data()), down_buffer_.size());
    co_return h2::Handover{.socket = std::move(down_), .initial_bytes = std::move(rest),
                           .upgrade = std::move(upgrade_)};
  }
  error_code ec;
  down_.shutdown(tcp::socket::shutdown_send, ec);
  if (linger_ && !ec) co_await linger();
  down_.close(ec);
  co_return std::nullopt;
}

// Upgrade: h2c (RFC 7540 §3.2), on any method: answered with 101 when offered properly and any body
// is small enough to read whole first; the request then becomes stream 1 of the HTTP/2 connection.
// A malformed offer is ignored and the request served over HTTP/1.1, as the RFC allows.
asio::awaitable<bool> Connection::upgrade_to_h2c(RequestParser& parser, Framing body) {
  constexpr std::uint64_t kMaxUpgradeBody = 64 * 1024;
  auto& req = parser.get();
  auto connection = req[http::field::connection];
  if (worker_.config.plain_protocols != ProxyConfig::PlainProtocols::http1_and_h2c || !iequals(req[http::field::upgrade], "h2c") ||
      !listed_in_connection(connection, "upgrade") || !listed_in_connection(connection, "http2-settings") ||
      req.count(http::field::http2_settings) != 1 || body == Framing::chunked)
    co_return false;
  auto settings = h2::decode_base64url(req[http::field::http2_settings]);
  if (!settings || settings->size() % 6 != 0) co_return false;
  std::string payload;
  if (body == Framing::length) {
    auto length = *parser.content_length();
    if (length > kMaxUpgradeBody) co_return false;
    while (down_buffer_.size() < length) {
      auto [ec, n] = co_await down_.async_read_some(down_buffer_.prepare(length - down_buffer_.size()), use_nothrow);
      if (ec) co_return false;
      down_buffer_.commit(n);
    }
    payload.assign(static_cast<const char*>(down_buffer_.data().data()), static_cast<std::size_t>(length));
    down_buffer_.consume(static_cast<std::size_t>(length));
  }
  static constexpr std::string_view k101 = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
  if (co_await write_all(down_, k101)) co_return false;
  http::request_header<> stream1 = req.base();
  stream1.erase(http::field::upgrade);
  stream1.erase(http::field::http2_settings);
  stream1.erase(http::field::connection);
  upgrade_.emplace(h2::UpgradeRequest{.settings = std::move(*settings), .request = std::move(stream1),
                                      .body = std::move(payload)});
  co_return true;
}

asio::awaitable<void> Connection::linger() {
  using namespace asio::experimental::awaitable_operators;
  auto discard = [this]() -> asio::awaitable<void> {
    std::span<char> buf = scratch_down_.get();
    std::size_t total = 0;
    while (total < kLingerBytes) {
      auto [ec, n] = co_await down_.async_read_some(asio::buffer(buf.data(), buf.size()), use_nothrow);
      if (ec) co_return;
      total += n;
    }
  };
  asio::steady_timer limit(down_.get_executor(), kLingerTime);
  co_await (discard() || limit.async_wait(use_nothrow));
}

asio::awaitable<bool> Connection::respond_locally(unsigned status, std::string_view body,
                                                  bool keep_alive, LocalResponseExtras extras) {
  record_.status = static_cast<int>(status);
  linger_ = !keep_alive;
  head_.clear();
  format_local_response(head_, status, body, keep_alive, record_.request_id, extras);
  auto ec = co_await write_all(down_, head_);
  record_.response_bytes = body.size() + (extras.exact_body ? 0 : 1);
  if (worker_.config.request_log && extras.log) write_request_log(record_, worker_.config.pod_ip);
  co_return keep_alive && !ec;
}

// A LocalAnswer from admission, as HTTP/1.1 bytes.
asio::awaitable<bool> Connection::respond(const LocalAnswer& a, bool keep_alive, bool log) {
  LocalResponseExtras extras{.exact_body = a.exact_body, .log = log};
  if (!a.network_hash.empty()) {
    extras.extra_name = kNetworkHashHeader;
    extras.extra_value = a.network_hash;
  }
  co_return co_await respond_locally(a.status, a.body, keep_alive && !a.close, extras);
}

// One place maps failures of an exchange to what the client sees.
asio::awaitable<bool> Connection::fail_exchange(error_code ec, std::string_view what,
                                                bool keep_alive) {
  if (response_started_) {
    // Mid-response there is no status left to send: closing tells the client the body is cut.
    record_.status = record_.status ? record_.status : 502;
    if (worker_.config.request_log) write_request_log(record_, worker_.config.pod_ip);
    co_return false;
  }
  if (expired_ == Expired::exchange) co_return co_await respond_locally(504, "request timeout", false);
  std::string body = "bad gateway: ";
  body += what;
  body += ": ";
  body += ec.message();
  co_return co_await respond_locally(502, body, keep_alive);
}

asio::awaitable<void> Connection::pump_request_body(RequestParser& parser, UpstreamConnection& up,
                                                    Framing in, Framing out,
                                                    std::size_t header_fields, error_code& result) {
  std::string no_head;
  RelayProgress progress;
  result = co_await relay_body(down_, down_buffer_, parser, in, up.socket, out,
                               scratch_down_, no_head, header_fields, progress);
  record_.request_bytes = progress.bytes;
}

// Fields only the request log reads are copied only when it is on; the strings keep their capacity.
void Connection::begin_record(const http::request_header<>& req) {
  record_.start = phase_start_;
  record_.status = 0;
  record_.request_bytes = record_.response_bytes = 0;
  record_.request_id.clear();
  record_.trace_id.clear();
  if (!worker_.config.request_log) return;
  auto copy = [](std::string& to, std::string_view from) { to.assign(from.data(), from.size()); };
  copy(record_.method, req.method_string());
  copy(record_.target, req.target());
  copy(record_.user_agent, req[http::field::user_agent]);
  copy(record_.referer, req[http::field::referer]);
  record_.peer = peer_;
}

asio::awaitable<bool> Connection::exchange(RequestParser& parser) {
  auto& req = parser.get();
  const auto& limits = worker_.config.limits;
  begin_record(req);
  response_started_ = false;
  bool keep_alive = req.keep_alive() && !worker_.draining;
  std::size_t header_fields = field_count(req.base());

  if (header_fields > limits.max_header_count)
    co_return co_await respond_locally(431, "too many header fields", false);
  if (req.version() >= 11 && req.find(http::field::host) == req.end())
    co_return co_await respond_locally(400, "bad request: missing Host header", false);

  Framing body = parser.chunked() ? Framing::chunked
                 : (parser.content_length().value_or(0) > 0) ? Framing::length
                                                             : Framing::none;
  if (!req[http::field::upgrade].empty() && !down_.is_tls()) {  // h2c is for cleartext only (RFC 9113 §3.1)
    bool switched = co_await upgrade_to_h2c(parser, body);
    if (switched) co_return false;
  }
  // A local answer leaves an unread request body behind: the connection cannot carry another request.
  const bool local_keep_alive = keep_alive && body == Framing::none;

  auto& shared = worker_.shared;
  // Health checks are answered here, never forwarded, counted or queued (SPEC §3.1).
  if (auto probe = probe_kind_of(req); probe != ProbeKind::none) {
    auto answer = co_await answer_health_check(worker_, probe, req);
    co_return co_await respond(answer, local_keep_alive, worker_.config.probe_request_log);
  }
  CountedExchange counted(worker_, req, record_);
  std::optional<BreakerSlot> slot;
  const auto deadline = exchange_deadline(worker_.config.timeouts, phase_start_);
  if (auto refused = co_await pass_breaker(worker_, deadline, slot))
    co_return co_await respond(*refused, local_keep_alive, true);
  std::optional<BackendLease> lease;
  if (auto refused = co_await pass_backends(worker_, req, deadline, lease))
    co_return co_await respond(*refused, local_keep_alive, true);
  UpstreamPool& pool = upstream_pool(worker_, lease);
  bool expect_continue = body != Framing::none &&
                         iequals(req[http::field::expect], "100-continue");
  auto upgrade_to = req[http::field::upgrade];
  bool upgrade = !upgrade_to.empty() && !iequals(upgrade_to, "h2c") &&
                 listed_in_connection(req[http::field::connection], "upgrade");

  if (!upgrade) {  // an upgrade (WebSocket) needs HTTP/1.1 to the app
    auto to_h2c = upstream_h2c_known(worker_, lease);
    if (!to_h2c) to_h2c = co_await detect_upstream_h2c(worker_);
    if (*to_h2c) {
      co_return co_await exchange_h2c(parser, body, keep_alive, expect_continue, header_fields,
                                      upstream_h2_pool(worker_, lease));
    }
  }
  std::string& request_head = request_head_;
  request_head.clear();
  RequestRewrite rw{.peer_address = peer_address_,
                    .scheme = down_.is_tls() ? kHttps : worker_.scheme,
                    .request_ids = &worker_.request_ids,
                    .keep_upgrade = upgrade};
  format_upstream_request(request_head, req, body, to_std(parser.content_length()), rw, record_.request_id,
                          record_.trace_id);

  // A small body already received in full travels in the same write as the head.
  bool body_inline = body == Framing::length && !expect_continue &&
                     down_buffer_.size() >= *parser.content_length();
  std::size_t inline_bytes = body_inline ? static_cast<std::size_t>(*parser.content_length()) : 0;

  std::unique_ptr<UpstreamConnection> up;
  ResponseParser* rp = nullptr;
  std::optional<ResponseParser> response;
  error_code pump_ec;
  std::optional<Completion> pump_done;  // only requests with a streamed body need one
  bool pumping = false;
  const bool head_request = req.method() == http::verb::head;

  const auto upstream_start = shared.request_metrics ? Clock::now() : Clock::time_point{};
  for (int attempt = 0;; ++attempt) {
    // A streamed body cannot be replayed on a fresh connection, so its connection must be checked.
    bool replayable = body == Framing::none || body_inline;
    auto [cec, conn] = co_await pool.acquire(!replayable || attempt > 0);
    if (expired_ == Expired::exchange) co_return co_await fail_exchange(cec, "connect", false);
    if (cec) co_return co_await fail_exchange(cec, "upstream connect error", keep_alive && body == Framing::none);
    up = std::move(conn);
    upstream_ = up.get();

    std::array<asio::const_buffer, 2> first{asio::buffer(request_head),
                                            asio::buffer(down_buffer_.data().data(), inline_bytes)};
    auto [wec, wn] = co_await asio::async_write(up->socket, first, use_nothrow);
    (void)wn;
    error_code ec = wec;
    if (!ec && body != Framing::none && !body_inline) {
      if (expect_continue) {
        static constexpr std::string_view k100 = "HTTP/1.1 100 Continue\r\n\r\n";
        if (auto e = co_await write_all(down_, k100)) co_return false;
      }
      pumping = true;
      pump_done.emplace(down_.get_executor());
      asio::co_spawn(down_.get_executor(),
                     [&]() -> asio::awaitable<void> {
                       co_await pump_request_body(parser, *up, body, body, header_fields, pump_ec);
                       // A body that cannot be completed leaves the app waiting for the rest:
                       // end the upstream exchange so the response side stops waiting too.
                       if (pump_ec) {
                         error_code ignore;
                         up->socket.cancel(ignore);
                       }
                       pump_done->signal();
                     },
                     asio::detached);
    }
    // Read the response head, passing interim responses on.
    while (!ec) {
      response.emplace();
      rp = &*response;
      rp->header_limit(static_cast<std::uint32_t>(limits.max_response_header_bytes));
      rp->body_limit(kUnlimited);
      if (head_request) rp->skip(true);
      auto [rec, rn] = co_await http::async_read_header(up->socket, up->buffer, *rp, use_nothrow);
      (void)rn;
      ec = rec;
      if (ec || !is_interim(rp->get().result_int())) break;
      if (rp->get().result_int() != 100) {
        head_.clear();
        format_downstream_response(head_, rp->get().base(), Framing::none, std::nullopt, true, false,
                                   req.version());
        if (co_await write_all(down_, head_)) ec = asio::error::connection_aborted;
      }
    }
    if (!ec) break;

    // Nothing came back. A pooled connection the app closed meanwhile is retried once on a fresh one
    // when no body bytes were committed to it.
    bool retry = up->reused && attempt == 0 && body != Framing::chunked && !pumping &&
                 expired_ == Expired::nothing && (!rp || !rp->got_some()) &&
                 (ec == http::error::end_of_stream || ec == asio::error::eof ||
                  ec == asio::error::connection_reset || ec == asio::error::broken_pipe);
    if (pumping) {
      error_code ignore;
      up->socket.cancel(ignore);
      down_.cancel(ignore);
      co_await pump_done->wait();
    }
    upstream_ = nullptr;
    up.reset();
    if (pump_ec == http::error::body_limit)
      co_return co_await respond_locally(413, "request body too large", false);
    if (pump_ec && client_went_away(pump_ec)) co_return false;
    if (!retry) co_return co_await fail_exchange(ec, "upstream", false);
  }
  if (body_inline) {
    down_buffer_.consume(inline_bytes);
    record_.request_bytes = inline_bytes;
  }

  // The response head is here: from now on a failure can only cut the response.
  auto& res = rp->get();
  record_.status = static_cast<int>(res.result_int());
  bool upgraded = upgrade && res.result_int() == 101;
  Framing up_framing = upgraded ? Framing::none : response_framing(*rp, head_request);
  Framing down_framing = downstream_framing(up_framing, req.version());
  if (down_framing == Framing::until_close) keep_alive = false;
  std::optional<std::uint64_t> content_length = to_std(rp->content_length());

  if (worker_.draining) keep_alive = false;  // shutdown began during the exchange: say so in this response
  head_.clear();
  format_downstream_response(head_, res.base(), down_framing, content_length, keep_alive, upgraded,
                             req.version());
  response_started_ = true;
  RelayProgress progress{.last_write = &last_write_};
  error_code rec = co_await relay_body(up->socket, up->buffer, *rp, up_framing, down_, down_framing,
                                       scratch_up_, head_, field_count(res.base()), progress);
  record_.response_bytes = progress.bytes;

  bool upstream_clean = !pumping || pump_done->done();
  if (pumping) {
    if (!pump_done->done()) {
      // The app answered before reading the whole request body: stop reading it, and since the
      // client's framing is now out of step, end the connection after this response.
      error_code ignore;
      up->socket.cancel(ignore);
      down_.cancel(ignore);
      keep_alive = false;
    }
    co_await pump_done->wait();
    if (pump_ec) keep_alive = false;
  }
  upstream_ = nullptr;
  if (shared.request_metrics) {
    shared.request_metrics->record_app(
        record_.status, seconds_between(upstream_start, Clock::now()));
  }
  if (rec) {
    if (!client_went_away(rec) && !is_timeout_like(rec))
      log::warn("response relay failed").kv("error", rec.message()).kv("request_id", record_.request_id);
    co_return co_await fail_exchange(rec, "response", false);
  }
  if (upgraded) {
    set_phase(Phase::tunnelling);
    co_await tunnel(*up);
    if (worker_.config.request_log) write_request_log(record_, worker_.config.pod_ip);
    co_return false;
  }
  if (worker_.config.request_log) write_request_log(record_, worker_.config.pod_ip);
  if (upstream_clean && !pump_ec && rp->keep_alive() && up_framing != Framing::until_close)
    pool.release(std::move(up));
  co_return keep_alive;
}

// The exchange when the app speaks h2c: the request body streams into an HTTP/2 stream; the response
// comes back as HTTP/1.1, chunked unless the app gave a length, with its trailers in the last chunk.
asio::awaitable<bool> Connection::exchange_h2c(RequestParser& parser, Framing body, bool keep_alive,
                                               bool expect_continue, std::size_t header_fields,
                                               h2::ClientPool& pool) {
  auto& req = parser.get();
  auto& shared = worker_.shared;
  RequestRewrite rw{.peer_address = peer_address_, .scheme = down_.is_tls() ? kHttps : worker_.scheme,
                    .request_ids = &worker_.request_ids};
  std::optional<std::uint64_t> request_length;
  if (body != Framing::chunked) request_length = to_std(parser.content_length());
  auto fields = h2::upstream_request_fields(req, rw, request_length, record_.request_id, record_.trace_id);
  const bool head_request = req.method() == http::verb::head;
  const auto upstream_start = shared.request_metrics ? Clock::now() : Clock::time_point{};

  std::unique_ptr<h2::ClientStream> up;
  struct Unlink {  // before `up` goes, whatever the way out
    h2::ClientStream*& current;
    ~Unlink() { current = nullptr; }
  } unlink{h2_upstream_};
  std::optional<Completion> pump_done;
  error_code pump_ec;
  http::response_header<> res;
  for (int attempt = 0;; ++attempt) {
    auto [oec, opened] = co_await pool.open(fields, body == Framing::none);
    if (expired_ == Expired::exchange) co_return co_await fail_exchange(oec, "connect", false);
    if (oec) co_return co_await fail_exchange(oec, "upstream connect error", keep_alive && body == Framing::none);
    up = std::move(opened);
    h2_upstream_ = up.get();
    if (body != Framing::none) {
      if (expect_continue) {
        static constexpr std::string_view k100 = "HTTP/1.1 100 Continue\r\n\r\n";
        if (co_await write_all(down_, k100)) co_return false;
      }
      pump_done.emplace(down_.get_executor());
      asio::co_spawn(down_.get_executor(), [&]() -> asio::awaitable<void> {
        std::string no_head;
        RelayProgress progress;
        pump_ec = co_await relay_body(down_, down_buffer_, parser, body, *up, Framing::until_close, scratch_down_,
                                      no_head, header_fields, progress);
        record_.request_bytes = progress.bytes;
        if (pump_ec) {
          up->cancel();
        } else {
          TrailerList trailers;  // a chunked body's trailers follow the head's fields in the parser's list
          std::size_t i = 0;
          for (const auto& f : req)
            if (i++ >= header_fields) trailers.emplace_back(f.name_string(), f.value());
          up->end_request(std::move(trailers));
        }
        pump_done->signal();
      }, asio::detached);
    }
    // Interim responses (other than 100, which sluice answered) are passed on.
    error_code ec;
    while (!(ec = co_await up->read_head(res)) && is_interim(res.result_int())) {
      if (res.result_int() == 100) continue;
      head_.clear();
      format_downstream_response(head_, res, Framing::none, std::nullopt, true, false, req.version());
      if (co_await write_all(down_, head_)) ec = asio::error::connection_aborted;
      if (ec) break;
    }
    if (!ec) break;
    if (pump_done) {
      error_code ignore;
      up->cancel();
      down_.cancel(ignore);
      co_await pump_done->wait();
    }
    h2_upstream_ = nullptr;
    if (pump_ec == http::error::body_limit) co_return co_await respond_locally(413, "request body too large", false);
    if (pump_ec && client_went_away(pump_ec)) co_return false;
    // Refused before the app looked at it (it is going away): a request without a body goes again.
    if (up->refused() && body == Framing::none && attempt == 0 && expired_ == Expired::nothing) continue;
    co_return co_await fail_exchange(ec, "upstream", false);
  }

  // The response head is here: from now on a failure can only cut the response.
  const unsigned status = res.result_int();
  record_.status = static_cast<int>(status);
  std::optional<std::uint64_t> length;
  if (auto cl = res[http::field::content_length]; !cl.empty()) {
    std::uint64_t v = 0;
    auto [ptr, err] = std::from_chars(cl.data(), cl.data() + cl.size(), v);
    if (err == std::errc() && ptr == cl.data() + cl.size()) length = v;  // nghttp2 checked it against the body
  }
  const bool bodiless = up->ended_with_head() || head_request || status == 204 || status == 304;
  Framing down_framing = bodiless ? Framing::none
                         : length ? (*length == 0 ? Framing::none : Framing::length)
                                  : downstream_framing(Framing::until_close, req.version());
  if (bodiless && !length && !head_request && status != 204 && status != 304) length = 0;
  if (down_framing == Framing::until_close || worker_.draining) keep_alive = false;
  head_.clear();
  format_downstream_response(head_, res, down_framing, length, keep_alive, false, req.version());
  response_started_ = true;

  RelayProgress progress{.last_write = &last_write_};
  error_code rec;
  if (down_framing == Framing::none) {
    rec = co_await write_all(down_, head_);
  } else {
    std::span<char> scratch = scratch_up_.get();
    while (true) {
      auto [ec, n] = co_await up->read(asio::buffer(scratch.data(), scratch.size()));
      if (ec) {
        rec = ec;
        break;
      }
      if (n == 0) {
        rec = co_await end_body(down_, head_, down_framing, up->trailers());
        break;
      }
      if ((rec = co_await write_body_piece(down_, head_, down_framing, asio::buffer(scratch.data(), n), progress)))
        break;
    }
  }
  record_.response_bytes = progress.bytes;
  if (pump_done) {
    if (!pump_done->done()) {
      // The app answered before reading the whole request body: stop reading it, and since the
      // client's framing is now out of step, end the connection after this response.
      error_code ignore;
      up->cancel();
      down_.cancel(ignore);
      keep_alive = false;
    }
    co_await pump_done->wait();
    if (pump_ec) keep_alive = false;
  }
  h2_upstream_ = nullptr;
  if (shared.request_metrics)
    shared.request_metrics->record_app(record_.status, seconds_between(upstream_start, Clock::now()));
  if (rec) {
    if (!client_went_away(rec) && !is_timeout_like(rec))
      log::warn("response relay failed").kv("error", rec.message()).kv("request_id", record_.request_id);
    co_return co_await fail_exchange(rec, "response", false);
  }
  if (worker_.config.request_log) write_request_log(record_, worker_.config.pod_ip);
  co_return keep_alive;
}

asio::awaitable<void> Connection::tunnel(UpstreamConnection& up) {
  co_await relay_tunnel(down_, down_buffer_, scratch_down_, up.socket, up.buffer, scratch_up_,
                        last_write_);
}

}  // namespace sluice::proxy::h1
