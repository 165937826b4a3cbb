// The agent's service of one pod (app/node/pod_service.h) and its side of the handover (take_pods), over real
// socket pairs: which joins it refuses before any proxy starts, with what answer to the stub, and what a new
// agent answers a predecessor's message that is not a pod. Starting proxies is the integration tests' part
// (tests/integration/proxy/node_agent_test.cpp).
#include "app/node/pod_service.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "app/node/agent.h"

namespace sluice::app::node {
namespace {

constexpr uid_t kNobody = 65534;

// A connected pair: the agent's end (given to the service) and the stub's. `as` is the stub's user, which
// the agent reads as the peer's credentials (SO_PEERCRED records who made the pair).
struct StubConnection {
  explicit StubConnection(uid_t as = 0) {
    if (as != 0) {
      EXPECT_EQ(::setegid(as), 0);
      EXPECT_EQ(::seteuid(as), 0);
    }
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
    if (as != 0) {
      EXPECT_EQ(::seteuid(0), 0);
      EXPECT_EQ(::setegid(0), 0);
    }
    stub = runtime::Fd(fds[1]);
  }
  runtime::Fd agent_end() { return runtime::Fd(fds[0]); }
  // The service's answer, without its newline.
  std::string answer() {
    auto m = receive_message(stub.get());
    if (!m) return "(closed)";
    if (!m->text.empty() && m->text.back() == '\n') m->text.pop_back();
    return m->text;
  }
  int fds[2] = {-1, -1};
  runtime::Fd stub;
};

// A join as the stub sends it: its settings, with the pod's four descriptors.
Message join(std::vector<std::string> env) {
  Message m{join_text(env), {}};
  m.fds.emplace_back(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  m.fds.emplace_back(::dup(STDOUT_FILENO));
  m.fds.emplace_back(::dup(STDERR_FILENO));
  m.fds.emplace_back(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  return m;
}

const std::vector<std::string> kPodA = {"SERVING_NAMESPACE=default", "SERVING_POD=pod-a", "USER_PORT=8080"};

// The agent's state with pod-a published as volume "vol-a".
struct Agent {
  Agent() {
    node.settings.join_timeout_ms = 100;
    node.settings.verify_cgroup = false;
    node.published["vol-a"].publication = {.volume = "vol-a", .pod = {"default", "pod-a", "uid-a"}, .target = "/nowhere"};
  }
  Node node;
};

// The answer to `join` from a stub running as `as`, on the socket of the pod published as `volume`.
std::string answer_to(Agent& agent, Message join, std::string volume = "vol-a", uid_t as = kNobody) {
  StubConnection conn(as);
  {
    PodService pod(agent.node, conn.agent_end(), std::move(volume));
    pod.run(std::move(join));
  }
  return conn.answer();
}

bool root() { return ::geteuid() == 0; }

TEST(NodePodService, AnythingButAJoinIsRefusedWithWhatAJoinIs) {
  Agent agent;
  EXPECT_EQ(answer_to(agent, Message{"drain\n", {}}, "vol-a", 0),
            "refused not a join: expected \"join\" lines, the pod's network namespace, stdout, stderr and root directory");
  auto three = join(kPodA);
  three.fds.pop_back();
  EXPECT_EQ(answer_to(agent, std::move(three), "vol-a", 0).rfind("refused not a join", 0), 0u);
}

TEST(NodePodService, AStubRunningAsRootIsRefused) {
  if (!root()) GTEST_SKIP() << "the stub's user is this test's: root is needed to be it";
  Agent agent;
  EXPECT_EQ(answer_to(agent, join(kPodA), "vol-a", 0).rfind("refused the stub runs as root (uid 0): a pod's proxy runs as "
                                                          "its stub's user, which must not be root", 0), 0u);
}

TEST(NodePodService, AJoinOnTheSocketOfAVolumeNoLongerPublishedIsRefused) {
  if (!root()) GTEST_SKIP() << "a stub of another user is made by switching to it";
  Agent agent;
  EXPECT_EQ(answer_to(agent, join(kPodA), "vol-gone"), "refused the pod's volume is no longer published");
}

TEST(NodePodService, AJoinNamingAnotherPodThanThePublishedOneIsRefused) {
  if (!root()) GTEST_SKIP() << "a stub of another user is made by switching to it";
  Agent agent;
  EXPECT_EQ(answer_to(agent, join({"SERVING_NAMESPACE=default", "SERVING_POD=pod-b"})),
            "refused the join names pod default/pod-b (SERVING_NAMESPACE, SERVING_POD), but this socket is pod "
            "default/pod-a's");
  EXPECT_EQ(agent.node.published["vol-a"].service, nullptr) << "a refused join never becomes the pod's service";
}

TEST(NodePodService, AStubOutsideThePodsCgroupIsRefusedWhenCgroupsAreChecked) {
  if (!root()) GTEST_SKIP() << "a stub of another user is made by switching to it";
  Agent agent;
  agent.node.settings.verify_cgroup = true;
  EXPECT_EQ(answer_to(agent, join(kPodA)),
            "refused the stub (pid " + std::to_string(::getpid()) + ") is not in pod uid-a's cgroup");
}

// The new agent's side of a handover: a message that is not a pod is answered with why, and the next
// message is still read; the predecessor closing the connection ends it.
TEST(NodePodService, ANewAgentRefusesAHandoverThatIsNotAPodAndReadsOn) {
  Agent agent;
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  runtime::Fd predecessor(pair[1]);
  std::thread taking([&] { take_pods(agent.node, runtime::Fd(pair[0])); });
  const auto reply = [&](const std::string& text) {
    EXPECT_TRUE(send_message(predecessor.get(), text));
    auto m = receive_message(predecessor.get());
    return m ? m->text : std::string("(closed)");
  };
  EXPECT_EQ(reply("pod 1000 1000 x vol-a\n"),
            "refused not a pod: expected \"pod UID GID PID VOLUME\", its settings and descriptors\n");
  EXPECT_EQ(reply("pod 1000 1000 42 vol-a\nSERVING_POD=pod-a\n"),
            "refused not a pod: expected \"pod UID GID PID VOLUME\", its settings and descriptors (0 descriptors, at "
            "least 5 expected)\n");
  predecessor = runtime::Fd();
  taking.join();
  std::lock_guard lock(agent.node.mu);
  EXPECT_TRUE(agent.node.pods.empty());
  EXPECT_EQ(agent.node.threads, 0) << "no pod was started";
}

}  // namespace
}  // namespace sluice::app::node
