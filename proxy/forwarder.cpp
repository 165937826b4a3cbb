// The forwarder; see forwarder.h.
#include "proxy/forwarder.h"

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "common/log.h"
#include "proxy/admission.h"
#include "proxy/deadline.h"
#include "proxy/failure.h"
#include "proxy/field_value.h"
#include "proxy/request_fields.h"
#include "proxy/request_log.h"
#include "proxy/splice.h"
#include "proxy/telemetry/tracer.h"
#include "proxy/worker_context.h"

namespace sluice::proxy {
namespace {

bool is_idempotent(http::verb v) {
  switch (v) {
    case http::verb::get:
    case http::verb::head:
    case http::verb::put:
    case http::verb::delete_:
    case http::verb::options:
    case http::verb::trace: return true;
    default: return false;
  }
}

bool client_went_away(error_code ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == http::error::end_of_stream || ec == http::error::partial_message;
}

// 1xx responses other than 101 are interim: 100 is swallowed (sluice answered the client's Expect
// itself), the others (103 Early Hints) are passed on.
bool is_interim(unsigned status) { return status >= 100 && status < 200 && status != 101; }

// Fields only the request log reads are copied only when it is on; the strings keep their capacity.
void begin_record(ExchangeRecord& r, const http::request_header<>& req, bool request_log) {
  r.status = 0;
  r.request_bytes = r.response_bytes = 0;
  r.request_id.clear();
  r.trace_id.clear();
  r.span_trace_id.clear();
  r.upstream_start = {};
  if (!request_log) return;
  auto copy = [](std::string& to, std::string_view from) { to.assign(from.data(), from.size()); };
  copy(r.method, req.method_string());
  copy(r.target, req.target());
  copy(r.user_agent, field_value(req, http::field::user_agent));
  copy(r.referer, field_value(req, http::field::referer));
}

// One exchange between admission and the end of its response.
class Forwarding final : private ClientGone, private ExchangeDeadline::Owner {
 public:
  Forwarding(WorkerContext& worker, ServerExchange& down)
      : worker_(worker),
        down_(down),
        record_(down.record),
        req_(down.request()),
        deadline_(worker.watchdogs, worker.config.timeouts, down.record.start, *this) {
    down_.watcher = this;
  }
  ~Forwarding() { down_.watcher = nullptr; }
  Forwarding(const Forwarding&) = delete;
  Forwarding& operator=(const Forwarding&) = delete;

  asio::awaitable<void> run();

 private:
  void client_gone() override {
    if (response_complete_) return;  // it left after the whole response: nothing was lost
    gone_ = true;
    if (up_) up_->cancel();
    down_.cancel_io();
  }
  void deadline_passed() override {
    if (up_) up_->cancel();
    down_.cancel_io();
  }

  asio::awaitable<void> answer(const LocalAnswer& a) {
    record_.status = static_cast<int>(a.status);
    record_.response_bytes = a.body.size() + (a.exact_body ? 0 : 1);
    co_await down_.send_local(a);
  }
  // The exchange failed before its response started: the table says what the client gets.
  asio::awaitable<void> fail(Failure f, error_code ec);
  // Why the exchange failed before the response, from what the sides saw.
  Failure classify(Failure upstream_failure) const;

  asio::awaitable<error_code> receive_head();
  // The splice (splice.h) for a body of which `in` is the rest, when both codecs and the configuration
  // allow one (`out` is where it goes); null: copy it through the codecs.
  BodySplice* splice_for(std::optional<BodySplice>& splice, const RawBody& in, const tcp::socket* out);
  asio::awaitable<error_code> pump_request();
  asio::awaitable<void> respond();
  asio::awaitable<void> exchange_streaming();
  void note_request_bytes(std::size_t n) { record_.request_bytes += n; }

  WorkerContext& worker_;
  ServerExchange& down_;
  ExchangeRecord& record_;
  http::request_header<>& req_;
  ExchangeDeadline deadline_;
  std::unique_ptr<ClientExchange> up_;
  std::optional<BodySplice> request_splice_, response_splice_;
  const http::response_header<>* head_ = nullptr;
  Clock::time_point upstream_start_;
  bool upgrade_ = false;
  bool gone_ = false;
  bool response_started_ = false;
  bool response_complete_ = false;
  bool request_complete_ = false;
  bool upstream_failed_ = false;  // the app broke off (as opposed to the client or a deadline)
  error_code request_error_;      // reading the client's body failed
};

Failure Forwarding::classify(Failure upstream_failure) const {
  if (gone_) return Failure::client_gone;
  if (deadline_.passed()) return Failure::timed_out;
  if (request_error_ == http::error::body_limit) return Failure::body_too_large;
  if (request_error_ && client_went_away(request_error_)) return Failure::client_gone;
  if (request_error_ && request_error_ != asio::error::operation_aborted) return Failure::bad_request_body;
  return upstream_failure;
}

asio::awaitable<void> Forwarding::fail(Failure f, error_code ec) {
  f = classify(f);
  // A failure of the client's body names the body's error, not the app side's cancellation it caused.
  if (f == Failure::bad_request_body) ec = request_error_;
  up_.reset();  // abandons the upstream exchange (connection closed, stream reset)
  if (f == Failure::client_gone) {
    record_.status = kClientClosedRequest;
    down_.abort();
    co_return;
  }
  if (f == Failure::body_too_large && request_error_ && !down_.answers_mid_body()) {
    record_.status = failure_status(f);
    down_.abort();
    co_return;
  }
  // Named, not a temporary in the co_await expression: GCC 12 destroys such temporaries twice.
  auto a = failure_answer(f, ec);
  co_await answer(a);
}

// Reads response heads until the final one, passing interim ones on.
asio::awaitable<error_code> Forwarding::receive_head() {
  while (true) {
    auto [ec, head] = co_await up_->read_head();
    if (ec) {
      upstream_failed_ = true;
      co_return ec;
    }
    if (!is_interim(head->result_int())) {
      head_ = head;
      co_return error_code{};
    }
    if (head->result_int() == 100) continue;
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
  const auto& head = *head_;
  const unsigned status = head.result_int();
  record_.status = static_cast<int>(status);
  const bool upgraded = upgrade_ && status == 101;
  BodyInfo body = upgraded ? BodyInfo{} : up_->response_body();
  deadline_.response_started();
  response_started_ = true;
  error_code ec;
  if (!down_.send_head_now(head, body, up_->body_at_hand(), ec))
    ec = co_await down_.send_head(head, body, up_->body_at_hand());
  if (!ec && upgraded) {
    beast::flat_buffer* already = nullptr;
    if (tcp::socket* app = up_->tunnel_socket(already)) {
      deadline_.tunnel();
      co_await down_.tunnel(*app, *already, deadline_.last_write());
    }
    response_complete_ = false;  // the connection ended with the tunnel
    co_return;
  }
  while (!ec && body.kind != BodyKind::none) {
    const RawBody in = up_->raw_body_in();
    tcp::socket* out = in.socket ? down_.raw_body_out() : nullptr;
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
    auto [rec, data] = co_await up_->read_body();
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
  response_complete_ = true;
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

asio::awaitable<void> Forwarding::run() {
  auto& w = worker_;
  const auto& config = w.config;
  const auto admit_by = exchange_deadline(config.timeouts, record_.start);
  // Each gate is awaited only when it is configured: a coroutine call costs a frame even when it has
  // nothing to wait for.
  std::optional<BreakerSlot> slot;
  if (w.shared.breaker) {
    if (auto refused = co_await pass_breaker(w, admit_by, slot)) co_return co_await answer(*refused);
  }
  std::optional<BackendLease> lease;
  if (w.shared.backends) {
    if (auto refused = co_await pass_backends(w, req_, admit_by, lease)) co_return co_await answer(*refused);
  }
  if (lease) deadline_.limit_request(lease->request_timeout);
  if (gone_) co_return co_await fail(Failure::client_gone, {});

  const BodyInfo body = down_.request_body();
  const auto max_body = config.limits.max_body_bytes;
  if (max_body && body.kind == BodyKind::length && body.content_length && *body.content_length > max_body)
    co_return co_await fail(Failure::body_too_large, {});

  auto upgrade_to = field_value(req_, http::field::upgrade);
  upgrade_ = !upgrade_to.empty() && !iequals(upgrade_to, "h2c") &&
             listed_in_connection(field_value(req_, http::field::connection), "upgrade");
  AppProtocol protocol = AppProtocol::http1;
  if (!upgrade_) {  // an upgrade (WebSocket) needs HTTP/1.1 to the app
    auto h2c = upstream_h2c_known(w, lease);
    if (!h2c) h2c = co_await detect_upstream_h2c(w);
    if (*h2c) protocol = AppProtocol::h2c;
  }

  RequestRewrite rw{.peer_address = down_.peer_address(),
                    .scheme = down_.is_tls() ? kHttps : std::string_view(w.scheme),
                    .request_ids = &w.request_ids};
  ForwardedRequest request(req_, rw, body, record_, upgrade_);
  // A body that arrived whole with the head travels in the same write as the request head, and can go
  // again on a fresh connection; one that streams cannot.
  std::optional<asio::const_buffer> in_hand;
  if (body.kind != BodyKind::none) in_hand = down_.body_in_hand();
  const bool replayable = body.kind == BodyKind::none || in_hand;
  const bool idempotent = is_idempotent(req_.method());
  const tcp::endpoint* instance = lease ? &lease->endpoint : nullptr;
  upstream_start_ = Clock::now();
  record_.upstream_start = upstream_start_;

  for (int attempt = 0;; ++attempt) {
    const bool verify = !replayable || !idempotent || attempt > 0;
    up_ = w.connector->reuse(protocol, instance, verify);
    if (!up_) {
      auto [oec, opened] = co_await w.connector->open(protocol, instance, verify);
      if (oec || gone_ || deadline_.passed()) co_return co_await fail(Failure::upstream_connect, oec);
      up_ = std::move(opened);
    }
    auto ec = co_await up_->send_head(request, in_hand);
    if (ec) upstream_failed_ = true;
    if (!ec && !replayable) {
      co_await exchange_streaming();
      break;
    }
    if (!ec) ec = co_await receive_head();
    if (!ec) {
      if (in_hand) {
        down_.consume_body(in_hand->size());
        note_request_bytes(in_hand->size());
      }
      request_complete_ = true;
      co_await respond();
      break;
    }
    // Nothing came back. The app may not have taken the request at all (a keep-alive connection it had
    // closed, a refused stream): send it once more on a fresh connection, when that is safe.
    auto stale = up_->stale();
    bool retry = attempt == 0 && !gone_ && !deadline_.passed() && upstream_failed_ &&
                 (stale == Staleness::unprocessed || (stale == Staleness::maybe_processed && idempotent));
    if (!retry) co_return co_await fail(Failure::upstream, ec);
    up_.reset();
    upstream_failed_ = false;
  }

  if (response_started_ && worker_.shared.request_metrics)
    worker_.shared.request_metrics->record_app(record_.status, seconds_between(upstream_start_, Clock::now()));
  if (gone_ && !response_complete_) {
    // nginx's rule: 499 when the client left before the response began; a cut response keeps its status.
    if (!response_started_) record_.status = kClientClosedRequest;
    up_.reset();
    co_return;
  }
  if (!up_) co_return;
  if (response_complete_ && request_complete_) {
    auto done = std::move(up_);
    done->release(std::move(done));  // back to its pool when its connection may carry another exchange
  } else {
    up_.reset();
  }
}

}  // namespace

void log_exchange(const WorkerContext& worker, const ExchangeRecord& record, const http::request_header<>* req) {
  if (worker.config.request_log) write_request_log(record, req, worker.config);
}

asio::awaitable<void> forward(WorkerContext& worker, ServerExchange& down) {
  const auto& config = worker.config;
  auto& record = down.record;
  auto& req = down.request();
  begin_record(record, req, config.request_log);
  // Health checks are answered here, never forwarded, counted or queued (SPEC §3.1).
  if (auto probe = probe_kind_of(req); probe != ProbeKind::none) {
    auto answer = co_await answer_health_check(worker, probe, req);
    record.status = static_cast<int>(answer.status);
    co_await down.send_local(answer);
    if (!down.is_flushed()) co_await down.flushed();
    if (config.probe_request_log) log_exchange(worker, record, &req);
    co_return;
  }
  // Tracing: the span begins where the exchange is counted and ends where its log line is written.
  std::optional<telemetry::ExchangeSpan> span;
  if (worker.shared.tracer) span = worker.shared.tracer->begin(req, record);
  {
    CountedExchange counted(worker, req, record);
    {
      Forwarding f(worker, down);
      co_await f.run();
    }
    // The exchange counts until the client has the whole response (or is gone).
    if (!down.is_flushed()) co_await down.flushed();
  }
  if (span) worker.shared.tracer->end(*span, req, record, Clock::now());
  log_exchange(worker, record, &req);
}

}  // namespace sluice::proxy
