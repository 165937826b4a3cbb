// Readiness of the user container as queue-proxy checks it for kubelet and activator probes: a TCP
// connect, an HTTP(S) GET or a gRPC health check against the app, either polled aggressively (every 50 ms,
// 100 ms per try, for up to 10 s, until successThreshold consecutive successes: Knative's default
// `periodSeconds: 0`) or tried once. Concurrent checks from any worker share the one in flight. With other
// containers' probes (ENABLE_MULTI_CONTAINER_PROBES) every probe must pass, each against its own port.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/wait_queue.h"
#include "proxy/exchange/config.h"
#include "proxy/io/asio.h"

namespace sluice::proxy {

class UserReadiness {
 public:
  explicit UserReadiness(ReadinessProbeConfig config, std::vector<ReadinessProbeConfig> sidecars = {})
      : config_(std::move(config)), sidecars_(std::move(sidecars)), successes_(1 + sidecars_.size(), 0) {}

  // Any worker; resumes on the caller's executor.
  asio::awaitable<bool> check();

  // At shutdown, before the workers' io_contexts go: waiters hold timers of those contexts.
  void drop_waiters();

  // One try against the app (its probe only), bounded by `timeout`.
  asio::awaitable<bool> try_once(Millis timeout) const;

 private:
  asio::awaitable<bool> run_check();
  static asio::awaitable<bool> check_one(const ReadinessProbeConfig& probe, std::int32_t& successes,
                                         Clock::time_point give_up);
  void finish(bool ready);

  const ReadinessProbeConfig config_;
  const std::vector<ReadinessProbeConfig> sidecars_;
  // Consecutive aggressive successes per probe (the app's first). Only the check in flight touches them.
  std::vector<std::int32_t> successes_;
  std::mutex mutex_;
  bool running_ = false;
  net::WaitQueue<bool> waiters_;  // for the verdict of the check in flight
};

}  // namespace sluice::proxy
