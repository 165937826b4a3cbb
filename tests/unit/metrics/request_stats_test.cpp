// Time-weighted concurrency with an injected clock: what Knative's autoscaler is fed each period.
#include "metrics/request_stats.h"

#include <gtest/gtest.h>

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

TEST(RequestStats, ConcurrentWorkersBalanceOut) {
  RequestStats s(Clock::now());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&s, t] {
      for (int i = 0; i < 10000; ++i) {
        s.request_in(Clock::now(), t % 2 == 0);
        s.request_out(Clock::now(), t % 2 == 0);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(s.in_flight(), 0);
  auto r = s.report(Clock::now());
  EXPECT_EQ(r.requests, 40000u);
  EXPECT_EQ(r.proxied_requests, 20000u);
}

}  // namespace
}  // namespace sluice::metrics
