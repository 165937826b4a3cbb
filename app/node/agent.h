// The per-node agent's shared state and its parts (app/node/mode.cpp runs them): the settings, the pods'
// sockets (one per published pod, app/node/publications.h), the pods being served (app/node/pod_service.h),
// and the control socket's commands (app/node/agent_control.cpp, protocol in app/node/control.h).
#pragma once

#include <sys/eventfd.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "app/node/pod_identity.h"
#include "app/node/publications.h"
#include "app/node/zygote.h"
#include "app/options.h"
#include "runtime/fd.h"

namespace sluice::app::node {

// The agent's settings (`sluice node --help`).
struct AgentSettings {
  std::string control_socket;
  std::string state_dir;  // the pods' records: the control socket's directory's pods/
  int join_timeout_ms = 5000;
  unsigned max_unjoined = 4;  // per pod's socket
  unsigned max_pods = 250;
  node::ProxyEnvLimits workers;
  bool verify_cgroup = true;
  std::string ready_file;
  std::string generation;  // "" for none
  std::string csi_socket;  // "" for no CSI plugin
};

// `sluice node`'s options, and the settings they make (throws ConfigError naming the key).
std::vector<OptionSpec> agent_options();
AgentSettings agent_settings(const Options& o);
// A generation as a number; -1 for none.
long generation_number(const std::string& g);

class PodService;

// A pod's socket, made when the kubelet published its volume.
struct Published {
  Publication publication;
  runtime::Fd listener;
  unsigned unjoined = 0;           // connections accepted that have not joined yet
  PodService* service = nullptr;   // the pod's, once joined
};

// What every thread shares.
struct Node {
  AgentSettings settings;
  std::mutex mu;
  std::condition_variable cv;
  std::set<PodService*> pods;  // those serving (or starting to), for stop()
  int threads = 0;             // connection threads still running
  bool stopping = false;       // SIGTERM: every pod drains
  bool ready = false;          // holds every pod it was handed
  runtime::Fd control;         // the control socket (listening); closed under successor_mu
  std::map<std::string, Published> published;  // by volume id
  const runtime::Fd changed{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};  // the pods' sockets changed: poll anew

  // Readable (for good) once a successor asked for a handover: every serving pod then goes to it.
  const runtime::Fd handover{::eventfd(0, EFD_CLOEXEC)};
  std::mutex successor_mu;  // one pod at a time on the successor's connection
  runtime::Fd successor;    // that connection, once a successor asked

  Zygote zygote;  // what pods' proxies are forked from (app/node/zygote.h)

  // Runs `work` on a thread of its own, counted until it ends.
  template <typename Work>
  void start_thread(Work work) {
    {
      std::lock_guard lock(mu);
      ++threads;
    }
    std::thread([this, work = std::move(work)]() mutable {
      work();
      std::lock_guard lock(mu);
      --threads;
      cv.notify_all();
    }).detach();
  }
};


// The pods' side (pod_service.cpp). A connection to the pod's socket published as `volume`: the pod's stub,
// which must send its join within the join timeout; served on this thread until the pod ends.
void serve_join(Node& node, const std::string& volume, runtime::Fd conn);
// A new agent's side of the handover: takes each pod the running agent hands over, each on a thread of its
// own, until the predecessor closes the connection.
void take_pods(Node& node, runtime::Fd predecessor);
// The agent stops: the pod's proxy drains (its stub joins the next agent).
void stop_pod(PodService& pod);
// The pod's volume went: its proxy ends at once.
void end_pod(PodService& pod);

// The control socket's side (agent_control.cpp).
// Makes the socket of a pod the kubelet published, and keeps its record: "" or why not.
std::string publish(Node& node, const Publication& p);
void unpublish(Node& node, const std::string& volume, const std::string& target);
// Every pod the records name, its socket made anew (in place of any an earlier agent left).
void republish_recorded(Node& node);
// The agent holds every pod it was handed: SLUICE_NODE_READY_FILE is written.
void set_ready(Node& node);
// A command on the control socket, from root (checked before this is called).
void serve_control(Node& node, runtime::Fd conn);
// The control socket a running agent hands over (`predecessor` gets the connection its pods come on), or
// none when no agent runs there. Throws when one runs and refuses, but for an older generation's agent (a
// DaemonSet's restarted old pod), which idles instead: `older` is set.
runtime::Fd take_over_from_running_agent(const AgentSettings& s, runtime::Fd& predecessor, bool& older);

}  // namespace sluice::app::node
