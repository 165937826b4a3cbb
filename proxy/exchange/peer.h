// The client as sluice names it, once per connection, for every codec: its address for forwarding fields
// and request logs, and address:port for sluice's own log lines.
#pragma once

#include <string>

#include "proxy/io/asio.h"

namespace sluice::proxy {

struct PeerName {
  std::string address;  // the IP; an IPv4-mapped IPv6 address is the IPv4 address it maps
  std::string peer;     // address:port, an IPv6 address in brackets ("[::1]:40000")
};

// Both empty when the socket has no peer any more (the client reset it before it was named).
PeerName peer_name(const tcp::socket& socket);

}  // namespace sluice::proxy
