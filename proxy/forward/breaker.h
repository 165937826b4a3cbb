// Knative's containerConcurrency: at most `capacity` exchanges in flight to the app, at most
// `queue_depth` more waiting in arrival order, and beyond that an immediate refusal. Shared by all
// workers; a waiter is resumed on its own worker when a slot is handed to it.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>

#include "common/wait_queue.h"
#include "proxy/io/asio.h"

namespace sluice::proxy {

class ConcurrencyBreaker {
 public:
  ConcurrencyBreaker(std::size_t capacity, std::size_t queue_depth)
      : capacity_(capacity), queue_depth_(queue_depth) {}

  enum class Admission { admitted, queue_full, timed_out, abandoned };

  // Takes a slot, waiting on the caller's executor until `deadline` if none is free, or until `abandon`
  // is abandoned (its client went away). Every `admitted` must be paired with one release().
  asio::awaitable<Admission> acquire(Clock::time_point deadline, net::WaitAbandon* abandon = nullptr);
  // Frees a slot, or hands it straight to the longest waiter.
  void release();

  std::size_t in_flight() const;
  std::size_t waiting() const;
  // In flight plus waiting, without the lock: Knative's Breaker.InFlight(), which queue-proxy reports as
  // its queue depth at each request's start.
  std::size_t occupancy() const { return occupancy_.load(std::memory_order_relaxed); }

  // At shutdown, before the workers' io_contexts go: waiters hold timers of those contexts.
  void drop_waiters();
  std::size_t capacity() const { return capacity_; }

 private:
  struct Granted {};  // a slot passed on by release()
  void note_occupancy() { occupancy_.store(in_flight_ + waiters_.size(), std::memory_order_relaxed); }  // locked

  const std::size_t capacity_;
  const std::size_t queue_depth_;
  mutable std::mutex mutex_;
  std::size_t in_flight_ = 0;
  net::WaitQueue<Granted> waiters_;
  std::atomic<std::size_t> occupancy_{0};
};

// Releases an admitted slot at scope exit.
class BreakerSlot {
 public:
  BreakerSlot() = default;
  explicit BreakerSlot(ConcurrencyBreaker* b) : breaker_(b) {}
  BreakerSlot(const BreakerSlot&) = delete;
  BreakerSlot& operator=(const BreakerSlot&) = delete;
  ~BreakerSlot() {
    if (breaker_) breaker_->release();
  }

 private:
  ConcurrencyBreaker* breaker_ = nullptr;
};

}  // namespace sluice::proxy
