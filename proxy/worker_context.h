// What a connection may use of the worker that owns it. Everything here belongs to one thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <unordered_set>

#include "proxy/config.h"
#include "proxy/headers.h"
#include "proxy/shared_state.h"
#include "proxy/upstream_pool.h"

namespace sluice::proxy {

class ConnectionHandle {
 public:
  // Close at once if no exchange is in progress; otherwise finish it and then close.
  virtual void close_when_idle() = 0;

 protected:
  ~ConnectionHandle() = default;
};

struct WorkerContext {
  WorkerContext(const ProxyConfig& c, SharedState& s, std::size_t index,
                const asio::any_io_executor& ex, tcp::endpoint upstream)
      : config(c),
        shared(s),
        stats(s.stats.shard(index)),
        pool(ex, upstream, c.upstream_max_idle, c.timeouts.upstream_connect) {}

  const ProxyConfig& config;
  SharedState& shared;
  metrics::RequestStatsShard& stats;  // this worker's: written by no other thread
  UpstreamPool pool;
  RequestIdGenerator request_ids;
  std::string scheme = "http";  // X-Forwarded-Proto / Forwarded proto of this listener
  bool draining = false;        // no new keep-alive exchanges
  std::unordered_set<ConnectionHandle*> connections;
};

}  // namespace sluice::proxy
