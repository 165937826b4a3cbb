// Where exchanges go when the app is not one fixed address but a set of instances chosen per request
// (the gateway). The proxy asks for an instance, forwards to it, and lets the lease go when the exchange
// ends; everything else (routing by Host, cold starts, concurrency per instance, throttling) is the
// implementation's business, in app/. Without one, the proxy forwards to ProxyConfig's upstream.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "common/wait_queue.h"
#include "proxy/exchange/exchange.h"
#include "proxy/io/asio.h"

namespace sluice::proxy {

// An instance to forward one exchange to; dropping `hold` tells the implementation the exchange ended.
struct InstanceLease {
  tcp::endpoint endpoint;
  std::shared_ptr<void> hold;
  bool h2c = false;  // the instance speaks h2c (prior knowledge), not HTTP/1.1
  std::chrono::milliseconds request_timeout{0};  // a whole-exchange limit shorter than the proxy's; 0: the proxy's
};

// Why no instance was given: sent to the client as is.
struct InstanceRefusal {
  unsigned status = 503;
  std::string reason;
  unsigned retry_after_seconds = 0;  // sent as Retry-After when not 0 (a service that failed to start)
};

class InstanceSet {
 public:
  virtual ~InstanceSet() = default;

  // On the calling worker's executor: an instance for a request with this Host (and Knative-Serving-Tag,
  // empty when absent), waiting (cold start, every instance busy) until `deadline` at the latest, or until
  // `abandon` is abandoned (the client went away: a refusal with status 499). `proxied`: the request's
  // target was absolute-form, so its client took this hop for a forward proxy (http_proxy) and the host
  // is a name it means, not whatever address it reached this listener by.
  virtual asio::awaitable<std::variant<InstanceLease, InstanceRefusal>> acquire(std::string_view host,
                                                                              std::string_view tag,
                                                                              bool proxied,
                                                                              Clock::time_point deadline,
                                                                              net::WaitAbandon* abandon) = 0;

  // Every exchange that asked for an instance, once it has ended: its request head, its record (final
  // status, start) and the lease it got (null when it was refused, or left while it waited). On the
  // exchange's worker, before the lease is let go; must be cheap.
  virtual void exchange_ended(const http::request_header<>& /*req*/, const ExchangeRecord& /*record*/,
                              const InstanceLease* /*lease*/, Clock::time_point /*end*/) {}

  // A client connected: a request is likely to follow, so work that takes a while (thawing an instance)
  // may start before it is parsed. Any worker thread; must be cheap.
  virtual void on_connection() {}

  // At shutdown, after the workers stopped: waiters hold timers of their io_contexts, which go first.
  virtual void drop_waiters() = 0;
};

}  // namespace sluice::proxy
