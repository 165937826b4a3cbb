// What happens to a request before it may go to the app, whatever protocol it came in on (SPEC §3,
// steps 1 and 4): health checks are answered here; ordinary requests are counted in the stats and
// pass the breaker. The codecs turn a LocalAnswer into bytes of their protocol.
#pragma once

#include <optional>
#include <string>

#include "proxy/exchange/exchange.h"
#include "proxy/exchange/probe.h"
#include "proxy/forward/context.h"

namespace sluice::proxy {

ProbeKind probe_kind_of(const http::request_header<>& req);
ProbeMarks probe_marks_of(const http::request_header<>& req);

// The answer to a health check of the given kind.
asio::awaitable<LocalAnswer> answer_health_check(ForwardContext& worker, ProbeKind kind,
                                                 const http::request_header<>& req);

// The exchange's share of the stats: counted in at construction (before the breaker, so waiting
// requests count toward concurrency as Knative's autoscaler expects), out at destruction, however
// the exchange ends; the proxy's side of the request metrics (the client's view: the legacy
// revision_request_* and otelhttp's http_server_*) is recorded then too.
class CountedExchange {
 public:
  CountedExchange(ForwardContext& worker, const http::request_header<>& req, const ExchangeRecord& record, bool tls);
  ~CountedExchange();
  CountedExchange(const CountedExchange&) = delete;
  CountedExchange& operator=(const CountedExchange&) = delete;

  // Whether the request metrics take the exchange: they are on, and it is no probe (record.probe.any:
  // queue-proxy forwards `K-Network-Probe: queue` from an ordinary client and K-Kubelet-Probe alone, but its
  // metrics handlers leave out every probe).
  bool measured() const { return measured_; }
  // Knative's route tag of the request (set when otelhttp's families are on).
  std::string_view route_tag() const { return route_tag_; }
  metrics::HttpVersion version() const;

 private:
  SharedState& shared_;
  metrics::RequestStatsShard& stats_;
  const http::request_header<>& req_;
  bool proxied_;
  bool measured_;
  bool tls_;
  std::string_view route_tag_;
  const ExchangeRecord& record_;
};

// Waits for a breaker slot (when there is a breaker) until `deadline`, or until `abandon` is abandoned
// (the client went away: it leaves the queue at once); nullopt when admitted (the slot is in `slot`),
// else the refusal (499 when abandoned).
asio::awaitable<std::optional<LocalAnswer>> pass_breaker(ForwardContext& worker, Clock::time_point deadline,
                                                         std::optional<BreakerSlot>& slot, net::WaitAbandon& abandon);

// With an instance set (the gateway), waits for an instance for this request until `deadline` or until
// `abandon` is abandoned; nullopt when one was given (in `lease`), else the refusal to send. Without one:
// nullopt and no lease.
asio::awaitable<std::optional<LocalAnswer>> pass_instance_set(ForwardContext& worker,
                                                              const http::request_header<>& req,
                                                              Clock::time_point deadline,
                                                              std::optional<InstanceLease>& lease,
                                                              net::WaitAbandon& abandon);

// Whether the exchange goes to the app over h2c: the gateway's instance says so, or the configured
// upstream protocol does. nullopt while it is still to be detected (detect_upstream_h2c). Not a
// coroutine: the common case costs no coroutine frame per exchange.
inline std::optional<bool> upstream_h2c_known(const ForwardContext& worker,
                                              const std::optional<InstanceLease>& lease) {
  if (lease) return lease->h2c;
  switch (worker.config.upstream_protocol) {
    case ProxyConfig::UpstreamProtocol::http1: return false;
    case ProxyConfig::UpstreamProtocol::h2c: return true;
    case ProxyConfig::UpstreamProtocol::detect: break;
  }
  return worker.upstream_h2c;
}

// ENABLE_HTTP2_AUTO_DETECTION: asks the app once per worker (concurrent exchanges share the question).
asio::awaitable<bool> detect_upstream_h2c(ForwardContext& worker);

// The earlier of the whole-request and response-start deadlines of an exchange that began at `start`.
Clock::time_point exchange_deadline(const Timeouts& t, Clock::time_point start);

double seconds_between(Clock::time_point a, Clock::time_point b);

}  // namespace sluice::proxy
