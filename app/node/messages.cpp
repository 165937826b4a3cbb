// The agent's typed messages; see messages.h.
#include "app/node/messages.h"

#include <charconv>
#include <optional>
#include <string_view>

namespace sluice::app::node {
namespace {

// The head line's words after `verb`: exactly `count` of them, one space apart, the line ending in '\n';
// `rest` gets what follows the line.
std::optional<std::vector<std::string_view>> head_words(std::string_view text, std::string_view verb, std::size_t count,
                                                        std::string_view& rest) {
  const auto end = text.find('\n');
  if (end == std::string_view::npos) return std::nullopt;
  std::string_view line = text.substr(0, end);
  rest = text.substr(end + 1);
  if (line.substr(0, verb.size()) != verb) return std::nullopt;
  line.remove_prefix(verb.size());
  std::vector<std::string_view> words;
  while (!line.empty()) {
    if (line[0] != ' ') return std::nullopt;
    line.remove_prefix(1);
    const auto word = line.substr(0, line.find(' '));
    if (word.empty()) return std::nullopt;
    words.push_back(word);
    line.remove_prefix(word.size());
  }
  if (words.size() != count) return std::nullopt;
  return words;
}

// A whole word as a decimal number of T (no sign for an unsigned T, nothing after the digits).
template <typename T>
bool number(std::string_view word, T& out) {
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), out);
  return ec == std::errc() && end == word.data() + word.size();
}

}  // namespace

Outgoing encode_pod_handover(const ucred& peer, const std::string& volume, const std::vector<std::string>& env,
                             const runtime::Fd& connection, const PodDescriptors& pod,
                             const std::vector<runtime::Fd>& listeners) {
  Outgoing m;
  m.text = "pod " + std::to_string(peer.uid) + " " + std::to_string(peer.gid) + " " + std::to_string(peer.pid) +
           " " + volume + "\n";
  append_env_lines(m.text, env);
  m.fds.push_back(connection.get());
  for (const int fd : borrow(pod)) m.fds.push_back(fd);
  for (const auto& fd : listeners) m.fds.push_back(fd.get());
  return m;
}

Decoded<PodHandover> decode_pod_handover(Message m) {
  constexpr std::string_view kExpected = "not a pod: expected \"pod UID GID PID VOLUME\", its settings and descriptors";
  std::string_view rest;
  const auto words = head_words(m.text, "pod", 4, rest);
  PodHandover p;
  if (!words || !number((*words)[0], p.peer.uid) || !number((*words)[1], p.peer.gid) ||
      !number((*words)[2], p.peer.pid))
    return std::string(kExpected);
  if (p.peer.pid <= 0) return std::string(kExpected) + " (PID " + std::string((*words)[2]) + " is no process)";
  if ((*words)[3].size() > kMaxVolumeBytes)
    return std::string(kExpected) + " (VOLUME longer than " + std::to_string(kMaxVolumeBytes) + " bytes)";
  auto env = parse_env_lines(rest);
  if (!env) return std::string(kExpected) + " (a setting is not KEY=VALUE)";
  if (m.fds.size() < 1 + kJoinDescriptors)
    return std::string(kExpected) + " (" + std::to_string(m.fds.size()) + " descriptors, at least " +
           std::to_string(1 + kJoinDescriptors) + " expected)";
  p.volume = std::string((*words)[3]);
  p.env = std::move(*env);
  p.connection = std::move(m.fds[0]);
  p.pod = {std::move(m.fds[1]), std::move(m.fds[2]), std::move(m.fds[3]), std::move(m.fds[4])};
  for (std::size_t i = 1 + kJoinDescriptors; i < m.fds.size(); ++i) p.listeners.push_back(std::move(m.fds[i]));
  return p;
}

runtime::SpawnRequest SpawnOrder::request() const {
  runtime::SpawnRequest req;
  req.env = env;
  req.uid = uid;
  req.gid = gid;
  req.parent_death_signal = parent_death_signal;
  req.drop_capabilities = drop_capabilities;
  req.netns_fd = netns.get();
  req.stdout_fd = out.get();
  req.stderr_fd = err.get();
  req.join_procs_fds = borrow(join_procs);
  req.inherit_fds = borrow(inherit);
  return req;
}

Outgoing encode_spawn_order(const runtime::SpawnRequest& req) {
  Outgoing m;
  m.text = "spawn " + std::to_string(req.uid) + " " + std::to_string(req.gid) + " " +
           std::to_string(req.parent_death_signal) + " " + (req.drop_capabilities ? "1 " : "0 ") +
           std::to_string(req.join_procs_fds.size()) + "\n";
  append_env_lines(m.text, req.env);
  m.fds = {req.netns_fd, req.stdout_fd, req.stderr_fd};
  m.fds.insert(m.fds.end(), req.join_procs_fds.begin(), req.join_procs_fds.end());
  m.fds.insert(m.fds.end(), req.inherit_fds.begin(), req.inherit_fds.end());
  return m;
}

Decoded<SpawnOrder> decode_spawn_order(Message m) {
  constexpr std::size_t kFixed = 3;  // network namespace, stdout, stderr
  constexpr std::string_view kExpected = "not a spawn request";
  std::string_view rest;
  const auto words = head_words(m.text, "spawn", 5, rest);
  SpawnOrder o;
  std::size_t cgroups = 0;
  if (!words || !number((*words)[0], o.uid) || !number((*words)[1], o.gid) ||
      !number((*words)[2], o.parent_death_signal) || !number((*words)[4], cgroups))
    return std::string(kExpected) + ": expected \"spawn UID GID PDEATHSIG DROPCAPS NCGROUPS\"";
  if ((*words)[3] != "0" && (*words)[3] != "1") return std::string(kExpected) + ": DROPCAPS is 0 or 1";
  o.drop_capabilities = (*words)[3] == "1";
  auto env = parse_env_lines(rest);
  if (!env) return std::string(kExpected) + ": a setting is not KEY=VALUE";
  if (m.fds.size() < kFixed || m.fds.size() - kFixed < cgroups)
    return std::string(kExpected) + ": " + std::to_string(m.fds.size()) + " descriptors for the namespace, stdout, stderr and " +
           std::to_string(cgroups) + " cgroups";
  o.env = std::move(*env);
  o.netns = std::move(m.fds[0]);
  o.out = std::move(m.fds[1]);
  o.err = std::move(m.fds[2]);
  for (std::size_t i = kFixed; i < m.fds.size(); ++i)
    (i < kFixed + cgroups ? o.join_procs : o.inherit).push_back(std::move(m.fds[i]));
  return o;
}

Outgoing encode_spawn_reply(pid_t pid, const runtime::Fd& pidfd, const std::string& error) {
  Outgoing m{error.empty() ? "spawned " + std::to_string(pid) + "\n" : "failed " + error + "\n", {}};
  if (pidfd) m.fds.push_back(pidfd.get());
  return m;
}

SpawnReply decode_spawn_reply(Message m) {
  SpawnReply r;
  if (m.fds.size() == 1) r.pidfd = std::move(m.fds[0]);  // any other count: none is a pidfd, all close
  std::string_view rest;
  const auto words = head_words(m.text, "spawned", 1, rest);
  if (words && rest.empty() && number((*words)[0], r.pid) && r.pid > 0 && r.pidfd) return r;
  r.pid = -1;
  constexpr std::string_view kFailed = "failed ";
  if (m.text.starts_with(kFailed) && m.text.ends_with('\n') && m.text.size() > kFailed.size() + 1)
    r.error = m.text.substr(kFailed.size(), m.text.size() - kFailed.size() - 1);
  else
    r.error = "unexpected answer from the zygote";
  return r;
}

}  // namespace sluice::app::node
