// The join's message; see join.h.
#include "app/node/join.h"

namespace sluice::app::node {

std::array<int, kJoinDescriptors> borrow(const PodDescriptors& d) {
  return {d.netns.get(), d.out.get(), d.err.get(), d.root.get()};
}

void append_env_lines(std::string& out, const std::vector<std::string>& env) {
  for (const auto& kv : env) {
    if (kv.find('\n') != std::string::npos) continue;  // a value over lines cannot be a Knative setting
    out += kv;
    out += '\n';
  }
}

std::optional<std::vector<std::string>> parse_env_lines(std::string_view text) {
  std::vector<std::string> env;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = text.substr(0, end);
    if (line.find('=') == std::string_view::npos) return std::nullopt;
    env.emplace_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return env;
}

std::string join_text(const std::vector<std::string>& env) {
  std::string out = "join\n";
  append_env_lines(out, env);
  return out;
}

std::optional<std::vector<std::string>> parse_join(std::string_view text) {
  constexpr std::string_view kHead = "join\n";
  if (text.substr(0, kHead.size()) != kHead) return std::nullopt;
  return parse_env_lines(text.substr(kHead.size()));
}

Outgoing encode_join(const std::vector<std::string>& env, const PodDescriptorsToSend& pod) {
  return {join_text(env), {pod.netns, pod.out, pod.err, pod.root}};
}

Decoded<Join> decode_join(Message m) {
  auto env = parse_join(m.text);
  if (!env || m.fds.size() != kJoinDescriptors)
    return "not a join: expected \"join\" lines, the pod's network namespace, stdout, stderr and root directory";
  return Join{std::move(*env), {std::move(m.fds[0]), std::move(m.fds[1]), std::move(m.fds[2]), std::move(m.fds[3])}};
}

}  // namespace sluice::app::node
