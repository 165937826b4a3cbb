// Drain as queue-proxy does it: once draining, health checks fail so the endpoint is taken out of
// rotation, ordinary requests keep being served, and the drain completes after a quiet period with no
// ordinary request (each one restarts it). The hot path only reads and stamps two atomics; waiting
// and resetting happen on the control thread.
#pragma once

#include <atomic>
#include <vector>

#include "proxy/exchange/config.h"
#include "proxy/io/asio.h"

namespace sluice::proxy {

class Drainer {
 public:
  explicit Drainer(Millis quiet_period) : quiet_period_(quiet_period) {}

  // Any thread.
  bool draining() const { return draining_.load(std::memory_order_relaxed); }
  void note_request(Clock::time_point now) {
    if (draining()) last_request_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  }

  // Control thread only, from here on.
  void start(Clock::time_point now);
  // Stops draining (health checks pass again) and ends every wait with `false`.
  void reset();
  // Returns true once drained (the quiet period passed), false when reset first.
  asio::awaitable<bool> wait_drained();

 private:
  void wake_all();

  const Millis quiet_period_;
  std::atomic<bool> draining_{false};
  std::atomic<Clock::rep> last_request_{0};
  std::vector<asio::steady_timer*> waiters_;
};

}  // namespace sluice::proxy
