// `sluice node` and its stubs (app/node/join.h): the stub, inside the pod, hands the agent on the host its
// namespace and settings through the pod's own socket (published as the kubelet publishes the pod's
// volume); the pod is then served on its own ports as by a sidecar. The stub runs as an unprivileged user in
// a cgroup named for its pod, as in a Knative pod; the agent is root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include "app/node/join.h"
#include "node_harness.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
namespace node = sluice::app::node;

// The stub's SIGTERM drains the pod and the stub exits 0 once drained; a stub killed (the pod is gone) takes
// the pod's proxy with it; the agent's SIGTERM ends it. The pod's proxy runs as the stub's user.
TEST_F(NodeAgent, APodJoinsThroughItsStubIsServedInItsNamespaceAndDrainsWhenTheStubGetsSigterm) {
  auto agent = start_agent();
  {
    auto stub = start_stub();
    ASSERT_TRUE(stub->wait_for_line("joined the node agent", 10s)) << stub->stdout_text() << agent->stdout_text();
    ASSERT_TRUE(agent->wait_for_line("pod joined", 10s)) << agent->stdout_text();
    const long pid = proxy_pid(*agent);
    std::string uid_line;
    for (std::ifstream status("/proc/" + std::to_string(pid) + "/status"); std::getline(status, uid_line);)
      if (uid_line.rfind("Uid:", 0) == 0) break;
    const std::string u = std::to_string(kPodUser);
    EXPECT_EQ(uid_line, "Uid:\t" + u + "\t" + u + "\t" + u + "\t" + u) << "the pod's proxy, pid " << pid;
    EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
    // The pod's proxy logs where queue-proxy's did: the container's (the stub's) stdout.
    EXPECT_NE(stub->stdout_text().find("\"listener\":\"proxy\""), std::string::npos) << stub->stdout_text();
    ASSERT_EQ(::kill(stub->pid(), SIGTERM), 0);
    EXPECT_EQ(exit_status(*stub, 20s), "exited 0") << stub->stdout_text() << agent->stdout_text();
    EXPECT_NE(stub->stdout_text().find("\"message\":\"drained\""), std::string::npos) << stub->stdout_text();
    EXPECT_FALSE(listening()) << "the drained pod's proxy still listens";
  }
  {
    // Joined again, then killed as a deleted pod's containers are: the agent stops that pod's proxy.
    auto stub = start_stub();
    ASSERT_TRUE(stub->wait_for_line("joined the node agent", 10s)) << stub->stdout_text() << agent->stdout_text();
    EXPECT_TRUE(eventually([&] { return listening(); }, 10s)) << agent->stdout_text();
    ASSERT_EQ(::kill(stub->pid(), SIGKILL), 0);
    EXPECT_TRUE(agent->wait_for_line("pod left", 10s)) << agent->stdout_text();
    EXPECT_TRUE(eventually([&] { return !listening(); }, 10s)) << "a killed pod's proxy still listens";
  }
  ASSERT_EQ(::kill(agent->pid(), SIGTERM), 0);
  EXPECT_EQ(exit_status(*agent, 20s), "exited 0") << agent->stdout_text();
  EXPECT_FALSE(fs::exists(control_));
}

// An agent that dies takes its pods' proxies along (nothing is left serving that no agent could drain), and
// the pod's stub joins the next agent, which serves the pod again.
TEST_F(NodeAgent, AKilledAgentLeavesNoProxyBehindAndItsPodsJoinTheNextOne) {
  auto agent = start_agent();
  auto stub = start_stub();
  ASSERT_TRUE(agent->wait_for_line("pod joined", 10s)) << agent->stdout_text() << stub->stdout_text();
  const long first = proxy_pid(*agent);
  const long zygote = zygote_of(agent->pid());
  EXPECT_GT(zygote, 0);
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
  ASSERT_EQ(::kill(agent->pid(), SIGKILL), 0);
  EXPECT_EQ(exit_status(*agent, 10s), "killed by signal 9");
  // Gone, or a zombie that whoever inherited it has yet to reap.
  auto runs = [](long pid) {
    std::string stat;
    std::getline(std::ifstream("/proc/" + std::to_string(pid) + "/stat"), stat);
    const auto state = stat.find(") ");
    return state != std::string::npos && stat[state + 2] != 'Z';
  };
  EXPECT_TRUE(eventually([&] { return !runs(first) && !listening(); }, 10s))
      << "the dead agent's proxy for the pod is still there";
  EXPECT_TRUE(eventually([&] { return !runs(zygote); }, 10s)) << "the dead agent's zygote is still there";
  EXPECT_TRUE(stub->wait_for_line("the node agent went away", 10s)) << stub->stdout_text();

  agent = start_agent();
  ASSERT_TRUE(agent->wait_for_line("pod joined", 10s)) << agent->stdout_text() << stub->stdout_text();
  EXPECT_NE(proxy_pid(*agent), first);
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text() << stub->stdout_text();
}

// Each pod's proxy is forked from the agent's zygote, not exec'ed (its libraries' relocated pages stay shared
// with every other pod's), and is the agent's own child, reaped by it. A zygote that dies costs no pod: the
// next pod's proxy is exec'ed afresh, and the pod served as any other.
TEST_F(NodeAgent, APodsProxyIsForkedFromTheZygoteAndAPodStillJoinsWithoutOne) {
  auto agent = start_agent();
  const long zygote = zygote_of(agent->pid());
  ASSERT_GT(zygote, 0) << "no zygote among the agent's children";
  auto stub = start_stub();
  ASSERT_TRUE(agent->wait_for_line("pod joined", 10s)) << agent->stdout_text() << stub->stdout_text();
  const long forked = proxy_pid(*agent);
  EXPECT_EQ(parent_of(forked), agent->pid());
  EXPECT_EQ(name_of(forked), "sluice-sidecar");
  EXPECT_NE(command_line(forked).find("node-zygote"), std::string::npos) << "exec'ed: " << command_line(forked);
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text() << stub->stdout_text();

  ASSERT_EQ(::kill(static_cast<pid_t>(zygote), SIGKILL), 0);
  Pod other;
  Process other_app(ProcessOptions{.argv = other.exec({DEMO_APP_BIN}), .env = {{"PORT", "8080"}}});
  auto other_env = env_;
  other_env["SERVING_POD"] = "other";
  auto other_stub = start_stub_in(other, other_env);
  ASSERT_TRUE(other_stub->wait_for_line("joined the node agent", 10s)) << other_stub->stdout_text() << agent->stdout_text();
  // The agent's lines can be read a moment after the stub's.
  ASSERT_TRUE(eventually([&] {
    const auto out = agent->stdout_text();
    return out.find("pod joined") != out.rfind("pod joined");
  }, 10s)) << agent->stdout_text();
  EXPECT_NE(agent->stdout_text().find("the zygote is gone"), std::string::npos) << agent->stdout_text();
  const long exec_ed = proxy_pid(*agent);
  EXPECT_EQ(parent_of(exec_ed), agent->pid());
  EXPECT_NE(command_line(exec_ed).find("sidecar"), std::string::npos) << command_line(exec_ed);
  EXPECT_TRUE(eventually([&] {
    return other.run({"curl", "-sS", "--max-time", "5", "http://127.0.0.1:8012/"}).out == "Hello from sluice-demo-app\n";
  }, 10s)) << agent->stdout_text() << other_stub->stdout_text();
  EXPECT_TRUE(serves()) << "the first pod, whose proxy the zygote forked";

  ASSERT_EQ(::kill(agent->pid(), SIGTERM), 0);
  EXPECT_EQ(exit_status(*agent, 20s), "exited 0") << agent->stdout_text();
  for (long pid : {forked, exec_ed}) EXPECT_NE(::kill(static_cast<pid_t>(pid), 0), 0) << pid << " outlived the agent";
}

// A join whose "network namespace" is no namespace: the proxy forked for it cannot enter it, the pod is
// refused with the reason, the child is reaped (no zombie, nothing but the zygote left), and the next pod
// is served as ever. The test joins as a stub would (app/node/join.h).
TEST_F(NodeAgent, AJoinWhoseNamespaceIsNoNamespaceIsRefusedWithTheReasonAndLeavesNothing) {
  auto agent = start_agent();
  const long zygote = zygote_of(agent->pid());
  ASSERT_GT(zygote, 0);
  const int not_a_namespace = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_TRUE(not_a_namespace >= 0 && root >= 0) << std::strerror(errno);
  const auto joined = join_as(env_.at("SERVING_POD"), env_, {not_a_namespace, STDOUT_FILENO, STDERR_FILENO, root});
  ::close(not_a_namespace);
  ::close(root);
  EXPECT_EQ(joined->reply, "refused set-up: Invalid argument\n") << agent->stdout_text();
  EXPECT_TRUE(eventually([&] { return children(agent->pid()) == std::vector<long>{zygote}; }, 10s))
      << "the agent's children besides its zygote: " << run_command({"pgrep", "-a", "-P", std::to_string(agent->pid())}).out;

  auto stub = start_stub();
  ASSERT_TRUE(stub->wait_for_line("joined the node agent", 10s)) << stub->stdout_text() << agent->stdout_text();
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
  EXPECT_EQ(zygote_of(agent->pid()), zygote) << "the zygote is the one the agent started";
}

// One agent, 100 pods of 10 revisions, each pod a namespace of its own with its app and its stub. Every pod is
// served on its own 127.0.0.1:8012 by a proxy with its own settings; one pod drains while the others serve
// on; one pod is deleted whole (stub, app and namespace gone at once, as when a node kills a pod) and the
// agent is left with nothing of it: no proxy, no descriptor.
TEST_F(NodeAgent, OneAgentServesAHundredPodsOfTenRevisionsAndOnePodsEndTouchesNoOther) {
  constexpr int kPods = 100, kRevisions = 10;
  auto agent = start_agent();
  const auto descriptors = [&] {
    return std::distance(fs::directory_iterator("/proc/" + std::to_string(agent->pid()) + "/fd"), fs::directory_iterator{});
  };
  const auto idle_descriptors = descriptors();
  struct Member {
    std::unique_ptr<Pod> pod;
    std::unique_ptr<Process> app, stub;
  };
  std::vector<Member> pods(kPods);
  for (int i = 0; i < kPods; ++i) {
    auto& m = pods[i];
    m.pod = std::make_unique<Pod>();
    m.app = std::make_unique<Process>(ProcessOptions{.argv = m.pod->exec({DEMO_APP_BIN}), .env = {{"PORT", "8080"}}});
    auto env = env_;
    env["SERVING_REVISION"] = "rev-" + std::to_string(i % kRevisions);
    env["SERVING_POD"] = "rev-" + std::to_string(i % kRevisions) + "-pod-" + std::to_string(i);
    m.stub = start_stub_in(*m.pod, env);
  }
  const auto serves = [&](int i) {
    return pods[i].pod->run({"curl", "-sS", "--max-time", "5", "http://127.0.0.1:8012/"}).out == "Hello from sluice-demo-app\n";
  };
  const auto listens = [&](int i) {
    return pods[i].pod->run({"ss", "-Htln", "sport = :8012"}).out.find("8012") != std::string::npos;
  };
  for (int i = 0; i < kPods; ++i) {
    ASSERT_TRUE(eventually([&] { return serves(i); }, 60s)) << "pod " << i << ": " << pods[i].stub->stdout_text();
    // The pod's own settings: its proxy logs as its revision and pod.
    const std::string rev = "rev-" + std::to_string(i % kRevisions);
    EXPECT_NE(pods[i].stub->stdout_text().find("\"knative.dev/key\":\"default/" + rev + "\""), std::string::npos) << i;
    EXPECT_NE(pods[i].stub->stdout_text().find("\"knative.dev/pod\":\"" + rev + "-pod-" + std::to_string(i) + "\""),
              std::string::npos) << i;
  }

  // Pod 0 drains (its stub's SIGTERM); the others serve throughout.
  ASSERT_EQ(::kill(pods[0].stub->pid(), SIGTERM), 0);
  for (int i = 1; i < kPods; i += 7) EXPECT_TRUE(serves(i)) << "pod " << i << " while pod 0 drains";
  EXPECT_EQ(exit_status(*pods[0].stub, 20s), "exited 0") << pods[0].stub->stdout_text();
  EXPECT_FALSE(listens(0));

  // Pod 1 deleted whole: its stub, app and namespace go at once.
  const long proxy_of_1 = [&] {
    for (const auto& l : agent->lines())
      if (l.find("\"pod joined\"") != std::string::npos && l.find("\"default/rev-1-pod-1\"") != std::string::npos)
        return json_int_field(l, "proxy_pid");
    return -1L;
  }();
  ASSERT_GT(proxy_of_1, 0) << agent->stdout_text();
  pods[1].stub.reset();  // SIGKILL
  pods[1].app.reset();
  pods[1].pod.reset();
  EXPECT_EQ(node_command({"unpublish", volume_of("rev-1-pod-1"), target_of("rev-1-pod-1").string()}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return ::kill(static_cast<pid_t>(proxy_of_1), 0) != 0; }, 10s))
      << "the deleted pod's proxy is still there";
  for (int i = 2; i < kPods; i += 7) EXPECT_TRUE(serves(i)) << "pod " << i << " after pod 1 was deleted";

  // The rest go as pods do; nothing of any of them stays in the agent.
  for (int i = 2; i < kPods; ++i) ::kill(pods[i].stub->pid(), SIGTERM);
  for (int i = 2; i < kPods; ++i) EXPECT_EQ(exit_status(*pods[i].stub, 30s), "exited 0") << i;
  // The kubelet then unpublishes each pod's volume: its socket goes too.
  for (int i = 0; i < kPods; ++i) {
    const std::string name = "rev-" + std::to_string(i % kRevisions) + "-pod-" + std::to_string(i);
    EXPECT_EQ(node_command({"unpublish", volume_of(name), target_of(name).string()}).exit_code, 0) << name;
    EXPECT_FALSE(fs::exists(target_of(name))) << name;
  }
  EXPECT_TRUE(eventually([&] { return descriptors() == idle_descriptors; }, 10s))
      << descriptors() << " descriptors open in the agent, " << idle_descriptors << " before any pod joined";
  const long zygote = zygote_of(agent->pid());
  EXPECT_GT(zygote, 0) << "the agent's zygote";
  EXPECT_EQ(children(agent->pid()), std::vector<long>{zygote}) << "the agent has children but its zygote";
  ASSERT_EQ(::kill(agent->pid(), SIGTERM), 0);
  EXPECT_EQ(exit_status(*agent, 20s), "exited 0") << agent->stdout_text();
}

// Knative mounts a pod's TLS pair into the pod (system-internal-tls), where the agent cannot see it: the
// stub hands over its root directory with the namespace, and the pod's proxy serves TLS with the pod's pair.
// The pod's file system here is a directory holding var/lib/knative/certs, which the agent's file system
// does not have; the test joins as the stub would, with that directory as the pod's root (making a real
// stub see another root takes a mount namespace, which a chroot such as CI's refuses to make private).
TEST_F(NodeAgent, APodsTlsPairIsReadFromThePodsOwnFileSystem) {
  SLUICE_NEED("openssl");
  ASSERT_FALSE(fs::exists("/var/lib/knative/certs/tls.crt"))
      << "this machine has a Knative TLS pair of its own: the pod's would not be the only one";
  const auto pod_root = dir_ / "pod-root";
  const auto certs = pod_root / "var/lib/knative/certs";
  fs::create_directories(certs);
  ASSERT_EQ(run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                         "/CN=localhost", "-keyout", (certs / "tls.key").string(), "-out", (certs / "tls.crt").string()})
                .exit_code, 0);
  // Readable by the pod's user, as a Secret volume's files are (its defaultMode, 0644).
  fs::permissions(certs / "tls.key", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                         fs::perms::others_read);
  auto agent = start_agent();

  // The stub's side of app/node/join.h, with that directory as the pod's root.
  const int netns = ::open(pod_->path().c_str(), O_RDONLY | O_CLOEXEC);
  const int root = ::open(pod_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  const int log = ::open((dir_ / "pod.log").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_TRUE(netns >= 0 && root >= 0 && log >= 0) << std::strerror(errno);
  auto env = env_;
  env["QUEUE_SERVING_TLS_PORT"] = "8112";
  const auto joined = join_as(env.at("SERVING_POD"), env, {netns, log, log, root});
  for (int fd : {netns, log, root}) ::close(fd);
  ASSERT_EQ(joined->reply, "joined\n") << agent->stdout_text();

  const auto pod_log = [&] {
    std::ifstream in(dir_ / "pod.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_TRUE(eventually([&] { return pod_log().find("\"listener\":\"tls\"") != std::string::npos; }, 10s))
      << pod_log();
  EXPECT_TRUE(eventually([&] {
    return pod_->run({"curl", "-sSk", "--max-time", "5", "https://127.0.0.1:8112/"}).out == "Hello from sluice-demo-app\n";
  }, 10s)) << pod_log() << agent->stdout_text();
}

// Pods share the agent, not their limits: a pod flooded past its concurrency limit (its queue full, the rest
// refused with 503 as queue-proxy does) leaves a neighbour pod's requests all answered.
TEST_F(NodeAgent, APodFloodedPastItsConcurrencyLimitLeavesItsNeighbourServing) {
  auto agent = start_agent();
  auto flooded_env = env_;
  flooded_env["CONTAINER_CONCURRENCY"] = "1";
  flooded_env["SLUICE_QUEUE_DEPTH"] = "5";
  flooded_env["SERVING_POD"] = "flooded";
  auto flooded_stub = start_stub_in(*pod_, flooded_env);
  Pod neighbour;
  Process neighbour_app(ProcessOptions{.argv = neighbour.exec({DEMO_APP_BIN}), .env = {{"PORT", "8080"}}});
  auto neighbour_env = env_;
  neighbour_env["SERVING_POD"] = "neighbour";
  auto neighbour_stub = start_stub_in(neighbour, neighbour_env);
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
  auto ok = [&](const Pod& p) {
    return p.run({"curl", "-sS", "--max-time", "5", "http://127.0.0.1:8012/"}).out == "Hello from sluice-demo-app\n";
  };
  EXPECT_TRUE(eventually([&] { return ok(neighbour); }, 10s)) << agent->stdout_text();

  // 100 clients asking for 30 s (stopped when the test ends), each request 300 ms in the app: one runs,
  // five wait, the rest are refused as fast as they come.
  Process flood(ProcessOptions{.argv = pod_->exec({"h2load", "--h1", "-D", "30", "-c", "100",
                                                   "http://127.0.0.1:8012/delay/300"}),
                               .merge_stderr = true});
  ASSERT_TRUE(eventually([&] {
    return pod_->run({"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5",
                      "http://127.0.0.1:8012/"}).out == "503";
  }, 10s)) << "the flooded pod never refused a request";
  int answered = 0;
  for (int i = 0; i < 50; ++i) answered += ok(neighbour) ? 1 : 0;
  EXPECT_EQ(answered, 50) << "the neighbour answered " << answered << " of 50 while the other pod was flooded";
  EXPECT_TRUE(flood.running()) << "the flood ended before the neighbour's requests: " << flood.stdout_text();
}

// Restart without a lost request (app/node/mode.cpp): a second agent started beside the first takes the node
// socket and every pod; each pod's new proxy accepts on its old one's sockets, and the old one finishes what
// it had in flight. wrk keeps 20 connections busy on each of two pods throughout: not one request fails, and
// no stub notices (none joins again).
TEST_F(NodeAgent, AnAgentRestartedUnderLoadLosesNoRequestAndNoStubNotices) {
  SLUICE_NEED("wrk");
  auto first = start_agent();
  Pod other;
  Process other_app(ProcessOptions{.argv = other.exec({DEMO_APP_BIN}), .env = {{"PORT", "8080"}}});
  auto other_env = env_;
  other_env["SERVING_POD"] = "other";
  auto other_stub = start_stub_in(other, other_env);
  auto stub = start_stub();
  const std::array<const Pod*, 2> pods = {pod_.get(), &other};
  auto ok = [](const Pod& p) {
    return p.run({"curl", "-sS", "--max-time", "5", "http://127.0.0.1:8012/"}).out == "Hello from sluice-demo-app\n";
  };
  for (const Pod* p : pods) ASSERT_TRUE(eventually([&] { return ok(*p); }, 10s)) << first->stdout_text();

  // wrk counts as errors a connection refused, reset or closed with a request on it, a timeout and any
  // status but 2xx/3xx.
  std::vector<std::unique_ptr<Process>> loads;
  for (const Pod* p : pods)
    loads.push_back(std::make_unique<Process>(ProcessOptions{
        .argv = p->exec({"wrk", "-t", "1", "-c", "20", "-d", "8s", "--timeout", "5s", "http://127.0.0.1:8012/"}),
        .merge_stderr = true}));
  auto established = [](const Pod& p) {
    const auto out = p.run({"ss", "-Htn", "state", "established", "sport = :8012"}).out;
    return std::count(out.begin(), out.end(), '\n');
  };
  for (const Pod* p : pods) ASSERT_TRUE(eventually([&] { return established(*p) >= 20; }, 10s)) << "wrk never connected";

  auto second = start_agent();
  ASSERT_TRUE(eventually([&] {
    const auto out = first->stdout_text();
    return out.find("handed over: the new agent serves every pod") != std::string::npos;
  }, 20s)) << first->stdout_text() << first->stderr_text() << second->stdout_text() << stub->stdout_text()
           << stub->stderr_text();
  // Each pod's old proxy has ended, the new ones serve (the new agent's lines can be read a moment after the
  // old one's), and wrk is still at it.
  auto taken = [&] {
    const std::string out = second->stdout_text();
    std::size_t count = 0;
    for (auto at = out.find("pod taken over"); at != std::string::npos; at = out.find("pod taken over", at + 1)) ++count;
    return count;
  };
  EXPECT_TRUE(eventually([&] { return taken() == 2; }, 5s)) << second->stdout_text();
  for (const Pod* p : pods) EXPECT_TRUE(ok(*p));
  for (const auto& load : loads) EXPECT_TRUE(load->running()) << "the load ended before the handover did";
  // Each old proxy finished what it had and exited as a proxy that drained does.
  const std::string handed = first->stdout_text();
  std::size_t finished = 0;
  for (auto at = handed.find("pod's old proxy finished"); at != std::string::npos;
       at = handed.find("pod's old proxy finished", at + 1))
    finished += handed.compare(handed.find("\"status\":", at), 29, "\"status\":\"exited with code 0\"") == 0;
  EXPECT_EQ(finished, 2u) << handed;

  // The old agent, with every pod handed over, exits by itself.
  EXPECT_EQ(exit_status(*first), "exited 0") << first->stdout_text();
  for (const auto& load : loads) {
    EXPECT_EQ(exit_status(*load, 30s), "exited 0");
    // The exit can be seen before the last of its output is read: wrk's last line is its transfer rate.
    EXPECT_TRUE(eventually([&] { return load->stdout_text().find("Transfer/sec") != std::string::npos; }, 5s));
    const auto out = load->stdout_text();
    EXPECT_NE(out.find("requests in"), std::string::npos) << out;
    EXPECT_EQ(out.find("Socket errors"), std::string::npos) << out;
    EXPECT_EQ(out.find("Non-2xx"), std::string::npos) << out;
  }
  for (const Pod* p : pods) EXPECT_TRUE(ok(*p)) << second->stdout_text();
  for (Process* s : {stub.get(), other_stub.get()}) {
    const auto out = s->stdout_text();
    EXPECT_EQ(out.find("joined the node agent"), out.rfind("joined the node agent")) << "a stub joined again: " << out;
    EXPECT_TRUE(s->running());
  }
  EXPECT_EQ(first->stdout_text().find("pod not handed over"), std::string::npos) << first->stdout_text();
}

// The same through gRPC, HTTP/2 on both sides (the pod's app an h2c gRPC server): the old proxy's GOAWAY
// sends each channel to the new one, which serves on the same socket, and no call fails.
TEST_F(NodeAgent, AnAgentRestartedUnderGrpcLoadFailsNoCall) {
  SLUICE_NEED("python-grpc");
  auto first = start_agent();
  Process grpc_app(ProcessOptions{.argv = pod_->exec({"/usr/bin/python3", GRPC_HEALTH_SERVER, "--port", "8081"})});
  ASSERT_TRUE(grpc_app.wait_for_line("listening", 10s)) << grpc_app.stderr_text();
  auto env = env_;
  env["USER_PORT"] = "8081";
  env["SLUICE_UPSTREAM_PROTOCOL"] = "h2c";
  auto stub = start_stub_in(*pod_, env);
  auto load = [&](const std::string& seconds) {
    return std::make_unique<Process>(ProcessOptions{
        .argv = pod_->exec({"/usr/bin/python3", GRPC_LOAD, "127.0.0.1:8012", "--seconds", seconds, "--concurrency", "8"})});
  };
  auto outcome = [](Process& p) {
    const auto out = p.stdout_text();
    return out.substr(out.rfind('{'));
  };
  ASSERT_TRUE(eventually([&] {
    auto probe = load("0.2");
    return exit_status(*probe, 20s) == "exited 0" &&
           eventually([&] { return probe->stdout_text().find("\"failed\"") != std::string::npos; }, 5s) &&
           json_int_field(outcome(*probe), "failed") == 0 && json_int_field(outcome(*probe), "ok") > 0;
  }, 20s)) << first->stdout_text() << stub->stdout_text();

  auto calls = load("8");
  ASSERT_TRUE(calls->wait_for_line("started", 10s));
  const auto channels = [&] {
    const auto out = pod_->run({"ss", "-Htn", "state", "established", "sport = :8012"}).out;
    return std::count(out.begin(), out.end(), '\n');
  };
  ASSERT_TRUE(eventually([&] { return channels() >= 8; }, 10s)) << "the channels never connected";
  auto second = start_agent();
  ASSERT_TRUE(eventually([&] {
    return first->stdout_text().find("handed over: the new agent serves every pod") != std::string::npos;
  }, 20s)) << first->stdout_text() << second->stdout_text() << stub->stdout_text();
  EXPECT_TRUE(calls->running()) << "the load ended before the handover did";
  EXPECT_EQ(exit_status(*first), "exited 0") << first->stdout_text();
  ASSERT_EQ(exit_status(*calls, 30s), "exited 0") << calls->stderr_text();
  ASSERT_TRUE(eventually([&] { return calls->stdout_text().find("\"failed\"") != std::string::npos; }, 5s));
  const auto result = outcome(*calls);
  EXPECT_EQ(json_int_field(result, "failed"), 0) << result;
  EXPECT_GT(json_int_field(result, "ok"), 0) << result;
  EXPECT_TRUE(eventually([&] { return second->stdout_text().find("pod taken over") != std::string::npos; }, 5s))
      << second->stdout_text();
}

}  // namespace
}  // namespace sluice::test
