// Time-weighted concurrency with an injected clock: what Knative's autoscaler is fed each period.
#include "metrics/request_stats.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace sluice::metrics {
namespace {

using std::chrono::milliseconds;
const Clock::time_point t0{};

TEST(RequestStats, ConstantConcurrencyAveragesToItself) {
  RequestStats s(t0);
  s.request_in(t0, false);
  s.request_in(t0, false);
  auto r = s.report(t0 + milliseconds(1000));
  EXPECT_DOUBLE_EQ(r.average_concurrency, 2.0);
  EXPECT_EQ(r.requests, 2u);
  EXPECT_DOUBLE_EQ(r.seconds, 1.0);
  // Still in flight: the next period sees them for all of its length, but no new arrivals.
  auto r2 = s.report(t0 + milliseconds(2000));
  EXPECT_DOUBLE_EQ(r2.average_concurrency, 2.0);
  EXPECT_EQ(r2.requests, 0u);
}

TEST(RequestStats, AverageIsWeightedByTimeInFlight) {
  RequestStats s(t0);
  s.request_in(t0 + milliseconds(250), false);   // 1 in flight from 0.25 s
  s.request_in(t0 + milliseconds(500), false);   // 2 from 0.5 s
  s.request_out(t0 + milliseconds(750), false);  // 1 from 0.75 s
  auto r = s.report(t0 + milliseconds(1000));
  // 0.25 s x 1 + 0.25 s x 2 + 0.25 s x 1 = 1.0 concurrency-seconds over 1 s.
  EXPECT_NEAR(r.average_concurrency, 1.0, 1e-9);
  EXPECT_EQ(r.requests, 2u);
}

TEST(RequestStats, ProxiedRequestsAreCountedApart) {
  RequestStats s(t0);
  s.request_in(t0, true);
  s.request_in(t0, false);
  s.request_out(t0 + milliseconds(500), true);
  auto r = s.report(t0 + milliseconds(1000));
  EXPECT_NEAR(r.average_concurrency, 1.5, 1e-9);
  EXPECT_NEAR(r.average_proxied_concurrency, 0.5, 1e-9);
  EXPECT_EQ(r.requests, 2u);
  EXPECT_EQ(r.proxied_requests, 1u);
}

TEST(RequestStats, PeriodsAreIndependentAndIdleIsZero) {
  RequestStats s(t0);
  s.request_in(t0, false);
  s.request_out(t0 + milliseconds(100), false);
  auto r1 = s.report(t0 + milliseconds(1000));
  EXPECT_NEAR(r1.average_concurrency, 0.1, 1e-9);
  auto r2 = s.report(t0 + milliseconds(2000));
  EXPECT_EQ(r2.average_concurrency, 0.0);
  EXPECT_EQ(r2.requests, 0u);
}

TEST(RequestStats, AnEmptyPeriodReportsZeroInsteadOfDividingByZero) {
  RequestStats s(t0);
  s.request_in(t0, false);
  auto r = s.report(t0);
  EXPECT_EQ(r.seconds, 0.0);
  EXPECT_EQ(r.average_concurrency, 0.0);
  EXPECT_EQ(r.requests, 1u);
}

TEST(RequestStats, ShardsAddUp) {
  RequestStats s(t0, 3);
  s.shard(0).request_in(t0, false);
  s.shard(1).request_in(t0 + milliseconds(500), true);
  s.shard(2).request_in(t0, false);
  s.shard(2).request_out(t0 + milliseconds(250), false);
  auto r = s.report(t0 + milliseconds(1000));
  EXPECT_NEAR(r.average_concurrency, 1.0 + 0.5 + 0.25, 1e-9);
  EXPECT_NEAR(r.average_proxied_concurrency, 0.5, 1e-9);
  EXPECT_EQ(r.requests, 3u);
  EXPECT_EQ(r.proxied_requests, 1u);
  EXPECT_EQ(s.in_flight(), 2);
}

TEST(RequestStats, AnEventStampedBeforeTheLastReportIsNotCountedTwice) {
  // A worker read the clock, then the reporter closed the period, then the worker recorded.
  RequestStats s(t0);
  s.request_in(t0, false);
  auto r1 = s.report(t0 + milliseconds(1000));
  s.request_out(t0 + milliseconds(900), false);
  auto r2 = s.report(t0 + milliseconds(2000));
  EXPECT_NEAR(r1.average_concurrency, 1.0, 1e-9);
  // The period over-counted 0.1 s; the next one gives it back, so the totals stay exact.
  EXPECT_NEAR(r1.average_concurrency * r1.seconds + r2.average_concurrency * r2.seconds, 0.9, 1e-9);
}

TEST(RequestStats, AWithdrawnRequestNoReportReadIsTakenBackWholeAndOneReadIsCountedOut) {
  RequestStats s(t0);
  s.request_in(t0 + milliseconds(100), false);   // stays: 0.9 s in the first period
  s.request_in(t0 + milliseconds(200), false);   // withdrawn before any report
  EXPECT_TRUE(s.withdraw(t0 + milliseconds(200), t0 + milliseconds(600), false));
  auto r1 = s.report(t0 + milliseconds(1000));
  EXPECT_NEAR(r1.average_concurrency, 0.9, 1e-9);
  EXPECT_EQ(r1.requests, 1u);
  EXPECT_EQ(s.in_flight(), 1);

  s.request_in(t0 + milliseconds(1500), false);  // read by the report at 2 s, then withdrawn
  auto r2 = s.report(t0 + milliseconds(2000));
  EXPECT_EQ(r2.requests, 1u);
  EXPECT_FALSE(s.withdraw(t0 + milliseconds(1500), t0 + milliseconds(2500), false));
  auto r3 = s.report(t0 + milliseconds(3000));
  EXPECT_NEAR(r3.average_concurrency, 1.0 + 0.5, 1e-9);  // counted out as any request
  EXPECT_EQ(r3.requests, 0u);
  EXPECT_EQ(s.in_flight(), 1);
}

TEST(RequestStats, WorkersWriteTheirShardsWhileTheReporterReads) {
  RequestStats s(Clock::now(), 4);
  std::atomic<bool> done{false};
  std::uint64_t reported = 0;
  std::thread reporter([&] {
    while (!done) reported += s.report(Clock::now()).requests;
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&s, t] {
      auto& shard = s.shard(static_cast<std::size_t>(t));
      for (int i = 0; i < 20000; ++i) {
        shard.request_in(Clock::now(), t % 2 == 0);
        shard.request_out(Clock::now(), t % 2 == 0);
      }
    });
  }
  for (auto& th : workers) th.join();
  done = true;
  reporter.join();
  reported += s.report(Clock::now()).requests;
  EXPECT_EQ(reported, 80000u);  // every arrival in exactly one period
  EXPECT_EQ(s.in_flight(), 0);
}

// The stat reporter sleeps while idle and is woken by the first request instead of polling for it.
TEST(RequestStats, ArmedArrivalWakeFiresOnceAtTheNextArrivalOnAnyShard) {
  RequestStats s(t0, 2);
  int woken = 0;
  s.wake_on_next_arrival([&] { ++woken; });
  s.shard(1).request_out(t0, false);  // a departure is not an arrival
  EXPECT_EQ(woken, 0);
  s.shard(1).request_in(t0, false);
  EXPECT_EQ(woken, 1);
  s.shard(0).request_in(t0, false);  // one-shot: fired already
  EXPECT_EQ(woken, 1);
  s.wake_on_next_arrival([&] { ++woken; });
  s.cancel_arrival_wake();
  s.shard(0).request_in(t0, false);
  EXPECT_EQ(woken, 1);
}

TEST(RequestStats, ArrivalWakeRacingArrivalsOnManyThreadsFiresExactlyOnce) {
  RequestStats s(t0, 4);
  std::atomic<int> woken{0};
  s.wake_on_next_arrival([&] { woken.fetch_add(1); });
  std::vector<std::thread> workers;
  for (std::size_t i = 0; i < 4; ++i)
    workers.emplace_back([&, i] {
      for (int k = 0; k < 1000; ++k) s.shard(i).request_in(t0, false);
    });
  for (auto& w : workers) w.join();
  EXPECT_EQ(woken.load(), 1);
  EXPECT_EQ(s.requests_total(), 4000u);
}

}  // namespace
}  // namespace sluice::metrics
