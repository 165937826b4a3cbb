// A wake-up for one coroutine on the same executor: notify() before wait() is not lost. It must outlive
// its waiter: a waiter resumed by the timer's destruction would touch it after it is gone.
//
// The timer is built by the first wait that has to park: most notifiers of an exchange (a stream's
// request-body wake, its send queue's room) are never waited on, and building a timer costs a service
// lookup under the io_context's mutex.
#pragma once

#include <optional>

#include "proxy/io/asio.h"

namespace sluice::proxy {

class Notifier {
 public:
  explicit Notifier(const asio::any_io_executor& ex) : ex_(ex) {}

  asio::awaitable<void> wait() {
    if (!pending_) {
      if (!timer_) timer_.emplace(ex_);
      timer_->expires_at(Clock::time_point::max());
      co_await timer_->async_wait(use_nothrow);
    }
    pending_ = false;
  }
  void notify() {
    pending_ = true;
    if (timer_) timer_->cancel();
  }

 private:
  asio::any_io_executor ex_;
  std::optional<asio::steady_timer> timer_;
  bool pending_ = false;
};

}  // namespace sluice::proxy
