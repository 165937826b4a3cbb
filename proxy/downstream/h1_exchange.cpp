// The HTTP/1.1 server codec's ServerExchange half: the request body as the forwarder reads it, and the
// response as it writes it (head, body in the connection's framing, trailers, local answers); see
// server_connection.h. The connection's life (reading heads, keep-alive, the client watch, h2c upgrade)
// is in server_connection.cpp.
#include <array>
#include <cstdio>

#include "proxy/codec/h1/strict.h"
#include "proxy/downstream/h1_connection.h"
#include "proxy/downstream/tunnel.h"
#include "proxy/exchange/headers.h"
#include "proxy/exchange/probe.h"
#include "proxy/io/send_now.h"

namespace sluice::proxy::h1 {

asio::awaitable<error_code> Connection::write_all(std::string_view bytes) {
  co_return co_await write_buffers(asio::buffer(bytes));
}

template <class ConstBuffers>
asio::awaitable<error_code> Connection::write_buffers(const ConstBuffers& buffers) {
  error_code ec;  // at once when the socket takes it all (see send_now.h)
  if (const std::size_t sent = send_now(down_, buffers, ec); !ec && sent < asio::buffer_size(buffers))
    ec = co_await write_rest(down_, buffers, sent);
  co_return ec;
}

asio::awaitable<BodyRead> Connection::read_body() {
  if (body_ == RequestBody::abandoned || io_cancelled_) co_return BodyRead{asio::error::operation_aborted, {}};
  if (body_ == RequestBody::continue_owed) {
    body_ = RequestBody::reading;
    static constexpr std::string_view k100 = "HTTP/1.1 100 Continue\r\n\r\n";
    if (auto ec = co_await write_all(k100)) co_return BodyRead{ec, {}};
  }
  if (body_framing_ == Framing::none) co_return BodyRead{};
  if (body_framing_ == Framing::length) {
    if (body_remaining_ == 0) {
      body_complete();
      co_return BodyRead{};
    }
    if (down_buffer_.size() == 0) {
      auto want = static_cast<std::size_t>(std::min<std::uint64_t>(body_remaining_, worker_.config.io_buffer_bytes));
      auto [ec, n] = co_await down_.async_read_some(down_buffer_.prepare(want), use_nothrow);
      if (ec) co_return BodyRead{ec == asio::error::eof ? error_code(http::error::partial_message) : ec, {}};
      down_buffer_.commit(n);
    }
    auto n = static_cast<std::size_t>(std::min<std::uint64_t>(down_buffer_.size(), body_remaining_));
    co_return BodyRead{error_code{}, asio::buffer(down_buffer_.data().data(), n)};
  }
  // Chunked: the parser finds the end and the trailers.
  auto& parser = *parser_;
  std::span<char> scratch = scratch_.get();
  if (down_buffer_.capacity() < scratch.size()) down_buffer_.reserve(scratch.size());
  while (!parser.is_done()) {
    parser.get().body().data = scratch.data();
    parser.get().body().size = scratch.size();
    auto ec = co_await read_body_some(down_, down_buffer_, parser, worker_.config.limits.max_header_bytes);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return BodyRead{ec, {}};
    std::size_t got = scratch.size() - parser.get().body().size;
    if (got > 0) co_return BodyRead{error_code{}, asio::buffer(scratch.data(), got)};
  }
  body_complete();
  co_return BodyRead{};
}

void Connection::consume_body(std::size_t n) {
  if (body_framing_ != Framing::length) return;
  down_buffer_.consume(n);
  body_remaining_ -= n;
  if (body_remaining_ == 0) body_complete();
}

std::optional<asio::const_buffer> Connection::body_in_hand() {
  if (body_framing_ != Framing::length || body_ == RequestBody::continue_owed || down_buffer_.size() < body_remaining_)
    return std::nullopt;
  return asio::buffer(down_buffer_.data().data(), static_cast<std::size_t>(body_remaining_));
}

RawBody Connection::raw_body_in() {
  if (down_.is_tls() || body_framing_ != Framing::length || body_remaining_ == 0 || down_buffer_.size() > 0 ||
      body_ == RequestBody::continue_owed || body_ == RequestBody::abandoned || io_cancelled_)
    return {};
  return {.socket = &down_.socket(), .remaining = body_remaining_};
}

void Connection::raw_body_taken(std::size_t n) {
  body_remaining_ -= n;
  if (body_remaining_ == 0) body_complete();
}

tcp::socket* Connection::raw_body_out() {
  if (down_.is_tls() || out_framing_ != Framing::length || response_ == Response::head_held || io_cancelled_) return nullptr;
  return &down_.socket();
}

FieldList Connection::request_trailers() {
  FieldList trailers;
  if (body_framing_ != Framing::chunked) return trailers;
  std::size_t i = 0;
  for (const auto& f : parser_->get()) {
    if (i++ < header_fields_) continue;  // a chunked body's trailers follow the head's fields in the parser's list
    trailers.emplace_back(f.name_string(), f.value());
  }
  return trailers;
}

asio::awaitable<error_code> Connection::send_interim(const http::response_header<>& head) {
  // RFC 9110 §15.2: a server must not send a 1xx response to an HTTP/1.0 client.
  if (parser_->get().version() < 11) co_return error_code{};
  head_.clear();
  format_downstream_response(head_, head, Framing::none, std::nullopt, true, false, parser_->get().version());
  co_return co_await write_all(head_);
}

asio::awaitable<error_code> Connection::send_head(const http::response_header<>& head, BodyInfo body,
                                                  bool more_soon) {
  const unsigned version = parser_->get().version();
  const bool upgrade = head.result_int() == 101;
  Framing up = body.kind == BodyKind::none     ? Framing::none
               : body.kind == BodyKind::length ? Framing::length
                                               : Framing::until_close;
  out_framing_ = downstream_framing(up, version);
  // Shutdown may have begun during the exchange: say so in this response.
  response_keep_ = keep_alive_ && !worker_.draining && out_framing_ != Framing::until_close && !upgrade;
  head_.clear();
  format_downstream_response(head_, head, out_framing_, body.content_length, response_keep_, upgrade, version);
  if (more_soon && out_framing_ != Framing::none) {
    advance(Response::head_held);  // leaves with the first body bytes, in one write
    co_return error_code{};
  }
  advance(Response::writing);
  co_return co_await write_all(head_);
}

asio::awaitable<error_code> Connection::write_body(asio::const_buffer data) {
  if (io_cancelled_) co_return error_code(asio::error::operation_aborted);
  char chunk_size[24];
  std::array<asio::const_buffer, 4> bufs;
  std::size_t n = 0;
  if (response_ == Response::head_held) bufs[n++] = asio::buffer(head_);
  if (out_framing_ == Framing::chunked) {
    int len = std::snprintf(chunk_size, sizeof chunk_size, "%zx\r\n", data.size());
    bufs[n++] = asio::buffer(chunk_size, static_cast<std::size_t>(len));
    bufs[n++] = data;
    bufs[n++] = asio::buffer("\r\n", 2);
  } else {
    bufs[n++] = data;
  }
  advance(Response::writing);
  co_return co_await write_buffers(std::span<const asio::const_buffer>(bufs.data(), n));
}

asio::awaitable<error_code> Connection::end_body(const FieldList& trailers) {
  error_code ec;
  if (out_framing_ == Framing::chunked) {
    std::string tail = response_ == Response::head_held ? std::move(head_) : std::string();
    tail += "0\r\n";
    for (const auto& [name, value] : trailers) {
      tail += name;
      tail += ": ";
      tail += value;
      tail += "\r\n";
    }
    tail += "\r\n";
    ec = co_await write_all(tail);
  } else if (response_ == Response::head_held) {
    ec = co_await write_all(head_);
  }
  advance(ec ? Response::writing : Response::complete);
  co_return ec;
}

asio::awaitable<void> Connection::send_local(const LocalAnswer& a) {
  LocalResponseExtras extras{.exact_body = a.exact_body, .nosniff = a.nosniff};
  const std::string retry_after = std::to_string(a.retry_after_seconds);
  if (!a.network_hash.empty()) {
    extras.extra_name = kNetworkHashHeader;
    extras.extra_value = a.network_hash;
  } else if (a.retry_after_seconds != 0) {
    extras.extra_name = "Retry-After";
    extras.extra_value = retry_after;
  }
  // A local answer leaves an unread request body behind: the connection cannot carry another request.
  response_keep_ = keep_alive_ && !a.close && body_ == RequestBody::complete;
  linger_ = !response_keep_;
  head_.clear();
  format_local_response(head_, a.status, a.body, response_keep_, record.request_id, extras);
  const auto ec = co_await write_all(head_);
  advance(ec ? Response::writing : Response::complete);
}

asio::awaitable<void> Connection::tunnel(tcp::socket& app, beast::flat_buffer& app_read, Clock::time_point& last_activity) {
  advance(Response::tunnelled);
  co_await relay_tunnel(down_, down_buffer_, app, app_read, worker_.read_buffer, last_activity);
}

void Connection::cancel_io() {
  io_cancelled_ = true;
  error_code ec;
  down_.cancel(ec);
}

void Connection::stop_reading() {
  if (body_ == RequestBody::complete || body_ == RequestBody::abandoned) return;
  body_ = RequestBody::abandoned;
  error_code ec;
  down_.cancel(ec);
}

}  // namespace sluice::proxy::h1
