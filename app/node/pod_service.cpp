// A pod the agent serves; see pod_service.h.
#include "app/node/pod_service.h"

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
#include "app/node/node_socket.h"
#include "app/node/replies.h"
#include "app/sidecar/node_channel.h"
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

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The cgroup.procs file of every cgroup the process `pid` is in (as this agent's mounts show them), opened
// for writing: a child writing "0" to each joins them all. Empty with `error` when one cannot be opened.
std::vector<runtime::Fd> cgroup_join_files(pid_t pid, std::string& error) {
  std::vector<runtime::Fd> fds;
  const std::string proc = slurp("/proc/" + std::to_string(pid) + "/cgroup");
  const auto dirs = runtime::cgroup::dirs_of(slurp("/proc/self/mountinfo"), proc);
  if (dirs.empty()) {
    error = "the stub's cgroups (/proc/" + std::to_string(pid) + "/cgroup) are not mounted in the agent";
    return fds;
  }
  for (const auto& dir : dirs) {
    const auto file = dir / "cgroup.procs";
    runtime::Fd fd(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) {
      error = "the stub's cgroup " + file.string() + ": " + std::strerror(errno);
      fds.clear();
      return fds;
    }
    fds.push_back(std::move(fd));
  }
  return fds;
}

}  // namespace

PodService::PodService(Node& node, runtime::Fd connection, std::string volume)
    : node_(node), conn_(std::move(connection)), volume_(std::move(volume)), stop_event_(::eventfd(0, EFD_CLOEXEC)) {}

PodService::PodService(Node& node, PodHandover pod)
    : node_(node), conn_(std::move(pod.connection)), volume_(std::move(pod.volume)), env_(std::move(pod.env)),
      peer_(pod.peer), pod_fds_(std::move(pod.pod)), listeners_(std::move(pod.listeners)),
      stop_event_(::eventfd(0, EFD_CLOEXEC)) {
  pod_ = env_value(env_, "SERVING_NAMESPACE") + "/" + env_value(env_, "SERVING_POD");
}

PodService::~PodService() {
  {
    std::lock_guard lock(node_.mu);
    if (auto it = node_.published.find(volume_); it != node_.published.end() && it->second.service == this)
      it->second.service = nullptr;
  }
  node_.cv.notify_all();  // a join of the same pod may wait for this one to end
}

void PodService::run(Message join) {
  if (const auto refusal = accept_join(std::move(join)); !refusal.empty()) {
    log::warn("pod refused").kv("pod", pod_).kv("volume", volume_).kv("reason", refusal);
    send_message(conn_.get(), encode_reply(ReplyWord::refused, refusal));
    return;
  }
  if (const auto error = start_proxy(); !error.empty()) {
    log::error("pod refused").kv("pod", pod_).kv("error", error);
    send_message(conn_.get(), encode_reply(ReplyWord::refused, error));
    return;
  }
  log::info("pod joined").kv("pod", pod_).kv("proxy_pid", static_cast<std::int64_t>(pid_.load()))
      .kv("uid", static_cast<std::int64_t>(peer_.uid));
  send_message(conn_.get(), encode_reply(ReplyWord::joined));  // a proxy that ended meanwhile is reported next, "stopped"
  serve();
}

void PodService::take_over(std::promise<std::string> taken) {
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
    taken.set_value(encode_reply(ReplyWord::refused, reason));
    return;
  }
  log::info("pod taken over").kv("pod", pod_).kv("proxy_pid", static_cast<std::int64_t>(pid_.load()))
      .kv("uid", static_cast<std::int64_t>(peer_.uid));
  taken.set_value(encode_reply(ReplyWord::taken));
  serve();
}

void PodService::stop() {
  stopping_ = true;
  ::eventfd_write(stop_event_.get(), 1);
  if (const pid_t pid = pid_; pid > 0) ::kill(pid, SIGTERM);
}

void PodService::end() {
  ended_ = true;
  ::eventfd_write(stop_event_.get(), 1);
  if (const pid_t pid = pid_; pid > 0) ::kill(pid, SIGKILL);
}

// "" once the join is one this pod's socket may accept, with env_, peer_, pod_fds_ and cgroup_fds_ set.
std::string PodService::accept_join(Message message) {
  auto decoded = decode_join(std::move(message));
  if (auto* refusal = std::get_if<std::string>(&decoded)) return *refusal;
  auto& join = std::get<Join>(decoded);
  auto* env = &join.env;
  pod_fds_ = std::move(join.pod);
  pod_ = env_value(*env, "SERVING_NAMESPACE") + "/" + env_value(*env, "SERVING_POD");
  socklen_t peer_size = sizeof peer_;
  if (::getsockopt(conn_.get(), SOL_SOCKET, SO_PEERCRED, &peer_, &peer_size) != 0)
    return std::string("the stub's credentials: ") + std::strerror(errno);
  // The pod's proxy runs as the stub does (the queue-proxy container's user), and never as root.
  if (peer_.uid == 0)
    return "the stub runs as root (uid 0): a pod's proxy runs as its stub's user, which must not be root "
           "(run the queue-proxy container as a non-root user, as Knative does)";
  PodIdentity pod;
  {
    std::lock_guard lock(node_.mu);
    const auto it = node_.published.find(volume_);
    if (it == node_.published.end()) return "the pod's volume is no longer published";
    pod = it->second.publication.pod;
  }
  if (auto other = join_names_other_pod(pod, *env); !other.empty()) return other;
  if (peer_.pid == 0) return "the stub's process is not visible to the agent (run the agent with hostPID)";
  if (node_.settings.verify_cgroup &&
      !cgroup_is_pods(slurp("/proc/" + std::to_string(peer_.pid) + "/cgroup"), pod.uid))
    return "the stub (pid " + std::to_string(peer_.pid) + ") is not in pod " + pod.uid + "'s cgroup";
  auto shaped = proxy_environment(std::move(*env), node_.settings.workers);
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
void PodService::link() {
  std::lock_guard lock(node_.mu);
  if (auto it = node_.published.find(volume_); it != node_.published.end()) it->second.service = this;
}

// Starts the pod's proxy: inside the pod's namespace and cgroups, with its settings, as its stub's user and
// with no capability, on the listening sockets in listeners_ (a predecessor's), and waits until it
// listens: listeners_ are then its sockets. An error text when it could not start; a proxy that exited
// before listening is left for serve() to report.
std::string PodService::start_proxy() {
  int channel[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel) != 0)
    return std::string("socketpair: ") + std::strerror(errno);
  const runtime::Fd from_proxy(channel[0]);
  runtime::Fd to_agent(channel[1]);  // the proxy's end: it gets its copy as 4
  runtime::SpawnRequest req;
  req.uid = static_cast<int>(peer_.uid);
  req.gid = static_cast<int>(peer_.gid);
  req.drop_capabilities = true;
  req.join_procs_fds = borrow(cgroup_fds_);
  req.argv = {"/proc/self/exe", "sidecar"};
  req.env = env_;
  req.netns_fd = pod_fds_.netns.get();
  // An agent that dies (killed, out of memory) takes its pods' proxies along rather than leave them
  // serving with nobody to drain them: the stubs join the next agent, which starts them afresh. This
  // thread lives until the proxy is reaped.
  req.parent_death_signal = SIGKILL;
  req.stdout_fd = pod_fds_.out.get();  // the pod's log, as the stub's own
  req.stderr_fd = pod_fds_.err.get();
  // Descriptor 3: the pod's file system (the stub's root), for the files Knative mounts into the pod,
  // its root by /proc/self/fd/3. 4: where the proxy hands back its listening sockets. 5 on: those it
  // takes over.
  req.inherit_fds = {pod_fds_.root.get(), to_agent.get()};
  for (const auto& fd : listeners_) req.inherit_fds.push_back(fd.get());
  req.env.push_back("SLUICE_POD_ROOT=" + std::string(kPodRootInProxy));
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
  to_agent = runtime::Fd();  // the proxy has its copy: this end closes with it
  if (proxy.pid < 0) return proxy.error;
  pid_ = proxy.pid;
  pidfd_ = runtime::Fd(proxy.pidfd);
  bool agent_stopping;
  {
    std::lock_guard lock(node_.mu);
    agent_stopping = node_.stopping;
  }
  if (agent_stopping) stop();  // it began meanwhile
  // The proxy's sockets replace those it took over (the same sockets; a proxy that ended first: none).
  listeners_.clear();
  if (wait_readable({from_proxy.get(), pidfd_.get()}, -1) == 0)
    if (auto m = receive_message(from_proxy.get()))
      if (auto sockets = decode_listening(std::move(*m)); std::holds_alternative<std::vector<runtime::Fd>>(sockets))
        listeners_ = std::move(std::get<std::vector<runtime::Fd>>(sockets));
  return {};
}

void PodService::reap() {
  siginfo_t info{};
  ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info, WEXITED);
  last_exit_ = exit_text(info);
}

void PodService::serve() {
  // From here this thread mostly waits, for the pod's life: what its free lists hold goes back to malloc.
  memory::release_thread_cache();
  std::vector<int> watched = {conn_.get(), pidfd_.get(), stop_event_.get(), node_.handover.get()};
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
      send_message(conn_.get(), encode_reply(ReplyWord::stopped, "the pod's volume was unpublished"));
      return;
    }
    if (ready == 2) {
      // The agent is stopping and the proxy draining: its ports must close when its listeners do.
      listeners_.clear();
      watched.resize(2);
      continue;
    }
    if (ready == 1) {
      reap();
      if (stopping_) return;  // the connection closes: the stub joins the next agent
      log::warn("pod's proxy stopped").kv("pod", pod_).kv("status", last_exit_);
      send_message(conn_.get(), encode_reply(ReplyWord::stopped, last_exit_));
      return;
    }
    break;
  }
  if (const auto m = reply_of(receive_message(conn_.get())); m && m->is(ReplyWord::drain)) {
    // The pod goes away: its proxy drains as queue-proxy does, for as long as that takes (the pod's
    // grace period bounds it), and its ports close when its listeners do, as queue-proxy's (nobody
    // takes them over now).
    listeners_.clear();
    ::kill(pid_, SIGTERM);
    log::info("pod draining").kv("pod", pod_);
    if (wait_readable({pidfd_.get(), conn_.get()}, -1) == 1) {
      // The stub went away mid-drain: the kubelet's SIGKILL at the end of the grace period, or a second
      // signal. Either ends queue-proxy at once.
      log::info("pod left while draining").kv("pod", pod_);
      ::kill(pid_, SIGKILL);
    }
    reap();
    log::info("pod drained").kv("pod", pod_).kv("status", last_exit_);
    send_message(conn_.get(), encode_reply(ReplyWord::drained));
    return;
  }
  // The stub is gone: the pod was killed, or its stub got a second signal (which ends queue-proxy at once)
  // or crashed and will join again. Its proxy ends at once too.
  log::info("pod left").kv("pod", pod_);
  ::kill(pid_, SIGKILL);
  reap();
}

// Hands the pod to the successor; true once it took it, and this pod's proxy has finished what it had
// in flight.
bool PodService::hand_over() {
  if (listeners_.empty()) return false;  // its proxy never said where it listens
  std::optional<Reply> reply;
  {
    std::lock_guard lock(node_.successor_mu);
    const auto pod = encode_pod_handover(peer_, volume_, env_, conn_, pod_fds_, listeners_);
    if (send_message(node_.successor.get(), pod)) reply = reply_of(receive_message(node_.successor.get()));
  }
  if (reply && reply->is(ReplyWord::taken)) {
    // The new proxy accepts on the same sockets: this one stops accepting and finishes what it has.
    log::info("pod handed over").kv("pod", pod_);
    ::kill(pid_, SIGQUIT);
    reap();
    log::info("pod's old proxy finished").kv("pod", pod_).kv("status", last_exit_);
    return true;
  }
  log::error("pod not handed over: this agent serves it on").kv("pod", pod_)
      .kv("reason", reply ? reply->detail : std::string("the new agent went away"));
  return false;
}

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
void serve_join(Node& node, const std::string& volume, runtime::Fd conn) {
  std::optional<Message> first;
  if (wait_readable({conn.get()}, node.settings.join_timeout_ms) == 0) first = receive_message(conn.get());
  {
    std::lock_guard lock(node.mu);
    if (auto it = node.published.find(volume); it != node.published.end()) --it->second.unjoined;
  }
  if (!first) {
    log::warn("a connection to a pod's socket sent no join").kv("volume", volume)
        .kv("timeout_ms", static_cast<std::int64_t>(node.settings.join_timeout_ms));
    return;
  }
  PodService pod(node, std::move(conn), volume);
  serve_listed(node, pod, [&] { pod.run(std::move(*first)); });
}

// A new agent's side of the handover: takes each pod the running agent hands over, on a thread of its own.
void take_pods(Node& node, runtime::Fd predecessor) {
  while (auto m = receive_message(predecessor.get())) {
    auto decoded = decode_pod_handover(std::move(*m));
    if (auto* refusal = std::get_if<std::string>(&decoded)) {
      send_message(predecessor.get(), encode_reply(ReplyWord::refused, *refusal));
      continue;
    }
    std::promise<std::string> taken;
    auto answer = taken.get_future();
    node.start_thread([&node, taken = std::move(taken), handed = std::move(std::get<PodHandover>(decoded))]() mutable {
      PodService pod(node, std::move(handed));
      serve_listed(node, pod, [&] { pod.take_over(std::move(taken)); });
    });
    send_message(predecessor.get(), answer.get());
  }
  log::info("every pod the previous agent served is here or ended");
}

}  // namespace sluice::app::node
