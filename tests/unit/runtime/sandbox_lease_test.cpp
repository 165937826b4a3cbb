// Sandbox slots and ranges: exclusive slot files, what a sweep undoes for a dead owner (and leaves for a
// live one), and the /31 arithmetic of the pods' range.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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
