// The CPU quota of this process's cgroup, read as automaxprocs reads it for queue-proxy.
#include "common/cpu_budget.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

namespace sluice {
namespace {

struct Files {
  std::map<std::string, std::string> content;
  std::optional<std::string> operator()(const std::string& path) const {
    auto it = content.find(path);
    if (it == content.end()) return std::nullopt;
    return it->second;
  }
};

constexpr const char* kV2Mount = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
constexpr const char* kHybrid =
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(CgroupCpuQuota, V2QuotaOverPeriod) {
  Files f{{{"/sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "50000 100000\n"}}};
  auto q = cgroup_cpu_quota(kV2Mount, "0::/kubepods/pod1/c1\n", f);
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q, 0.5);
}

TEST(CgroupCpuQuota, V2MaxIsNoQuota) {
  Files f{{{"/sys/fs/cgroup/cpu.max", "max 100000\n"}}};
  EXPECT_FALSE(cgroup_cpu_quota(kV2Mount, "0::/\n", f));
}

TEST(CgroupCpuQuota, V2InsideACgroupNamespaceSeesItsRoot) {
  // In a container the mount's root is the container's own cgroup, and /proc/self/cgroup says "/".
  Files f{{{"/sys/fs/cgroup/cpu.max", "250000 100000"}}};
  auto q = cgroup_cpu_quota("29 23 0:26 /kubepods/pod1/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
                            "0::/kubepods/pod1/c1\n", f);
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q, 2.5);
}

TEST(CgroupCpuQuota, V1CfsQuota) {
  Files f{{{"/sys/fs/cgroup/cpu/kubepods/c1/cpu.cfs_quota_us", "150000\n"},
           {"/sys/fs/cgroup/cpu/kubepods/c1/cpu.cfs_period_us", "100000\n"}}};
  auto q = cgroup_cpu_quota(kHybrid, "2:cpuacct:/\n1:cpu:/kubepods/c1\n0::/\n", f);
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q, 1.5);
}

TEST(CgroupCpuQuota, V1MinusOneIsNoQuota) {
  Files f{{{"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"}, {"/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"}}};
  EXPECT_FALSE(cgroup_cpu_quota(kHybrid, "1:cpu:/\n0::/\n", f));
}

TEST(CgroupCpuQuota, HybridV2LineWithoutCpuMaxFallsToV1) {
  Files f{{{"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "100000\n"}, {"/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"}}};
  auto q = cgroup_cpu_quota(kHybrid, "0::/\n1:cpu:/\n", f);
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*q, 1.0);
}

TEST(CgroupCpuQuota, NothingReadableIsNoQuota) {
  EXPECT_FALSE(cgroup_cpu_quota("", "", Files{}));
  EXPECT_FALSE(cgroup_cpu_quota(kV2Mount, "0::/\n", Files{{{"/sys/fs/cgroup/cpu.max", "garbage"}}}));
}

TEST(UsableCpus, AtLeastOneAndAtMostTheHost) {
  auto n = usable_cpus();
  EXPECT_GE(n, 1u);
  EXPECT_LE(n, std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace sluice
