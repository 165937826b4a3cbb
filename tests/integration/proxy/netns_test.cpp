// SLUICE_NETNS: `sluice sidecar` on the host serves a pod it was handed the network namespace of, as the
// per-node agent will serve every pod of a node. Every port listens inside the pod (its 127.0.0.1, its port
// numbers, nothing on the host), the app and its readiness probe are reached on the pod's 127.0.0.1, and
// each of sluice's threads stays in the host's namespace. The pod is a namespace the test makes (unshare(1));
// the demo app runs inside it, curl reaches the sidecar from inside it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>

#include <filesystem>
#include <map>
#include <memory>

#include "node_harness.h"
#include "tests/support/capability.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(SidecarOutsideThePod, ListensAndReachesTheAppInsideThePodsNamespaceFromTheHost) {
  SLUICE_NEED("netns");
  Pod pod;
  // The app on the pod's 127.0.0.1:8080, a port number the host may well use for something else.
  Process app(ProcessOptions{.argv = pod.exec({DEMO_APP_BIN}), .env = {{"PORT", "8080"}}});
  Sidecar sidecar(SidecarOptions{.user_port = 8080, .env = {{"SLUICE_NETNS", pod.path()}}});
  const auto proxy = std::to_string(sidecar.port), metrics = std::to_string(sidecar.metrics_port);
  EXPECT_NE(sidecar.process->stdout_text().find("serving a pod from outside its network namespace"),
            std::string::npos);

  // The kubelet's probe, from inside the pod: 200 once the app answers there.
  EXPECT_TRUE(eventually([&] {
    return pod.run({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "User-Agent: kube-probe/1.29",
                    "-H", "K-Network-Probe: queue", "http://127.0.0.1:" + proxy + "/"})
               .out == "200";
  }, 10s)) << sidecar.process->stdout_text();
  auto r = pod.run({"curl", "-sS", "--max-time", "10", "http://127.0.0.1:" + proxy + "/"});
  EXPECT_EQ(r.out, "Hello from sluice-demo-app\n") << r.err;
  // The autoscaler's Stat port too.
  r = pod.run({"curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
               "http://127.0.0.1:" + metrics + "/metrics"});
  EXPECT_EQ(r.out, "200") << r.err;

  // The listening sockets are the pod's, and sluice's.
  r = pod.run({"ss", "-Htlnp", "sport = :" + proxy});
  EXPECT_NE(r.out.find("sluice"), std::string::npos) << r.out << r.err;
  // Every thread of sluice is still in the host's namespace.
  const auto host = fs::read_symlink("/proc/self/ns/net");
  int threads = 0;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(sidecar.process->pid()) + "/task")) {
    EXPECT_EQ(fs::read_symlink(task.path() / "ns" / "net"), host) << task.path();
    ++threads;
  }
  EXPECT_GT(threads, 2);
}

TEST(SidecarOutsideThePod, ANamespaceThatIsNotThereIsAConfigErrorNamingTheKey) {
  auto env = knative_env(8080);
  env["SLUICE_NETNS"] = "/run/netns/sluice-no-such-pod";
  Process p(ProcessOptions{.argv = {SLUICE_BIN, "sidecar"}, .env = env});
  EXPECT_EQ(exit_status(p), "exited 2");  // a configuration error, as for every other key
  // The exit can be seen before the last of its output is read.
  EXPECT_TRUE(eventually([&] {
    return p.stderr_text().find("SLUICE_NETNS=\"/run/netns/sluice-no-such-pod\": No such file or directory") !=
           std::string::npos;
  }, 5s)) << p.stderr_text() << p.stdout_text();
}

}  // namespace
}  // namespace sluice::test
