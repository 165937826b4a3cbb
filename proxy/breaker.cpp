// Breaker; see breaker.h.
#include "proxy/breaker.h"

namespace sluice::proxy {

asio::awaitable<ConcurrencyBreaker::Admission> ConcurrencyBreaker::acquire(Clock::time_point deadline) {
  auto ex = co_await asio::this_coro::executor;
  auto waiter = std::make_shared<Waiter>();
  std::list<std::shared_ptr<Waiter>>::iterator place;
  {
    std::lock_guard lock(mutex_);
    if (in_flight_ < capacity_ && waiters_.empty()) {
      ++in_flight_;
      co_return Admission::admitted;
    }
    if (waiters_.size() >= queue_depth_) co_return Admission::queue_full;
    waiter->wake = std::make_shared<Handoff>(ex, deadline);
    place = waiters_.insert(waiters_.end(), waiter);
  }
  co_await waiter->wake->wait();
  std::lock_guard lock(mutex_);
  if (waiter->granted) co_return Admission::admitted;  // handed over, even if the deadline also passed
  waiters_.erase(place);
  co_return Admission::timed_out;
}

void ConcurrencyBreaker::release() {
  std::lock_guard lock(mutex_);
  if (waiters_.empty()) {
    --in_flight_;
    return;
  }
  auto next = std::move(waiters_.front());
  waiters_.pop_front();
  next->granted = true;  // the slot passes on: in_flight_ stays
  Handoff::deliver(next->wake);
}

void ConcurrencyBreaker::drop_waiters() {
  std::lock_guard lock(mutex_);
  waiters_.clear();
}

std::size_t ConcurrencyBreaker::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

std::size_t ConcurrencyBreaker::waiting() const {
  std::lock_guard lock(mutex_);
  return waiters_.size();
}

}  // namespace sluice::proxy
