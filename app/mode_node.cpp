// `sluice node`, the per-node agent; what a pod runs in queue-proxy's place is app/node/stub.cpp, and the
// protocol between them app/node/join.h.
//
// This first agent serves each pod by a `sluice sidecar` process it starts inside the pod's network
// namespace with the pod's settings: the pod keeps its ports and its answers, the stub's SIGTERM drains
// it, and a pod whose stub is killed is stopped. Serving every pod from the agent's own workers (sockets
// made in each pod's namespace, common/netns.h and SLUICE_NETNS) is the next step; the protocol and the
// stub stay as they are.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "app/modes.h"
#include "app/node/join.h"
#include "app/node/node_socket.h"
#include "common/config_error.h"
#include "common/log.h"
#include "runtime/spawn.h"

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

// One pod: its stub's connection, and the proxy serving it.
class PodService {
 public:
  explicit PodService(int connection) : conn_(connection) {}
  ~PodService() { ::close(conn_); }

  void run() {
    auto join = node::receive_message(conn_);
    if (!join) return;
    auto env = node::parse_join(join->text);
    if (!env || join->fds.size() != node::kMaxDescriptors) {
      join->close_fds();
      node::send_message(conn_, "refused not a join: expected \"join\" lines, the pod's network namespace, "
                                "stdout, stderr and root directory\n");
      return;
    }
    pod_ = env_value(*env, "SERVING_POD");
    // The pod's proxy runs as the stub does (the queue-proxy container's user): joining gives a pod
    // nothing it did not have but a proxy inside its own namespace.
    ucred peer{};
    socklen_t peer_size = sizeof peer;
    if (::getsockopt(conn_, SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) != 0) {
      join->close_fds();
      node::send_message(conn_, std::string("refused the stub's credentials: ") + std::strerror(errno) + "\n");
      return;
    }
    runtime::SpawnRequest req;
    req.uid = static_cast<int>(peer.uid);
    req.gid = static_cast<int>(peer.gid);
    req.argv = {"/proc/self/exe", "sidecar"};
    req.env = *env;
    req.netns_fd = join->fds[0];
    // An agent that dies (killed, out of memory) takes its pods' proxies along rather than leave them
    // serving with nobody to drain them: the stubs join the next agent, which starts them afresh. This
    // thread lives until the proxy is reaped.
    req.parent_death_signal = SIGKILL;
    req.stdout_fd = join->fds[1];  // the pod's log, as the stub's own
    req.stderr_fd = join->fds[2];
    // The pod's file system (the stub's root), for the files Knative mounts into the pod: descriptor 3 of
    // the proxy, its root by /proc/self/fd/3.
    req.inherit_fds = {join->fds[3]};
    std::erase_if(req.env, [](const std::string& kv) { return kv.starts_with("SLUICE_POD_ROOT="); });
    req.env.push_back("SLUICE_POD_ROOT=/proc/self/fd/3");
    auto proxy = runtime::spawn_process(req);
    join->close_fds();
    if (proxy.pid < 0) {
      log::error("pod refused").kv("pod", pod_).kv("error", proxy.error);
      node::send_message(conn_, "refused " + proxy.error + "\n");
      return;
    }
    pid_ = proxy.pid;
    if (stopping_) ::kill(proxy.pid, SIGTERM);  // the agent began stopping meanwhile
    log::info("pod joined").kv("pod", pod_).kv("proxy_pid", static_cast<std::int64_t>(proxy.pid))
        .kv("uid", static_cast<std::int64_t>(peer.uid));
    node::send_message(conn_, "joined\n");
    serve(proxy.pidfd);
    ::close(proxy.pidfd);
  }

  // The agent is stopping: drain the pod's proxy (its stub sees the connection close and joins again
  // when an agent is back).
  void stop() {
    stopping_ = true;
    if (const pid_t pid = pid_; pid > 0) ::kill(pid, SIGTERM);
  }

 private:
  void serve(int pidfd) {
    siginfo_t info{};
    if (wait_readable({conn_, pidfd}, -1) == 1) {
      ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED);
      if (stopping_) return;  // the connection closes: the stub joins the next agent
      log::warn("pod's proxy stopped").kv("pod", pod_).kv("status", exit_text(info));
      node::send_message(conn_, "stopped " + exit_text(info) + "\n");
      return;
    }
    auto m = node::receive_message(conn_);
    if (m && m->text == "drain\n") {
      ::kill(pid_, SIGTERM);
      // The pod goes away: its proxy drains as queue-proxy does, for as long as that takes (the pod's
      // grace period bounds it).
      log::info("pod draining").kv("pod", pod_);
      if (wait_readable({pidfd, conn_}, -1) == 1) {
        // The stub went away mid-drain: the kubelet's SIGKILL at the end of the grace period, or a second
        // signal. Either ends queue-proxy at once.
        log::info("pod left while draining").kv("pod", pod_);
        ::kill(pid_, SIGKILL);
      }
      ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED);
      log::info("pod drained").kv("pod", pod_).kv("status", exit_text(info));
      node::send_message(conn_, "drained\n");
      return;
    }
    // The stub is gone: the pod was killed, or its stub got a second signal (which ends queue-proxy at once)
    // or crashed and will join again. Its proxy ends at once too.
    if (m) m->close_fds();
    log::info("pod left").kv("pod", pod_);
    ::kill(pid_, SIGKILL);
    ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED);
  }

  int conn_;
  std::string pod_;
  std::atomic<pid_t> pid_{-1};
  std::atomic<bool> stopping_{false};
};

}  // namespace

int run_node(Args args) {
  const auto socket = node::socket_option(args, "node");
  if (!socket) return 0;
  const std::string& path = *socket;
  const auto address = node::unix_address(path);
  const int signals = node::signal_descriptor();
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  ::unlink(path.c_str());  // an earlier agent's; a live one would have to be stopped first
  const int listener = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listener < 0 || ::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener, 128) != 0)
    throw ConfigError("SLUICE_NODE_SOCKET=\"" + path + "\": " + std::strerror(errno));
  // Any user may join: a pod's proxy runs as its stub's user (SO_PEERCRED), in the namespace the stub
  // handed over, which the stub holds already.
  ::chmod(path.c_str(), 0666);
  log::info("node agent listening").kv("socket", path);

  std::mutex mu;
  std::condition_variable cv;
  std::set<PodService*> pods;
  while (wait_readable({listener, signals}, -1) == 0) {
    const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    auto* pod = new PodService(conn);
    {
      std::lock_guard lock(mu);
      pods.insert(pod);
    }
    std::thread([&, pod] {
      pod->run();
      std::lock_guard lock(mu);
      pods.erase(pod);
      delete pod;
      cv.notify_all();
    }).detach();
  }
  log::info("node agent stopping: draining every pod");
  ::close(listener);
  ::unlink(path.c_str());
  std::unique_lock lock(mu);
  for (auto* pod : pods) pod->stop();
  cv.wait(lock, [&] { return pods.empty(); });
  log::info("stopped");
  return 0;
}

}  // namespace sluice::app
