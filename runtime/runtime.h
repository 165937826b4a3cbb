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

struct RuntimeOptions {
  std::string throttle = "auto";      // "auto" or a ThrottleKind name; a named one must be usable
  std::filesystem::path state_dir;    // instance dirs (TMPDIR, OCI bundles); default /tmp/sluice-<pid>
  std::filesystem::path log_dir;      // <id>.log per instance; default <state_dir>/logs
  std::string cgroup_name;            // default sluice-<pid>
  std::chrono::milliseconds default_grace{10000};
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

 private:
  struct Record;
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
  std::unique_ptr<Reactor> reactor_;  // last member: its thread stops before the rest is destroyed
};

}  // namespace sluice::runtime
