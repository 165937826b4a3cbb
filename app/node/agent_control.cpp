// The agent's control socket and the pods' sockets: publish, unpublish, the records, readiness, and the
// commands root sends (app/node/control.h).
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "app/node/agent.h"
#include "app/node/control.h"
#include "app/node/node_socket.h"
#include "app/seqpacket.h"
#include "common/config_error.h"
#include "common/log.h"

namespace sluice::app::node {

namespace fs = std::filesystem;

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
    if (it->second.service) end_pod(*it->second.service);
    log::info("pod unpublished").kv("pod", it->second.publication.pod.namespace_name + "/" + it->second.publication.pod.name)
        .kv("volume", volume);
    node.published.erase(it);
    ::eventfd_write(node.changed, 1);
  }
  node::remove_record(node.settings.state_dir, volume);
  if (!dir.empty() && dir.front() == '/') {
    const std::string socket = dir + "/" + std::string(node::kPodSocketName);
    struct stat st {};
    if (::lstat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(socket.c_str());  // ours, or nothing
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
  std::optional<Message> m;
  if (wait_readable({conn}, node.settings.join_timeout_ms) == 0) m = receive_message(conn);
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
      send_message(conn, "refused " + refusal + "\n");
      ::close(conn);
      return;
    }
    const int fds[] = {node.control};
    if (!send_message(conn, "listener\n", fds)) {
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
  send_message(conn, reply);
  ::close(conn);
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
    if (why.find("is older than this agent's") != std::string::npos) {
      older = true;
      return -1;
    }
    throw ConfigError("SLUICE_NODE_CONTROL_SOCKET=\"" + s.control_socket + "\": an agent runs there and did not hand over (" + why + ")");
  }
  predecessor = conn;
  return reply->fds[0].release();
}

}  // namespace sluice::app::node
