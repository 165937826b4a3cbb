// The HTTP/1.1 server codec, the connection's life: requests read in order, keep-alive, the client
// watch, `Upgrade: h2c`, lingering close; see server_connection.h. The exchange's body and response halves are in
// server_exchange.cpp.
#include "proxy/downstream/h1_connection.h"

#include <limits>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/log.h"
#include "proxy/codec/h1/strict.h"
#include "proxy/downstream/h2_server.h"
#include "proxy/exchange/headers.h"
#include "proxy/exchange/linger.h"
#include "proxy/io/edge_wait.h"
#include "proxy/io/field_value.h"

namespace sluice::proxy::h1 {
namespace {

constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();

bool is_timeout_like(error_code ec) { return ec == asio::error::operation_aborted || ec == asio::error::timed_out; }

// Maps a request parse error to the status sluice answers with.
unsigned status_for_parse_error(error_code ec) {
  if (ec == http::error::header_limit) return 431;
  if (ec == http::error::body_limit) return 413;
  return violation_status(ec);
}

// A head that was malformed (answered), as opposed to a connection that ended or failed (not answered).
bool is_parse_error(error_code ec) {
  static const auto& beast_http = error_code(http::error::bad_method).category();
  return is_violation(ec) ||
         (ec.category() == beast_http && ec != http::error::partial_message && ec != http::error::end_of_stream);
}

}  // namespace

Link::Link(ServerContext& worker, Downstream socket, std::string_view initial_bytes)
    : worker_(worker),
      down_(std::move(socket)),
      peer_(peer_name(down_.socket())),
      watchdog_(worker.watchdogs, *this),
      phase_start_(Clock::now()) {
  error_code ec;
  down_.set_option(tcp::no_delay(true), ec);
  if (!initial_bytes.empty())
    buffer_.commit(asio::buffer_copy(buffer_.prepare(initial_bytes.size()), asio::buffer(initial_bytes)));
  worker_.connections.insert(this);
  watchdog_.rearm();
}

Link::~Link() { worker_.connections.erase(this); }

void Link::await_head() {
  phase_ = Phase::awaiting_head;
  phase_start_ = Clock::now();
  watchdog_.rearm();
}

void Link::close_when_idle() {
  if (phase_ != Phase::awaiting_head) return;  // the exchange in progress ends the connection
  close_idle_at_ = phase_start_ + worker_.config.timeouts.drain_idle_close;
  if (close_idle_at_ <= Clock::now() && buffer_.size() == 0) {
    error_code ec;
    down_.cancel(ec);
    return;
  }
  watchdog_.rearm();
}

Clock::time_point Link::next_deadline() const {
  if (phase_ != Phase::awaiting_head) return Clock::time_point::max();
  auto d = close_idle_at_;
  const auto limit = worker_.config.timeouts.client_header;
  if (limit.count() > 0) d = std::min(d, phase_start_ + limit);
  return d;
}

void Link::on_deadline() {
  phase_ = Phase::head_timed_out;
  error_code ec;
  down_.cancel(ec);
}

// The watch holds no buffer while it waits (as nginx's keep-alive connections do): it outlives the
// response, and most connections spend their lives in it. Bytes already here (pipelined, or held by
// OpenSSL) end it at once, read through the worker's buffer; later ones are read once they arrive, into
// a buffer taken then.
void Link::watch() {
  watching_ = true;
  watch_result_ = {};
  buffer_.shrink_to_fit();  // empty: gives the memory back
  error_code ec;
  auto want = tcp::socket::wait_read;
  const std::size_t n = read_now(down_, asio::buffer(worker_.read_buffer), ec, want);
  if (ec == asio::error::would_block) return wait(want);
  buffer_.commit(asio::buffer_copy(buffer_.prepare(n), asio::buffer(worker_.read_buffer.data(), n)));
  // Delivered as a read's completion is: after this call, not from inside it.
  asio::post(down_.get_executor(), [self = shared_from_this(), ec] { self->watched(ec, 0); });
}

void Link::wait(tcp::socket::wait_type want) {
  wait_after_eagain(down_.socket(), want, [self = shared_from_this()](error_code ec) {
    std::size_t n = 0;
    if (!ec) {
      auto next = tcp::socket::wait_read;
      n = read_now(self->down_, self->buffer_.prepare(kWatchReadBytes), ec, next);
      if (ec == asio::error::would_block) {  // a readiness that brought no whole TLS record, say
        self->buffer_.shrink_to_fit();
        return self->wait(next);
      }
    }
    self->watched(ec, n);
  });
}

void Link::watched(error_code ec, std::size_t n) {
  watching_ = false;
  watch_result_ = ec;
  if (!ec) buffer_.commit(n);
  if (!codec_) {
    if (phase_ != Phase::closing) wake();
    return;
  }
  codec_->watch_done_.notify();
  // Not a deadline's or the codec's own cancel: the client closed or reset its connection.
  if (ec && ec != asio::error::operation_aborted && codec_->watcher) codec_->watcher->client_gone();
}

void Link::wake() {
  if (watch_result_) {  // the client left, or a deadline or the shutdown ended the rest
    phase_ = Phase::closing;
    error_code ec;
    down_.shutdown(tcp::socket::shutdown_send, ec);
    down_.close(ec);
    worker_.served(nullptr, false);
    return;
  }
  auto& worker = worker_;
  asio::co_spawn(down_.get_executor(), serve(worker, shared_from_this()),
                 [&worker](std::exception_ptr e, bool resting) { worker.served(e, resting); });
}

Connection::Connection(std::shared_ptr<Link> link)
    : link_(std::move(link)),
      worker_(link_->worker_),
      down_(link_->down_),
      down_buffer_(link_->buffer_),
      peer_(link_->peer_),
      phase_(link_->phase_),
      scratch_(worker_.config.io_buffer_bytes),
      watch_done_(down_.get_executor()) {
  record.peer = peer_.peer;
  link_->codec_ = this;
  head_.reserve(kHeadReserve);  // one allocation for most heads, rather than the string's doublings
}

Connection::~Connection() {
  link_->codec_ = nullptr;
  if (rested_) return;
  // Ended otherwise (closed, handed over, or an exception): no watch may wake the link after this.
  error_code ec;
  if (link_->watching_) down_.close(ec);
  phase_ = Phase::closing;
}

// The accepted socket's link starts its first Connection as a rested link's next bytes do: in a coroutine
// of its own, so the accept path's frames (sniffing, the TLS handshake) end here.
asio::awaitable<bool> serve(ServerContext& worker, Downstream& socket, const std::string& initial_bytes) {
  std::make_shared<Link>(worker, std::move(socket), initial_bytes)->wake();
  co_return true;
}

asio::awaitable<bool> serve(ServerContext& worker, std::shared_ptr<Link> link) {
  std::optional<h2::Handover> h2c;
  PeerName peer;
  {
    Connection c(std::move(link));
    const auto end = co_await c.run();
    if (end == Connection::End::rest) co_return true;
    if (end == Connection::End::h2c) {
      peer = c.peer_;
      std::string rest(static_cast<const char*>(c.down_buffer_.data().data()), c.down_buffer_.size());
      h2c.emplace(h2::Handover{.socket = std::move(c.down_), .initial_bytes = std::move(rest), .upgrade = std::move(c.upgrade_)});
    }
  }
  if (!h2c) co_return false;
  h2::start(worker, std::move(*h2c), std::move(peer));
  co_return true;
}

bool Connection::may_rest() const {
  return link_->watching_ && !io_cancelled_ && down_buffer_.size() == 0;
}

asio::awaitable<Connection::End> Connection::run() {
  const auto& limits = worker_.config.limits;
  // Each pass starts in Phase::awaiting_head, since link_->phase_start_ (the connection's start or the
  // end of the exchange before).
  while (true) {
    // The header deadline passed while this coroutine was on its way (a rested link woke with bytes in
    // the same turn of the event loop): there was nothing pending for it to cancel.
    if (phase_ == Phase::head_timed_out) break;
    // Shutting down: a keep-alive client may already be sending its next request; wait a while for it.
    if (worker_.draining) {
      if (worker_.config.timeouts.drain_idle_close.count() <= 0 && down_buffer_.size() == 0 && !link_->watching_) break;
      link_->close_idle_at_ = link_->phase_start_ + worker_.config.timeouts.drain_idle_close;
      link_->watchdog_.rearm();
    }
    if (may_rest()) {
      rested_ = true;
      co_return End::rest;
    }
    // The previous exchange's watch may still be reading: its bytes are this request's first. A watch
    // ended by that exchange's own cancel (its deadline passed; it answered 504 and keeps the connection)
    // read nothing, and a cleartext socket just waits again.
    if (auto wec = co_await end_watch(); wec) {
      if (wec != asio::error::operation_aborted || !io_cancelled_ || down_.is_tls()) break;
    }
    // A streamed body may have grown the buffer: idle connections should not keep that memory.
    if (down_buffer_.size() == 0 && down_buffer_.capacity() > kIdleBufferBytes) down_buffer_.shrink_to_fit();
    auto& parser = parser_.emplace();
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(limits.max_body_bytes ? limits.max_body_bytes : kUnlimited);
    const HeadRules rules{.request = true, .max_head_bytes = limits.max_header_bytes,
                          .max_target_bytes = limits.max_target_bytes};
    auto ec = co_await read_strict_head(down_, down_buffer_, parser, rules);
    phase_ = Phase::exchange;
    record.start = Clock::now();
    if (ec) {
      // A client that leaves (or idles out) between requests gets no answer; a malformed or
      // oversized head gets one, then the connection closes since its framing cannot be trusted.
      if (peer_closed(ec) || is_timeout_like(ec) || !is_parse_error(ec)) break;
      record.status = 0;
      record.request_bytes = record.response_bytes = 0;
      record.method.clear();
      record.target.clear();
      record.request_id.clear();
      unsigned status = status_for_parse_error(ec);
      // As queue-proxy's net/http words a refusal: "400 Bad Request", with what was wrong after a colon
      // where the status alone does not say it.
      std::string reason = std::to_string(status) + " " + std::string(reason_phrase(status));
      if (status == 413) reason += ": request body too large";
      else if (status == 400 || status == 501 || ec == make_error_code(Violation::field_too_large))
        reason += ": " + ec.message();
      log::info("request rejected").kv("peer", peer_.peer).kv("status", static_cast<std::int64_t>(status)).kv("reason", reason);
      co_await respond_locally(status, reason, true);
      break;
    }
    if (!co_await exchange()) break;
    link_->await_head();
  }
  phase_ = Phase::closing;
  if (upgrade_) co_return End::h2c;
  error_code ec;
  if (link_->watching_) {
    down_.cancel(ec);
    co_await end_watch();
  }
  down_.shutdown(tcp::socket::shutdown_send, ec);
  if (linger_ && !ec) co_await linger(down_, scratch_.get(), worker_.config.limits);
  down_.close(ec);
  co_return End::closed;
}

asio::awaitable<bool> Connection::exchange() {
  auto& parser = *parser_;
  auto& req = parser.get();
  header_fields_ = field_count(req.base());
  keep_alive_ = req.keep_alive() && !worker_.draining;
  body_framing_ = parser.chunked() ? Framing::chunked
                  : parser.content_length().value_or(0) > 0 ? Framing::length
                                                            : Framing::none;
  body_remaining_ = body_framing_ == Framing::length ? *parser.content_length() : 0;
  body_info_ = {.kind = body_framing_ == Framing::chunked  ? BodyKind::unknown
                        : body_framing_ == Framing::length ? BodyKind::length
                                                           : BodyKind::none,
                .content_length = to_std(parser.content_length())};
  body_ = body_framing_ == Framing::none                                         ? RequestBody::complete
          : iequals(field_value(req, http::field::expect), "100-continue") ? RequestBody::continue_owed
                                                                             : RequestBody::reading;
  response_ = Response::not_started;
  response_keep_ = false;
  no_watch_ = !field_value(req, http::field::upgrade).empty();
  io_cancelled_ = false;
  record.protocol = "HTTP/1.1";

  if (const auto max = worker_.config.limits.max_header_count; max != 0 && header_fields_ > max) {
    record.status = 0;
    co_await respond_locally(431, "too many header fields");
    co_return false;
  }
  // OPTIONS * asks about the server, not a resource (RFC 9110 §9.3.7): answered here, as net/http does.
  if (req.method() == http::verb::options && req.target() == "*") {
    const LocalAnswer ok{.status = 200, .exact_body = true};  // named: GCC 12 destroys a co_await temporary twice
    co_await send_local(ok);
    co_return response_keep_;
  }
  // An expectation sluice cannot meet (RFC 9110 §10.1.1): 417, as queue-proxy's net/http answers it.
  if (auto expect = field_value(req, http::field::expect); !expect.empty() && !iequals(expect, "100-continue")) {
    record.status = 0;
    co_await respond_locally(417, "", true);
    co_return false;
  }
  if (!field_value(req, http::field::upgrade).empty() && !down_.is_tls()) {  // h2c is for cleartext only (RFC 9113 §3.1)
    if (co_await upgrade_to_h2c()) co_return false;
  }
  if (body_ == RequestBody::complete) watch_client();
  co_await worker_.handler.handle(*this);
  co_return response_ == Response::complete && response_keep_ && body_ == RequestBody::complete;
}

asio::awaitable<void> Connection::respond_locally(unsigned status, std::string_view body, bool exact) {
  record.status = static_cast<int>(status);
  record.response_bytes = body.size() + (exact ? 0 : 1);
  linger_ = true;
  head_.clear();
  format_local_response(head_, status, body, false, {}, {.exact_body = exact});
  co_await write_all(head_);
  worker_.handler.unhandled(record);
}

// Upgrade: h2c (RFC 7540 §3.2), on any method: answered with 101 when offered properly and any body
// is small enough to read whole first; the request then becomes stream 1 of the HTTP/2 connection.
// A malformed offer is ignored and the request served over HTTP/1.1, as the RFC allows.
asio::awaitable<bool> Connection::upgrade_to_h2c() {
  constexpr std::uint64_t kMaxUpgradeBody = 64 * 1024;
  auto& parser = *parser_;
  auto& req = parser.get();
  auto connection = req[http::field::connection];
  if (worker_.config.plain_protocols != ProxyConfig::PlainProtocols::http1_and_h2c ||
      !iequals(req[http::field::upgrade], "h2c") || !listed_in_connection(connection, "upgrade") ||
      !listed_in_connection(connection, "http2-settings") || req.count(http::field::http2_settings) != 1 ||
      body_framing_ == Framing::chunked)
    co_return false;
  auto settings = h2::decode_base64url(req[http::field::http2_settings]);
  if (!settings || settings->size() % 6 != 0) co_return false;
  std::string payload;
  if (body_framing_ == Framing::length) {
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
  if (co_await write_all(k101)) co_return false;
  http::request_header<> stream1 = req.base();
  stream1.erase(http::field::upgrade);
  stream1.erase(http::field::http2_settings);
  stream1.erase(http::field::connection);
  upgrade_ = std::make_unique<h2::UpgradeRequest>(
      h2::UpgradeRequest{.settings = std::move(*settings), .request = std::move(stream1), .body = std::move(payload)});
  co_return true;
}

void Connection::watch_client() {
  // Pipelined bytes already here, or an upgrade whose tunnel will read the socket: nothing to watch.
  if (link_->watching_ || down_buffer_.size() > 0 || no_watch_) return;
  link_->watch();
}

asio::awaitable<error_code> Connection::end_watch() {
  while (link_->watching_) co_await watch_done_.wait();
  auto ec = link_->watch_result_;
  link_->watch_result_ = {};
  co_return ec;
}

void Connection::body_complete() {
  if (body_ == RequestBody::complete || body_ == RequestBody::abandoned) return;
  body_ = RequestBody::complete;
  watch_client();
}

}  // namespace sluice::proxy::h1
