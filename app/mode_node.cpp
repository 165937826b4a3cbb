// `sluice node`, the per-node agent; what a pod runs in queue-proxy's place is app/node/stub.cpp, and the
// protocol between them app/node/join.h.
//
// This first agent serves each pod by a `sluice sidecar` process it starts inside the pod's network
// namespace with the pod's settings: the pod keeps its ports and its answers, the stub's SIGTERM drains
// it, and a pod whose stub is killed is stopped. Serving every pod from the agent's own workers (sockets
// made in each pod's namespace, common/netns.h and SLUICE_NETNS) is the next step; the protocol and the
// stub stay as they are.
//
// Restart without a lost request, as nginx's binary upgrade: a new agent started while one runs connects
// to the running one's socket and asks for a handover. The old agent hands it the node socket, then each
// serving pod in turn: the stub's connection, the pod's descriptors and settings, and the listening
// sockets of the pod's proxy (each proxy hands its own to the agent once it listens, SLUICE_NODE_CHANNEL).
// The new agent starts the pod's new proxy on those very sockets (SLUICE_LISTEN_FDS), and once it
// listens the old proxy gets SIGQUIT: it stops accepting and finishes what is in flight. A connection is
// never refused meanwhile: the sockets stay open throughout, and whichever proxy accepts answers. The
// old agent then waits for SIGTERM (a DaemonSet's surge pod is deleted once its successor runs) and exits.
//
// Between agents, on the node socket, SOCK_SEQPACKET:
//   new -> old  "handover\n"
//   old -> new  "listener\n" with the node socket's listening descriptor | "refused REASON\n"
//   old -> new  "pod UID GID\n" + the pod's environment as KEY=VALUE lines, with the stub's connection,
//               the join's four descriptors and the proxy's listening sockets attached (one pod at a time)
//   new -> old  "taken\n" once the new proxy listens | "refused REASON\n" (the old agent keeps the pod)
// The old agent closes the connection once every pod it serves has gone over or ended.
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
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "app/modes.h"
#include "app/node/join.h"
#include "app/node/node_socket.h"
#include "app/node/zygote.h"
#include "common/config_error.h"
#include "common/log.h"
#include "runtime/spawn.h"

extern char** environ;

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace sluice::app {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using node::wait_readable;

std::string env_value(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& kv : env)
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.substr(key.size() + 1);
  return {};
}

std::string exit_text(const siginfo_t& info) {
  return info.si_code == CLD_EXITED ? "exited with code " + std::to_string(info.si_status)
                                    : "killed by signal " + std::to_string(info.si_status);
}

void close_all(std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

class PodService;

// What every pod's thread shares.
struct Node {
  std::mutex mu;
  std::condition_variable cv;
  std::set<PodService*> pods;  // those serving (or starting to), for stop()
  int threads = 0;             // connection threads still running
  bool stopping = false;       // SIGTERM: every pod drains
  int listener = -1;           // the node socket

  // Readable (for good) once a successor asked for a handover: every serving pod then goes to it.
  const int handover = ::eventfd(0, EFD_CLOEXEC);
  std::mutex successor_mu;  // one pod at a time on the successor's connection
  int successor = -1;

  node::Zygote zygote;  // what pods' proxies are forked from (app/node/zygote.h)
};

// One pod: its stub's connection, and the proxy serving it.
class PodService {
 public:
  // A pod whose stub just connected.
  PodService(Node& node, int connection) : node_(node), conn_(connection) {}
  // A pod a predecessor hands over: fds are the stub's connection, the join's four descriptors, then the
  // listening sockets of the pod's proxy.
  PodService(Node& node, std::vector<std::string> env, ucred peer, std::vector<int> fds)
      : node_(node), conn_(fds[0]), env_(std::move(env)), peer_(peer),
        pod_fds_(fds.begin() + 1, fds.begin() + 1 + node::kJoinDescriptors),
        listeners_(fds.begin() + 1 + node::kJoinDescriptors, fds.end()) {
    pod_ = env_value(env_, "SERVING_POD");
  }
  ~PodService() {
    ::close(conn_);
    close_all(pod_fds_);
    close_all(listeners_);
    if (pidfd_ >= 0) ::close(pidfd_);
    ::close(stop_event_);
  }

  // Reads the stub's join, starts the pod's proxy and serves the pod until it is drained or gone.
  void run(node::Message join) {
    auto env = node::parse_join(join.text);
    if (!env || join.fds.size() != node::kJoinDescriptors) {
      join.close_fds();
      node::send_message(conn_, "refused not a join: expected \"join\" lines, the pod's network namespace, "
                                "stdout, stderr and root directory\n");
      return;
    }
    env_ = std::move(*env);
    pod_fds_ = std::move(join.fds);
    pod_ = env_value(env_, "SERVING_POD");
    // The pod's proxy runs as the stub does (the queue-proxy container's user): joining gives a pod
    // nothing it did not have but a proxy inside its own namespace.
    socklen_t peer_size = sizeof peer_;
    if (::getsockopt(conn_, SOL_SOCKET, SO_PEERCRED, &peer_, &peer_size) != 0) {
      node::send_message(conn_, std::string("refused the stub's credentials: ") + std::strerror(errno) + "\n");
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
    const auto error = start_proxy();
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

 private:
  // Starts the pod's proxy: inside the pod's namespace, with its settings, as its stub's user, on the
  // listening sockets in listeners_ (a predecessor's), and waits until it listens: listeners_ are then its
  // sockets. An error text when it could not start; a proxy that exited before listening is left for
  // serve() to report.
  std::string start_proxy() {
    int channel[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel) != 0)
      return std::string("socketpair: ") + std::strerror(errno);
    runtime::SpawnRequest req;
    req.uid = static_cast<int>(peer_.uid);
    req.gid = static_cast<int>(peer_.gid);
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
    std::erase_if(req.env, [](const std::string& kv) {
      return kv.starts_with("SLUICE_POD_ROOT=") || kv.starts_with("SLUICE_NODE_CHANNEL=") ||
             kv.starts_with("SLUICE_LISTEN_FDS=");
    });
    req.env.push_back("SLUICE_POD_ROOT=/proc/self/fd/3");
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
      std::string text = "pod " + std::to_string(peer_.uid) + " " + std::to_string(peer_.gid) + "\n";
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
  std::vector<std::string> env_;
  ucred peer_{};
  std::vector<int> pod_fds_;    // the join's: network namespace, stdout, stderr, root directory
  std::vector<int> listeners_;  // the proxy's listening sockets, for a successor
  std::string pod_;
  std::atomic<pid_t> pid_{-1};
  int pidfd_ = -1;
  std::string last_exit_;
  std::atomic<bool> stopping_{false};
  const int stop_event_ = ::eventfd(0, EFD_CLOEXEC);  // readable once stop() was called
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

// A connection to the node socket: a stub's join, or a new agent asking for the handover.
void serve_connection(Node& node, int conn) {
  auto first = node::receive_message(conn);
  if (first && first->text == "handover\n") {
    first->close_fds();
    std::lock_guard lock(node.successor_mu);
    if (node.successor >= 0) {
      node::send_message(conn, "refused another agent is taking over already\n");
      ::close(conn);
      return;
    }
    const int fds[] = {node.listener};
    if (!node::send_message(conn, "listener\n", fds)) {
      ::close(conn);
      return;
    }
    log::info("a new agent is taking over: handing it every pod");
    node.successor = conn;
    ::eventfd_write(node.handover, 1);
    return;
  }
  PodService pod(node, conn);
  if (!first) return;
  serve_listed(node, pod, [&] { pod.run(std::move(*first)); });
}

// A new agent's side of the handover: takes each pod the running agent hands over, on a thread of its own.
void take_pods(Node& node, int predecessor) {
  while (auto m = node::receive_message(predecessor)) {
    const auto head_end = m->text.find('\n');
    unsigned uid = 0, gid = 0;
    auto env = node::parse_join("join\n" + (head_end == std::string::npos ? std::string() : m->text.substr(head_end + 1)));
    if (std::sscanf(m->text.c_str(), "pod %u %u\n", &uid, &gid) != 2 || !env ||
        m->fds.size() < 1 + node::kJoinDescriptors) {
      m->close_fds();
      node::send_message(predecessor, "refused not a pod: expected \"pod UID GID\", its settings and descriptors\n");
      continue;
    }
    ucred peer{};
    peer.uid = uid;
    peer.gid = gid;
    std::promise<std::string> taken;
    auto answer = taken.get_future();
    {
      std::lock_guard lock(node.mu);
      ++node.threads;
    }
    std::thread([&node, taken = std::move(taken), env = std::move(*env), peer, fds = std::move(m->fds)]() mutable {
      {
        PodService pod(node, std::move(env), peer, std::move(fds));
        serve_listed(node, pod, [&] { pod.take_over(std::move(taken)); });
      }
      std::lock_guard lock(node.mu);
      --node.threads;
      node.cv.notify_all();
    }).detach();
    node::send_message(predecessor, answer.get());
  }
  ::close(predecessor);
  log::info("every pod the previous agent served is here or ended");
}

// The socket a running agent hands over, or -1 when none runs at `path`.
int take_over_from_running_agent(const sockaddr_un& address, const std::string& path, int& predecessor) {
  const int conn = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (::connect(conn, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    ::close(conn);
    return -1;
  }
  auto reply = node::send_message(conn, "handover\n") ? node::receive_message(conn) : std::nullopt;
  if (!reply || reply->text != "listener\n" || reply->fds.size() != 1) {
    ::close(conn);
    if (reply) reply->close_fds();
    throw ConfigError("SLUICE_NODE_SOCKET=\"" + path + "\": an agent runs there and did not hand over (" +
                      (reply ? node::after(reply->text, "refused") : std::string("it closed the connection")) + ")");
  }
  predecessor = conn;
  return reply->fds[0];
}

}  // namespace

int run_node(Args args) {
  const auto socket = node::socket_option(args, "node");
  if (!socket) return 0;
  const std::string& path = *socket;
  const auto address = node::unix_address(path);
  const int signals = node::signal_descriptor();
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);

  Node node;
  int predecessor = -1;
  node.listener = take_over_from_running_agent(address, path, predecessor);
  if (node.listener < 0) {
    ::unlink(path.c_str());  // an earlier agent's, which no longer answers
    node.listener = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (node.listener < 0 ||
        ::bind(node.listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(node.listener, 128) != 0)
      throw ConfigError("SLUICE_NODE_SOCKET=\"" + path + "\": " + std::strerror(errno));
    // Any user may join: a pod's proxy runs as its stub's user (SO_PEERCRED), in the namespace the stub
    // handed over, which the stub holds already.
    ::chmod(path.c_str(), 0666);
  }
  {
    // This thread lives as long as the agent: the zygote's parent-death signal follows it.
    std::vector<std::string> env;
    for (char** kv = environ; *kv; ++kv) env.emplace_back(*kv);
    if (const auto error = node.zygote.start(env); !error.empty())
      log::warn("no zygote: each pod's proxy is exec'ed afresh").kv("error", error);
  }
  log::info("node agent listening").kv("socket", path).kv("took_over", predecessor >= 0);

  // Pods the running agent hands over, if one ran.
  std::thread taking;
  if (predecessor >= 0) taking = std::thread([&node, predecessor] { take_pods(node, predecessor); });

  int ready;
  while ((ready = wait_readable({node.listener, signals, node.handover}, -1)) == 0) {
    const int conn = ::accept4(node.listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    {
      std::lock_guard lock(node.mu);
      ++node.threads;
    }
    std::thread([&node, conn] {
      serve_connection(node, conn);
      std::lock_guard lock(node.mu);
      --node.threads;
      node.cv.notify_all();
    }).detach();
  }
  ::close(node.listener);
  const bool handed_over = ready == 2;
  if (handed_over) {
    // Each pod goes over from its own thread; one draining ends here first.
    log::info("handing over: this agent accepts no more pods");
  } else {
    log::info("node agent stopping: draining every pod");
    ::unlink(path.c_str());
    std::lock_guard lock(node.mu);
    node.stopping = true;
    for (auto* pod : node.pods) pod->stop();
  }
  if (taking.joinable()) taking.join();
  {
    std::unique_lock lock(node.mu);
    node.cv.wait(lock, [&] { return node.threads == 0; });
  }
  if (handed_over) {
    ::close(node.successor);
    // A DaemonSet's surge pod: its predecessor is deleted once it runs. Until then this one idles.
    log::info("handed over: the new agent serves every pod; waiting for SIGTERM");
    wait_readable({signals}, -1);
  }
  log::info("stopped");
  return 0;
}

}  // namespace sluice::app
