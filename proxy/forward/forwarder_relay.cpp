// The forwarder's relay: response heads (1xx passed on), then head, body and trailers to the client, and
// the client's body to the app, spliced where both codecs allow; see forwarding.h.
#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/log.h"
#include "proxy/forward/forwarding.h"
#include "proxy/forward/request_fields.h"
#include "proxy/forward/sniff.h"

namespace sluice::proxy::forwarding {
namespace {

// 1xx responses other than 101 are interim, every one passed on (RFC 9110 §15.2): 103 Early Hints, and a
// 100 the app sends unasked (sluice answers a client's Expect itself), as queue-proxy passes it on.
bool is_interim(unsigned status) { return status >= 100 && status < 200 && status != 101; }

// A response that names no type and no coding is given one from its first bytes (sniff.h), as queue-proxy's
// net/http gives it; an empty Content-Type counts as named.
bool needs_type(const http::response_header<>& head) {
  if (head.find(http::field::content_type) != head.end()) return false;
  auto coding = head.find(http::field::content_encoding);
  return coding == head.end() || coding->value().empty();
}

}  // namespace

// Reads response heads until the final one, passing interim ones on.
asio::awaitable<error_code> Forwarding::receive_head() {
  while (true) {
    auto [ec, head] = co_await up_->read_head();
    if (ec) {
      upstream_failed_ = true;
      co_return ec;
    }
    remove_hop_fields(*head, upgrade_);  // the one place a response's hop-by-hop fields stop, for every pair
    if (!is_interim(head->result_int())) {
      head_ = head;
      head_status_ = static_cast<int>(head->result_int());
      if (worker_.shared.request_metrics) {  // for http_client_*: no clock read otherwise
        head_at_ = Clock::now();
        request_bytes_at_head_ = record_.request_bytes + in_hand_bytes_;
      }
      co_return error_code{};
    }
    if (auto wec = co_await down_.send_interim(*head)) co_return wec;
  }
}

BodySplice* Forwarding::splice_for(std::optional<BodySplice>& splice, const RawBody& in, const tcp::socket* out) {
  const auto min = worker_.config.splice_min_bytes;
  if (!in.socket || !out || min == 0 || in.remaining < min) return nullptr;
  if (!splice) splice.emplace(worker_.pipes);
  return splice->ready() ? &*splice : nullptr;
}

// The client's body to the app, as it arrives; the end carries the client's trailers.
asio::awaitable<error_code> Forwarding::pump_request() {
  const auto max_body = worker_.config.limits.max_body_bytes;
  while (true) {
    // Spliced when it can be (its length is known, so max_body was checked at admission).
    const RawBody in = down_.raw_body_in();
    tcp::socket* out = in.socket ? up_->raw_body_out() : nullptr;
    if (BodySplice* splice = splice_for(request_splice_, in, out)) {
      auto r = co_await splice->move_some(*in.socket, *out, in.remaining);
      if (r.moved) {
        down_.raw_body_taken(r.moved);
        note_request_bytes(r.moved);
      }
      if (r.read_error) {
        request_error_ = r.read_error == asio::error::eof ? error_code(http::error::partial_message) : r.read_error;
        if (up_) up_->cancel();
        co_return request_error_;
      }
      if (r.write_error) co_return r.write_error;
      continue;
    }
    auto [ec, data] = co_await down_.read_body();
    if (!ec && max_body && record_.request_bytes + data.size() > max_body) ec = http::error::body_limit;
    if (ec) {
      request_error_ = ec;
      if (up_) up_->cancel();  // the app must not wait for the rest
      co_return ec;
    }
    if (data.size() == 0) break;
    if (auto wec = co_await up_->write_body(data)) co_return wec;  // the app stopped reading
    down_.consume_body(data.size());
    note_request_bytes(data.size());
  }
  const FieldList trailers = down_.request_trailers();
  auto ec = co_await up_->end_body(trailers);
  if (!ec) request_complete_ = true;
  co_return ec;
}

// The response, once its head is here: head, body and trailers to the client.
asio::awaitable<void> Forwarding::respond() {
  auto& head = *head_;
  const unsigned status = head.result_int();
  record_.status = record_.app_status = static_cast<int>(status);
  const bool upgraded = upgrade_ && status == 101;
  BodyInfo body = upgraded ? BodyInfo{} : up_->response_body();
  deadline_.response_started();
  response_ = Response::started;
  // A 204 carries no length (RFC 9110 §8.6), a 304 no representation metadata (§15.4.5): queue-proxy's
  // net/http drops both, whatever the app sent.
  if (status == 204 || status == 304) {
    head.erase(http::field::content_length);
    body.content_length.reset();
    if (status == 304) head.erase(http::field::content_type);
  }
  // The type of an untyped body of known length comes from its first piece, which is then the first one
  // relayed. (A body of unknown length streams: net/http sends its head before any of it, untyped.)
  BodyRead first;
  bool first_read = false;
  if (body.kind == BodyKind::length && needs_type(head)) {
    if (!up_->read_body_now(first)) first = co_await up_->read_body();
    first_read = true;
    const auto& [first_ec, first_data] = first;
    if (!first_ec && first_data.size() > 0)
      head.set(http::field::content_type,
               sniff_content_type({static_cast<const char*>(first_data.data()), first_data.size()}));
  }
  error_code ec;
  if (!down_.send_head_now(head, body, up_->body_at_hand(), ec))
    ec = co_await down_.send_head(head, body, up_->body_at_hand());
  if (!ec && upgraded) {
    beast::flat_buffer* already = nullptr;
    if (tcp::socket* app = up_->tunnel_socket(already)) {
      deadline_.tunnel();
      auto& tunnels = worker_.shared.open_tunnels;
      tunnels.fetch_add(1, std::memory_order_relaxed);
      co_await down_.tunnel(*app, *already, deadline_.last_write());
      tunnels.fetch_sub(1, std::memory_order_relaxed);
    }
    // The connection ended with the tunnel: the response stays `started`.
    co_return;
  }
  while (!ec && body.kind != BodyKind::none) {
    const RawBody in = first_read ? RawBody{} : up_->raw_body_in();
    tcp::socket* out = in.socket && worker_.config.splice_responses ? down_.raw_body_out() : nullptr;
    if (BodySplice* splice = splice_for(response_splice_, in, out)) {
      auto r = co_await splice->move_some(*in.socket, *out, in.remaining);
      if (r.moved) {
        up_->raw_body_taken(r.moved);
        record_.response_bytes += r.moved;
        deadline_.wrote();
      }
      if (r.read_error) {
        ec = r.read_error == asio::error::eof ? error_code(http::error::partial_message) : r.read_error;
        upstream_failed_ = !gone_ && !deadline_.passed();
      } else {
        ec = r.write_error;
      }
      continue;
    }
    BodyRead piece;
    if (first_read) {
      piece = first;
      first_read = false;
    } else if (!up_->read_body_now(piece)) {
      piece = co_await up_->read_body();
    }
    auto [rec, data] = piece;
    if (rec) {
      ec = rec;
      upstream_failed_ = !gone_ && !deadline_.passed();
      break;
    }
    if (data.size() == 0) break;
    if (!down_.write_body_now(data, ec)) ec = co_await down_.write_body(data);
    if (ec) break;
    up_->consume_body(data.size());
    record_.response_bytes += data.size();
    deadline_.wrote();
    if (up_->body_ended()) break;
  }
  static const FieldList kNone;
  if (!ec) {
    const FieldList& trailers = body.kind == BodyKind::none ? kNone : up_->trailers();
    if (!down_.end_body_now(trailers, ec)) ec = co_await down_.end_body(trailers);
  }
  if (ec) {
    if (upstream_failed_ && !client_went_away(ec))
      log::warn("response relay failed").kv("error", ec.message()).kv("request_id", record_.request_id);
    down_.abort();  // cut: the client sees the body end early
    co_return;
  }
  response_ = Response::complete;
}

// With a request body that streams: the body goes up while the response may already come down (an app
// may answer early, or stream both ways at once); both are joined before the exchange ends.
asio::awaitable<void> Forwarding::exchange_streaming() {
  using namespace asio::experimental::awaitable_operators;
  error_code head_ec;
  auto response_side = [&]() -> asio::awaitable<void> {
    head_ec = co_await receive_head();
    if (head_ec) {
      down_.stop_reading();  // the request body is not wanted any more
      co_return;
    }
    co_await respond();
    // The app answered without reading the whole body: stop reading it (the client's framing is now out
    // of step, so its connection ends after this response).
    if (!request_complete_) {
      down_.stop_reading();
      if (up_) up_->cancel();
    }
  };
  auto request_side = [&]() -> asio::awaitable<void> { co_await pump_request(); };
  co_await (request_side() && response_side());
  if (head_ec) co_await fail(Failure::upstream, head_ec);
}

}  // namespace sluice::proxy::forwarding
