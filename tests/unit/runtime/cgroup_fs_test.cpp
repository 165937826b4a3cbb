// Cgroup discovery from /proc/self/mountinfo and /proc/self/cgroup texts (hybrid, pure v2, namespaced).
#include "runtime/cgroup_fs.h"

#include <gtest/gtest.h>

namespace sluice::runtime::cgroup {
namespace {

constexpr const char* kHybridMounts =
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "36 30 0:33 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "38 30 0:35 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr const char* kHybridProc =
    "9:name=systemd:/\n6:freezer:/\n4:memory:/job/42\n1:cpu:/svc\n0::/svc.scope\n";

TEST(CgroupDiscovery, HybridFindsUnifiedAndV1Hierarchies) {
  auto u = find_unified(kHybridMounts, kHybridProc);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->mount, "/sys/fs/cgroup/unified");
  EXPECT_EQ(u->own_dir(), "/sys/fs/cgroup/unified/svc.scope");
  auto f = find_v1(kHybridMounts, kHybridProc, "freezer");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->own_dir(), "/sys/fs/cgroup/freezer/");
  auto c = find_v1(kHybridMounts, kHybridProc, "cpu");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->mount, "/sys/fs/cgroup/cpu");  // the first mount carrying the controller
  EXPECT_EQ(c->own_dir(), "/sys/fs/cgroup/cpu/svc");
  EXPECT_FALSE(find_v1(kHybridMounts, kHybridProc, "cpuacct"));  // not in /proc/self/cgroup
  EXPECT_FALSE(find_v1(kHybridMounts, kHybridProc, "memory"));   // not mounted
}

TEST(CgroupDiscovery, PureV2HasNoV1Controllers) {
  const char* mounts = "25 22 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
  auto u = find_unified(mounts, "0::/user.slice/app\n");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->own_dir(), "/sys/fs/cgroup/user.slice/app");
  EXPECT_FALSE(find_v1(mounts, "0::/user.slice/app\n", "freezer"));
}

TEST(CgroupDiscovery, MountRootIsStrippedFromOwnPath) {
  // A bind-mounted subtree (as in a container): the mount's root is the cgroup the process sees under.
  const char* mounts = "25 22 0:22 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  auto u = find_unified(mounts, "0::/kubepods/pod1/ctr\n");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->own_dir(), "/sys/fs/cgroup/ctr");
}

TEST(CgroupDiscovery, NoCgroupMountsFindsNothing) {
  EXPECT_FALSE(find_unified("", "0::/\n"));
  EXPECT_FALSE(find_unified(kHybridMounts, "6:freezer:/\n"));
}

// Another process's cgroups (a per-node pod's stub): every hierarchy it is in that is mounted here, v1 ones by
// their first controller, name=systemd by its name.
TEST(CgroupDiscovery, EveryHierarchyOfAProcessThatIsMountedHere) {
  const char* mounts =
      "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
      "33 30 0:30 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n"
      "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  const char* stub = "12:name=systemd:/kubepods/pod9/c1\n4:memory:/kubepods/pod9/c1\n"
                     "2:cpu,cpuacct:/kubepods/pod9/c1\n0::/kubepods/pod9/c1\n";
  EXPECT_EQ(dirs_of(mounts, stub), (std::vector<std::filesystem::path>{
                                       "/sys/fs/cgroup/systemd/kubepods/pod9/c1",
                                       "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod9/c1",
                                       "/sys/fs/cgroup/unified/kubepods/pod9/c1"}));  // memory: not mounted
  EXPECT_EQ(dirs_of("", stub), std::vector<std::filesystem::path>{});
}

}  // namespace
}  // namespace sluice::runtime::cgroup
