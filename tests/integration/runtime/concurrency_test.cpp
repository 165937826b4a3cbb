// The API is thread-safe: lifecycles of distinct instances in parallel, and operations racing on one instance.
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "tests/integration/runtime/runtime_harness.h"
#include "tests/support/eventually.h"

namespace sluice::runtime::test {
namespace {

using namespace std::chrono_literals;
using sluice::test::eventually;

TEST(RuntimeConcurrency, DistinctInstancesRunTheirLifecyclesInParallel) {
  Recorded rec;
  auto rt = make_runtime(rec);
  constexpr int kThreads = 4;
  constexpr int kRounds = 4;
  std::mutex mu;
  std::vector<std::string> errors;
  auto check = [&](const std::string& what, const Outcome& o) {
    if (o) return true;
    std::lock_guard lock(mu);
    errors.push_back(what + ": " + o.error());
    return false;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        std::string id = "par-" + std::to_string(t) + "-" + std::to_string(r);
        if (!check("create " + id, rt->create(shell(id, "while :; do sleep 0.05; done")))) continue;
        if (check("start " + id, rt->start(id))) {
          check("freeze " + id, rt->freeze(id));
          check("thaw " + id, rt->thaw(id));
          check("stop " + id, rt->stop(id, 5s));
          auto st = rt->status(id);
          if (!st || st->state != InstanceState::exited || st->signal != SIGTERM) {
            std::lock_guard lock(mu);
            errors.push_back(id + " did not exit by SIGTERM");
          }
        }
        check("remove " + id, rt->remove(id));
      }
    });
  }
  for (auto& th : threads) th.join();
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  EXPECT_TRUE(errors.empty()) << all;
  EXPECT_TRUE(rt->list().empty());
  std::lock_guard lock(rec.mu);
  size_t exits = 0;
  for (const auto& e : rec.events) exits += e.kind == EventKind::exited ? 1 : 0;
  EXPECT_EQ(exits, static_cast<size_t>(kThreads * kRounds));
}

TEST(RuntimeConcurrency, StopRacingFreezeAndThawEndsExitedAndNotFrozen) {
  Recorded rec;
  auto rt = make_runtime(rec);
  ASSERT_TRUE(rt->create(shell("shared1", "while :; do sleep 0.05; done")));
  ASSERT_TRUE(rt->start("shared1"));
  std::atomic<bool> done{false};
  std::atomic<int> cycles{0};
  std::thread throttler([&] {
    for (int i = 0; i < 100000 && !done; ++i) {
      (void)rt->freeze("shared1");
      (void)rt->thaw("shared1");
      ++cycles;
    }
  });
  std::thread reader([&] {
    for (int i = 0; i < 100000 && !done; ++i) {
      (void)rt->status("shared1");
      (void)rt->list();
    }
  });
  // Let the racing threads get going before the stop lands among them.
  EXPECT_TRUE(eventually([&] { return cycles >= 20; }, 10s));
  auto stopped = rt->stop("shared1", 5s);
  done = true;
  throttler.join();
  reader.join();
  ASSERT_TRUE(stopped) << stopped.error();
  auto st = rt->status("shared1");
  EXPECT_EQ(st->state, InstanceState::exited);
  EXPECT_FALSE(st->frozen);
  EXPECT_FALSE(rt->freeze("shared1"));  // an exited instance cannot be frozen
  EXPECT_TRUE(rt->remove("shared1"));
  EXPECT_FALSE(rt->remove("shared1"));  // the id is gone
}

}  // namespace
}  // namespace sluice::runtime::test
