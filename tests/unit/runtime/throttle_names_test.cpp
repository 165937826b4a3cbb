// Throttle mechanism names round-trip, so `--throttle NAME` and reports agree.
#include <gtest/gtest.h>

#include "runtime/throttle.h"

namespace sluice::runtime {
namespace {

TEST(ThrottleNames, RoundTrip) {
  for (auto k : {ThrottleKind::cgroup2_freeze, ThrottleKind::cgroup2_cpu_max, ThrottleKind::cgroup1_freezer,
                 ThrottleKind::cgroup1_cfs_quota, ThrottleKind::sigstop, ThrottleKind::none}) {
    auto parsed = parse_throttle(to_string(k));
    ASSERT_TRUE(parsed) << to_string(k);
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_FALSE(parse_throttle("auto"));
  EXPECT_FALSE(parse_throttle("freezer"));
}

TEST(ThrottleNames, CgroupKinds) {
  EXPECT_TRUE(uses_cgroup(ThrottleKind::cgroup1_freezer));
  EXPECT_FALSE(uses_cgroup(ThrottleKind::sigstop));
  EXPECT_TRUE(is_cgroup2(ThrottleKind::cgroup2_cpu_max));
  EXPECT_FALSE(is_cgroup2(ThrottleKind::cgroup1_cfs_quota));
}

}  // namespace
}  // namespace sluice::runtime
