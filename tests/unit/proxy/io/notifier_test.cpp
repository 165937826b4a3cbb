// The wake-up one coroutine waits on (proxy/io/notifier.h), on a real io_context: a notify() that comes
// first is kept for the next wait and only for it; a parked waiter resumes on notify() and not before;
// and a wait raced against a timer with `||` is cancelled when the timer wins, so the race ends. A Notifier
// must outlive its waiter (its owners close streams and wait for their coroutines before it goes).
#include "proxy/io/notifier.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <functional>
#include <memory>

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

class NotifierTest : public ::testing::Test {
 protected:
  // Runs the loop until `done` holds or 2 s have passed.
  void run_until(const std::function<bool()>& done) {
    auto limit = Clock::now() + 2s;
    while (!done() && Clock::now() < limit) io.run_one_for(10ms);
  }
  // Runs whatever is ready now, without waiting for anything.
  void run_ready() {
    io.restart();
    io.poll();
  }

  // Waits `times` times, counting each return in `woken`.
  asio::awaitable<void> waiter(Notifier& n, int times) {
    for (int i = 0; i < times; ++i) {
      co_await n.wait();
      ++woken;
    }
  }

  asio::io_context io;
  int woken = 0;
};

TEST_F(NotifierTest, ANotifyBeforeTheWaitIsKeptForItAndOnlyForIt) {
  Notifier n(io.get_executor());
  n.notify();
  n.notify();  // two notifies before a wait are one wake-up
  asio::co_spawn(io, waiter(n, 2), asio::detached);
  run_ready();
  EXPECT_EQ(woken, 1);  // the first wait returned at once, the second is parked
  n.notify();
  run_until([&] { return woken == 2; });
  EXPECT_EQ(woken, 2);
}

TEST_F(NotifierTest, AParkedWaiterResumesOnNotifyAndNotBefore) {
  Notifier n(io.get_executor());
  bool finished = false;
  asio::co_spawn(io, waiter(n, 1), [&](std::exception_ptr) { finished = true; });
  run_ready();
  EXPECT_EQ(woken, 0);
  EXPECT_FALSE(finished);
  n.notify();
  run_until([&] { return finished; });
  EXPECT_EQ(woken, 1);
}

TEST_F(NotifierTest, AWaitRacedAgainstATimerIsCancelledWhenTheTimerWins) {
  auto n = std::make_unique<Notifier>(io.get_executor());
  bool timer_won = false, finished = false;
  auto race = [&]() -> asio::awaitable<void> {
    asio::steady_timer timer(co_await asio::this_coro::executor, 20ms);
    auto result = co_await (n->wait() || timer.async_wait(use_nothrow));
    timer_won = result.index() == 1;
  };
  asio::co_spawn(io, race(), [&](std::exception_ptr) { finished = true; });
  run_until([&] { return finished; });
  EXPECT_TRUE(finished);
  EXPECT_TRUE(timer_won);
  // Nothing of the finished race is left parked in it: notifying and destroying it touch nothing gone.
  n->notify();
  n.reset();
  run_ready();
}

}  // namespace
}  // namespace sluice::proxy
