// Coroutines, each on its own worker, waiting in arrival order for something that another thread hands
// out: a breaker slot, the app's readiness verdict, a gateway instance. One queue type for all three.
//
// The owner keeps its own mutex and calls every member under it, except Ticket::wait(), which is
// awaited with the lock released. A hand-out posts the wake-up to the waiter's executor (the reactor runs
// without per-socket locks, so only that executor touches the waiter's timer); shared ownership keeps
// the waiter alive for a wake-up still in that executor's queue.
//
//   Ticket t;
//   { lock; if (free) return now; t = queue.join(ex, deadline); }
//   co_await t.wait(&abandon);                // handed an outcome, the deadline passed, or abandoned
//   { lock; if (t.outcome()) return *t.outcome(); queue.leave(t); return abandon.abandoned() ? gone : timed_out; }
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <optional>
#include <utility>

#include "common/net.h"

namespace sluice::net {

// Held by whoever a wait is for (an exchange): called on the waiter's executor when the wait is no longer
// wanted (its client went away), it ends the wait at once, as a passed deadline would, and says so
// afterwards. Also when called before the wait begins: the wait then returns at once.
class WaitAbandon {
 public:
  void abandon() {
    abandoned_ = true;
    if (timer_) timer_->cancel();
  }
  bool abandoned() const { return abandoned_; }

 private:
  template <class>
  friend class WaitQueue;
  asio::steady_timer* timer_ = nullptr;  // the wait under way, if one is
  bool abandoned_ = false;
};

template <class Outcome>
class WaitQueue {
  struct Waiter {
    Waiter(const asio::any_io_executor& ex, Clock::time_point deadline) : timer(ex, deadline) {}
    asio::steady_timer timer;         // touched only on the waiter's executor
    std::optional<Outcome> outcome;   // under the owner's lock
    bool queued = true;               // under the owner's lock
    typename std::list<std::shared_ptr<Waiter>>::iterator place;
  };

 public:
  class Ticket {
   public:
    Ticket() = default;
    // Lock released. Returns when handed an outcome, when the deadline passes, or when `abandon` (if
    // given) is abandoned.
    asio::awaitable<void> wait(WaitAbandon* abandon = nullptr) {
      if (abandon && abandon->abandoned()) co_return;
      if (abandon) abandon->timer_ = &waiter_->timer;
      co_await waiter_->timer.async_wait(use_nothrow);
      if (abandon) abandon->timer_ = nullptr;
    }
    // Under the lock, after wait(): what was handed out, if anything was.
    std::optional<Outcome>& outcome() { return waiter_->outcome; }

   private:
    friend class WaitQueue;
    explicit Ticket(std::shared_ptr<Waiter> w) : waiter_(std::move(w)) {}
    std::shared_ptr<Waiter> waiter_;
  };

  // Joins the back of the queue; the wake-up comes on `ex`.
  Ticket join(const asio::any_io_executor& ex, Clock::time_point deadline = Clock::time_point::max()) {
    auto w = std::make_shared<Waiter>(ex, deadline);
    w->place = waiters_.insert(waiters_.end(), w);
    return Ticket(std::move(w));
  }

  // A waiter whose deadline passed, or that was abandoned, leaves (no-op if it was handed something meanwhile).
  void leave(Ticket& t) {
    if (!t.waiter_->queued) return;
    waiters_.erase(t.waiter_->place);
    t.waiter_->queued = false;
  }

  // Hands `o` to the longest waiter; false when nobody waits.
  bool hand_front(Outcome o) {
    if (waiters_.empty()) return false;
    auto w = std::move(waiters_.front());
    waiters_.pop_front();
    hand(w, std::move(o));
    return true;
  }

  // Hands a copy of `o` to every waiter.
  void hand_all(const Outcome& o) {
    auto all = std::move(waiters_);
    waiters_.clear();
    for (auto& w : all) hand(w, o);
  }

  // At shutdown, before the workers' io_contexts go: waiters hold timers of those contexts.
  void clear() {
    for (auto& w : waiters_) w->queued = false;
    waiters_.clear();
  }

  std::size_t size() const { return waiters_.size(); }
  bool empty() const { return waiters_.empty(); }

 private:
  static void hand(const std::shared_ptr<Waiter>& w, Outcome o) {
    w->queued = false;
    w->outcome = std::move(o);
    asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
  }

  std::list<std::shared_ptr<Waiter>> waiters_;
};

}  // namespace sluice::net
