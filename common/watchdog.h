// Deadline enforcement for one worker: every connection's and every exchange's deadlines on one timer.
// Each Watchdog is an entry in its worker's min-heap of deadlines (the entry keeps its heap index, so
// nothing is allocated per entry and removal is O(log n)); the worker's one asio timer is armed for the
// earliest. Moving a deadline later costs a clock read and a store: the entry is re-read when it comes
// due. A new deadline later than the earliest one (the common case: every exchange gets its start plus
// the same timeout) touches no timer at all, so an exchange costs no timer operation, no lock and no
// allocation for its deadlines.
#pragma once

#include <cstddef>
#include <vector>

#include "common/net.h"

namespace sluice::net {

class Watchdogs;

class Watchdog {
 public:
  class Target {
   public:
    // The earliest pending deadline, or time_point::max() when there is none.
    virtual Clock::time_point next_deadline() const = 0;
    // Called once the earliest deadline has passed; must move or clear it. May destroy the Watchdog.
    virtual void on_deadline() = 0;

   protected:
    ~Target() = default;
  };

  Watchdog(Watchdogs& all, Target& target) : all_(&all), target_(&target) {}
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Call when a deadline may have moved earlier than before; a later deadline needs no call.
  void rearm();
  // Out of the worker's heap at once, for a target that has no deadline any more and must not keep the
  // worker's timer (and so its io_context) waiting for one that passed; rearm() puts it back.
  void disarm();

 private:
  friend class Watchdogs;
  static constexpr std::size_t kOut = static_cast<std::size_t>(-1);  // not in the heap
  static constexpr std::size_t kDue = kOut - 1;                       // taken out to be fired

  Watchdogs* all_;  // null once the worker's Watchdogs are gone (shutdown)
  Target* target_;
  Clock::time_point when_ = Clock::time_point::max();  // where it sits in the heap
  std::size_t index_ = kOut;
};

// One per worker (the Worker's, shared by its ServerContext, ForwardContext and Upstreams); used on the worker's thread only.
class Watchdogs {
 public:
  explicit Watchdogs(const asio::any_io_executor& ex) : timer_(ex) {}
  ~Watchdogs();
  Watchdogs(const Watchdogs&) = delete;
  Watchdogs& operator=(const Watchdogs&) = delete;

  std::size_t size() const { return heap_.size(); }

 private:
  friend class Watchdog;
  void set(Watchdog& w, Clock::time_point when);  // insert, or move to `when`
  void remove(Watchdog& w);                       // from the heap or from the due list
  void arm();                                     // the timer, for the earliest entry
  void fire();

  bool before(std::size_t a, std::size_t b) const { return heap_[a]->when_ < heap_[b]->when_; }
  void place(std::size_t i, Watchdog* w) {
    heap_[i] = w;
    w->index_ = i;
  }
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);

  std::vector<Watchdog*> heap_;
  std::vector<Watchdog*> due_;  // taken out by fire(), not handled yet (an entry destroyed meanwhile is nulled)
  asio::steady_timer timer_;
  Clock::time_point armed_ = Clock::time_point::max();  // what timer_ waits for
};

}  // namespace sluice::net
