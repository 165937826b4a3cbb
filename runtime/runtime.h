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
#include "runtime/runtime_service.h"
#include "runtime/throttle.h"

namespace sluice::runtime {

class Handler;
class Reactor;

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

class Runtime final : public RuntimeService {
 public:
  // Detects the throttle mechanism; throws ConfigError when a requested one is unusable.
  explicit Runtime(RuntimeOptions opts);
  // Kills and removes every instance left, then removes the runtime's cgroups and state dir.
  ~Runtime() override;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const ThrottleChoice& throttle() const override { return throttle_; }
  // Failure names the handler: unknown, or unavailable with the underlying runtime's message.
  Outcome check_handler(const std::string& name);

  Outcome create(const InstanceSpec& spec) override;
  Outcome start(const std::string& id) override;
  // Thaws, SIGTERM, waits up to `grace` (default: options), then SIGKILL; returns once exited.
  Outcome stop(const std::string& id, std::optional<std::chrono::milliseconds> grace = std::nullopt) override;
  // Stops (SIGKILL at once) if still running, releases cgroups, capture, TMPDIR; the id is then free.
  Outcome remove(const std::string& id) override;
  Outcome freeze(const std::string& id) override;
  Outcome thaw(const std::string& id) override;

  std::optional<InstanceStatus> status(const std::string& id) const override;
  std::vector<InstanceStatus> list() const;
  // Waits until the instance has exited; nullopt at the deadline or if there is no such instance.
  std::optional<InstanceStatus> wait_exited(const std::string& id, std::chrono::milliseconds timeout);

  // Runs `argv` inside a running container (namespaces, cgroup, user, environment), thawing it first.
  ExecResult exec(const std::string& id, const std::vector<std::string>& argv, std::chrono::milliseconds timeout) override;

  // PodSandboxes (CRI): nullopt when this machine can make them, else why not (no root, no netns, ...).
  std::optional<std::string> sandbox_unavailable_reason() override;
  // Network namespace + veth + pod cgroups with limits; blocks until ready or failed (nothing left then).
  Outcome run_pod_sandbox(const PodSandboxConfig& config, const std::string& handler = "process") override;
  // Stops its containers (SIGKILL), releases its network; it stays listed as not ready.
  Outcome stop_pod_sandbox(const std::string& id);
  // Force-removes its containers, then its network, cgroups and slot.
  Outcome remove_pod_sandbox(const std::string& id) override;
  std::optional<PodSandboxStatus> pod_sandbox_status(const std::string& id) const override;
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
