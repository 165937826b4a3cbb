// An HTTP/2 server stream as a ServerExchange; see server_stream.h.
#include "proxy/downstream/h2_stream.h"

#include "proxy/downstream/h2_session.h"

namespace sluice::proxy::h2 {

Stream::Stream(Session& s, const asio::any_io_executor& ex, std::int32_t stream_id)
    : session(s), id(stream_id), wake(ex), out(std::make_unique<SendQueue>(ex, kResponseBuffer)) {
  req.version(11);
}

// Response bytes still being written keep its send queue alive.
Stream::~Stream() { session.retire(std::move(out)); }

void Stream::close(bool early) {
  state = State::closed;
  if (early) reset = true;
  if (reset && watcher) watcher->client_gone();
  wake.notify();
  out->space.notify();
}

std::string_view Stream::peer_address() const { return session.peer_address(); }
bool Stream::is_tls() const { return session.is_tls(); }

asio::awaitable<BodyRead> Stream::read_body() {
  if (request_sending_.size() == 0) {
    while (request_body_.size() == 0 && request_state == RequestBody::receiving && !reset && !cancelled) co_await wake.wait();
    if (reset || cancelled || request_state == RequestBody::unwanted) co_return BodyRead{asio::error::operation_aborted, {}};
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
  if (request_state != RequestBody::received || request_sending_.size() != 0) return std::nullopt;
  std::swap(request_body_, request_sending_);
  return request_sending_.data();
}

asio::awaitable<error_code> Stream::send_interim(const http::response_header<>& head) {
  if (state == State::closed) co_return error_code(asio::error::connection_reset);
  session.submit_head(*this, head, false, true);
  co_return error_code{};
}

// Heads, trailers and body pieces that fit go to nghttp2 at once: only a full send queue waits.
bool Stream::send_head_now(const http::response_header<>& head, BodyInfo body, bool, error_code& ec) {
  if (state == State::closed) {
    ec = asio::error::connection_reset;
    return true;
  }
  const bool with_body = body.kind != BodyKind::none;
  if (!with_body) {
    out->done = true;
    state = State::responded;
  }
  // A body known to be empty is declared so (content-length: 0), as queue-proxy's net/http declares it.
  session.submit_head(*this, head, with_body, false, with_body ? std::nullopt : body.content_length);
  ec = {};
  return true;
}

asio::awaitable<error_code> Stream::send_head(const http::response_header<>& head, BodyInfo body, bool more_soon) {
  error_code ec;
  send_head_now(head, body, more_soon, ec);
  co_return ec;
}

bool Stream::write_body_now(asio::const_buffer data, error_code& ec) {
  if (state == State::closed) {
    ec = asio::error::connection_reset;
    return true;
  }
  if (cancelled) {
    ec = asio::error::operation_aborted;
    return true;
  }
  if (out->room() < data.size()) return false;
  out->append(data);
  session.resume(*this);
  ec = {};
  return true;
}

asio::awaitable<error_code> Stream::write_body(asio::const_buffer data) {
  // The app's bytes are taken only while the queue toward the client has room.
  while (data.size() > 0) {
    while (out->room() == 0 && state != State::closed && !cancelled) co_await out->space.wait();
    if (state == State::closed) co_return error_code(asio::error::connection_reset);
    if (cancelled) co_return error_code(asio::error::operation_aborted);
    data += out->append(data);
    session.resume(*this);
  }
  co_return error_code{};
}

bool Stream::end_body_now(const FieldList& trailers, error_code& ec) {
  if (state == State::closed) {
    ec = asio::error::connection_reset;
    return true;
  }
  out->trailers = trailers;
  out->done = true;
  state = State::responded;
  session.resume(*this);
  ec = {};
  return true;
}

asio::awaitable<error_code> Stream::end_body(const FieldList& trailers) {
  error_code ec;
  end_body_now(trailers, ec);
  co_return ec;
}

asio::awaitable<void> Stream::send_local(const LocalAnswer& answer) {
  if (state != State::closed) session.submit_local(*this, answer);
  co_return;
}

void Stream::abort() {
  // The app's response broke off, or a deadline passed after the response started.
  session.reset_stream(*this, cancelled ? NGHTTP2_CANCEL : NGHTTP2_INTERNAL_ERROR);
}

}  // namespace sluice::proxy::h2
