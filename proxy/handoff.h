// A wake-up that any thread may deliver to one coroutine waiting on its own executor. The waiter's
// executor only ever touches the timer (the reactor runs without per-socket locks), so delivery
// posts the cancel there. Shared ownership keeps the timer alive for a delivery still in the queue.
#pragma once

#include <memory>

#include "proxy/asio.h"

namespace sluice::proxy {

class Handoff {
 public:
  explicit Handoff(const asio::any_io_executor& ex, Clock::time_point deadline = Clock::time_point::max())
      : timer_(ex, deadline) {}

  // On the waiter's executor: returns when delivered or when the deadline passes; the owner of
  // the hand-off decides which happened (under its own lock).
  asio::awaitable<void> wait() { co_await timer_.async_wait(use_nothrow); }

  // Any thread.
  static void deliver(const std::shared_ptr<Handoff>& h) {
    asio::post(h->timer_.get_executor(), [h] { h->timer_.cancel(); });
  }

 private:
  asio::steady_timer timer_;
};

}  // namespace sluice::proxy
