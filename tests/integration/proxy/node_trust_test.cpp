// Per-node mode's trust boundary (app/node/mode.cpp, app/node/control.h, app/node/pod_identity.h): the node,
// never the pod, says who a pod is; a pod's proxy holds nothing its pod lacked and is charged to the pod;
// only root changes the agent. Hostile peers are the test's own processes: non-root users with and without
// DAC override, a pod naming another, connections that never join, a stub running as root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/node/node_socket.h"
#include "node_harness.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
namespace node = sluice::app::node;

std::string slurp(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether pid is listed in a cgroup's cgroup.procs.
bool in_cgroup(const fs::path& dir, long pid) {
  std::istringstream procs(slurp(dir / "cgroup.procs"));
  for (long p; procs >> p;)
    if (p == pid) return true;
  return false;
}

// A python client on the control socket run as `user` (setpriv), with `caps` kept (ambient) if any: prints
// the agent's reply, or the connect error's name.
std::vector<std::string> control_client(const std::string& socket, const std::string& caps) {
  std::vector<std::string> argv = {"setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"};
  if (!caps.empty()) argv.insert(argv.end(), {"--inh-caps", caps, "--ambient-caps", caps});
  argv.insert(argv.end(), {"/usr/bin/python3", "-c",
                           "import socket, sys\n"
                           "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
                           "try:\n"
                           "    s.connect(sys.argv[1])\n"
                           "except OSError as e:\n"
                           "    print(type(e).__name__); sys.exit(0)\n"
                           "s.send(b'handover -\\n')\n"
                           "print(s.recv(4096).decode().strip())\n",
                           socket});
  return argv;
}

// The control socket is root's alone: a user other than root cannot reach it, and one that can (it holds
// CAP_DAC_OVERRIDE) is refused by its credentials; either way the agent keeps serving and keeps its socket.
// A `handover` sent on a pod's socket is no join and is refused there.
TEST_F(NodeAgent, OnlyRootCommandsTheAgentAndAHandoverFromAnyoneElseIsRefusedWhileJoinsGoOn) {
  auto agent = start_agent();
  struct stat dir {}, socket {};
  ASSERT_EQ(::stat(fs::path(control_).parent_path().c_str(), &dir), 0);
  EXPECT_EQ(dir.st_mode & 0777, 0700u);
  EXPECT_EQ(dir.st_uid, 0u);
  ASSERT_EQ(::stat(control_.c_str(), &socket), 0);
  EXPECT_EQ(socket.st_mode & 0777, 0600u);

  auto r = run_command(control_client(control_, ""), 20s);
  EXPECT_EQ(r.out, "PermissionError\n") << r.err;
  r = run_command(control_client(control_, "+dac_override,+dac_read_search"), 20s);
  EXPECT_EQ(r.out, "refused only root may command the agent\n") << r.err;
  EXPECT_TRUE(agent->wait_for_line("control connection refused", 10s)) << agent->stdout_text();
  EXPECT_NE(agent->stdout_text().find("\"peer_uid\":65534"), std::string::npos) << agent->stdout_text();

  // On a pod's socket a handover is no join.
  const int conn = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_EQ(node::unix_connect(conn, publish(env_.at("SERVING_POD"))), 0) << std::strerror(errno);
  ASSERT_TRUE(app::send_message(conn, "handover -\n"));
  auto reply = app::receive_message(conn);
  ::close(conn);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->text.rfind("refused not a join", 0), 0u) << reply->text;

  auto stub = start_stub();
  ASSERT_TRUE(stub->wait_for_line("joined the node agent", 10s)) << stub->stdout_text() << agent->stdout_text();
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
  EXPECT_EQ(agent->stdout_text().find("a new agent is taking over"), std::string::npos) << agent->stdout_text();
  EXPECT_TRUE(agent->running());
  EXPECT_TRUE(fs::exists(control_));
}

// A join is accepted only on its own pod's socket, naming that pod, from that pod's cgroup, and never from
// root; the control socket is no pod's, and an unpublished pod has no socket. The agent serves on.
TEST_F(NodeAgent, AJoinNamingAnotherPodOrFromOutsideThePodOrAsRootIsRefused) {
  auto agent = start_agent();
  auto env_a = env_, env_b = env_;
  env_a["SERVING_POD"] = "pod-a";
  env_b["SERVING_POD"] = "pod-b";
  const auto socket_a = publish("pod-a");
  publish("pod-b");
  const int netns = ::open(pod_->path().c_str(), O_RDONLY | O_CLOEXEC);
  const int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  const std::vector<int> fds = {netns, STDOUT_FILENO, STDERR_FILENO, root};

  // On pod A's socket, from pod A's cgroup, naming pod B.
  auto j = join_as("pod-a", env_b, fds);
  EXPECT_EQ(j->reply, "refused the join names pod default/pod-b (SERVING_NAMESPACE, SERVING_POD), but this "
                      "socket is pod default/pod-a's\n");
  // On pod A's socket, naming pod A, from pod B's cgroup (a process of another pod that reached A's socket).
  j = join_as("pod-b", env_a, fds, kPodUser, socket_a);
  EXPECT_NE(j->reply.find("is not in pod " + uid_of("pod-a") + "'s cgroup"), std::string::npos) << j->reply;
  // As root, in pod A's cgroup.
  j = join_as("pod-a", env_a, fds, 0);
  EXPECT_NE(j->reply.find("the stub runs as root (uid 0)"), std::string::npos) << j->reply;
  // The control socket is no pod's (and only root reaches it at all).
  {
    const int conn = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ASSERT_EQ(node::unix_connect(conn, control_), 0) << std::strerror(errno);
    std::vector<std::string> lines;
    for (const auto& [k, v] : env_a) lines.push_back(k + "=" + v);
    ASSERT_TRUE(app::send_message(conn, node::join_text(lines), fds));
    auto reply = app::receive_message(conn);
    ::close(conn);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->text, "refused unknown command \"join\"\n");
  }
  // An unpublished pod has no socket to join on.
  EXPECT_EQ(node_command({"unpublish", volume_of("pod-b"), target_of("pod-b").string()}).exit_code, 0);
  EXPECT_FALSE(fs::exists(target_of("pod-b")));
  ::close(netns);
  ::close(root);
  EXPECT_EQ(agent->stdout_text().find("pod joined"), std::string::npos) << agent->stdout_text();

  // A real stub of pod A, run as root: refused with the reason, and it says so.
  auto root_stub = start_stub_in(*pod_, env_a, 0);
  EXPECT_EQ(exit_status(*root_stub, 20s), "exited 1");
  EXPECT_TRUE(eventually([&] { return root_stub->stdout_text().find("runs as root") != std::string::npos; }, 5s))
      << root_stub->stdout_text();
  // Then as the pod's user: served.
  auto stub = start_stub_in(*pod_, env_a);
  ASSERT_TRUE(stub->wait_for_line("joined the node agent", 10s)) << stub->stdout_text() << agent->stdout_text();
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
}

// A pod's proxy holds nothing its pod lacked: the stub's user, no capability in any set, no_new_privs, and
// the stub's own cgroups; one worker, as the pod asked for none.
TEST_F(NodeAgent, APodsProxyRunsAsItsStubInItsCgroupsWithNoCapabilityAndOneWorker) {
  auto agent = start_agent();
  auto stub = start_stub();
  ASSERT_TRUE(agent->wait_for_line("pod joined", 10s)) << agent->stdout_text() << stub->stdout_text();
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
  const long proxy = proxy_pid(*agent);
  const std::string u = std::to_string(kPodUser);
  EXPECT_EQ(status_field(proxy, "Uid:"), u + "\t" + u + "\t" + u + "\t" + u);
  EXPECT_EQ(status_field(proxy, "Gid:"), u + "\t" + u + "\t" + u + "\t" + u);
  for (const char* set : {"CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"})
    EXPECT_EQ(status_field(proxy, set), "0000000000000000") << set;
  EXPECT_EQ(status_field(proxy, "NoNewPrivs:"), "1");
  EXPECT_EQ(status_field(proxy, "Groups:"), "");
  // Every cgroup of the stub's, in every hierarchy.
  EXPECT_EQ(slurp("/proc/" + std::to_string(proxy) + "/cgroup"), slurp("/proc/" + std::to_string(stub->pid()) + "/cgroup"));
  for (const auto& dir : cgroups_.at(env_.at("SERVING_POD"))->dirs()) EXPECT_TRUE(in_cgroup(dir, proxy)) << dir;
  EXPECT_TRUE(eventually([&] { return stub->stdout_text().find("\"workers\":1") != std::string::npos; }, 5s))
      << stub->stdout_text();
}

// A pod's proxy is charged to its pod: in the cgroup the kubelet made for the stub, a CPU limit there
// throttles the proxy, and the agent is not in it.
TEST_F(NodeAgent, APodsCpuLimitThrottlesItsProxyAndNotTheAgent) {
  SLUICE_NEED("cgroup1-cfs-quota");
  auto agent = start_agent();
  auto env = env_;
  env["SERVING_POD"] = "metered";
  PodCgroup cgroup(uid_of("metered"), 20);  // 200m
  auto stub = start_stub_in(*pod_, env, kPodUser, &cgroup);
  ASSERT_TRUE(agent->wait_for_line("pod joined", 10s)) << agent->stdout_text() << stub->stdout_text();
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
  const long proxy = proxy_pid(*agent);
  ASSERT_TRUE(cgroup.cpu_dir());
  const auto leaf = *cgroup.cpu_dir() / "queue-proxy";
  EXPECT_TRUE(in_cgroup(leaf, proxy));
  EXPECT_FALSE(in_cgroup(leaf, agent->pid()));
  const auto throttled = [&] {
    std::istringstream stat(slurp(*cgroup.cpu_dir() / "cpu.stat"));
    std::string key;
    for (long value; stat >> key >> value;)
      if (key == "nr_throttled") return value;
    return -1L;
  };
  const long before = throttled();
  ASSERT_GE(before, 0);
  // 3 s of load from 8 connections: far more than 200m of one CPU.
  auto load = pod_->run({"h2load", "--h1", "-D", "3", "-c", "8", "-t", "1", "http://127.0.0.1:8012/"});
  EXPECT_NE(load.out.find("succeeded"), std::string::npos) << load.out << load.err;
  EXPECT_GT(throttled(), before) << "the pod's cgroup was never throttled under load";
  EXPECT_TRUE(serves());
}

// 1,000 connections to one pod's socket that never send a join hold up no other pod: another pod's stub is
// joined within a second; the agent closes the silent ones at the join timeout and the first pod's own stub
// is then served too.
TEST_F(NodeAgent, AThousandSilentConnectionsDoNotHoldUpAnotherPodsJoin) {
  auto agent = start_agent({{"SLUICE_NODE_JOIN_TIMEOUT_MS", "2000"}});
  auto env_a = env_, env_b = env_;
  env_a["SERVING_POD"] = "flooded";
  env_b["SERVING_POD"] = "quiet";
  const auto flooded_socket = publish("flooded");
  publish("quiet");
  std::vector<int> silent;
  for (int i = 0; i < 1000; ++i) {
    const int c = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (node::unix_connect(c, flooded_socket) == 0) silent.push_back(c);
    else ::close(c);
  }
  EXPECT_GT(silent.size(), 4u) << "the flood never reached the agent";

  Pod other;
  Process other_app(ProcessOptions{.argv = other.exec({DEMO_APP_BIN}), .env = {{"PORT", "8080"}}});
  const auto started = std::chrono::steady_clock::now();
  auto quiet = start_stub_in(other, env_b);
  ASSERT_TRUE(quiet->wait_for_line("joined the node agent", 1s))
      << "no join within a second: " << quiet->stdout_text() << agent->stdout_text();
  RecordProperty("join_ms", static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::steady_clock::now() - started).count()));
  EXPECT_TRUE(eventually([&] { return serves_in(other); }, 10s)) << agent->stdout_text();

  // The silent ones are closed by the agent: at once past the cap, at the join timeout within it.
  EXPECT_TRUE(agent->wait_for_line("sent no join", 10s)) << agent->stdout_text();
  EXPECT_TRUE(eventually([&] {
    for (int c : silent) {
      char byte;
      if (::recv(c, &byte, 1, MSG_DONTWAIT) != 0) return false;  // 0: closed by the agent
    }
    return true;
  }, 10s)) << "a silent connection is still open in the agent";
  for (int c : silent) ::close(c);
  auto flooded = start_stub_in(*pod_, env_a);
  ASSERT_TRUE(flooded->wait_for_line("joined the node agent", 10s)) << flooded->stdout_text() << agent->stdout_text();
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
}

// The kubelet unpublishes a pod's volume: the pod's socket and its directory go, and its proxy if the stub
// did not end it (the stub is told), leaving the agent nothing of the pod.
TEST_F(NodeAgent, UnpublishingAPodsVolumeEndsItsProxyAndLeavesNothing) {
  auto agent = start_agent();
  const long zygote = zygote_of(agent->pid());
  auto stub = start_stub();
  ASSERT_TRUE(agent->wait_for_line("pod joined", 10s)) << agent->stdout_text() << stub->stdout_text();
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
  const long proxy = proxy_pid(*agent);
  const auto name = env_.at("SERVING_POD");
  const auto r = node_command({"unpublish", volume_of(name), target_of(name).string()});
  EXPECT_EQ(r.out, "unpublished\n") << r.err;
  EXPECT_FALSE(fs::exists(target_of(name)));
  EXPECT_EQ(exit_status(*stub, 10s), "exited 1");
  EXPECT_TRUE(eventually([&] { return stub->stdout_text().find("unpublished") != std::string::npos; }, 5s))
      << stub->stdout_text();
  EXPECT_TRUE(eventually([&] { return ::kill(static_cast<pid_t>(proxy), 0) != 0; }, 10s));
  EXPECT_TRUE(eventually([&] { return children(agent->pid()) == std::vector<long>{zygote}; }, 10s));
  EXPECT_FALSE(listening());
  // Unpublishing again is no error (the kubelet retries).
  EXPECT_EQ(node_command({"unpublish", volume_of(name), target_of(name).string()}).exit_code, 0);
}

// An update, as the DaemonSet makes it: the newer generation's agent takes every pod over, turns ready once it
// holds them (`sluice node ready`, its readiness probe), and the old agent exits by itself. The old pod's
// container, restarted, finds the newer agent and idles unready instead of taking the pods back.
TEST_F(NodeAgent, AnUpdateGoesToTheNewerAgentWhichTurnsReadyAndNeverBackToTheOlder) {
  const auto ready_file = [&](const std::string& name) { return (dir_ / (name + ".ready")).string(); };
  const auto ready = [&](const std::string& name) {
    return run_command({"env", "SLUICE_NODE_READY_FILE=" + ready_file(name), SLUICE_BIN, "node", "ready"}).exit_code == 0;
  };
  auto old_agent = start_agent({{"SLUICE_NODE_GENERATION", "3"}, {"SLUICE_NODE_READY_FILE", ready_file("old")}});
  EXPECT_TRUE(eventually([&] { return ready("old"); }, 10s)) << old_agent->stdout_text();
  auto stub = start_stub();
  ASSERT_TRUE(stub->wait_for_line("joined the node agent", 10s)) << stub->stdout_text() << old_agent->stdout_text();
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s));

  auto new_agent = start_agent({{"SLUICE_NODE_GENERATION", "4"}, {"SLUICE_NODE_READY_FILE", ready_file("new")}});
  EXPECT_TRUE(new_agent->wait_for_line("pod taken over", 10s)) << new_agent->stdout_text() << old_agent->stdout_text();
  EXPECT_TRUE(eventually([&] { return ready("new"); }, 10s)) << new_agent->stdout_text();
  EXPECT_EQ(exit_status(*old_agent, 20s), "exited 0") << old_agent->stdout_text();
  EXPECT_FALSE(ready("old")) << "an agent that stopped is not ready";
  EXPECT_TRUE(serves());

  // The old pod's container again, restarted by its kubelet: generation 3 gets no pod from generation 4.
  Process restarted(ProcessOptions{.argv = {SLUICE_BIN, "node"},
                                   .env = {{"SLUICE_NODE_CONTROL_SOCKET", control_}, {"SLUICE_NODE_GENERATION", "3"},
                                           {"SLUICE_NODE_READY_FILE", ready_file("old")}}});
  ASSERT_TRUE(restarted.wait_for_line("a newer agent serves this node", 10s)) << restarted.stdout_text() << restarted.stderr_text();
  EXPECT_TRUE(new_agent->wait_for_line("handover refused", 10s)) << new_agent->stdout_text();
  EXPECT_NE(new_agent->stdout_text().find("generation 3 is older than this agent's 4"), std::string::npos);
  EXPECT_FALSE(ready("old"));
  EXPECT_TRUE(ready("new"));
  EXPECT_TRUE(serves());
  EXPECT_EQ(stub->stdout_text().find("joined the node agent"), stub->stdout_text().rfind("joined the node agent"))
      << "the stub joined again: " << stub->stdout_text();
  restarted.signal(SIGTERM);
  EXPECT_EQ(exit_status(restarted, 10s), "exited 0");
}

// A pod's stub killed and restarted at once (its container restarted by the kubelet) joins again, though its
// new join may come before the agent has ended the old connection's proxy: one join a pod at a time, the
// new one waiting for the old to end rather than being refused.
TEST_F(NodeAgent, AStubRestartedAtOnceJoinsAgain) {
  auto agent = start_agent();
  for (int round = 0; round < 5; ++round) {
    auto stub = start_stub();
    ASSERT_TRUE(stub->wait_for_line("joined the node agent", 10s))
        << "round " << round << ": " << stub->stdout_text() << agent->stdout_text();
    EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
    ASSERT_EQ(::kill(stub->pid(), SIGKILL), 0);
  }
  EXPECT_EQ(agent->stdout_text().find("joined already"), std::string::npos) << agent->stdout_text();
}

}  // namespace
}  // namespace sluice::test
