// The sidecar's one message to a per-node agent that started it (SLUICE_NODE_CHANNEL, app/node/mode.cpp):
// once it listens, "listening\n" with its listening sockets attached, which the agent keeps to hand to this
// proxy's successor when it restarts. The sidecar's side of a contract the agent uses: the node includes
// this, never the other way round (the agent starts the sidecar; the sidecar knows no agent's internals).
#pragma once

#include <span>
#include <vector>

#include "app/seqpacket.h"
#include "runtime/fd.h"

namespace sluice::app {

Outgoing encode_listening(std::span<const int> sockets);
// The sockets, or why the message is not "listening".
Decoded<std::vector<runtime::Fd>> decode_listening(Message m);

}  // namespace sluice::app
