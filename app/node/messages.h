// The agent's messages besides the join (app/node/join.h), a struct each with its encode and decode: the one
// place each wire shape is written. Decoding refuses anything else with a reason; every descriptor that
// arrives is owned (runtime::Fd) from the socket on, and closed with the message when it is refused.
//
// A pod one agent hands to the next (app/node/mode.cpp, on the successor's connection):
//   "pod UID GID PID VOLUME\n" + the pod's proxy environment as KEY=VALUE lines, attached: the stub's
//   connection, the join's four descriptors, then the pod's proxy's listening sockets
//   reply "taken\n" | "refused REASON\n"
// A proxy the agent has its zygote fork (app/node/zygote.h, on the zygote's socket):
//   "spawn UID GID PDEATHSIG DROPCAPS NCGROUPS\n" + the environment as KEY=VALUE lines, attached: the network
//   namespace, stdout, stderr, NCGROUPS cgroup.procs files to join, then those to hand on as 3, 4, ...
//   reply "spawned PID\n" with the proxy's pidfd | "failed REASON\n" (with a pidfd when there is a child to reap)
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "app/node/join.h"
#include "app/seqpacket.h"
#include "runtime/fd.h"
#include "runtime/spawn.h"

namespace sluice::app::node {

inline constexpr std::size_t kMaxVolumeBytes = 255;  // a CSI volume id, as the handover has always carried it

// A pod being served, as one agent hands it to the next.
struct PodHandover {
  ucred peer{};  // the stub's: its uid and gid (the proxy's user) and pid (whose cgroups the proxy joins)
  std::string volume;
  std::vector<std::string> env;  // the pod's proxy environment
  runtime::Fd connection;        // the stub's
  PodDescriptors pod;
  std::vector<runtime::Fd> listeners;
};
Outgoing encode_pod_handover(const ucred& peer, const std::string& volume, const std::vector<std::string>& env,
                             const runtime::Fd& connection, const PodDescriptors& pod,
                             const std::vector<runtime::Fd>& listeners);
Decoded<PodHandover> decode_pod_handover(Message m);

// What the zygote forks a proxy with: runtime::SpawnRequest's fields it honours (zygote.h).
struct SpawnOrder {
  int uid = -1, gid = -1;
  int parent_death_signal = 0;
  bool drop_capabilities = false;
  std::vector<std::string> env;
  runtime::Fd netns, out, err;
  std::vector<runtime::Fd> join_procs;  // cgroup.procs files
  std::vector<runtime::Fd> inherit;     // handed on as 3, 4, ...
  // The request, borrowing this order's descriptors.
  runtime::SpawnRequest request() const;
};
// `req`'s netns_fd, stdout_fd and stderr_fd must be set (Zygote::spawn checks).
Outgoing encode_spawn_order(const runtime::SpawnRequest& req);
Decoded<SpawnOrder> decode_spawn_order(Message m);

// The zygote's answer: a proxy (pid > 0, its pidfd) or an error, with the pidfd of a child that began and
// ended when there is one.
struct SpawnReply {
  pid_t pid = -1;
  runtime::Fd pidfd;
  std::string error;  // "" when spawned
};
Outgoing encode_spawn_reply(pid_t pid, const runtime::Fd& pidfd, const std::string& error);
// Never refuses: an answer that is neither is a SpawnReply with that error.
SpawnReply decode_spawn_reply(Message m);

}  // namespace sluice::app::node
