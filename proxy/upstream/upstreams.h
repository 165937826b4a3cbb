// A worker's connections to the app: the HTTP/1.1 pool and the h2c client for the configured upstream,
// and one of each per gateway instance, made on first use. The worker's Connector.
#pragma once

#include <map>
#include <memory>

#include "common/watchdog.h"
#include "proxy/exchange/config.h"
#include "proxy/upstream/connector.h"
#include "proxy/upstream/h1_client.h"
#include "proxy/upstream/h2_client.h"

namespace sluice::proxy {

class Upstreams final : public Connector {
 public:
  Upstreams(const ProxyConfig& c, const asio::any_io_executor& ex, net::Watchdogs& watchdogs, tcp::endpoint upstream)
      : config_(c),
        executor_(ex),
        watchdogs_(watchdogs),
        pool_(ex, watchdogs, upstream, c.upstream_max_idle, c.timeouts.upstream_idle, c.timeouts.upstream_connect,
              c.limits.max_response_header_bytes, c.io_buffer_bytes, c.netns),
        h2_pool_(ex, watchdogs, upstream, c.timeouts.upstream_idle, c.timeouts.upstream_connect,
                 c.limits.max_response_header_bytes, c.netns) {}

  // The configured upstream's address.
  const tcp::endpoint& endpoint() const { return pool_.endpoint(); }

  // The pool for an instance chosen by the instance set (gateway), made on first use and kept (exchanges in
  // flight hold references to it); instance ports come from the kernel's ephemeral range, which bounds
  // how many there can be.
  h1::ClientPool& pool_for(const tcp::endpoint& ep) {
    if (ep == pool_.endpoint()) return pool_;
    auto& p = instance_pools_[ep];
    if (!p) {
      p = std::make_unique<h1::ClientPool>(executor_, watchdogs_, ep, config_.upstream_max_idle,
                                           config_.timeouts.upstream_idle, config_.timeouts.instance_accept,
                                           config_.limits.max_response_header_bytes, config_.io_buffer_bytes);
      if (closing_) p->close_idle();  // made during shutdown: keeps nothing, as the others
    }
    return *p;
  }
  h2::ClientPool& h2_pool_for(const tcp::endpoint& ep) {
    if (ep == h2_pool_.endpoint()) return h2_pool_;
    auto& p = instance_h2_pools_[ep];
    if (!p) {
      p = std::make_unique<h2::ClientPool>(executor_, watchdogs_, ep, config_.timeouts.upstream_idle,
                                           config_.timeouts.upstream_connect, config_.limits.max_response_header_bytes);
      if (closing_) p->close_idle();
    }
    return *p;
  }

  // Shutdown: closes every idle connection, and keeps none from now on.
  void close_idle() {
    closing_ = true;
    pool_.close_idle();
    h2_pool_.close_idle();
    for (auto& [ep, p] : instance_pools_) p->close_idle();
    for (auto& [ep, p] : instance_h2_pools_) p->close_idle();
  }

  asio::awaitable<std::tuple<error_code, std::unique_ptr<ClientExchange>>> open(AppProtocol protocol,
                                                                               const tcp::endpoint* instance,
                                                                               bool verify) override {
    if (protocol == AppProtocol::h2c) {
      auto [ec, stream] = co_await (instance ? h2_pool_for(*instance) : h2_pool_).open();
      co_return std::tuple{ec, std::unique_ptr<ClientExchange>(std::move(stream))};
    }
    auto [ec, conn] = co_await (instance ? pool_for(*instance) : pool_).acquire(verify);
    co_return std::tuple{ec, std::unique_ptr<ClientExchange>(std::move(conn))};
  }
  std::unique_ptr<ClientExchange> reuse(AppProtocol protocol, const tcp::endpoint* instance, bool verify) override {
    if (protocol != AppProtocol::http1) return nullptr;  // an h2c stream is opened by its connection's loop
    return (instance ? pool_for(*instance) : pool_).take_idle(verify);
  }

 private:
  const ProxyConfig& config_;
  asio::any_io_executor executor_;
  net::Watchdogs& watchdogs_;
  h1::ClientPool pool_;     // to the configured upstream
  h2::ClientPool h2_pool_;  // the same, when it speaks h2c
  std::map<tcp::endpoint, std::unique_ptr<h1::ClientPool>> instance_pools_;
  std::map<tcp::endpoint, std::unique_ptr<h2::ClientPool>> instance_h2_pools_;
  bool closing_ = false;
};

}  // namespace sluice::proxy
