// A wake-up for one coroutine on the same executor: notify() before wait() is not lost. It must outlive
// its waiter: a waiter resumed by the timer's destruction would touch it after it is gone.
#pragma once

#include "proxy/asio.h"

namespace sluice::proxy {

class Notifier {
 public:
  explicit Notifier(const asio::any_io_executor& ex) : timer_(ex, Clock::time_point::max()) {}

  asio::awaitable<void> wait() {
    if (!pending_) {
      timer_.expires_at(Clock::time_point::max());
      co_await timer_.async_wait(use_nothrow);
    }
    pending_ = false;
  }
  void notify() {
    pending_ = true;
    timer_.cancel();
  }

 private:
  asio::steady_timer timer_;
  bool pending_ = false;
};

}  // namespace sluice::proxy
