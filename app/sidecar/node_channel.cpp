// The sidecar's message to the per-node agent; see node_channel.h.
#include "app/sidecar/node_channel.h"

#include <string_view>

namespace sluice::app {
namespace {
constexpr std::string_view kListening = "listening\n";
}  // namespace

Outgoing encode_listening(std::span<const int> sockets) {
  return {std::string(kListening), std::vector<int>(sockets.begin(), sockets.end())};
}

Decoded<std::vector<runtime::Fd>> decode_listening(Message m) {
  if (m.text != kListening) return std::string("not \"listening\": the proxy's channel carries nothing else");
  return std::move(m.fds);
}

}  // namespace sluice::app
