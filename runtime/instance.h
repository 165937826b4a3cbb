// What an app instance is to the runtime: its spec, its lifecycle state, and the events it emits.
#pragma once

#include <sys/types.h>

#include <chrono>
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
  std::string reason;         // "Completed", "Error", "Signaled", or why start failed
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
