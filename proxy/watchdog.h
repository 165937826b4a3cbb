// One timer per connection enforcing every deadline of that connection: moving a deadline later costs a
// clock read and a store, never a timer syscall; the timer re-reads the deadline when it fires.
#pragma once

#include <memory>

#include "proxy/asio.h"

namespace sluice::proxy {

class Watchdog {
 public:
  class Target {
   public:
    // The earliest pending deadline, or time_point::max() when there is none.
    virtual Clock::time_point next_deadline() const = 0;
    // Called once the earliest deadline has passed; must move or clear it.
    virtual void on_deadline() = 0;

   protected:
    ~Target() = default;
  };

  Watchdog(const asio::any_io_executor& ex, Target& target);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Call when a deadline may have moved earlier than before; a later deadline needs no call.
  void rearm();

 private:
  // Shared with the pending timer handler, which may run after the owner is gone.
  struct State {
    explicit State(const asio::any_io_executor& ex) : timer(ex) {}
    asio::steady_timer timer;
    Target* target = nullptr;
    Clock::time_point armed = Clock::time_point::max();
    std::uint64_t generation = 0;
  };
  static void arm(const std::shared_ptr<State>& s, Clock::time_point when);
  std::shared_ptr<State> s_;
};

}  // namespace sluice::proxy
