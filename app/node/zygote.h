// The process per-node mode forks each pod's proxy from, without exec: `sluice node-zygote`, started once
// by the agent. A proxy exec'ed afresh relocates every library it links (libcrypto's GOT and vtables alone
// are 400 KiB) into pages of its own; a proxy forked from the zygote shares the zygote's, copy-on-write,
// with every other pod's. It runs `sluice sidecar` as the binary would (app/modes.h run_mode), set up as
// runtime::spawn_process sets up a child (the pod's namespace and user, its descriptors on 0-2 and 3, 4, ...)
// with the request's environment as its own.
//
// The zygote is single-threaded, so its forks may run anything. Each proxy is the agent's child, as one
// spawn_process starts: the zygote forks an intermediate that forks the proxy and exits, and the agent is
// a subreaper, so the proxy is re-parented to it; only then does the proxy arm its parent-death signal
// (the agent's) and start. The agent waits on its pidfd and reaps it as any child.
//
// On the zygote's socket (descriptor 3), SOCK_SEQPACKET, one request at a time:
//   agent  -> zygote  a SpawnOrder ("spawn UID GID PDEATHSIG DROPCAPS NCGROUPS\n", the environment and the
//                     descriptors; app/node/messages.h)
//   zygote -> agent   a SpawnReply ("spawned PID\n" with the proxy's pidfd | "failed REASON\n")
#pragma once

#include <sys/types.h>

#include <mutex>
#include <string>
#include <vector>

#include "runtime/fd.h"
#include "runtime/spawn.h"

namespace sluice::app::node {

// The agent's side.
class Zygote {
 public:
  Zygote() = default;
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;
  ~Zygote();  // closes the socket: the zygote exits, and is reaped

  // Starts the zygote (this binary, `node-zygote`) with `env`: "" or why not. Makes this process a
  // subreaper. The calling thread must live as long as the zygote: its parent-death signal follows it.
  std::string start(const std::vector<std::string>& env);
  bool running() const;

  // `sluice sidecar` forked from the zygote, set up as `req` asks (its argv, cgroup_dir_fd, cgroup_procs_fd
  // and process-group fields aside: the proxy runs in its own process group, in the cgroups join_procs_fds
  // name, else the agent's; netns_fd, stdout_fd and stderr_fd are required). Thread-safe. A proxy that then fails is reported as a spawned one that exits.
  runtime::Spawned spawn(const runtime::SpawnRequest& req);

 private:
  mutable std::mutex mu_;  // one request at a time on the socket
  runtime::Fd socket_;
  runtime::Fd pidfd_;  // the zygote's
};

}  // namespace sluice::app::node
