// `sluice node`'s settings; see agent.h.
#include <cstdlib>
#include <filesystem>

#include "app/node/agent.h"
#include "app/node/control.h"
#include "common/config_error.h"

namespace sluice::app::node {

std::vector<OptionSpec> agent_options() {
  return {
      {"SLUICE_NODE_CONTROL_SOCKET", "control-socket", false,
       "the agent's control socket, root's alone, which no pod mounts: handover, publish, unpublish "
       "(default /run/sluice-control/control.sock; its directory is made 0700 and holds the pods' records)"},
      {"SLUICE_NODE_JOIN_TIMEOUT_MS", "join-timeout-ms", false,
       "how long a connection to a pod's socket may take to send its join before it is closed (default 5000)"},
      {"SLUICE_NODE_MAX_UNJOINED", "max-unjoined", false,
       "connections to one pod's socket that have not joined yet, at most; more are closed at once (default 4)"},
      {"SLUICE_NODE_MAX_PODS", "max-pods", false, "pods the agent serves at most; more are refused (default 250)"},
      {"SLUICE_NODE_POD_WORKERS", "pod-workers", false,
       "worker threads of a pod's proxy when the pod asks for none (default 1)"},
      {"SLUICE_NODE_POD_MAX_WORKERS", "pod-max-workers", false,
       "worker threads a pod may ask for (its SLUICE_WORKERS, else GOMAXPROCS), at most (default 4)"},
      {"SLUICE_NODE_VERIFY_POD_CGROUP", "verify-pod-cgroup", false,
       "accept a join only from a process in the pod's own cgroup, as the kubelet names it (default true)"},
      {"SLUICE_NODE_READY_FILE", "ready-file", false,
       "a file the agent writes once it holds every pod it was handed, and removes when it stops; "
       "`sluice node ready` exits 0 while it is there (default: none)"},
      {"SLUICE_NODE_GENERATION", "generation", false,
       "this agent's generation (the DaemonSet pod's pod-template-generation): it never hands over to an older one"},
      {"SLUICE_CSI_SOCKET", "csi-socket", false,
       "serve the CSI plugin (sluice-csi, next to sluice) on this socket, through which the kubelet publishes "
       "each pod's volume (default: none; see sluice-csi --help for its other keys)"},
  };
}

AgentSettings agent_settings(const Options& o) {
  AgentSettings s;
  s.control_socket = o.get_string("SLUICE_NODE_CONTROL_SOCKET", kDefaultControlSocket);
  if (s.control_socket.empty() || s.control_socket.front() != '/')
    throw ConfigError("SLUICE_NODE_CONTROL_SOCKET=\"" + s.control_socket + "\": expected an absolute path");
  s.state_dir = (std::filesystem::path(s.control_socket).parent_path() / "pods").string();
  s.join_timeout_ms = static_cast<int>(o.get_int("SLUICE_NODE_JOIN_TIMEOUT_MS", 5000, 1, 600'000));
  s.max_unjoined = static_cast<unsigned>(o.get_int("SLUICE_NODE_MAX_UNJOINED", 4, 1, 1024));
  s.max_pods = static_cast<unsigned>(o.get_int("SLUICE_NODE_MAX_PODS", 250, 1, 100'000));
  s.workers.max_workers = static_cast<unsigned>(o.get_int("SLUICE_NODE_POD_MAX_WORKERS", 4, 1, 1024));
  s.workers.default_workers =
      static_cast<unsigned>(o.get_int("SLUICE_NODE_POD_WORKERS", 1, 1, static_cast<std::int64_t>(s.workers.max_workers)));
  s.verify_cgroup = o.get_bool("SLUICE_NODE_VERIFY_POD_CGROUP", true);
  s.ready_file = o.get_string("SLUICE_NODE_READY_FILE");
  s.generation = o.get_string("SLUICE_NODE_GENERATION");
  s.csi_socket = o.get_string("SLUICE_CSI_SOCKET");
  return s;
}

long generation_number(const std::string& g) {
  char* end = nullptr;
  const long n = g.empty() || g == "-" ? -1 : std::strtol(g.c_str(), &end, 10);
  return end && *end == '\0' ? n : -1;
}

}  // namespace sluice::app::node
