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
//               at a time; PID is the stub's, whose cgroups the new proxy joins): PodHandover, app/node/messages.h
//   new -> old  "taken\n" once the new proxy listens | "refused REASON\n" (the old agent keeps the pod)
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "app/modes.h"
#include "app/node/agent.h"
#include "app/node/control.h"
#include "app/node/node_socket.h"
#include "app/node/replies.h"
#include "app/options.h"
#include "app/seqpacket.h"
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
using node::AgentSettings;
using node::Node;
using node::wait_readable;

std::string exit_status_text(const siginfo_t& info) {
  return info.si_code == CLD_EXITED ? "exited with code " + std::to_string(info.si_status)
                                    : "killed by signal " + std::to_string(info.si_status);
}

// A stub's /proc/PID/cgroup reads relative to the reader's cgroup namespace: the agent reads them from the
// host's (its pod's hostPID shows the host's init as pid 1), where they name the same directories as the
// host's cgroup mount it is given. Called before any thread starts: every thread inherits it.
void enter_host_cgroup_namespace() {
  struct stat own {}, host {};
  if (::stat("/proc/self/ns/cgroup", &own) != 0 || ::stat("/proc/1/ns/cgroup", &host) != 0 || own.st_ino == host.st_ino)
    return;
  const runtime::Fd ns(::open("/proc/1/ns/cgroup", O_RDONLY | O_CLOEXEC));
  if (!ns || ::setns(ns.get(), CLONE_NEWCGROUP) != 0)
    log::warn("the host's cgroup namespace could not be entered: a stub's cgroup may not be found")
        .kv("error", std::strerror(errno));
  else
    log::info("entered the host's cgroup namespace");
}

// The CSI plugin (sluice-csi, csi/main.cpp), this agent's child: the kubelet's way to publish each pod's
// volume, passed on to the control socket. Ended with the agent (parent-death signal, SIGTERM).
struct CsiPlugin {
  pid_t pid = -1;
  runtime::Fd pidfd;
};
CsiPlugin start_csi_plugin(const AgentSettings& s) {
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
  return {plugin.pid, runtime::Fd(plugin.pidfd)};
}

// `sluice node ready|publish|unpublish ...`: a command to the running agent, as root (the kubelet's
// readiness probe; tests and hand use standing in for sluice-csi).
int node_command(const AgentSettings& s, Args args) {
  if (args[0] == "ready" && !s.ready_file.empty()) return fs::exists(s.ready_file) ? 0 : 1;
  std::string command;
  for (auto a : args) command += (command.empty() ? "" : " ") + std::string(a);
  std::string error;
  runtime::Fd conn;
  auto reply = node::control_command(s.control_socket, command + "\n", error, conn);
  if (!reply) {
    std::fprintf(stderr, "sluice node %s: %s: %s\n", std::string(args[0]).c_str(), s.control_socket.c_str(), error.c_str());
    return 1;
  }
  std::fputs(reply->text.c_str(), stdout);
  const auto answer = node::reply_of(reply);
  return answer && (answer->is(node::ReplyWord::refused) || answer->is(node::ReplyWord::starting)) ? 1 : 0;
}

}  // namespace

int run_node(Args args) {
  const bool command = !args.empty() && (args[0] == "ready" || args[0] == "publish" || args[0] == "unpublish");
  Options o(node::agent_options(), process_env(), command ? Args{} : args);
  if (o.help_requested()) {
    std::fputs((o.help_text("node") + "\n  sluice node ready | publish VOLUME NAMESPACE NAME UID TARGET | unpublish VOLUME TARGET\n"
                "    a command to the running agent over its control socket (root only)\n").c_str(), stdout);
    return 0;
  }
  Node node;
  node.settings = node::agent_settings(o);
  if (command) return node_command(node.settings, args);
  const AgentSettings& s = node.settings;
  if (const char* shared = std::getenv("SLUICE_NODE_SOCKET"); shared && *shared)
    log::warn("SLUICE_NODE_SOCKET is not the agent's any more: each pod joins through its own socket, which the "
              "kubelet's publish of the pod's volume makes (deploy/node); no socket is made there")
        .kv("SLUICE_NODE_SOCKET", shared);
  enter_host_cgroup_namespace();
  const runtime::Fd signals(node::signal_descriptor());
  const std::string control_dir = fs::path(s.control_socket).parent_path().string();
  if (const auto error = node::secure_control_directory(control_dir); !error.empty())
    throw ConfigError("SLUICE_NODE_CONTROL_SOCKET=\"" + s.control_socket + "\": " + error);
  std::error_code ec;
  fs::create_directories(s.state_dir, ec);
  if (!s.ready_file.empty()) fs::remove(s.ready_file, ec);

  runtime::Fd predecessor;
  bool older = false;
  node.control = take_over_from_running_agent(s, predecessor, older);
  if (older) {
    // A DaemonSet's old pod whose agent handed over and exited, restarted by its kubelet: the newer agent
    // serves every pod; this one stays unready until its pod is deleted.
    log::info("a newer agent serves this node: idle until SIGTERM").kv("generation", s.generation);
    wait_readable({signals.get()}, -1);
    return 0;
  }
  if (!node.control) {
    node.control = runtime::Fd(node::unix_listen_in_place(s.control_socket, 0600));
    if (!node.control)
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
  CsiPlugin csi;
  auto last_csi_start = std::chrono::steady_clock::now();
  if (!s.csi_socket.empty()) csi = start_csi_plugin(s);
  log::info("node agent listening").kv("control_socket", s.control_socket).kv("took_over", static_cast<bool>(predecessor))
      .kv("pods_published", static_cast<std::int64_t>(node.published.size()));

  // Pods the running agent hands over, if one ran; ready once they are here.
  std::thread taking;
  if (predecessor) {
    taking = std::thread([&node, predecessor = std::move(predecessor)]() mutable {
      take_pods(node, std::move(predecessor));
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
    std::vector<int> watched = {node.control.get(), signals.get(), node.handover.get(), node.changed.get(), csi.pidfd.get()};
    std::vector<std::string> volumes;
    {
      std::lock_guard lock(node.mu);
      for (const auto& [volume, p] : node.published) {
        watched.push_back(p.listener.get());
        volumes.push_back(volume);
      }
    }
    ready = wait_readable(watched, -1);
    if (ready == kSignals || ready == kHandover) break;
    if (ready == kChanged) {
      eventfd_t ignored;
      ::eventfd_read(node.changed.get(), &ignored);
      continue;
    }
    if (ready == kCsi) {
      // It died: started again (at most once a second), so that pods can still be published.
      siginfo_t info{};
      ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(csi.pidfd.get()), &info, WEXITED);
      log::error("the CSI plugin stopped: starting it again").kv("status", exit_status_text(info));
      std::this_thread::sleep_until(last_csi_start + 1s);
      last_csi_start = std::chrono::steady_clock::now();
      csi = start_csi_plugin(s);  // the old pidfd closes here
      continue;
    }
    if (ready == kControl) {
      runtime::Fd conn(::accept4(node.control.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn) continue;
      long uid = -1;
      if (node::peer_is_root(conn.get(), uid)) {
        node.start_thread([&node, conn = std::move(conn)]() mutable { serve_control(node, std::move(conn)); });
        continue;
      }
      log::warn("control connection refused: only root may command the agent").kv("peer_uid", static_cast<std::int64_t>(uid));
      // Its command is read first (within the timeout): a socket closed with a message unread resets the
      // peer's side, which would lose the refusal.
      node.start_thread([&node, conn = std::move(conn)] {
        if (wait_readable({conn.get()}, node.settings.join_timeout_ms) == 0)
          if (auto m = receive_message(conn.get())) m->close_fds();
        send_message(conn.get(), node::encode_reply(node::ReplyWord::refused, "only root may command the agent"));
      });
      continue;
    }
    if (ready < kPods) continue;
    const std::string& volume = volumes[static_cast<std::size_t>(ready - kPods)];
    const int listener = watched[static_cast<std::size_t>(ready)];
    // Every connection waiting, each within the pod's cap on those that have not joined yet.
    for (runtime::Fd conn; (conn = runtime::Fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)));) {
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
        continue;  // closed as the next is accepted
      }
      told_full = false;
      node.start_thread([&node, volume, conn = std::move(conn)]() mutable { serve_join(node, volume, std::move(conn)); });
    }
  }
  const bool handed_over = ready == kHandover;
  {
    std::lock_guard lock(node.mu);
    node.published.clear();  // their sockets close: the successor made them anew
  }
  {
    // A successor holds its own copy. Under the lock a handover reads it with: one that comes while this
    // agent stops is refused.
    std::lock_guard lock(node.successor_mu);
    node.control = runtime::Fd();
  }
  if (handed_over) {
    // Each pod goes over from its own thread; one draining ends here first.
    log::info("handing over: this agent accepts no more pods");
  } else {
    log::info("node agent stopping: draining every pod");
    ::unlink(s.control_socket.c_str());
    std::lock_guard lock(node.mu);
    node.stopping = true;
    for (auto* pod : node.pods) node::stop_pod(*pod);
  }
  if (!s.ready_file.empty()) fs::remove(s.ready_file, ec);
  if (csi.pid > 0) {
    ::kill(csi.pid, SIGTERM);
    siginfo_t info{};
    ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(csi.pidfd.get()), &info, WEXITED);
    csi = CsiPlugin();
  }
  if (taking.joinable()) taking.join();
  {
    std::unique_lock lock(node.mu);
    node.cv.wait(lock, [&] { return node.threads == 0; });
  }
  if (handed_over) {
    node.successor = runtime::Fd();  // every pod went over it: the successor's take_pods() ends
    log::info("handed over: the new agent serves every pod");
  }
  log::info("stopped");
  return 0;
}

}  // namespace sluice::app
