// What an app instance is to the runtime: its spec, its lifecycle state, and the events it emits.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::runtime {

// What to run; the runtime adds the contract variables (PORT, K_SERVICE, ...) to `env`.
struct InstanceSpec {
  std::string id;                         // unique among live instances: [A-Za-z0-9._-]+
  std::string handler = "process";        // "process", "runc", "crun"
  std::vector<std::string> command;       // argv; argv[0] searched in PATH when it has no '/'
  std::map<std::string, std::string> env;
  bool inherit_env = true;                // process handler: start from the runtime's environment
  std::filesystem::path working_dir;      // empty: the runtime's own (process) or "/" (OCI)
  std::filesystem::path rootfs;           // OCI handlers only: the root filesystem directory
  int port = 8080;                        // given as PORT
  std::string service, revision, configuration;  // K_SERVICE, K_REVISION, K_CONFIGURATION
  // SIGKILL to the instance's process when the thread that started it ends, the whole runtime included
  // (PR_SET_PDEATHSIG): nothing outlives a killed supervisor. Start it from a thread that lives as long
  // as the runtime.
  bool die_with_starter = false;
  // PodSandbox this container runs in (its network namespace, cgroups, limits); empty: the host's.
  std::string sandbox;
  // Kubernetes' securityContext: the uid/gid the app runs as (default: the runtime's own for `process`,
  // 0 for OCI handlers), and a ban on root that fails start with the reason.
  std::optional<int> run_as_user, run_as_group;
  bool run_as_non_root = false;
};

// What Exec returns: the command's combined output (capped) and how it ended.
struct ExecResult {
  int exit_code = -1;   // when it exited normally
  int signal = 0;       // when killed by a signal (SIGKILL at the timeout)
  bool timed_out = false;
  std::string output;   // stdout and stderr interleaved
  std::string error;    // set when it could not run at all
  bool succeeded() const { return error.empty() && !timed_out && signal == 0 && exit_code == 0; }
};

enum class InstanceState { created, running, exited };
std::string_view to_string(InstanceState s);

using Clock = std::chrono::system_clock;

struct InstanceStatus {
  std::string id;
  std::string handler;
  InstanceState state = InstanceState::created;
  pid_t pid = 0;              // the handler's direct child (for OCI handlers: the runtime binary)
  bool frozen = false;
  int exit_code = -1;         // when exited normally
  int signal = 0;             // when killed by a signal
  std::optional<Clock::time_point> created_at, started_at, finished_at;
  std::filesystem::path log_file;
  std::filesystem::path tmp_dir;
  std::string reason;         // "Completed", "Error", "Signaled", "OOMKilled", or why start failed
  std::string sandbox;        // the PodSandbox it runs in, if any
  std::optional<std::uint64_t> memory_limit_bytes;  // its sandbox's, when limited
};

enum class EventKind { created, started, frozen, thawed, stopping, killing, exited, removed };
std::string_view to_string(EventKind k);

struct Event {
  EventKind kind;
  InstanceStatus status;
};

enum class Stream { out, err };

// Called from the runtime's threads; must not block for long and must not call back into the Runtime
// for the same instance from an output callback.
using EventCallback = std::function<void(const Event&)>;
using OutputCallback = std::function<void(const std::string& id, Stream stream, std::string_view line)>;

}  // namespace sluice::runtime
