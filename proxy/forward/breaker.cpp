// Breaker; see breaker.h.
#include "proxy/forward/breaker.h"

namespace sluice::proxy {

asio::awaitable<ConcurrencyBreaker::Admission> ConcurrencyBreaker::acquire(Clock::time_point deadline,
                                                                            net::WaitAbandon* abandon) {
  auto ex = co_await asio::this_coro::executor;
  net::WaitQueue<Granted>::Ticket ticket;
  {
    std::lock_guard lock(mutex_);
    if (in_flight_ < capacity_ && waiters_.empty()) {
      ++in_flight_;
      note_occupancy();
      co_return Admission::admitted;
    }
    if (waiters_.size() >= queue_depth_) co_return Admission::queue_full;
    ticket = waiters_.join(ex, deadline);
    note_occupancy();
  }
  co_await ticket.wait(abandon);
  std::lock_guard lock(mutex_);
  if (ticket.outcome()) co_return Admission::admitted;  // handed over, even if the deadline also passed
  waiters_.leave(ticket);
  note_occupancy();
  co_return abandon && abandon->abandoned() ? Admission::abandoned : Admission::timed_out;
}

void ConcurrencyBreaker::release() {
  std::lock_guard lock(mutex_);
  if (!waiters_.hand_front(Granted{})) --in_flight_;  // else the slot passes on: in_flight_ stays
  note_occupancy();
}

void ConcurrencyBreaker::drop_waiters() {
  std::lock_guard lock(mutex_);
  waiters_.clear();
  note_occupancy();
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
