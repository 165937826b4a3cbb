// The drain's quiet period on a real io_context: restarted by requests, undone by reset.
#include "proxy/control/drain.h"

#include <gtest/gtest.h>

namespace sluice::proxy {
namespace {

using namespace std::chrono_literals;

struct Wait {
  std::optional<bool> result;
  Clock::time_point at;
};

void spawn_wait(asio::io_context& io, Drainer& d, Wait& w) {
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    bool r = co_await d.wait_drained();
    w.result = r;
    w.at = Clock::now();
  }, asio::detached);
}

TEST(Drainer, HealthChecksSeeDrainingAtOnceAndTheQuietPeriodEndsIt) {
  asio::io_context io;
  Drainer d(Millis(100));
  EXPECT_FALSE(d.draining());
  auto start = Clock::now();
  d.start(start);
  EXPECT_TRUE(d.draining());
  Wait w;
  spawn_wait(io, d, w);
  io.run_for(2s);
  ASSERT_EQ(w.result, true);
  EXPECT_GE(w.at - start, 100ms);
}

TEST(Drainer, EveryRequestRestartsTheQuietPeriod) {
  asio::io_context io;
  Drainer d(Millis(100));
  auto start = Clock::now();
  d.start(start);
  Wait w;
  spawn_wait(io, d, w);
  // A request 80 ms in moves the end to 180 ms at the earliest.
  asio::steady_timer t(io, start + 80ms);
  Clock::time_point noted;
  t.async_wait([&](error_code) {
    noted = Clock::now();
    d.note_request(noted);
  });
  io.run_for(2s);
  ASSERT_EQ(w.result, true);
  EXPECT_GE(w.at - noted, 100ms);
}

TEST(Drainer, ResetEndsWaitsUndrainedAndHealthChecksPassAgain) {
  asio::io_context io;
  Drainer d(Millis(60'000));
  d.start(Clock::now());
  Wait w;
  spawn_wait(io, d, w);
  asio::post(io, [&] { d.reset(); });
  io.run_for(1s);
  EXPECT_EQ(w.result, false);
  EXPECT_FALSE(d.draining());
}

}  // namespace
}  // namespace sluice::proxy
