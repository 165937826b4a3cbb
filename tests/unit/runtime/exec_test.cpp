// Running tools to completion (runtime/exec.h): output captured or line by line, exit codes and signals,
// the deadline, stdin from a file, and a child left in sluice's process group.
// Also spawn_process itself where the runtime relies on it.
#include "runtime/exec.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "runtime/spawn.h"
#include "tests/support/capability.h"

extern char** environ;

namespace sluice::runtime {
namespace {

using namespace std::chrono_literals;

SpawnRequest shell(const std::string& script) {
  SpawnRequest req;
  req.argv = {"/bin/sh", "-c", script};
  for (char** e = environ; *e; ++e) req.env.emplace_back(*e);
  return req;
}

TEST(RunLines, EachLineOfBothStreamsComesAsItIsWrittenAndTheLastOneWithoutANewlineToo) {
  std::vector<std::string> lines;
  auto r = run_lines(shell("echo one; echo two >&2; printf 'three\\r\\nfour'; exit 3"), 10s,
                     [&](std::string_view l) { lines.emplace_back(l); });
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three", "four"}));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.succeeded());
  EXPECT_TRUE(r.output.empty()) << "lines are handed on, not kept";
}

TEST(RunLines, ACommandStillRunningAtTheDeadlineIsKilledEvenInSluicesOwnProcessGroup) {
  for (bool own_group : {true, false}) {
    auto req = shell("echo started; exec sleep 30");
    req.own_process_group = own_group;
    std::vector<std::string> lines;
    const auto began = std::chrono::steady_clock::now();
    auto r = run_lines(std::move(req), 300ms, [&](std::string_view l) { lines.emplace_back(l); });
    EXPECT_TRUE(r.timed_out);
    EXPECT_EQ(r.signal, SIGKILL);
    EXPECT_LT(std::chrono::steady_clock::now() - began, 10s);
    EXPECT_EQ(lines, (std::vector<std::string>{"started"}));
  }
}

TEST(RunCaptured, StdinComesFromTheGivenFileAndOutputIsCapped) {
  char path[] = "/tmp/sluice-exec-test-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abcdefgh", 8), 8);
  ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
  auto req = shell("cat");
  req.stdin_fd = fd;
  auto r = run_captured(std::move(req), 10s, 5);
  ::close(fd);
  ::unlink(path);
  EXPECT_TRUE(r.succeeded()) << r.error;
  EXPECT_EQ(r.output, "abcde");
}

TEST(RunHelper, AMissingToolIsMinusOneWithTheReason) {
  std::string out;
  EXPECT_EQ(run_helper({"sluice-no-such-tool-anywhere"}, out), -1);
  EXPECT_NE(out.find("sluice-no-such-tool-anywhere"), std::string::npos) << out;
  EXPECT_EQ(run_helper({"/bin/sh", "-c", "echo hi; exit 2"}, out), 2);
  EXPECT_EQ(out, "hi\n");
}

// The per-node agent runs a pod's proxy as the pod's user and wants it gone with the thread serving the pod:
// the parent-death signal must outlive the switch of user (a change of credentials clears it).
TEST(SpawnProcess, AChildRunAsAnotherUserStillGetsItsParentDeathSignal) {
  SLUICE_NEED("root");  // to switch users
  SpawnRequest req = shell("exec sleep 60");
  req.uid = 65534;
  req.gid = 65534;
  req.parent_death_signal = SIGKILL;
  Spawned child;
  std::thread([&] { child = spawn_process(req); }).join();  // the thread that forked it has ended
  ASSERT_GT(child.pid, 0) << child.error;
  pollfd p{child.pidfd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1) << "the child outlived the thread that started it";
  siginfo_t info{};
  ASSERT_EQ(::waitid(static_cast<idtype_t>(3 /* P_PIDFD */), static_cast<id_t>(child.pidfd), &info, WEXITED), 0);
  EXPECT_EQ(info.si_code, CLD_KILLED);
  EXPECT_EQ(info.si_status, SIGKILL);
  ::close(child.pidfd);
}

// A pod's proxy gets its root, the agent's channel and every listening socket it takes over (two per worker
// and port): dozens on a large node. Each arrives at its number, in order, and nothing else does.
TEST(SpawnProcess, EveryInheritedDescriptorArrivesInOrderFromThree) {
  constexpr int kCount = 40;
  std::vector<int> pipes;
  SpawnRequest req = shell({});
  req.argv = {"/bin/bash", "-c",  // bash: dash reads no descriptor above 9
              "for fd in $(seq 3 42); do read line <&$fd && printf '%s ' \"$line\"; done; "
              "[ -e /proc/self/fd/43 ] && echo leaked || echo end"};
  for (int i = 0; i < kCount; ++i) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    const std::string line = std::to_string(i) + "\n";
    ASSERT_EQ(::write(p[1], line.data(), line.size()), static_cast<ssize_t>(line.size()));
    ::close(p[1]);
    req.inherit_fds.push_back(p[0]);
  }
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  req.stdout_fd = out[1];
  auto child = spawn_process(req);
  ::close(out[1]);
  for (int fd : req.inherit_fds) ::close(fd);
  ASSERT_GT(child.pid, 0) << child.error;
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  std::string want;
  for (int i = 0; i < kCount; ++i) want += std::to_string(i) + " ";
  EXPECT_EQ(text, want + "end\n");
  siginfo_t info{};
  ::waitid(static_cast<idtype_t>(3 /* P_PIDFD */), static_cast<id_t>(child.pidfd), &info, WEXITED);
  ::close(child.pidfd);
}

}  // namespace
}  // namespace sluice::runtime
