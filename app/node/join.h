// How a pod joins `sluice node`, the per-node agent: its stub (`sluice node-stub`, the container that takes
// queue-proxy's place) connects to the pod's own socket, which the agent made in the pod's sluice volume
// (app/node/publications.h), and hands over the pod's queue-proxy settings and its network namespace; the agent serves the pod from outside it (common/netns.h) until the stub asks
// for a drain or goes away.
//
// SOCK_SEQPACKET (app/seqpacket.h), one message each way at a time, text:
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
// to the next agent (app/node/mode.cpp, the message in app/node/messages.h): the stub never notices.
//
// The join is typed here (Join, encode_join, decode_join): the one place its shape is written; the
// one-line messages after it in app/node/replies.h.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "app/seqpacket.h"
#include "runtime/fd.h"

namespace sluice::app::node {

inline constexpr std::string_view kDefaultSocket = "/run/sluice/node.sock";
inline constexpr std::size_t kJoinDescriptors = 4;

// What a join attaches, in this order: the pod's network namespace, the stub's stdout and stderr (the
// pod's log) and its root directory (O_PATH).
template <typename Descriptor>
struct PodDescriptorsOf {
  Descriptor netns, out, err, root;
};
using PodDescriptors = PodDescriptorsOf<runtime::Fd>;        // as received: owned
using PodDescriptorsToSend = PodDescriptorsOf<int>;          // as sent: the sender's, borrowed
using app::borrow;  // and, for the pod's four:
std::array<int, kJoinDescriptors> borrow(const PodDescriptors& d);

// "join\n" then the pod's environment as KEY=VALUE lines, the pod's descriptors attached.
struct Join {
  std::vector<std::string> env;
  PodDescriptors pod;
};
Outgoing encode_join(const std::vector<std::string>& env, const PodDescriptorsToSend& pod);
Decoded<Join> decode_join(Message m);

// The join's text: "join\n" + lines (a value over several lines is left out), and back (nullopt for
// anything else).
std::string join_text(const std::vector<std::string>& env);
std::optional<std::vector<std::string>> parse_join(std::string_view text);

// KEY=VALUE lines, as a join, a pod's handover and a zygote's spawn order carry an environment: appended to
// `out` (a value over lines cannot be a Knative setting: left out), and read back (nullopt when a line
// has no '=').
void append_env_lines(std::string& out, const std::vector<std::string>& env);
std::optional<std::vector<std::string>> parse_env_lines(std::string_view text);

}  // namespace sluice::app::node
