// CPU throttle per mechanism with a real busy child: no CPU while frozen, CPU again after thaw, cgroups cleaned.
#include <gtest/gtest.h>

#include <thread>

#include "common/config_error.h"
#include "tests/integration/runtime/runtime_harness.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::runtime::test {
namespace {

using namespace std::chrono_literals;
using sluice::test::eventually;

class ThrottleTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    // Each mechanism by name is a capability of the machine; "auto" and "sigstop" work everywhere.
    if (std::string(GetParam()) != "auto" && std::string(GetParam()) != "sigstop") SLUICE_NEED(GetParam());
    rt_ = make_runtime(rec_, GetParam());
  }
  bool is_quota() const {
    auto kind = rt_->throttle().kind;
    return kind == ThrottleKind::cgroup2_cpu_max || kind == ThrottleKind::cgroup1_cfs_quota;
  }
  Recorded rec_;
  std::unique_ptr<Runtime> rt_;
};

TEST_P(ThrottleTest, FrozenBusyChildUsesNoCpuAndThawResumesIt) {
  ASSERT_TRUE(rt_->create(shell("busy1", "while :; do :; done")));
  ASSERT_TRUE(rt_->start("busy1"));
  pid_t pid = rt_->status("busy1")->pid;
  // Running: the loop burns CPU (one tick is 10 ms).
  long t0 = cpu_ticks(pid);
  ASSERT_TRUE(eventually([&] { return cpu_ticks(pid) >= t0 + 5; }, 5s));
  auto frozen = rt_->freeze("busy1");
  ASSERT_TRUE(frozen) << frozen.error();
  EXPECT_TRUE(rt_->status("busy1")->frozen);
  EXPECT_TRUE(rec_.has_event(EventKind::frozen, "busy1"));
  long f0 = cpu_ticks(pid);
  // Observing a bounded interval is the point here: CPU time must not advance during it.
  std::this_thread::sleep_for(500ms);
  long f1 = cpu_ticks(pid);
  // Quotas leave 1 ms per second; a tick boundary may fall inside it.
  EXPECT_LE(f1 - f0, is_quota() ? 1 : 0) << "CPU time advanced while frozen (" << GetParam() << ")";
  auto thawed = rt_->thaw("busy1");
  ASSERT_TRUE(thawed) << thawed.error();
  EXPECT_FALSE(rt_->status("busy1")->frozen);
  EXPECT_TRUE(eventually([&] { return cpu_ticks(pid) >= f1 + 5; }, 5s)) << "no CPU after thaw";
  ASSERT_TRUE(rt_->remove("busy1"));
}

TEST_P(ThrottleTest, CgroupsCreatedAreRemovedAfterwards) {
  auto base = rt_->throttle().base;
  ASSERT_TRUE(rt_->create(shell("cg1", "sleep 60 & while :; do sleep 0.05; done")));
  ASSERT_TRUE(rt_->start("cg1"));
  if (!base.empty()) {
    EXPECT_TRUE(path_exists((base / "cg1").string()));
  }
  ASSERT_TRUE(rt_->freeze("cg1"));
  ASSERT_TRUE(rt_->remove("cg1"));  // frozen and running: thaw, kill everything, rmdir
  if (!base.empty()) {
    EXPECT_FALSE(path_exists((base / "cg1").string()));
  }
  rt_.reset();
  if (!base.empty()) {
    EXPECT_FALSE(path_exists(base.string())) << base;
  }
}

TEST_P(ThrottleTest, FrozenInstanceIsThawedBeforeSigtermSoItExitsGracefully) {
  // Under SIGSTOP or a v1 freezer a SIGTERM would stay pending (and the grace run out) without a thaw.
  ASSERT_TRUE(rt_->create(shell("stopfrozen1", "trap 'echo got-term; exit 7' TERM; echo ready; "
                                              "while :; do sleep 0.05; done")));
  ASSERT_TRUE(rt_->start("stopfrozen1"));
  ASSERT_TRUE(eventually([&] { return !rec_.lines_of(Stream::out).empty(); }, 10s));
  auto frozen = rt_->freeze("stopfrozen1");
  ASSERT_TRUE(frozen) << frozen.error();
  ASSERT_TRUE(rt_->stop("stopfrozen1", 10s));
  auto st = rt_->status("stopfrozen1");
  EXPECT_EQ(st->exit_code, 7);
  EXPECT_FALSE(rec_.has_event(EventKind::killing, "stopfrozen1"));
  EXPECT_EQ(rec_.lines_of(Stream::out).back(), "got-term");
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, ThrottleTest,
                         ::testing::Values("auto", "cgroup2-freeze", "cgroup2-cpu-max", "cgroup1-freezer",
                                           "cgroup1-cfs-quota", "sigstop"),
                         [](const auto& p) {
                           std::string n = p.param;
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(ThrottleDetection, ReportsWhatItChoseAndWhy) {
  Recorded rec;
  auto rt = make_runtime(rec);
  const auto& t = rt->throttle();
  ::testing::Test::RecordProperty("throttle", std::string(to_string(t.kind)));
  if (uses_cgroup(t.kind)) {
    EXPECT_TRUE(path_exists(t.base.string()));
  }
  if (::geteuid() == 0 && path_exists("/sys/fs/cgroup/freezer/cgroup.procs")) {
    EXPECT_NE(t.kind, ThrottleKind::sigstop) << "root with a v1 freezer should not fall back: " << t.detail;
  }
  // The first choice, wherever the machine can freeze a cgroup v2 group.
  if (sluice::test::probe_capability("cgroup2-freeze").kind == sluice::test::CapabilityVerdict::Kind::present) {
    EXPECT_EQ(t.kind, ThrottleKind::cgroup2_freeze) << t.detail;
  }
}

TEST(ThrottleDetection, NoneRefusesToFreeze) {
  Recorded rec;
  auto rt = make_runtime(rec, "none");
  ASSERT_TRUE(rt->create(shell("n1", "exec sleep 30")));
  ASSERT_TRUE(rt->start("n1"));
  auto frozen = rt->freeze("n1");
  EXPECT_FALSE(frozen);
  EXPECT_NE(frozen.error().find("off"), std::string::npos);
}

TEST(ThrottleDetection, UnknownMechanismIsAConfigError) {
  Recorded rec;
  EXPECT_THROW(make_runtime(rec, "quantum-freeze"), ConfigError);
}

}  // namespace
}  // namespace sluice::runtime::test
