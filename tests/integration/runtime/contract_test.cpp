// The instance contract with real processes: environment, stdin at EOF, output capture, crash reporting.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/integration/runtime/runtime_harness.h"
#include "tests/support/eventually.h"

namespace sluice::runtime::test {
namespace {

using namespace std::chrono_literals;
using sluice::test::eventually;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(RuntimeContract, ChildSeesContractEnvironmentAndStdinAtEof) {
  Recorded rec;
  auto rt = make_runtime(rec);
  auto spec = shell("env1", "echo PORT=$PORT; echo K_SERVICE=$K_SERVICE; echo K_REVISION=$K_REVISION;"
                            "echo K_CONFIGURATION=$K_CONFIGURATION; echo EXTRA=$EXTRA;"
                            "if read line; then echo stdin-had-data; else echo stdin-eof; fi;"
                            "test -d \"$TMPDIR\" && test -w \"$TMPDIR\" && echo tmpdir-ok");
  spec.port = 9123;
  spec.service = "hello";
  spec.revision = "hello-00002";
  spec.configuration = "hello-cfg";
  spec.env["EXTRA"] = "x y";
  spec.env["PORT"] = "1";  // the contract wins over configured values
  ASSERT_TRUE(rt->create(spec));
  ASSERT_TRUE(rt->start("env1"));
  auto st = rt->wait_exited("env1", 10s);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_EQ(rec.lines_of(Stream::out),
            (std::vector<std::string>{"PORT=9123", "K_SERVICE=hello", "K_REVISION=hello-00002",
                                      "K_CONFIGURATION=hello-cfg", "EXTRA=x y", "stdin-eof", "tmpdir-ok"}));
  auto tmp = st->tmp_dir;
  EXPECT_TRUE(path_exists(tmp));
  ASSERT_TRUE(rt->remove("env1"));
  EXPECT_FALSE(path_exists(tmp));  // private temp storage goes with the instance
}

TEST(RuntimeContract, OutputLinesCapturedInOrderToSinkAndLogFile) {
  Recorded rec;
  auto rt = make_runtime(rec);
  ASSERT_TRUE(rt->create(shell("out1", "i=0; while [ $i -lt 500 ]; do echo line-$i; i=$((i+1)); done;"
                                      "echo to-stderr >&2; printf 'no-newline'")));
  ASSERT_TRUE(rt->start("out1"));
  ASSERT_TRUE(rt->wait_exited("out1", 10s));
  auto out = rec.lines_of(Stream::out);
  ASSERT_EQ(out.size(), 501u);
  for (int i = 0; i < 500; ++i) ASSERT_EQ(out[static_cast<size_t>(i)], "line-" + std::to_string(i));
  EXPECT_EQ(out.back(), "no-newline");  // a last partial line is kept
  EXPECT_EQ(rec.lines_of(Stream::err), (std::vector<std::string>{"to-stderr"}));
  auto log = slurp(rt->status("out1")->log_file);
  EXPECT_NE(log.find("line-0\nline-1\n"), std::string::npos);
  EXPECT_NE(log.find("line-499\n"), std::string::npos);
  EXPECT_NE(log.find("to-stderr\n"), std::string::npos);
}

TEST(RuntimeContract, CrashIsReportedWithExitStatusThroughEvent) {
  Recorded rec;
  auto rt = make_runtime(rec);
  ASSERT_TRUE(rt->create(shell("crash1", "echo dying; exit 42")));
  ASSERT_TRUE(rt->start("crash1"));
  ASSERT_TRUE(eventually([&] { return rec.has_event(EventKind::exited, "crash1"); }, 10s));
  auto ev = rec.last_event(EventKind::exited, "crash1");
  EXPECT_EQ(ev->status.state, InstanceState::exited);
  EXPECT_EQ(ev->status.exit_code, 42);
  EXPECT_EQ(ev->status.signal, 0);
  EXPECT_EQ(ev->status.reason, "Error");
  EXPECT_TRUE(ev->status.finished_at.has_value());
  // Output written just before the crash is delivered before the exit event.
  EXPECT_EQ(rec.lines_of(Stream::out), (std::vector<std::string>{"dying"}));
}

TEST(RuntimeContract, DeathBySignalIsReported) {
  Recorded rec;
  auto rt = make_runtime(rec);
  ASSERT_TRUE(rt->create(shell("sig1", "kill -SEGV $$")));
  ASSERT_TRUE(rt->start("sig1"));
  auto st = rt->wait_exited("sig1", 10s);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->signal, SIGSEGV);
  EXPECT_EQ(st->reason, "Signaled");
}

TEST(RuntimeContract, LifecycleStatesAndEvents) {
  Recorded rec;
  auto rt = make_runtime(rec);
  ASSERT_TRUE(rt->create(shell("life1", "exec sleep 30")));
  EXPECT_EQ(rt->status("life1")->state, InstanceState::created);
  EXPECT_FALSE(rt->create(shell("life1", "true")));  // ids are unique
  ASSERT_TRUE(rt->start("life1"));
  auto st = rt->status("life1");
  EXPECT_EQ(st->state, InstanceState::running);
  EXPECT_GT(st->pid, 0);
  EXPECT_EQ(::getpgid(st->pid), st->pid);  // own process group
  EXPECT_FALSE(rt->start("life1"));
  EXPECT_EQ(rt->list().size(), 1u);
  ASSERT_TRUE(rt->remove("life1"));
  EXPECT_FALSE(rt->status("life1"));
  EXPECT_TRUE(rt->list().empty());
  EXPECT_TRUE(rec.has_event(EventKind::created, "life1"));
  EXPECT_TRUE(rec.has_event(EventKind::started, "life1"));
  EXPECT_TRUE(rec.has_event(EventKind::exited, "life1"));
  EXPECT_TRUE(rec.has_event(EventKind::removed, "life1"));
}

TEST(RuntimeContract, BadCommandFailsStartWithTheReason) {
  Recorded rec;
  auto rt = make_runtime(rec);
  auto spec = shell("bad1", "");
  spec.command = {"/nonexistent/app"};
  ASSERT_TRUE(rt->create(spec));
  auto started = rt->start("bad1");
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().find("No such file or directory"), std::string::npos) << started.error();
  spec.id = "bad2";
  spec.command = {"no-such-command-anywhere"};
  ASSERT_TRUE(rt->create(spec));
  started = rt->start("bad2");
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().find("not found"), std::string::npos) << started.error();
  EXPECT_EQ(rt->status("bad2")->state, InstanceState::created);
}

TEST(RuntimeContract, UnknownHandlerIsAnErrorNamingIt) {
  Recorded rec;
  auto rt = make_runtime(rec);
  auto spec = shell("h1", "true");
  spec.handler = "kata";
  auto created = rt->create(spec);
  ASSERT_FALSE(created);
  EXPECT_NE(created.error().find("'kata'"), std::string::npos) << created.error();
  EXPECT_TRUE(rt->check_handler("process"));
  EXPECT_FALSE(rt->create(shell("../x", "true")));
}

}  // namespace
}  // namespace sluice::runtime::test
