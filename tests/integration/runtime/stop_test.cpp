// Stop: SIGTERM to the process group, the grace period, SIGKILL; frozen instances are thawed first.
#include <gtest/gtest.h>

#include <signal.h>

#include "tests/integration/runtime/runtime_harness.h"
#include "tests/support/eventually.h"

namespace sluice::runtime::test {
namespace {

using namespace std::chrono_literals;
using sluice::test::eventually;
using Steady = std::chrono::steady_clock;

// Waits until the app printed `marker`, i.e. its traps are installed.
void wait_for_line(Recorded& rec, const std::string& marker) {
  ASSERT_TRUE(eventually([&] {
    for (const auto& l : rec.lines_of(Stream::out))
      if (l == marker) return true;
    return false;
  }, 10s)) << "no line '" << marker << "'";
}

TEST(RuntimeStop, SigtermHonouredWithinGrace) {
  Recorded rec;
  auto rt = make_runtime(rec);
  ASSERT_TRUE(rt->create(shell("term1", "trap 'echo got-term; exit 0' TERM; echo ready; "
                                        "while :; do sleep 0.05; done")));
  ASSERT_TRUE(rt->start("term1"));
  wait_for_line(rec, "ready");
  auto began = Steady::now();
  ASSERT_TRUE(rt->stop("term1", 10s));
  EXPECT_LT(Steady::now() - began, 5s);
  auto st = rt->status("term1");
  EXPECT_EQ(st->state, InstanceState::exited);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_FALSE(rec.has_event(EventKind::killing, "term1"));
  auto out = rec.lines_of(Stream::out);
  EXPECT_EQ(out.back(), "got-term");
}

TEST(RuntimeStop, ChildIgnoringSigtermIsKilledAtGrace) {
  Recorded rec;
  auto rt = make_runtime(rec);
  ASSERT_TRUE(rt->create(shell("stubborn1", "trap '' TERM; echo ready; while :; do sleep 0.05; done")));
  ASSERT_TRUE(rt->start("stubborn1"));
  wait_for_line(rec, "ready");
  auto began = Steady::now();
  ASSERT_TRUE(rt->stop("stubborn1", 300ms));
  auto took = Steady::now() - began;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 5s);
  auto st = rt->status("stubborn1");
  EXPECT_EQ(st->signal, SIGKILL);
  EXPECT_TRUE(rec.has_event(EventKind::killing, "stubborn1"));
}

TEST(RuntimeStop, WholeProcessGroupIsSignalled) {
  Recorded rec;
  auto rt = make_runtime(rec);
  // A background grandchild that would outlive its parent if only the leader were signalled.
  ASSERT_TRUE(rt->create(shell("group1", "sleep 60 & echo child=$!; wait")));
  ASSERT_TRUE(rt->start("group1"));
  pid_t child = 0;
  ASSERT_TRUE(eventually([&] {
    for (const auto& l : rec.lines_of(Stream::out))
      if (l.rfind("child=", 0) == 0) child = std::stoi(l.substr(6));
    return child > 0;
  }, 10s));
  ASSERT_TRUE(rt->stop("group1", 5s));
  EXPECT_TRUE(eventually([&] { return ::kill(child, 0) != 0; }, 5s)) << "grandchild " << child << " survived";
}

TEST(RuntimeStop, FrozenInstanceIsThawedSoItCanHandleSigterm) {
  Recorded rec;
  auto rt = make_runtime(rec);
  ASSERT_TRUE(rt->create(shell("frozenstop1", "trap 'echo got-term; exit 7' TERM; echo ready; "
                                              "while :; do sleep 0.05; done")));
  ASSERT_TRUE(rt->start("frozenstop1"));
  wait_for_line(rec, "ready");
  auto frozen = rt->freeze("frozenstop1");
  ASSERT_TRUE(frozen) << frozen.error();
  ASSERT_TRUE(rt->stop("frozenstop1", 10s));
  auto st = rt->status("frozenstop1");
  EXPECT_EQ(st->exit_code, 7);
  EXPECT_FALSE(st->frozen);
}

TEST(RuntimeStop, StopAfterExitIsFineAndRemoveKillsARunningInstance) {
  Recorded rec;
  auto rt = make_runtime(rec);
  ASSERT_TRUE(rt->create(shell("done1", "exit 3")));
  ASSERT_TRUE(rt->start("done1"));
  ASSERT_TRUE(rt->wait_exited("done1", 10s));
  EXPECT_TRUE(rt->stop("done1"));
  ASSERT_TRUE(rt->create(shell("running1", "trap '' TERM; while :; do sleep 0.05; done")));
  ASSERT_TRUE(rt->start("running1"));
  pid_t pid = rt->status("running1")->pid;
  auto began = Steady::now();
  ASSERT_TRUE(rt->remove("running1"));
  EXPECT_LT(Steady::now() - began, 5s);
  EXPECT_NE(::kill(pid, 0), 0);
}

}  // namespace
}  // namespace sluice::runtime::test
