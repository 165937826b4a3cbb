// Sandbox slots and ranges: exclusive slot files, what a sweep undoes for a dead owner (and leaves for a
// live one), and the /31 arithmetic of the pods' range.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "runtime/sandbox_lease.h"
#include "runtime/sandbox_net.h"

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;

class LeaseDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sluice-lease-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LeaseDir, SlotsAreExclusiveAndFreedWithTheLease) {
  std::string error;
  auto a = SandboxLease::acquire(dir_, 2, "pod-a", error);
  auto b = SandboxLease::acquire(dir_, 2, "pod-b", error);
  ASSERT_TRUE(a && b) << error;
  EXPECT_EQ(a->slot(), 0);
  EXPECT_EQ(b->slot(), 1);
  auto c = SandboxLease::acquire(dir_, 2, "pod-c", error);
  EXPECT_FALSE(c);
  EXPECT_EQ(error, "all 2 sandbox addresses are in use (see " + dir_.string() + ")");
  a.reset();
  EXPECT_FALSE(fs::exists(dir_ / "0"));
  auto d = SandboxLease::acquire(dir_, 2, "pod-d", error);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->slot(), 0);
}

TEST_F(LeaseDir, SweepUndoesWhatADeadOwnerLeftAndKeepsLiveOnes) {
  std::string error;
  auto live = SandboxLease::acquire(dir_, 8, "mine", error);
  ASSERT_TRUE(live) << error;
  auto leftover = dir_ / "left-cgroup";
  fs::create_directories(leftover / "child");
  // A pid that cannot exist (above pid_max's ceiling): its owner is gone.
  std::ofstream(dir_ / "5") << "owner 4194305 12345\nsandbox old\ncgroup " << leftover.string() << "\n";
  EXPECT_EQ(sweep_stale_leases(dir_), 1);
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_FALSE(fs::exists(dir_ / "5"));
  EXPECT_TRUE(fs::exists(dir_ / std::to_string(live->slot())));
  EXPECT_EQ(sweep_stale_leases(dir_), 0);
}

// Two runtimes starting at once both sweep a slot a killed one left, and a third takes the slot the moment
// its file goes, making what it records under the same name (a slot's link is named after the slot). Neither
// sweep may undo or remove what the new owner made, and the slot counts as swept once.
TEST_F(LeaseDir, TwoSweepsAtOnceNeverUndoWhatTheSlotsNextOwnerMade) {
  const auto made = dir_ / "made-by-slot-0";  // as "link sluice0": the name comes with the slot
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int rounds = 0;
  for (; rounds < 300 && std::chrono::steady_clock::now() < deadline; ++rounds) {
    fs::create_directories(dir_);
    std::ofstream(dir_ / "0") << "owner 4194305 12345\nsandbox old\nbase " << made.string() << "\n";
    std::atomic<int> swept{0};
    std::atomic<bool> go{false};
    std::unique_ptr<SandboxLease> next;
    auto sweep = [&] {
      while (!go) std::this_thread::yield();
      swept += sweep_stale_leases(dir_);
    };
    std::thread a(sweep), b(sweep);
    std::thread taker([&] {
      std::string error;
      while (!go) std::this_thread::yield();
      while (!next && std::chrono::steady_clock::now() < deadline) {
        next = SandboxLease::acquire(dir_, 1, "new", error);
        if (!next) std::this_thread::yield();
      }
      if (next) {
        next->record("base", made.string());
        fs::create_directory(made);
      }
    });
    go = true;
    a.join();
    b.join();
    taker.join();
    ASSERT_TRUE(next) << "round " << rounds << ": the slot was never freed";
    // A sweep that came late may not run now either.
    swept += sweep_stale_leases(dir_);
    ASSERT_EQ(swept, 1) << "round " << rounds;
    ASSERT_TRUE(fs::exists(made)) << "round " << rounds << ": a sweep undid the new owner's work";
    ASSERT_TRUE(fs::exists(dir_ / "0")) << "round " << rounds << ": a sweep removed the new owner's lease";
    next.reset();
    fs::remove(made);
  }
  EXPECT_GT(rounds, 0);
}

TEST(SandboxNet, RangesAndAddresses) {
  auto r = parse_cidr("169.254.64.0/18");
  ASSERT_TRUE(r);
  EXPECT_EQ(ipv4_text(r->first), "169.254.64.0");
  EXPECT_EQ(r->second, 18);
  EXPECT_EQ(pod_slots(18), 8192);
  EXPECT_EQ(pod_slots(30), 2);
  EXPECT_FALSE(parse_cidr("169.254.64.1/18"));  // host bits set: a typo, not a range
  EXPECT_FALSE(parse_cidr("10.0.0.0/31"));
  EXPECT_FALSE(parse_cidr("10.0.0.0"));
  EXPECT_FALSE(parse_cidr("10.0.0/8"));
  EXPECT_FALSE(parse_cidr("10.0.0.0/8x"));
  EXPECT_EQ(host_link_name(12), "sluice12");
}

TEST(SandboxLease, ProcessStartTimeNamesALiveProcess) {
  EXPECT_GT(process_start_time(::getpid()), 0U);
  EXPECT_EQ(process_start_time(4194305), 0U);
}

}  // namespace
}  // namespace sluice::runtime
