// Opening the sockets sluice listens on, and the one start-up error every listener shares: a port that
// another process holds already is refused, as nginx refuses it, instead of being shared with it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/net.h"
#include "common/netns.h"

namespace sluice::net {

// "address already in use: 127.0.0.1:8012" (and the listener's name); main prints it and exits 1.
class AddressInUse : public std::runtime_error {
 public:
  AddressInUse(const tcp::endpoint& ep, const std::string& listener);
};

// "127.0.0.1:8012", "[::1]:8012".
std::string endpoint_text(const tcp::endpoint& ep);

// Binds and listens. With `share_with_own_workers` the socket gets SO_REUSEPORT so that the other
// workers of this process can bind the same port (each its own accept queue); the kernel would let an
// unrelated process of the same user join that group too, so call `claim_port` first.
// The socket is made in `netns` (a pod's, in per-node mode; netns.h).
// Throws AddressInUse, or std::system_error naming `listener` and the address.
std::uint16_t open_listener(tcp::acceptor& acceptor, const tcp::endpoint& ep, const std::string& listener,
                            bool share_with_own_workers, const Netns& netns = {});

// The address that listens on every interface of this host: "::" (dual-stack, IPv4 clients arrive as
// v4-mapped addresses, as Go's ":port" listens) where the kernel has IPv6, else "0.0.0.0".
// Probed in `netns`.
std::string any_address(const Netns& netns = {});

// Fails with AddressInUse when anything listens on `ep` already, SO_REUSEPORT or not: a bind without
// SO_REUSEPORT conflicts with every listening socket on the port. Port 0 needs no check (the kernel
// picks a free port). The probe is closed before the workers bind: two sluices started within that
// instant could still both get the port (a start-up check, not a lock).
void claim_port(const tcp::endpoint& ep, const std::string& listener, const Netns& netns = {});

}  // namespace sluice::net
