// The agent's control socket and the pods' sockets: publish, unpublish, the records, readiness, and the
// commands root sends (app/node/control.h).
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "app/node/agent.h"
#include "app/node/control.h"
#include "app/node/node_socket.h"
#include "app/node/replies.h"
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
  runtime::Fd fd(node::make_pod_socket(p, error));
  if (!fd) {
    node::remove_record(node.settings.state_dir, p.volume);
    return error;
  }
  node.published[p.volume] = Published{p, std::move(fd), 0, nullptr};
  ::eventfd_write(node.changed.get(), 1);
  log::info("pod published").kv("pod", p.pod.namespace_name + "/" + p.pod.name).kv("uid", p.pod.uid)
      .kv("volume", p.volume).kv("socket", p.socket_path());
  return {};
}

void unpublish(Node& node, const std::string& volume, const std::string& target) {
  std::lock_guard lock(node.mu);
  std::string dir = target;
  if (auto it = node.published.find(volume); it != node.published.end()) {
    dir = it->second.publication.target;
    if (it->second.service) end_pod(*it->second.service);
    log::info("pod unpublished").kv("pod", it->second.publication.pod.namespace_name + "/" + it->second.publication.pod.name)
        .kv("volume", volume);
    node.published.erase(it);  // its socket closes with it
    ::eventfd_write(node.changed.get(), 1);
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
    runtime::Fd fd(node::make_pod_socket(p, error));
    if (!fd) {
      log::error("a recorded pod's socket could not be made").kv("volume", p.volume).kv("error", error);
      continue;
    }
    std::lock_guard lock(node.mu);
    node.published[p.volume] = Published{p, std::move(fd), 0, nullptr};
  }
  ::eventfd_write(node.changed.get(), 1);
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
void serve_control(Node& node, runtime::Fd conn) {
  std::optional<Message> m;
  if (wait_readable({conn.get()}, node.settings.join_timeout_ms) == 0) m = receive_message(conn.get());
  if (!m) return;
  m->close_fds();
  auto decoded = decode_control_command(m->text);
  if (auto* refusal = std::get_if<std::string>(&decoded)) {
    send_message(conn.get(), encode_reply(ReplyWord::refused, *refusal));
    return;
  }
  auto& command = std::get<ControlCommand>(decoded);
  if (auto* handover = std::get_if<HandoverCommand>(&command)) {
    const long theirs = generation_number(handover->generation), ours = generation_number(node.settings.generation);
    std::lock_guard lock(node.successor_mu);
    std::string refusal;
    if (node.successor) refusal = "another agent is taking over already";
    else if (!node.control) refusal = "this agent is stopping";
    else if (theirs >= 0 && ours >= 0 && theirs < ours)
      refusal = "generation " + std::to_string(theirs) + " is older than this agent's " + std::to_string(ours);
    if (!refusal.empty()) {
      log::warn("handover refused").kv("reason", refusal);
      send_message(conn.get(), encode_reply(ReplyWord::refused, refusal));
      return;
    }
    const int fds[] = {node.control.get()};
    if (!send_message(conn.get(), encode_reply(ReplyWord::listener), fds)) return;
    log::info("a new agent is taking over: handing it every pod");
    node.successor = std::move(conn);  // the pods go over it (PodService::hand_over); closed once all went
    ::eventfd_write(node.handover.get(), 1);
    return;
  }
  std::string reply;
  if (auto* publish_it = std::get_if<PublishCommand>(&command)) {
    const auto& p = publish_it->publication;
    const auto error = publish(node, p);
    reply = error.empty() ? encode_reply(ReplyWord::published, p.socket_path()) : encode_reply(ReplyWord::refused, error);
    if (!error.empty()) log::warn("publish refused").kv("volume", p.volume).kv("reason", error);
  } else if (auto* unpublish_it = std::get_if<UnpublishCommand>(&command)) {
    unpublish(node, unpublish_it->volume, unpublish_it->target);
    reply = encode_reply(ReplyWord::unpublished);
  } else {
    std::lock_guard lock(node.mu);
    reply = encode_reply(node.ready ? ReplyWord::ready : ReplyWord::starting);
  }
  send_message(conn.get(), reply);
}

// The control socket a running agent hands over, or none when no agent runs at `path`. Throws when one
// runs and refuses, but for an older generation's agent (a DaemonSet's restarted old pod), which idles
// instead: `older` is set.
runtime::Fd take_over_from_running_agent(const AgentSettings& s, runtime::Fd& predecessor, bool& older) {
  std::string error;
  runtime::Fd conn;
  const std::string generation = s.generation.empty() ? "-" : s.generation;
  auto reply = node::control_command(s.control_socket, encode_control_command(HandoverCommand{generation}), error, conn);
  if (!conn) return runtime::Fd();  // nobody listens
  const auto answer = reply_of(reply);
  if (!answer || !answer->is(ReplyWord::listener) || reply->fds.size() != 1) {
    const std::string why = !reply ? error : answer ? answer->detail : "not a reply: " + reply->text;
    if (why.find("is older than this agent's") != std::string::npos) {
      older = true;
      return runtime::Fd();
    }
    throw ConfigError("SLUICE_NODE_CONTROL_SOCKET=\"" + s.control_socket + "\": an agent runs there and did not hand over (" + why + ")");
  }
  predecessor = std::move(conn);
  return std::move(reply->fds[0]);
}

}  // namespace sluice::app::node
