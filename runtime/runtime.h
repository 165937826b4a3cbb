// The runtime: a CRI-shaped, thread-safe API over app instances (create, start, stop, remove, freeze, thaw).
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/instance.h"
#include "runtime/pod_cgroup.h"
#include "runtime/throttle.h"

namespace sluice::runtime {

class Handler;
class Reactor;

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

struct RuntimeOptions {
  std::string throttle = "auto";      // "auto" or a ThrottleKind name; a named one must be usable
  std::filesystem::path state_dir;    // instance dirs (TMPDIR, OCI bundles); default /tmp/sluice-<pid>
  std::filesystem::path log_dir;      // <id>.log per instance; default <state_dir>/logs
  std::string cgroup_name;            // default sluice-<pid>
  std::chrono::milliseconds default_grace{10000};
  // Sandboxes: slot files (shared by every sluice on the machine) and the private range pods' /31 links come
  // from. Nothing in the range is routed off the machine.
  std::filesystem::path sandbox_state_dir = "/run/sluice/sandboxes";
  std::string sandbox_network = "169.254.64.0/18";
  EventCallback on_event;
  OutputCallback on_output;
};

class Runtime {
 public:
  // Detects the throttle mechanism; throws ConfigError when a requested one is unusable.
  explicit Runtime(RuntimeOptions opts);
  // Kills and removes every instance left, then removes the runtime's cgroups and state dir.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const ThrottleChoice& throttle() const { return throttle_; }
  // Failure names the handler: unknown, or unavailable with the underlying runtime's message.
  Outcome check_handler(const std::string& name);

  Outcome create(const InstanceSpec& spec);
  Outcome start(const std::string& id);
  // Thaws, SIGTERM, waits up to `grace` (default: options), then SIGKILL; returns once exited.
  Outcome stop(const std::string& id, std::optional<std::chrono::milliseconds> grace = std::nullopt);
  // Stops (SIGKILL at once) if still running, releases cgroups, capture, TMPDIR; the id is then free.
  Outcome remove(const std::string& id);
  Outcome freeze(const std::string& id);
  Outcome thaw(const std::string& id);

  std::optional<InstanceStatus> status(const std::string& id) const;
  std::vector<InstanceStatus> list() const;
  // Waits until the instance has exited; nullopt at the deadline or if there is no such instance.
  std::optional<InstanceStatus> wait_exited(const std::string& id, std::chrono::milliseconds timeout);

  // Runs `argv` inside a running container (namespaces, cgroup, user, environment), thawing it first.
  ExecResult exec(const std::string& id, const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

  // PodSandboxes (CRI): nullopt when this machine can make them, else why not (no root, no netns, ...).
  std::optional<std::string> sandbox_unavailable_reason();
  // Network namespace + veth + pod cgroups with limits; blocks until ready or failed (nothing left then).
  Outcome run_pod_sandbox(const PodSandboxConfig& config, const std::string& handler = "process");
  // Stops its containers (SIGKILL), releases its network; it stays listed as not ready.
  Outcome stop_pod_sandbox(const std::string& id);
  // Force-removes its containers, then its network, cgroups and slot.
  Outcome remove_pod_sandbox(const std::string& id);
  std::optional<PodSandboxStatus> pod_sandbox_status(const std::string& id) const;
  std::vector<PodSandboxStatus> list_pod_sandbox() const;

 private:
  struct Record;
  struct Sandbox;
  std::shared_ptr<Sandbox> find_sandbox(const std::string& id) const;
  PodSandboxStatus sandbox_snapshot(const Sandbox& sb) const;  // under mu_
  Outcome check_start_user(const InstanceSpec& spec) const;
  std::shared_ptr<Record> find(const std::string& id) const;
  Handler* handler(const std::string& name);
  void emit(EventKind kind, const InstanceStatus& status);
  void on_exit(const std::shared_ptr<Record>& rec, int code, int sig);
  bool wait_state(Record& rec, std::chrono::milliseconds timeout);
  std::vector<std::string> contract_env(const InstanceSpec& spec, const std::filesystem::path& tmp) const;

  RuntimeOptions opts_;
  ThrottleChoice throttle_;
  std::map<std::string, std::unique_ptr<Handler>, std::less<>> handlers_;
  std::mutex handlers_mu_;
  mutable std::mutex mu_;
  std::condition_variable exited_cv_;
  std::map<std::string, std::shared_ptr<Record>> instances_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;  // under mu_
  std::mutex sandbox_probe_mu_;
  std::optional<std::optional<std::string>> sandbox_verdict_;  // under sandbox_probe_mu_
  std::unique_ptr<Reactor> reactor_;  // last member: its thread stops before the rest is destroyed
};

}  // namespace sluice::runtime
