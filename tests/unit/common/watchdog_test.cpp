// One worker's deadlines on one timer (proxy/watchdog.*), on a real io_context: each deadline is told
// once it has passed and not before, in order; a later deadline is re-read rather than fired; a watchdog
// that goes away (even from inside another's deadline, or its own) is never told; and the worker's set
// may go before its watchdogs, as at a forced shutdown.
#include "common/watchdog.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sluice::net {
namespace {

using namespace std::chrono_literals;

// A target with one deadline; its on_deadline() records the time and clears the deadline.
struct Deadline final : Watchdog::Target {
  Deadline(Watchdogs& all, std::string label, std::vector<std::string>& told_log)
      : name(std::move(label)), log(told_log), dog(std::make_unique<Watchdog>(all, *this)) {}

  void set(Clock::time_point when) {
    at = when;
    dog->rearm();
  }
  Clock::time_point next_deadline() const override { return at; }
  void on_deadline() override {
    told = Clock::now();
    log.push_back(name);
    at = Clock::time_point::max();
    if (then) then();
  }

  std::string name;
  std::vector<std::string>& log;
  Clock::time_point at = Clock::time_point::max();
  Clock::time_point told{};
  std::function<void()> then;  // runs inside on_deadline()
  std::unique_ptr<Watchdog> dog;
};

class WatchdogsTest : public ::testing::Test {
 protected:
  // Runs the loop until `done` holds or 2 s have passed.
  void run_until(const std::function<bool()>& done) {
    auto limit = Clock::now() + 2s;
    while (!done() && Clock::now() < limit) io.run_one_for(10ms);
  }

  asio::io_context io;
  std::vector<std::string> log;
  std::unique_ptr<Watchdogs> all = std::make_unique<Watchdogs>(io.get_executor());
};

TEST_F(WatchdogsTest, EachDeadlineIsToldOnceItHasPassedInOrder) {
  Deadline a(*all, "a", log), b(*all, "b", log), c(*all, "c", log);
  const auto start = Clock::now();
  c.set(start + 60ms);
  a.set(start + 20ms);
  b.set(start + 40ms);
  EXPECT_EQ(all->size(), 3u);
  run_until([&] { return log.size() == 3; });
  EXPECT_EQ(log, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_GE(a.told, start + 20ms);
  EXPECT_GE(b.told, start + 40ms);
  EXPECT_GE(c.told, start + 60ms);
  EXPECT_EQ(all->size(), 0u);
}

// A target whose deadline went away (a pool whose connections closed at shutdown) takes its entry out at
// once: the worker's timer stops, so its io_context runs out of work instead of waiting for the old time.
TEST_F(WatchdogsTest, ADisarmedWatchdogLeavesTheTimerAndCanComeBack) {
  Deadline a(*all, "a", log);
  a.set(Clock::now() + 1h);
  EXPECT_EQ(all->size(), 1u);
  a.at = Clock::time_point::max();
  a.dog->disarm();
  EXPECT_EQ(all->size(), 0u);
  io.restart();
  const auto start = Clock::now();
  io.run_for(5s);  // returns as soon as nothing is pending
  EXPECT_LT(Clock::now() - start, 1s) << "the worker's timer still waited";
  EXPECT_TRUE(log.empty());

  a.set(Clock::now() + 10ms);  // rearm() puts it back
  EXPECT_EQ(all->size(), 1u);
  io.restart();
  run_until([&] { return !log.empty(); });
  EXPECT_EQ(log, std::vector<std::string>{"a"});
}

TEST_F(WatchdogsTest, ADeadlineMovedLaterIsReadAgainNotFired) {
  Deadline a(*all, "a", log);
  const auto start = Clock::now();
  a.set(start + 20ms);
  a.at = start + 80ms;  // moved later: no call, as the connections do
  run_until([&] { return !log.empty(); });
  ASSERT_EQ(log.size(), 1u);
  EXPECT_GE(a.told, start + 80ms);
}

TEST_F(WatchdogsTest, ADeadlineMovedEarlierFiresAtTheEarlierTime) {
  Deadline far(*all, "far", log), a(*all, "a", log);
  const auto start = Clock::now();
  far.set(start + 10s);  // the timer waits for this one
  a.set(start + 10s);
  a.set(start + 20ms);   // earlier than the timer: re-armed
  run_until([&] { return !log.empty(); });
  EXPECT_EQ(log, std::vector<std::string>{"a"});
  EXPECT_LT(a.told, start + 1s);
}

TEST_F(WatchdogsTest, AWatchdogThatGoesAwayIsNeverTold) {
  Deadline a(*all, "a", log), b(*all, "b", log), c(*all, "c", log);
  const auto start = Clock::now();
  a.set(start + 20ms);
  b.set(start + 20ms);
  c.set(start + 30ms);
  b.dog.reset();  // before its deadline
  // a's deadline destroys c's watchdog, which is due in the same round or the next one.
  a.then = [&] { c.dog.reset(); };
  run_until([&] { return !log.empty(); });
  const auto seen = Clock::now();
  run_until([&] { return Clock::now() > seen + 60ms; });  // c's deadline passes
  EXPECT_EQ(log, std::vector<std::string>{"a"});
  EXPECT_EQ(all->size(), 0u);
}

TEST_F(WatchdogsTest, AWatchdogDestroyedByItsOwnDeadlineAndOnesDueTogether) {
  Deadline a(*all, "a", log), b(*all, "b", log), c(*all, "c", log);
  const auto start = Clock::now();  // all three passed already: they are due in one round, in this order
  a.set(start - 3ms);
  b.set(start - 2ms);
  c.set(start - 1ms);
  a.then = [&] { a.dog.reset(); };
  b.then = [&] { c.set(Clock::now() + 20ms); };  // c is due in this round too: it is re-read, not lost
  run_until([&] { return log.size() == 3; });
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[2], "c");
  EXPECT_GE(c.told, b.told + 20ms);
}

TEST_F(WatchdogsTest, TheWorkersSetMayGoBeforeItsWatchdogs) {
  auto a = std::make_unique<Deadline>(*all, "a", log);
  a->set(Clock::now() + 10s);
  all.reset();  // a forced shutdown: connections destroyed after the worker's context
  a.reset();
  io.poll();
  EXPECT_TRUE(log.empty());
}

}  // namespace
}  // namespace sluice::net
