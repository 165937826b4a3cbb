// What every worker shares: the stats the autoscaler reads, the breaker, the user container's
// readiness, the drain state and the request metrics. Each member is thread-safe on its own.
#pragma once

#include <atomic>
#include <memory>

#include "metrics/request_metrics.h"
#include "metrics/request_stats.h"
#include "proxy/control/drain.h"
#include "proxy/control/readiness_probe.h"
#include "proxy/exchange/config.h"
#include "proxy/forward/breaker.h"
#include "proxy/forward/instance_set.h"
#include "proxy/telemetry/tracer.h"

namespace sluice::proxy {

struct SharedState {
  SharedState(const ProxyConfig& c, std::size_t workers)
      : stats(Clock::now(), workers),
        breaker(c.container_concurrency
                    ? std::make_unique<ConcurrencyBreaker>(c.container_concurrency, c.queue_depth)
                    : nullptr),
        readiness(c.readiness, c.sidecar_readiness),
        drainer(c.timeouts.drain_quiet_period) {}

  metrics::RequestStats stats;
  std::unique_ptr<ConcurrencyBreaker> breaker;  // null: no concurrency limit, nothing on the path
  UserReadiness readiness;
  Drainer drainer;
  std::unique_ptr<metrics::RequestMetrics> request_metrics;  // null unless enabled
  std::shared_ptr<InstanceSet> instances;  // null: every exchange goes to the configured upstream
  std::unique_ptr<telemetry::Tracer> tracer;  // null: no tracing (set by app/ before start)
  // Upgraded (WebSocket) connections relaying bytes now: at shutdown they get a wait of their own.
  std::atomic<std::size_t> open_tunnels{0};
};

}  // namespace sluice::proxy
