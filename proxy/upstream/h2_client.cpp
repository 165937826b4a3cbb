// h2c to the app; see client.h.
#include "proxy/upstream/h2_client.h"

#include <algorithm>
#include <array>
#include <charconv>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/ascii.h"
#include "proxy/exchange/headers.h"
#include "proxy/io/field_value.h"
#include "proxy/upstream/h2_client_connection.h"

namespace sluice::proxy::h2 {

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
  const bool end_stream = request.body.kind == BodyKind::none;
  submitted_ = true;
  connection_->unreserve();
  // Fields first (a local: see the GCC note in server.h), then the body in hand, as write_body would.
  auto fields = upstream_request_fields(request);
  if (auto ec = connection_->submit(fields, end_stream, state_)) co_return ec;
  if (!body || end_stream) co_return error_code{};
  const asio::const_buffer whole = *body;
  if (auto ec = co_await write_body(whole)) co_return ec;
  const FieldList no_trailers;
  co_return co_await end_body(no_trailers);
}

asio::awaitable<error_code> ClientStream::write_body(asio::const_buffer data) {
  auto& st = *state_;
  while (data.size() > 0) {
    while (st.out->room() == 0 && !st.closed && !st.cancelled) co_await st.out->space.wait();
    if (st.cancelled) co_return asio::error::operation_aborted;
    if (st.closed) co_return st.failure ? st.failure : error_code(asio::error::broken_pipe);
    data += st.out->append(data);
    connection_->resume(st);
  }
  co_return error_code{};
}

asio::awaitable<error_code> ClientStream::end_body(const FieldList& trailers) {
  auto& st = *state_;
  if (st.cancelled) co_return asio::error::operation_aborted;
  if (!st.out->done) {
    st.out->done = true;
    st.out->trailers = trailers;
    connection_->resume(st);
  }
  co_return error_code{};
}

asio::awaitable<std::tuple<error_code, http::response_header<>*>> ClientStream::read_head() {
  auto& st = *state_;
  while (st.heads.empty() && !st.closed && !st.cancelled) co_await st.received.wait();
  if (st.cancelled) co_return std::tuple{error_code(asio::error::operation_aborted), nullptr};
  if (st.heads.empty())
    co_return std::tuple{st.failure ? st.failure : error_code(http::error::partial_message), nullptr};
  head_ = std::move(st.heads.front());
  st.heads.erase(st.heads.begin());
  co_return std::tuple{error_code{}, &head_};
}

BodyInfo ClientStream::response_body() const {
  std::optional<std::uint64_t> length;
  if (auto cl = field_value(head_, http::field::content_length); !cl.empty()) {
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

bool ClientStream::read_body_now(BodyRead& out) {
  auto& st = *state_;
  if (reading_.size() == 0) {
    if (st.body.size() == 0 && !st.body_done && !st.closed && !st.cancelled) return false;  // must wait
    if (st.cancelled) {
      out = BodyRead{asio::error::operation_aborted, {}};
      return true;
    }
    if (st.body.size() == 0) {
      out = st.body_done ? BodyRead{} : BodyRead{st.failure ? st.failure : error_code(http::error::partial_message), {}};
      return true;
    }
    // The forwarder reads from a buffer the callbacks do not touch: DATA keeps arriving meanwhile.
    std::swap(st.body, reading_);
  }
  out = BodyRead{error_code{}, reading_.data()};
  return true;
}

asio::awaitable<BodyRead> ClientStream::read_body() {
  BodyRead piece;
  while (!read_body_now(piece)) co_await state_->received.wait();
  co_return piece;
}

void ClientStream::consume_body(std::size_t n) {
  reading_.consume(n);
  connection_->consume(*state_, n);  // only now may the app send more
}

bool ClientStream::body_ended() const {
  const auto& st = *state_;
  return reading_.size() == 0 && st.body.size() == 0 && st.body_done && !st.cancelled;
}

const FieldList& ClientStream::trailers() { return state_->trailers; }

void ClientStream::cancel() {
  if (submitted_) connection_->reset(*state_);
  else state_->cancelled = true;
}

Staleness ClientStream::stale() const { return state_->refused ? Staleness::unprocessed : Staleness::fresh; }

ClientPool::ClientPool(const asio::any_io_executor& ex, net::Watchdogs& watchdogs, tcp::endpoint endpoint,
                       Clock::duration idle_timeout, Clock::duration connect_timeout,
                       std::size_t max_response_header_bytes, net::Netns netns)
    : ex_(ex), endpoint_(endpoint), idle_timeout_(idle_timeout), connect_timeout_(connect_timeout),
      netns_(std::move(netns)), max_response_header_bytes_(max_response_header_bytes), watchdog_(watchdogs, *this) {}

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
    if (connections_.size() == 1 && idle_timeout_ != Clock::duration::zero() && !closed_) {
      next_check_ = Clock::now() + idle_timeout_;
      watchdog_.rearm();
    }
    asio::co_spawn(ex_, ClientConnection::connect(conn, endpoint_, connect_timeout_, netns_), asio::detached);
  }
  conn->reserve();  // until the stream's send_head submits it (or the stream goes)
  if (closed_) {
    // Shutting down: as close_idle's, this connection closes once its streams end.
    conn->retire();
    std::erase(connections_, conn);
  }
  error_code ec = co_await conn->wait_ready();
  if (ec) {
    conn->unreserve();
    co_return std::tuple{ec, nullptr};
  }
  co_return std::tuple{error_code{}, std::make_unique<ClientStream>(conn, std::make_shared<ClientStreamState>(ex_))};
}

void ClientPool::close_idle() {
  // Shutting down: an idle connection closes now, a busy one once its streams end (no new stream goes to
  // it). A busy one kept for later would hold the worker, and the drain, until the app closed it.
  for (const auto& c : connections_) c->retire();
  connections_.clear();
  closed_ = true;
  watchdog_.disarm();
}

void ClientPool::on_deadline() {
  const auto now = Clock::now();
  std::erase_if(connections_, [&](const auto& c) {
    if (!c->broken() && !(c->idle() && now - c->idle_since() >= idle_timeout_)) return false;
    c->retire();
    return true;
  });
  // A busy connection may go idle without telling the pool: look again within a timeout.
  next_check_ = now + idle_timeout_;
  for (const auto& c : connections_)
    if (c->idle()) next_check_ = std::min(next_check_, c->idle_since() + idle_timeout_);
}

asio::awaitable<std::optional<bool>> speaks_h2c(const asio::any_io_executor& ex, tcp::endpoint endpoint,
                                                Clock::duration timeout, const net::Netns& netns) {
  using namespace asio::experimental::awaitable_operators;
  tcp::socket socket(ex);
  if (!netns.own()) {
    error_code ec;
    netns.open(socket, endpoint.protocol(), ec);
    if (ec) co_return std::nullopt;
  }
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
      std::string lower = ascii_lower(name);
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
