// Opening the sockets sluice listens on, and the one start-up error every listener shares: a port that
// another process holds already is refused, as nginx refuses it, instead of being shared with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

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

// Binds and listens, or takes the inherited listener (below) bound to `ep`. With `share_with_own_workers` the socket gets SO_REUSEPORT so that the other
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

// Fails with AddressInUse when anything but an inherited listener (below) listens on `ep` already, SO_REUSEPORT or not: a bind without
// SO_REUSEPORT conflicts with every listening socket on the port. Port 0 needs no check (the kernel
// picks a free port). The probe is closed before the workers bind: two sluices started within that
// instant could still both get the port (a start-up check, not a lock).
void claim_port(const tcp::endpoint& ep, const std::string& listener, const Netns& netns = {});

// The first step of closing a listening socket for good: from here on the kernel drops each new connection
// attempt (a SYN without an ACK) instead of completing its handshake, while handshakes already under way
// complete and wait to be accepted. Closing a socket resets the connections in its accept queue, after
// their client may have sent a request; a client turned away here retries its SYN in a second and finds
// the port closed (refused), its request never sent. Children accepted from then on carry the same filter,
// which never sees a SYN on an established connection. Never before a handover: the successor accepts on
// the same socket (open_listener clears it from an inherited one all the same). False when the kernel
// refused the filter (the close then resets as it always did).
bool refuse_new_handshakes(tcp::acceptor& acceptor);

// Listening sockets handed over by a predecessor, as nginx's binary upgrade hands them over: per-node
// mode's agent restart (app/node/mode.cpp) starts each pod's new proxy with its old one's sockets, so that
// no connection is refused or reset while one takes over from the other. open_listener takes the one bound
// to its address instead of binding anew; the descriptors are owned here from this call on. Call before the
// first listener opens.
void inherit_listeners(const std::vector<int>& fds);
// Those nobody took (the successor runs fewer workers than its predecessor did): closed; how many.
std::size_t close_unclaimed_listeners();
// Every listening socket this process opened or took, in that order: what it hands on to a successor. The
// descriptors stay the acceptors'; one closed since is left out.
std::vector<int> listening_descriptors();

}  // namespace sluice::net
