// A handler starts instances one way (like a CRI RuntimeClass handler); a Task is one started instance.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <chrono>

#include "runtime/instance.h"
#include "runtime/pod_cgroup.h"

namespace sluice::runtime {

// What a container started in a PodSandbox shares with the sandbox.
struct SandboxContext {
  std::string id;
  int netns_fd = -1;                                // the pod's network namespace
  int ipcns_fd = -1;                                // the pod's IPC namespace
  std::filesystem::path cgroup_parent;              // parent of the containers' throttle cgroups
  std::vector<std::filesystem::path> join_files;    // v1 `tasks` files of the pod's other hierarchies
  std::vector<std::pair<std::string, std::string>> container_limits;  // written into each container's cgroup
  PodLimits limits;
};

struct StartRequest {
  const InstanceSpec& spec;
  std::vector<std::string> env;        // complete environment, contract variables included
  std::filesystem::path instance_dir;  // private to the instance, removed with it
  int stdout_fd = -1;                  // write ends of the capture pipes
  int stderr_fd = -1;
  const SandboxContext* sandbox = nullptr;  // null: host network, the runtime's cgroup
};

class Task {
 public:
  virtual ~Task() = default;
  virtual pid_t pid() const = 0;     // the direct child the runtime reaps
  virtual int pidfd() const = 0;     // owned by the task
  virtual void terminate() = 0;      // SIGTERM to the whole instance
  virtual void kill() = 0;           // SIGKILL to the whole instance
  virtual bool freeze(std::string& error) = 0;
  virtual bool thaw(std::string& error) = 0;
  virtual std::string throttle_name() const = 0;
  // Runs `argv` in the instance's namespaces, cgroup and user, with its environment; blocks until it ends.
  virtual ExecResult exec(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) = 0;
  // After the direct child exited: kills leftovers and removes cgroups/bundles. Idempotent.
  virtual void cleanup() = 0;
};

class Handler {
 public:
  virtual ~Handler() = default;
  virtual std::string_view name() const = 0;
  // nullopt when usable; otherwise why not, in the underlying runtime's own words.
  virtual std::optional<std::string> unavailable_reason() = 0;
  // nullptr with `error` set when the instance could not be started.
  virtual std::unique_ptr<Task> start(const StartRequest& req, std::string& error) = 0;
};

}  // namespace sluice::runtime
