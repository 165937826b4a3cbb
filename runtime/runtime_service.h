// What a user of the runtime (the gateway) calls: CRI's RuntimeService, the parts sluice uses. Runtime
// implements it; tests of the gateway's instance lifecycle implement it with a fake.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "runtime/instance.h"
#include "runtime/pod_cgroup.h"
#include "runtime/throttle.h"

namespace sluice::runtime {

// Success, or why an operation failed. Failures here are expected (bad command, unknown id), not bugs.
class [[nodiscard]] Outcome {
 public:
  Outcome() = default;
  static Outcome failure(std::string why) {
    Outcome o;
    o.error_ = why.empty() ? "failed" : std::move(why);
    return o;
  }
  bool ok() const { return error_.empty(); }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

// CRI's PodSandboxConfig, the parts sluice uses: a name and the pod's resource limits.
struct PodSandboxConfig {
  std::string id;  // [A-Za-z0-9._-]+, unique among live sandboxes
  PodLimits limits;
};

enum class SandboxState { ready, not_ready };  // CRI's SANDBOX_READY / SANDBOX_NOTREADY
std::string_view to_string(SandboxState s);

struct PodSandboxStatus {
  std::string id;
  std::string handler;
  SandboxState state = SandboxState::ready;
  std::string address;       // the pod's IP (its eth0): where its containers' ports are reached
  std::string host_address;  // the host end of its link
  std::string host_link;     // the host end's name, "sluice<slot>"
  unsigned long long netns_inode = 0;  // as in /proc/<pid>/ns/net "net:[inode]"
  std::optional<Clock::time_point> created_at;
  std::vector<std::string> containers;
  PodLimits limits;
  std::filesystem::path memory_limit_file, cpu_limit_file;  // where the limits are visible
  std::vector<std::filesystem::path> cgroup_dirs;           // the pod's dirs, one per hierarchy used
  std::uint64_t oom_kills = 0;
};

// Thread-safe. Calls may block (fork/exec, a grace period, a freeze taking effect): callers on a reactor
// post them elsewhere.
class RuntimeService {
 public:
  virtual ~RuntimeService() = default;

  virtual const ThrottleChoice& throttle() const = 0;

  virtual Outcome create(const InstanceSpec& spec) = 0;
  virtual Outcome start(const std::string& id) = 0;
  // Thaws, SIGTERM, waits up to `grace` (default: the runtime's), then SIGKILL; returns once exited.
  virtual Outcome stop(const std::string& id, std::optional<std::chrono::milliseconds> grace = std::nullopt) = 0;
  // Stops (SIGKILL at once) if still running, releases what it held; the id is then free.
  virtual Outcome remove(const std::string& id) = 0;
  virtual Outcome freeze(const std::string& id) = 0;
  virtual Outcome thaw(const std::string& id) = 0;
  virtual std::optional<InstanceStatus> status(const std::string& id) const = 0;
  // Runs `argv` inside a running container, thawing it first.
  virtual ExecResult exec(const std::string& id, const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout) = 0;

  // PodSandboxes: nullopt when this machine can make them, else why not.
  virtual std::optional<std::string> sandbox_unavailable_reason() = 0;
  virtual Outcome run_pod_sandbox(const PodSandboxConfig& config, const std::string& handler = "process") = 0;
  virtual Outcome remove_pod_sandbox(const std::string& id) = 0;
  virtual std::optional<PodSandboxStatus> pod_sandbox_status(const std::string& id) const = 0;
};

}  // namespace sluice::runtime
