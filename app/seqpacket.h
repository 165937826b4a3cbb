// Messages with descriptors attached (SCM_RIGHTS) over a unix SOCK_SEQPACKET socket, one message a datagram:
// the transport of per-node mode's protocols (app/node/join.h, app/node/messages.h, app/node/control.h) and
// of a pod's proxy handing its listening sockets to the agent that started it (app/sidecar/node_channel.h).
// At app/'s root because both the sidecar and the node use it, and neither reaches into the other's folder
// for it. Each protocol's messages are typed beside the protocol; this file only moves text and descriptors.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/fd.h"

namespace sluice::app {

inline constexpr std::size_t kMaxMessageBytes = 256 * 1024;  // a pod's environment fits many times over
inline constexpr std::size_t kMaxDescriptors = 253;  // SCM_MAX_FD: a message carries at most these

// A message as received: its descriptors are the receiver's, closed with the message unless taken.
struct Message {
  std::string text;
  std::vector<runtime::Fd> fds;
  void close_fds() { fds.clear(); }
};

// A message to send: its text and the descriptors to attach, borrowed from the sender (the receiver gets
// copies; the sender's stay its own).
struct Outgoing {
  std::string text;
  std::vector<int> fds;
};

// A decoded message, or why the bytes are not one (a sentence, for the peer's refusal or the log).
template <typename T>
using Decoded = std::variant<T, std::string>;

// One message, with `fds` attached (at most kMaxDescriptors). False when the peer is gone.
bool send_message(int socket, std::string_view text, std::span<const int> fds = {});
inline bool send_message(int socket, const Outgoing& m) { return send_message(socket, m.text, m.fds); }
// The next message, blocking; nullopt when the peer closed (or the message was cut).
std::optional<Message> receive_message(int socket);

// The raw numbers of `fds`, still owned by them: for attaching to an Outgoing.
std::vector<int> borrow(std::span<const runtime::Fd> fds);

}  // namespace sluice::app
