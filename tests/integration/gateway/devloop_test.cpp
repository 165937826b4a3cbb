// The gateway's dev loop end to end: revisions on a config edit, a watched-file edit and a build, with
// a load loop running through each roll-over (0 failed requests); a bad edit and a failing revision
// keep the serving one; SIGHUP; --check's list of errors; Retry-After; per-service request timeouts;
// the JSON stream; the binary's usage; Ctrl-C on scripts/dev.sh run, and what it installs; /tmp/sluice-<pid> cleanup.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <thread>

#include "tests/integration/gateway/gateway_harness.h"
#include "tests/support/capability.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("sluice-devloop-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string path(const std::string& name = "") const { return name.empty() ? path_.string() : (path_ / name).string(); }
  // Written to a new file then renamed over the old one, as editors do.
  void write(const std::string& name, const std::string& text) const {
    auto tmp = path_ / ("." + name + ".tmp");
    std::ofstream(tmp) << text;
    fs::rename(tmp, path_ / name);
  }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string web_yaml(const std::string& extra, const std::string& value = "one") {
  return std::string("services:\n  web:\n    command: ") + DEMO_APP_BIN + "\n    env: {V: " + value + "}\n" + extra;
}

// A port nobody listens on now (the script takes fixed ports).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string revision_of(Gateway& gw) { return curl({gw.url("/env/K_REVISION")}).out; }

// h2load through the gateway for a bounded count (each request takes ≥ 15 ms at the app: ≥ 3.75 s), while
// `change` happens; every request must succeed. running() says whether h2load is still sending: a test
// checks it when its change took effect, so that the change really happened under load.
struct LoadDuring {
  explicit LoadDuring(Gateway& gw) : gw_(gw) {
    thread_ = std::thread([this] {
      result = run_command({"h2load", "--h1", "-n1000", "-c4", gw_.url("/delay/15")}, 90s);
      done_ = true;
    });
    started = eventually([&] {
      try {
        return gw_.number("requests_total") > 20;
      } catch (const std::exception& e) {  // seen once: "object too large" from a status read under load
        ADD_FAILURE() << "status read failed: " << e.what();
        return false;
      }
    }, 20s);
  }
  ~LoadDuring() {
    if (thread_.joinable()) thread_.join();
  }
  bool running() const { return !done_; }
  void finish() {
    thread_.join();
    EXPECT_EQ(h2load_count(result.out, "succeeded"), 1000) << result.out;
    EXPECT_EQ(h2load_count(result.out, "failed"), 0) << result.out;
    EXPECT_EQ(h2load_count(result.out, "2xx"), 1000) << result.out;
  }
  Gateway& gw_;
  bool started = false;
  CommandResult result;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(GatewayDevLoop, AConfigEditMakesARevisionAndTrafficMovesWithoutAFailedRequest) {
  TempDir dir;
  dir.write("sluice.yaml", web_yaml(""));
  Gateway gw({"--config", dir.path("sluice.yaml")});
  EXPECT_EQ(revision_of(gw), "web-00001\n");
  LoadDuring load(gw);
  ASSERT_TRUE(load.started);
  dir.write("sluice.yaml", web_yaml("", "two"));
  auto line = gw.process->wait_for_line("\"event\":\"revision.serving\"", 20s);
  ASSERT_TRUE(line) << gw.process->stdout_text();
  EXPECT_NE(line->find("web-00002"), std::string::npos) << *line;
  EXPECT_TRUE(load.running()) << "the new revision took over only after the load had ended";
  load.finish();
  EXPECT_EQ(revision_of(gw), "web-00002\n");
  EXPECT_EQ(curl({gw.url("/env/V")}).out, "two\n");
  // The old revision drained: its instances are gone.
  EXPECT_TRUE(eventually([&] {
    auto service = gw.service();  // named: a range-for over a temporary's member would dangle
    for (auto& i : service["instances"].as_array())
      if (i.as_object()["revision"].as_string() != "web-00002") return false;
    return true;
  }, 20s)) << json::serialize(gw.status());
}

TEST(GatewayDevLoop, AWatchedFileEditMakesARevisionUnderLoad) {
  TempDir dir;
  dir.write("src.txt", "v1");
  dir.write("sluice.yaml", web_yaml("    watch: ['*.txt']\n"));
  Gateway gw({"--config", dir.path("sluice.yaml")});
  LoadDuring load(gw);
  ASSERT_TRUE(load.started);
  dir.write("src.txt", "v2");
  auto line = gw.process->wait_for_line("\"event\":\"revision.serving\"", 20s);
  ASSERT_TRUE(line) << gw.process->stdout_text();
  EXPECT_NE(line->find("changed: src.txt"), std::string::npos) << *line;
  EXPECT_TRUE(load.running()) << "the new revision took over only after the load had ended";
  load.finish();
  EXPECT_EQ(revision_of(gw), "web-00002\n");
}

TEST(GatewayDevLoop, ABurstOfEditsMakesOneRevision) {
  TempDir dir;
  dir.write("sluice.yaml", web_yaml("    watch: ['src/**/*.txt']\n"));
  fs::create_directories(dir.path("src/a"));
  Gateway gw({"--config", dir.path("sluice.yaml")});
  for (int i = 0; i < 5; ++i) std::ofstream(dir.path("src/a/f" + std::to_string(i) + ".txt")) << "x";
  ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"revision.serving\"", 20s)) << gw.process->stdout_text();
  // Quiet for several debounce periods: no second revision follows.
  EXPECT_FALSE(gw.process->wait_for_line("web-00003", 1500ms));
  EXPECT_EQ(revision_of(gw), "web-00002\n");
}

TEST(GatewayDevLoop, AFailedBuildKeepsTheOldRevisionServingUnderLoad) {
  TempDir dir;
  dir.write("src.txt", "ok");
  dir.write("sluice.yaml", web_yaml("    working-dir: " + dir.path() + "\n    watch: [src.txt]\n    build: grep -q ok src.txt\n"));
  Gateway gw({"--config", dir.path("sluice.yaml")});
  {
    LoadDuring load(gw);
    ASSERT_TRUE(load.started);
    dir.write("src.txt", "syntax error");
    auto failed = gw.process->wait_for_line("\"event\":\"build.failed\"", 20s);
    ASSERT_TRUE(failed) << gw.process->stdout_text();
    EXPECT_NE(failed->find("exited with code 1"), std::string::npos) << *failed;
    EXPECT_TRUE(load.running()) << "the build failed only after the load had ended";
    load.finish();
  }
  EXPECT_EQ(revision_of(gw), "web-00001\n");
  dir.write("src.txt", "ok again");
  ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"build.done\"", 20s)) << gw.process->stdout_text();
  ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"revision.serving\"", 20s)) << gw.process->stdout_text();
  EXPECT_EQ(revision_of(gw), "web-00002\n");
}

TEST(GatewayDevLoop, ARevisionThatCannotStartIsReportedAndTheOldOneKeepsServingUnderLoad) {
  TempDir dir;
  dir.write("sluice.yaml", web_yaml(""));
  Gateway gw({"--config", dir.path("sluice.yaml")});
  {
    LoadDuring load(gw);
    ASSERT_TRUE(load.started);
    dir.write("sluice.yaml", "services:\n  web:\n    command: echo 'no database' >&2; exit 3\n");
    auto failed = gw.process->wait_for_line("\"event\":\"revision.failed\"", 20s);
    ASSERT_TRUE(failed) << gw.process->stdout_text();
    EXPECT_NE(failed->find("exited with code 3"), std::string::npos) << *failed;
    EXPECT_NE(failed->find("\"serving\":\"web-00001\""), std::string::npos) << *failed;
    EXPECT_TRUE(load.running()) << "the revision failed only after the load had ended";
    load.finish();
  }
  EXPECT_EQ(revision_of(gw), "web-00001\n");
  auto revisions = gw.service()["revisions"].as_array();
  ASSERT_EQ(revisions.size(), 2u) << json::serialize(revisions);
  EXPECT_EQ(revisions[1].as_object()["phase"].as_string(), "failed");
}

TEST(GatewayDevLoop, ABadEditIsReportedWithFileAndLineAndTheRunningConfigStays) {
  TempDir dir;
  dir.write("sluice.yaml", web_yaml(""));
  Gateway gw({"--config", dir.path("sluice.yaml")});
  dir.write("sluice.yaml", web_yaml("    max-scale: lots\n    buffer-size: -2\n"));
  auto bad = gw.process->wait_for_line("\"event\":\"config.invalid\"", 20s);
  ASSERT_TRUE(bad) << gw.process->stdout_text();
  EXPECT_NE(bad->find(dir.path("sluice.yaml") + ":5: services.web: max-scale"), std::string::npos) << *bad;
  EXPECT_NE(bad->find(dir.path("sluice.yaml") + ":6: services.web.buffer-size"), std::string::npos) << *bad;
  EXPECT_EQ(revision_of(gw), "web-00001\n");
  EXPECT_EQ(curl({gw.url("/env/V")}).out, "one\n");
}

TEST(GatewayDevLoop, SighupReloadsInsteadOfStopping) {
  TempDir dir;
  dir.write("sluice.yaml", web_yaml(""));
  // Written in place (no rename) and then SIGHUP: either way one new revision.
  Gateway gw({"--config", dir.path("sluice.yaml")});
  gw.process->signal(SIGHUP);
  ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"config.reloaded\"", 10s)) << gw.process->stdout_text();
  EXPECT_TRUE(gw.process->running());
  EXPECT_EQ(revision_of(gw), "web-00001\n");  // nothing changed: no revision
  dir.write("sluice.yaml", web_yaml("", "three"));
  ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"revision.serving\"", 20s)) << gw.process->stdout_text();
  EXPECT_EQ(curl({gw.url("/env/V")}).out, "three\n");
}

TEST(GatewayDevLoop, CheckReportsEveryErrorWithFileAndLine) {
  TempDir dir;
  dir.write("bad.yaml", "listen: nope\nautoscaler:\n  stable-window: forever\nservices:\n  web:\n"
                        "    command: ./server\n    max-scale: lots\n    buffer-size: -1\n    request-timeout: 30s\n"
                        "    memory: 256Mi\n  api:\n    port: 99999\n");
  auto r = run_command({SLUICE_BIN, "gateway", "--check", dir.path("bad.yaml")});
  EXPECT_EQ(r.exit_code, 2);
  const auto f = dir.path("bad.yaml");
  for (const auto& want : {f + ":1: listen", f + ":3: autoscaler: stable-window", f + ":7: services.web: max-scale",
                           f + ":8: services.web.buffer-size", f + ":12: services.api.port", std::string("services.api.command: is required")})
    EXPECT_NE(r.err.find(want), std::string::npos) << want << " in:\n" << r.err;
  EXPECT_NE(r.err.find("6 errors"), std::string::npos) << r.err;
}

TEST(GatewayDevLoop, AServiceThatFailedToStartAnswers503WithRetryAfter) {
  Gateway gw({"--", "/bin/sh", "-c", "exit 4"});
  ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"instance.failed\"", 10s));
  auto r = curl({"-s", "-D", "-", gw.url("/")});
  EXPECT_NE(r.out.find("HTTP/1.1 503"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Retry-After: "), std::string::npos) << r.out;
}

TEST(GatewayDevLoop, APerServiceRequestTimeoutEndsSlowRequests) {
  TempDir dir;
  dir.write("sluice.yaml", web_yaml("    request-timeout: 1s\n    memory: 64Mi\n"));
  Gateway gw({"--config", dir.path("sluice.yaml")});
  EXPECT_EQ(curl({gw.url("/delay/10")}).out, "delayed 10\n");
  auto t0 = std::chrono::steady_clock::now();
  auto r = curl({"-s", "-o", "/dev/null", "-w", "%{http_code}", gw.url("/delay/30000")});
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.out, "504") << r.out;
  EXPECT_LT(took, 20s);  // the 1 s timeout's answer, not the app's at 30 s
}

TEST(GatewayDevLoop, PipedOutputIsOneJsonShapeWithPlainNumbers) {
  Gateway gw({"--status", "json", "--", DEMO_APP_BIN});
  ASSERT_TRUE(gw.process->wait_for_line("\"message\":\"status\"", 10s));
  ASSERT_EQ(curl({gw.url("/")}).exit_code, 0);
  auto admin = body_of(http_get(gw.admin_port, "/.sluice/status"));
  EXPECT_EQ(admin.find("E0"), std::string::npos) << admin;
  EXPECT_NE(admin.find("\"rps\":"), std::string::npos) << admin;
  for (const auto& l : gw.process->lines()) {
    if (l.find("sluice-demo-app") != std::string::npos) continue;  // the app's own text, inside "line"
    ASSERT_FALSE(l.empty());
    EXPECT_EQ(l.front(), '{') << l;
    EXPECT_NO_THROW((void)json::parse(l)) << l;
    EXPECT_NE(l.find("\"severity\":"), std::string::npos) << l;
    EXPECT_EQ(l.find("E0,"), std::string::npos) << l;
    EXPECT_EQ(l.find("──"), std::string::npos) << l;
  }
  // The request's own line, in the same shape, with its revision, instance and whether it waited for a start.
  auto request = gw.process->wait_for_line("\"message\":\"request\"", 5s);
  ASSERT_TRUE(request) << gw.process->stdout_text();
  auto r = json::parse(*request).as_object();
  EXPECT_EQ(r.at("method"), "GET");
  EXPECT_EQ(r.at("path"), "/");
  EXPECT_EQ(r.at("status"), 200);
  EXPECT_TRUE(r.at("duration_ms").is_number()) << *request;
  EXPECT_EQ(r.at("service"), "app");
  EXPECT_EQ(r.at("revision"), "app-00001");
  EXPECT_EQ(r.at("cold_start"), true) << "the first request waited for an instance to start: " << *request;
  // And counted by the status it ended with.
  auto metrics = body_of(http_get(gw.admin_port, "/metrics"));
  EXPECT_NE(metrics.find("sluice_requests_total{code=\"200\",revision=\"app-00001\",service=\"app\"} 1"),
            std::string::npos)
      << metrics;
}

TEST(GatewayDevLoop, TheBinaryHasVersionHelpAndBareUsage) {
  auto v = run_command({SLUICE_BIN, "--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("sluice ", 0), 0u) << v.out;
  auto h = run_command({SLUICE_BIN, "help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("usage: sluice <mode>"), std::string::npos) << h.out;
  auto bare = run_command({SLUICE_BIN}, 10s);
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_NE(bare.err.find("usage: sluice <mode>"), std::string::npos) << bare.err;
  auto g = run_command({SLUICE_BIN, "gateway", "--help"});
  EXPECT_NE(g.out.find("127.0.0.1:8079"), std::string::npos) << g.out;
}

TEST(GatewayDevLoop, TheStateDirectoryGoesWithTheGatewayOnEveryExit) {
  pid_t killed_pid = 0;
  {
    Gateway gw({"--", DEMO_APP_BIN});
    killed_pid = gw.process->pid();
    ASSERT_TRUE(fs::exists("/tmp/sluice-" + std::to_string(killed_pid)));
    gw.process->signal(SIGKILL);
    ASSERT_TRUE(gw.process->wait_exit(10s));
  }
  ASSERT_TRUE(fs::exists("/tmp/sluice-" + std::to_string(killed_pid)));  // nobody could remove it
  pid_t drained_pid = 0;
  {
    Gateway gw({"--", DEMO_APP_BIN});
    drained_pid = gw.process->pid();
    // The next gateway sweeps what the killed one left.
    EXPECT_FALSE(fs::exists("/tmp/sluice-" + std::to_string(killed_pid)));
    gw.process->signal(SIGTERM);
    ASSERT_TRUE(gw.process->wait_exit(20s));
  }
  EXPECT_FALSE(fs::exists("/tmp/sluice-" + std::to_string(drained_pid)));
}

TEST(GatewayDevLoop, CtrlCOnDevShRunDrainsAndExitsZero) {
  // As a terminal does: SIGINT to the whole foreground process group (the script and the gateway).
  Process script(ProcessOptions{
      .argv = {"setsid", "bash", SOURCE_DIR "/scripts/dev.sh", "run"},
      .env = {{"SLUICE_SKIP_BUILD", "1"}, {"SLUICE_BIN", SLUICE_BIN}, {"DEMO_APP_BIN", DEMO_APP_BIN},
              {"PORT", std::to_string(free_port())}, {"ADMIN_PORT", std::to_string(free_port())}},
      .merge_stderr = true});
  ASSERT_TRUE(script.wait_for_line("\"listener\":\"gateway\"", 20s)) << script.stdout_text();
  auto line = script.wait_for_line("gateway starting", 1s);
  ASSERT_TRUE(line);
  auto dir_at = line->find("/tmp/sluice-");
  ASSERT_NE(dir_at, std::string::npos) << *line;
  auto dir = line->substr(dir_at, line->find("/logs", dir_at) - dir_at);
  ASSERT_TRUE(fs::exists(dir)) << dir;
  pid_t group = ::getpgid(script.pid());
  ASSERT_GT(group, 0);
  ASSERT_EQ(::kill(-group, SIGINT), 0);
  auto code = script.wait_exit(30s);
  ASSERT_TRUE(code) << script.stdout_text();
  EXPECT_EQ(*code, 0) << script.stdout_text();
  auto out = script.stdout_text();
  EXPECT_EQ(out.find("unbound variable"), std::string::npos) << out;
  EXPECT_EQ(out.find("killing every instance"), std::string::npos) << out;
  EXPECT_NE(out.find("\"message\":\"stopped\""), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir)) << dir;
}

// `scripts/dev.sh run` installs what building and running need (the build's packages and curl), not the
// test toolchain. apt-get and dpkg-query are stubs on PATH, so that the machine's packages are never
// touched: every package is reported missing, and apt-get writes down what it is asked to install.
TEST(GatewayDevLoop, DevShRunInstallsOnlyWhatBuildingAndRunningNeed) {
  SLUICE_NEED("root");  // the script runs apt-get itself as root, through sudo otherwise
  TempDir stubs;
  const auto asked = stubs.path("asked");
  stubs.write("dpkg-query", "#!/bin/sh\nexit 1\n");
  stubs.write("apt-get", "#!/bin/sh\n[ \"$1\" = install ] && echo \" $* \" >> '" + asked + "'\nexit 0\n");
  for (const char* tool : {"dpkg-query", "apt-get"})
    fs::permissions(stubs.path(tool), fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  auto r = run_command({"env", "PATH=" + stubs.path() + ":" + std::getenv("PATH"), "bash", SOURCE_DIR "/scripts/dev.sh",
                        "deps", "run"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream in(asked);
  const std::string installed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* needed : {"g++", "cmake", "ninja-build", "libboost1.81-dev", "libssl-dev", "libnghttp2-dev",
                             "libyaml-cpp-dev", "libprotobuf-dev", "curl"})
    EXPECT_NE(installed.find(std::string(" ") + needed + " "), std::string::npos) << needed << " in:" << installed;
  for (const char* test_only : {"chromium", "clang", "libgtest-dev", "nginx-light", "wrk", "nghttp2-client", "tmux",
                                "python3-grpcio", "libgrpc++-dev", "podman", "runc"})
    EXPECT_EQ(installed.find(std::string(" ") + test_only + " "), std::string::npos) << test_only << " in:" << installed;
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// On a terminal (a pty from script(1)) the table is redrawn in place: cursor up over the old table and
// erase, then the new one — never a second copy below the first. Every log line is plain text there, the
// very first included: the start-up sweep's, for a dead gateway's state directory the test leaves in the
// gateway's own TMPDIR.
TEST(GatewayDevLoop, OnATerminalTheTableIsRedrawnInPlace) {
  int port = free_port(), admin = free_port();
  TempDir tmp;
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const auto leftover = fs::path(tmp.path()) / ("sluice-" + std::to_string(dead));
  fs::create_directories(leftover / "logs");
  const std::string command = std::string(SLUICE_BIN) + " gateway --listen 127.0.0.1:" + std::to_string(port) +
                              " --admin 127.0.0.1:" + std::to_string(admin) + " -- " + DEMO_APP_BIN;
  Process term(ProcessOptions{.argv = {"script", "-qfec", command, "/dev/null"},
                              .env = {{"COLUMNS", "120"}, {"TMPDIR", tmp.path()}}});
  ASSERT_TRUE(term.wait_for_line("listening", 20s)) << term.stdout_text();
  ASSERT_TRUE(eventually([&] { return term.stdout_text().find("── sluice gateway ·") != std::string::npos; }, 10s));
  ASSERT_EQ(curl({"http://127.0.0.1:" + std::to_string(port) + "/"}).exit_code, 0);
  // A redraw: "\r ESC[<n>A ESC[J" erases the table the terminal shows, then the new one follows.
  EXPECT_TRUE(eventually([&] {
    auto out = term.stdout_text();
    return std::regex_search(out, std::regex("\r\x1b\\[[0-9]+A\x1b\\[J"));
  }, 10s)) << term.stdout_text();
  // Log lines are plain text on a terminal, not JSON.
  EXPECT_NE(term.stdout_text().find("removed what an earlier gateway left"), std::string::npos) << term.stdout_text();
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_EQ(term.stdout_text().find("{\"severity\""), std::string::npos) << term.stdout_text();
  // The gateway's pid is in its state directory's name; it drains, and script(1) ends with it.
  std::smatch m;
  auto out = term.stdout_text();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("/sluice-([0-9]+)/logs"))) << out;
  ::kill(std::stoi(m[1].str()), SIGTERM);
  EXPECT_TRUE(term.wait_exit(30s));
}

// What a developer sees, read back from a real terminal (tmux's capture-pane): the title with the
// gateway's and the dashboard's URLs stays above the table whatever scrolls, each request gets a line
// (the first marked as a cold start), and the table never shows an instance that is gone: the
// validation instance is stopped before the first request, and the table that follows its line names
// only the instance the requests started.
TEST(GatewayDevLoop, ATerminalShowsWhereItServesALineARequestAndNoInstanceThatIsGone) {
  SLUICE_NEED("tmux");
  const int port = free_port(), admin = free_port();
  const std::string server = "sluice-test-" + std::to_string(::getpid());
  auto tmux = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"tmux", "-f", "/dev/null", "-L", server});
    return run_command(args, 10s);
  };
  // More than one word: tmux runs the command itself, no shell, so the pane's pid is the gateway's.
  ASSERT_EQ(tmux({"new-session", "-d", "-x", "160", "-y", "50", SLUICE_BIN, "gateway", "--listen",
                  "127.0.0.1:" + std::to_string(port), "--admin", "127.0.0.1:" + std::to_string(admin), "--",
                  DEMO_APP_BIN})
                .exit_code,
            0);
  struct Server {
    std::function<CommandResult(std::vector<std::string>)> tmux;
    ~Server() { tmux({"kill-server"}); }
  } cleanup{tmux};
  const auto pane_pid = tmux({"list-panes", "-F", "#{pane_pid}"}).out;
  ASSERT_FALSE(pane_pid.empty());
  const pid_t gateway = std::stoi(pane_pid);
  auto screen = [&] { return tmux({"capture-pane", "-p"}).out; };
  const std::string title = "── sluice gateway · http://127.0.0.1:" + std::to_string(port) +
                            "/ · dashboard http://127.0.0.1:" + std::to_string(admin) + "/";
  ASSERT_TRUE(eventually([&] { return screen().find("instance stopped service=app instance=app-1") != std::string::npos; },
                         20s))
      << screen();
  for (int i = 0; i < 2; ++i) ASSERT_EQ(curl({"http://127.0.0.1:" + std::to_string(port) + "/"}).exit_code, 0);
  const std::regex cold("GET / 200 [0-9.]+ ms  app-00001 app-2 \\(cold start\\)\n");
  const std::regex warm("GET / 200 [0-9.]+ ms  app-00001 app-2\n");
  std::string seen;
  EXPECT_TRUE(eventually([&] {
    seen = screen();
    const auto title_at = seen.find(title);
    if (title_at == std::string::npos) return false;
    const auto table = seen.substr(title_at);
    return std::regex_search(seen, cold) && std::regex_search(seen, warm) &&
           table.find("app-2") != std::string::npos && table.find("app-1") == std::string::npos;
  }, 10s)) << seen;
  // Below the last log line: nothing but the title and the table (one service, one instance).
  const auto title_at = seen.find(title);
  ASSERT_NE(title_at, std::string::npos) << seen;
  EXPECT_EQ(seen.find("GET / ", title_at), std::string::npos) << "a request line below the title: " << seen;
  ::kill(gateway, SIGTERM);
  EXPECT_TRUE(eventually([&] { return ::kill(gateway, 0) != 0; }, 30s)) << "the gateway did not stop";
}

}  // namespace
}  // namespace sluice::test
