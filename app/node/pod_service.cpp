// A pod the agent serves: its stub's connection and the proxy it starts for the pod (see app/node/mode.cpp
// for the whole agent, app/node/pod_identity.h for what a join must be). One thread a pod, for its life.
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "app/node/agent.h"
#include "app/node/join.h"
#include "app/node/node_socket.h"
#include "common/log.h"
#include "common/thread_cache.h"
#include "runtime/cgroup_fs.h"
#include "runtime/spawn.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace sluice::app::node {
namespace {

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

}  // namespace

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
    node_.cv.notify_all();  // a join of the same pod may wait for this one to end
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
    if (peer_.pid == 0) return "the stub's process is not visible to the agent (run the agent with hostPID)";
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
      std::unique_lock lock(node_.mu);
      if (node_.pods.size() > node_.settings.max_pods)
        return "this agent serves " + std::to_string(node_.settings.max_pods) + " pods already (SLUICE_NODE_MAX_PODS)";
      // A stub that comes back (its container restarted) can join before the agent has ended the service of
      // its previous connection, which is ending: that one is waited for, within the join timeout.
      const auto other_service = [&] {
        const auto it = node_.published.find(volume_);
        return it != node_.published.end() && it->second.service != nullptr && it->second.service != this;
      };
      node_.cv.wait_for(lock, std::chrono::milliseconds(node_.settings.join_timeout_ms), [&] { return !other_service(); });
      if (node_.published.find(volume_) == node_.published.end()) return "the pod's volume is no longer published";
      if (other_service()) return "the pod is joined already";
      node_.published.find(volume_)->second.service = this;  // with the check: one join a pod
    }
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
    // From here this thread mostly waits, for the pod's life: what its free lists hold goes back to malloc.
    memory::release_thread_cache();
    std::vector<int> watched = {conn_, pidfd_, stop_event_, node_.handover};
    while (true) {
      const int ready = wait_readable(watched, -1);
      if (ready == 3) {
        if (hand_over()) return;
        watched.pop_back();  // refused: this agent serves the pod on
        continue;
      }
      // end() kills the proxy as it signals: its exit (1) may be seen first, and is then end()'s doing.
      if ((ready == 1 || ready == 2) && ended_) {
        log::info("pod's volume unpublished: its proxy ends").kv("pod", pod_);
        ::kill(pid_, SIGKILL);  // end() may have come before the proxy started
        reap();
        node::send_message(conn_, "stopped the pod's volume was unpublished\n");
        return;
      }
      if (ready == 2) {
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

namespace {

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

}  // namespace

void stop_pod(PodService& pod) { pod.stop(); }
void end_pod(PodService& pod) { pod.end(); }

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

}  // namespace sluice::app::node
