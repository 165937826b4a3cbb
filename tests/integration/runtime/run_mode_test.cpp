// `sluice run` as a black box: lifecycle events as JSON lines, exit status, SIGTERM drain, idle throttling.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/process.h"

namespace {

using namespace std::chrono_literals;
using sluice::test::Process;
using sluice::test::ProcessOptions;

Process run(std::vector<std::string> args) {
  ProcessOptions o;
  o.argv = {SLUICE_BINARY, "run"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  return Process(std::move(o));
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(RunMode, PrintsLifecycleAndOutputAndExitsWithTheAppsCode) {
  auto p = run({"--name", "r1", "--", "/bin/sh", "-c", "echo hello-from-app; echo oops >&2; exit 3"});
  auto status = p.wait_exit(20s);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 3);
  p.join_output();
  auto out = p.stdout_text();
  EXPECT_NE(out.find("\"event\":\"runtime\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"throttle\":"), std::string::npos);
  EXPECT_NE(out.find("\"event\":\"started\""), std::string::npos);
  EXPECT_NE(out.find("\"stream\":\"stdout\",\"line\":\"hello-from-app\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"stream\":\"stderr\",\"line\":\"oops\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"event\":\"exited\""), std::string::npos);
  EXPECT_NE(out.find("\"exit_code\":3"), std::string::npos);
  EXPECT_NE(out.find("\"event\":\"removed\""), std::string::npos);
  // Lifecycle order: started before the output, exited after it.
  EXPECT_LT(out.find("\"event\":\"started\""), out.find("hello-from-app"));
  EXPECT_LT(out.find("hello-from-app"), out.find("\"event\":\"exited\""));
}

TEST(RunMode, SigtermDrainsTheInstanceWithinGrace) {
  auto p = run({"--grace", "5", "--", "/bin/sh", "-c",
                "trap 'echo bye; exit 0' TERM; echo app-up; while :; do sleep 0.05; done"});
  ASSERT_TRUE(p.wait_for_line("app-up", 20s));
  p.signal(SIGTERM);
  auto status = p.wait_exit(10s);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 0);
  p.join_output();
  auto out = p.stdout_text();
  EXPECT_NE(out.find("\"event\":\"drain\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"line\":\"bye\""), std::string::npos) << out;
  EXPECT_EQ(out.find("\"event\":\"killing\""), std::string::npos);
}

TEST(RunMode, ThrottleIdleFreezesOnceReadyAndSignalsThaw) {
  int port = free_port();
  auto p = run({"--throttle-idle", "--port", std::to_string(port), "--grace", "5", "--", "/usr/bin/python3",
                "-m", "http.server", "--bind", "127.0.0.1", std::to_string(port)});
  ASSERT_TRUE(p.wait_for_line("\"event\":\"ready\"", 30s)) << p.stdout_text();
  ASSERT_TRUE(p.wait_for_line("\"event\":\"frozen\"", 10s)) << p.stdout_text();
  p.signal(SIGUSR1);
  ASSERT_TRUE(p.wait_for_line("\"event\":\"thawed\"", 10s)) << p.stdout_text();
  p.signal(SIGUSR2);
  ASSERT_TRUE(p.wait_for_line("\"event\":\"frozen\"", 10s));
  p.signal(SIGTERM);  // a frozen instance is thawed before it is told to stop
  auto status = p.wait_exit(15s);
  ASSERT_TRUE(status);
  p.join_output();
  EXPECT_NE(p.stdout_text().find("\"event\":\"exited\""), std::string::npos) << p.stdout_text();
}

TEST(RunMode, UnknownHandlerIsAConfigurationError) {
  auto p = run({"--handler", "kata", "--", "/bin/true"});
  auto status = p.wait_exit(20s);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 2);
  p.join_output();
  EXPECT_NE(p.stderr_text().find("'kata'"), std::string::npos) << p.stderr_text();
}

TEST(RunMode, MissingCommandAndBadFlagsAreConfigurationErrors) {
  for (auto args : std::vector<std::vector<std::string>>{{"--grace", "x", "--", "/bin/true"},
                                                         {"--bogus", "--", "/bin/true"},
                                                         {"--port", "70000", "--", "/bin/true"},
                                                         {}}) {
    auto p = run(args);
    auto status = p.wait_exit(20s);
    ASSERT_TRUE(status);
    EXPECT_EQ(WEXITSTATUS(*status), 2);
  }
}

TEST(RunMode, CommandThatCannotStartFails) {
  auto p = run({"--", "/nonexistent/app"});
  auto status = p.wait_exit(20s);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  p.join_output();
  EXPECT_NE(p.stdout_text().find("No such file or directory"), std::string::npos) << p.stdout_text();
}

}  // namespace
