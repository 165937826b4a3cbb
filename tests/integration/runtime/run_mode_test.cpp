// `sluice run` as a black box: lifecycle events as JSON lines, exit status, SIGTERM drain, idle throttling.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/capability.h"
#include "tests/support/eventually.h"
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

// `sluice help MODE` is the mode's own help, as `sluice MODE --help`; an unknown mode is named.
TEST(RunMode, HelpWithAModeIsThatModesHelp) {
  for (const std::string mode : {"gateway", "run", "node", "sidecar"}) {
    const auto help = sluice::test::run_command({SLUICE_BINARY, "help", mode}, 20s);
    const auto own = sluice::test::run_command({SLUICE_BINARY, mode, "--help"}, 20s);
    EXPECT_EQ(help.exit_code, 0) << mode << ": " << help.err;
    EXPECT_EQ(help.out, own.out) << mode;
    EXPECT_NE(help.out.find("sluice " + mode), std::string::npos) << mode << ": " << help.out;
  }
  const auto top = sluice::test::run_command({SLUICE_BINARY, "help"}, 20s);
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("usage: sluice <mode>"), std::string::npos) << top.out;
  const auto unknown = sluice::test::run_command({SLUICE_BINARY, "help", "nope"}, 20s);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown mode 'nope'"), std::string::npos) << unknown.err;
}

TEST(RunMode, PrintsLifecycleAndOutputAndExitsWithTheAppsCode) {
  auto log_dir = std::filesystem::temp_directory_path() / ("sluice-run-logs-" + std::to_string(::getpid()));
  auto p = run({"--name", "r1", "--log-dir", log_dir.string(), "--", "/bin/sh", "-c",
                "echo hello-from-app; echo oops >&2; exit 3"});
  auto status = p.wait_exit(20s);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 3);
  p.join_output();
  auto out = p.stdout_text();
  // The per-instance log file outlives the instance; it holds both streams.
  std::ifstream log(log_dir / "r1.log");
  std::stringstream log_text;
  log_text << log.rdbuf();
  // Both streams, each line whole (their relative order is the pipes', not the app's).
  EXPECT_NE(log_text.str().find("hello-from-app\n"), std::string::npos) << log_text.str();
  EXPECT_NE(log_text.str().find("oops\n"), std::string::npos) << log_text.str();
  EXPECT_EQ(log_text.str().size(), std::string("hello-from-app\noops\n").size());
  EXPECT_NE(out.find("\"log_file\":\"" + (log_dir / "r1.log").string() + "\""), std::string::npos) << out;
  std::filesystem::remove_all(log_dir);
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

TEST(RunMode, SigtermIgnoredByTheAppIsKilledAtGrace) {
  auto p = run({"--grace", "0.3", "--", "/bin/sh", "-c", "trap '' TERM; echo app-up; while :; do sleep 0.05; done"});
  ASSERT_TRUE(p.wait_for_line("app-up", 20s));
  auto began = std::chrono::steady_clock::now();
  p.signal(SIGTERM);
  auto status = p.wait_exit(10s);
  auto took = std::chrono::steady_clock::now() - began;
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 128 + SIGKILL);  // the app's fate, as a shell reports it
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 5s);
  p.join_output();
  auto out = p.stdout_text();
  EXPECT_NE(out.find("\"event\":\"drain\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"grace_ms\":300"), std::string::npos) << out;
  EXPECT_NE(out.find("\"event\":\"killing\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"signal\":9"), std::string::npos) << out;
}

// Lines of `p` so far that contain `needle`.
size_t count_lines(const Process& p, const std::string& needle) {
  size_t n = 0;
  for (const auto& l : p.lines()) n += l.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

// A request sent on a fresh loopback connection; the response is read later.
class PendingRequest {
 public:
  explicit PendingRequest(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    // The kernel completes the handshake even for a frozen app (the listen backlog).
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    std::string req = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    sent_ = connected_ && ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }
  ~PendingRequest() { ::close(fd_); }
  bool sent() const { return sent_; }
  // Whether response bytes arrive within `timeout`.
  bool answered_within(std::chrono::milliseconds timeout) {
    pollfd pfd{fd_, POLLIN, 0};
    return ::poll(&pfd, 1, static_cast<int>(timeout.count())) == 1;
  }
  std::string read_some() {
    char buf[256];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }

 private:
  int fd_;
  bool connected_ = false;
  bool sent_ = false;
};

TEST(RunMode, ThrottleIdleFreezesOnceReadyAndSignalsThawAndFreeze) {
  int port = free_port();
  // The demo app listens on PORT when given no --port: the contract variable is what it gets.
  auto p = run({"--throttle-idle", "--port", std::to_string(port), "--grace", "5", "--", DEMO_APP_BIN});
  ASSERT_TRUE(p.wait_for_line("\"event\":\"ready\"", 30s)) << p.stdout_text();
  ASSERT_TRUE(p.wait_for_line("\"event\":\"frozen\"", 10s)) << p.stdout_text();
  PendingRequest req(port);
  ASSERT_TRUE(req.sent());
  // Frozen means not answering; a bounded look, since "never" cannot be observed.
  EXPECT_FALSE(req.answered_within(300ms)) << "a frozen instance answered";
  p.signal(SIGUSR1);
  ASSERT_TRUE(p.wait_for_line("\"event\":\"thawed\"", 10s)) << p.stdout_text();
  ASSERT_TRUE(req.answered_within(5s)) << "no answer after thaw";
  EXPECT_EQ(req.read_some().rfind("HTTP/1.1 200", 0), 0u);
  p.signal(SIGUSR2);
  EXPECT_TRUE(sluice::test::eventually([&] { return count_lines(p, "\"event\":\"frozen\"") == 2; }, 10s))
      << p.stdout_text();
  p.signal(SIGTERM);  // a frozen instance is thawed before it is told to stop
  auto status = p.wait_exit(15s);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 0);  // the demo app exits 0 on SIGTERM: it did get to handle it
  p.join_output();
  auto out = p.stdout_text();
  EXPECT_NE(out.find("\"event\":\"exited\""), std::string::npos) << out;
  EXPECT_EQ(out.find("\"event\":\"killing\""), std::string::npos) << out;
}

TEST(RunMode, HandlerFlagRunsTheAppUnderRunc) {
  SLUICE_NEED("runc");  // root, /bin/busybox, and a runc that runs a trivial bundle
  const std::filesystem::path busybox = "/bin/busybox";
  auto rootfs = std::filesystem::temp_directory_path() / ("sluice-run-rootfs-" + std::to_string(::getpid()));
  std::filesystem::create_directories(rootfs / "bin");
  std::filesystem::copy_file(busybox, rootfs / "bin/busybox", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::create_symlink("busybox", rootfs / "bin/sh");
  auto p = run({"--handler", "runc", "--rootfs", rootfs.string(), "--name", "oci-run", "--", "/bin/sh", "-c",
                "echo inside-$K_SERVICE; exit 4"});
  auto status = p.wait_exit(60s);
  p.join_output();
  std::filesystem::remove_all(rootfs);
  ASSERT_TRUE(status);
  EXPECT_EQ(WEXITSTATUS(*status), 4) << p.stdout_text() << p.stderr_text();
  auto out = p.stdout_text();
  EXPECT_NE(out.find("\"handler\":\"runc\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"line\":\"inside-oci-run\""), std::string::npos) << out;
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
