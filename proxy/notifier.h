// A wake-up for one coroutine on the same executor: notify() before wait() is not lost.
//
// The waiting coroutine's completion handler is parked here and posted by notify(). A timer would do the
// same job at several times the cost (a service lookup under a mutex to construct one, the reactor's
// timer queue and its mutex to arm and cancel it), and a stream has several of these.
#pragma once

#include <optional>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "proxy/asio.h"

namespace sluice::proxy {

class Notifier {
 public:
  Notifier() = default;
  // As a timer's destruction would: a coroutine still waiting resumes (later, from the executor).
  ~Notifier() { resume(true); }
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Returns at once when notify() came since the last wait; otherwise parks until it comes (or the
  // wait's cancellation slot is emitted). Nothing here is touched after the waiter resumes.
  asio::awaitable<void> wait() {
    if (pending_) {
      pending_ = false;
      return ready();
    }
    return asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [this](auto handler) {
          resume(true);  // a second waiter: the first wakes, as a timer's waiters do when it is re-armed
          auto slot = asio::get_associated_cancellation_slot(handler);
          if (slot.is_connected()) slot.assign([this](asio::cancellation_type) { resume(false); });
          parked_.emplace(std::move(handler));
        },
        asio::use_awaitable);
  }

  void notify() {
    if (parked_) resume(true);
    else pending_ = true;
  }

 private:
  // What a coroutine awaiting use_awaitable hands the operation: the resumption of its thread.
  using Handler = asio::async_result<asio::use_awaitable_t<>, void()>::handler_type;

  static asio::awaitable<void> ready() { co_return; }

  // `detach_slot` is false when called from the slot's own handler, which must not clear itself.
  void resume(bool detach_slot) {
    if (!parked_) return;
    if (detach_slot) {
      auto slot = parked_->get_cancellation_slot();
      if (slot.is_connected()) slot.clear();
    }
    Handler handler(std::move(*parked_));
    parked_.reset();
    asio::post(std::move(handler));  // on the waiter's own executor
  }

  std::optional<Handler> parked_;
  bool pending_ = false;
};

}  // namespace sluice::proxy
