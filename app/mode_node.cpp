// `sluice node`, the per-node agent; what a pod runs in queue-proxy's place is app/node/stub.cpp, and the
// protocol between them app/node/join.h.
//
// Who a pod is comes from the node, never from the pod. The kubelet publishes each pod's volume of sluice's
// (sluice-csi, CSI's NodePublishVolume, with the pod's namespace, name and UID) and the agent makes a socket
// for that one pod in the volume (app/node/publications.h); a join is accepted only there, only when its
// settings name that pod, its stub runs as a user other than root and the kernel puts the stub in the pod's
// cgroup (app/node/pod_identity.h). The agent is changed only over its control socket, root's alone
// (app/node/control.h). Each pod is then served by a `sluice sidecar` process started inside the pod's
// network namespace with the pod's settings, holding nothing the pod lacked: the stub's user, no capability
// (bounding set cleared, no_new_privs), the stub's cgroups (so the pod's limits bound and account for it as
// for queue-proxy), one worker unless the pod asks for more (SLUICE_NODE_POD_MAX_WORKERS). The stub's SIGTERM
// drains it; a pod whose stub is killed, or whose volume goes, is stopped.
//
// Restart without a lost request, as nginx's binary upgrade: a new agent started while one runs asks for a
// handover on the control socket. The old agent hands it the control socket, then each serving pod in
// turn: the stub's connection, the pod's descriptors and settings, and the listening sockets of the pod's
// proxy (each proxy hands its own to the agent once it listens, SLUICE_NODE_CHANNEL). The new agent makes
// every pod's socket anew from the records (in place of the old one's) and starts each pod's new proxy on
// the very listening sockets (SLUICE_LISTEN_FDS); once it listens the old proxy gets SIGQUIT: it stops
// accepting and finishes what is in flight. A connection is never refused meanwhile: the sockets stay open
// throughout, and whichever proxy accepts answers. The old agent exits once every pod has gone over.
//
// Between agents, on the control socket, SOCK_SEQPACKET:
//   new -> old  "handover GENERATION\n"
//   old -> new  "listener\n" with the control socket's listening descriptor | "refused REASON\n"
//   old -> new  "pod UID GID PID VOLUME\n" + the pod's environment as KEY=VALUE lines, with the stub's
//               connection, the join's four descriptors and the proxy's listening sockets attached (one pod
//               at a time; PID is the stub's, whose cgroups the new proxy joins)
//   new -> old  "taken\n" once the new proxy listens | "refused REASON\n" (the old agent keeps the pod)
// The old agent closes the connection once every pod it serves has gone over or ended.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "app/modes.h"
#include "app/node/control.h"
#include "app/node/join.h"
#include "app/node/node_socket.h"
#include "app/node/pod_identity.h"
#include "app/node/publications.h"
#include "app/node/zygote.h"
#include "app/options.h"
#include "common/config_error.h"
#include "common/log.h"
#include "runtime/cgroup_fs.h"
#include "runtime/spawn.h"

extern char** environ;

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace sluice::app {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using node::env_value;
using node::wait_readable;

std::string exit_text(const siginfo_t& info) {
  return info.si_code == CLD_EXITED ? "exited with code " + std::to_string(info.si_status)
                                    : "killed by signal " + std::to_string(info.si_status);
}

void close_all(std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

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
  s.control_socket = o.get_string("SLUICE_NODE_CONTROL_SOCKET", node::kDefaultControlSocket);
  if (s.control_socket.empty() || s.control_socket.front() != '/')
    throw ConfigError("SLUICE_NODE_CONTROL_SOCKET=\"" + s.control_socket + "\": expected an absolute path");
  s.state_dir = (fs::path(s.control_socket).parent_path() / "pods").string();
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

// A generation as a number; -1 for none.
long generation_number(const std::string& g) {
  char* end = nullptr;
  const long n = g.empty() || g == "-" ? -1 : std::strtol(g.c_str(), &end, 10);
  return end && *end == '\0' ? n : -1;
}

class PodService;

// A pod's socket, made when the kubelet published its volume.
struct Published {
  node::Publication publication;
  int listener = -1;
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
  int control = -1;            // the control socket
  std::map<std::string, Published> published;  // by volume id
  const int changed = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);  // the pods' sockets changed: poll anew

  // Readable (for good) once a successor asked for a handover: every serving pod then goes to it.
  const int handover = ::eventfd(0, EFD_CLOEXEC);
  std::mutex successor_mu;  // one pod at a time on the successor's connection
  int successor = -1;

  node::Zygote zygote;  // what pods' proxies are forked from (app/node/zygote.h)

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

// The cgroup.procs file of every cgroup the process `pid` is in (as this agent's mounts show them), opened
// for writing: a child writing "0" to each joins them all. Empty with `error` when one cannot be opened.
std::vector<int> cgroup_join_files(pid_t pid, std::string& error) {
  std::vector<int> fds;
  const std::string proc = slurp("/proc/" + std::to_string(pid) + "/cgroup");
  const auto dirs = runtime::cgroup::dirs_of(slurp("/proc/self/mountinfo"), proc);
  if (dirs.empty()) {
    error = "the stub's cgroups (/proc/" + std::to_string(pid) + "/cgroup) are not mounted in the agent";
    return fds;
  }
  for (const auto& dir : dirs) {
    const auto file = dir / "cgroup.procs";
    const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      error = "the stub's cgroup " + file.string() + ": " + std::strerror(errno);
      close_all(fds);
      return fds;
    }
    fds.push_back(fd);
  }
  return fds;
}

// One pod: its stub's connection, and the proxy serving it.
class PodService {
 public:
  // A pod whose stub just connected to the socket of the pod published as `volume`.
  PodService(Node& node, int connection, std::string volume) : node_(node), conn_(connection), volume_(std::move(volume)) {}
  // A pod a predecessor hands over: fds are the stub's connection, the join's four descriptors, then the
  // listening sockets of the pod's proxy.
  PodService(Node& node, std::vector<std::string> env, ucred peer, std::string volume, std::vector<int> fds)
      : node_(node), conn_(fds[0]), volume_(std::move(volume)), env_(std::move(env)), peer_(peer),
        pod_fds_(fds.begin() + 1, fds.begin() + 1 + node::kJoinDescriptors),
        listeners_(fds.begin() + 1 + node::kJoinDescriptors, fds.end()) {
    pod_ = env_value(env_, "SERVING_NAMESPACE") + "/" + env_value(env_, "SERVING_POD");
  }
  ~PodService() {
    {
      std::lock_guard lock(node_.mu);
      if (auto it = node_.published.find(volume_); it != node_.published.end() && it->second.service == this)
        it->second.service = nullptr;
    }
    ::close(conn_);
    close_all(pod_fds_);
    close_all(listeners_);
    close_all(cgroup_fds_);
    if (pidfd_ >= 0) ::close(pidfd_);
    ::close(stop_event_);
  }

  // Reads the stub's join, checks it against what the node knows of the pod, starts the pod's proxy and
  // serves the pod until it is drained or gone.
  void run(node::Message join) {
    if (const auto refusal = accept_join(std::move(join)); !refusal.empty()) {
      log::warn("pod refused").kv("pod", pod_).kv("volume", volume_).kv("reason", refusal);
      node::send_message(conn_, "refused " + refusal + "\n");
      return;
    }
    if (const auto error = start_proxy(); !error.empty()) {
      log::error("pod refused").kv("pod", pod_).kv("error", error);
      node::send_message(conn_, "refused " + error + "\n");
      return;
    }
    log::info("pod joined").kv("pod", pod_).kv("proxy_pid", static_cast<std::int64_t>(pid_.load()))
        .kv("uid", static_cast<std::int64_t>(peer_.uid));
    node::send_message(conn_, "joined\n");  // a proxy that ended meanwhile is reported next, "stopped"
    serve();
  }

  // Starts the pod's new proxy on the sockets its old one listened on; `taken` gets the answer for the
  // predecessor ("taken\n" once the proxy listens). Then serves the pod as any other.
  void take_over(std::promise<std::string> taken) {
    std::string error;
    cgroup_fds_ = cgroup_join_files(peer_.pid, error);
    if (error.empty()) {
      link();
      error = start_proxy();
    }
    if (!error.empty() || listeners_.empty()) {
      const std::string reason = error.empty() ? "the new proxy did not listen" : error;
      log::error("pod not taken over: its old proxy serves on").kv("pod", pod_).kv("error", reason);
      if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        reap();
      }
      taken.set_value("refused " + reason + "\n");
      return;
    }
    log::info("pod taken over").kv("pod", pod_).kv("proxy_pid", static_cast<std::int64_t>(pid_.load()))
        .kv("uid", static_cast<std::int64_t>(peer_.uid));
    taken.set_value("taken\n");
    serve();
  }

  // The agent is stopping: drain the pod's proxy (its stub sees the connection close and joins again
  // when an agent is back).
  void stop() {
    stopping_ = true;
    ::eventfd_write(stop_event_, 1);
    if (const pid_t pid = pid_; pid > 0) ::kill(pid, SIGTERM);
  }
  // The pod's volume went (the kubelet is done with the pod): its proxy ends at once.
  void end() {
    ended_ = true;
    ::eventfd_write(stop_event_, 1);
    if (const pid_t pid = pid_; pid > 0) ::kill(pid, SIGKILL);
  }

 private:
  // "" once the join is one this pod's socket may accept, with env_, peer_, pod_fds_ and cgroup_fds_ set.
  std::string accept_join(node::Message join) {
    auto env = node::parse_join(join.text);
    if (!env || join.fds.size() != node::kJoinDescriptors) {
      join.close_fds();
      return "not a join: expected \"join\" lines, the pod's network namespace, stdout, stderr and root directory";
    }
    pod_fds_ = std::move(join.fds);
    pod_ = env_value(*env, "SERVING_NAMESPACE") + "/" + env_value(*env, "SERVING_POD");
    socklen_t peer_size = sizeof peer_;
    if (::getsockopt(conn_, SOL_SOCKET, SO_PEERCRED, &peer_, &peer_size) != 0)
      return std::string("the stub's credentials: ") + std::strerror(errno);
    // The pod's proxy runs as the stub does (the queue-proxy container's user), and never as root.
    if (peer_.uid == 0)
      return "the stub runs as root (uid 0): a pod's proxy runs as its stub's user, which must not be root "
             "(run the queue-proxy container as a non-root user, as Knative does)";
    node::PodIdentity pod;
    {
      std::lock_guard lock(node_.mu);
      const auto it = node_.published.find(volume_);
      if (it == node_.published.end()) return "the pod's volume is no longer published";
      pod = it->second.publication.pod;
    }
    if (auto other = node::join_names_other_pod(pod, *env); !other.empty()) return other;
    if (node_.settings.verify_cgroup &&
        !node::cgroup_is_pods(slurp("/proc/" + std::to_string(peer_.pid) + "/cgroup"), pod.uid))
      return "the stub (pid " + std::to_string(peer_.pid) + ") is not in pod " + pod.uid + "'s cgroup";
    auto shaped = node::proxy_environment(std::move(*env), node_.settings.workers);
    if (auto* reason = std::get_if<std::string>(&shaped)) return *reason;
    env_ = std::move(std::get<std::vector<std::string>>(shaped));
    std::string error;
    cgroup_fds_ = cgroup_join_files(peer_.pid, error);
    if (!error.empty()) return error;
    {
      std::lock_guard lock(node_.mu);
      if (node_.pods.size() > node_.settings.max_pods)
        return "this agent serves " + std::to_string(node_.settings.max_pods) + " pods already (SLUICE_NODE_MAX_PODS)";
      const auto it = node_.published.find(volume_);
      if (it == node_.published.end()) return "the pod's volume is no longer published";
      if (it->second.service != nullptr && it->second.service != this) return "the pod is joined already";
    }
    link();
    return {};
  }

  // This service is its publication's (unpublish ends it).
  void link() {
    std::lock_guard lock(node_.mu);
    if (auto it = node_.published.find(volume_); it != node_.published.end()) it->second.service = this;
  }

  // Starts the pod's proxy: inside the pod's namespace and cgroups, with its settings, as its stub's user and
  // with no capability, on the listening sockets in listeners_ (a predecessor's), and waits until it
  // listens: listeners_ are then its sockets. An error text when it could not start; a proxy that exited
  // before listening is left for serve() to report.
  std::string start_proxy() {
    int channel[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel) != 0)
      return std::string("socketpair: ") + std::strerror(errno);
    runtime::SpawnRequest req;
    req.uid = static_cast<int>(peer_.uid);
    req.gid = static_cast<int>(peer_.gid);
    req.drop_capabilities = true;
    req.join_procs_fds = cgroup_fds_;
    req.argv = {"/proc/self/exe", "sidecar"};
    req.env = env_;
    req.netns_fd = pod_fds_[0];
    // An agent that dies (killed, out of memory) takes its pods' proxies along rather than leave them
    // serving with nobody to drain them: the stubs join the next agent, which starts them afresh. This
    // thread lives until the proxy is reaped.
    req.parent_death_signal = SIGKILL;
    req.stdout_fd = pod_fds_[1];  // the pod's log, as the stub's own
    req.stderr_fd = pod_fds_[2];
    // Descriptor 3: the pod's file system (the stub's root), for the files Knative mounts into the pod,
    // its root by /proc/self/fd/3. 4: where the proxy hands back its listening sockets. 5 on: those it
    // takes over.
    req.inherit_fds = {pod_fds_[3], channel[1]};
    req.inherit_fds.insert(req.inherit_fds.end(), listeners_.begin(), listeners_.end());
    req.env.push_back("SLUICE_POD_ROOT=" + std::string(node::kPodRootInProxy));
    req.env.push_back("SLUICE_NODE_CHANNEL=4");
    if (!listeners_.empty()) {
      std::string fds;
      for (std::size_t i = 0; i < listeners_.size(); ++i) fds += (i ? "," : "") + std::to_string(5 + i);
      req.env.push_back("SLUICE_LISTEN_FDS=" + fds);
    }
    // Forked from the zygote (its libraries' pages shared with every other pod's proxy); exec'ed afresh
    // when there is none.
    runtime::Spawned proxy;
    const bool forked = node_.zygote.running();
    if (forked) proxy = node_.zygote.spawn(req);
    if (!node_.zygote.running()) {
      if (forked) log::warn("the zygote is gone: pods' proxies are exec'ed afresh").kv("pod", pod_);
      proxy = runtime::spawn_process(req);
    }
    ::close(channel[1]);
    if (proxy.pid < 0) {
      ::close(channel[0]);
      return proxy.error;
    }
    pid_ = proxy.pid;
    pidfd_ = proxy.pidfd;
    bool agent_stopping;
    {
      std::lock_guard lock(node_.mu);
      agent_stopping = node_.stopping;
    }
    if (agent_stopping) stop();  // it began meanwhile
    // The proxy's sockets replace those it took over (the same sockets; a proxy that ended first: none).
    close_all(listeners_);
    if (wait_readable({channel[0], pidfd_}, -1) == 0)
      if (auto m = node::receive_message(channel[0]); m && m->text == "listening\n") listeners_ = std::move(m->fds);
    ::close(channel[0]);
    return {};
  }

  void reap() {
    siginfo_t info{};
    ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_), &info, WEXITED);
    last_exit_ = exit_text(info);
  }

  void serve() {
    std::vector<int> watched = {conn_, pidfd_, stop_event_, node_.handover};
    while (true) {
      const int ready = wait_readable(watched, -1);
      if (ready == 3) {
        if (hand_over()) return;
        watched.pop_back();  // refused: this agent serves the pod on
        continue;
      }
      if (ready == 2) {
        if (ended_) {
          log::info("pod's volume unpublished: its proxy ends").kv("pod", pod_);
          reap();
          node::send_message(conn_, "stopped the pod's volume was unpublished\n");
          return;
        }
        // The agent is stopping and the proxy draining: its ports must close when its listeners do.
        close_all(listeners_);
        watched.resize(2);
        continue;
      }
      if (ready == 1) {
        reap();
        if (stopping_) return;  // the connection closes: the stub joins the next agent
        log::warn("pod's proxy stopped").kv("pod", pod_).kv("status", last_exit_);
        node::send_message(conn_, "stopped " + last_exit_ + "\n");
        return;
      }
      break;
    }
    auto m = node::receive_message(conn_);
    if (m && m->text == "drain\n") {
      // The pod goes away: its proxy drains as queue-proxy does, for as long as that takes (the pod's
      // grace period bounds it), and its ports close when its listeners do, as queue-proxy's (nobody
      // takes them over now).
      close_all(listeners_);
      ::kill(pid_, SIGTERM);
      log::info("pod draining").kv("pod", pod_);
      if (wait_readable({pidfd_, conn_}, -1) == 1) {
        // The stub went away mid-drain: the kubelet's SIGKILL at the end of the grace period, or a second
        // signal. Either ends queue-proxy at once.
        log::info("pod left while draining").kv("pod", pod_);
        ::kill(pid_, SIGKILL);
      }
      reap();
      log::info("pod drained").kv("pod", pod_).kv("status", last_exit_);
      node::send_message(conn_, "drained\n");
      return;
    }
    // The stub is gone: the pod was killed, or its stub got a second signal (which ends queue-proxy at once)
    // or crashed and will join again. Its proxy ends at once too.
    if (m) m->close_fds();
    log::info("pod left").kv("pod", pod_);
    ::kill(pid_, SIGKILL);
    reap();
  }

  // Hands the pod to the successor; true once it took it, and this pod's proxy has finished what it had
  // in flight.
  bool hand_over() {
    if (listeners_.empty()) return false;  // its proxy never said where it listens
    std::optional<node::Message> reply;
    {
      std::lock_guard lock(node_.successor_mu);
      std::string text = "pod " + std::to_string(peer_.uid) + " " + std::to_string(peer_.gid) + " " +
                         std::to_string(peer_.pid) + " " + volume_ + "\n";
      for (const auto& kv : env_) text += kv + "\n";
      std::vector<int> fds = {conn_};
      fds.insert(fds.end(), pod_fds_.begin(), pod_fds_.end());
      fds.insert(fds.end(), listeners_.begin(), listeners_.end());
      if (node::send_message(node_.successor, text, fds)) reply = node::receive_message(node_.successor);
    }
    if (reply && reply->text == "taken\n") {
      // The new proxy accepts on the same sockets: this one stops accepting and finishes what it has.
      log::info("pod handed over").kv("pod", pod_);
      ::kill(pid_, SIGQUIT);
      reap();
      log::info("pod's old proxy finished").kv("pod", pod_).kv("status", last_exit_);
      return true;
    }
    if (reply) reply->close_fds();
    log::error("pod not handed over: this agent serves it on").kv("pod", pod_)
        .kv("reason", reply ? node::after(reply->text, "refused") : std::string("the new agent went away"));
    return false;
  }

  Node& node_;
  const int conn_;
  const std::string volume_;
  std::vector<std::string> env_;
  ucred peer_{};
  std::vector<int> pod_fds_;     // the join's: network namespace, stdout, stderr, root directory
  std::vector<int> listeners_;   // the proxy's listening sockets, for a successor
  std::vector<int> cgroup_fds_;  // the stub's cgroups' cgroup.procs, which the proxy joins
  std::string pod_ = "?/?";
  std::atomic<pid_t> pid_{-1};
  int pidfd_ = -1;
  std::string last_exit_;
  std::atomic<bool> stopping_{false}, ended_{false};
  const int stop_event_ = ::eventfd(0, EFD_CLOEXEC);  // readable once stop() or end() was called
};

// Runs `pod` on this thread while it is listed for stop().
template <typename Run>
void serve_listed(Node& node, PodService& pod, Run run) {
  {
    std::lock_guard lock(node.mu);
    node.pods.insert(&pod);
  }
  run();
  std::lock_guard lock(node.mu);
  node.pods.erase(&pod);
}

// A connection to a pod's socket: the pod's stub, joining. It must say so within the join timeout.
void serve_join(Node& node, const std::string& volume, int conn) {
  std::optional<node::Message> first;
  if (wait_readable({conn}, node.settings.join_timeout_ms) == 0) first = node::receive_message(conn);
  {
    std::lock_guard lock(node.mu);
    if (auto it = node.published.find(volume); it != node.published.end()) --it->second.unjoined;
  }
  if (!first) {
    log::warn("a connection to a pod's socket sent no join").kv("volume", volume)
        .kv("timeout_ms", static_cast<std::int64_t>(node.settings.join_timeout_ms));
    ::close(conn);
    return;
  }
  PodService pod(node, conn, volume);
  serve_listed(node, pod, [&] { pod.run(std::move(*first)); });
}

// Makes the socket of a pod the kubelet published, and keeps its record: "" or why not.
std::string publish(Node& node, const node::Publication& p) {
  if (auto error = node::publication_error(p); !error.empty()) return error;
  std::lock_guard lock(node.mu);
  if (auto it = node.published.find(p.volume); it != node.published.end()) {
    const auto& known = it->second.publication;
    if (known.target == p.target && known.pod.uid == p.pod.uid && known.pod.name == p.pod.name &&
        known.pod.namespace_name == p.pod.namespace_name)
      return {};  // published already: CSI's calls are idempotent
    return "volume " + p.volume + " is published already for another pod or path";
  }
  for (const auto& [volume, other] : node.published)
    if (other.publication.target == p.target) return "target path " + p.target + " is volume " + volume + "'s";
  if (node.published.size() >= node.settings.max_pods)
    return "this agent serves " + std::to_string(node.settings.max_pods) + " pods already (SLUICE_NODE_MAX_PODS)";
  std::string error;
  if (!node::save_record(node.settings.state_dir, p, error)) return error;
  const int fd = node::make_pod_socket(p, error);
  if (fd < 0) {
    node::remove_record(node.settings.state_dir, p.volume);
    return error;
  }
  node.published[p.volume] = Published{p, fd, 0, nullptr};
  ::eventfd_write(node.changed, 1);
  log::info("pod published").kv("pod", p.pod.namespace_name + "/" + p.pod.name).kv("uid", p.pod.uid)
      .kv("volume", p.volume).kv("socket", p.socket_path());
  return {};
}

void unpublish(Node& node, const std::string& volume, const std::string& target) {
  std::lock_guard lock(node.mu);
  std::string dir = target;
  if (auto it = node.published.find(volume); it != node.published.end()) {
    dir = it->second.publication.target;
    ::close(it->second.listener);
    if (it->second.service) it->second.service->end();
    log::info("pod unpublished").kv("pod", it->second.publication.pod.namespace_name + "/" + it->second.publication.pod.name)
        .kv("volume", volume);
    node.published.erase(it);
    ::eventfd_write(node.changed, 1);
  }
  node::remove_record(node.settings.state_dir, volume);
  if (!dir.empty() && dir.front() == '/') {
    ::unlink((dir + "/" + std::string(node::kPodSocketName)).c_str());
    ::rmdir(dir.c_str());  // the directory CSI's publish made (the kubelet removes it too, if it is left)
  }
}

// Every pod the records name, its socket made anew (in place of any an earlier agent left).
void republish_recorded(Node& node) {
  for (const auto& p : node::load_records(node.settings.state_dir)) {
    std::error_code ec;
    if (!fs::is_directory(p.target, ec)) {
      log::info("a recorded pod's volume is gone: forgotten").kv("volume", p.volume).kv("target", p.target);
      node::remove_record(node.settings.state_dir, p.volume);
      continue;
    }
    std::string error;
    const int fd = node::make_pod_socket(p, error);
    if (fd < 0) {
      log::error("a recorded pod's socket could not be made").kv("volume", p.volume).kv("error", error);
      continue;
    }
    std::lock_guard lock(node.mu);
    node.published[p.volume] = Published{p, fd, 0, nullptr};
  }
  ::eventfd_write(node.changed, 1);
}

void set_ready(Node& node) {
  {
    std::lock_guard lock(node.mu);
    node.ready = true;
  }
  if (!node.settings.ready_file.empty()) {
    std::ofstream(node.settings.ready_file) << ::getpid() << "\n";
  }
  log::info("node agent ready: it holds every pod it was handed");
}

// A command on the control socket, from root (checked before this is called).
void serve_control(Node& node, int conn) {
  std::optional<node::Message> m;
  if (wait_readable({conn}, node.settings.join_timeout_ms) == 0) m = node::receive_message(conn);
  if (!m) {
    ::close(conn);
    return;
  }
  m->close_fds();
  std::istringstream in(m->text);
  std::string word;
  in >> word;
  if (word == "handover") {
    std::string generation;
    in >> generation;
    const long theirs = generation_number(generation), ours = generation_number(node.settings.generation);
    std::lock_guard lock(node.successor_mu);
    std::string refusal;
    if (node.successor >= 0) refusal = "another agent is taking over already";
    else if (theirs >= 0 && ours >= 0 && theirs < ours)
      refusal = "generation " + std::to_string(theirs) + " is older than this agent's " + std::to_string(ours);
    if (!refusal.empty()) {
      log::warn("handover refused").kv("reason", refusal);
      node::send_message(conn, "refused " + refusal + "\n");
      ::close(conn);
      return;
    }
    const int fds[] = {node.control};
    if (!node::send_message(conn, "listener\n", fds)) {
      ::close(conn);
      return;
    }
    log::info("a new agent is taking over: handing it every pod");
    node.successor = conn;
    ::eventfd_write(node.handover, 1);
    return;
  }
  std::string reply;
  if (word == "publish") {
    node::Publication p;
    in >> p.volume >> p.pod.namespace_name >> p.pod.name >> p.pod.uid >> p.target;
    const auto error = publish(node, p);
    reply = error.empty() ? "published " + p.socket_path() + "\n" : "refused " + error + "\n";
    if (!error.empty()) log::warn("publish refused").kv("volume", p.volume).kv("reason", error);
  } else if (word == "unpublish") {
    std::string volume, target;
    in >> volume >> target;
    unpublish(node, volume, target);
    reply = "unpublished\n";
  } else if (word == "ready") {
    std::lock_guard lock(node.mu);
    reply = node.ready ? "ready\n" : "starting\n";
  } else {
    reply = "refused unknown command \"" + word + "\"\n";
  }
  node::send_message(conn, reply);
  ::close(conn);
}

// A new agent's side of the handover: takes each pod the running agent hands over, on a thread of its own.
void take_pods(Node& node, int predecessor) {
  while (auto m = node::receive_message(predecessor)) {
    const auto head_end = m->text.find('\n');
    unsigned uid = 0, gid = 0;
    int pid = 0;
    char volume[256] = {};
    auto env = node::parse_join("join\n" + (head_end == std::string::npos ? std::string() : m->text.substr(head_end + 1)));
    if (std::sscanf(m->text.c_str(), "pod %u %u %d %255s\n", &uid, &gid, &pid, volume) != 4 || !env ||
        m->fds.size() < 1 + node::kJoinDescriptors) {
      m->close_fds();
      node::send_message(predecessor, "refused not a pod: expected \"pod UID GID PID VOLUME\", its settings and descriptors\n");
      continue;
    }
    ucred peer{};
    peer.uid = uid;
    peer.gid = gid;
    peer.pid = pid;
    std::promise<std::string> taken;
    auto answer = taken.get_future();
    node.start_thread([&node, taken = std::move(taken), env = std::move(*env), peer, volume = std::string(volume),
                       fds = std::move(m->fds)]() mutable {
      PodService pod(node, std::move(env), peer, std::move(volume), std::move(fds));
      serve_listed(node, pod, [&] { pod.take_over(std::move(taken)); });
    });
    node::send_message(predecessor, answer.get());
  }
  ::close(predecessor);
  log::info("every pod the previous agent served is here or ended");
}

// The control socket a running agent hands over, or -1 when none runs at `path`. Throws when one runs
// and refuses, but for an older generation's agent (a DaemonSet's restarted old pod), which idles instead:
// `older` is set.
int take_over_from_running_agent(const AgentSettings& s, int& predecessor, bool& older) {
  std::string error;
  int conn = -1;
  const std::string generation = s.generation.empty() ? "-" : s.generation;
  auto reply = node::control_command(s.control_socket, "handover " + generation + "\n", error, conn);
  if (conn < 0) return -1;  // nobody listens
  if (!reply || reply->text != "listener\n" || reply->fds.size() != 1) {
    ::close(conn);
    const std::string why = reply ? node::after(reply->text, "refused") : error;
    if (reply) for (int fd : reply->fds) ::close(fd);
    if (why.find("is older than this agent's") != std::string::npos) {
      older = true;
      return -1;
    }
    throw ConfigError("SLUICE_NODE_CONTROL_SOCKET=\"" + s.control_socket + "\": an agent runs there and did not hand over (" + why + ")");
  }
  predecessor = conn;
  return reply->fds[0];
}

// A stub's /proc/PID/cgroup reads relative to the reader's cgroup namespace: the agent reads them from the
// host's (its pod's hostPID shows the host's init as pid 1), where they name the same directories as the
// host's cgroup mount it is given. Called before any thread starts: every thread inherits it.
void enter_host_cgroup_namespace() {
  struct stat own {}, host {};
  if (::stat("/proc/self/ns/cgroup", &own) != 0 || ::stat("/proc/1/ns/cgroup", &host) != 0 || own.st_ino == host.st_ino)
    return;
  const int ns = ::open("/proc/1/ns/cgroup", O_RDONLY | O_CLOEXEC);
  if (ns < 0 || ::setns(ns, CLONE_NEWCGROUP) != 0)
    log::warn("the host's cgroup namespace could not be entered: a stub's cgroup may not be found")
        .kv("error", std::strerror(errno));
  else
    log::info("entered the host's cgroup namespace");
  if (ns >= 0) ::close(ns);
}

// The CSI plugin (sluice-csi, csi/main.cpp), this agent's child: the kubelet's way to publish each pod's
// volume, passed on to the control socket. Ended with the agent (parent-death signal, SIGTERM).
runtime::Spawned start_csi_plugin(const AgentSettings& s) {
  std::error_code ec;
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  runtime::SpawnRequest req;
  req.argv = {((ec ? fs::path(".") : self.parent_path()) / "sluice-csi").string()};
  for (char** kv = environ; *kv; ++kv)
    if (!std::string_view(*kv).starts_with("SLUICE_NODE_CONTROL_SOCKET=") && !std::string_view(*kv).starts_with("SLUICE_CSI_SOCKET="))
      req.env.emplace_back(*kv);
  req.env.push_back("SLUICE_NODE_CONTROL_SOCKET=" + s.control_socket);
  req.env.push_back("SLUICE_CSI_SOCKET=" + s.csi_socket);
  req.stdout_fd = STDOUT_FILENO;
  req.stderr_fd = STDERR_FILENO;
  req.parent_death_signal = SIGTERM;
  auto plugin = runtime::spawn_process(req);
  if (plugin.pid < 0) log::error("the CSI plugin did not start: no pod can be published").kv("error", plugin.error);
  else log::info("CSI plugin started").kv("pid", static_cast<std::int64_t>(plugin.pid)).kv("socket", s.csi_socket);
  return plugin;
}

// `sluice node ready|publish|unpublish ...`: a command to the running agent, as root (the kubelet's
// readiness probe; tests and hand use standing in for sluice-csi).
int node_command(const AgentSettings& s, Args args) {
  if (args[0] == "ready" && !s.ready_file.empty()) return fs::exists(s.ready_file) ? 0 : 1;
  std::string command;
  for (auto a : args) command += (command.empty() ? "" : " ") + std::string(a);
  std::string error;
  int conn = -1;
  auto reply = node::control_command(s.control_socket, command + "\n", error, conn);
  if (conn >= 0) ::close(conn);
  if (!reply) {
    std::fprintf(stderr, "sluice node %s: %s: %s\n", std::string(args[0]).c_str(), s.control_socket.c_str(), error.c_str());
    return 1;
  }
  for (int fd : reply->fds) ::close(fd);
  std::fputs(reply->text.c_str(), stdout);
  return reply->text.rfind("refused", 0) == 0 || reply->text == "starting\n" ? 1 : 0;
}

}  // namespace

int run_node(Args args) {
  const bool command = !args.empty() && (args[0] == "ready" || args[0] == "publish" || args[0] == "unpublish");
  Options o(agent_options(), process_env(), command ? Args{} : args);
  if (o.help_requested()) {
    std::fputs((o.help_text("node") + "\n  sluice node ready | publish VOLUME NAMESPACE NAME UID TARGET | unpublish VOLUME TARGET\n"
                "    a command to the running agent over its control socket (root only)\n").c_str(), stdout);
    return 0;
  }
  Node node;
  node.settings = agent_settings(o);
  if (command) return node_command(node.settings, args);
  const AgentSettings& s = node.settings;
  enter_host_cgroup_namespace();
  const int signals = node::signal_descriptor();
  const std::string control_dir = fs::path(s.control_socket).parent_path().string();
  if (const auto error = node::secure_control_directory(control_dir); !error.empty())
    throw ConfigError("SLUICE_NODE_CONTROL_SOCKET=\"" + s.control_socket + "\": " + error);
  std::error_code ec;
  fs::create_directories(s.state_dir, ec);
  if (!s.ready_file.empty()) fs::remove(s.ready_file, ec);

  int predecessor = -1;
  bool older = false;
  node.control = take_over_from_running_agent(s, predecessor, older);
  if (older) {
    // A DaemonSet's old pod whose agent handed over and exited, restarted by its kubelet: the newer agent
    // serves every pod; this one stays unready until its pod is deleted.
    log::info("a newer agent serves this node: idle until SIGTERM").kv("generation", s.generation);
    wait_readable({signals}, -1);
    return 0;
  }
  if (node.control < 0) {
    ::unlink(s.control_socket.c_str());  // an earlier agent's, which no longer answers
    node.control = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (node.control < 0 || node::unix_bind(node.control, s.control_socket) != 0 ||
        ::chmod(s.control_socket.c_str(), 0600) != 0 || ::listen(node.control, 16) != 0)
      throw ConfigError("SLUICE_NODE_CONTROL_SOCKET=\"" + s.control_socket + "\": " + std::strerror(errno));
  }
  {
    // This thread lives as long as the agent: the zygote's parent-death signal follows it.
    std::vector<std::string> env;
    for (char** kv = environ; *kv; ++kv) env.emplace_back(*kv);
    if (const auto error = node.zygote.start(env); !error.empty())
      log::warn("no zygote: each pod's proxy is exec'ed afresh").kv("error", error);
  }
  // Every pod the kubelet published gets its socket (anew, in place of a predecessor's).
  republish_recorded(node);
  runtime::Spawned csi;
  auto last_csi_start = std::chrono::steady_clock::now();
  if (!s.csi_socket.empty()) csi = start_csi_plugin(s);
  log::info("node agent listening").kv("control_socket", s.control_socket).kv("took_over", predecessor >= 0)
      .kv("pods_published", static_cast<std::int64_t>(node.published.size()));

  // Pods the running agent hands over, if one ran; ready once they are here.
  std::thread taking;
  if (predecessor >= 0) {
    taking = std::thread([&node, predecessor] {
      take_pods(node, predecessor);
      set_ready(node);
    });
  } else {
    set_ready(node);
  }

  // The control socket, signals, the handover, changes to the pods' sockets, then each pod's socket.
  enum { kControl, kSignals, kHandover, kChanged, kCsi, kPods };
  int ready = kControl;
  bool told_full = false;
  while (true) {
    std::vector<int> watched = {node.control, signals, node.handover, node.changed, csi.pidfd};
    std::vector<std::string> volumes;
    {
      std::lock_guard lock(node.mu);
      for (const auto& [volume, p] : node.published) {
        watched.push_back(p.listener);
        volumes.push_back(volume);
      }
    }
    ready = wait_readable(watched, -1);
    if (ready == kSignals || ready == kHandover) break;
    if (ready == kChanged) {
      eventfd_t ignored;
      ::eventfd_read(node.changed, &ignored);
      continue;
    }
    if (ready == kCsi) {
      // It died: started again (at most once a second), so that pods can still be published.
      siginfo_t info{};
      ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(csi.pidfd), &info, WEXITED);
      ::close(csi.pidfd);
      log::error("the CSI plugin stopped: starting it again").kv("status", exit_text(info));
      std::this_thread::sleep_until(last_csi_start + 1s);
      last_csi_start = std::chrono::steady_clock::now();
      csi = start_csi_plugin(s);
      continue;
    }
    if (ready == kControl) {
      const int conn = ::accept4(node.control, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      long uid = -1;
      if (node::peer_is_root(conn, uid)) {
        node.start_thread([&node, conn] { serve_control(node, conn); });
        continue;
      }
      log::warn("control connection refused: only root may command the agent").kv("peer_uid", static_cast<std::int64_t>(uid));
      // Its command is read first (within the timeout): a socket closed with a message unread resets the
      // peer's side, which would lose the refusal.
      node.start_thread([&node, conn] {
        if (wait_readable({conn}, node.settings.join_timeout_ms) == 0)
          if (auto m = node::receive_message(conn)) m->close_fds();
        node::send_message(conn, "refused only root may command the agent\n");
        ::close(conn);
      });
      continue;
    }
    if (ready < kPods) continue;
    const std::string& volume = volumes[static_cast<std::size_t>(ready - kPods)];
    const int listener = watched[static_cast<std::size_t>(ready)];
    // Every connection waiting, each within the pod's cap on those that have not joined yet.
    for (int conn; (conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
      bool admitted = false;
      {
        std::lock_guard lock(node.mu);
        auto it = node.published.find(volume);
        if (it != node.published.end() && it->second.unjoined < s.max_unjoined) {
          ++it->second.unjoined;
          admitted = true;
        }
      }
      if (!admitted) {
        if (!told_full) log::warn("a pod's socket has too many connections that have not joined: closing more")
                            .kv("volume", volume).kv("max_unjoined", static_cast<std::int64_t>(s.max_unjoined));
        told_full = true;
        ::close(conn);
        continue;
      }
      told_full = false;
      node.start_thread([&node, volume, conn] { serve_join(node, volume, conn); });
    }
  }
  const bool handed_over = ready == kHandover;
  {
    std::lock_guard lock(node.mu);
    for (auto& [volume, p] : node.published) ::close(p.listener);  // the successor made them anew
    node.published.clear();
  }
  ::close(node.control);
  if (handed_over) {
    // Each pod goes over from its own thread; one draining ends here first.
    log::info("handing over: this agent accepts no more pods");
  } else {
    log::info("node agent stopping: draining every pod");
    ::unlink(s.control_socket.c_str());
    std::lock_guard lock(node.mu);
    node.stopping = true;
    for (auto* pod : node.pods) pod->stop();
  }
  if (!s.ready_file.empty()) fs::remove(s.ready_file, ec);
  if (csi.pid > 0) {
    ::kill(csi.pid, SIGTERM);
    siginfo_t info{};
    ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(csi.pidfd), &info, WEXITED);
    ::close(csi.pidfd);
  }
  if (taking.joinable()) taking.join();
  {
    std::unique_lock lock(node.mu);
    node.cv.wait(lock, [&] { return node.threads == 0; });
  }
  if (handed_over) {
    ::close(node.successor);
    log::info("handed over: the new agent serves every pod");
  }
  log::info("stopped");
  return 0;
}

}  // namespace sluice::app
