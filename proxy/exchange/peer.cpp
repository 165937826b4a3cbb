// The client's names; see peer.h.
#include "proxy/exchange/peer.h"

namespace sluice::proxy {

PeerName peer_name(const tcp::socket& socket) {
  error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  if (ec) return {};
  auto addr = ep.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) addr = asio::ip::make_address_v4(asio::ip::v4_mapped, addr.to_v6());
  PeerName name{.address = addr.to_string(), .peer = {}};
  const auto port = std::to_string(ep.port());
  name.peer = addr.is_v6() ? "[" + name.address + "]:" + port : name.address + ":" + port;
  return name;
}

}  // namespace sluice::proxy
