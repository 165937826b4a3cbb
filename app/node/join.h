// How a pod joins `sluice node`, the per-node agent: its stub (`sluice node-stub`, the container that takes
// queue-proxy's place) connects to the pod's own socket, which the agent made in the pod's sluice volume
// (app/node/publications.h), and hands over the pod's queue-proxy settings and its network namespace; the agent serves the pod from outside it (common/netns.h) until the stub asks
// for a drain or goes away.
//
// SOCK_SEQPACKET, one message each way at a time, text:
//   stub -> agent  "join\n" then the pod's environment as KEY=VALUE lines, with descriptors attached
//                  (SCM_RIGHTS): the pod's network namespace, then the stub's stdout and stderr, where the
//                  pod's proxy writes its logs (so the pod's log is where it was with queue-proxy), then
//                  the stub's root directory (O_PATH), where Knative mounts the pod's files (TLS pair)
//   agent -> stub  "joined\n" | "refused REASON\n"
//   stub -> agent  "drain\n"   (the stub got SIGTERM: the pod is going away)
//   agent -> stub  "drained\n" once the pod's in-flight requests are done | "stopped REASON\n" when its
//                  proxy ended by itself
// A closed connection ends the pod's service: the stub was killed, or the agent went away (the stub
// joins again when the agent is back). An agent restarted on purpose hands the connection, with the pod,
// to the next agent (app/node/mode.cpp): the stub never notices.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::app::node {

inline constexpr std::string_view kDefaultSocket = "/run/sluice/node.sock";
inline constexpr std::size_t kMaxMessageBytes = 256 * 1024;  // a pod's environment fits many times over
inline constexpr std::size_t kMaxDescriptors = 253;  // SCM_MAX_FD: a message carries at most these
inline constexpr std::size_t kJoinDescriptors = 4;

struct Message {
  std::string text;
  std::vector<int> fds;  // attached descriptors, owned by the receiver
  void close_fds();
};

// One message, with `fds` attached (at most kMaxDescriptors). False when the peer is gone.
bool send_message(int socket, std::string_view text, std::span<const int> fds = {});
// The next message, blocking; nullopt when the peer closed (or the message was cut).
std::optional<Message> receive_message(int socket);

// "join\n" + lines, and back.
std::string join_text(const std::vector<std::string>& env);
std::optional<std::vector<std::string>> parse_join(std::string_view text);

}  // namespace sluice::app::node
