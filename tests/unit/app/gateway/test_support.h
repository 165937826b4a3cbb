// What the gateway's unit tests share: an injected clock, the control thread's loop run until a
// condition holds, and a request's outcome looked into.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <variant>

#include <boost/asio/io_context.hpp>

#include "proxy/forward/instance_set.h"

namespace sluice::app::gateway::support {

// Time as the gateway's decisions read it: moved on only by advance().
class FakeClock {
 public:
  proxy::Clock::time_point now() const { return proxy::Clock::time_point(proxy::Clock::duration(t_.load())); }
  void advance(proxy::Clock::duration d) { t_ += d.count(); }

 private:
  std::atomic<proxy::Clock::rep> t_{proxy::Clock::now().time_since_epoch().count()};
};

// Runs `io` (the test's thread plays the control thread and the worker) until `done`, for 10 s at most.
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    io.run_one_for(std::chrono::milliseconds(10));
  }
  return true;
}

// A request's outcome, once it has one: the lease or the refusal in it, else null.
template <class Outcome>
proxy::InstanceLease* lease_in(const std::shared_ptr<std::optional<Outcome>>& slot) {
  return *slot ? std::get_if<proxy::InstanceLease>(&**slot) : nullptr;
}
template <class Outcome>
proxy::InstanceRefusal* refusal_in(const std::shared_ptr<std::optional<Outcome>>& slot) {
  return *slot ? std::get_if<proxy::InstanceRefusal>(&**slot) : nullptr;
}

}  // namespace sluice::app::gateway::support
