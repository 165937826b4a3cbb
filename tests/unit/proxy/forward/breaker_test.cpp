// The concurrency breaker with real executors: slots, the bounded FIFO, deadlines, and hand-over
// of a slot to a waiter on another thread.
#include "proxy/forward/breaker.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace sluice::proxy {
namespace {

using Admission = ConcurrencyBreaker::Admission;
using namespace std::chrono_literals;

// Runs `n` acquisitions on one io_context in order, recording each outcome and the order of admission.
struct Acquirers {
  asio::io_context io;
  std::vector<std::optional<Admission>> outcome;
  std::vector<int> admitted_order;

  void spawn(ConcurrencyBreaker& b, int id, Clock::time_point deadline, net::WaitAbandon* abandon = nullptr) {
    if (outcome.size() <= static_cast<std::size_t>(id)) outcome.resize(id + 1);
    asio::co_spawn(io, [this, &b, id, deadline, abandon]() -> asio::awaitable<void> {
      auto a = co_await b.acquire(deadline, abandon);
      outcome[id] = a;
      if (a == Admission::admitted) admitted_order.push_back(id);
    }, asio::detached);
  }
  // Runs what became ready since the last run (a hand-over, an abandon).
  void run_again() {
    io.restart();
    io.run_for(20ms);
  }
};

TEST(Breaker, AdmitsUpToCapacityQueuesUpToDepthAndRefusesBeyond) {
  Acquirers a;  // outlives the breaker: its waiters hold timers of a.io
  ConcurrencyBreaker b(2, 3);
  for (int i = 0; i < 7; ++i) a.spawn(b, i, Clock::time_point::max());
  a.io.run_for(50ms);
  EXPECT_EQ(b.in_flight(), 2u);
  EXPECT_EQ(b.waiting(), 3u);
  for (int i : {0, 1}) EXPECT_EQ(a.outcome[i], Admission::admitted) << i;
  for (int i : {2, 3, 4}) EXPECT_FALSE(a.outcome[i].has_value()) << i;  // still waiting
  for (int i : {5, 6}) EXPECT_EQ(a.outcome[i], Admission::queue_full) << i;
}

TEST(Breaker, ReleasedSlotsGoToWaitersInArrivalOrder) {
  Acquirers a;
  ConcurrencyBreaker b(1, 10);
  for (int i = 0; i < 5; ++i) a.spawn(b, i, Clock::time_point::max());
  a.io.run_for(20ms);
  ASSERT_EQ(a.admitted_order, std::vector<int>{0});
  for (int released = 1; released < 5; ++released) {
    b.release();
    a.run_again();
    EXPECT_EQ(b.in_flight(), 1u);  // the slot passes on, it is never free in between
  }
  EXPECT_EQ(a.admitted_order, (std::vector<int>{0, 1, 2, 3, 4}));
  b.release();
  EXPECT_EQ(b.in_flight(), 0u);
}

TEST(Breaker, AWaiterWhoseDeadlinePassesTimesOutAndLeavesTheQueue) {
  Acquirers a;
  ConcurrencyBreaker b(1, 10);
  a.spawn(b, 0, Clock::time_point::max());
  a.spawn(b, 1, Clock::now() + 30ms);
  a.spawn(b, 2, Clock::time_point::max());
  a.io.run_for(200ms);
  EXPECT_EQ(a.outcome[1], Admission::timed_out);
  EXPECT_EQ(b.waiting(), 1u);
  b.release();  // goes to 2, not to the one that left
  a.run_again();
  EXPECT_EQ(a.admitted_order, (std::vector<int>{0, 2}));
}

TEST(Breaker, AnAbandonedWaiterLeavesTheQueueAtOnceAndTheSlotGoesToTheNext) {
  Acquirers a;
  ConcurrencyBreaker b(1, 10);
  net::WaitAbandon gone, gone_before;
  a.spawn(b, 0, Clock::time_point::max());
  a.spawn(b, 1, Clock::time_point::max(), &gone);
  a.spawn(b, 2, Clock::time_point::max());
  a.io.run_for(20ms);
  EXPECT_EQ(b.waiting(), 2u);
  asio::post(a.io, [&] { gone.abandon(); });  // on the waiter's executor, as its exchange does
  a.run_again();
  EXPECT_EQ(a.outcome[1], Admission::abandoned);
  EXPECT_EQ(b.waiting(), 1u);
  gone_before.abandon();  // its client went before it got to the queue: it does not wait at all
  a.spawn(b, 3, Clock::time_point::max(), &gone_before);
  a.run_again();
  EXPECT_EQ(a.outcome[3], Admission::abandoned);
  EXPECT_EQ(b.waiting(), 1u);
  b.release();  // goes to 2, not to the ones that left
  a.run_again();
  EXPECT_EQ(a.admitted_order, (std::vector<int>{0, 2}));
}

TEST(Breaker, ASlotReleasedOnAnotherThreadResumesTheWaiterOnItsOwnThread) {
  ConcurrencyBreaker b(1, 1);
  asio::io_context holder_io, waiter_io;
  std::thread::id waiter_thread, resumed_on;
  std::atomic<bool> holding{false}, done{false};
  asio::co_spawn(holder_io, [&]() -> asio::awaitable<void> {
    co_await b.acquire(Clock::time_point::max());
    holding = true;
  }, asio::detached);
  holder_io.run();
  ASSERT_TRUE(holding);
  asio::co_spawn(waiter_io, [&]() -> asio::awaitable<void> {
    auto r = co_await b.acquire(Clock::time_point::max());
    EXPECT_EQ(r, Admission::admitted);
    resumed_on = std::this_thread::get_id();
    done = true;
  }, asio::detached);
  auto guard = asio::make_work_guard(waiter_io);
  std::thread t([&] {
    waiter_thread = std::this_thread::get_id();
    waiter_io.run();
  });
  while (b.waiting() == 0) std::this_thread::yield();
  b.release();  // from the main thread
  while (!done) std::this_thread::yield();
  guard.reset();
  t.join();
  EXPECT_EQ(resumed_on, waiter_thread);
}

TEST(Breaker, ManyThreadsNeverExceedTheCapacity) {
  constexpr std::size_t kCapacity = 3;
  ConcurrencyBreaker b(kCapacity, 1000);
  std::atomic<int> in_section{0}, peak{0}, completed{0};
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    ios.push_back(std::make_unique<asio::io_context>());
    auto& io = *ios.back();
    for (int i = 0; i < 200; ++i) {
      asio::co_spawn(io, [&]() -> asio::awaitable<void> {
        auto r = co_await b.acquire(Clock::time_point::max());
        if (r != Admission::admitted) co_return;
        int now = ++in_section;
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {}
        co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        --in_section;
        b.release();
        ++completed;
      }, asio::detached);
    }
    threads.emplace_back([&io] { io.run(); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(completed.load(), 800);
  EXPECT_LE(peak.load(), static_cast<int>(kCapacity));
  EXPECT_EQ(b.in_flight(), 0u);
}

}  // namespace
}  // namespace sluice::proxy
