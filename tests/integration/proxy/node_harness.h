// What the per-node tests share: a pod (a network namespace the test makes, commands run in it with
// nsenter(1)), the kubelet's part (each pod's volume published to the agent, the pod's stub put in a cgroup
// named for the pod as the kubelet names it), and a fixture that runs `sluice node` with pods joining it
// through the small sluice-node-stub, as deploy/node runs them.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness.h"

namespace sluice::test {

// A pod's network namespace: held by a process unshare(1) started in a new one (no bind mount under
// /run/netns, which a chroot may not allow), with its loopback up; commands run inside with nsenter(1).
class Pod {
 public:
  Pod();
  std::string path() const;
  std::vector<std::string> exec(std::vector<std::string> argv) const;
  // As a container's unprivileged user (queue-proxy runs as 65532 in Knative's pods).
  std::vector<std::string> exec_as(int uid, std::vector<std::string> argv) const;
  CommandResult run(std::vector<std::string> argv) const;
  pid_t holder() const { return holder_.pid(); }

 private:
  Process holder_;
};

// A cgroup named as the kubelet names a pod's container (…/pod<UID>/queue-proxy), in the v2 hierarchy and,
// when asked, in v1's cpu hierarchy with a CPU quota: what a stub started through wrap() runs in. Removed
// once what ran in it has gone.
class PodCgroup {
 public:
  PodCgroup(const std::string& uid, std::optional<int> cpu_quota_percent = std::nullopt);
  ~PodCgroup();
  PodCgroup(const PodCgroup&) = delete;
  PodCgroup& operator=(const PodCgroup&) = delete;
  // `argv` run by a shell that first moves itself into the cgroup(s).
  std::vector<std::string> wrap(std::vector<std::string> argv) const;
  // The leaf dirs (v2, then v1 cpu when made).
  const std::vector<std::filesystem::path>& dirs() const { return leaves_; }
  std::optional<std::filesystem::path> cpu_dir() const { return cpu_; }

 private:
  std::vector<std::filesystem::path> made_;   // in creation order
  std::vector<std::filesystem::path> leaves_;
  std::optional<std::filesystem::path> cpu_;
};

class NodeAgent : public ::testing::Test {
 protected:
  static constexpr int kPodUser = 65534;

  void SetUp() override;
  void TearDown() override;

  std::unique_ptr<Process> start_agent(std::map<std::string, std::string> env = {});
  // The kubelet publishes pod `name`'s volume (`sluice node publish`, as sluice-csi does on the kubelet's
  // NodePublishVolume): the pod's socket's path. A pod is published once; later calls return its socket.
  std::string publish(const std::string& name);
  std::string uid_of(const std::string& name);
  std::string volume_of(const std::string& name) const { return "csi-" + name; }
  std::filesystem::path target_of(const std::string& name) const { return dir_ / "volumes" / name; }
  // A root command to the agent (`sluice node ...`).
  CommandResult node_command(std::vector<std::string> args) const;
  // The stub of the pod `env` names (SERVING_POD) in `pod`, joining through that pod's socket, run as `uid`
  // inside a cgroup of the pod's (its own, or `cgroup` when given).
  // `socket`: the pod's socket made otherwise (sluice-csi's NodePublishVolume), not published here.
  std::unique_ptr<Process> start_stub_in(const Pod& pod, std::map<std::string, std::string> env, int uid = kPodUser,
                                         const PodCgroup* cgroup = nullptr, std::string socket = {});
  std::unique_ptr<Process> start_stub() { return start_stub_in(*pod_, env_); }
  // A join sent by the test itself, as a stub would send it (app/node/join.h), on pod `name`'s socket (or
  // `socket`), from a connection made by a process running as `uid` in the pod's cgroup (it lives until
  // the reply is in). The reply ("" when none) and the connection, which the pod's service lasts as long as.
  struct Joined {
    std::string reply;
    int connection = -1;
    ~Joined() {
      if (connection >= 0) ::close(connection);
    }
  };
  std::unique_ptr<Joined> join_as(const std::string& name, const std::map<std::string, std::string>& env,
                                  const std::vector<int>& fds, int uid = kPodUser, std::string socket = {});

  // The pid of the proxy the agent started for the pod that joined last.
  static long proxy_pid(const Process& agent);
  // The agent's children: the pods' proxies and the zygote they are forked from (app/node/zygote.h).
  static std::vector<long> children(long pid);
  static std::string command_line(long pid);
  static std::string name_of(long pid);
  static long zygote_of(long agent);
  static long parent_of(long pid);
  // A line of /proc/PID/status ("Uid:", "CapEff:", ...) without its name; "" when absent.
  static std::string status_field(long pid, const std::string& field);
  bool listening() const;
  bool serves() const;
  static bool serves_in(const Pod& pod);

  std::unique_ptr<Pod> pod_;
  std::unique_ptr<Process> app_;
  const std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("sluice-node-" + std::to_string(::getpid()));
  const std::string stub_bin_ = (dir_ / "sluice-node-stub").string();
  const std::string control_ = (dir_ / "control" / "control.sock").string();
  std::map<std::string, std::string> env_;
  std::map<std::string, std::string> uids_;                 // pod name -> UID
  std::map<std::string, std::unique_ptr<PodCgroup>> cgroups_;  // pod name -> its stub's cgroup
};

}  // namespace sluice::test
