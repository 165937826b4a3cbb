// The forwarder's policy: admission, upstream choice, retry and failures (forwarding.h has the exchange's
// state, forwarder_relay.cpp its heads and bodies); see forwarder.h.
#include "proxy/forward/forwarder.h"

#include <algorithm>

#include "common/log.h"
#include "proxy/exchange/downstream.h"
#include "proxy/forward/admission.h"
#include "proxy/forward/forwarding.h"
#include "proxy/forward/request_fields.h"
#include "proxy/io/field_value.h"
#include "proxy/request_log/request_log.h"
#include "proxy/telemetry/tracer.h"

namespace sluice::proxy {
namespace forwarding {
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

// Fields only the request log reads are copied only when it is on; the strings keep their capacity.
void begin_record(ExchangeRecord& r, const http::request_header<>& req, bool request_log) {
  r.status = 0;
  r.request_bytes = r.response_bytes = 0;
  r.request_id.clear();
  r.trace_id.clear();
  r.span_trace_id.clear();
  r.upstream_start = r.queue_exit = {};
  r.app_status = 0;
  r.app_error = {};
  if (!request_log) return;
  auto copy = [](std::string& to, std::string_view from) { to.assign(from.data(), from.size()); };
  copy(r.method, req.method_string());
  copy(r.target, req.target());
  copy(r.user_agent, field_value(req, http::field::user_agent));
  copy(r.referer, field_value(req, http::field::referer));
}

}  // namespace

Failure Forwarding::classify(Failure upstream_failure) const {
  if (gone_) return Failure::client_gone;
  if (deadline_.passed()) return Failure::timed_out;
  if (request_error_ == http::error::body_limit) return Failure::body_too_large;
  if (request_error_ && client_went_away(request_error_)) return Failure::client_gone;
  if (request_error_ && request_error_ != asio::error::operation_aborted) return Failure::bad_request_body;
  return upstream_failure;
}

asio::awaitable<void> Forwarding::fail(Failure f, error_code ec) {
  if (f == Failure::upstream || f == Failure::upstream_connect) record_.app_error = ec;
  f = classify(f);
  app_failure_ = f;
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

asio::awaitable<void> Forwarding::run() {
  auto& w = worker_;
  const auto& config = w.config;
  const auto admit_by = exchange_deadline(config.timeouts, record_.start);
  // Each gate is awaited only when it is configured: a coroutine call costs a frame even when it has
  // nothing to wait for.
  std::optional<BreakerSlot> slot;
  if (w.shared.breaker) {
    if (!record_.probe.kubelet) {  // queue-proxy lets the kubelet's past its breaker
      auto refused = co_await pass_breaker(w, admit_by, slot, waiting_);
      record_.queue_exit = Clock::now();
      if (gone_) co_return co_await fail(Failure::client_gone, {});  // it left the queue, or was let in as it left
      if (refused) co_return co_await answer(*refused);
    }
    // What queue-proxy's app metrics handler, behind its breaker, records as each request starts.
    if (auto* m = w.shared.request_metrics.get())
      m->record_queue_depth(static_cast<std::int64_t>(w.shared.breaker->occupancy()));
  }
  if (w.shared.instances) {
    asked_for_instance_ = true;
    auto refused = co_await pass_instance_set(w, req_, admit_by, lease_, waiting_);
    if (refused && !gone_) co_return co_await answer(*refused);
  }
  const auto& lease = lease_;
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

  const bool full_fields = w.config.forwarding_fields == ProxyConfig::ForwardingFields::full;
  RequestRewrite rw{.peer_address = down_.peer_address(),
                    .scheme = down_.is_tls() ? kHttps : std::string_view(w.scheme),
                    .request_ids = full_fields ? &w.request_ids : nullptr,
                    .hop_in_forwarded = full_fields};
  ForwardedRequest request(req_, rw, body, record_, upgrade_);
  // A body that arrived whole with the head travels in the same write as the request head, and can go
  // again on a fresh connection; one that streams cannot.
  std::optional<asio::const_buffer> in_hand;
  if (body.kind != BodyKind::none) in_hand = down_.body_in_hand();
  if (in_hand) in_hand_bytes_ = in_hand->size();
  const bool replayable = body.kind == BodyKind::none || in_hand;
  const bool idempotent = is_idempotent(req_.method());
  const tcp::endpoint* instance = lease ? &lease->endpoint : nullptr;
  upstream_start_ = Clock::now();
  record_.upstream_start = upstream_start_;

  // An instance whose listen queue is full has not taken the connection (timeouts.instance_accept):
  // nothing reached it, and the request goes again on a new connection until its deadline.
  auto not_taken = [&] {
    if (gone_ || deadline_.passed()) return false;
    if (const auto now = Clock::now(); now - w.backlog_said > std::chrono::minutes(1)) {
      w.backlog_said = now;
      log::warn("an instance did not accept a new connection within " +
                std::to_string(config.timeouts.instance_accept.count()) +
                " ms: its listen queue (the backlog it passed to listen()) is full. Requests wait and go again "
                "on new connections; a larger backlog, or container-concurrency, avoids the wait (said once a minute)")
          .kv("event", "instance.backlog_full").kv("address", instance->address().to_string())
          .kv("port", static_cast<unsigned>(instance->port()));
    }
    return true;
  };
  for (int attempt = 0;; ++attempt) {
    const bool verify = !replayable || !idempotent || attempt > 0;
    up_ = w.connector->reuse(protocol, instance, verify);
    const bool fresh = !up_;
    if (!up_) {
      auto [oec, opened] = co_await w.connector->open(protocol, instance, verify);
      if (oec == asio::error::timed_out && instance && not_taken()) continue;  // its SYN dropped: nothing went
      if (oec || gone_ || deadline_.passed()) co_return co_await fail(Failure::upstream_connect, oec);
      up_ = std::move(opened);
    }
    auto ec = co_await up_->send_head(request, in_hand);
    if (ec) upstream_failed_ = true;
    if (!ec && !replayable) {
      co_await exchange_streaming();
      break;
    }
    if (!ec && fresh && instance && !co_await up_->taken(config.timeouts.instance_accept)) {
      if (not_taken()) {  // the handshake's last ACK dropped: the request after it too
        up_.reset();
        continue;
      }
      ec = asio::error::timed_out;
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

  if (gone_ && response_ != Response::complete) {
    // nginx's rule: 499 when the client left before the response began; a cut response keeps its status.
    if (response_ == Response::not_started) record_.status = kClientClosedRequest;
    up_.reset();
    co_return;
  }
  if (!up_) co_return;
  if (response_ == Response::complete && request_complete_) {
    auto done = std::move(up_);
    done->release(std::move(done));  // back to its pool when its connection may carry another exchange
  } else {
    up_.reset();
  }
}

namespace {

// The Go error otelhttp's transport would have seen for a failure before the response head.
metrics::AppError app_error(Failure f) {
  switch (f) {
    case Failure::upstream_connect: return metrics::AppError::dial;
    case Failure::timed_out: return metrics::AppError::deadline;
    case Failure::client_gone: return metrics::AppError::canceled;
    default: return metrics::AppError::other;
  }
}

}  // namespace

void Forwarding::count_app_exchange(Clock::time_point end, const CountedExchange& counted) const {
  if (upstream_start_ == Clock::time_point{}) return;  // the app was never asked
  auto& m = *worker_.shared.request_metrics;
  m.record_app(record_.status, seconds_between(upstream_start_, end));
  if (auto* http = m.http()) {
    const bool head = head_status_ != 0;
    http->record_client({.method = req_.method_string(),
                         .status = head_status_,
                         .error = head ? metrics::AppError::none : app_error(app_failure_),
                         .route_tag = counted.route_tag(),
                         .version = counted.version(),
                         .request_body_bytes = head ? request_bytes_at_head_ : record_.request_bytes,
                         .seconds = seconds_between(upstream_start_, head ? head_at_ : end)});
  }
}

}  // namespace forwarding

void log_exchange(const ForwardContext& worker, const ExchangeRecord& record, const http::request_header<>* req) {
  if (worker.config.request_log) write_request_log(record, req, worker.config);
}

namespace {

// One exchange in flight on the worker, from forward()'s start to its end.
class InFlight {
 public:
  explicit InFlight(ExchangesInFlight* count) : count_(count) {
    if (count_) count_->peak = std::max(count_->peak, ++count_->now);
  }
  ~InFlight() {
    if (!count_) return;
    --count_->now;
    if (count_->listener) count_->listener->exchange_ended();
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  ExchangesInFlight* count_;
};

}  // namespace

asio::awaitable<void> forward(ForwardContext& worker, ServerExchange& down) {
  InFlight in_flight(worker.exchanges);
  const auto& config = worker.config;
  auto& record = down.record;
  auto& req = down.request();
  forwarding::begin_record(record, req, config.request_log);
  record.probe = probe_marks_of(req);
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
  if (worker.shared.tracer && !record.probe.any) span = worker.shared.tracer->begin(req, record, down.is_tls());
  Clock::time_point forwarded;
  {
    CountedExchange counted(worker, req, record, down.is_tls());
    {
      forwarding::Forwarding f(worker, down);
      co_await f.run();
      forwarded = Clock::now();
      if (counted.measured()) f.count_app_exchange(forwarded, counted);
      f.report_to_instances(forwarded);
    }
    // The exchange counts until its codec has taken the whole response (or the client is gone).
    if (!down.is_flushed()) co_await down.flushed();
  }
  if (span) worker.shared.tracer->end(*span, req, record, forwarded, Clock::now());
  // A forwarded probe (K-Network-Probe: queue from an ordinary client, K-Kubelet-Probe) is logged as one.
  if (!record.probe.any || config.probe_request_log) log_exchange(worker, record, &req);
}

}  // namespace sluice::proxy
