// The HTTP/1.1 client codec; see client.h.
#include "proxy/upstream/h1_client.h"

#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <span>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "proxy/codec/h1/strict.h"
#include "proxy/io/listen.h"

namespace sluice::proxy::h1 {
namespace {

// An idle connection the app has closed reads as EOF (or an error) without blocking; a live one has
// nothing to read. One recv(MSG_PEEK) per reuse is far cheaper than a failed request.
bool looks_alive(tcp::socket& s) {
  char c;
  ssize_t n = ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

ClientConnection::ClientConnection(const asio::any_io_executor& ex, ClientPool& pool) : pool_(pool), socket_(ex) {}

asio::awaitable<error_code> ClientConnection::send_head(const UpstreamRequest& request,
                                                        std::optional<asio::const_buffer> body) {
  head_.clear();
  format_upstream_request(head_, request, pool_.host());
  head_request_ = request.method == "HEAD";
  chunked_request_ = request.body.kind == BodyKind::unknown;
  request_done_ = request.body.kind == BodyKind::none || body.has_value();
  response_.reset();
  failure_ = {};
  got_response_bytes_ = false;
  std::array<asio::const_buffer, 2> first{asio::buffer(head_), body.value_or(asio::const_buffer{})};
  // Not send_now() (tried twice, bench/README.md): the response read would then start before the app can
  // have answered, and its speculative recv fail, a syscall more per request than the write's posted
  // completion costs.
  auto [ec, n] = co_await asio::async_write(socket_, first, use_nothrow);
  (void)n;
  failure_ = ec;
  co_return ec;
}

asio::awaitable<error_code> ClientConnection::write_body(asio::const_buffer data) {
  if (cancelled_) co_return error_code(asio::error::operation_aborted);
  char chunk_head[24];
  std::array<asio::const_buffer, 3> bufs;
  std::size_t count = 0;
  if (chunked_request_) {
    int len = std::snprintf(chunk_head, sizeof chunk_head, "%zx\r\n", data.size());
    bufs[count++] = asio::buffer(chunk_head, static_cast<std::size_t>(len));
  }
  bufs[count++] = data;
  if (chunked_request_) bufs[count++] = asio::buffer("\r\n", 2);
  auto [ec, written] = co_await asio::async_write(socket_, std::span(bufs.data(), count), use_nothrow);
  (void)written;
  co_return ec;
}

asio::awaitable<error_code> ClientConnection::end_body(const FieldList& trailers) {
  error_code ec;
  if (chunked_request_) {
    std::string tail = "0\r\n";
    for (const auto& [name, value] : trailers) tail += name + ": " + value + "\r\n";
    tail += "\r\n";
    auto [wec, n] = co_await asio::async_write(socket_, asio::buffer(tail), use_nothrow);
    (void)n;
    ec = wec;
  }
  if (!ec) request_done_ = true;
  co_return ec;
}

tcp::socket* ClientConnection::raw_body_out() {
  if (cancelled_ || chunked_request_ || request_done_) return nullptr;
  return &socket_;
}

asio::awaitable<std::tuple<error_code, http::response_header<>*>> ClientConnection::read_head() {
  if (cancelled_) co_return std::tuple{error_code(asio::error::operation_aborted), nullptr};
  response_.emplace();
  auto& p = *response_;
  p.header_limit(static_cast<std::uint32_t>(pool_.max_response_header_bytes()));
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (head_request_) p.skip(true);
  const HeadRules rules{.request = false, .max_head_bytes = pool_.max_response_header_bytes()};
  auto ec = co_await read_strict_head(socket_, buffer_, p, rules);
  got_response_bytes_ = got_response_bytes_ || p.got_some() || buffer_.size() > 0;
  if (ec) {
    failure_ = ec;
    co_return std::tuple{ec, nullptr};
  }
  auto& head = p.get();
  framing_ = response_framing(p, head_request_);
  remaining_ = framing_ == Framing::length ? p.content_length().value_or(0) : 0;
  header_fields_.reset();
  trailers_.clear();
  co_return std::tuple{error_code{}, &head.base()};
}

BodyInfo ClientConnection::response_body() const {
  auto cl = to_std(response_->content_length());
  switch (framing_) {
    case Framing::none: return {.kind = BodyKind::none, .content_length = cl};
    case Framing::length: return {.kind = BodyKind::length, .content_length = cl};
    default: return {.kind = BodyKind::unknown};
  }
}

// Known length: raw bytes, no parsing; bytes past the body (there should be none) are not taken.
bool ClientConnection::read_body_now(BodyRead& out) {
  if (cancelled_) {
    out = BodyRead{asio::error::operation_aborted, {}};
    return true;
  }
  if (framing_ == Framing::none || (framing_ == Framing::length && remaining_ == 0)) {
    out = BodyRead{};
    return true;
  }
  if (framing_ != Framing::length || buffer_.size() == 0) return false;
  pending_ = static_cast<std::size_t>(std::min<std::uint64_t>(buffer_.size(), remaining_));
  out = BodyRead{error_code{}, asio::buffer(buffer_.data().data(), pending_)};
  return true;
}

asio::awaitable<BodyRead> ClientConnection::read_body() {
  BodyRead piece;
  if (read_body_now(piece)) co_return piece;
  if (framing_ == Framing::length) {  // nothing at hand: one read from the socket
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, pool_.io_buffer_bytes()));
    auto [ec, n] = co_await socket_.async_read_some(buffer_.prepare(want), use_nothrow);
    if (ec) {
      failure_ = ec == asio::error::eof ? error_code(http::error::partial_message) : ec;
      co_return BodyRead{failure_, {}};
    }
    buffer_.commit(n);
    read_body_now(piece);
    co_return piece;
  }
  // Chunked or until close: the parser finds the end (and the trailers). Beast sizes each socket read
  // by the buffer's free capacity, which the head left small: give it room for full-sized reads.
  auto& p = *response_;
  // Counted before the parser reads on, which appends the trailers to the head's fields; not in read_head,
  // since the forwarder removes the head's hop-by-hop fields after it.
  if (!header_fields_) header_fields_ = field_count(p.get().base());
  const std::size_t size = pool_.io_buffer_bytes();
  if (!scratch_) scratch_ = std::make_unique_for_overwrite<char[]>(size);
  if (buffer_.capacity() < size) buffer_.reserve(size);
  while (!p.is_done()) {
    p.get().body().data = scratch_.get();
    p.get().body().size = size;
    auto ec = co_await read_body_some(socket_, buffer_, p, pool_.max_response_header_bytes());
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      failure_ = ec;
      co_return BodyRead{ec, {}};
    }
    std::size_t got = size - p.get().body().size;
    if (got > 0) co_return BodyRead{error_code{}, asio::buffer(scratch_.get(), got)};
  }
  co_return BodyRead{};
}

bool ClientConnection::body_ended() const {
  if (cancelled_) return false;
  switch (framing_) {
    case Framing::none: return true;
    case Framing::length: return remaining_ == 0;
    default: return response_ && response_->is_done();  // read_body() hands over all it parsed
  }
}

void ClientConnection::consume_body(std::size_t n) {
  if (framing_ != Framing::length) return;
  buffer_.consume(n);
  remaining_ -= n;
  pending_ = 0;
}

RawBody ClientConnection::raw_body_in() {
  if (cancelled_ || framing_ != Framing::length || remaining_ == 0 || buffer_.size() > 0) return {};
  return {.socket = &socket_, .remaining = remaining_};
}

const FieldList& ClientConnection::trailers() {
  if (trailers_.empty() && framing_ == Framing::chunked && response_) {
    std::size_t i = 0;
    for (const auto& f : response_->get()) {
      if (i++ < header_fields_.value_or(0)) continue;  // trailers follow the head's fields in the parser's list
      trailers_.emplace_back(f.name_string(), f.value());
    }
  }
  return trailers_;
}

void ClientConnection::cancel() {
  cancelled_ = true;
  error_code ignore;
  socket_.cancel(ignore);
}

Staleness ClientConnection::stale() const {
  return reused_ && !got_response_bytes_ && peer_closed(failure_) ? Staleness::maybe_processed : Staleness::fresh;
}

asio::awaitable<bool> ClientConnection::taken(Clock::duration within) {
  asio::steady_timer timer(socket_.get_executor(), within);
  using namespace asio::experimental::awaitable_operators;
  auto first = co_await (socket_.async_wait(tcp::socket::wait_read, use_nothrow) || timer.async_wait(use_nothrow));
  if (first.index() == 0) co_return true;  // an answer, or the end of the connection: read_head tells which
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) co_return true;
  co_return info.tcpi_unacked == 0;
}

bool ClientConnection::reusable() const {
  if (cancelled_ || !request_done_ || !response_ || buffer_.size() != 0) return false;
  bool complete = framing_ == Framing::none || (framing_ == Framing::length && remaining_ == 0) ||
                  (framing_ == Framing::chunked && response_->is_done());
  return complete && response_->keep_alive();
}

void ClientConnection::release(std::unique_ptr<ClientExchange> self) {
  std::unique_ptr<ClientConnection> conn(static_cast<ClientConnection*>(self.release()));
  if (!reusable()) return;  // closes it
  pool_.release(std::move(conn));
}

tcp::socket* ClientConnection::tunnel_socket(beast::flat_buffer*& already_read) {
  already_read = &buffer_;
  return &socket_;
}

ClientPool::ClientPool(const asio::any_io_executor& ex, net::Watchdogs& watchdogs, tcp::endpoint endpoint,
                       std::size_t max_idle, Clock::duration idle_timeout, Clock::duration connect_timeout,
                       std::size_t max_response_header_bytes, std::size_t io_buffer_bytes, net::Netns netns)
    : ex_(ex),
      endpoint_(endpoint),
      max_idle_(max_idle),
      idle_timeout_(idle_timeout),
      connect_timeout_(connect_timeout),
      max_response_header_bytes_(max_response_header_bytes),
      io_buffer_bytes_(io_buffer_bytes),
      netns_(std::move(netns)),
      host_(endpoint_text(endpoint)),
      watchdog_(watchdogs, *this) {
  idle_.reserve(std::min<std::size_t>(max_idle_, 1024));
}

std::unique_ptr<ClientConnection> ClientPool::take_idle(bool verify) {
  constexpr auto kFresh = std::chrono::milliseconds(100);
  if (idle_.empty()) return nullptr;
  auto now = Clock::now();
  while (!idle_.empty()) {
    auto c = std::move(idle_.back());
    idle_.pop_back();
    rested_ = std::min(rested_, idle_.size());
    if ((!verify && now - c->idle_since_ < kFresh) || looks_alive(c->socket_)) {
      c->reused_ = true;
      return c;
    }
  }
  return nullptr;
}

asio::awaitable<std::tuple<error_code, std::unique_ptr<ClientConnection>>> ClientPool::acquire(bool verify) {
  if (auto c = take_idle(verify)) co_return std::tuple{error_code{}, std::move(c)};
  auto c = std::make_unique<ClientConnection>(ex_, *this);
  if (!netns_.own()) {
    error_code ec;
    netns_.open(c->socket_, endpoint_.protocol(), ec);
    if (ec) co_return std::tuple{ec, nullptr};
  }
  asio::steady_timer timer(ex_, connect_timeout_);
  using namespace asio::experimental::awaitable_operators;
  auto result = co_await (c->socket_.async_connect(endpoint_, use_nothrow) || timer.async_wait(use_nothrow));
  if (result.index() == 1) co_return std::tuple{error_code(asio::error::timed_out), nullptr};
  auto [ec] = std::get<0>(result);
  if (ec) co_return std::tuple{ec, nullptr};
  c->socket_.set_option(tcp::no_delay(true), ec);
  co_return std::tuple{error_code{}, std::move(c)};
}

void ClientPool::release(std::unique_ptr<ClientConnection> conn) {
  if (closed_ || idle_.size() >= max_idle_) return;  // closes it
  conn->idle_since_ = Clock::now();
  conn->scratch_.reset();
  conn->response_.reset();
  if (conn->buffer_.capacity() > kIdleBufferBytes) conn->buffer_.shrink_to_fit();
  idle_.push_back(std::move(conn));
  // Only the first connection not rested can move the pool's deadline earlier; a later one's is read
  // when that one comes due (a compare here, no timer operation).
  if (idle_.size() == rested_ + 1) watchdog_.rearm();
}

void ClientConnection::rest() {
  if (buffer_.size() == 0) buffer_.shrink_to_fit();  // frees it: nothing unread is kept
  std::string().swap(head_);
  FieldList().swap(trailers_);
}

void ClientPool::close_idle() {
  closed_ = true;
  idle_.clear();
  rested_ = 0;
  watchdog_.disarm();  // an idle timeout must not hold the worker's shutdown
}

Clock::time_point ClientPool::next_deadline() const {
  auto due = Clock::time_point::max();
  if (rested_ < idle_.size()) due = idle_[rested_]->idle_since_ + kRestAfter;
  if (!idle_.empty() && idle_timeout_ != Clock::duration::zero())
    due = std::min(due, idle_.front()->idle_since_ + idle_timeout_);
  return due;
}

void ClientPool::on_deadline() {
  const auto now = Clock::now();
  if (idle_timeout_ != Clock::duration::zero()) {
    const auto cutoff = now - idle_timeout_;
    auto fresh = std::find_if(idle_.begin(), idle_.end(), [&](const auto& c) { return c->idle_since_ > cutoff; });
    const auto expired = static_cast<std::size_t>(fresh - idle_.begin());
    idle_.erase(idle_.begin(), fresh);  // closes them
    rested_ -= std::min(rested_, expired);
  }
  for (; rested_ < idle_.size() && idle_[rested_]->idle_since_ + kRestAfter <= now; ++rested_) idle_[rested_]->rest();
}

}  // namespace sluice::proxy::h1
