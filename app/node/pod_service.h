// A pod the agent serves: its stub's connection and the proxy the agent starts for the pod (app/node/mode.cpp
// for the whole agent, app/node/pod_identity.h for what a join must be). One thread a pod, for its life.
// Declared here so that its decisions (which joins it refuses and why, what it answers a stub and a
// successor) are tested alone (tests/unit/app/node_pod_service_test.cpp).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <future>
#include <string>
#include <vector>

#include "app/node/join.h"
#include "app/node/messages.h"
#include "app/seqpacket.h"
#include "runtime/fd.h"

namespace sluice::app::node {

struct Node;

class PodService {
 public:
  // A pod whose stub just connected to the socket of the pod published as `volume`.
  PodService(Node& node, runtime::Fd connection, std::string volume);
  // A pod a predecessor hands over.
  PodService(Node& node, PodHandover pod);
  ~PodService();  // no longer its publication's; wakes a join of the same pod that waits for this one
  PodService(const PodService&) = delete;
  PodService& operator=(const PodService&) = delete;

  // Reads the stub's join, checks it against what the node knows of the pod, starts the pod's proxy and
  // serves the pod until it is drained or gone. A join refused is answered "refused REASON".
  void run(Message join);
  // Starts the pod's new proxy on the sockets its old one listened on; `taken` gets the answer for the
  // predecessor ("taken\n" once the proxy listens). Then serves the pod as any other.
  void take_over(std::promise<std::string> taken);
  // The agent is stopping: drain the pod's proxy (its stub sees the connection close and joins again
  // when an agent is back).
  void stop();
  // The pod's volume went (the kubelet is done with the pod): its proxy ends at once.
  void end();

 private:
  std::string accept_join(Message join);
  void link();
  std::string start_proxy();
  void reap();
  void serve();
  bool hand_over();

  Node& node_;
  const runtime::Fd conn_;
  const std::string volume_;
  std::vector<std::string> env_;
  ucred peer_{};
  PodDescriptors pod_fds_;                  // the join's: network namespace, stdout, stderr, root directory
  std::vector<runtime::Fd> listeners_;      // the proxy's listening sockets, for a successor
  std::vector<runtime::Fd> cgroup_fds_;     // the stub's cgroups' cgroup.procs, which the proxy joins
  std::string pod_ = "?/?";
  std::atomic<pid_t> pid_{-1};
  runtime::Fd pidfd_;
  std::string last_exit_;
  std::atomic<bool> stopping_{false}, ended_{false};
  const runtime::Fd stop_event_;  // readable once stop() or end() was called
};

}  // namespace sluice::app::node
