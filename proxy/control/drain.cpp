// Drainer; see drain.h.
#include "proxy/control/drain.h"

#include <algorithm>

namespace sluice::proxy {

void Drainer::start(Clock::time_point now) {
  if (draining()) return;
  last_request_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  draining_.store(true, std::memory_order_relaxed);
}

void Drainer::reset() {
  draining_.store(false, std::memory_order_relaxed);
  wake_all();
}

void Drainer::wake_all() {
  for (auto* t : waiters_) t->cancel();
}

asio::awaitable<bool> Drainer::wait_drained() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  waiters_.push_back(&timer);
  bool drained = false;
  while (draining()) {
    Clock::time_point last{Clock::duration(last_request_.load(std::memory_order_relaxed))};
    auto due = last + quiet_period_;
    if (Clock::now() >= due) {
      drained = true;
      break;
    }
    timer.expires_at(due);
    co_await timer.async_wait(use_nothrow);
  }
  waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &timer));
  co_return drained;
}

}  // namespace sluice::proxy
