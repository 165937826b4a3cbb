// The runc/crun handlers with a busybox-static rootfs built by the test; skipped, saying why, where the
// machine's runc or crun cannot run a trivial bundle (tests/support/capability.sh probes it: crun on
// cgroup v1/v2 hybrid machines, say).
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/integration/runtime/runtime_harness.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::runtime::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sluice::test::eventually;

const char* kBusybox = "/bin/busybox";

class OciTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    SLUICE_NEED(GetParam());  // runc or crun running a trivial busybox bundle
    rt_ = make_runtime(rec_);
    // A minimal rootfs: the static busybox and the applet links the scripts use.
    rootfs_ = fs::temp_directory_path() / ("sluice-rootfs-" + std::to_string(::getpid()));
    fs::create_directories(rootfs_ / "bin");
    fs::copy_file(kBusybox, rootfs_ / "bin/busybox", fs::copy_options::overwrite_existing);
    for (const char* applet : {"sh", "echo", "sleep", "cat", "env", "test"})
      fs::create_symlink("busybox", rootfs_ / "bin" / applet);
  }
  void TearDown() override {
    rt_.reset();
    std::error_code ec;
    if (!rootfs_.empty()) fs::remove_all(rootfs_, ec);
  }
  InstanceSpec spec(const std::string& id, const std::string& script) {
    auto s = shell(id, script);
    s.handler = GetParam();
    s.rootfs = rootfs_;
    return s;
  }
  Recorded rec_;
  std::unique_ptr<Runtime> rt_;
  fs::path rootfs_;
};

TEST_P(OciTest, RunsTheContractInsideTheBundle) {
  auto s = spec("oci1", "echo PORT=$PORT K_SERVICE=$K_SERVICE TMPDIR=$TMPDIR; "
                        "if read l; then echo stdin-data; else echo stdin-eof; fi; "
                        "test -w /tmp && echo tmp-writable; echo err >&2; exit 5");
  s.port = 8181;
  s.service = "svc";
  ASSERT_TRUE(rt_->create(s));
  auto started = rt_->start("oci1");
  ASSERT_TRUE(started) << started.error();
  auto st = rt_->wait_exited("oci1", 30s);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 5);
  EXPECT_EQ(rec_.lines_of(Stream::out),
            (std::vector<std::string>{"PORT=8181 K_SERVICE=svc TMPDIR=/tmp", "stdin-eof", "tmp-writable"}));
  EXPECT_EQ(rec_.lines_of(Stream::err), (std::vector<std::string>{"err"}));
  ASSERT_TRUE(rt_->remove("oci1"));
}

TEST_P(OciTest, StopDeliversSigtermAndFreezeWorks) {
  ASSERT_TRUE(rt_->create(spec("oci2", "trap 'echo got-term; exit 0' TERM; echo ready; "
                                       "while :; do sleep 0.05; done")));
  ASSERT_TRUE(rt_->start("oci2"));
  ASSERT_TRUE(eventually([&] { return !rec_.lines_of(Stream::out).empty(); }, 30s));
  auto frozen = rt_->freeze("oci2");
  ASSERT_TRUE(frozen) << frozen.error();
  ASSERT_TRUE(rt_->thaw("oci2"));
  ASSERT_TRUE(rt_->freeze("oci2"));
  auto stopped = rt_->stop("oci2", 10s);  // thaws first
  ASSERT_TRUE(stopped) << stopped.error();
  auto st = rt_->status("oci2");
  EXPECT_EQ(st->state, InstanceState::exited);
  EXPECT_FALSE(rec_.has_event(EventKind::killing, "oci2"));
  EXPECT_EQ(rec_.lines_of(Stream::out).back(), "got-term");
  ASSERT_TRUE(rt_->remove("oci2"));
}

TEST_P(OciTest, IgnoredSigtermIsKilledAtGrace) {
  ASSERT_TRUE(rt_->create(spec("oci3", "trap '' TERM; echo ready; while :; do sleep 0.05; done")));
  ASSERT_TRUE(rt_->start("oci3"));
  ASSERT_TRUE(eventually([&] { return !rec_.lines_of(Stream::out).empty(); }, 30s));
  ASSERT_TRUE(rt_->stop("oci3", 300ms));
  EXPECT_TRUE(rec_.has_event(EventKind::killing, "oci3"));
  EXPECT_EQ(rt_->status("oci3")->state, InstanceState::exited);
}

INSTANTIATE_TEST_SUITE_P(Handlers, OciTest, ::testing::Values("runc", "crun"));

}  // namespace
}  // namespace sluice::runtime::test
