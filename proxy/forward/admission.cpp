// Admission; see admission.h.
#include "proxy/forward/admission.h"

#include "common/log.h"
#include "proxy/exchange/headers.h"
#include "proxy/forward/failure.h"
#include "proxy/io/field_value.h"
#include "proxy/upstream/h2_client.h"

namespace sluice::proxy {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

ProbeKind probe_kind_of(const http::request_header<>& req) {
  return classify_probe(field_value(req, http::field::user_agent), field_value(req, kNetworkProbeHeader));
}

ProbeMarks probe_marks_of(const http::request_header<>& req) {
  return probe_marks(field_value(req, http::field::user_agent), field_value(req, kNetworkProbeHeader),
                     field_value(req, kKubeletProbeHeader));
}

// queue-proxy's answers, word for word: a drain first, then the probe's own rules.
asio::awaitable<LocalAnswer> answer_health_check(ForwardContext& worker, ProbeKind kind,
                                                 const http::request_header<>& req) {
  if (worker.shared.drainer.draining()) co_return LocalAnswer{.status = 503, .body = "shutting down"};
  if (kind == ProbeKind::network_hash) {
    auto hash = req[kNetworkHashHeader];
    if (hash.empty())
      co_return LocalAnswer{.status = 400, .body = "a probe request must contain a non-empty \"K-Network-Hash\" header"};
    co_return LocalAnswer{.status = 200, .exact_body = true, .network_hash = std::string(hash)};
  }
  auto value = req[kNetworkProbeHeader];
  if (value != "queue")
    co_return LocalAnswer{.status = 400, .body = "unexpected probe header value: " + std::string(value)};
  bool ready = co_await worker.shared.readiness.check();
  if (!ready) co_return LocalAnswer{.status = 503, .exact_body = true};  // no body, as queue-proxy
  co_return LocalAnswer{.status = 200, .body = "queue", .exact_body = true};
}

CountedExchange::CountedExchange(ForwardContext& worker, const http::request_header<>& req,
                                 const ExchangeRecord& record, bool tls)
    : shared_(worker.shared),
      stats_(worker.stats),
      req_(req),
      // queue-proxy compares the value as it is: `activator`, not `Activator`.
      proxied_(field_value(req, kProxyRequestHeader) == "activator"),
      measured_(shared_.request_metrics && !record.probe.any),
      tls_(tls),
      record_(record) {
  shared_.drainer.note_request(record_.start);
  // queue-proxy forwards a request marked as the kubelet's without counting it for the autoscaler.
  if (!record_.probe.kubelet) stats_.request_in(record_.start, proxied_);
  if (measured_ && shared_.request_metrics->http())
    route_tag_ = metrics::knative_route_tag(field_value(req, kRouteTagHeader), field_value(req, kDefaultRouteHeader));
}

metrics::HttpVersion CountedExchange::version() const {
  if (record_.protocol == "HTTP/2.0") return metrics::HttpVersion::v2;
  return req_.version() == 10 ? metrics::HttpVersion::v1_0 : metrics::HttpVersion::v1_1;
}

CountedExchange::~CountedExchange() {
  auto now = Clock::now();
  if (!record_.probe.kubelet) stats_.request_out(now, proxied_);
  if (!measured_) return;
  auto& m = *shared_.request_metrics;
  const double seconds = seconds_between(record_.start, now);
  m.record_proxy(record_.status, seconds);
  if (auto* http = m.http()) {
    http->record_server({.method = req_.method_string(),
                         .status = record_.status,
                         .route_tag = route_tag_,
                         .version = version(),
                         .host = field_value(req_, http::field::host),
                         .tls = tls_,
                         .request_body_bytes = record_.request_bytes,
                         .response_body_bytes = record_.response_bytes,
                         .seconds = seconds});
  }
}

asio::awaitable<std::optional<LocalAnswer>> pass_breaker(ForwardContext& worker, Clock::time_point deadline,
                                                         std::optional<BreakerSlot>& slot, net::WaitAbandon& abandon) {
  auto* breaker = worker.shared.breaker.get();
  if (!breaker) co_return std::nullopt;
  auto admission = co_await breaker->acquire(deadline, &abandon);
  if (admission == ConcurrencyBreaker::Admission::queue_full)
    co_return LocalAnswer{.status = 503, .body = "pending request queue full", .nosniff = true};
  if (admission == ConcurrencyBreaker::Admission::timed_out)
    co_return LocalAnswer{.status = 503, .body = "request timeout while waiting for the container", .close = true,
                          .nosniff = true};
  if (admission == ConcurrencyBreaker::Admission::abandoned)
    co_return LocalAnswer{.status = static_cast<unsigned>(kClientClosedRequest), .body = "client closed request", .close = true};
  slot.emplace(breaker);
  co_return std::nullopt;
}

asio::awaitable<std::optional<LocalAnswer>> pass_instance_set(ForwardContext& worker,
                                                              const http::request_header<>& req,
                                                              Clock::time_point deadline,
                                                              std::optional<InstanceLease>& lease,
                                                              net::WaitAbandon& abandon) {
  auto* instances = worker.shared.instances.get();
  if (!instances) co_return std::nullopt;
  auto host = req[http::field::host];
  auto tag = req[kRouteTagHeader];
  const auto target = req.target();
  auto pending = instances->acquire(std::string_view(host.data(), host.size()),
                                    std::string_view(tag.data(), tag.size()),
                                    absolute_form_target(std::string_view(target.data(), target.size())), deadline,
                                    &abandon);  // named: no temporary inside co_await (STYLE.md)
  auto got = co_await std::move(pending);
  if (auto* refusal = std::get_if<InstanceRefusal>(&got))
    co_return LocalAnswer{.status = refusal->status, .body = std::move(refusal->reason), .close = refusal->status == 504,
                          .retry_after_seconds = refusal->retry_after_seconds};
  lease.emplace(std::move(std::get<InstanceLease>(got)));
  co_return std::nullopt;
}

asio::awaitable<bool> detect_upstream_h2c(ForwardContext& worker) {
  if (worker.upstream_h2c) co_return *worker.upstream_h2c;
  if (auto asked = worker.h2c_detection) {  // another exchange asked: its answer is this one's
    co_await asked->wait();
    co_return worker.upstream_h2c.value_or(false);
  }
  auto asking = std::make_shared<Completion>(worker.executor);
  worker.h2c_detection = asking;
  auto found = co_await h2::speaks_h2c(worker.executor, worker.upstream, worker.config.timeouts.upstream_connect,
                                         worker.config.netns);
  worker.h2c_detection.reset();
  asking->signal();
  if (!found) co_return false;  // not listening yet: HTTP/1.1 this time, ask again next time
  worker.upstream_h2c = found;
  log::info("app protocol detected").kv("protocol", *found ? "h2c" : "http1");
  co_return *found;
}

Clock::time_point exchange_deadline(const Timeouts& t, Clock::time_point start) {
  auto d = Clock::time_point::max();
  if (t.request.count() > 0) d = std::min(d, start + t.request);
  if (t.response_start.count() > 0) d = std::min(d, start + t.response_start);
  return d;
}

}  // namespace sluice::proxy
