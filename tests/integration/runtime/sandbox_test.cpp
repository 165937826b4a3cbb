// PodSandboxes with the process handler: own network namespace and address, pod cgroup with limits,
// OOMKilled, Exec, users, and nothing left behind after each test. Skipped with the reason where the
// machine cannot make network namespaces with veth (capability "netns"; tests/support/capability.h).
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>
#include <fstream>
#include <sstream>

#include "runtime/cgroup_fs.h"
#include "tests/integration/runtime/runtime_harness.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::runtime::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sluice::test::eventually;

// GET / over a fresh connection; the body, or "" when nothing answers.
std::string http_get(const std::string& address, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::string req = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  auto body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

// The interface index of host link `name`, or -1 when there is none.
int link_index(const std::string& name) {
  std::ifstream in("/sys/class/net/" + name + "/ifindex");
  int index = -1;
  in >> index;
  return in ? index : -1;
}

// Any process or open fd on this machine still holding the namespace `inode`?
bool netns_in_use(unsigned long long inode) {
  const std::string want = "net:[" + std::to_string(inode) + "]";
  std::error_code ec;
  for (const auto& p : fs::directory_iterator("/proc", ec)) {
    auto name = p.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code e2;
    if (fs::read_symlink(p.path() / "ns/net", e2).string() == want) return true;
    for (const auto& fd : fs::directory_iterator(p.path() / "fd", e2)) {
      std::error_code e3;
      if (fs::read_symlink(fd.path(), e3).string() == want) return true;
    }
  }
  return false;
}

bool lease_of_sandbox_exists(const std::string& id) {
  std::error_code ec;
  for (const auto& f : fs::directory_iterator("/run/sluice/sandboxes", ec)) {
    std::ifstream in(f.path());
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find("owner " + std::to_string(::getpid()) + " ") == 0 &&
        text.str().find("\nsandbox " + id + "\n") != std::string::npos)
      return true;
  }
  return false;
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_NEED("netns");
    rt_ = make_runtime(rec_);
  }
  void TearDown() override {
    rt_.reset();
    // Checked after every test: no link, namespace, cgroup dir or slot file of its sandboxes remains.
    for (std::size_t i = 0; i < made_.size(); ++i) {
      const auto& st = made_[i];
      // A test running alongside may already have a link of the same slot's name: ours is gone when no
      // link has that name or it is another link (interface indexes are not reused at once).
      EXPECT_NE(link_index(st.host_link), made_links_[i]) << st.host_link;
      EXPECT_TRUE(eventually([&] { return !netns_in_use(st.netns_inode); }, 5s)) << "netns of " << st.id;
      for (const auto& dir : st.cgroup_dirs) EXPECT_FALSE(path_exists(dir.string())) << dir;
      EXPECT_FALSE(lease_of_sandbox_exists(st.id)) << st.id;
    }
  }
  PodSandboxStatus run(const std::string& id, PodLimits limits = {}) {
    auto ok = rt_->run_pod_sandbox(PodSandboxConfig{id, limits});
    EXPECT_TRUE(ok) << ok.error();
    auto st = rt_->pod_sandbox_status(id);
    EXPECT_TRUE(st);
    if (st) {
      remember(*st);
    }
    return st.value_or(PodSandboxStatus{});
  }
  // Checked at teardown: what the sandbox made must be gone.
  void remember(const PodSandboxStatus& st) {
    made_.push_back(st);
    made_links_.push_back(link_index(st.host_link));
  }
  InstanceSpec in_pod(const std::string& id, const std::string& pod, const std::string& script) {
    auto s = shell(id, script);
    s.sandbox = pod;
    return s;
  }
  Recorded rec_;
  std::unique_ptr<Runtime> rt_;
  std::vector<PodSandboxStatus> made_;
  std::vector<int> made_links_;  // the host links' interface indexes
};

TEST_F(SandboxTest, TwoPodsBothListenOn8080AtTheirOwnAddresses) {
  auto a = run("pod-a");
  auto b = run("pod-b");
  ASSERT_EQ(a.state, SandboxState::ready);
  EXPECT_NE(a.address, b.address);
  EXPECT_NE(a.netns_inode, b.netns_inode);
  for (const auto& [pod, name] : {std::pair{a, "app-a"}, std::pair{b, "app-b"}}) {
    auto s = in_pod(name, pod.id, "mkdir -p $TMPDIR/www && echo $K_SERVICE > $TMPDIR/www/index.html && "
                                  "exec busybox httpd -f -p 0.0.0.0:$PORT -h $TMPDIR/www");
    s.service = name;
    ASSERT_TRUE(rt_->create(s));
    auto started = rt_->start(name);
    ASSERT_TRUE(started) << started.error();
  }
  EXPECT_TRUE(eventually([&] { return http_get(a.address, 8080) == "app-a\n"; }, 10s));
  EXPECT_TRUE(eventually([&] { return http_get(b.address, 8080) == "app-b\n"; }, 10s));
  auto listed = rt_->list_pod_sandbox();
  EXPECT_EQ(listed.size(), 2U);
  EXPECT_EQ(rt_->pod_sandbox_status("pod-a")->containers, std::vector<std::string>{"app-a"});
  ASSERT_TRUE(rt_->remove_pod_sandbox("pod-a"));  // force-removes app-a, which still runs
  EXPECT_FALSE(rt_->status("app-a"));
  EXPECT_FALSE(rt_->pod_sandbox_status("pod-a"));
  ASSERT_TRUE(rt_->remove_pod_sandbox("pod-b"));
}

TEST_F(SandboxTest, PodSeesOnlyItsOwnLoopbackAndLink) {
  auto pod = run("pod-net");
  ASSERT_TRUE(rt_->create(in_pod("net1", "pod-net", "exec sleep 30")));
  ASSERT_TRUE(rt_->start("net1"));
  auto r = rt_->exec("net1", {"/bin/sh", "-c", "cat /proc/net/dev; cat /proc/net/route"}, 5s);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_NE(r.output.find("eth0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lo:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(pod.host_link), std::string::npos) << r.output;
  // No default route (destination 00000000) inside: nothing is routed off the machine.
  EXPECT_EQ(r.output.find("eth0\t00000000"), std::string::npos) << r.output;
  EXPECT_EQ(cgroup::read_file("/proc/sys/net/ipv4/conf/" + pod.host_link + "/forwarding").value_or(""), "0\n");
}

TEST_F(SandboxTest, ExecReturnsOutputAndStatus) {
  run("pod-exec");
  auto s = in_pod("ex1", "pod-exec", "exec sleep 30");
  s.env["GREETING"] = "hello";
  ASSERT_TRUE(rt_->create(s));
  ASSERT_TRUE(rt_->start("ex1"));
  auto r = rt_->exec("ex1", {"/bin/sh", "-c", "echo $GREETING from $PORT; echo oops >&2; exit 3"}, 5s);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(r.output, "hello from 8080\noops\n");
  auto slow = rt_->exec("ex1", {"/bin/sleep", "10"}, 200ms);
  EXPECT_TRUE(slow.timed_out);
  EXPECT_EQ(slow.signal, SIGKILL);
  // Exec joins the container's namespaces: the pod's IPC namespace, not the host's.
  auto ns = rt_->exec("ex1", {"/bin/sh", "-c", "readlink /proc/self/ns/ipc"}, 5s);
  auto own = fs::read_symlink("/proc/self/ns/ipc").string();
  auto app = fs::read_symlink("/proc/" + std::to_string(rt_->status("ex1")->pid) + "/ns/ipc").string();
  EXPECT_EQ(ns.output, app + "\n");
  EXPECT_NE(app, own);
  auto none = rt_->exec("nope", {"/bin/true"}, 1s);
  EXPECT_EQ(none.error, "no instance 'nope'");
  // A frozen container is thawed for the command (it could never run otherwise).
  ASSERT_TRUE(rt_->freeze("ex1"));
  auto thawed = rt_->exec("ex1", {"/bin/true"}, 5s);
  EXPECT_TRUE(thawed.succeeded()) << thawed.error;
  EXPECT_FALSE(rt_->status("ex1")->frozen);
}

TEST_F(SandboxTest, MemoryHogIsReportedOOMKilled) {
  auto pod = run("pod-oom", PodLimits{64ULL << 20, std::nullopt});
  ASSERT_FALSE(pod.memory_limit_file.empty());
  EXPECT_EQ(cgroup::read_file(pod.memory_limit_file).value_or(""), std::to_string(64ULL << 20) + "\n");
  ASSERT_TRUE(rt_->create(in_pod("hog", "pod-oom", "exec /usr/bin/python3 -c \"x = b'a' * (512 << 20)\"")));
  ASSERT_TRUE(rt_->start("hog"));
  auto st = rt_->wait_exited("hog", 30s);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->signal, SIGKILL);
  EXPECT_EQ(st->reason, "OOMKilled");
  EXPECT_EQ(st->memory_limit_bytes, std::optional<std::uint64_t>(64ULL << 20));
  EXPECT_GE(rt_->pod_sandbox_status("pod-oom")->oom_kills, 1U);
  // The app sees the limit in its own cgroup: v1 memory.limit_in_bytes, or v2 memory.max.
  ASSERT_TRUE(rt_->create(in_pod("reader", "pod-oom", "exec sleep 30")));
  ASSERT_TRUE(rt_->start("reader"));
  auto seen = rt_->exec("reader", {"/bin/sh", "-c",
                                   "p=$(grep -E '^[0-9]+:memory:' /proc/self/cgroup | cut -d: -f3); "
                                   "if [ -n \"$p\" ]; then cat /sys/fs/cgroup/memory$p/memory.limit_in_bytes; "
                                   "else p=$(grep '^0::' /proc/self/cgroup | cut -d: -f3); cat /sys/fs/cgroup$p/memory.max; fi"},
                        5s);
  EXPECT_EQ(seen.output, std::to_string(64ULL << 20) + "\n");
  ASSERT_TRUE(rt_->remove("reader"));
  // Killed otherwise, a container of the same pod is not OOMKilled.
  ASSERT_TRUE(rt_->create(in_pod("victim", "pod-oom", "exec sleep 30")));
  ASSERT_TRUE(rt_->start("victim"));
  ASSERT_TRUE(rt_->stop("victim", 0ms));
  EXPECT_EQ(rt_->status("victim")->reason, "Signaled");
}

TEST_F(SandboxTest, CpuLimitIsWrittenWhereTheKernelReadsIt) {
  auto pod = run("pod-cpu", PodLimits{std::nullopt, 250});
  ASSERT_FALSE(pod.cpu_limit_file.empty());
  auto text = cgroup::read_file(pod.cpu_limit_file).value_or("");
  EXPECT_EQ(text.substr(0, text.find_first_of(" \n")), "25000") << text;
}

TEST_F(SandboxTest, StopStopsContainersAndKeepsTheSandboxListed) {
  run("pod-stop");
  ASSERT_TRUE(rt_->create(in_pod("st1", "pod-stop", "exec sleep 30")));
  ASSERT_TRUE(rt_->start("st1"));
  ASSERT_TRUE(rt_->stop_pod_sandbox("pod-stop"));
  EXPECT_EQ(rt_->status("st1")->state, InstanceState::exited);
  auto st = rt_->pod_sandbox_status("pod-stop");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, SandboxState::not_ready);
  auto again = rt_->create(in_pod("st2", "pod-stop", "true"));
  EXPECT_FALSE(again);
  EXPECT_EQ(again.error(), "sandbox 'pod-stop' is not ready");
  ASSERT_TRUE(rt_->remove_pod_sandbox("pod-stop"));
}

TEST_F(SandboxTest, ErrorsNameWhatIsWrong) {
  auto unknown = rt_->run_pod_sandbox(PodSandboxConfig{"p1", {}}, "kata");
  EXPECT_EQ(unknown.error(), "unknown handler 'kata' (known: process, runc, crun)");
  EXPECT_EQ(rt_->create(in_pod("c1", "missing", "true")).error(), "no sandbox 'missing'");
  run("p2");
  EXPECT_EQ(rt_->run_pod_sandbox(PodSandboxConfig{"p2", {}}).error(), "sandbox 'p2' exists");
  EXPECT_EQ(rt_->remove_pod_sandbox("p9").error(), "no sandbox 'p9'");
  ASSERT_TRUE(rt_->remove_pod_sandbox("p2"));
}

TEST_F(SandboxTest, RunsAsTheConfiguredUserAndRefusesRootWhenBanned) {
  run("pod-user");
  auto s = in_pod("u1", "pod-user", "echo $(id -u):$(id -g); touch $TMPDIR/f && echo tmp-ok");
  s.run_as_user = 65534;
  s.run_as_group = 65534;
  s.run_as_non_root = true;
  ASSERT_TRUE(rt_->create(s));
  ASSERT_TRUE(rt_->start("u1"));
  ASSERT_TRUE(rt_->wait_exited("u1", 10s));
  EXPECT_EQ(rec_.lines_of(Stream::out), (std::vector<std::string>{"65534:65534", "tmp-ok"}));
  auto root = in_pod("u2", "pod-user", "true");
  root.run_as_non_root = true;  // and no user: the runtime's own, root here
  ASSERT_TRUE(rt_->create(root));
  auto started = rt_->start("u2");
  EXPECT_FALSE(started);
  EXPECT_NE(started.error().find("runAsNonRoot"), std::string::npos) << started.error();
  EXPECT_EQ(rt_->status("u2")->reason,
            "runAsNonRoot is set but the instance would run as root (uid 0): set run-as-user to a non-zero uid");
}

TEST_F(SandboxTest, SandboxesMadeConcurrentlyGetAddressesOfTheirOwn) {
  constexpr int kPods = 4;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kPods);
  for (int i = 0; i < kPods; ++i)
    threads.emplace_back([&, i] {
      auto id = "cc" + std::to_string(i);
      if (auto ok = rt_->run_pod_sandbox(PodSandboxConfig{id, {}}); !ok) errors[i] = ok.error();
      else if (auto c = rt_->create(in_pod(id + "-app", id, "exec sleep 30")); !c) errors[i] = c.error();
      else if (auto st = rt_->start(id + "-app"); !st) errors[i] = st.error();
      (void)rt_->list_pod_sandbox();
    });
  for (auto& t : threads) t.join();
  std::set<std::string> addresses;
  for (int i = 0; i < kPods; ++i) {
    EXPECT_EQ(errors[i], "") << i;
    auto st = rt_->pod_sandbox_status("cc" + std::to_string(i));
    ASSERT_TRUE(st);
    remember(*st);
    addresses.insert(st->address);
  }
  EXPECT_EQ(addresses.size(), static_cast<std::size_t>(kPods));
  threads.clear();
  for (int i = 0; i < kPods; ++i)
    threads.emplace_back([&, i] { EXPECT_TRUE(rt_->remove_pod_sandbox("cc" + std::to_string(i))); });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(rt_->list_pod_sandbox().empty());
}

TEST_F(SandboxTest, ALeftoverLinkWithItsSlotsNameIsReplaced) {
  const std::string peer = "sltest" + std::to_string(::getpid() % 100000);
  // The pod takes the lowest free slot; a test process running alongside may take that slot first (or
  // still hold its link while it removes its pod), so the leftover is laid again for the next free one,
  // for 10 s at most.
  PodSandboxStatus pod;
  std::string name;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    int slot = 0;
    while (path_exists("/run/sluice/sandboxes/" + std::to_string(slot))) ++slot;  // the slot it will get
    name = "sluice" + std::to_string(slot);
    if (std::system(("ip link add " + name + " type veth peer name " + peer + " 2>/dev/null").c_str()) != 0) {
      std::this_thread::sleep_for(50ms);  // that name is another pod's link for now
      continue;
    }
    pod = run("pod-left");
    if (pod.host_link == name) break;
    ASSERT_TRUE(rt_->remove_pod_sandbox("pod-left"));
    (void)std::system(("ip link del " + peer + " 2>/dev/null").c_str());
  }
  ASSERT_EQ(pod.host_link, name) << "tests alongside kept taking the predicted slot for 10 s";
  EXPECT_FALSE(path_exists("/sys/class/net/" + peer));  // the leftover pair went, the pod's link took its name
  auto ok = rt_->create(in_pod("l1", "pod-left", "exec sleep 30"));
  ASSERT_TRUE(ok);
  ASSERT_TRUE(rt_->start("l1"));
  auto r = rt_->exec("l1", {"/bin/sh", "-c", "cat /proc/net/dev"}, 5s);
  EXPECT_NE(r.output.find("eth0"), std::string::npos) << r.output;
  ASSERT_TRUE(rt_->remove_pod_sandbox("pod-left"));
}

TEST_F(SandboxTest, RuncContainerJoinsThePodNetworkAndExecRunsInside) {
  SLUICE_NEED("runc");
  auto rootfs = fs::temp_directory_path() / ("sluice-sb-rootfs-" + std::to_string(::getpid()));
  fs::create_directories(rootfs / "bin");
  fs::copy_file("/bin/busybox", rootfs / "bin/busybox", fs::copy_options::overwrite_existing);
  for (const char* applet : {"sh", "echo", "cat", "id", "httpd", "mkdir", "sleep"})
    fs::create_symlink("busybox", rootfs / "bin" / applet);
  auto ok = rt_->run_pod_sandbox(PodSandboxConfig{"pod-runc", PodLimits{48ULL << 20, std::nullopt}}, "runc");
  ASSERT_TRUE(ok) << ok.error();
  auto pod = *rt_->pod_sandbox_status("pod-runc");
  remember(pod);
  auto s = in_pod("r1", "pod-runc", "mkdir -p /tmp/www && echo from-runc > /tmp/www/index.html && "
                                    "exec httpd -f -p 0.0.0.0:$PORT -h /tmp/www");
  s.handler = "runc";
  s.rootfs = rootfs;
  s.run_as_user = 1000;
  s.run_as_group = 1000;
  ASSERT_TRUE(rt_->create(s));
  auto started = rt_->start("r1");
  ASSERT_TRUE(started) << started.error();
  EXPECT_TRUE(eventually([&] { return http_get(pod.address, 8080) == "from-runc\n"; }, 10s));
  auto r = rt_->exec("r1", {"/bin/sh", "-c", "id -u; cat /proc/net/dev | grep -c eth0; grep ' /tmp ' /proc/mounts | grep -o 'size=[0-9a-z]*'"}, 10s);
  EXPECT_TRUE(r.succeeded()) << r.error << r.output;
  // Its user, its pod's eth0, and /tmp as a tmpfs the size of the memory limit (48 MiB).
  EXPECT_EQ(r.output, "1000\n1\nsize=49152k\n") << r.output;
  ASSERT_TRUE(rt_->remove_pod_sandbox("pod-runc"));
  std::error_code ec;
  fs::remove_all(rootfs, ec);
}

}  // namespace
}  // namespace sluice::runtime::test
