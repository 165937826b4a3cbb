// The agent's control socket: the one way to change a running `sluice node`, for root alone. It lies in a
// directory only root may enter (made 0700, owned by root), no pod mounts it, and the agent accepts a command
// on it only from a peer whose credentials (SO_PEERCRED) are root's; anything else is refused and logged.
//
// SOCK_SEQPACKET, text, one command a connection:
//   "handover GENERATION\n"   a new agent takes over (app/node/mode.cpp): the reply "listener\n" carries this
//                             socket's listening descriptor; "refused REASON\n" otherwise. GENERATION is the
//                             DaemonSet pod's pod-template-generation ("-" for none): an agent never hands
//                             over to an older one.
//   "publish VOLUME NAMESPACE NAME UID TARGET\n"   the kubelet gave pod NAMESPACE/NAME (UID) a volume
//                             (sluice-csi's NodePublishVolume): the agent makes that pod's socket at
//                             TARGET/node.sock; "published SOCKET\n" | "refused REASON\n"
//   "unpublish VOLUME TARGET\n"  the volume goes (NodeUnpublishVolume): the socket goes, and the pod's proxy
//                             if it still runs; "unpublished\n"
//   "ready\n"                 "ready\n" once this agent holds every pod it was handed, else "starting\n"
// The commands are typed below (ControlCommand), the replies in app/node/replies.h: the one place each is
// written; sluice-csi and `sluice node ready|publish|unpublish` speak the same text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "app/node/publications.h"
#include "app/seqpacket.h"
#include "runtime/fd.h"

namespace sluice::app::node {

inline constexpr std::string_view kDefaultControlSocket = "/run/sluice-control/control.sock";

// Makes the control socket's directory root's alone (0700, owner 0:0; made when missing): "" or why not.
std::string secure_control_directory(const std::string& dir);

// Whether the peer of a connected unix socket is root (uid 0); `peer_uid` gets its uid (or -1).
bool peer_is_root(int connection, long& peer_uid);

// One command on the control socket at `path` and its reply (with any descriptors attached, owned), or
// nullopt with `error` when no agent answered; `connection` gets the connection when one was made.
std::optional<Message> control_command(const std::string& path, std::string_view command, std::string& error,
                                     runtime::Fd& connection);

// The commands, typed: the one place their shapes are written (replies: app/node/replies.h).
struct HandoverCommand {
  std::string generation;  // "-" for none
};
struct PublishCommand {
  Publication publication;
};
struct UnpublishCommand {
  std::string volume, target;
};
struct ReadyCommand {};
using ControlCommand = std::variant<HandoverCommand, PublishCommand, UnpublishCommand, ReadyCommand>;
std::string encode_control_command(const ControlCommand& command);
// The command `text` is, or why not: `unknown command "WORD"`, or the shape a known command's words miss.
Decoded<ControlCommand> decode_control_command(std::string_view text);

}  // namespace sluice::app::node
