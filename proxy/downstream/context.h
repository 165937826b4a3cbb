// What a client connection's codec may use of the worker that owns it. Everything here belongs to one thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <unordered_set>
#include <vector>

#include "common/watchdog.h"
#include "proxy/exchange/config.h"
#include "proxy/exchange/exchange.h"

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

struct ServerContext {
  ServerContext(const ProxyConfig& c, ExchangeHandler& h, net::Watchdogs& w) : config(c), handler(h), watchdogs(w) {}

  const ProxyConfig& config;
  ExchangeHandler& handler;  // where each exchange goes: the worker's forwarder
  // Every deadline of this worker's connections, exchanges and pools, on one timer.
  net::Watchdogs& watchdogs;
  // The read buffer of the HTTP/2 sessions and the tunnels: each reads what the socket has (read_now)
  // and is done with the bytes before its next wait, so the worker's connections share one and an idle
  // connection holds none (kReadsBeforeYield: how such a reader shares the worker).
  std::vector<char> read_buffer = std::vector<char>(std::max<std::size_t>(16 * 1024, config.io_buffer_bytes));
  bool draining = false;  // no new keep-alive exchanges
  std::unordered_set<ConnectionHandle*> connections;
  ConnectionCount* connection_count = nullptr;  // the worker's; none in unit tests

  // Where a connection's coroutine ends (the completion of its co_spawn): logs an exception and, unless
  // `resting` (the connection lives on: an HTTP/1.1 one in its h1::Link, between requests without a
  // coroutine, or in a coroutine the codec started; that one comes back here when it ends), counts the
  // connection closed.
  void served(std::exception_ptr e, bool resting);
};

}  // namespace sluice::proxy
