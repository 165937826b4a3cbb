// The listening side of the proxy: N workers, each an io_context on its own thread with its own
// SO_REUSEPORT acceptor, so a connection lives and dies on one thread and the hot path takes no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "proxy/exchange/config.h"
#include "proxy/forward/shared_state.h"

namespace sluice::proxy {

class TlsContexts;
class Worker;

class Server {
 public:
  // With `instances`, each exchange goes to an instance the set chooses (the gateway) instead of the
  // configured upstream.
  explicit Server(ProxyConfig config, std::shared_ptr<InstanceSet> instances = nullptr);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds every worker's acceptor and starts the worker threads. A port something already listens on
  // throws AddressInUse (proxy/io/listen.h); other failures std::system_error naming the address.
  void start();
  std::uint16_t port() const { return port_; }
  std::uint16_t tls_port() const { return tls_port_; }  // 0 without TLS
  unsigned workers() const { return static_cast<unsigned>(workers_.size()); }

  // How long shutdown waits. queue-proxy waits for ordinary requests without a limit of its own (the
  // pod's grace period bounds them), then 60 s for hijacked (upgraded) connections.
  struct ShutdownLimits {
    Millis in_flight{0};           // for everything still open; 0 = until it ends
    Millis upgraded{Seconds(60)};  // once only upgraded connections remain, from that moment
  };

  // Whether a successor accepts on this server's listening sockets once it has shut down (per-node mode's
  // agent restart): then they are only let go of, never touched.
  enum class Listeners { ours, handed_over };

  // Stops accepting, lets in-flight exchanges finish (keep-alive connections close after their current
  // exchange) within `limits`, then stops the workers. Returns once every worker thread has ended. A
  // connection attempt made during the shutdown is refused, never accepted and then reset; see
  // net::refuse_new_handshakes and Timeouts::drain_handshakes.
  void shutdown(ShutdownLimits limits, Listeners listeners = Listeners::ours);

  std::size_t open_connections() const { return open_connections_.load(std::memory_order_relaxed); }

  // Cross-worker state (stats, breaker, readiness, drain) for the control plane to read and drive.
  SharedState& shared() { return shared_; }

 private:
  ProxyConfig config_;
  SharedState shared_;
  std::unique_ptr<TlsContexts> tls_;  // null: no TLS port
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  std::atomic<std::size_t> open_connections_{0};
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace sluice::proxy
