// `sluice gateway` with `sandbox: on`: every instance in a pod of its own. Two instances of one service on
// 0.0.0.0:8080, a memory hog OOMKilled and replaced, preStop before SIGTERM, postStart gating readiness,
// and no link, cgroup or slot file left behind, even after kill -9 of the gateway and a restart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <boost/json.hpp>

#include "tests/integration/proxy/harness.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

const fs::path kLeases = "/run/sluice/sandboxes";

// A Python app on 0.0.0.0:$PORT: GET /hog allocates 512 MiB; on SIGTERM it says whether the preStop
// hook's file exists yet.
const char* kApp = R"PY(
import http.server, os, signal, sys
def term(*_):
    done = os.path.exists(os.path.join(os.environ['TMPDIR'], 'prestop-done'))
    print('TERM after preStop' if done else 'TERM before preStop', flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == '/hog':
            x = b'a' * (512 << 20)
        body = os.environ['TMPDIR'].encode() + b'\n'
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(('0.0.0.0', int(os.environ['PORT'])), H).serve_forever()
)PY";

struct Config {
  explicit Config(const std::string& services) {
    path = fs::temp_directory_path() / ("sluice-sb-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".yaml");
    app = path.string() + ".py";
    std::ofstream(app) << kApp;
    std::ofstream(path) << "sandbox: on\nservices:\n" << services;
  }
  ~Config() {
    fs::remove(path);
    fs::remove(app);
  }
  std::string command() const { return "[/usr/bin/python3, " + app + "]"; }
  static inline int n = 0;
  fs::path path;
  std::string app;
};

struct SandboxedGateway {
  explicit SandboxedGateway(const Config& cfg) {
    process = std::make_unique<Process>(ProcessOptions{
        .argv = {SLUICE_BIN, "gateway", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--status", "none",
                 "--workers", "2", "--config", cfg.path.string()},
        .merge_stderr = true});
    auto line = process->wait_for_line("\"listener\":\"gateway\"");
    if (!line) throw std::runtime_error("gateway did not start: " + process->stdout_text());
    port = static_cast<int>(json_int_field(*line, "port"));
    for (const auto& l : process->lines())
      if (l.find("\"listener\":\"admin\"") != std::string::npos) admin_port = static_cast<int>(json_int_field(l, "port"));
  }
  ~SandboxedGateway() {
    if (process->running()) {
      process->signal(SIGTERM);
      process->wait_exit(20s);
    }
    // Under the sanitizer presets, a report from the gateway fails the test that provoked it.
    auto out = process->stdout_text();
    auto at = out.find("Sanitizer");
    EXPECT_EQ(at, std::string::npos) << out.substr(at == std::string::npos ? 0 : at - std::min<std::size_t>(at, 200), 6000);
  }
  json::array instances() {
    auto all = json::parse(body_of(http_get(admin_port, "/.sluice/status"))).as_object();
    return all["services"].as_array()[0].as_object()["instances"].as_array();
  }
  std::size_t ready() {
    std::size_t n = 0;
    for (auto& i : instances()) n += i.as_object()["state"].as_string() == "ready";
    return n;
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port) + path; }
  std::unique_ptr<Process> process;
  int port = 0, admin_port = 0;
};

// The slot files, each as its lines: those owned by `pid`, or (`others`) those of every other owner.
std::vector<std::vector<std::string>> leases_of(int pid, bool others = false) {
  std::vector<std::vector<std::string>> out;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(kLeases, ec)) {
    std::ifstream in(f.path());
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    if (lines.empty()) continue;
    if ((lines[0].rfind("owner " + std::to_string(pid) + " ", 0) == 0) != others) out.push_back(lines);
  }
  return out;
}

// What `owner`'s leases said were made: links and cgroup dirs; true when none of them exists any more.
// Links are named after their slot, and other gateways (tests run in parallel) take a freed slot at once:
// a link that another owner's lease names now is that owner's.
bool all_undone(int owner, const std::vector<std::vector<std::string>>& leases, std::string& left) {
  std::set<std::string> taken;
  for (const auto& lines : leases_of(owner, /*others=*/true))
    for (const auto& l : lines) taken.insert(l);
  for (const auto& lines : leases)
    for (const auto& l : lines) {
      auto sp = l.find(' ');
      auto kind = l.substr(0, sp), value = l.substr(sp + 1);
      if (kind == "link" && fs::exists("/sys/class/net/" + value) && !taken.contains(l)) left = l;
      else if (kind == "cgroup" && fs::exists(value)) left = l;
      else continue;
      return false;
    }
  return true;
}

class SandboxGateway : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_NEED("netns");  // pods: root, network namespaces and veth
  }
  // After each test: the gateway is gone, and so is everything its pods made.
  void expect_clean(int gateway_pid, const std::vector<std::vector<std::string>>& seen) {
    std::string left;
    EXPECT_TRUE(eventually([&] { return all_undone(gateway_pid, seen, left); }, 5s)) << left;
    EXPECT_TRUE(leases_of(gateway_pid).empty());
  }
};

TEST_F(SandboxGateway, TwoInstancesBothListenOn8080AndBothServeThroughTheGateway) {
  Config cfg("  web:\n    command: " + std::string("[") + DEMO_APP_BIN + ", --host, 0.0.0.0]\n" +
             "    port: 8080\n    min-scale: 2\n    max-scale: 2\n    container-concurrency: 1\n");
  std::vector<std::vector<std::string>> seen;
  int pid;
  {
    SandboxedGateway gw(cfg);
    pid = gw.process->pid();
    ASSERT_TRUE(eventually([&] { return gw.ready() == 2; }, 20s)) << gw.process->stdout_text();
    std::set<std::string> addresses;
    for (auto& i : gw.instances()) {
      EXPECT_EQ(i.as_object()["port"].to_number<int>(), 8080);
      addresses.insert(std::string(i.as_object()["address"].as_string()));
    }
    EXPECT_EQ(addresses.size(), 2U);
    // Both are reached through the gateway: two requests at once with a concurrency of one each.
    auto r = run_command({"curl", "-s", "--parallel", "--parallel-immediate", gw.url("/delay/500"), gw.url("/delay/500")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (auto& i : gw.instances()) EXPECT_GE(i.as_object()["requests"].to_number<int>(), 1) << json::serialize(i);
    seen = leases_of(pid);
    EXPECT_EQ(seen.size(), 2U);
  }
  expect_clean(pid, seen);
}

TEST_F(SandboxGateway, AMemoryHogIsReportedOOMKilledAndReplaced) {
  Config cfg("");  // the command names the app file, known only once the config exists
  std::ofstream(cfg.path) << "sandbox: on\nservices:\n  hog:\n    command: " << cfg.command()
                          << "\n    memory: 64Mi\n    min-scale: 1\n";
  int pid;
  std::vector<std::vector<std::string>> seen;
  {
    SandboxedGateway gw(cfg);
    pid = gw.process->pid();
    ASSERT_TRUE(eventually([&] { return gw.ready() == 1; }, 20s)) << gw.process->stdout_text();
    auto first = std::string(gw.instances()[0].as_object()["id"].as_string());
    (void)curl({gw.url("/hog")});
    auto crashed = gw.process->wait_for_line("\"event\":\"instance.crashed\"", 20s);
    ASSERT_TRUE(crashed) << gw.process->stdout_text();
    EXPECT_NE(crashed->find("OOMKilled (memory limit 64 MiB)"), std::string::npos) << *crashed;
    ASSERT_TRUE(eventually([&] {
      return gw.ready() == 1 && std::string(gw.instances()[0].as_object()["id"].as_string()) != first;
    }, 30s)) << gw.process->stdout_text();
    EXPECT_NE(curl({gw.url("/")}).out.find("/tmp"), std::string::npos);
    seen = leases_of(pid);
  }
  expect_clean(pid, seen);
}

TEST_F(SandboxGateway, PreStopRunsBeforeSigtermAndPostStartGatesReadiness) {
  Config cfg("");
  std::ofstream(cfg.path) << "sandbox: on\nservices:\n  web:\n    command: " << cfg.command()
                          << "\n    min-scale: 1\n    grace-period: 10s\n"
                          << "    post-start: \"sleep 0.3; touch $TMPDIR/post-start-ran\"\n"
                          << "    pre-stop: \"sleep 0.5; touch $TMPDIR/prestop-done\"\n";
  int pid;
  std::vector<std::vector<std::string>> seen;
  {
    SandboxedGateway gw(cfg);
    pid = gw.process->pid();
    ASSERT_TRUE(eventually([&] { return gw.ready() == 1; }, 20s)) << gw.process->stdout_text();
    // Ready only after the hook: its line comes first although the app listens within milliseconds.
    // The admin API can report the instance ready before its event line has been read from the pipe.
    ASSERT_TRUE(gw.process->wait_for_line("\"event\":\"instance.ready\"", 10s)) << gw.process->stdout_text();
    std::size_t hook_at = 0, ready_at = 0, n = 0;
    for (const auto& l : gw.process->lines()) {
      ++n;
      if (l.find("\"event\":\"hook.post_start\"") != std::string::npos) hook_at = n;
      if (l.find("\"event\":\"instance.ready\"") != std::string::npos && ready_at == 0) ready_at = n;
    }
    EXPECT_GT(hook_at, 0U);
    EXPECT_GT(ready_at, hook_at);
    seen = leases_of(pid);
    gw.process->signal(SIGTERM);
    ASSERT_TRUE(gw.process->wait_exit(20s));
    auto out = gw.process->stdout_text();
    EXPECT_NE(out.find("TERM after preStop"), std::string::npos) << out;
    EXPECT_EQ(out.find("TERM before preStop"), std::string::npos) << out;
    auto hook = gw.process->wait_for_line("\"event\":\"hook.pre_stop\"", 1s);
    ASSERT_TRUE(hook);
    EXPECT_GE(json_int_field(*hook, "ms"), 500) << *hook;
  }
  expect_clean(pid, seen);
}

TEST_F(SandboxGateway, AnIdlePodIsFrozenAndTheNextRequestThawsIt) {
  Config cfg("");
  std::ofstream(cfg.path) << "sandbox: on\nfeatures: {throttling: enabled}\nservices:\n  web:\n    command: "
                          << cfg.command() << "\n    min-scale: 1\n";
  SandboxedGateway gw(cfg);
  auto frozen = [&] {
    auto list = gw.instances();
    return list.size() == 1 && list[0].as_object()["state"].as_string() == "frozen";
  };
  ASSERT_TRUE(eventually(frozen, 20s)) << gw.process->stdout_text();
  auto r = curl({gw.url("/")});
  EXPECT_NE(r.out.find("/tmp"), std::string::npos) << r.out << r.err;
  EXPECT_TRUE(eventually(frozen, 10s));  // idle again: frozen again
}

TEST_F(SandboxGateway, AFailingPostStartHookFailsTheInstanceWithTheReason) {
  Config cfg("");
  std::ofstream(cfg.path) << "sandbox: on\nservices:\n  web:\n    command: " << cfg.command()
                          << "\n    post-start: \"echo no database; exit 7\"\n";
  SandboxedGateway gw(cfg);
  auto failed = gw.process->wait_for_line("\"event\":\"instance.failed\"", 20s);
  ASSERT_TRUE(failed) << gw.process->stdout_text();
  EXPECT_NE(failed->find("postStart hook failed: exit 7: no database"), std::string::npos) << *failed;
}

TEST_F(SandboxGateway, AfterKill9ARestartedGatewayRemovesWhatTheKilledOneLeft) {
  Config cfg("");
  std::ofstream(cfg.path) << "sandbox: on\nservices:\n  web:\n    command: " << cfg.command()
                          << "\n    memory: 64Mi\n    cpu: 500m\n    min-scale: 1\n";
  std::vector<std::vector<std::string>> seen;
  int killed_pid;
  {
    SandboxedGateway gw(cfg);
    killed_pid = gw.process->pid();
    ASSERT_TRUE(eventually([&] { return gw.ready() == 1; }, 20s)) << gw.process->stdout_text();
    seen = leases_of(killed_pid);
    ASSERT_EQ(seen.size(), 1U);
    gw.process->signal(SIGKILL);
    ASSERT_TRUE(gw.process->wait_exit(10s));
  }
  // Left behind by the killed gateway: its slot file and (empty) cgroup dirs.
  EXPECT_FALSE(leases_of(killed_pid).empty());
  int restarted_pid;
  std::vector<std::vector<std::string>> seen2;
  {
    SandboxedGateway gw(cfg);
    restarted_pid = gw.process->pid();
    // Swept when its runtime started; checked once its own pod exists, which may reuse the slot's link name
    // (as may a gateway of a test running beside this one).
    EXPECT_TRUE(leases_of(killed_pid).empty());
    ASSERT_TRUE(eventually([&] { return gw.ready() == 1; }, 20s)) << gw.process->stdout_text();
    std::string left;
    EXPECT_TRUE(all_undone(killed_pid, seen, left)) << left;
    seen2 = leases_of(restarted_pid);
  }
  expect_clean(restarted_pid, seen2);
}

// Not root (the gateway run as nobody): `auto` falls back to host-network instances and says so once;
// `on` refuses to start, with the reason.
TEST(SandboxGatewayFallback, WithoutPodsAutoRunsOnTheHostNetworkAndOnRefuses) {
  SLUICE_NEED("root");  // to drop to nobody
  const std::vector<std::string> nobody = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  auto argv = nobody;
  for (const char* a : {SLUICE_BIN, "gateway", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--status",
                        "none", "--sandbox", "auto", "--no-throttle", "--", DEMO_APP_BIN})
    argv.emplace_back(a);
  {
    Process gw(ProcessOptions{.argv = argv, .merge_stderr = true});
    auto line = gw.wait_for_line("\"listener\":\"gateway\"");
    ASSERT_TRUE(line) << gw.stdout_text();
    auto port = json_int_field(*line, "port");
    EXPECT_EQ(curl({"http://127.0.0.1:" + std::to_string(port) + "/"}).out, "Hello from sluice-demo-app\n");
    std::size_t warnings = 0;
    for (const auto& l : gw.lines()) warnings += l.find("\"event\":\"sandbox.fallback\"") != std::string::npos;
    EXPECT_EQ(warnings, 1U) << gw.stdout_text();
    EXPECT_NE(gw.stdout_text().find("\"sandbox\":\"host-network\""), std::string::npos);
    gw.signal(SIGTERM);
    EXPECT_TRUE(gw.wait_exit(20s));
  }
  argv[argv.size() - 4] = "on";  // --sandbox on
  auto r = run_command(argv);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("sandbox: on, but pods cannot be made here: cannot create a network namespace"), std::string::npos)
      << r.err;
}

// Cloud Run's metadata server from inside a pod: the instance's GCE_METADATA_HOST is the host end of its
// pod's link (the one address a pod can reach), and the server knows the caller by its pod's address.
TEST_F(SandboxGateway, AnInstanceInAPodReadsTheMetadataServerAtItsLinksHostEnd) {
  const auto out = fs::temp_directory_path() / ("sluice-sb-md-" + std::to_string(::getpid()));
  fs::create_directories(out);
  const auto script = out / "ask.sh";
  const std::string ask = "curl -s -H 'Metadata-Flavor: Google' \"http://$GCE_METADATA_HOST/computeMetadata/v1/";
  std::ofstream(script) << ask << "instance/id\" > " << out.string() << "/id.tmp && mv " << out.string() << "/id.tmp "
                        << out.string() << "/id\n"
                        << ask << "instance/attributes/service\" > " << out.string() << "/service\n"
                        << ask << "instance/attributes/revision\" > " << out.string() << "/revision\n"
                        << "echo \"$GCE_METADATA_HOST\" > " << out.string() << "/host\n"
                        << "exec " << DEMO_APP_BIN << " --host 0.0.0.0 --port 8080\n";
  Config cfg("  web:\n    command: [/bin/sh, " + script.string() + "]\n    port: 8080\n    min-scale: 1\n");
  auto read = [&](const std::string& name) {
    std::ifstream in(out / name);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  int pid;
  std::vector<std::vector<std::string>> seen;
  {
    SandboxedGateway gw(cfg);
    pid = gw.process->pid();
    ASSERT_TRUE(eventually([&] { return gw.ready() == 1; }, 20s)) << gw.process->stdout_text();
    seen = leases_of(pid);
    int metadata_port = 0;
    for (const auto& l : gw.process->lines())
      if (l.find("\"listener\":\"metadata\"") != std::string::npos) metadata_port = static_cast<int>(json_int_field(l, "port"));
    ASSERT_GT(metadata_port, 0) << gw.process->stdout_text();
    ASSERT_TRUE(eventually([&] { return fs::exists(out / "host"); }, 10s)) << gw.process->stdout_text();
    EXPECT_EQ(read("id"), "web-1");
    EXPECT_EQ(read("service"), "web");
    EXPECT_EQ(read("revision"), "web-00001");
    // The pod's address is the odd end of its /31; the host's is the even one below it.
    auto pod = boost::asio::ip::make_address_v4(std::string(gw.instances()[0].as_object()["address"].as_string()));
    auto host = boost::asio::ip::make_address_v4(pod.to_uint() - 1);
    EXPECT_EQ(read("host"), host.to_string() + ":" + std::to_string(metadata_port) + "\n");
  }
  expect_clean(pid, seen);
  fs::remove_all(out);
}

}  // namespace
}  // namespace sluice::test
