// What the forwarder may use of the worker it runs on, and the worker's ExchangeHandler. Everything here
// belongs to one thread.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "common/watchdog.h"
#include "proxy/exchange/config.h"
#include "proxy/exchange/headers.h"
#include "proxy/forward/forwarder.h"
#include "proxy/forward/shared_state.h"
#include "proxy/io/completion.h"
#include "proxy/io/splice.h"
#include "proxy/upstream/connector.h"

namespace sluice::proxy {

// The worker's count of exchanges in flight (and what it does when a burst of them ends).
class ExchangeCount {
 public:
  virtual void exchange_ended() = 0;

 protected:
  ~ExchangeCount() = default;
};

// A worker's exchanges in flight and their most since the worker last looked; forward() counts them and
// tells `listener` of each end. The worker keeps this ahead of its io_context and unhooks itself before
// anything else of it goes, so that an exchange whose coroutine is destroyed with the io_context (a
// shutdown that stopped it mid-exchange) counts its end into memory that is still there and calls no one.
struct ExchangesInFlight {
  std::size_t now = 0, peak = 0;
  ExchangeCount* listener = nullptr;
};

struct ForwardContext final : ExchangeHandler {
  // `upstream`: the configured app's address (its protocol is detected there); `connector` opens exchanges
  // to it and to the gateway's instances.
  ForwardContext(const ProxyConfig& c, SharedState& s, std::size_t index, const asio::any_io_executor& ex,
                 net::Watchdogs& w, Connector& app, tcp::endpoint app_endpoint)
      : config(c),
        shared(s),
        stats(s.stats.shard(index)),
        connector(&app),
        watchdogs(w),
        executor(ex),
        upstream(std::move(app_endpoint)),
        pipes(kSplicePipeBytes, kIdlePipes) {}

  asio::awaitable<void> handle(ServerExchange& down) override { return forward(*this, down); }
  void unhandled(const ExchangeRecord& record, const http::request_header<>* req) override {
    log_exchange(*this, record, req);
  }

  const ProxyConfig& config;
  SharedState& shared;
  metrics::RequestStatsShard& stats;  // this worker's: written by no other thread
  Connector* connector;               // where exchanges to the app are opened
  net::Watchdogs& watchdogs;          // the worker's: exchange deadlines
  asio::any_io_executor executor;
  tcp::endpoint upstream;             // the configured app
  // Pipes for bodies moved by splice(2), one per body in flight. A pipe holds references to the pages
  // in transit, not copies: its size sets how much one splice moves (256 KiB: a third fewer system
  // calls per MiB than 64 KiB), not sluice's memory. Past the kernel's per-user budget
  // (fs.pipe-user-pages-soft) new pipes get 8 KiB, which still works.
  static constexpr std::size_t kSplicePipeBytes = 256 * 1024;
  static constexpr std::size_t kIdlePipes = 64;
  SplicePipes pipes;
  std::optional<bool> upstream_h2c;             // UpstreamProtocol::detect: what the app answered
  std::shared_ptr<Completion> h2c_detection;    // ... while the question is out
  RequestIdGenerator request_ids;
  std::string scheme = "http";  // X-Forwarded-Proto / Forwarded proto of this listener
  Clock::time_point backlog_said;  // an instance's full listen queue was last logged (once a minute a worker)
  ExchangesInFlight* exchanges = nullptr;  // the worker's; none in unit tests
};

}  // namespace sluice::proxy
