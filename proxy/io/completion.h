// A one-shot completion flag a coroutine can wait on, for joining a co_spawned helper coroutine on the
// same executor: a timer that never expires by itself, cancelled to signal.
#pragma once

#include "proxy/io/asio.h"

namespace sluice::proxy {

class Completion {
 public:
  explicit Completion(const asio::any_io_executor& ex) : timer_(ex, Clock::time_point::max()) {}

  asio::awaitable<void> wait() {
    while (!done_) co_await timer_.async_wait(use_nothrow);
  }
  void signal() {
    done_ = true;
    timer_.cancel();
  }
  bool done() const { return done_; }

 private:
  asio::steady_timer timer_;
  bool done_ = false;
};

}  // namespace sluice::proxy
