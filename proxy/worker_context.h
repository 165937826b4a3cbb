// What a connection may use of the worker that owns it. Everything here belongs to one thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/watchdog.h"
#include "proxy/config.h"
#include "proxy/forward/forwarder.h"
#include "proxy/forward/headers.h"
#include "proxy/h1/client.h"
#include "proxy/h2/client.h"
#include "proxy/io/completion.h"
#include "proxy/io/splice.h"
#include "proxy/shared_state.h"

namespace sluice::proxy {

class ConnectionHandle {
 public:
  // Close at once if no exchange is in progress; otherwise finish it and then close.
  virtual void close_when_idle() = 0;

 protected:
  ~ConnectionHandle() = default;
};

// The worker's count of its open connections (and what it does when a burst of them ends).
class ConnectionCount {
 public:
  virtual void connection_ended() = 0;

 protected:
  ~ConnectionCount() = default;
};

struct WorkerContext final : private Connector {
  WorkerContext(const ProxyConfig& c, SharedState& s, std::size_t index,
                const asio::any_io_executor& ex, tcp::endpoint upstream)
      : config(c),
        shared(s),
        stats(s.stats.shard(index)),
        watchdogs(ex),
        pool(ex, watchdogs, upstream, c.upstream_max_idle, c.timeouts.upstream_idle, c.timeouts.upstream_connect,
             c.limits.max_response_header_bytes, c.io_buffer_bytes, c.netns),
        h2_pool(ex, watchdogs, upstream, c.timeouts.upstream_idle, c.timeouts.upstream_connect,
                c.limits.max_response_header_bytes, c.netns),
        executor(ex),
        pipes(kSplicePipeBytes, kIdlePipes) {}

  // The pool for an instance chosen by the instance set (gateway), made on first use and kept (exchanges in
  // flight hold references to it); instance ports come from the kernel's ephemeral range, which bounds
  // how many there can be.
  h1::ClientPool& pool_for(const tcp::endpoint& ep) {
    if (ep == pool.endpoint()) return pool;
    auto& p = instance_pools[ep];
    if (!p) {
      p = std::make_unique<h1::ClientPool>(executor, watchdogs, ep, config.upstream_max_idle,
                                           config.timeouts.upstream_idle, config.timeouts.instance_accept,
                                           config.limits.max_response_header_bytes, config.io_buffer_bytes);
      if (draining) p->close_idle();  // made during shutdown: keeps nothing, as the others
    }
    return *p;
  }
  h2::ClientPool& h2_pool_for(const tcp::endpoint& ep) {
    if (ep == h2_pool.endpoint()) return h2_pool;
    auto& p = instance_h2_pools[ep];
    if (!p) {
      p = std::make_unique<h2::ClientPool>(executor, watchdogs, ep, config.timeouts.upstream_idle,
                                           config.timeouts.upstream_connect, config.limits.max_response_header_bytes);
      if (draining) p->close_idle();
    }
    return *p;
  }
  void close_idle() {
    pool.close_idle();
    h2_pool.close_idle();
    for (auto& [ep, p] : instance_pools) p->close_idle();
    for (auto& [ep, p] : instance_h2_pools) p->close_idle();
  }

  const ProxyConfig& config;
  SharedState& shared;
  metrics::RequestStatsShard& stats;  // this worker's: written by no other thread
  Connector* connector = this;  // where exchanges to the app are opened (tests put a fake here)
  // Every deadline of this worker's connections, exchanges and pools, on one timer; first in, last out.
  net::Watchdogs watchdogs;
  h1::ClientPool pool;  // to the configured upstream
  h2::ClientPool h2_pool;  // the same, when it speaks h2c
  asio::any_io_executor executor;
  // Pipes for bodies moved by splice(2), one per body in flight. A pipe holds references to the pages
  // in transit, not copies: its size sets how much one splice moves (256 KiB: a third fewer system
  // calls per MiB than 64 KiB), not sluice's memory. Past the kernel's per-user budget
  // (fs.pipe-user-pages-soft) new pipes get 8 KiB, which still works.
  static constexpr std::size_t kSplicePipeBytes = 256 * 1024;
  static constexpr std::size_t kIdlePipes = 64;
  SplicePipes pipes;
  // The read buffer of the HTTP/2 sessions and the tunnels: each reads what the socket has (read_now)
  // and is done with the bytes before its next wait, so the worker's connections share one and an idle
  // connection holds none (kReadsBeforeYield: how such a reader shares the worker).
  std::vector<char> read_buffer = std::vector<char>(std::max<std::size_t>(16 * 1024, config.io_buffer_bytes));
  std::map<tcp::endpoint, std::unique_ptr<h1::ClientPool>> instance_pools;
  std::map<tcp::endpoint, std::unique_ptr<h2::ClientPool>> instance_h2_pools;
  std::optional<bool> upstream_h2c;             // UpstreamProtocol::detect: what the app answered
  std::shared_ptr<Completion> h2c_detection;    // ... while the question is out
  RequestIdGenerator request_ids;
  std::string scheme = "http";  // X-Forwarded-Proto / Forwarded proto of this listener
  bool draining = false;        // no new keep-alive exchanges
  Clock::time_point backlog_said;  // an instance's full listen queue was last logged (once a minute a worker)
  std::unordered_set<ConnectionHandle*> connections;
  ConnectionCount* connection_count = nullptr;  // the worker's; none in unit tests

  // Where a connection's coroutine ends (the completion of its co_spawn): logs an exception and, unless
  // `resting` (the connection lives on: an HTTP/1.1 one in its h1::Link, between requests without a
  // coroutine, or in a coroutine the codec started; that one comes back here when it ends), counts the
  // connection closed.
  void served(std::exception_ptr e, bool resting);

 private:
  asio::awaitable<std::tuple<error_code, std::unique_ptr<ClientExchange>>> open(AppProtocol protocol,
                                                                               const tcp::endpoint* instance,
                                                                               bool verify) override {
    if (protocol == AppProtocol::h2c) {
      auto [ec, stream] = co_await (instance ? h2_pool_for(*instance) : h2_pool).open();
      co_return std::tuple{ec, std::unique_ptr<ClientExchange>(std::move(stream))};
    }
    auto [ec, conn] = co_await (instance ? pool_for(*instance) : pool).acquire(verify);
    co_return std::tuple{ec, std::unique_ptr<ClientExchange>(std::move(conn))};
  }
  std::unique_ptr<ClientExchange> reuse(AppProtocol protocol, const tcp::endpoint* instance, bool verify) override {
    if (protocol != AppProtocol::http1) return nullptr;  // an h2c stream is opened by its connection's loop
    return (instance ? pool_for(*instance) : pool).take_idle(verify);
  }
};

}  // namespace sluice::proxy
